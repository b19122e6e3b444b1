// Reading a metrics registry as a scraper does: one sample's value from the text exposition, so
// a test asserts on the series a dashboard and an alert would see.
#pragma once

#include <sstream>
#include <string>

#include "common/metrics.hpp"

namespace erdma::testing {

// The value of the sample exposed exactly as `series` (name and labels, e.g.
// `x_seconds_count{result="ok"}`), or -1 when the exposition has no such sample.
inline double sample(const common::metrics::Registry& registry, const std::string& series) {
  std::istringstream in(registry.expose());
  for (std::string line; std::getline(in, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 && line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return -1;
}

}  // namespace erdma::testing
