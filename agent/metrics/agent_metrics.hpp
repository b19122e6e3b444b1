// The agent's Prometheus series, registered once at start-up (names are part of the public
// interface: dashboards and alerts use them).
#pragma once

#include <array>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>

#include "agent/core/pod_setup.hpp"
#include "agent/core/smcr_feasibility.hpp"
#include "common/metrics.hpp"

namespace erdma::agent {

struct AgentMetrics {
  // Registers every series below, and erdma_agent_build_info{version=erdma::kVersion} 1.
  explicit AgentMetrics(common::metrics::Registry& registry);

  common::metrics::Registry& registry;

  common::metrics::Gauge& devices_healthy;       // erdma_agent_devices{health="healthy"}
  common::metrics::Gauge& devices_unhealthy;     // erdma_agent_devices{health="unhealthy"}
  common::metrics::Gauge& slots_advertised;      // erdma_agent_slots_advertised
  common::metrics::Counter& slots_allocated;     // erdma_agent_slots_allocated_total
  common::metrics::Counter& allocate_ok;         // erdma_agent_allocate_requests_total{result="ok"}
  common::metrics::Counter& allocate_error;      // ... {result="error"}
  common::metrics::Histogram& allocate_seconds;  // erdma_agent_allocate_duration_seconds
  common::metrics::Counter& registrations_ok;    // erdma_agent_registrations_total{result="ok"}
  common::metrics::Counter& registrations_error;
  common::metrics::Counter& kubelet_restarts;  // erdma_agent_kubelet_restarts_total
  common::metrics::Gauge& kubelet_registered;  // erdma_agent_kubelet_registered (1 registered, 0 not)
  common::metrics::Counter& scans_ok;          // erdma_agent_scans_total{result="ok"}
  common::metrics::Counter& scans_error;
  common::metrics::Counter& health_changes;  // erdma_agent_health_changes_total
  common::metrics::Gauge& watch_streams;     // erdma_agent_list_and_watch_streams
  common::metrics::Counter& pre_start_ok;    // erdma_agent_pre_start_total{result="ok"}
  common::metrics::Counter& pre_start_error;

  // SMC-R.
  // erdma_agent_smcr_pod_setups_total{result}, indexed by PodSetupResult.
  std::array<common::metrics::Counter*, std::size(kAllPodSetupResults)> pod_setups{};
  common::metrics::Histogram& pod_setup_seconds;  // erdma_agent_smcr_pod_setup_duration_seconds (configured only)
  // erdma_agent_smcr_pod_setup_step_duration_seconds{step}: where a configured setup's time went.
  common::metrics::Histogram& step_pod_resources_seconds;  // {step="pod_resources"}
  common::metrics::Histogram& step_runtime_seconds;        // {step="runtime"}
  common::metrics::Histogram& step_netns_seconds;          // {step="netns"}
  common::metrics::Histogram& step_prediction_seconds;     // {step="prediction"}
  common::metrics::Counter& host_setups_ok;                // erdma_agent_smcr_host_setups_total{result="ok"}
  common::metrics::Counter& host_setups_error;             // ... {result="error"} (incl. conflicts)
  common::metrics::Counter& host_setup_ops;                // erdma_agent_smcr_host_setup_ops_total
  common::metrics::Counter& preload_installed;             // erdma_agent_preload_installs_total{result="installed"}
  common::metrics::Counter& preload_unchanged;             // ... {result="unchanged"}
  common::metrics::Counter& preload_error;                 // ... {result="error"}
  common::metrics::Gauge& smcr_pods;                       // erdma_agent_smcr_pods (configured pod netns alive)
  common::metrics::Gauge& smcr_predictions_pending;        // erdma_agent_smcr_pod_predictions_pending
  // erdma_agent_smcr_pod_prediction_total{verdict, reason}, indexed by SmcrReason (each reason
  // has one verdict).
  std::array<common::metrics::Counter*, std::size(kAllSmcrReasons)> pod_predictions{};

  [[nodiscard]] common::metrics::Counter& pod_setup(PodSetupResult r) { return *pod_setups[static_cast<size_t>(r)]; }
  [[nodiscard]] common::metrics::Counter& pod_prediction(SmcrReason r) {
    return *pod_predictions[static_cast<size_t>(r)];
  }

  // The kernel's SMC-R counters (SMC_GEN_NETLINK, per network namespace), summed over a scope:
  // "host" (the node's netns) or "pods" (every SMC-R pod netns the agent configured and that still
  // exists). Gauges, because pods come and go and take their counters with them.
  // erdma_agent_smcr_connections{scope, side="client"|"server", version="v1"|"v2"}
  [[nodiscard]] common::metrics::Gauge& smcr_connections(const std::string& scope, const std::string& side,
                                                         const std::string& version);
  // The same for SMC-D (the kernel's loopback device between pods of one node):
  // erdma_agent_smcd_connections{scope, side, version}
  [[nodiscard]] common::metrics::Gauge& smcd_connections(const std::string& scope, const std::string& side,
                                                         const std::string& version);
  // erdma_agent_smcd_loopback{state="on"|"off"|"absent"}: 1 for the state the last host setup
  // found or made (smcr.smcdLoopback), 0 for the others.
  void set_smcd_loopback(std::string_view state);
  // erdma_agent_smc_fallbacks{scope, side, reason="NOSMCRDEV"|...}
  [[nodiscard]] common::metrics::Gauge& smc_fallbacks(const std::string& scope, const std::string& side,
                                                      const std::string& reason);
  // Every fallback series created so far (to reset the ones a new reading no longer has).
  [[nodiscard]] std::map<std::tuple<std::string, std::string, std::string>, common::metrics::Gauge*> fallback_series();

 private:
  std::mutex fallback_mu_;
  std::map<std::tuple<std::string, std::string, std::string>, common::metrics::Gauge*> fallbacks_;
};

}  // namespace erdma::agent
