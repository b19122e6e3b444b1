// Pure decisions of the admin subcommands: which pod `--pod NAMESPACE/NAME` names and which of
// the runtime's sandboxes is its one, what an operator reads when a lookup or a kernel call fails
// (each message says how to fix it), and what `erdma-agent cleanup` removes from a node.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/core/pnet.hpp"
#include "agent/core/pod_setup.hpp"
#include "common/result.hpp"

namespace erdma::agent {

// The CRI labels kubelet puts on every sandbox (ListPodSandbox filters on them).
inline constexpr const char* kPodNamespaceLabel = "io.kubernetes.pod.namespace";
inline constexpr const char* kPodNameLabel = "io.kubernetes.pod.name";

struct PodName {
  std::string namespace_;
  std::string name;
  friend bool operator==(const PodName&, const PodName&) = default;
};

// "team-a/web-0" -> {team-a, web-0}. The namespace is a DNS-1123 label, the name a DNS-1123
// subdomain (common/k8s_names.hpp, as the apiserver checks them). InvalidArgument otherwise,
// naming the part, the rule it breaks and the expected form.
[[nodiscard]] Result<PodName> parse_pod_name(std::string_view text);

// The one ready sandbox of `pod` among `sandboxes` (which may hold other pods' too). NotFound when
// there is none (the pod runs on another node, is not started or is gone: the message says where
// to run the command instead); FailedPrecondition when several are ready (the runtime is between
// two sandboxes of the pod: the message lists them and says to retry or use --netns).
[[nodiscard]] Result<SandboxSummary> pick_pod_sandbox(const std::vector<SandboxSummary>& sandboxes, const PodName& pod);

// What the admin command reads in place of a failed CRI call: `e` with the socket, the config key
// (criSocket) and the DaemonSet mount to check.
[[nodiscard]] Error explain_cri_error(const Error& e, const std::string& cri_socket);

// Which kernel interface an SMC subcommand needs.
enum class SmcNeed { PnetTable, SmcInfo, SockDiag };
// `e` from an SMC netlink call, with how to fix it: the module to load (smc; smc_diag for the
// socket list) and who loads it (the node's administrator: the agent never loads modules), the
// capability or mount when permission is denied, and the pod for a vanished namespace.
[[nodiscard]] Error explain_smc_error(const Error& e, SmcNeed need);

// ---- erdma-agent cleanup

// A file the agent installs on the node, and its directory: the preload library, the CDI hook.
struct InstalledFile {
  std::string file;  // <dir>/<name>
  bool present = false;
  std::string dir;
  bool dir_present = false;
  size_t dir_other_entries = 0;  // entries of the directory besides the file
  // The directory is a mount point where cleanup runs (the DaemonSet's hostPath inside the agent's
  // pod): it cannot be removed from there, and on the node it stays as an empty directory.
  bool dir_is_mount = false;
};

// What is on the node, as the shell read it.
struct CleanupFacts {
  std::string pnet_id;                                                   // smcr.pnetId
  Result<std::vector<PnetEntry>> pnet_table = std::vector<PnetEntry>{};  // the host's; an error when unreadable
  std::string ueid;                                                      // smcr.ueid; "" = not managed by the agent
  Result<std::vector<std::string>> ueid_table = std::vector<std::string>{};
  InstalledFile preload;   // <smcr.preloadHostDir>/libsmc-preload.so
  InstalledFile cdi_hook;  // <dra.hookDir>/erdma-cdi-hook; dir "" = dra.hookDir is empty
  std::string nfd_file;    // nfdFeatureFile; "" = not configured
  bool nfd_present = false;
};

enum class CleanupStep { RemovePnetId, RemoveUeid, RemoveFile, RemoveDir };
struct CleanupAction {
  CleanupStep step = CleanupStep::RemoveFile;
  std::string target;  // the PNETID, the UEID or the path
  std::string text;    // what goes, for the operator: "pnet entries ERDMA (erdma_0 port 1, eth0)"
  friend bool operator==(const CleanupAction&, const CleanupAction&) = default;
};

struct CleanupPlan {
  std::vector<CleanupAction> actions;  // in order; empty = nothing to do
  std::vector<std::string> notes;      // what is left alone, and why
  std::vector<std::string> problems;   // facts that could not be read (the command exits 1)
};

// Only what the agent adds: the pnet entries carrying the configured PNETID (entries of other
// PNETIDs are an administrator's), the configured UEID when it is in the table, the library file,
// then its directory when nothing else is in it, the DRA driver's CDI hook and its directory the
// same way, and the NFD feature file. A kernel without SMC
// has no tables: a note, not a problem. The per-pod settings are always a note: they live in the
// pods' network namespaces and go with them.
[[nodiscard]] CleanupPlan plan_cleanup(const CleanupFacts& facts);

// Whether `mountinfo` (the text of /proc/self/mountinfo) lists a mount at `path`. The mount point
// is each line's fifth field, with blanks, tabs, newlines and backslashes escaped as \ooo (octal);
// lines with fewer fields are passed over.
[[nodiscard]] bool mountinfo_lists(std::string_view mountinfo, std::string_view path);

}  // namespace erdma::agent
