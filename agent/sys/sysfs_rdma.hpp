// Reading RDMA devices from sysfs (Documentation/ABI/stable/sysfs-class-infiniband):
//   class/infiniband/<dev>/ports/<p>/{state,link_layer,gids/<i>,gid_attrs/{types,ndevs}/<i>},
//   class/infiniband/<dev>/device/{numa_node,driver}, class/infiniband_verbs/uverbsN/ibdev.
// The parsers are pure functions; SysfsRdmaReader walks a tree under a root directory ("/sys" on
// a node, a recorded tree in tests). Nothing here opens a verbs device.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/core/rdma_device.hpp"
#include "common/result.hpp"

namespace erdma::agent::sysfs {

// "4: ACTIVE\n" -> Active. The number decides; the name must match it. InvalidArgument otherwise.
[[nodiscard]] Result<PortState> parse_port_state(std::string_view text);
// "0\n" -> 0, "-1\n" -> -1 (no NUMA). InvalidArgument for anything else.
[[nodiscard]] Result<int> parse_numa_node(std::string_view text);
// "RoCE v2\n" -> RoceV2, "IB/RoCE v1\n" -> IbRoceV1. InvalidArgument otherwise.
[[nodiscard]] Result<GidType> parse_gid_type(std::string_view text);
// "fe80:0000:0000:0000:0216:3eff:fe00:0001\n" -> the address without the newline.
// InvalidArgument unless it is eight groups of four hex digits.
[[nodiscard]] Result<std::string> parse_gid(std::string_view text);
// True for an all-zero GID (an unused table entry).
[[nodiscard]] bool is_zero_gid(std::string_view gid) noexcept;
// Text with surrounding blanks and newlines removed.
[[nodiscard]] std::string trim(std::string_view text);

struct DeviceRead {
  RdmaDevice device;
  std::vector<std::string> notes;  // parts that could not be read, and what was assumed instead
};

class SysfsRdmaReader {
 public:
  explicit SysfsRdmaReader(std::string root = "/sys") : root_(std::move(root)) {}

  // <root>/class/infiniband exists (an RDMA core is loaded with at least one device class).
  [[nodiscard]] bool has_infiniband_class() const;
  // IB device names under <root>/class/infiniband, sorted. NotFound when the directory is missing.
  [[nodiscard]] Result<std::vector<std::string>> device_names() const;
  // ibdev name -> "uverbsN", from <root>/class/infiniband_verbs/uverbs*/ibdev (empty if missing).
  [[nodiscard]] std::map<std::string, std::string> uverbs_by_device() const;
  // Everything sysfs says about one device. NotFound when it has no directory; unreadable or
  // malformed parts become notes (a port whose state cannot be read is Unknown, so unhealthy),
  // so one bad file never hides a device. `uverbs` comes from uverbs_by_device().
  [[nodiscard]] Result<DeviceRead> read_device(const std::string& name,
                                               const std::map<std::string, std::string>& uverbs) const;

  // The kernel's SMC-D loopback device (DIBS_LO, 7.x: "lo"): the first device under
  // <root>/class/dibs whose link points into devices/virtual/ (a hardware ISM device hangs off its
  // bus). "" when there is none, or the kernel has no DIBS class.
  [[nodiscard]] std::string smcd_loopback_device() const;

  [[nodiscard]] const std::string& root() const noexcept { return root_; }

 private:
  std::string root_;
};

}  // namespace erdma::agent::sysfs
