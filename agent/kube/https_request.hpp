// What the HTTPS client sends: the HTTP/1.1 request for one call, and the body of a DELETE.
// Internal to the agent's API client (agent_kube); callers use api.hpp.
#pragma once

#include <string>
#include <string_view>

#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

namespace erdma::agent::kube::https {

// `verb` on `path` (with its query) for `host_header`, keep-alive, answer wanted as JSON, the
// bearer `token`; `body` (may be null) as an application/json body. Pure.
[[nodiscard]] boost::beast::http::request<boost::beast::http::string_body> make_request(boost::beast::http::verb verb,
                                                                                        std::string_view path,
                                                                                        const nlohmann::json* body,
                                                                                        const std::string& token,
                                                                                        const std::string& host_header);

// The DeleteOptions a DELETE carries: preconditions.resourceVersion when `resource_version` is not
// empty. Pure.
[[nodiscard]] nlohmann::json delete_options(std::string_view resource_version);

}  // namespace erdma::agent::kube::https
