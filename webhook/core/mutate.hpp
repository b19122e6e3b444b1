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

// What a warning is about. The names (to_string) are label values of the webhook's
// erdma_webhook_warnings_total{kind} series: keep them stable.
enum class WarningKind : uint8_t {
  InjectAnnotationValue,  // inject_annotation_value: erdma-inject is neither "true" nor "false"
  SmcrAnnotationValue,    // smcr_annotation_value: erdma-smcr is set but not exactly "true"/"false"
  EnvFromPrecedence,      // envfrom_precedence: injected env shadows names envFrom may define
  LdPreloadValueFrom,     // ld_preload_value_from: LD_PRELOAD from valueFrom, so no library
  LdPreloadOtherCopy,     // ld_preload_other_copy: another copy of the library is preloaded
  ResourceAdded,          // resource_added: aliyun/erdma: 1 added for SMC-R
  ResourceZero,           // resource_zero: the container that would get it asks for 0
  AddResourceOff,         // add_resource_off: SMC-R pod without the resource, adding it is off
  WindowsPod,             // windows_pod: skipped, eRDMA and SMC-R are Linux-only
  RequestsWithoutLimits,  // requests_without_limits: the apiserver will refuse the pod
};
inline constexpr size_t kWarningKindCount = 10;

[[nodiscard]] std::string_view to_string(WarningKind k) noexcept;

struct Mutation {
  Decision decision = Decision::Skipped;
  std::string reason;                  // why skipped, or a summary; for logs
  std::string pod;                     // "namespace/name" of the pod, for messages
  // Empty unless decision == Mutated, except that a skipped pod with warnings gets the warnings
  // annotation (kWarningsAnnotation) so a person can see why nothing was injected.
  std::vector<PatchOp> ops;
  std::vector<std::string> warnings;   // for AdmissionResponse.warnings, capped at kMaxWarnings
  std::array<uint32_t, kWarningKindCount> warning_counts{};  // every warning produced, by kind
  std::vector<std::string> injected;   // marker tokens now on the pod (erdma-env, smcr-preload, ...)
};

// At most this many warnings are returned; the last one then says how many were left out.
inline constexpr size_t kMaxWarnings = 16;

// The warnings annotation holds at most kMaxWarnings lines of at most kMaxWarningLineBytes bytes
// each (longer ones are cut, control characters become blanks) and kMaxWarningsAnnotationBytes
// in all. Lines already on the pod come first and are kept (a reinvocation does not repeat the
// warnings of the first pass, e.g. "added aliyun/erdma"); new lines are appended. When lines had
// to be left out, the last line is kWarningsLeftOut.
inline constexpr size_t kMaxWarningLineBytes = 256;
inline constexpr size_t kMaxWarningsAnnotationBytes = 2048;
inline constexpr std::string_view kWarningsLeftOut = "(more warnings were left out; the erdma-webhook log lists them)";

// The annotation value for `warnings` on a pod whose annotation is `existing` (see above); empty
// when there is nothing to say. `more`: further warnings were made but their text not kept, so
// the value ends with kWarningsLeftOut.
[[nodiscard]] std::string warnings_annotation_value(std::optional<std::string_view> existing,
                                                    const std::vector<std::string>& warnings, bool more = false);

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
