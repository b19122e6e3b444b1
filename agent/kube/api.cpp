// The client-independent parts of the API seam (see api.hpp): query escaping and the one mapping
// from an API server's answer to an Error.
#include "agent/kube/api.hpp"

#include <string>

#include "common/json_read.hpp"

namespace erdma::agent::kube {
namespace {

constexpr size_t kMaxQuotedBody = 512;  // a non-Status error body is quoted up to this many bytes

bool is_unreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
         c == '_' || c == '~';
}

std::string reason_phrase(unsigned status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 413: return "Request Entity Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
  }
}

// Printable, bounded: an error body may be anything (an HTML page from a proxy).
std::string quote_body(std::string_view body) {
  std::string out;
  for (char c : body.substr(0, kMaxQuotedBody)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : ' ';
  }
  if (body.size() > kMaxQuotedBody) out += "...";
  return out;
}

}  // namespace

std::string url_query_escape(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (is_unreserved(c)) {
      out += c;
    } else {
      const auto u = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 0x0f];
    }
  }
  return out;
}

Error error_from_answer(std::string_view verb, std::string_view path, unsigned http_status, std::string_view body) {
  // The server's words: a Status object ({"kind":"Status","reason":...,"message":...}) when it
  // sent one, else the body itself, quoted.
  std::string reason;
  std::string detail;
  const auto status = nlohmann::json::parse(body, nullptr, false);
  if (!status.is_discarded() && status.is_object() && (status.contains("reason") || status.contains("message"))) {
    const common::JsonAt at(status, "Status");
    reason = at.member("reason").if_string().value_or("");
    detail = at.member("message").if_string().value_or("");
  } else if (!body.empty()) {
    detail = quote_body(body);
  }

  ErrorCode code = ErrorCode::Unavailable;
  std::string hint;
  if (http_status == 400 || http_status == 422) {
    code = ErrorCode::InvalidArgument;
    hint = "the server refused the request as invalid";
  } else if (http_status == 401) {
    code = ErrorCode::PermissionDenied;
    hint = "the server refused the service-account token (expired, revoked or for another audience): "
           "check the pod's projected token";
  } else if (http_status == 403) {
    code = ErrorCode::PermissionDenied;
    hint = "RBAC forbids this verb on this resource to the agent's service account: grant it in the "
           "agent's ClusterRole (docs/dra.md lists the rules)";
  } else if (http_status == 404) {
    code = ErrorCode::NotFound;
    hint = "no such object or resource";
  } else if (http_status == 410) {
    code = ErrorCode::NotFound;
    hint = "gone (the resourceVersion is too old): list again";
  } else if (http_status == 409) {
    // The server says which: reason AlreadyExists for a POST of a name that exists, Conflict for a
    // stale resourceVersion. Without a reason, a POST's 409 can only be the former.
    const bool exists = reason == "AlreadyExists" || (reason.empty() && verb == "POST");
    code = exists ? ErrorCode::AlreadyExists : ErrorCode::FailedPrecondition;
    hint = exists ? "an object of that name exists already"
                  : "the object changed since it was read (stale resourceVersion): list again and re-plan";
  } else if (http_status == 429 || http_status >= 500) {
    code = ErrorCode::Unavailable;
    hint = "the API server is overloaded or failing: retry with backoff";
  } else {
    code = ErrorCode::Unavailable;
    hint = "unexpected answer";
  }

  std::string msg;
  msg.append(verb).append(" ").append(path).append(": HTTP ").append(std::to_string(http_status));
  if (const auto phrase = reason_phrase(http_status); !phrase.empty()) msg.append(" ").append(phrase);
  if (!reason.empty()) msg.append(", reason ").append(reason);
  if (!detail.empty()) msg.append(": ").append(detail);
  msg.append(" (").append(hint).append(")");
  return make_error(code, std::move(msg));
}

}  // namespace erdma::agent::kube
