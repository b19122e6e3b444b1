// Prometheus text exposition (see metrics.hpp).
#include "common/metrics.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace erdma::common::metrics {
namespace {

void append_escaped(std::string& out, const std::string& v, bool label_value) {
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && label_value) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
}

void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else if (v == std::floor(v) && std::fabs(v) < 1e15) {
    char b[32];
    std::snprintf(b, sizeof b, "%.0f", v);
    out += b;
  } else {
    char b[32];
    std::snprintf(b, sizeof b, "%.17g", v);
    out += b;
  }
}

void append_labels(std::string& out, const Labels& labels, const std::pair<std::string, std::string>* extra = nullptr) {
  if (labels.empty() && extra == nullptr) return;
  out += '{';
  bool first = true;
  auto one = [&](const std::pair<std::string, std::string>& kv) {
    if (!first) out += ',';
    first = false;
    out += kv.first;
    out += "=\"";
    append_escaped(out, kv.second, true);
    out += '"';
  };
  for (const auto& kv : labels) one(kv);
  if (extra != nullptr) one(*extra);
  out += '}';
}

std::string bound_text(double b) {
  std::string s;
  append_number(s, b);
  return s;
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  std::sort(bounds_.begin(), bounds_.end());
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0);
}

void Histogram::observe(double v) noexcept {
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

std::vector<double> exponential_buckets(double start, double factor, size_t count) {
  std::vector<double> out;
  double v = start;
  for (size_t i = 0; i < count; ++i, v *= factor) out.push_back(v);
  return out;
}

Registry::Family& Registry::family(const std::string& name, const std::string& help, Type type) {
  auto [it, inserted] = families_.try_emplace(name);
  if (inserted) {
    it->second.type = type;
    it->second.help = help;
  } else if (it->second.type != type) {
    std::fprintf(stderr, "metrics: %s registered with two types\n", name.c_str());
    std::abort();
  }
  return it->second;
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = family(name, help, Type::Counter).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = family(name, help, Type::Gauge).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                               const Labels& labels) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = family(name, help, Type::Histogram).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(bounds);
  return *slot;
}

std::string Registry::expose() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  for (const auto& [name, fam] : families_) {
    out += "# HELP " + name + " ";
    append_escaped(out, fam.help, false);
    out += "\n# TYPE " + name + " ";
    out += fam.type == Type::Counter ? "counter\n" : fam.type == Type::Gauge ? "gauge\n" : "histogram\n";
    for (const auto& [labels, c] : fam.counters) {
      out += name;
      append_labels(out, labels);
      out += ' ';
      append_number(out, static_cast<double>(c->value()));
      out += '\n';
    }
    for (const auto& [labels, g] : fam.gauges) {
      out += name;
      append_labels(out, labels);
      out += ' ';
      append_number(out, g->value());
      out += '\n';
    }
    for (const auto& [labels, h] : fam.histograms) {
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= h->bounds().size(); ++i) {
        cumulative += h->bucket(i);
        const std::pair<std::string, std::string> le{"le",
                                                     i < h->bounds().size() ? bound_text(h->bounds()[i]) : "+Inf"};
        out += name + "_bucket";
        append_labels(out, labels, &le);
        out += ' ' + std::to_string(cumulative) + '\n';
      }
      out += name + "_sum";
      append_labels(out, labels);
      out += ' ';
      append_number(out, h->sum());
      out += '\n' + name + "_count";
      append_labels(out, labels);
      out += ' ' + std::to_string(cumulative) + '\n';
    }
  }
  return out;
}

}  // namespace erdma::common::metrics
