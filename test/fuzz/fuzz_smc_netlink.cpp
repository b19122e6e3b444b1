// Fuzz target: what the kernel answers on SMC_PNETID, SMC_GEN_NETLINK and sock_diag: a receive
// buffer is split into netlink messages and each goes through every decoder the agent has, and
// through the link-dump collector.
// Seeds are replies recorded from a real 6.12 kernel in the VM test.
#include <linux/netlink.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "agent/sys/smc_codec.hpp"

namespace {

template <class R>
void must_explain(const R& r) {
  if (!r.ok() && r.error().message.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 20) return 0;
  // A receive buffer is 4-byte aligned.
  std::vector<uint32_t> words((size + 3) / 4);
  if (size > 0) std::memcpy(words.data(), data, size);
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(words.data()), size);
  auto messages = erdma::agent::split_netlink_messages(bytes);
  must_explain(messages);
  if (!messages.ok()) return 0;
  using namespace erdma::agent;
  // The link dump as netlink_smc.cpp reads it: groups, each followed by its links. Every accepted
  // message must land in exactly one place.
  LinkDumpCollector collector;
  size_t accepted = 0;
  for (const nlmsghdr* m : *messages) {
    auto st = collector.add(m);
    must_explain(st);
    if (st.ok()) ++accepted;
  }
  size_t collected = 0;
  for (const auto& g : collector.take()) collected += 1 + g.links.size();
  if (collected != accepted) std::abort();
  for (const nlmsghdr* m : *messages) {
    must_explain(decode_pnet_reply(m));
    must_explain(decode_ueid_reply(m));
    must_explain(decode_sys_info(m));
    must_explain(decode_lgr(m));
    must_explain(decode_link(m));
    must_explain(decode_stats(m));
    must_explain(decode_fallback(m));
    must_explain(decode_smc_diag(m));
  }
  return 0;
}
