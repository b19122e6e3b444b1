// Tests for webhook/core/config.hpp: defaults, every key, and errors that name the key.
#include "webhook/core/config.hpp"

#include <doctest/doctest.h>

#include "common/structured.hpp"
#include "test/support.hpp"

using namespace erdma;
using namespace erdma::webhook;
using nlohmann::json;

namespace {

Result<Config> load_yaml(const std::string& text) {
  auto doc = common::parse_document(text, "config.yaml");
  REQUIRE_OK(doc);
  return Config::load(*doc);
}

}  // namespace

TEST_CASE("defaults are those of docs/design.md") {
  const Config c = Config::defaults();
  CHECK(c.resource_name() == "aliyun/erdma");
  CHECK(c.excluded_namespaces() == std::vector<std::string>{"kube-system", "erdma-system"});
  // No NCCL env: erdma-agent's Allocate answer sets it per device, and a pod-spec value would win.
  CHECK(c.erdma_env().empty());
  CHECK(c.device_mounts().empty());
  CHECK(c.smcr().preload_host_dir == "/var/lib/erdma-controller/lib");
  CHECK(c.smcr().mount_path == "/usr/lib/smc");
  CHECK(c.smcr().library == "libsmc-preload.so");
  CHECK(c.smcr().add_resource);
  CHECK(c.smcr().library_from == LibraryFrom::DevicePlugin);
  CHECK(c.rendered().preload_path == "/usr/lib/smc/libsmc-preload.so");
  CHECK(c.rendered().resource_token == "aliyun~1erdma-smcr");  // what SMC-R containers are given
  CHECK(c.smcr().resource_name == "aliyun/erdma-smcr");
  CHECK(c.is_excluded_namespace("kube-system"));
  CHECK_FALSE(c.is_excluded_namespace("default"));

  auto empty = Config::load(json::object());
  REQUIRE(empty.ok());
  CHECK(empty->to_json() == c.to_json());
  auto null_doc = Config::load(json());
  REQUIRE(null_doc.ok());
  CHECK(null_doc->to_json() == c.to_json());
}

TEST_CASE("every key loads from YAML, and to_json round-trips") {
  auto c = load_yaml(R"(
resourceName: example.com/rdma
excludedNamespaces: [ops]
erdmaEnv:
- {name: NCCL_IB_HCA, value: mlx5}
- {name: NCCL_SOCKET_IFNAME, value: eth0}
deviceMounts:
- {name: sys-ib, hostPath: /sys/class/infiniband/, mountPath: /sys/class/infiniband, readOnly: true, type: Directory}
smcr:
  libraryFrom: hostPath
  preloadHostDir: /opt/lib/
  mountPath: /opt/smc
  library: libsmc-preload.so
  env: [{name: SMC_SNDBUF, value: 256k}]
  addResource: false
)");
  REQUIRE_OK(c);
  CHECK(c->resource_name() == "example.com/rdma");
  CHECK(c->excluded_namespaces() == std::vector<std::string>{"ops"});
  CHECK(c->erdma_env().size() == 2);
  REQUIRE(c->device_mounts().size() == 1);
  CHECK(c->device_mounts()[0].host_path == "/sys/class/infiniband");  // trailing slash trimmed
  CHECK(c->device_mounts()[0].type == "Directory");
  CHECK(c->smcr().preload_host_dir == "/opt/lib");
  CHECK(c->smcr().library_from == LibraryFrom::HostPath);
  CHECK(c->rendered().preload_path == "/opt/smc/libsmc-preload.so");
  CHECK_FALSE(c->smcr().add_resource);
  CHECK(c->rendered().resource_one == R"({"example.com/rdma":"1"})");
  CHECK(c->rendered().preload_volume ==
        R"({"name":"erdma-smc-preload","hostPath":{"path":"/opt/lib","type":"DirectoryOrCreate"}})");

  auto again = Config::load(c->to_json());
  REQUIRE(again.ok());
  CHECK(again->to_json() == c->to_json());
}

TEST_CASE("invalid configurations are errors that name the key") {
  struct Case {
    const char* name;
    const char* yaml;
    const char* want;  // the message must start with this
  };
  const std::vector<Case> cases = {
      {"top-level list", "[1, 2]", "config: expected a map at the top level, got list"},
      {"unknown top key", "resourceNmae: x/y", "resourceNmae: unknown key (known keys: resourceName, "},
      {"unknown nested key", "smcr: {libary: x.so}",
       "smcr.libary: unknown key (known keys of smcr: libraryFrom, preloadHostDir, "},
      {"resource wrong type", "resourceName: 5", "resourceName: expected a string, got number"},
      {"resource without domain", "resourceName: erdma",
       "resourceName: \"erdma\" is not an extended resource name: it has no <domain>/ in front; an extended "
       "resource name is <domain>/<name>"},
      {"resource kubernetes.io", "resourceName: kubernetes.io/erdma",
       "resourceName: \"kubernetes.io/erdma\" is not an extended resource name: its domain is kubernetes.io"},
      {"namespaces not a list", "excludedNamespaces: kube-system", "excludedNamespaces: expected a list"},
      {"namespace invalid", "excludedNamespaces: [Kube_System]",
       "excludedNamespaces[0]: \"Kube_System\" is not a namespace name (a DNS-1123 label): it has the upper-case "
       "'K' (character 1); a DNS-1123 label is 1 to 63 lower-case letters"},
      {"env not a list", "erdmaEnv: {NCCL_IB_HCA: erdma}", "erdmaEnv: expected a list of {name, value}, got map"},
      {"env item not a map", "erdmaEnv: [NCCL_IB_HCA=erdma]", "erdmaEnv[0]: expected a map with name and value"},
      {"env value number", "erdmaEnv: [{name: NCCL_IB_GID_INDEX, value: 1}]",
       "erdmaEnv[0].value: expected a string, got number (quote it)"},
      {"env value missing", "erdmaEnv: [{name: A}]", "erdmaEnv[0].value: missing"},
      {"env bad name", "erdmaEnv: [{name: 1ABC, value: x}]", "erdmaEnv[0].name: must be a variable name"},
      {"env extra key", "erdmaEnv: [{name: A, value: x, valueFrom: y}]", "erdmaEnv[0].valueFrom: unknown key"},
      {"env duplicate", "erdmaEnv: [{name: A, value: x}, {name: A, value: y}]",
       "erdmaEnv[1].name: duplicate variable A"},
      {"env LD_PRELOAD", "erdmaEnv: [{name: LD_PRELOAD, value: /x.so}]", "erdmaEnv[0].name: LD_PRELOAD is managed"},
      {"smcr env LD_PRELOAD", "smcr: {env: [{name: LD_PRELOAD, value: /x.so}]}",
       "smcr.env[0].name: LD_PRELOAD is managed"},
      {"mount without name", "deviceMounts: [{hostPath: /a, mountPath: /b}]", "deviceMounts[0].name: missing"},
      {"mount name not a label", "deviceMounts: [{name: dev.infiniband, hostPath: /a, mountPath: /b}]",
       "deviceMounts[0].name: \"dev.infiniband\" is not a volume name (a DNS-1123 label): it has a '.' (character "
       "4), which a label cannot have"},
      {"mount relative path", "deviceMounts: [{name: a, hostPath: dev, mountPath: /b}]",
       "deviceMounts[0].hostPath: must be an absolute path, got \"dev\""},
      {"mount dotdot", "deviceMounts: [{name: a, hostPath: /a, mountPath: /b/../etc}]",
       "deviceMounts[0].mountPath: must not contain \"..\""},
      {"mount bad type", "deviceMounts: [{name: a, hostPath: /a, mountPath: /b, type: Dir}]",
       "deviceMounts[0].type: must be one of"},
      {"mount readOnly string", "deviceMounts: [{name: a, hostPath: /a, mountPath: /b, readOnly: \"yes\"}]",
       "deviceMounts[0].readOnly: expected true or false, got string (write it without quotes)"},
      {"mount duplicate name",
       "deviceMounts: [{name: a, hostPath: /a, mountPath: /b}, {name: a, hostPath: /c, mountPath: /d}]",
       "deviceMounts[1].name: duplicate volume name a"},
      {"mount duplicate path",
       "deviceMounts: [{name: a, hostPath: /a, mountPath: /b}, {name: c, hostPath: /c, mountPath: /b/}]",
       "deviceMounts[1].mountPath: duplicate mountPath /b"},
      {"mount reserved name", "deviceMounts: [{name: erdma-smc-preload, hostPath: /a, mountPath: /b}]",
       "deviceMounts[0].name: erdma-smc-preload is reserved"},
      {"mount at smcr path", "deviceMounts: [{name: a, hostPath: /a, mountPath: /usr/lib/smc}]",
       "deviceMounts: mountPath /usr/lib/smc is also smcr.mountPath"},
      {"smcr not a map", "smcr: true", "smcr: expected a map, got boolean"},
      // The agent installs one fixed file name: any other would leave pods on TCP without a word.
      {"smcr library renamed", "smcr: {library: libsmc-preload-v2.so}",
       "smcr.library: must be \"libsmc-preload.so\", the file name erdma-agent installs"},
      {"smcr library with slash", "smcr: {library: lib/x.so}", "smcr.library: must be \"libsmc-preload.so\""},
      {"smcr library empty", "smcr: {library: \"\"}", "smcr.library: must be \"libsmc-preload.so\""},
      {"smcr libraryFrom unknown", "smcr: {libraryFrom: volume}",
       "smcr.libraryFrom: must be \"devicePlugin\" (erdma-agent mounts the library) or \"hostPath\""},
      {"smcr libraryFrom case", "smcr: {libraryFrom: hostpath}", "smcr.libraryFrom: must be \"devicePlugin\""},
      {"smcr allowedNamespaces not a list", "smcr: {allowedNamespaces: ml}", "smcr.allowedNamespaces:"},
      {"smcr allowedNamespaces bad name", "smcr: {allowedNamespaces: [ML]}",
       "smcr.allowedNamespaces[0]: \"ML\" is not a namespace name (a DNS-1123 label)"},
      {"smcr resourceName without domain", "smcr: {resourceName: erdma-smcr}",
       "smcr.resourceName: \"erdma-smcr\" is not an extended resource name: it has no <domain>/ in front"},
      {"smcr resourceName same", "smcr: {resourceName: aliyun/erdma}",
       "smcr.resourceName: must differ from resourceName"},
      {"smcr mountPath moved without hostPath", "smcr: {mountPath: /opt/smc}",
       "smcr.mountPath: can only be changed with smcr.libraryFrom: hostPath; erdma-agent mounts the library at /usr/lib/smc"},
      {"smcr mountPath relative", "smcr: {mountPath: lib}", "smcr.mountPath: must be an absolute path, got \"lib\""},
      {"smcr mountPath root", "smcr: {mountPath: /}", "smcr.mountPath: must not be \"/\""},
      {"smcr mountPath blank", "smcr: {mountPath: /usr/lib/my smc}", "smcr.mountPath: must not contain ':' or blanks"},
      {"smcr hostDir relative", "smcr: {preloadHostDir: var/lib}", "smcr.preloadHostDir: must be an absolute path"},
      {"smcr addResource string", "smcr: {addResource: \"true\"}",
       "smcr.addResource: expected true or false, got string (write it without quotes)"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto r = load_yaml(c.yaml);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CAPTURE(r.error().message);
    CHECK(r.error().message.rfind(c.want, 0) == 0);
  }
}

// Extended resource names follow the apiserver's IsExtendedResourceName. Until the checks were
// shared, the webhook capped each label of the domain at 63 characters, which the apiserver does
// not, and accepted names the apiserver and kubelet refuse: "requests." in front (quota's form), a
// domain ending in kubernetes.io without a dot before it, a domain over 244 characters.
TEST_CASE("resourceName and smcr.resourceName follow the apiserver's extended resource rule") {
  const std::string long_label(64, 'r');
  for (const std::string& accepted : {long_label + ".example.com/erdma", std::string(244, 'a') + "/erdma"}) {
    CAPTURE(accepted);
    auto top = load_yaml("resourceName: " + accepted);
    REQUIRE(top.ok());
    CHECK(top->resource_name() == accepted);
    auto smcr = load_yaml("smcr: {resourceName: " + accepted + "}");
    REQUIRE(smcr.ok());
    CHECK(smcr->smcr().resource_name == accepted);
  }
  struct Refused {
    std::string name, why;
  };
  for (const auto& r : std::vector<Refused>{
           {"requests.example.com/erdma", "it starts with \"requests.\", which Kubernetes keeps for quota names"},
           {"mykubernetes.io/erdma",
            "its domain is kubernetes.io or ends in it, which Kubernetes keeps for its own resources"},
           {std::string(245, 'a') + "/erdma", "the prefix before '/' is 245 characters long, over the limit of 244"},
       }) {
    CAPTURE(r.name);
    auto top = load_yaml("resourceName: " + r.name);
    REQUIRE_FALSE(top.ok());
    CHECK(top.error().message == "resourceName: \"" + r.name + "\" is not an extended resource name: " + r.why + "; " +
                                     "an extended resource name is <domain>/<name>: a DNS-1123 subdomain of at most "
                                     "244 characters outside kubernetes.io, '/', then 1 to 63 letters, digits, '-', "
                                     "'_' and '.', starting and ending with a letter or digit, such as "
                                     "\"example.com/rdma\"");
    auto smcr = load_yaml("smcr: {resourceName: " + r.name + "}");
    REQUIRE_FALSE(smcr.ok());
    CHECK(smcr.error().message.find("smcr.resourceName: \"" + r.name +
                                    "\" is not an extended resource name: " + r.why) == 0);
    CHECK(smcr.error().message.ends_with(", or \"\" to give SMC-R containers resourceName"));
  }
}

TEST_CASE("null values mean the default") {
  auto c = load_yaml("resourceName: null\nsmcr:\n  library:\n  libraryFrom: ~\nerdmaEnv: ~\n");
  REQUIRE(c.ok());
  CHECK(c->resource_name() == "aliyun/erdma");
  CHECK(c->smcr().library == "libsmc-preload.so");
  CHECK(c->smcr().library_from == LibraryFrom::DevicePlugin);
  CHECK(c->erdma_env().empty());
}
