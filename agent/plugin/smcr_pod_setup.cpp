// SMC-R pod setup from PreStartContainer and at resync (see smcr_pod_setup.hpp).
#include "agent/plugin/smcr_pod_setup.hpp"

#include <sys/stat.h>

#include "common/log.hpp"

namespace erdma::agent {
namespace log = common::log;
using Clock = std::chrono::steady_clock;

namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

PodSetupOutcome with(PodSetupOutcome out, PodSetupResult r, std::string message) {
  out.result = r;
  out.message = std::move(message);
  return out;
}

}  // namespace

SmcrPodSetup::SmcrPodSetup(const AgentConfig& cfg, PodResourcesSource& pods, SandboxSource& sandboxes,
                           PodNetnsConfigurator& configurator, AgentMetrics* metrics)
    : cfg_(cfg), pods_(pods), sandboxes_(sandboxes), configurator_(configurator), metrics_(metrics) {}

Status SmcrPodSetup::pre_start(const std::vector<std::string>& device_ids, const std::vector<std::string>&,
                               Clock::time_point deadline) {
  const auto outcome = set_up(device_ids, deadline);
  if (metrics_ != nullptr && outcome.result == PodSetupResult::Configured) {
    metrics_->pod_setup_seconds.observe(std::chrono::duration<double>(outcome.duration).count());
  }
  report("PreStartContainer", outcome);
  return {};  // never fails the container: without the setup SMC falls back to TCP
}

Status SmcrPodSetup::missed_turn(const std::vector<std::string>& device_ids) {
  PodSetupOutcome out;
  out.result = PodSetupResult::Timeout;
  out.message = "the PreStartContainer deadline passed while earlier pod setups ran; devices " + join(device_ids) +
                " (SMC-R falls back to TCP for this pod)";
  report("PreStartContainer", out);
  return {};
}

PodSetupOutcome SmcrPodSetup::set_up(const std::vector<std::string>& device_ids, Deadline deadline) {
  const auto t0 = Clock::now();
  auto finish = [&](PodSetupOutcome o) {
    o.duration = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
    return o;
  };
  PodSetupOutcome out;
  auto pods = pods_.list(deadline);
  if (!pods) {
    return finish(with(out, pods.error().code == ErrorCode::DeadlineExceeded ? PodSetupResult::Timeout
                                                                               : PodSetupResult::Failed,
                       pods.error().message));
  }
  auto pod = find_pod_for_devices(*pods, cfg_.resource_name, device_ids);
  if (!pod) {
    return finish(with(out, pod.error().code == ErrorCode::NotFound ? PodSetupResult::PodNotFound : PodSetupResult::Failed,
                       pod.error().message));
  }
  out.pod = to_string(*pod);
  if (pod->namespace_.empty() || pod->name.empty()) {
    return finish(with(out, PodSetupResult::Failed, "kubelet lists the devices for a pod without namespace or name"));
  }
  auto list = sandboxes_.list_ready(deadline);
  if (!list) {
    return finish(with(out, list.error().code == ErrorCode::DeadlineExceeded ? PodSetupResult::Timeout
                                                                               : PodSetupResult::Failed,
                       list.error().message));
  }
  auto sandbox = choose_sandbox(*list, pod->namespace_, pod->name);
  if (!sandbox) return finish(with(out, PodSetupResult::SandboxGone, sandbox.error().message));
  out.sandbox = sandbox->id;
  if (!wants_smcr(sandbox->annotations)) {
    return finish(with(out, PodSetupResult::NotRequested,
                       "the pod does not carry " + std::string(kSmcrAnnotation) + ": \"true\""));
  }
  return finish(configure_sandbox(sandbox->id, deadline, out));
}

PodSetupOutcome SmcrPodSetup::configure_sandbox(const std::string& sandbox_id, Deadline deadline, PodSetupOutcome out) {
  out.sandbox = sandbox_id;
  auto status = sandboxes_.status(sandbox_id, deadline);
  if (!status) {
    const auto code = status.error().code;
    return with(out,
                code == ErrorCode::NotFound           ? PodSetupResult::SandboxGone
                : code == ErrorCode::DeadlineExceeded ? PodSetupResult::Timeout
                                                      : PodSetupResult::Failed,
                status.error().message);
  }
  const auto& st = *status;
  if (out.pod.empty()) out.pod = st.summary.pod_namespace + "/" + st.summary.pod_name;
  // The status's annotations are the runtime's copy of the pod's: check them again (resync
  // only had the list's).
  if (!wants_smcr(st.summary.annotations)) {
    return with(out, PodSetupResult::NotRequested, "the pod does not carry " + std::string(kSmcrAnnotation) + ": \"true\"");
  }
  if (st.summary.state != SandboxState::Ready) return with(out, PodSetupResult::SandboxGone, "the sandbox is not ready");
  if (st.netns.host_network) {
    return with(out, PodSetupResult::HostNetwork,
                "the pod uses the node's network namespace; the host setup already covers it");
  }
  if (st.netns.closed) return with(out, PodSetupResult::SandboxGone, "the runtime reports the sandbox's netns closed");

  // The netns file the runtime names, if this process can see it; else the sandbox process's.
  std::optional<NetnsRef> ref;
  if (st.netns.path && exists(*st.netns.path)) {
    ref = NetnsRef::of_path(*st.netns.path);
  } else if (st.netns.pid) {
    ref = NetnsRef::of_path(cfg_.proc_root + "/" + std::to_string(*st.netns.pid) + "/ns/net");
  }
  if (!ref) {
    return with(out, st.netns.path ? PodSetupResult::SandboxGone : PodSetupResult::Failed,
                st.netns.path ? "the sandbox's netns " + *st.netns.path +
                                    " does not exist here and the runtime gave no pid (gone, or not mounted into the "
                                    "agent: mount /var/run/netns or the host's /proc at procRoot)"
                              : "the runtime's answer names neither a netns path nor a pid");
  }
  out.netns = ref->path;

  // Never change the host's namespace on a pod's behalf.
  const NetnsRef host = NetnsRef::of_path(cfg_.proc_root + "/1/ns/net");
  if (auto h = same_netns(host, host); !h) {
    return with(out, PodSetupResult::Failed,
                "cannot compare with the host's netns: " + h.error().message + " (is procRoot the host's /proc?)");
  }
  auto same = same_netns(*ref, host);
  if (!same) {
    return with(out, same.error().code == ErrorCode::NotFound ? PodSetupResult::SandboxGone : PodSetupResult::Failed,
                same.error().message);
  }
  if (*same) {
    return with(out, PodSetupResult::HostNetnsRefused,
                "the sandbox's netns " + ref->path + " is the host's; the agent never changes it for a pod");
  }

  auto entry = PnetEntry::eth(cfg_.smcr.pnet_id, cfg_.smcr.pod_interface);
  if (!entry) return with(out, PodSetupResult::Failed, entry.error().message);
  PodNetnsPlan plan{*entry, cfg_.smcr.sysctls, true, cfg_.proc_root};
  if (Clock::now() >= deadline) return with(out, PodSetupResult::Timeout, "no time left to enter the pod's netns");
  auto done = configurator_.configure(*ref, plan, deadline);
  if (!done) return with(out, result_of(done.error()), done.error().message);
  {
    std::lock_guard lock(mu_);
    tracked_[sandbox_id] = TrackedPod{sandbox_id, out.pod, *ref};
    if (metrics_ != nullptr) metrics_->smcr_pods.set(static_cast<double>(tracked_.size()));
  }
  std::string what = entry->to_string() + (done->pnet == Change::Changed ? " added" : " already present");
  if (!done->sysctls_set.empty()) what += "; " + join(done->sysctls_set, " ");
  return with(out, PodSetupResult::Configured, what);
}

Result<ResyncSummary> SmcrPodSetup::resync(Deadline deadline) {
  auto list = sandboxes_.list_ready(deadline);
  if (!list) return list.error();
  ResyncSummary summary;
  summary.sandboxes = list->size();
  for (const auto& sb : *list) {
    if (sb.state != SandboxState::Ready || !wants_smcr(sb.annotations)) continue;
    ++summary.smcr;
    const auto t0 = Clock::now();
    PodSetupOutcome out;
    out.pod = sb.pod_namespace + "/" + sb.pod_name;
    // Each sandbox gets its own bound, so one hung namespace does not starve the rest.
    const auto own = std::min(deadline, t0 + 2 * std::chrono::milliseconds(cfg_.smcr.call_timeout_ms));
    out = configure_sandbox(sb.id, own, out);
    out.duration = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
    report("resync", out);
    if (out.result == PodSetupResult::Configured) {
      ++summary.configured;
    } else if (out.result != PodSetupResult::HostNetwork && out.result != PodSetupResult::SandboxGone &&
               out.result != PodSetupResult::NotRequested) {
      ++summary.failed;
    }
  }
  return summary;
}

std::vector<TrackedPod> SmcrPodSetup::tracked() const {
  std::lock_guard lock(mu_);
  std::vector<TrackedPod> out;
  for (const auto& [id, t] : tracked_) out.push_back(t);
  return out;
}

void SmcrPodSetup::forget(const std::string& sandbox_id) {
  std::lock_guard lock(mu_);
  tracked_.erase(sandbox_id);
  if (metrics_ != nullptr) metrics_->smcr_pods.set(static_cast<double>(tracked_.size()));
}

void SmcrPodSetup::report(const char* trigger, const PodSetupOutcome& o) {
  if (metrics_ != nullptr) metrics_->pod_setup(o.result).inc();
  const bool bad = o.result == PodSetupResult::Failed || o.result == PodSetupResult::Timeout ||
                   o.result == PodSetupResult::HostNetnsRefused;
  const bool quiet = o.result == PodSetupResult::NotRequested;
  auto line = bad ? log::warn("SMC-R pod setup") : quiet ? log::debug("SMC-R pod setup") : log::info("SMC-R pod setup");
  line.kv("trigger", trigger).kv("result", to_string(o.result));
  if (!o.pod.empty()) line.kv("pod", o.pod);
  if (!o.sandbox.empty()) line.kv("sandbox", o.sandbox);
  if (!o.netns.empty()) line.kv("netns", o.netns);
  line.kv("us", static_cast<int64_t>(o.duration.count()));
  if (!o.message.empty()) line.kv(o.result == PodSetupResult::Configured ? "set" : "reason", o.message);
}

}  // namespace erdma::agent
