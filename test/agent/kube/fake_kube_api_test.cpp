// The in-memory API server the DRA suites share: the server behaviour they rely on.
#include "test/fakes/fake_kube_api.hpp"

#include <atomic>
#include <thread>

#include <doctest/doctest.h>

#include "test/eventually.hpp"

namespace erdma::agent::testing {
namespace {

using nlohmann::json;
constexpr const char* kSlices = "/apis/resource.k8s.io/v1/resourceslices";

json slice(const std::string& name, const std::string& node, const std::string& driver = "erdma.aliyun.com") {
  return json{{"metadata", {{"name", name}}}, {"spec", {{"nodeName", node}, {"driver", driver}}}};
}

TEST_CASE("fake API: create, AlreadyExists, optimistic concurrency on replace and delete, NotFound") {
  FakeKubeApi api;
  auto created = api.create(kSlices, slice("a", "n1"));
  REQUIRE(created.ok());
  const std::string rv = (*created)["metadata"]["resourceVersion"];
  CHECK(api.create(kSlices, slice("a", "n1")).error().code == ErrorCode::AlreadyExists);

  json stale = *created;
  stale["metadata"]["resourceVersion"] = "1";
  CHECK(api.replace(std::string(kSlices) + "/a", stale).error().code == ErrorCode::FailedPrecondition);
  auto replaced = api.replace(std::string(kSlices) + "/a", *created);
  REQUIRE(replaced.ok());
  CHECK((*replaced)["metadata"]["resourceVersion"] != rv);
  CHECK(api.remove(std::string(kSlices) + "/a", rv).error().code == ErrorCode::FailedPrecondition);
  CHECK(api.remove(std::string(kSlices) + "/a", (*replaced)["metadata"]["resourceVersion"].get<std::string>()).ok());
  CHECK(api.remove(std::string(kSlices) + "/a", "").error().code == ErrorCode::NotFound);
  CHECK(api.get(std::string(kSlices) + "/a").error().code == ErrorCode::NotFound);
  CHECK(api.writes() == 3);
}

TEST_CASE("fake API: lists filter by escaped field selectors, unsupported fields are refused") {
  FakeKubeApi api;
  REQUIRE(api.create(kSlices, slice("a", "n1")).ok());
  REQUIRE(api.create(kSlices, slice("b", "n2")).ok());
  REQUIRE(api.create(kSlices, slice("c", "n1", "other.example.com")).ok());
  auto all = api.get(kSlices);
  REQUIRE(all.ok());
  CHECK((*all)["items"].size() == 3);
  auto mine = api.get(std::string(kSlices) +
                      "?fieldSelector=" + kube::url_query_escape("spec.nodeName=n1,spec.driver=erdma.aliyun.com"));
  REQUIRE(mine.ok());
  REQUIRE((*mine)["items"].size() == 1);
  CHECK((*mine)["items"][0]["metadata"]["name"] == "a");
  CHECK(api.get(std::string(kSlices) + "?fieldSelector=spec.color%3Dred").error().code == ErrorCode::InvalidArgument);
  auto empty = api.get("/apis/resource.k8s.io/v1/resourceclaims");
  REQUIRE(empty.ok());
  CHECK((*empty)["items"].empty());
}

TEST_CASE("fake API: injected failures, the call log") {
  FakeKubeApi api;
  api.fail_next(2, make_error(ErrorCode::Unavailable, "injected"));
  CHECK(api.get(kSlices).error().code == ErrorCode::Unavailable);
  CHECK(api.create(kSlices, slice("a", "n1")).error().code == ErrorCode::Unavailable);
  CHECK(api.create(kSlices, slice("a", "n1")).ok());
  api.fail_next(1, make_error(ErrorCode::PermissionDenied, "no"), "DELETE");
  CHECK(api.get(kSlices).ok());
  CHECK(api.remove(std::string(kSlices) + "/a", "").error().code == ErrorCode::PermissionDenied);
  const auto calls = api.calls();
  REQUIRE(calls.size() == 5);
  CHECK(calls[0].verb == "GET");
  CHECK_FALSE(calls[0].ok);
  CHECK(calls[2].verb == "POST");
  CHECK(calls[2].ok);
  CHECK(calls[4].verb == "DELETE");
}

TEST_CASE("fake API: failures for one path, for good, and calls counted by verb") {
  FakeKubeApi api;
  const std::string a = std::string(kSlices) + "/a", b = std::string(kSlices) + "/b";
  REQUIRE(api.create(kSlices, slice("a", "n1")).ok());
  REQUIRE(api.create(kSlices, slice("b", "n1")).ok());
  api.fail_next(FakeKubeApi::kAlways, make_error(ErrorCode::Unavailable, "down"), "GET", a);
  for (int i = 0; i < 3; ++i) CHECK(api.get(a).error().code == ErrorCode::Unavailable);
  CHECK(api.get(b).ok());
  CHECK(api.get(kSlices).ok());  // the collection is another path
  CHECK(api.calls_of("GET") == 5);
  CHECK(api.calls_of("POST") == 2);
}

TEST_CASE("fake API: PUT <object>/status changes only the status, under the object's resourceVersion") {
  FakeKubeApi api;
  const std::string claims = "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims";
  api.put_keeping_uid_for_test(claims + "/c",
                               json{{"metadata", {{"name", "c"}, {"uid", "u-c"}}}, {"spec", {{"x", 1}}}});
  const json stored = *api.object(claims + "/c");
  CHECK(stored["metadata"]["uid"] == "u-c");  // kept as given
  json edited = stored;
  edited["spec"]["x"] = 2;
  edited["status"] = {{"devices", json::array({1})}};
  auto put = api.replace(claims + "/c/status", edited);
  REQUIRE(put.ok());
  const json after = *api.object(claims + "/c");
  CHECK(after["spec"]["x"] == 1);
  CHECK(after["status"]["devices"] == json::array({1}));
  CHECK(after["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]);
  CHECK(api.replace(claims + "/c/status", edited).error().code == ErrorCode::FailedPrecondition);  // stale now
  CHECK(api.replace(claims + "/gone/status", edited).error().code == ErrorCode::NotFound);
  // put_for_test gives a new object a uid of the store's own.
  api.put_for_test(claims + "/d", json{{"metadata", {{"name", "d"}, {"uid", "u-d"}}}});
  CHECK((*api.object(claims + "/d"))["metadata"]["uid"] != "u-d");
}

TEST_CASE("fake API: before_next_write runs once, before the next POST or PUT, and may call the fake") {
  FakeKubeApi api;
  REQUIRE(api.create(kSlices, slice("a", "n1")).ok());
  const json read = *api.object(std::string(kSlices) + "/a");
  int runs = 0;
  api.before_next_write([&] {
    ++runs;
    json other = *api.object(std::string(kSlices) + "/a");
    other["metadata"]["labels"] = {{"someone", "else"}};
    api.put_for_test(std::string(kSlices) + "/a", other);
  });
  CHECK(api.get(kSlices).ok());  // a read does not trigger it
  CHECK(runs == 0);
  CHECK(api.replace(std::string(kSlices) + "/a", read).error().code == ErrorCode::FailedPrecondition);
  CHECK(runs == 1);
  CHECK(api.replace(std::string(kSlices) + "/a", *api.object(std::string(kSlices) + "/a")).ok());
  CHECK(runs == 1);
}

TEST_CASE("fake API: a watch sees what is there, then every change of its selection, ERROR and stop end it") {
  FakeKubeApi api;
  REQUIRE(api.create(kSlices, slice("a", "n1")).ok());
  std::mutex mu;
  std::vector<std::string> seen;
  std::stop_source stop;
  std::optional<Status> result;
  std::thread watcher([&] {
    result = api.watch(
        std::string(kSlices) + "?watch=true&fieldSelector=spec.nodeName%3Dn1",
        [&](const json& e) {
          std::lock_guard<std::mutex> lock(mu);
          seen.push_back(e["type"].get<std::string>() + " " + e["object"]["metadata"]["name"].get<std::string>());
          return true;
        },
        stop.get_token());
  });
  REQUIRE(erdma::testing::eventually([&] { return api.open_watches() == 1; }));
  REQUIRE(api.create(kSlices, slice("b", "n2")).ok());  // another node: not seen
  api.put_for_test(std::string(kSlices) + "/a", slice("a", "n1"));
  api.delete_for_test(std::string(kSlices) + "/a");
  REQUIRE(erdma::testing::eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return seen.size() == 3;
  }));
  stop.request_stop();
  watcher.join();
  REQUIRE(result.has_value());
  CHECK(result->ok());
  CHECK(seen == std::vector<std::string>{"ADDED a", "MODIFIED a", "DELETED a"});

  std::thread second([&] {
    result = api.watch(
        std::string(kSlices) + "?watch=true", [](const json&) { return true; }, std::stop_token());
  });
  REQUIRE(erdma::testing::eventually([&] { return api.open_watches() == 1; }));
  api.push_watch_error(410, "Expired", "too old resource version");
  second.join();
  REQUIRE_FALSE(result->ok());
  CHECK(result->error().code == ErrorCode::NotFound);
}

}  // namespace
}  // namespace erdma::agent::testing
