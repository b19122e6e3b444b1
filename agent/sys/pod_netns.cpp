// Pod network namespace setup (see pod_netns.hpp).
#include "agent/sys/pod_netns.hpp"

#include <algorithm>
#include <cstdlib>
#include <fcntl.h>
#include <linux/netlink.h>
#include <sys/utsname.h>

#include "agent/sys/netlink.hpp"
#include "agent/sys/rdma_netlink.hpp"
#include "agent/sys/sysfs_rdma.hpp"
#include "common/unique_fd.hpp"

namespace erdma::agent {

KernelPodNetns::KernelPodNetns(Netns& netns, PnetTableOpener open_table)
    : netns_(netns), open_table_(std::move(open_table)) {}

Result<PodNetnsReport> KernelPodNetns::configure(const NetnsRef& ns, const PodNetnsPlan& plan,
                                                 std::chrono::steady_clock::time_point deadline) {
  // Shared with the worker: after a deadline the worker may still run and must find its state.
  auto report = std::make_shared<PodNetnsReport>();
  auto opener = open_table_;
  ERDMA_TRY(netns_.run(
      ns,
      [report, plan, opener]() -> Status {
        ERDMA_TRY_ASSIGN(auto table, opener());
        // Without a PNETID the kernel takes the RDMA port whose netdev is the pod's interface.
        report->own_rdma_device = own_rdma_device(plan.entry.device).name;
        if (report->own_rdma_device.empty()) {
          ERDMA_TRY_ASSIGN(auto added, table->add(plan.entry));
          report->pnet = added;
        }
        std::string failures;
        ErrorCode first = ErrorCode::Internal;
        for (const auto& [name, value] : plan.sysctls) {
          if (auto w = write_sysctl(name, value, plan.proc_root); !w) {
            if (failures.empty()) first = w.error().code;
            failures += (failures.empty() ? "" : "; ") + w.error().message;
            continue;
          }
          report->sysctls_set.push_back(name + "=" + value);
        }
        if (plan.tcp2smc && plan.sysctls.count(kTcp2SmcSysctl) == 0) {
          // Only some kernels have it: absence is the normal case, not an error.
          if (auto w = write_sysctl(kTcp2SmcSysctl, "1", plan.proc_root); w) {
            report->sysctls_set.push_back(std::string(kTcp2SmcSysctl) + "=1");
          } else if (w.error().code != ErrorCode::NotFound) {
            if (failures.empty()) first = w.error().code;
            failures += (failures.empty() ? "" : "; ") + w.error().message;
          }
        }
        // A sysctl the kernel does not have is a configuration problem, not a vanished pod.
        if (!failures.empty())
          return make_error(first == ErrorCode::NotFound ? ErrorCode::FailedPrecondition : first, failures);
        return {};
      },
      deadline));
  return *report;
}

}  // namespace erdma::agent

namespace erdma::agent {
namespace {

// What the pod's netns says, before the lower device's name is known.
struct PodSide {
  bool found = false;
  std::string kind;
  std::vector<Ipv4Prefix> addresses;
  int lower_index = 0;
  bool lower_elsewhere = false;      // IFLA_LINK_NETNSID was sent
  bool lower_in_node_netns = false;  // ... and it is the node's netns
  std::string lower_local;           // the lower's name when it is in the pod's own netns
  bool pnet_entry = false;
  std::string rdma_device;  // the RDMA device bound to the interface in the pod's netns
  std::string rdma_driver;
};

std::vector<Ipv4Prefix> addresses_of(const std::vector<RtIpv4Address>& all, int index) {
  std::vector<Ipv4Prefix> out;
  for (const auto& a : all) {
    if (a.index == index) out.push_back(Ipv4Prefix{a.address, a.prefix_len});
  }
  return out;
}

}  // namespace

OwnRdmaDevice own_rdma_device(const std::string& interface) {
  // Asked from inside the pod's netns, RDMA netlink names a port's netdev only when that netdev
  // is here: a port bound to the pod's interface is the pod's own RDMA device. Without RDMA
  // netlink there is none to find.
  OwnRdmaDevice own;
  if (auto devs = NetlinkDeviceInfo{}.devices()) {
    for (const auto& d : *devs) {
      for (const auto& [port, netdev] : d.port_netdevs) {
        if (netdev == interface && own.name.empty()) own = OwnRdmaDevice{d.name, d.driver};
      }
    }
  }
  return own;
}

RdmaDeviceLister sysfs_rdma_lister(std::string sysfs_root) {
  return [root = std::move(sysfs_root)]() -> Result<std::vector<RdmaDevice>> {
    sysfs::SysfsRdmaReader reader(root);
    std::vector<RdmaDevice> out;
    if (!reader.has_infiniband_class()) return out;
    auto names = reader.device_names();
    if (!names) return out;
    const auto uverbs = reader.uverbs_by_device();
    for (const auto& name : *names) {
      if (auto d = reader.read_device(name, uverbs)) out.push_back(std::move(d->device));
    }
    // The kernel's driver names (sysfs has none for software devices such as rxe), and which
    // devices' netdevs live in another netns (pods' own devices: not the node's).
    NetlinkDeviceInfo kernel;
    if (auto k = kernel.devices()) {
      std::vector<RdmaDevice> node;
      for (auto& d : out) {
        auto kd = std::find_if(k->begin(), k->end(), [&](const KernelDevice& x) { return x.name == d.name; });
        if (kd != k->end() && netdev_in_other_netns(d.netdev, *kd)) continue;
        if (kd != k->end()) merge_kernel_info(d, *kd);
        node.push_back(std::move(d));
      }
      out = std::move(node);
    }
    return out;
  };
}

KernelPodNetworkInspector::KernelPodNetworkInspector(Netns& netns, NetnsRef node, RdmaDeviceLister devices,
                                                     PnetTableOpener open_table, SmcInfoOpener open_info)
    : netns_(netns),
      node_(std::move(node)),
      devices_(std::move(devices)),
      open_table_(std::move(open_table)),
      open_info_(std::move(open_info)) {}

Result<SmcrPodFacts> KernelPodNetworkInspector::gather(const std::optional<NetnsRef>& pod, const std::string& interface,
                                                       const std::string& pnet_id,
                                                       std::chrono::steady_clock::time_point deadline) {
  SmcrPodFacts facts;
  facts.host_network = !pod.has_value();
  facts.interface = interface;
  // Shared with the workers: after a deadline a worker may still run and must find its state.
  auto side = std::make_shared<PodSide>();
  if (pod) {
    auto opener = open_table_;
    const std::string node_path = node_.path;
    auto st = netns_.run(
        *pod,
        [side, interface, pnet_id, opener, node_path]() -> Status {
          ERDMA_TRY_ASSIGN(auto ch, NetlinkChannel::open(NETLINK_ROUTE));
          ERDMA_TRY_ASSIGN(auto links, dump_links(ch));
          auto it = std::find_if(links.begin(), links.end(), [&](const RtLink& l) { return l.name == interface; });
          if (it == links.end()) return {};
          side->found = true;
          side->kind = it->kind;
          side->lower_index = it->link;
          ERDMA_TRY_ASSIGN(auto addrs, dump_ipv4_addresses(ch));
          side->addresses = addresses_of(addrs, it->index);
          const auto own = own_rdma_device(interface);
          side->rdma_device = own.name;
          side->rdma_driver = own.driver;
          if (it->link_netnsid) {
            side->lower_elsewhere = true;
            // Is the lower's netns the node's? Ask for the id this netns gives the node's netns.
            int fd = ::open(node_path.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
              common::UniqueFd owned(fd);
              auto id = netnsid_of(ch, fd);
              side->lower_in_node_netns = id && *id && **id == *it->link_netnsid;
            }
          } else if (it->link != 0) {
            for (const auto& l : links) {
              if (l.index == it->link) side->lower_local = l.name;
            }
          }
          // Without SMC there is no pnet table: no entry.
          if (auto table = opener()) {
            if (auto entries = (*table)->list()) {
              for (const auto& e : *entries) {
                if (e.kind == PnetEntryKind::Eth && e.device == interface &&
                    (pnet_id.empty() || e.pnet_id.str() == pnet_id)) {
                  side->pnet_entry = true;
                }
              }
            }
          }
          return {};
        },
        deadline);
    if (!st) return st.error();
    facts.kind = side->found ? link_kind_of(side->kind) : PodLinkKind::Missing;
    facts.kind_name = side->kind;
    facts.addresses = side->addresses;
    facts.pod_pnet_entry = side->pnet_entry;
    facts.pod_rdma_device = side->rdma_device;
    facts.pod_rdma_kind = driver_kind_of(!side->rdma_driver.empty()               ? side->rdma_driver
                                         : side->rdma_device.rfind("rxe", 0) == 0 ? "rxe"
                                                                                  : "");
  }
  utsname uts{};
  if (::uname(&uts) == 0) facts.kernel_major = std::atoi(uts.release);

  ERDMA_TRY_ASSIGN(auto devices, devices_());
  struct NodeSide {
    std::vector<NodeRdmaNetdev> rdma;
    std::string lower;
    bool ueid = false;
    std::string smcd_pnet_id;
  };
  auto node = std::make_shared<NodeSide>();
  for (const auto& d : devices) {
    if (d.netdev.empty()) continue;
    NodeRdmaNetdev n;
    n.netdev = d.netdev;
    n.ib_device = d.name;
    n.kind = driver_kind_of(!d.driver.empty() ? d.driver : d.name.rfind("rxe", 0) == 0 ? "rxe" : "");
    for (const auto& p : d.ports) {
      for (const auto& g : p.gids) {
        if (g.type == GidType::IbRoceV1 && (g.netdev.empty() || g.netdev == d.netdev)) n.roce_v1_gids = true;
      }
    }
    node->rdma.push_back(std::move(n));
  }
  const int lower_index = side->lower_in_node_netns ? side->lower_index : 0;
  auto info_opener = open_info_;
  auto table_opener = open_table_;
  const std::string loopback = sysfs::SysfsRdmaReader().smcd_loopback_device();
  ERDMA_TRY(netns_.run(
      node_,
      [node, lower_index, info_opener, table_opener, loopback]() -> Status {
        ERDMA_TRY_ASSIGN(auto ch, NetlinkChannel::open(NETLINK_ROUTE));
        ERDMA_TRY_ASSIGN(auto links, dump_links(ch));
        ERDMA_TRY_ASSIGN(auto addrs, dump_ipv4_addresses(ch));
        for (auto& n : node->rdma) {
          for (const auto& l : links) {
            if (l.name == n.netdev) n.addresses = addresses_of(addrs, l.index);
          }
        }
        for (const auto& l : links) {
          if (lower_index != 0 && l.index == lower_index) node->lower = l.name;
        }
        // The UEID table is global; without SMC it is empty.
        if (auto info = info_opener()) {
          if (auto u = (*info)->ueids()) node->ueid = !u->empty();
        }
        // A PNETID on the SMC-D loopback device (IB entries live in the initial netns only).
        if (!loopback.empty() && table_opener) {
          if (auto table = table_opener()) {
            if (auto entries = (*table)->list()) {
              for (const auto& e : *entries) {
                if (e.kind == PnetEntryKind::Ib && e.device == loopback) node->smcd_pnet_id = e.pnet_id.str();
              }
            }
          }
        }
        return {};
      },
      deadline));
  facts.rdma = node->rdma;
  facts.ueid_set = node->ueid;
  facts.smcd_loopback_device = loopback;
  facts.smcd_loopback_pnet_id = node->smcd_pnet_id;
  if (side->lower_in_node_netns) {
    facts.lower = node->lower;
    facts.lower_in_node_netns = !node->lower.empty();
  } else if (!side->lower_elsewhere) {
    facts.lower = side->lower_local;  // in the pod's own netns: not the node's RDMA netdev
  }
  return facts;
}

}  // namespace erdma::agent
