// What the DRA driver prepares for one ResourceClaim (resource.k8s.io/v1), decided from the claim
// object the API server returned and the kubelet's reference to it; and the status.devices[]
// entries the driver may report for the claim. Pure: JSON and the node's scan in, values out. The
// shell (agent/dra) fetches the claim, writes the CDI spec and the checkpoint.
//
// Field names are those of k8s.io/api v0.37.2 resource/v1/types.go.
//
// The driver's opaque configuration (DeviceClass spec.config[] or ResourceClaim
// spec.devices.config[], `opaque.driver` = the driver name), `opaque.parameters`:
//   {"apiVersion": "erdma.aliyun.com/v1alpha1", "kind": "ErdmaConfig", "mode": "rdma" | "smcr"}
// every member required, no other member allowed. "rdma" (also the mode without any config):
// the cards' uverbs, rdma_cm and the NCCL env; "smcr": the SMC-R preload library and no RDMA
// device (cdi_spec.hpp). A config applies to the requests it lists (a main request name covers
// its subrequests; no list = every request). Where several apply to a request, FromClaim beats
// FromClass and, within one source, the later entry beats the earlier: the scheduler's allocator
// writes the class configs first and the claim's after them (k8s.io/dynamic-resource-allocation
// v0.37.2 structured/internal/stable/allocator_stable.go), and Kubernetes' own test driver applies
// them in that order, last one winning (kubernetes v1.37.2 test/e2e/dra/test-driver/app/
// kubeletplugin.go). One exception: a claim's config may not turn a request its class makes SMC-R
// into RDMA (PermissionDenied): the SMC-R class must not hand out raw verbs. One claim is all RDMA
// or all SMC-R: a CDI spec serves a claim in one mode.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/core/cdi_spec.hpp"
#include "agent/core/dra_checkpoint.hpp"
#include "agent/core/rdma_device.hpp"
#include "common/contract.hpp"
#include "common/result.hpp"

namespace erdma::agent {

inline constexpr std::string_view kErdmaConfigApiVersion = "erdma.aliyun.com/v1alpha1";
inline constexpr std::string_view kErdmaConfigKind = "ErdmaConfig";
// types.go OpaqueParametersMaxLength: the API server refuses more; a longer one is not ours.
inline constexpr size_t kMaxOpaqueParametersBytes = 10 * 1024;

// The kubelet's reference to a claim (NodePrepareResources' Claim message).
struct ClaimRef {
  std::string ns;
  std::string name;
  std::string uid;
};

enum class ClaimMode { Rdma, Smcr };
[[nodiscard]] std::string_view to_string(ClaimMode mode) noexcept;

// Reads an opaque config's parameters (see above). InvalidArgument naming the member that is
// wrong, unknown or missing and the values allowed.
[[nodiscard]] Result<ClaimMode> parse_erdma_config(const nlohmann::json& parameters);

// One allocation result of this driver, mapped to the node's card.
struct ClaimDevice {
  std::vector<std::string> requests;  // main request names (a subrequest's "main/sub" -> "main"), sorted
  std::string pool;
  std::string device;
  std::string card;
  // The result's shareID: set when the device allows several allocations (consumable capacity)
  // and this is one share of it; the answer and the claim's status.devices must name it.
  std::string share_id;

  friend bool operator==(const ClaimDevice&, const ClaimDevice&) = default;
};

struct ClaimPlan {
  ClaimRef ref;
  ClaimMode mode = ClaimMode::Rdma;
  std::vector<ClaimDevice> devices;  // sorted by pool, device, share; a device (share) allocated
                                     // for two requests is one entry naming both
  CdiClaim cdi;                      // what build_cdi_spec takes
  std::vector<std::string> notes;    // other drivers' results skipped, and the like
};

// Decides what to prepare for `claim` (the ResourceClaim object as GET returned it), asked for by
// `ref`, on a node whose pool is `pool` and whose cards are `cards`:
//   - metadata.uid must be ref.uid: FailedPrecondition "claim was deleted and created again"
//     otherwise (the kubelet retries with the new object's UID once the pod is re-admitted);
//   - status.allocation must be there: FailedPrecondition "not allocated";
//   - the results of `driver` (others' ignored): none is FailedPrecondition; a result of another
//     pool is NotFound (allocated on another node's pool), a device no card of `cards` is
//     published as (dra_device_name) is NotFound naming it;
//   - the mode of each result from the configs of `driver` (InvalidArgument for a malformed
//     config or parameters of ours, for an unknown source, and for a claim mixing modes).
// Messages name the claim as "claim <ns>/<name> (<uid>)" and say what to fix. InvalidArgument
// for a claim object that is not one (missing or mistyped members).
[[nodiscard]] Result<ClaimPlan> plan_claim(const nlohmann::json& claim, const ClaimRef& ref,
                                           const std::vector<RdmaDevice>& cards, std::string_view pool,
                                           std::string_view driver = contract::kDraDriverName);

// The checkpoint record for a plan whose spec build_cdi_spec made: the devices with their CDI
// device names (spec.cdi_ids per card) and the spec's file name. Internal when the spec lacks a
// card of the plan (a plan and a spec of different claims).
[[nodiscard]] Result<PreparedClaim> prepared_claim(const ClaimPlan& plan, const CdiSpec& spec);

// The network facts of one card that a claim's status may carry.
struct CardNetwork {
  std::string interface_name;    // the card's netdev, e.g. "eth0"
  std::vector<std::string> ips;  // CIDR, e.g. "10.0.0.5/24", "2001:db8::5/64"
  std::string hardware_address;  // e.g. "00:16:3e:00:00:01"
};

// status.devices[] entries for a prepared claim: per device {driver, pool, device, networkData:
// {interfaceName, ips, hardwareAddress}} from `networks` (by card); members without a value are
// left out, and a card without facts gets no networkData. In device order. InvalidArgument when
// a fact breaks the API's limits (interfaceName ≤ 256 bytes, ≤ 16 IPs, each an address with a
// prefix length, no duplicates, hardwareAddress ≤ 128 bytes), naming the card.
[[nodiscard]] Result<nlohmann::json> device_status_entries(const PreparedClaim& claim,
                                                           const std::map<std::string, CardNetwork>& networks,
                                                           std::string_view driver = contract::kDraDriverName);

// What a claim's status says of the pod's side, as a condition a controller can wait on: whether
// the pod's network namespace is set up for the claim (the CDI hook's work, agent/core/cdi_hook.hpp).
struct PodSideStatus {
  bool ready = false;   // the Ready condition's status
  std::string reason;   // its reason, CamelCase (metav1.Condition)
  std::string message;  // its message
  std::string since;    // its lastTransitionTime, RFC 3339 ("2026-12-08T01:02:03Z")
};

// status.devices[] entries with the pod's side: device_status_entries over `networks` (by card:
// for a pod with a netns of its own, the pod's interface for every card, never the node's netdev;
// for a hostNetwork pod, each card's netdev), each entry with one condition {type: Ready, status,
// reason, message, lastTransitionTime} (kubectl wait --for=jsonpath=...). InvalidArgument when a
// network breaks the API's limits (as device_status_entries), the reason is not CamelCase (the
// API's pattern, at most 1024 bytes) or `since` is empty; the message is cut to the API's 32768
// bytes, on a character.
[[nodiscard]] Result<nlohmann::json> pod_side_status_entries(const PreparedClaim& claim,
                                                             const std::map<std::string, CardNetwork>& networks,
                                                             const PodSideStatus& side,
                                                             std::string_view driver = contract::kDraDriverName);

// The lastTransitionTime a Ready condition of status `ready` keeps: the one this driver's first
// entry in `claim`'s status.devices has when its Ready condition has that status already, else
// `now` (a condition's time moves only when its status does). Anything malformed: `now`. Pure.
[[nodiscard]] std::string ready_since(const nlohmann::json& claim, bool ready, const std::string& now,
                                      std::string_view driver = contract::kDraDriverName);

// `network` for each card of the claim: a pod's one interface, whichever card carries it.
[[nodiscard]] std::map<std::string, CardNetwork> every_card(const PreparedClaim& claim, const CardNetwork& network);

// A pod a claim is reserved for: its name and, when the entry has one, its UID (which an Event on
// the pod needs: kubectl describe pod matches on it).
struct ReservedPod {
  std::string name;
  std::string uid;
  bool operator==(const ReservedPod&) const = default;
};

// The pods `claim` is reserved for (status.reservedFor entries whose resource is "pods"), in
// their order. Anything else, or a claim without that list, gives none: the answers are the API
// server's, read for Events only. Pure.
[[nodiscard]] std::vector<ReservedPod> reserved_pods(const nlohmann::json& claim);

// The claim's status.devices with this driver's entries replaced by `entries` (others' kept, in
// their order, ours after them): what the shell PUTs to resourceclaims/<name>/status.
[[nodiscard]] nlohmann::json merged_device_status(const nlohmann::json& claim, const nlohmann::json& entries,
                                                  std::string_view driver = contract::kDraDriverName);

}  // namespace erdma::agent
