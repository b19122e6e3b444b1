// The CDI hook of SMC-R claims: the request the hook sends (header and the runtime's OCI state),
// the checks on the claim, the answer line, the hook's paths.
#include "agent/core/cdi_hook.hpp"

#include <doctest/doctest.h>

#include "test/support.hpp"

namespace erdma::agent {
namespace {

constexpr const char* kUid = "6f1c2a9e-0b7d-4c53-9a41-3e8b2d7f0c11";
constexpr const char* kSandbox = "3b1f0c2d9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c";

std::string header(const std::string& uid = kUid) { return std::string("erdma-cdi-hook/1 smcr ") + uid + "\n"; }

// A state as runc gives it to a createRuntime hook for a container containerd's CRI created.
std::string containerd_state(const std::string& sandbox = kSandbox) {
  return R"({"ociVersion": "1.2.1", "id": "c0ffee", "status": "creating", "pid": 4242,
             "bundle": "/run/containerd/io.containerd.runtime.v2.task/k8s.io/c0ffee",
             "annotations": {"io.kubernetes.cri.container-type": "container",
                             "io.kubernetes.cri.sandbox-id": ")" +
         sandbox + R"(", "io.kubernetes.cri.sandbox-namespace": "ml"}})";
}

std::string error_of(std::string_view request) {
  auto r = parse_hook_request(request);
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

}  // namespace

TEST_CASE("a request from erdma-cdi-hook: the claim, and the sandbox from containerd's or CRI-O's annotation") {
  auto r = parse_hook_request(header() + containerd_state());
  REQUIRE_OK(r);
  CHECK(r->claim_uid == kUid);
  CHECK(r->container_id == "c0ffee");
  CHECK(r->pid == 4242);
  CHECK(r->sandbox_id == kSandbox);

  auto crio = parse_hook_request(
      header() + R"({"id": "x", "pid": 7, "annotations": {"io.kubernetes.cri-o.SandboxID": "abc123"}})");
  REQUIRE_OK(crio);
  CHECK(crio->sandbox_id == "abc123");

  // containerd's wins when both are there; id and pid are optional in the state.
  auto both = parse_hook_request(header() + R"({"annotations": {"io.kubernetes.cri-o.SandboxID": "crio",
                                                "io.kubernetes.cri.sandbox-id": "containerd"}})");
  REQUIRE_OK(both);
  CHECK(both->sandbox_id == "containerd");
  CHECK(both->container_id.empty());
  CHECK(both->pid == 0);
}

TEST_CASE("a request that is not one is refused with what is wrong") {
  CHECK(error_of("").find("no header line") != std::string::npos);
  CHECK(error_of("GET / HTTP/1.1\r\n\r\n").find("is not \"erdma-cdi-hook/1 smcr <claim uid>\"") != std::string::npos);
  CHECK(error_of("erdma-cdi-hook/2 smcr " + std::string(kUid) + "\n{}").find("different versions") !=
        std::string::npos);
  CHECK(error_of("erdma-cdi-hook/1 rdma " + std::string(kUid) + "\n{}").find("is not") != std::string::npos);
  CHECK(error_of("erdma-cdi-hook/1 smcr  " + std::string(kUid) + "\n{}").find("is not") != std::string::npos);
  CHECK(error_of(header("../../etc") + containerd_state()).find("is not a Kubernetes UID") != std::string::npos);
  CHECK(error_of(header() + "not json").find("not a JSON object") != std::string::npos);
  CHECK(error_of(header() + "[1, 2]").find("not a JSON object") != std::string::npos);
  CHECK(error_of(header() + R"({"id": 5, "annotations": {}})").find("OCI state: id") != std::string::npos);
  CHECK(error_of(header() + R"({"pid": "12"})").find("OCI state: pid") != std::string::npos);
  CHECK(error_of(header() + R"({"pid": -1})").find("OCI state: pid") != std::string::npos);
  CHECK(error_of(header() + R"({"annotations": ["a"]})").find("OCI state: annotations") != std::string::npos);
  CHECK(error_of(header() + R"({"annotations": {"io.kubernetes.cri.sandbox-id": 1}})").find("sandbox-id") !=
        std::string::npos);

  auto none = parse_hook_request(header() + R"({"id": "c1", "annotations": {"other": "x"}})");
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == ErrorCode::FailedPrecondition);
  CHECK(none.error().message.find("io.kubernetes.cri.sandbox-id or io.kubernetes.cri-o.SandboxID") !=
        std::string::npos);
  CHECK(none.error().message.find("\"c1\"") != std::string::npos);

  auto odd = parse_hook_request(header() + containerd_state("../x"));
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().code == ErrorCode::FailedPrecondition);
  CHECK_FALSE(parse_hook_request(header() + containerd_state(std::string(129, 'a'))).ok());
  CHECK(parse_hook_request(header() + containerd_state(std::string(128, 'a'))).ok());

  const std::string big = header() + R"({"id": ")" + std::string(kMaxHookRequestBytes, 'x') + R"("})";
  CHECK(error_of(big).find("larger than") != std::string::npos);
}

TEST_CASE("the agent sets up pods only for SMC-R claims it prepared") {
  const auto missing = check_hook_claim(std::nullopt, kUid);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::NotFound);
  CHECK(missing.error().message.find(kUid) != std::string::npos);

  PreparedClaim c;
  c.uid = kUid;
  c.ns = "ml";
  c.name = "bulk";
  const auto rdma = check_hook_claim(c, kUid);
  REQUIRE_FALSE(rdma.ok());
  CHECK(rdma.error().code == ErrorCode::FailedPrecondition);
  CHECK(rdma.error().message.find("ml/bulk is not an SMC-R claim") != std::string::npos);
  c.smcr = true;
  CHECK(check_hook_claim(c, kUid).ok());
}

TEST_CASE("the answer is one line, whatever the text holds") {
  CHECK(hook_answer(true, "Configured") == "ok Configured\n");
  CHECK(hook_answer(false, "two\nlines\r") == "error two lines \n");
  const auto long_answer = hook_answer(false, std::string(2 * kMaxHookAnswerBytes, 'x'));
  CHECK(long_answer.size() == kMaxHookAnswerBytes);
  CHECK(long_answer.back() == '\n');
  CHECK(long_answer.find('\n') == long_answer.size() - 1);
}

TEST_CASE("the hook and its socket sit in dra.hookDir; the CDI entry runs the hook with the claim") {
  const auto p = cdi_hook_paths("/var/lib/erdma-controller/dra//");
  CHECK(p.binary == "/var/lib/erdma-controller/dra/erdma-cdi-hook");
  CHECK(p.socket == "/var/lib/erdma-controller/dra/hook.sock");
  const auto e = cdi_hook_entry(p, kUid);
  CHECK(e["hookName"] == "createRuntime");
  CHECK(e["path"] == p.binary);
  CHECK(e["args"] == nlohmann::json::array({"erdma-cdi-hook", "smcr", "--claim", kUid, "--socket", p.socket}));
}

}  // namespace erdma::agent
