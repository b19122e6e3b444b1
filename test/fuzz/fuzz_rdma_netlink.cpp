// Fuzz target: RDMA netlink (NLDEV) replies as the kernel would send them, through the three
// decoders the agent uses. The input is one netlink message; its length field is made to match
// the input so the decoders see what a receive of that many bytes would give them.
#include <linux/netlink.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "agent/sys/rdma_netlink.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sizeof(nlmsghdr) || size > 65536) return 0;
  // Netlink messages are 4-byte aligned in the receive buffer.
  std::vector<uint32_t> buf((size + 3) / 4);
  std::memcpy(buf.data(), data, size);
  auto* msg = reinterpret_cast<nlmsghdr*>(buf.data());
  msg->nlmsg_len = static_cast<uint32_t>(size);
  for (auto r : {erdma::agent::decode_nldev_device(msg).ok(), erdma::agent::decode_nldev_port(msg).ok(),
                 erdma::agent::decode_nldev_chardev(msg).ok()}) {
    (void)r;
  }
  auto d = erdma::agent::decode_nldev_device(msg);
  if (!d.ok() && d.error().message.empty()) std::abort();
  return 0;
}
