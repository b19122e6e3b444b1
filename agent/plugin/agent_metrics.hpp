// The agent's Prometheus series, registered once at start-up (names are part of the public
// interface: dashboards and alerts use them).
#pragma once

#include "common/metrics.hpp"

namespace erdma::agent {

struct AgentMetrics {
  explicit AgentMetrics(common::metrics::Registry& registry);

  common::metrics::Gauge& devices_healthy;      // erdma_agent_devices{health="healthy"}
  common::metrics::Gauge& devices_unhealthy;    // erdma_agent_devices{health="unhealthy"}
  common::metrics::Gauge& slots_advertised;     // erdma_agent_slots_advertised
  common::metrics::Counter& slots_allocated;    // erdma_agent_slots_allocated_total
  common::metrics::Counter& allocate_ok;        // erdma_agent_allocate_requests_total{result="ok"}
  common::metrics::Counter& allocate_error;     // ... {result="error"}
  common::metrics::Histogram& allocate_seconds; // erdma_agent_allocate_duration_seconds
  common::metrics::Counter& registrations_ok;   // erdma_agent_registrations_total{result="ok"}
  common::metrics::Counter& registrations_error;
  common::metrics::Counter& kubelet_restarts;   // erdma_agent_kubelet_restarts_total
  common::metrics::Counter& scans_ok;           // erdma_agent_scans_total{result="ok"}
  common::metrics::Counter& scans_error;
  common::metrics::Counter& health_changes;     // erdma_agent_health_changes_total
  common::metrics::Gauge& watch_streams;        // erdma_agent_list_and_watch_streams
  common::metrics::Counter& pre_start_ok;       // erdma_agent_pre_start_total{result="ok"}
  common::metrics::Counter& pre_start_error;
};

}  // namespace erdma::agent
