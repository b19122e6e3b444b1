// JSON-lines logger (see log.hpp).
#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <mutex>

#include "common/text.hpp"

namespace erdma::common::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::Info)};
std::atomic<std::string*> g_sink{nullptr};
std::mutex g_sink_mu;

// RFC 3339 UTC with milliseconds. The date and time down to the second are formatted once per
// second and thread (gmtime_r and strftime cost more than the rest of a short line); the
// milliseconds are three digits written by hand.
void append_timestamp(std::string& out) {
  struct Cached {
    int64_t second = INT64_MIN;
    char text[24] = {};
    size_t size = 0;
  };
  thread_local Cached cached;
  const auto now = std::chrono::system_clock::now();
  const auto secs = std::chrono::time_point_cast<std::chrono::seconds>(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - secs).count();
  if (ms < 0 || ms > 999) ms = 0;  // a clock before 1970 rounds the other way; never seen
  const int64_t second = secs.time_since_epoch().count();
  if (second != cached.second) {
    const std::time_t t = static_cast<std::time_t>(second);
    std::tm tm{};
    gmtime_r(&t, &tm);
    cached.size = std::strftime(cached.text, sizeof cached.text, "%Y-%m-%dT%H:%M:%S", &tm);
    cached.second = second;
  }
  out.append(cached.text, cached.size);
  const char frac[] = {'.', static_cast<char>('0' + ms / 100), static_cast<char>('0' + ms / 10 % 10),
                       static_cast<char>('0' + ms % 10), 'Z'};
  out.append(frac, sizeof frac);
}

void write_all(const std::string& s) {
  if (std::string* sink = g_sink.load()) {
    std::lock_guard<std::mutex> lock(g_sink_mu);
    sink->append(s);
    return;
  }
  const char* p = s.data();
  size_t left = s.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // stderr is gone; nothing sensible left to do with a log line
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

void set_level(Level level) noexcept { g_level.store(static_cast<int>(level)); }
Level level() noexcept { return static_cast<Level>(g_level.load()); }
bool enabled(Level l) noexcept { return static_cast<int>(l) >= g_level.load(); }

std::optional<Level> parse_level(std::string_view text) noexcept {
  if (text == "debug") return Level::Debug;
  if (text == "info") return Level::Info;
  if (text == "warn" || text == "warning") return Level::Warn;
  if (text == "error") return Level::Error;
  return std::nullopt;
}

std::string_view to_string(Level l) noexcept {
  switch (l) {
    case Level::Debug: return "debug";
    case Level::Info: return "info";
    case Level::Warn: return "warn";
    case Level::Error: return "error";
  }
  return "info";
}

Line::Line(Level l, std::string_view msg) : on_(enabled(l)) {
  if (!on_) return;
  buf_.reserve(256);
  buf_ += "{\"ts\":\"";
  append_timestamp(buf_);
  buf_ += "\",\"level\":\"";
  buf_ += to_string(l);
  buf_ += "\",\"msg\":";
  append_json_string(buf_, msg);
}

Line::~Line() {
  if (!on_) return;
  buf_ += "}\n";
  write_all(buf_);
}

void Line::key(std::string_view k) {
  buf_ += ',';
  append_json_string(buf_, k);
  buf_ += ':';
}

Line& Line::kv(std::string_view k, std::string_view value) {
  if (!on_) return *this;
  key(k);
  append_json_string(buf_, is_valid_utf8(value) ? value : std::string_view("<invalid UTF-8>"));
  return *this;
}

Line& Line::kv(std::string_view k, int64_t value) {
  if (!on_) return *this;
  key(k);
  buf_ += std::to_string(value);
  return *this;
}

Line& Line::kv(std::string_view k, uint64_t value) {
  if (!on_) return *this;
  key(k);
  buf_ += std::to_string(value);
  return *this;
}

Line& Line::kv(std::string_view k, double value) {
  if (!on_) return *this;
  key(k);
  if (std::isfinite(value)) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", value);
    buf_ += b;
  } else {
    buf_ += "null";
  }
  return *this;
}

Line& Line::kv(std::string_view k, bool value) {
  if (!on_) return *this;
  key(k);
  buf_ += value ? "true" : "false";
  return *this;
}

void set_sink_for_test(std::string* sink) noexcept { g_sink.store(sink); }

}  // namespace erdma::common::log
