// Fuzz target: the sysfs file parsers of RDMA discovery (port state, NUMA node, GID and GID type).
// Every input must give a value or an error with a message; a GID that parses must be canonical.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "agent/sys/sysfs_rdma.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using namespace erdma::agent::sysfs;
  if (auto r = parse_port_state(text); !r.ok() && r.error().message.empty()) std::abort();
  if (auto r = parse_numa_node(text); !r.ok() && r.error().message.empty()) std::abort();
  if (auto r = parse_gid_type(text); !r.ok() && r.error().message.empty()) std::abort();
  if (auto r = parse_gid(text); r.ok()) {
    // Eight groups of four hex digits: 39 characters, and parsing it again gives the same.
    if (r->size() != 39) std::abort();
    auto again = parse_gid(*r);
    if (!again.ok() || *again != *r) std::abort();
    // Discovery skips unused table entries by is_zero_gid: only the all-zero GID may look unused.
    if (is_zero_gid(*r) != (*r == "0000:0000:0000:0000:0000:0000:0000:0000")) std::abort();
  } else if (r.error().message.empty()) {
    std::abort();
  }
  (void)trim(text);
  return 0;
}
