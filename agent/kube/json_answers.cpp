// The API server's answers, decoded (see json_answers.hpp).
#include "agent/kube/json_answers.hpp"

#include <string>

#include "agent/kube/api.hpp"
#include "common/json_read.hpp"

namespace erdma::agent::kube::https {

Result<nlohmann::json> call_answer(std::string_view verb, std::string_view path, unsigned status, std::string_view body,
                                   std::string_view content_type, bool want_object) {
  if (status < 200 || status > 299) return error_from_answer(verb, path, status, body);
  if (!want_object) return nlohmann::json();
  auto doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return make_error(ErrorCode::InvalidArgument,
                      std::string(verb) + " " + std::string(path) + ": HTTP " + std::to_string(status) +
                          " with a body that is not a JSON object (" + std::to_string(body.size()) +
                          " bytes, Content-Type " + std::string(content_type) + "); nothing of it is used");
  }
  return doc;
}

Result<std::optional<nlohmann::json>> watch_event(std::string_view what, std::string_view path, std::string_view line) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return std::optional<nlohmann::json>();
  auto event = nlohmann::json::parse(line, nullptr, false);
  if (event.is_discarded() || !event.is_object() || !event.contains("type")) {
    return make_error(ErrorCode::InvalidArgument, std::string(what) +
                                                      ": an event that is not a JSON WatchEvent object (" +
                                                      std::to_string(line.size()) + " bytes)");
  }
  const common::JsonAt at(event, "watch event");
  if (at.member("type").if_string() == "ERROR") {
    // A Status object; its code, when it is a plausible HTTP status, picks the Error.
    const auto code = at.path("object.code").uint64(599);
    const nlohmann::json* obj = at.member("object").get();
    return error_from_answer("WATCH", path, code && *code >= 100 ? static_cast<unsigned>(*code) : 500,
                             obj != nullptr ? obj->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                                            : std::string("{}"));
  }
  return std::optional<nlohmann::json>(std::move(event));
}

}  // namespace erdma::agent::kube::https
