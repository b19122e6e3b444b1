// RDMA netlink (NETLINK_RDMA, the NLDEV client): which kernel driver owns each RDMA device and
// which netdev each port is bound to. The kernel reports a driver id with each device's uverbs
// char device (the id libibverbs matches providers with); it is the only driver name software
// devices such as rxe have. decode_* are pure functions over one netlink message, tested with
// messages built in memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "agent/sys/verbs_rdma_devices.hpp"
#include "common/result.hpp"

struct nlmsghdr;

namespace erdma::agent {

// Driver name for a kernel rdma_driver_id (uapi rdma/ib_user_ioctl_verbs.h), "" when unknown.
[[nodiscard]] std::string_view rdma_driver_name(uint64_t driver_id) noexcept;

struct NldevDevice {
  uint32_t index = 0;
  std::string name;
};
struct NldevChardev {
  std::string name;        // e.g. "uverbs0"
  uint64_t driver_id = 0;  // 0 = RDMA_DRIVER_UNKNOWN (also when the kernel sent none)
};

// An RDMA_NLDEV_CMD_GET reply: device index and name. InvalidArgument when either is missing or
// malformed (wrong size, name not NUL-terminated).
[[nodiscard]] Result<NldevDevice> decode_nldev_device(const nlmsghdr* msg);
struct NldevPort {
  uint32_t device_index = 0;
  uint32_t port = 0;
  std::string netdev;  // "" when the port has no netdev
};
// An RDMA_NLDEV_CMD_PORT_GET reply: device index, port number and, when bound, the netdev name.
// InvalidArgument when the index or port is missing or malformed.
[[nodiscard]] Result<NldevPort> decode_nldev_port(const nlmsghdr* msg);

// An RDMA_NLDEV_CMD_GET_CHARDEV reply for the "uverbs" type: char device name and driver id
// (4- or 8-byte attribute). InvalidArgument when the name is missing or malformed.
[[nodiscard]] Result<NldevChardev> decode_nldev_chardev(const nlmsghdr* msg);

// The RDMA subsystem's network namespace mode (`rdma system show`): Shared, the kernel's default,
// shows every RDMA device in every network namespace; Exclusive shows a device only in the one
// namespace it belongs to (the initial one until it is moved), so a pod on the pod network cannot
// open a card of the node's namespace.
enum class RdmaNetnsMode { Shared, Exclusive };
[[nodiscard]] std::string_view to_string(RdmaNetnsMode mode) noexcept;

// An RDMA_NLDEV_CMD_SYS_GET reply: the u8 RDMA_NLDEV_SYS_ATTR_NETNS_MODE, 1 shared, 0 exclusive.
// InvalidArgument when it is missing, not one byte, or another value.
[[nodiscard]] Result<RdmaNetnsMode> decode_nldev_sys(const nlmsghdr* msg);

// Asks the kernel for the mode (one SYS_GET, bounded by 2 s). Unavailable when RDMA netlink is
// missing (no RDMA core module) or the kernel does not answer (before Linux 5.2, which has no mode).
[[nodiscard]] Result<RdmaNetnsMode> read_rdma_netns_mode();

// Asks the kernel over RDMA netlink. Every receive is bounded (2 s). Errors: Unavailable when
// RDMA netlink is missing (no RDMA core module).
class NetlinkDeviceInfo final : public KernelDeviceInfo {
 public:
  [[nodiscard]] Result<std::vector<KernelDevice>> devices() override;
};

}  // namespace erdma::agent
