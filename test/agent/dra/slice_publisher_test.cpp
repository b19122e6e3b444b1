// The ResourceSlice publisher against the in-memory API server: publish, no-op, update, repair
// of others' edits, races, backoff, a shrinking node, a prompt stop.
#include "agent/dra/slice_publisher.hpp"

#include <atomic>
#include <mutex>

#include <doctest/doctest.h>

#include "agent/kube/api_paths.hpp"
#include "test/eventually.hpp"
#include "test/exposition.hpp"
#include "test/fakes/fake_kube_api.hpp"
#include "test/fakes/fake_rdma_devices.hpp"
#include "test/support.hpp"

namespace erdma::agent {
namespace {

using erdma::testing::eventually;
using nlohmann::json;
using testing::FakeKubeApi;
using testing::make_device;

const std::string kCollection(kube::kResourceSlicesPath);

// The device scan the daemon would hand over, changeable by the test.
struct Node {
  std::mutex mu;
  std::vector<RdmaDevice> cards;

  void set_cards(size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    cards.clear();
    for (size_t i = 0; i < n; ++i) {
      cards.push_back(make_device("erdma_" + std::to_string(i), "uverbs" + std::to_string(i), 0));
    }
  }
  SlicePublisher::WantedFn wanted() {
    return [this]() -> Result<SliceSet> {
      std::lock_guard<std::mutex> lock(mu);
      SliceFacts facts;
      facts.node_name = "node-a";
      facts.driver_mode = "default";
      return build_slices(cards, facts);
    };
  }
};

SlicePublisherOptions options() {
  SlicePublisherOptions o;
  o.node_name = "node-a";
  o.resync = std::chrono::hours(1);  // nothing in these tests waits for a resync
  o.backoff_initial = std::chrono::milliseconds(20);
  o.backoff_max = std::chrono::milliseconds(80);
  o.repair_delay = std::chrono::milliseconds(10);
  return o;
}

std::string slice_path(size_t index) { return kCollection + "/" + slice_name("node-a", "erdma.aliyun.com", index); }

int64_t generation_of(const json& slice) { return slice["spec"]["pool"]["generation"].get<int64_t>(); }

// Observations of erdma_agent_dra_publish_duration_seconds with this result, as exposed.
double publishes_timed(const common::metrics::Registry& registry, const std::string& result) {
  return erdma::testing::sample(registry, "erdma_agent_dra_publish_duration_seconds_count{result=\"" + result + "\"}");
}

TEST_CASE("publish_once: the first publish creates, the second writes nothing") {
  FakeKubeApi api;
  Node node;
  node.set_cards(2);
  SlicePublisher publisher(api, node.wanted(), options());
  auto first = publisher.publish_once();
  REQUIRE_OK(first);
  CHECK(first->created == 1);
  CHECK(first->writes() == 1);
  const auto stored = api.object(slice_path(0));
  REQUIRE(stored.has_value());
  CHECK((*stored)["spec"]["devices"].size() == 2);
  CHECK((*stored)["spec"]["nodeName"] == "node-a");

  api.clear_calls();
  auto second = publisher.publish_once();
  REQUIRE(second.ok());
  CHECK(second->writes() == 0);
  CHECK(api.writes() == 0);
  const auto calls = api.calls();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].verb == "GET");
  CHECK(calls[0].path == kCollection + "?fieldSelector=spec.nodeName%3Dnode-a%2Cspec.driver%3Derdma.aliyun.com");
}

TEST_CASE("publish latency: each publish is one observation, a failed one under result=\"error\"") {
  FakeKubeApi api;
  Node node;
  node.set_cards(1);
  common::metrics::Registry registry;
  SlicePublisher publisher(api, node.wanted(), options(), &registry);
  CHECK(publishes_timed(registry, "ok") == 0);
  CHECK(publishes_timed(registry, "error") == 0);
  REQUIRE(publisher.publish_once().ok());
  CHECK(publishes_timed(registry, "ok") == 1);
  CHECK(publishes_timed(registry, "error") == 0);
  api.fail_next(1, make_error(ErrorCode::Unavailable, "GET: connection refused"), "GET");
  REQUIRE_FALSE(publisher.publish_once().ok());
  CHECK(publishes_timed(registry, "ok") == 1);
  CHECK(publishes_timed(registry, "error") == 1);
}

TEST_CASE("publish_once: a device change updates the slice with a higher pool generation") {
  FakeKubeApi api;
  Node node;
  node.set_cards(1);
  SlicePublisher publisher(api, node.wanted(), options());
  REQUIRE(publisher.publish_once().ok());
  const int64_t before = generation_of(*api.object(slice_path(0)));
  node.set_cards(3);
  auto changed = publisher.publish_once();
  REQUIRE(changed.ok());
  CHECK(changed->updated == 1);
  CHECK(changed->created == 0);
  const auto after = api.object(slice_path(0));
  CHECK((*after)["spec"]["devices"].size() == 3);
  CHECK(generation_of(*after) > before);
  CHECK(changed->generation == generation_of(*after));
}

TEST_CASE("publish_once: a 409 race (stale resourceVersion, or a name taken meanwhile) lists again and converges") {
  FakeKubeApi fake;
  Node node;
  node.set_cards(1);
  SUBCASE("Conflict on update") {
    {
      SlicePublisher setup(fake, node.wanted(), options());
      REQUIRE(setup.publish_once().ok());
    }
    node.set_cards(2);
    fake.before_next_write([&] {
      json edited = *fake.object(slice_path(0));
      edited["metadata"]["labels"] = {{"someone", "else"}};
      fake.put_for_test(slice_path(0), edited);
    });
    SlicePublisher publisher(fake, node.wanted(), options());
    auto r = publisher.publish_once();
    REQUIRE_OK(r);
    CHECK(r->attempts == 2);
    CHECK(r->updated == 1);
    const auto stored = fake.object(slice_path(0));
    CHECK((*stored)["spec"]["devices"].size() == 2);
    CHECK((*stored)["metadata"]["labels"]["someone"] == "else");  // the other writer's field survives
  }
  SUBCASE("AlreadyExists on create") {
    fake.before_next_write([&] {
      SlicePublisher other(fake, node.wanted(), options());
      REQUIRE(other.publish_once().ok());
    });
    SlicePublisher publisher(fake, node.wanted(), options());
    auto r = publisher.publish_once();
    REQUIRE_OK(r);
    CHECK(r->attempts == 2);
    CHECK(r->created == 0);
    CHECK(fake.objects(kCollection).size() == 1);
  }
}

TEST_CASE("publish_once: endless conflicts end in FailedPrecondition after max_attempts rounds") {
  FakeKubeApi fake;
  Node node;
  node.set_cards(1);
  fake.fail_next(100, kube::error_from_answer("POST", kCollection, 409, R"({"reason":"AlreadyExists","message":"x"})"),
                 "POST");
  auto o = options();
  o.max_attempts = 3;
  SlicePublisher publisher(fake, node.wanted(), o);
  auto r = publisher.publish_once();
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::FailedPrecondition);
  CHECK(r.error().message.find("3 rounds") != std::string::npos);
}

TEST_CASE("publish_once: a shrinking node updates first and deletes the extra slice last") {
  FakeKubeApi api;
  Node node;
  node.set_cards(kMaxDevicesPerSliceWithTaints + 1);  // two slices
  SlicePublisher publisher(api, node.wanted(), options());
  auto grown = publisher.publish_once();
  REQUIRE_OK(grown);
  CHECK(grown->created == 2);
  REQUIRE(api.objects(kCollection).size() == 2);

  node.set_cards(1);
  api.clear_calls();
  auto shrunk = publisher.publish_once();
  REQUIRE(shrunk.ok());
  CHECK(shrunk->updated == 1);
  CHECK(shrunk->deleted == 1);
  CHECK(api.objects(kCollection).size() == 1);
  CHECK(api.object(slice_path(0)).has_value());
  const auto calls = api.calls();
  REQUIRE(calls.size() == 3);
  CHECK(calls[1].verb == "PUT");
  CHECK(calls[1].path == slice_path(0));
  CHECK(calls[2].verb == "DELETE");
  CHECK(calls[2].path == slice_path(1));

  // A delete that finds the slice gone already (someone deleted it meanwhile) is done.
  node.set_cards(kMaxDevicesPerSliceWithTaints + 1);
  REQUIRE(publisher.publish_once().ok());
  node.set_cards(1);
  api.before_next_write([&] { api.delete_for_test(slice_path(1)); });  // just before the PUT
  SlicePublisher raced(api, node.wanted(), options());
  auto gone = raced.publish_once();
  REQUIRE_OK(gone);
  CHECK(api.objects(kCollection).size() == 1);
  CHECK(gone->deleted == 1);
}

TEST_CASE("slice_event_needs_publish: others' edits and deletes are news, the publisher's own writes are not") {
  Node node;
  node.set_cards(1);
  const auto wanted = node.wanted()()->slices;
  const auto needs = [&](const json& event) {
    auto r = slice_event_needs_publish(event, wanted, "node-a", "erdma.aliyun.com");
    REQUIRE_OK(r);
    return *r;
  };
  json own = wanted[0];
  own["metadata"]["resourceVersion"] = "9";
  own["spec"]["pool"]["generation"] = 3;
  CHECK_FALSE(needs({{"type", "ADDED"}, {"object", own}}));
  CHECK_FALSE(needs({{"type", "MODIFIED"}, {"object", own}}));
  CHECK(needs({{"type", "DELETED"}, {"object", own}}));
  json edited = own;
  edited["spec"]["devices"] = json::array();
  CHECK(needs({{"type", "MODIFIED"}, {"object", edited}}));
  json extra = own;
  extra["metadata"]["name"] = "node-a-extra";
  CHECK(needs({{"type", "ADDED"}, {"object", extra}}));
  CHECK_FALSE(needs({{"type", "DELETED"}, {"object", extra}}));
  json foreign = extra;
  foreign["spec"]["nodeName"] = "node-b";
  CHECK_FALSE(needs({{"type", "ADDED"}, {"object", foreign}}));
  CHECK_FALSE(needs({{"type", "BOOKMARK"}, {"object", {}}}));
}

TEST_CASE("slice_event_needs_publish: an event of the wrong shape is InvalidArgument naming the member") {
  Node node;
  node.set_cards(1);
  const auto wanted = node.wanted()()->slices;
  const json own = wanted[0];
  struct Case {
    std::string name;
    json event;
    std::string want;
  };
  auto with = [&](const char* pointer, json value) {
    json o = own;
    o[json::json_pointer(pointer)] = std::move(value);
    return o;
  };
  const std::vector<Case> cases = {
      {"not an object", json::array({1}), "ResourceSlice watch event: expected an object, got list"},
      {"type a number",
       {{"type", 1}, {"object", own}},
       "ResourceSlice watch event: type: expected a string, got number 1"},
      {"no type", {{"object", own}}, "ResourceSlice watch event: type is missing"},
      {"object a list",
       {{"type", "ADDED"}, {"object", json::array({own})}},
       "ResourceSlice watch event: object: expected an object, got list"},
      {"name a number",
       {{"type", "MODIFIED"}, {"object", with("/metadata/name", 5)}},
       "ResourceSlice watch event: object.metadata.name: expected a string, got number 5"},
      {"metadata a string",
       {{"type", "DELETED"}, {"object", with("/metadata", "x")}},
       "ResourceSlice watch event: object.metadata.name is missing"},
      {"spec missing",
       {{"type", "ADDED"}, {"object", {{"metadata", {{"name", "s"}}}}}},
       "ResourceSlice watch event: object.spec is missing"},
      {"nodeName a bool",
       {{"type", "ADDED"}, {"object", with("/spec/nodeName", true)}},
       "ResourceSlice watch event: object.spec.nodeName: expected a string, got boolean true"},
      {"driver an object",
       {{"type", "ADDED"}, {"object", with("/spec/driver", json::object())}},
       "ResourceSlice watch event: object.spec.driver: expected a string, got map"},
      {"devices an object",
       {{"type", "MODIFIED"}, {"object", with("/spec/devices", {{"name", "erdma-0"}})}},
       "ResourceSlice watch event: object.spec.devices: expected an array, got map"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto r = slice_event_needs_publish(c.event, wanted, "node-a", "erdma.aliyun.com");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message == c.want);
  }
  // A BOOKMARK carries no slice: its object is not read.
  const auto bookmark =
      slice_event_needs_publish({{"type", "BOOKMARK"}, {"object", 5}}, wanted, "node-a", "erdma.aliyun.com");
  REQUIRE(bookmark.ok());
  CHECK_FALSE(*bookmark);
}

TEST_CASE("the loop: publishes at start, repairs others' deletes and edits through its watch, then goes quiet") {
  FakeKubeApi api;
  Node node;
  node.set_cards(2);
  SlicePublisher publisher(api, node.wanted(), options());
  publisher.start();
  REQUIRE(eventually([&] { return publisher.stats().publishes_ok == 1 && api.open_watches() == 1; }));

  api.delete_for_test(slice_path(0));
  REQUIRE(eventually([&] { return api.object(slice_path(0)).has_value(); }));
  CHECK(slice_has_content(node.wanted()()->slices[0], *api.object(slice_path(0))));

  json edited = *api.object(slice_path(0));
  edited["spec"]["devices"] = json::array();
  api.put_for_test(slice_path(0), edited);
  REQUIRE(eventually([&] {
    const auto now = api.object(slice_path(0));
    return now && (*now)["spec"]["devices"].size() == 2;
  }));
  REQUIRE(eventually([&] { return publisher.stats().repairs >= 2; }));

  // Its own writes come back through the watch and cause nothing: a trigger publishes once more
  // and writes nothing.
  const uint64_t writes = api.writes();
  const uint64_t published = publisher.stats().publishes_ok;
  publisher.trigger();
  REQUIRE(eventually([&] { return publisher.stats().publishes_ok > published; }));
  CHECK(api.writes() == writes);
  CHECK(publisher.stats().publishes_failed == 0);

  // A device change through trigger().
  node.set_cards(3);
  publisher.trigger();
  REQUIRE(eventually([&] { return (*api.object(slice_path(0)))["spec"]["devices"].size() == 3; }));
  publisher.stop();
}

TEST_CASE("the loop: Unavailable backs off exponentially, then succeeds, the watch failing is retried") {
  FakeKubeApi api;
  Node node;
  node.set_cards(1);
  api.fail_next(3, make_error(ErrorCode::Unavailable, "GET: connection refused"), "GET");
  api.fail_next(2, make_error(ErrorCode::Unavailable, "WATCH: connection refused"), "WATCH");
  common::metrics::Registry registry;
  SlicePublisher publisher(api, node.wanted(), options(), &registry);
  const auto start = std::chrono::steady_clock::now();
  publisher.start();
  // The stats are updated once the publish returns, after its writes.
  REQUIRE(eventually([&] { return publisher.stats().publishes_ok >= 1; }));
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(api.object(slice_path(0)).has_value());
  const auto stats = publisher.stats();
  CHECK(stats.publishes_failed == 3);
  CHECK(stats.publishes_ok >= 1);
  CHECK(stats.last_error.empty());
  // 20, 40, then the 80 ms cap, each spread by at most -20 % (common/jitter.hpp).
  CHECK(took >= std::chrono::milliseconds(16 + 32 + 64));
  REQUIRE(eventually([&] { return api.open_watches() == 1; }));
  publisher.stop();
  // The loop's publishes are timed as publish_once's are: one observation each.
  const auto after = publisher.stats();
  CHECK(publishes_timed(registry, "error") == 3);
  CHECK(publishes_timed(registry, "ok") == static_cast<double>(after.publishes_ok));
}

TEST_CASE("the loop: a watch ended by the server or by 410 Gone is opened again and the state checked") {
  FakeKubeApi api;
  Node node;
  node.set_cards(1);
  SlicePublisher publisher(api, node.wanted(), options());
  publisher.start();
  REQUIRE(eventually([&] { return publisher.stats().publishes_ok == 1 && api.open_watches() == 1; }));
  const auto before = publisher.stats().publishes_ok;
  api.push_watch_error(410, "Expired", "too old resource version");
  REQUIRE(eventually([&] { return publisher.stats().publishes_ok > before && api.open_watches() == 1; }));
  const auto again = publisher.stats().publishes_ok;
  api.end_watches();
  REQUIRE(eventually([&] { return publisher.stats().publishes_ok > again && api.open_watches() == 1; }));
  publisher.stop();
}

TEST_CASE("the loop: with a client that cannot watch, the resync repairs") {
  FakeKubeApi api;
  api.set_watchable_for_test(false);
  Node node;
  node.set_cards(1);
  auto o = options();
  o.resync = std::chrono::milliseconds(50);
  SlicePublisher publisher(api, node.wanted(), o);
  publisher.start();
  REQUIRE(eventually([&] { return api.object(slice_path(0)).has_value(); }));
  api.delete_for_test(slice_path(0));
  REQUIRE(eventually([&] { return api.object(slice_path(0)).has_value(); }));
  CHECK(publisher.stats().repairs == 0);
  for (const auto& call : api.calls()) CHECK(call.verb != "WATCH");
  publisher.stop();
}

TEST_CASE("the loop: watch events of the wrong types are logged and skipped; a valid event after them is applied") {
  FakeKubeApi api;
  Node node;
  node.set_cards(2);
  SlicePublisher publisher(api, node.wanted(), options());
  publisher.start();
  REQUIRE(eventually([&] { return publisher.stats().publishes_ok == 1 && api.open_watches() == 1; }));
  const json ours = *api.object(slice_path(0));

  json named_by_number = ours;
  named_by_number["metadata"]["name"] = 5;
  json devices_as_object = ours;
  devices_as_object["spec"]["devices"] = {{"name", "erdma-0"}};
  api.push_watch_event_for_test({{"type", 1}, {"object", ours}});
  api.push_watch_event_for_test({{"type", "MODIFIED"}, {"object", named_by_number}});
  api.push_watch_event_for_test({{"type", "MODIFIED"}, {"object", devices_as_object}});
  api.push_watch_event_for_test({{"type", "ADDED"}, {"object", json::array({ours})}});

  // A valid event after them, on the same stream: someone deleted a slice; it is repaired.
  api.delete_for_test(slice_path(0));
  REQUIRE(eventually([&] { return api.object(slice_path(0)).has_value(); }));
  CHECK(slice_has_content(node.wanted()()->slices[0], *api.object(slice_path(0))));
  REQUIRE(eventually([&] { return publisher.stats().ignored_events == 4; }));
  REQUIRE(eventually([&] { return publisher.stats().repairs >= 1; }));  // counted once the publish returns
  // The same watch went on: it was not ended and opened again.
  size_t watches = 0;
  for (const auto& call : api.calls())
    if (call.verb == "WATCH") ++watches;
  CHECK(watches == 1);
  CHECK(api.open_watches() == 1);
  publisher.stop();
}

TEST_CASE("the loop: stop() returns promptly while the watch is open and nothing is due") {
  FakeKubeApi api;
  Node node;
  node.set_cards(1);
  auto publisher = std::make_unique<SlicePublisher>(api, node.wanted(), options());
  publisher->start();
  REQUIRE(eventually([&] { return api.open_watches() == 1 && publisher->stats().publishes_ok == 1; }));
  const auto asked = std::chrono::steady_clock::now();
  publisher->stop();
  CHECK(std::chrono::steady_clock::now() - asked < std::chrono::seconds(1));
  CHECK(api.open_watches() == 0);
  publisher->stop();  // idempotent
  publisher.reset();  // and the destructor after it
}

}  // namespace
}  // namespace erdma::agent
