// The SMC-R admin subcommands: pnet list|add|del|flush, ueid list|add|del, smc-status, smc-stats.
// Each takes its arguments (after the subcommand name), writes its answer to `out` and one
// "error: ..." line to `err`, and returns the exit status: 0 done, 1 failed (for example a kernel
// without SMC), 2 bad usage. --netns PATH / --pid PID run the command inside that network namespace;
// smc-status and smc-stats also take --pod NAMESPACE/NAME (found over the CRI, see find_pod_netns).
// Their help texts are in dispatch.cpp. Kernel errors are passed through explain_smc_error().
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace erdma::agent {

[[nodiscard]] int cmd_pnet(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
[[nodiscard]] int cmd_ueid(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
[[nodiscard]] int cmd_smc_status(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
[[nodiscard]] int cmd_smc_stats(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace erdma::agent
