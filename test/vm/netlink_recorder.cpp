// Test-data recorder for the codec tests: run in the VM (test/vm/scenario.sh) while an SMC-R
// connection is up, it writes the kernel's raw netlink replies (SMC_PNETID dump, SMC_GEN_NETLINK
// dumps, sock_diag for AF_SMC) as hex files that test/agent/sys/recorded_replies_test.cpp reads.
//   vm-netlink-recorder DIR
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <linux/smc.h>
#include <netlink/msg.h>

#include "agent/sys/netlink.hpp"
#include "agent/sys/smc_codec.hpp"

namespace {

using namespace erdma;
using namespace erdma::agent;

// Writes the raw reply messages of one request as hex (the codec tests replay them).
bool record_one(const std::string& dir, const std::string& name,
                const std::function<Result<int>(const std::function<Status(const nlmsghdr*)>&)>& send) {
  std::string bytes;
  auto rc = send([&](const nlmsghdr* h) -> Status {
    std::string m(reinterpret_cast<const char*>(h), h->nlmsg_len);
    m.resize((m.size() + 3) / 4 * 4, '\0');
    bytes += m;
    return {};
  });
  if (!rc || *rc != 0) {
    std::cerr << "record " << name << ": " << (rc ? std::to_string(*rc) : rc.error().message) << "\n";
    return false;
  }
  std::ofstream f(dir + "/" + name + ".hex");
  f << "# " << name << ": netlink reply messages recorded from a real kernel by test/vm/run.sh\n";
  static constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto u = static_cast<unsigned char>(bytes[i]);
    f << kHex[u >> 4] << kHex[u & 0xf] << ((i % 32 == 31) ? "\n" : " ");
  }
  f << "\n";
  return true;
}

int record(const std::string& dir) {
  auto pnet = GenlClient::open(kPnetFamily, kNoSmcMessage);
  auto gen = GenlClient::open(kSmcGenFamily, kNoSmcMessage);
  auto diag = NetlinkChannel::open(NETLINK_SOCK_DIAG);
  if (!pnet || !gen || !diag) {
    std::cerr << "record: cannot open the SMC netlink families\n";
    return 1;
  }
  bool ok = true;
  auto genl_dump = [&](GenlClient& c, uint8_t cmd) {
    return [&c, cmd](const std::function<Status(const nlmsghdr*)>& on) -> Result<int> {
      auto m = c.message(cmd, NLM_F_DUMP);
      if (!m) return m.error();
      return c.transact(m->get(), on);
    };
  };
  ok &= record_one(dir, "pnet_dump", genl_dump(*pnet, SMC_PNETID_GET));
  ok &= record_one(dir, "sys_info", genl_dump(*gen, SMC_NETLINK_GET_SYS_INFO));
  ok &= record_one(dir, "link_dump", genl_dump(*gen, SMC_NETLINK_GET_LINK_SMCR));
  ok &= record_one(dir, "stats", genl_dump(*gen, SMC_NETLINK_GET_STATS));
  ok &= record_one(dir, "fallback_stats", genl_dump(*gen, SMC_NETLINK_GET_FBACK_STATS));
  ok &= record_one(dir, "ueid_dump", genl_dump(*gen, SMC_NETLINK_DUMP_UEID));
  ok &= record_one(dir, "smc_diag", [&](const std::function<Status(const nlmsghdr*)>& on) -> Result<int> {
    auto m = encode_smc_diag_request();
    if (!m) return m.error();
    return diag->transact(m->get(), on);
  });
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: vm-netlink-recorder DIR\n";
    return 2;
  }
  return record(argv[1]);
}
