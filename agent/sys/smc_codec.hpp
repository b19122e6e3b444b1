// Encoders and decoders for the SMC netlink messages: SMC_PNETID and SMC_GEN_NETLINK (generic
// netlink) and SMC sock_diag. Free functions over nl_msg / nlmsghdr, no sockets, so tests feed them
// messages built in memory and replies recorded from a real kernel.
//
// Every decoder validates its input: the generic netlink header, every attribute against an
// nla_policy (size, NUL-terminated strings), no bytes left over after the attributes, required
// attributes present and values in range. Anything else is InvalidArgument with a message that names
// the message and the attribute.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <linux/netlink.h>

#include "agent/core/pnet.hpp"
#include "agent/core/smc_model.hpp"
#include "agent/core/ueid.hpp"
#include "agent/sys/netlink.hpp"
#include "common/result.hpp"

namespace erdma::agent {

inline constexpr const char* kPnetFamily = "SMC_PNETID";
inline constexpr const char* kSmcGenFamily = "SMC_GEN_NETLINK";

// --- SMC_PNETID -------------------------------------------------------------------------------
// Appends NAME plus ETHNAME, or IBNAME and IBPORT, for an ADD request.
[[nodiscard]] Status encode_pnet_add(nl_msg* msg, const PnetEntry& entry);
// Appends NAME, for a DEL (or GET of one PNETID) request.
[[nodiscard]] Status encode_pnet_name(nl_msg* msg, const PnetId& id);
// One GET reply: the entries it describes (one per message on current kernels; a message naming
// both a netdev and an RDMA device, as kernels before 5.5 report, gives two).
[[nodiscard]] Result<std::vector<PnetEntry>> decode_pnet_reply(const nlmsghdr* nlh);

// --- SMC_GEN_NETLINK ----------------------------------------------------------------------------
// Appends the UEID attribute (exactly 32 blank-padded chars + NUL, as the kernel requires).
[[nodiscard]] Status encode_ueid(nl_msg* msg, const Ueid& ueid);
[[nodiscard]] Result<Ueid> decode_ueid_reply(const nlmsghdr* nlh);
[[nodiscard]] Result<SmcSystemInfo> decode_sys_info(const nlmsghdr* nlh);
[[nodiscard]] Result<SmcrLinkGroup> decode_lgr(const nlmsghdr* nlh);
[[nodiscard]] Result<SmcrLink> decode_link(const nlmsghdr* nlh);
[[nodiscard]] Result<SmcStats> decode_stats(const nlmsghdr* nlh);

// One FBACK_STATS message: a reason count, plus the totals on the dump's first message.
struct FallbackMessage {
  FallbackReasonCount reason;
  std::optional<uint64_t> server_total;
  std::optional<uint64_t> client_total;
};
[[nodiscard]] Result<FallbackMessage> decode_fallback(const nlmsghdr* nlh);

// Collects the messages of a LINK_SMCR dump: the kernel sends each link group (cmd LGR_SMCR) followed
// by its links (cmd LINK_SMCR). Feed messages in order; take() returns the groups.
class LinkDumpCollector {
 public:
  [[nodiscard]] Status add(const nlmsghdr* nlh);
  [[nodiscard]] std::vector<SmcrLinkGroup> take() { return std::move(groups_); }

 private:
  std::vector<SmcrLinkGroup> groups_;
};

// --- sock_diag ----------------------------------------------------------------------------------
// A SOCK_DIAG_BY_FAMILY dump request for AF_SMC asking for link group info.
[[nodiscard]] Result<NlMsgPtr> encode_smc_diag_request();
[[nodiscard]] Result<SmcSocket> decode_smc_diag(const nlmsghdr* nlh);

// --- recorded replies ---------------------------------------------------------------------------
// Splits a byte stream of netlink messages (as read from a socket, or recorded) into messages.
// InvalidArgument when a header is truncated or claims more bytes than there are. The pointers
// point into `bytes`, which must be 4-byte aligned and outlive them.
[[nodiscard]] Result<std::vector<const nlmsghdr*>> split_netlink_messages(std::span<const uint8_t> bytes);

}  // namespace erdma::agent
