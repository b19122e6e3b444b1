// Netlink plumbing over libnl: RAII owners for nl_sock and nl_msg, a channel that sends one request
// and collects its replies with every wait bounded, and generic netlink family resolution.
// One channel per thread at a time; a channel's socket belongs to the netns it was created in.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <linux/netlink.h>

#include "common/result.hpp"

struct nl_sock;
struct nl_msg;

namespace erdma::agent {

struct NlSockDeleter {
  void operator()(nl_sock* s) const noexcept;
};
struct NlMsgDeleter {
  void operator()(nl_msg* m) const noexcept;
};
using NlSockPtr = std::unique_ptr<nl_sock, NlSockDeleter>;
using NlMsgPtr = std::unique_ptr<nl_msg, NlMsgDeleter>;

// Default bound on any wait for the kernel. A hung SMC-R link can hold SMC's locks; the agent must
// not hang with it.
inline constexpr std::chrono::milliseconds kNetlinkTimeout{10000};

class NetlinkChannel {
 public:
  // Opens and connects a netlink socket of `protocol` (NETLINK_GENERIC, NETLINK_SOCK_DIAG) in the
  // calling thread's network namespace. Unavailable if the socket cannot be created.
  [[nodiscard]] static Result<NetlinkChannel> open(int protocol, std::chrono::milliseconds timeout = kNetlinkTimeout);

  // Sends `msg` and reads replies until the kernel's ACK, error or end of dump. `on_message` sees
  // every reply that is not an ACK, error or DONE; an error it returns stops the exchange and is
  // returned. Returns the kernel's errno for the request (0 = success, e.g. EEXIST), or an Error
  // for a transport failure: DeadlineExceeded when no answer arrives within the timeout.
  [[nodiscard]] Result<int> transact(nl_msg* msg, const std::function<Status(const nlmsghdr*)>& on_message);

  [[nodiscard]] nl_sock* raw() const noexcept { return sock_.get(); }

 private:
  NetlinkChannel(NlSockPtr s, std::chrono::milliseconds t) : sock_(std::move(s)), timeout_(t) {}
  NlSockPtr sock_;
  std::chrono::milliseconds timeout_;
};

// A generic netlink family on its own channel; the family id is resolved once, at open().
class GenlClient {
 public:
  // Unavailable with `missing_message` when the kernel does not know the family (nlctrl ENOENT).
  [[nodiscard]] static Result<GenlClient> open(const std::string& family, const std::string& missing_message,
                                               std::chrono::milliseconds timeout = kNetlinkTimeout);

  // A new request message for `cmd` with `flags` (NLM_F_REQUEST is always added).
  [[nodiscard]] Result<NlMsgPtr> message(uint8_t cmd, int flags) const;
  [[nodiscard]] Result<int> transact(nl_msg* msg, const std::function<Status(const nlmsghdr*)>& on_message) {
    return channel_.transact(msg, on_message);
  }
  [[nodiscard]] uint16_t family_id() const noexcept { return family_id_; }

 private:
  GenlClient(NetlinkChannel c, uint16_t id) : channel_(std::move(c)), family_id_(id) {}
  NetlinkChannel channel_;
  uint16_t family_id_;
};

// Maps an errno the kernel returned for `what` to an Error with a message that says what to do:
// EPERM/EACCES -> PermissionDenied (CAP_NET_ADMIN), EINVAL -> InvalidArgument, ERANGE ->
// ResourceExhausted, EOPNOTSUPP -> Unavailable, ETIMEDOUT -> DeadlineExceeded, else Internal.
[[nodiscard]] Error kernel_error(int err, const std::string& what);

// The message every SMC client uses when the kernel lacks SMC.
inline constexpr const char* kNoSmcMessage = "the kernel has no SMC (module smc not loaded)";

}  // namespace erdma::agent
