// The public contract between the cluster, erdma-webhook and erdma-agent (docs/design.md, "The
// Kubernetes contract"). Both programs, the manifests' cross-check test (test/manifests) and the docs take these
// names from here; changing one breaks users and every node that runs the other program's
// previous release.
#pragma once

#include <string_view>

namespace erdma::contract {

// The extended resource the agent advertises and pods request.
inline constexpr std::string_view kResourceName = "aliyun/erdma";
// The resource the webhook gives SMC-R containers: the agent's Allocate answer for it mounts the
// preload library and nothing else (no RDMA device: SMC-R runs in the kernel), and its
// PreStartContainer sets up the pod's network namespace like kResourceName's.
inline constexpr std::string_view kSmcrResourceName = "aliyun/erdma-smcr";

// The DRA driver name (issue #26): ResourceSlices' spec.driver, the DeviceClass selector in
// manifests/dra, the CDI vendor of the agent's claim specs. A DNS subdomain of at most 63
// characters (resource.k8s.io/v1 DriverNameMaxLength).
inline constexpr std::string_view kDraDriverName = "erdma.aliyun.com";

// Pod annotation asking for SMC-R; only the exact value kSmcrEnabled enables it.
inline constexpr std::string_view kSmcrAnnotation = "network.alibabacloud.com/erdma-smcr";
inline constexpr std::string_view kSmcrEnabled = "true";
// Pod annotation opting one pod out: "false" leaves the pod alone.
inline constexpr std::string_view kInjectAnnotation = "network.alibabacloud.com/erdma-inject";
// Pod annotation the webhook writes: what it injected (the marker tokens below, comma-separated).
inline constexpr std::string_view kInjectedAnnotation = "network.alibabacloud.com/erdma-injected";
// Pod annotation the webhook writes when it has warnings: one warning per line, so a person sees
// them in `kubectl describe pod` even when a controller created the pod and got the admission
// warnings itself.
inline constexpr std::string_view kWarningsAnnotation = "network.alibabacloud.com/erdma-warnings";
// Pod annotation the webhook writes when it gives containers kResourceName for SMC-R: their names,
// comma-separated, so a later pass knows they hold it because of the webhook (no NCCL env there).
inline constexpr std::string_view kResourceAddedAnnotation = "network.alibabacloud.com/erdma-resource-added";
// Namespace label opting a namespace in ("enabled").
inline constexpr std::string_view kNamespaceLabel = "erdma-injection";

// The SMC-R preload library: the agent installs it as kPreloadHostDir/kPreloadLibrary on the node
// (default directory; both programs' configs can move it, and the manifests' test checks that they
// agree); pods load it from kPreloadMountPath/kPreloadLibrary. The file name is fixed: a name only
// one side knew would leave pods silently on TCP. By default the directory reaches a container as
// a read-only mount in the device plugin's Allocate answer (every container holding kResourceName);
// the webhook's smcr.libraryFrom: hostPath adds a hostPath volume instead.
inline constexpr std::string_view kPreloadLibrary = "libsmc-preload.so";
inline constexpr std::string_view kPreloadHostDir = "/var/lib/erdma-controller/lib";
inline constexpr std::string_view kPreloadMountPath = "/usr/lib/smc";
inline constexpr std::string_view kPreloadVolumeName = "erdma-smc-preload";
// Where the agent's image carries the library it installs (the agent's smcr.preloadSource).
inline constexpr std::string_view kPreloadImagePath = "/usr/lib/erdma-controller/libsmc-preload.so";
// The DRA driver's createRuntime hook for SMC-R claims (agent/core/cdi_hook.hpp): the agent
// installs it from the image into kCdiHookHostDir on the node, where runc runs it, and serves the
// hook's socket beside it. The DaemonSet mounts the directory at the same path.
inline constexpr std::string_view kCdiHookHostDir = "/var/lib/erdma-controller/dra";
inline constexpr std::string_view kCdiHookImagePath = "/usr/lib/erdma-controller/erdma-cdi-hook";

// Tokens of kInjectedAnnotation, in the order they are written.
inline constexpr std::string_view kTokenErdmaEnv = "erdma-env";
inline constexpr std::string_view kTokenDeviceMounts = "device-mounts";
inline constexpr std::string_view kTokenSmcrPreload = "smcr-preload";
inline constexpr std::string_view kTokenErdmaResource = "erdma-resource";
// Written after kTokenSmcrPreload when some containers of an SMC-R pod did not get the library
// (their LD_PRELOAD comes from valueFrom); the warnings annotation names them.
inline constexpr std::string_view kTokenSmcrPreloadPartial = "smcr-preload-partial";

}  // namespace erdma::contract
