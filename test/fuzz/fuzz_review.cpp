// Fuzz target: the whole admission path on raw request bodies (what the apiserver, or anyone who
// can reach the port, sends). Beyond "no crash", it checks the promises of the webhook:
//   - an answer is valid JSON that echoes the request's uid and apiVersion;
//   - a patch applies to the request's pod with an independent JSON Patch implementation;
//   - mutating the patched pod again yields no operations (idempotence).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/text.hpp"
#include "webhook/core/admission.hpp"

namespace {

using nlohmann::json;
using namespace erdma::webhook;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_review: %s: %s\n", what, detail.c_str());
  std::abort();
}

const Config& config() {
  // Everything switched on, so every rule is reachable.
  static const Config cfg = [] {
    auto c = Config::load(json::parse(R"({
      "deviceMounts": [{"name": "erdma-sysfs", "hostPath": "/sys/class/infiniband", "mountPath": "/sys/class/infiniband"}],
      "smcr": {"env": [{"name": "SMC_SNDBUF", "value": "256k"}]}})"));
    if (!c.ok()) fail("config", c.error().message);
    return *c;
  }();
  return cfg;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Reviewer reviewer;
  static Reviewer second;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const ReviewResult r = reviewer.review(body, config());
  if (r.outcome == Outcome::Invalid) {
    if (!r.body.empty()) fail("invalid request got a body", r.error);
    if (r.error.empty()) fail("invalid request without a message", "");
    return 0;
  }
  const json resp = json::parse(r.body, nullptr, false);
  if (resp.is_discarded()) fail("response is not JSON", r.body);
  const json req = json::parse(body, nullptr, false);
  if (req.is_discarded()) return 0;  // simdjson and nlohmann differ on a corner (e.g. duplicate keys)
  if (!resp.contains("response") || resp["response"]["uid"] != req["request"]["uid"]) fail("uid not echoed", r.body);
  if (resp["apiVersion"] != req["apiVersion"]) fail("apiVersion not echoed", r.body);
  if (r.outcome == Outcome::Rejected) {
    if (resp["response"]["allowed"] != false || !r.ops.empty()) fail("rejection allowed or patched", r.body);
    return 0;
  }
  if (r.patch.empty()) return 0;
  const auto decoded = erdma::common::base64_decode(resp["response"]["patch"].get<std::string>());
  if (!decoded || *decoded != r.patch) fail("patch field is not base64 of the patch", r.body);
  const json patch = json::parse(r.patch, nullptr, false);
  if (patch.is_discarded() || !patch.is_array() || patch.size() != r.ops.size())
    fail("patch is not a JSON Patch", r.patch);

  json mutated;
  try {
    mutated = req["request"]["object"].patch(patch);
  } catch (const json::exception& e) {
    fail("patch does not apply", std::string(e.what()) + " patch=" + r.patch);
  }
  json again = req;
  again["request"]["object"] = mutated;
  const ReviewResult r2 = second.review(again.dump(), config());
  if (r2.outcome == Outcome::Invalid || r2.outcome == Outcome::Rejected || !r2.ops.empty()) {
    fail("second pass is not a no-op", std::string(to_string(r2.outcome)) + " " + r2.error + " patch=" + r2.patch);
  }
  return 0;
}
