// The agent's series as /metrics exposes them: erdma_agent_build_info names the build's version.
#include "agent/metrics/agent_metrics.hpp"

#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "erdma/version.hpp"

namespace erdma::agent {
namespace {

// The exposition's lines that start with `prefix`.
std::vector<std::string> lines_starting_with(const std::string& text, const std::string& prefix) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) out.push_back(line);
  }
  return out;
}

}  // namespace

TEST_CASE("erdma_agent_build_info is one gauge at 1 whose version label is erdma::kVersion") {
  common::metrics::Registry registry;
  AgentMetrics metrics{registry};
  const std::string text = registry.expose();
  CAPTURE(text);
  CHECK(lines_starting_with(text, "# TYPE erdma_agent_build_info ") ==
        std::vector<std::string>{"# TYPE erdma_agent_build_info gauge"});
  CHECK(lines_starting_with(text, "erdma_agent_build_info") ==
        std::vector<std::string>{"erdma_agent_build_info{version=\"" + std::string(erdma::kVersion) + "\"} 1"});
}

}  // namespace erdma::agent
