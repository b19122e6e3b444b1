// PCI addresses from sysfs and IPv4 addresses from getifaddrs (see dra_node_facts.hpp).
#include "agent/sys/dra_node_facts.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
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

}  // namespace sysfs

std::map<std::string, std::string> ipv4_by_netdev(std::vector<std::string>& notes) {
  std::map<std::string, std::string> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    notes.push_back(std::string("no IPv4 addresses: getifaddrs: ") + std::strerror(errno));
    return out;
  }
  for (const ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET || a->ifa_name == nullptr) continue;
    sockaddr_in sin{};
    std::memcpy(&sin, a->ifa_addr, sizeof sin);
    char text[INET_ADDRSTRLEN] = {};
    if (inet_ntop(AF_INET, &sin.sin_addr, text, sizeof text) == nullptr) continue;
    out.emplace(a->ifa_name, text);  // the first address of an interface wins
  }
  freeifaddrs(list);
  return out;
}

}  // namespace erdma::agent
