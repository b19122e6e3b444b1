// A claim's preparation plan and its device status entries (see dra_claim.hpp).
#include "agent/core/dra_claim.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <set>
#include <tuple>

#include "agent/core/dra_slices.hpp"
#include "common/json_read.hpp"
#include "common/text.hpp"

namespace erdma::agent {
namespace {

using common::json_quote;
using common::JsonAt;
using common::JsonKind;
using nlohmann::json;

std::string ref_text(const ClaimRef& r) { return "claim " + r.ns + "/" + r.name + " (" + r.uid + ")"; }

std::string base_request(std::string_view request) { return std::string(request.substr(0, request.find('/'))); }

// A non-empty string, or InvalidArgument naming where it should be.
Result<std::string> non_empty_string(const JsonAt& at) {
  ERDMA_TRY_ASSIGN(std::string s, at.string());
  if (s.empty()) return at.error("is empty");
  return s;
}

// Whether a config's `requests` list covers an allocation result's request ("main" or "main/sub").
bool applies_to(const std::vector<std::string>& requests, const std::string& request) {
  if (requests.empty()) return true;
  const std::string base = base_request(request);
  return std::any_of(requests.begin(), requests.end(), [&](const std::string& r) { return r == request || r == base; });
}

struct OurConfig {
  bool from_claim = false;
  std::vector<std::string> requests;  // none: every request
  ClaimMode mode = ClaimMode::Rdma;
};

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() <= 3 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_ipv6_text(std::string_view s) {
  if (s.size() < 2 || s.size() > 45 || s.find(':') == std::string_view::npos) return false;
  if (std::count(s.begin(), s.end(), ':') > 7) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' || c == '.';
  });
}

// "10.0.0.5/24" or "2001:db8::5/64": an address and a prefix length that fits it.
bool is_cidr(std::string_view s) {
  const auto slash = s.find('/');
  if (slash == std::string_view::npos) return false;
  const auto addr = s.substr(0, slash);
  const auto prefix = s.substr(slash + 1);
  if (!all_digits(prefix) || (prefix.size() > 1 && prefix[0] == '0')) return false;
  const int bits = std::stoi(std::string(prefix));
  if (is_ipv4_address(addr)) return bits <= 32;
  return is_ipv6_text(addr) && bits <= 128;
}

}  // namespace

std::string_view to_string(ClaimMode mode) noexcept { return mode == ClaimMode::Smcr ? "smcr" : "rdma"; }

Result<ClaimMode> parse_erdma_config(const json& parameters) {
  const std::string allowed = "{\"apiVersion\": \"" + std::string(kErdmaConfigApiVersion) + "\", \"kind\": \"" +
                              std::string(kErdmaConfigKind) + "\", \"mode\": \"rdma\" or \"smcr\"}";
  if (!parameters.is_object()) {
    return make_error(ErrorCode::InvalidArgument, "opaque parameters must be a JSON object " + allowed);
  }
  for (const auto& item : parameters.items()) {
    if (item.key() != "apiVersion" && item.key() != "kind" && item.key() != "mode") {
      return make_error(ErrorCode::InvalidArgument, "opaque parameters: unknown member " + json_quote(item.key()) +
                                                        "; the driver reads exactly " + allowed);
    }
  }
  auto member = [&](const char* key) -> Result<std::string> {
    const auto it = parameters.find(key);
    if (it == parameters.end() || !it->is_string()) {
      return make_error(ErrorCode::InvalidArgument,
                        std::string("opaque parameters: \"") + key + "\" is missing or not a string; write " + allowed);
    }
    return it->get<std::string>();
  };
  ERDMA_TRY_ASSIGN(const auto api_version, member("apiVersion"));
  if (api_version != kErdmaConfigApiVersion) {
    return make_error(ErrorCode::InvalidArgument, "opaque parameters: apiVersion " + json_quote(api_version) +
                                                      " is not one this agent reads (" +
                                                      std::string(kErdmaConfigApiVersion) + ")");
  }
  ERDMA_TRY_ASSIGN(const auto kind, member("kind"));
  if (kind != kErdmaConfigKind) {
    return make_error(ErrorCode::InvalidArgument,
                      "opaque parameters: kind " + json_quote(kind) + " is not " + std::string(kErdmaConfigKind));
  }
  ERDMA_TRY_ASSIGN(const auto mode, member("mode"));
  if (mode == "rdma") return ClaimMode::Rdma;
  if (mode == "smcr") return ClaimMode::Smcr;
  return make_error(ErrorCode::InvalidArgument,
                    "opaque parameters: mode " + json_quote(mode) + " is neither \"rdma\" nor \"smcr\"");
}

Result<ClaimPlan> plan_claim(const json& claim, const ClaimRef& ref, const std::vector<RdmaDevice>& cards,
                             std::string_view pool, std::string_view driver) {
  const std::string who = ref_text(ref);
  const JsonAt at(claim, who);
  const JsonAt meta = at.member("metadata");
  if (!meta.is(JsonKind::Object)) {
    return make_error(ErrorCode::InvalidArgument,
                      who + ": the API server's answer is not a ResourceClaim (no metadata)");
  }
  ERDMA_TRY_ASSIGN(const std::string uid, meta.member("uid").string_or(""));
  if (uid != ref.uid) {
    return make_error(ErrorCode::FailedPrecondition,
                      who + ": the API server holds a claim of that name with UID " + json_quote(uid) +
                          ": the claim was deleted and created again; the kubelet prepares the new one for the "
                          "pod that uses it");
  }
  const JsonAt alloc = at.path("status.allocation");
  if (!alloc.is(JsonKind::Object)) {
    return make_error(ErrorCode::FailedPrecondition,
                      who + " is not allocated (no status.allocation); the scheduler allocates it before the pod "
                            "is bound to a node");
  }
  const JsonAt devs = alloc.member("devices");
  ERDMA_TRY(devs.expect_optional(JsonKind::Object));
  const JsonAt results = devs.member("results");
  const JsonAt configs = devs.member("config");
  ERDMA_TRY(results.expect_optional(JsonKind::Array));
  ERDMA_TRY(configs.expect_optional(JsonKind::Array));

  // This driver's configs, validated all, in the allocator's order.
  std::vector<OurConfig> ours;
  for (size_t i = 0; i < configs.size(); ++i) {
    const JsonAt c = configs.element(i);
    ERDMA_TRY(c.expect(JsonKind::Object));
    const JsonAt op = c.member("opaque");
    if (op.is_missing()) continue;  // a kind of config this driver does not know
    ERDMA_TRY(op.expect(JsonKind::Object));
    ERDMA_TRY_ASSIGN(const std::string config_driver, op.member("driver").string_or(""));
    if (config_driver != driver) continue;
    OurConfig oc;
    ERDMA_TRY_ASSIGN(const std::string source, c.member("source").string_or(""));
    if (source == "FromClaim") {
      oc.from_claim = true;
    } else if (source != "FromClass") {
      return c.member("source").error(json_quote(source) + " is neither FromClass nor FromClaim");
    }
    const JsonAt requests = c.member("requests");
    ERDMA_TRY(requests.expect_optional(JsonKind::Array));
    for (size_t k = 0; k < requests.size(); ++k) {
      ERDMA_TRY_ASSIGN(auto name, requests.element(k).string());
      oc.requests.push_back(std::move(name));
    }
    const JsonAt params = op.member("parameters");
    if (params.get() == nullptr) return params.error("is missing");
    if (params.get()->dump(-1, ' ', false, json::error_handler_t::replace).size() > kMaxOpaqueParametersBytes) {
      return params.error("is larger than 10 KiB");
    }
    auto mode = parse_erdma_config(*params.get());
    if (!mode) {
      return make_error(ErrorCode::InvalidArgument, c.where() + " (" +
                                                        (oc.from_claim ? "from the claim" : "from the DeviceClass") +
                                                        "): " + mode.error().message);
    }
    oc.mode = *mode;
    ours.push_back(std::move(oc));
  }

  // The cards by the device name they are published under.
  std::map<std::string, std::string> card_of;
  for (const auto& c : cards) {
    if (auto name = dra_device_name(c.name)) card_of.emplace(*name, c.name);
  }

  ClaimPlan plan;
  plan.ref = ref;
  std::map<std::tuple<std::string, std::string, std::string>, ClaimDevice> devices;  // (pool, device, share)
  std::optional<ClaimMode> claim_mode;
  std::string first_request;
  size_t others = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const JsonAt r = results.element(i);
    ERDMA_TRY(r.expect(JsonKind::Object));
    ERDMA_TRY_ASSIGN(const std::string result_driver, r.member("driver").string_or(""));
    if (result_driver != driver) {
      ++others;
      continue;
    }
    ERDMA_TRY_ASSIGN(const std::string request, non_empty_string(r.member("request")));
    ERDMA_TRY_ASSIGN(const std::string rpool, non_empty_string(r.member("pool")));
    ERDMA_TRY_ASSIGN(const std::string device, non_empty_string(r.member("device")));
    ERDMA_TRY_ASSIGN(const std::string share, r.member("shareID").string_or(""));
    if (!r.member("shareID").is_missing() && !is_claim_uid(share)) {
      return r.member("shareID").error("is not a UID: " + json_quote(common::cut_for_message(share, 80)));
    }
    if (rpool != pool) {
      return make_error(ErrorCode::NotFound, who + ": device " + rpool + "/" + device + " is in pool " +
                                                 json_quote(rpool) + ", not this node's pool " +
                                                 json_quote(std::string(pool)) +
                                                 "; the claim was allocated for another node");
    }
    const auto card = card_of.find(device);
    if (card == card_of.end()) {
      return make_error(ErrorCode::NotFound, who + ": device " + rpool + "/" + device +
                                                 " is not on this node (no card is published under that name now; "
                                                 "was the card removed or renamed?)");
    }
    // The mode: the last FromClaim config that applies, else the last FromClass one, else RDMA.
    std::optional<ClaimMode> from_class, from_claim;
    for (const auto& oc : ours) {
      if (!applies_to(oc.requests, request)) continue;
      (oc.from_claim ? from_claim : from_class) = oc.mode;
    }
    // A claim may narrow RDMA to SMC-R, never widen a class's SMC-R to raw RDMA: the SMC-R class
    // is what an admin hands out where raw verbs must not go (docs/dra.md, "Who gets what").
    if (from_class == ClaimMode::Smcr && from_claim == ClaimMode::Rdma) {
      return make_error(ErrorCode::PermissionDenied,
                        who + ": request " + json_quote(request) +
                            " comes from a DeviceClass whose config makes it SMC-R, and the claim's own config "
                            "asks mode rdma: a claim may turn RDMA into SMC-R, never SMC-R into raw RDMA; ask "
                            "the RDMA class (erdma.aliyun.com) for raw RDMA, where the admin allows it");
    }
    const ClaimMode mode = from_claim ? *from_claim : from_class ? *from_class : ClaimMode::Rdma;
    if (claim_mode && *claim_mode != mode) {
      return make_error(ErrorCode::InvalidArgument,
                        who + " mixes modes: request " + json_quote(first_request) + " is " +
                            std::string(to_string(*claim_mode)) + ", request " + json_quote(request) + " is " +
                            std::string(to_string(mode)) +
                            "; one claim is either RDMA or SMC-R: put the requests in two claims");
    }
    if (!claim_mode) {
      claim_mode = mode;
      first_request = request;
    }
    auto& d = devices[{rpool, device, share}];
    d.pool = rpool;
    d.device = device;
    d.card = card->second;
    d.share_id = share;
    const std::string base = base_request(request);
    if (std::find(d.requests.begin(), d.requests.end(), base) == d.requests.end()) d.requests.push_back(base);
  }
  if (devices.empty()) {
    return make_error(ErrorCode::FailedPrecondition,
                      who + " has no device of driver " + std::string(driver) + " allocated" +
                          (others > 0 ? " (" + std::to_string(others) + " of other drivers)" : std::string()));
  }
  if (others > 0) plan.notes.push_back(std::to_string(others) + " device(s) of other drivers left to them");
  plan.mode = claim_mode.value_or(ClaimMode::Rdma);
  for (auto& entry : devices) {
    ClaimDevice& d = entry.second;
    std::sort(d.requests.begin(), d.requests.end());
    plan.cdi.cards.push_back(d.card);
    plan.devices.push_back(std::move(d));
  }
  plan.cdi.uid = ref.uid;
  plan.cdi.ns = ref.ns;
  plan.cdi.name = ref.name;
  plan.cdi.smcr = plan.mode == ClaimMode::Smcr;
  return plan;
}

Result<PreparedClaim> prepared_claim(const ClaimPlan& plan, const CdiSpec& spec) {
  PreparedClaim out;
  out.uid = plan.ref.uid;
  out.ns = plan.ref.ns;
  out.name = plan.ref.name;
  out.smcr = plan.mode == ClaimMode::Smcr;
  out.cdi_spec_file = spec.file_name;
  for (const auto& d : plan.devices) {
    const auto id = spec.cdi_ids.find(d.card);
    if (id == spec.cdi_ids.end()) {
      return make_error(ErrorCode::Internal, ref_text(plan.ref) + ": the CDI spec has no device for card " + d.card);
    }
    out.devices.push_back(PreparedDevice{d.requests, d.pool, d.device, d.card, {id->second}, d.share_id});
  }
  return normalized(std::move(out));
}

Result<json> device_status_entries(const PreparedClaim& claim, const std::map<std::string, CardNetwork>& networks,
                                   std::string_view driver) {
  json out = json::array();
  for (const auto& d : claim.devices) {
    json entry = {{"driver", driver}, {"pool", d.pool}, {"device", d.device}};
    // types.go AllocatedDeviceStatus: an entry of a shared device names the share it is about.
    if (!d.share_id.empty()) entry["shareID"] = d.share_id;
    const auto net = networks.find(d.card);
    if (net != networks.end()) {
      const CardNetwork& n = net->second;
      const std::string where = "claim " + claim.ns + "/" + claim.name + ": card " + d.card + ": ";
      if (n.interface_name.size() > 256) {
        return make_error(ErrorCode::InvalidArgument, where + "interface name longer than 256 bytes");
      }
      if (n.ips.size() > 16) return make_error(ErrorCode::InvalidArgument, where + "more than 16 IPs");
      if (n.hardware_address.size() > 128) {
        return make_error(ErrorCode::InvalidArgument, where + "hardware address longer than 128 bytes");
      }
      std::set<std::string> seen;
      for (const auto& ip : n.ips) {
        if (!is_cidr(ip)) {
          return make_error(ErrorCode::InvalidArgument,
                            where + "IP " + json_quote(ip) +
                                " is not an address with a prefix length (\"10.0.0.5/24\")");
        }
        if (!seen.insert(ip).second)
          return make_error(ErrorCode::InvalidArgument, where + "IP " + ip + " listed twice");
      }
      json nd = json::object();
      if (!n.interface_name.empty()) nd["interfaceName"] = n.interface_name;
      if (!n.ips.empty()) nd["ips"] = n.ips;
      if (!n.hardware_address.empty()) nd["hardwareAddress"] = n.hardware_address;
      if (!nd.empty()) entry["networkData"] = std::move(nd);
    }
    out.push_back(std::move(entry));
  }
  return out;
}

std::string ready_since(const json& claim, bool ready, const std::string& now, std::string_view driver) {
  const JsonAt devices = JsonAt(claim, "ResourceClaim").path("status.devices");
  for (size_t i = 0; i < devices.size(); ++i) {
    const JsonAt entry = devices.element(i);
    if (entry.member("driver").if_string() != std::string(driver)) continue;
    const JsonAt conditions = entry.member("conditions");
    for (size_t k = 0; k < conditions.size(); ++k) {
      const JsonAt c = conditions.element(k);
      if (c.member("type").if_string() != "Ready") continue;
      const auto since = c.member("lastTransitionTime").if_string();
      if (c.member("status").if_string() == (ready ? "True" : "False") && since && !since->empty()) return *since;
      return now;
    }
    return now;  // the first entry of ours decides
  }
  return now;
}

std::map<std::string, CardNetwork> every_card(const PreparedClaim& claim, const CardNetwork& network) {
  std::map<std::string, CardNetwork> out;
  for (const auto& d : claim.devices) out[d.card] = network;
  return out;
}

Result<json> pod_side_status_entries(const PreparedClaim& claim, const std::map<std::string, CardNetwork>& networks,
                                     const PodSideStatus& side, std::string_view driver) {
  // metav1.Condition's reason: ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$, at most 1024 bytes.
  const std::string& r = side.reason;
  const bool reason_ok =
      !r.empty() && r.size() <= 1024 && std::isalpha(static_cast<unsigned char>(r.front())) &&
      std::all_of(r.begin(), r.end(),
                  [](char ch) {
                    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == ',' || ch == ':';
                  }) &&
      r.back() != ',' && r.back() != ':';
  if (!reason_ok) {
    return make_error(ErrorCode::InvalidArgument, "condition reason " + json_quote(r) + " is not CamelCase");
  }
  if (side.since.empty()) return make_error(ErrorCode::InvalidArgument, "condition without lastTransitionTime");
  ERDMA_TRY_ASSIGN(json entries, device_status_entries(claim, networks, driver));
  std::string message = side.message;
  if (message.size() > 32768) {  // cut on a UTF-8 character's first byte
    size_t n = 32768;
    while (n > 0 && (static_cast<unsigned char>(message[n]) & 0xC0) == 0x80) --n;
    message.resize(n);
  }
  const json condition = {{"type", "Ready"},
                          {"status", side.ready ? "True" : "False"},
                          {"reason", side.reason},
                          {"message", message},
                          {"lastTransitionTime", side.since}};
  for (auto& e : entries) e["conditions"] = json::array({condition});
  return entries;
}

std::vector<ReservedPod> reserved_pods(const json& claim) {
  std::vector<ReservedPod> out;
  const JsonAt entries = JsonAt(claim, "ResourceClaim").path("status.reservedFor");
  for (size_t i = 0; i < entries.size(); ++i) {
    const JsonAt r = entries.element(i);
    if (r.member("resource").if_string() != "pods") continue;
    auto name = r.member("name").if_string();
    if (name && !name->empty()) out.push_back({std::move(*name), r.member("uid").if_string().value_or("")});
  }
  return out;
}

json merged_device_status(const json& claim, const json& entries, std::string_view driver) {
  json out = json::array();
  // Others' entries are kept as they are, whatever their shape: they are not ours to judge.
  const JsonAt devs = JsonAt(claim, "ResourceClaim").path("status.devices");
  for (size_t i = 0; i < devs.size() && devs.is(JsonKind::Array); ++i) {
    const JsonAt e = devs.element(i);
    if (e.member("driver").if_string() != driver) out.push_back(*e.get());
  }
  if (entries.is_array()) {
    for (const auto& e : entries) out.push_back(e);
  }
  return out;
}

}  // namespace erdma::agent
