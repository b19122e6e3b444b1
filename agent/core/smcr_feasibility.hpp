// Predicting whether SMC-R v2 can form for a pod's connections, from the pod's network layout and
// the node's RDMA netdevs, before any connection is made. Pure: the shell gathers the facts (pod
// netns over rtnetlink, node netdevs from sysfs/RDMA netlink and rtnetlink, the UEID table) and
// says the verdict in its log line, a metric and smc-status. The rules follow the kernel's SMC
// code (net/smc/smc_pnet.c, smc_ib.c, af_smc.c; drivers/infiniband/sw/rxe/rxe_net.c, 6.1 to 6.12);
// docs/smcr-pod-networks.md explains each one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace erdma::agent {

// An IPv4 address with its prefix length, as an interface carries it (10.77.0.11/24).
struct Ipv4Prefix {
  uint32_t address = 0;  // host byte order
  uint8_t prefix_len = 32;

  // "10.77.0.11/24"; a missing "/N" means /32. InvalidArgument for anything else.
  [[nodiscard]] static Result<Ipv4Prefix> parse(std::string_view text);
  [[nodiscard]] std::string to_string() const;
  // The kernel's inet_ifa_match(): `addr` lies in this address's subnet.
  [[nodiscard]] bool contains(uint32_t addr) const noexcept;
  friend bool operator==(const Ipv4Prefix&, const Ipv4Prefix&) = default;
};

// What rtnetlink's IFLA_INFO_KIND says about the pod's interface.
enum class PodLinkKind { Missing, Veth, Ipvlan, Macvlan, Other };
// "veth", "ipvlan", "macvlan" (and "macvtap", "ipvtap": they are the same uppers); anything else,
// including no kind (a physical device), is Other.
[[nodiscard]] PodLinkKind link_kind_of(std::string_view ifla_info_kind) noexcept;
[[nodiscard]] std::string_view to_string(PodLinkKind k) noexcept;

// Which RDMA driver sits on a netdev: Soft-RoCE, eRDMA, or anything else.
enum class RdmaDriverKind { Rxe, Erdma, Other };
// From the kernel's driver name ("rxe", "erdma"); Other for the rest.
[[nodiscard]] RdmaDriverKind driver_kind_of(std::string_view driver) noexcept;

// One RDMA netdev of the node, as seen in the node's network namespace.
struct NodeRdmaNetdev {
  std::string netdev;     // "eth0"
  std::string ib_device;  // "erdma_0", "rxe0"
  RdmaDriverKind kind = RdmaDriverKind::Other;
  std::vector<Ipv4Prefix> addresses;  // IPv4 addresses on the netdev
  bool roce_v1_gids = false;          // the port has RoCE v1 GIDs (SMC-R v1 could be proposed)
};

// Everything the prediction needs.
struct SmcrPodFacts {
  bool host_network = false;  // the pod uses the node's netns
  // The pod interface (smcr.podInterface) inside the pod's netns; ignored for host network.
  std::string interface = "eth0";
  PodLinkKind kind = PodLinkKind::Missing;
  std::string kind_name;              // IFLA_INFO_KIND as the kernel sent it ("" for none)
  std::vector<Ipv4Prefix> addresses;  // its IPv4 addresses; the first is the source SMC uses
  std::string lower;                  // ipvlan/macvlan: the lower device's name ("" when unknown)
  bool lower_in_node_netns = false;   // ... and it lives in the node's netns
  bool pod_pnet_entry = false;        // the pod's pnet table maps the interface (the agent's entry)
  // The RDMA device bound to the pod interface inside the pod's netns ("" for none): a per-pod
  // eRDMA device, or Soft-RoCE created there. Its GIDs are the pod's own addresses.
  std::string pod_rdma_device;
  RdmaDriverKind pod_rdma_kind = RdmaDriverKind::Other;
  int kernel_major = 0;              // the node kernel's major version (0 when unknown)
  std::vector<NodeRdmaNetdev> rdma;  // the node's RDMA netdevs
  bool ueid_set = false;             // the kernel's UEID table is not empty (SMC-R v2 needs one)
  // The kernel's SMC-D loopback device ("lo" on 7.x with DIBS_LO; "" when it has none) and the
  // PNETID on it ("" for none: SMC-D is offered to every connection within the node).
  std::string smcd_loopback_device;
  std::string smcd_loopback_pnet_id;
};

// WillBreak: SMC-R forms at one end only, and that end's connections abort (the application sees
// an error, not a fallback): worse than TCP.
enum class SmcrVerdict { Expected, WillFallBack, WillBreak, Unknown };
[[nodiscard]] std::string_view to_string(SmcrVerdict v) noexcept;

// Stable reason names (metric label values, log fields, smc-status).
enum class SmcrReason {
  HostNetwork,                 // hostNetwork pod: node to node, as the host setup makes it
  NoRdmaNetdev,                // no RDMA netdev with an IPv4 address on the node
  NoUeid,                      // no UEID: the kernel never proposes SMC-R v2
  PodInterfaceMissing,         // smcr.podInterface is not in the pod's netns
  NoPodIpv4,                   // the pod interface has no IPv4 address (SMC-R v2 is IPv4 only)
  PodSubnetOutsideRdmaNetdev,  // veth, pod IP outside every RDMA netdev subnet: client finds no GID
  NoPodPnetEntry,              // veth in the node subnet, but the pod's pnet table has no entry
  VethNodeSubnetRoute,         // veth, pod IP in the node subnet: the server's route check fails
  LowerNotRdmaNetdev,          // ipvlan/macvlan on a netdev without RDMA
  LowerDeviceUnknown,          // ipvlan/macvlan whose lower device is not in the node's netns
  IpvlanSoftroceRouting,       // ipvlan/macvlan on rxe before 7.x: rxe routes only in init_net
  IpvlanSoftroceLinkBreaks,    // ipvlan/macvlan on rxe, 7.x: the client's link comes up, the server's does not
  IpvlanOnRdmaNetdev,          // ipvlan/macvlan on the RDMA netdev, pod IP in its subnet
  IpvlanPodSubnetDiffers,      // ipvlan/macvlan on the RDMA netdev, pod IP in another subnet
  PodRdmaDevice,               // the pod interface carries an RDMA device of its own, in the pod's netns
  PodSoftroceInitialNetns,     // ... Soft-RoCE on a kernel before 7, whose rxe sends from the initial netns
  PodInterfaceKindOther,       // not veth/ipvlan/macvlan: not predicted
  RoceV1Possible,              // v2 cannot form, but the device has RoCE v1 GIDs
  FactsUnavailable,            // the shell could not gather the facts
};
inline constexpr SmcrReason kAllSmcrReasons[] = {SmcrReason::HostNetwork,
                                                 SmcrReason::NoRdmaNetdev,
                                                 SmcrReason::NoUeid,
                                                 SmcrReason::PodInterfaceMissing,
                                                 SmcrReason::NoPodIpv4,
                                                 SmcrReason::PodSubnetOutsideRdmaNetdev,
                                                 SmcrReason::NoPodPnetEntry,
                                                 SmcrReason::VethNodeSubnetRoute,
                                                 SmcrReason::LowerNotRdmaNetdev,
                                                 SmcrReason::LowerDeviceUnknown,
                                                 SmcrReason::IpvlanSoftroceRouting,
                                                 SmcrReason::IpvlanOnRdmaNetdev,
                                                 SmcrReason::IpvlanPodSubnetDiffers,
                                                 SmcrReason::PodRdmaDevice,
                                                 SmcrReason::PodSoftroceInitialNetns,
                                                 SmcrReason::PodInterfaceKindOther,
                                                 SmcrReason::RoceV1Possible,
                                                 SmcrReason::FactsUnavailable,
                                                 SmcrReason::IpvlanSoftroceLinkBreaks};
// "host-network", "no-rdma-netdev", ... (kebab case).
[[nodiscard]] std::string_view to_string(SmcrReason r) noexcept;
// The verdict a reason always comes with (each reason has exactly one).
[[nodiscard]] SmcrVerdict verdict_of(SmcrReason r) noexcept;

// Which side's kernel counts the fallback, for a connection between two pods of this layout.
enum class SmcrSide { None, Client, Server };
[[nodiscard]] std::string_view to_string(SmcrSide s) noexcept;

// What connections between two pods of one node use, beside the prediction across nodes.
enum class SameNodeMode {
  SmcdLoopback,  // SMC-D through the kernel's loopback device: offered first, needs no device
  AsAcrossNodes  // no loopback device, or turned off: the cross-node prediction applies
};
[[nodiscard]] std::string_view to_string(SameNodeMode m) noexcept;  // "smcd-loopback", "as-across-nodes"

struct SameNodePrediction {
  SameNodeMode mode = SameNodeMode::AsAcrossNodes;
  std::string detail;  // one line: why, and what `smcss` shows

  // "smcd-loopback: <detail>"
  [[nodiscard]] std::string summary() const;
};

// Same-node connections: SMC-D when the kernel has the loopback device and no PNETID on it (the
// kernel tries SMC-D before SMC-R, in any network namespace); else as across nodes.
[[nodiscard]] SameNodePrediction predict_same_node(const SmcrPodFacts& facts);

struct SmcrPrediction {
  SmcrVerdict verdict = SmcrVerdict::Unknown;
  SmcrReason reason = SmcrReason::FactsUnavailable;
  std::string fallback;  // the kernel's decline name it predicts ("NOSMCDEV"), "" for none
  SmcrSide side = SmcrSide::None;
  std::string detail;            // what was found and what to change, one line
  SameNodePrediction same_node;  // connections to pods of the same node (empty detail: not known)

  // "will-fall-back (pod-subnet-outside-rdma-netdev): <detail>"
  [[nodiscard]] std::string summary() const;
};

// The prediction for a pod whose connections go to a peer with the same layout on another node
// (the common case: one CNI for the cluster). Deterministic; the table in the .cpp and
// docs/smcr-pod-networks.md give the rules in order.
[[nodiscard]] SmcrPrediction predict_smcr(const SmcrPodFacts& facts);

// The prediction when the facts could not be gathered (`why` names what failed).
[[nodiscard]] SmcrPrediction unknown_prediction(const std::string& why);

}  // namespace erdma::agent
