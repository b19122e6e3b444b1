// Tests for webhook/core/config.hpp: defaults, every key, and errors that name the key.
#include "webhook/core/config.hpp"

#include <doctest/doctest.h>

#include "common/structured.hpp"

using namespace erdma;
using namespace erdma::webhook;
using nlohmann::json;

namespace {

Result<Config> load_yaml(const std::string& text) {
  auto doc = common::parse_document(text, "config.yaml");
  REQUIRE_MESSAGE(doc.ok(), (doc.ok() ? std::string() : doc.error().message));
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
  REQUIRE_MESSAGE(c.ok(), (c.ok() ? std::string() : c.error().message));
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
      {"unknown nested key", "smcr: {libary: x.so}", "smcr.libary: unknown key (known keys of smcr: libraryFrom, preloadHostDir, "},
      {"resource wrong type", "resourceName: 5", "resourceName: expected a string, got number"},
      {"resource without domain", "resourceName: erdma", "resourceName: must be an extended resource name"},
      {"resource kubernetes.io", "resourceName: kubernetes.io/erdma", "resourceName: must be an extended resource"},
      {"namespaces not a list", "excludedNamespaces: kube-system", "excludedNamespaces: expected a list"},
      {"namespace invalid", "excludedNamespaces: [Kube_System]", "excludedNamespaces[0]: must be a namespace name"},
      {"env not a list", "erdmaEnv: {NCCL_IB_HCA: erdma}", "erdmaEnv: expected a list of {name, value}, got map"},
      {"env item not a map", "erdmaEnv: [NCCL_IB_HCA=erdma]", "erdmaEnv[0]: expected a map with name and value"},
      {"env value number", "erdmaEnv: [{name: NCCL_IB_GID_INDEX, value: 1}]",
       "erdmaEnv[0].value: expected a string, got number (quote it)"},
      {"env value missing", "erdmaEnv: [{name: A}]", "erdmaEnv[0].value: missing"},
      {"env bad name", "erdmaEnv: [{name: 1ABC, value: x}]", "erdmaEnv[0].name: must be a variable name"},
      {"env extra key", "erdmaEnv: [{name: A, value: x, valueFrom: y}]", "erdmaEnv[0].valueFrom: unknown key"},
      {"env duplicate", "erdmaEnv: [{name: A, value: x}, {name: A, value: y}]", "erdmaEnv[1].name: duplicate variable A"},
      {"env LD_PRELOAD", "erdmaEnv: [{name: LD_PRELOAD, value: /x.so}]", "erdmaEnv[0].name: LD_PRELOAD is managed"},
      {"smcr env LD_PRELOAD", "smcr: {env: [{name: LD_PRELOAD, value: /x.so}]}", "smcr.env[0].name: LD_PRELOAD is managed"},
      {"mount without name", "deviceMounts: [{hostPath: /a, mountPath: /b}]", "deviceMounts[0].name: missing"},
      {"mount relative path", "deviceMounts: [{name: a, hostPath: dev, mountPath: /b}]",
       "deviceMounts[0].hostPath: must be an absolute path, got \"dev\""},
      {"mount dotdot", "deviceMounts: [{name: a, hostPath: /a, mountPath: /b/../etc}]",
       "deviceMounts[0].mountPath: must not contain \"..\""},
      {"mount bad type", "deviceMounts: [{name: a, hostPath: /a, mountPath: /b, type: Dir}]",
       "deviceMounts[0].type: must be one of"},
      {"mount readOnly string", "deviceMounts: [{name: a, hostPath: /a, mountPath: /b, readOnly: \"yes\"}]",
       "deviceMounts[0].readOnly: expected true or false, got string (write it without quotes)"},
      {"mount duplicate name", "deviceMounts: [{name: a, hostPath: /a, mountPath: /b}, {name: a, hostPath: /c, mountPath: /d}]",
       "deviceMounts[1].name: duplicate volume name a"},
      {"mount duplicate path", "deviceMounts: [{name: a, hostPath: /a, mountPath: /b}, {name: c, hostPath: /c, mountPath: /b/}]",
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
      {"smcr allowedNamespaces bad name", "smcr: {allowedNamespaces: [ML]}", "smcr.allowedNamespaces[0]: must be a namespace name"},
      {"smcr resourceName same", "smcr: {resourceName: aliyun/erdma}", "smcr.resourceName: must differ from resourceName"},
      {"smcr mountPath moved without hostPath", "smcr: {mountPath: /opt/smc}",
       "smcr.mountPath: can only be changed with smcr.libraryFrom: hostPath; erdma-agent mounts the library at /usr/lib/smc"},
      {"smcr mountPath relative", "smcr: {mountPath: lib}", "smcr.mountPath: must be an absolute path, got \"lib\""},
      {"smcr mountPath root", "smcr: {mountPath: /}", "smcr.mountPath: must not be \"/\""},
      {"smcr mountPath blank", "smcr: {mountPath: /usr/lib/my smc}", "smcr.mountPath: must not contain ':' or blanks"},
      {"smcr hostDir relative", "smcr: {preloadHostDir: var/lib}", "smcr.preloadHostDir: must be an absolute path"},
      {"smcr addResource string", "smcr: {addResource: \"true\"}", "smcr.addResource: expected true or false, got string (write it without quotes)"},
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

TEST_CASE("null values mean the default") {
  auto c = load_yaml("resourceName: null\nsmcr:\n  library:\n  libraryFrom: ~\nerdmaEnv: ~\n");
  REQUIRE(c.ok());
  CHECK(c->resource_name() == "aliyun/erdma");
  CHECK(c->smcr().library == "libsmc-preload.so");
  CHECK(c->smcr().library_from == LibraryFrom::DevicePlugin);
  CHECK(c->erdma_env().empty());
}
