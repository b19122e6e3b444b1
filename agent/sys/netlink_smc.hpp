// The kernel-backed SMC clients: NetlinkPnetTable (SMC_PNETID), NetlinkSmcInfo (SMC_GEN_NETLINK),
// SockDiagSmcStatus (NETLINK_SOCK_DIAG). Each owns one netlink socket, opened in the calling
// thread's network namespace and bound to it for its lifetime; not thread-safe (one user at a time).
// open() fails with Unavailable and kNoSmcMessage when the kernel has no SMC.
#pragma once

#include <functional>
#include <memory>

#include "agent/sys/netlink.hpp"
#include "agent/sys/pnet_table.hpp"
#include "agent/sys/smc_info.hpp"
#include "agent/sys/smc_status.hpp"

namespace erdma::agent {

class NetlinkPnetTable final : public PnetTable {
 public:
  [[nodiscard]] static Result<std::unique_ptr<NetlinkPnetTable>> open(
      std::chrono::milliseconds timeout = kNetlinkTimeout);

  // PnetTable
  [[nodiscard]] Result<std::vector<PnetEntry>> list() override;
  [[nodiscard]] Result<Change> add(const PnetEntry& entry) override;
  [[nodiscard]] Result<Change> remove(const PnetId& id) override;
  [[nodiscard]] Status flush() override;

 private:
  explicit NetlinkPnetTable(GenlClient c) : client_(std::move(c)) {}
  GenlClient client_;
};

class NetlinkSmcInfo final : public SmcInfo {
 public:
  [[nodiscard]] static Result<std::unique_ptr<NetlinkSmcInfo>> open(
      std::chrono::milliseconds timeout = kNetlinkTimeout);

  // SmcInfo
  [[nodiscard]] Result<SmcSystemInfo> system_info() override;
  [[nodiscard]] Result<std::vector<SmcrLinkGroup>> link_groups() override;
  [[nodiscard]] Result<SmcStats> stats() override;
  [[nodiscard]] Result<FallbackStats> fallback_stats() override;
  [[nodiscard]] Result<std::vector<Ueid>> ueids() override;
  [[nodiscard]] Result<Change> add_ueid(const Ueid& ueid) override;
  [[nodiscard]] Result<Change> remove_ueid(const Ueid& ueid) override;

 private:
  explicit NetlinkSmcInfo(GenlClient c) : client_(std::move(c)) {}
  Status dump(uint8_t cmd, const std::function<Status(const nlmsghdr*)>& on_message);
  GenlClient client_;
};

class SockDiagSmcStatus final : public SmcStatus {
 public:
  [[nodiscard]] static Result<std::unique_ptr<SockDiagSmcStatus>> open(
      std::chrono::milliseconds timeout = kNetlinkTimeout);

  // SmcStatus. Unavailable with kNoSmcMessage (naming smc_diag) when the kernel cannot report.
  [[nodiscard]] Result<std::vector<SmcSocket>> sockets() override;

 private:
  explicit SockDiagSmcStatus(NetlinkChannel c) : channel_(std::move(c)) {}
  NetlinkChannel channel_;
};

// Openers: a new client in the calling thread's network namespace (the agent opens one per use,
// possibly inside a pod's namespace; tests substitute fakes).
using PnetTableOpener = std::function<Result<std::unique_ptr<PnetTable>>()>;
using SmcInfoOpener = std::function<Result<std::unique_ptr<SmcInfo>>()>;
[[nodiscard]] PnetTableOpener netlink_pnet_opener();
[[nodiscard]] SmcInfoOpener netlink_smc_info_opener();

}  // namespace erdma::agent
