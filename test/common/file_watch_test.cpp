// Tests for common/file_watch.hpp: wake-ups across threads, directory events, timeouts.
#include "common/file_watch.hpp"

#include <doctest/doctest.h>
#include <sys/inotify.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "test/support.hpp"

namespace fs = std::filesystem;
using erdma::common::FileWatch;
using namespace std::chrono_literals;

using erdma::testing::TempDir;

TEST_CASE("FileWatch: a wake from another thread ends the wait, once") {
  auto w = FileWatch::open();
  REQUIRE(w.ok());
  std::thread t([&] { w->wake(); });
  // Waits for the event, however long the other thread takes to be scheduled.
  FileWatch::Wait got;
  while (!got.woken) got = w->wait(10s);
  t.join();
  CHECK(got.error.ok());
  // Two wakes before a wait are one wake-up; then nothing is pending.
  w->wake();
  w->wake();
  CHECK(w->wait(0ms).woken);
  const auto idle = w->wait(0ms);
  CHECK_FALSE(idle.woken);
  CHECK(idle.events.empty());
}

TEST_CASE("FileWatch: events in a watched directory name the entry; every queued one is returned") {
  auto w = FileWatch::open();
  REQUIRE(w.ok());
  REQUIRE_MESSAGE(w->has_inotify(), w->inotify_error());
  TempDir dir;
  auto wd = w->watch_dir(dir.path(), IN_CREATE | IN_DELETE);
  REQUIRE(wd.ok());
  // The same directory again is the same watch.
  CHECK(*w->watch_dir(dir.path(), IN_CREATE | IN_DELETE) == *wd);
  for (int i = 0; i < 50; ++i) std::ofstream(dir.file("f" + std::to_string(i))) << "x";
  fs::remove(dir.file("f0"));
  std::vector<FileWatch::Event> all;
  while (all.size() < 51) {
    auto got = w->wait(10s);
    REQUIRE(got.error.ok());
    REQUIRE_FALSE(got.events.empty());  // 10 s with 51 queued events and nothing: a bug
    all.insert(all.end(), got.events.begin(), got.events.end());
  }
  CHECK(all.size() == 51);
  CHECK(all.front().watch == *wd);
  CHECK(all.front().name == "f0");
  CHECK((all.front().mask & IN_CREATE) != 0);
  CHECK(all.back().name == "f0");
  CHECK((all.back().mask & IN_DELETE) != 0);
}

TEST_CASE("FileWatch: a missing directory is NotFound, and the watch still serves wake-ups") {
  auto w = FileWatch::open();
  REQUIRE(w.ok());
  REQUIRE_MESSAGE(w->has_inotify(), w->inotify_error());
  auto wd = w->watch_dir("/nonexistent/erdma-watch", IN_CREATE);
  REQUIRE_FALSE(wd.ok());
  CHECK(wd.error().code == erdma::ErrorCode::NotFound);
  CHECK(wd.error().message.find("/nonexistent/erdma-watch") != std::string::npos);
  w->wake();
  CHECK(w->wait(10s).woken);
}
