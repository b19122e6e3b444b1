// rtnetlink link and address messages decoded without a socket: messages built in memory.
#include "agent/sys/netlink.hpp"

#include <arpa/inet.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <doctest/doctest.h>
#include <netlink/attr.h>
#include <netlink/msg.h>

using namespace erdma::agent;

namespace {

NlMsgPtr link_msg(int index, const char* name, const char* kind, int link, std::optional<int32_t> netnsid) {
  NlMsgPtr m(nlmsg_alloc_simple(RTM_NEWLINK, NLM_F_MULTI));
  ifinfomsg ifi{};
  ifi.ifi_index = index;
  REQUIRE(nlmsg_append(m.get(), &ifi, sizeof(ifi), NLMSG_ALIGNTO) == 0);
  if (name != nullptr) REQUIRE(nla_put_string(m.get(), IFLA_IFNAME, name) == 0);
  if (link != 0) REQUIRE(nla_put_u32(m.get(), IFLA_LINK, static_cast<uint32_t>(link)) == 0);
  if (netnsid) REQUIRE(nla_put_s32(m.get(), IFLA_LINK_NETNSID, *netnsid) == 0);
  if (kind != nullptr) {
    nlattr* info = nla_nest_start(m.get(), IFLA_LINKINFO);
    REQUIRE(info != nullptr);
    REQUIRE(nla_put_string(m.get(), IFLA_INFO_KIND, kind) == 0);
    nla_nest_end(m.get(), info);
  }
  return m;
}

NlMsgPtr addr_msg(int family, int index, uint8_t prefix, const char* local) {
  NlMsgPtr m(nlmsg_alloc_simple(RTM_NEWADDR, NLM_F_MULTI));
  ifaddrmsg ifa{};
  ifa.ifa_family = static_cast<uint8_t>(family);
  ifa.ifa_index = static_cast<uint32_t>(index);
  ifa.ifa_prefixlen = prefix;
  REQUIRE(nlmsg_append(m.get(), &ifa, sizeof(ifa), NLMSG_ALIGNTO) == 0);
  if (local != nullptr) {
    in_addr a{};
    REQUIRE(inet_pton(AF_INET, local, &a) == 1);
    REQUIRE(nla_put(m.get(), IFA_LOCAL, sizeof(a), &a) == 0);
  }
  return m;
}

}  // namespace

TEST_CASE("rtnetlink link messages give name, kind, lower index and its netns id") {
  auto ipvlan = decode_rtnl_link(nlmsg_hdr(link_msg(3, "eth0", "ipvlan", 7, 0).get()));
  REQUIRE(ipvlan.ok());
  REQUIRE(ipvlan->has_value());
  CHECK((*ipvlan)->index == 3);
  CHECK((*ipvlan)->name == "eth0");
  CHECK((*ipvlan)->kind == "ipvlan");
  CHECK((*ipvlan)->link == 7);
  CHECK((*ipvlan)->link_netnsid == 0);

  auto physical = decode_rtnl_link(nlmsg_hdr(link_msg(2, "ens5", nullptr, 0, std::nullopt).get()));
  REQUIRE(physical.ok());
  CHECK((*physical)->kind.empty());
  CHECK((*physical)->link == 0);
  CHECK_FALSE((*physical)->link_netnsid.has_value());

  CHECK(decode_rtnl_link(nlmsg_hdr(link_msg(2, nullptr, "veth", 0, std::nullopt).get())).error().code ==
        erdma::ErrorCode::InvalidArgument);
  // Other message types are not links.
  auto other = addr_msg(AF_INET, 1, 8, "127.0.0.1");
  CHECK_FALSE(decode_rtnl_link(nlmsg_hdr(other.get())).value().has_value());
}

TEST_CASE("rtnetlink address messages give IPv4 addresses in host order and skip others") {
  auto a = decode_rtnl_ipv4_address(nlmsg_hdr(addr_msg(AF_INET, 3, 24, "10.77.0.11").get()));
  REQUIRE(a.ok());
  REQUIRE(a->has_value());
  CHECK((*a)->index == 3);
  CHECK((*a)->address == 0x0a4d000bu);
  CHECK((*a)->prefix_len == 24);
  CHECK_FALSE(decode_rtnl_ipv4_address(nlmsg_hdr(addr_msg(AF_INET6, 3, 64, nullptr).get())).value().has_value());
  CHECK(decode_rtnl_ipv4_address(nlmsg_hdr(addr_msg(AF_INET, 3, 24, nullptr).get())).error().code ==
        erdma::ErrorCode::InvalidArgument);
  CHECK(decode_rtnl_ipv4_address(nlmsg_hdr(addr_msg(AF_INET, 3, 33, "10.0.0.1").get())).error().code ==
        erdma::ErrorCode::InvalidArgument);
}
