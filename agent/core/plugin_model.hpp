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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/core/config.hpp"
#include "agent/core/rdma_device.hpp"
#include "common/result.hpp"

namespace erdma::agent {

inline constexpr size_t kMaxDeviceIdLen = 63;
// The env variable naming the allocated devices, e.g. ERDMA_DEVICES=erdma_0,erdma_1.
inline constexpr const char* kDevicesEnv = "ERDMA_DEVICES";
// NCCL's settings for the allocated devices (NCCL user guide, "Environment Variables"). A leading
// '=' makes NCCL match the listed names exactly instead of as prefixes (erdma_1 would otherwise
// also select erdma_10).
inline constexpr const char* kNcclHcaEnv = "NCCL_IB_HCA";
inline constexpr const char* kNcclGidIndexEnv = "NCCL_IB_GID_INDEX";
inline constexpr const char* kNcclSocketIfnameEnv = "NCCL_SOCKET_IFNAME";
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

// The GID index NCCL should use on a device: the lowest-numbered RoCE v2 entry whose GID is an
// IPv4-mapped address (0000:0000:0000:0000:0000:ffff:XXXX:XXXX), on the lowest-numbered port that
// has one. nullopt when no port has such an entry (iWARP devices, a netdev without IPv4 address).
[[nodiscard]] std::optional<unsigned> ipv4_roce_v2_gid_index(const RdmaDevice& device);

// True for "0000:0000:0000:0000:0000:ffff:XXXX:XXXX" (any hex case), as sysfs prints GIDs.
[[nodiscard]] bool is_ipv4_mapped_gid(std::string_view gid) noexcept;

// A bind mount in the Allocate answer (kubelet passes it to the runtime as a container mount).
struct HostMount {
  std::string container_path;
  std::string host_path;
  bool read_only = true;

  friend bool operator==(const HostMount&, const HostMount&) = default;
};

// What Allocate hands out besides the slots it was asked for.
struct AllocateOptions {
  bool rdma_cm_present = true;      // /dev/infiniband/rdma_cm exists on the host
  bool all_devices = false;         // allocateAllDevices: every device of the node, whatever the slots
  bool nccl_env = true;             // ncclEnv: NCCL_IB_HCA and NCCL_IB_GID_INDEX for the devices
  bool nccl_socket_ifname = false;  // ncclSocketIfname: NCCL_SOCKET_IFNAME = the devices' netdevs
  // The SMC-R preload library's host directory, mounted read-only at contract::kPreloadMountPath
  // in every container ("" = none, smcr.enabled off). The webhook preloads the library exactly in
  // the containers holding the resource, so this mount is how the file gets there.
  std::string preload_host_dir;
  // The SMC-R resource: the library mount is the whole answer. No device node, no env: SMC-R runs
  // in the kernel, and the application only calls socket().
  bool library_only = false;
  // DRA only: dra.hookDir (agent/core/cdi_hook.hpp). An SMC-R claim's CDI spec names the
  // createRuntime hook there, so its pods' netns is set up when their containers are created.
  // "" = no hook.
  std::string cdi_hook_dir;
};

// One resource the agent serves, on a socket of its own in the device plugin directory.
struct PluginEndpoint {
  std::string resource_name;
  std::string socket_name;
  unsigned slots_per_device = 0;
  AllocateOptions allocate;
  // false: the devices are scanned (the rest of the agent reads that view) but the resource is
  // neither served nor registered with the kubelet: the DRA driver serves it (dra.extendedResource).
  bool advertise = true;
};

// The eRDMA devices: resourceName on erdma.sock, every Allocate option from the config.
[[nodiscard]] PluginEndpoint erdma_endpoint(const AgentConfig& cfg);
// The SMC-R library resource (smcr.resourceName on erdma-smcr.sock), or nullopt when SMC-R is off
// or smcr.resourceName is "".
[[nodiscard]] std::optional<PluginEndpoint> smcr_endpoint(const AgentConfig& cfg);

struct ContainerAllocation {
  std::vector<std::string> devices;         // distinct device names, sorted
  std::map<std::string, std::string> envs;  // ERDMA_DEVICES=..., NCCL_* (see AllocateOptions)
  std::vector<DeviceNode> device_nodes;     // uverbs of each device, then rdma_cm
  std::vector<HostMount> mounts;            // the preload library directory (see AllocateOptions)
  std::vector<std::string> notes;           // e.g. a device that is unhealthy right now
};

// What one container gets for the slot IDs kubelet allocated to it: the uverbs node of every
// device behind the IDs (of every device of the node with `all_devices`), rdma_cm once when the
// host has it (a DeviceSpec for a missing node would stop the container from starting), the
// preload library directory when configured, and env.
// With `nccl_env`: NCCL_IB_HCA="=dev0,dev1" naming exactly those devices, and NCCL_IB_GID_INDEX
// from the first device (by name) that has an IPv4 RoCE v2 GID; devices that disagree, or lack
// one while others have one, are noted (NCCL takes one index for all devices). Errors: InvalidArgument for an empty
// list, malformed or duplicate IDs and absurd sizes; NotFound for IDs of devices that are not on the node;
// FailedPrecondition for a device without a uverbs char device. Messages name the offending IDs.
[[nodiscard]] Result<ContainerAllocation> allocate_container(const std::vector<std::string>& ids,
                                                             const std::vector<RdmaDevice>& devices,
                                                             unsigned slots_per_device, const AllocateOptions& options);

struct PreferredRequest {
  std::vector<std::string> available;
  std::vector<std::string> must_include;
  int64_t size = 0;
};

// Chooses `size` IDs out of `available`, always including `must_include`. Spreads over as many
// distinct devices as the size allows (a container asking for 2 on a 2-device node gets both
// devices: NCCL uses every device it is given), one slot each, then packs the rest onto the chosen
// devices. Devices are chosen NUMA-aware: those on the NUMA node of the must_include devices (or
// the node with the most devices to offer) first, then other nodes, then devices without NUMA
// information; within each, the most free slots first, then by name. Lowest indices first.
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
