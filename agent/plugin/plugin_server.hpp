// The gRPC server behind a plugin socket, and the device plugin's Register call to kubelet.
//
// A gRPC server cannot re-bind a unix socket whose file was deleted, so "recreating the socket"
// after a kubelet restart means a new server instance serving the same service objects (whose
// state lives outside the server, untouched by restarts: DeviceState for the device plugin, the
// checkpoint for the DRA driver).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include <grpcpp/server.h>

#include "agent/plugin/device_plugin_service.hpp"
#include "common/result.hpp"

namespace erdma::agent {

class PluginServer {
 public:
  // Serves one service (the device plugin), or several on one socket (the DRA driver's). The
  // services must outlive the server.
  explicit PluginServer(grpc::Service& service) : services_{&service} {}
  explicit PluginServer(std::vector<grpc::Service*> services) : services_(std::move(services)) {}
  ~PluginServer();
  PluginServer(const PluginServer&) = delete;
  PluginServer& operator=(const PluginServer&) = delete;

  // Serves the service on `socket_path`, replacing a stale socket file left there (never
  // anything that is not a socket: FailedPrecondition). Stops a previous instance first.
  // Errors: Unavailable when the directory is missing or the socket cannot be bound.
  [[nodiscard]] Status start(const std::string& socket_path, std::chrono::milliseconds grace);
  // Stops serving: open calls get `grace` to finish, then are cancelled. Removes the socket file
  // if it is still the one this server created. Bounded; safe to call when not serving.
  void stop(std::chrono::milliseconds grace);

  [[nodiscard]] bool serving() const noexcept { return server_ != nullptr; }
  // True while the socket file at the path is the one this server created (kubelet deletes it
  // when it starts; a later file at the same path is not ours).
  [[nodiscard]] bool socket_is_ours() const;

 private:
  std::vector<grpc::Service*> services_;
  std::unique_ptr<grpc::Server> server_;
  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

struct Registration {
  std::string kubelet_socket;  // <dir>/kubelet.sock
  std::string endpoint;        // our socket's file name, e.g. "erdma.sock"
  std::string resource_name;   // e.g. "aliyun/erdma"
};

// Sends gRPC's own log lines into the agent's JSON log (gRPC errors as warn, the rest as debug),
// so stderr stays one JSON object per line. Call once, before any gRPC object exists.
void route_grpc_logs();

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
