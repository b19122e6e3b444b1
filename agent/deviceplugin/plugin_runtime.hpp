// The device plugin's control loop: keeps the device view fresh (periodic and on-demand scans),
// serves the plugin socket, registers with kubelet and does it all again when kubelet restarts.
//
// Kubelet deletes every socket in the device-plugin directory when it starts, then creates
// kubelet.sock. The loop watches the directory with inotify (and checks its own socket's inode
// every second as a backstop): when its socket is gone it serves a new one at once, and it
// registers as soon as kubelet.sock is back. Device state is kept across all of this. The loop
// itself is the kubelet socket keeper (agent/kubelet/socket_keeper.hpp), shared with the DRA driver.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/core/config.hpp"
#include "agent/deviceplugin/device_plugin_service.hpp"
#include "agent/deviceplugin/kubelet_registration.hpp"
#include "agent/deviceplugin/pre_start_hook.hpp"
#include "agent/devices/device_state.hpp"
#include "agent/kubelet/plugin_server.hpp"
#include "agent/kubelet/socket_keeper.hpp"
#include "agent/metrics/agent_metrics.hpp"
#include "agent/sys/rdma_devices.hpp"
#include "common/repeat_filter.hpp"

namespace erdma::agent {

struct RuntimeTiming {
  std::chrono::milliseconds register_timeout{5000};  // per Register attempt
  std::chrono::milliseconds register_backoff_min{100};
  std::chrono::milliseconds register_backoff_max{5000};
  std::chrono::milliseconds socket_check{1000};   // own-socket inode check
  std::chrono::milliseconds shutdown_grace{500};  // open calls get this long on stop/restart
};

class PluginRuntime {
 public:
  // Serves `endpoint` (its resource on its socket). All references must outlive the runtime.
  // `metrics` may be null.
  PluginRuntime(const AgentConfig& cfg, PluginEndpoint endpoint, RdmaDevices& devices, PreStartHook& hook,
                AgentMetrics* metrics, RuntimeTiming timing = {});
  // The eRDMA devices (erdma_endpoint(cfg)).
  PluginRuntime(const AgentConfig& cfg, RdmaDevices& devices, PreStartHook& hook, AgentMetrics* metrics,
                RuntimeTiming timing = {});
  ~PluginRuntime();
  PluginRuntime(const PluginRuntime&) = delete;
  PluginRuntime& operator=(const PluginRuntime&) = delete;

  // Scans once, then starts the loop thread, which serves the socket and registers. A missing
  // kubelet or directory is not an error: the loop keeps trying. Errors: Internal when the
  // loop's own resources (eventfd) cannot be created.
  [[nodiscard]] Status start();
  // Stops the loop, stops serving and removes the socket. Bounded; idempotent.
  void stop();
  // Asks for a scan now (thread-safe; e.g. on SIGHUP).
  void request_rescan();

  [[nodiscard]] DeviceState& state() noexcept { return state_; }
  [[nodiscard]] const PluginEndpoint& endpoint() const noexcept { return endpoint_; }
  // Registered with the kubelet, or not meant to be (PluginEndpoint::advertise false).
  [[nodiscard]] bool registered() const noexcept { return !endpoint_.advertise || registered_.load(); }
  // Observability of the loop, for tests that check that something does NOT happen: passes of
  // the loop completed (each handles the wake-ups and inotify events that were queued before it
  // polled), and whether a serve or registration is still pending after the last pass.
  [[nodiscard]] uint64_t loop_passes() const noexcept { return keeper_.passes(); }
  [[nodiscard]] bool work_pending() const noexcept { return work_pending_.load(); }
  // Time from noticing a kubelet restart to the next successful registration, last restart.
  [[nodiscard]] std::optional<std::chrono::milliseconds> last_reregistration_time() const;

 private:
  // The keeper's two halves: serve and register what is pending (returns when to come back for
  // the next registration or scan), then react to what the directory watch and the clock say.
  kubelet::SocketKeeper::Clock::time_point act();
  void handle(const kubelet::SocketKeeper::Pass& pass);
  void scan();
  void serve();
  void try_register();
  void handle_events(const std::vector<kubelet::SocketKeeper::Event>& events);
  void kubelet_restart_seen(const char* why);

  [[nodiscard]] std::string socket_path() const;

  const AgentConfig& cfg_;
  const PluginEndpoint endpoint_;
  RdmaDevices& devices_;
  AgentMetrics* metrics_;
  RuntimeTiming timing_;
  DeviceState state_;
  HookRunner hooks_;
  DevicePluginService service_;
  PluginServer server_;

  kubelet::SocketKeeper keeper_;  // the loop thread: watches the device plugin directory
  std::atomic<bool> stopping_{false};
  std::atomic<bool> rescan_requested_{false};
  std::atomic<bool> registered_{false};
  std::atomic<bool> work_pending_{true};

  // Loop-thread state.
  std::chrono::steady_clock::time_point next_scan_{};
  bool need_serve_ = true;
  bool need_register_ = true;
  std::chrono::steady_clock::time_point next_register_{};
  std::chrono::milliseconds backoff_{0};
  std::optional<std::chrono::steady_clock::time_point> restart_seen_at_;
  // The kubelet.sock file the last successful registration reached: a creation event for the
  // socket we already registered with is not a new kubelet.
  SocketFileId registered_kubelet_;
  std::vector<std::string> last_notes_;
  common::RepeatFilter serve_errors_, register_errors_, scan_errors_;

  mutable std::mutex timing_mu_;
  std::optional<std::chrono::milliseconds> last_reregistration_;
};

}  // namespace erdma::agent
