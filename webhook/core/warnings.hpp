// The webhook's warnings: their kinds (metric labels), the list a review collects, and the
// warnings annotation (kWarningsAnnotation) a person reads on the pod. Pure.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace erdma::webhook {

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
  SmcrNotAllowed,         // smcr_not_allowed: SMC-R asked for in a namespace smcr.allowedNamespaces leaves out
  Count                   // not a kind: the number of kinds
};
inline constexpr size_t kWarningKindCount = static_cast<size_t>(WarningKind::Count);
using WarningCounts = std::array<uint32_t, kWarningKindCount>;

[[nodiscard]] std::string_view to_string(WarningKind k) noexcept;

// At most this many warnings go into an AdmissionResponse; the last one then says how many were
// left out.
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

// The warnings one review produces. Every warning is counted by kind; the text of the first
// 2 x kMaxWarnings is kept, more than the answer and the annotation can carry, so a pod with
// thousands of containers costs no more memory than one with 32.
class Warnings {
 public:
  void add(WarningKind kind, std::string text);

  [[nodiscard]] const WarningCounts& counts() const noexcept { return counts_; }
  // The annotation value (see warnings_annotation_value) for a pod whose annotation is `existing`.
  [[nodiscard]] std::string annotation(std::optional<std::string_view> existing) const;
  // For AdmissionResponse.warnings: at most kMaxWarnings, the last saying how many were left out.
  [[nodiscard]] std::vector<std::string> take_for_response();

 private:
  static constexpr size_t kKept = 2 * kMaxWarnings;
  std::vector<std::string> texts_;
  size_t total_ = 0;
  WarningCounts counts_{};
};

}  // namespace erdma::webhook
