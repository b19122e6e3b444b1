// The device plugin's Register call to kubelet (deviceplugin v1beta1 Registration on
// kubelet.sock), and which kubelet.sock file a registration reached.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/result.hpp"

namespace erdma::agent {

struct Registration {
  std::string kubelet_socket;  // <dir>/kubelet.sock
  std::string endpoint;        // our socket's file name, e.g. "erdma.sock"
  std::string resource_name;   // e.g. "aliyun/erdma"
};

// Which kubelet socket file a registration went to: device, inode and change time. Inode numbers
// are reused once a file is deleted; the change time tells a socket created later apart.
struct SocketFileId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  int64_t ctime_ns = 0;
  friend bool operator==(const SocketFileId&, const SocketFileId&) = default;
};

// The id of the file at `path` now; all zero when there is none.
[[nodiscard]] SocketFileId socket_file_id(const std::string& path);

// Calls kubelet's Registration.Register (version "v1beta1", the plugin's options). Bounded by
// `timeout`. The connection goes through a descriptor of the socket file opened first, so the
// answer names the very file registered with, even when kubelet replaces it during the call.
// Errors: Unavailable when kubelet.sock is missing, not a socket or nobody listens on it,
// otherwise the gRPC status kubelet answered with, e.g. for a resource name it refuses.
[[nodiscard]] Result<SocketFileId> register_with_kubelet(const Registration& reg, std::chrono::milliseconds timeout);

}  // namespace erdma::agent
