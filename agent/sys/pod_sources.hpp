// Where pod setup learns about pods: kubelet's PodResources API (which container holds which
// device IDs) and the container runtime's CRI (sandboxes, their annotations and network
// namespaces). Interfaces for the pure flow and its tests; gRPC clients over unix sockets for the
// agent. Every call takes a deadline and never blocks past it.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "agent/core/admin.hpp"
#include "agent/core/pod_setup.hpp"
#include "agent/sys/netns.hpp"
#include "common/result.hpp"

// The generated message types (agent/proto), declared here so this header stays free of them.
namespace v1 {
class ListPodResourcesResponse;
}  // namespace v1
namespace runtime::v1 {
class ListPodSandboxResponse;
class PodSandboxStatusResponse;
}  // namespace runtime::v1

namespace erdma::agent {

using Deadline = std::chrono::steady_clock::time_point;

// Largest answer accepted from kubelet or the runtime (a node with hundreds of pods answers with
// well under 1 MiB).
inline constexpr int kMaxAnswerBytes = 16 << 20;

class PodResourcesSource {
 public:
  virtual ~PodResourcesSource() = default;
  // Every pod kubelet knows with its containers' devices. Errors: Unavailable (kubelet not
  // reachable), DeadlineExceeded, ResourceExhausted (answer too large or more than kMaxPods pods).
  [[nodiscard]] virtual Result<std::vector<PodDevices>> list(Deadline deadline) = 0;
};

struct SandboxStatusInfo {
  SandboxSummary summary;  // id, pod, state, annotations (from the status, not a list)
  SandboxNetns netns;
};

class SandboxSource {
 public:
  virtual ~SandboxSource() = default;
  // The runtime's ready sandboxes. Errors as for PodResourcesSource::list.
  [[nodiscard]] virtual Result<std::vector<SandboxSummary>> list_ready(Deadline deadline) = 0;
  // The ready sandboxes of one pod: the runtime filters on the labels kubelet sets
  // (io.kubernetes.pod.namespace, io.kubernetes.pod.name). Errors as for list_ready.
  [[nodiscard]] virtual Result<std::vector<SandboxSummary>> list_ready_of(const PodName& pod, Deadline deadline) = 0;
  // One sandbox's status with the runtime's verbose info. NotFound when the runtime no longer
  // knows the sandbox; InvalidArgument when the answer is malformed (no status, bad info JSON).
  [[nodiscard]] virtual Result<SandboxStatusInfo> status(const std::string& sandbox_id, Deadline deadline) = 0;
};

// Answers of kubelet and the runtime into the agent's own values, as the gRPC clients use them
// (separate, so the fuzz targets reach exactly this handling). Errors: ResourceExhausted past
// kMaxPods; for a status, InvalidArgument when it has no status or its verbose info is malformed.
[[nodiscard]] Result<std::vector<PodDevices>> pod_devices_from(const ::v1::ListPodResourcesResponse& response);
[[nodiscard]] Result<std::vector<SandboxSummary>> sandboxes_from(const ::runtime::v1::ListPodSandboxResponse& response);
[[nodiscard]] Result<SandboxStatusInfo> sandbox_status_from(const std::string& sandbox_id,
                                                            const ::runtime::v1::PodSandboxStatusResponse& response);

// gRPC client of kubelet's PodResources v1 List on `socket_path`. Each call gets the earlier of
// `deadline` and now + `call_timeout`. Thread-safe.
class GrpcPodResources final : public PodResourcesSource {
 public:
  GrpcPodResources(std::string socket_path, std::chrono::milliseconds call_timeout);
  ~GrpcPodResources() override;
  [[nodiscard]] Result<std::vector<PodDevices>> list(Deadline deadline) override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// gRPC client of the CRI RuntimeService (ListPodSandbox, PodSandboxStatus) on `socket_path`.
class GrpcCriSandboxes final : public SandboxSource {
 public:
  GrpcCriSandboxes(std::string socket_path, std::chrono::milliseconds call_timeout);
  ~GrpcCriSandboxes() override;
  [[nodiscard]] Result<std::vector<SandboxSummary>> list_ready(Deadline deadline) override;
  [[nodiscard]] Result<std::vector<SandboxSummary>> list_ready_of(const PodName& pod, Deadline deadline) override;
  [[nodiscard]] Result<SandboxStatusInfo> status(const std::string& sandbox_id, Deadline deadline) override;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// What pod setup decides on: the status's annotations, state and netns, and whether the netns
// path the runtime names is visible in this process's mount namespace.
[[nodiscard]] SandboxFacts sandbox_facts_of(const SandboxStatusInfo& status, const std::string& proc_root);

// Where one pod's network namespace is on this node, found as pod setup finds it (ready sandbox,
// PodSandboxStatus verbose, the netns path when visible, else <procRoot>/<pid>/ns/net), for any
// pod, SMC-R or not.
struct PodNetnsLookup {
  SandboxSummary sandbox;
  std::optional<NetnsRef> netns;  // nullopt: the pod uses the node's network namespace
};
// Errors: those of pick_pod_sandbox() (NotFound: not on this node; FailedPrecondition: several
// ready sandboxes); CRI failures passed through explain_cri_error() with `cri_socket`; NotFound
// when the sandbox or its netns went away meanwhile; FailedPrecondition when the runtime names no
// namespace the agent can open (the message says what to mount).
[[nodiscard]] Result<PodNetnsLookup> find_pod_netns(SandboxSource& sandboxes, const PodName& pod,
                                                    const std::string& cri_socket, const std::string& proc_root,
                                                    Deadline deadline);

}  // namespace erdma::agent
