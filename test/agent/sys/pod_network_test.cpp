// The pod network inspector against real namespaces this machine creates (needs root): a stand-in
// node netns with a dummy "RDMA netdev", a veth pod and an ipvlan pod on that netdev. No traffic
// is sent; everything is removed afterwards.
#include "agent/sys/pod_netns.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <unistd.h>

#include "test/fakes/fake_smc.hpp"
#include "test/skip.hpp"
#include "test/support.hpp"

using namespace erdma;
using namespace erdma::agent;

namespace {

bool sh(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

std::string tag() { return std::to_string(::getpid() % 100000); }

// Whether this kernel can create a link of `type` (a module may be missing: some CI kernels have
// no dummy or ipvlan), tried inside a scratch namespace.
bool kernel_has(const std::string& scratch, const std::string& type, const std::string& lower = "") {
  const std::string link = lower.empty() ? "" : " link " + lower;
  const bool ok = sh("ip -n " + scratch + " link add probe0" + link + " type " + type);
  sh("ip -n " + scratch + " link del probe0");
  return ok;
}

// node: rd<tag> 10.77.0.1/24 (a dummy, else a bridge: any Ethernet device stands in for the RDMA
// netdev) and a veth end; veth pod: 10.244.1.2/24; an ipvlan (else macvlan) pod on rd<tag>:
// 10.77.0.11/24.
struct Layout {
  std::string netdev_type;
  std::string upper_type;
  std::string node = "erdma-pn-node-" + tag();
  std::string veth_pod = "erdma-pn-veth-" + tag();
  std::string ipvlan_pod = "erdma-pn-ipv-" + tag();
  std::string rdma_netdev = "rd" + tag();
  bool ok = false;
  Layout() {
    if (!sh("ip netns add " + node)) return;
    netdev_type = kernel_has(node, "dummy") ? "dummy" : kernel_has(node, "bridge") ? "bridge" : "";
    if (netdev_type.empty() || !sh("ip -n " + node + " link add " + rdma_netdev + " type " + netdev_type)) return;
    upper_type = kernel_has(node, "ipvlan mode l2", rdma_netdev)        ? "ipvlan mode l2"
                 : kernel_has(node, "macvlan mode bridge", rdma_netdev) ? "macvlan mode bridge"
                                                                        : "";
    if (upper_type.empty()) return;
    ok = sh("ip netns add " + veth_pod) && sh("ip netns add " + ipvlan_pod) &&
         sh("ip -n " + node + " addr add 10.77.0.1/24 dev " + rdma_netdev) &&
         sh("ip -n " + node + " link set " + rdma_netdev + " up") &&
         sh("ip -n " + node + " link add vh0 type veth peer name eth0 netns " + veth_pod) &&
         sh("ip -n " + veth_pod + " addr add 10.244.1.2/24 dev eth0") &&
         sh("ip -n " + node + " link add ipv0 link " + rdma_netdev + " type " + upper_type) &&
         sh("ip -n " + node + " link set ipv0 netns " + ipvlan_pod) &&
         sh("ip -n " + ipvlan_pod + " link set ipv0 name eth0") &&
         sh("ip -n " + ipvlan_pod + " addr add 10.77.0.11/24 dev eth0");
  }
  ~Layout() {
    for (const auto& n : {ipvlan_pod, veth_pod, node}) sh("ip netns del " + n);
  }
  static NetnsRef ref(const std::string& name) { return NetnsRef::of_path("/var/run/netns/" + name); }
};

auto soon() { return std::chrono::steady_clock::now() + std::chrono::seconds(20); }

}  // namespace

TEST_CASE("the inspector reads a veth pod and an ipvlan pod on the RDMA netdev") {
  if (::geteuid() != 0) erdma::testing::skip_or_fail("needs root to create network namespaces");
  if (!sh("ip -V")) erdma::testing::skip_or_fail("needs the ip tool (iproute2)");
  Layout l;
  if (!l.ok && (l.netdev_type.empty() || l.upper_type.empty())) {
    erdma::testing::skip_test("this kernel can create neither dummy nor bridge devices, or neither ipvlan nor macvlan");
  }
  REQUIRE_MESSAGE(l.ok, "could not create the test namespaces and devices");
  MESSAGE("stand-in RDMA netdev: " << l.netdev_type << ", pod upper device: " << l.upper_type);
  const PodLinkKind upper = l.upper_type.rfind("ipvlan", 0) == 0 ? PodLinkKind::Ipvlan : PodLinkKind::Macvlan;

  SetnsNetns netns;
  RdmaDevice dev;
  dev.name = "rxe_test0";
  dev.driver = "rxe";
  dev.netdev = l.rdma_netdev;
  auto pnet = std::make_shared<agent::testing::FakePnetTable>(false);
  auto info = std::make_shared<agent::testing::FakeSmcInfo>();
  info->table = {Ueid::parse("SMCR-TEST").value()};
  KernelPodNetworkInspector inspector(
      netns, Layout::ref(l.node), [dev]() -> Result<std::vector<RdmaDevice>> { return std::vector<RdmaDevice>{dev}; },
      [pnet]() -> Result<std::unique_ptr<PnetTable>> {
        return std::unique_ptr<PnetTable>(new agent::testing::FakePnetTable(*pnet));
      },
      [info]() -> Result<std::unique_ptr<SmcInfo>> {
        return std::unique_ptr<SmcInfo>(new agent::testing::FakeSmcInfo(*info));
      });

  SUBCASE("veth pod") {
    pnet->entries = {PnetEntry::eth("ERDMA", "eth0").value()};
    auto f = inspector.gather(Layout::ref(l.veth_pod), "eth0", "ERDMA", soon());
    REQUIRE_OK(f);
    CHECK_FALSE(f->host_network);
    CHECK(f->kind == PodLinkKind::Veth);
    CHECK(f->kind_name == "veth");
    REQUIRE(f->addresses.size() == 1);
    CHECK(f->addresses[0].to_string() == "10.244.1.2/24");
    CHECK(f->pod_pnet_entry);
    CHECK(f->ueid_set);
    REQUIRE(f->rdma.size() == 1);
    CHECK(f->rdma[0].netdev == l.rdma_netdev);
    CHECK(f->rdma[0].kind == RdmaDriverKind::Rxe);
    REQUIRE(f->rdma[0].addresses.size() == 1);
    CHECK(f->rdma[0].addresses[0].to_string() == "10.77.0.1/24");
    CHECK(predict_smcr(*f).reason == SmcrReason::PodSubnetOutsideRdmaNetdev);
  }
  SUBCASE("ipvlan (or macvlan) pod on the RDMA netdev") {
    auto f = inspector.gather(Layout::ref(l.ipvlan_pod), "eth0", "ERDMA", soon());
    REQUIRE_OK(f);
    CHECK(f->kind == upper);
    REQUIRE(f->addresses.size() == 1);
    CHECK(f->addresses[0].to_string() == "10.77.0.11/24");
    CHECK(f->lower == l.rdma_netdev);
    CHECK(f->lower_in_node_netns);
    CHECK_FALSE(f->pod_pnet_entry);  // the table holds no entry for it
    // This machine's own kernel decides which of the Soft-RoCE ipvlan rules applies.
    CHECK(predict_smcr(*f).reason ==
          (f->kernel_major >= 7 ? SmcrReason::IpvlanSoftroceLinkBreaks : SmcrReason::IpvlanSoftroceRouting));
    CHECK(predict_smcr(*f).fallback == "TIMEOUT_CL");
  }
  SUBCASE("another interface name, and the PNETID must match") {
    pnet->entries = {PnetEntry::eth("OTHER", "eth0").value()};
    auto f = inspector.gather(Layout::ref(l.veth_pod), "net1", "ERDMA", soon());
    REQUIRE(f.ok());
    CHECK(f->kind == PodLinkKind::Missing);
    auto g = inspector.gather(Layout::ref(l.veth_pod), "eth0", "ERDMA", soon());
    REQUIRE(g.ok());
    CHECK_FALSE(g->pod_pnet_entry);
  }
  SUBCASE("a host-network pod reads only the node") {
    info->table.clear();
    auto f = inspector.gather(std::nullopt, "eth0", "ERDMA", soon());
    REQUIRE(f.ok());
    CHECK(f->host_network);
    CHECK_FALSE(f->ueid_set);
    CHECK(predict_smcr(*f).reason == SmcrReason::NoUeid);
  }
  SUBCASE("a vanished pod netns is NotFound") {
    auto f = inspector.gather(NetnsRef::of_path("/var/run/netns/erdma-pn-none-" + tag()), "eth0", "ERDMA", soon());
    REQUIRE_FALSE(f.ok());
    CHECK(f.error().code == ErrorCode::NotFound);
  }
}
