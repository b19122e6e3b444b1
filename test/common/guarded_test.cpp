// Guarded thread bodies: an exception costs one job or one pass of a loop, never the process.
#include "common/guarded.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/log.hpp"

namespace {

using erdma::common::RestartBackoff;
using erdma::common::run_guarded;
using erdma::common::run_restarting;
using namespace std::chrono_literals;

TEST_CASE("run_guarded: true when the job returns, false (logged) when anything escapes it") {
  std::string logged;
  erdma::common::log::set_sink_for_test(&logged);
  int ran = 0;
  CHECK(run_guarded("job", [&] { ++ran; }));
  CHECK_FALSE(run_guarded("job", [] { throw std::runtime_error("boom"); }));
  CHECK_FALSE(run_guarded("job", [] { throw 42; }));
  erdma::common::log::set_sink_for_test(nullptr);
  CHECK(ran == 1);
}

TEST_CASE("run_restarting: a loop that throws runs again after a doubling back-off, and returns when the loop does") {
  std::string logged;
  erdma::common::log::set_sink_for_test(&logged);
  int passes = 0;
  std::vector<std::string> failures;
  const auto start = std::chrono::steady_clock::now();
  run_restarting(
      "loop",
      [&] {
        if (++passes < 4) throw std::runtime_error("pass " + std::to_string(passes));
      },
      [] { return false; }, RestartBackoff{5ms, 10ms}, [&](const std::string& e) { failures.push_back(e); });
  erdma::common::log::set_sink_for_test(nullptr);
  CHECK(passes == 4);
  CHECK(failures == std::vector<std::string>{"pass 1", "pass 2", "pass 3"});
  // 5, 10, 10 ms (capped at max), each spread by at most -20 % (common/jitter.hpp).
  CHECK(std::chrono::steady_clock::now() - start >= 4ms + 8ms + 8ms);
}

TEST_CASE("run_restarting: a stop during the back-off ends it without another pass") {
  std::string logged;
  erdma::common::log::set_sink_for_test(&logged);
  std::atomic<int> passes{0};
  std::atomic<bool> stop{false};
  const auto start = std::chrono::steady_clock::now();
  run_restarting(
      "loop",
      [&] {
        ++passes;
        stop = true;
        throw std::runtime_error("once");
      },
      [&] { return stop.load(); }, RestartBackoff{10s, 10s});
  erdma::common::log::set_sink_for_test(nullptr);
  CHECK(passes == 1);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
}

}  // namespace
