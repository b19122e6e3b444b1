// What an SMC-R pod's network namespace gets: an ETH pnet entry for the pod's interface and the
// configured net.smc.* sysctls (plus net.smc.tcp2smc=1 on kernels that have it). The work runs on
// a thread that joined the namespace, so the netlink socket and the /proc/sys/net files it opens
// belong to the pod.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/core/pnet.hpp"
#include "agent/core/rdma_device.hpp"
#include "agent/core/smcr_feasibility.hpp"
#include "agent/sys/netlink_smc.hpp"
#include "agent/sys/netns.hpp"

namespace erdma::agent {

// net.smc.tcp2smc: on kernels that have it (Alibaba Cloud Linux), every TCP socket of the
// namespace becomes SMC, even in statically linked programs the preload library cannot reach.
inline constexpr const char* kTcp2SmcSysctl = "net.smc.tcp2smc";

struct PodNetnsPlan {
  PnetEntry entry;                             // e.g. ERDMA eth eth0
  std::map<std::string, std::string> sysctls;  // validated net.smc.* names and values
  bool tcp2smc = true;                         // also set net.smc.tcp2smc=1 where it exists
  std::string proc_root = "/proc";
};

struct PodNetnsReport {
  Change pnet = Change::Unchanged;
  // The pod's interface carries an RDMA device of its own (named here): no pnet entry was added,
  // since a PNETID on the interface that its own device lacks would hide that device from SMC.
  std::string own_rdma_device;
  std::vector<std::string> sysctls_set;  // "net.smc.wmem=262144", in order
};

// The RDMA device whose port is bound to `interface` in the calling thread's network namespace
// (RDMA netlink names a port's netdev only to a socket in that netdev's netns), or an empty name.
struct OwnRdmaDevice {
  std::string name;
  std::string driver;  // the kernel's driver name, "" when unknown
};
[[nodiscard]] OwnRdmaDevice own_rdma_device(const std::string& interface);

class PodNetnsConfigurator {
 public:
  virtual ~PodNetnsConfigurator() = default;
  // Applies `plan` inside `ns`. Idempotent. Errors: those of Netns::run (NotFound when the
  // namespace vanished, DeadlineExceeded), of the pnet table (Unavailable without SMC), and for
  // sysctls the first failure after trying them all (the message lists every failure).
  [[nodiscard]] virtual Result<PodNetnsReport> configure(const NetnsRef& ns, const PodNetnsPlan& plan,
                                                         std::chrono::steady_clock::time_point deadline) = 0;
};

// The kernel implementation: Netns::run + the pnet table + sysctl files under plan.proc_root.
class KernelPodNetns final : public PodNetnsConfigurator {
 public:
  // `netns` must outlive this object.
  KernelPodNetns(Netns& netns, PnetTableOpener open_table);
  [[nodiscard]] Result<PodNetnsReport> configure(const NetnsRef& ns, const PodNetnsPlan& plan,
                                                 std::chrono::steady_clock::time_point deadline) override;

 private:
  Netns& netns_;
  PnetTableOpener open_table_;
};

// The facts predict_smcr() needs, from the kernel: the pod interface's kind, IPv4 addresses and
// lower device (rtnetlink inside the pod's netns), the pod's pnet entry, the node's RDMA netdevs
// with their addresses (rtnetlink in the node's netns) and whether the UEID table has an entry.
class PodNetworkInspector {
 public:
  virtual ~PodNetworkInspector() = default;
  // `pod`: the pod's netns, or nullopt for a host-network pod. `interface`: smcr.podInterface.
  // `pnet_id`: the PNETID the pod's entry must carry ("" accepts any). Errors: those of
  // Netns::run (NotFound, DeadlineExceeded), and of the netlink dumps.
  [[nodiscard]] virtual Result<SmcrPodFacts> gather(const std::optional<NetnsRef>& pod, const std::string& interface,
                                                    const std::string& pnet_id,
                                                    std::chrono::steady_clock::time_point deadline) = 0;
};

// The node's RDMA devices (with driver and netdev), as device discovery reports them.
using RdmaDeviceLister = std::function<Result<std::vector<RdmaDevice>>()>;
// sysfs under `sysfs_root` plus the kernel's driver names over RDMA netlink (rxe has no bus
// driver). A node without RDMA is an empty list.
[[nodiscard]] RdmaDeviceLister sysfs_rdma_lister(std::string sysfs_root = "/sys");

// The kernel implementation: Netns::run into the pod's and the node's netns, rtnetlink dumps,
// the pod's pnet table and the UEID table.
class KernelPodNetworkInspector final : public PodNetworkInspector {
 public:
  // `netns` must outlive this object. `node`: the node's netns (<procRoot>/1/ns/net).
  KernelPodNetworkInspector(Netns& netns, NetnsRef node, RdmaDeviceLister devices, PnetTableOpener open_table,
                            SmcInfoOpener open_info);
  [[nodiscard]] Result<SmcrPodFacts> gather(const std::optional<NetnsRef>& pod, const std::string& interface,
                                            const std::string& pnet_id,
                                            std::chrono::steady_clock::time_point deadline) override;

 private:
  Netns& netns_;
  NetnsRef node_;
  RdmaDeviceLister devices_;
  PnetTableOpener open_table_;
  SmcInfoOpener open_info_;
};

}  // namespace erdma::agent
