// The SMC-R pnet table of one network namespace. Kernel facts: the table is per netns, IB entries
// exist only in the initial netns, writes need CAP_NET_ADMIN, and DEL works by PNETID.
#pragma once

#include <vector>

#include "agent/core/pnet.hpp"
#include "common/result.hpp"

namespace erdma::agent {

// What a write did: Changed, or Unchanged because the table already was as asked (an ADD that
// found the entry, a DEL that found nothing). Both are success.
enum class Change { Changed, Unchanged };

class PnetTable {
 public:
  virtual ~PnetTable() = default;
  [[nodiscard]] virtual Result<std::vector<PnetEntry>> list() = 0;
  [[nodiscard]] virtual Result<Change> add(const PnetEntry& entry) = 0;
  // Deletes every entry carrying `id`.
  [[nodiscard]] virtual Result<Change> remove(const PnetId& id) = 0;
  [[nodiscard]] virtual Status flush() = 0;
};

}  // namespace erdma::agent
