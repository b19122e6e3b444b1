// Spreading retries: the band, its ends, clamping, and draws that stay in the band and differ.
#include "common/jitter.hpp"

#include <doctest/doctest.h>

#include <set>

namespace erdma::common {
namespace {
using std::chrono::milliseconds;
}  // namespace

TEST_CASE("jittered: base scaled within [1 - spread, 1 + spread] by the draw") {
  CHECK(jittered(milliseconds(10000), 0.2, 0.0) == milliseconds(8000));
  CHECK(jittered(milliseconds(10000), 0.2, 0.5) == milliseconds(10000));
  CHECK(jittered(milliseconds(10000), 0.2, 1.0) == milliseconds(12000));
  CHECK(jittered(milliseconds(60000), 0.1, 0.25) == milliseconds(57000));
  CHECK(jittered(milliseconds(0), 0.2, 1.0) == milliseconds(0));
  // Out-of-range inputs are clamped: never a negative wait, never more than twice the base.
  CHECK(jittered(milliseconds(1000), 5.0, 0.0) == milliseconds(0));
  CHECK(jittered(milliseconds(1000), 5.0, 1.0) == milliseconds(2000));
  CHECK(jittered(milliseconds(1000), 0.2, -3.0) == milliseconds(800));
  CHECK(jittered(milliseconds(1000), -1.0, 1.0) == milliseconds(1000));
}

TEST_CASE("jittered with the thread's draw: inside the band, and not all alike") {
  std::set<int64_t> seen;
  for (int i = 0; i < 200; ++i) {
    const double u = jitter_unit();
    CHECK(u >= 0.0);
    CHECK(u < 1.0);
    const auto w = jittered(milliseconds(10000));
    CHECK(w >= milliseconds(8000));
    CHECK(w <= milliseconds(12000));
    seen.insert(w.count());
  }
  CHECK(seen.size() > 100);  // 200 draws over 4001 values: a repeat-heavy generator would fail this
}

}  // namespace erdma::common
