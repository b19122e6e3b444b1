// The erdma-agent command line: one table of subcommands, each with its help, and the dispatcher
// main() calls. `erdma-agent CMD --help` (or -h) prints CMD's help to stdout and exits 0; a
// subcommand that rejects its flags exits 2 with a pointer to its --help on stderr.
#pragma once

#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace erdma::agent {

struct Subcommand {
  std::string_view name;
  std::string_view summary;  // one line for the overview
  std::string_view help;     // usage, flags with defaults, exit status
  int (*run)(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
};

// Every subcommand main() dispatches, in the order the overview lists them.
[[nodiscard]] std::span<const Subcommand> subcommands();

// The overview (`erdma-agent --help`).
[[nodiscard]] std::string overview();

// Runs argv[1:] (`args[0]` is the subcommand). No subcommand: overview to `err`, 2. --help/-h/help
// alone: overview to `out`, 0. Unknown subcommand: 2.
[[nodiscard]] int dispatch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace erdma::agent
