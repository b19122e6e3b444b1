// Names for SMC's numeric codes. Numbers are the kernel's (net/smc/smc_clc.h, net/smc/smc.h,
// net/smc/smc_core.h, include/uapi/linux/smc_diag.h).
#include "agent/core/smc_model.hpp"

#include <array>

namespace erdma::agent {
namespace {

struct Reason {
  uint32_t code;
  std::string_view name;
  std::string_view text;
};

constexpr std::array kReasons{
    Reason{0x01010000, "MEM", "insufficient memory resources"},
    Reason{0x02010000, "TIMEOUT_CL",
           "timeout waiting for the RDMA link to be confirmed (CLC handshake done, no RoCE traffic got through)"},
    Reason{0x02020000, "TIMEOUT_AL", "timeout waiting for a second RDMA link to be added"},
    Reason{0x03000000, "CNFERR", "configuration error"},
    Reason{0x03010000, "PEERNOSMC", "the peer did not offer SMC"},
    Reason{0x03020000, "IPSEC", "IPsec is in use"},
    Reason{0x03030000, "NOSMCDEV", "no usable SMC device (check pnet table and UEID)"},
    Reason{0x03030001, "NOSMCDDEV", "no SMC-D device"},
    Reason{0x03030002, "NOSMCRDEV", "no SMC-R device for the route's interface (missing pnet entry?)"},
    Reason{0x03030003, "NOISM2SUPP", "no SMC-Dv2 support"},
    Reason{0x03030004, "NOV2EXT", "the peer sent no v2 extension"},
    Reason{0x03030005, "NOV2DEXT", "the peer sent no SMC-Dv2 extension"},
    Reason{0x03030006, "NOSEID", "the peer sent no system EID"},
    Reason{0x03030007, "NOSMCD2DEV", "no SMC-Dv2 device"},
    Reason{0x03030008, "NOUEID", "no common UEID with the peer"},
    Reason{0x03030009, "RELEASEERR", "SMC release mismatch"},
    Reason{0x0303000a, "MAXCONNERR", "link group is at its connection limit"},
    Reason{0x0303000b, "MAXLINKERR", "link group is at its link limit"},
    Reason{0x03040000, "MODEUNSUPP", "SMC mode not supported"},
    Reason{0x03050000, "RMBE_EC", "peer has eyecatcher in RMBE"},
    Reason{0x03060000, "OPTUNSUPP", "fastopen sockopt not supported"},
    Reason{0x03070000, "DIFFPREFIX", "peers are not in the same IP subnet (SMC-Rv1)"},
    Reason{0x03080000, "GETVLANERR", "cannot get VLAN id"},
    Reason{0x03090000, "ISMVLANERR", "cannot register VLAN id on ISM device"},
    Reason{0x030a0000, "NOACTLINK", "no active link"},
    Reason{0x030b0000, "NOSRVLINK", "SMC-R link from server not found"},
    Reason{0x030c0000, "VERSMISMAT", "SMC version mismatch"},
    Reason{0x030d0000, "MAX_DMB", "SMC-D DMB limit reached"},
    Reason{0x030e0000, "NOROUTE", "no route to the peer (SMC-Rv2)"},
    Reason{0x030f0000, "NOINDIRECT", "indirect route not supported"},
    Reason{0x04000000, "SYNCERR", "synchronization error"},
    Reason{0x05000000, "PEERDECL", "the peer declined during the handshake"},
    Reason{0x09990000, "INTERR", "internal error"},
    Reason{0x09990001, "ERR_RTOK", "rtoken handling failed"},
    Reason{0x09990002, "ERR_RDYLNK", "ib ready link failed"},
    Reason{0x09990003, "ERR_REGBUF", "buffer registration failed"},
};

const Reason* find_reason(uint32_t code) noexcept {
  for (const auto& r : kReasons) {
    if (r.code == code) return &r;
  }
  return nullptr;
}

}  // namespace

std::string_view fallback_reason_name(uint32_t code) noexcept {
  const Reason* r = find_reason(code);
  return r ? r->name : std::string_view("UNKNOWN");
}

std::string_view fallback_reason_text(uint32_t code) noexcept {
  const Reason* r = find_reason(code);
  return r ? r->text : std::string_view("reason not known to this version");
}

std::string hex32(uint32_t code) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) out += kHex[(code >> shift) & 0xf];
  return out;
}

std::string_view smc_mode_name(SmcMode mode) noexcept {
  switch (mode) {
    case SmcMode::Smcr: return "SMCR";
    case SmcMode::Tcp: return "TCP";
    case SmcMode::Smcd: return "SMCD";
    case SmcMode::Unknown: return "UNKNOWN";
  }
  return "UNKNOWN";
}

SmcMode smc_mode_from_diag(uint8_t diag_mode) noexcept {
  switch (diag_mode) {
    case 0: return SmcMode::Smcr;
    case 1: return SmcMode::Tcp;
    case 2: return SmcMode::Smcd;
    default: return SmcMode::Unknown;
  }
}

std::string_view smc_state_name(uint8_t state) noexcept {
  switch (state) {
    case 1: return "ACTIVE";
    case 2: return "INIT";
    case 7: return "CLOSED";
    case 10: return "LISTEN";
    case 20: return "PEERCLOSEWAIT1";
    case 21: return "PEERCLOSEWAIT2";
    case 22: return "APPCLOSEWAIT1";
    case 23: return "APPCLOSEWAIT2";
    case 24: return "APPFINCLOSEWAIT";
    case 25: return "PEERFINCLOSEWAIT";
    case 26: return "PEERABORTWAIT";
    case 27: return "PROCESSABORT";
    default: return "UNKNOWN";
  }
}

std::string_view smc_link_state_name(uint32_t state) noexcept {
  switch (state) {
    case 0: return "UNUSED";
    case 1: return "INACTIVE";
    case 2: return "ACTIVATING";
    case 3: return "ACTIVE";
    default: return "UNKNOWN";
  }
}

}  // namespace erdma::agent
