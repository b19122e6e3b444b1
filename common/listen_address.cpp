// Listen address parsing (see listen_address.hpp).
#include "common/listen_address.hpp"

#include <arpa/inet.h>

#include <charconv>

namespace erdma::common {

Result<ListenAddress> parse_listen_address(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return make_error(ErrorCode::InvalidArgument,
                      "listen address \"" + std::string(text.substr(0, 128)) + "\": " + why);
  };
  ListenAddress out;
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("expected [IPv6]:port");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
    in6_addr a6{};
    const std::string h(host);
    if (inet_pton(AF_INET6, h.c_str(), &a6) != 1) return bad("\"" + h + "\" is not an IPv6 address");
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("expected host:port, e.g. 0.0.0.0:8443");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return bad("put an IPv6 address in brackets: [::]:8443");
    if (!host.empty()) {
      in_addr a4{};
      const std::string h(host);
      if (inet_pton(AF_INET, h.c_str(), &a4) != 1) return bad("\"" + h + "\" is not an IPv4 address");
    }
  }
  unsigned value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value > 65535) {
    return bad("port must be a number from 0 to 65535");
  }
  out.host = host.empty() ? "0.0.0.0" : std::string(host);
  out.port = static_cast<uint16_t>(value);
  return out;
}

}  // namespace erdma::common
