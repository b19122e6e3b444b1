// Fake PodResources and CRI servers (see fake_pod_apis.hpp).
#include "test/fakes/fake_pod_apis.hpp"

#include <stdexcept>

#include <nlohmann/json.hpp>

namespace erdma::agent::testing {
namespace {

// Finishes only when the client cancels (deadline) or the server shuts down.
class HangingReactor final : public grpc::ServerUnaryReactor {
 public:
  void OnCancel() override { Finish(grpc::Status::CANCELLED); }
  void OnDone() override { delete this; }
};

grpc::ServerUnaryReactor* answer(grpc::CallbackServerContext* ctx, const Behaviour& b) {
  if (b.hang) return new HangingReactor();
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(b.fail ? grpc::Status(*b.fail, "fake failure") : grpc::Status::OK);
  return reactor;
}

std::unique_ptr<grpc::Server> serve(const std::string& socket, grpc::Service* service) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  builder.RegisterService(service);
  builder.SetMaxSendMessageSize(64 << 20);
  auto server = builder.BuildAndStart();
  if (!server) throw std::runtime_error("cannot serve " + socket);
  return server;
}

}  // namespace

std::string containerd_info_json(const std::optional<std::string>& netns_path, const std::optional<uint32_t>& pid,
                                 bool host_network) {
  nlohmann::json namespaces =
      nlohmann::json::array({{{"type", "pid"}}, {{"type", "ipc"}}, {{"type", "uts"}}, {{"type", "mount"}}});
  if (!host_network) {
    nlohmann::json net{{"type", "network"}};
    if (netns_path) net["path"] = *netns_path;
    namespaces.push_back(net);
  }
  nlohmann::json doc{{"pid", pid.value_or(0)},
                     {"processStatus", "running"},
                     {"netNamespaceClosed", false},
                     {"image", "registry.k8s.io/pause:3.9"},
                     {"runtimeHandler", ""},
                     {"runtimeSpec", {{"ociVersion", "1.1.0"}, {"linux", {{"namespaces", namespaces}}}}}};
  return doc.dump();
}

// ---- PodResources

struct FakePodResourcesServer::Impl final : public v1::PodResourcesLister::CallbackService {
  mutable std::mutex mu;
  v1::ListPodResourcesResponse response;
  Behaviour behaviour;
  size_t calls = 0;

  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* ctx, const v1::ListPodResourcesRequest*,
                                 v1::ListPodResourcesResponse* out) override {
    std::lock_guard lock(mu);
    ++calls;
    if (!behaviour.hang && !behaviour.fail) *out = response;
    return answer(ctx, behaviour);
  }
};

FakePodResourcesServer::FakePodResourcesServer(std::string socket_path)
    : socket_(std::move(socket_path)), impl_(std::make_unique<Impl>()) {
  server_ = serve(socket_, impl_.get());
}

FakePodResourcesServer::~FakePodResourcesServer() {
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  server_->Wait();
}

void FakePodResourcesServer::add(const std::string& ns, const std::string& name, const std::string& container,
                                 const std::string& resource, const std::vector<std::string>& ids) {
  std::lock_guard lock(impl_->mu);
  v1::PodResources* pod = nullptr;
  for (auto& p : *impl_->response.mutable_pod_resources()) {
    if (p.namespace_() == ns && p.name() == name) pod = &p;
  }
  if (pod == nullptr) {
    pod = impl_->response.add_pod_resources();
    pod->set_namespace_(ns);
    pod->set_name(name);
  }
  auto* c = pod->add_containers();
  c->set_name(container);
  auto* d = c->add_devices();
  d->set_resource_name(resource);
  for (const auto& id : ids) d->add_device_ids(id);
}

void FakePodResourcesServer::set_response(v1::ListPodResourcesResponse r) {
  std::lock_guard lock(impl_->mu);
  impl_->response = std::move(r);
}

void FakePodResourcesServer::set_behaviour(Behaviour b) {
  std::lock_guard lock(impl_->mu);
  impl_->behaviour = b;
}

size_t FakePodResourcesServer::calls() const {
  std::lock_guard lock(impl_->mu);
  return impl_->calls;
}

// ---- CRI

struct FakeCriServer::Impl final : public runtime::v1::RuntimeService::CallbackService {
  mutable std::mutex mu;
  std::map<std::string, FakeSandbox> sandboxes;
  std::map<std::string, bool> hidden;
  Behaviour list_behaviour, status_behaviour;
  size_t list_calls = 0, status_calls = 0;
  runtime::v1::ListPodSandboxRequest last_list;

  static void fill_metadata(const FakeSandbox& s, runtime::v1::PodSandboxMetadata* m) {
    m->set_name(s.name);
    m->set_namespace_(s.ns);
    m->set_uid("uid-" + s.id);
    m->set_attempt(0);
  }

  // The labels kubelet puts on a sandbox.
  static std::map<std::string, std::string> labels_of(const FakeSandbox& s) {
    return {{"io.kubernetes.pod.namespace", s.ns},
            {"io.kubernetes.pod.name", s.name},
            {"io.kubernetes.pod.uid", "uid-" + s.id}};
  }

  grpc::ServerUnaryReactor* ListPodSandbox(grpc::CallbackServerContext* ctx,
                                           const runtime::v1::ListPodSandboxRequest* request,
                                           runtime::v1::ListPodSandboxResponse* out) override {
    std::lock_guard lock(mu);
    ++list_calls;
    last_list = *request;
    if (!list_behaviour.hang && !list_behaviour.fail) {
      const bool only_ready = request->has_filter() && request->filter().has_state() &&
                              request->filter().state().state() == runtime::v1::SANDBOX_READY;
      for (const auto& [id, s] : sandboxes) {
        if (only_ready && !s.ready) continue;
        // As containerd: every label of the selector must match the sandbox's labels.
        const std::map<std::string, std::string> labels = labels_of(s);
        bool selected = true;
        if (request->has_filter()) {
          for (const auto& [k, v] : request->filter().label_selector()) {
            auto l = labels.find(k);
            if (l == labels.end() || l->second != v) selected = false;
          }
        }
        if (!selected) continue;
        auto* item = out->add_items();
        item->set_id(s.id);
        fill_metadata(s, item->mutable_metadata());
        for (const auto& [k, v] : labels) (*item->mutable_labels())[k] = v;
        item->set_state(s.ready ? runtime::v1::SANDBOX_READY : runtime::v1::SANDBOX_NOTREADY);
        item->set_created_at(s.created_at);
        for (const auto& [k, v] : s.annotations) (*item->mutable_annotations())[k] = v;
      }
    }
    return answer(ctx, list_behaviour);
  }

  grpc::ServerUnaryReactor* PodSandboxStatus(grpc::CallbackServerContext* ctx,
                                             const runtime::v1::PodSandboxStatusRequest* request,
                                             runtime::v1::PodSandboxStatusResponse* out) override {
    std::lock_guard lock(mu);
    ++status_calls;
    if (status_behaviour.hang || status_behaviour.fail) return answer(ctx, status_behaviour);
    auto it = sandboxes.find(request->pod_sandbox_id());
    if (it == sandboxes.end() || hidden.count(request->pod_sandbox_id()) != 0) {
      auto* reactor = ctx->DefaultReactor();
      reactor->Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, "an error occurred when try to find sandbox"));
      return reactor;
    }
    const auto& s = it->second;
    auto* st = out->mutable_status();
    st->set_id(s.id);
    fill_metadata(s, st->mutable_metadata());
    st->set_state(s.ready ? runtime::v1::SANDBOX_READY : runtime::v1::SANDBOX_NOTREADY);
    st->set_created_at(s.created_at);
    st->mutable_linux()->mutable_namespaces()->mutable_options()->set_network(s.host_network ? runtime::v1::NODE
                                                                                             : runtime::v1::POD);
    for (const auto& [k, v] : s.annotations) (*st->mutable_annotations())[k] = v;
    if (request->verbose()) {
      (*out->mutable_info())["info"] =
          s.raw_info ? *s.raw_info : containerd_info_json(s.netns_path, s.pid, s.host_network);
    }
    return answer(ctx, status_behaviour);
  }
};

FakeCriServer::FakeCriServer(std::string socket_path)
    : socket_(std::move(socket_path)), impl_(std::make_unique<Impl>()) {
  server_ = serve(socket_, impl_.get());
}

FakeCriServer::~FakeCriServer() {
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  server_->Wait();
}

void FakeCriServer::add(FakeSandbox s) {
  std::lock_guard lock(impl_->mu);
  impl_->sandboxes[s.id] = std::move(s);
}

void FakeCriServer::remove(const std::string& id) {
  std::lock_guard lock(impl_->mu);
  impl_->sandboxes.erase(id);
}

void FakeCriServer::hide_status(const std::string& id) {
  std::lock_guard lock(impl_->mu);
  impl_->hidden[id] = true;
}

void FakeCriServer::set_list_behaviour(Behaviour b) {
  std::lock_guard lock(impl_->mu);
  impl_->list_behaviour = b;
}

void FakeCriServer::set_status_behaviour(Behaviour b) {
  std::lock_guard lock(impl_->mu);
  impl_->status_behaviour = b;
}

size_t FakeCriServer::list_calls() const {
  std::lock_guard lock(impl_->mu);
  return impl_->list_calls;
}

size_t FakeCriServer::status_calls() const {
  std::lock_guard lock(impl_->mu);
  return impl_->status_calls;
}

runtime::v1::ListPodSandboxRequest FakeCriServer::last_list_request() const {
  std::lock_guard lock(impl_->mu);
  return impl_->last_list;
}

}  // namespace erdma::agent::testing
