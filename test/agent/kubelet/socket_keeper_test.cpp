// The kubelet socket keeper on its own, in a temporary directory: a removed socket file is served
// again from the directory watch alone, a directory that appears later (or comes back) is watched
// from then on, the periodic check and wake() bring passes, stop() ends the thread at once.
#include "agent/kubelet/socket_keeper.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include <sys/inotify.h>

#include "test/eventually.hpp"
#include "test/log_capture.hpp"
#include "test/support.hpp"

namespace erdma::agent::kubelet {
namespace {
namespace fs = std::filesystem;
using namespace std::chrono_literals;
using erdma::testing::eventually;
using Clock = SocketKeeper::Clock;

constexpr uint32_t kMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_DELETE_SELF | IN_MOVE_SELF;
constexpr const char* kName = "ours.sock";

// An owner as the plugins are: serves its file when it must (a plain file: the keeper only sees
// directory entries), and must again when an event says the file or its directory went away.
// Retries every 20 ms while it cannot serve.
struct Owner {
  explicit Owner(fs::path at) : dir(std::move(at)) {}
  Clock::time_point act() {
    std::lock_guard lock(mu);
    if (!need_serve) return Clock::time_point::max();
    if (fs::is_directory(dir)) {
      std::ofstream(dir / kName) << "served";
      need_serve = false;
      ++serves;
      return Clock::time_point::max();
    }
    return Clock::now() + 20ms;
  }
  void handle(const SocketKeeper::Pass& pass) {
    std::lock_guard lock(mu);
    for (const auto& ev : pass.events) {
      seen.push_back(ev);
      if (ev.name == kName && (ev.mask & (IN_DELETE | IN_MOVED_FROM)) != 0) need_serve = true;
      if (ev.dir != SocketKeeper::kNoDir && (ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF)) != 0) need_serve = true;
    }
    if (pass.woken) ++wakes;
    if (pass.check_due) ++checks;
    ++handles;
  }
  SocketKeeper::Owner callbacks() {
    return {[this] { return act(); }, [this](const SocketKeeper::Pass& pass) { handle(pass); }};
  }
  int get(const int& field) {
    std::lock_guard lock(mu);
    return field;
  }
  bool saw_delete_of_ours() {
    std::lock_guard lock(mu);
    for (const auto& ev : seen) {
      if (ev.dir == 0 && ev.name == kName && (ev.mask & IN_DELETE) != 0) return true;
    }
    return false;
  }

  const fs::path dir;
  std::mutex mu;
  bool need_serve = true;
  int serves = 0, wakes = 0, checks = 0, handles = 0;
  std::vector<SocketKeeper::Event> seen;
};

TEST_CASE("socket keeper: a removed socket file is served again, from the directory watch alone") {
  erdma::testing::TempDir tmp("keeper");
  Owner owner(tmp.path());
  SocketKeeper keeper("test keeper", {{tmp.path(), kMask, "the test directory"}}, 1h, owner.callbacks());
  REQUIRE_OK(keeper.start());
  if (!keeper.has_inotify()) return;  // inotify limits reached on this machine: nothing to test here
  REQUIRE(eventually([&] { return owner.get(owner.serves) == 1; }));
  fs::remove(fs::path(tmp.path()) / kName);  // no periodic check for an hour: only the watch can tell
  CHECK(eventually([&] { return owner.get(owner.serves) == 2 && fs::exists(fs::path(tmp.path()) / kName); }));
  CHECK(owner.saw_delete_of_ours());
  CHECK(owner.get(owner.checks) == 0);
  keeper.stop();
}

TEST_CASE("socket keeper: a directory that appears later, or comes back, is watched from then on") {
  erdma::testing::LogCapture log;
  erdma::testing::TempDir tmp("keeper");
  const fs::path dir = fs::path(tmp.path()) / "later";
  Owner owner(dir);
  SocketKeeper keeper("test keeper", {{dir.string(), kMask, "the test directory"}}, 1h, owner.callbacks());
  REQUIRE_OK(keeper.start());
  if (!keeper.has_inotify()) return;
  const std::string line = R"("msg":"cannot watch the test directory; retrying")";
  const auto passes = [&](uint64_t n) {
    const uint64_t from = keeper.passes();
    return eventually([&] { return keeper.passes() >= from + n; });
  };
  REQUIRE(eventually([&] { return log.count(line) == 1; }));
  REQUIRE(passes(3));
  CHECK(log.count(line) == 1);  // the same error at every pass: logged once
  CHECK(log.count("\"dir\":\"" + dir.string() + "\"") == 1);

  fs::create_directory(dir);
  REQUIRE(eventually([&] { return owner.get(owner.serves) == 1; }));
  REQUIRE(passes(2));  // the watch is added at the start of each pass
  fs::remove(dir / kName);
  REQUIRE(eventually([&] { return owner.get(owner.serves) == 2; }));

  // Moved away in one step and made again: the old watch ends with the move, a new one comes.
  fs::rename(dir, fs::path(tmp.path()) / "gone");
  REQUIRE(eventually([&] { return log.count(line) == 2; }));  // missing again: news after the success
  fs::create_directory(dir);
  REQUIRE(eventually([&] { return owner.get(owner.serves) == 3; }));
  REQUIRE(passes(2));
  fs::remove(dir / kName);
  CHECK(eventually([&] { return owner.get(owner.serves) == 4; }));
  CHECK(owner.get(owner.checks) == 0);
  keeper.stop();
}

TEST_CASE("socket keeper: the periodic check and wake() bring passes, stop() ends a waiting keeper at once") {
  erdma::testing::TempDir tmp("keeper");
  Owner owner(tmp.path());
  SUBCASE("periodic check") {
    SocketKeeper keeper("test keeper", {{tmp.path(), kMask, "the test directory"}}, 30ms, owner.callbacks());
    REQUIRE_OK(keeper.start());
    CHECK(eventually([&] { return owner.get(owner.checks) >= 3; }));
  }
  SUBCASE("wake and stop") {
    SocketKeeper keeper("test keeper", {{tmp.path(), kMask, "the test directory"}}, 1h, owner.callbacks());
    keeper.wake();  // before start: nothing to wake, and no harm
    REQUIRE_OK(keeper.start());
    REQUIRE(eventually([&] { return keeper.passes() >= 1; }));
    keeper.wake();
    CHECK(eventually([&] { return owner.get(owner.wakes) >= 1; }));
    // Every wait now lasts up to a second (nothing due for an hour): stop must not wait it out.
    const auto begin = Clock::now();
    keeper.stop();
    CHECK(Clock::now() - begin < 500ms);
    const int handles = owner.get(owner.handles);
    fs::remove(fs::path(tmp.path()) / kName);  // news the stopped keeper must not pass on
    std::this_thread::sleep_for(50ms);
    CHECK(owner.get(owner.handles) == handles);
    keeper.stop();  // idempotent
    // And it starts anew after a stop, with a new watch (what happened meanwhile is for the
    // owner's periodic check to find).
    const uint64_t before = keeper.passes();
    REQUIRE_OK(keeper.start());
    REQUIRE(eventually([&] { return keeper.passes() > before; }));
    std::ofstream(fs::path(tmp.path()) / kName) << "someone's";
    fs::remove(fs::path(tmp.path()) / kName);
    CHECK(eventually([&] { return owner.get(owner.serves) == 2; }));
  }
}

}  // namespace
}  // namespace erdma::agent::kubelet
