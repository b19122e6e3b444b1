// Pod Events (see events.hpp).
#include "agent/kube/events.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

#include "agent/kube/api_paths.hpp"

namespace erdma::agent::kube {

namespace {
constexpr size_t kMaxNameLen = 253;
constexpr size_t kMaxReasonLen = 128;  // apiserver validation of Event.reason
}  // namespace

std::string_view to_string(EventType type) noexcept { return type == EventType::Warning ? "Warning" : "Normal"; }

std::string truncate_message(std::string_view message, size_t max_bytes) {
  if (message.size() <= max_bytes) return std::string(message);
  constexpr std::string_view kEllipsis = "...";
  size_t cut = max_bytes > kEllipsis.size() ? max_bytes - kEllipsis.size() : 0;
  // Back off continuation bytes (10xxxxxx) so the cut falls before a whole UTF-8 sequence.
  while (cut > 0 && (static_cast<unsigned char>(message[cut]) & 0xC0) == 0x80) --cut;
  return std::string(message.substr(0, cut)) + std::string(kEllipsis.substr(0, max_bytes - cut));
}

nlohmann::json build_pod_event(const PodRef& pod, EventType type, std::string_view reason, std::string_view message,
                               std::string_view node, std::string_view timestamp, std::string_view name_suffix) {
  std::string pod_part = pod.name;
  const size_t room = kMaxNameLen - std::min(kMaxNameLen - 1, name_suffix.size() + 1);
  if (pod_part.size() > room) pod_part.resize(room);
  while (!pod_part.empty() && (pod_part.back() == '.' || pod_part.back() == '-')) pod_part.pop_back();
  nlohmann::json event = {
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", pod_part + "." + std::string(name_suffix)}, {"namespace", pod.pod_namespace}}},
      {"involvedObject",
       {{"apiVersion", "v1"}, {"kind", "Pod"}, {"namespace", pod.pod_namespace}, {"name", pod.name}, {"uid", pod.uid}}},
      {"reason", std::string(reason.substr(0, kMaxReasonLen))},
      {"message", truncate_message(message)},
      {"type", std::string(to_string(type))},
      {"source", {{"component", std::string(kEventComponent)}, {"host", std::string(node)}}},
      {"firstTimestamp", std::string(timestamp)},
      {"lastTimestamp", std::string(timestamp)},
      {"count", 1},
      {"reportingComponent", std::string(kEventComponent)},
      {"reportingInstance", std::string(node)},
  };
  return event;
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

EventPoster::EventPoster(Api& api, std::string node_name, std::chrono::seconds window, NowFn now)
    : api_(api), node_(std::move(node_name)), window_(window), now_(std::move(now)) {}

Result<bool> EventPoster::post(const PodRef& pod, EventType type, std::string_view reason, std::string_view message) {
  const auto now = now_();
  Key key{pod.uid, std::string(reason), truncate_message(message)};
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = posted_.begin(); it != posted_.end();) {
      it = now - it->second >= window_ ? posted_.erase(it) : std::next(it);
    }
    if (posted_.count(key) != 0) return false;
    if (posted_.size() >= kMaxRemembered) {
      // Forget the oldest: at worst that one is posted again early.
      auto oldest = std::min_element(posted_.begin(), posted_.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
      posted_.erase(oldest);
    }
    posted_[key] = now;  // claimed before the call, so two threads do not both post it
  }
  // The time in nanoseconds names the Event, plus a sequence number: two posts in the same
  // clock tick (a coarse clock, a test's fixed one) still get two names.
  const auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count();
  char suffix[32];
  std::snprintf(suffix, sizeof suffix, "%llx", static_cast<unsigned long long>(nanos) + sequence_.fetch_add(1));
  const auto event = build_pod_event(pod, type, reason, message, node_, rfc3339(now), suffix);
  const std::string path = events_path(pod.pod_namespace);
  auto created = api_.create(path, event);
  if (!created) {
    std::lock_guard<std::mutex> lock(mu_);
    posted_.erase(key);  // not posted: the next call tries again
    return std::move(created).error();
  }
  return true;
}

}  // namespace erdma::agent::kube
