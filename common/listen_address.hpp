// Parsing "host:port" listen addresses as given on command lines and in config files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.hpp"

namespace erdma::common {

struct ListenAddress {
  std::string host;   // IPv4 or IPv6 literal; "0.0.0.0" when the input had none (":8080")
  uint16_t port = 0;  // 0 = any free port (tests)
};

// Accepts "0.0.0.0:8443", "127.0.0.1:0", "[::1]:8080", "[::]:8443", ":8080". Host names are not
// resolved (a listen address must not depend on DNS). Errors: InvalidArgument naming the input.
[[nodiscard]] Result<ListenAddress> parse_listen_address(std::string_view text);

}  // namespace erdma::common
