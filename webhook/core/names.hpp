// Public names of the Kubernetes contract (DESIGN.md). Changing any of these breaks users.
#pragma once

#include <string_view>

namespace erdma::webhook {

inline constexpr std::string_view kDefaultResourceName = "aliyun/erdma";
inline constexpr std::string_view kSmcrAnnotation = "network.alibabacloud.com/erdma-smcr";
inline constexpr std::string_view kInjectAnnotation = "network.alibabacloud.com/erdma-inject";
inline constexpr std::string_view kInjectedAnnotation = "network.alibabacloud.com/erdma-injected";
inline constexpr std::string_view kMirrorAnnotation = "kubernetes.io/config.mirror";
inline constexpr std::string_view kNamespaceLabel = "erdma-injection";
inline constexpr std::string_view kPreloadVolumeName = "erdma-smc-preload";
inline constexpr std::string_view kLdPreload = "LD_PRELOAD";

// Tokens of the marker annotation, in the order they are written.
inline constexpr std::string_view kTokenErdmaEnv = "erdma-env";
inline constexpr std::string_view kTokenDeviceMounts = "device-mounts";
inline constexpr std::string_view kTokenSmcrPreload = "smcr-preload";
inline constexpr std::string_view kTokenErdmaResource = "erdma-resource";

}  // namespace erdma::webhook
