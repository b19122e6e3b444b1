// PCI addresses and PCIe roots from sysfs, IPv4 addresses from getifaddrs (see dra_node_facts.hpp).
#include "agent/sys/dra_node_facts.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "agent/core/dra_slices.hpp"

namespace erdma::agent {
namespace sysfs {

std::map<std::string, std::string> pci_addresses(const std::string& root, const std::vector<std::string>& cards,
                                                 std::vector<std::string>& notes) {
  std::map<std::string, std::string> out;
  for (const auto& card : cards) {
    const std::filesystem::path link = std::filesystem::path(root) / "class/infiniband" / card / "device";
    std::error_code ec;
    const auto target = std::filesystem::read_symlink(link, ec);
    if (ec) {
      notes.push_back(card + ": no PCI address (" + link.string() + ": " + ec.message() + ")");
      continue;
    }
    const std::string bdf = target.filename().string();
    if (!is_pci_address(bdf)) {
      notes.push_back(card + ": no PCI address (" + link.string() + " points to " + target.string() +
                      ", not a PCI function)");
      continue;
    }
    out.emplace(card, bdf);
  }
  return out;
}

std::map<std::string, std::string> pcie_roots(const std::string& root, const std::vector<std::string>& cards,
                                              std::vector<std::string>& notes) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  // The device link is relative to the card's directory, which is itself a symlink into
  // /sys/devices: only the fully resolved path says where the device sits.
  const auto base = std::filesystem::canonical(root, ec);
  if (ec) {
    notes.push_back("no PCIe roots (" + root + ": " + ec.message() + ")");
    return out;
  }
  for (const auto& card : cards) {
    const std::filesystem::path link = base / "class/infiniband" / card / "device";
    const auto resolved = std::filesystem::canonical(link, ec);
    if (ec) {
      notes.push_back(card + ": no PCIe root (" + link.string() + ": " + ec.message() + ")");
      continue;
    }
    auto found = pcie_root_of(resolved.lexically_relative(base).generic_string());
    if (!found) {
      notes.push_back(card + ": no PCIe root (" + found.error().message + ")");
      continue;
    }
    out.emplace(card, std::move(found).value());
  }
  return out;
}

}  // namespace sysfs

namespace {

int prefix_length(const unsigned char* mask, size_t bytes) {
  int n = 0;
  for (size_t i = 0; i < bytes; ++i) n += __builtin_popcount(mask[i]);
  return n;
}

// Every interface's addresses as CIDR, from one getifaddrs(3) walk: IPv4 first, in the kernel's
// order, then IPv6 other than link-local. Errors: the errno text.
struct InterfaceAddresses {
  std::map<std::string, std::vector<std::string>> v4, v6;
};

Result<InterfaceAddresses> interface_addresses() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return make_error(ErrorCode::Unavailable, std::string("getifaddrs: ") + std::strerror(errno));
  }
  InterfaceAddresses out;
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_name == nullptr) continue;
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ifa_addr->sa_family == AF_INET) {
      sockaddr_in sin{}, mask{};
      std::memcpy(&sin, a->ifa_addr, sizeof sin);
      if (a->ifa_netmask != nullptr) std::memcpy(&mask, a->ifa_netmask, sizeof mask);
      if (inet_ntop(AF_INET, &sin.sin_addr, text, sizeof text) == nullptr) continue;
      const int len = prefix_length(reinterpret_cast<const unsigned char*>(&mask.sin_addr), sizeof mask.sin_addr);
      out.v4[a->ifa_name].push_back(std::string(text) + "/" + std::to_string(len));
    } else if (a->ifa_addr->sa_family == AF_INET6) {
      sockaddr_in6 sin{}, mask{};
      std::memcpy(&sin, a->ifa_addr, sizeof sin);
      if (IN6_IS_ADDR_LINKLOCAL(&sin.sin6_addr)) continue;
      if (a->ifa_netmask != nullptr) std::memcpy(&mask, a->ifa_netmask, sizeof mask);
      if (inet_ntop(AF_INET6, &sin.sin6_addr, text, sizeof text) == nullptr) continue;
      const int len = prefix_length(reinterpret_cast<const unsigned char*>(&mask.sin6_addr), sizeof mask.sin6_addr);
      out.v6[a->ifa_name].push_back(std::string(text) + "/" + std::to_string(len));
    }
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

std::map<std::string, std::string> ipv4_by_netdev(std::vector<std::string>& notes) {
  std::map<std::string, std::string> out;
  auto addrs = interface_addresses();
  if (!addrs) {
    notes.push_back("no IPv4 addresses: " + addrs.error().message);
    return out;
  }
  for (const auto& [netdev, cidrs] : addrs->v4) {
    out.emplace(netdev, cidrs.front().substr(0, cidrs.front().find('/')));  // the first address wins
  }
  return out;
}

std::map<std::string, CardNetwork> card_networks(const std::vector<RdmaDevice>& cards, const std::string& sys_root) {
  // Without the interface list the cards still get their names and MACs.
  auto found = interface_addresses();
  const InterfaceAddresses addrs = found ? std::move(found).value() : InterfaceAddresses{};
  const auto& v4 = addrs.v4;
  const auto& v6 = addrs.v6;
  std::map<std::string, CardNetwork> out;
  for (const auto& card : cards) {
    if (card.netdev.empty()) continue;
    CardNetwork n;
    n.interface_name = card.netdev;
    if (auto it = v4.find(card.netdev); it != v4.end()) n.ips = it->second;
    if (auto it = v6.find(card.netdev); it != v6.end()) n.ips.insert(n.ips.end(), it->second.begin(), it->second.end());
    std::ifstream mac(std::filesystem::path(sys_root) / "class/net" / card.netdev / "address");
    std::string line;
    if (mac && std::getline(mac, line) && line.size() == 17) n.hardware_address = line;
    out.emplace(card.name, std::move(n));
  }
  return out;
}

std::optional<std::string> pick_pod_interface(const std::map<std::string, std::vector<std::string>>& v4) {
  if (auto it = v4.find("eth0"); it != v4.end() && !it->second.empty()) return it->first;
  for (const auto& [name, cidrs] : v4) {
    if (name != "lo" && !cidrs.empty()) return name;
  }
  return std::nullopt;
}

Result<CardNetwork> pod_interface_network() {
  ERDMA_TRY_ASSIGN(const InterfaceAddresses addrs, interface_addresses());
  const auto name = pick_pod_interface(addrs.v4);
  if (!name) return make_error(ErrorCode::NotFound, "no interface but lo has an IPv4 address");
  CardNetwork n;
  n.interface_name = *name;
  n.ips = addrs.v4.at(*name);
  if (auto it = addrs.v6.find(*name); it != addrs.v6.end())
    n.ips.insert(n.ips.end(), it->second.begin(), it->second.end());
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    ifreq req{};
    std::strncpy(req.ifr_name, name->c_str(), IFNAMSIZ - 1);
    if (::ioctl(fd, SIOCGIFHWADDR, &req) == 0) {
      const auto* mac = reinterpret_cast<const unsigned char*>(req.ifr_hwaddr.sa_data);
      char text[18];
      std::snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
      n.hardware_address = text;
    }
    ::close(fd);
  }
  return n;
}

}  // namespace erdma::agent
