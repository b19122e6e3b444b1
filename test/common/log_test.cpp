// Tests for common/log.hpp: every line is one JSON object with the fields given.
#include "common/log.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <ctime>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "test/eventually.hpp"

namespace elog = erdma::common::log;
using nlohmann::json;

TEST_CASE("log lines are JSON objects with ts, level, msg and the key-values - levels filter") {
  std::string sink;
  elog::set_sink_for_test(&sink);
  elog::set_level(elog::Level::Info);
  elog::info("cert reloaded")
      .kv("path", "/etc/tls/tls.crt")
      .kv("days_left", int64_t{42})
      .kv("ok", true)
      .kv("ratio", 0.5);
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

TEST_CASE("the test sink: read while threads log, and nothing reaches it once it is replaced") {
  std::string first, second;
  elog::set_sink_for_test(&first);
  elog::set_level(elog::Level::Info);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    while (!stop) {
      elog::info("from a thread");
      std::this_thread::yield();
    }
  });
  REQUIRE(erdma::testing::eventually([] { return !elog::sink_text_for_test().empty(); }));
  // A copy taken under the writers' lock holds whole lines only.
  for (int i = 0; i < 20; ++i) {
    const std::string text = elog::sink_text_for_test();
    CHECK(text.back() == '\n');
  }
  elog::set_sink_for_test(&second);
  const std::string before = first;  // no writer appends to `first` any more...
  REQUIRE(erdma::testing::eventually([] { return !elog::sink_text_for_test().empty(); }));  // ...they go on in `second`
  stop = true;
  writer.join();
  elog::set_sink_for_test(nullptr);
  CHECK(first == before);
  CHECK(second.find("from a thread") != std::string::npos);
  CHECK(elog::sink_text_for_test().empty());
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

namespace {

std::vector<std::string> messages_of(const std::string& sink) {
  std::vector<std::string> out;
  std::istringstream in(sink);
  for (std::string line; std::getline(in, line);) out.push_back(json::parse(line)["msg"]);
  return out;
}

}  // namespace

TEST_CASE("batching: info lines wait for flush, in order; warn, a full batch and the end write at once") {
  std::string sink;
  elog::set_sink_for_test(&sink);
  elog::set_level(elog::Level::Info);
  int scheduled = 0;
  elog::set_batching([&] { ++scheduled; });

  elog::info("one");
  elog::info("two").kv("k", "v");
  CHECK(sink.empty());
  CHECK(scheduled == 1);  // once per batch, on its first line
  elog::flush();
  CHECK(messages_of(sink) == std::vector<std::string>{"one", "two"});

  sink.clear();
  elog::info("three");
  CHECK(scheduled == 2);
  elog::warn("four");  // never waits, and takes what is before it along
  CHECK(messages_of(sink) == std::vector<std::string>{"three", "four"});

  sink.clear();
  const std::string big(1000, 'x');
  int lines = 0;
  while (sink.empty() && lines < 200) {
    elog::info("big").kv("text", big);
    ++lines;
  }
  CHECK(lines > 50);  // about 64 KiB of lines went out together
  CHECK(lines < 70);
  CHECK(messages_of(sink).size() == static_cast<size_t>(lines));

  sink.clear();
  elog::info("last");
  elog::set_batching(nullptr);  // ending batching writes what is pending
  CHECK(messages_of(sink) == std::vector<std::string>{"last"});
  sink.clear();
  elog::info("direct");
  CHECK(messages_of(sink) == std::vector<std::string>{"direct"});
  elog::set_sink_for_test(nullptr);
}

TEST_CASE("batching: a scheduler that flushes at once, and lines from many threads, lose nothing") {
  std::string sink;
  elog::set_sink_for_test(&sink);
  elog::set_level(elog::Level::Info);
  elog::set_batching([] { elog::flush(); });
  elog::info("now");
  CHECK(messages_of(sink) == std::vector<std::string>{"now"});

  std::atomic<int> flushes{0};
  elog::set_batching([&] { ++flushes; });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < 500; ++i) {
        elog::info("n").kv("t", t).kv("i", i);
        if (i % 50 == 0) elog::flush();
      }
    });
  }
  for (auto& th : threads) th.join();
  elog::set_batching(nullptr);
  elog::set_sink_for_test(nullptr);
  std::istringstream in(sink);
  std::vector<int> next(4, 0);
  size_t count = 0;
  for (std::string line; std::getline(in, line);) {
    const json j = json::parse(line);  // every line whole
    if (j["msg"] != "n") continue;
    const int t = j["t"];
    CHECK(j["i"] == next[static_cast<size_t>(t)]);  // each thread's lines in its order
    ++next[static_cast<size_t>(t)];
    ++count;
  }
  CHECK(count == 2000);
  CHECK(flushes.load() > 0);
}

TEST_CASE("a line built while another is being built on the same thread keeps both whole") {
  std::string sink;
  elog::set_sink_for_test(&sink);
  elog::set_level(elog::Level::Info);
  const auto inner = [] {
    elog::info("inner").kv("k", "in");
    return std::string("value");
  };
  elog::info("outer").kv("before", "b").kv("made", inner()).kv("after", "a");
  elog::set_sink_for_test(nullptr);
  std::istringstream in(sink);
  std::string l1, l2;
  REQUIRE(std::getline(in, l1));
  REQUIRE(std::getline(in, l2));
  const json a = json::parse(l1), b = json::parse(l2);
  CHECK(a["msg"] == "inner");
  CHECK(a["k"] == "in");
  CHECK(b["msg"] == "outer");
  CHECK(b["before"] == "b");
  CHECK(b["made"] == "value");
  CHECK(b["after"] == "a");
}
