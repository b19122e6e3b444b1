// Tests for common/log.hpp: every line is one JSON object with the fields given.
#include "common/log.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <ctime>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

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

// The timestamp is the wall clock in UTC: parsed back, each line's lies between the clock read
// before and after writing it. The date-and-time part is cached per second, so a stale cache
// shows as a line a second behind.
TEST_CASE("ts is the current UTC time to the millisecond, on every line") {
  std::string sink;
  elog::set_sink_for_test(&sink);
  elog::set_level(elog::Level::Info);
  std::vector<std::pair<int64_t, int64_t>> bounds;  // ms since the epoch before and after each line
  auto now_ms = [] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  // Lines 1 ms apart until the clock has passed the next whole second (at most about 1.1 s).
  const int64_t start = now_ms();
  const int64_t next_second = (start / 1000 + 1) * 1000;
  for (int i = 0; i < 1500 && (bounds.empty() || bounds.back().first < next_second + 50); ++i) {
    const int64_t before = now_ms();
    elog::info("tick").kv("i", int64_t{i});
    bounds.emplace_back(before, now_ms());
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(bounds.back().first >= next_second);
  elog::set_sink_for_test(nullptr);

  std::istringstream in(sink);
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    REQUIRE(n < bounds.size());
    const std::string ts = json::parse(line)["ts"];
    REQUIRE(ts.size() == 24);
    std::tm tm{};
    REQUIRE(strptime(ts.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == ts.c_str() + 19);
    CHECK(ts[19] == '.');
    const int ms = std::stoi(ts.substr(20, 3));
    const int64_t at = int64_t{timegm(&tm)} * 1000 + ms;
    CAPTURE(ts);
    CHECK(at >= bounds[n].first);
    CHECK(at <= bounds[n].second);
    ++n;
  }
  CHECK(n == bounds.size());
}
