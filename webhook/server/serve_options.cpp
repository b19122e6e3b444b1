// `erdma-webhook serve`'s settings (see serve_options.hpp): its flags, the config file's `server`
// section, and the values they take.
#include "webhook/server/serve_options.hpp"

#include <charconv>

#include "common/config_reader.hpp"
#include "common/flags.hpp"
#include "common/listen_address.hpp"
#include "common/log.hpp"

namespace erdma::webhook::server {
namespace {

namespace log = common::log;

constexpr const char* kUsage = R"(Usage: erdma-webhook serve --tls-cert FILE --tls-key FILE [FLAGS]

Serves the mutating admission webhook over HTTPS/1.1 (what kube-apiserver calls) and Prometheus
metrics over plain HTTP. Certificate, key and config are reloaded when their files change
(Kubernetes Secret/ConfigMap volumes included); a bad new file is refused and the last good one
keeps serving. SIGTERM or SIGINT drains: /readyz turns 503, the listener closes, requests in
progress finish (up to --shutdown-grace), then the process exits 0.

HTTPS endpoints:   POST /mutate-pods (AdmissionReview v1/v1beta1; ?timeout= accepted)
                   GET  /healthz, /readyz
Metrics endpoints: GET  /metrics, /healthz, /readyz

Flags:
  --listen ADDR            HTTPS address (default 0.0.0.0:8443; port 0 picks a free port)
  --metrics-listen ADDR    plain-HTTP metrics address (default 0.0.0.0:8080)
  --tls-cert FILE          serving certificate, PEM, leaf first then intermediates (required)
  --tls-key FILE           its private key, PEM, unencrypted (required)
  --tls-min-version V      lowest TLS version accepted: 1.2 or 1.3 (default 1.2)
  --tls-cipher-suites LIST comma-separated IANA names, as kube-apiserver and Go write them
                           (default: all of them); TLS 1.2 suites are restricted by the
                           TLS_ECDHE_* names, TLS 1.3 suites by the TLS_AES_*/TLS_CHACHA20_*
                           names (none named: all three TLS 1.3 suites). Accepted:
                             TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
                             TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
                             TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
                             TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
                             TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
                             TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
                             TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384,
                             TLS_CHACHA20_POLY1305_SHA256
                           (the ECDSA suites serve an ECDSA certificate, the RSA ones an RSA one)
  --client-ca FILE         PEM CA certificate(s): every TLS connection must present a client
                           certificate signed by one of them (kube-apiserver does when its
                           admission kubeconfig names one), others fail the handshake. The
                           kubelet's HTTPS probes present none: probe the metrics port instead.
                           Reloaded with the serving certificate (default: none asked for)
  --config FILE            webhook configuration, YAML or JSON (default: built-in defaults)
  --threads N              I/O threads (default: the cores this process may run on)
  --max-body-bytes SIZE    larger request bodies get 413 (default 8Mi; e.g. 3Mi, 1048576)
  --body-budget SIZE       the bytes all request bodies being read or answered may hold
                           together (default 32Mi). A body that does not fit now is answered
                           429 with Retry-After: 1, before it is read; the apiserver retries.
                           A quarter is kept for bodies of at most 64Ki, so ordinary reviews
                           fit while large bodies hold the rest; at least 4/3 of
                           --max-body-bytes
  --max-connections N      open TLS connections at most (default 1024). A new connection
                           beyond it closes the connection that has waited longest for a
                           request (first those that never carried an AdmissionReview); it is
                           closed itself only when every connection is mid-request
  --max-connections-per-peer N
                           open TLS connections from one IP address at most (default 64);
                           beyond it the peer's own longest-waiting connection is closed, or
                           the new one when all of the peer's are mid-request. The apiserver
                           needs one connection per review in flight: raise it when several
                           apiservers reach the webhook from one address (a NAT, konnectivity)
  --shutdown-grace DUR     how long a drain waits for requests in progress (default 10s)
  --reload-interval DUR    periodic re-check of the watched files (default 10s); changes are
                           normally picked up within a fraction of a second through inotify
  --idle-timeout DUR       close a keep-alive connection after this long without a request
                           (default 120s: longer than the 90 s after which the apiserver's Go
                           client retires idle connections, so the client closes first)
  --idle-timeout-before-review DUR
                           the idle timeout of a connection that has not yet carried an
                           AdmissionReview (probes, scanners, clients holding slots)
                           (default 15s; never longer than --idle-timeout)
  --body-timeout DUR       a request's body must arrive whole within this after its headers, or
                           the connection is closed and its share of the body budget given back
                           (default 8s)
  --log-level LEVEL        debug, info, warn or error (default info); logs are JSON lines on stderr
  --port-file FILE         once serving (listening, signals handled), write {"https":PORT,"metrics":PORT} to FILE
  -h, --help               this text

ADDR is host:port with an IP literal ([::]:8443 for IPv6). DUR is a number with ms, s, m or h
(a bare number is seconds). Every flag except --config and --port-file can also be set in the
config file, in a top-level `server` section (keys listen, metricsListen, tlsCert, tlsKey,
tlsMinVersion, tlsCipherSuites (a list or a comma-separated string), clientCA, threads,
maxBodyBytes, bodyBudget, maxConnections, maxConnectionsPerPeer, shutdownGrace, reloadInterval, idleTimeout,
idleTimeoutBeforeReview, bodyTimeout, logLevel); flags win.
The server section is read at start-up only.

Exit status: 0 after a graceful drain, 1 when start-up fails, 2 for bad flags or config.
)";

constexpr common::FlagSpec kFlags[] = {
    {"--listen"},
    {"--metrics-listen"},
    {"--tls-cert"},
    {"--tls-key"},
    {"--config"},
    {"--threads"},
    {"--max-body-bytes"},
    {"--max-connections"},
    {"--shutdown-grace"},
    {"--reload-interval"},
    {"--log-level"},
    {"--port-file"},
    {"--idle-timeout"},
    {"--tls-min-version"},
    {"--tls-cipher-suites"},
    {"--client-ca"},
    {"--max-connections-per-peer"},
    {"--idle-timeout-before-review"},
    {"--body-budget"},
    {"--body-timeout"},
};

Result<unsigned long long> parse_count(std::string_view text, std::string_view what, unsigned long long min,
                                       unsigned long long max) {
  unsigned long long v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size() || v < min || v > max) {
    return make_error(ErrorCode::InvalidArgument, std::string(what) + ": expected a whole number from " +
                                                      std::to_string(min) + " to " + std::to_string(max) + ", got \"" +
                                                      std::string(text.substr(0, 64)) + "\"");
  }
  return v;
}

Status set_option(ServeOptions& o, std::string_view name, const std::string& value) {
  if (name == "--listen") {
    o.listen = value;
  } else if (name == "--metrics-listen") {
    o.metrics_listen = value;
  } else if (name == "--tls-cert") {
    o.tls_cert = value;
  } else if (name == "--tls-key") {
    o.tls_key = value;
  } else if (name == "--tls-min-version") {
    ERDMA_TRY_ASSIGN(auto v, parse_tls_version(value));
    o.tls_policy.min_version = v;
  } else if (name == "--tls-cipher-suites") {
    ERDMA_TRY_ASSIGN(auto v, parse_cipher_suites(value));
    o.tls_policy.tls12_ciphers = std::move(v.tls12);
    o.tls_policy.tls13_suites = std::move(v.tls13);
  } else if (name == "--client-ca") {
    if (value.empty()) return make_error(ErrorCode::InvalidArgument, "--client-ca: expected a file name");
    o.client_ca = value;
  } else if (name == "--config") {
    o.config = value;
  } else if (name == "--threads") {
    ERDMA_TRY_ASSIGN(auto v, parse_count(value, name, 1, 256));
    o.threads = static_cast<unsigned>(v);
  } else if (name == "--max-body-bytes") {
    auto v = parse_bytes(value);
    if (!v) return make_error(ErrorCode::InvalidArgument, "--max-body-bytes: " + v.error().message);
    o.max_body_bytes = *v;
  } else if (name == "--body-budget") {
    auto v = parse_bytes(value);
    if (!v) return make_error(ErrorCode::InvalidArgument, "--body-budget: " + v.error().message);
    o.body_budget = *v;
  } else if (name == "--max-connections") {
    ERDMA_TRY_ASSIGN(auto v, parse_count(value, name, 1, 1'000'000));
    o.max_connections = static_cast<size_t>(v);
  } else if (name == "--max-connections-per-peer") {
    ERDMA_TRY_ASSIGN(auto v, parse_count(value, name, 1, 1'000'000));
    o.max_connections_per_peer = static_cast<size_t>(v);
  } else if (name == "--idle-timeout-before-review") {
    auto v = parse_duration(value);
    if (!v) return make_error(ErrorCode::InvalidArgument, std::string(name) + ": " + v.error().message);
    if (v->count() < 100) return make_error(ErrorCode::InvalidArgument, std::string(name) + ": must be at least 100ms");
    o.idle_timeout_before_review = *v;
  } else if (name == "--body-timeout") {
    auto v = parse_duration(value);
    if (!v) return make_error(ErrorCode::InvalidArgument, std::string(name) + ": " + v.error().message);
    if (v->count() < 100) return make_error(ErrorCode::InvalidArgument, std::string(name) + ": must be at least 100ms");
    o.body_timeout = *v;
  } else if (name == "--shutdown-grace" || name == "--reload-interval" || name == "--idle-timeout") {
    auto v = parse_duration(value);
    if (!v) return make_error(ErrorCode::InvalidArgument, std::string(name) + ": " + v.error().message);
    if (name != "--shutdown-grace" && v->count() < 100) {
      return make_error(ErrorCode::InvalidArgument, std::string(name) + ": must be at least 100ms");
    }
    (name == "--shutdown-grace" ? o.shutdown_grace
     : name == "--idle-timeout" ? o.idle_timeout
                                : o.reload_interval) = *v;
  } else if (name == "--log-level") {
    if (!log::parse_level(value)) {
      return make_error(ErrorCode::InvalidArgument,
                        "--log-level: expected debug, info, warn or error, got \"" + value.substr(0, 64) + "\"");
    }
    o.log_level = value;
  } else if (name == "--port-file") {
    o.port_file = value;
  } else {
    return make_error(ErrorCode::InvalidArgument, "unknown flag " + std::string(name));
  }
  return {};
}

// A body of --max-body-bytes must fit the budget beside its reserve, or it would be refused for
// ever (429 after 429).
Status check_body_budget(const ServeOptions& o) {
  const auto limits = body_budget_limits(o.body_budget);
  if (limits.total - limits.reserve >= o.max_body_bytes) return {};
  const size_t least = 4 * (o.max_body_bytes - 1) / 3 + 1;  // the smallest budget that fits one (sizes <= 4Gi)
  return make_error(ErrorCode::InvalidArgument, "--body-budget " + std::to_string(o.body_budget) +
                                                    ": a body of --max-body-bytes (" +
                                                    std::to_string(o.max_body_bytes) +
                                                    ") would never fit, since a quarter of the budget is "
                                                    "kept for bodies of at most 64Ki; set --body-budget to at least " +
                                                    std::to_string(least) + " or lower --max-body-bytes");
}

Result<ParsedServe> parse_with_section(const std::vector<std::string>& args, const nlohmann::json* section) {
  ERDMA_TRY_ASSIGN(auto raw, common::parse_flags(args, kFlags));
  if (!raw.positional.empty()) {
    return make_error(ErrorCode::InvalidArgument, "unexpected argument \"" + raw.positional.front() + "\"");
  }
  ParsedServe out;
  out.help = raw.help;
  if (section != nullptr && !section->is_null()) {
    ERDMA_TRY(apply_server_section(*section, out.options));
  }
  for (const auto& [name, value] : raw.values) {
    ERDMA_TRY(set_option(out.options, name, value));
  }
  ERDMA_TRY(check_tls_policy(out.options.tls_policy));
  ERDMA_TRY(check_body_budget(out.options));
  return out;
}

}  // namespace

common::ByteBudget::Limits body_budget_limits(size_t total) noexcept { return {total, total / 4, size_t{64} << 10}; }

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string_view unit = text.substr(digits);
  unsigned long long v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, v);
  long long scale = 0;
  if (unit.empty() || unit == "s")
    scale = 1000;
  else if (unit == "ms")
    scale = 1;
  else if (unit == "m")
    scale = 60'000;
  else if (unit == "h")
    scale = 3'600'000;
  if (digits == 0 || ec != std::errc() || scale == 0 || v > 1'000'000'000ULL) {
    return make_error(ErrorCode::InvalidArgument,
                      "expected a duration such as 10s, 500ms or 2m, got \"" + std::string(text.substr(0, 64)) + "\"");
  }
  return std::chrono::milliseconds(static_cast<long long>(v) * scale);
}

Result<size_t> parse_bytes(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  std::string_view unit = text.substr(digits);
  if (unit.ends_with("B") && unit.size() == 3) unit.remove_suffix(1);  // KiB, MiB, GiB
  unsigned long long v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, v);
  unsigned shift = 64;
  if (unit.empty())
    shift = 0;
  else if (unit == "Ki")
    shift = 10;
  else if (unit == "Mi")
    shift = 20;
  else if (unit == "Gi")
    shift = 30;
  constexpr unsigned long long kMax = 1ULL << 32;  // 4 GiB: far beyond any admission body
  if (digits == 0 || ec != std::errc() || shift == 64 || v == 0 || v > (kMax >> shift)) {
    return make_error(ErrorCode::InvalidArgument,
                      "expected a size from 1 byte to 4Gi such as 8Mi, 512Ki or 1048576, got \"" +
                          std::string(text.substr(0, 64)) + "\"");
  }
  return static_cast<size_t>(v << shift);
}

Status apply_server_section(const nlohmann::json& section, ServeOptions& opts) {
  namespace cfg = common::config;
  if (auto s = cfg::expect_map(section, "server"); !s) return s;
  if (auto s = cfg::check_keys(section, "server",
                               {"listen", "metricsListen", "tlsCert", "tlsKey", "tlsMinVersion", "tlsCipherSuites",
                                "clientCA", "threads", "maxBodyBytes", "bodyBudget", "maxConnections",
                                "maxConnectionsPerPeer", "shutdownGrace", "reloadInterval", "idleTimeout",
                                "idleTimeoutBeforeReview", "bodyTimeout", "logLevel"});
      !s) {
    return s;
  }
  static const std::pair<const char*, const char*> kSectionKeys[] = {
      {"listen", "--listen"},
      {"metricsListen", "--metrics-listen"},
      {"tlsCert", "--tls-cert"},
      {"tlsKey", "--tls-key"},
      {"threads", "--threads"},
      {"maxBodyBytes", "--max-body-bytes"},
      {"bodyBudget", "--body-budget"},
      {"maxConnections", "--max-connections"},
      {"shutdownGrace", "--shutdown-grace"},
      {"reloadInterval", "--reload-interval"},
      {"logLevel", "--log-level"},
      {"idleTimeout", "--idle-timeout"},
      {"tlsMinVersion", "--tls-min-version"},
      {"tlsCipherSuites", "--tls-cipher-suites"},
      {"clientCA", "--client-ca"},
      {"maxConnectionsPerPeer", "--max-connections-per-peer"},
      {"idleTimeoutBeforeReview", "--idle-timeout-before-review"},
      {"bodyTimeout", "--body-timeout"},
  };
  for (const auto& [key, flag] : kSectionKeys) {
    const nlohmann::json* value = cfg::get(section, key);
    if (value == nullptr) continue;
    const std::string path = std::string("server.") + key;
    std::string text;
    if (value->is_string()) {
      text = value->get<std::string>();
    } else if (value->is_number_integer()) {
      text = value->dump();
    } else if (value->is_array() && std::string_view(key) == "tlsCipherSuites") {
      // The YAML list form, as kube-apiserver's config files write cipher suites.
      for (size_t i = 0; i < value->size(); ++i) {
        const auto& item = (*value)[i];
        if (!item.is_string()) return cfg::type_error(item, path + "[" + std::to_string(i) + "]", "a suite name");
        text += (i == 0 ? "" : ",") + item.get<std::string>();
      }
    } else {
      return cfg::type_error(*value, path, "a string or a whole number");
    }
    if (auto s = set_option(opts, flag, text); !s) return cfg::error(path, s.error().message);
  }
  return {};
}

Result<ParsedServe> parse_serve_args(const std::vector<std::string>& args) { return parse_with_section(args, nullptr); }

Result<ParsedServe> parse_serve_args(const std::vector<std::string>& args, const nlohmann::json& section) {
  return parse_with_section(args, &section);
}

const char* serve_usage() noexcept { return kUsage; }

}  // namespace erdma::webhook::server
