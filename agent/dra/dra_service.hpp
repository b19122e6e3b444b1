// The DRA driver's kubelet service (k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin): prepares the
// eRDMA devices of allocated ResourceClaims as CDI specs and unprepares them, keeping the
// node-local checkpoint (dra_checkpoint.hpp) so that an agent restart forgets nothing.
//
// NodePrepareResources, per claim: a claim recorded in the checkpoint (and whose spec file is
// there) is answered from the record, with no API call; otherwise GET the ResourceClaim, decide
// (dra_claim.hpp plan_claim, cdi_spec.hpp build_cdi_spec, decide_prepare), write the CDI spec,
// then the checkpoint, then answer. Unprepare: remove the spec, then the record. Every file is
// written whole (temporary file, fsync, rename) into a directory opened once and checked
// (agent/sys/safe_dir.hpp). One mutex serializes the decisions and writes of all calls; the API
// reads happen outside it. A claim that fails gets its own `error` text; the call fails only for
// a request that is not one.
//
// Latency (when given a metrics registry): erdma_agent_dra_prepare_duration_seconds and
// erdma_agent_dra_unprepare_duration_seconds, one observation per kubelet call, not per claim.
// The kubelet sends one NodePrepareResources per pod and driver, holding all of that pod's claims
// of this driver, and starts no container of the pod before the answer: the call's time is what
// this driver adds to the pod's start. result="error" when any claim of the call was answered
// with an error (the kubelet then fails the pod's preparation and retries it); the per-claim
// outcomes are in the DraCounters (erdma_agent_dra_prepares_total and _unprepares_total).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/core/dra_checkpoint.hpp"
#include "agent/core/dra_claim.hpp"
#include "agent/core/plugin_model.hpp"
#include "agent/core/rdma_device.hpp"
#include "agent/dra/dra_latency.hpp"
#include "agent/kube/api.hpp"
#include "agent/proto/dra_v1.grpc.pb.h"
#include "agent/sys/safe_dir.hpp"
#include "common/metrics.hpp"
#include "common/result.hpp"

namespace erdma::agent::dra {

namespace drapb = ::k8s::io::kubelet::pkg::apis::dra::v1;

// The node's cards as they are now (the daemon's device view). Called under the service's mutex,
// once per claim that needs deciding; must not block for long.
using DeviceScanFn = std::function<std::vector<RdmaDevice>()>;

inline constexpr std::string_view kCheckpointFile = "checkpoint.json";

// Per card, the network facts a claim's status.devices[].networkData reports (dra_claim.hpp).
using CardNetworkFn = std::function<std::map<std::string, CardNetwork>()>;

struct DraServiceConfig {
  std::string driver{contract::kDraDriverName};
  std::string pool;        // this node's pool: the node name (dra_slices SliceFacts pool_name)
  std::string plugin_dir;  // /var/lib/kubelet/plugins/<driver>: holds the checkpoint
  std::string cdi_dir{kCdiSpecDir};
  AllocateOptions allocate;  // what the CDI specs give (cdi_spec.hpp)
  // After preparing a claim, write this driver's entries of its status.devices (PUT
  // resourceclaims/<name>/status; needs RBAC update on resourceclaims/status and
  // associated-node:update on resourceclaims/driver for the driver's name). A failure is logged
  // and counted; the claim stays prepared.
  bool report_status = false;
  CardNetworkFn networks;  // null = entries without networkData
  // SMC-R claims' status is written from the pod's side (report_pod_side, after the CDI hook set
  // the pod up): at prepare their entries carry no networkData (the pod may have a netns of its
  // own, whose interface is not the card's netdev) and a Ready condition False, WaitingForPod.
  bool pod_side_status = false;
  // Called after a claim is newly prepared, once per pod the claim is reserved for
  // (status.reservedFor), with "namespace/name", the pod's UID as the entry gives it, and a line
  // saying what was prepared: the daemon posts it as a Normal Event, so `kubectl describe pod`
  // says which model served the pod and which cards it got. Must not block. Null: nothing.
  std::function<void(const std::string& pod, const std::string& uid, const std::string& message)> on_prepared;
  // smcr.allowedNamespaces of the agent's config: an SMC-R claim (mode smcr) of any other
  // namespace is refused, as the device-plugin path refuses to set up such pods. Empty: every
  // namespace. RDMA claims are not affected.
  std::vector<std::string> smcr_allowed_namespaces;
};

// Counters for metrics and tests. Monotonic.
struct DraCounters {
  uint64_t prepared = 0;        // claims prepared (spec and record written)
  uint64_t already = 0;         // claims answered from the record
  uint64_t prepare_errors = 0;  // claims answered with an error
  uint64_t unprepared = 0;      // claims unprepared (record removed)
  uint64_t unprepare_errors = 0;
  uint64_t spec_writes = 0;     // CDI spec files written
  uint64_t status_reports = 0;  // claims whose status.devices were written
  uint64_t status_errors = 0;
};

class DraService final : public drapb::DRAPlugin::Service {
 public:
  // Opens the directories (created when missing), reads the checkpoint (missing = empty) and
  // removes spec files of this driver that no recorded claim owns. Errors, with nothing deleted:
  // InvalidArgument for a corrupt checkpoint (the message says what is wrong: an operator must
  // look before claims in use are forgotten), those of SafeDir::open for the directories.
  // `api` and the scan function must outlive the service. `metrics`, when not null, gets the
  // two latency histograms (registered here) and must outlive the service too.
  [[nodiscard]] static Result<std::unique_ptr<DraService>> open(DraServiceConfig config, kube::Api& api,
                                                                DeviceScanFn scan,
                                                                common::metrics::Registry* metrics = nullptr);

  // The RPCs as plain calls: an answer for every claim of the request. Thread-safe.
  [[nodiscard]] drapb::NodePrepareResourcesResponse prepare(const drapb::NodePrepareResourcesRequest& request);
  [[nodiscard]] drapb::NodeUnprepareResourcesResponse unprepare(const drapb::NodeUnprepareResourcesRequest& request);

  // drapb::DRAPlugin::Service
  grpc::Status NodePrepareResources(grpc::ServerContext* ctx, const drapb::NodePrepareResourcesRequest* request,
                                    drapb::NodePrepareResourcesResponse* response) override;
  grpc::Status NodeUnprepareResources(grpc::ServerContext* ctx, const drapb::NodeUnprepareResourcesRequest* request,
                                      drapb::NodeUnprepareResourcesResponse* response) override;

  [[nodiscard]] Checkpoint checkpoint() const;
  // The status of a claim this driver prepared, from the pod's side (dra_claim.hpp
  // pod_side_status_entries): reads the claim, merges this driver's entries and writes them, as
  // after a prepare. A failure is logged and counted (status_errors); nothing else changes.
  void report_pod_side(const PreparedClaim& claim, const std::map<std::string, CardNetwork>& networks,
                       const PodSideStatus& side);
  // The record of one claim, if prepared (the CDI hook asks for one claim, not the whole set).
  [[nodiscard]] std::optional<PreparedClaim> recorded(const std::string& claim_uid) const;
  [[nodiscard]] DraCounters counters() const;
  [[nodiscard]] const DraServiceConfig& config() const noexcept { return config_; }
  // Spec files removed at start because no recorded claim owned them.
  [[nodiscard]] const std::vector<std::string>& removed_at_start() const noexcept { return removed_at_start_; }

 private:
  DraService(DraServiceConfig config, kube::Api& api, DeviceScanFn scan, SafeDir plugin_dir, SafeDir cdi_dir,
             Checkpoint checkpoint, common::metrics::Registry* metrics);

  // One claim; the answer's error is empty on success. Takes the mutex for the decision.
  drapb::NodePrepareResourceResponse prepare_one(const drapb::Claim& claim);
  std::string unprepare_one(const drapb::Claim& claim);
  // Under mu_: the answer for a recorded claim, rewriting a spec file that went missing.
  Result<bool> answer_recorded(const std::string& uid, drapb::NodePrepareResourceResponse& out);
  Status write_checkpoint(const Checkpoint& next);
  // Outside mu_: this driver's status.devices entries for a claim just prepared.
  void report_status(const drapb::Claim& c, nlohmann::json object, const PreparedClaim& claim);
  // Outside mu_: `entries` merged into the claim's status.devices (`object`, as read) and written;
  // a 409 is answered with a fresh read, once. Counted either way.
  void put_device_status(const std::string& ns, const std::string& name, const std::string& uid, nlohmann::json object,
                         const Result<nlohmann::json>& entries);
  // Outside mu_: one status write counted (status_reports or status_errors), a failure logged.
  void count_status(const std::string& uid, bool ok, const std::string& why);

  const DraServiceConfig config_;
  kube::Api& api_;
  DeviceScanFn scan_;
  SafeDir plugin_dir_;
  SafeDir cdi_dir_;
  std::vector<std::string> removed_at_start_;
  LatencyByResult prepare_latency_;  // null members without a registry
  LatencyByResult unprepare_latency_;

  mutable std::mutex mu_;
  Checkpoint checkpoint_;
  DraCounters counters_;
};

}  // namespace erdma::agent::dra
