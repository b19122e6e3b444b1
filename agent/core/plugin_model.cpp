// Slot IDs, advertisement, allocation and preferred-allocation packing (see plugin_model.hpp).
#include "agent/core/plugin_model.hpp"

#include <algorithm>
#include <set>

#include "common/contract.hpp"
#include "common/text.hpp"

namespace erdma::agent {
namespace {

using common::json_quote;

size_t digits(unsigned n) {
  size_t d = 1;
  while (n >= 10) {
    n /= 10;
    ++d;
  }
  return d;
}

const RdmaDevice* find_device(const std::vector<RdmaDevice>& devices, std::string_view name) {
  for (const auto& d : devices) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

// At most five quoted items, then "and N more".
std::string quote_some(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < 5; ++i) out += (i ? ", " : "") + json_quote(v[i]);
  if (v.size() > 5) out += " and " + std::to_string(v.size() - 5) + " more";
  return out;
}

std::string port_states(const RdmaDevice& d) {
  std::vector<std::string> s;
  for (const auto& p : d.ports) s.push_back("port " + std::to_string(p.number) + " " + std::string(to_string(p.state)));
  return s.empty() ? "no ports" : common::join(s, ", ");
}

}  // namespace

std::string slot_id(std::string_view device, unsigned index) {
  std::string id(device);
  id += '-';
  id += std::to_string(index);
  return id;
}

Status check_device_name_fits(std::string_view name, unsigned slots_per_device) {
  const size_t suffix = 1 + digits(slots_per_device == 0 ? 0 : slots_per_device - 1);
  if (name.size() + suffix > kMaxDeviceIdLen) {
    return make_error(ErrorCode::InvalidArgument,
                      "device name " + json_quote(name) + " is too long: with " + std::to_string(slots_per_device) +
                          " slots per device, names may have at most " + std::to_string(kMaxDeviceIdLen - suffix) +
                          " characters (kubelet limits device IDs to " + std::to_string(kMaxDeviceIdLen) + ")");
  }
  return {};
}

Result<SlotRef> parse_slot_id(std::string_view id, unsigned slots_per_device) {
  auto bad = [&](const std::string& why) {
    return make_error(ErrorCode::InvalidArgument, "device ID " + json_quote(id) + " " + why);
  };
  if (id.size() > kMaxDeviceIdLen) return bad("is longer than " + std::to_string(kMaxDeviceIdLen) + " characters");
  const auto dash = id.rfind('-');
  if (dash == std::string_view::npos || dash == 0 || dash + 1 == id.size()) {
    return bad("is not of the form <device>-<slot>");
  }
  const auto device = id.substr(0, dash);
  const auto num = id.substr(dash + 1);
  if (!is_device_name(device)) return bad("names no valid device");
  if (!std::all_of(num.begin(), num.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      (num.size() > 1 && num.front() == '0') || num.size() > 9) {
    return bad("has no valid slot number");
  }
  unsigned index = 0;
  for (char c : num) index = index * 10 + static_cast<unsigned>(c - '0');
  if (index >= slots_per_device) {
    return bad("has slot " + std::to_string(index) + " but devices have " + std::to_string(slots_per_device) +
               " slots");
  }
  return SlotRef{std::string(device), index};
}

Advertisement advertised_devices(const std::vector<RdmaDevice>& devices, unsigned slots_per_device) {
  Advertisement out;
  std::vector<const RdmaDevice*> sorted;
  for (const auto& d : devices) sorted.push_back(&d);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const RdmaDevice* a, const RdmaDevice* b) { return a->name < b->name; });
  const RdmaDevice* prev = nullptr;
  for (const RdmaDevice* d : sorted) {
    if (!is_device_name(d->name)) {
      out.notes.push_back("device " + json_quote(d->name) +
                          " left out: not a usable device name ([A-Za-z0-9_.-], 1-63)");
      continue;
    }
    if (auto fits = check_device_name_fits(d->name, slots_per_device); !fits) {
      out.notes.push_back(fits.error().message + "; left out");
      continue;
    }
    if (prev != nullptr && prev->name == d->name) {
      out.notes.push_back("device " + d->name + " listed twice; the second entry is left out");
      continue;
    }
    prev = d;
    const bool healthy = is_healthy(*d);
    for (unsigned i = 0; i < slots_per_device; ++i) {
      out.slots.push_back(AdvertisedSlot{slot_id(d->name, i), d->name, healthy, d->numa_node});
    }
  }
  return out;
}

bool is_ipv4_mapped_gid(std::string_view gid) noexcept {
  static constexpr std::string_view kPrefix = "0000:0000:0000:0000:0000:ffff:";
  if (gid.size() != 39) return false;
  for (size_t i = 0; i < kPrefix.size(); ++i) {
    const char c = gid[i] >= 'A' && gid[i] <= 'F' ? static_cast<char>(gid[i] - 'A' + 'a') : gid[i];
    if (c != kPrefix[i]) return false;
  }
  for (size_t i = kPrefix.size(); i < gid.size(); ++i) {
    const char c = gid[i];
    const bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (i == 34 ? c != ':' : !hex) return false;
  }
  return true;
}

std::optional<unsigned> ipv4_roce_v2_gid_index(const RdmaDevice& device) {
  std::vector<const RdmaPort*> ports;
  for (const auto& p : device.ports) ports.push_back(&p);
  std::sort(ports.begin(), ports.end(), [](const RdmaPort* a, const RdmaPort* b) { return a->number < b->number; });
  for (const RdmaPort* p : ports) {
    std::optional<unsigned> best;
    for (const auto& g : p->gids) {
      if (g.type != GidType::RoceV2 || !is_ipv4_mapped_gid(g.address)) continue;
      if (!best || g.index < *best) best = g.index;
    }
    if (best) return best;
  }
  return std::nullopt;
}

namespace {

// NCCL_IB_HCA, NCCL_IB_GID_INDEX and (optionally) NCCL_SOCKET_IFNAME for `names` (sorted).
void add_nccl_env(const std::vector<std::string>& names, const std::vector<RdmaDevice>& devices,
                  const AllocateOptions& options, ContainerAllocation& out) {
  out.envs[kNcclHcaEnv] = "=" + common::join(names, ",");
  std::optional<unsigned> chosen;
  std::string chosen_from;
  std::vector<std::string> per_device, without;
  bool disagree = false;
  for (const auto& name : names) {
    const RdmaDevice& d = *find_device(devices, name);
    const auto index = ipv4_roce_v2_gid_index(d);
    if (!index) {
      without.push_back(name);
      continue;
    }
    per_device.push_back(name + ": " + std::to_string(*index));
    if (!chosen) {
      chosen = index;
      chosen_from = name;
    } else if (*chosen != *index) {
      disagree = true;
    }
  }
  if (chosen) {
    out.envs[kNcclGidIndexEnv] = std::to_string(*chosen);
    if (disagree) {
      out.notes.push_back("devices disagree on the IPv4 RoCE v2 GID index (" + common::join(per_device, ", ") +
                          "); NCCL takes one index for all devices, so " + std::string(kNcclGidIndexEnv) + "=" +
                          std::to_string(*chosen) + " (" + chosen_from +
                          "'s) is set; set NCCL_IB_GID_INDEX=-1 "
                          "with NCCL_IB_ADDR_RANGE in the pod spec to let NCCL pick per device");
    }
  }
  // No device with such an entry is the normal iWARP (default mode) case and says nothing new;
  // a mix means one card's GID table is not what its neighbours' are.
  if (chosen && !without.empty()) {
    out.notes.push_back("no IPv4 RoCE v2 GID on " + common::join(without, ", ") +
                        " (its netdev may have no IPv4 address); NCCL may fail to use it");
  }
  if (options.nccl_socket_ifname) {
    std::vector<std::string> netdevs;
    for (const auto& name : names) {
      const RdmaDevice& d = *find_device(devices, name);
      if (!d.netdev.empty() && std::find(netdevs.begin(), netdevs.end(), d.netdev) == netdevs.end()) {
        netdevs.push_back(d.netdev);
      }
    }
    if (!netdevs.empty()) out.envs[kNcclSocketIfnameEnv] = "=" + common::join(netdevs, ",");
  }
}

}  // namespace

PluginEndpoint erdma_endpoint(const AgentConfig& cfg) {
  AllocateOptions a;
  a.all_devices = cfg.allocate_all_devices;
  a.nccl_env = cfg.nccl_env;
  a.nccl_socket_ifname = cfg.nccl_socket_ifname;
  // Containers that asked for eRDMA themselves and are in an SMC-R pod get the library with it.
  if (cfg.smcr.enabled) a.preload_host_dir = cfg.smcr.preload_host_dir;
  PluginEndpoint endpoint{cfg.resource_name, kPluginSocketName, cfg.slots_per_device, std::move(a)};
  // A node that advertises the resource through a device plugin is served by it even where a
  // DeviceClass names the resource: the DRA driver can only serve it where the plugin is silent.
  endpoint.advertise = !cfg.dra.extended_resource;
  return endpoint;
}

std::optional<PluginEndpoint> smcr_endpoint(const AgentConfig& cfg) {
  if (!cfg.smcr.enabled || cfg.smcr.resource_name.empty()) return std::nullopt;
  AllocateOptions a;
  a.library_only = true;
  a.nccl_env = false;
  a.preload_host_dir = cfg.smcr.preload_host_dir;
  return PluginEndpoint{cfg.smcr.resource_name, kSmcrPluginSocketName, cfg.smcr.slots_per_device, std::move(a)};
}

Result<ContainerAllocation> allocate_container(const std::vector<std::string>& ids,
                                               const std::vector<RdmaDevice>& devices, unsigned slots_per_device,
                                               const AllocateOptions& options) {
  if (ids.empty()) return make_error(ErrorCode::InvalidArgument, "no device IDs to allocate");
  const size_t limit = std::min(kMaxIdsPerContainer, devices.size() * slots_per_device);
  if (ids.size() > limit) {
    return make_error(ErrorCode::InvalidArgument, "asks for " + std::to_string(ids.size()) +
                                                      " device IDs but this node advertises " + std::to_string(limit));
  }
  std::vector<std::string> malformed, unknown, duplicate;
  std::set<std::string> seen, names;
  std::string first_error;
  for (const auto& id : ids) {
    auto ref = parse_slot_id(id, slots_per_device);
    if (!ref) {
      if (first_error.empty()) first_error = ref.error().message;
      malformed.push_back(id);
      continue;
    }
    if (!seen.insert(id).second) {
      duplicate.push_back(id);
      continue;
    }
    if (find_device(devices, ref->device) == nullptr) {
      unknown.push_back(id);
      continue;
    }
    names.insert(ref->device);
  }
  if (!malformed.empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      "malformed device IDs " + quote_some(malformed) + " (" + first_error + ")");
  }
  if (!duplicate.empty())
    return make_error(ErrorCode::InvalidArgument, "duplicate device IDs " + quote_some(duplicate));
  if (!unknown.empty()) {
    std::vector<std::string> known;
    for (const auto& d : devices) known.push_back(d.name);
    return make_error(ErrorCode::NotFound, "unknown device IDs " + quote_some(unknown) +
                                               ": no such device on this node (devices here: " +
                                               (known.empty() ? std::string("none") : common::join(known, ", ")) + ")");
  }
  ContainerAllocation out;
  if (options.library_only) {
    // The SMC-R resource: the slots only place the pod and call PreStartContainer; the container
    // gets the library and nothing of the device.
    if (!options.preload_host_dir.empty()) {
      out.mounts.push_back(HostMount{std::string(contract::kPreloadMountPath), options.preload_host_dir, true});
    }
    return out;
  }
  if (options.all_devices) {
    // Every advertisable device, whatever slots kubelet picked (ACK's allocateAllDevices).
    for (const auto& slot : advertised_devices(devices, slots_per_device).slots) names.insert(slot.device);
  }
  out.devices.assign(names.begin(), names.end());
  for (const auto& name : out.devices) {
    const RdmaDevice& d = *find_device(devices, name);
    if (d.uverbs.empty()) {
      return make_error(ErrorCode::FailedPrecondition,
                        "device " + name + " has no uverbs char device; it cannot be used");
    }
    if (!is_healthy(d)) out.notes.push_back("device " + name + " allocated while unhealthy (" + port_states(d) + ")");
    const auto path = uverbs_path(d);
    out.device_nodes.push_back(DeviceNode{path, path, "rw"});
  }
  if (options.rdma_cm_present) {
    out.device_nodes.push_back(DeviceNode{std::string(kRdmaCmPath), std::string(kRdmaCmPath), "rw"});
  } else {
    out.notes.push_back(std::string(kRdmaCmPath) + " is missing on the host (rdma_ucm not loaded); not passed on");
  }
  if (!options.preload_host_dir.empty()) {
    out.mounts.push_back(HostMount{std::string(contract::kPreloadMountPath), options.preload_host_dir, true});
  }
  out.envs[kDevicesEnv] = common::join(out.devices, ",");
  if (options.nccl_env) add_nccl_env(out.devices, devices, options, out);
  return out;
}

Result<std::vector<std::string>> preferred_allocation(const PreferredRequest& request,
                                                      const std::vector<RdmaDevice>& devices,
                                                      unsigned slots_per_device) {
  if (request.size < 0) {
    return make_error(ErrorCode::InvalidArgument, "allocation size " + std::to_string(request.size) + " is negative");
  }
  const auto size = static_cast<size_t>(request.size);
  if (request.available.size() > kMaxIdsPerContainer * 10) {
    return make_error(ErrorCode::InvalidArgument,
                      std::to_string(request.available.size()) + " available device IDs is more than any node has");
  }
  // device -> free slot indices (excluding must_include), ordered.
  std::map<std::string, std::set<unsigned>> free;
  std::set<std::string> available;
  for (const auto& id : request.available) {
    auto ref = parse_slot_id(id, slots_per_device);
    if (!ref) return make_error(ErrorCode::InvalidArgument, "available: " + ref.error().message);
    available.insert(id);
    free[ref->device].insert(ref->index);
  }
  if (size > available.size()) {
    return make_error(ErrorCode::InvalidArgument, "cannot choose " + std::to_string(size) + " of " +
                                                      std::to_string(available.size()) + " available device IDs");
  }
  std::vector<std::string> result;
  std::vector<std::string> must_devices;  // in must_include order
  for (const auto& id : request.must_include) {
    auto ref = parse_slot_id(id, slots_per_device);
    if (!ref) return make_error(ErrorCode::InvalidArgument, "mustInclude: " + ref.error().message);
    if (available.count(id) == 0) {
      return make_error(ErrorCode::InvalidArgument, "mustInclude device ID " + json_quote(id) + " is not available");
    }
    if (std::find(result.begin(), result.end(), id) != result.end()) continue;
    result.push_back(id);
    if (std::find(must_devices.begin(), must_devices.end(), ref->device) == must_devices.end()) {
      must_devices.push_back(ref->device);
    }
    free[ref->device].erase(ref->index);
  }
  if (result.size() > size) {
    return make_error(ErrorCode::InvalidArgument, std::to_string(result.size()) +
                                                      " mustInclude device IDs do not fit an allocation of " +
                                                      std::to_string(size));
  }
  size_t need = size - result.size();
  if (need == 0) return result;

  auto numa_of = [&](const std::string& dev) {
    const RdmaDevice* d = find_device(devices, dev);
    return d == nullptr ? -1 : d->numa_node;
  };
  auto is_must = [&](const std::string& dev) {
    return std::find(must_devices.begin(), must_devices.end(), dev) != must_devices.end();
  };

  // The home NUMA node: the must_include devices' (the first one's), else the node with the most
  // devices that have free slots (then the most free slots, then the lowest number).
  int home = -1;
  if (!must_devices.empty()) {
    home = numa_of(must_devices.front());
  } else {
    std::map<int, std::pair<size_t, size_t>> per_numa;  // numa -> (devices, free slots)
    for (const auto& [dev, slots] : free) {
      if (slots.empty() || numa_of(dev) < 0) continue;
      auto& [n, total] = per_numa[numa_of(dev)];
      ++n;
      total += slots.size();
    }
    std::pair<size_t, size_t> best{0, 0};
    for (const auto& [numa, v] : per_numa) {
      if (v > best) {
        best = v;
        home = numa;
      }
    }
  }
  // Candidate devices with free slots: home node, other nodes, no NUMA; most free slots first.
  std::vector<std::string> order;
  for (const auto& [dev, slots] : free) {
    if (!slots.empty()) order.push_back(dev);
  }
  auto rank = [&](const std::string& dev) {
    const int numa = numa_of(dev);
    return numa < 0 ? 2 : (numa == home ? 0 : 1);
  };
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    const bool ma = is_must(a), mb = is_must(b);
    if (ma != mb) return ma;
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (free[a].size() != free[b].size()) return free[a].size() > free[b].size();
    return a < b;
  });

  // 1. Spread: one slot on each device not yet covered, until the request is met.
  std::map<std::string, std::set<unsigned>::iterator> next;
  for (const auto& dev : order) next[dev] = free[dev].begin();
  std::vector<std::string> chosen = must_devices;
  for (const auto& dev : order) {
    if (need == 0) break;
    if (is_must(dev)) continue;
    result.push_back(slot_id(dev, *next[dev]++));
    chosen.push_back(dev);
    --need;
  }
  // 2. Pack the rest onto the chosen devices, in order, lowest indices first.
  std::vector<std::string> pack_order;
  for (const auto& dev : order) {
    if (std::find(chosen.begin(), chosen.end(), dev) != chosen.end()) pack_order.push_back(dev);
  }
  for (const auto& dev : pack_order) {
    for (auto it = next[dev]; it != free[dev].end() && need > 0; ++it) {
      result.push_back(slot_id(dev, *it));
      --need;
    }
  }
  return result;
}

Result<std::vector<std::string>> devices_of(const std::vector<std::string>& ids, unsigned slots_per_device) {
  if (ids.empty()) return make_error(ErrorCode::InvalidArgument, "no device IDs");
  std::set<std::string> names;
  for (const auto& id : ids) {
    ERDMA_TRY_ASSIGN(auto ref, parse_slot_id(id, slots_per_device));
    names.insert(ref.device);
  }
  return std::vector<std::string>(names.begin(), names.end());
}

}  // namespace erdma::agent
