// Subcommands of the erdma-webhook binary that work offline: mutate (preview), config, version.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace erdma::webhook {

// Exit statuses shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitDenied = 1;  // the webhook would refuse at least one pod
inline constexpr int kExitUsage = 2;   // bad flags, unreadable or malformed input

// `erdma-webhook mutate -f FILE|- [-o yaml|json|patch|review|pod|request] [-n NS] [--config FILE]`.
// Writes results to `out`, warnings and errors (one line each) to `err`.
int run_mutate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// `erdma-webhook config [--config FILE]`: prints the effective configuration (defaults filled in).
int run_config(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace erdma::webhook
