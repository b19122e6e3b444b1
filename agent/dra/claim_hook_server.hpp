// The agent's end of the CDI createRuntime hook of SMC-R claims (agent/core/cdi_hook.hpp): a unix
// socket, mode 0600, that the hook connects to from the runtime on the same host. One request per
// connection (cdi_hook_protocol.h); the answer is the handler's outcome. Connections are served one
// at a time on the server's own thread: a pod's setup takes milliseconds and is bounded by the
// handler, the hook bounds its own wait, and a request that is not read whole within the read
// timeout is answered with an error. A request that cannot be parsed is answered with the reason
// and logged; nothing a request says reaches the kernel before the handler has checked it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>

#include "agent/core/cdi_hook.hpp"
#include "common/result.hpp"
#include "common/unique_fd.hpp"

namespace erdma::agent::dra {

struct ClaimHookOutcome {
  ClaimHookOutcome() = default;
  ClaimHookOutcome(bool ok_, std::string text_, std::string netns_ = {}, bool host_network_ = false)
      : ok(ok_), text(std::move(text_)), netns(std::move(netns_)), host_network(host_network_) {}
  bool ok = false;
  std::string text;  // what the hook prints, and the agent logs
  // Where the pod's network is, for the claim's status: its netns file (empty when unknown) and
  // whether that is the node's (hostNetwork).
  std::string netns;
  bool host_network = false;
};

// Called on the server's thread for each request that parsed; `deadline` is when the hook stops
// waiting. Must not throw.
using ClaimHookHandler = std::function<ClaimHookOutcome(const HookRequest&, std::chrono::steady_clock::time_point)>;

class ClaimHookServer {
 public:
  // `handle_within`: how long the handler may take (the hook's own wait is longer: cdi_hook.hpp).
  ClaimHookServer(std::string socket_path, ClaimHookHandler handler,
                  std::chrono::milliseconds read_timeout = std::chrono::milliseconds(2000),
                  std::chrono::milliseconds handle_within = std::chrono::milliseconds(5000));
  ~ClaimHookServer();
  ClaimHookServer(const ClaimHookServer&) = delete;
  ClaimHookServer& operator=(const ClaimHookServer&) = delete;

  // Binds the socket (a socket left at the path by an earlier agent is replaced; anything else
  // there is refused, named), makes it 0600, listens and starts the thread. Errors name the path:
  // InvalidArgument for a path too long for a unix socket, FailedPrecondition for a non-socket in
  // the way, Unavailable for the socket calls.
  [[nodiscard]] Status start();
  // Stops the thread after the request it is serving and removes the socket. Idempotent.
  void stop();

  [[nodiscard]] const std::string& socket_path() const noexcept { return path_; }
  [[nodiscard]] uint64_t answered_ok() const noexcept { return ok_.load(); }
  [[nodiscard]] uint64_t answered_error() const noexcept { return errors_.load(); }

 private:
  void loop();
  void serve(common::UniqueFd conn);

  const std::string path_;
  const ClaimHookHandler handler_;
  const std::chrono::milliseconds read_timeout_;
  const std::chrono::milliseconds handle_within_;
  common::UniqueFd listener_;
  common::UniqueFd wake_read_;  // a pipe: stop() writes, the loop's poll wakes
  common::UniqueFd wake_write_;
  std::thread thread_;
  std::atomic<uint64_t> ok_{0};
  std::atomic<uint64_t> errors_{0};
};

}  // namespace erdma::agent::dra
