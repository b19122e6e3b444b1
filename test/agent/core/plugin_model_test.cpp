// The pure plugin model: slot IDs, advertisement, Allocate answers, preferred allocation.
#include "agent/core/plugin_model.hpp"

#include <doctest/doctest.h>

#include "test/fakes/fake_rdma_devices.hpp"

namespace erdma::agent {
namespace {
using testing::make_device;
using V = std::vector<std::string>;

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
  CHECK(check_device_name_fits(std::string(60, 'a'), 64).ok());   // "-63": 63 total
  CHECK_FALSE(check_device_name_fits(std::string(61, 'a'), 64).ok());
  CHECK(check_device_name_fits(std::string(61, 'a'), 10).ok());   // "-9"
  CHECK(check_device_name_fits(std::string(61, 'a'), 1).ok());    // "-0"
  CHECK_FALSE(check_device_name_fits(std::string(62, 'a'), 1).ok());
}

TEST_CASE("advertised_devices: every slot, health from the ports, NUMA node, bad names noted") {
  std::vector<RdmaDevice> devices = {make_device("erdma_1", "uverbs1", 1, PortState::Down),
                                     make_device("erdma_0", "uverbs0", 0),
                                     make_device("bad name", "uverbs5", 0),
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
  auto a = allocate_container({"erdma_1-2", "erdma_0-0", "erdma_1-1"}, devices, 4, true);
  REQUIRE(a.ok());
  CHECK(a->devices == V{"erdma_0", "erdma_1"});
  CHECK(a->envs == std::map<std::string, std::string>{{"ERDMA_DEVICES", "erdma_0,erdma_1"}});
  REQUIRE(a->device_nodes.size() == 3);
  CHECK(a->device_nodes[0] == DeviceNode{"/dev/infiniband/uverbs0", "/dev/infiniband/uverbs0", "rw"});
  CHECK(a->device_nodes[1] == DeviceNode{"/dev/infiniband/uverbs3", "/dev/infiniband/uverbs3", "rw"});
  CHECK(a->device_nodes[2] == DeviceNode{"/dev/infiniband/rdma_cm", "/dev/infiniband/rdma_cm", "rw"});
  REQUIRE(a->notes.size() == 1);  // erdma_1 is down right now
  CHECK(a->notes[0].find("erdma_1") != std::string::npos);

  auto no_cm = allocate_container({"erdma_0-0"}, devices, 4, false);
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
    auto r = allocate_container(c.ids, devices, 4, true);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == c.code);
    CHECK_MESSAGE(r.error().message.find(c.in_message) != std::string::npos, r.error().message);
  }
  auto no_uverbs = devices;
  no_uverbs[0].uverbs.clear();
  auto r = allocate_container({"erdma_0-0"}, no_uverbs, 4, true);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::FailedPrecondition);
}

TEST_CASE("preferred_allocation packs onto one device, then one NUMA node") {
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
      {"one device, lowest name on a tie", all, {}, 3, {"a-0", "a-1", "a-2"}},
      {"best fit: the fullest device that fits", {"a-0", "a-1", "a-2", "b-0", "b-1", "c-3"}, {}, 2, {"b-0", "b-1"}},
      {"must include decides the device", all, {"c-2"}, 2, {"c-2", "c-0"}},
      {"must include on two devices: their NUMA node", all, {"a-3", "b-3"}, 4, {"a-3", "b-3", "a-0", "a-1"}},
      {"no device fits: one NUMA node", all, {}, 6, {"a-0", "a-1", "a-2", "a-3", "b-0", "b-1"}},
      {"nothing fits one node: fewest devices", all, {}, 10,
       {"a-0", "a-1", "a-2", "a-3", "b-0", "b-1", "b-2", "b-3", "c-0", "c-1"}},
      {"only must", all, {"d-1"}, 1, {"d-1"}},
      {"all available", {"a-1", "c-1"}, {}, 2, {"a-1", "c-1"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto r = preferred_allocation({c.available, c.must, c.size}, devices, 4);
    REQUIRE_MESSAGE(r.ok(), r.error().message);
    CHECK(*r == c.want);
  }

  for (const auto& [req, text] : std::vector<std::pair<PreferredRequest, const char*>>{
           {{all, {}, -1}, "negative"},
           {{{"a-0"}, {}, 2}, "cannot choose 2 of 1"},
           {{{"a-0", "junk"}, {}, 1}, "junk"},
           {{{"a-0"}, {"b-0"}, 1}, "not available"},
           {{{"a-0", "a-1"}, {"a-0", "a-1"}, 1}, "do not fit"}}) {
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
