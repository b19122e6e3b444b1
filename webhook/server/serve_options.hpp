// `erdma-webhook serve`'s settings: flags, the config file's `server` section, their parsing.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/byte_budget.hpp"
#include "common/result.hpp"
#include "webhook/server/tls_policy.hpp"

namespace erdma::webhook::server {

struct ServeOptions {
  std::string listen = "0.0.0.0:8443";
  std::string metrics_listen = "0.0.0.0:8080";
  std::string tls_cert;
  std::string tls_key;
  TlsPolicy tls_policy;   // --tls-min-version, --tls-cipher-suites (OpenSSL names)
  std::string client_ca;  // --client-ca: require client certificates from these CAs
  std::string config;     // webhook config file; empty = defaults
  unsigned threads = 0;   // 0 = one per core
  size_t max_body_bytes = 8u << 20;
  // All request bodies being read or served hold at most this many bytes together; a body that
  // does not fit is answered 429 with Retry-After (see body_budget_limits).
  size_t body_budget = 32u << 20;
  size_t max_connections = 1024;
  size_t max_connections_per_peer = 64;
  std::chrono::milliseconds shutdown_grace{10000};
  std::chrono::milliseconds reload_interval{10000};
  std::chrono::milliseconds idle_timeout{120000};               // keep-alive connection with no request
  std::chrono::milliseconds idle_timeout_before_review{15000};  // the same before its first AdmissionReview
  std::chrono::milliseconds body_timeout{8000};                 // a request body must arrive whole within this
  std::string log_level = "info";
  std::string port_file;  // where to write the bound ports (for tests and scripts)
};

// Parses a duration: "10s", "500ms", "2m", or a plain number of seconds. Errors name the input.
[[nodiscard]] Result<std::chrono::milliseconds> parse_duration(std::string_view text);

// Parses a byte size: "8388608", "8Mi", "512Ki", "1Gi". Errors name the input.
[[nodiscard]] Result<size_t> parse_bytes(std::string_view text);

// The shape of the request-body budget of `total` bytes: a quarter of it is kept for bodies of at
// most 64 KiB (an ordinary AdmissionReview is a few KiB), which may use all of it; a larger body
// fits only while everything held stays within the other three quarters. So ordinary reviews
// are served while large bodies hold all they may.
[[nodiscard]] common::ByteBudget::Limits body_budget_limits(size_t total) noexcept;

// Applies a config file's `server` section (keys listen, metricsListen, tlsCert, tlsKey,
// tlsMinVersion, tlsCipherSuites, clientCA, threads, maxBodyBytes, bodyBudget, maxConnections,
// maxConnectionsPerPeer, shutdownGrace, reloadInterval, idleTimeout, idleTimeoutBeforeReview,
// logLevel) onto `opts`. tlsCipherSuites is a list of names or one
// comma-separated string. Unknown keys and wrong types are errors naming the key.
[[nodiscard]] Status apply_server_section(const nlohmann::json& section, ServeOptions& opts);

// Parses the command line of `serve` (flags win over the config file's server section), then checks
// the settings that depend on each other (the TLS minimum version against the suites, the body
// budget against the largest body).
// Returns the options, or an error message; `help` is set for -h/--help.
struct ParsedServe {
  ServeOptions options;
  bool help = false;
};
[[nodiscard]] Result<ParsedServe> parse_serve_args(const std::vector<std::string>& args);
// The same with a config file's `server` section applied first (null: none).
[[nodiscard]] Result<ParsedServe> parse_serve_args(const std::vector<std::string>& args, const nlohmann::json& section);

// The --help text.
[[nodiscard]] const char* serve_usage() noexcept;

}  // namespace erdma::webhook::server
