// The jittered wait, pure (see jitter.hpp).
#include "common/jitter.hpp"

#include <algorithm>
#include <cmath>

namespace erdma::common {

std::chrono::milliseconds jittered(std::chrono::milliseconds base, double spread, double unit) noexcept {
  spread = std::clamp(spread, 0.0, 1.0);
  unit = std::clamp(unit, 0.0, 1.0);
  const double factor = 1.0 - spread + 2.0 * spread * unit;
  return std::chrono::milliseconds(std::llround(static_cast<double>(base.count()) * factor));
}

}  // namespace erdma::common
