// The worst pods a tenant with pod-create rights in an opted-in namespace can send (the hardening
// review's H1, M1 and L8; docs/hardening.md, "Bounded work"). Each one took the webhook minutes
// of one I/O thread when its loops compared every item with every other; now each is refused at
// a size limit or handled in one pass. ctest gives each case 60 s (test/webhook/CMakeLists.txt),
// far more than linear work needs even under the sanitizers, far less than quadratic work took.
#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "webhook/core/admission.hpp"
#include "webhook/core/mutate.hpp"
#include "webhook/core/pod_view.hpp"

using namespace erdma;
using namespace erdma::webhook;
using nlohmann::json;

namespace {

const Config& default_config() {
  static const Config c = [] {
    auto r = Config::load(json::object());
    REQUIRE(r.ok());
    return *r;
  }();
  return c;
}

// Distinct comma-separated names ("a0,a1,...") filling at least `bytes`.
std::string distinct_names(size_t bytes) {
  std::string out;
  out.reserve(bytes + 16);
  for (size_t i = 0; out.size() < bytes; ++i) {
    if (!out.empty()) out += ',';
    out += 'a';
    out += std::to_string(i);
  }
  return out;
}

// An AdmissionReview of a Pod CREATE, written as text (nlohmann would take seconds on these).
std::string review_of(const std::string& annotations_json, const std::string& containers_json) {
  return R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u-1",)"
         R"("kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},)"
         R"("operation":"CREATE","namespace":"team-a","object":{"metadata":{"name":"x","annotations":)" +
         annotations_json + R"(},"spec":{"containers":)" + containers_json + "}}}}";
}

std::string smcr_annotations(const std::string& resource_added) {
  return R"({"network.alibabacloud.com/erdma-smcr":"true","network.alibabacloud.com/erdma-resource-added":")" +
         resource_added + "\"}";
}

// `n` containers named c0, c1, ...; `erdma` ones request aliyun/erdma.
std::string containers(size_t n, bool erdma = false, const std::string& extra = "") {
  std::string out = "[";
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    out += R"({"name":"c)" + std::to_string(i) + R"(","image":"busybox")";
    if (erdma) out += R"(,"resources":{"limits":{"aliyun/erdma":"1"}})";
    out += extra;
    out += '}';
  }
  return out + "]";
}

ReviewResult review(const std::string& body) {
  Reviewer r;
  return r.review(body, default_config());
}

}  // namespace

TEST_CASE("a 3 MiB resource-added annotation of distinct names is refused at the apiserver's annotation limit") {
  // The review's sketch: ~600k distinct names, near the apiserver's 3 MiB request limit.
  const std::string body = review_of(smcr_annotations(distinct_names(3u << 20)), containers(1));
  const ReviewResult r = review(body);
  REQUIRE(r.outcome == Outcome::Rejected);
  CHECK(r.error.find("metadata.annotations: Too long: must have at most 262144 bytes") != std::string::npos);
  CHECK(r.error.size() < 512);
}

TEST_CASE("the largest resource-added annotation the apiserver allows is read in one pass, and its names still count") {
  static const Config preset = [] {
    auto r = Config::load(json{{"erdmaEnv", {{{"name", "NCCL_IB_HCA"}, {"value", "erdma"}}}}});
    REQUIRE(r.ok());
    return *r;
  }();
  // Just under 256 KiB in all: about 40k distinct names, then (or not) the pod's only container.
  const auto ops_for = [](const std::string& names) {
    const std::string pod = R"({"metadata":{"name":"x","annotations":)" + smcr_annotations(names) +
                            R"(},"spec":{"containers":[{"name":"c0","resources":{"limits":{"aliyun/erdma":"1"}}}]}})";
    simdjson::dom::parser parser;
    auto m = mutate(parser.parse(pod), NamespaceInfo{"team-a"}, preset);
    REQUIRE(m.ok());
    std::string all;
    append_patch_json(all, m->ops);
    return all;
  };
  const std::string names = distinct_names(kMaxAnnotationBytes - 1024);
  // Named: c0 holds the resource because of an earlier pass, so it is an SMC-R container, not an
  // eRDMA one: the library, no NCCL env, and the annotation is left as it is.
  const std::string named = ops_for(names + ",c0");
  CHECK(named.find("LD_PRELOAD") != std::string::npos);
  CHECK(named.find("NCCL_IB_HCA") == std::string::npos);
  CHECK(named.find("erdma-resource-added") == std::string::npos);
  // Not named: the user asked for the device, so c0 also gets the NCCL env.
  CHECK(ops_for(names).find("NCCL_IB_HCA") != std::string::npos);
}

TEST_CASE("a pod of 180k containers is refused before any work per container") {
  // The review's second sketch: ~3 MiB of SMC-R containers with distinct short names.
  const ReviewResult r = review(review_of(R"({"network.alibabacloud.com/erdma-smcr":"true"})", containers(180000)));
  REQUIRE(r.outcome == Outcome::Rejected);
  CHECK(r.error.find(
            "spec.containers: 180000 containers and init containers; erdma-webhook mutates pods of at most 4096") !=
        std::string::npos);
}

TEST_CASE("kMaxContainers containers with distinct names are mutated, each checked once; one more is refused") {
  const std::string ann = R"({"network.alibabacloud.com/erdma-smcr":"true"})";
  const ReviewResult ok = review(review_of(ann, containers(kMaxContainers)));
  REQUIRE(ok.outcome == Outcome::Mutated);
  // 3 annotations, then per container the resource and LD_PRELOAD.
  CHECK(ok.ops.size() == 3 + 2 * kMaxContainers);
  const ReviewResult refused = review(review_of(ann, containers(kMaxContainers + 1)));
  CHECK(refused.outcome == Outcome::Rejected);
}

TEST_CASE("a repeated name among thousands of containers is found") {
  std::string list = containers(kMaxContainers - 1);
  list.back() = ',';
  list += R"({"name":"c17","image":"busybox"}])";
  const ReviewResult r = review(review_of(R"({"network.alibabacloud.com/erdma-smcr":"true"})", list));
  REQUIRE(r.outcome == Outcome::Rejected);
  CHECK(r.error.find("spec.containers[4095].name: \"c17\" is used by another container") != std::string::npos);
}

TEST_CASE("thousands of warnings: the answer and the annotation stay bounded, the counts stay exact") {
  // Every container uses envFrom and gets the SMC-R library, so each one warns.
  const std::string body =
      review_of(R"({"network.alibabacloud.com/erdma-smcr":"true"})",
                containers(kMaxContainers, false, R"(,"envFrom":[{"configMapRef":{"name":"x"}}])"));
  const ReviewResult r = review(body);
  REQUIRE(r.outcome == Outcome::Mutated);
  REQUIRE(r.warnings.size() == kMaxWarnings);
  CHECK(r.warnings.back() == "... and " + std::to_string(kMaxContainers + 1 - (kMaxWarnings - 1)) + " more warnings");
  CHECK(r.warning_counts[static_cast<size_t>(WarningKind::EnvFromPrecedence)] == kMaxContainers);
  CHECK(r.warning_counts[static_cast<size_t>(WarningKind::ResourceAdded)] == 1);
  // The one "added aliyun/erdma-smcr" warning names a few containers and counts the rest.
  bool found = false;
  for (const auto& w : r.warnings) {
    CHECK(w.size() < 1024);
    if (w.rfind("added aliyun/erdma-smcr: 1 to ", 0) == 0) {
      found = true;
      CHECK(w.find("and " + std::to_string(kMaxContainers - 8) + " more containers") != std::string::npos);
    }
  }
  CHECK(found);
}

TEST_CASE("the pod's author's strings reach warnings, errors and the pod's display name cut") {
  const std::string long_name(100000, 'n');
  // An invalid container name, warned about (requests without limits) before names are checked.
  const std::string list = R"([{"name":")" + long_name + R"(","resources":{"requests":{"aliyun/erdma":"1"}}}])";
  std::string body = review_of(R"({"network.alibabacloud.com/erdma-smcr":"true"})", list);
  body.replace(body.find(R"("name":"x")"), 10, R"("name":")" + long_name + "\"");
  const ReviewResult r = review(body);
  REQUIRE(r.outcome == Outcome::Rejected);
  CHECK(r.error.size() < 1024);
  CHECK(r.pod.display().size() < 600);

  simdjson::dom::parser parser;
  const std::string pod = R"({"metadata":{"name":")" + long_name + R"("},"spec":{"initContainers":)" + list + "}}";
  // Only an init container: skipped, but with the requests-without-limits warning, which names
  // the container before names are checked.
  auto m = mutate(parser.parse(pod), NamespaceInfo{"team-a"}, default_config());
  REQUIRE(m.ok());
  REQUIRE(m->warnings.size() == 1);
  CHECK(m->warnings[0].size() < 512);
  CHECK(m->warnings[0].find(std::string(64, 'n') + "...\"") != std::string::npos);
  CHECK(m->pod.display().size() < 600);
}

TEST_CASE("a large body does not leave the parser holding its memory") {
  Reviewer reviewer;
  // A small review first: the parser keeps its (small) buffers for the next one.
  const std::string small = review_of(R"({"network.alibabacloud.com/erdma-smcr":"true"})", containers(1));
  REQUIRE(reviewer.review(small, default_config()).outcome == Outcome::Mutated);
  const size_t kept = reviewer.parser_capacity();
  CHECK(kept > 0);
  CHECK(kept <= Reviewer::kMaxKeptParserCapacity);
  // 8 MiB of [0,0,...] inside a review: parsed, refused, and the buffers let go.
  std::string big = R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","junk":[0)";
  big.reserve(8u << 20);
  while (big.size() < (8u << 20) - 16) big += ",0";
  big += "]}";
  CHECK(reviewer.review(big, default_config()).outcome == Outcome::Invalid);
  CHECK(reviewer.parser_capacity() <= Reviewer::kMaxKeptParserCapacity);
  REQUIRE(reviewer.review(small, default_config()).outcome == Outcome::Mutated);
  CHECK(reviewer.parser_capacity() <= Reviewer::kMaxKeptParserCapacity);
}
