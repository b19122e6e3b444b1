// For a retried operation: says whether this failure is news, so the same error every period is
// one log line, not one per retry, and a recovery can be logged once.
#pragma once

#include <string>
#include <string_view>

namespace erdma::common {

class RepeatFilter {
 public:
  // The operation failed with `message`: true when it differs from the last failure noted since
  // the last success (log it then).
  [[nodiscard]] bool failed(std::string_view message) {
    if (failing_ && message == last_) return false;
    last_.assign(message);
    failing_ = true;
    return true;
  }
  // The operation worked: true when it was failing until now (log the recovery then, if wanted).
  bool succeeded() {
    const bool was = failing_;
    failing_ = false;
    last_.clear();
    return was;
  }

 private:
  std::string last_;
  bool failing_ = false;
};

}  // namespace erdma::common
