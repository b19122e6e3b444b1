// The fake kubelet (see fake_kubelet.hpp).
#include "test/fakes/fake_kubelet.hpp"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include <sys/stat.h>

namespace erdma::agent::testing {
namespace fs = std::filesystem;

// The callback API, like the agent: a sync server's workers poll with a 10 s timeout, which can
// make Shutdown()+Wait() take that long.
struct FakeKubelet::Impl final : public v1beta1::Registration::CallbackService {
  mutable std::mutex mu;
  std::condition_variable cv;
  std::vector<v1beta1::RegisterRequest> requests;
  std::vector<std::chrono::steady_clock::time_point> times;
  int fail_next = 0;
  grpc::StatusCode fail_code = grpc::StatusCode::UNAVAILABLE;

  grpc::ServerUnaryReactor* Register(grpc::CallbackServerContext* ctx, const v1beta1::RegisterRequest* request,
                                     v1beta1::Empty*) override {
    auto* reactor = ctx->DefaultReactor();
    grpc::Status status = grpc::Status::OK;
    {
      std::lock_guard lock(mu);
      if (fail_next > 0) {
        --fail_next;
        status = grpc::Status(fail_code, "fake kubelet refuses this registration");
      } else {
        requests.push_back(*request);
        times.push_back(std::chrono::steady_clock::now());
        cv.notify_all();
      }
    }
    reactor->Finish(status);
    return reactor;
  }
};

FakeKubelet::FakeKubelet(std::string dir) : dir_(std::move(dir)), impl_(std::make_unique<Impl>()) {}

FakeKubelet::~FakeKubelet() { stop(); }

void FakeKubelet::start() {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + dir_ + "/kubelet.sock", grpc::InsecureServerCredentials());
  builder.RegisterService(impl_.get());
  server_ = builder.BuildAndStart();
  if (!server_) throw std::runtime_error("fake kubelet cannot serve in " + dir_);
}

void FakeKubelet::stop() {
  if (!server_) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  server_->Wait();
  server_.reset();
  std::error_code ec;
  fs::remove(dir_ + "/kubelet.sock", ec);
}

void FakeKubelet::restart() {
  stop();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) fs::remove(entry.path(), ec);
  }
  start();
}

void FakeKubelet::fail_next_registrations(int n, grpc::StatusCode code) {
  std::lock_guard lock(impl_->mu);
  impl_->fail_next = n;
  impl_->fail_code = code;
}

size_t FakeKubelet::registration_count() const {
  std::lock_guard lock(impl_->mu);
  return impl_->requests.size();
}

std::optional<v1beta1::RegisterRequest> FakeKubelet::wait_for_registrations(size_t n,
                                                                            std::chrono::milliseconds timeout) {
  std::unique_lock lock(impl_->mu);
  if (!impl_->cv.wait_for(lock, timeout, [&] { return impl_->requests.size() >= n; })) return std::nullopt;
  return impl_->requests[n - 1];
}

std::chrono::steady_clock::time_point FakeKubelet::registration_time(size_t n) const {
  std::lock_guard lock(impl_->mu);
  return impl_->times.at(n - 1);
}

std::unique_ptr<v1beta1::DevicePlugin::Stub> FakeKubelet::plugin(const std::string& endpoint) const {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return v1beta1::DevicePlugin::NewStub(
      grpc::CreateCustomChannel("unix:" + dir_ + "/" + endpoint, grpc::InsecureChannelCredentials(), args));
}

WatchStream::WatchStream(v1beta1::DevicePlugin::Stub& stub) {
  ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));  // never unbounded
  reader_ = stub.ListAndWatch(&ctx_, v1beta1::Empty());
  thread_ = std::thread([this] {
    v1beta1::ListAndWatchResponse r;
    while (reader_->Read(&r)) {
      std::lock_guard lock(mu_);
      queue_.push_back(r);
      cv_.notify_all();
    }
    std::lock_guard lock(mu_);
    ended_ = true;
    cv_.notify_all();
  });
}

WatchStream::~WatchStream() {
  ctx_.TryCancel();
  if (thread_.joinable()) thread_.join();
  [[maybe_unused]] auto status = reader_->Finish();
}

std::optional<v1beta1::ListAndWatchResponse> WatchStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || ended_; })) return std::nullopt;
  if (queue_.empty()) return std::nullopt;
  auto r = std::move(queue_.front());
  queue_.pop_front();
  return r;
}

bool WatchStream::ended() const {
  std::lock_guard lock(mu_);
  return ended_ && queue_.empty();
}

std::vector<std::pair<std::string, std::string>> health_of(const v1beta1::ListAndWatchResponse& r) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& d : r.devices()) out.emplace_back(d.id(), d.health());
  return out;
}

size_t count_health(const v1beta1::ListAndWatchResponse& r, const std::string& device, const std::string& health) {
  size_t n = 0;
  for (const auto& d : r.devices()) {
    if (d.id().rfind(device + "-", 0) == 0 && d.health() == health) ++n;
  }
  return n;
}

}  // namespace erdma::agent::testing
