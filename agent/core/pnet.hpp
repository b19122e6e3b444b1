// SMC-R pnet table values: the PNETID that ties a netdev to an RDMA port, and one table entry.
// Validation follows the kernel's rules (net/smc/smc_pnet.c), so a value that passes here is one
// the kernel accepts, and a malformed value never reaches it.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace erdma::agent {

inline constexpr size_t kMaxPnetIdLen = 16;     // SMC_MAX_PNETID_LEN
inline constexpr size_t kMaxIfNameLen = 15;     // IFNAMSIZ - 1
inline constexpr size_t kMaxIbDevNameLen = 63;  // IB_DEVICE_NAME_MAX - 1
inline constexpr unsigned kMaxSmcIbPort = 2;    // SMC_MAX_PORTS

// A physical network identifier: 1..16 ASCII letters or digits, stored upper-case.
class PnetId {
 public:
  // Strips surrounding blanks and upper-cases, as the kernel does. InvalidArgument when empty,
  // longer than 16 characters or containing anything but ASCII letters and digits.
  [[nodiscard]] static Result<PnetId> parse(std::string_view text);

  [[nodiscard]] const std::string& str() const noexcept { return value_; }
  friend auto operator<=>(const PnetId&, const PnetId&) = default;

 private:
  explicit PnetId(std::string v) : value_(std::move(v)) {}
  std::string value_;
};

enum class PnetEntryKind { Eth, Ib };

// One pnet table entry: either a netdev (ETH) or an RDMA device port (IB) mapped to a PNETID.
struct PnetEntry {
  PnetId pnet_id;
  PnetEntryKind kind = PnetEntryKind::Eth;
  std::string device;  // netdev name (Eth) or RDMA device name (Ib)
  uint8_t port = 0;    // Ib: 1..2; Eth: 0

  // Validated constructors. Interface names follow the kernel's dev_valid_name (1..15 bytes, no
  // '/', ':' or whitespace, not "." or ".."); RDMA device names are 1..63 printable bytes
  // without '/' or whitespace; ports are 1..2.
  [[nodiscard]] static Result<PnetEntry> eth(const PnetId& pnet_id, std::string_view ifname);
  [[nodiscard]] static Result<PnetEntry> ib(const PnetId& pnet_id, std::string_view ibdev, unsigned port);
  // The same, parsing the PNETID first (from the kernel or the command line).
  [[nodiscard]] static Result<PnetEntry> eth(std::string_view pnet_id, std::string_view ifname);
  [[nodiscard]] static Result<PnetEntry> ib(std::string_view pnet_id, std::string_view ibdev, unsigned port);

  // "ERDMA eth eth0" or "ERDMA ib erdma_0 port 1".
  [[nodiscard]] std::string to_string() const;

  // True when both entries are about the same device (and port), whatever PNETID they carry.
  [[nodiscard]] bool same_device(const PnetEntry& other) const noexcept {
    return kind == other.kind && device == other.device && port == other.port;
  }

  friend auto operator<=>(const PnetEntry&, const PnetEntry&) = default;
};

// Interface name rules (kernel dev_valid_name). Returns an error naming the rule.
[[nodiscard]] Status validate_ifname(std::string_view name);
// RDMA device name rules (1..63 bytes, printable ASCII, no '/' or whitespace).
[[nodiscard]] Status validate_ibdev_name(std::string_view name);

}  // namespace erdma::agent
