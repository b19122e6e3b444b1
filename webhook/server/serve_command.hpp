// `erdma-webhook serve`: start-up, reload wiring, graceful drain. Its settings: serve_options.hpp.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "webhook/server/serve_options.hpp"

namespace erdma::webhook::server {

// Runs the server until SIGTERM/SIGINT and a graceful drain. Returns the process exit status:
// 0 after a drain, 1 when start-up fails (one error line on stderr says why), 2 for bad flags.
int run_serve(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace erdma::webhook::server
