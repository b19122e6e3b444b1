// The node's driver state, reported every rescan (see NodeReporter).
#pragma once

#include <optional>
#include <set>
#include <string>

#include "agent/core/config.hpp"
#include "agent/core/driver_mode.hpp"
#include "agent/deviceplugin/plugin_runtime.hpp"
#include "common/metrics.hpp"
#include "common/repeat_filter.hpp"

namespace erdma::agent {

// Re-reads the node's driver state every rescan: logs one line at start and on every change,
// keeps erdma_agent_driver_mode_mismatch{want,have} and, when configured, the NFD feature file.
class NodeReporter {
 public:
  NodeReporter(const AgentConfig& cfg, common::metrics::Registry& registry, PluginRuntime& runtime);
  void check();

 private:
  common::metrics::Gauge& gauge(const DriverVerdict& v);

  const AgentConfig& cfg_;
  common::metrics::Registry& registry_;
  PluginRuntime& runtime_;
  std::set<std::string> attempted_;  // modules driver.loadModules already tried
  std::optional<DriverVerdict> last_;
  common::RepeatFilter nfd_errors_;
};

}  // namespace erdma::agent
