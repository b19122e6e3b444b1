// Pod setup decisions: which pod owns device IDs, which sandbox is the pod's, the SMC-R
// annotation, and reading the runtime's verbose sandbox info.
#include "agent/core/pod_setup.hpp"

#include <doctest/doctest.h>

namespace erdma::agent {
namespace {

PodDevices pod(std::string ns, std::string name, std::vector<PodDevices::Container> containers) {
  return PodDevices{std::move(ns), std::move(name), std::move(containers)};
}

PodDevices::Container container(std::string name, std::map<std::string, std::vector<std::string>> devices) {
  return PodDevices::Container{std::move(name), std::move(devices)};
}

SandboxSummary sandbox(std::string id, std::string ns, std::string name, int64_t created, bool ready = true,
                       uint32_t attempt = 0) {
  SandboxSummary s;
  s.id = std::move(id);
  s.pod_namespace = std::move(ns);
  s.pod_name = std::move(name);
  s.created_at = created;
  s.attempt = attempt;
  s.state = ready ? SandboxState::Ready : SandboxState::NotReady;
  return s;
}

std::map<std::string, std::string> info(std::string json) { return {{"info", std::move(json)}}; }

}  // namespace

TEST_CASE("the pod is the one whose container holds every device ID") {
  const std::vector<PodDevices> pods = {
      pod("a", "web", {container("c", {{"aliyun/erdma", {"erdma_0-0"}}})}),
      pod("b", "train",
          {container("init", {{"aliyun/erdma", {"erdma_0-1"}}}),
           container("main", {{"aliyun/erdma", {"erdma_0-2", "erdma_1-0"}}, {"nvidia.com/gpu", {"GPU-1"}}})}),
  };
  auto r = find_pod_for_devices(pods, "aliyun/erdma", {"erdma_1-0", "erdma_0-2"});
  REQUIRE(r.ok());
  CHECK(*r == PodRef{"b", "train", "main"});
  CHECK(to_string(*r) == "b/train");
  CHECK(find_pod_for_devices(pods, "aliyun/erdma", {"erdma_0-1"})->container == "init");
  // A subset of one container's devices is enough (kubelet passes that container's IDs).
  CHECK(find_pod_for_devices(pods, "aliyun/erdma", {"erdma_1-0"})->name == "train");

  struct Case {
    const char* name;
    std::vector<std::string> ids;
    std::string resource;
    ErrorCode code;
  };
  const std::vector<Case> cases = {
      {"no IDs", {}, "aliyun/erdma", ErrorCode::InvalidArgument},
      {"unknown ID", {"erdma_9-9"}, "aliyun/erdma", ErrorCode::NotFound},
      {"IDs spread over two containers", {"erdma_0-0", "erdma_0-2"}, "aliyun/erdma", ErrorCode::NotFound},
      {"another resource's IDs", {"GPU-1"}, "aliyun/erdma", ErrorCode::NotFound},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto e = find_pod_for_devices(pods, c.resource, c.ids);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().code == c.code);
  }
  const std::vector<PodDevices> twice = {pod("a", "x", {container("c", {{"r/x", {"d-0"}}})}),
                                         pod("a", "y", {container("c", {{"r/x", {"d-0"}}})})};
  CHECK(find_pod_for_devices(twice, "r/x", {"d-0"}).error().code == ErrorCode::FailedPrecondition);
  CHECK(find_pod_for_devices({}, "r/x", {"d-0"}).error().code == ErrorCode::NotFound);
}

TEST_CASE("the newest ready sandbox of the pod is chosen") {
  const std::vector<SandboxSummary> list = {
      sandbox("old", "ns", "web", 100),
      sandbox("new", "ns", "web", 200),
      sandbox("dead", "ns", "web", 300, false),
      sandbox("other-ns", "ns2", "web", 400),
      sandbox("same-time", "ns", "db", 50, true, 1),
      sandbox("same-time-0", "ns", "db", 50, true, 0),
  };
  CHECK(choose_sandbox(list, "ns", "web")->id == "new");
  CHECK(choose_sandbox(list, "ns2", "web")->id == "other-ns");
  CHECK(choose_sandbox(list, "ns", "db")->id == "same-time");
  auto none = choose_sandbox(list, "ns", "gone");
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == ErrorCode::NotFound);
  CHECK(none.error().message.find("ns/gone") != std::string::npos);
  CHECK(choose_sandbox({sandbox("dead", "ns", "web", 300, false)}, "ns", "web").error().code == ErrorCode::NotFound);
}

TEST_CASE("only the exact annotation value true asks for SMC-R") {
  CHECK(wants_smcr({{std::string(kSmcrAnnotation), "true"}}));
  for (const char* v : {"True", "TRUE", "yes", "1", "true ", " true", "", "false"}) {
    CAPTURE(v);
    CHECK_FALSE(wants_smcr({{std::string(kSmcrAnnotation), v}}));
  }
  CHECK_FALSE(wants_smcr({}));
  CHECK_FALSE(wants_smcr({{"network.alibabacloud.com/erdma-smcr-x", "true"}}));
}

TEST_CASE("the netns is read from containerd's verbose sandbox info") {
  const std::string containerd = R"({
    "pid": 4242, "processStatus": "running", "netNamespaceClosed": false,
    "runtimeSpec": {"ociVersion": "1.1.0", "linux": {"namespaces": [
      {"type": "pid"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"},
      {"type": "network", "path": "/var/run/netns/cni-1234"}]}},
    "config": {"metadata": {"name": "web"}}, "someFutureField": [1, 2, 3]})";
  auto n = parse_sandbox_netns(info(containerd), false);
  REQUIRE(n.ok());
  CHECK_FALSE(n->host_network);
  CHECK(n->path == std::optional<std::string>("/var/run/netns/cni-1234"));
  CHECK(n->pid == std::optional<uint32_t>(4242));
  CHECK_FALSE(n->closed);

  SUBCASE("no info (not verbose, or another runtime)") {
    auto e = parse_sandbox_netns({}, false);
    REQUIRE(e.ok());
    CHECK_FALSE(e->path.has_value());
    CHECK_FALSE(e->pid.has_value());
  }
  SUBCASE("the CRI status says NODE") { CHECK(parse_sandbox_netns(info(containerd), true)->host_network); }
  SUBCASE("an OCI spec without a network namespace shares the host's") {
    auto h =
        parse_sandbox_netns(info(R"({"pid": 1, "runtimeSpec": {"linux": {"namespaces": [{"type": "pid"}]}}})"), false);
    REQUIRE(h.ok());
    CHECK(h->host_network);
  }
  SUBCASE("a network namespace without a path, pid 0, closed") {
    auto c = parse_sandbox_netns(
        info(
            R"({"pid": 0, "netNamespaceClosed": true, "runtimeSpec": {"linux": {"namespaces": [{"type": "network"}]}}})"),
        false);
    REQUIRE(c.ok());
    CHECK_FALSE(c->path.has_value());
    CHECK_FALSE(c->pid.has_value());
    CHECK(c->closed);
    CHECK_FALSE(c->host_network);
  }
  SUBCASE("malformed documents") {
    struct Case {
      const char* doc;
      const char* says;
    };
    const std::vector<Case> bad = {
        {"not json", "not a JSON object"},
        {"[1,2]", "not a JSON object"},
        {R"({"pid": -1})", "not a process id"},
        {R"({"pid": "12"})", "not a process id"},
        {R"({"pid": 4194305})", "not a process id"},
        {R"({"runtimeSpec": {"linux": {"namespaces": [{"type": "network", "path": "netns/x"}]}}})", "absolute"},
    };
    for (const auto& c : bad) {
      CAPTURE(c.doc);
      auto e = parse_sandbox_netns(info(c.doc), false);
      REQUIRE_FALSE(e.ok());
      CHECK(e.error().code == ErrorCode::InvalidArgument);
      CHECK(e.error().message.find(c.says) != std::string::npos);
    }
    // Odd but harmless shapes are ignored rather than refused.
    auto odd = parse_sandbox_netns(
        info(R"({"runtimeSpec": {"linux": {"namespaces": {"type": "network"}}}, "pid": null})"), false);
    REQUIRE(odd.ok());
    CHECK_FALSE(odd->pid.has_value());
  }
  SUBCASE("an oversized document") {
    auto e = parse_sandbox_netns(info(std::string(kMaxSandboxInfoBytes + 1, ' ')), false);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().message.find("bytes") != std::string::npos);
  }
}

TEST_CASE("pod setup results have stable metric label values") {
  std::vector<std::string> names;
  for (auto r : kAllPodSetupResults) names.emplace_back(to_string(r));
  CHECK(names == std::vector<std::string>{"configured", "not_requested", "not_allowed", "host_network",
                                          "host_netns_refused", "pod_not_found", "sandbox_gone", "timeout", "failed"});
  CHECK(result_of(make_error(ErrorCode::NotFound, "")) == PodSetupResult::SandboxGone);
  CHECK(result_of(make_error(ErrorCode::DeadlineExceeded, "")) == PodSetupResult::Timeout);
  CHECK(result_of(make_error(ErrorCode::Unavailable, "")) == PodSetupResult::Failed);
}

}  // namespace erdma::agent

namespace erdma::agent {
namespace {

SandboxNetns netns_of(std::optional<std::string> path, std::optional<uint32_t> pid, bool host = false,
                      bool closed = false) {
  SandboxNetns n;
  n.path = std::move(path);
  n.pid = pid;
  n.host_network = host;
  n.closed = closed;
  return n;
}

}  // namespace

TEST_CASE("choose_pod_netns: which namespace file a sandbox's setup enters, or why none") {
  const std::string runtime_path = "/var/run/netns/cni-1";
  struct Case {
    const char* name;
    SandboxFacts facts;
    std::optional<PodSetupResult> stop;  // nullopt: enter `netns`
    std::string netns;
  };
  const auto ready = SandboxState::Ready;
  const std::vector<Case> cases = {
      {"no annotation",
       {false, ready, netns_of(runtime_path, 7), true, "/host/proc"},
       PodSetupResult::NotRequested,
       ""},
      {"annotation checked before readiness",
       {false, SandboxState::NotReady, netns_of(runtime_path, 7), true, "/proc"},
       PodSetupResult::NotRequested,
       ""},
      {"not ready",
       {true, SandboxState::NotReady, netns_of(runtime_path, 7), true, "/proc"},
       PodSetupResult::SandboxGone,
       ""},
      {"host network", {true, ready, netns_of(std::nullopt, 7, true), false, "/proc"}, PodSetupResult::HostNetwork, ""},
      {"host network wins over a closed netns",
       {true, ready, netns_of(std::nullopt, 7, true, true), false, "/proc"},
       PodSetupResult::HostNetwork,
       ""},
      {"closed netns",
       {true, ready, netns_of(runtime_path, 7, false, true), true, "/proc"},
       PodSetupResult::SandboxGone,
       ""},
      {"visible path", {true, ready, netns_of(runtime_path, 7), true, "/host/proc"}, std::nullopt, runtime_path},
      {"invisible path, pid fallback",
       {true, ready, netns_of(runtime_path, 7), false, "/host/proc"},
       std::nullopt,
       "/host/proc/7/ns/net"},
      {"pid only", {true, ready, netns_of(std::nullopt, 4242), false, "/proc"}, std::nullopt, "/proc/4242/ns/net"},
      {"invisible path, no pid",
       {true, ready, netns_of(runtime_path, std::nullopt), false, "/proc"},
       PodSetupResult::SandboxGone,
       ""},
      {"neither path nor pid",
       {true, ready, netns_of(std::nullopt, std::nullopt), false, "/proc"},
       PodSetupResult::Failed,
       ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto got = choose_pod_netns(c.facts);
    if (c.stop) {
      REQUIRE(std::holds_alternative<PodSetupStop>(got));
      CHECK(std::get<PodSetupStop>(got).result == *c.stop);
      CHECK_FALSE(std::get<PodSetupStop>(got).message.empty());
    } else {
      REQUIRE(std::holds_alternative<std::string>(got));
      CHECK(std::get<std::string>(got) == c.netns);
    }
  }
  // The message for an invisible path says how to fix it.
  const auto gone = choose_pod_netns({true, ready, netns_of(runtime_path, std::nullopt), false, "/proc"});
  CHECK(std::get<PodSetupStop>(gone).message.find("mount /var/run/netns") != std::string::npos);

  // The admin commands look at any pod: the same answers without the annotation check.
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto facts = c.facts;
    facts.wants_smcr = true;
    const auto want = choose_pod_netns(facts);
    facts.wants_smcr = false;
    const auto got = locate_sandbox_netns(facts);
    REQUIRE(got.index() == want.index());
    if (const auto* path = std::get_if<std::string>(&got)) CHECK(*path == std::get<std::string>(want));
    if (const auto* stop = std::get_if<PodSetupStop>(&got)) CHECK(*stop == std::get<PodSetupStop>(want));
  }
}

TEST_CASE("refuse_pod_netns: the host's namespace, a vanished one and a passed deadline stop the setup") {
  const Error gone{ErrorCode::NotFound, "network namespace /x is gone"};
  const Error denied{ErrorCode::PermissionDenied, "permission denied"};
  struct Case {
    const char* name;
    NetnsTargetFacts facts;
    std::optional<PodSetupResult> stop;
  };
  auto facts = [](Status host, std::optional<Result<bool>> same, Status entry = {}, bool time_left = true) {
    NetnsTargetFacts f;
    f.netns = "/var/run/netns/cni-1";
    f.host_readable = std::move(host);
    f.same_as_host = std::move(same);
    f.entry_valid = std::move(entry);
    f.time_left = time_left;
    return f;
  };
  const std::vector<Case> cases = {
      {"a pod's own netns", facts({}, Result<bool>(false)), std::nullopt},
      {"the host's netns", facts({}, Result<bool>(true)), PodSetupResult::HostNetnsRefused},
      {"the host's netns even without time left", facts({}, Result<bool>(true), {}, false),
       PodSetupResult::HostNetnsRefused},
      {"host netns unreadable", facts(denied, std::nullopt), PodSetupResult::Failed},
      {"pod netns vanished", facts({}, Result<bool>(gone)), PodSetupResult::SandboxGone},
      {"pod netns unreadable", facts({}, Result<bool>(denied)), PodSetupResult::Failed},
      {"not compared", facts({}, std::nullopt), PodSetupResult::Failed},
      {"invalid pnet entry", facts({}, Result<bool>(false), Error{ErrorCode::InvalidArgument, "bad"}),
       PodSetupResult::Failed},
      {"invalid entry before the deadline",
       facts({}, Result<bool>(false), Error{ErrorCode::InvalidArgument, "bad"}, false), PodSetupResult::Failed},
      {"no time left", facts({}, Result<bool>(false), {}, false), PodSetupResult::Timeout},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto got = refuse_pod_netns(c.facts);
    if (!c.stop) {
      CHECK_FALSE(got.has_value());
    } else {
      REQUIRE(got.has_value());
      CHECK(got->result == *c.stop);
    }
  }
  CHECK(refuse_pod_netns(facts(denied, std::nullopt))->message.find("procRoot") != std::string::npos);
}

TEST_CASE("describe_configured says why a pod with its own RDMA device gets no pnet entry") {
  CHECK(describe_configured("ERDMA eth eth0", false, {"net.smc.tcp2smc=1"}, "rxe_0889634b2727") ==
        "no pnet entry (ERDMA eth eth0 not added): the interface carries the pod's own RDMA device rxe_0889634b2727; "
        "net.smc.tcp2smc=1");
}

TEST_CASE("describe_configured names the entry and the sysctls set") {
  CHECK(describe_configured("ERDMA eth eth0", true, {}) == "ERDMA eth eth0 added");
  CHECK(describe_configured("ERDMA eth eth0", false, {"net.smc.wmem=262144", "net.smc.tcp2smc=1"}) ==
        "ERDMA eth eth0 already present; net.smc.wmem=262144 net.smc.tcp2smc=1");
}

}  // namespace erdma::agent
