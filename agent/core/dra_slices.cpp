// ResourceSlice building and the slice plan (see dra_slices.hpp).
#include "agent/core/dra_slices.hpp"

#include <algorithm>
#include <set>

#include "agent/core/plugin_model.hpp"
#include "common/json_read.hpp"
#include "common/k8s_names.hpp"
#include "common/text.hpp"

namespace erdma::agent {
namespace {

using common::json_quote;
using common::JsonAt;
using common::JsonKind;
using nlohmann::json;

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string hex16(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (size_t i = 16; i-- > 0; v >>= 4) out[i] = kDigits[v & 0xf];
  return out;
}

// "0000:0000:0000:0000:0000:ffff:0a00:0005" -> "10.0.0.5" (the caller checked is_ipv4_mapped_gid).
std::string ipv4_of_mapped_gid(std::string_view gid) {
  auto byte_at = [&](size_t pos) {
    unsigned v = 0;
    for (size_t i = pos; i < pos + 2; ++i) {
      const char c = gid[i];
      v = v * 16 + static_cast<unsigned>(is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return std::to_string(v);
  };
  return byte_at(30) + "." + byte_at(32) + "." + byte_at(35) + "." + byte_at(37);
}

std::optional<std::string> gid_ipv4(const RdmaDevice& card, unsigned index) {
  for (const auto& p : card.ports) {
    for (const auto& g : p.gids) {
      if (g.index == index && g.type == GidType::RoceV2 && is_ipv4_mapped_gid(g.address)) {
        return ipv4_of_mapped_gid(g.address);
      }
    }
  }
  return std::nullopt;
}

json string_attr(std::string_view v) { return json{{"string", v}}; }

std::string unhealthy_reason(const RdmaDevice& card) {
  if (card.uverbs.empty()) return "NoUverbsDevice";
  return "PortNotActive";
}

Status check_facts(const SliceFacts& f) {
  auto bad = [](const std::string& what) { return make_error(ErrorCode::InvalidArgument, what); };
  if (const auto check = common::check_name(common::NameRule::Dns1123Subdomain, f.node_name); !check) {
    return bad("node name " + json_quote(f.node_name) + " " + common::describe(check, "a Kubernetes node name") +
               "; pass the Node's metadata.name (the downward API's spec.nodeName)");
  }
  if (f.driver.size() > kMaxDriverNameLen || !common::is_dns1123_subdomain(f.driver)) {
    return bad("DRA driver name " + json_quote(f.driver) + " must be a lowercase DNS subdomain of at most " +
               std::to_string(kMaxDriverNameLen) + " characters, e.g. " + json_quote(contract::kDraDriverName));
  }
  if (!f.pool_name.empty() && !is_pool_name(f.pool_name)) {
    return bad("pool name " + json_quote(f.pool_name) +
               " must be DNS subdomains separated by '/', at most 253 characters; leave it empty for the node name");
  }
  if (f.generation < 0) return bad("pool generation " + std::to_string(f.generation) + " is negative");
  if (!f.rdma_netns_mode.empty() && f.rdma_netns_mode != "shared" && f.rdma_netns_mode != "exclusive") {
    return bad("RDMA netns mode " + json_quote(f.rdma_netns_mode) + " is not shared or exclusive (or empty: unknown)");
  }
  if (!f.driver_mode.empty() && f.driver_mode != "default" && f.driver_mode != "compat" && f.driver_mode != "ofed") {
    return bad("driver mode " + json_quote(f.driver_mode) + " is not one of default, compat, ofed (or empty: unknown)");
  }
  for (const auto& [card, pci] : f.pci_addresses) {
    if (!is_pci_address(pci)) {
      return bad("PCI address " + json_quote(pci) + " of " + json_quote(card) +
                 " is not an extended BDF address such as \"0000:00:05.0\"");
    }
  }
  for (const auto& [card, root] : f.pcie_roots) {
    if (!is_pcie_root(root)) {
      return bad("PCIe root " + json_quote(root) + " of " + json_quote(card) +
                 " is not a root complex name such as \"pci0000:00\"");
    }
  }
  for (const auto& [netdev, ip] : f.ipv4_addresses) {
    if (!is_ipv4_address(ip)) {
      return bad("IPv4 address " + json_quote(ip) + " of netdev " + json_quote(netdev) +
                 " is not a dotted quad such as \"10.0.0.5\"");
    }
  }
  return {};
}

json device_of(const RdmaDevice& card, const std::string& name, const SliceFacts& f, std::vector<std::string>& notes) {
  json attrs = json::object();
  attrs["ibDevice"] = string_attr(card.name);
  if (!f.driver_mode.empty()) attrs["driverMode"] = string_attr(f.driver_mode);
  attrs["smcrCapable"] = json{{"bool", f.smcr_capable}};
  if (!f.rdma_netns_mode.empty()) attrs["rdmaNetnsMode"] = string_attr(f.rdma_netns_mode);
  if (!card.netdev.empty() && card.netdev.size() <= kMaxAttributeValueLen) attrs["netdev"] = string_attr(card.netdev);
  const auto gid_index = ipv4_roce_v2_gid_index(card);
  if (gid_index) attrs["gidIndex"] = json{{"int", static_cast<int64_t>(*gid_index)}};
  std::optional<std::string> ipv4;
  if (auto it = f.ipv4_addresses.find(card.netdev); !card.netdev.empty() && it != f.ipv4_addresses.end()) {
    ipv4 = it->second;
  } else if (gid_index) {
    ipv4 = gid_ipv4(card, *gid_index);
  }
  if (ipv4) attrs["ipv4"] = string_attr(*ipv4);
  if (!f.driver_version.empty()) {
    // types.go VersionValue: "a semantic version according to semver.org spec 2.0.0", at most 64.
    if (is_semver(f.driver_version) && f.driver_version.size() <= kMaxAttributeValueLen) {
      attrs["driverVersion"] = json{{"version", f.driver_version}};
    }
  }
  if (card.numa_node >= 0) attrs[std::string(kStandardNumaNodeAttr)] = json{{"int", card.numa_node}};
  if (auto it = f.pci_addresses.find(card.name); it != f.pci_addresses.end()) {
    attrs[std::string(kStandardPciBusIdAttr)] = string_attr(it->second);
  }
  if (auto it = f.pcie_roots.find(card.name); it != f.pcie_roots.end()) {
    attrs[std::string(kStandardPcieRootAttr)] = string_attr(it->second);
  }
  json dev = {{"name", name}, {"attributes", std::move(attrs)}};
  if (f.shared_slots > 0) {
    // Consumable capacity (types.go Device.AllowMultipleAllocations, DeviceCapacity): several
    // claims may hold the card, each consuming `slots` (1 unless a request asks for more).
    dev["allowMultipleAllocations"] = true;
    dev["capacity"] = json{{std::string(kSlotsCapacity),
                            {{"value", std::to_string(f.shared_slots)},
                             {"requestPolicy", {{"default", "1"}, {"validRange", {{"min", "1"}}}}}}}};
  }
  if (!is_healthy(card)) {
    // types.go DeviceTaint: key a label name, value a label value, effect None/NoSchedule/NoExecute.
    // NoSchedule, not NoExecute: a card that flaps must not evict the pods that hold it.
    dev["taints"] = json::array(
        {json{{"key", f.driver + "/unhealthy"}, {"value", unhealthy_reason(card)}, {"effect", "NoSchedule"}}});
    notes.push_back("card " + card.name + " is unhealthy (" + unhealthy_reason(card) + "): published as " + name +
                    " with a NoSchedule taint");
  }
  return dev;
}

}  // namespace

bool is_pool_name(std::string_view s) noexcept {
  if (s.empty() || s.size() > common::kMaxDns1123SubdomainLen) return false;
  for (size_t start = 0;;) {
    const size_t slash = s.find('/', start);
    if (!common::is_dns1123_subdomain(
            s.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start))) {
      return false;
    }
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

bool is_semver(std::string_view s) noexcept {
  auto numeric = [](std::string_view p) {
    return !p.empty() && std::all_of(p.begin(), p.end(), is_digit) && (p.size() == 1 || p.front() != '0');
  };
  auto ident_chars = [](std::string_view p) {
    return !p.empty() && std::all_of(p.begin(), p.end(),
                                     [](char c) { return is_lower_alnum(c) || (c >= 'A' && c <= 'Z') || c == '-'; });
  };
  // dot-separated identifiers; numeric ones without leading zeros when `strict_numbers`
  auto idents = [&](std::string_view p, bool strict_numbers) {
    for (size_t start = 0;;) {
      const size_t dot = p.find('.', start);
      const auto id = p.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
      if (!ident_chars(id)) return false;
      if (strict_numbers && std::all_of(id.begin(), id.end(), is_digit) && !numeric(id)) return false;
      if (dot == std::string_view::npos) return true;
      start = dot + 1;
    }
  };
  std::string_view core = s, pre, build;
  if (const auto plus = core.find('+'); plus != std::string_view::npos) {
    build = core.substr(plus + 1);
    core = core.substr(0, plus);
    if (!idents(build, false)) return false;
  }
  if (const auto dash = core.find('-'); dash != std::string_view::npos) {
    pre = core.substr(dash + 1);
    core = core.substr(0, dash);
    if (!idents(pre, true)) return false;
  }
  size_t parts = 0;
  for (size_t start = 0;; ++parts) {
    const size_t dot = core.find('.', start);
    if (!numeric(core.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start)))
      return false;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts == 2;
}

bool is_pci_address(std::string_view s) noexcept {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (size_t i : {0u, 1u, 2u, 3u, 5u, 6u, 8u, 9u}) {
    if (!is_hex(s[i])) return false;
  }
  return s[11] >= '0' && s[11] <= '7';
}

bool is_pcie_root(std::string_view s) noexcept {
  if (s.size() < 3 + 4 + 1 + 2 || s.size() > 3 + 8 + 1 + 2 || s.substr(0, 3) != "pci") return false;
  const size_t colon = s.size() - 3;
  if (s[colon] != ':') return false;
  for (size_t i = 3; i < s.size(); ++i) {
    if (i != colon && !is_hex(s[i])) return false;
  }
  return true;
}

Result<std::string> pcie_root_of(std::string_view device_path) {
  const auto malformed = [&](std::string_view why) {
    return make_error(ErrorCode::InvalidArgument,
                      "sysfs device path " + json_quote(device_path) + " " + std::string(why));
  };
  std::vector<std::string_view> parts;
  for (size_t start = 0;;) {
    const size_t slash = device_path.find('/', start);
    parts.push_back(
        device_path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  for (const auto part : parts) {
    // An absolute path, a doubled or trailing slash, or "." and ".." mean the caller did not
    // resolve the path below the sysfs root, and a lexical reading of it could name the wrong root.
    if (part.empty() || part == "." || part == "..") {
      return malformed("is not a resolved path below the sysfs root, such as \"devices/pci0000:00/0000:00:05.0\"");
    }
  }
  if (parts.front() != "devices") return malformed("is not under devices/");
  if (parts.size() < 2 || !is_pcie_root(parts[1])) {
    return make_error(ErrorCode::NotFound, "sysfs device path " + json_quote(device_path) +
                                               " is not under a PCI root complex (devices/pci<domain>:<bus>/...)");
  }
  if (parts.size() < 3 || !is_pci_address(parts.back())) {
    return malformed(
        "does not end in a PCI function (an extended BDF such as \"0000:00:05.0\") below its root complex");
  }
  return std::string(parts[1]);
}

bool is_ipv4_address(std::string_view s) noexcept {
  size_t parts = 0;
  for (size_t start = 0;; ++parts) {
    const size_t dot = s.find('.', start);
    const auto p = s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (p.empty() || p.size() > 3 || !std::all_of(p.begin(), p.end(), is_digit) || (p.size() > 1 && p[0] == '0')) {
      return false;
    }
    unsigned v = 0;
    for (char c : p) v = v * 10 + static_cast<unsigned>(c - '0');
    if (v > 255) return false;
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return parts == 3;
}

Result<std::string> dra_device_name(std::string_view card) {
  if (!is_device_name(card)) {
    return make_error(ErrorCode::InvalidArgument,
                      "card " + json_quote(card) + " is not an RDMA device name ([A-Za-z0-9_.-], 1-63)");
  }
  std::string out;
  for (char c : card) {
    if (c >= 'A' && c <= 'Z') {
      out += static_cast<char>(c - 'A' + 'a');
    } else if (c == '_' || c == '.') {
      out += '-';
    } else {
      out += c;
    }
  }
  if (!common::is_dns1123_label(out)) {
    return make_error(ErrorCode::InvalidArgument, "card " + json_quote(card) + " gives " + json_quote(out) +
                                                      ", not a DNS label (it must start and end with a letter or "
                                                      "digit); rename the card or leave it out of the agent's drivers");
  }
  return out;
}

std::string slice_name(std::string_view node_name, std::string_view driver, size_t index) {
  std::string full = std::string(node_name) + "-" + std::string(driver) + "-" + std::to_string(index);
  if (full.size() <= 253) return full;
  std::string cut = full.substr(0, 253 - 17);
  while (!cut.empty() && !is_lower_alnum(cut.back())) cut.pop_back();
  return cut + "-" + hex16(fnv1a64(full));
}

Result<SliceSet> build_slices(const std::vector<RdmaDevice>& cards, const SliceFacts& facts) {
  ERDMA_TRY(check_facts(facts));
  SliceSet out;
  std::map<std::string, const RdmaDevice*> by_name;  // DRA device name -> card, sorted
  std::vector<const RdmaDevice*> sorted;
  for (const auto& c : cards) sorted.push_back(&c);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const RdmaDevice* a, const RdmaDevice* b) { return a->name < b->name; });
  for (const RdmaDevice* c : sorted) {
    auto name = dra_device_name(c->name);
    if (!name) {
      out.notes.push_back(name.error().message + "; left out");
      continue;
    }
    if (auto [it, fresh] = by_name.emplace(*name, c); !fresh) {
      out.notes.push_back("card " + json_quote(c->name) + " would be published as " + *name + ", the name of card " +
                          json_quote(it->second->name) + "; left out");
      continue;
    }
    if (facts.health == HealthPolicy::Omit && !is_healthy(*c)) {
      out.notes.push_back("card " + c->name + " is unhealthy (" + unhealthy_reason(*c) + "); left out of the slice");
      by_name.erase(*name);
    }
  }
  for (const auto& given : facts.pci_addresses) {
    const std::string& card = given.first;  // a plain name: clang 14 cannot capture a structured binding
    if (std::none_of(cards.begin(), cards.end(), [&](const RdmaDevice& d) { return d.name == card; })) {
      out.notes.push_back("PCI address given for " + json_quote(card) + ", which the scan did not find");
    }
  }
  for (const auto& given : facts.pcie_roots) {
    const std::string& card = given.first;
    if (std::none_of(cards.begin(), cards.end(), [&](const RdmaDevice& d) { return d.name == card; })) {
      out.notes.push_back("PCIe root given for " + json_quote(card) + ", which the scan did not find");
    }
  }

  const size_t per_slice = facts.health == HealthPolicy::Taint ? kMaxDevicesPerSliceWithTaints : kMaxDevicesPerSlice;
  std::vector<json> devices;
  for (const auto& [name, card] : by_name) devices.push_back(device_of(*card, name, facts, out.notes));
  const size_t count = devices.empty() ? 1 : (devices.size() + per_slice - 1) / per_slice;
  const std::string pool = facts.pool_name.empty() ? facts.node_name : facts.pool_name;
  for (size_t i = 0; i < count; ++i) {
    json meta = {{"name", slice_name(facts.node_name, facts.driver, i)}};
    if (!facts.node_uid.empty()) {
      meta["ownerReferences"] = json::array({json{{"apiVersion", "v1"},
                                                  {"kind", "Node"},
                                                  {"name", facts.node_name},
                                                  {"uid", facts.node_uid},
                                                  {"controller", true}}});
    }
    json spec = {
        {"driver", facts.driver},
        {"nodeName", facts.node_name},
        {"pool",
         json{{"name", pool}, {"generation", facts.generation}, {"resourceSliceCount", static_cast<int64_t>(count)}}}};
    // `devices` is omitempty in the API: an empty list would come back absent.
    const size_t first = i * per_slice, last = std::min(devices.size(), first + per_slice);
    if (first < last) {
      spec["devices"] = json(std::vector<json>(devices.begin() + static_cast<std::ptrdiff_t>(first),
                                               devices.begin() + static_cast<std::ptrdiff_t>(last)));
    }
    out.slices.push_back(json{{"apiVersion", kResourceApiVersion},
                              {"kind", "ResourceSlice"},
                              {"metadata", std::move(meta)},
                              {"spec", std::move(spec)}});
  }
  return out;
}

std::string_view to_string(SliceOp op) noexcept {
  switch (op) {
    case SliceOp::Create: return "create";
    case SliceOp::Update: return "update";
    case SliceOp::Delete: return "delete";
  }
  return "unknown";
}

namespace {

// The parts of an existing item plan_slices reads, checked.
struct Existing {
  std::string name;
  std::string resource_version;
  std::string driver;
  std::string node;
  int64_t generation = 0;
  const json* object = nullptr;
};

Result<Existing> read_item(const json& item, size_t index) {
  const std::string where = "ResourceSlice list item " + std::to_string(index);
  const JsonAt at(item, where);
  ERDMA_TRY(at.expect(JsonKind::Object));
  ERDMA_TRY(at.member("metadata").expect(JsonKind::Object));
  const JsonAt name = at.path("metadata.name");
  Existing e;
  ERDMA_TRY_ASSIGN(e.name, name.string());
  if (e.name.empty()) return name.error("is empty");
  // From here on the item is named by its name too.
  const JsonAt named(item, where + " (" + common::cut_for_message(e.name, 80) + ")");
  const JsonAt rv = named.path("metadata.resourceVersion");
  ERDMA_TRY_ASSIGN(e.resource_version, rv.string());
  if (e.resource_version.empty()) return rv.error("is empty");
  const JsonAt spec = named.member("spec");
  ERDMA_TRY(spec.expect(JsonKind::Object));
  ERDMA_TRY_ASSIGN(e.driver, spec.member("driver").string());
  ERDMA_TRY_ASSIGN(e.node, spec.member("nodeName").string_or(""));
  ERDMA_TRY(spec.member("pool").expect(JsonKind::Object));
  ERDMA_TRY_ASSIGN(e.generation, spec.path("pool.generation").int64());
  e.object = &item;
  return e;
}

// The spec as compared: no pool generation, no server-set taint times, devices always present.
json comparable_spec(const json& spec) {
  json s = spec;
  if (s.contains("pool") && s["pool"].is_object()) s["pool"].erase("generation");
  if (!s.contains("devices") || s["devices"].is_null()) s["devices"] = json::array();
  for (auto& d : s["devices"]) {
    if (!d.is_object() || !d.contains("taints") || !d["taints"].is_array()) continue;
    for (auto& t : d["taints"]) {
      if (t.is_object()) t.erase("timeAdded");
    }
  }
  return s;
}

// metadata.ownerReferences, or null. The caller checked that metadata is an object.
json owner_refs(const json& object) {
  const json* refs = JsonAt(object, "ResourceSlice").path("metadata.ownerReferences").get();
  return refs != nullptr ? *refs : json();
}

// Both objects have a spec and metadata object (slice_has_content and read_item check).
bool same_content(const json& wanted, const json& existing) {
  const json* want_spec = JsonAt(wanted, "ResourceSlice").member("spec").get();
  const json* have_spec = JsonAt(existing, "ResourceSlice").member("spec").get();
  if (want_spec == nullptr || have_spec == nullptr) return false;
  if (comparable_spec(*want_spec) != comparable_spec(*have_spec)) return false;
  const json want_refs = owner_refs(wanted);
  return want_refs.is_null() || want_refs == owner_refs(existing);
}

// Keeps the timeAdded the server gave a taint that stays (same device, key and effect). `spec`
// is a wanted one (build_slices' shape); `old_spec` is the server's, read for what it holds.
void carry_taint_times(json& spec, const json& old_spec) {
  if (!spec.contains("devices") || !spec["devices"].is_array()) return;
  const JsonAt old_devices = JsonAt(old_spec, "ResourceSlice spec").member("devices");
  for (auto& d : spec["devices"]) {
    if (!d.is_object() || !d.contains("taints") || !d["taints"].is_array()) continue;
    const auto name = JsonAt(d, "device").member("name").if_string();
    for (size_t i = 0; i < old_devices.size() && old_devices.is(JsonKind::Array); ++i) {
      const JsonAt od = old_devices.element(i);
      const JsonAt old_taints = od.member("taints");
      if (!name || od.member("name").if_string() != name || !old_taints.is(JsonKind::Array)) continue;
      for (auto& t : d["taints"]) {
        if (!t.is_object()) continue;
        const JsonAt wanted_taint(t, "taint");
        for (size_t k = 0; k < old_taints.size(); ++k) {
          const JsonAt ot = old_taints.element(k);
          const json* added = ot.member("timeAdded").get();
          if (added != nullptr && ot.member("key").if_string() == wanted_taint.member("key").if_string() &&
              ot.member("effect").if_string() == wanted_taint.member("effect").if_string()) {
            t["timeAdded"] = *added;
          }
        }
      }
    }
  }
}

}  // namespace

bool slice_has_content(const json& wanted, const json& existing) {
  const auto has_parts = [](const json& o) {
    return o.is_object() && o.contains("spec") && o["spec"].is_object() && o.contains("metadata") &&
           o["metadata"].is_object();
  };
  if (!has_parts(wanted) || !has_parts(existing)) return false;
  return same_content(wanted, existing);
}

Result<SlicePlan> plan_slices(const std::vector<json>& wanted, const json& existing) {
  if (wanted.empty())
    return make_error(ErrorCode::InvalidArgument, "no ResourceSlices wanted (build_slices gives one at least)");
  // The wanted slices are build_slices' own, read through the checked reader all the same: a
  // caller's slip is an Internal error, never an exception.
  const auto internal = [](Error e) {
    e.code = ErrorCode::Internal;
    return e;
  };
  std::vector<std::string> wanted_names_in_order;
  for (size_t i = 0; i < wanted.size(); ++i) {
    const JsonAt w(wanted[i], "wanted ResourceSlice " + std::to_string(i));
    auto name = w.path("metadata.name").string();
    if (!name) return internal(std::move(name).error());
    for (const char* member : {"apiVersion", "kind", "spec"}) {
      if (w.member(member).get() == nullptr) return internal(w.member(member).error("is missing"));
    }
    if (auto s = w.member("spec").expect(JsonKind::Object); !s) return internal(std::move(s).error());
    if (auto s = w.path("spec.pool").expect(JsonKind::Object); !s) return internal(std::move(s).error());
    wanted_names_in_order.push_back(std::move(name).value());
  }
  const JsonAt first_spec = JsonAt(wanted.front(), "wanted ResourceSlice 0").member("spec");
  auto driver_read = first_spec.member("driver").string();
  auto node_read = first_spec.member("nodeName").string();
  auto first_gen = first_spec.path("pool.generation").int64();
  if (!driver_read) return internal(std::move(driver_read).error());
  if (!node_read) return internal(std::move(node_read).error());
  if (!first_gen) return internal(std::move(first_gen).error());
  const std::string driver = std::move(driver_read).value();
  const std::string node = std::move(node_read).value();
  if (!existing.is_object()) {
    return make_error(ErrorCode::InvalidArgument, "ResourceSlice list answer is not an object");
  }
  const auto items = existing.find("items");
  if (items == existing.end() || !(items->is_array() || items->is_null())) {
    return make_error(ErrorCode::InvalidArgument, "ResourceSlice list answer has no items array");
  }
  SlicePlan plan;
  std::map<std::string, Existing> ours, others;
  int64_t max_gen = -1;
  std::set<int64_t> gens;
  if (items->is_array()) {
    for (size_t i = 0; i < items->size(); ++i) {
      ERDMA_TRY_ASSIGN(auto e, read_item((*items)[i], i));
      if (e.driver != driver || e.node != node) {
        plan.notes.push_back("ResourceSlice " + e.name + " belongs to driver " + json_quote(e.driver) + " on node " +
                             json_quote(e.node) + ", not to this agent; left alone");
        others.emplace(e.name, std::move(e));
        continue;
      }
      max_gen = std::max(max_gen, e.generation);
      gens.insert(e.generation);
      if (!ours.emplace(e.name, e).second) {
        return make_error(ErrorCode::InvalidArgument, "ResourceSlice list answer names " + e.name + " twice");
      }
    }
  }

  bool same = ours.size() == wanted.size() && gens.size() == 1;
  for (size_t i = 0; i < wanted.size() && same; ++i) {
    const auto it = ours.find(wanted_names_in_order[i]);
    same = it != ours.end() && same_content(wanted[i], *it->second.object);
  }
  if (same) {
    plan.generation = *gens.begin();
    return plan;
  }

  plan.generation = std::max(max_gen + 1, *first_gen);
  std::set<std::string> wanted_names;
  for (size_t i = 0; i < wanted.size(); ++i) {
    const json& w = wanted[i];
    const std::string& name = wanted_names_in_order[i];
    wanted_names.insert(name);
    if (others.count(name) != 0) {
      return make_error(ErrorCode::FailedPrecondition, "ResourceSlice " + name + " exists but belongs to driver " +
                                                           json_quote(others.at(name).driver) + " on node " +
                                                           json_quote(others.at(name).node) +
                                                           "; delete it, or give this agent "
                                                           "another driver name");
    }
    json spec = w["spec"];  // checked above: present, an object
    spec["pool"]["generation"] = plan.generation;
    const auto it = ours.find(name);
    if (it == ours.end()) {
      json obj = w;
      obj["spec"] = std::move(spec);
      plan.actions.push_back(SliceAction{SliceOp::Create, name, "", std::move(obj)});
      continue;
    }
    json obj = *it->second.object;
    carry_taint_times(spec, obj["spec"]);  // read_item checked: an object
    obj["apiVersion"] = w["apiVersion"];
    obj["kind"] = w["kind"];
    obj["spec"] = std::move(spec);
    if (const json refs = owner_refs(w); !refs.is_null()) obj["metadata"]["ownerReferences"] = refs;
    plan.actions.push_back(SliceAction{SliceOp::Update, name, it->second.resource_version, std::move(obj)});
  }
  for (const auto& [name, e] : ours) {
    if (wanted_names.count(name) == 0)
      plan.actions.push_back(SliceAction{SliceOp::Delete, name, e.resource_version, json()});
  }
  return plan;
}

}  // namespace erdma::agent
