// Tests for common/byte_budget.hpp: the total cap, the reserve large requests cannot take, growth
// of one reservation and release.
#include "common/byte_budget.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using erdma::common::ByteBudget;

namespace {

// 100 bytes in all, 20 of them kept for requests of at most 10 bytes.
constexpr ByteBudget::Limits kLimits{100, 20, 10};

}  // namespace

TEST_CASE("a new reservation fits by its size class and what the others hold") {
  struct Case {
    std::string name;
    size_t others;  // already reserved by other requests
    size_t want;
    bool fits;
  };
  const std::vector<Case> cases = {
      {"small into an empty budget", 0, 10, true},
      {"large into an empty budget, up to total - reserve", 0, 80, true},
      {"large one byte past total - reserve", 0, 81, false},
      {"large larger than the whole budget", 0, 1000, false},
      {"large beside large ones, exactly to the reserve", 50, 30, true},
      {"large beside large ones, one byte into the reserve", 50, 31, false},
      {"large when the others already reach into the reserve", 85, 11, false},
      {"small into the reserve while large ones hold total - reserve", 80, 10, true},
      {"small filling the budget to its last byte", 90, 10, true},
      {"small one byte past the total", 91, 10, false},
      {"small when the budget is full", 100, 1, false},
      {"one byte past small counts as large", 75, 11, false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    ByteBudget b(kLimits);
    if (c.others > 0) {
      // Fill with small reservations, which may use the whole budget.
      for (size_t left = c.others; left > 0;) {
        const size_t n = left < 10 ? left : 10;
        REQUIRE(b.grow(0, n));
        left -= n;
      }
    }
    CHECK(b.grow(0, c.want) == c.fits);
    CHECK(b.used() == c.others + (c.fits ? c.want : 0));
  }
}

TEST_CASE("a reservation grows in steps and turns large when it passes the small size") {
  struct Case {
    std::string name;
    size_t others;
    std::vector<size_t> steps;  // successive sizes of one request's reservation
    size_t held_after;          // where it stopped: the last size that fitted
  };
  const std::vector<Case> cases = {
      {"doubling within an empty budget", 0, {4, 8, 16, 32, 64}, 64},
      {"doubling stops at total - reserve", 0, {10, 20, 40, 80, 160}, 80},
      {"small growth into the reserve, large growth refused", 70, {5, 10, 20}, 10},
      {"a refused step leaves the earlier reservation held", 60, {8, 16, 32}, 16},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    ByteBudget b(kLimits);
    if (c.others > 0) REQUIRE(b.grow(0, c.others <= 10 ? c.others : 10));
    for (size_t left = c.others > 10 ? c.others - 10 : 0; left > 0;) {
      const size_t n = left < 10 ? left : 10;
      REQUIRE(b.grow(0, n));
      left -= n;
    }
    size_t held = 0;
    for (size_t want : c.steps) {
      if (!b.grow(held, want)) break;
      held = want;
    }
    CHECK(held == c.held_after);
    CHECK(b.used() == c.others + held);
    b.release(held);
    CHECK(b.used() == c.others);
  }
}

TEST_CASE("while large requests hold all they may, small ones still fit in the reserve") {
  ByteBudget b(kLimits);
  CHECK(b.largest() == 80);
  int large = 0;
  while (b.grow(0, 40)) ++large;
  CHECK(large == 2);
  CHECK_FALSE(b.grow(0, 11));
  int small = 0;
  while (b.grow(0, 10)) ++small;
  CHECK(small == 2);
  // One large request done: the small ones count against the large requests' share too, so 20
  // bytes of it are free for large requests, not 40.
  b.release(40);
  CHECK_FALSE(b.grow(0, 21));
  CHECK(b.grow(0, 20));
  CHECK(b.used() == 80);
}

TEST_CASE("release gives back exactly what was reserved") {
  ByteBudget b(kLimits);
  REQUIRE(b.grow(0, 30));
  REQUIRE(b.grow(30, 50));
  REQUIRE(b.grow(0, 5));
  CHECK(b.used() == 55);
  b.release(50);
  CHECK(b.used() == 5);
  b.release(5);
  CHECK(b.used() == 0);
  b.release(0);
  CHECK(b.used() == 0);
}
