// The prepared-claims checkpoint and the prepare / unprepare decisions (see dra_checkpoint.hpp).
#include "agent/core/dra_checkpoint.hpp"

#include <algorithm>
#include <array>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "agent/core/cdi_spec.hpp"
#include "agent/core/dra_slices.hpp"
#include "agent/core/rdma_device.hpp"
#include "common/json_read.hpp"
#include "common/k8s_names.hpp"
#include "common/text.hpp"

namespace erdma::agent {
namespace {

using common::json_quote;
using common::JsonAt;
using common::JsonKind;
using nlohmann::json;

constexpr std::string_view kChecksumPrefix = "crc32:";
// How an operator gets out of a checkpoint the agent refuses.
constexpr std::string_view kFix =
    "; the agent does not guess: drain the node's pods that hold DRA claims of this driver, move the file "
    "away and restart the agent";

std::string hex8(uint32_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(8, '0');
  for (size_t i = 8; i-- > 0; v >>= 4) out[i] = kDigits[v & 0xf];
  return out;
}

json device_json(const PreparedDevice& d) {
  json out{
      {"requests", d.requests}, {"pool", d.pool}, {"device", d.device}, {"card", d.card}, {"cdiDeviceIds", d.cdi_ids}};
  if (!d.share_id.empty()) out["shareID"] = d.share_id;  // optional: files without shares read as before
  return out;
}

json claim_json(const PreparedClaim& c) {
  json devices = json::array();
  for (const auto& d : c.devices) devices.push_back(device_json(d));
  return json{{"uid", c.uid},
              {"namespace", c.ns},
              {"name", c.name},
              {"smcr", c.smcr},
              {"cdiSpecFile", c.cdi_spec_file},
              {"devices", std::move(devices)}};
}

json body_of(const Checkpoint& cp) {
  json claims = json::array();
  for (const auto& [uid, c] : cp.claims) claims.push_back(claim_json(c));
  return json{{"kind", kCheckpointKind}, {"version", kCheckpointVersion}, {"claims", std::move(claims)}};
}

// Request names in an allocation: "<request>" or "<request>/<subrequest>", each a DNS label
// (resource/v1 types.go DeviceRequestAllocationResult.Request).
bool is_request_name(std::string_view s) {
  const auto slash = s.find('/');
  if (slash == std::string_view::npos) return common::is_dns1123_label(s);
  return common::is_dns1123_label(s.substr(0, slash)) && common::is_dns1123_label(s.substr(slash + 1));
}

bool is_cdi_id(std::string_view s) {
  if (s.empty() || s.size() > 512) return false;
  const auto slash = s.find('/'), eq = s.find('=');
  if (slash == std::string_view::npos || eq == std::string_view::npos || slash > eq) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 0x7f; });
}

bool is_file_name(std::string_view s) {
  return !s.empty() && s.size() <= 255 && s != "." && s != ".." && s.find('/') == std::string_view::npos &&
         s.find('\0') == std::string_view::npos && s.ends_with(".json");
}

// Strict member access: the object has exactly `keys`, each read through common::JsonAt.
class Fields {
 public:
  Fields(const json& obj, std::string where) : obj_(obj), at_(obj, where), where_(std::move(where)) {}

  Status exactly(std::initializer_list<std::string_view> keys) const {
    if (!obj_.is_object()) return bad("is not an object");
    for (const auto& [k, v] : obj_.items()) {
      (void)v;
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) return bad("has unknown member " + json_quote(k));
    }
    for (auto k : keys) {
      if (!obj_.contains(std::string(k))) return bad("has no member " + json_quote(k));
    }
    return {};
  }
  Result<std::string> string(std::string_view key, bool (*valid)(std::string_view), std::string_view rule) const {
    const auto s = at_.member(key).if_string();
    if (!s) return bad(std::string(key) + " is not a string");
    if (!valid(*s))
      return bad(std::string(key) + " " + json_quote(common::cut_for_message(*s, 80)) + " is not " + std::string(rule));
    return *s;
  }
  Result<bool> boolean(std::string_view key) const {
    const auto b = at_.member(key).if_boolean();
    if (!b) return bad(std::string(key) + " is not true or false");
    return *b;
  }
  Result<std::vector<std::string>> strings(std::string_view key, bool (*valid)(std::string_view), std::string_view rule,
                                           bool allow_empty) const {
    const JsonAt v = at_.member(key);
    if (!v.is(JsonKind::Array)) return bad(std::string(key) + " is not an array");
    if (v.size() == 0 && !allow_empty) return bad(std::string(key) + " is empty");
    std::vector<std::string> out;
    for (size_t i = 0; i < v.size(); ++i) {
      auto e = v.element(i).if_string();
      if (!e || !valid(*e)) {
        return bad(
            std::string(key) + " holds " +
            common::cut_for_message(v.element(i).get()->dump(-1, ' ', false, json::error_handler_t::replace), 80) +
            ", not " + std::string(rule));
      }
      out.push_back(std::move(*e));
    }
    return out;
  }
  [[nodiscard]] JsonAt member(std::string_view key) const { return at_.member(key); }
  Error bad(const std::string& why) const { return make_error(ErrorCode::InvalidArgument, where_ + " " + why); }

 private:
  const json& obj_;
  JsonAt at_;
  std::string where_;
};

Result<PreparedDevice> read_device(const json& j, const std::string& where) {
  const Fields f(j, where);
  const bool shared = j.is_object() && j.contains("shareID");
  if (shared) {
    ERDMA_TRY(f.exactly({"requests", "pool", "device", "card", "cdiDeviceIds", "shareID"}));
  } else {
    ERDMA_TRY(f.exactly({"requests", "pool", "device", "card", "cdiDeviceIds"}));
  }
  PreparedDevice d;
  if (shared) {
    ERDMA_TRY_ASSIGN(d.share_id, f.string("shareID", is_claim_uid, "a share UID"));
  }
  ERDMA_TRY_ASSIGN(d.requests, f.strings("requests", is_request_name, "a list of request names", false));
  ERDMA_TRY_ASSIGN(d.pool, f.string("pool", is_pool_name, "a pool name"));
  ERDMA_TRY_ASSIGN(d.device, f.string("device", common::is_dns1123_label, "a DNS-1123 label"));
  ERDMA_TRY_ASSIGN(d.card, f.string("card", is_device_name, "an RDMA device name"));
  ERDMA_TRY_ASSIGN(d.cdi_ids, f.strings("cdiDeviceIds", is_cdi_id, "a CDI device name (vendor/class=name)", false));
  return d;
}

Result<PreparedClaim> read_claim(const json& j, size_t index) {
  const Fields f(j, "DRA checkpoint claim " + std::to_string(index));
  ERDMA_TRY(f.exactly({"uid", "namespace", "name", "smcr", "cdiSpecFile", "devices"}));
  PreparedClaim c;
  ERDMA_TRY_ASSIGN(c.uid, f.string("uid", is_claim_uid, "a claim UID"));
  const std::string where = "DRA checkpoint claim " + c.uid;
  const Fields g(j, where);
  ERDMA_TRY_ASSIGN(c.ns, g.string("namespace", common::is_dns1123_label, "a namespace name (a DNS-1123 label)"));
  ERDMA_TRY_ASSIGN(c.name, g.string("name", common::is_dns1123_subdomain, "an object name (a DNS-1123 subdomain)"));
  ERDMA_TRY_ASSIGN(c.cdi_spec_file, g.string("cdiSpecFile", is_file_name, "a .json file name"));
  ERDMA_TRY_ASSIGN(c.smcr, g.boolean("smcr"));
  const JsonAt devs = g.member("devices");
  if (!devs.is(JsonKind::Array) || devs.size() == 0) return g.bad("devices is not a non-empty array");
  std::set<std::tuple<std::string, std::string, std::string>> seen;
  for (size_t i = 0; i < devs.size(); ++i) {
    ERDMA_TRY_ASSIGN(auto d, read_device(*devs.element(i).get(), where + " device " + std::to_string(i)));
    if (!seen.emplace(d.pool, d.device, d.share_id).second) {
      return g.bad("lists device " + d.pool + "/" + d.device + (d.share_id.empty() ? "" : " share " + d.share_id) +
                   " twice");
    }
    c.devices.push_back(std::move(d));
  }
  return c;
}

std::string describe_devices(const PreparedClaim& c) {
  std::vector<std::string> parts;
  for (const auto& d : c.devices) parts.push_back(d.pool + "/" + d.device + " (" + d.card + ")");
  return parts.empty() ? std::string("none") : common::join(parts, ", ");
}

// What must match for a claim to count as the one already prepared.
bool same_allocation(const PreparedClaim& a, const PreparedClaim& b) {
  if (a.smcr != b.smcr || a.devices.size() != b.devices.size()) return false;
  for (size_t i = 0; i < a.devices.size(); ++i) {
    const auto &x = a.devices[i], &y = b.devices[i];
    if (x.pool != y.pool || x.device != y.device || x.card != y.card || x.requests != y.requests ||
        x.share_id != y.share_id) {
      return false;
    }
  }
  return true;
}

}  // namespace

namespace {
// One entry per byte value: the bitwise loop done once, at compile time. Every checkpoint write
// checksums the whole file, so a byte at a time (not a bit) keeps a node's hundreds of claims cheap.
constexpr std::array<uint32_t, 256> kCrcTable = [] {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    t[i] = c;
  }
  return t;
}();
}  // namespace

uint32_t crc32(std::string_view bytes) noexcept {
  uint32_t crc = 0xffffffffu;
  for (char ch : bytes) crc = (crc >> 8) ^ kCrcTable[(crc ^ static_cast<unsigned char>(ch)) & 0xffu];
  return ~crc;
}

std::string encode_checkpoint(const Checkpoint& checkpoint) {
  Checkpoint cp;
  for (const auto& [uid, c] : checkpoint.claims) cp.claims.emplace(uid, normalized(c));
  // One serialization: the compact body is what the checksum covers, and "checksum" sorts before
  // "claims", so the file is that body with the checksum member put in front (the same bytes
  // nlohmann would write for the whole object). Every prepare and unprepare writes the file.
  const std::string body = body_of(cp).dump();
  return "{\"checksum\":\"" + std::string(kChecksumPrefix) + hex8(crc32(body)) + "\"," + body.substr(1) + "\n";
}

Result<Checkpoint> decode_checkpoint(std::string_view text) {
  auto bad = [](const std::string& why) {
    return make_error(ErrorCode::InvalidArgument, "DRA checkpoint " + why + std::string(kFix));
  };
  if (text.size() > kMaxCheckpointBytes) {
    return bad("is " + std::to_string(text.size()) + " bytes, more than the " + std::to_string(kMaxCheckpointBytes) +
               " a checkpoint can be");
  }
  const json doc = json::parse(text.begin(), text.end(), nullptr, false);
  if (doc.is_discarded()) return bad("is not JSON (truncated or overwritten?)");
  if (!doc.is_object()) return bad("is not a JSON object");
  const JsonAt at(doc, "DRA checkpoint");
  // Kind and version first: a newer agent's file gets a message about versions, not fields.
  if (at.member("kind").if_string() != kCheckpointKind) {
    const json* kind = at.member("kind").get();
    return bad("is not a " + json_quote(kCheckpointKind) + " file (kind " +
               (kind != nullptr
                    ? common::cut_for_message(kind->dump(-1, ' ', false, json::error_handler_t::replace), 80)
                    : std::string("missing")) +
               ")");
  }
  const auto version = at.member("version").if_int64();
  if (!version) return bad("has no integer version");
  if (const int64_t v = *version; v != kCheckpointVersion) {
    return bad("has version " + std::to_string(v) + "; this agent reads version " + std::to_string(kCheckpointVersion) +
               (v > kCheckpointVersion ? " (the file was written by a newer agent: run that one again, or"
                                         " unprepare its claims before a downgrade)"
                                       : ""));
  }
  const Fields top(doc, "DRA checkpoint");
  if (auto s = top.exactly({"kind", "version", "claims", "checksum"}); !s) {
    return make_error(ErrorCode::InvalidArgument, s.error().message + std::string(kFix));
  }
  const auto checksum = at.member("checksum").if_string();
  if (!checksum) return bad("checksum is not a string");
  json body = doc;
  body.erase("checksum");
  const std::string want =
      std::string(kChecksumPrefix) + hex8(crc32(body.dump(-1, ' ', false, json::error_handler_t::replace)));
  if (*checksum != want) {
    return bad("is corrupt: checksum " + json_quote(common::cut_for_message(*checksum, 40)) + ", content gives " +
               json_quote(want));
  }
  const JsonAt claims = at.member("claims");
  if (!claims.is(JsonKind::Array)) return bad("claims is not an array");
  if (claims.size() > kMaxCheckpointClaims)
    return bad("lists more than " + std::to_string(kMaxCheckpointClaims) + " claims");
  Checkpoint cp;
  for (size_t i = 0; i < claims.size(); ++i) {
    auto c = read_claim(*claims.element(i).get(), i);
    if (!c) return make_error(ErrorCode::InvalidArgument, c.error().message + std::string(kFix));
    const std::string uid = c->uid;
    if (!cp.claims.emplace(uid, normalized(std::move(c).value())).second) return bad("lists claim " + uid + " twice");
  }
  return cp;
}

PreparedClaim normalized(PreparedClaim claim) {
  for (auto& d : claim.devices) std::sort(d.requests.begin(), d.requests.end());
  std::sort(claim.devices.begin(), claim.devices.end(), [](const PreparedDevice& a, const PreparedDevice& b) {
    return std::tie(a.pool, a.device, a.share_id) < std::tie(b.pool, b.device, b.share_id);
  });
  return claim;
}

Result<PrepareDecision> decide_prepare(const Checkpoint& checkpoint, const PreparedClaim& wanted) {
  if (wanted.uid.empty())
    return make_error(ErrorCode::InvalidArgument, "claim " + wanted.ns + "/" + wanted.name + " has no UID");
  if (wanted.devices.empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      "claim " + wanted.ns + "/" + wanted.name + " (" + wanted.uid + ") has no devices of this driver");
  }
  PreparedClaim want = normalized(wanted);
  const auto it = checkpoint.claims.find(want.uid);
  if (it == checkpoint.claims.end()) return PrepareDecision{PrepareVerdict::Prepare, std::move(want)};
  const PreparedClaim have = normalized(it->second);
  if (!same_allocation(have, want)) {
    return make_error(
        ErrorCode::FailedPrecondition,
        "claim " + want.ns + "/" + want.name + " (" + want.uid + ") is already prepared on this node with " +
            describe_devices(have) + (have.smcr ? " for SMC-R" : "") + ", and is now asked for " +
            describe_devices(want) + (want.smcr ? " for SMC-R" : "") +
            "; an allocation never changes, so one side is wrong: delete the pods using the claim and the "
            "claim, then let it be allocated again");
  }
  return PrepareDecision{PrepareVerdict::AlreadyPrepared, have};
}

UnprepareDecision decide_unprepare(const Checkpoint& checkpoint, std::string_view uid) {
  const auto it = checkpoint.claims.find(std::string(uid));
  if (it == checkpoint.claims.end()) return UnprepareDecision{};
  return UnprepareDecision{true, it->second};
}

Checkpoint with_claim(Checkpoint checkpoint, PreparedClaim claim) {
  std::string uid = claim.uid;
  checkpoint.claims.insert_or_assign(std::move(uid), normalized(std::move(claim)));
  return checkpoint;
}

Checkpoint without_claim(Checkpoint checkpoint, std::string_view uid) {
  checkpoint.claims.erase(std::string(uid));
  return checkpoint;
}

std::map<std::string, std::vector<std::string>> claims_on_cards(const Checkpoint& checkpoint,
                                                                const std::set<std::string>& cards) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [uid, claim] : checkpoint.claims) {
    std::set<std::string> held;
    for (const auto& d : claim.devices) {
      if (cards.count(d.card) != 0) held.insert(d.card);
    }
    if (!held.empty()) out.emplace(uid, std::vector<std::string>(held.begin(), held.end()));
  }
  return out;
}

std::vector<std::string> stale_spec_files(const Checkpoint& checkpoint, const std::vector<std::string>& files_in_dir,
                                          std::string_view driver) {
  std::set<std::string> owned;
  for (const auto& [uid, c] : checkpoint.claims) owned.insert(c.cdi_spec_file);
  std::set<std::string> stale;
  for (const auto& f : files_in_dir) {
    if (is_claim_spec_file(f, driver) && owned.count(f) == 0) stale.insert(f);
  }
  return {stale.begin(), stale.end()};
}

}  // namespace erdma::agent
