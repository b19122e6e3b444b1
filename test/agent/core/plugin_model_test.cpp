// The pure plugin model: slot IDs, advertisement, Allocate answers, preferred allocation.
#include "agent/core/plugin_model.hpp"

#include <doctest/doctest.h>

#include "test/fakes/fake_rdma_devices.hpp"
#include "test/support.hpp"

namespace erdma::agent {
namespace {
using testing::make_device;
using V = std::vector<std::string>;

AllocateOptions opts(bool rdma_cm = true) {
  AllocateOptions o;
  o.rdma_cm_present = rdma_cm;
  return o;
}

// A device whose port 1 carries `gids` (index, address, type).
RdmaDevice with_gids(RdmaDevice d, std::vector<Gid> gids) {
  d.ports.front().gids = std::move(gids);
  return d;
}

constexpr const char* kLinkLocal = "fe80:0000:0000:0000:0216:3eff:fe00:0001";
constexpr const char* kV4a = "0000:0000:0000:0000:0000:ffff:0a00:0005";  // ::ffff:10.0.0.5
constexpr const char* kV4b = "0000:0000:0000:0000:0000:ffff:0a00:0106";

V ids_of(const std::string& dev, unsigned n) {
  V v;
  for (unsigned i = 0; i < n; ++i) v.push_back(slot_id(dev, i));
  return v;
}
}  // namespace

TEST_CASE("slot IDs embed the device name and parse back") {
  CHECK(slot_id("erdma_0", 17) == "erdma_0-17");
  auto ref = parse_slot_id("erdma_0-17", 64);
  REQUIRE(ref.ok());
  CHECK(ref->device == "erdma_0");
  CHECK(ref->index == 17);
  auto dashed = parse_slot_id("my-dev-3", 4);
  REQUIRE(dashed.ok());
  CHECK(dashed->device == "my-dev");
  CHECK(dashed->index == 3);

  for (const char* bad : {"", "erdma_0", "erdma_0-", "-3", "erdma_0-64", "erdma_0-017", "erdma_0-x", "erdma 0-1",
                          "erdma_0-99999999999", "erdma_0-+1"}) {
    CAPTURE(bad);
    auto r = parse_slot_id(bad, 64);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find(std::string("\"") + bad + "\"") != std::string::npos);
  }
  CHECK_FALSE(parse_slot_id(std::string(64, 'a') + "-1", 64).ok());
}

TEST_CASE("device names must leave room for the slot suffix within 63 characters") {
  CHECK(check_device_name_fits(std::string(60, 'a'), 64).ok());  // "-63": 63 total
  CHECK_FALSE(check_device_name_fits(std::string(61, 'a'), 64).ok());
  CHECK(check_device_name_fits(std::string(61, 'a'), 10).ok());  // "-9"
  CHECK(check_device_name_fits(std::string(61, 'a'), 1).ok());   // "-0"
  CHECK_FALSE(check_device_name_fits(std::string(62, 'a'), 1).ok());
}

TEST_CASE("advertised_devices: every slot, health from the ports, NUMA node, bad names noted") {
  std::vector<RdmaDevice> devices = {make_device("erdma_1", "uverbs1", 1, PortState::Down),
                                     make_device("erdma_0", "uverbs0", 0), make_device("bad name", "uverbs5", 0),
                                     make_device("erdma_0", "uverbs9", 0),
                                     make_device(std::string(62, 'x'), "uverbs6", 0)};
  const auto ad = advertised_devices(devices, 3);
  REQUIRE(ad.slots.size() == 6);
  CHECK(ad.slots[0] == AdvertisedSlot{"erdma_0-0", "erdma_0", true, 0});
  CHECK(ad.slots[2] == AdvertisedSlot{"erdma_0-2", "erdma_0", true, 0});
  CHECK(ad.slots[3] == AdvertisedSlot{"erdma_1-0", "erdma_1", false, 1});
  CHECK(ad.notes.size() == 3);
  for (const auto& s : ad.slots) CHECK(s.id.size() <= kMaxDeviceIdLen);
}

TEST_CASE("health: an ACTIVE port and a uverbs device, every other state is unhealthy and recovers") {
  auto d = make_device("erdma_0", "uverbs0", 0);
  CHECK(is_healthy(d));
  for (PortState s : {PortState::Down, PortState::Init, PortState::Armed, PortState::Unknown}) {
    d.ports[0].state = s;
    CAPTURE(to_string(s));
    CHECK_FALSE(is_healthy(d));
  }
  d.ports[0].state = PortState::ActiveDefer;
  CHECK(is_healthy(d));
  d.ports[0].state = PortState::Active;
  CHECK(is_healthy(d));
  d.uverbs.clear();
  CHECK_FALSE(is_healthy(d));
  d.uverbs = "uverbs0";
  d.ports.clear();
  CHECK_FALSE(is_healthy(d));
}

TEST_CASE("allocate_container: device nodes, env, notes") {
  const std::vector<RdmaDevice> devices = {make_device("erdma_0", "uverbs0", 0),
                                           make_device("erdma_1", "uverbs3", 1, PortState::Down)};
  auto a = allocate_container({"erdma_1-2", "erdma_0-0", "erdma_1-1"}, devices, 4, opts());
  REQUIRE(a.ok());
  CHECK(a->devices == V{"erdma_0", "erdma_1"});
  // No GIDs known: NCCL gets the devices but no GID index.
  CHECK(a->envs ==
        std::map<std::string, std::string>{{"ERDMA_DEVICES", "erdma_0,erdma_1"}, {"NCCL_IB_HCA", "=erdma_0,erdma_1"}});
  REQUIRE(a->device_nodes.size() == 3);
  CHECK(a->device_nodes[0] == DeviceNode{"/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0", "rw"});
  CHECK(a->device_nodes[1] == DeviceNode{"/dev/infiniband/uverbs3", "/dev/infiniband/uverbs3", "rw"});
  CHECK(a->device_nodes[2] == DeviceNode{"/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm", "rw"});
  REQUIRE(a->notes.size() == 1);  // erdma_1 is down right now (no GID anywhere is not worth a note)
  CHECK(a->notes[0].find("erdma_1") != std::string::npos);

  CHECK(a->mounts.empty());  // no preload directory configured

  AllocateOptions with_preload = opts();
  with_preload.preload_host_dir = "/var/lib/erdma-controller/lib";
  auto p = allocate_container({"erdma_0-0"}, devices, 4, with_preload);
  REQUIRE(p.ok());
  CHECK(p->mounts == std::vector<HostMount>{{"/usr/lib/smc", "/var/lib/erdma-controller/lib", true}});

  auto no_cm = allocate_container({"erdma_0-0"}, devices, 4, opts(false));
  REQUIRE(no_cm.ok());
  CHECK(no_cm->device_nodes.size() == 1);

  struct Case {
    V ids;
    ErrorCode code;
    const char* in_message;
  };
  for (const auto& c : std::vector<Case>{{{}, ErrorCode::InvalidArgument, "no device IDs"},
                                         {{"erdma_2-0"}, ErrorCode::NotFound, "erdma_0, erdma_1"},
                                         {{"erdma_0-9"}, ErrorCode::InvalidArgument, "erdma_0-9"},
                                         {{"erdma_0-1", "erdma_0-1"}, ErrorCode::InvalidArgument, "duplicate"},
                                         {V(9, "x"), ErrorCode::InvalidArgument, "advertises 8"}}) {
    CAPTURE(c.in_message);
    auto r = allocate_container(c.ids, devices, 4, opts());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == c.code);
    CHECK_MESSAGE(r.error().message.find(c.in_message) != std::string::npos, r.error().message);
  }
  auto no_uverbs = devices;
  no_uverbs[0].uverbs.clear();
  auto r = allocate_container({"erdma_0-0"}, no_uverbs, 4, opts());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::FailedPrecondition);
}

TEST_CASE("allocate_container: slots of two devices give both uverbs nodes, rdma_cm once, NCCL naming both") {
  const std::vector<RdmaDevice> devices = {
      with_gids(make_device("erdma_0", "uverbs0", 0), {{0, kLinkLocal, GidType::IbRoceV1, "eth0"},
                                                       {1, kLinkLocal, GidType::RoceV2, "eth0"},
                                                       {2, kV4a, GidType::IbRoceV1, "eth0"},
                                                       {3, kV4a, GidType::RoceV2, "eth0"}}),
      with_gids(make_device("erdma_1", "uverbs1", 1, PortState::Active, "eth1"), {{1, kV4b, GidType::RoceV2, "eth1"}}),
      make_device("erdma_10", "uverbs2", 1, PortState::Active, "eth2")};
  auto a = allocate_container({"erdma_1-0", "erdma_0-3"}, devices, 4, opts());
  REQUIRE(a.ok());
  CHECK(a->device_nodes == std::vector<DeviceNode>{{"/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0", "rw"},
                                                   {"/dev/infiniband/uverbs1", "/dev/infiniband/uverbs1", "rw"},
                                                   {"/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm", "rw"}});
  // Exact match: erdma_1 must not also select erdma_10.
  CHECK(a->envs.at("NCCL_IB_HCA") == "=erdma_0,erdma_1");
  // erdma_0's IPv4 RoCE v2 entry is 3, erdma_1's is 1: the first device's wins, and it is said.
  CHECK(a->envs.at("NCCL_IB_GID_INDEX") == "3");
  REQUIRE(a->notes.size() == 1);
  CHECK(a->notes[0].find("erdma_0: 3, erdma_1: 1") != std::string::npos);
  CHECK(a->envs.count("NCCL_SOCKET_IFNAME") == 0);  // off by default

  auto o = opts();
  o.nccl_socket_ifname = true;
  auto with_if = allocate_container({"erdma_1-0", "erdma_0-3"}, devices, 4, o);
  REQUIRE(with_if.ok());
  CHECK(with_if->envs.at("NCCL_SOCKET_IFNAME") == "=eth0,eth1");

  // A device without an IPv4 RoCE v2 entry beside ones that have it is worth saying.
  auto mixed = allocate_container({"erdma_1-0", "erdma_10-0"}, devices, 4, opts());
  REQUIRE(mixed.ok());
  CHECK(mixed->envs.at("NCCL_IB_GID_INDEX") == "1");
  REQUIRE(mixed->notes.size() == 1);
  CHECK(mixed->notes[0].find("no IPv4 RoCE v2 GID on erdma_10") != std::string::npos);

  auto one = allocate_container({"erdma_1-2"}, devices, 4, opts());
  REQUIRE(one.ok());
  CHECK(one->envs.at("NCCL_IB_GID_INDEX") == "1");
  CHECK(one->notes.empty());

  o = opts();
  o.nccl_env = false;
  auto off = allocate_container({"erdma_1-0", "erdma_0-3"}, devices, 4, o);
  REQUIRE(off.ok());
  CHECK(off->envs == std::map<std::string, std::string>{{"ERDMA_DEVICES", "erdma_0,erdma_1"}});

  o = opts();
  o.all_devices = true;
  auto all = allocate_container({"erdma_1-0"}, devices, 4, o);
  REQUIRE(all.ok());
  CHECK(all->devices == V{"erdma_0", "erdma_1", "erdma_10"});
  CHECK(all->device_nodes.size() == 4);
  CHECK(all->envs.at("NCCL_IB_HCA") == "=erdma_0,erdma_1,erdma_10");
}

TEST_CASE("ipv4_roce_v2_gid_index: the lowest RoCE v2 entry with an IPv4-mapped GID") {
  struct Case {
    const char* name;
    std::vector<Gid> gids;
    std::optional<unsigned> want;
  };
  for (const auto& c : std::vector<Case>{
           {"none", {}, std::nullopt},
           {"link-local only",
            {{0, kLinkLocal, GidType::IbRoceV1, ""}, {1, kLinkLocal, GidType::RoceV2, ""}},
            std::nullopt},
           {"v1 IPv4 is not enough", {{2, kV4a, GidType::IbRoceV1, ""}}, std::nullopt},
           {"unknown type is not enough", {{2, kV4a, GidType::Unknown, ""}}, std::nullopt},
           {"lowest of two", {{5, kV4b, GidType::RoceV2, ""}, {3, kV4a, GidType::RoceV2, ""}}, 3u},
           {"upper-case hex", {{4, "0000:0000:0000:0000:0000:FFFF:0A00:0005", GidType::RoceV2, ""}}, 4u},
           {"IPv6 global is not IPv4",
            {{1, "2001:0db8:0000:0000:0000:ffff:0a00:0005", GidType::RoceV2, ""}},
            std::nullopt},
       }) {
    CAPTURE(c.name);
    CHECK(ipv4_roce_v2_gid_index(with_gids(make_device("d", "uverbs0", 0), c.gids)) == c.want);
  }
  // A second port is looked at when the first has none.
  auto two = make_device("d", "uverbs0", 0);
  two.ports.push_back(RdmaPort{2, PortState::Active, "Ethernet", {{7, kV4a, GidType::RoceV2, ""}}});
  CHECK(ipv4_roce_v2_gid_index(two) == 7u);
}

TEST_CASE("preferred_allocation spreads over devices, NUMA-aware, then packs") {
  const std::vector<RdmaDevice> devices = {make_device("a", "uverbs0", 0), make_device("b", "uverbs1", 0),
                                           make_device("c", "uverbs2", 1), make_device("d", "uverbs3", -1)};
  V all;
  for (const char* d : {"a", "b", "c", "d"}) {
    auto v = ids_of(d, 4);
    all.insert(all.end(), v.begin(), v.end());
  }
  struct Case {
    const char* name;
    V available, must;
    int64_t size;
    V want;
  };
  const std::vector<Case> cases = {
      {"zero", all, {}, 0, {}},
      {"one slot: home NUMA node (most devices), lowest name", all, {}, 1, {"a-0"}},
      {"two: both devices of one NUMA node", all, {}, 2, {"a-0", "b-0"}},
      {"three: every NUMA node's devices before the one without NUMA", all, {}, 3, {"a-0", "b-0", "c-0"}},
      {"four: every device", all, {}, 4, {"a-0", "b-0", "c-0", "d-0"}},
      {"six: one per device, then packed onto the first", all, {}, 6, {"a-0", "b-0", "c-0", "d-0", "a-1", "a-2"}},
      {"more free slots first within a node", {"a-0", "b-0", "b-1", "c-3"}, {}, 2, {"b-0", "a-0"}},
      {"must include sets the home node", all, {"c-2"}, 2, {"c-2", "a-0"}},
      {"must include twice on one device", all, {"c-2", "c-3"}, 3, {"c-2", "c-3", "a-0"}},
      {"must include on two devices", all, {"a-3", "b-3"}, 4, {"a-3", "b-3", "c-0", "d-0"}},
      {"only must", all, {"d-1"}, 1, {"d-1"}},
      {"all available", {"a-1", "c-1"}, {}, 2, {"a-1", "c-1"}},
      {"one device only: packed", {"a-0", "a-1", "a-2"}, {}, 2, {"a-0", "a-1"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto r = preferred_allocation({c.available, c.must, c.size}, devices, 4);
    REQUIRE_OK(r);
    CHECK(*r == c.want);
  }

  for (const auto& entry :
       std::vector<std::pair<PreferredRequest, const char*>>{{{all, {}, -1}, "negative"},
                                                             {{{"a-0"}, {}, 2}, "cannot choose 2 of 1"},
                                                             {{{"a-0", "junk"}, {}, 1}, "junk"},
                                                             {{{"a-0"}, {"b-0"}, 1}, "not available"},
                                                             {{{"a-0", "a-1"}, {"a-0", "a-1"}, 1}, "do not fit"}}) {
    // Named copies, not structured bindings: clang 14 cannot capture those.
    const auto& req = entry.first;
    const char* text = entry.second;
    CAPTURE(text);
    auto r = preferred_allocation(req, devices, 4);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK_MESSAGE(r.error().message.find(text) != std::string::npos, r.error().message);
  }
}

TEST_CASE("devices_of: distinct device names, sorted") {
  auto r = devices_of({"b-1", "a-0", "b-0"}, 4);
  REQUIRE(r.ok());
  CHECK(*r == V{"a", "b"});
  CHECK_FALSE(devices_of({}, 4).ok());
  CHECK_FALSE(devices_of({"a-0", "zzz"}, 4).ok());
}

TEST_CASE("port state names") {
  CHECK(parse_port_state_name("active") == PortState::Active);
  CHECK(parse_port_state_name("ACTIVE_DEFER") == PortState::ActiveDefer);
  CHECK(parse_port_state_name("Down") == PortState::Down);
  CHECK_FALSE(parse_port_state_name("up").has_value());
  CHECK(is_uverbs_name("uverbs0"));
  CHECK(is_uverbs_name("uverbs12"));
  CHECK_FALSE(is_uverbs_name("uverbs"));
  CHECK_FALSE(is_uverbs_name("uverbsX"));
  CHECK_FALSE(is_uverbs_name("/dev/infiniband/uverbs0"));
}

}  // namespace erdma::agent

namespace erdma::agent {

TEST_CASE("the SMC-R resource: Allocate gives the library mount and nothing of the device") {
  const std::vector<RdmaDevice> devices = {make_device("erdma_0", "uverbs0", 0)};
  AllocateOptions smcr;
  smcr.library_only = true;
  smcr.preload_host_dir = "/var/lib/erdma-controller/lib";
  auto a = allocate_container({"erdma_0-7", "erdma_0-200"}, devices, 256, smcr);
  REQUIRE(a.ok());
  CHECK(a->device_nodes.empty());  // no uverbs, no rdma_cm: SMC-R is the kernel's
  CHECK(a->envs.empty());          // no NCCL_*, no ERDMA_DEVICES
  CHECK(a->mounts == std::vector<HostMount>{{"/usr/lib/smc", "/var/lib/erdma-controller/lib", true}});
  // The IDs are still checked: unknown and malformed ones are refused as for the devices.
  CHECK(allocate_container({"erdma_9-0"}, devices, 256, smcr).error().code == ErrorCode::NotFound);
  CHECK(allocate_container({"erdma_0-256"}, devices, 256, smcr).error().code == ErrorCode::InvalidArgument);
}

TEST_CASE("endpoints: the eRDMA devices always, the SMC-R resource with SMC-R on and a name set") {
  AgentConfig cfg;
  const PluginEndpoint erdma = erdma_endpoint(cfg);
  CHECK(erdma.resource_name == "aliyun/erdma");
  CHECK(erdma.socket_name == "erdma.sock");
  CHECK(erdma.slots_per_device == 64);
  CHECK_FALSE(erdma.allocate.library_only);
  CHECK(erdma.allocate.preload_host_dir == cfg.smcr.preload_host_dir);  // eRDMA containers of SMC-R pods

  auto smcr = smcr_endpoint(cfg);
  REQUIRE(smcr.has_value());
  CHECK(smcr->resource_name == "aliyun/erdma-smcr");
  CHECK(smcr->socket_name == "erdma-smcr.sock");
  CHECK(smcr->slots_per_device == 256);
  CHECK(smcr->allocate.library_only);
  CHECK(smcr->allocate.preload_host_dir == cfg.smcr.preload_host_dir);

  cfg.smcr.resource_name.clear();
  CHECK_FALSE(smcr_endpoint(cfg).has_value());
  cfg.smcr.resource_name = "aliyun/erdma-smcr";
  cfg.smcr.enabled = false;
  CHECK_FALSE(smcr_endpoint(cfg).has_value());
  CHECK(erdma_endpoint(cfg).allocate.preload_host_dir.empty());
}

}  // namespace erdma::agent
