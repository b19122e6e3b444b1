// Names only the webhook uses; the names it shares with the agent and the cluster are in
// common/contract.hpp and are brought into this namespace here.
#pragma once

#include <string_view>

#include "common/contract.hpp"

namespace erdma::webhook {

using contract::kInjectAnnotation;
using contract::kInjectedAnnotation;
using contract::kNamespaceLabel;
using contract::kPreloadVolumeName;
using contract::kSmcrAnnotation;
using contract::kTokenDeviceMounts;
using contract::kTokenErdmaEnv;
using contract::kTokenErdmaResource;
using contract::kTokenSmcrPreload;

// Pod annotation the webhook writes when it has warnings: one warning per line, so a person sees
// them in `kubectl describe pod` even when a controller created the pod and got the admission
// warnings itself. Merged on reinvocation; bounded (see mutate.hpp).
inline constexpr std::string_view kWarningsAnnotation = "network.alibabacloud.com/erdma-warnings";
// Marker token written after kTokenSmcrPreload when some containers of an SMC-R pod did not get
// the preload library (their LD_PRELOAD comes from valueFrom); the warnings annotation names them.
// Webhook-only for now; it belongs beside the other tokens in common/contract.hpp.
inline constexpr std::string_view kTokenSmcrPreloadPartial = "smcr-preload-partial";

inline constexpr std::string_view kMirrorAnnotation = "kubernetes.io/config.mirror";
inline constexpr std::string_view kLdPreload = "LD_PRELOAD";

}  // namespace erdma::webhook
