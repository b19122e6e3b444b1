// handle(): every status code the admission port answers, with no socket.
#include "webhook/server/handler.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/metrics.hpp"
#include "common/text.hpp"
#include "webhook/server/server_metrics.hpp"

namespace erdma::webhook::server {
namespace {

std::string review(const nlohmann::json& pod, const std::string& uid = "uid-1") {
  nlohmann::json r = {{"apiVersion", "admission.k8s.io/v1"},
                      {"kind", "AdmissionReview"},
                      {"request",
                       {{"uid", uid},
                        {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                        {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                        {"operation", "CREATE"},
                        {"namespace", "team-a"},
                        {"name", pod["metadata"].value("name", "")},
                        {"object", pod}}}};
  return r.dump();
}

nlohmann::json smcr_pod() {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", "web-0"},
            {"namespace", "team-a"},
            {"annotations", {{"network.alibabacloud.com/erdma-smcr", "true"}}}}},
          {"spec", {{"containers", {{{"name", "app"}, {"image", "nginx"}}}}}}};
}

struct Fixture {
  Config cfg = Config::defaults();
  Reviewer reviewer;
  HttpResponse call(std::string_view method, std::string_view target, std::string_view ct, std::string_view body,
                    bool ready = true) {
    return handle(HttpRequest{method, target, ct, body}, cfg, reviewer, ready);
  }
};

TEST_CASE_FIXTURE(Fixture, "POST /mutate-pods with the apiserver's ?timeout= answers 200 with the review") {
  const std::string body = review(smcr_pod(), "uid-42");
  for (std::string_view target : {"/mutate-pods", "/mutate-pods?timeout=10s", "/mutate-pods?timeout=30s&x=y"}) {
    CAPTURE(target);
    HttpResponse r = call("POST", target, "application/json", body);
    CHECK(r.status == 200);
    CHECK(r.content_type == "application/json");
    const auto doc = nlohmann::json::parse(r.body);
    CHECK(doc["apiVersion"] == "admission.k8s.io/v1");
    CHECK(doc["kind"] == "AdmissionReview");
    CHECK(doc["response"]["uid"] == "uid-42");
    CHECK(doc["response"]["allowed"] == true);
    CHECK(doc["response"]["patchType"] == "JSONPatch");
    const auto patch = common::base64_decode(doc["response"]["patch"].get<std::string>());
    REQUIRE(patch.has_value());
    CHECK(nlohmann::json::parse(*patch).is_array());
    REQUIRE(r.admission.has_value());
    CHECK(r.admission->outcome == Outcome::Mutated);
    CHECK(r.admission->uid == "uid-42");
    CHECK(r.admission->pod.namespace_ == "team-a");
    CHECK(r.admission->pod.name == "web-0");
    CHECK_FALSE(r.admission->ops.empty());
    CHECK(r.admission->body.empty());  // moved into the HTTP response
  }
}

TEST_CASE_FIXTURE(Fixture, "content types: application/json with parameters and any case is accepted") {
  const std::string body = review(smcr_pod());
  for (std::string_view ct : {"application/json", "application/json; charset=utf-8", "Application/JSON",
                              " application/json ;charset=UTF-8"}) {
    CAPTURE(ct);
    CHECK(call("POST", "/mutate-pods", ct, body).status == 200);
  }
  for (std::string_view ct :
       {"", "text/plain", "application/jsonx", "application/x-www-form-urlencoded", "application/yaml", "json"}) {
    CAPTURE(ct);
    HttpResponse r = call("POST", "/mutate-pods", ct, body);
    CHECK(r.status == 415);
    REQUIRE(r.admission.has_value());
    CHECK(r.admission->outcome == Outcome::Invalid);
  }
}

TEST_CASE_FIXTURE(Fixture, "malformed bodies answer 400 with a plain-text reason, never 5xx") {
  const std::string good = review(smcr_pod());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty", ""},
      {"truncated", good.substr(0, good.size() / 2)},
      {"not json", "hello"},
      {"array", "[]"},
      {"deep", std::string(100000, '[') + std::string(100000, ']')},
      {"invalid utf-8",
       "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"\xff\xfe\"}}"},
      {"no request", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})"},
      {"wrong version", R"({"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview","request":{"uid":"a"}})"},
      {"nul bytes", std::string("{\0\0}", 4)},
  };
  for (const auto& entry : cases) {
    // Named copies, not structured bindings: clang 14 cannot capture those.
    const auto& name = entry.first;
    const auto& body = entry.second;
    CAPTURE(name);
    HttpResponse r = call("POST", "/mutate-pods", "application/json", body);
    CHECK(r.status == 400);
    CHECK(r.content_type.starts_with("text/plain"));
    CHECK(common::is_valid_utf8(r.body));
    REQUIRE(r.admission.has_value());
    CHECK(r.admission->outcome == Outcome::Invalid);
    CHECK_FALSE(r.admission->error.empty());
  }
}

TEST_CASE_FIXTURE(Fixture, "a pod the webhook cannot mutate is 200 with allowed: false") {
  // Only with the library from a hostPath volume can a pod's own volume be in the way.
  auto host_path = Config::load(nlohmann::json{{"smcr", {{"libraryFrom", "hostPath"}}}});
  REQUIRE(host_path.ok());
  cfg = *host_path;
  nlohmann::json pod = smcr_pod();
  pod["spec"]["volumes"] = {{{"name", "erdma-smc-preload"}, {"emptyDir", nlohmann::json::object()}}};
  HttpResponse r = call("POST", "/mutate-pods", "application/json", review(pod, "uid-r"));
  CHECK(r.status == 200);
  const auto doc = nlohmann::json::parse(r.body);
  CHECK(doc["response"]["uid"] == "uid-r");
  CHECK(doc["response"]["allowed"] == false);
  REQUIRE(r.admission.has_value());
  CHECK(r.admission->outcome == Outcome::Rejected);
}

TEST_CASE_FIXTURE(Fixture, "a pod that asks for nothing is 200, allowed, without a patch") {
  nlohmann::json pod = smcr_pod();
  pod["metadata"].erase("annotations");
  HttpResponse r = call("POST", "/mutate-pods", "application/json", review(pod));
  CHECK(r.status == 200);
  const auto doc = nlohmann::json::parse(r.body);
  CHECK(doc["response"]["allowed"] == true);
  CHECK_FALSE(doc["response"].contains("patch"));
  REQUIRE(r.admission.has_value());
  CHECK(r.admission->outcome == Outcome::Skipped);
}

TEST_CASE_FIXTURE(Fixture, "wrong methods answer 405 with Allow") {
  for (std::string_view m : {"GET", "PUT", "DELETE", "PATCH", "HEAD"}) {
    CAPTURE(m);
    HttpResponse r = call(m, "/mutate-pods?timeout=10s", "application/json", "");
    CHECK(r.status == 405);
    CHECK(r.allow == "POST");
    CHECK_FALSE(r.admission.has_value());
  }
  for (std::string_view path : {"/healthz", "/readyz"}) {
    CAPTURE(path);
    HttpResponse r = call("POST", path, "application/json", "{}");
    CHECK(r.status == 405);
    CHECK(r.allow == "GET, HEAD");
  }
}

TEST_CASE_FIXTURE(Fixture, "probes: healthz always 200, readyz 503 while draining") {
  CHECK(call("GET", "/healthz", "", "").status == 200);
  CHECK(call("HEAD", "/healthz", "", "").status == 200);
  CHECK(call("GET", "/healthz", "", "", false).status == 200);
  CHECK(call("GET", "/readyz", "", "").status == 200);
  CHECK(call("GET", "/readyz?verbose", "", "").status == 200);
  CHECK(call("GET", "/readyz", "", "", false).status == 503);
}

TEST_CASE_FIXTURE(Fixture, "unknown paths answer 404 with valid UTF-8 even for hostile targets") {
  for (std::string_view target :
       {"/", "/mutate", "/mutate-pods/", "/MUTATE-PODS", "/metrics", "*", "/\xff\xfe?x", "/mutate-pods%00"}) {
    CAPTURE(target);
    HttpResponse r = call("POST", target, "application/json", "{}");
    CHECK(r.status == 404);
    CHECK(common::is_valid_utf8(r.body));
    CHECK_FALSE(r.admission.has_value());
  }
}

TEST_CASE("is_json_media_type and target_path") {
  CHECK(is_json_media_type("application/json"));
  CHECK(is_json_media_type("application/json;charset=utf-8"));
  CHECK_FALSE(is_json_media_type("application/json-patch+json"));
  CHECK_FALSE(is_json_media_type(""));
  CHECK(target_path("/mutate-pods?timeout=10s") == "/mutate-pods");
  CHECK(target_path("/x") == "/x");
  CHECK(target_path("?") == "");
}

}  // namespace
}  // namespace erdma::webhook::server

namespace erdma::webhook::server {

TEST_CASE_FIXTURE(Fixture, "warnings reach the log record as text and the metrics by kind") {
  nlohmann::json pod = smcr_pod();
  pod["spec"]["containers"][0]["envFrom"] = nlohmann::json::array({{{"configMapRef", {{"name", "x"}}}}});
  pod["spec"]["containers"].push_back({{"name", "side"}, {"resources", {{"requests", {{"aliyun/erdma", "1"}}}}}});
  HttpResponse r = call("POST", "/mutate-pods", "application/json", review(pod));
  REQUIRE(r.admission.has_value());
  const ReviewResult& rec = *r.admission;
  CHECK(rec.warnings.size() == 3);
  CHECK(
      warning_text(rec) ==
      "container \"side\" requests aliyun/erdma without a limit; the apiserver refuses extended resources whose "
      "requests do not equal their limits: set limits.aliyun/erdma to the requested quantity\n"
      "added aliyun/erdma-smcr: 1 to container \"app\": SMC-R needs an eRDMA node, and erdma-agent mounts the preload "
      "library into the containers holding it\n"
      "container \"app\" uses envFrom; injected LD_PRELOAD take precedence over the same names there");
  CHECK(rec.warning_counts[static_cast<size_t>(WarningKind::RequestsWithoutLimits)] == 1);
  CHECK(rec.warning_counts[static_cast<size_t>(WarningKind::ResourceAdded)] == 1);
  CHECK(rec.warning_counts[static_cast<size_t>(WarningKind::EnvFromPrecedence)] == 1);

  common::metrics::Registry registry;
  ServerMetrics metrics(registry);
  metrics.record_admission(rec.outcome, rec.warning_counts, 0.001);
  metrics.record_admission(rec.outcome, rec.warning_counts, 0.001);
  const std::string text = registry.expose();
  CHECK(text.find("erdma_webhook_warnings_total{kind=\"envfrom_precedence\"} 2\n") != std::string::npos);
  CHECK(text.find("erdma_webhook_warnings_total{kind=\"requests_without_limits\"} 2\n") != std::string::npos);
  // Every kind is there from the start, and the kinds add up to the number of warnings.
  for (size_t i = 0; i < kWarningKindCount; ++i) {
    const std::string kind(to_string(static_cast<WarningKind>(i)));
    CAPTURE(kind);
    CHECK(text.find("erdma_webhook_warnings_total{kind=\"" + kind + "\"}") != std::string::npos);
  }
  uint64_t sum = 0;
  for (auto n : rec.warning_counts) sum += n;
  CHECK(sum == 3);
}

}  // namespace erdma::webhook::server
