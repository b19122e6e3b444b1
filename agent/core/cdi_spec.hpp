// The CDI (Container Device Interface) spec the DRA driver writes for one prepared claim, and the
// CDI device names its NodePrepareResources answer carries. Pure: the shell writes the file.
//
// One spec file per claim, kind "<driver>/claim", one CDI device per allocated card named
// "<claim UID>-<card>" (UIDs are unique, so names never collide across claims or spec files).
// What a container gets when it references any device of the claim:
//   RDMA claims:  per card its /dev/infiniband/uverbsN; once (spec-wide) rdma_cm and the env the
//                 device plugin's Allocate gives for the same cards (ERDMA_DEVICES, NCCL_IB_HCA,
//                 NCCL_IB_GID_INDEX, NCCL_SOCKET_IFNAME: plugin_model.hpp allocate_container).
//   SMC-R claims: no uverbs, no rdma_cm, no NCCL env (SMC-R runs in the kernel; issue #31 item 3):
//                 the preload library directory, read-only, and LD_PRELOAD naming the library;
//                 ERDMA_DEVICES names the cards.
// The claim-wide env names every card of the claim this driver prepared, also in a container that
// references only one request of a claim with several.
//
// Spec fields follow tags.cncf.io/container-device-interface specs-go v1.1.1 config.go
// (cdiVersion, kind, devices[].name, containerEdits.{env,deviceNodes,mounts}).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/core/plugin_model.hpp"
#include "agent/core/rdma_device.hpp"
#include "common/contract.hpp"
#include "common/result.hpp"

namespace erdma::agent {

// 0.5.0 is the newest version every containerd with CDI reads (docs/dra-runtime.md); the spec uses
// nothing newer: no annotations (0.6.0), no '.' in the class (0.6.0), no additionalGids (0.7.0).
// Device names that start with a digit, as UIDs may, need 0.5.0 (specs-go version.go requiresV050).
inline constexpr std::string_view kCdiVersion = "0.5.0";
inline constexpr std::string_view kCdiClass = "claim";
// Where generated specs go: containerd's and CRI-O's default dynamic spec directory, emptied at
// reboot as the claims' preparation is (docs/dra-runtime.md).
inline constexpr std::string_view kCdiSpecDir = "/var/run/cdi";
inline constexpr std::string_view kLdPreloadEnv = "LD_PRELOAD";

struct CdiClaim {
  std::string uid;  // metadata.uid of the ResourceClaim
  std::string ns;   // namespace and name, for messages
  std::string name;
  std::vector<std::string> cards;  // the cards of this driver allocated to the claim (any order)
  bool smcr = false;               // the claim's config asks for SMC-R
};

struct CdiSpec {
  std::string file_name;  // inside kCdiSpecDir; deterministic per driver and claim UID
  nlohmann::json spec;
  std::vector<std::string> cards;              // distinct, sorted
  std::map<std::string, std::string> cdi_ids;  // card -> "<driver>/claim=<uid>-<card>"
  std::vector<std::string> notes;              // e.g. a card allocated while unhealthy
};

// "<driver>-claim_<uid>.json", the CDI library's transient spec naming (pkg/cdi spec.go
// GenerateTransientSpecName: vendor-class_id).
[[nodiscard]] std::string cdi_spec_file_name(std::string_view driver, std::string_view claim_uid);
// "<driver>/claim=<uid>-<card>".
[[nodiscard]] std::string cdi_device_id(std::string_view driver, std::string_view claim_uid, std::string_view card);
// True for the UIDs the agent accepts: 1..64 of [A-Za-z0-9-], starting and ending with a letter
// or digit (Kubernetes gives RFC 4122 UUIDs). Keeps file and CDI names safe.
[[nodiscard]] bool is_claim_uid(std::string_view uid) noexcept;

// The spec for one claim. `devices` is the node's current scan, `options` the agent's Allocate
// settings (ncclEnv, ncclSocketIfname, rdma_cm presence, the preload directory); all_devices is
// ignored: a claim gets the cards it was allocated.
// Errors: InvalidArgument for a bad UID, no cards, or a card name CDI cannot carry; NotFound for a
// card not on the node; FailedPrecondition for an RDMA claim's card without uverbs, or an SMC-R
// claim when the agent installs no preload library. Messages name the claim.
[[nodiscard]] Result<CdiSpec> build_cdi_spec(const CdiClaim& claim, const std::vector<RdmaDevice>& devices,
                                             const AllocateOptions& options,
                                             std::string_view driver = contract::kDraDriverName);

// True for file names build_cdi_spec gives for this driver ("<driver>-claim_<uid>.json"); the
// shell uses it to find specs left behind (see dra_checkpoint.hpp stale_spec_files).
[[nodiscard]] bool is_claim_spec_file(std::string_view file_name, std::string_view driver = contract::kDraDriverName);

}  // namespace erdma::agent
