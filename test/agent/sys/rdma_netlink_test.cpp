// RDMA netlink replies decoded from messages built in memory with libnl.
#include "agent/sys/rdma_netlink.hpp"

#include <doctest/doctest.h>

#include <memory>

#include <netlink/attr.h>
#include <netlink/msg.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/rdma_netlink.h>

#include "test/support.hpp"

namespace erdma::agent {
namespace {

struct MsgDeleter {
  void operator()(nl_msg* m) const noexcept { nlmsg_free(m); }
};
using Msg = std::unique_ptr<nl_msg, MsgDeleter>;

Msg message(int cmd) {
  Msg m(nlmsg_alloc_simple(RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, cmd), 0));
  REQUIRE(m);
  return m;
}

}  // namespace

TEST_CASE("driver ids map to provider names") {
  CHECK(rdma_driver_name(RDMA_DRIVER_ERDMA) == "erdma");
  CHECK(rdma_driver_name(RDMA_DRIVER_RXE) == "rxe");
  CHECK(rdma_driver_name(RDMA_DRIVER_MLX5) == "mlx5");
  CHECK(rdma_driver_name(RDMA_DRIVER_SIW) == "siw");
  CHECK(rdma_driver_name(RDMA_DRIVER_UNKNOWN).empty());
  CHECK(rdma_driver_name(100000).empty());
}

TEST_CASE("device replies: index and name") {
  auto m = message(RDMA_NLDEV_CMD_GET);
  REQUIRE(nla_put_u32(m.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 7) == 0);
  REQUIRE(nla_put_string(m.get(), RDMA_NLDEV_ATTR_DEV_NAME, "erdma_0") == 0);
  REQUIRE(nla_put_u64(m.get(), RDMA_NLDEV_ATTR_NODE_GUID, 0x1234) == 0);  // other attributes are ignored
  auto d = decode_nldev_device(nlmsg_hdr(m.get()));
  REQUIRE_OK(d);
  CHECK(d->index == 7);
  CHECK(d->name == "erdma_0");
}

TEST_CASE("device replies without a name, or with a short index, are refused") {
  {
    auto m = message(RDMA_NLDEV_CMD_GET);
    REQUIRE(nla_put_u32(m.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 7) == 0);
    auto d = decode_nldev_device(nlmsg_hdr(m.get()));
    REQUIRE_FALSE(d.ok());
    CHECK(d.error().message.find("device name") != std::string::npos);
  }
  {
    auto m = message(RDMA_NLDEV_CMD_GET);
    REQUIRE(nla_put_u16(m.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 7) == 0);
    REQUIRE(nla_put_string(m.get(), RDMA_NLDEV_ATTR_DEV_NAME, "erdma_0") == 0);
    CHECK_FALSE(decode_nldev_device(nlmsg_hdr(m.get())).ok());
  }
  {
    auto m = message(RDMA_NLDEV_CMD_GET);
    REQUIRE(nla_put_u32(m.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 7) == 0);
    const char raw[3] = {'a', 'b', 'c'};  // not NUL-terminated
    REQUIRE(nla_put(m.get(), RDMA_NLDEV_ATTR_DEV_NAME, sizeof raw, raw) == 0);
    CHECK_FALSE(decode_nldev_device(nlmsg_hdr(m.get())).ok());
  }
}

TEST_CASE("chardev replies: name and driver id as u32 or u64") {
  {
    auto m = message(RDMA_NLDEV_CMD_GET_CHARDEV);
    REQUIRE(nla_put_string(m.get(), RDMA_NLDEV_ATTR_CHARDEV_NAME, "uverbs0") == 0);
    REQUIRE(nla_put_u32(m.get(), RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, RDMA_DRIVER_ERDMA) == 0);
    auto c = decode_nldev_chardev(nlmsg_hdr(m.get()));
    REQUIRE(c.ok());
    CHECK(c->name == "uverbs0");
    CHECK(rdma_driver_name(c->driver_id) == "erdma");
  }
  {
    auto m = message(RDMA_NLDEV_CMD_GET_CHARDEV);
    REQUIRE(nla_put_string(m.get(), RDMA_NLDEV_ATTR_CHARDEV_NAME, "uverbs3") == 0);
    REQUIRE(nla_put_u64(m.get(), RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, RDMA_DRIVER_RXE) == 0);
    auto c = decode_nldev_chardev(nlmsg_hdr(m.get()));
    REQUIRE(c.ok());
    CHECK(rdma_driver_name(c->driver_id) == "rxe");
  }
  {
    auto m = message(RDMA_NLDEV_CMD_GET_CHARDEV);
    REQUIRE(nla_put_string(m.get(), RDMA_NLDEV_ATTR_CHARDEV_NAME, "uverbs3") == 0);
    auto c = decode_nldev_chardev(nlmsg_hdr(m.get()));
    REQUIRE(c.ok());
    CHECK(c->driver_id == 0);
  }
  {
    auto m = message(RDMA_NLDEV_CMD_GET_CHARDEV);
    REQUIRE(nla_put_string(m.get(), RDMA_NLDEV_ATTR_CHARDEV_NAME, "uverbs3") == 0);
    REQUIRE(nla_put_u16(m.get(), RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, 19) == 0);
    CHECK_FALSE(decode_nldev_chardev(nlmsg_hdr(m.get())).ok());
  }
  {
    auto m = message(RDMA_NLDEV_CMD_GET_CHARDEV);
    REQUIRE(nla_put_u32(m.get(), RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, RDMA_DRIVER_ERDMA) == 0);
    CHECK_FALSE(decode_nldev_chardev(nlmsg_hdr(m.get())).ok());
  }
}

TEST_CASE("port replies: device index, port, optional netdev") {
  {
    auto m = message(RDMA_NLDEV_CMD_PORT_GET);
    REQUIRE(nla_put_u32(m.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 2) == 0);
    REQUIRE(nla_put_string(m.get(), RDMA_NLDEV_ATTR_DEV_NAME, "erdma_0") == 0);
    REQUIRE(nla_put_u32(m.get(), RDMA_NLDEV_ATTR_PORT_INDEX, 1) == 0);
    REQUIRE(nla_put_u8(m.get(), RDMA_NLDEV_ATTR_PORT_STATE, 4) == 0);
    REQUIRE(nla_put_u32(m.get(), RDMA_NLDEV_ATTR_NDEV_INDEX, 3) == 0);
    REQUIRE(nla_put_string(m.get(), RDMA_NLDEV_ATTR_NDEV_NAME, "eth0") == 0);
    auto p = decode_nldev_port(nlmsg_hdr(m.get()));
    REQUIRE_OK(p);
    CHECK(p->device_index == 2);
    CHECK(p->port == 1);
    CHECK(p->netdev == "eth0");
  }
  {
    auto m = message(RDMA_NLDEV_CMD_PORT_GET);
    REQUIRE(nla_put_u32(m.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 2) == 0);
    REQUIRE(nla_put_u32(m.get(), RDMA_NLDEV_ATTR_PORT_INDEX, 1) == 0);
    auto p = decode_nldev_port(nlmsg_hdr(m.get()));
    REQUIRE(p.ok());
    CHECK(p->netdev.empty());
  }
  {
    auto m = message(RDMA_NLDEV_CMD_PORT_GET);
    REQUIRE(nla_put_u32(m.get(), RDMA_NLDEV_ATTR_DEV_INDEX, 2) == 0);
    CHECK_FALSE(decode_nldev_port(nlmsg_hdr(m.get())).ok());
  }
}

TEST_CASE("kernel facts win over sysfs guesses") {
  RdmaDevice d;
  d.name = "mlx5_0";
  d.driver = "mlx5_core";  // the PCI driver link
  d.netdev = "";
  merge_kernel_info(d, KernelDevice{"mlx5_0", "mlx5", {{1, ""}, {2, "ens2f1"}}});
  CHECK(d.driver == "mlx5");
  CHECK(d.netdev == "ens2f1");
  RdmaDevice r;
  r.driver = "";
  r.netdev = "veth0";
  merge_kernel_info(r, KernelDevice{"rxe0", "", {}});
  CHECK(r.driver.empty());
  CHECK(r.netdev == "veth0");
}

TEST_CASE("a device whose netdev is in another network namespace is a pod's, not the node's") {
  // RDMA netlink names a port's netdev only to a socket in that netdev's netns.
  CHECK(netdev_in_other_netns("eth0", KernelDevice{"rxe_0889634b2727", "rxe", {{1, ""}}}));
  CHECK(netdev_in_other_netns("eth0", KernelDevice{"erdma_1", "erdma", {{1, ""}, {2, ""}}}));
  CHECK_FALSE(netdev_in_other_netns("eth0", KernelDevice{"rxe0", "rxe", {{1, "eth0"}}}));
  CHECK_FALSE(netdev_in_other_netns("ens2f1", KernelDevice{"mlx5_0", "mlx5", {{1, ""}, {2, "ens2f1"}}}));
  // Nothing to judge: no netdev named by sysfs, or no port reported by the kernel.
  CHECK_FALSE(netdev_in_other_netns("", KernelDevice{"rxe1", "rxe", {{1, ""}}}));
  CHECK_FALSE(netdev_in_other_netns("eth0", KernelDevice{"rxe0", "rxe", {}}));
}

TEST_CASE("the netlink query answers or says why not, without hanging") {
  NetlinkDeviceInfo info;
  auto r = info.devices();
  // On a node without RDMA the kernel may lack NETLINK_RDMA (an error) or list no devices.
  if (r.ok()) {
    for (const auto& dev : *r) CHECK_FALSE(dev.name.empty());
  } else {
    CHECK(r.error().message.find("RDMA netlink") != std::string::npos);
  }
}

TEST_CASE("system replies: the netns mode, 1 shared and 0 exclusive, nothing else") {
  for (const auto& c : {std::pair<uint8_t, RdmaNetnsMode>{1, RdmaNetnsMode::Shared},
                        std::pair<uint8_t, RdmaNetnsMode>{0, RdmaNetnsMode::Exclusive}}) {
    const uint8_t byte = c.first;  // not a structured binding: CAPTURE's lambda takes it
    const RdmaNetnsMode want = c.second;
    CAPTURE(int{byte});
    Msg m = message(RDMA_NLDEV_CMD_SYS_GET);
    REQUIRE(nla_put_u8(m.get(), RDMA_NLDEV_SYS_ATTR_NETNS_MODE, byte) == 0);
    REQUIRE(nla_put_string(m.get(), RDMA_NLDEV_ATTR_DEV_NAME, "erdma_0") == 0);  // other attributes are ignored
    auto r = decode_nldev_sys(nlmsg_hdr(m.get()));
    REQUIRE_OK(r);
    CHECK(*r == want);
  }
  CHECK(to_string(RdmaNetnsMode::Shared) == "shared");
  CHECK(to_string(RdmaNetnsMode::Exclusive) == "exclusive");
  SUBCASE("a value other than 0 or 1") {
    Msg m = message(RDMA_NLDEV_CMD_SYS_GET);
    REQUIRE(nla_put_u8(m.get(), RDMA_NLDEV_SYS_ATTR_NETNS_MODE, 2) == 0);
    auto r = decode_nldev_sys(nlmsg_hdr(m.get()));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("neither 1 (shared) nor 0 (exclusive)") != std::string::npos);
  }
  SUBCASE("missing, or not one byte") {
    Msg none = message(RDMA_NLDEV_CMD_SYS_GET);
    CHECK_FALSE(decode_nldev_sys(nlmsg_hdr(none.get())).ok());
    Msg wide = message(RDMA_NLDEV_CMD_SYS_GET);
    REQUIRE(nla_put_u32(wide.get(), RDMA_NLDEV_SYS_ATTR_NETNS_MODE, 1) == 0);
    auto r = decode_nldev_sys(nlmsg_hdr(wide.get()));
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("one-byte netns mode") != std::string::npos);
  }
}

}  // namespace erdma::agent
