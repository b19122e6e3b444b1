// AgentConfig::load: defaults, every key, and errors that name the key.
#include "agent/core/config.hpp"

#include <doctest/doctest.h>

#include "test/support.hpp"

namespace erdma::agent {
namespace {
using nlohmann::json;
}

TEST_CASE("an empty or null document gives the defaults") {
  for (const json& doc : {json::object(), json()}) {
    auto cfg = AgentConfig::load(doc);
    REQUIRE(cfg.ok());
    CHECK(cfg->resource_name == "aliyun/erdma");
    CHECK(cfg->device_plugin_dir == "/var/lib/kubelet/device-plugins");
    CHECK(cfg->plugin_socket_path() == "/var/lib/kubelet/device-plugins/erdma.sock");
    CHECK(cfg->kubelet_socket_path() == "/var/lib/kubelet/device-plugins/kubelet.sock");
    CHECK(cfg->slots_per_device == 64);
    CHECK(cfg->source == DeviceSourceKind::Verbs);
    CHECK(cfg->drivers == std::vector<std::string>{"erdma"});
    CHECK(cfg->static_devices.empty());
    CHECK(cfg->rescan_seconds == 5);
    CHECK(cfg->metrics_listen == "127.0.0.1:9467");
    CHECK(cfg->smcr.enabled);
    CHECK(cfg->smcr.pnet_id.str() == "ERDMA");
    CHECK(cfg->smcr.ueid == "ERDMA-CONTROLLER");
    CHECK(cfg->smcr.sysctls.empty());
    CHECK(cfg->smcr.pod_interface == "eth0");
    CHECK(cfg->smcr.preload_source == "/usr/lib/erdma-controller/libsmc-preload.so");
    CHECK(cfg->smcr.preload_host_dir == "/var/lib/erdma-controller/lib");
    CHECK(cfg->smcr.call_timeout_ms == 5000);
    CHECK(cfg->smcr.stats_seconds == 30);
    CHECK(cfg->pod_resources_socket == "/var/lib/kubelet/pod-resources/kubelet.sock");
    CHECK(cfg->cri_socket == "/run/containerd/containerd.sock");
    CHECK(cfg->proc_root == "/proc");
    CHECK_FALSE(cfg->allocate_all_devices);
    CHECK(cfg->nccl_env);
    CHECK_FALSE(cfg->nccl_socket_ifname);
    CHECK(cfg->driver.prefer == DriverMode::Default);
    CHECK(cfg->nfd_feature_file.empty());
  }
}

TEST_CASE("allocation, NCCL, driver and NFD keys are read and round-trip") {
  auto cfg = AgentConfig::load(json::parse(R"({
    "allocateAllDevices": true, "ncclEnv": true, "ncclSocketIfname": true,
    "driver": {"prefer": "auto"},
    "nfdFeatureFile": "/etc/kubernetes/node-feature-discovery/features.d/erdma"
  })"));
  REQUIRE_OK(cfg);
  CHECK(cfg->allocate_all_devices);
  CHECK(cfg->nccl_env);
  CHECK(cfg->nccl_socket_ifname);
  CHECK(cfg->driver.prefer == DriverMode::Auto);
  CHECK(cfg->nfd_feature_file == "/etc/kubernetes/node-feature-discovery/features.d/erdma");
  CHECK_FALSE(cfg->driver.load_modules);  // off unless asked for
  CHECK(cfg->to_json()["driver"] == json{{"prefer", "auto"}, {"loadModules", false}, {"modprobe", "/sbin/modprobe"}});
  auto load = AgentConfig::load(json::parse(R"({"driver": {"loadModules": true, "modprobe": "/usr/sbin/modprobe"}})"));
  REQUIRE_OK(load);
  CHECK(load->driver.load_modules);
  CHECK(load->driver.modprobe == "/usr/sbin/modprobe");
  auto again = AgentConfig::load(cfg->to_json());
  REQUIRE(again.ok());
  CHECK(again->to_json() == cfg->to_json());
  for (const char* mode : {"default", "compat", "ofed", "auto"}) {
    auto m = AgentConfig::load(json{{"driver", {{"prefer", mode}}}});
    REQUIRE(m.ok());
    CHECK(to_string(m->driver.prefer) == mode);
  }
  auto off = AgentConfig::load(json{{"ncclEnv", false}});
  REQUIRE(off.ok());
  CHECK_FALSE(off->nccl_env);
}

TEST_CASE("the SMC-R keys are read and normalised") {
  const auto doc = json::parse(R"({
    "smcr": {
      "enabled": false,
      "pnetId": " erdma1 ",
      "ueid": "CLUSTER-7.PROD",
      "sysctls": {"net.smc.wmem": 262144, "net.smc.autocorking_size": "0"},
      "podInterface": "net1",
      "preloadSource": "/opt/erdma/libsmc-preload.so",
      "preloadHostDir": "/var/lib/erdma/lib/",
      "callTimeoutMs": 800,
      "statsSeconds": 5,
      "smcdLoopback": false
    },
    "podResourcesSocket": "/host/var/lib/kubelet/pod-resources/kubelet.sock",
    "criSocket": "/run/k3s/containerd/containerd.sock",
    "procRoot": "/host/proc/"
  })");
  auto cfg = AgentConfig::load(doc);
  REQUIRE_OK(cfg);
  CHECK_FALSE(cfg->smcr.enabled);
  CHECK(cfg->smcr.pnet_id.str() == "ERDMA1");
  CHECK(cfg->smcr.ueid == "CLUSTER-7.PROD");
  CHECK(cfg->smcr.sysctls ==
        std::map<std::string, std::string>{{"net.smc.autocorking_size", "0"}, {"net.smc.wmem", "262144"}});
  CHECK(cfg->smcr.pod_interface == "net1");
  CHECK(cfg->smcr.preload_source == "/opt/erdma/libsmc-preload.so");
  CHECK(cfg->smcr.preload_host_dir == "/var/lib/erdma/lib");
  CHECK(cfg->smcr.call_timeout_ms == 800);
  CHECK(cfg->smcr.stats_seconds == 5);
  CHECK_FALSE(cfg->smcr.smcd_loopback);
  CHECK(AgentConfig::load(json::object())->smcr.smcd_loopback);  // on unless turned off
  CHECK(cfg->pod_resources_socket == "/host/var/lib/kubelet/pod-resources/kubelet.sock");
  CHECK(cfg->cri_socket == "/run/k3s/containerd/containerd.sock");
  CHECK(cfg->proc_root == "/host/proc");

  auto again = AgentConfig::load(cfg->to_json());
  REQUIRE(again.ok());
  CHECK(again->to_json() == cfg->to_json());

  // "" leaves the UEID table alone; "" as preloadSource skips the install.
  auto off = AgentConfig::load(json::parse(R"({"smcr": {"ueid": "", "preloadSource": ""}})"));
  REQUIRE(off.ok());
  CHECK(off->smcr.ueid.empty());
  CHECK(off->smcr.preload_source.empty());
}

TEST_CASE("every key is read") {
  const auto doc = json::parse(R"({
    "resourceName": "example.com/rdma",
    "devicePluginDir": "/run/dp/",
    "slotsPerDevice": 8,
    "metricsListen": "",
    "devices": {
      "source": "static",
      "drivers": ["rxe", "erdma"],
      "rescanSeconds": 2,
      "static": [
        {"name": "erdma_0", "uverbs": "uverbs0", "netdev": "eth0", "state": "active", "numaNode": 1},
        {"name": "erdma_1", "uverbs": "uverbs1", "state": "DOWN"}
      ]
    }
  })");
  auto cfg = AgentConfig::load(doc);
  REQUIRE_OK(cfg);
  CHECK(cfg->resource_name == "example.com/rdma");
  CHECK(cfg->device_plugin_dir == "/run/dp");
  CHECK(cfg->plugin_socket_path() == "/run/dp/erdma.sock");
  CHECK(cfg->slots_per_device == 8);
  CHECK(cfg->metrics_listen.empty());
  CHECK(cfg->source == DeviceSourceKind::Static);
  CHECK(cfg->drivers == std::vector<std::string>{"rxe", "erdma"});
  CHECK(cfg->rescan_seconds == 2);
  REQUIRE(cfg->static_devices.size() == 2);
  const auto& d0 = cfg->static_devices[0];
  CHECK(d0.name == "erdma_0");
  CHECK(d0.uverbs == "uverbs0");
  CHECK(d0.netdev == "eth0");
  CHECK(d0.numa_node == 1);
  REQUIRE(d0.ports.size() == 1);
  CHECK(d0.ports[0].state == PortState::Active);
  CHECK(is_healthy(d0));
  const auto& d1 = cfg->static_devices[1];
  CHECK(d1.numa_node == -1);
  CHECK(d1.ports[0].state == PortState::Down);
  CHECK_FALSE(is_healthy(d1));

  // to_json round-trips.
  auto again = AgentConfig::load(cfg->to_json());
  REQUIRE(again.ok());
  CHECK(again->to_json() == cfg->to_json());
  CHECK(again->static_devices == cfg->static_devices);
}

TEST_CASE("invalid configs are refused with the key named") {
  struct Case {
    const char* doc;
    const char* prefix;  // the message must start with this
    const char* also;    // and contain this
  };
  const std::vector<Case> cases = {
      {R"([1])", "config:", "map"},
      {R"({"resourcename": "a/b"})", "resourcename: unknown key", "resourceName"},
      {R"({"resourceName": "erdma"})", "resourceName:", "<domain>/<name>"},
      {R"({"resourceName": "kubernetes.io/erdma"})", "resourceName:", "kubernetes.io"},
      {R"({"resourceName": 3})", "resourceName:", "quote it"},
      {R"({"devicePluginDir": "relative"})", "devicePluginDir:", "absolute"},
      {R"({"devicePluginDir": "/a/../b"})", "devicePluginDir:", ".."},
      {R"({"devicePluginDir": "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})",
       "devicePluginDir:", "107"},
      {R"({"slotsPerDevice": 0})", "slotsPerDevice:", "between 1 and 1000"},
      {R"({"smcr": {"resourceName": "erdma-smcr"}})", "smcr.resourceName:", "<domain>/<name>"},
      {R"({"smcr": {"resourceName": "aliyun/erdma"}})", "smcr.resourceName:", "must differ from resourceName"},
      {R"({"smcr": {"slotsPerDevice": 0}})", "smcr.slotsPerDevice:", "between 1 and 1000"},
      {R"({"slotsPerDevice": 1001})", "slotsPerDevice:", "1001"},
      {R"({"slotsPerDevice": -5})", "slotsPerDevice:", "-5"},
      {R"({"slotsPerDevice": 2.5})", "slotsPerDevice:", "integer"},
      {R"({"slotsPerDevice": "64"})", "slotsPerDevice:", "integer"},
      {R"({"slotsPerDevice": 18446744073709551615})", "slotsPerDevice:", "between"},
      {R"({"metricsListen": "localhost:80"})", "metricsListen:", "localhost"},
      {R"({"devices": []})", "devices:", "map"},
      {R"({"devices": {"sources": "verbs"}})", "devices.sources: unknown key", "source, drivers, static"},
      {R"({"devices": {"source": "sysfs"}})", "devices.source:", "\"sysfs\""},
      {R"({"devices": {"drivers": []}})", "devices.drivers:", "at least one"},
      {R"({"devices": {"drivers": "erdma"}})", "devices.drivers:", "list"},
      {R"({"devices": {"drivers": ["erdma", "erdma"]}})", "devices.drivers[1]:", "duplicate"},
      {R"({"devices": {"drivers": ["Mlx 5"]}})", "devices.drivers[0]:", "Mlx 5"},
      {R"({"devices": {"rescanSeconds": 0}})", "devices.rescanSeconds:", "between 1 and 3600"},
      {R"({"devices": {"static": [{"name": "erdma_0", "uverbs": "uverbs0"}]}})", "devices.static:", "source: static"},
      {R"({"devices": {"source": "static", "static": {}}})", "devices.static:", "list"},
      {R"({"devices": {"source": "static", "static": ["erdma_0"]}})", "devices.static[0]:", "map"},
      {R"({"devices": {"source": "static", "static": [{"uverbs": "uverbs0"}]}})", "devices.static[0].name:", "missing"},
      {R"({"devices": {"source": "static", "static": [{"name": "erdma 0", "uverbs": "uverbs0"}]}})",
       "devices.static[0].name:", "erdma 0"},
      {R"({"devices": {"source": "static", "static": [{"name": "erdma_0"}]}})", "devices.static[0].uverbs:", "missing"},
      {R"({"devices": {"source": "static", "static": [{"name": "erdma_0", "uverbs": "/dev/infiniband/uverbs0"}]}})",
       "devices.static[0].uverbs:", "uverbs0"},
      {R"({"devices": {"source": "static", "static": [{"name": "erdma_0", "uverbs": "uverbs0", "state": "UP"}]}})",
       "devices.static[0].state:", "ACTIVE"},
      {R"({"devices": {"source": "static", "static": [{"name": "erdma_0", "uverbs": "uverbs0", "numaNode": -2}]}})",
       "devices.static[0].numaNode:", "-2"},
      {R"({"devices": {"source": "static", "static": [{"name": "erdma_0", "uverbs": "uverbs0", "netdev": "eth/0"}]}})",
       "devices.static[0].netdev:", "eth/0"},
      {R"({"devices": {"source": "static", "static": [{"name": "erdma_0", "uverbs": "uverbs0", "guid": "x"}]}})",
       "devices.static[0].guid: unknown key", "numaNode"},
      {R"({"devices": {"source": "static", "static": [{"name": "a", "uverbs": "uverbs0"}, {"name": "a", "uverbs": "uverbs1"}]}})",
       "devices.static[1].name:", "duplicate"},
      {R"({"devices": {"source": "static", "static": [{"name": "a", "uverbs": "uverbs0"}, {"name": "b", "uverbs": "uverbs0"}]}})",
       "devices.static[1].uverbs:", "already used by a"},
      // With 1000 slots an ID has a "-999" suffix: names may have 59 characters.
      {R"({"smcr": true})", "smcr:", "map"},
      {R"({"smcr": {"pnetid": "X"}})", "smcr.pnetid: unknown key", "pnetId"},
      {R"({"smcr": {"enabled": "false"}})", "smcr.enabled:", "without quotes"},
      {R"({"smcr": {"pnetId": "ERDMA-1"}})", "smcr.pnetId:", "letters"},
      {R"({"smcr": {"pnetId": "ABCDEFGHIJKLMNOPQ"}})", "smcr.pnetId:", "16"},
      {R"({"smcr": {"pnetId": ""}})", "smcr.pnetId:", "empty"},
      {R"({"smcr": {"ueid": "erdma"}})", "smcr.ueid:", "lower-case"},
      {R"({"smcr": {"ueid": "ABCDEFGHIJABCDEFGHIJABCDEFGHIJABC"}})", "smcr.ueid:", "32"},
      {R"({"smcr": {"ueid": "-ERDMA"}})", "smcr.ueid:", "start"},
      {R"({"smcr": {"ueid": "ERDMA_1"}})", "smcr.ueid:", "only A-Z"},
      {R"({"smcr": {"sysctls": ["net.smc.wmem=1"]}})", "smcr.sysctls:", "map"},
      {R"({"smcr": {"sysctls": {"net.ipv4.ip_forward": "1"}}})", "smcr.sysctls.net.ipv4.ip_forward:", "net.smc"},
      {R"({"smcr": {"sysctls": {"net.smc.wmem": 1.5}}})", "smcr.sysctls.net.smc.wmem:", "integer"},
      {R"({"smcr": {"sysctls": {"net.smc.wmem": "1;reboot"}}})", "smcr.sysctls.net.smc.wmem:", "value"},
      {R"({"smcr": {"sysctls": {"net.smc.../x": "1"}}})", "smcr.sysctls.net.smc.../x:", "a-z"},
      {R"({"smcr": {"podInterface": "eth 0"}})", "smcr.podInterface:", "eth 0"},
      {R"({"smcr": {"smcdLoopback": "off"}})", "smcr.smcdLoopback:", "true or false"},
      {R"({"smcr": {"preloadHostDir": "lib"}})", "smcr.preloadHostDir:", "absolute"},
      {R"({"smcr": {"preloadSource": "/a/../etc/shadow"}})", "smcr.preloadSource:", ".."},
      {R"({"smcr": {"callTimeoutMs": 20001}})", "smcr.callTimeoutMs:", "between 50 and 20000"},
      {R"({"smcr": {"statsSeconds": 0}})", "smcr.statsSeconds:", "between 1 and 3600"},
      {R"({"criSocket": "containerd.sock"})", "criSocket:", "absolute"},
      {R"({"podResourcesSocket": "/bbbbbbbbbbaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})",
       "podResourcesSocket:", "unix socket"},
      {R"({"procRoot": 1})", "procRoot:", "string"},
      {R"({"allocateAllDevices": "yes"})", "allocateAllDevices:", "true or false"},
      {R"({"ncclEnv": 1})", "ncclEnv:", "true or false"},
      {R"({"ncclEnv": false, "ncclSocketIfname": true})", "ncclSocketIfname:", "ncclEnv: true"},
      {R"({"driver": "ofed"})", "driver:", "map"},
      {R"({"driver": {"prefer": "OFED2"}})", "driver.prefer:", "default (SMC-R"},
      {R"({"driver": {"mode": "ofed"}})", "driver", "mode"},
      {R"({"driver": {"loadModules": "true"}})", "driver.loadModules:", "true or false"},
      {R"({"driver": {"modprobe": "modprobe"}})", "driver.modprobe:", "absolute path"},
      {R"({"nfdFeatureFile": "features.d/erdma"})", "nfdFeatureFile:", "absolute"},
      {R"({"nfdFeatureFile": "/etc/kubernetes/node-feature-discovery/features.d/.erdma"})", "nfdFeatureFile:", "'.'"},
      {R"({"nfdFeatureFile": "/etc/kubernetes/node-feature-discovery/features.d/"})", "nfdFeatureFile:", "name a file"},
      {R"({"slotsPerDevice": 1000, "devices": {"source": "static", "static": [{"name": "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij", "uverbs": "uverbs0"}]}})",
       "devices.static[0].name:", "at most 59"},
  };
  for (const auto& c : cases) {
    const std::string doc = c.doc;
    CAPTURE(doc);
    auto cfg = AgentConfig::load(json::parse(c.doc));
    REQUIRE_FALSE(cfg.ok());
    CHECK(cfg.error().code == ErrorCode::InvalidArgument);
    CHECK_MESSAGE(cfg.error().message.rfind(c.prefix, 0) == 0, cfg.error().message);
    CHECK_MESSAGE(cfg.error().message.find(c.also) != std::string::npos, cfg.error().message);
  }
}

TEST_CASE("null values mean the default") {
  auto cfg = AgentConfig::load(json::parse(R"({"slotsPerDevice": null, "devices": {"source": null}})"));
  REQUIRE(cfg.ok());
  CHECK(cfg->slots_per_device == 64);
  CHECK(cfg->source == DeviceSourceKind::Verbs);
}

}  // namespace erdma::agent

namespace erdma::agent {

TEST_CASE("the SMC-R resource: name and slots read, \"\" turns it off") {
  auto cfg = AgentConfig::load(json::parse(R"({"smcr": {"resourceName": "example.com/smcr", "slotsPerDevice": 500}})"));
  REQUIRE(cfg.ok());
  CHECK(cfg->smcr.resource_name == "example.com/smcr");
  CHECK(cfg->smcr.slots_per_device == 500);
  CHECK(cfg->to_json()["smcr"]["resourceName"] == "example.com/smcr");
  auto again = AgentConfig::load(cfg->to_json());
  REQUIRE(again.ok());
  CHECK(again->smcr.slots_per_device == 500);
  auto off = AgentConfig::load(json::parse(R"({"smcr": {"resourceName": ""}})"));
  REQUIRE(off.ok());
  CHECK(off->smcr.resource_name.empty());
  auto defaults = AgentConfig::load(json::object());
  REQUIRE(defaults.ok());
  CHECK(defaults->smcr.resource_name == "aliyun/erdma-smcr");
  CHECK(defaults->smcr.slots_per_device == 256);
  CHECK(defaults->smcr.allowed_namespaces.empty());
  auto allowed = AgentConfig::load(json::parse(R"({"smcr": {"allowedNamespaces": ["ml", "web"]}})"));
  REQUIRE(allowed.ok());
  CHECK(allowed->smcr.allows("web"));
  CHECK_FALSE(allowed->smcr.allows("tenant"));
  CHECK(allowed->to_json()["smcr"]["allowedNamespaces"] == json::array({"ml", "web"}));
}

}  // namespace erdma::agent

namespace erdma::agent {
using nlohmann::json;

TEST_CASE("the DRA keys: off by default, read, derived paths, round-trip") {
  auto defaults = AgentConfig::load(json::object());
  REQUIRE(defaults.ok());
  CHECK_FALSE(defaults->dra.enabled);
  CHECK_FALSE(defaults->dra.extended_resource);
  CHECK(defaults->dra.driver_name == "erdma.aliyun.com");
  CHECK(defaults->dra.registration_socket_path() == "/var/lib/kubelet/plugins_registry/erdma.aliyun.com-reg.sock");
  CHECK(defaults->dra.plugin_socket_path() == "/var/lib/kubelet/plugins/erdma.aliyun.com/dra.sock");
  CHECK(defaults->dra.checkpoint_path() == "/var/lib/kubelet/plugins/erdma.aliyun.com/checkpoint.json");
  CHECK(defaults->dra.cdi_dir == "/var/run/cdi");
  CHECK(defaults->dra.health == DraHealthPolicy::Taint);
  CHECK(defaults->dra.node_name.empty());
  CHECK(defaults->dra.slots_per_device == 64);
  CHECK(defaults->dra.hook_dir == "/var/lib/erdma-controller/dra");
  CHECK(defaults->dra.hook_source == "/usr/lib/erdma-controller/erdma-cdi-hook");

  auto cfg = AgentConfig::load(json::parse(R"({"dra": {"enabled": true, "extendedResource": true,
      "driverName": "rdma.example.com", "registryDir": "/r/", "pluginDir": "/p", "cdiDir": "/c",
      "healthPolicy": "omit", "slotsPerDevice": 0, "nodeName": "node-1", "hookDir": "/h/", "hookSource": "/s/hook"}})"));
  REQUIRE(cfg.ok());
  CHECK(cfg->dra.enabled);
  CHECK(cfg->dra.extended_resource);
  CHECK(cfg->dra.registration_socket_path() == "/r/rdma.example.com-reg.sock");
  CHECK(cfg->dra.plugin_socket_path() == "/p/rdma.example.com/dra.sock");
  CHECK(cfg->dra.cdi_dir == "/c");
  CHECK(cfg->dra.health == DraHealthPolicy::Omit);
  CHECK(cfg->dra.node_name == "node-1");
  CHECK(cfg->dra.slots_per_device == 0);
  CHECK(cfg->dra.hook_dir == "/h");
  CHECK(cfg->dra.hook_source == "/s/hook");
  auto again = AgentConfig::load(cfg->to_json());
  REQUIRE(again.ok());
  CHECK(again->to_json() == cfg->to_json());

  // No hook: SMC-R claims carry SMC-R for hostNetwork pods only; no source: nothing installed.
  auto none = AgentConfig::load(json::parse(R"({"dra": {"hookDir": "", "hookSource": ""}})"));
  REQUIRE(none.ok());
  CHECK(none->dra.hook_dir.empty());
  CHECK(none->dra.hook_source.empty());
}

// Names follow the apiserver's rules (common/k8s_names.hpp). Until the checks were shared, the
// agent capped each dot-separated label of a node name and of a resource name's domain at 63
// characters (the apiserver does not), and took resource names the apiserver and kubelet refuse.
TEST_CASE("node and resource names follow the apiserver's rules") {
  const std::string long_label(64, 'n');
  auto node = AgentConfig::load(json{{"dra", {{"nodeName", long_label + ".zone-a"}}}});
  REQUIRE(node.ok());
  CHECK(node->dra.node_name == long_label + ".zone-a");
  auto resource = AgentConfig::load(json{{"resourceName", long_label + ".example.com/erdma"}});
  REQUIRE(resource.ok());
  CHECK(resource->resource_name == long_label + ".example.com/erdma");

  auto requests = AgentConfig::load(json{{"resourceName", "requests.example.com/erdma"}});
  REQUIRE_FALSE(requests.ok());
  CHECK(requests.error().message.rfind("resourceName: \"requests.example.com/erdma\" is not an extended resource "
                                       "name: it starts with \"requests.\", which Kubernetes keeps for quota names; ",
                                       0) == 0);
  auto reserved = AgentConfig::load(json{{"smcr", {{"resourceName", "mykubernetes.io/smcr"}}}});
  REQUIRE_FALSE(reserved.ok());
  CHECK(reserved.error().message.rfind("smcr.resourceName: \"mykubernetes.io/smcr\" is not an extended resource "
                                       "name: its domain is kubernetes.io or ends in it",
                                       0) == 0);
  CHECK(reserved.error().message.ends_with(", or \"\" to not advertise it"));
  auto bad_node = AgentConfig::load(json{{"dra", {{"nodeName", "node-1..zone-a"}}}});
  REQUIRE_FALSE(bad_node.ok());
  CHECK(bad_node.error().message.rfind("dra.nodeName: \"node-1..zone-a\" is not a node name (a DNS-1123 subdomain): "
                                       "it has two dots in a row (character 8); ",
                                       0) == 0);
  CHECK(bad_node.error().message.ends_with("; leave it empty to take NODE_NAME from the environment"));
}

TEST_CASE("invalid DRA keys are refused with the key named") {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({"dra": true})", "dra:"},
      {R"({"dra": {"enable": true}})", "dra.enable: unknown key"},
      {R"({"dra": {"extendedResource": true}})", "dra.extendedResource:"},
      {R"({"dra": {"driverName": "erdma"}})", "dra.driverName:"},
      {R"({"dra": {"driverName": "Erdma.Aliyun.com"}})", "dra.driverName:"},
      {R"({"dra": {"registryDir": "plugins"}})", "dra.registryDir:"},
      {R"({"dra": {"cdiDir": "/a/../b"}})", "dra.cdiDir:"},
      {R"({"dra": {"healthPolicy": "drop"}})", "dra.healthPolicy:"},
      {R"({"dra": {"nodeName": "Node_1"}})", "dra.nodeName:"},
      {R"({"dra": {"slotsPerDevice": -1}})", "dra.slotsPerDevice:"},
      {R"({"dra": {"hookDir": "dra"}})", "dra.hookDir:"},
      {R"({"dra": {"hookDir": 1}})", "dra.hookDir:"},
      {R"({"dra": {"hookSource": "hook"}})", "dra.hookSource:"},
      {R"({"dra": {"hookDir": "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}})",
       "dra.hookDir:"},
      {R"({"dra": {"pluginDir": "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}})",
       "dra.pluginDir:"},
  };
  for (const auto& c : cases) {
    auto cfg = AgentConfig::load(json::parse(c.first));
    INFO(c.first);
    REQUIRE_FALSE(cfg.ok());
    CHECK(cfg.error().message.rfind(c.second, 0) == 0);
  }
}

}  // namespace erdma::agent
