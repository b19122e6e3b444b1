// SMC-Rv2 User Defined EID (UEID). Two peers only negotiate SMC-Rv2 when they share one, and on
// x86 there is no system EID, so every node of a cluster needs the same UEID. The table is global
// to the kernel (not per netns) and holds at most 4.
#pragma once

#include <compare>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace erdma::agent {

inline constexpr size_t kUeidLen = 32;  // SMC_MAX_EID_LEN: the wire form is 32 bytes + NUL
inline constexpr size_t kMaxUeids = 4;  // SMC_MAX_UEID

class Ueid {
 public:
  // Accepts 1..32 characters of A-Z, 0-9, '.' and '-', starting with a letter or digit; trailing
  // blanks are padding and dropped (net/smc/smc_clc.c smc_clc_ueid_valid). Lower case is refused,
  // not folded: the kernel compares UEIDs byte for byte, so "erdma" and "ERDMA" would not match.
  [[nodiscard]] static Result<Ueid> parse(std::string_view text);

  [[nodiscard]] const std::string& str() const noexcept { return value_; }  // without padding
  // The 32-character blank-padded form the kernel stores and compares.
  [[nodiscard]] std::string padded() const;

  friend auto operator<=>(const Ueid&, const Ueid&) = default;

 private:
  explicit Ueid(std::string v) : value_(std::move(v)) {}
  std::string value_;
};

}  // namespace erdma::agent
