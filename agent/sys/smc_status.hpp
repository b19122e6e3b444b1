// SMC sockets of one network namespace (sock_diag for AF_SMC), the data behind `smc-status`.
#pragma once

#include <vector>

#include "agent/core/smc_model.hpp"
#include "common/result.hpp"

namespace erdma::agent {

class SmcStatus {
 public:
  virtual ~SmcStatus() = default;
  [[nodiscard]] virtual Result<std::vector<SmcSocket>> sockets() = 0;
};

}  // namespace erdma::agent
