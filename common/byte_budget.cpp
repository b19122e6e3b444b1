// A byte budget with a reserve for small requests (see byte_budget.hpp).
#include "common/byte_budget.hpp"

#include <cstdlib>

namespace erdma::common {

bool ByteBudget::grow(size_t held, size_t want) noexcept {
  if (want <= held || held > used_) std::abort();  // a caller's bookkeeping is broken
  const size_t cap = want <= limits_.small ? limits_.total : largest();
  // used_ - held: everyone else's bytes. Written so that no term can overflow.
  const size_t others = used_ - held;
  if (others > cap || want > cap - others) return false;
  used_ += want - held;
  return true;
}

void ByteBudget::release(size_t held) noexcept {
  if (held > used_) std::abort();  // released more than was reserved
  used_ -= held;
}

}  // namespace erdma::common
