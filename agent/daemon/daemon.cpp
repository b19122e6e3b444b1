// The node agent's composition root (see daemon.hpp).
#include "agent/daemon/daemon.hpp"

#include <csignal>
#include <memory>
#include <optional>
#include <thread>

#include <pthread.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "agent/daemon/device_source.hpp"
#include "agent/daemon/exit_status.hpp"
#include "agent/daemon/node_reporter.hpp"
#include "agent/deviceplugin/plugin_runtime.hpp"
#include "agent/dra/dra_driver.hpp"
#include "agent/metrics/agent_metrics.hpp"
#include "agent/smcr/smc_stats.hpp"
#include "agent/smcr/smcr_host_setup.hpp"
#include "agent/smcr/smcr_pod_setup.hpp"
#include "agent/smcr/smcr_service.hpp"
#include "agent/sys/netlink_smc.hpp"
#include "agent/sys/netns.hpp"
#include "agent/sys/pod_netns.hpp"
#include "agent/sys/pod_sources.hpp"
#include "agent/sys/sysfs_rdma.hpp"
#include "common/guarded.hpp"
#include "common/http/metrics_server.hpp"
#include "common/listen_address.hpp"
#include "common/log.hpp"
#include "common/metrics.hpp"

namespace erdma::agent {
namespace log = common::log;

namespace {

// The CDI hook's requests become SMC-R pod setups (agent/core/cdi_hook.hpp); the answer says what
// was done, and a pod on the host's network needs nothing.
ClaimPodSetupFn claim_pod_setup(SmcrPodSetup& pods) {
  return
      [&pods](const std::string& sandbox, const PreparedClaim& claim, std::chrono::steady_clock::time_point deadline) {
        const auto out = pods.set_up_claim_pod(sandbox, claim.ns, deadline);
        const bool ok = out.result == PodSetupResult::Configured || out.result == PodSetupResult::HostNetwork;
        std::string text(to_string(out.result));
        if (!out.pod.empty()) text += " pod " + out.pod;
        if (!out.message.empty()) text += ": " + out.message;
        return dra::ClaimHookOutcome{ok, std::move(text), out.netns, out.result == PodSetupResult::HostNetwork};
      };
}

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and returns them: the daemon's thread
// takes them synchronously (sigtimedwait). Call it before any other thread exists, so that every
// thread inherits the mask.
sigset_t block_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// SMC-R's parts of the daemon. smcr.enabled: the pod setup (the PreStartContainer hook) and what it
// stands on (PodResources, the CRI, the netns configurator, the prediction's inspector), host setup
// and kernel statistics (run later by SmcrService), and the preload library installed now.
// smcr.enabled: false leaves the kernel alone: the hook only logs.
struct SmcrParts {
  SmcrParts(const AgentConfig& cfg, AgentMetrics& metrics);
  // The device plugin's PreStartContainer hook: the pod setup, or the one that only logs.
  [[nodiscard]] PreStartHook& hook() const noexcept {
    return pod_setup ? static_cast<PreStartHook&>(*pod_setup) : *logging_hook;
  }

  SetnsNetns netns;
  SetnsNetns inspector_netns;  // the SMC-R prediction's, on its own worker thread
  std::unique_ptr<KernelPodNetworkInspector> inspector;
  std::unique_ptr<PodResourcesSource> pod_resources;
  std::unique_ptr<SandboxSource> sandboxes;
  std::unique_ptr<PodNetnsConfigurator> configurator;
  std::unique_ptr<SmcrPodSetup> pod_setup;
  std::unique_ptr<SmcrHostSetup> host_setup;
  std::unique_ptr<SmcStatsCollector> stats;
  std::unique_ptr<PreStartHook> logging_hook;
};

SmcrParts::SmcrParts(const AgentConfig& cfg, AgentMetrics& metrics) {
  if (!cfg.smcr.enabled) {
    logging_hook = std::make_unique<LoggingPreStartHook>();
    log::info("SMC-R disabled (smcr.enabled: false): no host or pod setup, no preload install");
    return;
  }
  const auto call_timeout = std::chrono::milliseconds(cfg.smcr.call_timeout_ms);
  pod_resources = std::make_unique<GrpcPodResources>(cfg.pod_resources_socket, call_timeout);
  sandboxes = std::make_unique<GrpcCriSandboxes>(cfg.cri_socket, call_timeout);
  configurator = std::make_unique<KernelPodNetns>(netns, netlink_pnet_opener());
  inspector = std::make_unique<KernelPodNetworkInspector>(
      inspector_netns, NetnsRef::of_path(cfg.proc_root + "/1/ns/net"), sysfs_rdma_lister(), netlink_pnet_opener(),
      netlink_smc_info_opener());
  pod_setup = std::make_unique<SmcrPodSetup>(cfg, *pod_resources, *sandboxes, *configurator, &metrics, *inspector);
  host_setup = std::make_unique<SmcrHostSetup>(cfg.smcr, netlink_pnet_opener(), netlink_smc_info_opener(),
                                               [] { return sysfs::SysfsRdmaReader().smcd_loopback_device(); });
  stats = std::make_unique<SmcStatsCollector>(metrics, netns, netlink_smc_info_opener());
  log::info("SMC-R enabled")
      .kv("pnet_id", cfg.smcr.pnet_id.str())
      .kv("ueid", cfg.smcr.ueid.empty() ? "(not managed)" : cfg.smcr.ueid)
      .kv("smcd_loopback", cfg.smcr.smcd_loopback ? "on" : "off")
      .kv("pod_resources", cfg.pod_resources_socket)
      .kv("cri", cfg.cri_socket)
      .kv("proc_root", cfg.proc_root);
  (void)install_preload(cfg.smcr, &metrics);  // logged and counted; pods fall back to TCP without it
}

// The metrics and probe port (metrics_listen), on an event loop and a thread of its own.
class MetricsPort {
 public:
  MetricsPort() = default;
  ~MetricsPort() {
    if (thread_.joinable()) stop();
  }
  MetricsPort(const MetricsPort&) = delete;
  MetricsPort& operator=(const MetricsPort&) = delete;

  // Serves `handler` on `listen`. False when the port cannot be served (logged).
  [[nodiscard]] bool start(const std::string& listen, common::http::PlainHandler handler) {
    server_ = std::make_unique<common::http::MetricsServer>(ioc_, std::move(handler));
    auto addr = common::parse_listen_address(listen);
    auto s = addr ? server_->listen(*addr) : Status(addr.error());
    if (!s) {
      log::error("cannot serve metrics").kv("listen", listen).kv("error", s.error().message);
      return false;
    }
    log::info("serving metrics").kv("listen", listen).kv("port", static_cast<unsigned>(server_->port()));
    // A handler's exception leaves io_context::run; running it again serves on.
    thread_ = std::thread([this] {
      common::run_restarting(
          "metrics server", [this] { ioc_.run(); }, [this] { return ioc_.stopped(); });
    });
    return true;
  }

  // Stops serving and joins the thread; also when start() was never called.
  void stop() {
    if (server_) server_->stop();
    work_.reset();
    ioc_.stop();
    if (thread_.joinable()) thread_.join();
  }

 private:
  boost::asio::io_context ioc_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ = boost::asio::make_work_guard(ioc_);
  std::unique_ptr<common::http::MetricsServer> server_;
  std::thread thread_;
};

// The daemon's loop, until SIGTERM or SIGINT: the DRA driver's tick (or its next start) and the node
// report every rescan_seconds; SIGHUP rescans the devices.
void serve_until_signal(const AgentConfig& cfg, const sigset_t& signals, common::metrics::Registry& registry,
                        PluginRuntime& runtime, PluginRuntime* smcr_runtime, DraSupervisor& dra) {
  NodeReporter reporter(cfg, registry, runtime);
  reporter.check();
  auto next_check = std::chrono::steady_clock::now() + std::chrono::seconds(cfg.rescan_seconds);
  for (;;) {
    dra.tick();
    if (std::chrono::steady_clock::now() >= next_check) {
      reporter.check();
      next_check = std::chrono::steady_clock::now() + std::chrono::seconds(cfg.rescan_seconds);
    }
    timespec timeout{1, 0};  // bounded wait: the loop stays responsive and never blocks forever
    const int sig = sigtimedwait(&signals, nullptr, &timeout);
    if (sig == SIGTERM || sig == SIGINT) {
      log::info("signal received; stopping").kv("signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
      return;
    }
    if (sig == SIGHUP) {
      log::info("SIGHUP: rescanning devices");
      runtime.request_rescan();
      if (smcr_runtime) smcr_runtime->request_rescan();
    }
  }
}

}  // namespace

int run_daemon(const AgentConfig& cfg) {
  const sigset_t signals = block_signals();  // first: no other thread exists yet
  common::metrics::Registry registry;
  AgentMetrics metrics(registry);
  auto source = make_device_source(cfg);

  // SMC-R: pod setup is the PreStartContainer hook; host setup, resync and statistics run on
  // their own thread (SmcrService, once the devices are scanned).
  SmcrParts smcr(cfg, metrics);
  PluginRuntime runtime(cfg, *source, smcr.hook(), &metrics);
  // SMC-R containers' resource: the library mount only, and the same pod setup at PreStart.
  std::unique_ptr<PluginRuntime> smcr_runtime;
  if (auto endpoint = smcr_endpoint(cfg); endpoint && smcr.pod_setup) {
    smcr_runtime = std::make_unique<PluginRuntime>(cfg, *endpoint, *source,
                                                   smcr.pod_setup->for_resource(endpoint->resource_name), nullptr);
  }
  std::unique_ptr<SmcrService> smcr_service;
  // The DRA driver beside the device plugin, on the same device view; the readiness probe says
  // why DRA is not there while its start is retried.
  DraSupervisor dra(cfg, runtime.state(), registry, [&](PodEventSink* events) {
    if (smcr.pod_setup) smcr.pod_setup->set_event_sink(events);
  });
  if (smcr.pod_setup) dra.set_claim_pod_setup(claim_pod_setup(*smcr.pod_setup));

  MetricsPort metrics_port;
  if (!cfg.metrics_listen.empty()) {
    auto not_ready = [&]() -> std::optional<std::string> {
      if (!runtime.registered()) return "not registered with kubelet";
      if (smcr_runtime && !smcr_runtime->registered()) return "the SMC-R resource is not registered with kubelet";
      return dra.not_ready();
    };
    if (!metrics_port.start(cfg.metrics_listen, common::http::probe_handler(registry, not_ready))) return kExitFailure;
  }

  int rc = kExitOk;
  Status started = runtime.start();
  if (started && smcr_runtime) started = smcr_runtime->start();
  if (!started) {
    log::error("device plugin failed to start").kv("error", started.error().message);
    rc = kExitFailure;
  } else {
    if (cfg.smcr.enabled) {
      // After the first scan (runtime.start() scans before returning): host setup sees devices.
      smcr_service = std::make_unique<SmcrService>(cfg, runtime.state(), *smcr.host_setup, smcr.pod_setup.get(),
                                                   smcr.stats.get(), &metrics);
      smcr_service->start();
    }
    dra.start();
    serve_until_signal(cfg, signals, registry, runtime, smcr_runtime.get(), dra);
  }
  if (smcr.pod_setup) smcr.pod_setup->set_event_sink(nullptr);
  dra.stop();
  if (smcr_service) smcr_service->stop();
  if (smcr_runtime) smcr_runtime->stop();
  runtime.stop();
  metrics_port.stop();
  log::info("erdma-agent exiting").kv("status", rc);
  return rc;
}

}  // namespace erdma::agent
