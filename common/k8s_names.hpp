// Kubernetes' name rules, as the apiserver applies them (k8s.io/apimachinery
// pkg/util/validation and the core helpers' IsExtendedResourceName). The one place the agent and
// the webhook check a name: a config value, a pod's container name, a node name, a DRA claim.
// Pure: check_name() allocates nothing; describe() builds the message for a failed check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace erdma::common {

enum class NameRule : uint8_t {
  // IsDNS1123Label: 1-63 of [a-z0-9-], alphanumeric at both ends. Namespace, container and volume
  // names, DRA device and request names.
  Dns1123Label,
  // IsDNS1123Subdomain: at most 253 characters, dot-separated labels (no 63-character limit per
  // label). Node, pod and ResourceClaim names, DRA driver names.
  Dns1123Subdomain,
  // IsQualifiedName (label keys): an optional DNS-1123 subdomain prefix and '/', then a name of
  // 1-63 of [A-Za-z0-9-_.], alphanumeric at both ends.
  QualifiedName,
  // IsValidLabelValue: empty, or what the name part of a qualified name may be.
  LabelValue,
  // IsExtendedResourceName: <domain>/<name>, a qualified name with a prefix outside
  // kubernetes.io, not starting with "requests.", and still a qualified name with "requests."
  // in front (the quota form), so the domain is at most 244 characters.
  ExtendedResourceName,
};

inline constexpr size_t kMaxDns1123LabelLen = 63;
inline constexpr size_t kMaxDns1123SubdomainLen = 253;
inline constexpr size_t kMaxQualifiedNameLen = 63;  // the part after '/'; label values too

// What is wrong with a name; None when nothing is.
enum class NameFault : uint8_t {
  None,
  Empty,           // "" (allowed only for a LabelValue)
  TooLong,         // longer than `limit`
  BadChar,         // `found` at `at` is not in the rule's alphabet
  BadStart,        // `found` at `at` begins the name or one of its dot-separated parts
  BadEnd,          // `found` at `at` ends the name or one of its dot-separated parts
  EmptyPart,       // two dots in a row at `at` (a subdomain)
  Dot,             // a '.' at `at` in a DNS-1123 label
  EmptyPrefix,     // "/name"
  ExtraSlash,      // a second '/' at `at`
  NoPrefix,        // an extended resource name without "<domain>/"
  ReservedDomain,  // an extended resource name in kubernetes.io
  RequestsPrefix,  // an extended resource name starting with "requests."
};

// For QualifiedName and ExtendedResourceName: the side of the '/' the fault is on.
enum class NamePart : uint8_t { Whole, Prefix, Name };

struct NameCheck {
  NameRule rule = NameRule::Dns1123Label;
  NameFault fault = NameFault::None;
  NamePart part = NamePart::Whole;
  size_t at = 0;       // byte offset of the fault in the checked string
  size_t length = 0;   // TooLong: the length of the part that is too long
  size_t limit = 0;    // TooLong: that part's maximum
  char found = '\0';   // BadChar, BadStart, BadEnd: the character
  bool inner = false;  // BadStart, BadEnd: at the edge of a part between dots, not of the whole

  [[nodiscard]] bool ok() const noexcept { return fault == NameFault::None; }
  explicit operator bool() const noexcept { return ok(); }
};

// The first fault of `name` under `rule`, reading left to right after the length; ok() when none.
[[nodiscard]] NameCheck check_name(NameRule rule, std::string_view name) noexcept;

[[nodiscard]] inline bool is_dns1123_label(std::string_view s) noexcept {
  return check_name(NameRule::Dns1123Label, s).ok();
}
[[nodiscard]] inline bool is_dns1123_subdomain(std::string_view s) noexcept {
  return check_name(NameRule::Dns1123Subdomain, s).ok();
}
[[nodiscard]] inline bool is_qualified_name(std::string_view s) noexcept {
  return check_name(NameRule::QualifiedName, s).ok();
}
[[nodiscard]] inline bool is_label_value(std::string_view s) noexcept {
  return check_name(NameRule::LabelValue, s).ok();
}
[[nodiscard]] inline bool is_extended_resource_name(std::string_view s) noexcept {
  return check_name(NameRule::ExtendedResourceName, s).ok();
}

// "a DNS-1123 label", "a DNS-1123 subdomain", ...: the rule's name in a sentence.
[[nodiscard]] std::string_view rule_name(NameRule rule) noexcept;

// Why a failed check failed and how to write a valid name, to follow the quoted name:
//   is not a DNS-1123 label: character 1 ('T') is upper case; a DNS-1123 label is 1 to 63 ...
// With `role` ("a namespace name"), the first words say what the name is for:
//   is not a namespace name (a DNS-1123 label): ...
// The name itself is not repeated (callers quote it, bounded, as they quote untrusted values);
// a character outside printable ASCII is shown as \xNN. "" for a check that passed.
[[nodiscard]] std::string describe(const NameCheck& check, std::string_view role = {});

}  // namespace erdma::common
