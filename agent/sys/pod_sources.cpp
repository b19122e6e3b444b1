// gRPC clients of kubelet's PodResources API and the CRI RuntimeService (see pod_sources.hpp).
#include "agent/sys/pod_sources.hpp"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include <grpcpp/grpcpp.h>

#include "agent/proto/cri_runtime_v1.grpc.pb.h"
#include "agent/proto/podresources_v1.grpc.pb.h"

namespace erdma::agent {
namespace {

std::shared_ptr<grpc::Channel> unix_channel(const std::string& path) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxAnswerBytes);
  // One socket, one peer: no load balancing, no name resolution surprises.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // A restarted runtime or kubelet is back within a second or two on the same path: reconnect
  // soon instead of gRPC's default backoff, which can reach two minutes.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel("unix:" + path, grpc::InsecureChannelCredentials(), args);
}

void set_deadline(grpc::ClientContext& ctx, Deadline deadline, std::chrono::milliseconds call_timeout) {
  const auto now = std::chrono::steady_clock::now();
  const auto until = std::min(deadline, now + call_timeout);
  const auto left = std::max(until - now, std::chrono::steady_clock::duration::zero());
  ctx.set_deadline(std::chrono::system_clock::now() + left);
}

// Runs `call(ctx)` once; when the peer was UNAVAILABLE (the first call after containerd or kubelet
// restarted fails on the dead connection) and time is left, once more, waiting up to a second for
// the channel to reconnect. When that wait runs out too, the first answer is the one that explains
// (a socket file that is missing stays "unavailable", not "too slow").
template <typename Call>
grpc::Status call_with_reconnect(Call&& call, Deadline deadline, std::chrono::milliseconds call_timeout) {
  grpc::Status first;
  {
    grpc::ClientContext ctx;
    set_deadline(ctx, deadline, call_timeout);
    first = call(ctx);
  }
  if (first.error_code() != grpc::StatusCode::UNAVAILABLE || std::chrono::steady_clock::now() >= deadline) {
    return first;
  }
  grpc::ClientContext ctx;
  set_deadline(ctx, deadline, std::min(call_timeout, std::chrono::milliseconds(1000)));
  ctx.set_wait_for_ready(true);
  grpc::Status second = call(ctx);
  return second.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ? first : second;
}

// Maps a failed call to an Error that names the peer, the method and what to check.
Error call_error(const grpc::Status& s, const std::string& what, const std::string& socket) {
  const std::string msg = what + " (" + socket + "): " + s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return make_error(ErrorCode::Unavailable, msg + " (is the socket mounted and the service running?)");
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return make_error(ErrorCode::DeadlineExceeded, msg + " (no answer in time)");
    case grpc::StatusCode::NOT_FOUND: return make_error(ErrorCode::NotFound, msg);
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return make_error(ErrorCode::ResourceExhausted,
                        msg + " (answer larger than " + std::to_string(kMaxAnswerBytes) + " bytes?)");
    case grpc::StatusCode::UNIMPLEMENTED:
      return make_error(ErrorCode::Unavailable, msg + " (the peer does not serve this API version)");
    case grpc::StatusCode::PERMISSION_DENIED: return make_error(ErrorCode::PermissionDenied, msg);
    default: return make_error(ErrorCode::Unavailable, msg);
  }
}

SandboxSummary summary_of(const std::string& id, const runtime::v1::PodSandboxMetadata& m,
                          runtime::v1::PodSandboxState state, int64_t created_at,
                          const google::protobuf::Map<std::string, std::string>& annotations) {
  SandboxSummary s;
  s.id = id;
  s.pod_namespace = m.namespace_();
  s.pod_name = m.name();
  s.pod_uid = m.uid();
  s.attempt = m.attempt();
  s.state = state == runtime::v1::SANDBOX_READY ? SandboxState::Ready : SandboxState::NotReady;
  s.created_at = created_at;
  s.annotations.insert(annotations.begin(), annotations.end());
  return s;
}

}  // namespace

// ---- answers into values

Result<std::vector<PodDevices>> pod_devices_from(const v1::ListPodResourcesResponse& response) {
  if (static_cast<size_t>(response.pod_resources_size()) > kMaxPods) {
    return make_error(ErrorCode::ResourceExhausted,
                      "kubelet PodResources List returned " + std::to_string(response.pod_resources_size()) +
                          " pods, more than the " + std::to_string(kMaxPods) + " accepted");
  }
  std::vector<PodDevices> out;
  out.reserve(static_cast<size_t>(response.pod_resources_size()));
  for (const auto& p : response.pod_resources()) {
    PodDevices pod;
    pod.namespace_ = p.namespace_();
    pod.name = p.name();
    for (const auto& c : p.containers()) {
      PodDevices::Container container;
      container.name = c.name();
      for (const auto& d : c.devices()) {
        auto& ids = container.devices[d.resource_name()];
        ids.insert(ids.end(), d.device_ids().begin(), d.device_ids().end());
      }
      pod.containers.push_back(std::move(container));
    }
    out.push_back(std::move(pod));
  }
  return out;
}

Result<std::vector<SandboxSummary>> sandboxes_from(const runtime::v1::ListPodSandboxResponse& response) {
  if (static_cast<size_t>(response.items_size()) > kMaxPods) {
    return make_error(ErrorCode::ResourceExhausted,
                      "CRI ListPodSandbox returned " + std::to_string(response.items_size()) +
                          " sandboxes, more than the " + std::to_string(kMaxPods) + " accepted");
  }
  std::vector<SandboxSummary> out;
  for (const auto& item : response.items()) {
    // The filter asks for ready sandboxes; a runtime that ignores it is still answered right.
    out.push_back(summary_of(item.id(), item.metadata(), item.state(), item.created_at(), item.annotations()));
  }
  return out;
}

Result<SandboxStatusInfo> sandbox_status_from(const std::string& sandbox_id,
                                              const runtime::v1::PodSandboxStatusResponse& response) {
  if (!response.has_status() || response.status().id().empty()) {
    return make_error(ErrorCode::InvalidArgument, "CRI PodSandboxStatus " + sandbox_id + ": the answer has no status");
  }
  const auto& st = response.status();
  SandboxStatusInfo out;
  out.summary = summary_of(st.id(), st.metadata(), st.state(), st.created_at(), st.annotations());
  const bool host_mode = st.linux().namespaces().options().network() == runtime::v1::NODE;
  std::map<std::string, std::string> info(response.info().begin(), response.info().end());
  auto netns = parse_sandbox_netns(info, host_mode);
  if (!netns) {
    return make_error(netns.error().code, "CRI PodSandboxStatus " + sandbox_id + ": " + netns.error().message);
  }
  out.netns = std::move(*netns);
  return out;
}

// ---- GrpcPodResources

struct GrpcPodResources::Impl {
  std::string socket;
  std::chrono::milliseconds call_timeout;
  std::unique_ptr<v1::PodResourcesLister::Stub> stub;
};

GrpcPodResources::GrpcPodResources(std::string socket_path, std::chrono::milliseconds call_timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->socket = std::move(socket_path);
  impl_->call_timeout = call_timeout;
  impl_->stub = v1::PodResourcesLister::NewStub(unix_channel(impl_->socket));
}

GrpcPodResources::~GrpcPodResources() = default;

Result<std::vector<PodDevices>> GrpcPodResources::list(Deadline deadline) {
  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse response;
  const grpc::Status s =
      call_with_reconnect([&](grpc::ClientContext& ctx) { return impl_->stub->List(&ctx, request, &response); },
                          deadline, impl_->call_timeout);
  if (!s.ok()) return call_error(s, "kubelet PodResources List", impl_->socket);
  return pod_devices_from(response);
}

// ---- GrpcCriSandboxes

struct GrpcCriSandboxes::Impl {
  std::string socket;
  std::chrono::milliseconds call_timeout;
  std::unique_ptr<runtime::v1::RuntimeService::Stub> stub;
};

GrpcCriSandboxes::GrpcCriSandboxes(std::string socket_path, std::chrono::milliseconds call_timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->socket = std::move(socket_path);
  impl_->call_timeout = call_timeout;
  impl_->stub = runtime::v1::RuntimeService::NewStub(unix_channel(impl_->socket));
}

GrpcCriSandboxes::~GrpcCriSandboxes() = default;

namespace {

// ListPodSandbox for the ready sandboxes, narrowed by `labels` (none: every ready sandbox).
Result<std::vector<SandboxSummary>> list_ready_sandboxes(
    GrpcCriSandboxes::Impl& impl, std::initializer_list<std::pair<const char*, std::string>> labels,
    Deadline deadline) {
  runtime::v1::ListPodSandboxRequest request;
  auto* filter = request.mutable_filter();
  filter->mutable_state()->set_state(runtime::v1::SANDBOX_READY);
  for (const auto& [key, value] : labels) (*filter->mutable_label_selector())[key] = value;
  runtime::v1::ListPodSandboxResponse response;
  const grpc::Status s =
      call_with_reconnect([&](grpc::ClientContext& ctx) { return impl.stub->ListPodSandbox(&ctx, request, &response); },
                          deadline, impl.call_timeout);
  if (!s.ok()) return call_error(s, "CRI ListPodSandbox", impl.socket);
  return sandboxes_from(response);
}

}  // namespace

Result<std::vector<SandboxSummary>> GrpcCriSandboxes::list_ready(Deadline deadline) {
  return list_ready_sandboxes(*impl_, {}, deadline);
}

Result<std::vector<SandboxSummary>> GrpcCriSandboxes::list_ready_of(const PodName& pod, Deadline deadline) {
  return list_ready_sandboxes(*impl_, {{kPodNamespaceLabel, pod.namespace_}, {kPodNameLabel, pod.name}}, deadline);
}

Result<SandboxStatusInfo> GrpcCriSandboxes::status(const std::string& sandbox_id, Deadline deadline) {
  runtime::v1::PodSandboxStatusRequest request;
  request.set_pod_sandbox_id(sandbox_id);
  request.set_verbose(true);
  runtime::v1::PodSandboxStatusResponse response;
  const grpc::Status s = call_with_reconnect(
      [&](grpc::ClientContext& ctx) { return impl_->stub->PodSandboxStatus(&ctx, request, &response); }, deadline,
      impl_->call_timeout);
  if (!s.ok()) return call_error(s, "CRI PodSandboxStatus " + sandbox_id, impl_->socket);
  return sandbox_status_from(sandbox_id, response);
}

// ---- pod lookup

SandboxFacts sandbox_facts_of(const SandboxStatusInfo& st, const std::string& proc_root) {
  return SandboxFacts{wants_smcr(st.summary.annotations), st.summary.state, st.netns,
                      st.netns.path && path_visible(*st.netns.path), proc_root};
}

Result<PodNetnsLookup> find_pod_netns(SandboxSource& sandboxes, const PodName& pod, const std::string& cri_socket,
                                      const std::string& proc_root, Deadline deadline) {
  auto list = sandboxes.list_ready_of(pod, deadline);
  if (!list) return explain_cri_error(list.error(), cri_socket);
  ERDMA_TRY_ASSIGN(auto chosen, pick_pod_sandbox(*list, pod));
  auto status = sandboxes.status(chosen.id, deadline);
  if (!status) {
    if (status.error().code == ErrorCode::NotFound) {
      return make_error(ErrorCode::NotFound, "pod " + pod.namespace_ + "/" + pod.name + ": sandbox " + chosen.id +
                                                 " went away meanwhile (the pod restarted or was deleted); retry");
    }
    return explain_cri_error(status.error(), cri_socket);
  }
  PodNetnsLookup out{status->summary, std::nullopt};
  const auto choice = locate_sandbox_netns(sandbox_facts_of(*status, proc_root));
  if (const auto* stop = std::get_if<PodSetupStop>(&choice)) {
    if (stop->result == PodSetupResult::HostNetwork) return out;
    const auto code = stop->result == PodSetupResult::SandboxGone ? ErrorCode::NotFound : ErrorCode::FailedPrecondition;
    return make_error(code, "pod " + pod.namespace_ + "/" + pod.name + ": " + stop->message);
  }
  out.netns = NetnsRef::of_path(std::get<std::string>(choice));
  return out;
}

}  // namespace erdma::agent
