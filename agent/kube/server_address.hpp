// Where the HTTPS client connects: ApiConfig::server ("https://host[:port]") taken apart. Internal
// to the agent's API client (agent_kube); callers use api.hpp.
#pragma once

#include <string>
#include <string_view>

#include "common/result.hpp"

namespace erdma::agent::kube::https {

struct Endpoint {
  std::string host;  // a name, or an IP address without brackets
  std::string port;  // decimal
  bool is_ip = false;
  std::string host_header;  // Host: as sent ("[::1]:6443")
};

// "https://host[:port]" (a trailing '/' allowed, an IPv6 address in brackets, port 443 when none).
// FailedPrecondition saying what is wrong for anything else: another scheme, a path, a bad port.
[[nodiscard]] Result<Endpoint> parse_server(std::string_view server);

}  // namespace erdma::agent::kube::https
