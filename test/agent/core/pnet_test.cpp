#include "agent/core/pnet.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace erdma;
using namespace erdma::agent;

TEST_CASE("PnetId parse follows the kernel rules") {
  struct Case {
    std::string in;
    bool ok;
    std::string want;
  };
  const std::vector<Case> cases{
      {"ERDMA", true, "ERDMA"},
      {"erdma", true, "ERDMA"},
      {"  Net1 \t", true, "NET1"},
      {"A", true, "A"},
      {"ABCDEFGHIJKLMNOP", true, "ABCDEFGHIJKLMNOP"},
      {"ABCDEFGHIJKLMNOPQ", false, ""},
      {"", false, ""},
      {"   ", false, ""},
      {"ER-DMA", false, ""},
      {"ER DMA", false, ""},
      {"ERDMA_0", false, ""},
      {std::string("ER\0MA", 5), false, ""},
      {"\xc3\x89RDMA", false, ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    auto r = PnetId::parse(c.in);
    REQUIRE(r.ok() == c.ok);
    if (c.ok) {
      CHECK(r->str() == c.want);
    } else {
      CHECK(r.error().code == ErrorCode::InvalidArgument);
      CHECK(r.error().message.find("PNETID") == 0);
    }
  }
}

TEST_CASE("PnetId error names the rule broken") {
  CHECK(PnetId::parse("ABCDEFGHIJKLMNOPQ").error().message.find("exceeds 16 chars") != std::string::npos);
  CHECK(PnetId::parse("A-B").error().message.find("letters and digits") != std::string::npos);
  CHECK(PnetId::parse("").error().message.find("empty") != std::string::npos);
}

TEST_CASE("Interface names follow dev_valid_name") {
  CHECK(validate_ifname("eth0").ok());
  CHECK(validate_ifname("veth1234567890a").ok());         // 15
  CHECK_FALSE(validate_ifname("veth1234567890ab").ok());  // 16
  CHECK_FALSE(validate_ifname("").ok());
  CHECK_FALSE(validate_ifname(".").ok());
  CHECK_FALSE(validate_ifname("..").ok());
  CHECK_FALSE(validate_ifname("a/b").ok());
  CHECK_FALSE(validate_ifname("a:b").ok());
  CHECK_FALSE(validate_ifname("a b").ok());
  CHECK_FALSE(validate_ifname(std::string("a\nb")).ok());
}

TEST_CASE("RDMA device names and ports") {
  CHECK(PnetEntry::ib("ERDMA", "erdma_0", 1).ok());
  CHECK(PnetEntry::ib("ERDMA", "0000:00:05.0", 2).ok());  // parent device names match too
  CHECK_FALSE(PnetEntry::ib("ERDMA", "erdma_0", 0).ok());
  CHECK_FALSE(PnetEntry::ib("ERDMA", "erdma_0", 3).ok());
  CHECK(PnetEntry::ib("ERDMA", "erdma_0", 3).error().message.find("port 3") != std::string::npos);
  CHECK_FALSE(PnetEntry::ib("ERDMA", std::string(64, 'x'), 1).ok());
  CHECK(PnetEntry::ib("ERDMA", std::string(63, 'x'), 1).ok());
  CHECK_FALSE(PnetEntry::ib("ERDMA", "a b", 1).ok());
  CHECK_FALSE(PnetEntry::ib("bad-id", "erdma_0", 1).ok());
}

TEST_CASE("Entries print and compare by device") {
  auto eth = PnetEntry::eth("erdma", "eth0").value();
  auto ib = PnetEntry::ib("ERDMA", "erdma_0", 1).value();
  CHECK(eth.to_string() == "ERDMA eth eth0");
  CHECK(ib.to_string() == "ERDMA ib erdma_0 port 1");
  CHECK(eth.same_device(PnetEntry::eth("OTHER", "eth0").value()));
  CHECK_FALSE(eth.same_device(ib));
  CHECK_FALSE(ib.same_device(PnetEntry::ib("ERDMA", "erdma_0", 2).value()));
  CHECK(eth == PnetEntry::eth("ERDMA", "eth0").value());
}
