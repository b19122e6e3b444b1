// The Pod Security Standards' baseline and restricted controls over a Pod's JSON (see
// pod_security.hpp). Written from the published rules; fields are read leniently (a field of the
// wrong type counts as unset), because the golden inputs are valid pods.
#include "pod_security.hpp"

#include <algorithm>
#include <array>
#include <string_view>
#include <vector>

namespace erdma::webhook::test {
namespace {

using nlohmann::json;

const json& at(const json& j, std::string_view key) {
  static const json null;
  if (!j.is_object()) return null;
  auto it = j.find(key);
  return it == j.end() ? null : *it;
}

std::string str(const json& j) { return j.is_string() ? j.get<std::string>() : std::string(); }
bool is_true(const json& j) { return j.is_boolean() && j.get<bool>(); }

bool one_of(std::string_view v, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

// Every container of the pod: init, regular and ephemeral.
std::vector<const json*> all_containers(const json& spec) {
  std::vector<const json*> out;
  for (const char* list : {"initContainers", "containers", "ephemeralContainers"}) {
    const json& l = at(spec, list);
    if (!l.is_array()) continue;
    for (const auto& c : l) out.push_back(&c);
  }
  return out;
}

// The capabilities baseline allows a container to add.
constexpr std::array<std::string_view, 13> kBaselineCapabilities = {
    "AUDIT_WRITE",      "CHOWN",   "DAC_OVERRIDE", "FOWNER",  "FSETID", "KILL",      "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID",       "SETPCAP", "SETUID", "SYS_CHROOT"};

// The sysctls baseline allows (the "safe" set).
constexpr std::array<std::string_view, 10> kSafeSysctls = {
    "kernel.shm_rmid_forced",       "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",      "net.ipv4.ping_group_range",    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",  "net.ipv4.tcp_fin_timeout",     "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes"};

// The volume types restricted allows.
constexpr std::array<std::string_view, 8> kRestrictedVolumes = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"};

bool bad_selinux(const json& opts) {
  if (!opts.is_object()) return false;
  const std::string type = str(at(opts, "type"));
  if (!one_of(type, {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})) return true;
  return !str(at(opts, "user")).empty() || !str(at(opts, "role")).empty();
}

bool bad_apparmor(const json& profile) {
  if (!profile.is_object()) return false;
  return !one_of(str(at(profile, "type")), {"RuntimeDefault", "Localhost"});
}

}  // namespace

std::set<std::string> pod_security_violations(const json& pod) {
  std::set<std::string> v;
  const json& meta = at(pod, "metadata");
  const json& spec = at(pod, "spec");
  const json& psc = at(spec, "securityContext");
  const bool windows = str(at(at(spec, "os"), "name")) == "windows";
  const auto containers = all_containers(spec);

  // --- baseline ---
  if (is_true(at(at(psc, "windowsOptions"), "hostProcess"))) v.insert("baseline:hostProcess");
  for (const char* k : {"hostNetwork", "hostPID", "hostIPC"}) {
    if (is_true(at(spec, k))) v.insert("baseline:hostNamespaces");
  }
  const json& volumes = at(spec, "volumes");
  if (volumes.is_array()) {
    for (const auto& vol : volumes) {
      if (vol.is_object() && vol.contains("hostPath") && !vol["hostPath"].is_null())
        v.insert("baseline:hostPathVolumes");
    }
  }
  if (bad_apparmor(at(psc, "appArmorProfile"))) v.insert("baseline:appArmor");
  const json& annotations = at(meta, "annotations");
  if (annotations.is_object()) {
    for (const auto& [key, value] : annotations.items()) {
      if (!key.starts_with("container.apparmor.security.beta.kubernetes.io/")) continue;
      const std::string val = str(value);
      if (val != "runtime/default" && !val.starts_with("localhost/")) v.insert("baseline:appArmor");
    }
  }
  if (bad_selinux(at(psc, "seLinuxOptions"))) v.insert("baseline:seLinux");
  if (str(at(at(psc, "seccompProfile"), "type")) == "Unconfined") v.insert("baseline:seccomp");
  const json& sysctls = at(psc, "sysctls");
  if (sysctls.is_array()) {
    for (const auto& s : sysctls) {
      const std::string name = str(at(s, "name"));
      if (std::find(kSafeSysctls.begin(), kSafeSysctls.end(), name) == kSafeSysctls.end()) v.insert("baseline:sysctls");
    }
  }
  for (const json* c : containers) {
    const json& sc = at(*c, "securityContext");
    if (is_true(at(at(sc, "windowsOptions"), "hostProcess"))) v.insert("baseline:hostProcess");
    if (is_true(at(sc, "privileged"))) v.insert("baseline:privileged");
    const json& add = at(at(sc, "capabilities"), "add");
    if (add.is_array()) {
      for (const auto& cap : add) {
        const std::string name = str(cap);
        if (std::find(kBaselineCapabilities.begin(), kBaselineCapabilities.end(), name) ==
            kBaselineCapabilities.end()) {
          v.insert("baseline:capabilities");
        }
      }
    }
    const json& ports = at(*c, "ports");
    if (ports.is_array()) {
      for (const auto& p : ports) {
        const json& hp = at(p, "hostPort");
        if (hp.is_number() && hp.get<double>() != 0) v.insert("baseline:hostPorts");
      }
    }
    if (bad_apparmor(at(sc, "appArmorProfile"))) v.insert("baseline:appArmor");
    if (bad_selinux(at(sc, "seLinuxOptions"))) v.insert("baseline:seLinux");
    const std::string proc = str(at(sc, "procMount"));
    if (!proc.empty() && proc != "Default") v.insert("baseline:procMount");
    if (str(at(at(sc, "seccompProfile"), "type")) == "Unconfined") v.insert("baseline:seccomp");
  }

  // --- restricted (on top of baseline) ---
  if (volumes.is_array()) {
    for (const auto& vol : volumes) {
      if (!vol.is_object()) continue;
      for (const auto& [key, value] : vol.items()) {
        if (key == "name" || value.is_null()) continue;
        if (std::find(kRestrictedVolumes.begin(), kRestrictedVolumes.end(), key) == kRestrictedVolumes.end()) {
          v.insert("restricted:volumeTypes");
        }
      }
    }
  }
  const bool pod_non_root = is_true(at(psc, "runAsNonRoot"));
  const json& pod_user = at(psc, "runAsUser");
  if (pod_user.is_number() && pod_user.get<double>() == 0) v.insert("restricted:runAsUser");
  const std::string pod_seccomp = str(at(at(psc, "seccompProfile"), "type"));
  const bool pod_seccomp_ok = one_of(pod_seccomp, {"RuntimeDefault", "Localhost"});
  for (const json* c : containers) {
    const json& sc = at(*c, "securityContext");
    // Windows pods are exempt from the privilege-escalation, seccomp and capabilities controls.
    if (!windows) {
      const json& ape = at(sc, "allowPrivilegeEscalation");
      if (!(ape.is_boolean() && !ape.get<bool>())) v.insert("restricted:privilegeEscalation");
    }
    const json& nr = at(sc, "runAsNonRoot");
    if ((nr.is_boolean() && !nr.get<bool>()) || (!pod_non_root && !is_true(nr))) v.insert("restricted:runAsNonRoot");
    const json& user = at(sc, "runAsUser");
    if (user.is_number() && user.get<double>() == 0) v.insert("restricted:runAsUser");
    if (!windows) {
      const std::string t = str(at(at(sc, "seccompProfile"), "type"));
      if (!(one_of(t, {"RuntimeDefault", "Localhost"}) || (t.empty() && pod_seccomp_ok)))
        v.insert("restricted:seccomp");
      const json& caps = at(sc, "capabilities");
      const json& drop = at(caps, "drop");
      const bool drops_all =
          drop.is_array() && std::any_of(drop.begin(), drop.end(), [](const json& d) { return str(d) == "ALL"; });
      if (!drops_all) v.insert("restricted:capabilities");
      const json& add = at(caps, "add");
      if (add.is_array()) {
        for (const auto& cap : add) {
          if (str(cap) != "NET_BIND_SERVICE") v.insert("restricted:capabilities");
        }
      }
    }
  }
  return v;
}

}  // namespace erdma::webhook::test
