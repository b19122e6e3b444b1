// Tests for webhook/core/admission.hpp: decoding hostile bodies, encoding responses.
#include "webhook/core/admission.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "common/text.hpp"

using namespace erdma;
using namespace erdma::webhook;
using nlohmann::json;

namespace {

// The NCCL presets operators set for nodes without erdma-agent's device plugin: gives eRDMA pods
// something to inject (the defaults inject no NCCL env).
const Config& preset_config() {
  static const Config c = [] {
    auto r = Config::load(nlohmann::json::parse(
        R"({"erdmaEnv":[{"name":"NCCL_IB_HCA","value":"erdma"},{"name":"NCCL_IB_GID_INDEX","value":"1"}]})"));
    REQUIRE(r.ok());
    return *r;
  }();
  return c;
}

std::string review_with(const json& request, const char* api_version = "admission.k8s.io/v1") {
  return json{{"apiVersion", api_version}, {"kind", "AdmissionReview"}, {"request", request}}.dump();
}

json pod_request() {
  return {{"uid", "u-1"},
          {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
          {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
          {"operation", "CREATE"},
          {"namespace", "team-a"},
          {"object",
           {{"metadata", {{"name", "p"}}},
            {"spec", {{"containers", {{{"name", "a"}, {"resources", {{"limits", {{"aliyun/erdma", "1"}}}}}}}}}}}}};
}

}  // namespace

TEST_CASE("malformed bodies are Invalid with a message and no response body") {
  struct Case {
    const char* name;
    std::string body;
    const char* want;  // prefix of the error
  };
  json no_uid = pod_request();
  no_uid.erase("uid");
  json empty_uid = pod_request();
  empty_uid["uid"] = "";
  json uid_number = pod_request();
  uid_number["uid"] = 7;
  json op_number = pod_request();
  op_number["operation"] = 1;
  json kind_string = pod_request();
  kind_string["kind"] = "Pod";
  json dry_run_string = pod_request();
  dry_run_string["dryRun"] = "yes";
  std::string deep = std::string(5000, '[') + std::string(5000, ']');
  const std::vector<Case> cases = {
      {"empty", "", "request body is empty"},
      {"not json", "hello", "request body is not valid JSON"},
      {"truncated", review_with(pod_request()).substr(0, 100), "request body is not valid JSON"},
      {"invalid utf-8", "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"x\":\"\xc3\x28\"}",
       "request body is not valid JSON: The input is not valid UTF-8"},
      {"too deep", deep, "request body is not valid JSON"},
      {"array", "[]", "request body is not a JSON object"},
      {"wrong kind", R"({"apiVersion":"admission.k8s.io/v1","kind":"Pod"})",
       "kind: expected \"AdmissionReview\", got \"Pod\""},
      {"no kind", R"({"apiVersion":"admission.k8s.io/v1"})", "kind: expected \"AdmissionReview\", got \"\""},
      {"kind not string", R"({"apiVersion":"admission.k8s.io/v1","kind":1})", "kind: expected a string"},
      {"wrong version", R"({"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview"})",
       "apiVersion: expected \"admission.k8s.io/v1\", got \"admission.k8s.io/v2\""},
      {"no request", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"})", "request: missing"},
      {"null request", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null})",
       "request: missing"},
      {"request not a map", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":[]})",
       "request: expected a map"},
      {"no uid", review_with(no_uid), "request.uid: missing or empty"},
      {"empty uid", review_with(empty_uid), "request.uid: missing or empty"},
      {"uid not string", review_with(uid_number), "request.uid: expected a string"},
      {"operation not string", review_with(op_number), "request.operation: expected a string"},
      {"kind not a map", review_with(kind_string), "request.kind: expected a map"},
      {"dryRun not bool", review_with(dry_run_string), "request.dryRun: expected a boolean"},
      // Another JSON implementation could take the other copy: refuse rather than guess.
      {"duplicate object", R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u",
        "object":{"metadata":{"name":"a"}},"object":false}})",
       "request: duplicate key \"object\""},
      {"duplicate uid",
       R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","uid":"v"}})",
       "request: duplicate key \"uid\""},
      {"duplicate request",
       R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{},"request":{}})",
       "duplicate key \"request\""},
      {"duplicate apiVersion", R"({"apiVersion":"admission.k8s.io/v1","apiVersion":"x","kind":"AdmissionReview"})",
       "duplicate key \"apiVersion\""},
  };
  Reviewer reviewer;
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const ReviewResult r = reviewer.review(c.body, preset_config());
    CHECK(r.outcome == Outcome::Invalid);
    CHECK(r.body.empty());
    CAPTURE(r.error);
    CHECK(r.error.rfind(c.want, 0) == 0);
  }
}

TEST_CASE("a mutated review answers with the uid, a base64 JSON Patch and its type") {
  Reviewer reviewer;
  const ReviewResult r = reviewer.review(review_with(pod_request()), preset_config());
  REQUIRE(r.outcome == Outcome::Mutated);
  const json resp = json::parse(r.body);
  CHECK(resp["apiVersion"] == "admission.k8s.io/v1");
  CHECK(resp["kind"] == "AdmissionReview");
  CHECK(resp["response"]["uid"] == "u-1");
  CHECK(resp["response"]["allowed"] == true);
  CHECK(resp["response"]["patchType"] == "JSONPatch");
  const auto patch = common::base64_decode(resp["response"]["patch"].get<std::string>());
  REQUIRE(patch.has_value());
  CHECK(json::parse(*patch).is_array());
  CHECK(r.pod.display() == "team-a/p");
  CHECK(r.ops.size() == json::parse(*patch).size());
  CHECK(r.injected == std::vector<std::string>{"erdma-env"});
}

TEST_CASE("a padded body is reviewed in place, whatever its padding holds") {
  // The server reads bodies into buffers with kBodyPadding spare bytes and says so; simdjson then
  // parses without copying. The answer must be that of the same text unpadded, and bytes past
  // the end must never be read as part of the body (a truncated body stays invalid even when
  // the padding would complete it).
  const std::string whole = review_with(pod_request());
  const std::string cut = whole.substr(0, whole.size() - 2);
  Reviewer plain, padded;
  for (const char fill : {'\0', '}', '"', ' '}) {
    CAPTURE(static_cast<int>(fill));
    for (const std::string* text : {&whole, &cut}) {
      std::string buffer = *text + std::string(kBodyPadding, fill);
      if (text == &cut) buffer.replace(cut.size(), 2, "}}");  // would close the cut review
      const ReviewResult want = plain.review(*text, preset_config());
      const ReviewResult got =
          padded.review(ReviewBody(std::string_view(buffer).substr(0, text->size()), true), preset_config());
      CHECK(got.outcome == want.outcome);
      CHECK(got.body == want.body);
      CHECK(got.error == want.error);
    }
  }
  CHECK(plain.review(whole, preset_config()).outcome == Outcome::Mutated);
  CHECK(plain.review(cut, preset_config()).outcome == Outcome::Invalid);
}

TEST_CASE("v1beta1 reviews are answered in v1beta1") {
  Reviewer reviewer;
  const ReviewResult r = reviewer.review(review_with(pod_request(), "admission.k8s.io/v1beta1"), preset_config());
  REQUIRE(r.outcome == Outcome::Mutated);
  CHECK(json::parse(r.body)["apiVersion"] == "admission.k8s.io/v1beta1");
}

TEST_CASE("a rejected pod is answered allowed:false with a status, never a patch") {
  json req = pod_request();
  req["object"]["spec"]["containers"][0]["env"] = "oops";
  Reviewer reviewer;
  const ReviewResult r = reviewer.review(review_with(req), preset_config());
  REQUIRE(r.outcome == Outcome::Rejected);
  const json resp = json::parse(r.body)["response"];
  CHECK(resp["allowed"] == false);
  CHECK_FALSE(resp.contains("patch"));
  CHECK(resp["status"]["code"] == 400);
  CHECK(resp["status"]["status"] == "Failure");
  CHECK(resp["status"]["message"] == "pod team-a/p: spec.containers[0].env: expected a list, got string");
}

TEST_CASE("append_review_response writes exactly the fields the apiserver checks") {
  std::string out;
  AdmissionResponse r;
  r.uid = "u\"1";
  append_review_response(out, "admission.k8s.io/v1", r);
  CHECK(out ==
        R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u\"1","allowed":true}})");

  out.clear();
  const std::vector<std::string> warnings = {"w1", "w\"2"};
  r.patch = "[]";
  r.warnings = warnings;
  append_review_response(out, "admission.k8s.io/v1", r);
  CHECK(
      out ==
      R"({"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u\"1","allowed":true,"patchType":"JSONPatch","patch":"W10=","warnings":["w1","w\"2"]}})");
}

TEST_CASE("one Reviewer serves many bodies - views never leak between them") {
  Reviewer reviewer;
  for (int i = 0; i < 50; ++i) {
    json req = pod_request();
    req["uid"] = "uid-" + std::to_string(i);
    req["object"]["metadata"]["name"] = "pod-" + std::to_string(i);
    if (i % 3 == 0) req["operation"] = "DELETE";
    const ReviewResult r = reviewer.review(review_with(req), preset_config());
    CHECK(json::parse(r.body)["response"]["uid"] == "uid-" + std::to_string(i));
    CHECK(r.outcome == (i % 3 == 0 ? Outcome::Skipped : Outcome::Mutated));
    if (i % 3 != 0) CHECK(r.pod.display() == "team-a/pod-" + std::to_string(i));
    if (i % 7 == 0) CHECK(reviewer.review("garbage", preset_config()).outcome == Outcome::Invalid);
  }
}
