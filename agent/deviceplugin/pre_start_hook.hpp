// The seam PreStartContainer calls into. Kubelet calls PreStartContainer (because the plugin
// registers with pre_start_required) before each container that was given eRDMA slots starts;
// the SMC-R work (find the pod, configure its network namespace) plugs in here.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/result.hpp"

namespace erdma::agent {

class PreStartHook {
 public:
  virtual ~PreStartHook() = default;
  // `device_ids`: the slot IDs kubelet passed; `devices`: their distinct device names, sorted.
  // Must return by `deadline` (kubelet gives up after 30 s; the plugin passes less). Runs on the
  // plugin's hook threads (up to kPreStartWorkers calls at once, so it must be thread-safe); a
  // failure fails the container start with the Status message, so return an error only when the
  // container must not run.
  [[nodiscard]] virtual Status pre_start(const std::vector<std::string>& device_ids,
                                         const std::vector<std::string>& devices,
                                         std::chrono::steady_clock::time_point deadline) = 0;
  // Called instead of pre_start() when the call cannot have its turn: its deadline passed while
  // it waited (earlier calls took the time), or the queue was full. `why` says which. The answer
  // goes to kubelet as for pre_start(); by default the container start fails. A hook whose work is
  // optional answers success.
  [[nodiscard]] virtual Status missed_turn(const std::vector<std::string>& device_ids, const std::string& why) {
    (void)device_ids;
    return make_error(ErrorCode::DeadlineExceeded, "PreStartContainer did not get its turn: " + why);
  }
};

// Logs the call and succeeds: the hook the daemon installs when `smcr.enabled: false` (no pod
// setup, so there is nothing to do before the container starts).
class LoggingPreStartHook final : public PreStartHook {
 public:
  [[nodiscard]] Status pre_start(const std::vector<std::string>& device_ids, const std::vector<std::string>& devices,
                                 std::chrono::steady_clock::time_point deadline) override;
};

}  // namespace erdma::agent
