// JSON-lines logger (see log.hpp).
#include "common/log.hpp"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <utility>

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

// Writes whole lines to stderr (or the test sink).
void emit(const char* p, size_t left) {
  if (g_sink.load() != nullptr) {
    // Read again under the lock: once set_sink_for_test returns, no line goes to the old sink.
    std::lock_guard<std::mutex> lock(g_sink_mu);
    if (std::string* sink = g_sink.load()) {
      sink->append(p, left);
      return;
    }
  }
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

constexpr size_t kMaxBatch = 64 * 1024;

// Lines waiting for flush() while batching is on. The mutex is held across the write(2) so that
// batches reach stderr in the order their lines were made.
struct Batch {
  std::mutex mu;
  std::function<void()> schedule;  // empty: batching off
  std::string pending;

  // Writes what is pending; `mu` held.
  void write_pending() {
    emit(pending.data(), pending.size());
    pending.clear();
    if (pending.capacity() > 4 * kMaxBatch) pending.shrink_to_fit();
  }
};

// Never destroyed (a line may still be logged while statics are torn down); at exit, batching
// ends and what is pending is written.
Batch& batch() {
  static Batch* const b = [] {
    auto* made = new Batch;
    std::atexit([] { set_batching(nullptr); });
    return made;
  }();
  return *b;
}

void write_all(const std::string& s, Level level) {
  Batch& b = batch();
  std::function<void()> schedule;
  {
    std::lock_guard<std::mutex> lock(b.mu);
    if (!b.schedule) {
      if (!b.pending.empty()) b.write_pending();
      emit(s.data(), s.size());
      return;
    }
    const bool first = b.pending.empty();
    b.pending += s;
    if (level >= Level::Warn || b.pending.size() >= kMaxBatch) {
      b.write_pending();
      return;
    }
    if (!first) return;  // a flush is already on its way
    schedule = b.schedule;
  }
  schedule();  // outside the lock: it may run flush() at once
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

void set_batching(std::function<void()> schedule) {
  Batch& b = batch();
  std::lock_guard<std::mutex> lock(b.mu);
  b.write_pending();
  b.schedule = std::move(schedule);
}

void flush() {
  Batch& b = batch();
  std::lock_guard<std::mutex> lock(b.mu);
  b.write_pending();
}

namespace {

// Each thread builds its lines in one buffer that it keeps: no allocation per line. After the
// thread's buffer is destroyed (thread exit), its lines use their own.
thread_local bool t_buffer_gone = false;
struct ThreadBuffer {
  std::string text;
  bool busy = false;
  ~ThreadBuffer() { t_buffer_gone = true; }
};
thread_local ThreadBuffer t_buffer;

}  // namespace

Line::Line(Level l, std::string_view msg) : on_(enabled(l)), level_(l) {
  if (!on_) return;
  if (!t_buffer_gone && !t_buffer.busy) {
    t_buffer.busy = true;
    borrowed_ = true;
    buf_ = &t_buffer.text;
    buf_->clear();
  } else {
    buf_ = &own_;  // a line made while building another (say, from a kv argument)
  }
  std::string& b = *buf_;
  b.reserve(256);
  b += "{\"ts\":\"";
  append_timestamp(b);
  b += "\",\"level\":\"";
  b += to_string(l);
  b += "\",\"msg\":";
  append_json_string(b, msg);
}

Line::~Line() {
  if (!on_) return;
  *buf_ += "}\n";
  write_all(*buf_, level_);
  if (borrowed_) {
    if (buf_->capacity() > 64 * 1024) std::string().swap(*buf_);  // one huge line is not kept
    t_buffer.busy = false;
  }
}

void Line::key(std::string_view k) {
  std::string& b = *buf_;
  b += ",\"";
  b += k;
  b += "\":";
}

Line& Line::kv(std::string_view k, std::string_view value) {
  if (!on_) return *this;
  key(k);
  append_json_string(*buf_, is_valid_utf8(value) ? value : std::string_view("<invalid UTF-8>"));
  return *this;
}

Line& Line::kv(std::string_view k, int64_t value) {
  if (!on_) return *this;
  key(k);
  *buf_ += std::to_string(value);
  return *this;
}

Line& Line::kv(std::string_view k, uint64_t value) {
  if (!on_) return *this;
  key(k);
  *buf_ += std::to_string(value);
  return *this;
}

Line& Line::kv(std::string_view k, double value) {
  if (!on_) return *this;
  key(k);
  if (std::isfinite(value)) {
    char b[32];
    std::snprintf(b, sizeof b, "%.6g", value);
    *buf_ += b;
  } else {
    *buf_ += "null";
  }
  return *this;
}

Line& Line::kv(std::string_view k, bool value) {
  if (!on_) return *this;
  key(k);
  *buf_ += value ? "true" : "false";
  return *this;
}

void set_sink_for_test(std::string* sink) noexcept {
  std::lock_guard<std::mutex> lock(g_sink_mu);
  g_sink.store(sink);
}

std::string sink_text_for_test() {
  std::lock_guard<std::mutex> lock(g_sink_mu);
  const std::string* sink = g_sink.load();
  return sink == nullptr ? std::string() : *sink;
}

}  // namespace erdma::common::log
