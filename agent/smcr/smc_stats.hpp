// The kernel's SMC statistics as metrics. SMC_GEN_NETLINK counts per network namespace, so the
// collector reads the host's namespace and every SMC-R pod namespace the agent configured, and
// publishes two sums (scope "host" and scope "pods"): SMC-R connections by side and version, and
// fallbacks to TCP by side and reason.
#pragma once

#include <string>
#include <vector>

#include "agent/core/smc_model.hpp"
#include "agent/metrics/agent_metrics.hpp"
#include "agent/smcr/smcr_pod_setup.hpp"
#include "agent/sys/netlink_smc.hpp"
#include "agent/sys/netns.hpp"

namespace erdma::agent {

// One namespace's reading.
struct SmcCounters {
  SmcStats stats;
  FallbackStats fallbacks;
};

// Adds `b` into `a` (connection counters and fallback reasons, merged by side and code).
void accumulate(SmcCounters& a, const SmcCounters& b);

class SmcStatsCollector {
 public:
  // `netns` and `metrics` must outlive the collector.
  SmcStatsCollector(AgentMetrics& metrics, Netns& netns, SmcInfoOpener open_info);

  struct Reading {
    bool host_ok = false;
    size_t pods_read = 0;
    std::vector<std::string> gone;    // sandbox IDs whose namespace no longer exists
    std::vector<std::string> errors;  // other failures, one line each
  };
  // Reads the host namespace (the calling thread's) and each pod's, each bounded by `deadline`,
  // and sets the gauges. A scope that could not be read at all keeps its previous values.
  Reading collect(const std::vector<TrackedPod>& pods, std::chrono::steady_clock::time_point deadline);

 private:
  void publish(const std::string& scope, const SmcCounters& c);

  AgentMetrics& metrics_;
  Netns& netns_;
  SmcInfoOpener open_info_;
};

}  // namespace erdma::agent
