// The HTTP requests of the API client (see https_request.hpp).
#include "agent/kube/https_request.hpp"

namespace erdma::agent::kube::https {
namespace {

namespace http = boost::beast::http;

constexpr const char* kUserAgent = "erdma-agent";

}  // namespace

http::request<http::string_body> make_request(http::verb verb, std::string_view path, const nlohmann::json* body,
                                              const std::string& token, const std::string& host_header) {
  http::request<http::string_body> req{verb, std::string(path), 11};
  req.set(http::field::host, host_header);
  req.set(http::field::user_agent, kUserAgent);
  req.set(http::field::accept, "application/json");
  req.set(http::field::authorization, "Bearer " + token);
  if (body != nullptr) {
    req.set(http::field::content_type, "application/json");
    req.body() = body->dump();
  }
  req.keep_alive(true);
  req.prepare_payload();
  return req;
}

nlohmann::json delete_options(std::string_view resource_version) {
  nlohmann::json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (!resource_version.empty()) options["preconditions"] = {{"resourceVersion", std::string(resource_version)}};
  return options;
}

}  // namespace erdma::agent::kube::https
