// The daemon's Event sink over the API: a pod's Events carry its UID (looked up), a claim's
// Warning goes to the pods it is reserved for, and API answers that are errors or malformed post
// nothing they cannot and never stop the worker. The daemon's retries of the driver's start: when
// they are due, which failures are logged, and what the readiness probe hears meanwhile.
#include "agent/dra/dra_driver.hpp"

#include <cstdlib>

#include <doctest/doctest.h>

#include "test/eventually.hpp"
#include "test/fakes/fake_kube_api.hpp"
#include "test/log_capture.hpp"

namespace erdma::agent {
namespace {
using nlohmann::json;
using testing::FakeKubeApi;

constexpr const char* kEvents = "/api/v1/namespaces/team-a/events";

// The posted Events as "type reason pod uid", sorted.
std::vector<std::string> posted(const FakeKubeApi& api) {
  std::vector<std::string> out;
  for (const auto& [name, e] : api.objects(kEvents)) {
    out.push_back(e.value("type", "") + " " + e.value("reason", "") + " " + e["involvedObject"].value("name", "") +
                  " " + e["involvedObject"].value("uid", ""));
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Whether any call read a pod: the agent's RBAC has no pods get (manifests/dra/rbac.yaml).
bool read_a_pod(const FakeKubeApi& api) {
  for (const auto& c : api.calls()) {
    if (c.path.find("/pods") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("ApiPodEvents: Warnings and Normal Events on pods with the UIDs given; a claim's on its reserved pods") {
  FakeKubeApi api;
  api.put_for_test("/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/c1",
                   json::parse(R"({"metadata": {"name": "c1", "namespace": "team-a"},
                                   "status": {"reservedFor": [{"resource": "pods", "name": "train-1", "uid": "u-1"},
                                                              {"resource": "pods", "name": "train-2", "uid": "u-2"}]}})"));
  ApiPodEvents events(api, "node-1");
  events.warning("team-a/train-0", "u-0", kEventSmcrSetupFailed, "SMC-R pod setup failed: no smc");
  events.normal("team-a/train-0", "u-0", kEventClaimPrepared, "claim c0 prepared");
  events.claim_warning("team-a/c1", kEventCardUnavailable, "card erdma_0 is down");
  REQUIRE(erdma::testing::eventually([&] { return posted(api).size() == 4; }));
  CHECK(posted(api) ==
        std::vector<std::string>{"Normal ErdmaClaimPrepared train-0 u-0", "Warning ErdmaCardUnavailable train-1 u-1",
                                 "Warning ErdmaCardUnavailable train-2 u-2", "Warning SmcrSetupFailed train-0 u-0"});
  CHECK_FALSE(read_a_pod(api));
}

TEST_CASE("ApiPodEvents: errors and malformed answers post nothing they cannot, and the worker goes on") {
  FakeKubeApi api;
  // A claim whose status is not what the API promises, and one whose pod entry has no UID.
  api.put_for_test("/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/bad",
                   json::parse(R"({"metadata": {"name": "bad"}, "status": {"reservedFor": "train-0"}})"));
  api.put_for_test("/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/no-uid",
                   json::parse(R"({"metadata": {"name": "no-uid"},
                                   "status": {"reservedFor": [{"resource": "pods", "name": "train-3"}]}})"));
  // Set before anything is queued: the first job's POST is the one that fails.
  api.fail_next(1, Error{ErrorCode::Unavailable, "apiserver down"}, "POST");
  ApiPodEvents events(api, "node-1");
  events.warning("team-a/train-0", "u-0", kEventSmcrWillFallBack, "y");  // its POST fails: logged, nothing
  events.claim_warning("team-a/bad", kEventCardUnavailable, "x");        // no pods: nothing
  events.claim_warning("team-a/no-uid", kEventCardUnavailable, "x");     // no UID: logged, nothing
  events.claim_warning("team-a/missing", kEventCardUnavailable, "x");    // NotFound: logged, nothing
  events.warning("team-a/nobody", "", kEventSmcrSetupFailed, "x");       // no UID: logged, nothing
  events.warning("no-slash", "u-9", kEventSmcrSetupFailed, "x");         // not "namespace/name": nothing
  events.warning("team-a/train-0", "u-0", kEventSmcrSetupFailed, "z");   // and the next one is posted
  // One worker, in order: once the last Event is there, every earlier one was dealt with.
  REQUIRE(erdma::testing::eventually([&] { return !posted(api).empty(); }));
  CHECK(posted(api) == std::vector<std::string>{"Warning SmcrSetupFailed train-0 u-0"});
  CHECK_FALSE(read_a_pod(api));
}

TEST_CASE("DraStartRetry: a failed start is logged when its error is news, and tried again after the period") {
  using namespace std::chrono_literals;
  erdma::testing::LogCapture log;
  const std::string line = R"("msg":"DRA driver did not start; retrying")";
  const auto no_token = make_error(ErrorCode::FailedPrecondition, "no service-account token");
  const auto no_node = make_error(ErrorCode::FailedPrecondition, "no NODE_NAME");
  const DraStartRetry::Clock::time_point t0{};
  DraStartRetry retry(10s, [] { return 0.5; });  // the middle of the jitter: 10 s exactly
  CHECK(retry.due(t0));                          // the first start is due at once
  CHECK(retry.last_error().empty());

  CHECK_FALSE(retry.record(Status(no_token), t0));  // the first failure: logged
  CHECK(log.count(line) == 1);
  CHECK(retry.last_error() == "no service-account token");
  CHECK_FALSE(retry.due(t0 + 9s));
  CHECK(retry.due(t0 + 10s));
  for (int i = 1; i <= 3; ++i) CHECK_FALSE(retry.record(Status(no_token), t0 + i * 10s));  // the same: not logged
  CHECK(log.count(line) == 1);
  CHECK_FALSE(retry.due(t0 + 39s));
  CHECK(retry.due(t0 + 40s));

  CHECK_FALSE(retry.record(Status(no_node), t0 + 40s));  // another error: logged
  CHECK(log.count(line) == 2);
  CHECK(log.count(R"("error":"no NODE_NAME")") == 1);
  CHECK(retry.last_error() == "no NODE_NAME");

  CHECK(retry.record(Status{}, t0 + 50s));  // started
  CHECK(retry.last_error().empty());
  CHECK(log.count(line) == 2);
  CHECK_FALSE(retry.record(Status(no_node), t0 + 60s));  // after a success the same error is news again
  CHECK(log.count(line) == 3);
}

// A fleet of agents that failed together does not retry together: the period is spread by +-20 %.
TEST_CASE("DraStartRetry: the wait after a failure is the period within +-20 %, as the draw says") {
  using namespace std::chrono_literals;
  erdma::testing::LogCapture log;
  const auto failed = Status(make_error(ErrorCode::Unavailable, "no API server"));
  const DraStartRetry::Clock::time_point t0{};
  DraStartRetry low(10s, [] { return 0.0; });
  CHECK_FALSE(low.record(failed, t0));
  CHECK_FALSE(low.due(t0 + 8s - 1ms));
  CHECK(low.due(t0 + 8s));
  CHECK(log.count(R"("retry_ms":8000)") == 1);
  DraStartRetry high(10s, [] { return 1.0; });
  CHECK_FALSE(high.record(failed, t0));
  CHECK_FALSE(high.due(t0 + 12s - 1ms));
  CHECK(high.due(t0 + 12s));
  // The real draw stays inside the band.
  for (int i = 0; i < 100; ++i) {
    DraStartRetry drawn(10s);
    CHECK_FALSE(drawn.record(failed, t0));
    CHECK_FALSE(drawn.due(t0 + 8s - 1ms));
    CHECK(drawn.due(t0 + 12s));
  }
}

TEST_CASE("DraSupervisor: idle with dra.enabled: false, and until a start works the readiness answer says why") {
  erdma::testing::LogCapture log;
  common::metrics::Registry registry;
  DeviceState state(1);
  AgentConfig cfg;
  int sinks_given = 0;
  const auto on_started = [&](PodEventSink*) { ++sinks_given; };

  SUBCASE("dra.enabled: false") {
    DraSupervisor dra(cfg, state, registry, on_started);
    dra.start();
    dra.tick();
    CHECK_FALSE(dra.not_ready());
    dra.stop();
  }
  SUBCASE("a start that fails is the answer, and is not tried again before its period") {
    cfg.dra.enabled = true;
    ::unsetenv("NODE_NAME");  // and no dra.nodeName: start() fails before any I/O
    DraSupervisor dra(cfg, state, registry, on_started);
    CHECK(dra.not_ready() == "the DRA driver did not start: starting");
    dra.start();
    const auto why = dra.not_ready();
    REQUIRE(why);
    CHECK(why->rfind("the DRA driver did not start: the DRA driver needs its node's name", 0) == 0);
    dra.tick();  // the next start is 10 s away
    CHECK(log.count(R"("msg":"DRA driver did not start; retrying")") == 1);
    CHECK(sinks_given == 0);
    dra.stop();
  }
}

}  // namespace erdma::agent
