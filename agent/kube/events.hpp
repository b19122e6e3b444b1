// Kubernetes Events about pods (core/v1, what `kubectl describe pod` shows under Events): the
// object built by a pure function, posted through the Api by EventPoster, the same news once
// per window.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>

#include <nlohmann/json.hpp>

#include "agent/kube/api.hpp"
#include "common/result.hpp"

namespace erdma::agent::kube {

inline constexpr size_t kMaxEventMessageBytes = 1024;
inline constexpr std::string_view kEventComponent = "erdma-agent";

struct PodRef {
  std::string pod_namespace;
  std::string name;
  std::string uid;
};

enum class EventType { Normal, Warning };
[[nodiscard]] std::string_view to_string(EventType type) noexcept;

// `message` cut to at most `max_bytes` bytes, never inside a UTF-8 sequence, with "..." at the
// end when cut.
[[nodiscard]] std::string truncate_message(std::string_view message, size_t max_bytes = kMaxEventMessageBytes);

// The core/v1 Event: metadata {name "<pod>.<suffix>", namespace}, involvedObject {apiVersion v1,
// kind Pod, namespace, name, uid}, reason, message (truncate_message), type,
// source {component erdma-agent, host <node>}, firstTimestamp = lastTimestamp = `timestamp`
// (RFC 3339, seconds), count 1, reportingComponent and reportingInstance. `name_suffix` makes
// the name unique (the poster uses the time in hex nanoseconds, as kubectl's own clients do); the
// pod name part is shortened so the whole stays within 253 characters. Pure.
[[nodiscard]] nlohmann::json build_pod_event(const PodRef& pod, EventType type, std::string_view reason,
                                             std::string_view message, std::string_view node,
                                             std::string_view timestamp, std::string_view name_suffix);

// "2026-12-06T10:00:00Z" for a time (UTC, whole seconds).
[[nodiscard]] std::string rfc3339(std::chrono::system_clock::time_point t);

// Posts Events to /api/v1/namespaces/<ns>/events. The same (pod uid, reason, message) within
// `window` of its last successful post is not posted again (post returns false then): a pod whose
// setup fails at every retry gets one Event per window, not one per retry. A failed post is not
// remembered, so the next call tries again. Thread-safe; `api` must outlive the poster.
class EventPoster {
 public:
  using NowFn = std::function<std::chrono::system_clock::time_point()>;

  EventPoster(
      Api& api, std::string node_name, std::chrono::seconds window = std::chrono::minutes(10),
      NowFn now = [] { return std::chrono::system_clock::now(); });

  // True when posted, false when suppressed as a repeat. Errors: the Api's (PermissionDenied
  // when RBAC lacks events create, Unavailable, ...), the path named.
  [[nodiscard]] Result<bool> post(const PodRef& pod, EventType type, std::string_view reason, std::string_view message);

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // uid, reason, message
  static constexpr size_t kMaxRemembered = 4096;

  Api& api_;
  const std::string node_;
  const std::chrono::seconds window_;
  const NowFn now_;
  std::atomic<uint64_t> sequence_{0};
  std::mutex mu_;
  std::map<Key, std::chrono::system_clock::time_point> posted_;  // when each was last posted
};

}  // namespace erdma::agent::kube
