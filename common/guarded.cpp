// Guarded thread bodies (see guarded.hpp).
#include "common/guarded.hpp"

#include <algorithm>
#include <exception>
#include <thread>

#include "common/jitter.hpp"
#include "common/log.hpp"

namespace erdma::common {
namespace {

// The text of the exception being handled, whatever its type.
std::string current_exception_text() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

// Logging itself may fail (out of memory): nothing is left to do about that here.
void report(std::string_view component, const std::string& error, const char* outcome, int64_t retry_ms) noexcept {
  try {
    auto line = log::error("unexpected exception in a thread");
    line.kv("component", component).kv("error", error).kv("outcome", outcome);
    if (retry_ms >= 0) line.kv("retry_ms", retry_ms);
  } catch (...) {
  }
}

}  // namespace

bool run_guarded(std::string_view component, const std::function<void()>& fn) noexcept {
  try {
    fn();
    return true;
  } catch (...) {
    std::string error;
    try {
      error = current_exception_text();
    } catch (...) {
    }
    report(component, error, "this job is dropped", -1);
    return false;
  }
}

void run_restarting(std::string_view component, const std::function<void()>& loop,
                    const std::function<bool()>& stopping, RestartBackoff backoff,
                    const std::function<void(const std::string&)>& on_failure) noexcept {
  auto wait = std::max(backoff.initial, std::chrono::milliseconds(1));
  for (;;) {
    std::string error;
    try {
      loop();
      return;
    } catch (...) {
      try {
        error = current_exception_text();
      } catch (...) {
      }
    }
    report(component, error, "restarting", static_cast<int64_t>(wait.count()));
    if (on_failure) run_guarded(component, [&] { on_failure(error); });
    const auto until = std::chrono::steady_clock::now() + jittered(wait);
    while (std::chrono::steady_clock::now() < until) {
      bool stop = true;  // a stop predicate that throws is taken as "stop"
      run_guarded(component, [&] { stop = stopping(); });
      if (stop) return;
      std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(
          std::chrono::milliseconds(50),
          std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()) +
              std::chrono::milliseconds(1)));
    }
    wait = std::min(wait * 2, std::max(backoff.max, backoff.initial));
  }
}

}  // namespace erdma::common
