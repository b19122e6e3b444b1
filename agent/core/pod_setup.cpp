// Pod setup decisions (see pod_setup.hpp): plain functions over the values kubelet and the
// runtime returned.
#include "agent/core/pod_setup.hpp"

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

namespace erdma::agent {
namespace {

using nlohmann::json;

constexpr uint32_t kMaxPid = 4194304;  // PID_MAX_LIMIT on 64-bit

// The value at `key` when `obj` is an object holding it, else nullptr.
const json* member(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

}  // namespace

std::string to_string(const PodRef& pod) { return pod.namespace_ + "/" + pod.name; }

Result<PodRef> find_pod_for_devices(const std::vector<PodDevices>& pods, const std::string& resource,
                                    const std::vector<std::string>& device_ids) {
  if (device_ids.empty()) return make_error(ErrorCode::InvalidArgument, "no device IDs to look for");
  const std::set<std::string> wanted(device_ids.begin(), device_ids.end());
  std::vector<PodRef> found;
  for (const auto& pod : pods) {
    for (const auto& c : pod.containers) {
      auto it = c.devices.find(resource);
      if (it == c.devices.end()) continue;
      const std::set<std::string> held(it->second.begin(), it->second.end());
      if (std::includes(held.begin(), held.end(), wanted.begin(), wanted.end())) {
        found.push_back(PodRef{pod.namespace_, pod.name, c.name});
      }
    }
  }
  std::string ids;
  for (const auto& id : wanted) ids += (ids.empty() ? "" : ",") + id;
  if (found.empty()) {
    return make_error(ErrorCode::NotFound, "no container holds " + resource + " devices " + ids + " (" +
                                               std::to_string(pods.size()) + " pods listed by kubelet)");
  }
  if (found.size() > 1) {
    return make_error(ErrorCode::FailedPrecondition, "kubelet lists devices " + ids + " for more than one container (" +
                                                         to_string(found[0]) + " and " + to_string(found[1]) + ")");
  }
  return found.front();
}

Result<SandboxSummary> choose_sandbox(const std::vector<SandboxSummary>& sandboxes, const std::string& namespace_,
                                      const std::string& name) {
  const SandboxSummary* best = nullptr;
  for (const auto& s : sandboxes) {
    if (s.state != SandboxState::Ready || s.pod_namespace != namespace_ || s.pod_name != name) continue;
    if (best == nullptr || s.created_at > best->created_at ||
        (s.created_at == best->created_at && s.attempt > best->attempt)) {
      best = &s;
    }
  }
  if (best == nullptr) {
    return make_error(ErrorCode::NotFound, "the runtime has no ready sandbox for pod " + namespace_ + "/" + name);
  }
  return *best;
}

bool wants_smcr(const std::map<std::string, std::string>& annotations) {
  auto it = annotations.find(std::string(kSmcrAnnotation));
  return it != annotations.end() && it->second == contract::kSmcrEnabled;
}

Result<SandboxNetns> parse_sandbox_netns(const std::map<std::string, std::string>& info, bool host_network_mode) {
  SandboxNetns out;
  out.host_network = host_network_mode;
  auto it = info.find("info");
  if (it == info.end()) return out;
  if (it->second.size() > kMaxSandboxInfoBytes) {
    return make_error(ErrorCode::InvalidArgument, "sandbox info is " + std::to_string(it->second.size()) +
                                                      " bytes, more than the " + std::to_string(kMaxSandboxInfoBytes) +
                                                      " accepted");
  }
  const json doc = json::parse(it->second, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return make_error(ErrorCode::InvalidArgument, "sandbox info is not a JSON object");
  }
  if (const json* pid = member(doc, "pid"); pid != nullptr && !pid->is_null()) {
    if (!pid->is_number_unsigned() || pid->get<uint64_t>() > kMaxPid) {
      return make_error(ErrorCode::InvalidArgument, "sandbox info: \"pid\" is not a process id: " + pid->dump());
    }
    // 0 means "no process" (a stopped sandbox).
    if (pid->get<uint64_t>() != 0) out.pid = static_cast<uint32_t>(pid->get<uint64_t>());
  }
  if (const json* closed = member(doc, "netNamespaceClosed"); closed != nullptr && closed->is_boolean()) {
    out.closed = closed->get<bool>();
  }
  const json* spec = member(doc, "runtimeSpec");
  const json* linux = spec != nullptr ? member(*spec, "linux") : nullptr;
  const json* namespaces = linux != nullptr ? member(*linux, "namespaces") : nullptr;
  if (namespaces != nullptr && namespaces->is_array()) {
    bool network_listed = false;
    for (const auto& ns : *namespaces) {
      const json* type = member(ns, "type");
      if (type == nullptr || !type->is_string() || type->get<std::string>() != "network") continue;
      network_listed = true;
      const json* path = member(ns, "path");
      if (path == nullptr || !path->is_string() || path->get<std::string>().empty()) continue;
      const auto p = path->get<std::string>();
      if (p.front() != '/' || p.find('\0') != std::string::npos || p.size() > 4096) {
        return make_error(ErrorCode::InvalidArgument, "sandbox info: network namespace path is not an absolute path");
      }
      out.path = p;
    }
    // An OCI spec without a network namespace entry shares the runtime's (the node's) netns.
    if (!network_listed) out.host_network = true;
  }
  return out;
}

std::string_view to_string(PodSetupResult r) noexcept {
  switch (r) {
    case PodSetupResult::Configured: return "configured";
    case PodSetupResult::NotRequested: return "not_requested";
    case PodSetupResult::NotAllowed: return "not_allowed";
    case PodSetupResult::HostNetwork: return "host_network";
    case PodSetupResult::HostNetnsRefused: return "host_netns_refused";
    case PodSetupResult::PodNotFound: return "pod_not_found";
    case PodSetupResult::SandboxGone: return "sandbox_gone";
    case PodSetupResult::Timeout: return "timeout";
    case PodSetupResult::Failed: return "failed";
  }
  return "failed";
}

PodSetupResult result_of(const Error& e) noexcept {
  switch (e.code) {
    case ErrorCode::NotFound: return PodSetupResult::SandboxGone;
    case ErrorCode::DeadlineExceeded: return PodSetupResult::Timeout;
    default: return PodSetupResult::Failed;
  }
}

NetnsChoice choose_pod_netns(const SandboxFacts& f) {
  if (!f.wants_smcr) {
    return PodSetupStop{PodSetupResult::NotRequested,
                        "the pod does not carry " + std::string(kSmcrAnnotation) + ": \"true\""};
  }
  return locate_sandbox_netns(f);
}

NetnsChoice locate_sandbox_netns(const SandboxFacts& f) {
  if (f.state != SandboxState::Ready) return PodSetupStop{PodSetupResult::SandboxGone, "the sandbox is not ready"};
  if (f.netns.host_network) {
    return PodSetupStop{PodSetupResult::HostNetwork,
                        "the pod uses the node's network namespace; the host setup already covers it"};
  }
  if (f.netns.closed)
    return PodSetupStop{PodSetupResult::SandboxGone, "the runtime reports the sandbox's netns closed"};
  // The netns file the runtime names, if this process can see it; else the sandbox process's.
  if (f.netns.path && f.path_visible) return *f.netns.path;
  if (f.netns.pid) return f.proc_root + "/" + std::to_string(*f.netns.pid) + "/ns/net";
  if (f.netns.path) {
    return PodSetupStop{PodSetupResult::SandboxGone,
                        "the sandbox's netns " + *f.netns.path +
                            " does not exist here and the runtime gave no pid (gone, or not mounted into the agent: "
                            "mount /var/run/netns or the host's /proc at procRoot)"};
  }
  return PodSetupStop{PodSetupResult::Failed, "the runtime's answer names neither a netns path nor a pid"};
}

std::optional<PodSetupStop> refuse_pod_netns(const NetnsTargetFacts& f) {
  if (!f.host_readable) {
    return PodSetupStop{PodSetupResult::Failed,
                        "cannot compare with the host's netns: " + f.host_readable.error().message +
                            " (is procRoot the host's /proc?)"};
  }
  if (!f.same_as_host) {
    return PodSetupStop{PodSetupResult::Failed, "the sandbox's netns " + f.netns + " was not compared with the host's"};
  }
  const auto& same = *f.same_as_host;
  if (!same) {
    return PodSetupStop{same.error().code == ErrorCode::NotFound ? PodSetupResult::SandboxGone : PodSetupResult::Failed,
                        same.error().message};
  }
  if (*same) {
    return PodSetupStop{PodSetupResult::HostNetnsRefused,
                        "the sandbox's netns " + f.netns + " is the host's; the agent never changes it for a pod"};
  }
  if (!f.entry_valid) return PodSetupStop{PodSetupResult::Failed, f.entry_valid.error().message};
  if (!f.time_left) return PodSetupStop{PodSetupResult::Timeout, "no time left to enter the pod's netns"};
  return std::nullopt;
}

std::string describe_configured(const std::string& entry, bool entry_added, const std::vector<std::string>& sysctls_set,
                                const std::string& own_rdma_device) {
  std::string what = !own_rdma_device.empty()
                         ? "no pnet entry (" + entry + " not added): the interface carries the pod's own RDMA device " +
                               own_rdma_device
                         : entry + (entry_added ? " added" : " already present");
  if (!sysctls_set.empty()) {
    what += "; ";
    for (size_t i = 0; i < sysctls_set.size(); ++i) what += (i == 0 ? "" : " ") + sysctls_set[i];
  }
  return what;
}

}  // namespace erdma::agent
