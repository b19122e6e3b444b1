// Netlink plumbing over libnl: RAII owners for nl_sock and nl_msg, a channel that sends one request
// and collects its replies with every wait bounded, and generic netlink family resolution.
// One channel per thread at a time; a channel's socket belongs to the netns it was created in.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

// rtnetlink (NETLINK_ROUTE) facts about the calling thread's network namespace, for predicting
// SMC-R (agent/core/smcr_feasibility.hpp).
struct RtLink {
  int index = 0;
  std::string name;
  std::string kind;                     // IFLA_INFO_KIND ("veth", "ipvlan"); "" for a device without one
  int link = 0;                         // IFLA_LINK: the lower (ipvlan/macvlan) or peer (veth) ifindex; 0 = none
  std::optional<int32_t> link_netnsid;  // IFLA_LINK_NETNSID: the netns `link` lives in, when not this one
};
struct RtIpv4Address {
  int index = 0;         // ifindex of the interface carrying it
  uint32_t address = 0;  // host byte order (IFA_LOCAL, else IFA_ADDRESS)
  uint8_t prefix_len = 32;
};
// One RTM_NEWLINK / RTM_NEWADDR message. nullopt for other message types and for non-IPv4
// addresses; InvalidArgument when the message is truncated or lacks the name / address.
[[nodiscard]] Result<std::optional<RtLink>> decode_rtnl_link(const nlmsghdr* msg);
[[nodiscard]] Result<std::optional<RtIpv4Address>> decode_rtnl_ipv4_address(const nlmsghdr* msg);

// Dumps over a NETLINK_ROUTE channel (bounded by its timeout).
[[nodiscard]] Result<std::vector<RtLink>> dump_links(NetlinkChannel& ch);
[[nodiscard]] Result<std::vector<RtIpv4Address>> dump_ipv4_addresses(NetlinkChannel& ch);
// RTM_GETNSID: the id this namespace gives the namespace open at `netns_fd`; nullopt when it has
// none assigned (no device links the two).
[[nodiscard]] Result<std::optional<int32_t>> netnsid_of(NetlinkChannel& ch, int netns_fd);

// The message every SMC client uses when the kernel lacks SMC.
inline constexpr const char* kNoSmcMessage = "the kernel has no SMC (module smc not loaded)";

}  // namespace erdma::agent
