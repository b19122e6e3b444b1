// Tests for common/work_queue.hpp: order, refusals, nothing lost at stop, the pending count.
#include "common/work_queue.hpp"

#include <doctest/doctest.h>

#include <mutex>
#include <string>

using erdma::common::WorkQueue;
using namespace std::chrono_literals;

namespace {

// A gate the test opens: jobs block in it until then.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int inside = 0;
  void pass() {
    std::unique_lock lock(mu);
    ++inside;
    cv.notify_all();
    cv.wait(lock, [&] { return open; });
  }
  bool wait_inside(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 20s, [&] { return inside >= n; });
  }
  void release() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
};

}  // namespace

TEST_CASE("one worker runs jobs in arrival order; a full queue refuses and leaves the job with the caller") {
  Gate gate;
  std::mutex mu;
  std::vector<std::string> ran;
  std::vector<size_t> pending_seen;
  WorkQueue<std::string> q(
      1, 2,
      [&](std::string&& job, bool stopping) {
        CHECK_FALSE(stopping);
        if (job == "first") gate.pass();
        std::lock_guard lock(mu);
        ran.push_back(job);
      },
      [&](size_t n) { pending_seen.push_back(n); });
  std::string a = "first", b = "second", c = "third", d = "fourth";
  REQUIRE_FALSE(q.submit(a).has_value());
  REQUIRE(gate.wait_inside(1));  // "first" runs and holds the worker
  REQUIRE_FALSE(q.submit(b).has_value());
  REQUIRE_FALSE(q.submit(c).has_value());
  CHECK(q.pending() == 3);
  const auto refused = q.submit(d);
  REQUIRE(refused.has_value());
  CHECK(*refused == WorkQueue<std::string>::Refusal::Full);
  CHECK(d == "fourth");  // still the caller's
  gate.release();
  REQUIRE(q.wait_idle(20s));
  CHECK(q.pending() == 0);
  std::lock_guard lock(mu);
  CHECK(ran == std::vector<std::string>{"first", "second", "third"});
  CHECK(pending_seen.back() == 0);
}

TEST_CASE("stop hands every queued job to run with stopping set, then refuses") {
  Gate gate;
  std::mutex mu;
  std::vector<std::pair<int, bool>> ran;
  WorkQueue<int> q(1, 3, [&](int&& job, bool stopping) {
    if (job == 0) gate.pass();
    std::lock_guard lock(mu);
    ran.emplace_back(job, stopping);
  });
  int first = 0;
  REQUIRE_FALSE(q.submit(first).has_value());
  REQUIRE(gate.wait_inside(1));  // job 0 holds the worker
  for (int i = 1; i < 4; ++i) {
    int job = i;
    REQUIRE_FALSE(q.submit(job).has_value());
  }
  std::thread stopper([&] { q.stop(); });
  // stop() waits for the worker, which waits at the gate: open it once stop() has begun. Until then
  // the full queue refuses the probes as Full, after it as Stopping: none is ever queued.
  for (;;) {
    int probe = 99;
    if (q.submit(probe) == WorkQueue<int>::Refusal::Stopping) break;
    std::this_thread::yield();
  }
  gate.release();
  stopper.join();
  std::lock_guard lock(mu);
  REQUIRE(ran.size() == 4);  // nothing lost, the probes never queued
  CHECK(ran[0] == std::pair{0, false});
  for (size_t i = 1; i < ran.size(); ++i) CHECK(ran[i] == std::pair{static_cast<int>(i), true});
}

TEST_CASE("several workers run jobs at once") {
  Gate gate;
  WorkQueue<int> q(3, 10, [&](int&&, bool) { gate.pass(); });
  for (int i = 0; i < 3; ++i) {
    int job = i;
    REQUIRE_FALSE(q.submit(job).has_value());
  }
  CHECK(gate.wait_inside(3));  // all three inside together: only possible with three workers
  gate.release();
  CHECK(q.wait_idle(20s));
}
