// The HTTP layer of the admission server as a plain function: one parsed request in, one response
// out. No sockets, no clock, no logging; the session (listener.cpp) reads and writes the bytes and
// records what handle() reports.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "webhook/core/admission.hpp"
#include "webhook/core/config.hpp"

namespace erdma::webhook::server {

inline constexpr std::string_view kMutatePath = "/mutate-pods";

// What the session knows about a request once its body has been read (size limits are enforced
// before that, from the headers; see listener.cpp).
struct HttpRequest {
  std::string_view method;        // "POST", "GET", ...
  std::string_view target;        // origin-form, may carry a query ("/mutate-pods?timeout=10s")
  std::string_view content_type;  // empty when the header is absent
  std::string_view body;
  bool body_padded = false;  // kBodyPadding readable bytes follow the body (parsed in place)
};

struct HttpResponse {
  unsigned status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::string allow;  // the Allow header of a 405
  // What admission decided, for the log line and the metrics (POST /mutate-pods only); its body
  // has moved to `body`.
  std::optional<ReviewResult> admission;
};

// Serves one request:
//   POST /mutate-pods (any query) with an application/json body -> 200 + AdmissionReview, or
//     400 when the body is not a usable AdmissionReview (never 5xx for what a client sent);
//   GET|HEAD /healthz -> 200; GET|HEAD /readyz -> 200, or 503 when `ready` is false (draining);
//   415 for a body that is not JSON, 405 (with Allow) for a wrong method, 404 otherwise.
// `reviewer` is the calling thread's own (it is not thread-safe); `cfg` is the current config.
[[nodiscard]] HttpResponse handle(const HttpRequest& req, const Config& cfg, Reviewer& reviewer, bool ready = true);

// The warnings returned to the client, one per line, for the log line.
[[nodiscard]] std::string warning_text(const ReviewResult& r);

// True if `content_type` names application/json (parameters such as charset ignored, case
// ignored), as the apiserver sends it.
[[nodiscard]] bool is_json_media_type(std::string_view content_type) noexcept;

// The path of an origin-form target without its query.
[[nodiscard]] std::string_view target_path(std::string_view target) noexcept;

}  // namespace erdma::webhook::server
