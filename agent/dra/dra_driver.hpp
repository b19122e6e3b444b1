// The DRA driver as the daemon runs it (dra.enabled, docs/dra.md): the API client from the pod's
// service account, the kubelet plugin (registration, NodePrepare/UnprepareResources, health), the
// slice publisher, and pod Events through the same client. It reads the device plugin's scan (one
// view of the node's cards for both models) and is told by the daemon's loop when it changed.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "agent/core/config.hpp"
#include "agent/devices/device_state.hpp"
#include "agent/dra/claim_hook_server.hpp"
#include "agent/dra/dra_plugin.hpp"
#include "agent/dra/slice_publisher.hpp"
#include "agent/kube/api.hpp"
#include "agent/kube/events.hpp"
#include "agent/kube/pod_events.hpp"
#include "common/jitter.hpp"
#include "common/metrics.hpp"
#include "common/repeat_filter.hpp"
#include "common/work_queue.hpp"

namespace erdma::agent {

// PodEventSink over the API: the Event is posted on the pod the caller names with its UID (never
// looked up: the agent has no RBAC to read pods), once per window (kube::EventPoster). A small queue and one worker
// thread: warning() never blocks; when the queue is full the Event is dropped and the log line says so (the pod's own
// log line and metric were written already).
class ApiPodEvents final : public PodEventSink {
 public:
  ApiPodEvents(kube::Api& api, std::string node_name);
  ~ApiPodEvents() override;
  void warning(const std::string& pod, std::string_view uid, std::string_view reason,
               const std::string& message) override;
  // The same for news that needs no action (type Normal).
  void normal(const std::string& pod, std::string_view uid, std::string_view reason, const std::string& message);
  // A Warning on every pod the claim "namespace/name" is reserved for (its status.reservedFor, which
  // carries each pod's UID).
  void claim_warning(const std::string& claim, std::string_view reason, const std::string& message);
  // Ends the worker after the Event it is posting; those still queued are dropped (a shutdown
  // does not wait on the API server).
  void stop();

 private:
  struct Job {
    std::string pod, uid, reason, message;
    kube::EventType type = kube::EventType::Warning;
    bool claim = false;  // `pod` names a claim: post on the pods it is reserved for
  };
  void post(const Job& job);

  kube::Api& api_;
  kube::EventPoster poster_;
  common::WorkQueue<Job> queue_;
};

// The SMC-R pod setup a hook request leads to (the daemon's SmcrPodSetup): the sandbox the runtime
// named, for a claim this driver prepared with mode smcr. Must not throw.
using ClaimPodSetupFn = std::function<dra::ClaimHookOutcome(const std::string& sandbox_id, const PreparedClaim& claim,
                                                            std::chrono::steady_clock::time_point deadline)>;

class DraDriver {
 public:
  // `state` is the device plugin's view (PluginRuntime::state()); it must outlive the driver.
  DraDriver(const AgentConfig& cfg, DeviceState& state, common::metrics::Registry& registry);
  ~DraDriver();
  DraDriver(const DraDriver&) = delete;
  DraDriver& operator=(const DraDriver&) = delete;

  // Node name, API client, the Node's UID (for the slices' owner; logged and left out when it
  // cannot be read), the kubelet plugin (its checkpoint), the publisher. Errors say what to fix:
  // no NODE_NAME, no service-account token (manifests/dra mounts it), a corrupt checkpoint.
  [[nodiscard]] Status start();
  void stop();
  // Pods on the pod network with SMC-R claims (agent/core/cdi_hook.hpp): before start(), the setup
  // the hook's requests lead to. With it (and dra.hookDir), start() installs the hook, serves its
  // socket and names the hook in SMC-R claims' CDI specs; without it (smcr.enabled: false) it does
  // none of that.
  void set_claim_pod_setup(ClaimPodSetupFn fn) { claim_pod_setup_ = std::move(fn); }
  // Once a second from the daemon's loop: a new device scan triggers a publish and the health
  // stream; the counters go to the metrics.
  void tick();
  // Why the driver is not ready (readiness probe), or nothing.
  [[nodiscard]] std::optional<std::string> not_ready() const;
  // The Event sink for the SMC-R pod setup; null before start().
  [[nodiscard]] PodEventSink* events() noexcept { return events_.get(); }

 private:
  Result<SliceSet> wanted();
  // Installs the hook and serves its socket: dra.hookDir, or "" when there is no hook (logged).
  std::string serve_hook();
  dra::ClaimHookOutcome on_hook(const HookRequest& request, std::chrono::steady_clock::time_point deadline);
  // The claim's status after the hook's setup (dra_claim.hpp PodSideStatus): the pod's interface
  // read in its netns, or the cards' netdevs for a hostNetwork pod, and a Ready condition. On the
  // pod-side queue's thread, after the hook has its answer: container creation never waits on the
  // API server for it.
  struct PodSideJob {
    PreparedClaim claim;
    dra::ClaimHookOutcome outcome;
  };
  void report_pod_side(PodSideJob&& job, bool stopping);
  // Cards held by prepared claims that went down or away since the last look: a Warning on the
  // pods of those claims.
  void report_lost_cards(const DeviceState::Snapshot& now);

  const AgentConfig& cfg_;
  DeviceState& state_;
  common::metrics::Registry& registry_;
  std::string node_name_;
  std::string node_uid_;
  std::unique_ptr<kube::Api> api_;
  std::unique_ptr<dra::DraKubeletPlugin> plugin_;
  std::unique_ptr<SlicePublisher> publisher_;
  std::unique_ptr<ApiPodEvents> events_;
  ClaimPodSetupFn claim_pod_setup_;
  std::unique_ptr<dra::ClaimHookServer> hook_server_;
  std::unique_ptr<common::WorkQueue<PodSideJob>> pod_side_queue_;  // with the hook's server
  std::atomic<dra::DraKubeletPlugin*> hook_plugin_{nullptr};       // the hook's view of the checkpoint, once started
  uint64_t last_hook_ok_ = 0;
  uint64_t last_hook_errors_ = 0;
  std::shared_ptr<const DeviceState::Snapshot> last_snapshot_;
  std::set<std::string> healthy_before_;  // cards healthy at the last look (at start: every card a claim holds)
  std::vector<std::string> last_notes_;
  dra::DraCounters last_counters_;
  PublisherStats last_stats_;
};

// The daemon's retries of DraDriver::start: a start that fails is tried again `every` later, and
// logged when its error differs from the last one (the same error at every retry is one line).
// DraSupervisor calls due() and record() on the daemon's thread; the readiness probe reads
// last_error() from its own thread.
class DraStartRetry {
 public:
  using Clock = std::chrono::steady_clock;
  // `draw` gives the jitter's draw in [0, 1] (common/jitter.hpp): the wait after a failure is
  // `every` within +-20 %, so that a fleet's agents do not retry together.
  explicit DraStartRetry(Clock::duration every, std::function<double()> draw = common::jitter_unit)
      : every_(std::chrono::duration_cast<std::chrono::milliseconds>(every)), draw_(std::move(draw)) {}

  // True when a start is due at `now`: before the first, or the jittered period after the last
  // failure.
  [[nodiscard]] bool due(Clock::time_point now) const noexcept { return now >= next_; }
  // The outcome of a start made at `now`. A failure is kept for last_error(), logged when it is
  // news, and puts the next start `every` +-20 % later. True when the start worked.
  bool record(const Status& outcome, Clock::time_point now);
  // The last failure's message; "" before the first failure and after a success. Thread-safe.
  [[nodiscard]] std::string last_error() const;

 private:
  const std::chrono::milliseconds every_;
  const std::function<double()> draw_;
  Clock::time_point next_{};
  common::RepeatFilter errors_;
  mutable std::mutex mu_;  // guards last_error_
  std::string last_error_;
};

// The DRA driver as the daemon keeps it (dra.enabled): started on the daemon's thread, and when a
// start fails (no token, no node name, a corrupt checkpoint) tried again every 10 s (DraStartRetry)
// while the device plugin serves. With dra.enabled: false it does nothing.
class DraSupervisor {
 public:
  // `state` and `registry` as for DraDriver; `on_started` is given the driver's Event sink once a
  // start worked (the SMC-R pod setup posts its Events there).
  DraSupervisor(const AgentConfig& cfg, DeviceState& state, common::metrics::Registry& registry,
                std::function<void(PodEventSink*)> on_started);

  // Before start(): what each driver started is given (DraDriver::set_claim_pod_setup).
  void set_claim_pod_setup(ClaimPodSetupFn fn) { claim_pod_setup_ = std::move(fn); }
  // The first start; logged and left to tick() when it fails.
  void start();
  // Once a second from the daemon's loop: the driver's tick, or another start when one is due.
  void tick();
  // Why DRA is not ready, for the readiness probe: the driver's own answer, or why it did not
  // start yet; nothing with dra.enabled: false. Thread-safe.
  [[nodiscard]] std::optional<std::string> not_ready() const;
  // Stops the driver if it started. start() and tick() must not be called after.
  void stop();

 private:
  void try_start();

  const AgentConfig& cfg_;
  DeviceState& state_;
  common::metrics::Registry& registry_;
  std::function<void(PodEventSink*)> on_started_;
  ClaimPodSetupFn claim_pod_setup_;
  DraStartRetry retry_{std::chrono::seconds(10)};
  mutable std::mutex mu_;  // guards driver_ against the probe thread; the daemon's thread alone writes it
  std::unique_ptr<DraDriver> driver_;
};

}  // namespace erdma::agent
