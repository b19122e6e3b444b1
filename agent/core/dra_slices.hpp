// The ResourceSlices (resource.k8s.io/v1) the agent's DRA driver publishes for its node, built
// from the device scan and node facts, and the create/update/delete actions that bring the
// slices on the API server to them. Pure: JSON in, JSON out; the API client executes the actions.
//
// Field names and limits are those of k8s.io/api v0.37.2 resource/v1/types.go (the release this
// repository pins; the same file as kubernetes/kubernetes staging/src/k8s.io/api/resource/v1).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/core/rdma_device.hpp"
#include "common/contract.hpp"
#include "common/result.hpp"

namespace erdma::agent {

inline constexpr std::string_view kResourceApiVersion = "resource.k8s.io/v1";
// types.go: ResourceSliceMaxDevices = 128, and ResourceSliceMaxDevicesWithAdvancedFeatures = 64
// "if any of those devices uses ... device taints".
inline constexpr size_t kMaxDevicesPerSlice = 128;
inline constexpr size_t kMaxDevicesPerSliceWithTaints = 64;
// types.go: DeviceAttributeMaxValueLength (string and version values), DriverNameMaxLength.
inline constexpr size_t kMaxAttributeValueLen = 64;
inline constexpr size_t kMaxDriverNameLen = 63;
// The capacity a shared card offers (SliceFacts::shared_slots).
inline constexpr std::string_view kSlotsCapacity = "slots";
// Attributes Kubernetes defines for every driver (k8s.io/dynamic-resource-allocation v0.37.2
// deviceattribute/attribute.go): NUMA node as an int, left out when the kernel reports -1; PCI
// address as an extended BDF string ("0000:00:05.0"); the PCI root complex the device sits under
// as "pci<domain>:<bus>" ("pci0000:00"). pcieRoot is the one that lets a claim put an eRDMA card
// and a GPU of another driver under the same root complex (matchAttribute): two devices never
// share a pciBusID, and numaNode only says which memory is near.
inline constexpr std::string_view kStandardNumaNodeAttr = "resource.kubernetes.io/numaNode";
inline constexpr std::string_view kStandardPciBusIdAttr = "resource.kubernetes.io/pciBusID";
inline constexpr std::string_view kStandardPcieRootAttr = "resource.kubernetes.io/pcieRoot";

// What a card that is not healthy (rdma_device.hpp is_healthy) becomes in the slice.
enum class HealthPolicy {
  // Published with the taint <driver>/unhealthy, effect NoSchedule: no new claim gets it, claims
  // that hold it keep it, users see why. Device taints are GA in Kubernetes 1.37
  // (pkg/features/kube_features.go v1.37.2: DRADeviceTaints GA, on by default, not yet locked).
  Taint,
  // Left out of the slice. For clusters that turned DRADeviceTaints off: the API server would drop
  // the taints and so publish a down card as usable.
  Omit,
};

// Facts about the node the slices describe; everything the builder needs arrives here.
struct SliceFacts {
  std::string node_name;  // spec.nodeName; a DNS subdomain
  std::string node_uid;   // the Node's metadata.uid: the slices are owned by the Node (garbage
                          // collected with it); "" = no ownerReference
  std::string driver{contract::kDraDriverName};
  std::string pool_name;       // "" = the node name
  int64_t generation = 0;      // spec.pool.generation (plan_slices chooses the one to publish)
  std::string driver_mode;     // "default", "compat" or "ofed" (driver_mode.hpp found_mode); "" = unknown
  bool smcr_capable = false;   // judge_driver's verdict: default mode and the smc module loaded
  std::string driver_version;  // /sys/module/erdma/version; published when it is a semantic version
  // The RDMA subsystem's netns mode (`rdma system show`): "shared" or "exclusive"; "" = unknown.
  // In exclusive mode a pod on the pod network cannot open a card of the node's namespace.
  std::string rdma_netns_mode;
  HealthPolicy health = HealthPolicy::Taint;
  // > 0: each card may be allocated to several claims (consumable capacity, DRAConsumableCapacity:
  // beta and on by default from Kubernetes 1.36): it offers this many `slots`, a request takes one
  // unless it asks for more (capacity.requests.slots). 0: a card goes to one claim at a time.
  unsigned shared_slots = 0;
  // Per card, its PCI address in extended BDF form. The device scan (RdmaDevice) does not carry
  // one yet: the shell fills this from /sys/class/infiniband/<card>/device. Cards without an
  // entry get no pciBusID attribute.
  std::map<std::string, std::string> pci_addresses;
  // Per card, the PCI root complex it sits under ("pci0000:00", pcie_root_of), which the shell
  // reads from the same link. Cards without an entry get no pcieRoot attribute.
  std::map<std::string, std::string> pcie_roots;
  // Per netdev, its IPv4 address ("10.0.0.5"). Where a netdev has none here, the address inside
  // the card's IPv4-mapped RoCE v2 GID is used (compat mode has one; default mode, iWARP, does not).
  std::map<std::string, std::string> ipv4_addresses;
};

struct SliceSet {
  std::vector<nlohmann::json> slices;  // ResourceSlice objects, in name order
  std::vector<std::string> notes;      // cards left out or published without some attribute, and why
};

// The device name a card is published under: a DNS label derived from the card name alone
// (lowercase; '_' and '.' become '-'), e.g. "erdma_0" -> "erdma-0". InvalidArgument when the
// card name is not an IB device name (rdma_device.hpp is_device_name) or leaves no valid label.
[[nodiscard]] Result<std::string> dra_device_name(std::string_view card);

// One device per card, named by dra_device_name, sorted by that name, in as many slices as the
// per-slice limit needs (64 with HealthPolicy::Taint, which may taint any card, else 128; the
// split does not move when a card's health changes). Attributes, in the driver's domain:
//   ibDevice (string, the card name), driverMode (string), netdev (string), ipv4 (string),
//   gidIndex (int: the IPv4 RoCE v2 GID index plugin_model picks for NCCL), smcrCapable (bool),
//   driverVersion (version), rdmaNetnsMode (string: shared or exclusive);
// and the standard numaNode (int), pciBusID (string) and pcieRoot (string). An attribute whose value is unknown is
// left out rather than published with a made-up value. Cards left out, with a note each: names
// that give no device name, a device name another card already has, unhealthy cards under
// HealthPolicy::Omit. A node without cards gets one slice with no devices, so the pool says
// "nothing here" instead of vanishing.
// Errors: InvalidArgument naming the fact that breaks the API's rules (node name, driver, pool
// name, generation, driver mode, a PCI address, PCIe root or IPv4 address).
[[nodiscard]] Result<SliceSet> build_slices(const std::vector<RdmaDevice>& cards, const SliceFacts& facts);

// metadata.name of the slice with this index: "<node>-<driver>-<index>", shortened with a hash
// of the full name where it would exceed 253 characters. Deterministic.
[[nodiscard]] std::string slice_name(std::string_view node_name, std::string_view driver, size_t index);

enum class SliceOp { Create, Update, Delete };
[[nodiscard]] std::string_view to_string(SliceOp op) noexcept;

struct SliceAction {
  SliceOp op = SliceOp::Create;
  std::string name;
  std::string resource_version;  // Update and Delete: the version they are based on (optimistic
                                 // concurrency: a 409 Conflict means list again and re-plan)
  nlohmann::json object;         // Create and Update: the full body to POST or PUT; Delete: null
};

struct SlicePlan {
  int64_t generation = 0;            // the pool generation the published slices carry
  std::vector<SliceAction> actions;  // creates and updates (name order), then deletes
  std::vector<std::string> notes;    // existing objects ignored, and why
};

// What to do so that the API server holds `wanted` (build_slices' output): `existing` is the
// ResourceSliceList answer ({"items": [...]}) for this node and driver. Slices are matched by
// name. When every wanted slice exists with the same content (pool generation and the server's
// taint timeAdded aside) and one generation, nothing is done and that generation is kept; else
// every wanted slice is created or updated with a generation above every existing one (and not
// below wanted's), and existing slices of this node and driver that are not wanted are deleted
// last, so consumers never see a complete pool of mixed content. An update starts from the
// existing object (fields the agent does not set survive) and keeps the timeAdded of a taint
// that stays. Items of another node or driver are left alone with a note.
// Errors: InvalidArgument when the answer or an item is malformed (not an object, no
// metadata.name, resourceVersion or spec), naming the item; nothing is planned then.
[[nodiscard]] Result<SlicePlan> plan_slices(const std::vector<nlohmann::json>& wanted, const nlohmann::json& existing);

// True when `existing` (a list item or a watch event's object) has the content `wanted` (one of
// build_slices' slices) asks for, as plan_slices judges it: the same spec apart from the pool
// generation and the server's taint times, and the wanted ownerReferences. False for an object
// without a spec or metadata. The slice publisher uses it to tell its own writes, coming back
// through its watch, from someone else's edit.
[[nodiscard]] bool slice_has_content(const nlohmann::json& wanted, const nlohmann::json& existing);

// True for a pool name (types.go ResourcePool.Name: "one or more DNS sub-domains separated by
// slashes", at most 253 characters; each a common::is_dns1123_subdomain).
[[nodiscard]] bool is_pool_name(std::string_view s) noexcept;
// True for a semantic version as semver.org 2.0.0 defines it ("1.2.3", "1.0.0-rc.1+build.5").
[[nodiscard]] bool is_semver(std::string_view s) noexcept;
// True for an extended PCI BDF address: 4 hex digits, ':', 2, ':', 2, '.', one digit 0-7.
[[nodiscard]] bool is_pci_address(std::string_view s) noexcept;
// True for a PCI root complex name as the kernel makes it ("pci%04x:%02x", drivers/pci/probe.c
// pci_register_host_bridge): "pci", 4 to 8 hex digits of domain, ':', 2 hex digits of bus.
[[nodiscard]] bool is_pcie_root(std::string_view s) noexcept;

// The PCI root complex of a device, from the device's fully resolved sysfs path relative to the
// sysfs mount: "devices/pci0000:00/0000:00:03.0/0000:01:00.0" -> "pci0000:00". /sys/devices
// mirrors the hardware, so the component after "devices" is the root complex however many
// bridges follow; the last component must be the PCI function itself (an extended BDF), as for
// Kubernetes' own helper (deviceattribute/pci_linux.go resolvePCIeRoot). Pure.
// Errors: NotFound when the path is not under a root complex (a virtual or platform device such
// as "devices/virtual/net/eth9"); InvalidArgument when it is not a resolved path below the sysfs
// root (empty, absolute, ".", "..", empty components, not under "devices/") or does not end in a
// PCI function below the root complex.
[[nodiscard]] Result<std::string> pcie_root_of(std::string_view device_path);
// True for a dotted-quad IPv4 address without leading zeros ("10.0.0.5").
[[nodiscard]] bool is_ipv4_address(std::string_view s) noexcept;

}  // namespace erdma::agent
