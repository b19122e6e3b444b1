// The jitter's random draw (see jitter.hpp): one generator per thread, seeded once.
#include <random>

#include "common/jitter.hpp"

namespace erdma::common {

double jitter_unit() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(generator);
}

std::chrono::milliseconds jittered(std::chrono::milliseconds base, double spread) {
  return jittered(base, spread, jitter_unit());
}

}  // namespace erdma::common
