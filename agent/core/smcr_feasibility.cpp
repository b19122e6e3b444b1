// SMC-R feasibility rules (see smcr_feasibility.hpp). Each branch names the kernel function whose
// check decides it; docs/smcr-pod-networks.md gives the reasoning for cluster admins.
#include "agent/core/smcr_feasibility.hpp"

#include <algorithm>
#include <charconv>

namespace erdma::agent {
namespace {

std::string ipv4_text(uint32_t a) {
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 0xff) + "." + std::to_string((a >> 8) & 0xff) +
         "." + std::to_string(a & 0xff);
}

std::string addresses_text(const std::vector<NodeRdmaNetdev>& rdma) {
  std::string out;
  for (const auto& n : rdma) {
    std::string addrs;
    for (const auto& a : n.addresses) addrs += (addrs.empty() ? "" : ",") + a.to_string();
    out += (out.empty() ? "" : ", ") + n.netdev + " " + (addrs.empty() ? "no IPv4" : addrs);
  }
  return out;
}

bool netdev_contains(const NodeRdmaNetdev& n, uint32_t addr) {
  return std::any_of(n.addresses.begin(), n.addresses.end(), [&](const Ipv4Prefix& p) { return p.contains(addr); });
}

SmcrPrediction make(SmcrReason r, std::string fallback, SmcrSide side, std::string detail) {
  return SmcrPrediction{verdict_of(r), r, std::move(fallback), side, std::move(detail), {}};
}

constexpr const char* kUseRdmaUpper =
    "use hostNetwork, or an ipvlan/macvlan CNI on the eRDMA netdev (e.g. Terway's ipvlan mode) that gives pods "
    "addresses in the netdev's subnet";

}  // namespace

Result<Ipv4Prefix> Ipv4Prefix::parse(std::string_view text) {
  auto bad = [&] {
    return make_error(ErrorCode::InvalidArgument,
                      "\"" + std::string(text) + "\" is not an IPv4 address like 10.0.0.1/24");
  };
  Ipv4Prefix out;
  std::string_view addr = text;
  if (auto slash = text.find('/'); slash != std::string_view::npos) {
    addr = text.substr(0, slash);
    const auto len = text.substr(slash + 1);
    unsigned n = 0;
    auto [p, ec] = std::from_chars(len.data(), len.data() + len.size(), n);
    if (len.empty() || ec != std::errc() || p != len.data() + len.size() || n > 32) return bad();
    out.prefix_len = static_cast<uint8_t>(n);
  }
  uint32_t value = 0;
  const char* p = addr.data();
  const char* end = addr.data() + addr.size();
  for (int i = 0; i < 4; ++i) {
    unsigned octet = 0;
    auto [q, ec] = std::from_chars(p, end, octet);
    if (ec != std::errc() || q == p || q - p > 3 || octet > 255) return bad();
    value = (value << 8) | octet;
    p = q;
    if (i < 3) {
      if (p == end || *p != '.') return bad();
      ++p;
    }
  }
  if (p != end) return bad();
  out.address = value;
  return out;
}

std::string Ipv4Prefix::to_string() const { return ipv4_text(address) + "/" + std::to_string(prefix_len); }

bool Ipv4Prefix::contains(uint32_t addr) const noexcept {
  const uint32_t mask = prefix_len == 0 ? 0 : ~uint32_t{0} << (32 - prefix_len);
  return ((addr ^ address) & mask) == 0;
}

PodLinkKind link_kind_of(std::string_view k) noexcept {
  if (k == "veth") return PodLinkKind::Veth;
  if (k == "ipvlan" || k == "ipvtap") return PodLinkKind::Ipvlan;
  if (k == "macvlan" || k == "macvtap") return PodLinkKind::Macvlan;
  return PodLinkKind::Other;
}

std::string_view to_string(PodLinkKind k) noexcept {
  switch (k) {
    case PodLinkKind::Missing: return "missing";
    case PodLinkKind::Veth: return "veth";
    case PodLinkKind::Ipvlan: return "ipvlan";
    case PodLinkKind::Macvlan: return "macvlan";
    case PodLinkKind::Other: return "other";
  }
  return "other";
}

RdmaDriverKind driver_kind_of(std::string_view driver) noexcept {
  if (driver == "rxe") return RdmaDriverKind::Rxe;
  if (driver == "erdma") return RdmaDriverKind::Erdma;
  return RdmaDriverKind::Other;
}

std::string_view to_string(SmcrVerdict v) noexcept {
  switch (v) {
    case SmcrVerdict::Expected: return "expected";
    case SmcrVerdict::WillFallBack: return "will-fall-back";
    case SmcrVerdict::WillBreak: return "will-break";
    case SmcrVerdict::Unknown: return "unknown";
  }
  return "unknown";
}

std::string_view to_string(SmcrReason r) noexcept {
  switch (r) {
    case SmcrReason::HostNetwork: return "host-network";
    case SmcrReason::NoRdmaNetdev: return "no-rdma-netdev";
    case SmcrReason::NoUeid: return "no-ueid";
    case SmcrReason::PodInterfaceMissing: return "pod-interface-missing";
    case SmcrReason::NoPodIpv4: return "no-pod-ipv4";
    case SmcrReason::PodSubnetOutsideRdmaNetdev: return "pod-subnet-outside-rdma-netdev";
    case SmcrReason::NoPodPnetEntry: return "no-pod-pnet-entry";
    case SmcrReason::VethNodeSubnetRoute: return "veth-node-subnet-route";
    case SmcrReason::LowerNotRdmaNetdev: return "lower-not-rdma-netdev";
    case SmcrReason::LowerDeviceUnknown: return "lower-device-unknown";
    case SmcrReason::IpvlanSoftroceRouting: return "ipvlan-softroce-routing";
    case SmcrReason::IpvlanSoftroceLinkBreaks: return "ipvlan-softroce-link-breaks";
    case SmcrReason::IpvlanOnRdmaNetdev: return "ipvlan-on-rdma-netdev";
    case SmcrReason::IpvlanPodSubnetDiffers: return "ipvlan-pod-subnet-differs";
    case SmcrReason::PodRdmaDevice: return "pod-rdma-device";
    case SmcrReason::PodSoftroceInitialNetns: return "pod-softroce-initial-netns";
    case SmcrReason::PodInterfaceKindOther: return "pod-interface-kind-other";
    case SmcrReason::RoceV1Possible: return "roce-v1-possible";
    case SmcrReason::FactsUnavailable: return "facts-unavailable";
  }
  return "facts-unavailable";
}

SmcrVerdict verdict_of(SmcrReason r) noexcept {
  switch (r) {
    case SmcrReason::HostNetwork:
    case SmcrReason::IpvlanOnRdmaNetdev:
    case SmcrReason::PodRdmaDevice: return SmcrVerdict::Expected;
    case SmcrReason::NoRdmaNetdev:
    case SmcrReason::NoUeid:
    case SmcrReason::NoPodIpv4:
    case SmcrReason::PodSubnetOutsideRdmaNetdev:
    case SmcrReason::NoPodPnetEntry:
    case SmcrReason::VethNodeSubnetRoute:
    case SmcrReason::LowerNotRdmaNetdev:
    case SmcrReason::IpvlanSoftroceRouting: return SmcrVerdict::WillFallBack;
    case SmcrReason::IpvlanSoftroceLinkBreaks: return SmcrVerdict::WillBreak;
    case SmcrReason::PodInterfaceMissing:
    case SmcrReason::LowerDeviceUnknown:
    case SmcrReason::IpvlanPodSubnetDiffers:
    case SmcrReason::PodSoftroceInitialNetns:
    case SmcrReason::PodInterfaceKindOther:
    case SmcrReason::RoceV1Possible:
    case SmcrReason::FactsUnavailable: return SmcrVerdict::Unknown;
  }
  return SmcrVerdict::Unknown;
}

std::string_view to_string(SmcrSide s) noexcept {
  switch (s) {
    case SmcrSide::None: return "none";
    case SmcrSide::Client: return "client";
    case SmcrSide::Server: return "server";
  }
  return "none";
}

std::string SmcrPrediction::summary() const {
  return std::string(to_string(verdict)) + " (" + std::string(to_string(reason)) + "): " + detail;
}

std::string_view to_string(SameNodeMode m) noexcept {
  return m == SameNodeMode::SmcdLoopback ? "smcd-loopback" : "as-across-nodes";
}

std::string SameNodePrediction::summary() const { return std::string(to_string(mode)) + ": " + detail; }

SameNodePrediction predict_same_node(const SmcrPodFacts& f) {
  if (f.smcd_loopback_device.empty()) {
    return {SameNodeMode::AsAcrossNodes, "the kernel has no SMC-D loopback device (DIBS_LO), so pods of one node "
                                         "connect as pods of two nodes do"};
  }
  if (!f.smcd_loopback_pnet_id.empty()) {
    return {SameNodeMode::AsAcrossNodes,
            "SMC-D loopback device " + f.smcd_loopback_device + " is off (PNETID " + f.smcd_loopback_pnet_id +
                " on it, no netdev carries it; smcr.smcdLoopback: false), so pods of one node connect as pods "
                "of two nodes do"};
  }
  return {SameNodeMode::SmcdLoopback,
          "connections to pods of this node use SMC-D through the kernel's loopback device " + f.smcd_loopback_device +
              ", which the kernel offers before SMC-R (smcss shows SMCD; smcr.smcdLoopback: false turns it off)"};
}

SmcrPrediction unknown_prediction(const std::string& why) {
  return make(SmcrReason::FactsUnavailable, "", SmcrSide::None,
              "the agent could not look at the pod's network: " + why);
}

namespace {

// The SMC-R v2 rules; predict_smcr() adds the SMC-R v1 caveat on top.
SmcrPrediction predict_v2(const SmcrPodFacts& f) {
  std::vector<const NodeRdmaNetdev*> with_ipv4;
  for (const auto& n : f.rdma) {
    if (!n.netdev.empty() && !n.addresses.empty()) with_ipv4.push_back(&n);
  }
  const bool any_rdma_netdev =
      std::any_of(f.rdma.begin(), f.rdma.end(), [](const NodeRdmaNetdev& n) { return !n.netdev.empty(); });
  // smc_ib_determine_gid_rcu(): a RoCE v2 GID needs an IPv4 address on its netdev.
  if (!any_rdma_netdev || (f.host_network && with_ipv4.empty())) {
    return make(SmcrReason::NoRdmaNetdev, "NOSMCDEV", SmcrSide::Client,
                f.rdma.empty()
                    ? "the node has no RDMA device: check `erdma-agent devices` (driver loaded? NIC attached?)"
                    : "no RDMA netdev of the node has an IPv4 address (" + addresses_text(f.rdma) +
                          "): give the eRDMA NIC its address");
  }
  // smc_find_proposal_devices(): SMC-R v2 is proposed only with a UEID (smc_clc_ueid_count()).
  if (!f.ueid_set) {
    return make(
        SmcrReason::NoUeid, "NOSMCDEV", SmcrSide::Client,
        "the kernel's UEID table is empty, so SMC-R v2 is never proposed: set smcr.ueid, the same on every node");
  }
  if (f.host_network) {
    return make(SmcrReason::HostNetwork, "", SmcrSide::None,
                "the pod uses the node's netns: SMC-R v2 forms node to node over " +
                    addresses_text({*with_ipv4.front()}) +
                    " when the peer has the same UEID and connects to an address in that subnet");
  }
  const std::string& ifname = f.interface;
  if (f.kind == PodLinkKind::Missing) {
    return make(SmcrReason::PodInterfaceMissing, "", SmcrSide::None,
                "the pod's netns has no interface " + ifname + ": set smcr.podInterface to the pod's interface name");
  }
  if (f.kind == PodLinkKind::Other) {
    return make(SmcrReason::PodInterfaceKindOther, "", SmcrSide::None,
                ifname + " is " +
                    (f.kind_name.empty() ? std::string("a device without a link kind") : "a " + f.kind_name) +
                    ": the agent predicts veth, ipvlan and macvlan pods only");
  }
  // smc_find_proposal_devices(): SMC-R v2 needs an AF_INET socket.
  if (f.addresses.empty()) {
    return make(SmcrReason::NoPodIpv4, "NOSMCDEV", SmcrSide::Client,
                ifname + " has no IPv4 address; SMC-R v2 works over IPv4 only: give pods an IPv4 address");
  }
  const uint32_t src = f.addresses.front().address;
  const std::string pod_ip = ipv4_text(src);
  // An RDMA device on the pod's own interface, in the pod's netns: the pod IP is a RoCE v2 GID of
  // that device, the client proposes it, and the server finds its own device's GID and route in
  // its own netns. Measured with Soft-RoCE on 7.3 between pods on two nodes (SMC-R v2, the pods'
  // own devices, test/cluster/vm-nodes.sh). Soft-RoCE before 7.x sends only from the initial netns.
  if (!f.pod_rdma_device.empty()) {
    if (f.pod_rdma_kind == RdmaDriverKind::Rxe && f.kernel_major > 0 && f.kernel_major < 7) {
      return make(SmcrReason::PodSoftroceInitialNetns, "", SmcrSide::None,
                  ifname + " carries Soft-RoCE " + f.pod_rdma_device + " in the pod's netns, but this kernel (" +
                      std::to_string(f.kernel_major) +
                      ".x) sends rxe traffic from the initial netns only (per-netns rxe sockets came with 7.x): "
                      "not predicted; use a 7.x kernel, a real eRDMA device, or hostNetwork");
    }
    return make(SmcrReason::PodRdmaDevice, "", SmcrSide::None,
                ifname + " carries its own RDMA device " + f.pod_rdma_device + " in the pod's netns, so pod IP " +
                    pod_ip + " is a RoCE v2 GID of it: SMC-R v2 forms from the pod's netns when the peer has one too");
  }
  const bool in_node_subnet = std::any_of(with_ipv4.begin(), with_ipv4.end(),
                                          [&](const NodeRdmaNetdev* n) { return netdev_contains(*n, src); });

  if (f.kind == PodLinkKind::Ipvlan || f.kind == PodLinkKind::Macvlan) {
    const std::string kind(to_string(f.kind));
    if (f.lower.empty() || !f.lower_in_node_netns) {
      return make(SmcrReason::LowerDeviceUnknown, "", SmcrSide::None,
                  ifname + " is a " + kind + " whose lower device is not in the node's netns: not predicted");
    }
    auto it = std::find_if(f.rdma.begin(), f.rdma.end(), [&](const NodeRdmaNetdev& n) { return n.netdev == f.lower; });
    if (it != f.rdma.end()) {
      // pnet_find_base_ndev() reaches the RDMA netdev; roce_gid_mgmt gives the pod IP its own GID.
      const bool in_lower_subnet = netdev_contains(*it, src);
      if (it->kind == RdmaDriverKind::Rxe && f.kernel_major >= 7 && in_lower_subnet) {
        // Measured on 7.3 (test/cluster/vm-nodes.sh, namespace ipvlan-rxe): the client's link to the
        // server's pod GID comes up and the client enters SMC-R, but RoCE traffic to the server
        // pod's address never reaches the server's rxe (rxe0's counters: nothing received), so the
        // server declines after the confirm-link timeout while the client's writes go unanswered:
        // its sends stall, and end in ECONNABORTED when the link is given up.
        return make(SmcrReason::IpvlanSoftroceLinkBreaks, "TIMEOUT_CL", SmcrSide::Server,
                    ifname + " is a " + kind + " on " + f.lower + " with Soft-RoCE (" + it->ib_device +
                        "): on this kernel the client's SMC-R link comes up but RoCE traffic to the server pod's "
                        "address is not received, so the server falls back (TIMEOUT_CL) while the client stays "
                        "on SMC-R: nothing it sends arrives, its sends stall once its send buffer is full and end "
                        "in ECONNABORTED or the application's timeout; do not annotate these pods: use "
                        "hostNetwork, an RDMA device of the pod's own, or a real eRDMA device");
      }
      if (it->kind == RdmaDriverKind::Rxe) {
        // rxe_find_route4() routes in init_net with the pod's GID as source: not local there
        // (measured on 6.12: the server declines TIMEOUT_CL, and the client, told so, falls back
        // too with PEERDECL; the connection goes on over TCP).
        return make(SmcrReason::IpvlanSoftroceRouting, in_lower_subnet ? "TIMEOUT_CL" : "", SmcrSide::Server,
                    ifname + " is a " + kind + " on " + f.lower + " with Soft-RoCE (" + it->ib_device +
                        "): the SMC handshake passes, but rxe routes and receives only in the node's netns, so link "
                        "setup times out" +
                        (in_lower_subnet ? "" : " (the decline code depends on the pod's routes)") +
                        "; only a real eRDMA device can carry SMC-R from a pod netns, or use hostNetwork");
      }
      if (in_lower_subnet) {
        return make(SmcrReason::IpvlanOnRdmaNetdev, "", SmcrSide::None,
                    ifname + " is a " + kind + " on " + f.lower + " (" + it->ib_device + ") with pod IP " + pod_ip +
                        " in its subnet: the SMC core rules pass; expected to form; not proven on " +
                        (it->kind == RdmaDriverKind::Erdma ? "eRDMA" : "this device"));
      }
      return make(SmcrReason::IpvlanPodSubnetDiffers, "", SmcrSide::None,
                  ifname + " is a " + kind + " on " + f.lower + " but pod IP " + pod_ip + " is outside " +
                      addresses_text({*it}) +
                      ": the client proposes the pod's own GID and the outcome depends on the peer's routes; not "
                      "predicted. Give pods addresses in the netdev's subnet");
    }
    // The pod's pnet entry finds the RDMA device, but only node GIDs sit on it.
    if (!in_node_subnet || !f.pod_pnet_entry) {
      return make(SmcrReason::LowerNotRdmaNetdev, "NOSMCDEV", SmcrSide::Client,
                  ifname + " is a " + kind + " on " + f.lower + ", which has no RDMA device (RDMA netdevs: " +
                      addresses_text(f.rdma) + "): put the pod's " + kind + " on the eRDMA netdev");
    }
    return make(SmcrReason::LowerNotRdmaNetdev, "NOSMCRDEV", SmcrSide::Server,
                ifname + " is a " + kind + " on " + f.lower + ", which has no RDMA device; pod IP " + pod_ip +
                    " is in an RDMA netdev's subnet, so the client proposes the node's GID and the server's route "
                    "check fails: put the pod's " +
                    kind + " on the eRDMA netdev");
  }

  // veth: no upper device of the RDMA netdev, so no GID of its own.
  if (!in_node_subnet) {
    // smc_ib_determine_gid_rcu(): the source is in no RDMA netdev's subnet.
    return make(SmcrReason::PodSubnetOutsideRdmaNetdev, "NOSMCDEV", SmcrSide::Client,
                "pod IP " + pod_ip + " on veth " + ifname + " is outside the RDMA netdevs' subnets (" +
                    addresses_text(f.rdma) + "): the client finds no RoCE GID; " + kUseRdmaUpper);
  }
  if (!f.pod_pnet_entry) {
    // smc_pnet_find_roce_by_pnetid(): no PNETID for a veth and no RDMA port on it.
    return make(SmcrReason::NoPodPnetEntry, "NOSMCDEV", SmcrSide::Client,
                "the pod's pnet table does not map " + ifname +
                    " (the pod setup did not add its entry), so the client finds no RDMA device; even with it, a "
                    "veth pod falls back (veth-node-subnet-route)");
  }
  // smc_find_rdma_v2_device_serv() -> smc_ib_find_route() in the GID netdev's netns (the node's).
  return make(SmcrReason::VethNodeSubnetRoute, "NOSMCRDEV", SmcrSide::Server,
              "pod IP " + pod_ip + " on veth " + ifname +
                  " is inside an RDMA netdev's subnet, so the client proposes the node's GID, and the server's route "
                  "check from the pod IP in the node's netns fails (the client sees PEERDECL); " +
                  kUseRdmaUpper);
}

}  // namespace

SmcrPrediction predict_smcr(const SmcrPodFacts& f) {
  auto p = predict_v2(f);
  p.same_node = predict_same_node(f);
  // SMC-R v1 needs no IPv4 and no UEID; it is proposed when the device found has RoCE v1 GIDs
  // (smc_ib_determine_gid_rcu() without smcrv2). rxe has RoCE v2 GIDs only.
  const bool v2_rule = p.reason == SmcrReason::PodSubnetOutsideRdmaNetdev ||
                       p.reason == SmcrReason::VethNodeSubnetRoute || p.reason == SmcrReason::LowerNotRdmaNetdev ||
                       p.reason == SmcrReason::NoUeid || p.reason == SmcrReason::NoPodIpv4;
  const bool device_found = f.host_network || f.pod_pnet_entry;
  auto v1 = std::find_if(f.rdma.begin(), f.rdma.end(), [](const NodeRdmaNetdev& n) { return n.roce_v1_gids; });
  if (p.verdict == SmcrVerdict::WillFallBack && v2_rule && device_found && v1 != f.rdma.end()) {
    auto v1p = make(SmcrReason::RoceV1Possible, "", SmcrSide::None,
                    "SMC-R v2 cannot form (" + std::string(to_string(p.reason)) + "), but " + v1->ib_device +
                        " has RoCE v1 GIDs, so SMC-R v1 may still be negotiated: not predicted");
    v1p.same_node = std::move(p.same_node);
    return v1p;
  }
  // With the SMC-D loopback device on, a client that finds no SMC-R device still proposes SMC-D
  // v2 over the loopback device; a peer on another node declines it (measured on 7.3 with veth
  // pods without a device of their own: NOSMCD2DEV 0x03030007 at the server, PEERDECL at the
  // client), so the kernel counts the fallback at the server.
  if (p.fallback == "NOSMCDEV" && p.side == SmcrSide::Client && p.same_node.mode == SameNodeMode::SmcdLoopback) {
    p.fallback = "NOSMCD2DEV";
    p.side = SmcrSide::Server;
    p.detail += " (the client proposes the SMC-D loopback device " + f.smcd_loopback_device +
                " instead, which a peer on another node declines)";
  }
  return p;
}

}  // namespace erdma::agent
