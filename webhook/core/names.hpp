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
using contract::kResourceAddedAnnotation;
using contract::kSmcrAnnotation;
using contract::kTokenDeviceMounts;
using contract::kTokenErdmaEnv;
using contract::kTokenErdmaResource;
using contract::kTokenSmcrPreload;

using contract::kTokenSmcrPreloadPartial;
using contract::kWarningsAnnotation;

inline constexpr std::string_view kMirrorAnnotation = "kubernetes.io/config.mirror";
inline constexpr std::string_view kLdPreload = "LD_PRELOAD";

}  // namespace erdma::webhook
