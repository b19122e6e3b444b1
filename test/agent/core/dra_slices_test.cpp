// ResourceSlices from the device scan, and the plan that brings the API server's slices to them.
#include "agent/core/dra_slices.hpp"

#include <doctest/doctest.h>

#include <set>

#include "agent/core/plugin_model.hpp"
#include "common/k8s_names.hpp"
#include "test/fakes/fake_rdma_devices.hpp"
#include "test/support.hpp"

namespace erdma::agent {
namespace {
using nlohmann::json;
using testing::make_device;

constexpr const char* kV4Gid = "0000:0000:0000:0000:0000:ffff:0a00:0105";  // ::ffff:10.0.1.5

RdmaDevice roce_card(std::string name, std::string uverbs, int numa, unsigned gid_index,
                     PortState state = PortState::Active, std::string netdev = "eth0") {
  RdmaDevice d = make_device(std::move(name), std::move(uverbs), numa, state, std::move(netdev));
  d.ports.front().gids = {Gid{0, "fe80:0000:0000:0000:0216:3eff:fe00:0001", GidType::RoceV2, "eth0"},
                          Gid{gid_index, kV4Gid, GidType::RoceV2, "eth0"}};
  return d;
}

SliceFacts facts() {
  SliceFacts f;
  f.node_name = "node-a";
  f.node_uid = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";
  f.driver_mode = "compat";
  f.smcr_capable = false;
  f.driver_version = "1.4.3";
  f.rdma_netns_mode = "shared";
  f.generation = 0;
  return f;
}

const json& device_named(const json& slice, const std::string& name) {
  for (const auto& d : slice.at("spec").at("devices")) {
    if (d.at("name") == name) return d;
  }
  FAIL("no device " << name << " in " << slice.dump());
  static const json none;
  return none;
}

std::vector<json> built(const std::vector<RdmaDevice>& cards, const SliceFacts& f) {
  auto s = build_slices(cards, f);
  REQUIRE_OK(s);
  return s->slices;
}

// A small stand-in for the API server's ResourceSlice store: what it does to the objects that
// matters to the plan (resourceVersion, taint timeAdded defaulting, uid), with optimistic
// concurrency. Returns false when an action would be refused.
struct FakeSliceStore {
  std::map<std::string, json> objects;
  int next_rv = 100;

  json list() const {
    json items = json::array();
    for (const auto& [n, o] : objects) items.push_back(o);
    return json{{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceSliceList"}, {"items", items}};
  }
  static void default_taints(json& obj) {
    if (!obj["spec"].contains("devices")) return;
    for (auto& d : obj["spec"]["devices"]) {
      if (!d.contains("taints")) continue;
      for (auto& t : d["taints"]) {
        if (!t.contains("timeAdded")) t["timeAdded"] = "2026-01-02T03:04:05Z";
      }
    }
  }
  bool apply(const SliceAction& a) {
    switch (a.op) {
      case SliceOp::Create: {
        if (objects.count(a.name) != 0 || a.object.at("metadata").contains("resourceVersion")) return false;
        json o = a.object;
        o["metadata"]["resourceVersion"] = std::to_string(next_rv++);
        o["metadata"]["uid"] = "uid-" + a.name;
        default_taints(o);
        objects[a.name] = o;
        return true;
      }
      case SliceOp::Update: {
        auto it = objects.find(a.name);
        if (it == objects.end() || it->second["metadata"]["resourceVersion"] != a.resource_version ||
            a.object["metadata"]["resourceVersion"] != a.resource_version) {
          return false;
        }
        json o = a.object;
        o["metadata"]["resourceVersion"] = std::to_string(next_rv++);
        default_taints(o);
        it->second = o;
        return true;
      }
      case SliceOp::Delete: {
        auto it = objects.find(a.name);
        if (it == objects.end() || it->second["metadata"]["resourceVersion"] != a.resource_version) return false;
        objects.erase(it);
        return true;
      }
    }
    return false;
  }
};

// Plans against the store, applies, and checks that the store then holds exactly `wanted` at one
// generation and that planning again does nothing. Returns the generation.
int64_t converge(FakeSliceStore& store, const std::vector<json>& wanted) {
  auto plan = plan_slices(wanted, store.list());
  REQUIRE_OK(plan);
  bool deleting = false;
  for (const auto& a : plan->actions) {
    CAPTURE(a.name);
    // deletes come last
    if (a.op == SliceOp::Delete) deleting = true;
    CHECK((a.op == SliceOp::Delete) == deleting);
    REQUIRE(store.apply(a));
  }
  REQUIRE(store.objects.size() == wanted.size());
  for (const auto& w : wanted) {
    const auto& have = store.objects.at(w["metadata"]["name"].get<std::string>());
    CHECK(have["spec"]["pool"]["generation"] == plan->generation);
    json a = have["spec"], b = w["spec"];
    a["pool"].erase("generation");
    b["pool"].erase("generation");
    if (a.contains("devices")) {
      for (auto& d : a["devices"]) {
        if (d.contains("taints")) {
          for (auto& t : d["taints"]) t.erase("timeAdded");
        }
      }
    }
    CHECK(a == b);
  }
  auto again = plan_slices(wanted, store.list());
  REQUIRE(again.ok());
  CHECK(again->actions.empty());
  CHECK(again->generation == plan->generation);
  return plan->generation;
}

}  // namespace

TEST_CASE("dra_device_name: a DNS label derived from the card name alone") {
  struct Case {
    const char* card;
    const char* want;  // nullptr: refused
  };
  for (const Case& c : std::vector<Case>{{"erdma_0", "erdma-0"},
                                         {"erdma_10", "erdma-10"},
                                         {"ERDMA.1", "erdma-1"},
                                         {"mlx5_0", "mlx5-0"},
                                         {"rxe-eth0", "rxe-eth0"},
                                         {"_erdma", nullptr},
                                         {"erdma_", nullptr},
                                         {"bad name", nullptr},
                                         {"", nullptr}}) {
    CAPTURE(c.card);
    auto r = dra_device_name(c.card);
    if (c.want == nullptr) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == ErrorCode::InvalidArgument);
    } else {
      REQUIRE(r.ok());
      CHECK(*r == c.want);
    }
  }
  const std::string long_card(63, 'a');
  REQUIRE(dra_device_name(long_card).ok());
  CHECK(dra_device_name(std::string(64, 'a')).ok() == false);
}

TEST_CASE("build_slices: one device per card with typed attributes, owned by the node") {
  auto f = facts();
  f.pci_addresses = {{"erdma_0", "0000:00:05.0"}};
  f.pcie_roots = {{"erdma_0", "pci0000:00"}};
  f.ipv4_addresses = {{"eth1", "192.168.7.9"}};
  const auto slices = built(
      {roce_card("erdma_1", "uverbs1", 1, 3, PortState::Active, "eth1"), roce_card("erdma_0", "uverbs0", 0, 3)}, f);
  REQUIRE(slices.size() == 1);
  const json& s = slices[0];
  CHECK(s["apiVersion"] == "resource.k8s.io/v1");
  CHECK(s["kind"] == "ResourceSlice");
  CHECK(s["metadata"]["name"] == "node-a-erdma.aliyun.com-0");
  CHECK(s["metadata"]["ownerReferences"] == json::parse(R"([{"apiVersion":"v1","kind":"Node","name":"node-a",
                         "uid":"1b4e28ba-2fa1-11d2-883f-0016d3cca427","controller":true}])"));
  CHECK(s["spec"]["driver"] == "erdma.aliyun.com");
  CHECK(s["spec"]["nodeName"] == "node-a");
  CHECK(s["spec"]["pool"] == json::parse(R"({"name":"node-a","generation":0,"resourceSliceCount":1})"));
  REQUIRE(s["spec"]["devices"].size() == 2);
  CHECK(s["spec"]["devices"][0]["name"] == "erdma-0");  // sorted by device name
  CHECK(device_named(s, "erdma-0") == json::parse(R"({
    "name": "erdma-0",
    "attributes": {
      "ibDevice": {"string": "erdma_0"},
      "driverMode": {"string": "compat"},
      "smcrCapable": {"bool": false},
      "netdev": {"string": "eth0"},
      "gidIndex": {"int": 3},
      "ipv4": {"string": "10.0.1.5"},
      "driverVersion": {"version": "1.4.3"},
      "rdmaNetnsMode": {"string": "shared"},
      "resource.kubernetes.io/numaNode": {"int": 0},
      "resource.kubernetes.io/pciBusID": {"string": "0000:00:05.0"},
      "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}
    }})"));
  // The node's address for the netdev wins over the GID's; no PCI address or root known: no attribute.
  const json& one = device_named(s, "erdma-1");
  CHECK(one["attributes"]["ipv4"] == json{{"string", "192.168.7.9"}});
  CHECK(one["attributes"]["resource.kubernetes.io/numaNode"] == json{{"int", 1}});
  CHECK_FALSE(one["attributes"].contains("resource.kubernetes.io/pciBusID"));
  CHECK_FALSE(one["attributes"].contains("resource.kubernetes.io/pcieRoot"));
  CHECK_FALSE(one.contains("taints"));
  // The gidIndex published is the one the device plugin gives NCCL.
  CHECK(device_named(s, "erdma-0")["attributes"]["gidIndex"]["int"] ==
        *ipv4_roce_v2_gid_index(roce_card("erdma_0", "uverbs0", 0, 3)));
}

TEST_CASE("build_slices: shared cards offer slots as consumable capacity; exclusive ones say nothing") {
  auto f = facts();
  const json exclusive = device_named(built({roce_card("erdma_0", "uverbs0", 0, 3)}, f)[0], "erdma-0");
  CHECK_FALSE(exclusive.contains("allowMultipleAllocations"));
  CHECK_FALSE(exclusive.contains("capacity"));
  f.shared_slots = 64;
  const json shared = device_named(built({roce_card("erdma_0", "uverbs0", 0, 3)}, f)[0], "erdma-0");
  CHECK(shared["allowMultipleAllocations"] == true);
  CHECK(shared["capacity"] == json::parse(R"({"slots": {"value": "64",
      "requestPolicy": {"default": "1", "validRange": {"min": "1"}}}})"));
  CHECK(shared["attributes"] == exclusive["attributes"]);
}

TEST_CASE("build_slices: unknown facts are left out, never made up") {
  auto f = facts();
  f.driver_mode = "";
  f.rdma_netns_mode = "";         // RDMA netlink did not say
  f.driver_version = "0.2.38.1";  // not a semantic version: no driverVersion
  f.node_uid = "";
  RdmaDevice iwarp = make_device("erdma_0", "uverbs0", -1, PortState::Active, "");  // no GIDs, NUMA, netdev
  const auto slices = built({iwarp}, f);
  const json& attrs = device_named(slices[0], "erdma-0")["attributes"];
  CHECK(attrs == json::parse(R"({"ibDevice":{"string":"erdma_0"},"smcrCapable":{"bool":false}})"));
  CHECK_FALSE(slices[0]["metadata"].contains("ownerReferences"));
}

TEST_CASE("build_slices: a card that is down is tainted NoSchedule, or left out under HealthPolicy::Omit") {
  const std::vector<RdmaDevice> cards = {roce_card("erdma_0", "uverbs0", 0, 3),
                                         roce_card("erdma_1", "uverbs1", 0, 3, PortState::Down),
                                         make_device("erdma_2", "", 0)};
  auto f = facts();
  auto tainted = build_slices(cards, f);
  REQUIRE(tainted.ok());
  const json& s = tainted->slices[0];
  CHECK_FALSE(device_named(s, "erdma-0").contains("taints"));
  CHECK(device_named(s, "erdma-1")["taints"] ==
        json::parse(R"([{"key":"erdma.aliyun.com/unhealthy","value":"PortNotActive","effect":"NoSchedule"}])"));
  CHECK(device_named(s, "erdma-2")["taints"][0]["value"] == "NoUverbsDevice");
  CHECK(tainted->notes.size() == 2);

  f.health = HealthPolicy::Omit;
  auto omitted = build_slices(cards, f);
  REQUIRE(omitted.ok());
  REQUIRE(omitted->slices[0]["spec"]["devices"].size() == 1);
  CHECK(omitted->slices[0]["spec"]["devices"][0]["name"] == "erdma-0");
  CHECK(omitted->notes.size() == 2);

  // Back up: the same device again, untainted.
  auto back = build_slices({roce_card("erdma_1", "uverbs1", 0, 3)}, f);
  REQUIRE(back.ok());
  CHECK(back->slices[0]["spec"]["devices"][0]["name"] == "erdma-1");
}

TEST_CASE("build_slices: a PCI address or PCIe root for a card the scan did not find is noted, not published") {
  auto f = facts();
  f.pci_addresses = {{"erdma_9", "0000:00:09.0"}};
  f.pcie_roots = {{"erdma_9", "pci0000:00"}};
  auto r = build_slices({roce_card("erdma_0", "uverbs0", 0, 3)}, f);
  REQUIRE(r.ok());
  REQUIRE(r->notes.size() == 2);
  CHECK(r->notes[0].find("PCI address given for \"erdma_9\"") == 0);
  CHECK(r->notes[1].find("PCIe root given for \"erdma_9\"") == 0);
  const json& attrs = device_named(r->slices[0], "erdma-0")["attributes"];
  CHECK_FALSE(attrs.contains("resource.kubernetes.io/pciBusID"));
  CHECK_FALSE(attrs.contains("resource.kubernetes.io/pcieRoot"));
}

TEST_CASE("build_slices: names that collide or cannot be published are left out, whatever the scan order") {
  const std::vector<RdmaDevice> a = {make_device("erdma_0", "uverbs0", 0), make_device("ERDMA_0", "uverbs1", 0),
                                     make_device("erdma_", "uverbs2", 0), make_device("erdma_0", "uverbs3", 0)};
  std::vector<RdmaDevice> b(a.rbegin(), a.rend());
  auto ra = build_slices(a, facts());
  auto rb = build_slices(b, facts());
  REQUIRE(ra.ok());
  REQUIRE(rb.ok());
  CHECK(ra->slices == rb->slices);
  REQUIRE(ra->slices[0]["spec"]["devices"].size() == 1);
  // "ERDMA_0" sorts before "erdma_0" and so keeps the name; the rest are noted.
  CHECK(ra->slices[0]["spec"]["devices"][0]["attributes"]["ibDevice"]["string"] == "ERDMA_0");
  CHECK(ra->notes.size() == 3);
}

TEST_CASE("build_slices: the per-slice device limit of resource.k8s.io/v1, stable under health changes") {
  std::vector<RdmaDevice> cards;
  for (int i = 0; i < 130; ++i)
    cards.push_back(make_device("erdma_" + std::to_string(i), "uverbs" + std::to_string(i), 0));
  auto check = [&](HealthPolicy policy, std::vector<size_t> want_sizes) {
    auto f = facts();
    f.health = policy;
    const auto slices = built(cards, f);
    REQUIRE(slices.size() == want_sizes.size());
    std::set<std::string> names;
    for (size_t i = 0; i < slices.size(); ++i) {
      CHECK(slices[i]["metadata"]["name"] == "node-a-erdma.aliyun.com-" + std::to_string(i));
      CHECK(slices[i]["spec"]["devices"].size() == want_sizes[i]);
      CHECK(slices[i]["spec"]["pool"]["resourceSliceCount"] == slices.size());
      for (const auto& d : slices[i]["spec"]["devices"]) CHECK(names.insert(d["name"].get<std::string>()).second);
    }
    CHECK(names.size() == 130);
  };
  check(HealthPolicy::Taint, {64, 64, 2});  // a tainted device lowers the limit to 64
  check(HealthPolicy::Omit, {128, 2});
  // Taking a card down under Taint moves no device to another slice.
  auto f = facts();
  const auto before = built(cards, f);
  cards[5].ports.front().state = PortState::Down;
  const auto after = built(cards, f);
  REQUIRE(before.size() == after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    std::vector<json> x, y;
    for (const auto& d : before[i]["spec"]["devices"]) x.push_back(d["name"]);
    for (const auto& d : after[i]["spec"]["devices"]) y.push_back(d["name"]);
    CHECK(x == y);
  }
}

TEST_CASE("build_slices: a node without cards publishes one empty slice") {
  const auto slices = built({}, facts());
  REQUIRE(slices.size() == 1);
  CHECK_FALSE(slices[0]["spec"].contains("devices"));  // omitempty in the API
  CHECK(slices[0]["spec"]["pool"]["resourceSliceCount"] == 1);
}

TEST_CASE("build_slices: facts that break the API's rules are refused with the rule") {
  struct Case {
    const char* name;
    void (*edit)(SliceFacts&);
    const char* in_message;
  };
  const std::vector<Case> cases = {
      {"empty node", [](SliceFacts& f) { f.node_name = ""; }, "node name"},
      {"node with '_'", [](SliceFacts& f) { f.node_name = "node_a"; }, "node name"},
      {"upper-case driver", [](SliceFacts& f) { f.driver = "Erdma.aliyun.com"; }, "driver name"},
      {"driver over 63", [](SliceFacts& f) { f.driver = std::string(60, 'a') + ".com"; }, "63"},
      {"pool with empty part", [](SliceFacts& f) { f.pool_name = "a//b"; }, "pool name"},
      {"negative generation", [](SliceFacts& f) { f.generation = -1; }, "generation"},
      {"driver mode auto", [](SliceFacts& f) { f.driver_mode = "auto"; }, "driver mode"},
      {"netns mode Shared", [](SliceFacts& f) { f.rdma_netns_mode = "Shared"; }, "RDMA netns mode"},
      {"short PCI address",
       [](SliceFacts& f) {
         f.pci_addresses = {{"erdma_0", "00:05.0"}};
       },
       "PCI address"},
      {"PCIe root as a path",
       [](SliceFacts& f) {
         f.pcie_roots = {{"erdma_0", "devices/pci0000:00"}};
       },
       "PCIe root"},
      {"bad IPv4",
       [](SliceFacts& f) {
         f.ipv4_addresses = {{"eth0", "10.0.0.256"}};
       },
       "IPv4"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto f = facts();
    c.edit(f);
    auto r = build_slices({make_device("erdma_0", "uverbs0", 0)}, f);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find(c.in_message) != std::string::npos);
  }
  auto f = facts();
  f.pool_name = "pools.example.com/node-a";
  CHECK(build_slices({}, f).ok());
}

TEST_CASE("pcie_root_of: the root complex from a resolved sysfs path; none for virtual devices or bad paths") {
  struct Case {
    const char* name;
    const char* path;
    const char* want;  // nullptr: an error with `code`
    ErrorCode code = ErrorCode::InvalidArgument;
  };
  const std::vector<Case> cases = {
      {"function on the root bus", "devices/pci0000:00/0000:00:05.0", "pci0000:00"},
      {"behind PCIe bridges and a switch", "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/0000:3c:08.0/0000:3d:00.1",
       "pci0000:3a"},
      {"a second segment", "devices/pci0001:80/0001:80:02.0", "pci0001:80"},
      {"virtual device", "devices/virtual/net/eth9", nullptr, ErrorCode::NotFound},
      {"platform device", "devices/platform/soc/1f00000.ethernet", nullptr, ErrorCode::NotFound},
      {"only devices/", "devices", nullptr, ErrorCode::NotFound},
      {"empty", "", nullptr},
      {"absolute", "/sys/devices/pci0000:00/0000:00:05.0", nullptr},
      {"unresolved ..", "devices/pci0000:00/0000:00:05.0/infiniband/erdma_0/../../../0000:00:06.0", nullptr},
      {"doubled slash", "devices//pci0000:00/0000:00:05.0", nullptr},
      {"trailing slash", "devices/pci0000:00/0000:00:05.0/", nullptr},
      {"not under devices/", "class/infiniband/erdma_0/device", nullptr},
      {"the root complex itself", "devices/pci0000:00", nullptr},
      {"ends below a function", "devices/pci0000:00/0000:00:05.0/virtio3", nullptr},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto r = pcie_root_of(c.path);
    if (c.want == nullptr) {
      REQUIRE_FALSE(r.ok());
      CHECK(r.error().code == c.code);
      CHECK(r.error().message.find(c.path) != std::string::npos);  // names the path it read
    } else {
      REQUIRE(r.ok());
      CHECK(*r == c.want);
      CHECK(is_pcie_root(*r));
    }
  }
}

TEST_CASE("slice_name: deterministic, within 253 characters, a valid object name") {
  CHECK(slice_name("node-a", "erdma.aliyun.com", 2) == "node-a-erdma.aliyun.com-2");
  const std::string long_node = std::string(120, 'n') + "." + std::string(125, 'm');
  const auto a = slice_name(long_node, "erdma.aliyun.com", 0);
  const auto b = slice_name(long_node, "erdma.aliyun.com", 1);
  CHECK(a.size() <= 253);
  CHECK(common::is_dns1123_subdomain(a));
  CHECK(a != b);
  CHECK(a == slice_name(long_node, "erdma.aliyun.com", 0));
}

TEST_CASE("value checks: semantic versions, PCI addresses, IPv4 addresses, pool names") {
  for (const char* ok : {"1.2.3", "0.0.0", "1.0.0-rc.1", "1.0.0-alpha-1+build.5", "10.20.30+meta"}) {
    CAPTURE(ok);
    CHECK(is_semver(ok));
  }
  for (const char* bad : {"", "1.2", "1.2.3.4", "01.2.3", "1.2.3-01", "1.2.3-", "1.2.3+", "v1.2.3", "1.2.x",
                          "5.10.134-16.al8..", "1..3"}) {
    CAPTURE(bad);
    CHECK_FALSE(is_semver(bad));
  }
  CHECK(is_pci_address("0000:00:05.0"));
  CHECK(is_pci_address("0000:af:1F.7"));
  for (const char* bad : {"", "00:05.0", "0000:00:05.8", "0000:00:05-0", "0000:0g:05.0"}) {
    CAPTURE(bad);
    CHECK_FALSE(is_pci_address(bad));
  }
  for (const char* ok : {"pci0000:00", "pci0000:3a", "pci10000:00", "pciffffffff:ff"}) {
    CAPTURE(ok);
    CHECK(is_pcie_root(ok));
  }
  for (const char* bad : {"", "pci", "pci000:00", "pci0000:0", "pci0000:000", "pci0000-00", "0000:00",
                          "pci123456789:00", "pci0000:0g", "PCI0000:00", "virtual"}) {
    CAPTURE(bad);
    CHECK_FALSE(is_pcie_root(bad));
  }
  CHECK(is_ipv4_address("10.0.0.5"));
  CHECK(is_ipv4_address("255.255.255.255"));
  for (const char* bad : {"", "10.0.0", "10.0.0.5.1", "10.0.0.256", "10.00.0.1", "10.0.0.x", "1..2.3"}) {
    CAPTURE(bad);
    CHECK_FALSE(is_ipv4_address(bad));
  }
  CHECK(is_pool_name("a/b.c"));
  CHECK(is_pool_name(std::string(100, 'a') + "/b"));  // no 63 limit per part, as the API server
  CHECK_FALSE(is_pool_name("a/"));
  CHECK_FALSE(is_pool_name("a/b..c"));
  CHECK_FALSE(is_pool_name("A/b"));
  CHECK_FALSE(is_pool_name(std::string(254, 'a')));
}

TEST_CASE("plan_slices: creates on an empty server, then nothing while the content stays") {
  const auto wanted = built({roce_card("erdma_0", "uverbs0", 0, 3)}, facts());
  for (const char* empty : {R"({"items":[]})", R"({"items":null})"}) {
    CAPTURE(empty);
    auto plan = plan_slices(wanted, json::parse(empty));
    REQUIRE(plan.ok());
    REQUIRE(plan->actions.size() == 1);
    CHECK(plan->actions[0].op == SliceOp::Create);
    CHECK(plan->actions[0].name == "node-a-erdma.aliyun.com-0");
    CHECK(plan->actions[0].resource_version.empty());
    CHECK(plan->actions[0].object == wanted[0]);
  }
  FakeSliceStore store;
  CHECK(converge(store, wanted) == 0);
  // An agent restart builds the same slices with generation 0 again: the server's generation
  // stays and nothing is written.
  store.objects.begin()->second["spec"]["pool"]["generation"] = 7;
  auto plan = plan_slices(wanted, store.list());
  REQUIRE(plan.ok());
  CHECK(plan->actions.empty());
  CHECK(plan->generation == 7);
}

TEST_CASE(
    "plan_slices: a change updates every slice of the pool to a higher generation, keeping what the agent does not set") {
  FakeSliceStore store;
  std::vector<RdmaDevice> cards;
  for (int i = 0; i < 70; ++i)
    cards.push_back(roce_card("erdma_" + std::to_string(i), "uverbs" + std::to_string(i), 0, 3));
  CHECK(converge(store, built(cards, facts())) == 0);
  REQUIRE(store.objects.size() == 2);
  store.objects["node-a-erdma.aliyun.com-0"]["metadata"]["labels"] = {{"team", "x"}};

  cards[69].ports.front().state = PortState::Down;  // a card in the second slice goes down
  const auto wanted = built(cards, facts());
  auto plan = plan_slices(wanted, store.list());
  REQUIRE(plan.ok());
  CHECK(plan->generation == 1);
  REQUIRE(plan->actions.size() == 2);  // both slices: the generation is the pool's
  for (const auto& a : plan->actions) {
    CHECK(a.op == SliceOp::Update);
    CHECK(a.resource_version == store.objects.at(a.name)["metadata"]["resourceVersion"]);
    CHECK(a.object["metadata"]["resourceVersion"] == a.resource_version);
    CHECK(a.object["metadata"]["uid"] == "uid-" + a.name);
    CHECK(a.object["spec"]["pool"]["generation"] == 1);
  }
  CHECK(plan->actions[0].object["metadata"]["labels"] == json{{"team", "x"}});
  for (const auto& a : plan->actions) REQUIRE(store.apply(a));
  const json& taint = device_named(store.objects["node-a-erdma.aliyun.com-1"], "erdma-69")["taints"][0];
  CHECK(taint["timeAdded"] == "2026-01-02T03:04:05Z");

  // Another change elsewhere: the taint that stays keeps the server's time.
  for (auto& d : store.objects["node-a-erdma.aliyun.com-1"]["spec"]["devices"]) {
    if (d["name"] == "erdma-69") d["taints"][0]["timeAdded"] = "2026-05-05T05:05:05Z";
  }
  cards[68].netdev = "eth9";
  auto plan2 = plan_slices(built(cards, facts()), store.list());
  REQUIRE(plan2.ok());
  CHECK(plan2->generation == 2);
  size_t seen = 0;
  for (const auto& a : plan2->actions) {
    if (a.name != "node-a-erdma.aliyun.com-1") continue;
    ++seen;
    CHECK(device_named(a.object, "erdma-69")["taints"][0]["timeAdded"] == "2026-05-05T05:05:05Z");
  }
  CHECK(seen == 1);
}

TEST_CASE("plan_slices: the node's cards come and go, the server converges each time") {
  FakeSliceStore store;
  std::vector<RdmaDevice> many;
  for (int i = 0; i < 100; ++i)
    many.push_back(make_device("erdma_" + std::to_string(i), "uverbs" + std::to_string(i), 0));
  std::vector<RdmaDevice> few(many.begin(), many.begin() + 2);
  auto down = few;
  down[1].ports.front().state = PortState::Down;
  int64_t last = -1;
  for (const auto* cards : {&few, &down, &many, &few, &few, &down}) {
    const int64_t gen = converge(store, built(*cards, facts()));
    CHECK(gen >= last);
    last = gen;
  }
  CHECK(last == 4);  // five changes, one repeat
  // Gone altogether: one empty slice remains.
  converge(store, built({}, facts()));
  CHECK(store.objects.size() == 1);
}

TEST_CASE("plan_slices: other nodes' and drivers' slices are left alone, a name taken by one is an error") {
  const auto wanted = built({make_device("erdma_0", "uverbs0", 0)}, facts());
  json other = wanted[0];
  other["metadata"]["name"] = "node-b-erdma.aliyun.com-0";
  other["metadata"]["resourceVersion"] = "5";
  other["spec"]["nodeName"] = "node-b";
  json stale = wanted[0];
  stale["metadata"]["name"] = "node-a-erdma.aliyun.com-3";
  stale["metadata"]["resourceVersion"] = "6";
  auto plan = plan_slices(wanted, json{{"items", {other, stale}}});
  REQUIRE(plan.ok());
  REQUIRE(plan->actions.size() == 2);
  CHECK(plan->actions[0].op == SliceOp::Create);
  CHECK(plan->actions[1].op == SliceOp::Delete);
  CHECK(plan->actions[1].name == "node-a-erdma.aliyun.com-3");
  CHECK(plan->actions[1].resource_version == "6");
  CHECK(plan->actions[1].object.is_null());
  REQUIRE(plan->notes.size() == 1);
  CHECK(plan->notes[0].find("node-b-erdma.aliyun.com-0") != std::string::npos);
  CHECK(plan->generation == 1);  // above the deleted slice's generation 0

  json squatter = wanted[0];
  squatter["metadata"]["resourceVersion"] = "9";
  squatter["spec"]["driver"] = "other.example.com";
  auto clash = plan_slices(wanted, json{{"items", {squatter}}});
  REQUIRE_FALSE(clash.ok());
  CHECK(clash.error().code == ErrorCode::FailedPrecondition);
  CHECK(clash.error().message.find("other.example.com") != std::string::npos);
}

TEST_CASE("plan_slices: a malformed list answer is refused, naming the item, and nothing is planned") {
  const auto wanted = built({make_device("erdma_0", "uverbs0", 0)}, facts());
  json good = wanted[0];
  good["metadata"]["resourceVersion"] = "1";
  struct Case {
    const char* name;
    json answer;
    const char* in_message;
  };
  auto edited = [&](auto fn) {
    json j = good;
    fn(j);
    return json{{"items", {j}}};
  };
  const std::vector<Case> cases = {
      {"array", json::array(), "not an object"},
      {"no items", json::object(), "items"},
      {"items a string", json{{"items", "x"}}, "items"},
      {"item a number", json{{"items", {1}}}, "item 0"},
      {"no name", edited([](json& j) { j["metadata"].erase("name"); }), "metadata.name"},
      {"no resourceVersion", edited([](json& j) { j["metadata"].erase("resourceVersion"); }), "resourceVersion"},
      {"spec a list", edited([](json& j) { j["spec"] = json::array(); }), "spec"},
      {"generation a string", edited([](json& j) { j["spec"]["pool"]["generation"] = "3"; }), "generation"},
      {"nodeName a number", edited([](json& j) { j["spec"]["nodeName"] = 3; }), "nodeName"},
      {"name a number", edited([](json& j) { j["metadata"]["name"] = 5; }),
       "item 0: metadata.name: expected a string, got number 5"},
      {"driver a map", edited([](json& j) { j["spec"]["driver"] = json::object(); }), "spec.driver: expected a string"},
      {"generation past int64", edited([](json& j) { j["spec"]["pool"]["generation"] = 18446744073709551615ULL; }),
       "spec.pool.generation: expected an integer in"},
      {"pool a list", edited([](json& j) { j["spec"]["pool"] = json::array(); }), "spec.pool: expected an object"},
      {"twice", json{{"items", {good, good}}}, "twice"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto r = plan_slices(wanted, c.answer);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find(c.in_message) != std::string::npos);
  }
}

}  // namespace erdma::agent

namespace erdma::agent {
namespace {

TEST_CASE("slice_has_content: the publisher's own write matches, an edit, a missing spec or another card does not") {
  const auto wanted = built({roce_card("erdma_0", "uverbs0", 0, 1)}, facts());
  REQUIRE(wanted.size() == 1);
  nlohmann::json stored = wanted[0];
  stored["metadata"]["resourceVersion"] = "7";
  stored["spec"]["pool"]["generation"] = 4;  // the generation is the plan's, not content
  CHECK(slice_has_content(wanted[0], stored));
  nlohmann::json edited = stored;
  edited["spec"]["devices"][0]["attributes"]["ibDevice"] = {{"string", "erdma_9"}};
  CHECK_FALSE(slice_has_content(wanted[0], edited));
  nlohmann::json no_spec = stored;
  no_spec.erase("spec");
  CHECK_FALSE(slice_has_content(wanted[0], no_spec));
  CHECK_FALSE(slice_has_content(wanted[0], nlohmann::json("x")));
  const auto other = built({roce_card("erdma_1", "uverbs1", 0, 1)}, facts());
  CHECK_FALSE(slice_has_content(wanted[0], other[0]));
}

}  // namespace
}  // namespace erdma::agent
