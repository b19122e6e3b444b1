// Skipping a test that cannot run on this machine. A skip prints why and exits with 77, which
// ctest reads as "skipped" (SKIP_RETURN_CODE 77 on the test), never as passed. What CI=true makes
// of it depends on what is missing: see skip_or_fail and skip_test.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace erdma::testing {

// Whether this run is CI's: CI=true in the environment (.ci/run sets it). The same question is
// asked by running_under_ci in test/webhook/server/integration/harness.py (Python) and
// test/cluster/checks.sh (shell).
[[nodiscard]] inline bool running_under_ci() {
  const char* v = std::getenv("CI");
  return v != nullptr && std::string_view(v) == "true";
}

// Something CI's machine has is missing: a package scripts/install-deps.sh installs, or root (the
// README's test command runs as root). Outside CI a skip (exit 77); under CI=true a failure
// (exit 1), since the run would otherwise stay green without the test.
[[noreturn]] inline void skip_or_fail(const char* why) {
  if (running_under_ci()) {
    std::printf("FAILED: %s (under CI=true this is a failure, not a skip: CI's machine provides it)\n", why);
    std::fflush(stdout);
    std::_Exit(1);
  }
  std::printf("SKIPPED: %s\n", why);
  std::fflush(stdout);
  std::_Exit(77);
}

// Something no install step can change: this kernel (SMC or not), RDMA hardware, an opt-in for a
// test that rewrites the machine's state. A skip (exit 77) under CI=true too, and said so.
[[noreturn]] inline void skip_test(const char* why) {
  std::printf("SKIPPED: %s%s\n", why, running_under_ci() ? " (also under CI=true: no install step provides this)" : "");
  std::fflush(stdout);
  std::_Exit(77);
}

}  // namespace erdma::testing
