// The HTTPS Api (see make_https_api in api.hpp): calls on one kept-alive connection, serialized;
// each watch on a connection of its own. Internal to the agent's API client (agent_kube); callers
// use api.hpp. Calls are in https_api.cpp, the watch stream in https_watch.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string_view>

#include "agent/kube/api.hpp"
#include "agent/kube/https_connection.hpp"
#include "agent/kube/server_address.hpp"
#include "agent/kube/token_file.hpp"
#include "agent/kube/trust_file.hpp"

namespace erdma::agent::kube::https {

// The largest header block of an answer the client reads (calls and watches alike).
inline constexpr uint32_t kMaxHeaderBytes = 64 * 1024;

class HttpsApi final : public Api {
 public:
  HttpsApi(ApiConfig config, Endpoint endpoint, std::unique_ptr<TrustFile> trust)
      : config_(std::move(config)),
        endpoint_(std::move(endpoint)),
        trust_(std::move(trust)),
        token_(config_.token_file),
        conn_(*trust_, endpoint_) {}

  // Api
  Result<nlohmann::json> get(std::string_view path) override { return call(http::verb::get, path, nullptr); }
  Result<nlohmann::json> create(std::string_view path, const nlohmann::json& object) override {
    return call(http::verb::post, path, &object);
  }
  Result<nlohmann::json> replace(std::string_view path, const nlohmann::json& object) override {
    return call(http::verb::put, path, &object);
  }
  Status remove(std::string_view path, std::string_view resource_version) override;
  Status watch(std::string_view path, const WatchHandler& on_event, std::stop_token stop) override;
  bool can_watch() const noexcept override { return true; }

 private:
  Result<nlohmann::json> call(http::verb verb, std::string_view path, const nlohmann::json* body,
                              bool want_object = true);

  const ApiConfig config_;
  const Endpoint endpoint_;
  const std::unique_ptr<TrustFile> trust_;  // the CA, read again when it rotates
  TokenFile token_;
  std::mutex mu_;  // serializes calls on conn_
  Connection conn_;
};

}  // namespace erdma::agent::kube::https
