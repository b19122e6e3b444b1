// The API server's address taken apart (see server_address.hpp).
#include "agent/kube/server_address.hpp"

#include <boost/asio/ip/address.hpp>

namespace erdma::agent::kube::https {
namespace net = boost::asio;

Result<Endpoint> parse_server(std::string_view server) {
  const auto bad = [&](std::string_view why) {
    return make_error(ErrorCode::FailedPrecondition, "API server address \"" + std::string(server) +
                                                         "\": " + std::string(why) + " (want https://host[:port])");
  };
  constexpr std::string_view kScheme = "https://";
  if (server.substr(0, kScheme.size()) != kScheme) return bad("not https");
  std::string_view rest = server.substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return bad("has a path");
  Endpoint e;
  std::string_view port = "443";
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return bad("unclosed '['");
    e.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("junk after ']'");
      port = rest.substr(1);
    }
  } else {
    const auto colon = rest.rfind(':');
    if (colon != std::string_view::npos) {
      if (rest.find(':') != colon) return bad("an IPv6 address must be in brackets");
      port = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
    }
    e.host = std::string(rest);
  }
  if (e.host.empty()) return bad("no host");
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
      std::stoul(std::string(port)) == 0 || std::stoul(std::string(port)) > 65535) {
    return bad("bad port");
  }
  e.port = std::string(port);
  boost::system::error_code ec;
  const auto addr = net::ip::make_address(e.host, ec);
  e.is_ip = !ec;
  e.host_header = (e.is_ip && addr.is_v6() ? "[" + e.host + "]" : e.host) + ":" + e.port;
  return e;
}

}  // namespace erdma::agent::kube::https
