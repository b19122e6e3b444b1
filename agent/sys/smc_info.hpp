// SMC state reported through the SMC_GEN_NETLINK family: system info, SMC-R link groups and links,
// statistics and fallback reasons (per netns), and the UEID table (global).
#pragma once

#include <vector>

#include "agent/core/smc_model.hpp"
#include "agent/core/ueid.hpp"
#include "agent/sys/pnet_table.hpp"
#include "common/result.hpp"

namespace erdma::agent {

class SmcInfo {
 public:
  virtual ~SmcInfo() = default;
  [[nodiscard]] virtual Result<SmcSystemInfo> system_info() = 0;
  // Link groups with their links.
  [[nodiscard]] virtual Result<std::vector<SmcrLinkGroup>> link_groups() = 0;
  [[nodiscard]] virtual Result<SmcStats> stats() = 0;
  [[nodiscard]] virtual Result<FallbackStats> fallback_stats() = 0;
  [[nodiscard]] virtual Result<std::vector<Ueid>> ueids() = 0;
  [[nodiscard]] virtual Result<Change> add_ueid(const Ueid& ueid) = 0;
  [[nodiscard]] virtual Result<Change> remove_ueid(const Ueid& ueid) = 0;
};

}  // namespace erdma::agent
