// AdmissionReview decoding/encoding and the review pipeline (see admission.hpp).
#include "webhook/core/admission.hpp"

#include <iterator>

#include "common/text.hpp"

namespace erdma::webhook {
namespace {

using simdjson::dom::element;
using simdjson::dom::object;

Error invalid(std::string message) { return make_error(ErrorCode::InvalidArgument, std::move(message)); }

// Reads an optional string field of a small map (group/version/kind); null and absent are "".
Status opt_string(object obj, std::string_view key, const std::string& path, std::string_view& out) {
  element e;
  if (obj.at_key(key).get(e) != simdjson::SUCCESS || e.is_null()) return {};
  if (e.get_string().get(out) != simdjson::SUCCESS) {
    return invalid(path + ": expected a string");
  }
  return {};
}

}  // namespace

Result<AdmissionRequest> ReviewDecoder::decode(ReviewBody input) {
  const std::string_view body = input.text;
  if (body.empty()) return invalid("request body is empty; expected an AdmissionReview");
  element doc;
  // A padded body is parsed in place; otherwise simdjson copies it into a padded buffer first.
  if (auto err = parser_.parse(body.data(), body.size(), !input.padded).get(doc); err != simdjson::SUCCESS) {
    return invalid(std::string("request body is not valid JSON: ") + simdjson::error_message(err));
  }
  object top;
  if (doc.get_object().get(top) != simdjson::SUCCESS) return invalid("request body is not a JSON object");

  // Every object is walked once, field by field. A key we read that appears twice is refused:
  // another JSON implementation could pick the other copy and apply our patch to something else.
  AdmissionRequest req;
  std::string_view kind;
  element request_el;
  bool has_request = false;
  std::string_view seen_top[3];  // apiVersion, kind, request
  for (auto field : top) {
    const std::string_view k = field.key;
    int slot = k == "apiVersion" ? 0 : k == "kind" ? 1 : k == "request" ? 2 : -1;
    if (slot < 0) continue;
    if (!seen_top[slot].empty()) return invalid("duplicate key \"" + std::string(k) + "\"");
    seen_top[slot] = k;
    if (slot == 2) {
      request_el = field.value;
      has_request = !field.value.is_null();
      continue;
    }
    if (field.value.is_null()) continue;
    std::string_view& out = slot == 0 ? req.api_version : kind;
    if (field.value.get_string().get(out) != simdjson::SUCCESS) return invalid(std::string(k) + ": expected a string");
  }
  if (kind != "AdmissionReview") {
    return invalid("kind: expected \"AdmissionReview\", got \"" + std::string(kind.substr(0, 64)) + "\"");
  }
  if (req.api_version != kAdmissionV1 && req.api_version != kAdmissionV1beta1) {
    return invalid("apiVersion: expected \"admission.k8s.io/v1\", got \"" + std::string(req.api_version.substr(0, 64)) +
                   "\"");
  }
  if (!has_request) return invalid("request: missing; an AdmissionReview sent to a webhook carries a request");
  object request;
  if (request_el.get_object().get(request) != simdjson::SUCCESS) return invalid("request: expected a map");

  struct StringField {
    std::string_view key;
    std::string_view* out;
  };
  const StringField strings[] = {{"uid", &req.uid},
                                 {"subResource", &req.sub_resource},
                                 {"operation", &req.operation},
                                 {"namespace", &req.namespace_name},
                                 {"name", &req.name}};
  bool seen[sizeof strings / sizeof strings[0]] = {};
  bool seen_kind = false, seen_resource = false, seen_dry_run = false, seen_object = false;
  for (auto field : request) {
    const std::string_view k = field.key;
    auto dup = [&](bool& flag) -> Status {
      if (flag) return invalid("request: duplicate key \"" + std::string(k) + "\"");
      flag = true;
      return {};
    };
    bool matched = false;
    for (size_t i = 0; i < std::size(strings); ++i) {
      if (k != strings[i].key) continue;
      matched = true;
      ERDMA_TRY(dup(seen[i]));
      if (field.value.is_null()) break;
      if (field.value.get_string().get(*strings[i].out) != simdjson::SUCCESS) {
        return invalid("request." + std::string(k) + ": expected a string");
      }
      break;
    }
    if (matched) continue;
    if (k == "kind" || k == "resource") {
      const bool is_kind = k == "kind";
      ERDMA_TRY(dup(is_kind ? seen_kind : seen_resource));
      if (field.value.is_null()) continue;
      object m;
      const std::string path = "request." + std::string(k);
      if (field.value.get_object().get(m) != simdjson::SUCCESS) return invalid(path + ": expected a map");
      auto& group = is_kind ? req.kind_group : req.resource_group;
      auto& version = is_kind ? req.kind_version : req.resource_version;
      auto& name = is_kind ? req.kind_kind : req.resource;
      ERDMA_TRY(opt_string(m, "group", path + ".group", group));
      ERDMA_TRY(opt_string(m, "version", path + ".version", version));
      ERDMA_TRY(opt_string(m, is_kind ? "kind" : "resource", path + "." + std::string(k), name));
    } else if (k == "dryRun") {
      ERDMA_TRY(dup(seen_dry_run));
      if (!field.value.is_null() && field.value.get_bool().get(req.dry_run) != simdjson::SUCCESS) {
        return invalid("request.dryRun: expected a boolean");
      }
    } else if (k == "object") {
      ERDMA_TRY(dup(seen_object));
      if (!field.value.is_null()) {
        req.has_object = true;
        req.object = field.value;
      }
    }
  }
  if (req.uid.empty()) return invalid("request.uid: missing or empty");
  return req;
}

void append_review_response(std::string& out, std::string_view api_version, const AdmissionResponse& r) {
  // One allocation for the whole answer: the fixed text, the base64 patch, then the strings.
  size_t size = 160 + api_version.size() + r.uid.size() + (r.patch.size() + 2) / 3 * 4 + r.status_message.size();
  for (const auto& w : r.warnings) size += w.size() + 8;
  out.reserve(out.size() + size);
  out += "{\"apiVersion\":";
  common::append_json_string(out, api_version);
  out += ",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":";
  common::append_json_string(out, r.uid);
  out += r.allowed ? ",\"allowed\":true" : ",\"allowed\":false";
  if (!r.patch.empty()) {
    out += ",\"patchType\":\"JSONPatch\",\"patch\":\"";
    common::append_base64(out, r.patch);
    out += '"';
  }
  if (!r.allowed) {
    out += ",\"status\":{\"status\":\"Failure\",\"code\":";
    out += std::to_string(r.status_code);
    out += ",\"reason\":";
    common::append_json_string(out, r.status_reason);
    out += ",\"message\":";
    common::append_json_string(out, r.status_message);
    out += '}';
  }
  if (!r.warnings.empty()) {
    out += ",\"warnings\":[";
    for (size_t i = 0; i < r.warnings.size(); ++i) {
      if (i > 0) out += ',';
      common::append_json_string(out, r.warnings[i]);
    }
    out += ']';
  }
  out += "}}";
}

std::string_view to_string(Outcome o) noexcept {
  switch (o) {
    case Outcome::Mutated: return "mutated";
    case Outcome::Unchanged: return "unchanged";
    case Outcome::Skipped: return "skipped";
    case Outcome::Rejected: return "rejected";
    case Outcome::Invalid: return "invalid";
  }
  return "unknown";
}

ReviewResult Reviewer::review(ReviewBody body, const Config& cfg) {
  ReviewResult result = review_once(body, cfg);
  decoder_.release_large_buffers();
  return result;
}

void ReviewDecoder::release_large_buffers() {
  // simdjson keeps the capacity of the largest document it parsed (about 14 bytes per input
  // byte); a fresh parser allocates again, sized to the next document.
  if (parser_.capacity() > kKeptCapacity) parser_ = simdjson::dom::parser{};
}

ReviewResult Reviewer::review_once(ReviewBody body, const Config& cfg) {
  ReviewResult result;
  auto decoded = decoder_.decode(body);
  if (!decoded) {
    result.outcome = Outcome::Invalid;
    result.error = std::move(decoded).error().message;
    return result;
  }
  const AdmissionRequest& req = *decoded;
  result.uid = std::string(req.uid);
  // Both come from the apiserver, the name from the pod's author: cut as PodView::ref.
  result.pod = PodRef{common::cut_for_message(req.namespace_name, 253), common::cut_for_message(req.name, 253)};

  AdmissionResponse resp;
  resp.uid = req.uid;
  auto answer = [&](Outcome o) {
    result.outcome = o;
    append_review_response(result.body, req.api_version, resp);
    return std::move(result);
  };

  // Only Pod CREATEs are ours; anything else the apiserver sends (a misconfigured rule) passes.
  if (req.kind_group != "" || req.kind_kind != "Pod" || !req.sub_resource.empty() ||
      (!req.resource.empty() && req.resource != "pods")) {
    result.reason = "not a Pod (kind " + std::string(req.kind_kind) +
                    (req.sub_resource.empty() ? "" : ", subresource " + std::string(req.sub_resource)) + ")";
    return answer(Outcome::Skipped);
  }
  if (req.operation != "CREATE") {
    result.reason = "operation " + std::string(req.operation) + " is not CREATE";
    return answer(Outcome::Skipped);
  }
  if (!req.has_object) {
    result.outcome = Outcome::Invalid;
    result.error = "request.object: missing; a Pod CREATE carries the pod";
    result.body.clear();
    return result;
  }

  auto mutation = mutate(req.object, NamespaceInfo{req.namespace_name}, cfg);
  if (!mutation) {
    result.error = std::move(mutation).error().message;
    resp.allowed = false;
    resp.status_code = 400;
    resp.status_reason = "BadRequest";
    resp.status_message = result.error;
    return answer(Outcome::Rejected);
  }
  static_cast<Mutation&>(result) = std::move(*mutation);
  if (!result.ops.empty()) {
    append_patch_json(result.patch, result.ops);
    resp.patch = result.patch;
  }
  resp.warnings = result.warnings;
  switch (result.decision) {
    case Decision::Mutated: return answer(Outcome::Mutated);
    case Decision::Unchanged: return answer(Outcome::Unchanged);
    case Decision::Skipped: return answer(Outcome::Skipped);
  }
  return answer(Outcome::Skipped);
}

}  // namespace erdma::webhook
