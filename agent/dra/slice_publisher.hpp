// Keeps this node's ResourceSlices on the API server equal to what build_slices says: publishes
// when asked (devices changed), on a periodic resync, and within seconds of someone else editing
// or deleting one (a watch on the node's slices). The decisions are plan_slices'
// (agent/core/dra_slices.hpp); this is the shell that lists, executes and retries.
//
// Latency (when given a metrics registry): erdma_agent_dra_publish_duration_seconds, one
// observation per publish (the loop's and publish_once's alike, the resyncs that write nothing
// included), by result: how long a device change takes to reach the scheduler's view.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/core/dra_slices.hpp"
#include "agent/dra/dra_latency.hpp"
#include "agent/kube/api.hpp"
#include "common/contract.hpp"
#include "common/metrics.hpp"
#include "common/repeat_filter.hpp"
#include "common/result.hpp"

namespace erdma::agent {

struct SlicePublisherOptions {
  std::string node_name;                                               // spec.nodeName of the slices
  std::string driver{contract::kDraDriverName};                        // spec.driver
  std::chrono::milliseconds resync{std::chrono::seconds(60)};          // publish this often regardless
  std::chrono::milliseconds backoff_initial{std::chrono::seconds(1)};  // after a failed publish,
  std::chrono::milliseconds backoff_max{std::chrono::seconds(60)};     // doubling up to this
  // How long a change seen by the watch waits before the publish it causes: a burst of events
  // (a kubectl edit, a deleted pool) becomes one publish.
  std::chrono::milliseconds repair_delay{std::chrono::milliseconds(500)};
  int max_attempts = 5;             // list-plan-execute rounds per publish when writes conflict
  int watch_timeout_seconds = 300;  // timeoutSeconds of each watch request (the server ends it)
};

struct PublishSummary {
  size_t created = 0;
  size_t updated = 0;
  size_t deleted = 0;
  int64_t generation = 0;          // the pool generation the slices carry now
  int attempts = 0;                // list-plan-execute rounds it took (1 without conflicts)
  std::vector<std::string> notes;  // build_slices' and plan_slices' notes, and conflicts met

  [[nodiscard]] size_t writes() const { return created + updated + deleted; }
};

// What the loop did so far (for logs, metrics and tests).
struct PublisherStats {
  uint64_t publishes_ok = 0;
  uint64_t publishes_failed = 0;
  uint64_t writes = 0;          // creates + updates + deletes sent and accepted
  uint64_t repairs = 0;         // publishes a watch event asked for
  uint64_t ignored_events = 0;  // watch events of the wrong shape, logged and skipped
  std::string last_error;       // "" after a success
};

// True when a watch event on this node's slices means the server no longer holds `wanted`:
// a wanted slice DELETED, a wanted slice ADDED or MODIFIED with other content, or a slice of
// this node and driver that is not wanted (it will be deleted). The publisher's own writes come
// back with the wanted content and are not news; nor are BOOKMARKs and types it does not know.
// InvalidArgument, naming the member, for an event that is not a WatchEvent of ResourceSlices:
// not an object, a type that is not a string; for ADDED, MODIFIED and DELETED an object without
// a string metadata.name or a spec object, spec.nodeName or spec.driver not strings,
// spec.devices not an array. Pure; never throws.
[[nodiscard]] Result<bool> slice_event_needs_publish(const nlohmann::json& event,
                                                     const std::vector<nlohmann::json>& wanted,
                                                     std::string_view node_name, std::string_view driver);

class SlicePublisher {
 public:
  // The slices wanted now; called once per publish (build_slices over the latest scan).
  using WantedFn = std::function<Result<SliceSet>()>;

  // `api` must outlive the publisher; so must whatever `wanted` uses, and `metrics` when not
  // null (the publish latency histogram is registered there).
  SlicePublisher(kube::Api& api, WantedFn wanted, SlicePublisherOptions options,
                 common::metrics::Registry* metrics = nullptr);
  ~SlicePublisher();  // stop()
  SlicePublisher(const SlicePublisher&) = delete;
  SlicePublisher& operator=(const SlicePublisher&) = delete;

  // One publish, on the calling thread: list the node's slices, plan, create and update, then
  // delete (NotFound on a delete is done). A conflict (AlreadyExists, a stale resourceVersion,
  // an update of a slice that vanished) lists and plans again, up to max_attempts rounds.
  // Errors: the wanted function's; the API's (Unavailable, PermissionDenied, ...) with the
  // action that failed named; FailedPrecondition when conflicts persist. Serialized with the
  // loop's own publishes.
  [[nodiscard]] Result<PublishSummary> publish_once();

  // The loop: a thread that publishes at once, then on trigger(), every `resync`, after a failure
  // with exponential backoff (a trigger does not cut a backoff short), and shortly after the
  // watch sees a change that is not the publisher's own. A second thread holds the watch.
  // start() after stop() is not supported.
  void start();
  // Ends both threads (an open watch is interrupted) and joins them. Idempotent; prompt: at
  // most the API call under way at that moment is waited for.
  void stop();
  // Devices or facts changed: publish soon (coalesced with other triggers).
  void trigger();

  [[nodiscard]] PublisherStats stats() const;

 private:
  void run_loop();
  void run_watch(std::stop_token stop);
  void request(std::chrono::milliseconds delay, bool repair);
  // Under publish_mu_: one publish, timed.
  Result<PublishSummary> publish_locked();
  Result<PublishSummary> publish_rounds();

  kube::Api& api_;
  WantedFn wanted_fn_;
  const SlicePublisherOptions options_;
  const std::string list_path_;
  LatencyByResult publish_latency_;  // null members without a registry

  std::mutex publish_mu_;  // one publish at a time

  mutable std::mutex mu_;  // guards what follows
  std::condition_variable_any wake_;
  bool started_ = false;
  bool pending_ = false;
  bool repair_pending_ = false;
  std::chrono::steady_clock::time_point pending_at_{};
  uint64_t wakeups_ = 0;
  std::vector<nlohmann::json> last_wanted_;  // what the last publish put there
  PublisherStats stats_;

  std::stop_source stop_;
  std::thread loop_thread_;
  std::thread watch_thread_;
};

}  // namespace erdma::agent
