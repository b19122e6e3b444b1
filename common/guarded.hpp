// Thread entry points are process edges: an exception that escapes a thread's body ends the whole
// process through std::terminate. Every long-lived thread of the programs runs its body through
// one of these, so an unexpected exception (a library bug, out of memory, input nobody foresaw)
// is logged with the component's name and costs that one job, or one pass of a loop that then
// starts again after a back-off, never the process.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <string_view>

namespace erdma::common {

// Runs `fn`; true when it returned. An exception escaping it is logged (error, naming
// `component`) and false returned. Never throws.
bool run_guarded(std::string_view component, const std::function<void()>& fn) noexcept;

struct RestartBackoff {
  std::chrono::milliseconds initial{1000};
  std::chrono::milliseconds max{60000};
};

// The body of a long-lived thread: runs `loop` until it returns. When an exception escapes it,
// logs it, calls `on_failure` with its text (when given: a component marks itself unhealthy or
// counts it), waits a back-off that doubles from `backoff.initial` to `backoff.max` (asking
// `stopping` every 50 ms, and returning at once when it says so) and runs `loop` again. `loop`
// must be safe to run again (keep its state in locals or re-derive it). Never throws.
void run_restarting(std::string_view component, const std::function<void()>& loop,
                    const std::function<bool()>& stopping, RestartBackoff backoff = {},
                    const std::function<void(const std::string&)>& on_failure = {}) noexcept;

}  // namespace erdma::common
