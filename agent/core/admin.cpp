// Admin subcommand decisions (see admin.hpp): plain functions over values the shell gathered.
#include "agent/core/admin.hpp"

#include <algorithm>

#include "common/k8s_names.hpp"

namespace erdma::agent {
namespace {

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string where_hint(const PodName& pod) {
  return "run the command in the erdma-agent pod on the pod's node: `kubectl get pod -n " + pod.namespace_ + " " +
         pod.name +
         " -o wide` shows the node, `kubectl -n erdma-system get pod -l app.kubernetes.io/name=erdma-agent "
         "--field-selector spec.nodeName=NODE` its agent";
}

}  // namespace

Result<PodName> parse_pod_name(std::string_view text) {
  const auto slash = text.find('/');
  if (slash == std::string_view::npos || text.find('/', slash + 1) != std::string_view::npos) {
    return make_error(ErrorCode::InvalidArgument,
                      "--pod: expected NAMESPACE/NAME (e.g. team-a/web-0), got " + quoted(text));
  }
  const auto ns = text.substr(0, slash);
  const auto name = text.substr(slash + 1);
  if (const auto check = common::check_name(common::NameRule::Dns1123Label, ns); !check) {
    return make_error(ErrorCode::InvalidArgument, "--pod " + quoted(text) + ": namespace " + quoted(ns) + " " +
                                                      common::describe(check, "a Kubernetes namespace name"));
  }
  if (const auto check = common::check_name(common::NameRule::Dns1123Subdomain, name); !check) {
    return make_error(ErrorCode::InvalidArgument,
                      "--pod " + quoted(text) + ": " + quoted(name) + " " + common::describe(check, "a pod name"));
  }
  return PodName{std::string(ns), std::string(name)};
}

Result<SandboxSummary> pick_pod_sandbox(const std::vector<SandboxSummary>& sandboxes, const PodName& pod) {
  std::vector<const SandboxSummary*> ready;
  for (const auto& s : sandboxes) {
    if (s.state == SandboxState::Ready && s.pod_namespace == pod.namespace_ && s.pod_name == pod.name)
      ready.push_back(&s);
  }
  const std::string ref = pod.namespace_ + "/" + pod.name;
  if (ready.empty()) {
    return make_error(ErrorCode::NotFound, "pod " + ref +
                                               " has no ready sandbox on this node (it runs on another node, has not "
                                               "started or is gone): " +
                                               where_hint(pod));
  }
  if (ready.size() > 1) {
    std::string ids;
    for (const auto* s : ready) ids += (ids.empty() ? "" : ", ") + s->id.substr(0, 13);
    return make_error(ErrorCode::FailedPrecondition,
                      "pod " + ref + " has " + std::to_string(ready.size()) + " ready sandboxes on this node (" + ids +
                          "): the runtime is replacing the pod's sandbox; retry in a few seconds, or pick one with "
                          "`crictl inspectp ID` on the node and pass its network namespace with --netns PATH");
  }
  return *ready.front();
}

Error explain_cri_error(const Error& e, const std::string& cri_socket) {
  std::string fix;
  switch (e.code) {
    case ErrorCode::Unavailable:
    case ErrorCode::PermissionDenied:
      fix = "check that the config key criSocket (now " + cri_socket +
            ") is the container runtime's CRI socket on this node and that its directory is mounted into the agent "
            "pod (the DaemonSet mounts /run/containerd); pass the config with --config FILE";
      break;
    case ErrorCode::DeadlineExceeded:
      fix = "the runtime at criSocket " + cri_socket +
            " did not answer in time (smcr.callTimeoutMs); check it with "
            "`crictl pods` on the node and retry";
      break;
    default:
      fix =
          "the runtime at criSocket " + cri_socket + " answered unexpectedly; check it with `crictl pods` on the node";
  }
  return make_error(e.code, e.message + ": " + fix);
}

Error explain_smc_error(const Error& e, SmcNeed need) {
  const bool no_smc = e.code == ErrorCode::Unavailable && e.message.find("has no SMC") != std::string::npos;
  if (no_smc) {
    const std::string modules = need == SmcNeed::SockDiag ? "modules smc and smc_diag" : "module smc";
    const std::string cmd = need == SmcNeed::SockDiag ? "modprobe smc smc_diag" : "modprobe smc";
    return make_error(e.code,
                      e.message + ": load the kernel " + modules + " on the node (`" + cmd +
                          "` as root, and a file in /etc/modules-load.d/ to keep it after a reboot); the "
                          "agent never loads modules, the node's administrator does (docs/node-preparation.md)");
  }
  switch (e.code) {
    case ErrorCode::PermissionDenied:
      return make_error(e.code, e.message +
                                    ": run it as root with CAP_NET_ADMIN (and CAP_SYS_ADMIN, CAP_SYS_PTRACE for "
                                    "another namespace), as the erdma-agent container has: `kubectl -n "
                                    "erdma-system exec ds/erdma-agent -- erdma-agent ...`");
    case ErrorCode::NotFound:
      return make_error(e.code, e.message + ": the network namespace is gone (its pod was deleted or restarted); look "
                                            "the pod up again with --pod NAMESPACE/NAME");
    case ErrorCode::InvalidArgument:
      return make_error(e.code, e.message +
                                    ": give a network namespace file (/var/run/netns/NAME, /proc/PID/ns/net) or "
                                    "--pod NAMESPACE/NAME");
    case ErrorCode::DeadlineExceeded:
      return make_error(e.code,
                        e.message + ": the kernel did not answer in 30 s; retry, and check `dmesg` on the node");
    default: return e;
  }
}

namespace {

// The file when it is there, then its directory when nothing else is in it and it can go from here.
void plan_installed(CleanupPlan& plan, const InstalledFile& f, const std::string& what) {
  if (f.present) plan.actions.push_back({CleanupStep::RemoveFile, f.file, what + " " + f.file});
  if (!f.dir_present) return;
  if (f.dir_is_mount) {
    plan.notes.push_back(f.dir + " kept: it is mounted here (the agent's hostPath volume); the empty " +
                         "directory stays on the node (rmdir it there if you want)");
  } else if (f.dir_other_entries == 0) {
    plan.actions.push_back({CleanupStep::RemoveDir, f.dir, "directory " + f.dir});
  } else {
    plan.notes.push_back(f.dir + " kept: it holds " + std::to_string(f.dir_other_entries) + " other entr" +
                         (f.dir_other_entries == 1 ? "y" : "ies"));
  }
}

}  // namespace

CleanupPlan plan_cleanup(const CleanupFacts& f) {
  CleanupPlan plan;
  const bool no_smc_pnet = !f.pnet_table && f.pnet_table.error().code == ErrorCode::Unavailable &&
                           f.pnet_table.error().message.find("has no SMC") != std::string::npos;
  if (f.pnet_table) {
    std::string devices;
    size_t others = 0;
    for (const auto& e : *f.pnet_table) {
      if (e.pnet_id.str() != f.pnet_id) {
        ++others;
        continue;
      }
      devices += (devices.empty() ? "" : ", ") + e.device +
                 (e.kind == PnetEntryKind::Ib ? " port " + std::to_string(e.port) : std::string());
    }
    if (!devices.empty()) {
      plan.actions.push_back(
          {CleanupStep::RemovePnetId, f.pnet_id, "pnet entries " + f.pnet_id + " (" + devices + ")"});
    }
    if (others > 0) {
      plan.notes.push_back("pnet table: " + std::to_string(others) + " entr" + (others == 1 ? "y" : "ies") +
                           " with another PNETID left alone (not the agent's, smcr.pnetId is " + f.pnet_id + ")");
    }
  } else if (no_smc_pnet) {
    plan.notes.push_back("the kernel has no SMC (module smc not loaded): no pnet entries or UEID to remove");
  } else {
    plan.problems.push_back("cannot read the node's pnet table: " + f.pnet_table.error().message);
  }

  if (f.ueid.empty()) {
    plan.notes.push_back("UEID table left alone: smcr.ueid is empty (the agent does not manage it)");
  } else if (f.ueid_table) {
    if (std::find(f.ueid_table->begin(), f.ueid_table->end(), f.ueid) != f.ueid_table->end()) {
      plan.actions.push_back({CleanupStep::RemoveUeid, f.ueid, "UEID " + f.ueid});
    }
  } else if (!no_smc_pnet) {
    plan.problems.push_back("cannot read the UEID table: " + f.ueid_table.error().message);
  }

  plan_installed(plan, f.preload, "preload library");
  plan_installed(plan, f.cdi_hook, "CDI hook");
  if (!f.nfd_file.empty() && f.nfd_present) {
    plan.actions.push_back({CleanupStep::RemoveFile, f.nfd_file, "NFD feature file " + f.nfd_file});
  }
  plan.notes.push_back("SMC-R pods' settings (their eth0 pnet entry, net.smc.* sysctls) live in the pods' network "
                       "namespaces and go with the pods: nothing to remove");
  return plan;
}

bool mountinfo_lists(std::string_view mountinfo, std::string_view path) {
  while (!mountinfo.empty()) {
    const auto nl = mountinfo.find('\n');
    std::string_view line = mountinfo.substr(0, nl);
    mountinfo.remove_prefix(nl == std::string_view::npos ? mountinfo.size() : nl + 1);
    std::string_view field;  // the fifth, or empty when the line has fewer
    for (int i = 0; i < 5; ++i) {
      if (line.empty()) {
        field = {};
        break;
      }
      const auto sp = line.find(' ');
      field = line.substr(0, sp);
      line.remove_prefix(sp == std::string_view::npos ? line.size() : sp + 1);
    }
    if (field.empty()) continue;
    std::string unescaped;
    for (size_t i = 0; i < field.size(); ++i) {
      const auto is_octal = [&](size_t k) { return k < field.size() && field[k] >= '0' && field[k] <= '7'; };
      if (field[i] == '\\' && is_octal(i + 1) && is_octal(i + 2) && is_octal(i + 3)) {
        unescaped +=
            static_cast<char>(((field[i + 1] - '0') << 6) | ((field[i + 2] - '0') << 3) | (field[i + 3] - '0'));
        i += 3;
      } else {
        unescaped += field[i];
      }
    }
    if (unescaped == path) return true;
  }
  return false;
}

}  // namespace erdma::agent
