// RDMA netlink driver lookup (see rdma_netlink.hpp).
#include "agent/sys/rdma_netlink.hpp"

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/socket.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

namespace erdma::agent {
namespace {

constexpr int kMaxAttr = RDMA_NLDEV_ATTR_MAX - 1;

// Parses attributes; lengths are checked by hand below (the policy only guards basic types).
Result<std::vector<nlattr*>> parse(const nlmsghdr* msg) {
  std::vector<nlattr*> tb(static_cast<size_t>(kMaxAttr) + 1, nullptr);
  nla_policy policy[kMaxAttr + 1] = {};
  policy[RDMA_NLDEV_ATTR_DEV_INDEX].type = NLA_U32;
  policy[RDMA_NLDEV_ATTR_DEV_NAME].type = NLA_NUL_STRING;
  policy[RDMA_NLDEV_ATTR_CHARDEV_NAME].type = NLA_NUL_STRING;
  policy[RDMA_NLDEV_ATTR_PORT_INDEX].type = NLA_U32;
  policy[RDMA_NLDEV_ATTR_NDEV_NAME].type = NLA_NUL_STRING;
  policy[RDMA_NLDEV_SYS_ATTR_NETNS_MODE].type = NLA_U8;
  // nlmsg_parse takes a non-const header; it does not modify it.
  const int err = nlmsg_parse(const_cast<nlmsghdr*>(msg), 0, tb.data(), kMaxAttr, policy);
  if (err < 0)
    return make_error(ErrorCode::InvalidArgument, std::string("malformed RDMA netlink message: ") + nl_geterror(err));
  return tb;
}

Result<std::string> get_string(const std::vector<nlattr*>& tb, int type, const char* what) {
  const nlattr* a = tb[static_cast<size_t>(type)];
  if (a == nullptr) return make_error(ErrorCode::InvalidArgument, std::string("RDMA netlink reply without ") + what);
  const int len = nla_len(a);
  const auto* data = static_cast<const char*>(nla_data(a));
  if (len <= 0 || data[len - 1] != '\0') {
    return make_error(ErrorCode::InvalidArgument, std::string("RDMA netlink ") + what + " is not a string");
  }
  return std::string(data, strnlen(data, static_cast<size_t>(len)));
}

struct SocketDeleter {
  void operator()(nl_sock* s) const noexcept { nl_socket_free(s); }
};
struct MsgDeleter {
  void operator()(nl_msg* m) const noexcept { nlmsg_free(m); }
};

enum class Want { Devices, Chardev, Ports, Sys };

struct Collect {
  Want want = Want::Devices;
  std::vector<NldevDevice> devices;
  std::vector<NldevChardev> chardevs;
  std::vector<NldevPort> ports;
  std::vector<Result<RdmaNetnsMode>> sys;
};

// Replies that do not decode are skipped: one odd record must not hide the others.
int on_valid(nl_msg* msg, void* arg) {
  auto* c = static_cast<Collect*>(arg);
  const nlmsghdr* hdr = nlmsg_hdr(msg);
  switch (c->want) {
    case Want::Devices:
      if (auto r = decode_nldev_device(hdr)) c->devices.push_back(std::move(*r));
      break;
    case Want::Chardev:
      if (auto r = decode_nldev_chardev(hdr)) c->chardevs.push_back(std::move(*r));
      break;
    case Want::Ports:
      if (auto r = decode_nldev_port(hdr)) c->ports.push_back(std::move(*r));
      break;
    case Want::Sys: c->sys.push_back(decode_nldev_sys(hdr)); break;
  }
  return NL_OK;
}

using Msg = std::unique_ptr<nl_msg, MsgDeleter>;

using Socket = std::unique_ptr<nl_sock, SocketDeleter>;

// A connected NETLINK_RDMA socket whose valid replies go to `collect`, every receive bounded by
// 2 s. Errors: Unavailable when RDMA netlink is missing (no RDMA core module).
Result<Socket> open_rdma_socket(Collect& collect) {
  Socket sk(nl_socket_alloc());
  if (!sk) return make_error(ErrorCode::Internal, "cannot allocate a netlink socket");
  if (const int err = nl_connect(sk.get(), NETLINK_RDMA); err < 0) {
    return make_error(ErrorCode::Unavailable, std::string("RDMA netlink unavailable: ") + nl_geterror(err));
  }
  // Replies are read explicitly; an ACK per request would be left over for the next one.
  nl_socket_disable_auto_ack(sk.get());
  timeval tv{2, 0};
  ::setsockopt(nl_socket_get_fd(sk.get()), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  nl_socket_modify_cb(sk.get(), NL_CB_VALID, NL_CB_CUSTOM, on_valid, &collect);
  return sk;
}

// Sends `msg` and reads the whole answer (a dump ends with NLMSG_DONE). Bounded by SO_RCVTIMEO.
int exchange(nl_sock* sk, nl_msg* msg) {
  if (const int err = nl_send_auto(sk, msg); err < 0) return err;
  return nl_recvmsgs_default(sk);
}

}  // namespace

std::string_view rdma_driver_name(uint64_t driver_id) noexcept {
  switch (driver_id) {
    case RDMA_DRIVER_MLX5: return "mlx5";
    case RDMA_DRIVER_MLX4: return "mlx4";
    case RDMA_DRIVER_CXGB3: return "cxgb3";
    case RDMA_DRIVER_CXGB4: return "cxgb4";
    case RDMA_DRIVER_MTHCA: return "mthca";
    case RDMA_DRIVER_BNXT_RE: return "bnxt_re";
    case RDMA_DRIVER_OCRDMA: return "ocrdma";
    case RDMA_DRIVER_NES: return "nes";
    case RDMA_DRIVER_IRDMA: return "irdma";
    case RDMA_DRIVER_VMW_PVRDMA: return "vmw_pvrdma";
    case RDMA_DRIVER_QEDR: return "qedr";
    case RDMA_DRIVER_HNS: return "hns";
    case RDMA_DRIVER_USNIC: return "usnic";
    case RDMA_DRIVER_RXE: return "rxe";
    case RDMA_DRIVER_HFI1: return "hfi1";
    case RDMA_DRIVER_QIB: return "qib";
    case RDMA_DRIVER_EFA: return "efa";
    case RDMA_DRIVER_SIW: return "siw";
    case RDMA_DRIVER_ERDMA: return "erdma";
    default: return "";
  }
}

Result<NldevDevice> decode_nldev_device(const nlmsghdr* msg) {
  ERDMA_TRY_ASSIGN(auto tb, parse(msg));
  const nlattr* idx = tb[RDMA_NLDEV_ATTR_DEV_INDEX];
  if (idx == nullptr || nla_len(idx) != 4) {
    return make_error(ErrorCode::InvalidArgument, "RDMA netlink device reply without a device index");
  }
  ERDMA_TRY_ASSIGN(auto name, get_string(tb, RDMA_NLDEV_ATTR_DEV_NAME, "device name"));
  return NldevDevice{nla_get_u32(const_cast<nlattr*>(idx)), std::move(name)};
}

Result<NldevPort> decode_nldev_port(const nlmsghdr* msg) {
  ERDMA_TRY_ASSIGN(auto tb, parse(msg));
  const nlattr* idx = tb[RDMA_NLDEV_ATTR_DEV_INDEX];
  const nlattr* port = tb[RDMA_NLDEV_ATTR_PORT_INDEX];
  if (idx == nullptr || nla_len(idx) != 4 || port == nullptr || nla_len(port) != 4) {
    return make_error(ErrorCode::InvalidArgument, "RDMA netlink port reply without a device index and port");
  }
  NldevPort out;
  out.device_index = nla_get_u32(const_cast<nlattr*>(idx));
  out.port = nla_get_u32(const_cast<nlattr*>(port));
  if (tb[RDMA_NLDEV_ATTR_NDEV_NAME] != nullptr) {
    ERDMA_TRY_ASSIGN(auto name, get_string(tb, RDMA_NLDEV_ATTR_NDEV_NAME, "netdev name"));
    out.netdev = std::move(name);
  }
  return out;
}

std::string_view to_string(RdmaNetnsMode mode) noexcept {
  return mode == RdmaNetnsMode::Shared ? "shared" : "exclusive";
}

Result<RdmaNetnsMode> decode_nldev_sys(const nlmsghdr* msg) {
  ERDMA_TRY_ASSIGN(auto tb, parse(msg));
  const nlattr* mode = tb[RDMA_NLDEV_SYS_ATTR_NETNS_MODE];
  if (mode == nullptr || nla_len(mode) != 1) {
    return make_error(ErrorCode::InvalidArgument, "RDMA netlink system reply without a one-byte netns mode");
  }
  switch (nla_get_u8(const_cast<nlattr*>(mode))) {
    case 1: return RdmaNetnsMode::Shared;
    case 0: return RdmaNetnsMode::Exclusive;
    default:
      return make_error(ErrorCode::InvalidArgument, "RDMA netlink netns mode " +
                                                        std::to_string(nla_get_u8(const_cast<nlattr*>(mode))) +
                                                        " is neither 1 (shared) nor 0 (exclusive)");
  }
}

Result<NldevChardev> decode_nldev_chardev(const nlmsghdr* msg) {
  ERDMA_TRY_ASSIGN(auto tb, parse(msg));
  ERDMA_TRY_ASSIGN(auto name, get_string(tb, RDMA_NLDEV_ATTR_CHARDEV_NAME, "char device name"));
  NldevChardev out{std::move(name), 0};
  // Kernels put the driver id as a u32 although the uapi comment says u64: accept both.
  if (const nlattr* id = tb[RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID]) {
    if (nla_len(id) == 4) {
      out.driver_id = nla_get_u32(const_cast<nlattr*>(id));
    } else if (nla_len(id) == 8) {
      out.driver_id = nla_get_u64(const_cast<nlattr*>(id));
    } else {
      return make_error(ErrorCode::InvalidArgument,
                        "RDMA netlink driver id has " + std::to_string(nla_len(id)) + " bytes");
    }
  }
  return out;
}

Result<std::vector<KernelDevice>> NetlinkDeviceInfo::devices() {
  Collect collect;
  ERDMA_TRY_ASSIGN(auto sk, open_rdma_socket(collect));

  Msg dump(nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET), NLM_F_DUMP));
  if (!dump) return make_error(ErrorCode::Internal, "cannot allocate a netlink message");
  if (const int err = exchange(sk.get(), dump.get()); err < 0) {
    return make_error(ErrorCode::Unavailable, std::string("RDMA netlink device dump: ") + nl_geterror(err));
  }
  const std::vector<NldevDevice> devices = collect.devices;
  std::vector<KernelDevice> out;
  for (const auto& dev : devices) {
    KernelDevice k;
    k.name = dev.name;

    collect.want = Want::Chardev;
    collect.chardevs.clear();
    Msg chardev(nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET_CHARDEV), 0));
    if (!chardev || nla_put_u32(chardev.get(), RDMA_NLDEV_ATTR_DEV_INDEX, dev.index) < 0 ||
        nla_put_string(chardev.get(), RDMA_NLDEV_ATTR_CHARDEV_TYPE, "uverbs") < 0) {
      return make_error(ErrorCode::Internal, "cannot build an RDMA netlink request");
    }
    // A device without a uverbs char device answers with an error: no driver known for it.
    if (exchange(sk.get(), chardev.get()) >= 0 && !collect.chardevs.empty()) {
      k.driver = std::string(rdma_driver_name(collect.chardevs.front().driver_id));
    }

    collect.want = Want::Ports;
    collect.ports.clear();
    Msg ports(nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_PORT_GET), NLM_F_DUMP));
    if (!ports || nla_put_u32(ports.get(), RDMA_NLDEV_ATTR_DEV_INDEX, dev.index) < 0) {
      return make_error(ErrorCode::Internal, "cannot build an RDMA netlink request");
    }
    if (exchange(sk.get(), ports.get()) >= 0) {
      for (const auto& p : collect.ports) {
        if (p.device_index == dev.index) k.port_netdevs[p.port] = p.netdev;
      }
    }
    out.push_back(std::move(k));
  }
  return out;
}

Result<RdmaNetnsMode> read_rdma_netns_mode() {
  Collect collect;
  collect.want = Want::Sys;
  ERDMA_TRY_ASSIGN(auto sk, open_rdma_socket(collect));
  Msg get(nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_SYS_GET), 0));
  if (!get) return make_error(ErrorCode::Internal, "cannot allocate a netlink message");
  if (const int err = exchange(sk.get(), get.get()); err < 0) {
    return make_error(ErrorCode::Unavailable,
                      std::string("RDMA netlink netns mode (rdma system show): ") + nl_geterror(err));
  }
  if (collect.sys.empty()) {
    return make_error(ErrorCode::Unavailable, "RDMA netlink sent no netns mode (a kernel before 5.2 has none)");
  }
  return std::move(collect.sys.front());
}

}  // namespace erdma::agent
