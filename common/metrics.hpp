// Prometheus metrics: counters, gauges and histograms with fixed label sets, exposed in the text
// format (version 0.0.4). Registration takes a lock (do it at start-up); updates are lock-free
// atomics, safe from any thread. No I/O: a shell serves expose() over HTTP.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace erdma::common::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(uint64_t n = 1) noexcept { v_.fetch_add(n, std::memory_order_relaxed); }
  [[nodiscard]] uint64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

class Gauge {
 public:
  void set(double v) noexcept { v_.store(v, std::memory_order_relaxed); }
  void add(double d) noexcept { v_.fetch_add(d, std::memory_order_relaxed); }
  [[nodiscard]] double value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // ascending, without +Inf
  void observe(double v) noexcept;
  [[nodiscard]] const std::vector<double>& bounds() const noexcept { return bounds_; }
  [[nodiscard]] uint64_t bucket(size_t i) const noexcept { return counts_[i].load(std::memory_order_relaxed); }
  [[nodiscard]] uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
  [[nodiscard]] double sum() const noexcept { return sum_.load(std::memory_order_relaxed); }

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // per bucket, not cumulative; last = +Inf
  std::atomic<uint64_t> count_{0};
  std::atomic<double> sum_{0};
};

// Exponential bucket bounds: start, start*factor, ... (count of them).
[[nodiscard]] std::vector<double> exponential_buckets(double start, double factor, size_t count);

class Registry {
 public:
  // Returns the series of `name` with `labels`, creating family and series on first use. The same
  // name must keep one type and help text (mismatches abort: a programming error). References
  // stay valid for the registry's lifetime.
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                       const Labels& labels = {});

  // The text exposition of every family, in name order, series in label order.
  [[nodiscard]] std::string expose() const;

 private:
  enum class Type { Counter, Gauge, Histogram };
  struct Family {
    Type type;
    std::string help;
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  Family& family(const std::string& name, const std::string& help, Type type);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// The content type of Registry::expose().
inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace erdma::common::metrics
