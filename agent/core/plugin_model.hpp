// The device plugin's decisions, as pure functions over device snapshots: which slots to advertise
// and with what health and NUMA node, what a container gets for a set of slots, which slots to
// prefer for a request. No gRPC, no verbs, no I/O: the gRPC shell translates to and from kubelet's
// messages.
//
// Slots: each device is advertised as `slotsPerDevice` shareable slots with IDs "<device>-<n>"
// (n = 0..slots-1, decimal), e.g. "erdma_0-17". Kubelet limits device IDs to 63 characters.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "agent/core/rdma_device.hpp"
#include "common/result.hpp"

namespace erdma::agent {

inline constexpr size_t kMaxDeviceIdLen = 63;
// The env variable naming the allocated devices, e.g. ERDMA_DEVICES=erdma_0,erdma_1.
inline constexpr const char* kDevicesEnv = "ERDMA_DEVICES";
// Guards against absurd requests: no container can be given more slots than this.
inline constexpr size_t kMaxIdsPerContainer = 100'000;
inline constexpr size_t kMaxContainersPerRequest = 1024;

// "<device>-<index>".
[[nodiscard]] std::string slot_id(std::string_view device, unsigned index);

// Ok when every slot ID of a device with this name stays within kMaxDeviceIdLen; otherwise
// InvalidArgument saying how long the name may be.
[[nodiscard]] Status check_device_name_fits(std::string_view name, unsigned slots_per_device);

struct SlotRef {
  std::string device;
  unsigned index = 0;
};

// Splits a slot ID. InvalidArgument (naming the ID) when it is not "<device>-<n>" with n a
// decimal below slots_per_device without leading zeros.
[[nodiscard]] Result<SlotRef> parse_slot_id(std::string_view id, unsigned slots_per_device);

struct AdvertisedSlot {
  std::string id;
  std::string device;
  bool healthy = false;
  int numa_node = -1;  // -1: advertise no topology

  friend bool operator==(const AdvertisedSlot&, const AdvertisedSlot&) = default;
};

struct Advertisement {
  std::vector<AdvertisedSlot> slots;  // ordered by device name, then index
  std::vector<std::string> notes;     // devices left out, and why
};

// Every slot of every advertisable device. Devices whose names are invalid or too long for slot
// IDs, and second devices with a name already seen, are left out with a note.
[[nodiscard]] Advertisement advertised_devices(const std::vector<RdmaDevice>& devices, unsigned slots_per_device);

// A char device a container is given (kubelet DeviceSpec).
struct DeviceNode {
  std::string container_path;
  std::string host_path;
  std::string permissions;  // "rw"

  friend bool operator==(const DeviceNode&, const DeviceNode&) = default;
};

struct ContainerAllocation {
  std::vector<std::string> devices;          // distinct device names, sorted
  std::map<std::string, std::string> envs;   // ERDMA_DEVICES=...
  std::vector<DeviceNode> device_nodes;      // uverbs of each device, then rdma_cm
  std::vector<std::string> notes;            // e.g. a device that is unhealthy right now
};

// What one container gets for the slot IDs kubelet allocated to it. `rdma_cm_present` says
// whether the host has /dev/infiniband/rdma_cm (a DeviceSpec for a missing node would stop the
// container from starting). Errors: InvalidArgument for an empty list, malformed or duplicate IDs
// and absurd sizes; NotFound for IDs of devices that are not on the node; FailedPrecondition for
// a device without a uverbs char device. Messages name the offending IDs.
[[nodiscard]] Result<ContainerAllocation> allocate_container(const std::vector<std::string>& ids,
                                                             const std::vector<RdmaDevice>& devices,
                                                             unsigned slots_per_device, bool rdma_cm_present);

struct PreferredRequest {
  std::vector<std::string> available;
  std::vector<std::string> must_include;
  int64_t size = 0;
};

// Chooses `size` IDs out of `available`, always including `must_include`. Packs onto one device
// when one has enough free slots (the fullest device that fits, leaving whole devices for larger
// requests), else onto one NUMA node, else onto as few devices as possible; lowest indices first.
// Deterministic. InvalidArgument for negative or impossible sizes, malformed IDs, or must_include
// IDs that are not available.
[[nodiscard]] Result<std::vector<std::string>> preferred_allocation(const PreferredRequest& request,
                                                                    const std::vector<RdmaDevice>& devices,
                                                                    unsigned slots_per_device);

// The distinct device names behind slot IDs, sorted (PreStartContainer hands these to its hook).
// Same errors as parse_slot_id, plus InvalidArgument for an empty list.
[[nodiscard]] Result<std::vector<std::string>> devices_of(const std::vector<std::string>& ids,
                                                          unsigned slots_per_device);

}  // namespace erdma::agent
