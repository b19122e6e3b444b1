// erdma-agent subcommands (see commands.hpp).
#include "agent/cli/commands.hpp"

#include <csignal>
#include <cstring>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <thread>

#include <pthread.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "agent/core/plugin_model.hpp"
#include "agent/plugin/agent_metrics.hpp"
#include "agent/plugin/plugin_runtime.hpp"
#include "agent/plugin/smc_stats.hpp"
#include "agent/plugin/smcr_host_setup.hpp"
#include "agent/plugin/smcr_pod_setup.hpp"
#include "agent/plugin/smcr_service.hpp"
#include "agent/sys/netlink_smc.hpp"
#include "agent/sys/netns.hpp"
#include "agent/sys/pod_netns.hpp"
#include "agent/sys/pod_sources.hpp"
#include "agent/sys/rdma_netlink.hpp"
#include "agent/sys/static_rdma_devices.hpp"
#include "agent/sys/verbs_rdma_devices.hpp"
#include "common/http/metrics_server.hpp"
#include "common/listen_address.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"
#include "common/structured.hpp"

namespace erdma::agent {
namespace log = common::log;
using nlohmann::json;

namespace {

// The verbs source with its RDMA netlink queries, owned together.
class VerbsWithNetlink final : public RdmaDevices {
 public:
  explicit VerbsWithNetlink(const std::vector<std::string>& drivers) : verbs_(drivers, &kernel_) {}
  Result<DeviceScan> scan() override { return verbs_.scan(); }
  std::string describe() const override { return verbs_.describe(); }

 private:
  NetlinkDeviceInfo kernel_;
  VerbsRdmaDevices verbs_;
};

struct Flags {
  std::string config;
  std::string output = "table";
  std::string log_level;
};

// Parses --config FILE, -o FORMAT, --log-level L (also --flag=value). Unknown flags are errors.
bool parse_flags(const std::vector<std::string>& args, Flags& f, bool allow_output, bool allow_log, std::ostream& err) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::string value;
    bool has_value = false;
    if (const auto eq = a.find('='); a.starts_with("--") && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    auto take = [&](std::string& into) {
      if (has_value) {
        into = value;
        return true;
      }
      if (i + 1 >= args.size()) {
        err << "error: " << a << " needs a value\n";
        return false;
      }
      into = args[++i];
      return true;
    };
    if (a == "--config" || a == "-c") {
      if (!take(f.config)) return false;
    } else if (allow_output && (a == "-o" || a == "--output")) {
      if (!take(f.output)) return false;
      if (f.output != "table" && f.output != "json") {
        err << "error: -o must be table or json, got \"" << f.output << "\"\n";
        return false;
      }
    } else if (allow_log && a == "--log-level") {
      if (!take(f.log_level)) return false;
      if (!log::parse_level(f.log_level)) {
        err << "error: --log-level must be debug, info, warn or error\n";
        return false;
      }
    } else {
      err << "error: unknown flag \"" << args[i] << "\"\n";
      return false;
    }
  }
  return true;
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

Result<AgentConfig> load_config_file(const std::string& path) {
  if (path.empty()) return AgentConfig{};
  auto text = common::read_file(path, 1u << 20);
  if (!text) return std::move(text).error();
  auto doc = common::parse_document(*text, path);
  if (!doc) return std::move(doc).error();
  auto cfg = AgentConfig::load(*doc);
  if (!cfg) return make_error(cfg.error().code, path + ": " + cfg.error().message);
  return cfg;
}

std::unique_ptr<RdmaDevices> make_device_source(const AgentConfig& cfg) {
  if (cfg.source == DeviceSourceKind::Static) return std::make_unique<StaticRdmaDevices>(cfg.static_devices);
  return std::make_unique<VerbsWithNetlink>(cfg.drivers);
}

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
          << (p ? std::to_string(p->number) : "-") << std::setw(14) << (p ? to_string(p->state) : "-")
          << std::setw(10) << (p && !p->link_layer.empty() ? p->link_layer : "-") << std::setw(11) << health
          << std::setw(7) << slots << (p ? gid_list(*p) : "-") << "\n";
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
  if (!parse_flags(args, flags, true, false, err)) return kExitUsage;
  auto cfg = load_config_file(flags.config);
  if (!cfg) {
    err << "error: " << cfg.error().message << "\n";
    return kExitUsage;
  }
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
  if (!parse_flags(args, flags, false, false, err)) return kExitUsage;
  auto cfg = load_config_file(flags.config);
  if (!cfg) {
    err << "error: " << cfg.error().message << "\n";
    return kExitUsage;
  }
  out << cfg->to_json().dump(2) << "\n";
  return kExitOk;
}

int run_agent(const std::vector<std::string>& args, std::ostream& err) {
  Flags flags;
  if (!parse_flags(args, flags, false, true, err)) return kExitUsage;
  if (!flags.log_level.empty()) log::set_level(*log::parse_level(flags.log_level));
  route_grpc_logs();
  auto cfg = load_config_file(flags.config);
  if (!cfg) {
    log::error("invalid configuration").kv("error", cfg.error().message);
    return kExitUsage;
  }

  // Signals are taken synchronously by this thread (sigtimedwait); block them before any other
  // thread exists so that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  common::metrics::Registry registry;
  AgentMetrics metrics(registry);
  auto source = make_device_source(*cfg);

  // SMC-R: pod setup is the PreStartContainer hook; host setup, resync and statistics run on
  // their own thread. smcr.enabled: false leaves the kernel alone (the hook only logs).
  const auto call_timeout = std::chrono::milliseconds(cfg->smcr.call_timeout_ms);
  SetnsNetns netns;
  std::unique_ptr<PodResourcesSource> pod_resources;
  std::unique_ptr<SandboxSource> sandboxes;
  std::unique_ptr<PodNetnsConfigurator> configurator;
  std::unique_ptr<SmcrPodSetup> pod_setup;
  std::unique_ptr<SmcrHostSetup> host_setup;
  std::unique_ptr<SmcStatsCollector> stats;
  std::unique_ptr<PreStartHook> logging_hook;
  PreStartHook* hook = nullptr;
  if (cfg->smcr.enabled) {
    pod_resources = std::make_unique<GrpcPodResources>(cfg->pod_resources_socket, call_timeout);
    sandboxes = std::make_unique<GrpcCriSandboxes>(cfg->cri_socket, call_timeout);
    configurator = std::make_unique<KernelPodNetns>(netns, netlink_pnet_opener());
    pod_setup = std::make_unique<SmcrPodSetup>(*cfg, *pod_resources, *sandboxes, *configurator, &metrics);
    host_setup = std::make_unique<SmcrHostSetup>(cfg->smcr, netlink_pnet_opener(), netlink_smc_info_opener());
    stats = std::make_unique<SmcStatsCollector>(metrics, netns, netlink_smc_info_opener());
    hook = pod_setup.get();
    log::info("SMC-R enabled")
        .kv("pnet_id", cfg->smcr.pnet_id)
        .kv("ueid", cfg->smcr.ueid.empty() ? "(not managed)" : cfg->smcr.ueid)
        .kv("pod_resources", cfg->pod_resources_socket)
        .kv("cri", cfg->cri_socket)
        .kv("proc_root", cfg->proc_root);
    (void)install_preload(cfg->smcr, &metrics);  // logged and counted; pods fall back to TCP without it
  } else {
    logging_hook = std::make_unique<LoggingPreStartHook>();
    hook = logging_hook.get();
    log::info("SMC-R disabled (smcr.enabled: false): no host or pod setup, no preload install");
  }
  PluginRuntime runtime(*cfg, *source, *hook, &metrics);
  std::unique_ptr<SmcrService> smcr;

  boost::asio::io_context ioc;
  auto work = boost::asio::make_work_guard(ioc);
  std::unique_ptr<common::http::MetricsServer> metrics_server;
  std::thread metrics_thread;
  if (!cfg->metrics_listen.empty()) {
    auto not_ready = [&]() -> std::optional<std::string> {
      if (runtime.registered()) return std::nullopt;
      return "not registered with kubelet";
    };
    metrics_server = std::make_unique<common::http::MetricsServer>(ioc, common::http::probe_handler(registry, not_ready));
    auto addr = common::parse_listen_address(cfg->metrics_listen);
    auto s = addr ? metrics_server->listen(*addr) : Status(addr.error());
    if (!s) {
      log::error("cannot serve metrics").kv("listen", cfg->metrics_listen).kv("error", s.error().message);
      return kExitFailure;
    }
    log::info("serving metrics").kv("listen", cfg->metrics_listen).kv("port", static_cast<unsigned>(metrics_server->port()));
    metrics_thread = std::thread([&] { ioc.run(); });
  }

  int rc = kExitOk;
  if (auto s = runtime.start(); !s) {
    log::error("device plugin failed to start").kv("error", s.error().message);
    rc = kExitFailure;
  } else {
    if (cfg->smcr.enabled) {
      // After the first scan (runtime.start() scans before returning): host setup sees devices.
      smcr = std::make_unique<SmcrService>(*cfg, runtime.state(), *host_setup, pod_setup.get(), stats.get(), &metrics);
      smcr->start();
    }
    for (;;) {
      timespec timeout{1, 0};  // bounded wait: the loop stays responsive and never blocks forever
      const int sig = sigtimedwait(&signals, nullptr, &timeout);
      if (sig == SIGTERM || sig == SIGINT) {
        log::info("signal received; stopping").kv("signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        break;
      }
      if (sig == SIGHUP) {
        log::info("SIGHUP: rescanning devices");
        runtime.request_rescan();
      }
    }
  }
  if (smcr) smcr->stop();
  runtime.stop();
  if (metrics_server) metrics_server->stop();
  work.reset();
  ioc.stop();
  if (metrics_thread.joinable()) metrics_thread.join();
  log::info("erdma-agent exiting").kv("status", rc);
  return rc;
}

}  // namespace erdma::agent
