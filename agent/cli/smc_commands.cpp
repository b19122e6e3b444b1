// SMC-R admin subcommands (see smc_commands.hpp): argument parsing, then the kernel clients, then
// text or JSON output. Kernel work runs inside the requested netns on its own thread.
#include "agent/cli/smc_commands.hpp"

#include <cstdio>
#include <iomanip>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "agent/cli/commands.hpp"
#include "agent/core/admin.hpp"
#include "agent/sys/netlink_smc.hpp"
#include "agent/sys/netns.hpp"
#include "agent/sys/pod_netns.hpp"
#include "agent/sys/pod_sources.hpp"
#include "common/flags.hpp"

namespace erdma::agent {
namespace {

struct Common {
  std::optional<NetnsRef> netns;
  std::optional<PodName> pod;  // --pod: resolved into netns by resolve_pod()
  std::string config;          // --config (for --pod)
  bool json = false;
  bool all = false;
  std::vector<std::string> rest;
};

constexpr const char* kOneTarget = "give one of --netns PATH, --pid PID or --pod NAMESPACE/NAME";

// Parses --netns PATH, --pid PID, --pod NS/NAME (with `allow_pod`), --config FILE, -o json|text,
// -a; everything else is positional or a flag the command checks itself.
Result<Common> parse_common(const std::vector<std::string>& args, bool allow_all, bool allow_pod = false) {
  std::vector<common::FlagSpec> specs = {{"--netns"}, {"--pid"}, {"--output", "-o"}};
  if (allow_pod) specs.insert(specs.end(), {{"--pod"}, {"--config", "-c"}});
  if (allow_all) specs.push_back({"--all", "-a", true});
  ERDMA_TRY_ASSIGN(auto flags, common::parse_flags(args, specs, common::UnknownFlags::AsPositional));
  Common c;
  c.rest = std::move(flags.positional);
  for (const auto& [name, v] : flags.values) {
    const bool target = name == "--netns" || name == "--pid" || name == "--pod";
    if (target && (c.netns || c.pod)) return make_error(ErrorCode::InvalidArgument, kOneTarget);
    if (name == "--netns") {
      c.netns = NetnsRef::of_path(v);
    } else if (name == "--pod") {
      ERDMA_TRY_ASSIGN(c.pod, parse_pod_name(v));
    } else if (name == "--config") {
      c.config = v;
    } else if (name == "--pid") {
      char* end = nullptr;
      const long pid = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || pid <= 0 || pid > 4194304) {
        return make_error(ErrorCode::InvalidArgument, "--pid: \"" + v + "\" is not a process id");
      }
      c.netns = NetnsRef::of_pid(static_cast<pid_t>(pid));
    } else if (name == "--output") {
      if (v != "json" && v != "text")
        return make_error(ErrorCode::InvalidArgument, "-o: expected json or text, got \"" + v + "\"");
      c.json = v == "json";
    } else if (name == "--all") {
      c.all = true;
    }
  }
  return c;
}

// Runs `fn` here or inside the namespace (bounded).
Status in_netns(const Common& c, std::function<Status()> fn) {
  if (!c.netns) return fn();
  SetnsNetns runner;
  return runner.run(*c.netns, std::move(fn), std::chrono::steady_clock::now() + std::chrono::seconds(30));
}

int fail(std::ostream& err, const Error& e) {
  err << "error: " << e.message << "\n";
  return 1;
}

int usage(std::ostream& err, const std::string& msg) {
  err << "error: " << msg << "\n";
  return 2;
}

// --pod: the pod's network namespace on this node, found over the CRI as pod setup finds it.
// Returns the exit status on failure (and prints why), nullopt when `c` is ready to run.
std::optional<int> resolve_pod(Common& c, std::ostream& out, std::ostream& err) {
  if (!c.pod) return std::nullopt;
  auto cfg = load_config_file(c.config.empty() ? default_config_path() : c.config);
  if (!cfg) {
    err << "error: " << cfg.error().message << "\n";
    return kExitUsage;
  }
  const auto timeout = std::chrono::milliseconds(cfg->smcr.call_timeout_ms);
  GrpcCriSandboxes cri(cfg->cri_socket, timeout);
  auto found =
      find_pod_netns(cri, *c.pod, cfg->cri_socket, cfg->proc_root, std::chrono::steady_clock::now() + 2 * timeout);
  if (!found) return fail(err, found.error());
  if (found->netns) {
    c.netns = found->netns;
  } else if (!c.json) {
    // The agent runs on the host network: its own namespace is the node's.
    out << "pod " << c.pod->namespace_ << "/" << c.pod->name << " uses the node's network namespace (hostNetwork)\n";
  }
  return std::nullopt;
}

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' '); }

}  // namespace

int cmd_pnet(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto c = parse_common(args, false);
  if (!c) return usage(err, c.error().message);
  if (c->rest.empty()) return usage(err, "pnet: expected list, add, del or flush");
  const std::string verb = c->rest[0];
  std::vector<std::string> pos(c->rest.begin() + 1, c->rest.end());
  std::ostringstream text;

  if (verb == "list") {
    if (!pos.empty()) return usage(err, "pnet list: unexpected argument \"" + pos[0] + "\"");
    std::vector<PnetEntry> entries;
    auto st = in_netns(*c, [&]() -> Status {
      ERDMA_TRY_ASSIGN(auto t, NetlinkPnetTable::open());
      ERDMA_TRY_ASSIGN(auto l, t->list());
      entries = std::move(l);
      return {};
    });
    if (!st) return fail(err, explain_smc_error(st.error(), SmcNeed::PnetTable));
    if (c->json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& e : entries) {
        nlohmann::json o{
            {"pnetId", e.pnet_id.str()}, {"type", e.kind == PnetEntryKind::Eth ? "eth" : "ib"}, {"device", e.device}};
        if (e.kind == PnetEntryKind::Ib) o["port"] = e.port;
        j.push_back(o);
      }
      out << j.dump(2) << "\n";
      return 0;
    }
    out << pad("PNETID", 18) << pad("TYPE", 6) << pad("DEVICE", 20) << "PORT\n";
    for (const auto& e : entries) {
      out << pad(e.pnet_id.str(), 18) << pad(e.kind == PnetEntryKind::Eth ? "eth" : "ib", 6) << pad(e.device, 20)
          << (e.kind == PnetEntryKind::Ib ? std::to_string(e.port) : "-") << "\n";
    }
    return 0;
  }

  if (verb == "add") {
    static constexpr common::FlagSpec kAddFlags[] = {{"--eth"}, {"--ib"}, {"--port"}};
    auto flags = common::parse_flags(pos, kAddFlags);
    if (!flags) return usage(err, "pnet add: " + flags.error().message);
    if (flags->positional.size() > 1)
      return usage(err, "pnet add: unexpected argument \"" + flags->positional[1] + "\"");
    const std::optional<std::string> id =
        flags->positional.empty() ? std::nullopt : std::optional<std::string>(flags->positional[0]);
    const std::string* eth = flags->get("--eth");
    const std::string* ib = flags->get("--ib");
    const std::string p = flags->get_or("--port", "1");
    if (p != "1" && p != "2") return usage(err, "pnet add: --port must be 1 or 2, got \"" + p + "\"");
    const auto port = static_cast<unsigned>(p[0] - '0');
    if (!id) return usage(err, "pnet add: missing PNETID");
    if ((eth != nullptr) == (ib != nullptr))
      return usage(err, "pnet add: give exactly one of --eth IFNAME or --ib DEVICE");
    auto entry = eth ? PnetEntry::eth(*id, *eth) : PnetEntry::ib(*id, *ib, port);
    if (!entry) return usage(err, entry.error().message);
    Change change = Change::Changed;
    auto st = in_netns(*c, [&]() -> Status {
      ERDMA_TRY_ASSIGN(auto t, NetlinkPnetTable::open());
      ERDMA_TRY_ASSIGN(auto r, t->add(*entry));
      change = r;
      return {};
    });
    if (!st) return fail(err, explain_smc_error(st.error(), SmcNeed::PnetTable));
    out << (change == Change::Changed ? "added " : "already present: ") << entry->to_string() << "\n";
    return 0;
  }

  if (verb == "del") {
    if (pos.size() != 1) return usage(err, "pnet del: expected one PNETID");
    auto id = PnetId::parse(pos[0]);
    if (!id) return usage(err, id.error().message);
    Change change = Change::Changed;
    auto st = in_netns(*c, [&]() -> Status {
      ERDMA_TRY_ASSIGN(auto t, NetlinkPnetTable::open());
      ERDMA_TRY_ASSIGN(auto r, t->remove(*id));
      change = r;
      return {};
    });
    if (!st) return fail(err, explain_smc_error(st.error(), SmcNeed::PnetTable));
    out << (change == Change::Changed ? "deleted entries of " : "not present: ") << id->str() << "\n";
    return 0;
  }

  if (verb == "flush") {
    if (!pos.empty()) return usage(err, "pnet flush: unexpected argument \"" + pos[0] + "\"");
    auto st = in_netns(*c, []() -> Status {
      ERDMA_TRY_ASSIGN(auto t, NetlinkPnetTable::open());
      return t->flush();
    });
    if (!st) return fail(err, explain_smc_error(st.error(), SmcNeed::PnetTable));
    out << "flushed\n";
    return 0;
  }
  return usage(err, "pnet: unknown verb \"" + verb + "\"");
}

int cmd_ueid(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto c = parse_common(args, false);
  if (!c) return usage(err, c.error().message);
  if (c->netns) return usage(err, "ueid: the UEID table is global; --netns and --pid do not apply");
  if (c->rest.empty()) return usage(err, "ueid: expected list, add or del");
  const std::string verb = c->rest[0];
  auto info = NetlinkSmcInfo::open();
  if (verb == "list") {
    if (c->rest.size() != 1) return usage(err, "ueid list: unexpected argument");
    if (!info) return fail(err, explain_smc_error(info.error(), SmcNeed::SmcInfo));
    auto l = (*info)->ueids();
    if (!l) return fail(err, explain_smc_error(l.error(), SmcNeed::SmcInfo));
    if (c->json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& u : *l) j.push_back(u.str());
      out << j.dump(2) << "\n";
    } else {
      for (const auto& u : *l) out << u.str() << "\n";
    }
    return 0;
  }
  if (verb == "add" || verb == "del") {
    if (c->rest.size() != 2) return usage(err, "ueid " + verb + ": expected one UEID");
    auto u = Ueid::parse(c->rest[1]);
    if (!u) return usage(err, u.error().message);
    if (!info) return fail(err, explain_smc_error(info.error(), SmcNeed::SmcInfo));
    auto r = verb == "add" ? (*info)->add_ueid(*u) : (*info)->remove_ueid(*u);
    if (!r) return fail(err, explain_smc_error(r.error(), SmcNeed::SmcInfo));
    if (verb == "add") out << (*r == Change::Changed ? "added UEID " : "already present: UEID ") << u->str() << "\n";
    if (verb == "del") out << (*r == Change::Changed ? "deleted UEID " : "not present: UEID ") << u->str() << "\n";
    return 0;
  }
  return usage(err, "ueid: unknown verb \"" + verb + "\"");
}

namespace {

// The SMC-R prediction for a pod's netns (text mode of smc-status --netns/--pid), then what
// connections to pods of the same node use. The node is the netns this command runs in (the
// agent's: hostNetwork). Never fails the command.
std::string prediction_line(const NetnsRef& pod, const std::string& interface) {
  SetnsNetns runner;
  KernelPodNetworkInspector inspector(runner, NetnsRef::self(), sysfs_rdma_lister(), netlink_pnet_opener(),
                                      netlink_smc_info_opener());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto same = same_netns(pod, NetnsRef::self());
  std::optional<NetnsRef> target;
  if (!same || !*same) target = pod;  // a pod of its own (or unknown: the inspector says why)
  auto facts = inspector.gather(target, interface, "", deadline);
  const auto p = facts ? predict_smcr(*facts) : unknown_prediction(facts.error().message);
  std::string line = "prediction: " + p.summary();
  if (!p.fallback.empty()) line += " [kernel: " + p.fallback + " at the " + std::string(to_string(p.side)) + "]";
  if (!p.same_node.detail.empty()) line += "\nsame node: " + p.same_node.summary();
  return line;
}

}  // namespace

int cmd_smc_status(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto c = parse_common(args, true, true);
  if (!c) return usage(err, c.error().message);
  static constexpr common::FlagSpec kStatusFlags[] = {{"--interface"}};
  auto own = common::parse_flags(c->rest, kStatusFlags);
  if (!own) return usage(err, "smc-status: " + own.error().message);
  const std::string* given = own->get("--interface");
  if (given != nullptr && !c->netns && !c->pod) {
    return usage(err, "smc-status: --interface needs --pod, --netns or --pid (the pod's interface)");
  }
  const std::string interface = given != nullptr ? *given : "eth0";
  c->rest = std::move(own->positional);
  if (!c->rest.empty()) return usage(err, "smc-status: unexpected argument \"" + c->rest[0] + "\"");
  if (auto rc = resolve_pod(*c, out, err)) return *rc;
  std::vector<SmcSocket> socks;
  auto st = in_netns(*c, [&]() -> Status {
    ERDMA_TRY_ASSIGN(auto s, SockDiagSmcStatus::open());
    ERDMA_TRY_ASSIGN(auto l, s->sockets());
    socks = std::move(l);
    return {};
  });
  if (!st) return fail(err, explain_smc_error(st.error(), SmcNeed::SockDiag));
  // A listening socket has not fallen back and reads as SMCR: only -a shows them.
  std::vector<SmcSocket> shown;
  for (auto& s : socks) {
    if (c->all || s.state != 10) shown.push_back(std::move(s));
  }
  if (c->json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& s : shown) {
      nlohmann::json o{{"state", smc_state_name(s.state)},
                       {"mode", smc_mode_name(s.mode)},
                       {"local", s.local},
                       {"peer", s.peer},
                       {"inode", s.inode},
                       {"uid", s.uid}};
      if (s.fallback_reason) {
        o["fallbackReason"] = fallback_reason_name(*s.fallback_reason);
        o["fallbackCode"] = hex32(*s.fallback_reason);
        o["peerDiagnosis"] = hex32(s.peer_diagnosis.value_or(0));
      }
      if (s.mode == SmcMode::Smcr && !s.ib_device.empty()) {
        o["ibDevice"] = s.ib_device;
        o["ibPort"] = s.ib_port;
        o["gid"] = s.gid;
        o["peerGid"] = s.peer_gid;
        if (s.role) o["role"] = *s.role == 0 ? "client" : "server";
      }
      j.push_back(o);
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  // For a pod: whether SMC-R can form at all, before the sockets (which may show SMCR only by
  // joining a link group the node opened: see docs/smcr-pod-networks.md).
  if (c->netns) out << prediction_line(*c->netns, interface) << "\n";
  out << pad("STATE", 17) << pad("MODE", 6) << pad("LOCAL", 26) << pad("PEER", 26) << "DETAIL\n";
  for (const auto& s : shown) {
    std::string detail;
    if (s.mode == SmcMode::Tcp && s.fallback_reason) {
      detail = std::string(fallback_reason_name(*s.fallback_reason)) + " (" + hex32(*s.fallback_reason) +
               "): " + std::string(fallback_reason_text(*s.fallback_reason));
    } else if (s.mode == SmcMode::Smcr && !s.ib_device.empty()) {
      detail = s.ib_device + "/" + std::to_string(s.ib_port) + (s.role ? (*s.role == 0 ? " client" : " server") : "");
    } else if (s.mode == SmcMode::Smcd) {
      detail = "SMC-D (within the node)";
    }
    out << pad(std::string(smc_state_name(s.state)), 17) << pad(std::string(smc_mode_name(s.mode)), 6)
        << pad(s.local, 26) << pad(s.peer, 26) << detail << "\n";
  }
  return 0;
}

int cmd_smc_stats(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto c = parse_common(args, false, true);
  if (!c) return usage(err, c.error().message);
  if (!c->rest.empty()) return usage(err, "smc-stats: unexpected argument \"" + c->rest[0] + "\"");
  if (auto rc = resolve_pod(*c, out, err)) return *rc;
  SmcStats stats;
  FallbackStats fb;
  auto st = in_netns(*c, [&]() -> Status {
    ERDMA_TRY_ASSIGN(auto info, NetlinkSmcInfo::open());
    ERDMA_TRY_ASSIGN(auto s, info->stats());
    stats = s;
    ERDMA_TRY_ASSIGN(auto f, info->fallback_stats());
    fb = std::move(f);
    return {};
  });
  if (!st) return fail(err, explain_smc_error(st.error(), SmcNeed::SmcInfo));
  auto tech = [](const SmcTechStats& t) {
    return nlohmann::json{{"clientV1Success", t.client_v1_success},
                          {"clientV2Success", t.client_v2_success},
                          {"serverV1Success", t.server_v1_success},
                          {"serverV2Success", t.server_v2_success},
                          {"rxBytes", t.rx_bytes},
                          {"txBytes", t.tx_bytes}};
  };
  if (c->json) {
    nlohmann::json reasons = nlohmann::json::array();
    for (const auto& r : fb.reasons) {
      reasons.push_back({{"side", r.server ? "server" : "client"},
                         {"reason", fallback_reason_name(r.code)},
                         {"code", hex32(r.code)},
                         {"count", r.count}});
    }
    nlohmann::json j{
        {"smcr", tech(stats.smcr)},
        {"smcd", tech(stats.smcd)},
        {"handshakeErrors", {{"client", stats.client_handshake_errors}, {"server", stats.server_handshake_errors}}},
        {"fallbacks", {{"client", fb.client_total}, {"server", fb.server_total}, {"reasons", reasons}}}};
    out << j.dump(2) << "\n";
    return 0;
  }
  auto line = [&](const char* name, const SmcTechStats& t) {
    out << name << "  connections: client v1 " << t.client_v1_success << ", v2 " << t.client_v2_success
        << "; server v1 " << t.server_v1_success << ", v2 " << t.server_v2_success << "; bytes rx " << t.rx_bytes
        << ", tx " << t.tx_bytes << "\n";
  };
  line("SMC-R", stats.smcr);
  line("SMC-D", stats.smcd);
  out << "handshake errors: client " << stats.client_handshake_errors << ", server " << stats.server_handshake_errors
      << "\n";
  out << "fallbacks to TCP: client " << fb.client_total << ", server " << fb.server_total << "\n";
  for (const auto& r : fb.reasons) {
    out << "  " << pad(r.server ? "server" : "client", 7) << pad(std::string(fallback_reason_name(r.code)), 12)
        << pad(hex32(r.code), 11) << r.count << "  " << fallback_reason_text(r.code) << "\n";
  }
  return 0;
}

}  // namespace erdma::agent
