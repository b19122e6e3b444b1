// Tests for common/metrics.hpp: the exact text exposition.
#include "common/metrics.hpp"

#include <doctest/doctest.h>

#include <thread>
#include <vector>

using namespace erdma::common::metrics;

TEST_CASE("counters, gauges and histograms expose in Prometheus text format") {
  Registry r;
  r.counter("req_total", "Requests.", {{"outcome", "mutated"}}).inc(3);
  r.counter("req_total", "Requests.", {{"outcome", "skipped"}}).inc();
  r.gauge("open", "Open connections.").set(2);
  r.gauge("ratio", "A \"quoted\"\nhelp\\.").set(0.25);
  auto& h = r.histogram("dur_seconds", "Durations.", {0.001, 0.01});
  h.observe(0.0005);
  h.observe(0.001);  // le is inclusive
  h.observe(0.005);
  h.observe(5);
  r.counter("esc_total", "Escapes.", {{"v", "a\"b\\c\nd"}}).inc();

  const std::string want = "# HELP dur_seconds Durations.\n"
                           "# TYPE dur_seconds histogram\n"
                           "dur_seconds_bucket{le=\"0.001\"} 2\n"
                           "dur_seconds_bucket{le=\"0.01\"} 3\n"
                           "dur_seconds_bucket{le=\"+Inf\"} 4\n"
                           "dur_seconds_sum 5.0065\n"
                           "dur_seconds_count 4\n"
                           "# HELP esc_total Escapes.\n"
                           "# TYPE esc_total counter\n"
                           "esc_total{v=\"a\\\"b\\\\c\\nd\"} 1\n"
                           "# HELP open Open connections.\n"
                           "# TYPE open gauge\n"
                           "open 2\n"
                           "# HELP ratio A \"quoted\"\\nhelp\\\\.\n"
                           "# TYPE ratio gauge\n"
                           "ratio 0.25\n"
                           "# HELP req_total Requests.\n"
                           "# TYPE req_total counter\n"
                           "req_total{outcome=\"mutated\"} 3\n"
                           "req_total{outcome=\"skipped\"} 1\n";
  CHECK(r.expose() == want);
}

TEST_CASE("the same name and labels return the same series - updates from many threads add up") {
  Registry r;
  Counter& a = r.counter("c_total", "C.");
  Counter& b = r.counter("c_total", "C.");
  CHECK(&a == &b);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) a.inc();
    });
  }
  for (auto& t : threads) t.join();
  CHECK(a.value() == 40000);
}

TEST_CASE("exponential_buckets") { CHECK(exponential_buckets(1, 2, 4) == std::vector<double>{1, 2, 4, 8}); }
