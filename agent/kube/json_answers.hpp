// What the API server's answers mean to the HTTPS client: a call's body as the JSON object the
// caller gets, and one line of a watch stream as the event it delivers. Pure: strings in, values
// or Errors out (the status mapping is api.hpp's error_from_answer). Internal to the agent's API
// client (agent_kube); callers use api.hpp.
#pragma once

#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.hpp"

namespace erdma::agent::kube::https {

// The answer to `verb` on `path`: a status that is not 2xx is error_from_answer's Error; a 2xx is
// null when `want_object` is false, else its body, which must be a JSON object (InvalidArgument
// naming the call, the status, the body's size and `content_type` otherwise; nothing of it used).
[[nodiscard]] Result<nlohmann::json> call_answer(std::string_view verb, std::string_view path, unsigned status,
                                                 std::string_view body, std::string_view content_type,
                                                 bool want_object);

// One line of the watch stream on `path` (newline-delimited WatchEvent objects): nothing for a
// blank line, else the event. Errors: InvalidArgument naming `what` when the line is not a JSON
// object with a "type"; an ERROR event is the Error its Status object maps to (error_from_answer
// for "WATCH"; a code that is not a plausible HTTP status counts as 500).
[[nodiscard]] Result<std::optional<nlohmann::json>> watch_event(std::string_view what, std::string_view path,
                                                                std::string_view line);

}  // namespace erdma::agent::kube::https
