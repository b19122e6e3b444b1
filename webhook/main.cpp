// erdma-webhook: the eRDMA/SMC-R mutating admission webhook and its offline tools.
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "erdma/version.hpp"
#include "webhook/cli/commands.hpp"
#include "webhook/server/serve_command.hpp"

namespace {

constexpr const char* kUsage = R"(Usage: erdma-webhook COMMAND [FLAGS]

Mutating admission webhook that gives Kubernetes pods Alibaba Cloud eRDMA (NCCL settings) and
SMC-R (TCP over RDMA, no code change).

Commands:
  serve     run the HTTPS admission server (what kube-apiserver calls)
  mutate    show the patch the webhook would apply to pods in a manifest (offline)
  config    print the effective configuration, defaults filled in
  version   print the version

Run 'erdma-webhook COMMAND --help' for the flags of a command.
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace erdma::webhook;
  std::ios::sync_with_stdio(false);
  if (argc < 2 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    (argc < 2 ? std::cerr : std::cout) << kUsage;
    return argc < 2 ? kExitUsage : kExitOk;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "serve") return erdma::webhook::server::run_serve(args, std::cout, std::cerr);
    if (cmd == "mutate") return run_mutate(args, std::cout, std::cerr);
    if (cmd == "config") return run_config(args, std::cout, std::cerr);
    if (cmd == "version" || cmd == "--version") {
      std::cout << "erdma-webhook " << erdma::kVersion << "\n";
      return kExitOk;
    }
  } catch (const std::exception& e) {
    // Process edge: anything unexpected ends here as one line, never as an abort.
    std::cerr << "error: " << e.what() << "\n";
    return kExitUsage;
  }
  std::cerr << "error: unknown command \"" << cmd << "\"\n" << kUsage;
  return kExitUsage;
}
