// The node agent's composition root (see daemon.hpp).
#include "agent/daemon/daemon.hpp"

#include <csignal>
#include <memory>
#include <mutex>
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
  return [&pods](const std::string& sandbox, const PreparedClaim& claim, std::chrono::steady_clock::time_point deadline) {
    const auto out = pods.set_up_claim_pod(sandbox, claim.ns, deadline);
    const bool ok = out.result == PodSetupResult::Configured || out.result == PodSetupResult::HostNetwork;
    std::string text(to_string(out.result));
    if (!out.pod.empty()) text += " pod " + out.pod;
    if (!out.message.empty()) text += ": " + out.message;
    return dra::ClaimHookOutcome{ok, std::move(text)};
  };
}

}  // namespace

int run_daemon(const AgentConfig& cfg) {
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
  auto source = make_device_source(cfg);

  // SMC-R: pod setup is the PreStartContainer hook; host setup, resync and statistics run on
  // their own thread. smcr.enabled: false leaves the kernel alone (the hook only logs).
  const auto call_timeout = std::chrono::milliseconds(cfg.smcr.call_timeout_ms);
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
  PreStartHook* hook = nullptr;
  if (cfg.smcr.enabled) {
    pod_resources = std::make_unique<GrpcPodResources>(cfg.pod_resources_socket, call_timeout);
    sandboxes = std::make_unique<GrpcCriSandboxes>(cfg.cri_socket, call_timeout);
    configurator = std::make_unique<KernelPodNetns>(netns, netlink_pnet_opener());
    inspector = std::make_unique<KernelPodNetworkInspector>(inspector_netns, NetnsRef::of_path(cfg.proc_root + "/1/ns/net"),
                                                            sysfs_rdma_lister(), netlink_pnet_opener(),
                                                            netlink_smc_info_opener());
    pod_setup = std::make_unique<SmcrPodSetup>(cfg, *pod_resources, *sandboxes, *configurator, &metrics, *inspector);
    host_setup = std::make_unique<SmcrHostSetup>(cfg.smcr, netlink_pnet_opener(), netlink_smc_info_opener(),
                                                 [] { return sysfs::SysfsRdmaReader().smcd_loopback_device(); });
    stats = std::make_unique<SmcStatsCollector>(metrics, netns, netlink_smc_info_opener());
    hook = pod_setup.get();
    log::info("SMC-R enabled")
        .kv("pnet_id", cfg.smcr.pnet_id.str())
        .kv("ueid", cfg.smcr.ueid.empty() ? "(not managed)" : cfg.smcr.ueid)
        .kv("smcd_loopback", cfg.smcr.smcd_loopback ? "on" : "off")
        .kv("pod_resources", cfg.pod_resources_socket)
        .kv("cri", cfg.cri_socket)
        .kv("proc_root", cfg.proc_root);
    (void)install_preload(cfg.smcr, &metrics);  // logged and counted; pods fall back to TCP without it
  } else {
    logging_hook = std::make_unique<LoggingPreStartHook>();
    hook = logging_hook.get();
    log::info("SMC-R disabled (smcr.enabled: false): no host or pod setup, no preload install");
  }
  PluginRuntime runtime(cfg, *source, *hook, &metrics);
  // SMC-R containers' resource: the library mount only, and the same pod setup at PreStart.
  std::unique_ptr<PluginRuntime> smcr_runtime;
  if (auto endpoint = smcr_endpoint(cfg); endpoint && pod_setup) {
    smcr_runtime = std::make_unique<PluginRuntime>(cfg, *endpoint, *source, pod_setup->for_resource(endpoint->resource_name),
                                                   nullptr);
  }
  std::unique_ptr<SmcrService> smcr;
  // The DRA driver (dra.enabled) beside the device plugin, on the same device view. A start that
  // fails (no token, no node name, a corrupt checkpoint) is logged and tried again every 10 s; the
  // device plugin serves meanwhile and the readiness probe says why DRA is not there.
  std::unique_ptr<DraDriver> dra;
  DraStartRetry dra_start(std::chrono::seconds(10));
  std::mutex dra_mu;  // guards dra for the probe thread
  const auto try_start_dra = [&] {
    auto driver = std::make_unique<DraDriver>(cfg, runtime.state(), registry);
    if (pod_setup) driver->set_claim_pod_setup(claim_pod_setup(*pod_setup));
    if (!dra_start.record(driver->start(), std::chrono::steady_clock::now())) return;
    if (pod_setup) pod_setup->set_event_sink(driver->events());
    std::lock_guard lock(dra_mu);
    dra = std::move(driver);
  };

  boost::asio::io_context ioc;
  auto work = boost::asio::make_work_guard(ioc);
  std::unique_ptr<common::http::MetricsServer> metrics_server;
  std::thread metrics_thread;
  if (!cfg.metrics_listen.empty()) {
    auto not_ready = [&]() -> std::optional<std::string> {
      if (!runtime.registered()) return "not registered with kubelet";
      if (smcr_runtime && !smcr_runtime->registered()) return "the SMC-R resource is not registered with kubelet";
      if (cfg.dra.enabled) {
        std::lock_guard lock(dra_mu);
        if (!dra) {
          const std::string error = dra_start.last_error();
          return "the DRA driver did not start: " + (error.empty() ? std::string("starting") : error);
        }
        return dra->not_ready();
      }
      return std::nullopt;
    };
    metrics_server = std::make_unique<common::http::MetricsServer>(ioc, common::http::probe_handler(registry, not_ready));
    auto addr = common::parse_listen_address(cfg.metrics_listen);
    auto s = addr ? metrics_server->listen(*addr) : Status(addr.error());
    if (!s) {
      log::error("cannot serve metrics").kv("listen", cfg.metrics_listen).kv("error", s.error().message);
      return kExitFailure;
    }
    log::info("serving metrics").kv("listen", cfg.metrics_listen).kv("port", static_cast<unsigned>(metrics_server->port()));
    // A handler's exception leaves io_context::run; running it again serves on.
    metrics_thread = std::thread(
        [&] { common::run_restarting("metrics server", [&] { ioc.run(); }, [&] { return ioc.stopped(); }); });
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
      smcr = std::make_unique<SmcrService>(cfg, runtime.state(), *host_setup, pod_setup.get(), stats.get(), &metrics);
      smcr->start();
    }
    if (cfg.dra.enabled) try_start_dra();
    NodeReporter reporter(cfg, registry, runtime);
    reporter.check();
    auto next_check = std::chrono::steady_clock::now() + std::chrono::seconds(cfg.rescan_seconds);
    for (;;) {
      if (dra) {
        dra->tick();
      } else if (cfg.dra.enabled && dra_start.due(std::chrono::steady_clock::now())) {
        try_start_dra();
      }
      if (std::chrono::steady_clock::now() >= next_check) {
        reporter.check();
        next_check = std::chrono::steady_clock::now() + std::chrono::seconds(cfg.rescan_seconds);
      }
      timespec timeout{1, 0};  // bounded wait: the loop stays responsive and never blocks forever
      const int sig = sigtimedwait(&signals, nullptr, &timeout);
      if (sig == SIGTERM || sig == SIGINT) {
        log::info("signal received; stopping").kv("signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        break;
      }
      if (sig == SIGHUP) {
        log::info("SIGHUP: rescanning devices");
        runtime.request_rescan();
        if (smcr_runtime) smcr_runtime->request_rescan();
      }
    }
  }
  if (pod_setup) pod_setup->set_event_sink(nullptr);
  if (dra) dra->stop();
  if (smcr) smcr->stop();
  if (smcr_runtime) smcr_runtime->stop();
  runtime.stop();
  if (metrics_server) metrics_server->stop();
  work.reset();
  ioc.stop();
  if (metrics_thread.joinable()) metrics_thread.join();
  log::info("erdma-agent exiting").kv("status", rc);
  return rc;
}

}  // namespace erdma::agent
