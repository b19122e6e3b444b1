// Structured logging for the shells (never the cores): one JSON object per line on stderr,
//   {"ts":"2026-12-02T12:00:00.123Z","level":"info","msg":"cert reloaded","not_after":"..."}
// Each line is written whole by one write(2) (a batch of whole lines, see set_batching), so lines
// from different threads never interleave.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace erdma::common::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3 };

// Process-wide minimum level (default Info). Safe to call from any thread.
void set_level(Level level) noexcept;
[[nodiscard]] Level level() noexcept;
[[nodiscard]] bool enabled(Level level) noexcept;

// "debug", "info", "warn"/"warning", "error" (case-sensitive); nullopt otherwise.
[[nodiscard]] std::optional<Level> parse_level(std::string_view text) noexcept;
[[nodiscard]] std::string_view to_string(Level level) noexcept;

// Batching, for a server whose event loop logs a line per request: while `schedule` is set, info
// and debug lines are collected and written together by flush(), and the first line of a batch
// calls `schedule`, which must arrange for flush() to run soon (the admission server posts it to
// its event loop, so the lines of one turn of the loop share one write(2)). A warn or error line
// is written at once together with every line before it, and so is a batch past 64 KiB. Setting
// nullptr writes what is pending, and so does the end of the process (exit or return from main;
// a crash loses at most the lines of the turn it happened in).
void set_batching(std::function<void()> schedule);
void flush();

// Builds one line; written when destroyed, unless the level is disabled (then every call is a
// cheap no-op). Keys must be plain identifiers (written as they are); values are escaped.
class Line {
 public:
  Line(Level level, std::string_view msg);
  ~Line();
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;

  Line& kv(std::string_view key, std::string_view value);
  Line& kv(std::string_view key, const char* value) { return kv(key, std::string_view(value)); }
  Line& kv(std::string_view key, const std::string& value) { return kv(key, std::string_view(value)); }
  Line& kv(std::string_view key, int64_t value);
  Line& kv(std::string_view key, uint64_t value);
  Line& kv(std::string_view key, int value) { return kv(key, static_cast<int64_t>(value)); }
  Line& kv(std::string_view key, unsigned value) { return kv(key, static_cast<uint64_t>(value)); }
  Line& kv(std::string_view key, double value);
  Line& kv(std::string_view key, bool value);

 private:
  void key(std::string_view k);  // appends ,"k":

  bool on_;
  bool borrowed_ = false;  // buf_ is the thread's reusable buffer, not own_
  Level level_;
  std::string* buf_ = nullptr;
  std::string own_;  // only when a line is built while another one on the same thread is
};

inline Line debug(std::string_view msg) { return Line(Level::Debug, msg); }
inline Line info(std::string_view msg) { return Line(Level::Info, msg); }
inline Line warn(std::string_view msg) { return Line(Level::Warn, msg); }
inline Line error(std::string_view msg) { return Line(Level::Error, msg); }

// Test hook: capture lines in memory instead of stderr (nullptr restores stderr). Once it
// returns, no line is written to the previous sink.
void set_sink_for_test(std::string* sink) noexcept;
// Test hook: a copy of the sink's text, taken under the lock the writing threads hold; "" with
// no sink.
[[nodiscard]] std::string sink_text_for_test();

}  // namespace erdma::common::log
