// DevicePlugin service on the gRPC callback API (see device_plugin_service.hpp).
#include "agent/deviceplugin/device_plugin_service.hpp"

#include <algorithm>
#include <string>

#include "common/log.hpp"
#include "common/text.hpp"

namespace erdma::agent {
namespace log = common::log;
namespace {

grpc::StatusCode to_grpc(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument: return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorCode::NotFound: return grpc::StatusCode::NOT_FOUND;
    case ErrorCode::AlreadyExists: return grpc::StatusCode::ALREADY_EXISTS;
    case ErrorCode::PermissionDenied: return grpc::StatusCode::PERMISSION_DENIED;
    case ErrorCode::Unavailable: return grpc::StatusCode::UNAVAILABLE;
    case ErrorCode::FailedPrecondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorCode::ResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorCode::DeadlineExceeded: return grpc::StatusCode::DEADLINE_EXCEEDED;
    case ErrorCode::Internal: break;
  }
  return grpc::StatusCode::INTERNAL;
}

grpc::ServerUnaryReactor* finish(grpc::CallbackServerContext* ctx, grpc::Status status) {
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(std::move(status));
  return reactor;
}

std::vector<std::string> to_vector(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  return std::vector<std::string>(ids.begin(), ids.end());
}

// Streams the advertised slots: the full list first, then the latest list after every change.
// Writes never overlap; a change during a write is sent when the write completes (intermediate
// states may be skipped, the last one never is). Finish is never called with a write in flight.
class ListAndWatchReactor final : public grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse> {
 public:
  ListAndWatchReactor(DeviceState& state, AgentMetrics* metrics) : state_(state), metrics_(metrics) {
    if (metrics_ != nullptr) metrics_->watch_streams.add(1);
    watcher_ = state_.add_watcher([this] { maybe_write(); });
    maybe_write();
  }

  void OnWriteDone(bool ok) override {
    {
      std::unique_lock lock(mu_);
      writing_ = false;
      if (!ok || cancelled_) {
        if (finished_) return;
        finished_ = true;
        lock.unlock();
        Finish(grpc::Status::CANCELLED);
        return;
      }
    }
    maybe_write();
  }

  void OnCancel() override {
    std::unique_lock lock(mu_);
    cancelled_ = true;
    if (writing_ || finished_) return;  // OnWriteDone finishes
    finished_ = true;
    lock.unlock();
    Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    state_.remove_watcher(watcher_);
    if (metrics_ != nullptr) metrics_->watch_streams.add(-1);
    delete this;
  }

 private:
  void maybe_write() {
    {
      std::lock_guard lock(mu_);
      if (finished_ || cancelled_ || writing_) return;
      auto snap = state_.snapshot();
      if (sent_any_ && snap->generation == sent_generation_) return;
      sent_any_ = true;
      sent_generation_ = snap->generation;
      response_.Clear();
      fill_list_and_watch(*snap, response_);
      writing_ = true;
    }
    // Outside the lock: gRPC may run OnWriteDone on this thread before StartWrite returns.
    StartWrite(&response_);
  }

  DeviceState& state_;
  AgentMetrics* metrics_;
  uint64_t watcher_ = 0;
  std::mutex mu_;
  bool writing_ = false, cancelled_ = false, finished_ = false, sent_any_ = false;
  uint64_t sent_generation_ = 0;
  v1beta1::ListAndWatchResponse response_;
};

}  // namespace

v1beta1::DevicePluginOptions plugin_options() {
  v1beta1::DevicePluginOptions o;
  o.set_pre_start_required(true);
  o.set_get_preferred_allocation_available(true);
  return o;
}

void fill_list_and_watch(const DeviceState::Snapshot& snapshot, v1beta1::ListAndWatchResponse& out) {
  for (const auto& slot : snapshot.advertisement.slots) {
    auto* d = out.add_devices();
    d->set_id(slot.id);
    d->set_health(slot.healthy ? kHealthy : kUnhealthy);
    if (slot.numa_node >= 0) d->mutable_topology()->add_nodes()->set_id(slot.numa_node);
  }
}

// ---- HookRunner

HookRunner::HookRunner(PreStartHook& hook, size_t workers, size_t capacity)
    : hook_(hook),
      capacity_(capacity),
      queue_(workers, capacity, [this](Job&& job, bool stopping) { run(std::move(job), stopping); }) {}

void HookRunner::submit(std::vector<std::string> ids, std::vector<std::string> devices,
                        std::chrono::steady_clock::time_point deadline, Done done) {
  Job job{std::move(ids), std::move(devices), deadline, std::move(done)};
  const auto refused = queue_.submit(job);
  if (!refused) return;
  if (*refused == common::WorkQueue<Job>::Refusal::Stopping) {
    job.done(make_error(ErrorCode::Unavailable, "the agent is stopping"));
  } else {
    job.done(hook_.missed_turn(job.ids, "PreStartContainer calls queued: " + std::to_string(capacity_) +
                                            ", the most the agent holds"));
  }
}

void HookRunner::run(Job&& job, bool stopping) {
  if (stopping) {
    job.done(make_error(ErrorCode::Unavailable, "the agent is stopping"));
  } else if (std::chrono::steady_clock::now() >= job.deadline) {
    job.done(hook_.missed_turn(job.ids, "the PreStartContainer deadline passed while earlier pod setups ran"));
  } else {
    job.done(hook_.pre_start(job.ids, job.devices, job.deadline));
  }
}

// ---- DevicePluginService

DevicePluginService::DevicePluginService(DeviceState& state, HookRunner& hooks, AgentMetrics* metrics,
                                         std::function<void()> request_rescan, AllocateOptions allocate)
    : state_(state),
      hooks_(hooks),
      metrics_(metrics),
      request_rescan_(std::move(request_rescan)),
      allocate_(allocate) {}

grpc::ServerUnaryReactor* DevicePluginService::GetDevicePluginOptions(grpc::CallbackServerContext* ctx,
                                                                      const v1beta1::Empty*,
                                                                      v1beta1::DevicePluginOptions* response) {
  *response = plugin_options();
  return finish(ctx, grpc::Status::OK);
}

grpc::ServerWriteReactor<v1beta1::ListAndWatchResponse>* DevicePluginService::ListAndWatch(grpc::CallbackServerContext*,
                                                                                           const v1beta1::Empty*) {
  log::info("ListAndWatch stream opened");
  return new ListAndWatchReactor(state_, metrics_);
}

grpc::ServerUnaryReactor* DevicePluginService::GetPreferredAllocation(
    grpc::CallbackServerContext* ctx, const v1beta1::PreferredAllocationRequest* request,
    v1beta1::PreferredAllocationResponse* response) {
  const auto snap = state_.snapshot();
  if (static_cast<size_t>(request->container_requests_size()) > kMaxContainersPerRequest) {
    return finish(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    std::to_string(request->container_requests_size()) + " container requests"));
  }
  for (int i = 0; i < request->container_requests_size(); ++i) {
    const auto& c = request->container_requests(i);
    PreferredRequest pr{to_vector(c.available_deviceids()), to_vector(c.must_include_deviceids()), c.allocation_size()};
    auto chosen = preferred_allocation(pr, snap->devices, state_.slots_per_device());
    if (!chosen) {
      log::warn("GetPreferredAllocation refused").kv("container", i).kv("error", chosen.error().message);
      return finish(ctx, grpc::Status(to_grpc(chosen.error().code),
                                      "container request " + std::to_string(i) + ": " + chosen.error().message));
    }
    auto* out = response->add_container_responses();
    for (auto& id : *chosen) out->add_deviceids(std::move(id));
  }
  return finish(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* DevicePluginService::Allocate(grpc::CallbackServerContext* ctx,
                                                        const v1beta1::AllocateRequest* request,
                                                        v1beta1::AllocateResponse* response) {
  const auto t0 = std::chrono::steady_clock::now();
  auto fail = [&](grpc::StatusCode code, const std::string& message) {
    log::warn("Allocate refused").kv("error", message);
    if (metrics_ != nullptr) metrics_->allocate_error.inc();
    response->Clear();
    return finish(ctx, grpc::Status(code, message));
  };
  if (request->container_requests_size() == 0) {
    return fail(grpc::StatusCode::INVALID_ARGUMENT, "AllocateRequest has no container requests");
  }
  if (static_cast<size_t>(request->container_requests_size()) > kMaxContainersPerRequest) {
    return fail(grpc::StatusCode::INVALID_ARGUMENT,
                "AllocateRequest has " + std::to_string(request->container_requests_size()) +
                    " container requests, more than " + std::to_string(kMaxContainersPerRequest));
  }
  const auto snap = state_.snapshot();
  AllocateOptions options = allocate_;
  options.rdma_cm_present = snap->rdma_cm_present;
  uint64_t slots = 0;
  std::vector<std::string> summary;
  for (int i = 0; i < request->container_requests_size(); ++i) {
    const auto ids = to_vector(request->container_requests(i).devices_ids());
    auto alloc = allocate_container(ids, snap->devices, state_.slots_per_device(), options);
    if (!alloc) {
      if (alloc.error().code == ErrorCode::NotFound && request_rescan_) request_rescan_();
      return fail(to_grpc(alloc.error().code), "container request " + std::to_string(i) + ": " + alloc.error().message);
    }
    for (const auto& note : alloc->notes) log::warn("Allocate").kv("note", note);
    auto* out = response->add_container_responses();
    for (const auto& [k, v] : alloc->envs) (*out->mutable_envs())[k] = v;
    for (const auto& node : alloc->device_nodes) {
      auto* spec = out->add_devices();
      spec->set_container_path(node.container_path);
      spec->set_host_path(node.host_path);
      spec->set_permissions(node.permissions);
    }
    for (const auto& m : alloc->mounts) {
      auto* mount = out->add_mounts();
      mount->set_container_path(m.container_path);
      mount->set_host_path(m.host_path);
      mount->set_read_only(m.read_only);
    }
    slots += ids.size();
    summary.push_back(common::join(alloc->devices, ","));
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (metrics_ != nullptr) {
    metrics_->allocate_ok.inc();
    metrics_->slots_allocated.inc(slots);
    metrics_->allocate_seconds.observe(seconds);
  }
  log::info("Allocate")
      .kv("containers", request->container_requests_size())
      .kv("slots", slots)
      .kv("devices", common::join(summary, ","))
      .kv("us", static_cast<int64_t>(seconds * 1e6));
  return finish(ctx, grpc::Status::OK);
}

grpc::ServerUnaryReactor* DevicePluginService::PreStartContainer(grpc::CallbackServerContext* ctx,
                                                                 const v1beta1::PreStartContainerRequest* request,
                                                                 v1beta1::PreStartContainerResponse*) {
  auto ids = to_vector(request->devices_ids());
  auto devices = devices_of(ids, state_.slots_per_device());
  auto* reactor = ctx->DefaultReactor();
  if (!devices) {
    if (metrics_ != nullptr) metrics_->pre_start_error.inc();
    log::warn("PreStartContainer refused").kv("error", devices.error().message);
    reactor->Finish(grpc::Status(to_grpc(devices.error().code), devices.error().message));
    return reactor;
  }
  // The budget ends before kubelet's own deadline (when it sent one).
  auto deadline = std::chrono::steady_clock::now() + kPreStartBudget;
  const auto client_left = ctx->deadline() - std::chrono::system_clock::now();
  if (client_left < kPreStartBudget) {
    deadline = std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(client_left * 9 / 10);
  }
  AgentMetrics* metrics = metrics_;
  hooks_.submit(std::move(ids), std::move(*devices), deadline, [reactor, metrics](Status s) {
    if (s) {
      if (metrics != nullptr) metrics->pre_start_ok.inc();
      reactor->Finish(grpc::Status::OK);
    } else {
      if (metrics != nullptr) metrics->pre_start_error.inc();
      log::warn("PreStartContainer failed").kv("error", s.error().message);
      reactor->Finish(grpc::Status(to_grpc(s.error().code), s.error().message));
    }
  });
  return reactor;
}

// ---- LoggingPreStartHook

Status LoggingPreStartHook::pre_start(const std::vector<std::string>& device_ids,
                                      const std::vector<std::string>& devices, std::chrono::steady_clock::time_point) {
  log::info("PreStartContainer")
      .kv("devices", common::join(devices, ","))
      .kv("slots", static_cast<uint64_t>(device_ids.size()));
  return {};
}

}  // namespace erdma::agent
