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
  ERDMA_TRY_ASSIGN(auto c, GenlClient::open(kPnetFamily, kNoSmcMessage, timeout));
  return std::unique_ptr<NetlinkPnetTable>(new NetlinkPnetTable(std::move(c)));
}

Result<std::vector<PnetEntry>> NetlinkPnetTable::list() {
  ERDMA_TRY_ASSIGN(auto msg, client_.message(SMC_PNETID_GET, NLM_F_DUMP));
  std::vector<PnetEntry> out;
  ERDMA_TRY_ASSIGN(auto rc, client_.transact(msg.get(), [&](const nlmsghdr* h) -> Status {
    ERDMA_TRY_ASSIGN(auto entries, decode_pnet_reply(h));
    for (auto& e : entries) out.push_back(std::move(e));
    return {};
  }));
  if (rc != 0) return kernel_error(rc, "listing the pnet table");
  return out;
}

Result<Change> NetlinkPnetTable::add(const PnetEntry& entry) {
  ERDMA_TRY_ASSIGN(auto msg, client_.message(SMC_PNETID_ADD, NLM_F_ACK));
  ERDMA_TRY(encode_pnet_add(msg.get(), entry));
  ERDMA_TRY_ASSIGN(auto rc, client_.transact(msg.get(), [](const nlmsghdr*) -> Status { return {}; }));
  if (rc == 0) return Change::Changed;
  if (rc == EEXIST) return Change::Unchanged;  // already present (or the device already has a PNETID)
  return kernel_error(rc, "adding pnet entry " + entry.to_string());
}

Result<Change> NetlinkPnetTable::remove(const PnetId& id) {
  ERDMA_TRY_ASSIGN(auto msg, client_.message(SMC_PNETID_DEL, NLM_F_ACK));
  ERDMA_TRY(encode_pnet_name(msg.get(), id));
  ERDMA_TRY_ASSIGN(auto rc, client_.transact(msg.get(), [](const nlmsghdr*) -> Status { return {}; }));
  if (rc == 0) return Change::Changed;
  if (rc == ENOENT) return Change::Unchanged;  // nothing carried that PNETID
  return kernel_error(rc, "deleting pnet entries of " + id.str());
}

Status NetlinkPnetTable::flush() {
  ERDMA_TRY_ASSIGN(auto msg, client_.message(SMC_PNETID_FLUSH, NLM_F_ACK));
  ERDMA_TRY_ASSIGN(auto rc, client_.transact(msg.get(), [](const nlmsghdr*) -> Status { return {}; }));
  if (rc != 0) return kernel_error(rc, "flushing the pnet table");
  return {};
}

// --- NetlinkSmcInfo -------------------------------------------------------------------------------

Result<std::unique_ptr<NetlinkSmcInfo>> NetlinkSmcInfo::open(std::chrono::milliseconds timeout) {
  ERDMA_TRY_ASSIGN(auto c, GenlClient::open(kSmcGenFamily, kNoSmcMessage, timeout));
  return std::unique_ptr<NetlinkSmcInfo>(new NetlinkSmcInfo(std::move(c)));
}

Status NetlinkSmcInfo::dump(uint8_t cmd, const std::function<Status(const nlmsghdr*)>& on_message) {
  ERDMA_TRY_ASSIGN(auto msg, client_.message(cmd, NLM_F_DUMP));
  ERDMA_TRY_ASSIGN(auto rc, client_.transact(msg.get(), on_message));
  if (rc != 0) return kernel_error(rc, "SMC_GEN_NETLINK command " + std::to_string(cmd));
  return {};
}

Result<SmcSystemInfo> NetlinkSmcInfo::system_info() {
  std::optional<SmcSystemInfo> info;
  ERDMA_TRY(dump(SMC_NETLINK_GET_SYS_INFO, [&](const nlmsghdr* h) -> Status {
    ERDMA_TRY_ASSIGN(auto i, decode_sys_info(h));
    info = std::move(i);
    return {};
  }));
  if (!info) return make_error(ErrorCode::Internal, "SMC_GEN_NETLINK: SYS_INFO dump returned nothing");
  return std::move(*info);
}

Result<std::vector<SmcrLinkGroup>> NetlinkSmcInfo::link_groups() {
  LinkDumpCollector collector;
  ERDMA_TRY(dump(SMC_NETLINK_GET_LINK_SMCR, [&](const nlmsghdr* h) { return collector.add(h); }));
  return collector.take();
}

Result<SmcStats> NetlinkSmcInfo::stats() {
  std::optional<SmcStats> stats;
  ERDMA_TRY(dump(SMC_NETLINK_GET_STATS, [&](const nlmsghdr* h) -> Status {
    ERDMA_TRY_ASSIGN(auto s, decode_stats(h));
    stats = s;
    return {};
  }));
  if (!stats) return make_error(ErrorCode::Internal, "SMC_GEN_NETLINK: STATS dump returned nothing");
  return *stats;
}

Result<FallbackStats> NetlinkSmcInfo::fallback_stats() {
  FallbackStats out;
  ERDMA_TRY(dump(SMC_NETLINK_GET_FBACK_STATS, [&](const nlmsghdr* h) -> Status {
    ERDMA_TRY_ASSIGN(auto m, decode_fallback(h));
    if (m.server_total) out.server_total = *m.server_total;
    if (m.client_total) out.client_total = *m.client_total;
    out.reasons.push_back(m.reason);
    return {};
  }));
  return out;
}

Result<std::vector<Ueid>> NetlinkSmcInfo::ueids() {
  std::vector<Ueid> out;
  ERDMA_TRY(dump(SMC_NETLINK_DUMP_UEID, [&](const nlmsghdr* h) -> Status {
    ERDMA_TRY_ASSIGN(auto u, decode_ueid_reply(h));
    out.push_back(std::move(u));
    return {};
  }));
  return out;
}

Result<Change> NetlinkSmcInfo::add_ueid(const Ueid& ueid) {
  ERDMA_TRY_ASSIGN(auto msg, client_.message(SMC_NETLINK_ADD_UEID, NLM_F_ACK));
  ERDMA_TRY(encode_ueid(msg.get(), ueid));
  ERDMA_TRY_ASSIGN(auto rc, client_.transact(msg.get(), [](const nlmsghdr*) -> Status { return {}; }));
  if (rc == 0) return Change::Changed;
  if (rc == EEXIST) return Change::Unchanged;
  if (rc == ERANGE) {
    return make_error(ErrorCode::ResourceExhausted,
                      "adding UEID " + ueid.str() + ": the UEID table is full (4 entries); remove one first");
  }
  return kernel_error(rc, "adding UEID " + ueid.str());
}

Result<Change> NetlinkSmcInfo::remove_ueid(const Ueid& ueid) {
  ERDMA_TRY_ASSIGN(auto msg, client_.message(SMC_NETLINK_REMOVE_UEID, NLM_F_ACK));
  ERDMA_TRY(encode_ueid(msg.get(), ueid));
  ERDMA_TRY_ASSIGN(auto rc, client_.transact(msg.get(), [](const nlmsghdr*) -> Status { return {}; }));
  // EAGAIN (s390 only): the last UEID is gone and the system EID took over; still a removal.
  if (rc == 0 || rc == EAGAIN) return Change::Changed;
  if (rc == ENOENT) return Change::Unchanged;
  return kernel_error(rc, "removing UEID " + ueid.str());
}

// --- SockDiagSmcStatus ----------------------------------------------------------------------------

Result<std::unique_ptr<SockDiagSmcStatus>> SockDiagSmcStatus::open(std::chrono::milliseconds timeout) {
  ERDMA_TRY_ASSIGN(auto c, NetlinkChannel::open(NETLINK_SOCK_DIAG, timeout));
  return std::unique_ptr<SockDiagSmcStatus>(new SockDiagSmcStatus(std::move(c)));
}

Result<std::vector<SmcSocket>> SockDiagSmcStatus::sockets() {
  ERDMA_TRY_ASSIGN(auto msg, encode_smc_diag_request());
  std::vector<SmcSocket> out;
  ERDMA_TRY_ASSIGN(auto rc, channel_.transact(msg.get(), [&](const nlmsghdr* h) -> Status {
    ERDMA_TRY_ASSIGN(auto s, decode_smc_diag(h));
    out.push_back(std::move(s));
    return {};
  }));
  // sock_diag answers ENOENT when no handler for AF_SMC is registered (smc_diag absent).
  if (rc == ENOENT) return make_error(ErrorCode::Unavailable, "the kernel has no SMC (module smc_diag not loaded)");
  if (rc != 0) return kernel_error(rc, "reading SMC sockets");
  return out;
}

PnetTableOpener netlink_pnet_opener() {
  return []() -> Result<std::unique_ptr<PnetTable>> {
    ERDMA_TRY_ASSIGN(auto t, NetlinkPnetTable::open());
    return std::unique_ptr<PnetTable>(std::move(t));
  };
}

SmcInfoOpener netlink_smc_info_opener() {
  return []() -> Result<std::unique_ptr<SmcInfo>> {
    ERDMA_TRY_ASSIGN(auto i, NetlinkSmcInfo::open());
    return std::unique_ptr<SmcInfo>(std::move(i));
  };
}

}  // namespace erdma::agent
