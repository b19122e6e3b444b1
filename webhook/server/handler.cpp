// The request -> response function of the admission server (see handler.hpp).
#include "webhook/server/handler.hpp"

#include "common/text.hpp"

namespace erdma::webhook::server {
namespace {

HttpResponse text(unsigned status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  r.body += '\n';
  return r;
}

HttpResponse method_not_allowed(std::string allow) {
  HttpResponse r = text(405, "method not allowed; use " + allow);
  r.allow = std::move(allow);
  return r;
}

std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

HttpResponse admit(const HttpRequest& req, const Config& cfg, Reviewer& reviewer) {
  if (!is_json_media_type(req.content_type)) {
    HttpResponse r = text(415, req.content_type.empty()
                                   ? "missing Content-Type; an AdmissionReview is sent as application/json"
                                   : "unsupported Content-Type; an AdmissionReview is sent as application/json");
    ReviewResult rec;
    rec.error = "content type is not application/json";
    r.admission = std::move(rec);
    return r;
  }
  ReviewResult result = reviewer.review(ReviewBody(req.body, req.body_padded), cfg);
  HttpResponse r;
  if (result.outcome == Outcome::Invalid) {
    // The apiserver only sends well-formed reviews, so this is a client bug or a probe; the
    // message goes back as plain text (the error is ours to phrase, and always valid UTF-8).
    r = text(400, "invalid AdmissionReview: " + result.error);
  } else {
    r.status = 200;
    r.body = std::move(result.body);
  }
  r.admission = std::move(result);
  return r;
}

}  // namespace

std::string warning_text(const ReviewResult& r) {
  std::string out;
  for (const auto& w : r.warnings) {
    if (!out.empty()) out += '\n';
    out += w;
  }
  return out;
}

bool is_json_media_type(std::string_view content_type) noexcept {
  const auto semi = content_type.find(';');
  return common::iequals(trim(content_type.substr(0, semi)), "application/json");
}

std::string_view target_path(std::string_view target) noexcept {
  const auto q = target.find('?');
  return q == std::string_view::npos ? target : target.substr(0, q);
}

HttpResponse handle(const HttpRequest& req, const Config& cfg, Reviewer& reviewer, bool ready) {
  const std::string_view path = target_path(req.target);
  const bool get = req.method == "GET" || req.method == "HEAD";
  if (path == kMutatePath) {
    if (req.method != "POST") return method_not_allowed("POST");
    return admit(req, cfg, reviewer);
  }
  if (path == "/healthz") {
    if (!get) return method_not_allowed("GET, HEAD");
    return text(200, "ok");
  }
  if (path == "/readyz") {
    if (!get) return method_not_allowed("GET, HEAD");
    return ready ? text(200, "ok") : text(503, "shutting down");
  }
  std::string shown(path.substr(0, 128));
  if (!common::is_valid_utf8(shown)) shown = "<invalid UTF-8>";
  return text(404,
              "no such path " + common::json_quote(shown) + "; admission is served at " + std::string(kMutatePath));
}

}  // namespace erdma::webhook::server
