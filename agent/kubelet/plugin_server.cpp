// Plugin socket server lifecycle and gRPC log routing (see plugin_server.hpp).
#include "agent/kubelet/plugin_server.hpp"

#include <cerrno>
#include <cstring>

#include <sys/stat.h>
#include <unistd.h>

#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>

#include "common/log.hpp"

namespace erdma::agent {
namespace {

// Max gRPC message kubelet or a client may send us. Kubelet's requests carry device ID lists;
// 4 MiB (gRPC's default) holds far more IDs than any node advertises.
constexpr int kMaxReceiveBytes = 4 << 20;

}  // namespace

PluginServer::~PluginServer() { stop(std::chrono::milliseconds(0)); }

Status PluginServer::start(const std::string& socket_path, std::chrono::milliseconds grace) {
  stop(grace);
  struct stat st {};
  const auto slash = socket_path.rfind('/');
  const std::string dir = slash == std::string::npos || slash == 0 ? "/" : socket_path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return make_error(ErrorCode::Unavailable,
                      "directory " + dir + " does not exist (kubelet creates it; is it mounted into the agent?)");
  }
  if (::lstat(socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return make_error(ErrorCode::FailedPrecondition,
                        socket_path + " exists and is not a socket; refusing to replace it");
    }
    if (::unlink(socket_path.c_str()) != 0 && errno != ENOENT) {
      return make_error(ErrorCode::Unavailable,
                        "cannot remove stale socket " + socket_path + ": " + std::strerror(errno));
    }
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  for (auto* service : services_) builder.RegisterService(service);
  auto server = builder.BuildAndStart();
  if (!server) {
    return make_error(ErrorCode::Unavailable,
                      "cannot serve on " + socket_path + " (does the directory exist and is it writable?)");
  }
  if (::lstat(socket_path.c_str(), &st) != 0) {
    server->Shutdown(std::chrono::system_clock::now());
    server->Wait();
    return make_error(ErrorCode::Unavailable, socket_path + " vanished right after it was created");
  }
  server_ = std::move(server);
  path_ = socket_path;
  dev_ = st.st_dev;
  ino_ = st.st_ino;
  return {};
}

void PluginServer::stop(std::chrono::milliseconds grace) {
  if (!server_) return;
  // Shutdown waits at most until the deadline, then cancels what is still open (ListAndWatch).
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  server_.reset();
  if (socket_is_ours()) ::unlink(path_.c_str());
  ino_ = 0;
  dev_ = 0;
}

bool PluginServer::socket_is_ours() const {
  if (path_.empty() || ino_ == 0) return false;
  struct stat st {};
  return ::lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && st.st_ino == ino_ && st.st_dev == dev_;
}

void route_grpc_logs() {
  gpr_set_log_function([](gpr_log_func_args* args) {
    const bool is_error = args->severity == GPR_LOG_SEVERITY_ERROR;
    if (!common::log::enabled(is_error ? common::log::Level::Warn : common::log::Level::Debug)) return;
    common::log::Line(is_error ? common::log::Level::Warn : common::log::Level::Debug, "grpc")
        .kv("detail", args->message != nullptr ? args->message : "")
        .kv("at", std::string(args->file != nullptr ? args->file : "") + ":" + std::to_string(args->line));
  });
}

}  // namespace erdma::agent
