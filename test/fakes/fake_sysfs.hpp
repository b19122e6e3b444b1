// A throwaway sysfs tree under /tmp for tests: create files and symlinks relative to its root,
// removed with everything in it on destruction.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "test/support.hpp"

namespace erdma::agent::testing {

class FakeSysfs {
 public:
  [[nodiscard]] const std::string& root() const noexcept { return dir_.path(); }

  // Writes `content` to root/rel, creating parent directories.
  void file(const std::string& rel, const std::string& content) const {
    const auto p = std::filesystem::path(root()) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }
  void dir(const std::string& rel) const { std::filesystem::create_directories(std::filesystem::path(root()) / rel); }
  void symlink(const std::string& target, const std::string& rel) const {
    const auto p = std::filesystem::path(root()) / rel;
    std::filesystem::create_directories(p.parent_path());
    std::filesystem::create_symlink(target, p);
  }

  // An RDMA device with port 1 ACTIVE and GID entries {index, gid, type} (type "" = unreadable,
  // as the kernel's EINVAL for unused entries).
  struct GidEntry {
    unsigned index;
    std::string gid;
    std::string type;
  };
  void rdma_device(const std::string& name, const std::string& node_type, const std::vector<GidEntry>& gids,
                   const std::string& netdev = "eth0") const {
    const std::string d = "class/infiniband/" + name;
    file(d + "/node_type", node_type + "\n");
    file(d + "/ports/1/state", "4: ACTIVE\n");
    file(d + "/ports/1/link_layer", "Ethernet\n");
    for (const auto& g : gids) {
      file(d + "/ports/1/gids/" + std::to_string(g.index), g.gid + "\n");
      if (!g.type.empty()) file(d + "/ports/1/gid_attrs/types/" + std::to_string(g.index), g.type + "\n");
      file(d + "/ports/1/gid_attrs/ndevs/" + std::to_string(g.index), netdev + "\n");
    }
  }

 private:
  erdma::testing::TempDir dir_{"sysfs"};
};

}  // namespace erdma::agent::testing
