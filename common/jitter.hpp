// Spreading retries and resyncs. Agents that fail together (an API server back from an outage, a
// DaemonSet rolled at once) would otherwise retry together, and the same every resync period: a
// wait is scaled by a factor drawn uniformly from [1 - spread, 1 + spread].
#pragma once

#include <chrono>

namespace erdma::common {

// `base` scaled by 1 - spread + 2 * spread * unit, rounded to milliseconds; `unit` is the draw in
// [0, 1] (clamped), `spread` in [0, 1] (clamped). Pure: tests give the draw.
[[nodiscard]] std::chrono::milliseconds jittered(std::chrono::milliseconds base, double spread, double unit) noexcept;

// A draw in [0, 1) from a generator of the calling thread, seeded once from std::random_device
// (common_runtime).
[[nodiscard]] double jitter_unit();

// jittered() with jitter_unit()'s draw (common_runtime).
[[nodiscard]] std::chrono::milliseconds jittered(std::chrono::milliseconds base, double spread = 0.2);

}  // namespace erdma::common
