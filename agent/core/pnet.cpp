// PNETID and pnet entry validation (rules mirror net/smc/smc_pnet.c smc_pnetid_valid and the
// netlink policy lengths).
#include "agent/core/pnet.hpp"

#include <string>

namespace erdma::agent {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

std::string quoted(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

Result<PnetId> PnetId::parse(std::string_view text) {
  size_t b = 0;
  size_t e = text.size();
  while (b < e && is_blank(text[b])) ++b;
  while (e > b && is_blank(text[e - 1])) --e;
  std::string_view t = text.substr(b, e - b);
  if (t.empty()) return make_error(ErrorCode::InvalidArgument, "PNETID " + quoted(text) + ": must not be empty");
  if (t.size() > kMaxPnetIdLen) {
    return make_error(ErrorCode::InvalidArgument,
                      "PNETID " + quoted(text) + ": exceeds " + std::to_string(kMaxPnetIdLen) + " chars");
  }
  std::string v;
  v.reserve(t.size());
  for (char c : t) {
    if (!is_alnum(c)) {
      return make_error(ErrorCode::InvalidArgument,
                        "PNETID " + quoted(text) + ": only ASCII letters and digits are allowed");
    }
    v += (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  }
  return PnetId(std::move(v));
}

Status validate_ifname(std::string_view name) {
  if (name.empty()) return make_error(ErrorCode::InvalidArgument, "interface name must not be empty");
  if (name.size() > kMaxIfNameLen) {
    return make_error(ErrorCode::InvalidArgument,
                      "interface name " + quoted(name) + ": exceeds " + std::to_string(kMaxIfNameLen) + " chars");
  }
  if (name == "." || name == "..") {
    return make_error(ErrorCode::InvalidArgument, "interface name " + quoted(name) + ": is not a valid name");
  }
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (c == '/' || c == ':' || is_blank(c) || u < 0x20 || u == 0x7f) {
      return make_error(ErrorCode::InvalidArgument,
                        "interface name " + quoted(name) + ": must not contain '/', ':', blanks or control characters");
    }
  }
  return {};
}

Status validate_ibdev_name(std::string_view name) {
  if (name.empty()) return make_error(ErrorCode::InvalidArgument, "RDMA device name must not be empty");
  if (name.size() > kMaxIbDevNameLen) {
    return make_error(ErrorCode::InvalidArgument,
                      "RDMA device name " + quoted(name) + ": exceeds " + std::to_string(kMaxIbDevNameLen) + " chars");
  }
  for (char c : name) {
    auto u = static_cast<unsigned char>(c);
    if (c == '/' || is_blank(c) || u < 0x21 || u >= 0x7f) {
      return make_error(ErrorCode::InvalidArgument,
                        "RDMA device name " + quoted(name) + ": must be printable ASCII without '/' or blanks");
    }
  }
  return {};
}

Result<PnetEntry> PnetEntry::eth(std::string_view pnet_id, std::string_view ifname) {
  ERDMA_TRY_ASSIGN(auto id, PnetId::parse(pnet_id));
  return eth(id, ifname);
}

Result<PnetEntry> PnetEntry::ib(std::string_view pnet_id, std::string_view ibdev, unsigned port) {
  ERDMA_TRY_ASSIGN(auto id, PnetId::parse(pnet_id));
  return ib(id, ibdev, port);
}

Result<PnetEntry> PnetEntry::eth(const PnetId& pnet_id, std::string_view ifname) {
  ERDMA_TRY(validate_ifname(ifname));
  return PnetEntry{pnet_id, PnetEntryKind::Eth, std::string(ifname), 0};
}

Result<PnetEntry> PnetEntry::ib(const PnetId& pnet_id, std::string_view ibdev, unsigned port) {
  ERDMA_TRY(validate_ibdev_name(ibdev));
  if (port < 1 || port > kMaxSmcIbPort) {
    return make_error(ErrorCode::InvalidArgument, "RDMA device " + std::string(ibdev) + ": port " +
                                                      std::to_string(port) + " is outside 1.." +
                                                      std::to_string(kMaxSmcIbPort) + " (SMC uses ports 1 and 2)");
  }
  return PnetEntry{pnet_id, PnetEntryKind::Ib, std::string(ibdev), static_cast<uint8_t>(port)};
}

std::string PnetEntry::to_string() const {
  if (kind == PnetEntryKind::Eth) return pnet_id.str() + " eth " + device;
  return pnet_id.str() + " ib " + device + " port " + std::to_string(port);
}

}  // namespace erdma::agent
