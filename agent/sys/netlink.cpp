// Netlink channel over libnl with bounded waits (poll on a non-blocking socket) and raw kernel
// errno capture (our own error callback, so EEXIST and ENOENT stay distinguishable).
#include "agent/sys/netlink.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <poll.h>

#include <linux/genetlink.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/net_namespace.h>
#include <linux/rtnetlink.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <sys/socket.h>

namespace erdma::agent {

void NlSockDeleter::operator()(nl_sock* s) const noexcept { nl_socket_free(s); }
void NlMsgDeleter::operator()(nl_msg* m) const noexcept { nlmsg_free(m); }

namespace {

struct CbDeleter {
  void operator()(nl_cb* cb) const noexcept { nl_cb_put(cb); }
};

struct Exchange {
  const std::function<Status(const nlmsghdr*)>* on_message = nullptr;
  bool done = false;
  int kernel_errno = 0;
  std::optional<Error> failure;
};

int on_valid(nl_msg* msg, void* arg) {
  auto* ex = static_cast<Exchange*>(arg);
  if (ex->failure) return NL_STOP;
  Status st = (*ex->on_message)(nlmsg_hdr(msg));
  if (!st) {
    ex->failure = st.error();
    ex->done = true;
    return NL_STOP;
  }
  return NL_OK;
}

int on_finish(nl_msg* msg, void* arg) {
  auto* ex = static_cast<Exchange*>(arg);
  // A dump that fails part-way reports the negative errno as NLMSG_DONE's payload.
  const nlmsghdr* h = nlmsg_hdr(msg);
  if (h->nlmsg_len >= NLMSG_HDRLEN + sizeof(int)) {
    int err = 0;
    std::memcpy(&err, nlmsg_data(h), sizeof(err));
    if (err < 0) ex->kernel_errno = -err;
  }
  ex->done = true;
  return NL_STOP;
}

int on_ack(nl_msg*, void* arg) {
  static_cast<Exchange*>(arg)->done = true;
  return NL_STOP;
}

int on_error(sockaddr_nl*, nlmsgerr* e, void* arg) {
  auto* ex = static_cast<Exchange*>(arg);
  ex->kernel_errno = e->error < 0 ? -e->error : e->error;
  ex->done = true;
  return NL_STOP;
}

}  // namespace

Result<NetlinkChannel> NetlinkChannel::open(int protocol, std::chrono::milliseconds timeout) {
  NlSockPtr sock(nl_socket_alloc());
  if (!sock) return make_error(ErrorCode::ResourceExhausted, "netlink: cannot allocate a socket");
  nl_socket_disable_auto_ack(sock.get());
  int rc = nl_connect(sock.get(), protocol);
  if (rc < 0) {
    return make_error(ErrorCode::Unavailable, std::string("netlink: cannot open socket: ") + nl_geterror(rc));
  }
  rc = nl_socket_set_nonblocking(sock.get());
  if (rc < 0) return make_error(ErrorCode::Internal, std::string("netlink: ") + nl_geterror(rc));
  return NetlinkChannel(std::move(sock), timeout);
}

Result<int> NetlinkChannel::transact(nl_msg* msg, const std::function<Status(const nlmsghdr*)>& on_message) {
  std::unique_ptr<nl_cb, CbDeleter> cb(nl_cb_alloc(NL_CB_DEFAULT));
  if (!cb) return make_error(ErrorCode::ResourceExhausted, "netlink: cannot allocate callbacks");
  Exchange ex;
  ex.on_message = &on_message;
  nl_cb_set(cb.get(), NL_CB_VALID, NL_CB_CUSTOM, on_valid, &ex);
  nl_cb_set(cb.get(), NL_CB_FINISH, NL_CB_CUSTOM, on_finish, &ex);
  nl_cb_set(cb.get(), NL_CB_ACK, NL_CB_CUSTOM, on_ack, &ex);
  nl_cb_err(cb.get(), NL_CB_CUSTOM, on_error, &ex);

  int rc = nl_send_auto(sock_.get(), msg);
  if (rc < 0) return make_error(ErrorCode::Unavailable, std::string("netlink: send failed: ") + nl_geterror(rc));

  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (!ex.done) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return make_error(ErrorCode::DeadlineExceeded, "netlink: no complete answer from the kernel within " +
                                                         std::to_string(timeout_.count()) + " ms");
    }
    pollfd p{nl_socket_get_fd(sock_.get()), POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0) {
      if (errno == EINTR) continue;
      return make_error(ErrorCode::Internal, std::string("netlink: poll: ") + std::strerror(errno));
    }
    if (n == 0) continue;  // the deadline check above reports it
    rc = nl_recvmsgs(sock_.get(), cb.get());
    if (rc < 0 && !ex.done) {
      if (rc == -NLE_AGAIN) continue;
      if (rc == -NLE_DUMP_INTR) {
        return make_error(ErrorCode::Unavailable, "netlink: the dump was interrupted by a concurrent change; retry");
      }
      return make_error(ErrorCode::Internal, std::string("netlink: receive failed: ") + nl_geterror(rc));
    }
  }
  if (ex.failure) return std::move(*ex.failure);
  return ex.kernel_errno;
}

Result<GenlClient> GenlClient::open(const std::string& family, const std::string& missing_message,
                                    std::chrono::milliseconds timeout) {
  ERDMA_TRY_ASSIGN(auto ch, NetlinkChannel::open(NETLINK_GENERIC, timeout));
  // Resolve through nlctrl ourselves, on the bounded channel (genl_ctrl_resolve would block). The
  // ACK flag makes the kernel end the exchange after its reply; without it a found family would
  // leave us waiting for an end that never comes.
  NlMsgPtr msg(nlmsg_alloc());
  if (!msg) return make_error(ErrorCode::ResourceExhausted, "netlink: cannot allocate a message");
  if (!genlmsg_put(msg.get(), NL_AUTO_PORT, NL_AUTO_SEQ, GENL_ID_CTRL, 0, NLM_F_REQUEST | NLM_F_ACK, CTRL_CMD_GETFAMILY,
                   1) ||
      nla_put_string(msg.get(), CTRL_ATTR_FAMILY_NAME, family.c_str()) < 0) {
    return make_error(ErrorCode::Internal, "netlink: cannot build the family request");
  }
  std::optional<uint16_t> id;
  ERDMA_TRY_ASSIGN(auto rc, ch.transact(msg.get(), [&](const nlmsghdr* h) -> Status {
    nlattr* tb[CTRL_ATTR_MAX + 1] = {};
    nla_policy policy[CTRL_ATTR_MAX + 1] = {};
    policy[CTRL_ATTR_FAMILY_ID].type = NLA_U16;
    policy[CTRL_ATTR_FAMILY_NAME].type = NLA_STRING;
    if (genlmsg_parse(const_cast<nlmsghdr*>(h), 0, tb, CTRL_ATTR_MAX, policy) < 0 || !tb[CTRL_ATTR_FAMILY_ID]) {
      return make_error(ErrorCode::Internal, "nlctrl: malformed answer for family " + family);
    }
    id = nla_get_u16(tb[CTRL_ATTR_FAMILY_ID]);
    return {};
  }));
  if (rc == ENOENT) return make_error(ErrorCode::Unavailable, missing_message);
  if (rc != 0) return kernel_error(rc, "resolving generic netlink family " + family);
  if (!id) return make_error(ErrorCode::Internal, "nlctrl: no answer for family " + family);
  return GenlClient(std::move(ch), *id);
}

Result<NlMsgPtr> GenlClient::message(uint8_t cmd, int flags) const {
  NlMsgPtr msg(nlmsg_alloc());
  if (!msg) return make_error(ErrorCode::ResourceExhausted, "netlink: cannot allocate a message");
  if (!genlmsg_put(msg.get(), NL_AUTO_PORT, NL_AUTO_SEQ, family_id_, 0, flags | NLM_F_REQUEST, cmd, 1)) {
    return make_error(ErrorCode::Internal, "netlink: cannot build a request header");
  }
  return msg;
}

Result<std::optional<RtLink>> decode_rtnl_link(const nlmsghdr* h) {
  if (h->nlmsg_type != RTM_NEWLINK) return std::optional<RtLink>{};
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg))) {
    return make_error(ErrorCode::InvalidArgument, "rtnetlink: truncated link message");
  }
  nlattr* tb[IFLA_MAX + 1] = {};
  nla_policy policy[IFLA_MAX + 1] = {};
  policy[IFLA_IFNAME].type = NLA_STRING;
  policy[IFLA_LINK].type = NLA_U32;
  policy[IFLA_LINK_NETNSID].type = NLA_S32;
  policy[IFLA_LINKINFO].type = NLA_NESTED;
  if (nlmsg_parse(const_cast<nlmsghdr*>(h), sizeof(ifinfomsg), tb, IFLA_MAX, policy) < 0 || !tb[IFLA_IFNAME]) {
    return make_error(ErrorCode::InvalidArgument, "rtnetlink: malformed link message");
  }
  const auto* ifi = static_cast<const ifinfomsg*>(nlmsg_data(h));
  RtLink link;
  link.index = ifi->ifi_index;
  const char* name = static_cast<const char*>(nla_data(tb[IFLA_IFNAME]));
  link.name.assign(name, strnlen(name, static_cast<size_t>(nla_len(tb[IFLA_IFNAME]))));
  if (tb[IFLA_LINK]) link.link = static_cast<int>(nla_get_u32(tb[IFLA_LINK]));
  if (tb[IFLA_LINK_NETNSID]) link.link_netnsid = nla_get_s32(tb[IFLA_LINK_NETNSID]);
  if (tb[IFLA_LINKINFO]) {
    nlattr* info[IFLA_INFO_MAX + 1] = {};
    nla_policy ipolicy[IFLA_INFO_MAX + 1] = {};
    ipolicy[IFLA_INFO_KIND].type = NLA_STRING;
    if (nla_parse_nested(info, IFLA_INFO_MAX, tb[IFLA_LINKINFO], ipolicy) < 0) {
      return make_error(ErrorCode::InvalidArgument, "rtnetlink: malformed IFLA_LINKINFO of " + link.name);
    }
    if (info[IFLA_INFO_KIND]) {
      const char* kind = static_cast<const char*>(nla_data(info[IFLA_INFO_KIND]));
      link.kind.assign(kind, strnlen(kind, static_cast<size_t>(nla_len(info[IFLA_INFO_KIND]))));
    }
  }
  return std::optional<RtLink>{std::move(link)};
}

Result<std::optional<RtIpv4Address>> decode_rtnl_ipv4_address(const nlmsghdr* h) {
  if (h->nlmsg_type != RTM_NEWADDR) return std::optional<RtIpv4Address>{};
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(ifaddrmsg))) {
    return make_error(ErrorCode::InvalidArgument, "rtnetlink: truncated address message");
  }
  const auto* ifa = static_cast<const ifaddrmsg*>(nlmsg_data(h));
  if (ifa->ifa_family != AF_INET) return std::optional<RtIpv4Address>{};
  nlattr* tb[IFA_MAX + 1] = {};
  nla_policy policy[IFA_MAX + 1] = {};
  policy[IFA_LOCAL].type = NLA_U32;
  policy[IFA_ADDRESS].type = NLA_U32;
  if (nlmsg_parse(const_cast<nlmsghdr*>(h), sizeof(ifaddrmsg), tb, IFA_MAX, policy) < 0) {
    return make_error(ErrorCode::InvalidArgument, "rtnetlink: malformed address message");
  }
  nlattr* a = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
  if (a == nullptr || ifa->ifa_prefixlen > 32) {
    return make_error(ErrorCode::InvalidArgument, "rtnetlink: IPv4 address message without an address");
  }
  RtIpv4Address out;
  out.index = static_cast<int>(ifa->ifa_index);
  uint32_t be = 0;
  std::memcpy(&be, nla_data(a), sizeof(be));
  out.address = ntohl(be);
  out.prefix_len = ifa->ifa_prefixlen;
  return std::optional<RtIpv4Address>{out};
}

namespace {

template <typename T, typename Decode>
Result<std::vector<T>> dump(NetlinkChannel& ch, int type, const void* header, size_t header_len, Decode decode,
                            const char* what) {
  NlMsgPtr msg(nlmsg_alloc_simple(type, NLM_F_REQUEST | NLM_F_DUMP));
  if (!msg || nlmsg_append(msg.get(), const_cast<void*>(header), header_len, NLMSG_ALIGNTO) < 0) {
    return make_error(ErrorCode::ResourceExhausted, std::string("rtnetlink: cannot build the ") + what + " request");
  }
  std::vector<T> out;
  ERDMA_TRY_ASSIGN(auto rc, ch.transact(msg.get(), [&](const nlmsghdr* h) -> Status {
    ERDMA_TRY_ASSIGN(auto d, decode(h));
    if (d) out.push_back(std::move(*d));
    return {};
  }));
  if (rc != 0) return kernel_error(rc, std::string("dumping ") + what);
  return out;
}

}  // namespace

Result<std::vector<RtLink>> dump_links(NetlinkChannel& ch) {
  ifinfomsg hdr{};
  hdr.ifi_family = AF_UNSPEC;
  return dump<RtLink>(ch, RTM_GETLINK, &hdr, sizeof(hdr), decode_rtnl_link, "links");
}

Result<std::vector<RtIpv4Address>> dump_ipv4_addresses(NetlinkChannel& ch) {
  ifaddrmsg hdr{};
  hdr.ifa_family = AF_INET;
  return dump<RtIpv4Address>(ch, RTM_GETADDR, &hdr, sizeof(hdr), decode_rtnl_ipv4_address, "IPv4 addresses");
}

Result<std::optional<int32_t>> netnsid_of(NetlinkChannel& ch, int netns_fd) {
  // The ACK ends the exchange after the kernel's one reply.
  NlMsgPtr msg(nlmsg_alloc_simple(RTM_GETNSID, NLM_F_REQUEST | NLM_F_ACK));
  rtgenmsg hdr{};
  hdr.rtgen_family = AF_UNSPEC;
  if (!msg || nlmsg_append(msg.get(), &hdr, sizeof(hdr), NLMSG_ALIGNTO) < 0 ||
      nla_put_u32(msg.get(), NETNSA_FD, static_cast<uint32_t>(netns_fd)) < 0) {
    return make_error(ErrorCode::ResourceExhausted, "rtnetlink: cannot build the netns id request");
  }
  std::optional<int32_t> id;
  ERDMA_TRY_ASSIGN(auto rc, ch.transact(msg.get(), [&](const nlmsghdr* h) -> Status {
    if (h->nlmsg_type != RTM_NEWNSID) return {};
    nlattr* tb[NETNSA_MAX + 1] = {};
    nla_policy policy[NETNSA_MAX + 1] = {};
    policy[NETNSA_NSID].type = NLA_S32;
    if (nlmsg_parse(const_cast<nlmsghdr*>(h), sizeof(rtgenmsg), tb, NETNSA_MAX, policy) < 0 || !tb[NETNSA_NSID]) {
      return make_error(ErrorCode::InvalidArgument, "rtnetlink: malformed netns id answer");
    }
    const int32_t v = nla_get_s32(tb[NETNSA_NSID]);
    if (v >= 0) id = v;  // NETNSA_NSID_NOT_ASSIGNED is -1
    return {};
  }));
  if (rc != 0) return kernel_error(rc, "asking for a network namespace id");
  return id;
}

Error kernel_error(int err, const std::string& what) {
  switch (err) {
    case EPERM:
    case EACCES:
      return make_error(ErrorCode::PermissionDenied,
                        what + ": permission denied; needs CAP_NET_ADMIN in the initial user namespace");
    case EINVAL:
      return make_error(ErrorCode::InvalidArgument, what + ": the kernel refused the request as invalid (EINVAL)");
    case ERANGE: return make_error(ErrorCode::ResourceExhausted, what + ": a kernel table is full (ERANGE)");
    case EOPNOTSUPP: return make_error(ErrorCode::Unavailable, what + ": not supported by this kernel (EOPNOTSUPP)");
    case ETIMEDOUT: return make_error(ErrorCode::DeadlineExceeded, what + ": timed out in the kernel");
    default: return make_error(ErrorCode::Internal, what + ": " + std::strerror(err));
  }
}

}  // namespace erdma::agent
