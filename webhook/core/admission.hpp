// AdmissionReview (admission.k8s.io/v1) in and out, and the whole pure path of one review:
// body -> decode -> mutate -> encoded response. No I/O; the server and the CLI share it.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "common/result.hpp"
#include "webhook/core/config.hpp"
#include "webhook/core/mutate.hpp"

namespace erdma::webhook {

inline constexpr std::string_view kAdmissionV1 = "admission.k8s.io/v1";
inline constexpr std::string_view kAdmissionV1beta1 = "admission.k8s.io/v1beta1";

// How many readable bytes past its end a body must have for decode() to parse it where it lies
// instead of copying it into a padded buffer first (their values do not matter).
inline constexpr size_t kBodyPadding = simdjson::SIMDJSON_PADDING;

// A request body and whether kBodyPadding readable bytes follow it (the server reads bodies into
// such buffers; a plain string_view is not padded).
struct ReviewBody {
  std::string_view text;
  bool padded = false;

  // Implicit, so that review() takes any string as before (unpadded).
  ReviewBody(std::string_view t, bool p = false) : text(t), padded(p) {}  // NOLINT
  ReviewBody(const std::string& t) : text(t) {}                           // NOLINT
  ReviewBody(const char* t) : text(t) {}                                  // NOLINT
};

// The fields of AdmissionReview.request the webhook reads. Views point into the decoder's
// buffers and stay valid until its next decode().
struct AdmissionRequest {
  std::string_view api_version;  // of the review, echoed in the response
  std::string_view uid;
  std::string_view kind_group, kind_version, kind_kind;
  std::string_view resource_group, resource_version, resource;
  std::string_view sub_resource;
  std::string_view operation;
  std::string_view namespace_name;
  std::string_view name;
  bool dry_run = false;
  bool has_object = false;
  simdjson::dom::element object;
};

// Parses AdmissionReview bodies with simdjson, reusing its buffers across calls. Not thread-safe:
// give each thread its own.
class ReviewDecoder {
 public:
  // Errors (InvalidArgument): not JSON, not UTF-8, not an AdmissionReview of a supported version,
  // no request, no uid, or a request field of the wrong type. Messages say which.
  [[nodiscard]] Result<AdmissionRequest> decode(ReviewBody body);

  // Frees the parser's buffers when the last document made them larger than kKeptCapacity, so a
  // thread does not hold the memory of the largest body it ever saw. Invalidates what decode
  // returned.
  void release_large_buffers();
  static constexpr size_t kKeptCapacity = 1u << 20;
  [[nodiscard]] size_t capacity() const noexcept { return parser_.capacity(); }

 private:
  simdjson::dom::parser parser_;
};

struct AdmissionResponse {
  std::string_view uid;
  bool allowed = true;
  std::string_view patch;  // JSON Patch text; empty = no patch
  std::span<const std::string> warnings;
  int status_code = 0;  // for allowed == false
  std::string_view status_reason;
  std::string status_message;
};

// Appends the response AdmissionReview: same apiVersion and kind as the request, response.uid
// echoed, patch base64-encoded with patchType JSONPatch only when there is one.
void append_review_response(std::string& out, std::string_view api_version, const AdmissionResponse& response);

enum class Outcome {
  Mutated,    // allowed with a patch
  Unchanged,  // allowed, a target with nothing left to add
  Skipped,    // allowed, not a target (or not a Pod CREATE)
  Rejected,   // allowed: false (the pod cannot be mutated as asked); still an HTTP 200 answer
  Invalid,    // the body is not a usable AdmissionReview: answer HTTP 400, no review
};

[[nodiscard]] std::string_view to_string(Outcome o) noexcept;

// What one review produced: the mutation (its reason, pod, operations, warnings and tokens, as
// mutate() made them; for a request that never reached mutate(), the pod named by the request and
// why it was passed), the response body, and what the log line, the metrics and the CLI need
// besides. The server's log record is this same object.
struct ReviewResult : Mutation {
  Outcome outcome = Outcome::Invalid;
  std::string body;   // the response AdmissionReview (empty when Invalid)
  std::string error;  // why Invalid or Rejected
  std::string uid;
  std::string patch;  // `ops` as JSON Patch text (empty when there are none)
};

// Decodes `body`, mutates the Pod of a CREATE, and encodes the answer. Never throws.
class Reviewer {
 public:
  [[nodiscard]] ReviewResult review(ReviewBody body, const Config& cfg);
  // The parser keeps at most this capacity between reviews (see ReviewDecoder::release_large_buffers).
  static constexpr size_t kMaxKeptParserCapacity = ReviewDecoder::kKeptCapacity;
  // Bytes of JSON the parser can take without allocating.
  [[nodiscard]] size_t parser_capacity() const noexcept { return decoder_.capacity(); }

 private:
  ReviewResult review_once(ReviewBody body, const Config& cfg);

  ReviewDecoder decoder_;
};

}  // namespace erdma::webhook
