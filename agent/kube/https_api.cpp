// The HTTPS Api's calls (see https_api.hpp): GET, POST, PUT and DELETE on one kept-alive
// connection, the answer decoded; and make_https_api. The transport is https_connection.*, the
// requests https_request.*, the answers json_answers.*, the watch stream https_watch.cpp.
#include "agent/kube/https_api.hpp"

#include <utility>

#include "agent/kube/https_request.hpp"
#include "agent/kube/json_answers.hpp"

namespace erdma::agent::kube {
namespace https {
namespace {

std::string verb_name(http::verb verb) { return std::string(http::to_string(verb)); }

}  // namespace

Status HttpsApi::remove(std::string_view path, std::string_view resource_version) {
  const nlohmann::json options = delete_options(resource_version);
  auto answer = call(http::verb::delete_, path, &options, /*want_object=*/false);
  if (!answer) return std::move(answer).error();
  return {};
}

Result<nlohmann::json> HttpsApi::call(http::verb verb, std::string_view path, const nlohmann::json* body,
                                      bool want_object) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string what = verb_name(verb) + " " + std::string(path);
  auto token_read = token_.current();
  if (!token_read) return make_error(token_read.error().code, what + ": " + token_read.error().message);
  const std::string token = std::move(token_read).value();
  auto req = make_request(verb, path, body, token, endpoint_.host_header);
  const auto deadline = Clock::now() + config_.timeout;
  // At most two tries: the second only when a reused connection failed before any answer
  // arrived (the server closed it while it was idle).
  for (int attempt = 0;; ++attempt) {
    if (!conn_.is_open()) {
      if (auto opened = conn_.open(deadline - Clock::now()); !opened) {
        return make_error(opened.error().code, what + ": " + opened.error().message);
      }
    }
    const bool reused = conn_.reused();
    http::response_parser<http::string_body> parser;
    parser.header_limit(kMaxHeaderBytes);
    parser.body_limit(kMaxAnswerBytes);
    beast::error_code ec = conn_.write(req, deadline);
    if (!ec) ec = conn_.read(parser, deadline);
    if (ec) {
      const bool nothing_read = !parser.got_some();
      conn_.close();
      if (ec == beast::error::timeout) {
        return make_error(ErrorCode::DeadlineExceeded,
                          what + ": no answer within " + std::to_string(config_.timeout.count()) + " ms");
      }
      if (ec == http::error::body_limit || ec == http::error::header_limit) {
        return make_error(ErrorCode::ResourceExhausted,
                          what + ": the answer exceeds " + std::to_string(kMaxAnswerBytes >> 20) +
                              " MiB; nothing of it is used (narrow the request with a selector)");
      }
      if (reused && nothing_read && attempt == 0) continue;
      return Connection::unavailable(what, ec);
    }
    auto& res = parser.get();
    if (!res.keep_alive()) conn_.close();
    const unsigned status = res.result_int();
    if (status == 401) token_.invalidate();
    return call_answer(verb_name(verb), path, status, res.body(), res[http::field::content_type], want_object);
  }
}

}  // namespace https

Result<std::unique_ptr<Api>> make_https_api(ApiConfig config) {
  ERDMA_TRY_ASSIGN(https::Endpoint endpoint, https::parse_server(config.server));
  ERDMA_TRY_ASSIGN(auto trust, https::TrustFile::open(config.ca_file));
  return std::unique_ptr<Api>(new https::HttpsApi(std::move(config), std::move(endpoint), std::move(trust)));
}

}  // namespace erdma::agent::kube
