// The Pod Security Standards checker the golden runner relies on: a restricted-compliant pod has no
// violation, and each control, broken alone, is reported alone.
#include "pod_security.hpp"

#include <doctest/doctest.h>

#include <functional>

using erdma::webhook::test::pod_security_violations;
using nlohmann::json;

namespace {

// A pod that satisfies the restricted profile.
json restricted_pod() {
  return json::parse(R"({
    "metadata": {"name": "ok"},
    "spec": {
      "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"},
                          "sysctls": [{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}]},
      "volumes": [{"name": "c", "configMap": {"name": "x"}}, {"name": "e", "emptyDir": {}}],
      "initContainers": [{"name": "i", "securityContext": {"allowPrivilegeEscalation": false,
                          "capabilities": {"drop": ["ALL"]}}}],
      "containers": [{"name": "a", "ports": [{"containerPort": 80}],
                      "securityContext": {"allowPrivilegeEscalation": false,
                                          "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}]
    }})");
}

}  // namespace

TEST_CASE("pod security: a restricted pod violates nothing; each broken control is reported by itself") {
  CHECK(pod_security_violations(restricted_pod()).empty());

  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    std::set<std::string> want;
  };
  auto c0 = [](json& p) -> json& { return p["spec"]["containers"][0]; };
  const std::vector<Case> cases = {
      {"hostNetwork", [](json& p) { p["spec"]["hostNetwork"] = true; }, {"baseline:hostNamespaces"}},
      {"hostPID", [](json& p) { p["spec"]["hostPID"] = true; }, {"baseline:hostNamespaces"}},
      {"hostIPC", [](json& p) { p["spec"]["hostIPC"] = true; }, {"baseline:hostNamespaces"}},
      {"hostPath",
       [](json& p) {
         p["spec"]["volumes"].push_back({{"name", "h"}, {"hostPath", {{"path", "/x"}}}});
       },
       {"baseline:hostPathVolumes", "restricted:volumeTypes"}},
      {"nfs volume",
       [](json& p) {
         p["spec"]["volumes"].push_back({{"name", "n"}, {"nfs", {{"server", "s"}}}});
       },
       {"restricted:volumeTypes"}},
      {"privileged", [&](json& p) { c0(p)["securityContext"]["privileged"] = true; }, {"baseline:privileged"}},
      {"NET_ADMIN",
       [&](json& p) { c0(p)["securityContext"]["capabilities"]["add"].push_back("NET_ADMIN"); },
       {"baseline:capabilities", "restricted:capabilities"}},
      {"CHOWN (baseline only)",
       [&](json& p) { c0(p)["securityContext"]["capabilities"]["add"].push_back("CHOWN"); },
       {"restricted:capabilities"}},
      {"no drop ALL",
       [&](json& p) { c0(p)["securityContext"]["capabilities"].erase("drop"); },
       {"restricted:capabilities"}},
      {"hostPort", [&](json& p) { c0(p)["ports"][0]["hostPort"] = 8080; }, {"baseline:hostPorts"}},
      {"seccomp Unconfined",
       [&](json& p) { c0(p)["securityContext"]["seccompProfile"]["type"] = "Unconfined"; },
       {"baseline:seccomp", "restricted:seccomp"}},
      {"no seccomp anywhere",
       [](json& p) { p["spec"]["securityContext"].erase("seccompProfile"); },
       {"restricted:seccomp"}},
      {"apparmor unconfined",
       [&](json& p) { c0(p)["securityContext"]["appArmorProfile"]["type"] = "Unconfined"; },
       {"baseline:appArmor"}},
      {"apparmor annotation",
       [](json& p) { p["metadata"]["annotations"]["container.apparmor.security.beta.kubernetes.io/a"] = "unconfined"; },
       {"baseline:appArmor"}},
      {"selinux type",
       [&](json& p) { c0(p)["securityContext"]["seLinuxOptions"]["type"] = "spc_t"; },
       {"baseline:seLinux"}},
      {"selinux user",
       [](json& p) { p["spec"]["securityContext"]["seLinuxOptions"]["user"] = "root"; },
       {"baseline:seLinux"}},
      {"procMount", [&](json& p) { c0(p)["securityContext"]["procMount"] = "Unmasked"; }, {"baseline:procMount"}},
      {"unsafe sysctl",
       [](json& p) {
         p["spec"]["securityContext"]["sysctls"].push_back({{"name", "net.smc.tcp2smc"}});
       },
       {"baseline:sysctls"}},
      {"hostProcess",
       [&](json& p) { c0(p)["securityContext"]["windowsOptions"]["hostProcess"] = true; },
       {"baseline:hostProcess"}},
      {"privilege escalation",
       [&](json& p) { c0(p)["securityContext"].erase("allowPrivilegeEscalation"); },
       {"restricted:privilegeEscalation"}},
      {"runAsNonRoot false",
       [&](json& p) { c0(p)["securityContext"]["runAsNonRoot"] = false; },
       {"restricted:runAsNonRoot"}},
      {"runAsNonRoot unset",
       [](json& p) { p["spec"]["securityContext"].erase("runAsNonRoot"); },
       {"restricted:runAsNonRoot"}},
      {"runAsUser 0", [&](json& p) { c0(p)["securityContext"]["runAsUser"] = 0; }, {"restricted:runAsUser"}},
      {"env, mounts and limits are no violation",
       [&](json& p) {
         c0(p)["env"] = json::array({{{"name", "LD_PRELOAD"}, {"value", "/usr/lib/smc/libsmc-preload.so"}}});
         c0(p)["volumeMounts"] = json::array({{{"name", "c"}, {"mountPath", "/c"}, {"readOnly", true}}});
         c0(p)["resources"]["limits"]["aliyun/erdma"] = "1";
       },
       {}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    json pod = restricted_pod();
    c.edit(pod);
    CHECK(pod_security_violations(pod) == c.want);
  }
}
