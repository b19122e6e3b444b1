// Subcommands of the erdma-agent binary: run (the node agent), devices (what discovery sees),
// config (the effective configuration).
#pragma once

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/core/config.hpp"
#include "agent/sys/rdma_devices.hpp"

namespace erdma::agent {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;   // run: the agent could not start; devices: none found
inline constexpr int kExitUsage = 2;     // bad flags or an invalid config file

// Reads and validates a config file (YAML or JSON); "" gives the defaults. Errors name the file.
[[nodiscard]] Result<AgentConfig> load_config_file(const std::string& path);

// The device source the config asks for (static list, or libibverbs + sysfs + RDMA netlink).
[[nodiscard]] std::unique_ptr<RdmaDevices> make_device_source(const AgentConfig& cfg);

// `erdma-agent devices` output, from a scan (pure; tested directly).
[[nodiscard]] std::string render_devices_table(const DeviceScan& scan, unsigned slots_per_device);
[[nodiscard]] nlohmann::json render_devices_json(const DeviceScan& scan, const std::string& source,
                                                 unsigned slots_per_device);

// `erdma-agent run --config FILE [--log-level L]`: serves until SIGTERM/SIGINT (exit 0);
// SIGHUP asks for a device scan.
int run_agent(const std::vector<std::string>& args, std::ostream& err);
// `erdma-agent devices [-o table|json] [--config FILE]`.
int run_devices(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `erdma-agent config [--config FILE]`.
int run_config(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace erdma::agent
