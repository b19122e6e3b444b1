// A fake kubelet for device plugin tests: a real gRPC Registration server on kubelet.sock in a
// temporary device-plugin directory, and real DevicePlugin clients. Like kubelet, restart()
// deletes every socket in the directory before serving again.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "agent/proto/deviceplugin_v1beta1.grpc.pb.h"

namespace erdma::agent::testing {

class FakeKubelet {
 public:
  explicit FakeKubelet(std::string dir);
  ~FakeKubelet();

  void start();  // serves Registration on <dir>/kubelet.sock
  void stop();   // stops serving (the socket file goes away)
  // What a kubelet does when it starts: delete every socket in the directory, then serve again.
  // Returns when the new kubelet.sock is being served.
  void restart();

  // The next `n` Register calls fail with `code`.
  void fail_next_registrations(int n, grpc::StatusCode code = grpc::StatusCode::UNAVAILABLE);
  [[nodiscard]] size_t registration_count() const;
  // Waits (bounded) until at least `n` registrations succeeded; returns the n-th request.
  [[nodiscard]] std::optional<v1beta1::RegisterRequest> wait_for_registrations(size_t n,
                                                                               std::chrono::milliseconds timeout);
  // When the n-th (1-based) successful registration arrived.
  [[nodiscard]] std::chrono::steady_clock::time_point registration_time(size_t n) const;

  // A DevicePlugin client for the socket the plugin registered (relative to the directory).
  [[nodiscard]] std::unique_ptr<v1beta1::DevicePlugin::Stub> plugin(const std::string& endpoint) const;
  [[nodiscard]] const std::string& dir() const noexcept { return dir_; }

  struct Impl;

 private:
  std::string dir_;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<grpc::Server> server_;
};

// A ListAndWatch stream read on a background thread; next() waits with a bound.
class WatchStream {
 public:
  explicit WatchStream(v1beta1::DevicePlugin::Stub& stub);
  ~WatchStream();  // cancels the call and joins the reader
  WatchStream(const WatchStream&) = delete;
  WatchStream& operator=(const WatchStream&) = delete;

  // The next response, or nullopt when none came within `timeout` or the stream ended.
  [[nodiscard]] std::optional<v1beta1::ListAndWatchResponse> next(std::chrono::milliseconds timeout);
  // Reads responses until `pred` holds for one (returned) or `timeout` passes (nullopt).
  template <class Pred>
  [[nodiscard]] std::optional<v1beta1::ListAndWatchResponse> until(Pred pred, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      auto r = next(left);
      if (!r) return std::nullopt;
      if (pred(*r)) return r;
    }
  }
  [[nodiscard]] bool ended() const;

 private:
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<v1beta1::ListAndWatchResponse>> reader_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1beta1::ListAndWatchResponse> queue_;
  bool ended_ = false;
  std::thread thread_;
};

// Health of every device ID in a response: {"erdma_0-0": "Healthy", ...}.
[[nodiscard]] std::vector<std::pair<std::string, std::string>> health_of(const v1beta1::ListAndWatchResponse& r);
// How many IDs of `device` ("erdma_0") have health `health`.
[[nodiscard]] size_t count_health(const v1beta1::ListAndWatchResponse& r, const std::string& device,
                                  const std::string& health);

}  // namespace erdma::agent::testing
