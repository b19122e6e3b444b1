// Tests for common/connection_slots.hpp: caps, idle-first eviction, per-peer fairness.
#include "common/connection_slots.hpp"

#include <doctest/doctest.h>

#include <vector>

using erdma::common::ConnectionSlots;
using Verdict = ConnectionSlots::Verdict;

namespace {

ConnectionSlots::Id admit_ok(ConnectionSlots& s, const char* peer) {
  const auto a = s.admit(peer);
  REQUIRE(a.verdict == Verdict::Admitted);
  REQUIRE_FALSE(a.evicted);
  return a.id;
}

}  // namespace

TEST_CASE("below the caps every connection is admitted and counted per peer") {
  ConnectionSlots s({4, 2});
  const auto a = admit_ok(s, "10.0.0.1");
  admit_ok(s, "10.0.0.1");
  admit_ok(s, "10.0.0.2");
  CHECK(s.open() == 3);
  CHECK(s.open_from("10.0.0.1") == 2);
  CHECK(s.open_from("10.0.0.9") == 0);
  s.release(a);
  s.release(a);  // twice: ignored
  CHECK(s.open() == 2);
  CHECK(s.open_from("10.0.0.1") == 1);
}

TEST_CASE("at the total cap the longest-idle connection makes room; busy ones never do") {
  ConnectionSlots s({3, 100});
  const auto a = admit_ok(s, "10.0.0.1");
  const auto b = admit_ok(s, "10.0.0.1");
  const auto c = admit_ok(s, "10.0.0.2");
  // All busy (handshakes, requests in progress): the fourth is refused and nothing changes.
  auto r = s.admit("10.0.0.3");
  CHECK(r.verdict == Verdict::RefusedFull);
  CHECK_FALSE(r.evicted);
  CHECK(s.open() == 3);

  CHECK(s.idle() == 0);
  s.set_idle(b);
  s.set_idle(a);
  s.set_idle(c);
  s.set_idle(c);  // twice: still one
  CHECK(s.idle() == 3);
  s.set_busy(b);  // b took a request: a has now waited longest
  CHECK(s.idle() == 2);
  r = s.admit("10.0.0.3");
  REQUIRE(r.verdict == Verdict::Admitted);
  CHECK(r.evicted == a);
  CHECK_FALSE(s.contains(a));
  CHECK(s.open() == 3);
  CHECK(s.idle() == 1);  // the evicted one no longer counts; the newcomer starts busy
  s.release(a);          // the evicted connection's own close later: ignored
  CHECK(s.open() == 3);
  r = s.admit("10.0.0.4");
  CHECK(r.evicted == c);
  r = s.admit("10.0.0.5");
  CHECK(r.verdict == Verdict::RefusedFull);  // left: b (busy) and two new (busy)
}

TEST_CASE("connections that never carried a review are evicted before those that did") {
  ConnectionSlots s({3, 100});
  const auto apiserver = admit_ok(s, "10.0.0.1");
  const auto probe1 = admit_ok(s, "10.0.0.9");
  const auto probe2 = admit_ok(s, "10.0.0.9");
  s.set_proven(apiserver);
  s.set_idle(apiserver);  // waits longest, but proven
  s.set_idle(probe1);
  s.set_idle(probe2);
  CHECK(s.admit("10.0.0.2").evicted == probe1);
  CHECK(s.admit("10.0.0.2").evicted == probe2);
  CHECK(s.admit("10.0.0.2").evicted == apiserver);
  // Proven while idle keeps its place among the proven.
  ConnectionSlots t({2, 100});
  const auto x = admit_ok(t, "a");
  const auto y = admit_ok(t, "b");
  t.set_idle(x);
  t.set_idle(y);
  t.set_proven(x);
  t.set_proven(x);
  CHECK(t.idle() == 2);  // proving an idle connection moves it, never counts it twice
  CHECK(t.admit("c").evicted == y);
}

TEST_CASE("at its own cap a peer evicts its own idle connection, or is refused; others keep theirs") {
  ConnectionSlots s({100, 2});
  const auto other = admit_ok(s, "10.0.0.2");
  s.set_idle(other);  // waits longest of all
  const auto h1 = admit_ok(s, "10.0.0.1");
  const auto h2 = admit_ok(s, "10.0.0.1");
  auto r = s.admit("10.0.0.1");
  CHECK(r.verdict == Verdict::RefusedPeer);
  CHECK(s.open_from("10.0.0.1") == 2);
  s.set_idle(h2);
  s.set_idle(h1);
  r = s.admit("10.0.0.1");
  REQUIRE(r.verdict == Verdict::Admitted);
  CHECK(r.evicted == h2);
  CHECK(s.contains(other));
  CHECK(s.open_from("10.0.0.1") == 2);
  // Another peer is not held to the hoarder's count.
  CHECK(s.admit("10.0.0.3").verdict == Verdict::Admitted);
}

TEST_CASE("a connection admitted idle can be evicted before its first request") {
  ConnectionSlots s({2, 100});
  const auto a = s.admit("a", true).id;
  admit_ok(s, "b");
  const auto r = s.admit("c", true);
  CHECK(r.evicted == a);
  CHECK(s.admit("d").evicted == r.id);  // b is busy
}

TEST_CASE("a hoarder holding every slot idle cannot lock a newcomer out") {
  ConnectionSlots s({32, 64});
  std::vector<ConnectionSlots::Id> held;
  for (int i = 0; i < 32; ++i) {
    held.push_back(admit_ok(s, "10.0.0.66"));
    s.set_idle(held.back());
  }
  for (int i = 0; i < 32; ++i) {
    const auto r = s.admit("10.0.0.1");
    REQUIRE(r.verdict == Verdict::Admitted);
    CHECK(r.evicted == held[static_cast<size_t>(i)]);  // oldest first
  }
  CHECK(s.open_from("10.0.0.66") == 0);
  CHECK(s.open() == 32);
}
