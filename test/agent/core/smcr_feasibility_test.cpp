// SMC-R feasibility: one row per pod network layout, with the verdict, reason and kernel decline
// the two-VM experiment (Soft-RoCE, kernel 6.12) saw or the kernel's rules imply.
#include "agent/core/smcr_feasibility.hpp"

#include <set>

#include <doctest/doctest.h>

namespace erdma::agent {
namespace {

Ipv4Prefix ip(const char* text) { return Ipv4Prefix::parse(text).value(); }

NodeRdmaNetdev netdev(std::string name, RdmaDriverKind kind, std::vector<Ipv4Prefix> addrs, bool v1 = false) {
  return NodeRdmaNetdev{std::move(name), kind == RdmaDriverKind::Rxe ? "rxe0" : "erdma_0", kind, std::move(addrs), v1};
}

// A node with eth0 10.77.0.1/24 under `kind`, a UEID, and a pod the agent configured.
SmcrPodFacts pod(RdmaDriverKind kind, PodLinkKind link, std::vector<Ipv4Prefix> addrs, std::string lower = "") {
  SmcrPodFacts f;
  f.kind = link;
  f.kind_name = std::string(to_string(link));
  f.addresses = std::move(addrs);
  f.lower_in_node_netns = !lower.empty();
  f.lower = std::move(lower);
  f.pod_pnet_entry = true;
  f.rdma = {netdev("eth0", kind, {ip("10.77.0.1/24")})};
  f.ueid_set = true;
  return f;
}

template <typename F>
SmcrPodFacts with(SmcrPodFacts f, F&& change) {
  change(f);
  return f;
}

}  // namespace

TEST_CASE("IPv4 prefixes parse, print and match like inet_ifa_match") {
  CHECK(ip("10.77.0.11/24").to_string() == "10.77.0.11/24");
  CHECK(ip("10.77.0.11").prefix_len == 32);
  CHECK(ip("10.77.0.1/24").contains(ip("10.77.0.200").address));
  CHECK_FALSE(ip("10.77.0.1/24").contains(ip("10.77.1.1").address));
  CHECK(ip("0.0.0.0/0").contains(ip("192.168.1.1").address));
  CHECK(ip("10.77.0.11/32").contains(ip("10.77.0.11").address));
  CHECK_FALSE(ip("10.77.0.11/32").contains(ip("10.77.0.12").address));
  for (const char* bad : {"", "10.0.0", "10.0.0.256", "10.0.0.1/33", "10.0.0.1/", "a.b.c.d", "10.0.0.1.2", "10..0.1",
                          "10.0.0.1/2x", "1000.0.0.1"}) {
    CAPTURE(bad);
    CHECK(Ipv4Prefix::parse(bad).error().code == ErrorCode::InvalidArgument);
  }
}

TEST_CASE("link kinds and driver kinds from the kernel's names") {
  CHECK(link_kind_of("veth") == PodLinkKind::Veth);
  CHECK(link_kind_of("ipvlan") == PodLinkKind::Ipvlan);
  CHECK(link_kind_of("macvlan") == PodLinkKind::Macvlan);
  CHECK(link_kind_of("macvtap") == PodLinkKind::Macvlan);
  CHECK(link_kind_of("") == PodLinkKind::Other);
  CHECK(link_kind_of("bridge") == PodLinkKind::Other);
  CHECK(driver_kind_of("rxe") == RdmaDriverKind::Rxe);
  CHECK(driver_kind_of("erdma") == RdmaDriverKind::Erdma);
  CHECK(driver_kind_of("mlx5") == RdmaDriverKind::Other);
}

TEST_CASE("each pod network layout gets its verdict, reason and kernel decline") {
  using K = RdmaDriverKind;
  using L = PodLinkKind;
  struct Case {
    const char* name;
    SmcrPodFacts facts;
    SmcrVerdict verdict;
    SmcrReason reason;
    const char* fallback;
    SmcrSide side;
  };
  const auto V = SmcrVerdict::WillFallBack;
  const auto E = SmcrVerdict::Expected;
  const auto U = SmcrVerdict::Unknown;
  const auto B = SmcrVerdict::WillBreak;
  const std::vector<Case> cases = {
      // Two-VM experiment, baseline: init_net to init_net forms SMC-R v2.
      {"hostNetwork on rxe", with(pod(K::Rxe, L::Missing, {}), [](auto& f) { f.host_network = true; }), E,
       SmcrReason::HostNetwork, "", SmcrSide::None},
      {"hostNetwork on erdma", with(pod(K::Erdma, L::Missing, {}), [](auto& f) { f.host_network = true; }), E,
       SmcrReason::HostNetwork, "", SmcrSide::None},
      {"hostNetwork without UEID",
       with(pod(K::Erdma, L::Missing, {}),
            [](auto& f) {
              f.host_network = true;
              f.ueid_set = false;
            }),
       V, SmcrReason::NoUeid, "NOSMCDEV", SmcrSide::Client},
      {"hostNetwork, RDMA netdev without IPv4",
       with(pod(K::Erdma, L::Missing, {}),
            [](auto& f) {
              f.host_network = true;
              f.rdma[0].addresses.clear();
            }),
       V, SmcrReason::NoRdmaNetdev, "NOSMCDEV", SmcrSide::Client},
      // (d) bridge-CNI style: a pod subnet per node.
      {"veth, pod subnet per node", pod(K::Rxe, L::Veth, {ip("10.244.1.2/24")}), V,
       SmcrReason::PodSubnetOutsideRdmaNetdev, "NOSMCDEV", SmcrSide::Client},
      {"veth, pod subnet per node, no pod pnet entry",
       with(pod(K::Rxe, L::Veth, {ip("10.244.1.2/24")}), [](auto& f) { f.pod_pnet_entry = false; }), V,
       SmcrReason::PodSubnetOutsideRdmaNetdev, "NOSMCDEV", SmcrSide::Client},
      {"veth, pod subnet per node, erdma", pod(K::Erdma, L::Veth, {ip("10.244.1.2/24")}), V,
       SmcrReason::PodSubnetOutsideRdmaNetdev, "NOSMCDEV", SmcrSide::Client},
      // (c) Terway veth style: a /32 inside the node subnet.
      {"veth, /32 in the node subnet", pod(K::Rxe, L::Veth, {ip("10.77.0.11/32")}), V, SmcrReason::VethNodeSubnetRoute,
       "NOSMCRDEV", SmcrSide::Server},
      {"veth, /32 in the node subnet, erdma", pod(K::Erdma, L::Veth, {ip("10.77.0.11/32")}), V,
       SmcrReason::VethNodeSubnetRoute, "NOSMCRDEV", SmcrSide::Server},
      {"veth in the node subnet without the pod's pnet entry",
       with(pod(K::Erdma, L::Veth, {ip("10.77.0.11/32")}), [](auto& f) { f.pod_pnet_entry = false; }), V,
       SmcrReason::NoPodPnetEntry, "NOSMCDEV", SmcrSide::Client},
      // (a)/(b): ipvlan/macvlan on the RDMA netdev, pod IP in its subnet.
      {"ipvlan on rxe's netdev", pod(K::Rxe, L::Ipvlan, {ip("10.77.0.11/24")}, "eth0"), V,
       SmcrReason::IpvlanSoftroceRouting, "TIMEOUT_CL", SmcrSide::Server},
      {"macvlan on rxe's netdev", pod(K::Rxe, L::Macvlan, {ip("10.77.0.11/24")}, "eth0"), V,
       SmcrReason::IpvlanSoftroceRouting, "TIMEOUT_CL", SmcrSide::Server},
      {"ipvlan on rxe's netdev without any pod pnet entry (a')",
       with(pod(K::Rxe, L::Ipvlan, {ip("10.77.0.11/24")}, "eth0"), [](auto& f) { f.pod_pnet_entry = false; }), V,
       SmcrReason::IpvlanSoftroceRouting, "TIMEOUT_CL", SmcrSide::Server},
      {"ipvlan on rxe's netdev, pod IP in another subnet", pod(K::Rxe, L::Ipvlan, {ip("10.99.0.11/24")}, "eth0"), V,
       SmcrReason::IpvlanSoftroceRouting, "", SmcrSide::Server},
      // Measured on 7.3 (test/cluster/vm-nodes.sh, namespace ipvlan-rxe): the client stays on SMC-R
      // while the server declines, and the client's connection aborts.
      {"ipvlan on rxe's netdev, kernel 7",
       with(pod(K::Rxe, L::Ipvlan, {ip("10.77.0.11/24")}, "eth0"), [](auto& f) { f.kernel_major = 7; }), B,
       SmcrReason::IpvlanSoftroceLinkBreaks, "TIMEOUT_CL", SmcrSide::Server},
      {"macvlan on rxe's netdev, kernel 7",
       with(pod(K::Rxe, L::Macvlan, {ip("10.77.0.11/24")}, "eth0"), [](auto& f) { f.kernel_major = 7; }), B,
       SmcrReason::IpvlanSoftroceLinkBreaks, "TIMEOUT_CL", SmcrSide::Server},
      {"ipvlan on rxe's netdev, kernel 6: both ends fall back",
       with(pod(K::Rxe, L::Ipvlan, {ip("10.77.0.11/24")}, "eth0"), [](auto& f) { f.kernel_major = 6; }), V,
       SmcrReason::IpvlanSoftroceRouting, "TIMEOUT_CL", SmcrSide::Server},
      {"ipvlan on rxe's netdev, kernel 7, pod IP in another subnet: not measured",
       with(pod(K::Rxe, L::Ipvlan, {ip("10.99.0.11/24")}, "eth0"), [](auto& f) { f.kernel_major = 7; }), V,
       SmcrReason::IpvlanSoftroceRouting, "", SmcrSide::Server},
      {"ipvlan on the eRDMA netdev, kernel 7: the Soft-RoCE rule does not apply",
       with(pod(K::Erdma, L::Ipvlan, {ip("10.77.0.11/24")}, "eth0"), [](auto& f) { f.kernel_major = 7; }), E,
       SmcrReason::IpvlanOnRdmaNetdev, "", SmcrSide::None},
      {"ipvlan on the eRDMA netdev", pod(K::Erdma, L::Ipvlan, {ip("10.77.0.11/24")}, "eth0"), E,
       SmcrReason::IpvlanOnRdmaNetdev, "", SmcrSide::None},
      {"macvlan on the eRDMA netdev", pod(K::Erdma, L::Macvlan, {ip("10.77.0.11/24")}, "eth0"), E,
       SmcrReason::IpvlanOnRdmaNetdev, "", SmcrSide::None},
      {"ipvlan on the eRDMA netdev, pod IP in another subnet", pod(K::Erdma, L::Ipvlan, {ip("10.99.0.11/24")}, "eth0"),
       U, SmcrReason::IpvlanPodSubnetDiffers, "", SmcrSide::None},
      // ipvlan/macvlan on a netdev without RDMA.
      {"ipvlan on a plain NIC, other subnet",
       with(pod(K::Erdma, L::Ipvlan, {ip("192.168.5.11/24")}, "ens6"), [](auto&) {}), V, SmcrReason::LowerNotRdmaNetdev,
       "NOSMCDEV", SmcrSide::Client},
      {"ipvlan on a plain NIC, RDMA netdev's subnet", pod(K::Erdma, L::Ipvlan, {ip("10.77.0.11/24")}, "ens6"), V,
       SmcrReason::LowerNotRdmaNetdev, "NOSMCRDEV", SmcrSide::Server},
      {"ipvlan on a plain NIC, RDMA netdev's subnet, no pod pnet entry",
       with(pod(K::Erdma, L::Ipvlan, {ip("10.77.0.11/24")}, "ens6"), [](auto& f) { f.pod_pnet_entry = false; }), V,
       SmcrReason::LowerNotRdmaNetdev, "NOSMCDEV", SmcrSide::Client},
      {"ipvlan whose lower device is elsewhere",
       with(pod(K::Erdma, L::Ipvlan, {ip("10.77.0.11/24")}, "eth0"), [](auto& f) { f.lower_in_node_netns = false; }), U,
       SmcrReason::LowerDeviceUnknown, "", SmcrSide::None},
      // The pod's own RDMA device on its interface, in its netns (the VM nodes' CNI step, a per-pod
      // eRDMA device): measured SMCR between pods of two nodes on 7.3 (test/cluster/vm-nodes.sh).
      {"veth with its own Soft-RoCE device, kernel 7",
       with(pod(K::Rxe, L::Veth, {ip("10.89.1.3/24")}),
            [](auto& f) {
              f.pod_rdma_device = "rxe_0889634b2727";
              f.pod_rdma_kind = K::Rxe;
              f.kernel_major = 7;
            }),
       E, SmcrReason::PodRdmaDevice, "", SmcrSide::None},
      {"veth with its own eRDMA device, kernel 5",
       with(pod(K::Erdma, L::Veth, {ip("10.89.1.3/24")}),
            [](auto& f) {
              f.pod_rdma_device = "erdma_1";
              f.pod_rdma_kind = K::Erdma;
              f.kernel_major = 5;
            }),
       E, SmcrReason::PodRdmaDevice, "", SmcrSide::None},
      {"veth with its own Soft-RoCE device, kernel 6: rxe sends from the initial netns",
       with(pod(K::Rxe, L::Veth, {ip("10.89.1.3/24")}),
            [](auto& f) {
              f.pod_rdma_device = "rxe_0889634b2727";
              f.pod_rdma_kind = K::Rxe;
              f.kernel_major = 6;
            }),
       U, SmcrReason::PodSoftroceInitialNetns, "", SmcrSide::None},
      {"a pod RDMA device still needs a UEID",
       with(pod(K::Rxe, L::Veth, {ip("10.89.1.3/24")}),
            [](auto& f) {
              f.pod_rdma_device = "rxe_0889634b2727";
              f.pod_rdma_kind = K::Rxe;
              f.kernel_major = 7;
              f.ueid_set = false;
            }),
       V, SmcrReason::NoUeid, "NOSMCDEV", SmcrSide::Client},
      // Node and pod facts that stop every layout.
      {"no RDMA device", with(pod(K::Erdma, L::Ipvlan, {ip("10.77.0.11/24")}, "eth0"), [](auto& f) { f.rdma.clear(); }),
       V, SmcrReason::NoRdmaNetdev, "NOSMCDEV", SmcrSide::Client},
      {"no UEID", with(pod(K::Erdma, L::Ipvlan, {ip("10.77.0.11/24")}, "eth0"), [](auto& f) { f.ueid_set = false; }), V,
       SmcrReason::NoUeid, "NOSMCDEV", SmcrSide::Client},
      {"pod interface missing", pod(K::Erdma, L::Missing, {}), U, SmcrReason::PodInterfaceMissing, "", SmcrSide::None},
      {"pod interface of another kind", pod(K::Erdma, L::Other, {ip("10.77.0.11/24")}), U,
       SmcrReason::PodInterfaceKindOther, "", SmcrSide::None},
      {"IPv6-only pod", pod(K::Erdma, L::Ipvlan, {}, "eth0"), V, SmcrReason::NoPodIpv4, "NOSMCDEV", SmcrSide::Client},
      // The first IPv4 address is the source; a second one does not rescue a veth.
      {"veth with a second address in the node subnet",
       pod(K::Rxe, L::Veth, {ip("10.244.1.2/24"), ip("10.77.0.11/32")}), V, SmcrReason::PodSubnetOutsideRdmaNetdev,
       "NOSMCDEV", SmcrSide::Client},
      // Several RDMA netdevs: any subnet counts for the client's GID choice.
      {"veth in the second RDMA netdev's subnet",
       with(pod(K::Erdma, L::Veth, {ip("10.88.0.11/32")}),
            [](auto& f) { f.rdma.push_back(netdev("eth1", RdmaDriverKind::Erdma, {ip("10.88.0.1/24")})); }),
       V, SmcrReason::VethNodeSubnetRoute, "NOSMCRDEV", SmcrSide::Server},
      {"ipvlan on the second RDMA netdev",
       with(pod(K::Erdma, L::Ipvlan, {ip("10.88.0.11/24")}, "eth1"),
            [](auto& f) { f.rdma.push_back(netdev("eth1", RdmaDriverKind::Erdma, {ip("10.88.0.1/24")})); }),
       E, SmcrReason::IpvlanOnRdmaNetdev, "", SmcrSide::None},
      // SMC-R v1: a device with RoCE v1 GIDs may still negotiate v1 where v2 cannot form.
      {"veth on a device with RoCE v1 GIDs",
       with(pod(K::Other, L::Veth, {ip("10.244.1.2/24")}), [](auto& f) { f.rdma[0].roce_v1_gids = true; }), U,
       SmcrReason::RoceV1Possible, "", SmcrSide::None},
      {"veth on a device with RoCE v1 GIDs, no pod pnet entry",
       with(pod(K::Other, L::Veth, {ip("10.244.1.2/24")}),
            [](auto& f) {
              f.rdma[0].roce_v1_gids = true;
              f.pod_pnet_entry = false;
            }),
       V, SmcrReason::PodSubnetOutsideRdmaNetdev, "NOSMCDEV", SmcrSide::Client},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto p = predict_smcr(c.facts);
    CHECK(p.verdict == c.verdict);
    CHECK(to_string(p.reason) == to_string(c.reason));
    CHECK(p.fallback == c.fallback);
    CHECK(to_string(p.side) == to_string(c.side));
    CHECK_FALSE(p.detail.empty());
    CHECK(p.verdict == verdict_of(p.reason));
  }
}

TEST_CASE("the user-facing line says what to change") {
  using K = RdmaDriverKind;
  const auto veth = predict_smcr(pod(K::Rxe, PodLinkKind::Veth, {ip("10.244.1.2/24")}));
  CHECK(veth.summary().rfind("will-fall-back (pod-subnet-outside-rdma-netdev): pod IP 10.244.1.2", 0) == 0);
  CHECK(veth.detail.find("hostNetwork") != std::string::npos);
  CHECK(veth.detail.find("10.77.0.1/24") != std::string::npos);
  const auto erdma = predict_smcr(pod(K::Erdma, PodLinkKind::Ipvlan, {ip("10.77.0.11/24")}, "eth0"));
  CHECK(erdma.detail.find("not proven on eRDMA") != std::string::npos);
  CHECK(predict_smcr(with(pod(K::Erdma, PodLinkKind::Veth, {}), [](auto& f) {
          f.ueid_set = false;
        })).detail.find("smcr.ueid") != std::string::npos);
  const auto missing =
      predict_smcr(with(pod(K::Erdma, PodLinkKind::Missing, {}), [](auto& f) { f.interface = "net1"; }));
  CHECK(missing.detail.find("net1") != std::string::npos);
  CHECK(unknown_prediction("netns gone").summary() ==
        "unknown (facts-unavailable): the agent could not look at the pod's network: netns gone");
}

TEST_CASE("reason names are stable, distinct and kebab case") {
  std::set<std::string> seen;
  for (auto r : kAllSmcrReasons) {
    const std::string name(to_string(r));
    CAPTURE(name);
    CHECK(seen.insert(name).second);
    CHECK(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos);
  }
  CHECK(seen.size() == 19);
  CHECK(to_string(SmcrReason::PodRdmaDevice) == "pod-rdma-device");
  CHECK(to_string(SmcrReason::VethNodeSubnetRoute) == "veth-node-subnet-route");
  CHECK(to_string(SmcrVerdict::WillFallBack) == "will-fall-back");
  CHECK(to_string(SmcrVerdict::WillBreak) == "will-break");
  CHECK(to_string(SmcrReason::IpvlanSoftroceLinkBreaks) == "ipvlan-softroce-link-breaks");
  CHECK(verdict_of(SmcrReason::IpvlanSoftroceLinkBreaks) == SmcrVerdict::WillBreak);
}

TEST_CASE("same-node connections: SMC-D through the loopback device unless it is absent or off") {
  const auto base = pod(RdmaDriverKind::Rxe, PodLinkKind::Veth, {ip("10.89.1.5/24")});
  struct Case {
    const char* device;
    const char* pnet_id;
    SameNodeMode want;
    const char* says;
  };
  for (const auto& c :
       std::vector<Case>{{"lo", "", SameNodeMode::SmcdLoopback, "SMC-D through the kernel's loopback device lo"},
                         {"lo", "ERDMANOSMCD", SameNodeMode::AsAcrossNodes, "PNETID ERDMANOSMCD"},
                         {"", "", SameNodeMode::AsAcrossNodes, "no SMC-D loopback device"}}) {
    CAPTURE(c.device);
    CAPTURE(c.pnet_id);
    const auto f = with(base, [&](SmcrPodFacts& x) {
      x.smcd_loopback_device = c.device;
      x.smcd_loopback_pnet_id = c.pnet_id;
    });
    const auto s = predict_same_node(f);
    CHECK(s.mode == c.want);
    CHECK(s.detail.find(c.says) != std::string::npos);
    // predict_smcr() carries it beside the cross-node verdict, which it does not change.
    const auto p = predict_smcr(f);
    CHECK(p.same_node.mode == c.want);
    CHECK(p.reason == predict_smcr(base).reason);
  }
  // A client without an SMC-R device proposes the loopback device instead: the peer on another
  // node declines it (NOSMCD2DEV at the server, the client's PEERDECL), as measured on 7.3.
  const auto none = predict_smcr(base);
  REQUIRE(none.reason == SmcrReason::PodSubnetOutsideRdmaNetdev);
  CHECK(none.fallback == "NOSMCDEV");
  CHECK(none.side == SmcrSide::Client);
  const auto lo = predict_smcr(with(base, [](SmcrPodFacts& x) { x.smcd_loopback_device = "lo"; }));
  CHECK(lo.reason == SmcrReason::PodSubnetOutsideRdmaNetdev);
  CHECK(lo.verdict == SmcrVerdict::WillFallBack);
  CHECK(lo.fallback == "NOSMCD2DEV");
  CHECK(lo.side == SmcrSide::Server);
  CHECK(lo.detail.find("SMC-D loopback device lo") != std::string::npos);
  const auto off = predict_smcr(with(base, [](SmcrPodFacts& x) {
    x.smcd_loopback_device = "lo";
    x.smcd_loopback_pnet_id = "ERDMANOSMCD";
  }));
  CHECK(off.fallback == "NOSMCDEV");
  CHECK(off.side == SmcrSide::Client);
  CHECK(to_string(SameNodeMode::SmcdLoopback) == "smcd-loopback");
  CHECK(to_string(SameNodeMode::AsAcrossNodes) == "as-across-nodes");
  CHECK(predict_same_node(with(base, [](SmcrPodFacts& x) { x.smcd_loopback_device = "lo"; }))
            .summary()
            .rfind("smcd-loopback: ", 0) == 0);
}

}  // namespace erdma::agent
