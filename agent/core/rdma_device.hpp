// What the agent knows about one RDMA device: plain values filled in by a discovery source
// (libibverbs + sysfs/netlink on a node, the config file for the static source, fakes in tests).
// Pure: no I/O here.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace erdma::agent {

// IB port states as the kernel numbers them (enum ib_port_state; sysfs prints "4: ACTIVE").
enum class PortState { Unknown = 0, Down = 1, Init = 2, Armed = 3, Active = 4, ActiveDefer = 5 };

// "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER" (and "UNKNOWN").
[[nodiscard]] std::string_view to_string(PortState state) noexcept;
// The names above, case-insensitive ("active" works too); nullopt otherwise.
[[nodiscard]] std::optional<PortState> parse_port_state_name(std::string_view name) noexcept;

// GID entry types (sysfs gid_attrs/types: "IB/RoCE v1" or "RoCE v2").
enum class GidType { Unknown, IbRoceV1, RoceV2 };
[[nodiscard]] std::string_view to_string(GidType type) noexcept;

struct Gid {
  unsigned index = 0;
  std::string address;  // "fe80:0000:0000:0000:0216:3eff:fe00:0001", as sysfs prints it
  GidType type = GidType::Unknown;
  std::string netdev;  // the netdev the GID belongs to (RoCE), "" when the kernel has none

  friend bool operator==(const Gid&, const Gid&) = default;
};

struct RdmaPort {
  unsigned number = 1;  // 1-based, as in verbs
  PortState state = PortState::Unknown;
  std::string link_layer;  // "Ethernet", "InfiniBand"; "" when unknown
  std::vector<Gid> gids;   // valid entries only (all-zero entries are left out)

  friend bool operator==(const RdmaPort&, const RdmaPort&) = default;
};

struct RdmaDevice {
  std::string name;    // IB device name, e.g. "erdma_0"
  std::string driver;  // kernel driver / verbs provider, e.g. "erdma", "rxe"
  std::string uverbs;  // char device name under /dev/infiniband, e.g. "uverbs0"; "" = none
  std::string netdev;  // the Ethernet device it is bound to, e.g. "eth0"; "" when unknown
  int numa_node = -1;  // -1 = unknown / no NUMA
  std::vector<RdmaPort> ports;

  friend bool operator==(const RdmaDevice&, const RdmaDevice&) = default;
};

// Where containers (and the host) find the verbs char devices.
inline constexpr std::string_view kInfinibandDevDir = "/dev/infiniband";
inline constexpr std::string_view kRdmaCmPath = "/dev/infiniband/rdma_cm";

// A device is healthy when it has a uverbs char device and at least one port is ACTIVE (or
// ACTIVE_DEFER, which the kernel treats as active). Any other state, in either direction, is
// re-evaluated on every scan, so a device that comes back is healthy again.
[[nodiscard]] bool is_healthy(const RdmaDevice& device) noexcept;

// "/dev/infiniband/uverbsN" for the device ("" when it has no uverbs char device).
[[nodiscard]] std::string uverbs_path(const RdmaDevice& device);

// True for names a uverbs char device can have: "uverbs" followed by decimal digits.
[[nodiscard]] bool is_uverbs_name(std::string_view name) noexcept;

// True for IB device names the agent accepts: 1..63 chars of [A-Za-z0-9_.-] (the kernel allows
// IB_DEVICE_NAME_MAX-1 = 63; the rest keeps device IDs, env values and paths unambiguous).
[[nodiscard]] bool is_device_name(std::string_view name) noexcept;

}  // namespace erdma::agent
