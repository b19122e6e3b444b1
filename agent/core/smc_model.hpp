// What the kernel reports about SMC, as plain values: system info, SMC-R link groups and links,
// statistics, fallback reasons (SMC_GEN_NETLINK) and sockets (sock_diag for AF_SMC). Decoders in
// agent/sys fill these; CLI, metrics and tests read them. Names for the kernel's numeric codes live
// here too, so every consumer prints the same words.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace erdma::agent {

struct SmcSystemInfo {
  uint8_t version = 0;  // SMC protocol version the kernel speaks (2 on v2-capable kernels)
  uint8_t release = 0;
  bool ism_v2 = false;          // SMC-Dv2 capable
  std::optional<bool> smcr_v2;  // absent on kernels that do not report it
  std::string local_host;
  std::string seid;
};

struct SmcrLink {
  uint8_t id = 0;
  uint32_t state = 0;  // enum smc_link_state
  uint32_t conn_count = 0;
  std::string ib_device;
  uint8_t ib_port = 0;
  uint32_t netdev_ifindex = 0;
  std::string gid;
  std::string peer_gid;
};

struct SmcrLinkGroup {
  uint32_t id = 0;
  uint32_t conns = 0;
  uint8_t role = 0;  // 0 client, 1 server
  uint8_t type = 0;  // enum smc_lgr_type
  uint8_t vlan_id = 0;
  std::string pnet_id;
  std::vector<SmcrLink> links;  // filled by a link dump
};

// Counters for one technology (SMC-R or SMC-D).
struct SmcTechStats {
  uint64_t client_v1_success = 0;
  uint64_t client_v2_success = 0;
  uint64_t server_v1_success = 0;
  uint64_t server_v2_success = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_bytes = 0;
  uint64_t rx_calls = 0;
  uint64_t tx_calls = 0;
};

struct SmcStats {
  SmcTechStats smcr;
  SmcTechStats smcd;
  uint64_t client_handshake_errors = 0;
  uint64_t server_handshake_errors = 0;
};

struct FallbackReasonCount {
  bool server = false;  // counted on the listening side (else on the connecting side)
  uint32_t code = 0;
  uint32_t count = 0;  // the kernel keeps a 16-bit counter per reason
};

struct FallbackStats {
  uint64_t server_total = 0;
  uint64_t client_total = 0;
  std::vector<FallbackReasonCount> reasons;
};

enum class SmcMode { Smcr, Tcp, Smcd, Unknown };

// One SMC socket as sock_diag reports it. Addresses are those of the internal TCP (CLC) socket.
struct SmcSocket {
  uint8_t family = 0;  // AF_SMC, or AF_INET/AF_INET6 for IPPROTO_SMC sockets
  uint8_t state = 0;   // SMC's own state numbers (smc_state_name)
  SmcMode mode = SmcMode::Unknown;
  uint8_t raw_mode = 0;
  std::string local;  // "10.0.0.1:5000" or "[fe80::1]:5000"
  std::string peer;
  uint32_t uid = 0;
  uint64_t inode = 0;
  std::optional<uint32_t> fallback_reason;  // mode Tcp: why
  std::optional<uint32_t> peer_diagnosis;   // mode Tcp: what the peer said
  std::string ib_device;                    // mode Smcr: first link's device
  uint8_t ib_port = 0;
  std::string gid;
  std::string peer_gid;
  std::optional<uint8_t> role;  // mode Smcr: 0 client, 1 server
};

// Fallback/decline reason names (net/smc/smc_clc.h SMC_CLC_DECL_*), e.g. 0x03030002 -> "NOSMCRDEV".
// Unknown codes give "UNKNOWN".
[[nodiscard]] std::string_view fallback_reason_name(uint32_t code) noexcept;
// A short explanation for a reason, for humans ("no SMC-R device for the route's interface").
[[nodiscard]] std::string_view fallback_reason_text(uint32_t code) noexcept;
// "0x03030002"
[[nodiscard]] std::string hex32(uint32_t code);

[[nodiscard]] std::string_view smc_mode_name(SmcMode mode) noexcept;  // SMCR, TCP, SMCD, UNKNOWN
[[nodiscard]] SmcMode smc_mode_from_diag(uint8_t diag_mode) noexcept;
// SMC socket states (net/smc/smc.h enum smc_state): 1 ACTIVE, 2 INIT, 7 CLOSED, 10 LISTEN, ...
[[nodiscard]] std::string_view smc_state_name(uint8_t state) noexcept;
// SMC-R link states (enum smc_link_state): UNUSED, INACTIVE, ACTIVATING, ACTIVE.
[[nodiscard]] std::string_view smc_link_state_name(uint32_t state) noexcept;

}  // namespace erdma::agent
