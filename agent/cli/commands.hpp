// Subcommands of the erdma-agent binary: run (the node agent), devices (what discovery sees),
// config (the effective configuration), status (node summary), cleanup (undo the node setup).
#pragma once

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/core/config.hpp"
#include "agent/core/driver_mode.hpp"
#include "agent/daemon/config_file.hpp"
#include "agent/daemon/device_source.hpp"
#include "agent/daemon/exit_status.hpp"
#include "agent/sys/rdma_devices.hpp"

namespace erdma::agent {

// `erdma-agent devices` output, from a scan (pure; tested directly).
[[nodiscard]] std::string render_devices_table(const DeviceScan& scan, unsigned slots_per_device);
[[nodiscard]] nlohmann::json render_devices_json(const DeviceScan& scan, const std::string& source,
                                                 unsigned slots_per_device);

// What `erdma-agent status` shows: the driver mode wanted and found, the devices with the GID
// index NCCL gets for each, SMC-R readiness (smc module, UEID table) and the preload library.
struct NodeStatus {
  DriverFacts facts;
  DriverVerdict driver;
  DeviceScan scan;
  std::string configured_ueid;     // smcr.ueid ("" = not managed)
  std::vector<std::string> ueids;  // the kernel's UEID table
  std::string ueid_error;          // why the table could not be read ("" = read)
  std::string preload_path;        // where the agent installs libsmc-preload.so
  bool preload_installed = false;
  bool smcr_enabled = true;
};
[[nodiscard]] std::string render_status(const NodeStatus& status);
[[nodiscard]] nlohmann::json render_status_json(const NodeStatus& status);

// `erdma-agent status [-o table|json] [--config FILE]`: exit 0 when the driver mode is as wanted
// and at least one device is there, 1 otherwise.
int run_status(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// `erdma-agent run --config FILE [--log-level L]`: serves until SIGTERM/SIGINT (exit 0);
// SIGHUP asks for a device scan.
int run_agent(const std::vector<std::string>& args, std::ostream& err);
// `erdma-agent devices [-o table|json] [--config FILE]`.
int run_devices(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `erdma-agent config [--config FILE]`.
int run_config(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
// `erdma-agent cleanup [--dry-run] [--config FILE] [--host-root DIR]`: removes the pnet entries of
// smcr.pnetId, smcr.ueid, the preload library (and its directory when empty) and the NFD feature
// file; prints one line per action. 0 done or nothing to do, 1 a fact or an action failed.
int run_cleanup(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace erdma::agent
