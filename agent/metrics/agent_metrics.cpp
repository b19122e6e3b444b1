// Registration of the agent's Prometheus series (see agent_metrics.hpp).
#include "agent/metrics/agent_metrics.hpp"

#include "erdma/version.hpp"

namespace erdma::agent {

namespace {
constexpr const char* kDevices = "RDMA devices the agent advertises, by health";
constexpr const char* kAllocate = "Allocate calls from kubelet, by result";
constexpr const char* kRegistrations = "Register calls to kubelet, by result";
constexpr const char* kScans = "Device discovery scans, by result";
constexpr const char* kPreStart = "PreStartContainer calls, by result";
constexpr const char* kPodSetups = "SMC-R pod network namespace setups (PreStartContainer and resync), by result";
constexpr const char* kPredictions =
    "Predictions of whether SMC-R can form for an SMC-R pod (at PreStartContainer and resync), by verdict and reason";
constexpr const char* kSetupSteps =
    "Time of each step of a configured SMC-R pod setup: kubelet's PodResources, the CRI runtime, the pod's netns, "
    "and the SMC-R prediction (made after kubelet's answer)";
std::vector<double> step_buckets() { return common::metrics::exponential_buckets(0.0001, 2, 18); }  // 100 us .. 13 s
constexpr const char* kHostSetups = "SMC-R host setups (pnet entries and UEID), by result";
constexpr const char* kPreload = "Installations of libsmc-preload.so into the host directory, by result";
constexpr const char* kConnections =
    "SMC-R connections the kernel counted (handshake successes), by scope, side and SMC-R version";
constexpr const char* kSmcdConnections =
    "SMC-D connections the kernel counted (handshake successes), by scope, side and SMC-D version";
constexpr const char* kSmcdLoopback =
    "The kernel's SMC-D loopback device for pods of one node: on, off (smcr.smcdLoopback: false) or absent";
constexpr const char* kFallbacks = "SMC connections that fell back to TCP as the kernel counted them, by reason";
}  // namespace

AgentMetrics::AgentMetrics(common::metrics::Registry& r)
    : registry(r),
      devices_healthy(r.gauge("erdma_agent_devices", kDevices, {{"health", "healthy"}})),
      devices_unhealthy(r.gauge("erdma_agent_devices", kDevices, {{"health", "unhealthy"}})),
      slots_advertised(r.gauge("erdma_agent_slots_advertised", "Slots advertised to kubelet (all devices)")),
      slots_allocated(r.counter("erdma_agent_slots_allocated_total", "Slots handed to containers by Allocate")),
      allocate_ok(r.counter("erdma_agent_allocate_requests_total", kAllocate, {{"result", "ok"}})),
      allocate_error(r.counter("erdma_agent_allocate_requests_total", kAllocate, {{"result", "error"}})),
      allocate_seconds(r.histogram("erdma_agent_allocate_duration_seconds", "Time to answer Allocate",
                                   common::metrics::exponential_buckets(0.00001, 4, 8))),
      registrations_ok(r.counter("erdma_agent_registrations_total", kRegistrations, {{"result", "ok"}})),
      registrations_error(r.counter("erdma_agent_registrations_total", kRegistrations, {{"result", "error"}})),
      kubelet_restarts(r.counter("erdma_agent_kubelet_restarts_total",
                                 "Kubelet restarts seen (plugin socket deleted or kubelet.sock re-created)")),
      kubelet_registered(r.gauge("erdma_agent_kubelet_registered",
                                 "1 while the device plugin is registered with the kubelet it serves; 0 before the "
                                 "first registration and from a kubelet restart until the next one succeeds")),
      scans_ok(r.counter("erdma_agent_scans_total", kScans, {{"result", "ok"}})),
      scans_error(r.counter("erdma_agent_scans_total", kScans, {{"result", "error"}})),
      health_changes(r.counter("erdma_agent_health_changes_total", "Changes of the advertised device list or health")),
      watch_streams(r.gauge("erdma_agent_list_and_watch_streams", "Open ListAndWatch streams")),
      pre_start_ok(r.counter("erdma_agent_pre_start_total", kPreStart, {{"result", "ok"}})),
      pre_start_error(r.counter("erdma_agent_pre_start_total", kPreStart, {{"result", "error"}})),
      pod_setup_seconds(r.histogram("erdma_agent_smcr_pod_setup_duration_seconds",
                                    "Time from PreStartContainer to a configured pod network namespace",
                                    common::metrics::exponential_buckets(0.0005, 2, 16))),
      step_pod_resources_seconds(r.histogram("erdma_agent_smcr_pod_setup_step_duration_seconds", kSetupSteps,
                                             step_buckets(), {{"step", "pod_resources"}})),
      step_runtime_seconds(r.histogram("erdma_agent_smcr_pod_setup_step_duration_seconds", kSetupSteps, step_buckets(),
                                       {{"step", "runtime"}})),
      step_netns_seconds(r.histogram("erdma_agent_smcr_pod_setup_step_duration_seconds", kSetupSteps, step_buckets(),
                                     {{"step", "netns"}})),
      step_prediction_seconds(r.histogram("erdma_agent_smcr_pod_setup_step_duration_seconds", kSetupSteps,
                                          step_buckets(), {{"step", "prediction"}})),
      host_setups_ok(r.counter("erdma_agent_smcr_host_setups_total", kHostSetups, {{"result", "ok"}})),
      host_setups_error(r.counter("erdma_agent_smcr_host_setups_total", kHostSetups, {{"result", "error"}})),
      host_setup_ops(r.counter("erdma_agent_smcr_host_setup_ops_total",
                               "Changes the host setup made (pnet entries added or rebuilt, UEIDs added)")),
      preload_installed(r.counter("erdma_agent_preload_installs_total", kPreload, {{"result", "installed"}})),
      preload_unchanged(r.counter("erdma_agent_preload_installs_total", kPreload, {{"result", "unchanged"}})),
      preload_error(r.counter("erdma_agent_preload_installs_total", kPreload, {{"result", "error"}})),
      smcr_pods(
          r.gauge("erdma_agent_smcr_pods", "SMC-R pod network namespaces configured by the agent and still there")),
      smcr_predictions_pending(r.gauge("erdma_agent_smcr_pod_predictions_pending",
                                       "SMC-R predictions queued after PreStartContainer answered, not yet logged")) {
  for (auto result : kAllPodSetupResults) {
    pod_setups[static_cast<size_t>(result)] =
        &r.counter("erdma_agent_smcr_pod_setups_total", kPodSetups, {{"result", std::string(to_string(result))}});
  }
  for (auto reason : kAllSmcrReasons) {
    pod_predictions[static_cast<size_t>(reason)] = &r.counter(
        "erdma_agent_smcr_pod_prediction_total", kPredictions,
        {{"verdict", std::string(to_string(verdict_of(reason)))}, {"reason", std::string(to_string(reason))}});
  }
  for (const char* scope : {"host", "pods"}) {
    for (const char* side : {"client", "server"}) {
      for (const char* version : {"v1", "v2"}) {
        (void)smcr_connections(scope, side, version);
        (void)smcd_connections(scope, side, version);
      }
    }
  }
  // Which release each node runs, as erdma_webhook_build_info says for each webhook replica.
  r.gauge("erdma_agent_build_info", "Build information; the value is always 1.", {{"version", erdma::kVersion}}).set(1);
}

common::metrics::Gauge& AgentMetrics::smcr_connections(const std::string& scope, const std::string& side,
                                                       const std::string& version) {
  return registry.gauge("erdma_agent_smcr_connections", kConnections,
                        {{"scope", scope}, {"side", side}, {"version", version}});
}

common::metrics::Gauge& AgentMetrics::smcd_connections(const std::string& scope, const std::string& side,
                                                       const std::string& version) {
  return registry.gauge("erdma_agent_smcd_connections", kSmcdConnections,
                        {{"scope", scope}, {"side", side}, {"version", version}});
}

void AgentMetrics::set_smcd_loopback(std::string_view state) {
  for (const char* s : {"on", "off", "absent"}) {
    registry.gauge("erdma_agent_smcd_loopback", kSmcdLoopback, {{"state", s}}).set(state == s ? 1 : 0);
  }
}

common::metrics::Gauge& AgentMetrics::smc_fallbacks(const std::string& scope, const std::string& side,
                                                    const std::string& reason) {
  std::lock_guard lock(fallback_mu_);
  auto key = std::make_tuple(scope, side, reason);
  auto it = fallbacks_.find(key);
  if (it != fallbacks_.end()) return *it->second;
  auto& g =
      registry.gauge("erdma_agent_smc_fallbacks", kFallbacks, {{"scope", scope}, {"side", side}, {"reason", reason}});
  fallbacks_.emplace(key, &g);
  return g;
}

std::map<std::tuple<std::string, std::string, std::string>, common::metrics::Gauge*> AgentMetrics::fallback_series() {
  std::lock_guard lock(fallback_mu_);
  return fallbacks_;
}

}  // namespace erdma::agent
