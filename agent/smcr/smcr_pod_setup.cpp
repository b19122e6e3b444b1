// SMC-R pod setup from PreStartContainer and at resync (see smcr_pod_setup.hpp).
#include "agent/smcr/smcr_pod_setup.hpp"

#include <algorithm>

#include "common/log.hpp"
#include "common/text.hpp"

namespace erdma::agent {
namespace log = common::log;
using Clock = std::chrono::steady_clock;

namespace {

std::chrono::microseconds since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
}

double seconds(std::chrono::microseconds us) { return std::chrono::duration<double>(us).count(); }

PodSetupOutcome with(PodSetupOutcome out, PodSetupResult r, std::string message) {
  out.result = r;
  out.message = std::move(message);
  return out;
}

}  // namespace

SmcrPodSetup::SmcrPodSetup(const AgentConfig& cfg, PodResourcesSource& pods, SandboxSource& sandboxes,
                           PodNetnsConfigurator& configurator, AgentMetrics* metrics, PodNetworkInspector& inspector)
    : cfg_(cfg),
      pods_(pods),
      sandboxes_(sandboxes),
      configurator_(configurator),
      metrics_(metrics),
      inspector_(inspector),
      predictions_(
          1, kMaxQueuedPredictions,
          [this](QueuedPrediction&& job, bool stopping) { make_prediction(std::move(job), stopping); },
          [metrics](size_t pending) {
            if (metrics != nullptr) metrics->smcr_predictions_pending.set(static_cast<double>(pending));
          }) {}

SmcrPrediction SmcrPodSetup::predict(const std::optional<NetnsRef>& pod, Deadline deadline) {
  if (Clock::now() >= deadline) return unknown_prediction("no time left before kubelet's deadline");
  auto facts = inspector_.gather(pod, cfg_.smcr.pod_interface, cfg_.smcr.pnet_id.str(), deadline);
  if (!facts) return unknown_prediction(facts.error().message);
  return predict_smcr(*facts);
}

SmcrPodSetup::~SmcrPodSetup() { stop_predictions(); }

void SmcrPodSetup::stop_predictions() { predictions_.stop(); }

bool SmcrPodSetup::predictions_stopping() const { return predictions_.stopping(); }

Status SmcrPodSetup::pre_start(const std::vector<std::string>& device_ids, const std::vector<std::string>& devices,
                               Clock::time_point deadline) {
  return pre_start_of(cfg_.resource_name, device_ids, devices, deadline);
}

PreStartHook& SmcrPodSetup::for_resource(const std::string& resource) {
  std::lock_guard lock(resource_hooks_mu_);
  auto& hook = resource_hooks_[resource];
  if (!hook) hook = std::make_unique<ResourceHook>(*this, resource);
  return *hook;
}

Status SmcrPodSetup::pre_start_of(const std::string& resource, const std::vector<std::string>& device_ids,
                                  const std::vector<std::string>&, Clock::time_point deadline) {
  PredictionTarget later;
  auto outcome = run_setup(resource, device_ids, deadline, &later);
  if (metrics_ != nullptr) {
    metrics_->pod_setup(outcome.result).inc();
    if (outcome.result == PodSetupResult::Configured) {
      metrics_->pod_setup_seconds.observe(seconds(outcome.duration));
      metrics_->step_pod_resources_seconds.observe(seconds(outcome.steps.pod_resources));
      metrics_->step_runtime_seconds.observe(seconds(outcome.steps.runtime));
      metrics_->step_netns_seconds.observe(seconds(outcome.steps.netns));
    }
  }
  if (later.wanted) {
    queue_prediction(std::move(outcome), std::move(later.pod), "PreStartContainer");
  } else {
    report("PreStartContainer", outcome, false);
  }
  return {};  // never fails the container: without the setup SMC falls back to TCP
}

void SmcrPodSetup::queue_prediction(PodSetupOutcome outcome, std::optional<NetnsRef> pod, const char* trigger) {
  QueuedPrediction job{std::move(outcome), std::move(pod), trigger};
  const auto refused = predictions_.submit(job);
  if (!refused) return;
  job.outcome.prediction =
      unknown_prediction(*refused == common::WorkQueue<QueuedPrediction>::Refusal::Stopping
                             ? std::string("the agent is stopping; this pod was not predicted")
                             : "SMC-R predictions waiting: " + std::to_string(queue_limit_.load()) +
                                   " (the most the agent queues); this pod was not predicted");
  report(job.trigger, job.outcome, false);
}

void SmcrPodSetup::make_prediction(QueuedPrediction&& job, bool stopping) {
  if (stopping) {
    job.outcome.prediction = unknown_prediction("the agent stopped before predicting this pod");
  } else {
    // Kubelet has its answer: the prediction gets a bound of its own.
    const auto t0 = Clock::now();
    job.outcome.prediction = predict(job.pod, t0 + 2 * std::chrono::milliseconds(cfg_.smcr.call_timeout_ms));
    job.outcome.steps.prediction = since(t0);
    if (metrics_ != nullptr && job.outcome.result == PodSetupResult::Configured) {
      metrics_->step_prediction_seconds.observe(seconds(job.outcome.steps.prediction));
    }
  }
  report(job.trigger, job.outcome, false);
}

size_t SmcrPodSetup::pending_predictions() const { return predictions_.pending(); }

bool SmcrPodSetup::wait_for_predictions(std::chrono::milliseconds timeout) { return predictions_.wait_idle(timeout); }

void SmcrPodSetup::limit_queued_predictions(size_t n) {
  queue_limit_ = n;
  predictions_.set_capacity(n);
}

Status SmcrPodSetup::missed_turn(const std::vector<std::string>& device_ids, const std::string& why) {
  PodSetupOutcome out;
  out.result = PodSetupResult::Timeout;
  out.message = why + "; devices " + common::join(device_ids, ",") + " (SMC-R falls back to TCP for this pod)";
  report("PreStartContainer", out);
  return {};
}

PodSetupOutcome SmcrPodSetup::set_up_claim_pod(const std::string& sandbox_id, const std::string& claim_namespace,
                                               Deadline deadline) {
  const auto t0 = Clock::now();
  PredictionTarget later;
  PodSetupOutcome out;
  if (!cfg_.smcr.allows(claim_namespace)) {
    out = not_allowed(out, claim_namespace);
  } else {
    out = configure_sandbox(sandbox_id, deadline, out, &later, claim_namespace);
  }
  out.duration = since(t0);
  if (metrics_ != nullptr) {
    metrics_->pod_setup(out.result).inc();
    if (out.result == PodSetupResult::Configured) {
      metrics_->pod_setup_seconds.observe(seconds(out.duration));
      metrics_->step_runtime_seconds.observe(seconds(out.steps.runtime));
      metrics_->step_netns_seconds.observe(seconds(out.steps.netns));
    }
  }
  if (later.wanted) {
    queue_prediction(out, std::move(later.pod), "CDI hook");
  } else {
    report("CDI hook", out, false);
  }
  return out;
}

PodSetupOutcome SmcrPodSetup::set_up(const std::vector<std::string>& device_ids, Deadline deadline) {
  return run_setup(cfg_.resource_name, device_ids, deadline, nullptr);
}

PodSetupOutcome SmcrPodSetup::run_setup(const std::string& resource, const std::vector<std::string>& device_ids,
                                        Deadline deadline, PredictionTarget* later) {
  const auto t0 = Clock::now();
  auto finish = [&](PodSetupOutcome o) {
    o.duration = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
    return o;
  };
  PodSetupOutcome out;
  auto pods = pods_.list(deadline);
  out.steps.pod_resources = since(t0);
  if (!pods) {
    return finish(
        with(out, pods.error().code == ErrorCode::DeadlineExceeded ? PodSetupResult::Timeout : PodSetupResult::Failed,
             pods.error().message));
  }
  auto pod = find_pod_for_devices(*pods, resource, device_ids);
  if (!pod) {
    return finish(with(out,
                       pod.error().code == ErrorCode::NotFound ? PodSetupResult::PodNotFound : PodSetupResult::Failed,
                       pod.error().message));
  }
  out.pod = to_string(*pod);
  if (pod->namespace_.empty() || pod->name.empty()) {
    return finish(with(out, PodSetupResult::Failed, "kubelet lists the devices for a pod without namespace or name"));
  }
  const auto t_list = Clock::now();
  // Only this pod's sandboxes: the runtime filters on kubelet's labels, so the answer stays one
  // entry however many pods the node runs.
  auto list = sandboxes_.list_ready_of(PodName{pod->namespace_, pod->name}, deadline);
  out.steps.runtime = since(t_list);
  if (!list) {
    return finish(
        with(out, list.error().code == ErrorCode::DeadlineExceeded ? PodSetupResult::Timeout : PodSetupResult::Failed,
             list.error().message));
  }
  auto sandbox = choose_sandbox(*list, pod->namespace_, pod->name);
  if (!sandbox) return finish(with(out, PodSetupResult::SandboxGone, sandbox.error().message));
  out.sandbox = sandbox->id;
  out.pod_uid = sandbox->pod_uid;
  if (!wants_smcr(sandbox->annotations)) {
    return finish(with(out, PodSetupResult::NotRequested,
                       "the pod does not carry " + std::string(kSmcrAnnotation) + ": \"true\""));
  }
  if (!cfg_.smcr.allows(pod->namespace_)) return finish(not_allowed(out, pod->namespace_));
  return finish(configure_sandbox(sandbox->id, deadline, out, later));
}

void SmcrPodSetup::predict_into(PodSetupOutcome& out, const std::optional<NetnsRef>& pod, Deadline deadline,
                                PredictionTarget* later) {
  if (later != nullptr) {
    later->wanted = true;
    later->pod = pod;
    return;
  }
  const auto t0 = Clock::now();
  out.prediction = predict(pod, deadline);
  out.steps.prediction = since(t0);
}

PodSetupOutcome SmcrPodSetup::configure_sandbox(const std::string& sandbox_id, Deadline deadline, PodSetupOutcome out,
                                                PredictionTarget* later, std::string_view require_namespace) {
  out.sandbox = sandbox_id;
  const auto t_status = Clock::now();
  const uint64_t asked_at = boot_ticks_now();  // the sandbox process started before the runtime answered
  auto status = sandboxes_.status(sandbox_id, deadline);
  out.steps.runtime += since(t_status);
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
  if (out.pod_uid.empty()) out.pod_uid = st.summary.pod_uid;
  if (!require_namespace.empty() && st.summary.pod_namespace != require_namespace) {
    return with(out, PodSetupResult::Failed,
                "sandbox " + sandbox_id + " is pod " + out.pod + "'s, not one of namespace " +
                    std::string(require_namespace) + ": the claim's pods are all of its own namespace");
  }
  // The status's annotations are the runtime's copy of the pod's: check them again (resync
  // only had the list's).
  auto facts = sandbox_facts_of(st, cfg_.proc_root);
  if (!require_namespace.empty()) facts.wants_smcr = true;  // a claim's pod: the claim is its request
  // A netns path outside the runtime's directories is never opened: the sandbox process's instead.
  const bool path_refused = facts.netns.path && !is_runtime_netns_path(*facts.netns.path, netns_dirs_);
  if (path_refused) facts.path_visible = false;
  const auto choice = choose_pod_netns(facts);
  if (const auto* stop = std::get_if<PodSetupStop>(&choice)) {
    out = with(out, stop->result, stop->message);
    if (path_refused && !facts.netns.pid && stop->result == PodSetupResult::SandboxGone) {
      out = with(out, PodSetupResult::Failed,
                 "the runtime names netns " + *facts.netns.path + " outside " + common::join(netns_dirs_, ", ") +
                     " and no pid; the agent opens no other path (check the runtime's netns location)");
    }
    if (stop->result == PodSetupResult::HostNetwork) predict_into(out, std::nullopt, deadline, later);
    return out;
  }
  // Opened once: the host comparison, the setup and the prediction all use this descriptor.
  const std::string& chosen = std::get<std::string>(choice);
  const bool by_pid = !(facts.netns.path && facts.path_visible && chosen == *facts.netns.path) && facts.netns.pid;
  out.netns = chosen;
  auto opened = by_pid ? open_process_netns(cfg_.proc_root, static_cast<pid_t>(*facts.netns.pid), asked_at)
                       : open_netns_once(chosen);
  if (!opened) return with(out, result_of(opened.error()), opened.error().message);
  const NetnsRef ref = std::move(*opened);

  // Never change the host's namespace on a pod's behalf.
  const NetnsRef host = NetnsRef::of_path(cfg_.proc_root + "/1/ns/net");
  NetnsTargetFacts target;
  target.netns = ref.path;
  if (auto h = same_netns(host, host); !h) target.host_readable = h.error();
  if (target.host_readable) target.same_as_host = same_netns(ref, host);
  auto entry = PnetEntry::eth(cfg_.smcr.pnet_id, cfg_.smcr.pod_interface);
  if (!entry) target.entry_valid = entry.error();
  target.time_left = Clock::now() < deadline;
  if (auto stop = refuse_pod_netns(target)) return with(out, stop->result, stop->message);

  PodNetnsPlan plan{*entry, cfg_.smcr.sysctls, true, cfg_.proc_root};
  const auto t_netns = Clock::now();
  auto done = configurator_.configure(ref, plan, deadline);
  out.steps.netns = since(t_netns);
  if (!done) return with(out, result_of(done.error()), done.error().message);
  {
    std::lock_guard lock(mu_);
    tracked_[sandbox_id] = TrackedPod{sandbox_id, out.pod, ref.by_identity()};
    if (metrics_ != nullptr) metrics_->smcr_pods.set(static_cast<double>(tracked_.size()));
  }
  out = with(
      out, PodSetupResult::Configured,
      describe_configured(entry->to_string(), done->pnet == Change::Changed, done->sysctls_set, done->own_rdma_device));
  predict_into(out, ref, deadline, later);
  return out;
}

PodSetupOutcome SmcrPodSetup::not_allowed(PodSetupOutcome out, const std::string& namespace_) const {
  return with(std::move(out), PodSetupResult::NotAllowed,
              "namespace " + namespace_ + " is not in smcr.allowedNamespaces of the agent's config: SMC-R is not set " +
                  "up for its pods (their TCP stays TCP); the cluster admin decides who may use SMC-R");
}

Result<ResyncSummary> SmcrPodSetup::resync(Deadline deadline) {
  // Only pods kubelet says hold the resource, each with its own filtered list: an unfiltered list
  // carries every pod's annotations and can outgrow kMaxAnswerBytes on a busy node.
  ERDMA_TRY_ASSIGN(auto pods, pods_.list(deadline));
  ResyncSummary summary;
  for (const auto& pod : pods) {
    // Either resource: the eRDMA devices, or the SMC-R library resource the webhook gives.
    auto holds_resource = [&](const PodDevices::Container& c, const std::string& resource) {
      auto it = resource.empty() ? c.devices.end() : c.devices.find(resource);
      return it != c.devices.end() && !it->second.empty();
    };
    const bool holds = std::any_of(pod.containers.begin(), pod.containers.end(), [&](const PodDevices::Container& c) {
      return holds_resource(c, cfg_.resource_name) || holds_resource(c, cfg_.smcr.resource_name);
    });
    if (!holds || pod.namespace_.empty() || pod.name.empty()) continue;
    auto list = sandboxes_.list_ready_of(PodName{pod.namespace_, pod.name}, deadline);
    if (!list) {
      // The runtime not answering is retried as a whole; one pod's bad answer is that pod's failure.
      if (list.error().code == ErrorCode::Unavailable || list.error().code == ErrorCode::DeadlineExceeded) {
        return std::move(list).error();
      }
      PodSetupOutcome out;
      out.pod = pod.namespace_ + "/" + pod.name;
      report("resync", with(out, PodSetupResult::Failed, list.error().message));
      ++summary.failed;
      continue;
    }
    summary.sandboxes += list->size();
    for (const auto& sb : *list) {
      if (sb.state != SandboxState::Ready || !wants_smcr(sb.annotations)) continue;
      ++summary.smcr;
      if (!cfg_.smcr.allows(sb.pod_namespace)) {
        PodSetupOutcome refused;
        refused.pod = sb.pod_namespace + "/" + sb.pod_name;
        refused.pod_uid = sb.pod_uid;
        report("resync", not_allowed(refused, sb.pod_namespace));
        continue;
      }
      const auto t0 = Clock::now();
      PodSetupOutcome out;
      out.pod = sb.pod_namespace + "/" + sb.pod_name;
      out.pod_uid = sb.pod_uid;
      // Each sandbox gets its own bound, so one hung namespace does not starve the rest.
      const auto own = std::min(deadline, t0 + 2 * std::chrono::milliseconds(cfg_.smcr.call_timeout_ms));
      out = configure_sandbox(sb.id, own, out, nullptr);
      out.duration = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0);
      report("resync", out);
      if (out.result == PodSetupResult::Configured) {
        ++summary.configured;
      } else if (out.result != PodSetupResult::HostNetwork && out.result != PodSetupResult::SandboxGone &&
                 out.result != PodSetupResult::NotRequested) {
        ++summary.failed;
      }
    }
  }
  return summary;
}

void SmcrPodSetup::allow_netns_dir_for_test(std::string dir) { netns_dirs_.push_back(std::move(dir)); }

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

void SmcrPodSetup::report(const char* trigger, const PodSetupOutcome& o, bool count_result) {
  if (metrics_ != nullptr && count_result) metrics_->pod_setup(o.result).inc();
  if (metrics_ != nullptr && o.prediction) metrics_->pod_prediction(o.prediction->reason).inc();
  // A pod whose SMC-R will fall back to TCP is degraded, not failed: say it, never silently. One
  // whose connections SMC-R will break is worse than TCP: say that louder.
  const bool breaks = o.prediction && o.prediction->verdict == SmcrVerdict::WillBreak;
  const bool bad = o.result == PodSetupResult::Failed || o.result == PodSetupResult::Timeout ||
                   o.result == PodSetupResult::HostNetnsRefused || breaks ||
                   (o.prediction && o.prediction->verdict == SmcrVerdict::WillFallBack);
  const bool quiet = o.result == PodSetupResult::NotRequested;
  auto line = bad ? log::warn("SMC-R pod setup") : quiet ? log::debug("SMC-R pod setup") : log::info("SMC-R pod setup");
  line.kv("trigger", trigger).kv("result", to_string(o.result));
  if (!o.pod.empty()) line.kv("pod", o.pod);
  if (!o.sandbox.empty()) line.kv("sandbox", o.sandbox);
  if (!o.netns.empty()) line.kv("netns", o.netns);
  line.kv("us", static_cast<int64_t>(o.duration.count()));
  const auto step = [&line](const char* key, std::chrono::microseconds us) {
    if (us.count() > 0) line.kv(key, static_cast<int64_t>(us.count()));
  };
  step("podresources_us", o.steps.pod_resources);
  step("runtime_us", o.steps.runtime);
  step("netns_us", o.steps.netns);
  step("predict_us", o.steps.prediction);
  if (!o.message.empty()) line.kv(o.result == PodSetupResult::Configured ? "set" : "reason", o.message);
  if (o.prediction) {
    line.kv("smcr", to_string(o.prediction->verdict)).kv("smcr_reason", to_string(o.prediction->reason));
    if (!o.prediction->fallback.empty()) {
      line.kv("smcr_fallback", o.prediction->fallback).kv("smcr_fallback_side", to_string(o.prediction->side));
    }
    line.kv("smcr_detail", o.prediction->detail);
    if (!o.prediction->same_node.detail.empty()) line.kv("same_node", to_string(o.prediction->same_node.mode));
  }
  PodEventSink* events = events_.load();
  if (events != nullptr && bad && !o.pod.empty()) {
    if (breaks) {
      events->warning(o.pod, o.pod_uid, kEventSmcrWillBreak,
                      "SMC-R will break this pod's connections (" + std::string(to_string(o.prediction->reason)) +
                          "): " + o.prediction->detail + " (docs/smcr-pod-networks.md)");
    } else if (o.prediction && o.prediction->verdict == SmcrVerdict::WillFallBack) {
      events->warning(o.pod, o.pod_uid, kEventSmcrWillFallBack,
                      "SMC-R will fall back to TCP (" + std::string(to_string(o.prediction->reason)) +
                          "): " + o.prediction->detail + " (docs/smcr-pod-networks.md)");
    } else if (o.result != PodSetupResult::Configured && o.result != PodSetupResult::HostNetwork) {
      events->warning(o.pod, o.pod_uid, kEventSmcrSetupFailed,
                      "SMC-R pod setup " + std::string(to_string(o.result)) + ": " + o.message +
                          "; the pod's TCP stays plain TCP (docs/troubleshooting.md)");
    }
  }
}

}  // namespace erdma::agent
