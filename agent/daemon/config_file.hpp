// The agent's configuration file: where the DaemonSet mounts it, and reading it. Every subcommand
// and the daemon read it the same way.
#pragma once

#include <string>

#include "agent/core/config.hpp"
#include "common/result.hpp"

namespace erdma::agent {

// The config file the DaemonSet mounts. Every subcommand reads it when no --config is given, so
// `kubectl exec ... -- erdma-agent status` (or cleanup, smc-status, ...) sees the agent's own
// settings; on a machine without it they use the built-in defaults.
inline constexpr const char* kDefaultConfigPath = "/etc/erdma-agent/config.yaml";
// kDefaultConfigPath when that file exists, else "" (the built-in defaults).
[[nodiscard]] std::string default_config_path();

// Reads and validates a config file (YAML or JSON); "" gives the defaults. Errors name the file.
[[nodiscard]] Result<AgentConfig> load_config_file(const std::string& path);

}  // namespace erdma::agent
