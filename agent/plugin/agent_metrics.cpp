// Registration of the agent's Prometheus series (see agent_metrics.hpp).
#include "agent/plugin/agent_metrics.hpp"

namespace erdma::agent {

namespace {
constexpr const char* kDevices = "RDMA devices the agent advertises, by health";
constexpr const char* kAllocate = "Allocate calls from kubelet, by result";
constexpr const char* kRegistrations = "Register calls to kubelet, by result";
constexpr const char* kScans = "Device discovery scans, by result";
constexpr const char* kPreStart = "PreStartContainer calls, by result";
}  // namespace

AgentMetrics::AgentMetrics(common::metrics::Registry& r)
    : devices_healthy(r.gauge("erdma_agent_devices", kDevices, {{"health", "healthy"}})),
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
      scans_ok(r.counter("erdma_agent_scans_total", kScans, {{"result", "ok"}})),
      scans_error(r.counter("erdma_agent_scans_total", kScans, {{"result", "error"}})),
      health_changes(r.counter("erdma_agent_health_changes_total", "Changes of the advertised device list or health")),
      watch_streams(r.gauge("erdma_agent_list_and_watch_streams", "Open ListAndWatch streams")),
      pre_start_ok(r.counter("erdma_agent_pre_start_total", kPreStart, {{"result", "ok"}})),
      pre_start_error(r.counter("erdma_agent_pre_start_total", kPreStart, {{"result", "error"}})) {}

}  // namespace erdma::agent
