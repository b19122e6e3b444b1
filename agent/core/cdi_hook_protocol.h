/* The wire format between erdma-cdi-hook and the agent (plain C, libc only: the hook, agent/cdihook, is a static C
 * program; agent/core/cdi_hook.hpp reads the same definitions).
 *
 * One request per connection on the agent's unix socket:
 *   "erdma-cdi-hook/1 smcr <claim uid>\n" followed by the OCI state JSON the runtime gave the
 *   hook on stdin (ociVersion, id, status, pid, bundle, annotations); the hook then shuts down its
 *   sending side.
 * One answer line, after which the agent closes the connection:
 *   "ok <text>\n" when the pod's netns was set up (or needed nothing), "error <text>\n" otherwise.
 * The hook prints the answer on its stderr and exits 0 either way: SMC-R setup never fails a
 * container (without it, SMC falls back to TCP). */
#ifndef ERDMA_CDI_HOOK_PROTOCOL_H
#define ERDMA_CDI_HOOK_PROTOCOL_H

#define ERDMA_CDI_HOOK_PROTOCOL "erdma-cdi-hook/1"
#define ERDMA_CDI_HOOK_MODE_SMCR "smcr"
/* The hook's file name in the agent's hook directory, and the agent's socket beside it. */
#define ERDMA_CDI_HOOK_BINARY "erdma-cdi-hook"
#define ERDMA_CDI_HOOK_SOCKET "hook.sock"
/* The most a request may carry (header and OCI state): the state holds the container's
 * annotations, which the kubelet keeps small. */
#define ERDMA_CDI_HOOK_MAX_REQUEST (256 * 1024)
/* The most an answer line may carry. */
#define ERDMA_CDI_HOOK_MAX_ANSWER 4096
/* How long the hook waits for the agent's answer unless told otherwise (--timeout-ms). */
#define ERDMA_CDI_HOOK_TIMEOUT_MS 10000

#endif
