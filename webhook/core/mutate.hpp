// The webhook's decision: given a Pod, what to inject, as RFC 6902 JSON Patch operations against
// the Pod exactly as received. Pure: no I/O, no clock, no logging; same inputs, same output.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "common/result.hpp"
#include "webhook/core/config.hpp"
#include "webhook/core/pod_view.hpp"
#include "webhook/core/warnings.hpp"

namespace erdma::webhook {

struct NamespaceInfo {
  std::string_view name;  // the request's namespace; empty = take metadata.namespace
};

enum class Decision {
  Mutated,    // patch operations were produced
  Unchanged,  // the pod is a target but already has everything (e.g. a reinvocation)
  Skipped,    // not a target: opted out, excluded, mirror pod, or asks for nothing we provide
};

[[nodiscard]] std::string_view to_string(Decision d) noexcept;

struct PatchOp {
  enum class Kind { Add, Replace };
  Kind kind = Kind::Add;
  std::string path;   // JSON Pointer, keys escaped
  std::string value;  // the value as JSON text
};

struct Mutation {
  Decision decision = Decision::Skipped;
  std::string reason;  // why skipped, or a summary; for logs
  PodRef pod;
  // Empty unless decision == Mutated, except that a skipped pod with warnings gets the warnings
  // annotation (kWarningsAnnotation) so a person can see why nothing was injected.
  std::vector<PatchOp> ops;
  std::vector<std::string> warnings;  // for AdmissionResponse.warnings, capped at kMaxWarnings
  WarningCounts warning_counts{};     // every warning produced, by kind
  std::vector<std::string> injected;  // marker tokens now on the pod (erdma-env, smcr-preload, ...)
};

// Computes the mutation of `pod` (a Pod object) for a CREATE in namespace `ns`.
// Errors: InvalidArgument when a field the rules read has the wrong type, or when the injection
// would collide with what the pod already has (a volume of the same name with another source, a
// different volume mounted at our mountPath); the message names the pod and the field.
[[nodiscard]] Result<Mutation> mutate(simdjson::dom::element pod, const NamespaceInfo& ns, const Config& cfg);

// Appends the operations as a JSON Patch document (a JSON array) to `out`.
void append_patch_json(std::string& out, const std::vector<PatchOp>& ops);

// Splits an LD_PRELOAD value the way ld.so does (on ':' and blanks), dropping empty elements.
[[nodiscard]] std::vector<std::string_view> split_ld_preload(std::string_view value);

// The LD_PRELOAD value after adding `library_path`; returns `value` unchanged when an element
// equals `library_path` already. Appended after a ':' so the user's libraries keep precedence.
[[nodiscard]] std::string merge_ld_preload(std::string_view value, std::string_view library_path);

}  // namespace erdma::webhook
