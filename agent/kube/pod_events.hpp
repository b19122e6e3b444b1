// Where the agent reports what a pod's user must act on, as Kubernetes Events on the pod (seen in
// `kubectl describe pod`). The daemon gives an implementation that posts through the API client
// when the agent has API access (manifests/dra); without one, the log line and the metric are
// the report.
#pragma once

#include <string>
#include <string_view>

namespace erdma::agent {

class PodEventSink {
 public:
  virtual ~PodEventSink() = default;
  // A Warning about `pod` ("namespace/name") whose metadata.uid is `uid` (the runtime's sandbox
  // metadata carries it; kubectl describe pod shows only Events naming it; empty when unknown):
  // `reason` is one CamelCase word, `message` what was found and what to change. Must not block:
  // it is called on the pod start's path. Repeats of the same pod, reason and message are the
  // sink's to fold.
  virtual void warning(const std::string& pod, std::string_view uid, std::string_view reason,
                       const std::string& message) = 0;
};

// The Events the SMC-R pod setup posts: reason words, stable (users filter on them).
inline constexpr std::string_view kEventSmcrWillFallBack = "SmcrWillFallBack";
inline constexpr std::string_view kEventSmcrWillBreak = "SmcrWillBreak";
inline constexpr std::string_view kEventSmcrSetupFailed = "SmcrSetupFailed";
// The DRA driver's: a claim of the pod prepared on the node (Normal), naming the model and cards.
inline constexpr std::string_view kEventClaimPrepared = "ErdmaClaimPrepared";
// The DRA driver's: a card a claim of the pod holds went down or left the node (Warning).
inline constexpr std::string_view kEventCardUnavailable = "ErdmaCardUnavailable";

}  // namespace erdma::agent
