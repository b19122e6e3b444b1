// SMC netlink codecs against the documented attribute layout: messages built in memory the way the
// kernel builds them, then broken in the ways a reply can be broken.
#include "agent/sys/smc_codec.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include <arpa/inet.h>
#include <linux/smc.h>
#include <linux/smc_diag.h>
#include <linux/sock_diag.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>

using namespace erdma;
using namespace erdma::agent;

namespace {

constexpr int kFamily = 0x1f;  // any id: decoders do not depend on it

NlMsgPtr genl(uint8_t cmd) {
  NlMsgPtr m(nlmsg_alloc());
  REQUIRE(m);
  REQUIRE(genlmsg_put(m.get(), 0, 1, kFamily, 0, NLM_F_MULTI, cmd, 1) != nullptr);
  return m;
}

const nlmsghdr* hdr(const NlMsgPtr& m) { return nlmsg_hdr(m.get()); }

size_t align4(size_t n) { return (n + 3U) & ~size_t{3}; }

// A copy of the message's bytes with its last `cut` bytes removed and nlmsg_len adjusted.
std::vector<uint32_t> truncated(const NlMsgPtr& m, uint32_t cut) {
  const nlmsghdr* h = hdr(m);
  std::vector<uint32_t> buf((h->nlmsg_len + 3) / 4 + 1, 0);
  std::memcpy(buf.data(), h, h->nlmsg_len);
  auto* c = reinterpret_cast<nlmsghdr*>(buf.data());
  c->nlmsg_len -= cut;
  return buf;
}

void put_raw_string(nl_msg* m, int type, const char* bytes, int len) { REQUIRE(nla_put(m, type, len, bytes) == 0); }

}  // namespace

TEST_CASE("pnet ADD request carries NAME and ETHNAME, or NAME IBNAME IBPORT") {
  auto m = genl(SMC_PNETID_ADD);
  REQUIRE(encode_pnet_add(m.get(), PnetEntry::eth("ERDMA", "eth0").value()).ok());
  nlattr* tb[SMC_PNETID_MAX + 1] = {};
  REQUIRE(genlmsg_parse(nlmsg_hdr(m.get()), 0, tb, SMC_PNETID_MAX, nullptr) == 0);
  REQUIRE(tb[SMC_PNETID_NAME]);
  CHECK(std::string(nla_get_string(tb[SMC_PNETID_NAME])) == "ERDMA");
  CHECK(nla_len(tb[SMC_PNETID_NAME]) == 6);  // NUL-terminated
  CHECK(std::string(nla_get_string(tb[SMC_PNETID_ETHNAME])) == "eth0");
  CHECK(tb[SMC_PNETID_IBNAME] == nullptr);
  CHECK(tb[SMC_PNETID_IBPORT] == nullptr);

  auto i = genl(SMC_PNETID_ADD);
  REQUIRE(encode_pnet_add(i.get(), PnetEntry::ib("ERDMA", "erdma_0", 2).value()).ok());
  nlattr* tb2[SMC_PNETID_MAX + 1] = {};
  REQUIRE(genlmsg_parse(nlmsg_hdr(i.get()), 0, tb2, SMC_PNETID_MAX, nullptr) == 0);
  CHECK(std::string(nla_get_string(tb2[SMC_PNETID_IBNAME])) == "erdma_0");
  REQUIRE(tb2[SMC_PNETID_IBPORT]);
  CHECK(nla_len(tb2[SMC_PNETID_IBPORT]) == 1);
  CHECK(nla_get_u8(tb2[SMC_PNETID_IBPORT]) == 2);
  CHECK(tb2[SMC_PNETID_ETHNAME] == nullptr);
}

TEST_CASE("pnet GET replies decode to entries") {
  auto e = genl(SMC_PNETID_GET);
  nla_put_string(e.get(), SMC_PNETID_NAME, "ERDMA");
  nla_put_string(e.get(), SMC_PNETID_ETHNAME, "eth0");
  nla_put_string(e.get(), SMC_PNETID_IBNAME, "n/a");
  nla_put_u8(e.get(), SMC_PNETID_IBPORT, 0xff);
  auto got = decode_pnet_reply(hdr(e));
  REQUIRE(got.ok());
  REQUIRE(got->size() == 1);
  CHECK((*got)[0] == PnetEntry::eth("ERDMA", "eth0").value());

  auto i = genl(SMC_PNETID_GET);
  nla_put_string(i.get(), SMC_PNETID_NAME, "ERDMA");
  nla_put_string(i.get(), SMC_PNETID_ETHNAME, "n/a");
  nla_put_string(i.get(), SMC_PNETID_IBNAME, "erdma_0");
  nla_put_u8(i.get(), SMC_PNETID_IBPORT, 1);
  got = decode_pnet_reply(hdr(i));
  REQUIRE(got.ok());
  REQUIRE(got->size() == 1);
  CHECK((*got)[0] == PnetEntry::ib("ERDMA", "erdma_0", 1).value());

  // Kernels before per-type entries report both halves in one message.
  auto both = genl(SMC_PNETID_GET);
  nla_put_string(both.get(), SMC_PNETID_NAME, "NET1");
  nla_put_string(both.get(), SMC_PNETID_ETHNAME, "eth1");
  nla_put_string(both.get(), SMC_PNETID_IBNAME, "mlx5_0");
  nla_put_u8(both.get(), SMC_PNETID_IBPORT, 2);
  got = decode_pnet_reply(hdr(both));
  REQUIRE(got.ok());
  CHECK(got->size() == 2);
}

TEST_CASE("malformed pnet replies are rejected with the reason") {
  struct Case {
    const char* name;
    std::function<void(nl_msg*)> build;
    const char* want;
  };
  const std::vector<Case> cases{
      {"no NAME", [](nl_msg* m) { nla_put_string(m, SMC_PNETID_ETHNAME, "eth0"); }, "missing attribute NAME"},
      {"neither device",
       [](nl_msg* m) {
         nla_put_string(m, SMC_PNETID_NAME, "ERDMA");
         nla_put_string(m, SMC_PNETID_ETHNAME, "n/a");
         nla_put_string(m, SMC_PNETID_IBNAME, "n/a");
       },
       "neither"},
      {"ETHNAME without NUL",
       [](nl_msg* m) {
         nla_put_string(m, SMC_PNETID_NAME, "ERDMA");
         put_raw_string(m, SMC_PNETID_ETHNAME, "eth0", 4);
       },
       "attribute 2"},
      {"NAME too long", [](nl_msg* m) { nla_put_string(m, SMC_PNETID_NAME, "ABCDEFGHIJKLMNOPQRS"); }, "attribute 1"},
      {"IBPORT as u32",
       [](nl_msg* m) {
         nla_put_string(m, SMC_PNETID_NAME, "ERDMA");
         nla_put_string(m, SMC_PNETID_IBNAME, "erdma_0");
         nla_put_u32(m, SMC_PNETID_IBPORT, 1);
       },
       "attribute 4"},
      {"IB entry without port",
       [](nl_msg* m) {
         nla_put_string(m, SMC_PNETID_NAME, "ERDMA");
         nla_put_string(m, SMC_PNETID_IBNAME, "erdma_0");
       },
       "no IBPORT"},
      {"port out of range",
       [](nl_msg* m) {
         nla_put_string(m, SMC_PNETID_NAME, "ERDMA");
         nla_put_string(m, SMC_PNETID_IBNAME, "erdma_0");
         nla_put_u8(m, SMC_PNETID_IBPORT, 7);
       },
       "port 7"},
      {"invalid PNETID",
       [](nl_msg* m) {
         nla_put_string(m, SMC_PNETID_NAME, "ER-DMA");
         nla_put_string(m, SMC_PNETID_ETHNAME, "eth0");
       },
       "letters and digits"},
      {"invalid interface name",
       [](nl_msg* m) {
         nla_put_string(m, SMC_PNETID_NAME, "ERDMA");
         nla_put_string(m, SMC_PNETID_ETHNAME, "a b");
       },
       "interface name"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto m = genl(SMC_PNETID_GET);
    c.build(m.get());
    auto got = decode_pnet_reply(hdr(m));
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code == ErrorCode::InvalidArgument);
    CHECK(got.error().message.find("SMC_PNETID reply") == 0);
    CHECK(got.error().message.find(c.want) != std::string::npos);
  }
}

TEST_CASE("pnet reply with a wrong command or cut short is rejected") {
  auto m = genl(SMC_PNETID_ADD);
  nla_put_string(m.get(), SMC_PNETID_NAME, "ERDMA");
  nla_put_string(m.get(), SMC_PNETID_ETHNAME, "eth0");
  auto got = decode_pnet_reply(hdr(m));
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().message.find("unexpected command 2") != std::string::npos);

  auto ok = genl(SMC_PNETID_GET);
  nla_put_string(ok.get(), SMC_PNETID_NAME, "ERDMA");
  nla_put_string(ok.get(), SMC_PNETID_ETHNAME, "eth0");
  auto cut = truncated(ok, 4);  // the last attribute loses its tail
  got = decode_pnet_reply(reinterpret_cast<const nlmsghdr*>(cut.data()));
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().message.find("left over") != std::string::npos);

  auto header_only = truncated(ok, hdr(ok)->nlmsg_len - NLMSG_HDRLEN - 2);
  got = decode_pnet_reply(reinterpret_cast<const nlmsghdr*>(header_only.data()));
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().message.find("too short") != std::string::npos);
}

TEST_CASE("UEID attribute is exactly 33 bytes and decodes back") {
  auto m = genl(SMC_NETLINK_ADD_UEID);
  REQUIRE(encode_ueid(m.get(), Ueid::parse("E2E-TEST-UEID").value()).ok());
  nlattr* tb[SMC_NLA_EID_TABLE_MAX + 1] = {};
  REQUIRE(genlmsg_parse(nlmsg_hdr(m.get()), 0, tb, SMC_NLA_EID_TABLE_MAX, nullptr) == 0);
  REQUIRE(tb[SMC_NLA_EID_TABLE_ENTRY]);
  CHECK(nla_len(tb[SMC_NLA_EID_TABLE_ENTRY]) == 33);
  const char* data = static_cast<const char*>(nla_data(tb[SMC_NLA_EID_TABLE_ENTRY]));
  CHECK(data[32] == '\0');
  CHECK(std::string(data, 32) == "E2E-TEST-UEID                   ");

  auto r = genl(SMC_NETLINK_DUMP_UEID);
  nla_put_string(r.get(), SMC_NLA_EID_TABLE_ENTRY, "E2E-TEST-UEID                   ");
  auto got = decode_ueid_reply(hdr(r));
  REQUIRE(got.ok());
  CHECK(got->str() == "E2E-TEST-UEID");

  auto bad = genl(SMC_NETLINK_DUMP_UEID);
  nla_put_string(bad.get(), SMC_NLA_EID_TABLE_ENTRY, "lower");
  CHECK_FALSE(decode_ueid_reply(hdr(bad)).ok());
  auto missing = genl(SMC_NETLINK_DUMP_UEID);
  CHECK(decode_ueid_reply(hdr(missing)).error().message.find("missing") != std::string::npos);
}

TEST_CASE("SYS_INFO decodes, missing version is rejected") {
  auto m = genl(SMC_NETLINK_GET_SYS_INFO);
  nlattr* n = nla_nest_start(m.get(), SMC_GEN_SYS_INFO);
  nla_put_u8(m.get(), SMC_NLA_SYS_VER, 2);
  nla_put_u8(m.get(), SMC_NLA_SYS_REL, 1);
  nla_put_u8(m.get(), SMC_NLA_SYS_IS_ISM_V2, 0);
  nla_put_string(m.get(), SMC_NLA_SYS_LOCAL_HOST, "node-a");
  nla_put_u8(m.get(), SMC_NLA_SYS_IS_SMCR_V2, 1);
  nla_nest_end(m.get(), n);
  auto got = decode_sys_info(hdr(m));
  REQUIRE(got.ok());
  CHECK(got->version == 2);
  CHECK(got->release == 1);
  CHECK(got->local_host == "node-a");
  REQUIRE(got->smcr_v2.has_value());
  CHECK(*got->smcr_v2);

  auto bad = genl(SMC_NETLINK_GET_SYS_INFO);
  n = nla_nest_start(bad.get(), SMC_GEN_SYS_INFO);
  nla_put_u8(bad.get(), SMC_NLA_SYS_REL, 1);
  nla_nest_end(bad.get(), n);
  CHECK(decode_sys_info(hdr(bad)).error().message.find("missing VER") != std::string::npos);
  auto empty = genl(SMC_NETLINK_GET_SYS_INFO);
  CHECK(decode_sys_info(hdr(empty)).error().message.find("missing nest") != std::string::npos);
}

namespace {

void put_tech(nl_msg* m, int type, uint64_t clnt_v2, uint64_t srv_v2) {
  nlattr* t = nla_nest_start(m, type);
  nlattr* pl = nla_nest_start(m, SMC_NLA_STATS_T_TXPLOAD_SIZE);
  nla_put_u64(m, SMC_NLA_STATS_PLOAD_8K, 3);
  nla_nest_end(m, pl);
  nla_put_u64(m, SMC_NLA_STATS_T_CLNT_V1_SUCC, 0);
  nla_put_u64(m, SMC_NLA_STATS_T_CLNT_V2_SUCC, clnt_v2);
  nla_put_u64(m, SMC_NLA_STATS_T_SRV_V1_SUCC, 0);
  nla_put_u64(m, SMC_NLA_STATS_T_SRV_V2_SUCC, srv_v2);
  nla_put_u64(m, SMC_NLA_STATS_T_RX_BYTES, 16777250);
  nla_put_u64(m, SMC_NLA_STATS_T_TX_BYTES, 16777250);
  nla_nest_end(m, t);
}

}  // namespace

TEST_CASE("STATS decodes per technology") {
  auto m = genl(SMC_NETLINK_GET_STATS);
  nlattr* s = nla_nest_start(m.get(), SMC_GEN_STATS);
  put_tech(m.get(), SMC_NLA_STATS_SMCD_TECH, 0, 0);
  put_tech(m.get(), SMC_NLA_STATS_SMCR_TECH, 1, 1);
  nla_put_u64(m.get(), SMC_NLA_STATS_CLNT_HS_ERR_CNT, 4);
  nla_put_u64(m.get(), SMC_NLA_STATS_SRV_HS_ERR_CNT, 5);
  nla_nest_end(m.get(), s);
  auto got = decode_stats(hdr(m));
  REQUIRE(got.ok());
  CHECK(got->smcr.client_v2_success == 1);
  CHECK(got->smcr.server_v2_success == 1);
  CHECK(got->smcr.rx_bytes == 16777250);
  CHECK(got->smcd.client_v2_success == 0);
  CHECK(got->client_handshake_errors == 4);
  CHECK(got->server_handshake_errors == 5);

  auto bad = genl(SMC_NETLINK_GET_STATS);
  s = nla_nest_start(bad.get(), SMC_GEN_STATS);
  nlattr* t = nla_nest_start(bad.get(), SMC_NLA_STATS_SMCR_TECH);
  nla_put_u32(bad.get(), SMC_NLA_STATS_T_CLNT_V2_SUCC, 1);  // wrong type
  nla_nest_end(bad.get(), t);
  nla_nest_end(bad.get(), s);
  CHECK(decode_stats(hdr(bad)).error().message.find("attribute 8") != std::string::npos);

  auto no_smcr = genl(SMC_NETLINK_GET_STATS);
  s = nla_nest_start(no_smcr.get(), SMC_GEN_STATS);
  nla_put_u64(no_smcr.get(), SMC_NLA_STATS_CLNT_HS_ERR_CNT, 1);
  nla_nest_end(no_smcr.get(), s);
  CHECK(decode_stats(hdr(no_smcr)).error().message.find("SMCR_TECH") != std::string::npos);
}

TEST_CASE("FBACK_STATS messages decode, totals only where sent") {
  auto first = genl(SMC_NETLINK_GET_FBACK_STATS);
  nlattr* n = nla_nest_start(first.get(), SMC_GEN_FBACK_STATS);
  nla_put_u8(first.get(), SMC_NLA_FBACK_STATS_TYPE, 1);
  nla_put_u64(first.get(), SMC_NLA_FBACK_STATS_SRV_CNT, 2);
  nla_put_u64(first.get(), SMC_NLA_FBACK_STATS_CLNT_CNT, 3);
  nla_put_u32(first.get(), SMC_NLA_FBACK_STATS_RSN_CODE, 0x05000000);
  nla_put_u16(first.get(), SMC_NLA_FBACK_STATS_RSN_CNT, 2);
  nla_nest_end(first.get(), n);
  auto got = decode_fallback(hdr(first));
  REQUIRE(got.ok());
  CHECK(got->reason.server);
  CHECK(got->reason.code == 0x05000000);
  CHECK(got->reason.count == 2);
  CHECK(got->server_total == 2);
  CHECK(got->client_total == 3);

  auto next = genl(SMC_NETLINK_GET_FBACK_STATS);
  n = nla_nest_start(next.get(), SMC_GEN_FBACK_STATS);
  nla_put_u8(next.get(), SMC_NLA_FBACK_STATS_TYPE, 0);
  nla_put_u32(next.get(), SMC_NLA_FBACK_STATS_RSN_CODE, 0x03030000);
  nla_put_u16(next.get(), SMC_NLA_FBACK_STATS_RSN_CNT, 3);
  nla_nest_end(next.get(), n);
  got = decode_fallback(hdr(next));
  REQUIRE(got.ok());
  CHECK_FALSE(got->reason.server);
  CHECK_FALSE(got->server_total.has_value());

  auto bad = genl(SMC_NETLINK_GET_FBACK_STATS);
  n = nla_nest_start(bad.get(), SMC_GEN_FBACK_STATS);
  nla_put_u8(bad.get(), SMC_NLA_FBACK_STATS_TYPE, 0);
  nla_nest_end(bad.get(), n);
  CHECK(decode_fallback(hdr(bad)).error().message.find("RSN_CODE") != std::string::npos);
}

namespace {

NlMsgPtr lgr_msg(uint32_t id, const char* pnetid) {
  auto m = genl(SMC_NETLINK_GET_LGR_SMCR);
  nlattr* n = nla_nest_start(m.get(), SMC_GEN_LGR_SMCR);
  nla_put_u32(m.get(), SMC_NLA_LGR_R_ID, id);
  nla_put_u32(m.get(), SMC_NLA_LGR_R_CONNS_NUM, 1);
  nla_put_u8(m.get(), SMC_NLA_LGR_R_ROLE, 0);
  nla_put_u8(m.get(), SMC_NLA_LGR_R_TYPE, 1);
  nla_put_u8(m.get(), SMC_NLA_LGR_R_VLAN_ID, 0);
  nla_put_string(m.get(), SMC_NLA_LGR_R_PNETID, pnetid);
  nla_nest_end(m.get(), n);
  return m;
}

NlMsgPtr link_msg(uint8_t id, const char* dev) {
  auto m = genl(SMC_NETLINK_GET_LINK_SMCR);
  nlattr* n = nla_nest_start(m.get(), SMC_GEN_LINK_SMCR);
  nla_put_u8(m.get(), SMC_NLA_LINK_ID, id);
  nla_put_u32(m.get(), SMC_NLA_LINK_STATE, 3);
  nla_put_u32(m.get(), SMC_NLA_LINK_CONN_CNT, 1);
  nla_put_u8(m.get(), SMC_NLA_LINK_IB_PORT, 1);
  nla_put_u32(m.get(), SMC_NLA_LINK_NET_DEV, 3);
  nla_put_string(m.get(), SMC_NLA_LINK_IB_DEV, dev);
  nla_put_u32(m.get(), SMC_NLA_LINK_UID, 0x01020304);
  nla_put_u32(m.get(), SMC_NLA_LINK_PEER_UID, 0x01020305);
  nla_put_string(m.get(), SMC_NLA_LINK_GID, "0000:0000:0000:0000:0000:ffff:0a63:0001");
  nla_put_string(m.get(), SMC_NLA_LINK_PEER_GID, "0000:0000:0000:0000:0000:ffff:0a63:0002");
  nla_nest_end(m.get(), n);
  return m;
}

}  // namespace

TEST_CASE("link dump groups links under the link group before them") {
  LinkDumpCollector c;
  REQUIRE(c.add(hdr(lgr_msg(0x100, "PNETA"))).ok());
  REQUIRE(c.add(hdr(link_msg(1, "rxe0"))).ok());
  REQUIRE(c.add(hdr(link_msg(2, "rxe1"))).ok());
  REQUIRE(c.add(hdr(lgr_msg(0x200, "PNETB"))).ok());
  REQUIRE(c.add(hdr(link_msg(1, "rxe1"))).ok());
  auto groups = c.take();
  REQUIRE(groups.size() == 2);
  CHECK(groups[0].id == 0x100);
  CHECK(groups[0].pnet_id == "PNETA");
  REQUIRE(groups[0].links.size() == 2);
  CHECK(groups[0].links[1].ib_device == "rxe1");
  CHECK(groups[0].links[0].state == 3);
  CHECK(groups[0].links[0].netdev_ifindex == 3);
  CHECK(groups[0].links[0].gid == "0000:0000:0000:0000:0000:ffff:0a63:0001");
  CHECK(groups[1].links.size() == 1);

  LinkDumpCollector orphan;
  CHECK(orphan.add(hdr(link_msg(1, "rxe0"))).error().message.find("before its link group") != std::string::npos);
}

namespace {

struct DiagBuf {
  std::vector<uint32_t> words = std::vector<uint32_t>(256, 0);
  nlmsghdr* h() { return reinterpret_cast<nlmsghdr*>(words.data()); }
};

// A sock_diag reply as the kernel lays it out: nlmsghdr, smc_diag_msg, then attributes.
DiagBuf diag(uint8_t mode, bool v6, const std::vector<std::pair<int, std::vector<uint8_t>>>& attrs) {
  DiagBuf b;
  nlmsghdr* h = b.h();
  h->nlmsg_type = SOCK_DIAG_BY_FAMILY;
  h->nlmsg_flags = NLM_F_MULTI;
  auto* m = static_cast<smc_diag_msg*>(nlmsg_data(h));
  m->diag_family = 43;
  m->diag_state = 1;
  m->diag_mode = mode;
  m->id.idiag_sport = htons(33442);
  m->id.idiag_dport = htons(5002);
  if (v6) {
    inet_pton(AF_INET6, "fe80::1", m->id.idiag_src);
    inet_pton(AF_INET6, "fe80::2", m->id.idiag_dst);
  } else {
    inet_pton(AF_INET, "10.99.0.1", m->id.idiag_src);
    inet_pton(AF_INET, "10.99.0.2", m->id.idiag_dst);
  }
  m->diag_uid = 1000;
  m->diag_inode = 4242;
  size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(smc_diag_msg));
  auto* bytes = reinterpret_cast<uint8_t*>(h);
  for (const auto& [type, payload] : attrs) {
    auto* a = reinterpret_cast<nlattr*>(bytes + off);
    a->nla_type = static_cast<uint16_t>(type);
    a->nla_len = static_cast<uint16_t>(4 + payload.size());
    std::memcpy(bytes + off + 4, payload.data(), payload.size());
    off += align4(a->nla_len);
  }
  h->nlmsg_len = static_cast<uint32_t>(off);
  return b;
}

template <class T>
std::vector<uint8_t> bytes_of(const T& v) {
  std::vector<uint8_t> out(sizeof(T));
  std::memcpy(out.data(), &v, sizeof(T));
  return out;
}

}  // namespace

TEST_CASE("sock_diag request asks AF_SMC for link group info") {
  auto m = encode_smc_diag_request();
  REQUIRE(m.ok());
  const nlmsghdr* h = nlmsg_hdr(m->get());
  CHECK(h->nlmsg_type == SOCK_DIAG_BY_FAMILY);
  CHECK((h->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP);
  REQUIRE(nlmsg_datalen(h) == static_cast<int>(sizeof(smc_diag_req)));
  smc_diag_req req{};
  std::memcpy(&req, nlmsg_data(h), sizeof(req));
  CHECK(req.diag_family == 43);
  CHECK(req.diag_ext == (1 << (SMC_DIAG_LGRINFO - 1)));
}

TEST_CASE("sock_diag: a fallback socket reports TCP with the reason") {
  smc_diag_fallback f{0x03030002, 0x03030000};
  auto b = diag(SMC_DIAG_MODE_FALLBACK_TCP, false, {{SMC_DIAG_FALLBACK, bytes_of(f)}});
  auto s = decode_smc_diag(b.h());
  REQUIRE(s.ok());
  CHECK(s->mode == SmcMode::Tcp);
  REQUIRE(s->fallback_reason.has_value());
  CHECK(fallback_reason_name(*s->fallback_reason) == "NOSMCRDEV");
  CHECK(*s->peer_diagnosis == 0x03030000);
  CHECK(s->local == "10.99.0.1:33442");
  CHECK(s->peer == "10.99.0.2:5002");
  CHECK(s->uid == 1000);
  CHECK(s->inode == 4242);
}

TEST_CASE("sock_diag: an SMC-R socket reports its link") {
  smc_diag_lgrinfo l{};
  std::strcpy(reinterpret_cast<char*>(l.lnk[0].ibname), "rxe0");
  l.lnk[0].ibport = 1;
  std::strcpy(reinterpret_cast<char*>(l.lnk[0].gid), "0000:0000:0000:0000:0000:ffff:0a63:0001");
  l.role = 0;
  smc_diag_fallback f{0, 0};
  auto b = diag(SMC_DIAG_MODE_SMCR, true, {{SMC_DIAG_FALLBACK, bytes_of(f)}, {SMC_DIAG_LGRINFO, bytes_of(l)}});
  auto s = decode_smc_diag(b.h());
  REQUIRE(s.ok());
  CHECK(s->mode == SmcMode::Smcr);
  CHECK_FALSE(s->fallback_reason.has_value());
  CHECK(s->ib_device == "rxe0");
  CHECK(s->ib_port == 1);
  CHECK(s->local == "[fe80::1]:33442");
  CHECK(s->role == 0);
}

TEST_CASE("sock_diag: malformed replies are rejected") {
  auto short_attr = diag(SMC_DIAG_MODE_FALLBACK_TCP, false, {{SMC_DIAG_FALLBACK, {1, 2, 3, 4}}});
  CHECK(decode_smc_diag(short_attr.h()).error().message.find("attribute 5") != std::string::npos);

  auto ok = diag(SMC_DIAG_MODE_SMCR, false, {});
  ok.h()->nlmsg_len = NLMSG_HDRLEN + 10;
  CHECK(decode_smc_diag(ok.h()).error().message.find("shorter than") != std::string::npos);

  auto wrong = diag(SMC_DIAG_MODE_SMCR, false, {});
  wrong.h()->nlmsg_type = 99;
  CHECK(decode_smc_diag(wrong.h()).error().message.find("unexpected message type") != std::string::npos);

  auto garbage = diag(SMC_DIAG_MODE_SMCR, false, {});
  garbage.h()->nlmsg_len += 3;  // three bytes that are no attribute
  CHECK(decode_smc_diag(garbage.h()).error().message.find("left over") != std::string::npos);
}

TEST_CASE("a byte stream splits into messages, truncation is an error") {
  auto a = genl(SMC_PNETID_GET);
  nla_put_string(a.get(), SMC_PNETID_NAME, "ERDMA");
  auto b = genl(SMC_PNETID_GET);
  nla_put_string(b.get(), SMC_PNETID_NAME, "OTHER");
  std::vector<uint32_t> words(256, 0);
  auto* bytes = reinterpret_cast<uint8_t*>(words.data());
  size_t off = 0;
  for (const auto* m : {hdr(a), hdr(b)}) {
    std::memcpy(bytes + off, m, m->nlmsg_len);
    off += align4(m->nlmsg_len);
  }
  auto split = split_netlink_messages({bytes, off});
  REQUIRE(split.ok());
  CHECK(split->size() == 2);

  auto cut = split_netlink_messages({bytes, off - 4});
  REQUIRE_FALSE(cut.ok());
  CHECK(cut.error().message.find("truncated") != std::string::npos);
  auto tail = split_netlink_messages({bytes, align4(hdr(a)->nlmsg_len) + 3});
  REQUIRE_FALSE(tail.ok());
  CHECK(tail.error().message.find("trailing bytes") != std::string::npos);
}
