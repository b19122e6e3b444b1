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
  CHECK(parse_serve_args({"--help"}).value().help);

  for (const auto& bad : std::vector<std::vector<std::string>>{
           {"--nope"}, {"--listen"}, {"--threads", "0"}, {"--threads", "x"}, {"--log-level", "loud"},
           {"--reload-interval", "10ms"}, {"positional"}, {"--max-body-bytes", "lots"}, {"--idle-timeout", "0"}}) {
    CAPTURE(bad.front());
    CHECK_FALSE(parse_serve_args(bad).ok());
  }
}

TEST_CASE("config file server section") {
  ServeOptions o;
  REQUIRE(apply_server_section({{"listen", "127.0.0.1:9443"}, {"maxBodyBytes", "1Mi"}, {"threads", 2},
                                {"shutdownGrace", "3s"}, {"tlsCert", "/etc/tls/tls.crt"}},
                               o)
              .ok());
  CHECK(o.listen == "127.0.0.1:9443");
  CHECK(o.max_body_bytes == 1u << 20);
  CHECK(o.threads == 2);
  CHECK(o.shutdown_grace.count() == 3000);
  CHECK(o.tls_cert == "/etc/tls/tls.crt");

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

}  // namespace
}  // namespace erdma::webhook::server
