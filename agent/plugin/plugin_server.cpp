// Plugin socket server lifecycle and kubelet registration (see plugin_server.hpp).
#include "agent/plugin/plugin_server.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>

#include "common/unique_fd.hpp"
#include "common/log.hpp"

namespace erdma::agent {
namespace {

SocketFileId file_id_of(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

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
    return make_error(ErrorCode::Unavailable, "directory " + dir +
                                                  " does not exist (kubelet creates it; is it mounted into the agent?)");
  }
  if (::lstat(socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return make_error(ErrorCode::FailedPrecondition,
                        socket_path + " exists and is not a socket; refusing to replace it");
    }
    if (::unlink(socket_path.c_str()) != 0 && errno != ENOENT) {
      return make_error(ErrorCode::Unavailable, "cannot remove stale socket " + socket_path + ": " + std::strerror(errno));
    }
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(kMaxReceiveBytes);
  for (auto* service : services_) builder.RegisterService(service);
  auto server = builder.BuildAndStart();
  if (!server) {
    return make_error(ErrorCode::Unavailable, "cannot serve on " + socket_path +
                                                  " (does the directory exist and is it writable?)");
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

SocketFileId socket_file_id(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return file_id_of(st);
}

Result<SocketFileId> register_with_kubelet(const Registration& reg, std::chrono::milliseconds timeout) {
  // Kubelet may replace its socket while we connect (a restart deletes the directory's sockets and
  // listens again). Connecting by path would leave open which file we reached; connecting through
  // /proc/self/fd/N of a descriptor held for the whole call reaches exactly the file we stat.
  const common::UniqueFd fd(::open(reg.kubelet_socket.c_str(), O_PATH | O_CLOEXEC));
  if (!fd.valid()) {
    return make_error(ErrorCode::Unavailable, "Register with kubelet at " + reg.kubelet_socket +
                                                  " failed: cannot open it: " + std::strerror(errno) +
                                                  " (is kubelet running, and its device-plugins directory mounted?)");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return make_error(ErrorCode::Unavailable,
                      "Register with kubelet at " + reg.kubelet_socket + " failed: it is not a unix socket");
  }
  grpc::ChannelArguments args;
  // A fresh connection per attempt: after a kubelet restart the old one points at nothing.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel("unix:/proc/self/fd/" + std::to_string(fd.get()),
                                           grpc::InsecureChannelCredentials(), args);
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version("v1beta1");
  request.set_endpoint(reg.endpoint);
  request.set_resource_name(reg.resource_name);
  *request.mutable_options() = plugin_options();
  v1beta1::Empty response;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  const grpc::Status status = stub->Register(&ctx, request, &response);
  if (status.ok()) return file_id_of(st);
  const auto code = status.error_code();
  const ErrorCode mapped = code == grpc::StatusCode::UNAVAILABLE         ? ErrorCode::Unavailable
                           : code == grpc::StatusCode::DEADLINE_EXCEEDED ? ErrorCode::DeadlineExceeded
                           : code == grpc::StatusCode::INVALID_ARGUMENT  ? ErrorCode::InvalidArgument
                                                                         : ErrorCode::FailedPrecondition;
  return make_error(mapped, "Register with kubelet at " + reg.kubelet_socket + " failed: " + status.error_message() +
                                " (gRPC code " + std::to_string(static_cast<int>(code)) + ")");
}

}  // namespace erdma::agent
