// Micro-benchmark of the webhook's pure request path: parse + mutate + encode of one
// AdmissionReview body, as the server runs it per request (one Reviewer per thread, reused).
//
//   build/bench/core_bench [--runs N] [--iterations N] [BODY.json ...]
//
// Default bodies: bench/bodies/*.json. For each body it prints the median over runs of the mean
// time per review, the spread (min-max of the run means), and, for scale, the time to parse the
// same body alone with simdjson and with nlohmann::json, and how many heap allocations one review
// makes (counted by this program's replacement of operator new; direct malloc calls are not seen).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "webhook/core/admission.hpp"

// Every operator new of the program is counted; the review path allocates through operator new
// (std::string, std::vector) and simdjson's parser keeps its buffers across reviews.
std::atomic<uint64_t> g_allocations{0};

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// GCC 12 takes the replacements' std::free for a mismatched deallocation; the pair matches.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

namespace {

using Clock = std::chrono::steady_clock;

struct Stats {
  double median_us;
  double min_us;
  double max_us;
};

// Runs `fn` `iterations` times per run, `runs` times; returns statistics of per-call means.
template <class Fn>
Stats measure(int runs, int iterations, Fn&& fn) {
  for (int i = 0; i < iterations / 10 + 1; ++i) fn();  // warm caches and allocators
  std::vector<double> means;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < iterations; ++i) fn();
    const auto t1 = Clock::now();
    means.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iterations);
  }
  std::sort(means.begin(), means.end());
  return Stats{means[means.size() / 2], means.front(), means.back()};
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 15;
  int iterations = 2000;
  std::vector<std::filesystem::path> bodies;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--runs" || a == "--iterations") && i + 1 < argc) {
      (a == "--runs" ? runs : iterations) = std::max(1, std::atoi(argv[++i]));
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: core_bench [--runs N] [--iterations N] [BODY.json ...]\n");
      return 0;
    } else {
      bodies.emplace_back(a);
    }
  }
  if (bodies.empty()) {
    for (const auto& e :
         std::filesystem::directory_iterator(std::filesystem::path(ERDMA_SOURCE_DIR) / "bench/bodies")) {
      if (e.path().extension() == ".json") bodies.push_back(e.path());
    }
    std::sort(bodies.begin(), bodies.end());
  }
  const auto cfg = erdma::webhook::Config::defaults();
  erdma::webhook::Reviewer reviewer;
  simdjson::dom::parser parser;
  std::printf("%-18s %8s %6s | %-26s | %-11s | %-14s | %-14s\n", "body", "bytes", "ops", "parse+mutate+encode us",
              "allocations", "simdjson us", "nlohmann us");
  std::printf("%-18s %8s %6s | %-26s | %-11s | %-14s | %-14s\n", "", "", "", "median (min-max)", "per review", "median",
              "median");
  for (const auto& path : bodies) {
    const std::string body = slurp(path);
    const auto check = reviewer.review(body, cfg);
    if (check.outcome == erdma::webhook::Outcome::Invalid) {
      std::fprintf(stderr, "%s: not a usable review: %s\n", path.c_str(), check.error.c_str());
      return 1;
    }
    size_t sink = 0;
    const uint64_t before = g_allocations.load();
    sink += reviewer.review(body, cfg).body.size();
    const uint64_t allocations = g_allocations.load() - before;
    const Stats full = measure(runs, iterations, [&] { sink += reviewer.review(body, cfg).body.size(); });
    const Stats simd = measure(runs, iterations, [&] {
      simdjson::dom::element doc;
      if (parser.parse(body).get(doc) == simdjson::SUCCESS) ++sink;
    });
    const Stats nl = measure(runs, std::max(1, iterations / 10), [&] { sink += nlohmann::json::parse(body).size(); });
    std::printf("%-18s %8zu %6zu | %7.2f (%6.2f-%6.2f)%5s | %11llu | %14.2f | %14.2f\n", path.filename().c_str(),
                body.size(), check.ops.size(), full.median_us, full.min_us, full.max_us, "",
                static_cast<unsigned long long>(allocations), simd.median_us, nl.median_us);
    if (sink == 0) std::printf("(unreachable)\n");
  }
  return 0;
}
