// The subcommand table and its help texts (see dispatch.hpp).
#include "agent/cli/dispatch.hpp"

#include <algorithm>
#include <array>
#include <iostream>
#include <sstream>

#include "agent/cli/commands.hpp"
#include "agent/cli/smc_commands.hpp"
#include "erdma/version.hpp"

namespace erdma::agent {
namespace {

constexpr const char* kConfigFlag =
    "  --config FILE, -c FILE  agent config (YAML or JSON); default: built-in defaults (`erdma-agent config`)\n";
constexpr const char* kAdminConfigFlag =
    "  --config FILE, -c FILE  agent config; default: /etc/erdma-agent/config.yaml when it exists (the DaemonSet's),\n"
    "                          else the built-in defaults\n";
constexpr const char* kTargetFlags =
    "  --netns PATH            run inside this network namespace file (/var/run/netns/NAME)\n"
    "  --pid PID               run inside /proc/PID/ns/net\n";

int cmd_run(const std::vector<std::string>& args, std::ostream&, std::ostream& err) { return run_agent(args, err); }

int cmd_version(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (!args.empty()) {
    err << "error: version takes no arguments, got \"" << args[0] << "\"\n";
    return kExitUsage;
  }
  out << "erdma-agent " << erdma::kVersion << "\n";
  return kExitOk;
}

const std::string kRunHelp =
    std::string(
        "Usage: erdma-agent run [--config FILE] [--log-level LEVEL] [--metrics-listen ADDR] [--load-modules]\n\n"
        "Runs the node agent: the kubelet device plugin for aliyun/erdma, SMC-R host and pod setup, the\n"
        "preload library install, and /metrics, /healthz, /readyz on metricsListen. Serves until SIGTERM\n"
        "or SIGINT; SIGHUP asks for a device rescan.\n\n"
        "Flags:\n") +
    kConfigFlag +
    "  --log-level LEVEL       debug, info, warn or error; default info\n"
    "  --metrics-listen ADDR   replaces the config's metricsListen (default 127.0.0.1:9467); \"\" = off.\n"
    "                          e.g. $(NODE_IP):9467 with NODE_IP from the downward API (status.hostIP)\n"
    "  --load-modules          sets driver.loadModules: modprobe missing smc, smc_diag, nvidia_peermem (and\n"
    "                          erdma in default mode); needs CAP_SYS_MODULE and the host's /lib/modules\n"
    "  -h, --help              this help\n\n"
    "Exit status: 0 stopped by a signal; 1 the agent could not start (device plugin, metrics port);\n"
    "2 bad flags or an invalid config file.\n";

const std::string kDevicesHelp =
    std::string("Usage: erdma-agent devices [-o table|json] [--config FILE]\n\n"
                "Shows what device discovery sees: each RDMA device with its uverbs node, netdev, NUMA node, ports,\n"
                "health, slots and GID table.\n\n"
                "Flags:\n") +
    kConfigFlag +
    "  -o, --output FORMAT     table or json; default table\n"
    "  -h, --help              this help\n\n"
    "Exit status: 0 at least one device; 1 discovery failed or found no device; 2 bad flags or config.\n";

const std::string kConfigHelp =
    std::string("Usage: erdma-agent config [--config FILE]\n\n"
                "Validates the config and prints the effective configuration (defaults filled in) as JSON.\n\n"
                "Flags:\n") +
    kConfigFlag +
    "  -h, --help              this help\n\n"
    "Exit status: 0 valid; 2 bad flags or an invalid config file (the message names the key).\n";

const std::string kStatusHelp =
    std::string("Usage: erdma-agent status [-o table|json] [--config FILE]\n\n"
                "Node summary: erdma driver mode wanted and found, devices with their NCCL GID index, SMC-R\n"
                "readiness (smc module, UEID table) and the preload library.\n\n"
                "Flags:\n") +
    kConfigFlag +
    "  -o, --output FORMAT     table or json; default table\n"
    "  -h, --help              this help\n\n"
    "Exit status: 0 driver mode as wanted and a device found; 1 otherwise; 2 bad flags or config.\n";

const std::string kPnetHelp =
    std::string("Usage:\n"
                "  erdma-agent pnet list  [--netns PATH|--pid PID] [-o json]\n"
                "  erdma-agent pnet add   PNETID (--eth IFNAME | --ib DEVICE [--port N]) [--netns PATH|--pid PID]\n"
                "  erdma-agent pnet del   PNETID [--netns PATH|--pid PID]\n"
                "  erdma-agent pnet flush [--netns PATH|--pid PID]\n\n"
                "The SMC-R pnet table (SMC_PNETID netlink) of this network namespace, or of another one.\n\n"
                "Flags:\n") +
    kTargetFlags +
    "  --eth IFNAME            add: an ETH entry for this interface\n"
    "  --ib DEVICE             add: an IB entry for this RDMA device\n"
    "  --port N                add --ib: the port, 1 or 2; default 1\n"
    "  -o, --output FORMAT     list: text or json; default text\n"
    "  -h, --help              this help\n\n"
    "Exit status: 0 done; 1 the kernel call failed (e.g. no smc module); 2 bad arguments.\n";

const std::string kUeidHelp =
    "Usage:\n"
    "  erdma-agent ueid list [-o json]\n"
    "  erdma-agent ueid add  UEID\n"
    "  erdma-agent ueid del  UEID\n\n"
    "The kernel's SMC-Rv2 UEID table (global, at most 4 entries; upper-case letters, digits, '-', '.').\n\n"
    "Flags:\n"
    "  -o, --output FORMAT     list: text or json; default text\n"
    "  -h, --help              this help\n\n"
    "Exit status: 0 done; 1 the kernel call failed (e.g. no smc module); 2 bad arguments.\n";

const std::string kSmcStatusHelp =
    std::string(
        "Usage: erdma-agent smc-status [--pod NAMESPACE/NAME | --netns PATH | --pid PID] [--interface IFNAME]\n"
        "                              [-a] [-o text|json] [--config FILE]\n\n"
        "The SMC sockets of a network namespace, like smcss: SMCR, or TCP with the fallback reason. For a\n"
        "pod (--pod/--netns/--pid) the text output starts with whether SMC-R can form for it. Without a\n"
        "target: this namespace (in the agent pod, the node's).\n\n"
        "Flags:\n"
        "  --pod NAMESPACE/NAME    a pod on this node: its ready sandbox and network namespace are found over\n"
        "                          the CRI (criSocket, procRoot of the config); run it in the agent pod on the\n"
        "                          pod's node (kubectl get pod -o wide shows the node)\n") +
    kTargetFlags +
    "  --interface IFNAME      the pod's interface for the SMC-R prediction; default eth0\n"
    "  -a, --all               also listening sockets\n"
    "  -o, --output FORMAT     text or json; default text\n" +
    kAdminConfigFlag +
    "  -h, --help              this help\n\n"
    "Needs the kernel modules smc and smc_diag (the node's administrator loads them: modprobe smc smc_diag).\n"
    "Exit status: 0 done; 1 the pod or its namespace was not found, the CRI was unreachable or the\n"
    "kernel call failed; 2 bad arguments or config.\n";

const std::string kSmcStatsHelp =
    std::string("Usage: erdma-agent smc-stats [--pod NAMESPACE/NAME | --netns PATH | --pid PID] [-o text|json]\n"
                "                             [--config FILE]\n\n"
                "SMC connection counters (v1/v2 successes, bytes, handshake errors) and fallbacks to TCP by reason,\n"
                "from SMC_GEN_NETLINK, of a network namespace (default: this one, in the agent pod the node's).\n\n"
                "Flags:\n"
                "  --pod NAMESPACE/NAME    a pod on this node, found over the CRI as for smc-status\n") +
    kTargetFlags + "  -o, --output FORMAT     text or json; default text\n" + kAdminConfigFlag +
    "  -h, --help              this help\n\n"
    "Needs the kernel module smc (modprobe smc on the node).\n"
    "Exit status: 0 done; 1 the pod was not found, the CRI was unreachable or the kernel call failed;\n"
    "2 bad arguments or config.\n";

const std::string kCleanupHelp =
    std::string("Usage: erdma-agent cleanup [--dry-run] [--config FILE] [--host-root DIR]\n\n"
                "Removes what the agent left on this node: the host pnet entries carrying smcr.pnetId, smcr.ueid from\n"
                "the UEID table (when set), <smcr.preloadHostDir>/libsmc-preload.so and the directory when empty, the\n"
                "same for <dra.hookDir>/erdma-cdi-hook, and nfdFeatureFile when configured. Entries of other PNETIDs\n"
                "and other UEIDs are left alone. Settings inside SMC-R pods' network namespaces go with the pods. Run\n"
                "it on the host network (the agent pod, or kubectl debug node/NODE); a running agent sets things up\n"
                "again within a minute (docs/uninstall.md).\n\n"
                "Flags:\n"
                "  --dry-run               print what would be removed, change nothing\n") +
    kAdminConfigFlag +
    "  --host-root DIR         where the node's / is mounted, for the files (kubectl debug node: /host);\n"
    "                          default: none (paths as they are)\n"
    "  -h, --help              this help\n\n"
    "Exit status: 0 done, or nothing to remove (running it again is safe); 1 a table could not be read or\n"
    "an action failed; 2 bad flags or config.\n";

const std::string kVersionHelp = "Usage: erdma-agent version\n\n"
                                 "Prints the version.\n\n"
                                 "Flags:\n"
                                 "  -h, --help              this help\n\n"
                                 "Exit status: 0; 2 with arguments.\n";

const std::array<Subcommand, 10> kTable{{
    {"run", "run the agent (device plugin, SMC-R setup, metrics)", kRunHelp, cmd_run},
    {"devices", "show what device discovery sees", kDevicesHelp, run_devices},
    {"config", "validate and print the effective configuration", kConfigHelp, run_config},
    {"status", "node summary: driver mode, devices and NCCL GID index, SMC-R, preload", kStatusHelp, run_status},
    {"pnet", "SMC-R pnet table: list, add, del, flush", kPnetHelp, cmd_pnet},
    {"ueid", "SMC-Rv2 UEID table: list, add, del", kUeidHelp, cmd_ueid},
    {"smc-status", "SMC sockets of a pod or namespace, like smcss", kSmcStatusHelp, cmd_smc_status},
    {"smc-stats", "SMC connection and fallback counters of a pod or namespace", kSmcStatsHelp, cmd_smc_stats},
    {"cleanup", "remove what the agent left on this node (before uninstalling)", kCleanupHelp, run_cleanup},
    {"version", "print the version", kVersionHelp, cmd_version},
}};

bool is_help(const std::string& a) { return a == "-h" || a == "--help"; }

}  // namespace

std::span<const Subcommand> subcommands() { return kTable; }

std::string overview() {
  std::ostringstream s;
  s << "Usage: erdma-agent COMMAND [FLAGS]\n\n"
       "Node agent that makes Alibaba Cloud eRDMA devices available to Kubernetes pods: a kubelet device\n"
       "plugin advertising aliyun/erdma, with health from the RDMA port state, and SMC-R for pods annotated\n"
       "network.alibabacloud.com/erdma-smcr: \"true\" (pnet entries and UEID on the node, each SMC-R pod's\n"
       "network namespace configured before its containers start).\n\n"
       "Commands:\n";
  for (const auto& c : kTable) {
    s << "  " << c.name << std::string(c.name.size() < 12 ? 12 - c.name.size() : 1, ' ') << c.summary << "\n";
  }
  s << "\n`erdma-agent COMMAND --help` shows a command's flags, defaults and exit status.\n"
       "Exit status: 0 ok; 1 the command failed; 2 bad flags or an invalid config file.\n";
  return s.str();
}

int dispatch(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << overview();
    return kExitUsage;
  }
  const std::string& cmd = args[0];
  if (is_help(cmd) || cmd == "help") {
    if (args.size() > 1) {
      for (const auto& c : kTable) {
        if (c.name == args[1]) {
          out << c.help;
          return kExitOk;
        }
      }
    }
    out << overview();
    return kExitOk;
  }
  if (cmd == "--version") return cmd_version({}, out, err);
  const auto it = std::find_if(kTable.begin(), kTable.end(), [&](const Subcommand& c) { return c.name == cmd; });
  if (it == kTable.end()) {
    err << "error: unknown command \"" << cmd << "\"; `erdma-agent --help` lists the commands\n";
    return kExitUsage;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (std::any_of(rest.begin(), rest.end(), is_help)) {
    out << it->help;
    return kExitOk;
  }
  const int rc = it->run(rest, out, err);
  if (rc == kExitUsage) err << "see `erdma-agent " << cmd << " --help`\n";
  return rc;
}

}  // namespace erdma::agent
