// Pod Events: the object (pure) and the poster's once-per-window rule, against the fake server.
#include "agent/kube/events.hpp"

#include <doctest/doctest.h>

#include "test/fakes/fake_kube_api.hpp"

namespace erdma::agent::kube {
namespace {

using nlohmann::json;
const PodRef kPod{"team-a", "trainer-0", "0b8f-uid"};

TEST_CASE("build_pod_event: the core/v1 Event kubectl describe shows, about the pod") {
  const json e = build_pod_event(kPod, EventType::Warning, "SmcrSetupFailed", "no pnet entry", "node-a",
                                 "2026-12-06T10:00:00Z", "18a2b");
  CHECK(e["apiVersion"] == "v1");
  CHECK(e["kind"] == "Event");
  CHECK(e["metadata"]["name"] == "trainer-0.18a2b");
  CHECK(e["metadata"]["namespace"] == "team-a");
  CHECK(
      e["involvedObject"] ==
      json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", "team-a"}, {"name", "trainer-0"}, {"uid", "0b8f-uid"}});
  CHECK(e["reason"] == "SmcrSetupFailed");
  CHECK(e["message"] == "no pnet entry");
  CHECK(e["type"] == "Warning");
  CHECK(e["source"] == json{{"component", "erdma-agent"}, {"host", "node-a"}});
  CHECK(e["firstTimestamp"] == "2026-12-06T10:00:00Z");
  CHECK(e["lastTimestamp"] == "2026-12-06T10:00:00Z");
  CHECK(e["count"] == 1);
  CHECK(build_pod_event(kPod, EventType::Normal, "R", "m", "n", "t", "1")["type"] == "Normal");
  // A long pod name is shortened so the Event's name stays a valid object name.
  const PodRef long_pod{"ns", std::string(260, 'p'), "u"};
  const std::string name = build_pod_event(long_pod, EventType::Normal, "R", "m", "n", "t", "abc")["metadata"]["name"];
  CHECK(name.size() <= 253);
  CHECK(name.ends_with(".abc"));
}

TEST_CASE("truncate_message: at most 1024 bytes, never inside a UTF-8 character") {
  CHECK(truncate_message("short") == "short");
  const std::string ascii(2000, 'a');
  const std::string cut = truncate_message(ascii);
  CHECK(cut.size() == 1024);
  CHECK(cut.ends_with("..."));
  std::string wide;
  for (int i = 0; i < 600; ++i) wide += "\xc3\xa9";  // é, two bytes each
  const std::string w = truncate_message(wide);
  CHECK(w.size() <= 1024);
  CHECK(w.ends_with("..."));
  const std::string body = w.substr(0, w.size() - 3);
  CHECK(body.size() % 2 == 0);  // whole characters only
  CHECK(truncate_message("abcdef", 4) == "a...");
}

TEST_CASE("rfc3339: UTC, whole seconds") {
  CHECK(rfc3339(std::chrono::system_clock::time_point(std::chrono::seconds(1796551200))) == "2026-12-06T10:00:00Z");
}

TEST_CASE("EventPoster: posts to the pod's namespace, the same news once per window, failures are retried") {
  agent::testing::FakeKubeApi api;
  auto now = std::chrono::system_clock::time_point(std::chrono::seconds(1796551200));
  EventPoster poster(api, "node-a", std::chrono::minutes(10), [&] { return now; });

  auto first = poster.post(kPod, EventType::Warning, "SmcrSetupFailed", "no pnet entry");
  REQUIRE(first.ok());
  CHECK(*first);
  const auto events = api.objects("/api/v1/namespaces/team-a/events");
  REQUIRE(events.size() == 1);
  const json& e = events.begin()->second;
  CHECK(e["source"]["host"] == "node-a");
  CHECK(e["involvedObject"]["uid"] == "0b8f-uid");
  CHECK(e["lastTimestamp"] == "2026-12-06T10:00:00Z");

  now += std::chrono::minutes(5);
  auto repeat = poster.post(kPod, EventType::Warning, "SmcrSetupFailed", "no pnet entry");
  REQUIRE(repeat.ok());
  CHECK_FALSE(*repeat);
  CHECK(*poster.post(kPod, EventType::Warning, "SmcrSetupFailed", "another message"));
  CHECK(
      *poster.post(PodRef{"team-a", "trainer-1", "other-uid"}, EventType::Warning, "SmcrSetupFailed", "no pnet entry"));
  CHECK(api.objects("/api/v1/namespaces/team-a/events").size() == 3);

  now += std::chrono::minutes(6);  // 11 minutes after the first
  CHECK(*poster.post(kPod, EventType::Warning, "SmcrSetupFailed", "no pnet entry"));
  CHECK(api.objects("/api/v1/namespaces/team-a/events").size() == 4);

  api.fail_next(1, make_error(ErrorCode::PermissionDenied, "POST /api/v1/namespaces/team-a/events: HTTP 403"));
  auto denied = poster.post(kPod, EventType::Normal, "SmcrReady", "pnet set");
  REQUIRE_FALSE(denied.ok());
  CHECK(denied.error().code == ErrorCode::PermissionDenied);
  auto retried = poster.post(kPod, EventType::Normal, "SmcrReady", "pnet set");
  REQUIRE(retried.ok());
  CHECK(*retried);
}

}  // namespace
}  // namespace erdma::agent::kube
