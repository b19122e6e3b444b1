// The kubelet DevicePlugin service (v1beta1) over the callback API: ListAndWatch streams the
// advertised slots and pushes every change; Allocate, GetPreferredAllocation and
// PreStartContainer translate kubelet's messages to the pure plugin model and back. Nothing here
// blocks a gRPC thread: the PreStartContainer hook runs on its own bounded workers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "agent/deviceplugin/pre_start_hook.hpp"
#include "agent/devices/device_state.hpp"
#include "agent/metrics/agent_metrics.hpp"
#include "agent/proto/deviceplugin_v1beta1.grpc.pb.h"
#include "common/work_queue.hpp"

namespace erdma::agent {

inline constexpr const char* kHealthy = "Healthy";
inline constexpr const char* kUnhealthy = "Unhealthy";
// PreStartContainer: kubelet waits 30 s; the hook gets less so the answer always arrives in time.
inline constexpr std::chrono::seconds kPreStartBudget{25};
inline constexpr size_t kMaxQueuedPreStarts = 64;
// Hook calls that run at once. Kubelet starts pods in parallel; one after another, the n-th pod of
// a burst waits for every setup before it (each is a few round trips to kubelet and the runtime),
// and with a slow runtime the last ones miss kubelet's deadline. Setups of different pods touch
// different network namespaces; the hook must be thread-safe.
inline constexpr size_t kPreStartWorkers = 4;

// Runs PreStartHook calls on up to `workers` threads, in arrival order, each with a deadline.
// A call that cannot wait its turn (the queue holds `capacity` calls already, or its deadline
// passed while it waited) goes to the hook's missed_turn() instead, which for SMC-R lets the
// container start (its TCP falls back) rather than fail it.
class HookRunner {
 public:
  explicit HookRunner(PreStartHook& hook, size_t workers = kPreStartWorkers, size_t capacity = kMaxQueuedPreStarts);
  // Stops; calls still queued are answered with a "stopping" error (the agent is going away, and
  // kubelet retries the container start against the next one).
  ~HookRunner() = default;
  HookRunner(const HookRunner&) = delete;
  HookRunner& operator=(const HookRunner&) = delete;

  using Done = std::function<void(Status)>;
  // Queues a call; `done` runs exactly once, on a worker (or inline when the queue is full or
  // stopping). Thread-safe.
  void submit(std::vector<std::string> ids, std::vector<std::string> devices,
              std::chrono::steady_clock::time_point deadline, Done done);
  void stop() { queue_.stop(); }

 private:
  struct Job {
    std::vector<std::string> ids, devices;
    std::chrono::steady_clock::time_point deadline;
    Done done;
  };
  void run(Job&& job, bool stopping);

  PreStartHook& hook_;
  const size_t capacity_;
  common::WorkQueue<Job> queue_;  // last: its workers call run()
};

class DevicePluginService final : public v1beta1::DevicePlugin::CallbackService {
 public:
  // `request_rescan` is called when kubelet names devices the agent does not know (a device may
  // have appeared since the last scan). `allocate` says what Allocate hands out besides the slots
  // (its rdma_cm_present is taken from each scan). All references must outlive the service.
  DevicePluginService(DeviceState& state, HookRunner& hooks, AgentMetrics* metrics,
                      std::function<void()> request_rescan, AllocateOptions allocate = {});

  // v1beta1::DevicePlugin
  grpc::ServerUnaryReactor* GetDevicePluginOptions(grpc::CallbackServerContext* ctx, const v1beta1::Empty* request,
                                                   v1beta1::DevicePluginOptions* response) override;
  grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* ListAndWatch(grpc::CallbackServerContext* ctx,
                                                                        const v1beta1::Empty* request) override;
  grpc::ServerUnaryReactor* GetPreferredAllocation(grpc::CallbackServerContext* ctx,
                                                   const v1beta1::PreferredAllocationRequest* request,
                                                   v1beta1::PreferredAllocationResponse* response) override;
  grpc::ServerUnaryReactor* Allocate(grpc::CallbackServerContext* ctx, const v1beta1::AllocateRequest* request,
                                     v1beta1::AllocateResponse* response) override;
  grpc::ServerUnaryReactor* PreStartContainer(grpc::CallbackServerContext* ctx,
                                              const v1beta1::PreStartContainerRequest* request,
                                              v1beta1::PreStartContainerResponse* response) override;

 private:
  DeviceState& state_;
  HookRunner& hooks_;
  AgentMetrics* metrics_;
  std::function<void()> request_rescan_;
  const AllocateOptions allocate_;
};

// The options the plugin registers with and answers GetDevicePluginOptions with.
[[nodiscard]] v1beta1::DevicePluginOptions plugin_options();

// Fills a ListAndWatch response from a snapshot (exposed for tests).
void fill_list_and_watch(const DeviceState::Snapshot& snapshot, v1beta1::ListAndWatchResponse& out);

}  // namespace erdma::agent
