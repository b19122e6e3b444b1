// Reading what the code under test logged: the lines written while a LogCapture lives go to
// memory instead of stderr, and can be read while other threads go on logging.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/log.hpp"

namespace erdma::testing {

class LogCapture {
 public:
  LogCapture() { common::log::set_sink_for_test(&lines_); }
  ~LogCapture() { common::log::set_sink_for_test(nullptr); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // The lines so far (a copy, taken under the writers' lock).
  [[nodiscard]] std::string text() const { return common::log::sink_text_for_test(); }
  // How many lines so far hold `needle`, e.g. R"("msg":"device scan failed")".
  [[nodiscard]] size_t count(std::string_view needle) const {
    const std::string all = text();
    size_t n = 0;
    for (size_t start = 0; start < all.size();) {
      size_t end = all.find('\n', start);
      if (end == std::string::npos) end = all.size();
      if (std::string_view(all).substr(start, end - start).find(needle) != std::string_view::npos) ++n;
      start = end + 1;
    }
    return n;
  }

 private:
  std::string lines_;
};

}  // namespace erdma::testing
