#include "agent/core/smc_model.hpp"

#include <doctest/doctest.h>

using namespace erdma::agent;

TEST_CASE("fallback reasons have kernel names") {
  CHECK(fallback_reason_name(0x03030002) == "NOSMCRDEV");
  CHECK(fallback_reason_name(0x03030000) == "NOSMCDEV");
  CHECK(fallback_reason_name(0x03010000) == "PEERNOSMC");
  CHECK(fallback_reason_name(0x05000000) == "PEERDECL");
  CHECK(fallback_reason_name(0x03030008) == "NOUEID");
  CHECK(fallback_reason_name(0x12345678) == "UNKNOWN");
  CHECK(fallback_reason_text(0x03030002).find("pnet") != std::string_view::npos);
  CHECK(hex32(0x03030002) == "0x03030002");
  CHECK(hex32(0) == "0x00000000");
}

TEST_CASE("diag modes and states") {
  CHECK(smc_mode_from_diag(0) == SmcMode::Smcr);
  CHECK(smc_mode_from_diag(1) == SmcMode::Tcp);
  CHECK(smc_mode_from_diag(2) == SmcMode::Smcd);
  CHECK(smc_mode_from_diag(9) == SmcMode::Unknown);
  CHECK(smc_mode_name(SmcMode::Smcr) == "SMCR");
  CHECK(smc_mode_name(SmcMode::Tcp) == "TCP");
  CHECK(smc_state_name(1) == "ACTIVE");
  CHECK(smc_state_name(10) == "LISTEN");
  CHECK(smc_state_name(20) == "PEERCLOSEWAIT1");
  CHECK(smc_state_name(99) == "UNKNOWN");
  CHECK(smc_link_state_name(3) == "ACTIVE");
}
