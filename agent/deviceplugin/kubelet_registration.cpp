// The device plugin's registration with kubelet (see kubelet_registration.hpp).
#include "agent/deviceplugin/kubelet_registration.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>

#include <grpcpp/grpcpp.h>

#include "agent/deviceplugin/device_plugin_service.hpp"
#include "common/unique_fd.hpp"

namespace erdma::agent {
namespace {

SocketFileId file_id_of(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
          static_cast<int64_t>(st.st_ctim.tv_sec) * 1'000'000'000 + st.st_ctim.tv_nsec};
}

}  // namespace

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
