// Fake kubelet PodResources (v1) and CRI RuntimeService (runtime.v1) servers for pod setup
// tests: real gRPC servers on unix sockets, answering with whatever the test put in them. Either
// can be told to hang (answer only when the caller gives up), to fail with a status code, or to
// answer with an oversized message.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "agent/proto/cri_runtime_v1.grpc.pb.h"
#include "agent/proto/podresources_v1.grpc.pb.h"

namespace erdma::agent::testing {

// How a fake answers its next calls.
struct Behaviour {
  bool hang = false;                     // never answer; the call ends when the client gives up
  std::optional<grpc::StatusCode> fail;  // answer with this error
};

class FakePodResourcesServer {
 public:
  explicit FakePodResourcesServer(std::string socket_path);
  ~FakePodResourcesServer();

  // Adds a container (with `ids` of `resource`) to pod ns/name, creating the pod if needed.
  void add(const std::string& ns, const std::string& name, const std::string& container, const std::string& resource,
           const std::vector<std::string>& ids);
  void set_response(v1::ListPodResourcesResponse r);
  void set_behaviour(Behaviour b);
  [[nodiscard]] size_t calls() const;
  [[nodiscard]] const std::string& socket() const noexcept { return socket_; }

  struct Impl;

 private:
  std::string socket_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<grpc::Server> server_;
};

// What a fake sandbox looks like to the agent.
struct FakeSandbox {
  std::string id;
  std::string ns;
  std::string name;
  std::map<std::string, std::string> annotations;
  int64_t created_at = 1;
  bool ready = true;
  bool host_network = false;              // NamespaceOption.network = NODE
  std::optional<std::string> netns_path;  // runtimeSpec.linux.namespaces[network].path
  std::optional<uint32_t> pid;
  std::optional<std::string> raw_info;  // replaces the generated info JSON
};

class FakeCriServer {
 public:
  explicit FakeCriServer(std::string socket_path);
  ~FakeCriServer();

  void add(FakeSandbox s);
  void remove(const std::string& id);       // PodSandboxStatus answers NOT_FOUND afterwards
  void hide_status(const std::string& id);  // listed, but its status answers NOT_FOUND (vanished meanwhile)
  void set_list_behaviour(Behaviour b);
  void set_status_behaviour(Behaviour b);
  [[nodiscard]] size_t list_calls() const;
  [[nodiscard]] size_t status_calls() const;
  // The last ListPodSandbox request (to check the filter the agent sends).
  [[nodiscard]] runtime::v1::ListPodSandboxRequest last_list_request() const;
  [[nodiscard]] const std::string& socket_for_test() const noexcept { return socket_; }

  struct Impl;

 private:
  std::string socket_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<grpc::Server> server_;
};

// The verbose info JSON containerd returns for a sandbox (pid, netNamespaceClosed, runtimeSpec).
[[nodiscard]] std::string containerd_info_json(const std::optional<std::string>& netns_path,
                                               const std::optional<uint32_t>& pid, bool host_network);

}  // namespace erdma::agent::testing
