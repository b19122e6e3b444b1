// Kernel-backed SMC clients (see netlink_smc.hpp): requests built and replies decoded by
// smc_codec, errors mapped to messages that say what to do.
#include "agent/sys/netlink_smc.hpp"

#include <cerrno>

#include <linux/smc.h>
#include <linux/sock_diag.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

#include "agent/sys/smc_codec.hpp"

namespace erdma::agent {

// --- NetlinkPnetTable -----------------------------------------------------------------------------

Result<std::unique_ptr<NetlinkPnetTable>> NetlinkPnetTable::open(std::chrono::milliseconds timeout) {
  auto c = GenlClient::open(kPnetFamily, kNoSmcMessage, timeout);
  if (!c) return c.error();
  return std::unique_ptr<NetlinkPnetTable>(new NetlinkPnetTable(std::move(*c)));
}

Result<std::vector<PnetEntry>> NetlinkPnetTable::list() {
  auto msg = client_.message(SMC_PNETID_GET, NLM_F_DUMP);
  if (!msg) return msg.error();
  std::vector<PnetEntry> out;
  auto rc = client_.transact(msg->get(), [&](const nlmsghdr* h) -> Status {
    auto entries = decode_pnet_reply(h);
    if (!entries) return entries.error();
    for (auto& e : *entries) out.push_back(std::move(e));
    return {};
  });
  if (!rc) return rc.error();
  if (*rc != 0) return kernel_error(*rc, "listing the pnet table");
  return out;
}

Result<Change> NetlinkPnetTable::add(const PnetEntry& entry) {
  auto msg = client_.message(SMC_PNETID_ADD, NLM_F_ACK);
  if (!msg) return msg.error();
  if (auto st = encode_pnet_add(msg->get(), entry); !st) return st.error();
  auto rc = client_.transact(msg->get(), [](const nlmsghdr*) -> Status { return {}; });
  if (!rc) return rc.error();
  if (*rc == 0) return Change::Changed;
  if (*rc == EEXIST) return Change::Unchanged;  // already present (or the device already has a PNETID)
  return kernel_error(*rc, "adding pnet entry " + entry.to_string());
}

Result<Change> NetlinkPnetTable::remove(const PnetId& id) {
  auto msg = client_.message(SMC_PNETID_DEL, NLM_F_ACK);
  if (!msg) return msg.error();
  if (auto st = encode_pnet_name(msg->get(), id); !st) return st.error();
  auto rc = client_.transact(msg->get(), [](const nlmsghdr*) -> Status { return {}; });
  if (!rc) return rc.error();
  if (*rc == 0) return Change::Changed;
  if (*rc == ENOENT) return Change::Unchanged;  // nothing carried that PNETID
  return kernel_error(*rc, "deleting pnet entries of " + id.str());
}

Status NetlinkPnetTable::flush() {
  auto msg = client_.message(SMC_PNETID_FLUSH, NLM_F_ACK);
  if (!msg) return msg.error();
  auto rc = client_.transact(msg->get(), [](const nlmsghdr*) -> Status { return {}; });
  if (!rc) return rc.error();
  if (*rc != 0) return kernel_error(*rc, "flushing the pnet table");
  return {};
}

// --- NetlinkSmcInfo -------------------------------------------------------------------------------

Result<std::unique_ptr<NetlinkSmcInfo>> NetlinkSmcInfo::open(std::chrono::milliseconds timeout) {
  auto c = GenlClient::open(kSmcGenFamily, kNoSmcMessage, timeout);
  if (!c) return c.error();
  return std::unique_ptr<NetlinkSmcInfo>(new NetlinkSmcInfo(std::move(*c)));
}

Status NetlinkSmcInfo::dump(uint8_t cmd, const std::function<Status(const nlmsghdr*)>& on_message) {
  auto msg = client_.message(cmd, NLM_F_DUMP);
  if (!msg) return msg.error();
  auto rc = client_.transact(msg->get(), on_message);
  if (!rc) return rc.error();
  if (*rc != 0) return kernel_error(*rc, "SMC_GEN_NETLINK command " + std::to_string(cmd));
  return {};
}

Result<SmcSystemInfo> NetlinkSmcInfo::system_info() {
  std::optional<SmcSystemInfo> info;
  auto st = dump(SMC_NETLINK_GET_SYS_INFO, [&](const nlmsghdr* h) -> Status {
    auto i = decode_sys_info(h);
    if (!i) return i.error();
    info = std::move(*i);
    return {};
  });
  if (!st) return st.error();
  if (!info) return make_error(ErrorCode::Internal, "SMC_GEN_NETLINK: SYS_INFO dump returned nothing");
  return std::move(*info);
}

Result<std::vector<SmcrLinkGroup>> NetlinkSmcInfo::link_groups() {
  LinkDumpCollector collector;
  auto st = dump(SMC_NETLINK_GET_LINK_SMCR, [&](const nlmsghdr* h) { return collector.add(h); });
  if (!st) return st.error();
  return collector.take();
}

Result<SmcStats> NetlinkSmcInfo::stats() {
  std::optional<SmcStats> stats;
  auto st = dump(SMC_NETLINK_GET_STATS, [&](const nlmsghdr* h) -> Status {
    auto s = decode_stats(h);
    if (!s) return s.error();
    stats = *s;
    return {};
  });
  if (!st) return st.error();
  if (!stats) return make_error(ErrorCode::Internal, "SMC_GEN_NETLINK: STATS dump returned nothing");
  return *stats;
}

Result<FallbackStats> NetlinkSmcInfo::fallback_stats() {
  FallbackStats out;
  auto st = dump(SMC_NETLINK_GET_FBACK_STATS, [&](const nlmsghdr* h) -> Status {
    auto m = decode_fallback(h);
    if (!m) return m.error();
    if (m->server_total) out.server_total = *m->server_total;
    if (m->client_total) out.client_total = *m->client_total;
    out.reasons.push_back(m->reason);
    return {};
  });
  if (!st) return st.error();
  return out;
}

Result<std::vector<Ueid>> NetlinkSmcInfo::ueids() {
  std::vector<Ueid> out;
  auto st = dump(SMC_NETLINK_DUMP_UEID, [&](const nlmsghdr* h) -> Status {
    auto u = decode_ueid_reply(h);
    if (!u) return u.error();
    out.push_back(std::move(*u));
    return {};
  });
  if (!st) return st.error();
  return out;
}

Result<Change> NetlinkSmcInfo::add_ueid(const Ueid& ueid) {
  auto msg = client_.message(SMC_NETLINK_ADD_UEID, NLM_F_ACK);
  if (!msg) return msg.error();
  if (auto st = encode_ueid(msg->get(), ueid); !st) return st.error();
  auto rc = client_.transact(msg->get(), [](const nlmsghdr*) -> Status { return {}; });
  if (!rc) return rc.error();
  if (*rc == 0) return Change::Changed;
  if (*rc == EEXIST) return Change::Unchanged;
  if (*rc == ERANGE) {
    return make_error(ErrorCode::ResourceExhausted,
                      "adding UEID " + ueid.str() + ": the UEID table is full (4 entries); remove one first");
  }
  return kernel_error(*rc, "adding UEID " + ueid.str());
}

Result<Change> NetlinkSmcInfo::remove_ueid(const Ueid& ueid) {
  auto msg = client_.message(SMC_NETLINK_REMOVE_UEID, NLM_F_ACK);
  if (!msg) return msg.error();
  if (auto st = encode_ueid(msg->get(), ueid); !st) return st.error();
  auto rc = client_.transact(msg->get(), [](const nlmsghdr*) -> Status { return {}; });
  if (!rc) return rc.error();
  // EAGAIN (s390 only): the last UEID is gone and the system EID took over; still a removal.
  if (*rc == 0 || *rc == EAGAIN) return Change::Changed;
  if (*rc == ENOENT) return Change::Unchanged;
  return kernel_error(*rc, "removing UEID " + ueid.str());
}

// --- SockDiagSmcStatus ----------------------------------------------------------------------------

Result<std::unique_ptr<SockDiagSmcStatus>> SockDiagSmcStatus::open(std::chrono::milliseconds timeout) {
  auto c = NetlinkChannel::open(NETLINK_SOCK_DIAG, timeout);
  if (!c) return c.error();
  return std::unique_ptr<SockDiagSmcStatus>(new SockDiagSmcStatus(std::move(*c)));
}

Result<std::vector<SmcSocket>> SockDiagSmcStatus::sockets() {
  auto msg = encode_smc_diag_request();
  if (!msg) return msg.error();
  std::vector<SmcSocket> out;
  auto rc = channel_.transact(msg->get(), [&](const nlmsghdr* h) -> Status {
    auto s = decode_smc_diag(h);
    if (!s) return s.error();
    out.push_back(std::move(*s));
    return {};
  });
  if (!rc) return rc.error();
  // sock_diag answers ENOENT when no handler for AF_SMC is registered (smc_diag absent).
  if (*rc == ENOENT) return make_error(ErrorCode::Unavailable, "the kernel has no SMC (module smc_diag not loaded)");
  if (*rc != 0) return kernel_error(*rc, "reading SMC sockets");
  return out;
}

PnetTableOpener netlink_pnet_opener() {
  return []() -> Result<std::unique_ptr<PnetTable>> {
    auto t = NetlinkPnetTable::open();
    if (!t) return t.error();
    return std::unique_ptr<PnetTable>(std::move(*t));
  };
}

SmcInfoOpener netlink_smc_info_opener() {
  return []() -> Result<std::unique_ptr<SmcInfo>> {
    auto i = NetlinkSmcInfo::open();
    if (!i) return i.error();
    return std::unique_ptr<SmcInfo>(std::move(*i));
  };
}

}  // namespace erdma::agent
