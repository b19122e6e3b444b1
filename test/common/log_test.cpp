// Tests for common/log.hpp: every line is one JSON object with the fields given.
#include "common/log.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <sstream>

namespace elog = erdma::common::log;
using nlohmann::json;

TEST_CASE("log lines are JSON objects with ts, level, msg and the key-values - levels filter") {
  std::string sink;
  elog::set_sink_for_test(&sink);
  elog::set_level(elog::Level::Info);
  elog::info("cert reloaded").kv("path", "/etc/tls/tls.crt").kv("days_left", int64_t{42}).kv("ok", true).kv("ratio", 0.5);
  elog::debug("not shown").kv("x", 1);
  elog::error("bad \"input\"").kv("value", std::string("line\nbreak")).kv("bytes", std::string("\xff\xfe"));
  elog::set_sink_for_test(nullptr);

  std::istringstream in(sink);
  std::string l1, l2, l3;
  REQUIRE(std::getline(in, l1));
  REQUIRE(std::getline(in, l2));
  CHECK_FALSE(std::getline(in, l3));

  const json a = json::parse(l1);
  CHECK(a["level"] == "info");
  CHECK(a["msg"] == "cert reloaded");
  CHECK(a["path"] == "/etc/tls/tls.crt");
  CHECK(a["days_left"] == 42);
  CHECK(a["ok"] == true);
  CHECK(a["ratio"] == 0.5);
  const std::string ts = a["ts"];
  CHECK(ts.size() == 24);  // 2026-12-02T12:00:00.123Z
  CHECK(ts.back() == 'Z');

  const json b = json::parse(l2);
  CHECK(b["level"] == "error");
  CHECK(b["msg"] == "bad \"input\"");
  CHECK(b["value"] == "line\nbreak");
  CHECK(b["bytes"] == "<invalid UTF-8>");
}

TEST_CASE("parse_level") {
  CHECK(elog::parse_level("debug") == elog::Level::Debug);
  CHECK(elog::parse_level("warning") == elog::Level::Warn);
  CHECK_FALSE(elog::parse_level("verbose").has_value());
}
