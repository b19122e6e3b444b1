// What the DRA driver's ResourceSlices say about each card beyond the device scan (SliceFacts in
// agent/core/dra_slices.hpp): its PCI address and PCIe root, from sysfs, and its netdev's IPv4 address, from the
// kernel's interface list in the agent's network namespace (the node's: the agent runs with
// hostNetwork).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/core/dra_claim.hpp"
#include "agent/core/rdma_device.hpp"

namespace erdma::agent::sysfs {

// card -> extended BDF ("0000:00:05.0"): the last part of the target of the symlink
// <root>/class/infiniband/<card>/device. A card whose link is missing or does not end in a PCI
// address (a software device such as rxe) gets no entry and a note in `notes`.
[[nodiscard]] std::map<std::string, std::string> pci_addresses(const std::string& root,
                                                               const std::vector<std::string>& cards,
                                                               std::vector<std::string>& notes);

// card -> the PCI root complex it sits under ("pci0000:00"): the link <root>/class/infiniband/
// <card>/device resolved through every symlink (canonical, so it needs the real tree, as sysfs
// is), taken relative to the resolved <root> and read by pcie_root_of (dra_slices.hpp). A card
// whose link is missing or resolves outside a root complex (a software device) gets no entry and a
// note in `notes`.
[[nodiscard]] std::map<std::string, std::string> pcie_roots(const std::string& root,
                                                            const std::vector<std::string>& cards,
                                                            std::vector<std::string>& notes);

}  // namespace erdma::agent::sysfs

namespace erdma::agent {

// netdev -> its first IPv4 address ("10.0.0.5"), from getifaddrs(3) in the caller's network
// namespace. Interfaces without one are absent; an error of getifaddrs gives an empty map and a note.
[[nodiscard]] std::map<std::string, std::string> ipv4_by_netdev(std::vector<std::string>& notes);

// card -> its netdev's network data for a claim's status (dra_claim.hpp CardNetwork): the
// interface name, every address as CIDR ("10.0.0.5/24", IPv4 first, then IPv6 other than
// link-local) from getifaddrs(3), and the MAC from <sys_root>/class/net/<netdev>/address. Cards
// without a netdev are absent.
[[nodiscard]] std::map<std::string, CardNetwork> card_networks(const std::vector<RdmaDevice>& cards,
                                                               const std::string& sys_root);

// The interface a pod's traffic leaves by, among interface -> IPv4 addresses: eth0 when it has
// one, else the first other interface but lo (by name) that has one. Pure.
[[nodiscard]] std::optional<std::string> pick_pod_interface(const std::map<std::string, std::vector<std::string>>& v4);

// What a claim's status says of a pod on the pod network (dra_claim.hpp PodSideStatus): the
// interface pick_pod_interface chooses in the calling thread's network namespace (call it inside
// Netns::run, in the pod's), its addresses as card_networks gives them, and its MAC
// (SIOCGIFHWADDR, since /sys/class/net shows the namespace sysfs was mounted in). NotFound when no
// interface but lo has an IPv4 address; Unavailable when the interfaces cannot be listed.
[[nodiscard]] Result<CardNetwork> pod_interface_network();

}  // namespace erdma::agent
