// erdma-agent: the eRDMA node agent (kubelet device plugin for aliyun/erdma) and its admin tools.
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "agent/cli/commands.hpp"
#include "agent/cli/smc_commands.hpp"
#include "erdma/version.hpp"

namespace {

constexpr const char* kUsage = R"(Usage: erdma-agent COMMAND [FLAGS]

Node agent that makes Alibaba Cloud eRDMA devices available to Kubernetes pods: a kubelet device
plugin advertising aliyun/erdma, with health from the RDMA port state, and SMC-R for pods annotated
network.alibabacloud.com/erdma-smcr: "true" (pnet entries and UEID on the node, each SMC-R pod's
network namespace configured before its containers start).

Commands:
  run         run the agent: erdma-agent run [--config FILE] [--log-level debug|info|warn|error]
  devices     show what device discovery sees: erdma-agent devices [-o table|json] [--config FILE]
  config      print the effective configuration: erdma-agent config [--config FILE]
  status      node summary: driver mode wanted/found, devices and their NCCL GID index, SMC-R
              readiness, preload: erdma-agent status [-o table|json] [--config FILE]
  pnet        SMC-R pnet table: pnet list|add|del|flush [--netns PATH|--pid PID]
  ueid        SMC-Rv2 UEID table: ueid list|add|del
  smc-status  SMC sockets like smcss: smc-status [--netns PATH|--pid PID] [-a] [-o json]
  smc-stats   SMC connection and fallback counters: smc-stats [--netns PATH|--pid PID] [-o json]
  version     print the version

Exit status: 0 ok; 1 the agent failed (run), no RDMA device was found (devices), the driver
mode is not the wanted one or no device was found (status) or the kernel call failed (e.g. no
SMC); 2 bad flags or an invalid config file.
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace erdma::agent;
  std::ios::sync_with_stdio(false);
  if (argc < 2 || std::strcmp(argv[1], "-h") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "help") == 0) {
    (argc < 2 ? std::cerr : std::cout) << kUsage;
    return argc < 2 ? kExitUsage : kExitOk;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (cmd == "run") return run_agent(args, std::cerr);
    if (cmd == "devices") return run_devices(args, std::cout, std::cerr);
    if (cmd == "config") return run_config(args, std::cout, std::cerr);
    if (cmd == "status") return run_status(args, std::cout, std::cerr);
    if (cmd == "pnet") return cmd_pnet(args, std::cout, std::cerr);
    if (cmd == "ueid") return cmd_ueid(args, std::cout, std::cerr);
    if (cmd == "smc-status") return cmd_smc_status(args, std::cout, std::cerr);
    if (cmd == "smc-stats") return cmd_smc_stats(args, std::cout, std::cerr);
    if (cmd == "version" || cmd == "--version") {
      std::cout << "erdma-agent " << erdma::kVersion << "\n";
      return kExitOk;
    }
  } catch (const std::exception& e) {
    // Process edge: anything unexpected ends here as one line.
    std::cerr << "error: " << e.what() << "\n";
    return kExitFailure;
  }
  std::cerr << "error: unknown command \"" << cmd << "\"\n" << kUsage;
  return kExitUsage;
}
