// SMC netlink codecs (see smc_codec.hpp). Attribute numbers come from the kernel's uapi headers
// (<linux/smc.h>, <linux/smc_diag.h>); the static_asserts pin the ones docs/design.md documents.
#include "agent/sys/smc_codec.hpp"

#include <cstring>
#include <string>

#include <arpa/inet.h>
#include <linux/genetlink.h>
#include <linux/smc.h>
#include <linux/smc_diag.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netlink/attr.h>
#include <netlink/genl/genl.h>
#include <netlink/msg.h>
#include <sys/socket.h>

namespace erdma::agent {

static_assert(SMC_PNETID_GET == 1 && SMC_PNETID_ADD == 2 && SMC_PNETID_DEL == 3 && SMC_PNETID_FLUSH == 4);
static_assert(SMC_PNETID_NAME == 1 && SMC_PNETID_ETHNAME == 2 && SMC_PNETID_IBNAME == 3 && SMC_PNETID_IBPORT == 4);
static_assert(SMC_NETLINK_GET_SYS_INFO == 1 && SMC_NETLINK_GET_LGR_SMCR == 2 && SMC_NETLINK_GET_LINK_SMCR == 3);
static_assert(SMC_NETLINK_GET_STATS == 7 && SMC_NETLINK_GET_FBACK_STATS == 8 && SMC_NETLINK_DUMP_UEID == 9);
static_assert(SMC_NETLINK_ADD_UEID == 10 && SMC_NETLINK_REMOVE_UEID == 11 && SMC_NETLINK_FLUSH_UEID == 12);
static_assert(SMC_DIAG_MODE_SMCR == 0 && SMC_DIAG_MODE_FALLBACK_TCP == 1 && SMC_DIAG_MODE_SMCD == 2);
static_assert(sizeof(smc_diag_req) == 52 && sizeof(smc_diag_msg) == 64);

namespace {

constexpr int kAfSmc = 43;

Error bad(std::string_view what, const std::string& detail) {
  return make_error(ErrorCode::InvalidArgument, std::string(what) + ": " + detail);
}

// Parses attributes strictly: every attribute must lie within [head, head+len) with nothing left
// over, and every known attribute must satisfy `policy`.
Status parse_strict(std::string_view what, nlattr* head, int len, int maxtype, const nla_policy* policy, nlattr** tb) {
  if (len < 0) return bad(what, "attribute area has negative length");
  int rem = len;
  for (nlattr* a = head; nla_ok(a, rem); a = nla_next(a, &rem)) {
  }
  if (rem > 0) return bad(what, std::to_string(rem) + " bytes left over after the attributes (truncated or malformed)");
  int rc = nla_parse(tb, maxtype, head, len, policy);
  if (rc == 0) return {};
  // Find the culprit to name it.
  rem = len;
  for (nlattr* a = head; nla_ok(a, rem); a = nla_next(a, &rem)) {
    int type = nla_type(a);
    if (type < 0 || type > maxtype) continue;
    std::vector<nlattr*> one(static_cast<size_t>(maxtype) + 1, nullptr);
    if (nla_parse(one.data(), maxtype, a, nla_total_size(nla_len(a)), policy) < 0) {
      const nla_policy& p = policy[type];
      std::string detail = "attribute " + std::to_string(type) + " (" + std::to_string(nla_len(a)) + " bytes) ";
      if (p.type == NLA_STRING) {
        detail += "is not a NUL-terminated string of at most " + std::to_string(p.maxlen ? p.maxlen - 1 : 0) + " chars";
      } else {
        detail += "has the wrong size for its type";
      }
      return bad(what, detail);
    }
  }
  return bad(what, "attributes do not match the expected layout");
}

// Validates the generic netlink header and command, then parses the top-level attributes.
Status parse_genl(std::string_view what, const nlmsghdr* nlh, std::initializer_list<uint8_t> cmds, int maxtype,
                  const nla_policy* policy, nlattr** tb) {
  auto* h = const_cast<nlmsghdr*>(nlh);
  if (h->nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN || !genlmsg_valid_hdr(h, 0)) {
    return bad(what, "message too short for a generic netlink header");
  }
  genlmsghdr* g = genlmsg_hdr(h);
  bool known = false;
  for (uint8_t c : cmds) known = known || g->cmd == c;
  if (!known) return bad(what, "unexpected command " + std::to_string(g->cmd));
  return parse_strict(what, genlmsg_attrdata(g, 0), genlmsg_attrlen(g, 0), maxtype, policy, tb);
}

Status parse_nested(std::string_view what, nlattr* nest, int maxtype, const nla_policy* policy, nlattr** tb) {
  return parse_strict(what, static_cast<nlattr*>(nla_data(nest)), nla_len(nest), maxtype, policy, tb);
}

std::string get_str(const nlattr* a) {
  const char* s = static_cast<const char*>(nla_data(a));
  return std::string(s, ::strnlen(s, static_cast<size_t>(nla_len(a))));
}

nla_policy str_policy(uint16_t max_chars) {
  nla_policy p{};
  p.type = NLA_STRING;
  p.maxlen = static_cast<uint16_t>(max_chars + 1);
  return p;
}
// Fixed-size types get an exact size: libnl checks only the minimum, and a u32 where a u8 belongs
// is a wrong type, not a u8.
nla_policy typed(uint16_t type) {
  nla_policy p{};
  p.type = type;
  switch (type) {
    case NLA_U8: p.maxlen = 1; break;
    case NLA_U16: p.maxlen = 2; break;
    case NLA_U32: p.maxlen = 4; break;
    case NLA_U64: p.maxlen = 8; break;
    default: break;
  }
  return p;
}
nla_policy nested() { return typed(NLA_NESTED); }

// "n/a" is what the kernel reports for the half of an entry that does not apply.
constexpr std::string_view kNotApplicable = "n/a";

}  // namespace

// --- SMC_PNETID -----------------------------------------------------------------------------------

Status encode_pnet_add(nl_msg* msg, const PnetEntry& entry) {
  if (nla_put_string(msg, SMC_PNETID_NAME, entry.pnet_id.str().c_str()) < 0) {
    return make_error(ErrorCode::Internal, "netlink: message too small");
  }
  if (entry.kind == PnetEntryKind::Eth) {
    if (nla_put_string(msg, SMC_PNETID_ETHNAME, entry.device.c_str()) < 0) {
      return make_error(ErrorCode::Internal, "netlink: message too small");
    }
    return {};
  }
  if (nla_put_string(msg, SMC_PNETID_IBNAME, entry.device.c_str()) < 0 ||
      nla_put_u8(msg, SMC_PNETID_IBPORT, entry.port) < 0) {
    return make_error(ErrorCode::Internal, "netlink: message too small");
  }
  return {};
}

Status encode_pnet_name(nl_msg* msg, const PnetId& id) {
  if (nla_put_string(msg, SMC_PNETID_NAME, id.str().c_str()) < 0) {
    return make_error(ErrorCode::Internal, "netlink: message too small");
  }
  return {};
}

Result<std::vector<PnetEntry>> decode_pnet_reply(const nlmsghdr* nlh) {
  constexpr std::string_view what = "SMC_PNETID reply";
  nla_policy policy[SMC_PNETID_MAX + 1] = {};
  policy[SMC_PNETID_NAME] = str_policy(kMaxPnetIdLen);
  policy[SMC_PNETID_ETHNAME] = str_policy(kMaxIfNameLen);
  policy[SMC_PNETID_IBNAME] = str_policy(kMaxIbDevNameLen);
  policy[SMC_PNETID_IBPORT] = typed(NLA_U8);
  nlattr* tb[SMC_PNETID_MAX + 1] = {};
  ERDMA_TRY(parse_genl(what, nlh, {SMC_PNETID_GET}, SMC_PNETID_MAX, policy, tb));
  if (!tb[SMC_PNETID_NAME]) return bad(what, "missing attribute NAME (1)");
  const std::string name = get_str(tb[SMC_PNETID_NAME]);
  const std::string eth = tb[SMC_PNETID_ETHNAME] ? get_str(tb[SMC_PNETID_ETHNAME]) : std::string(kNotApplicable);
  const std::string ib = tb[SMC_PNETID_IBNAME] ? get_str(tb[SMC_PNETID_IBNAME]) : std::string(kNotApplicable);
  std::vector<PnetEntry> out;
  if (eth != kNotApplicable && !eth.empty()) {
    auto e = PnetEntry::eth(name, eth);
    if (!e) return bad(what, e.error().message);
    out.push_back(std::move(*e));
  }
  if (ib != kNotApplicable && !ib.empty()) {
    if (!tb[SMC_PNETID_IBPORT]) return bad(what, "entry for RDMA device " + ib + " has no IBPORT (4)");
    auto e = PnetEntry::ib(name, ib, nla_get_u8(tb[SMC_PNETID_IBPORT]));
    if (!e) return bad(what, e.error().message);
    out.push_back(std::move(*e));
  }
  if (out.empty()) return bad(what, "entry for PNETID " + name + " names neither an interface nor an RDMA device");
  return out;
}

// --- SMC_GEN_NETLINK ------------------------------------------------------------------------------

Status encode_ueid(nl_msg* msg, const Ueid& ueid) {
  const std::string padded = ueid.padded();  // 32 bytes; nla_put_string adds the NUL -> 33
  if (nla_put_string(msg, SMC_NLA_EID_TABLE_ENTRY, padded.c_str()) < 0) {
    return make_error(ErrorCode::Internal, "netlink: message too small");
  }
  return {};
}

Result<Ueid> decode_ueid_reply(const nlmsghdr* nlh) {
  constexpr std::string_view what = "SMC_GEN_NETLINK UEID reply";
  nla_policy policy[SMC_NLA_EID_TABLE_MAX + 1] = {};
  policy[SMC_NLA_EID_TABLE_ENTRY] = str_policy(kUeidLen);
  nlattr* tb[SMC_NLA_EID_TABLE_MAX + 1] = {};
  ERDMA_TRY(parse_genl(what, nlh, {SMC_NETLINK_DUMP_UEID}, SMC_NLA_EID_TABLE_MAX, policy, tb));
  if (!tb[SMC_NLA_EID_TABLE_ENTRY]) return bad(what, "missing attribute ENTRY (1)");
  auto u = Ueid::parse(get_str(tb[SMC_NLA_EID_TABLE_ENTRY]));
  if (!u) return bad(what, u.error().message);
  return std::move(*u);
}

Result<SmcSystemInfo> decode_sys_info(const nlmsghdr* nlh) {
  constexpr std::string_view what = "SMC_GEN_NETLINK SYS_INFO reply";
  nla_policy top[SMC_GEN_MAX + 1] = {};
  top[SMC_GEN_SYS_INFO] = nested();
  nlattr* tb[SMC_GEN_MAX + 1] = {};
  ERDMA_TRY(parse_genl(what, nlh, {SMC_NETLINK_GET_SYS_INFO}, SMC_GEN_MAX, top, tb));
  if (!tb[SMC_GEN_SYS_INFO]) return bad(what, "missing nest SYS_INFO (1)");
  nla_policy policy[SMC_NLA_SYS_MAX + 1] = {};
  policy[SMC_NLA_SYS_VER] = typed(NLA_U8);
  policy[SMC_NLA_SYS_REL] = typed(NLA_U8);
  policy[SMC_NLA_SYS_IS_ISM_V2] = typed(NLA_U8);
  policy[SMC_NLA_SYS_LOCAL_HOST] = str_policy(SMC_MAX_HOSTNAME_LEN);
  policy[SMC_NLA_SYS_SEID] = str_policy(SMC_MAX_EID_LEN);
  policy[SMC_NLA_SYS_IS_SMCR_V2] = typed(NLA_U8);
  nlattr* a[SMC_NLA_SYS_MAX + 1] = {};
  ERDMA_TRY(parse_nested(what, tb[SMC_GEN_SYS_INFO], SMC_NLA_SYS_MAX, policy, a));
  if (!a[SMC_NLA_SYS_VER] || !a[SMC_NLA_SYS_REL]) return bad(what, "missing VER (1) or REL (2)");
  SmcSystemInfo info;
  info.version = nla_get_u8(a[SMC_NLA_SYS_VER]);
  info.release = nla_get_u8(a[SMC_NLA_SYS_REL]);
  if (a[SMC_NLA_SYS_IS_ISM_V2]) info.ism_v2 = nla_get_u8(a[SMC_NLA_SYS_IS_ISM_V2]) != 0;
  if (a[SMC_NLA_SYS_IS_SMCR_V2]) info.smcr_v2 = nla_get_u8(a[SMC_NLA_SYS_IS_SMCR_V2]) != 0;
  if (a[SMC_NLA_SYS_LOCAL_HOST]) info.local_host = get_str(a[SMC_NLA_SYS_LOCAL_HOST]);
  if (a[SMC_NLA_SYS_SEID]) info.seid = get_str(a[SMC_NLA_SYS_SEID]);
  return info;
}

Result<SmcrLinkGroup> decode_lgr(const nlmsghdr* nlh) {
  constexpr std::string_view what = "SMC_GEN_NETLINK LGR_SMCR reply";
  nla_policy top[SMC_GEN_MAX + 1] = {};
  top[SMC_GEN_LGR_SMCR] = nested();
  nlattr* tb[SMC_GEN_MAX + 1] = {};
  ERDMA_TRY(parse_genl(what, nlh, {SMC_NETLINK_GET_LGR_SMCR}, SMC_GEN_MAX, top, tb));
  if (!tb[SMC_GEN_LGR_SMCR]) return bad(what, "missing nest LGR_SMCR (2)");
  nla_policy policy[SMC_NLA_LGR_R_MAX + 1] = {};
  policy[SMC_NLA_LGR_R_ID] = typed(NLA_U32);
  policy[SMC_NLA_LGR_R_ROLE] = typed(NLA_U8);
  policy[SMC_NLA_LGR_R_TYPE] = typed(NLA_U8);
  policy[SMC_NLA_LGR_R_PNETID] = str_policy(kMaxPnetIdLen);
  policy[SMC_NLA_LGR_R_VLAN_ID] = typed(NLA_U8);
  policy[SMC_NLA_LGR_R_CONNS_NUM] = typed(NLA_U32);
  policy[SMC_NLA_LGR_R_V2_COMMON] = nested();
  policy[SMC_NLA_LGR_R_V2] = nested();
  policy[SMC_NLA_LGR_R_NET_COOKIE] = typed(NLA_U64);
  policy[SMC_NLA_LGR_R_BUF_TYPE] = typed(NLA_U8);
  nlattr* a[SMC_NLA_LGR_R_MAX + 1] = {};
  ERDMA_TRY(parse_nested(what, tb[SMC_GEN_LGR_SMCR], SMC_NLA_LGR_R_MAX, policy, a));
  if (!a[SMC_NLA_LGR_R_ID]) return bad(what, "missing ID (1)");
  SmcrLinkGroup g;
  g.id = nla_get_u32(a[SMC_NLA_LGR_R_ID]);
  if (a[SMC_NLA_LGR_R_CONNS_NUM]) g.conns = nla_get_u32(a[SMC_NLA_LGR_R_CONNS_NUM]);
  if (a[SMC_NLA_LGR_R_ROLE]) g.role = nla_get_u8(a[SMC_NLA_LGR_R_ROLE]);
  if (a[SMC_NLA_LGR_R_TYPE]) g.type = nla_get_u8(a[SMC_NLA_LGR_R_TYPE]);
  if (a[SMC_NLA_LGR_R_VLAN_ID]) g.vlan_id = nla_get_u8(a[SMC_NLA_LGR_R_VLAN_ID]);
  if (a[SMC_NLA_LGR_R_PNETID]) g.pnet_id = get_str(a[SMC_NLA_LGR_R_PNETID]);
  return g;
}

Result<SmcrLink> decode_link(const nlmsghdr* nlh) {
  constexpr std::string_view what = "SMC_GEN_NETLINK LINK_SMCR reply";
  nla_policy top[SMC_GEN_MAX + 1] = {};
  top[SMC_GEN_LINK_SMCR] = nested();
  nlattr* tb[SMC_GEN_MAX + 1] = {};
  ERDMA_TRY(parse_genl(what, nlh, {SMC_NETLINK_GET_LINK_SMCR}, SMC_GEN_MAX, top, tb));
  if (!tb[SMC_GEN_LINK_SMCR]) return bad(what, "missing nest LINK_SMCR (3)");
  nla_policy policy[SMC_NLA_LINK_MAX + 1] = {};
  policy[SMC_NLA_LINK_ID] = typed(NLA_U8);
  policy[SMC_NLA_LINK_IB_DEV] = str_policy(kMaxIbDevNameLen);
  policy[SMC_NLA_LINK_IB_PORT] = typed(NLA_U8);
  policy[SMC_NLA_LINK_GID] = str_policy(40);
  policy[SMC_NLA_LINK_PEER_GID] = str_policy(40);
  policy[SMC_NLA_LINK_CONN_CNT] = typed(NLA_U32);
  policy[SMC_NLA_LINK_NET_DEV] = typed(NLA_U32);
  policy[SMC_NLA_LINK_UID] = typed(NLA_U32);
  policy[SMC_NLA_LINK_PEER_UID] = typed(NLA_U32);
  policy[SMC_NLA_LINK_STATE] = typed(NLA_U32);
  nlattr* a[SMC_NLA_LINK_MAX + 1] = {};
  ERDMA_TRY(parse_nested(what, tb[SMC_GEN_LINK_SMCR], SMC_NLA_LINK_MAX, policy, a));
  if (!a[SMC_NLA_LINK_ID] || !a[SMC_NLA_LINK_IB_DEV]) return bad(what, "missing ID (1) or IB_DEV (2)");
  SmcrLink l;
  l.id = nla_get_u8(a[SMC_NLA_LINK_ID]);
  l.ib_device = get_str(a[SMC_NLA_LINK_IB_DEV]);
  if (a[SMC_NLA_LINK_IB_PORT]) l.ib_port = nla_get_u8(a[SMC_NLA_LINK_IB_PORT]);
  if (a[SMC_NLA_LINK_GID]) l.gid = get_str(a[SMC_NLA_LINK_GID]);
  if (a[SMC_NLA_LINK_PEER_GID]) l.peer_gid = get_str(a[SMC_NLA_LINK_PEER_GID]);
  if (a[SMC_NLA_LINK_CONN_CNT]) l.conn_count = nla_get_u32(a[SMC_NLA_LINK_CONN_CNT]);
  if (a[SMC_NLA_LINK_NET_DEV]) l.netdev_ifindex = nla_get_u32(a[SMC_NLA_LINK_NET_DEV]);
  if (a[SMC_NLA_LINK_STATE]) l.state = nla_get_u32(a[SMC_NLA_LINK_STATE]);
  return l;
}

Status LinkDumpCollector::add(const nlmsghdr* nlh) {
  auto* h = const_cast<nlmsghdr*>(nlh);
  if (h->nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN || !genlmsg_valid_hdr(h, 0)) {
    return bad("SMC_GEN_NETLINK link dump", "message too short for a generic netlink header");
  }
  if (genlmsg_hdr(h)->cmd == SMC_NETLINK_GET_LGR_SMCR) {
    ERDMA_TRY_ASSIGN(auto g, decode_lgr(nlh));
    groups_.push_back(std::move(g));
    return {};
  }
  ERDMA_TRY_ASSIGN(auto l, decode_link(nlh));
  if (groups_.empty()) return bad("SMC_GEN_NETLINK link dump", "a link arrived before its link group");
  groups_.back().links.push_back(std::move(l));
  return {};
}

namespace {

Status decode_tech(std::string_view what, nlattr* nest, SmcTechStats& t) {
  nla_policy policy[SMC_NLA_STATS_T_MAX + 1] = {};
  for (int i = SMC_NLA_STATS_T_TX_RMB_SIZE; i <= SMC_NLA_STATS_T_RX_RMB_STATS; ++i) policy[i] = nested();
  for (int i = SMC_NLA_STATS_T_CLNT_V1_SUCC; i <= SMC_NLA_STATS_T_TX_CNT; ++i) policy[i] = typed(NLA_U64);
  nlattr* a[SMC_NLA_STATS_T_MAX + 1] = {};
  if (auto st = parse_nested(what, nest, SMC_NLA_STATS_T_MAX, policy, a); !st) return st;
  auto u64 = [&](int i) -> uint64_t { return a[i] ? nla_get_u64(a[i]) : 0; };
  t.client_v1_success = u64(SMC_NLA_STATS_T_CLNT_V1_SUCC);
  t.client_v2_success = u64(SMC_NLA_STATS_T_CLNT_V2_SUCC);
  t.server_v1_success = u64(SMC_NLA_STATS_T_SRV_V1_SUCC);
  t.server_v2_success = u64(SMC_NLA_STATS_T_SRV_V2_SUCC);
  t.rx_bytes = u64(SMC_NLA_STATS_T_RX_BYTES);
  t.tx_bytes = u64(SMC_NLA_STATS_T_TX_BYTES);
  t.rx_calls = u64(SMC_NLA_STATS_T_RX_CNT);
  t.tx_calls = u64(SMC_NLA_STATS_T_TX_CNT);
  return {};
}

}  // namespace

Result<SmcStats> decode_stats(const nlmsghdr* nlh) {
  constexpr std::string_view what = "SMC_GEN_NETLINK STATS reply";
  nla_policy top[SMC_GEN_MAX + 1] = {};
  top[SMC_GEN_STATS] = nested();
  nlattr* tb[SMC_GEN_MAX + 1] = {};
  ERDMA_TRY(parse_genl(what, nlh, {SMC_NETLINK_GET_STATS}, SMC_GEN_MAX, top, tb));
  if (!tb[SMC_GEN_STATS]) return bad(what, "missing nest STATS (7)");
  nla_policy policy[SMC_NLA_STATS_MAX + 1] = {};
  policy[SMC_NLA_STATS_SMCD_TECH] = nested();
  policy[SMC_NLA_STATS_SMCR_TECH] = nested();
  policy[SMC_NLA_STATS_CLNT_HS_ERR_CNT] = typed(NLA_U64);
  policy[SMC_NLA_STATS_SRV_HS_ERR_CNT] = typed(NLA_U64);
  nlattr* a[SMC_NLA_STATS_MAX + 1] = {};
  ERDMA_TRY(parse_nested(what, tb[SMC_GEN_STATS], SMC_NLA_STATS_MAX, policy, a));
  if (!a[SMC_NLA_STATS_SMCR_TECH]) return bad(what, "missing nest SMCR_TECH (2)");
  SmcStats s;
  ERDMA_TRY(decode_tech(what, a[SMC_NLA_STATS_SMCR_TECH], s.smcr));
  if (a[SMC_NLA_STATS_SMCD_TECH]) {
    ERDMA_TRY(decode_tech(what, a[SMC_NLA_STATS_SMCD_TECH], s.smcd));
  }
  if (a[SMC_NLA_STATS_CLNT_HS_ERR_CNT]) s.client_handshake_errors = nla_get_u64(a[SMC_NLA_STATS_CLNT_HS_ERR_CNT]);
  if (a[SMC_NLA_STATS_SRV_HS_ERR_CNT]) s.server_handshake_errors = nla_get_u64(a[SMC_NLA_STATS_SRV_HS_ERR_CNT]);
  return s;
}

Result<FallbackMessage> decode_fallback(const nlmsghdr* nlh) {
  constexpr std::string_view what = "SMC_GEN_NETLINK FBACK_STATS reply";
  nla_policy top[SMC_GEN_MAX + 1] = {};
  top[SMC_GEN_FBACK_STATS] = nested();
  nlattr* tb[SMC_GEN_MAX + 1] = {};
  ERDMA_TRY(parse_genl(what, nlh, {SMC_NETLINK_GET_FBACK_STATS}, SMC_GEN_MAX, top, tb));
  if (!tb[SMC_GEN_FBACK_STATS]) return bad(what, "missing nest FBACK_STATS (8)");
  nla_policy policy[SMC_NLA_FBACK_STATS_MAX + 1] = {};
  policy[SMC_NLA_FBACK_STATS_TYPE] = typed(NLA_U8);
  policy[SMC_NLA_FBACK_STATS_SRV_CNT] = typed(NLA_U64);
  policy[SMC_NLA_FBACK_STATS_CLNT_CNT] = typed(NLA_U64);
  policy[SMC_NLA_FBACK_STATS_RSN_CODE] = typed(NLA_U32);
  policy[SMC_NLA_FBACK_STATS_RSN_CNT] = typed(NLA_U16);
  nlattr* a[SMC_NLA_FBACK_STATS_MAX + 1] = {};
  ERDMA_TRY(parse_nested(what, tb[SMC_GEN_FBACK_STATS], SMC_NLA_FBACK_STATS_MAX, policy, a));
  if (!a[SMC_NLA_FBACK_STATS_TYPE] || !a[SMC_NLA_FBACK_STATS_RSN_CODE] || !a[SMC_NLA_FBACK_STATS_RSN_CNT]) {
    return bad(what, "missing TYPE (1), RSN_CODE (4) or RSN_CNT (5)");
  }
  FallbackMessage m;
  m.reason.server = nla_get_u8(a[SMC_NLA_FBACK_STATS_TYPE]) != 0;
  m.reason.code = nla_get_u32(a[SMC_NLA_FBACK_STATS_RSN_CODE]);
  m.reason.count = nla_get_u16(a[SMC_NLA_FBACK_STATS_RSN_CNT]);
  if (a[SMC_NLA_FBACK_STATS_SRV_CNT]) m.server_total = nla_get_u64(a[SMC_NLA_FBACK_STATS_SRV_CNT]);
  if (a[SMC_NLA_FBACK_STATS_CLNT_CNT]) m.client_total = nla_get_u64(a[SMC_NLA_FBACK_STATS_CLNT_CNT]);
  return m;
}

// --- sock_diag ------------------------------------------------------------------------------------

Result<NlMsgPtr> encode_smc_diag_request() {
  NlMsgPtr msg(nlmsg_alloc_simple(SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP));
  if (!msg) return make_error(ErrorCode::ResourceExhausted, "netlink: cannot allocate a message");
  smc_diag_req req{};
  req.diag_family = kAfSmc;
  req.diag_ext = static_cast<uint8_t>(1U << (SMC_DIAG_LGRINFO - 1));
  if (nlmsg_append(msg.get(), &req, sizeof(req), NLMSG_ALIGNTO) < 0) {
    return make_error(ErrorCode::Internal, "netlink: cannot build the sock_diag request");
  }
  return msg;
}

namespace {

std::string format_endpoint(const uint32_t addr[4], uint16_t port_be, bool v6) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (v6) {
    ::inet_ntop(AF_INET6, addr, buf, sizeof(buf));
    return "[" + std::string(buf) + "]:" + std::to_string(ntohs(port_be));
  }
  ::inet_ntop(AF_INET, addr, buf, sizeof(buf));
  return std::string(buf) + ":" + std::to_string(ntohs(port_be));
}

std::string fixed_str(const uint8_t* p, size_t n) {
  const char* s = reinterpret_cast<const char*>(p);
  return std::string(s, ::strnlen(s, n));
}

}  // namespace

Result<SmcSocket> decode_smc_diag(const nlmsghdr* nlh) {
  constexpr std::string_view what = "SMC sock_diag reply";
  if (nlh->nlmsg_type != SOCK_DIAG_BY_FAMILY)
    return bad(what, "unexpected message type " + std::to_string(nlh->nlmsg_type));
  if (nlh->nlmsg_len < NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(smc_diag_msg))) {
    return bad(what, "message shorter than struct smc_diag_msg");
  }
  smc_diag_msg m{};
  std::memcpy(&m, nlmsg_data(nlh), sizeof(m));
  nla_policy policy[SMC_DIAG_MAX + 1] = {};
  policy[SMC_DIAG_FALLBACK].minlen = sizeof(smc_diag_fallback);
  policy[SMC_DIAG_LGRINFO].minlen = sizeof(smc_diag_lgrinfo);
  policy[SMC_DIAG_SHUTDOWN] = typed(NLA_U8);
  nlattr* a[SMC_DIAG_MAX + 1] = {};
  auto* h = const_cast<nlmsghdr*>(nlh);
  ERDMA_TRY(parse_strict(what, nlmsg_attrdata(h, sizeof(smc_diag_msg)), nlmsg_attrlen(h, sizeof(smc_diag_msg)),
                         SMC_DIAG_MAX, policy, a));
  SmcSocket s;
  s.family = m.diag_family;
  s.state = m.diag_state;
  s.raw_mode = m.diag_mode;
  s.mode = smc_mode_from_diag(m.diag_mode);
  s.uid = m.diag_uid;
  s.inode = m.diag_inode;
  // The kernel fills IPv4 sockets' addresses into word 0 only; anything in words 1..3 means IPv6.
  const bool v6 = m.diag_family == AF_INET6 || m.id.idiag_src[1] || m.id.idiag_src[2] || m.id.idiag_src[3] ||
                  m.id.idiag_dst[1] || m.id.idiag_dst[2] || m.id.idiag_dst[3];
  s.local = format_endpoint(m.id.idiag_src, m.id.idiag_sport, v6);
  s.peer = format_endpoint(m.id.idiag_dst, m.id.idiag_dport, v6);
  if (a[SMC_DIAG_FALLBACK] && s.mode == SmcMode::Tcp) {
    smc_diag_fallback f{};
    std::memcpy(&f, nla_data(a[SMC_DIAG_FALLBACK]), sizeof(f));
    s.fallback_reason = f.reason;
    s.peer_diagnosis = f.peer_diagnosis;
  }
  if (a[SMC_DIAG_LGRINFO] && s.mode == SmcMode::Smcr) {
    smc_diag_lgrinfo l{};
    std::memcpy(&l, nla_data(a[SMC_DIAG_LGRINFO]), sizeof(l));
    s.ib_device = fixed_str(l.lnk[0].ibname, sizeof(l.lnk[0].ibname));
    s.ib_port = l.lnk[0].ibport;
    s.gid = fixed_str(l.lnk[0].gid, sizeof(l.lnk[0].gid));
    s.peer_gid = fixed_str(l.lnk[0].peer_gid, sizeof(l.lnk[0].peer_gid));
    s.role = l.role;
  }
  return s;
}

Result<std::vector<const nlmsghdr*>> split_netlink_messages(std::span<const uint8_t> bytes) {
  std::vector<const nlmsghdr*> out;
  size_t off = 0;
  while (off < bytes.size()) {
    const size_t left = bytes.size() - off;
    if (left < sizeof(nlmsghdr)) {
      return make_error(ErrorCode::InvalidArgument,
                        "netlink stream: " + std::to_string(left) + " trailing bytes are not a whole message header");
    }
    const auto* h = reinterpret_cast<const nlmsghdr*>(bytes.data() + off);
    if (h->nlmsg_len < sizeof(nlmsghdr) || h->nlmsg_len > left) {
      return make_error(ErrorCode::InvalidArgument, "netlink stream: message at offset " + std::to_string(off) +
                                                        " claims " + std::to_string(h->nlmsg_len) + " bytes, " +
                                                        std::to_string(left) + " available (truncated)");
    }
    out.push_back(h);
    off += std::min<size_t>(NLMSG_ALIGN(h->nlmsg_len), left);
  }
  return out;
}

}  // namespace erdma::agent
