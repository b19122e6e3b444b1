// erdma-agent cleanup: removes what the agent left on the node (see commands.hpp). The facts are
// read here, the plan is agent/core/admin.hpp's, and each action is printed as it is done.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <ostream>

#include "agent/cli/commands.hpp"
#include "agent/core/admin.hpp"
#include "agent/core/cdi_hook_protocol.h"
#include "agent/sys/netlink_smc.hpp"
#include "agent/sys/netns.hpp"
#include "common/contract.hpp"
#include "common/flags.hpp"

namespace erdma::agent {
namespace fs = std::filesystem;

namespace {

// A directory something is mounted on: another filesystem than its parent's, or a bind mount
// listed in /proc/self/mountinfo (whose paths escape blanks as \040).
bool is_mount_point(const std::string& dir) {
  struct stat self {};
  struct stat parent {};
  if (::stat(dir.c_str(), &self) != 0 || ::stat((dir + "/..").c_str(), &parent) != 0) return false;
  if (self.st_dev != parent.st_dev) return true;
  std::error_code ec;
  const std::string want = fs::weakly_canonical(dir, ec).string();
  std::ifstream in("/proc/self/mountinfo");
  const std::string mountinfo((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return mountinfo_lists(mountinfo, want);
}

// `name` in `dir` (under the host root), and what else the directory holds.
InstalledFile installed_file(const std::string& dir, const std::string& name) {
  InstalledFile f;
  std::error_code ec;
  f.dir = dir;
  f.file = dir + "/" + name;
  f.present = fs::is_regular_file(f.file, ec);
  f.dir_present = fs::is_directory(f.dir, ec);
  f.dir_is_mount = f.dir_present && is_mount_point(f.dir);
  if (f.dir_present) {
    for (const auto& e : fs::directory_iterator(f.dir, ec)) {
      if (e.path().filename().string() != name) ++f.dir_other_entries;
    }
    if (ec) ++f.dir_other_entries;  // unreadable: keep it
  }
  return f;
}

CleanupFacts gather_cleanup_facts(const AgentConfig& cfg, const std::string& host_root) {
  CleanupFacts f;
  f.pnet_id = cfg.smcr.pnet_id.str();
  f.ueid = cfg.smcr.ueid;
  if (auto t = NetlinkPnetTable::open()) {
    f.pnet_table = (*t)->list();
  } else {
    f.pnet_table = std::move(t).error();
  }
  if (!f.ueid.empty()) {
    if (auto info = NetlinkSmcInfo::open()) {
      if (auto l = (*info)->ueids()) {
        std::vector<std::string> ueids;
        for (const auto& u : *l) ueids.push_back(u.str());
        f.ueid_table = std::move(ueids);
      } else {
        f.ueid_table = std::move(l).error();
      }
    } else {
      f.ueid_table = std::move(info).error();
    }
  }
  std::error_code ec;
  f.preload = installed_file(host_root + cfg.smcr.preload_host_dir, std::string(contract::kPreloadLibrary));
  if (!cfg.dra.hook_dir.empty()) f.cdi_hook = installed_file(host_root + cfg.dra.hook_dir, ERDMA_CDI_HOOK_BINARY);
  if (!cfg.nfd_feature_file.empty()) {
    f.nfd_file = host_root + cfg.nfd_feature_file;
    f.nfd_present = fs::exists(fs::symlink_status(f.nfd_file, ec));
  }
  return f;
}

Status apply(const CleanupAction& a) {
  switch (a.step) {
    case CleanupStep::RemovePnetId: {
      ERDMA_TRY_ASSIGN(auto id, PnetId::parse(a.target));
      ERDMA_TRY_ASSIGN(auto t, NetlinkPnetTable::open());
      ERDMA_TRY(t->remove(id));
      return {};
    }
    case CleanupStep::RemoveUeid: {
      ERDMA_TRY_ASSIGN(auto u, Ueid::parse(a.target));
      ERDMA_TRY_ASSIGN(auto info, NetlinkSmcInfo::open());
      ERDMA_TRY(info->remove_ueid(u));
      return {};
    }
    case CleanupStep::RemoveFile:
    case CleanupStep::RemoveDir: {
      std::error_code ec;
      fs::remove(a.target, ec);  // a directory only when empty
      if (ec) return make_error(ErrorCode::Unavailable, "removing " + a.target + ": " + ec.message());
      return {};
    }
  }
  return {};
}

}  // namespace

int run_cleanup(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static constexpr common::FlagSpec kSpecs[] = {{"--config", "-c"}, {"--host-root"}, {"--dry-run", {}, true}};
  auto flags = common::parse_flags(args, kSpecs);
  if (!flags || !flags->positional.empty()) {
    err << "error: " << (flags ? "unexpected argument \"" + flags->positional.front() + "\"" : flags.error().message)
        << "\n";
    return kExitUsage;
  }
  const std::string config = flags->get_or("--config", "");
  std::string host_root = flags->get_or("--host-root", "");
  const bool dry_run = flags->has("--dry-run");
  while (host_root.size() > 1 && host_root.back() == '/') host_root.pop_back();
  if (host_root == "/") host_root.clear();
  if (!host_root.empty() && host_root.front() != '/') {
    err << "error: --host-root must be an absolute path (where the node's / is mounted, e.g. /host), got \""
        << host_root << "\"\n";
    return kExitUsage;
  }
  auto cfg = load_config_file(config.empty() ? default_config_path() : config);
  if (!cfg) {
    err << "error: " << cfg.error().message << "\n";
    return kExitUsage;
  }
  const auto plan = plan_cleanup(gather_cleanup_facts(*cfg, host_root));
  for (const auto& p : plan.problems) err << "error: " << p << "\n";
  int rc = plan.problems.empty() ? kExitOk : kExitFailure;
  for (const auto& a : plan.actions) {
    if (dry_run) {
      out << a.text << " would be removed (dry run)\n";
      continue;
    }
    if (auto s = apply(a); !s) {
      err << "error: " << a.text << ": " << s.error().message << "\n";
      rc = kExitFailure;
      continue;
    }
    out << a.text << " removed\n";
  }
  if (plan.actions.empty()) out << "nothing to remove\n";
  for (const auto& n : plan.notes) out << "note: " << n << "\n";
  if (!plan.actions.empty() && !dry_run) {
    out << "note: a running erdma-agent on this node adds its pnet entries, UEID and library again within a minute: "
           "delete the DaemonSet right after, or run cleanup once it is gone (docs/uninstall.md)\n";
  }
  return rc;
}

}  // namespace erdma::agent
