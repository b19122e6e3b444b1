// The DRA driver's node-local record of prepared claims, so that an agent restart loses no
// prepared claim and unprepares nothing still in use; and the idempotent prepare / unprepare
// decisions over it. Pure: the shell reads and writes the file (atomically) and the CDI specs.
//
// Order the shell keeps, so that a crash at any point leaves nothing wrong behind:
//   prepare:   write the CDI spec, then the checkpoint, then answer the kubelet. A crash before
//              the checkpoint leaves a spec no claim owns: the kubelet retries (it got no
//              answer) and the same spec is written again, or stale_spec_files removes it.
//   unprepare: remove the CDI spec, then the claim from the checkpoint, then answer. A crash in
//              between keeps the claim recorded: the kubelet's retry finds it and finishes.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/contract.hpp"
#include "common/result.hpp"

namespace erdma::agent {

inline constexpr int64_t kCheckpointVersion = 1;
inline constexpr std::string_view kCheckpointKind = "erdma-agent/dra-checkpoint";
// A node holds at most a few hundred claims; these bound what a corrupt file can make us hold.
inline constexpr size_t kMaxCheckpointBytes = 16u << 20;
inline constexpr size_t kMaxCheckpointClaims = 65536;

// One allocated device of a claim, as the NodePrepareResources answer carries it.
struct PreparedDevice {
  std::vector<std::string> requests;  // the claim's request names it was allocated for, sorted
  std::string pool;                   // ResourceSlice pool
  std::string device;                 // device name in the slice (dra_device_name)
  std::string card;                   // the RDMA card behind it
  std::vector<std::string> cdi_ids;   // CDI device names the kubelet hands to the runtime
  std::string share_id;               // the allocation's shareID on a shared device; "" = none

  friend bool operator==(const PreparedDevice&, const PreparedDevice&) = default;
};

struct PreparedClaim {
  std::string uid;
  std::string ns;
  std::string name;
  bool smcr = false;
  std::string cdi_spec_file;            // file name in the CDI spec directory
  std::vector<PreparedDevice> devices;  // sorted by pool, device, share

  friend bool operator==(const PreparedClaim&, const PreparedClaim&) = default;
};

struct Checkpoint {
  std::map<std::string, PreparedClaim> claims;  // by claim UID

  friend bool operator==(const Checkpoint&, const Checkpoint&) = default;
};

// CRC-32 (IEEE 802.3, as zlib computes it).
[[nodiscard]] uint32_t crc32(std::string_view bytes) noexcept;

// The file's text: {"kind", "version", "claims": [...], "checksum": "crc32:xxxxxxxx"}, the
// checksum taken over the compact JSON of the other three members (keys sorted). Same checkpoint,
// same bytes.
[[nodiscard]] std::string encode_checkpoint(const Checkpoint& checkpoint);

// Reads encode_checkpoint's text back, refusing anything else: not JSON, another kind, a version
// this agent does not know (older or newer), a checksum that does not match, unknown or missing
// members, wrong types, invalid names, duplicate claims or devices, sizes over the limits.
// Errors: InvalidArgument, the message saying what is wrong and what an operator can do (a
// corrupt checkpoint is never half-read: the shell must not unprepare claims it cannot see).
[[nodiscard]] Result<Checkpoint> decode_checkpoint(std::string_view text);

// Canonical order: requests sorted, devices by pool then device.
[[nodiscard]] PreparedClaim normalized(PreparedClaim claim);

enum class PrepareVerdict {
  Prepare,          // new: write the spec, record the claim, answer with its devices
  AlreadyPrepared,  // recorded with the same devices: answer with the recorded ones, write nothing
};

struct PrepareDecision {
  PrepareVerdict verdict = PrepareVerdict::Prepare;
  PreparedClaim claim;  // what to answer with (and record, for Prepare)
};

// Whether to prepare `wanted` (the claim as its allocation and build_cdi_spec say now). The same
// UID recorded with the same devices (pool, device, card, requests) and SMC-R setting is
// AlreadyPrepared, answered with the recorded claim (its CDI names are the ones on disk).
// Errors: FailedPrecondition when the UID is recorded with other devices (an allocation never
// changes, so the record or the request is wrong), naming both sets; InvalidArgument for a
// claim without UID or devices.
[[nodiscard]] Result<PrepareDecision> decide_prepare(const Checkpoint& checkpoint, const PreparedClaim& wanted);

struct UnprepareDecision {
  bool known = false;   // false: nothing recorded under the UID, which is success (idempotent)
  PreparedClaim claim;  // when known: the spec file to remove
};
[[nodiscard]] UnprepareDecision decide_unprepare(const Checkpoint& checkpoint, std::string_view uid);

// The checkpoint with `claim` recorded (normalized), or with the UID removed.
[[nodiscard]] Checkpoint with_claim(Checkpoint checkpoint, PreparedClaim claim);
[[nodiscard]] Checkpoint without_claim(Checkpoint checkpoint, std::string_view uid);

// The recorded claims holding a device on one of `cards`: claim UID -> those of its cards, sorted.
// For telling the pods of a claim that a card they hold went down or away.
[[nodiscard]] std::map<std::string, std::vector<std::string>> claims_on_cards(const Checkpoint& checkpoint,
                                                                              const std::set<std::string>& cards);

// Of the file names in the CDI spec directory, the claim specs of this driver (cdi_spec.hpp
// is_claim_spec_file) that no recorded claim owns: left by a crash, to remove. Sorted.
[[nodiscard]] std::vector<std::string> stale_spec_files(const Checkpoint& checkpoint,
                                                        const std::vector<std::string>& files_in_dir,
                                                        std::string_view driver = contract::kDraDriverName);

}  // namespace erdma::agent
