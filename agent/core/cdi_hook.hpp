// How a pod on the pod network gets SMC-R through a ResourceClaim: the CDI createRuntime hook
// (docs/dra.md, "Pods on the pod network"). Pure: the hook entry of a claim's CDI spec, the
// request the hook sends, the checks on it, the answer line.
//
// Why a hook: the kubelet prepares a pod's claims (NodePrepareResources) before the pod's sandbox
// exists, so there is no network namespace to set up then. The SMC-R claim's CDI spec names a
// createRuntime hook instead; the runtime (runc, crun) runs it on the host for each container that
// references the claim, after the container's namespaces exist and before the application runs.
// The hook (agent/cdihook, a static C program the agent installs into its hook directory on the
// host) sends the claim's UID and the container's OCI state to the agent's socket beside it and
// waits for the answer. The agent trusts nothing in the request but the two ids: it finds the claim
// in its own checkpoint, asks the runtime over the CRI for the sandbox the state's annotation
// names, and sets up that sandbox's netns as PreStartContainer does for the device plugin (pnet
// entry, net.smc.* sysctls, the prediction, the Events). An NRI plugin could do the same from the
// sandbox's creation, but needs NRI enabled in the runtime, which containerd 1.7 leaves off; a CDI
// hook needs nothing the DRA driver does not need already (CDI).
//
// The wire format is agent/core/cdi_hook_protocol.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "agent/core/cdi_hook_protocol.h"
#include "agent/core/dra_checkpoint.hpp"
#include "common/result.hpp"

namespace erdma::agent {

inline constexpr std::string_view kCdiHookBinary = ERDMA_CDI_HOOK_BINARY;
inline constexpr std::string_view kCdiHookSocket = ERDMA_CDI_HOOK_SOCKET;
inline constexpr size_t kMaxHookRequestBytes = ERDMA_CDI_HOOK_MAX_REQUEST;
inline constexpr size_t kMaxHookAnswerBytes = ERDMA_CDI_HOOK_MAX_ANSWER;
// The annotations that carry the pod sandbox's id in a container's OCI spec, hence in the state the
// runtime gives hooks: containerd's CRI, then CRI-O's.
inline constexpr std::string_view kContainerdSandboxIdAnnotation = "io.kubernetes.cri.sandbox-id";
inline constexpr std::string_view kCrioSandboxIdAnnotation = "io.kubernetes.cri-o.SandboxID";

// Where the agent puts the hook and its socket (dra.hookDir, the same path on the host and in the
// agent's container).
struct CdiHookPaths {
  std::string binary;  // <dir>/erdma-cdi-hook
  std::string socket;  // <dir>/hook.sock
};
[[nodiscard]] CdiHookPaths cdi_hook_paths(std::string_view dir);

// The spec-wide containerEdits.hooks entry of an SMC-R claim: createRuntime, the hook with
// "smcr --claim <uid> --socket <socket>". CDI 0.5.0 carries hooks (specs-go Hook: hookName, path,
// args, env, timeout); no timeout is set: the runtime fails the container when a hook's timeout
// passes, and the hook bounds its own wait instead.
[[nodiscard]] nlohmann::json cdi_hook_entry(const CdiHookPaths& paths, std::string_view claim_uid);

struct HookRequest {
  std::string claim_uid;
  std::string container_id;  // the OCI state's id ("" when missing)
  int64_t pid = 0;           // the OCI state's pid (0 when missing)
  std::string sandbox_id;    // from the sandbox annotation
};

// Parses one request (the hook's header line and the OCI state). Errors, InvalidArgument unless
// said: a request larger than kMaxHookRequestBytes; no header line, another protocol or mode; a
// claim UID the agent would not have recorded (cdi_spec.hpp is_claim_uid); a state that is not a
// JSON object, or whose id, pid or annotations have the wrong type; FailedPrecondition when no
// annotation names the sandbox (the message names both annotations), or the id is not 1..128 of
// [0-9A-Za-z_.-].
[[nodiscard]] Result<HookRequest> parse_hook_request(std::string_view bytes);

// Whether the agent sets up a pod for this claim: NotFound when the claim is not in this node's
// checkpoint (never prepared here, or already unprepared), FailedPrecondition when it is not an
// SMC-R claim (an RDMA claim's spec names no hook). Messages name the claim.
[[nodiscard]] Status check_hook_claim(const std::optional<PreparedClaim>& recorded, std::string_view uid);

// The answer line: "ok <text>\n" or "error <text>\n", newlines in `text` turned into spaces,
// cut to fit kMaxHookAnswerBytes.
[[nodiscard]] std::string hook_answer(bool ok, std::string_view text);

}  // namespace erdma::agent
