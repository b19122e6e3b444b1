// Flags and the config file's server section of `erdma-webhook serve`.
#include "webhook/server/serve_options.hpp"

#include <doctest/doctest.h>

namespace erdma::webhook::server {
namespace {

TEST_CASE("durations") {
  CHECK(parse_duration("10s").value().count() == 10000);
  CHECK(parse_duration("10").value().count() == 10000);
  CHECK(parse_duration("250ms").value().count() == 250);
  CHECK(parse_duration("2m").value().count() == 120000);
  CHECK(parse_duration("1h").value().count() == 3600000);
  for (std::string_view bad : {"", "s", "-1s", "1.5s", "10 s", "10sec", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_duration(bad).ok());
  }
}

TEST_CASE("byte sizes") {
  CHECK(parse_bytes("8Mi").value() == 8u << 20);
  CHECK(parse_bytes("8MiB").value() == 8u << 20);
  CHECK(parse_bytes("512Ki").value() == 512u << 10);
  CHECK(parse_bytes("1048576").value() == 1048576u);
  CHECK(parse_bytes("4Gi").value() == size_t{1} << 32);
  for (std::string_view bad : {"", "0", "8M", "8mb", "5Gi", "-1", "Mi", "1.5Mi"}) {
    CAPTURE(bad);
    CHECK_FALSE(parse_bytes(bad).ok());
  }
}

TEST_CASE("flags: defaults, values, errors") {
  auto d = parse_serve_args({});
  REQUIRE(d.ok());
  CHECK(d->options.listen == "0.0.0.0:8443");
  CHECK(d->options.metrics_listen == "0.0.0.0:8080");
  CHECK(d->options.max_body_bytes == 8u << 20);
  CHECK(d->options.shutdown_grace.count() == 10000);
  CHECK(d->options.threads == 0);
  CHECK(d->options.idle_timeout.count() == 120000);
  CHECK(d->options.max_connections == 1024);
  CHECK(d->options.max_connections_per_peer == 64);
  CHECK(d->options.idle_timeout_before_review.count() == 15000);
  CHECK(d->options.body_budget == 32u << 20);
  CHECK(d->options.body_timeout.count() == 8000);

  auto p = parse_serve_args({"--listen", "127.0.0.1:0", "--tls-cert=/c", "--tls-key", "/k", "--threads", "3",
                             "--max-body-bytes", "3Mi", "--shutdown-grace", "2s", "--log-level", "debug",
                             "--idle-timeout=90s"});
  REQUIRE(p.ok());
  CHECK(p->options.listen == "127.0.0.1:0");
  CHECK(p->options.tls_cert == "/c");
  CHECK(p->options.tls_key == "/k");
  CHECK(p->options.threads == 3);
  CHECK(p->options.max_body_bytes == 3u << 20);
  CHECK(p->options.shutdown_grace.count() == 2000);
  CHECK(p->options.log_level == "debug");
  CHECK(p->options.idle_timeout.count() == 90000);
  auto q =
      parse_serve_args({"--max-connections-per-peer", "8", "--idle-timeout-before-review=2s", "--body-timeout", "30s"});
  REQUIRE(q.ok());
  CHECK(q->options.body_timeout.count() == 30000);
  CHECK(q->options.max_connections_per_peer == 8);
  CHECK(q->options.idle_timeout_before_review.count() == 2000);
  CHECK(parse_serve_args({"--help"}).value().help);

  for (const auto& bad : std::vector<std::vector<std::string>>{{"--nope"},
                                                               {"--listen"},
                                                               {"--threads", "0"},
                                                               {"--threads", "x"},
                                                               {"--log-level", "loud"},
                                                               {"--reload-interval", "10ms"},
                                                               {"positional"},
                                                               {"--max-body-bytes", "lots"},
                                                               {"--idle-timeout", "0"},
                                                               {"--max-connections-per-peer", "0"},
                                                               {"--idle-timeout-before-review", "50ms"},
                                                               {"--body-budget", "0"},
                                                               {"--body-budget", "lots"},
                                                               {"--body-timeout", "10ms"},
                                                               {"--body-timeout", "soon"}}) {
    CAPTURE(bad.front());
    CHECK_FALSE(parse_serve_args(bad).ok());
  }
}

TEST_CASE("the body budget must hold a body of --max-body-bytes beside its reserve") {
  struct Case {
    std::string name;
    std::vector<std::string> args;
    bool ok;
  };
  const std::vector<Case> cases = {
      {"defaults: 32Mi holds an 8Mi body", {}, true},
      {"a budget of the largest body alone leaves no room for the reserve", {"--body-budget", "8Mi"}, false},
      {"the smallest budget for 8Mi bodies: 4/3 of it, rounded up", {"--body-budget", "11184810"}, true},
      {"one byte less", {"--body-budget", "11184809"}, false},
      {"a smaller largest body makes a small budget enough", {"--body-budget", "4Mi", "--max-body-bytes", "3Mi"}, true},
      {"raised with the memory limit", {"--body-budget", "128Mi"}, true},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto p = parse_serve_args(c.args);
    CHECK(p.ok() == c.ok);
    if (!p.ok()) CHECK(p.error().message.find("at least 11184810") != std::string::npos);
  }
  const auto limits = body_budget_limits(32u << 20);
  CHECK(limits.total == 32u << 20);
  CHECK(limits.reserve == 8u << 20);
  CHECK(limits.small == 64u << 10);
}

TEST_CASE("config file server section") {
  ServeOptions o;
  REQUIRE(apply_server_section({{"listen", "127.0.0.1:9443"},
                                {"maxBodyBytes", "1Mi"},
                                {"threads", 2},
                                {"shutdownGrace", "3s"},
                                {"tlsCert", "/etc/tls/tls.crt"}},
                               o)
              .ok());
  CHECK(o.listen == "127.0.0.1:9443");
  CHECK(o.max_body_bytes == 1u << 20);
  CHECK(o.threads == 2);
  CHECK(o.shutdown_grace.count() == 3000);
  CHECK(o.tls_cert == "/etc/tls/tls.crt");
  REQUIRE(apply_server_section({{"maxConnectionsPerPeer", 16}, {"idleTimeoutBeforeReview", "5s"}}, o).ok());
  CHECK(o.max_connections_per_peer == 16);
  CHECK(o.idle_timeout_before_review.count() == 5000);
  REQUIRE(apply_server_section({{"bodyBudget", "48Mi"}}, o).ok());
  CHECK(o.body_budget == 48u << 20);
  auto bad_budget = apply_server_section({{"bodyBudget", "-1"}}, o);
  REQUIRE_FALSE(bad_budget.ok());
  CHECK(bad_budget.error().message.find("server.bodyBudget") != std::string::npos);
  auto bad_peer = apply_server_section({{"maxConnectionsPerPeer", 0}}, o);
  REQUIRE_FALSE(bad_peer.ok());
  CHECK(bad_peer.error().message.find("server.maxConnectionsPerPeer") != std::string::npos);

  auto unknown = apply_server_section({{"lisen", "x"}}, o);
  REQUIRE_FALSE(unknown.ok());
  CHECK(unknown.error().message.find("server.lisen") != std::string::npos);
  auto wrong_type = apply_server_section({{"threads", true}}, o);
  REQUIRE_FALSE(wrong_type.ok());
  CHECK(wrong_type.error().message.find("server.threads") != std::string::npos);
  auto bad_value = apply_server_section({{"threads", 0}}, o);
  REQUIRE_FALSE(bad_value.ok());
  CHECK_FALSE(apply_server_section(nlohmann::json::array(), o).ok());
}

TEST_CASE("TLS flags: minimum version, cipher suites, client CA") {
  auto d = parse_serve_args({});
  REQUIRE(d.ok());
  CHECK(d->options.tls_policy.min_version == TlsVersion::Tls12);
  CHECK(d->options.tls_policy.tls12_ciphers.empty());
  CHECK(d->options.tls_policy.tls13_suites.empty());
  CHECK(d->options.client_ca.empty());

  auto p = parse_serve_args({"--tls-min-version", "1.2", "--tls-cipher-suites",
                             "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_256_GCM_SHA384",
                             "--client-ca=/etc/erdma-webhook/client-ca/ca.crt"});
  REQUIRE(p.ok());
  CHECK(p->options.tls_policy.tls12_ciphers == std::vector<std::string>{"ECDHE-ECDSA-AES128-GCM-SHA256"});
  CHECK(p->options.tls_policy.tls13_suites == std::vector<std::string>{"TLS_AES_256_GCM_SHA384"});
  CHECK(p->options.client_ca == "/etc/erdma-webhook/client-ca/ca.crt");
  CHECK(parse_serve_args({"--tls-min-version=1.3"}).value().options.tls_policy.min_version == TlsVersion::Tls13);

  struct Case {
    std::vector<std::string> args;
    const char* want;
  };
  const std::vector<Case> bad = {
      {{"--tls-min-version", "1.1"}, "expected 1.2 or 1.3"},
      {{"--tls-cipher-suites", "TLS_RSA_WITH_AES_128_CBC_SHA"}, "accepted: TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"},
      {{"--tls-cipher-suites", ""}, "names no suite"},
      {{"--tls-min-version", "1.3", "--tls-cipher-suites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, "never uses them"},
      {{"--tls-cipher-suites", "TLS_AES_128_GCM_SHA256"}, "TLS 1.2 clients would find no suite"},
      {{"--client-ca="}, "--client-ca: expected a file name"},
      {{"--client-ca"}, "needs a value"},
  };
  for (const auto& c : bad) {
    CAPTURE(c.args.front());
    auto r = parse_serve_args(c.args);
    REQUIRE_FALSE(r.ok());
    CAPTURE(r.error().message);
    CHECK(r.error().message.find(c.want) != std::string::npos);
  }
  // The order of the two flags does not matter: they are checked together at the end.
  CHECK(parse_serve_args({"--tls-cipher-suites", "TLS_AES_128_GCM_SHA256", "--tls-min-version", "1.3"}).ok());
}

TEST_CASE("TLS keys of the server section, and flags over them") {
  const nlohmann::json section = {
      {"tlsMinVersion", "1.3"},
      {"tlsCipherSuites", nlohmann::json::array({"TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256"})},
      {"clientCA", "/etc/client-ca.crt"},
  };
  auto from_file = parse_serve_args({}, section);
  REQUIRE(from_file.ok());
  CHECK(from_file->options.tls_policy.min_version == TlsVersion::Tls13);
  CHECK(from_file->options.tls_policy.tls13_suites ==
        std::vector<std::string>{"TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256"});
  CHECK(from_file->options.client_ca == "/etc/client-ca.crt");

  // Flags win, key by key; the combination is checked after both.
  auto flags =
      parse_serve_args({"--client-ca", "/other.crt", "--tls-cipher-suites", "TLS_AES_256_GCM_SHA384"}, section);
  REQUIRE(flags.ok());
  CHECK(flags->options.client_ca == "/other.crt");
  CHECK(flags->options.tls_policy.tls13_suites == std::vector<std::string>{"TLS_AES_256_GCM_SHA384"});
  CHECK(flags->options.tls_policy.min_version == TlsVersion::Tls13);
  auto clash = parse_serve_args({"--tls-min-version", "1.2"}, section);  // 1.3 suites only, 1.2 allowed
  REQUIRE_FALSE(clash.ok());
  CHECK(clash.error().message.find("TLS 1.2 clients would find no suite") != std::string::npos);

  ServeOptions o;
  CHECK(apply_server_section({{"tlsCipherSuites", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256"}}, o)
            .ok());
  CHECK(o.tls_policy.tls12_ciphers == std::vector<std::string>{"ECDHE-RSA-AES128-GCM-SHA256"});
  auto bad_item = apply_server_section({{"tlsCipherSuites", nlohmann::json::array({"TLS_AES_128_GCM_SHA256", 5})}}, o);
  REQUIRE_FALSE(bad_item.ok());
  CHECK(bad_item.error().message.find("server.tlsCipherSuites[1]") != std::string::npos);
  auto bad_name = apply_server_section({{"tlsCipherSuites", nlohmann::json::array({"RC4"})}}, o);
  REQUIRE_FALSE(bad_name.ok());
  CHECK(bad_name.error().message.find("server.tlsCipherSuites") != std::string::npos);
  auto bad_version = apply_server_section({{"tlsMinVersion", 1}}, o);
  REQUIRE_FALSE(bad_version.ok());
  CHECK(bad_version.error().message.find("server.tlsMinVersion") != std::string::npos);
}

TEST_CASE("--help names the TLS flags and every accepted suite") {
  const std::string usage = serve_usage();
  for (const char* flag :
       {"--tls-min-version", "--tls-cipher-suites", "--client-ca", "tlsMinVersion", "tlsCipherSuites", "clientCA"}) {
    CAPTURE(flag);
    CHECK(usage.find(flag) != std::string::npos);
  }
  for (const auto& suite : supported_cipher_suites()) {
    CAPTURE(std::string(suite.iana));
    CHECK(usage.find(suite.iana) != std::string::npos);
  }
}

}  // namespace
}  // namespace erdma::webhook::server
