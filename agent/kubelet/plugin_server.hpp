// The gRPC server behind a kubelet plugin socket (the device plugin's, the DRA driver's two), and
// gRPC's log lines routed into the agent's log.
//
// A gRPC server cannot re-bind a unix socket whose file was deleted, so "recreating the socket"
// after a kubelet restart means a new server instance serving the same service objects (whose
// state lives outside the server, untouched by restarts: DeviceState for the device plugin, the
// checkpoint for the DRA driver).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <sys/types.h>

#include <grpcpp/impl/service_type.h>
#include <grpcpp/server.h>

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

// Sends gRPC's own log lines into the agent's JSON log (gRPC errors as warn, the rest as debug),
// so stderr stays one JSON object per line. Call once, before any gRPC object exists.
void route_grpc_logs();

}  // namespace erdma::agent
