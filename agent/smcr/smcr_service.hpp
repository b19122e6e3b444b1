// The SMC-R side of a running agent, on one background thread: host setup at start, whenever the
// device list changes and periodically (which also repairs a table someone flushed or a module
// reload emptied); a resync of every ready SMC-R sandbox at start (retried until the runtime
// answers once); kernel statistics for the metrics. PreStartContainer does not wait for any of
// it: pod setup runs on the device plugin's hook worker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "agent/core/config.hpp"
#include "agent/devices/device_state.hpp"
#include "agent/metrics/agent_metrics.hpp"
#include "agent/smcr/smc_stats.hpp"
#include "agent/smcr/smcr_host_setup.hpp"
#include "agent/smcr/smcr_pod_setup.hpp"
#include "common/contract.hpp"
#include "common/repeat_filter.hpp"

namespace erdma::agent {

struct SmcrServiceTiming {
  std::chrono::milliseconds host_period{60000};    // re-check the host tables
  std::chrono::milliseconds host_retry{10000};     // after a failed host setup
  std::chrono::milliseconds resync_retry{30000};   // until the runtime could be listed once
  std::chrono::milliseconds resync_budget{60000};  // one resync pass
};

class SmcrService {
 public:
  // All references must outlive the service; `pods` and `stats` may be null (not running them).
  SmcrService(const AgentConfig& cfg, DeviceState& state, SmcrHostSetup& host, SmcrPodSetup* pods,
              SmcStatsCollector* stats, AgentMetrics* metrics, SmcrServiceTiming timing = {});
  ~SmcrService();
  SmcrService(const SmcrService&) = delete;
  SmcrService& operator=(const SmcrService&) = delete;

  void start();  // starts the thread; its first pass runs at once
  void stop();   // bounded by the longest single step; idempotent

  // Completed host setups (successful ones) and resyncs, for tests and readiness.
  [[nodiscard]] uint64_t host_setups_ok() const;
  [[nodiscard]] bool resynced() const;

 private:
  void loop();
  void host_setup();

  const AgentConfig& cfg_;
  DeviceState& state_;
  SmcrHostSetup& host_;
  SmcrPodSetup* pods_;
  SmcStatsCollector* stats_;
  AgentMetrics* metrics_;
  SmcrServiceTiming timing_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool devices_changed_ = false;
  uint64_t host_ok_ = 0;
  bool resynced_ = false;
  uint64_t watcher_ = 0;
  std::thread thread_;
  common::RepeatFilter host_errors_;
  std::string last_host_conflicts_;
};

// Installs cfg.preload_source as <preload_host_dir>/libsmc-preload.so (atomically; unchanged
// files are left alone). Logs and counts the outcome; the error is returned for the caller to
// decide (the agent keeps running: pods without the library simply use TCP).
[[nodiscard]] Status install_preload(const SmcrConfig& cfg, AgentMetrics* metrics);

// The file name pods find in the host directory: fixed by the contract, so webhook and agent
// cannot disagree (common/contract.hpp).
inline constexpr std::string_view kPreloadFileName = contract::kPreloadLibrary;

}  // namespace erdma::agent
