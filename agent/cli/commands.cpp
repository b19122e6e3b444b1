// erdma-agent subcommands (see commands.hpp).
#include "agent/cli/commands.hpp"

#include <filesystem>
#include <iomanip>
#include <optional>
#include <ostream>
#include <span>
#include <sstream>

#include "agent/core/plugin_model.hpp"
#include "agent/daemon/daemon.hpp"
#include "agent/kubelet/plugin_server.hpp"
#include "agent/sys/kernel_modules.hpp"
#include "agent/sys/netlink_smc.hpp"
#include "common/flags.hpp"
#include "common/listen_address.hpp"
#include "common/log.hpp"
#include "common/text.hpp"

namespace erdma::agent {
namespace log = common::log;
using nlohmann::json;

namespace {

struct Flags {
  // Every subcommand reads the DaemonSet's file when it is there, like the daemon (config_file.hpp).
  std::string config = default_config_path();
  std::string output = "table";
  std::string log_level;
  std::optional<std::string> metrics_listen;  // run --metrics-listen: replaces metricsListen
  bool load_modules = false;                  // run --load-modules: driver.loadModules on
};

// The flags each command takes; common/flags.hpp spells them.
constexpr common::FlagSpec kConfigFlags[] = {{"--config", "-c"}};
constexpr common::FlagSpec kListFlags[] = {{"--config", "-c"}, {"--output", "-o"}};
constexpr common::FlagSpec kRunFlags[] = {
    {"--config", "-c"}, {"--log-level"}, {"--metrics-listen"}, {"--load-modules", {}, true}};

// Parses `args` against `specs` into `f` and checks each value; says why and returns false when one
// is wrong.
bool read_flags(const std::vector<std::string>& args, std::span<const common::FlagSpec> specs, Flags& f,
                std::ostream& err) {
  auto parsed = common::parse_flags(args, specs);
  if (!parsed) {
    err << "error: " << parsed.error().message << "\n";
    return false;
  }
  if (!parsed->positional.empty()) {
    err << "error: unexpected argument \"" << parsed->positional.front() << "\"\n";
    return false;
  }
  f.config = parsed->get_or("--config", f.config);
  f.output = parsed->get_or("--output", f.output);
  if (f.output != "table" && f.output != "json") {
    err << "error: -o must be table or json, got \"" << f.output << "\"\n";
    return false;
  }
  if (const std::string* v = parsed->get("--metrics-listen")) {
    if (!v->empty()) {
      if (auto addr = common::parse_listen_address(*v); !addr) {
        err << "error: --metrics-listen: " << addr.error().message
            << " (e.g. 127.0.0.1:9467, or $(NODE_IP):9467 from the downward API)\n";
        return false;
      }
    }
    f.metrics_listen = *v;
  }
  f.load_modules = parsed->has("--load-modules");
  f.log_level = parsed->get_or("--log-level", "");
  if (!f.log_level.empty() && !log::parse_level(f.log_level)) {
    err << "error: --log-level must be debug, info, warn or error\n";
    return false;
  }
  return true;
}

// read_flags, then the config file they name (or the default); says why and returns nullopt when
// either is wrong.
std::optional<AgentConfig> read_flags_and_config(const std::vector<std::string>& args,
                                                 std::span<const common::FlagSpec> specs, Flags& f, std::ostream& err) {
  if (!read_flags(args, specs, f, err)) return std::nullopt;
  auto cfg = load_config_file(f.config);
  if (!cfg) {
    err << "error: " << cfg.error().message << "\n";
    return std::nullopt;
  }
  return std::move(*cfg);
}

std::string gid_list(const RdmaPort& p) {
  std::string s;
  for (const auto& g : p.gids) {
    s += (s.empty() ? "" : " ") + std::to_string(g.index) + "=" + g.address +
         (g.type == GidType::Unknown ? "" : "(" + std::string(to_string(g.type)) + ")");
  }
  return s.empty() ? "-" : s;
}

}  // namespace

std::string render_devices_table(const DeviceScan& scan, unsigned slots_per_device) {
  std::ostringstream out;
  const auto ad = advertised_devices(scan.devices, slots_per_device);
  out << std::left << std::setw(16) << "DEVICE" << std::setw(10) << "DRIVER" << std::setw(10) << "UVERBS"
      << std::setw(10) << "NETDEV" << std::setw(6) << "NUMA" << std::setw(6) << "PORT" << std::setw(14) << "STATE"
      << std::setw(10) << "LINK" << std::setw(11) << "HEALTH" << std::setw(7) << "SLOTS"
      << "GIDS\n";
  for (const auto& d : scan.devices) {
    size_t slots = 0;
    for (const auto& s : ad.slots) slots += s.device == d.name ? 1u : 0u;
    const std::string health = is_healthy(d) ? "Healthy" : "Unhealthy";
    auto row = [&](const RdmaPort* p) {
      out << std::left << std::setw(16) << d.name << std::setw(10) << (d.driver.empty() ? "-" : d.driver)
          << std::setw(10) << (d.uverbs.empty() ? "-" : d.uverbs) << std::setw(10)
          << (d.netdev.empty() ? "-" : d.netdev) << std::setw(6)
          << (d.numa_node < 0 ? std::string("-") : std::to_string(d.numa_node)) << std::setw(6)
          << (p ? std::to_string(p->number) : "-") << std::setw(14) << (p ? to_string(p->state) : "-") << std::setw(10)
          << (p && !p->link_layer.empty() ? p->link_layer : "-") << std::setw(11) << health << std::setw(7) << slots
          << (p ? gid_list(*p) : "-") << "\n";
    };
    if (d.ports.empty()) row(nullptr);
    for (const auto& p : d.ports) row(&p);
  }
  return out.str();
}

json render_devices_json(const DeviceScan& scan, const std::string& source, unsigned slots_per_device) {
  const auto ad = advertised_devices(scan.devices, slots_per_device);
  json devices = json::array();
  for (const auto& d : scan.devices) {
    json ports = json::array();
    for (const auto& p : d.ports) {
      json gids = json::array();
      for (const auto& g : p.gids) {
        gids.push_back({{"index", g.index}, {"gid", g.address}, {"type", to_string(g.type)}, {"netdev", g.netdev}});
      }
      ports.push_back({{"port", p.number}, {"state", to_string(p.state)}, {"linkLayer", p.link_layer}, {"gids", gids}});
    }
    size_t slots = 0;
    for (const auto& s : ad.slots) slots += s.device == d.name ? 1u : 0u;
    devices.push_back({{"name", d.name},
                       {"driver", d.driver},
                       {"uverbs", d.uverbs},
                       {"devicePath", uverbs_path(d)},
                       {"netdev", d.netdev},
                       {"numaNode", d.numa_node},
                       {"health", is_healthy(d) ? "Healthy" : "Unhealthy"},
                       {"slots", slots},
                       {"ports", ports}});
  }
  json notes = scan.notes;
  for (const auto& n : ad.notes) notes.push_back(n);
  return json{{"source", source}, {"devices", devices}, {"rdmaCmPresent", scan.rdma_cm_present}, {"notes", notes}};
}

int run_devices(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Flags flags;
  auto cfg = read_flags_and_config(args, kListFlags, flags, err);
  if (!cfg) return kExitUsage;
  auto source = make_device_source(*cfg);
  auto scan = source->scan();
  if (!scan) {
    err << "error: device discovery failed: " << scan.error().message << "\n";
    return kExitFailure;
  }
  if (flags.output == "json") {
    out << render_devices_json(*scan, source->describe(), cfg->slots_per_device).dump(2) << "\n";
  } else if (!scan->devices.empty()) {
    out << render_devices_table(*scan, cfg->slots_per_device);
  }
  if (flags.output == "table") {
    const auto ad = advertised_devices(scan->devices, cfg->slots_per_device);
    for (const auto& n : scan->notes) err << "note: " << n << "\n";
    for (const auto& n : ad.notes) err << "note: " << n << "\n";
    if (!scan->rdma_cm_present && !scan->devices.empty()) {
      err << "note: " << kRdmaCmPath << " is missing on this host (load rdma_ucm); containers will not get it\n";
    }
    if (scan->devices.empty()) out << "no RDMA devices found (source: " << source->describe() << ")\n";
  }
  return scan->devices.empty() ? kExitFailure : kExitOk;
}

int run_config(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Flags flags;
  auto cfg = read_flags_and_config(args, kConfigFlags, flags, err);
  if (!cfg) return kExitUsage;
  out << cfg->to_json().dump(2) << "\n";
  return kExitOk;
}

std::string render_status(const NodeStatus& st) {
  std::ostringstream out;
  const auto& v = st.driver;
  out << "driver:   " << v.line << "\n";
  out << "          wanted " << v.want << ", found " << v.have;
  if (st.facts.erdma_loaded) {
    out << " (erdma" << (st.facts.erdma_version.empty() ? "" : " " + st.facts.erdma_version)
        << ", compat_mode=" << (st.facts.compat_mode ? (*st.facts.compat_mode ? "Y" : "N") : "-")
        << ", ofed stack=" << (st.facts.ofed_stack ? "yes" : "no") << ")";
  }
  out << "\n";
  out << "gpu:      nvidia " << (st.facts.nvidia_loaded ? "loaded" : "not loaded") << ", nvidia_peermem "
      << (st.facts.nvidia_peermem_loaded ? "loaded" : "not loaded") << "\n";
  for (const auto& n : v.notes) out << "note:     " << n << "\n";
  out << "devices:  " << st.scan.devices.size() << "\n";
  for (const auto& d : st.scan.devices) {
    const auto gid = ipv4_roce_v2_gid_index(d);
    std::string node_type = "-";
    for (const auto& [name, type] : st.facts.node_types) {
      if (name == d.name && !type.empty()) node_type = type;
    }
    out << "  " << std::left << std::setw(12) << d.name << std::setw(10) << (is_healthy(d) ? "Healthy" : "Unhealthy")
        << "netdev " << std::setw(8) << (d.netdev.empty() ? "-" : d.netdev) << "numa " << std::setw(4)
        << (d.numa_node < 0 ? std::string("-") : std::to_string(d.numa_node)) << "type " << std::setw(6) << node_type
        << "NCCL_IB_GID_INDEX " << (gid ? std::to_string(*gid) : std::string("- (no IPv4 RoCE v2 GID)")) << "\n";
  }
  for (const auto& n : st.scan.notes) out << "note:     " << n << "\n";
  if (!st.smcr_enabled) {
    out << "smc-r:    disabled (smcr.enabled: false)\n";
  } else {
    out << "smc-r:    " << (v.smcr_capable ? "capable" : "not capable") << " (smc module "
        << (st.facts.smc_loaded ? "loaded" : "not loaded") << ", driver " << v.have << ")\n";
    out << "ueid:     ";
    if (!st.ueid_error.empty()) {
      out << "unreadable: " << st.ueid_error;
    } else {
      out << (st.ueids.empty() ? std::string("(table empty)") : common::join(st.ueids, ", "));
      if (!st.configured_ueid.empty()) {
        const bool present = std::find(st.ueids.begin(), st.ueids.end(), st.configured_ueid) != st.ueids.end();
        out << "; configured " << st.configured_ueid
            << (present ? " present" : " MISSING (the agent adds it at start)");
      }
    }
    out << "\n";
    out << "preload:  " << st.preload_path << (st.preload_installed ? " installed" : " not installed") << "\n";
  }
  return out.str();
}

json render_status_json(const NodeStatus& st) {
  json devices = json::array();
  for (const auto& d : st.scan.devices) {
    const auto gid = ipv4_roce_v2_gid_index(d);
    devices.push_back({{"name", d.name},
                       {"health", is_healthy(d) ? "Healthy" : "Unhealthy"},
                       {"netdev", d.netdev},
                       {"numaNode", d.numa_node},
                       {"ncclGidIndex", gid ? json(*gid) : json(nullptr)}});
  }
  return json{{"driver",
               {{"want", st.driver.want},
                {"have", st.driver.have},
                {"mismatch", st.driver.mismatch},
                {"message", st.driver.line},
                {"notes", st.driver.notes},
                {"compatMode", st.facts.compat_mode ? json(*st.facts.compat_mode) : json(nullptr)},
                {"ofedStack", st.facts.ofed_stack},
                {"nvidia", st.facts.nvidia_loaded},
                {"nvidiaPeermem", st.facts.nvidia_peermem_loaded}}},
              {"devices", devices},
              {"smcr",
               {{"enabled", st.smcr_enabled},
                {"capable", st.driver.smcr_capable},
                {"smcModule", st.facts.smc_loaded},
                {"ueids", st.ueids},
                {"ueidError", st.ueid_error},
                {"configuredUeid", st.configured_ueid},
                {"preload", st.preload_path},
                {"preloadInstalled", st.preload_installed}}}};
}

int run_status(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  Flags flags;
  auto cfg = read_flags_and_config(args, kListFlags, flags, err);
  if (!cfg) return kExitUsage;
  NodeStatus st;
  st.facts = read_driver_facts("/sys");
  st.driver = judge_driver(cfg->driver.prefer, st.facts);
  auto source = make_device_source(*cfg);
  if (auto scan = source->scan()) {
    st.scan = std::move(*scan);
  } else {
    st.scan.notes.push_back("device discovery failed: " + scan.error().message);
  }
  st.smcr_enabled = cfg->smcr.enabled;
  st.configured_ueid = cfg->smcr.ueid;
  if (cfg->smcr.enabled) {
    if (auto info = NetlinkSmcInfo::open()) {
      if (auto l = (*info)->ueids()) {
        for (const auto& u : *l) st.ueids.push_back(u.str());
      } else {
        st.ueid_error = l.error().message;
      }
    } else {
      st.ueid_error = info.error().message;
    }
    st.preload_path = cfg->smcr.preload_host_dir + "/" + std::string(contract::kPreloadLibrary);
    std::error_code ec;
    st.preload_installed = std::filesystem::is_regular_file(st.preload_path, ec);
  }
  if (flags.output == "json") {
    out << render_status_json(st).dump(2) << "\n";
  } else {
    out << render_status(st);
  }
  return !st.driver.mismatch && !st.scan.devices.empty() ? kExitOk : kExitFailure;
}

int run_agent(const std::vector<std::string>& args, std::ostream& err) {
  Flags flags;
  if (!read_flags(args, kRunFlags, flags, err)) return kExitUsage;
  if (!flags.log_level.empty()) log::set_level(*log::parse_level(flags.log_level));
  route_grpc_logs();
  auto cfg = load_config_file(flags.config);
  if (!cfg) {
    log::error("invalid configuration").kv("error", cfg.error().message);
    return kExitUsage;
  }
  if (flags.metrics_listen) cfg->metrics_listen = *flags.metrics_listen;
  if (flags.load_modules) cfg->driver.load_modules = true;

  return run_daemon(*cfg);
}

}  // namespace erdma::agent
