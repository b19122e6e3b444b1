#include "agent/core/ueid.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace erdma;
using namespace erdma::agent;

TEST_CASE("Ueid parse follows smc_clc_ueid_valid") {
  struct Case {
    std::string in;
    bool ok;
    std::string want;
  };
  const std::vector<Case> cases{
      {"ERDMA", true, "ERDMA"},
      {"E2E-TEST-UEID", true, "E2E-TEST-UEID"},
      {"1.2-A", true, "1.2-A"},
      {"ERDMA      ", true, "ERDMA"},
      {std::string(32, 'A'), true, std::string(32, 'A')},
      {std::string(33, 'A'), false, ""},
      {"", false, ""},
      {"    ", false, ""},
      {"erdma", false, ""},
      {"ERDMa", false, ""},
      {"-ERDMA", false, ""},
      {".ERDMA", false, ""},
      {" ERDMA", false, ""},
      {"ER DMA", false, ""},
      {"ER_DMA", false, ""},
      {std::string("ER\0A", 4), false, ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    auto r = Ueid::parse(c.in);
    REQUIRE(r.ok() == c.ok);
    if (c.ok) CHECK(r->str() == c.want);
    if (!c.ok) CHECK(r.error().code == ErrorCode::InvalidArgument);
  }
}

TEST_CASE("Ueid lower case is refused with a hint") {
  CHECK(Ueid::parse("erdma").error().message.find("use upper case") != std::string::npos);
}

TEST_CASE("Ueid padded form is 32 blank-padded chars") {
  auto u = Ueid::parse("ERDMA").value();
  CHECK(u.padded().size() == 32);
  CHECK(u.padded() == "ERDMA" + std::string(27, ' '));
}
