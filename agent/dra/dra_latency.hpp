// The DRA driver's latency histograms share one bucket layout and one shape: a pair of series,
// result="ok" and result="error", registered once by the component that observes them.
// Observing is a clock read and three relaxed atomic adds, safe from any thread.
#pragma once

#include <chrono>
#include <vector>

#include "common/metrics.hpp"

namespace erdma::agent {

// 100 us to 50 s in 1-2.5-5 steps. The low end separates a claim answered from the checkpoint
// (about 0.1 ms) from one prepared anew (about 2-3 ms with its two fsyncs, docs/performance.md);
// the high end holds the kubelet's 45 s call timeout. 5 s is a bound, so an alert threshold there
// compares exactly instead of interpolating inside a bucket.
[[nodiscard]] inline std::vector<double> dra_latency_buckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50};
}

// The two series of one histogram; null members (no registry given) record nothing. Callers register
// both with `.histogram("erdma_..."` written out: the docs tests find every metric name that way.
struct LatencyByResult {
  common::metrics::Histogram* ok = nullptr;
  common::metrics::Histogram* error = nullptr;

  // Records the time since `start` under result="ok" or "error".
  void observe(bool succeeded, std::chrono::steady_clock::time_point start) const noexcept {
    common::metrics::Histogram* h = succeeded ? ok : error;
    if (h == nullptr) return;
    h->observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
};

}  // namespace erdma::agent
