// The exit statuses of erdma-agent, the daemon's and every subcommand's.
#pragma once

namespace erdma::agent {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // run: the agent could not start; devices: none found
inline constexpr int kExitUsage = 2;    // bad flags or an invalid config file

}  // namespace erdma::agent
