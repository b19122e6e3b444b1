// The node agent itself (`erdma-agent run`): the composition root that wires the device plugin,
// the SMC-R host and pod setup, the kernel statistics, the DRA driver (dra.enabled), the node
// report and the metrics port, and runs them until SIGTERM or SIGINT. The CLI parses flags and
// loads the config, then calls this.
#pragma once

#include "agent/core/config.hpp"

namespace erdma::agent {

// Serves until SIGTERM/SIGINT; SIGHUP rescans the devices. Returns the process's exit status:
// kExitOk after a signal, kExitFailure when the device plugin or the metrics port could not start.
// A DRA driver that cannot start is not fatal: it is tried again while the device plugin serves.
int run_daemon(const AgentConfig& cfg);

}  // namespace erdma::agent
