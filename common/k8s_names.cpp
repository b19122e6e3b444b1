// Kubernetes' name rules (see k8s_names.hpp).
#include "common/k8s_names.hpp"

namespace erdma::common {
namespace {

constexpr std::string_view kRequestsPrefix = "requests.";      // v1.DefaultResourceRequestsPrefix
constexpr std::string_view kReservedDomain = "kubernetes.io";  // v1.ResourceDefaultNamespacePrefix without '/'
// The quota form "requests.<domain>/<name>" must be a qualified name too (IsExtendedResourceName).
constexpr size_t kMaxExtendedResourceDomainLen = kMaxDns1123SubdomainLen - kRequestsPrefix.size();

bool is_lower_alnum(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_alnum(char c) noexcept { return is_lower_alnum(c) || (c >= 'A' && c <= 'Z'); }
bool is_upper(char c) noexcept { return c >= 'A' && c <= 'Z'; }

// Builds the checks below; `base` is the offset of the piece being read in the whole name.
struct Checker {
  NameRule rule;
  NamePart part;
  size_t base;

  NameCheck fail(NameFault fault, size_t at = 0, char found = '\0', bool inner = false) const noexcept {
    NameCheck c;
    c.rule = rule;
    c.fault = fault;
    c.part = part;
    c.at = base + at;
    c.found = found;
    c.inner = inner;
    return c;
  }
  NameCheck too_long(size_t length, size_t limit) const noexcept {
    NameCheck c = fail(NameFault::TooLong);
    c.length = length;
    c.limit = limit;
    return c;
  }
  NameCheck pass() const noexcept {
    NameCheck c;
    c.rule = rule;
    return c;
  }

  // [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63.
  NameCheck label(std::string_view s) const noexcept {
    if (s.empty()) return fail(NameFault::Empty);
    if (s.size() > kMaxDns1123LabelLen) return too_long(s.size(), kMaxDns1123LabelLen);
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (is_lower_alnum(c)) continue;
      if (c == '.') return fail(NameFault::Dot, i, c);
      if (c != '-') return fail(NameFault::BadChar, i, c);
      if (i == 0) return fail(NameFault::BadStart, i, c);
      if (i + 1 == s.size()) return fail(NameFault::BadEnd, i, c);
    }
    return pass();
  }

  // Labels joined by '.', at most `limit` in all; no limit per label (the apiserver's regex has none).
  NameCheck subdomain(std::string_view s, size_t limit) const noexcept {
    if (s.empty()) return fail(NameFault::Empty);
    if (s.size() > limit) return too_long(s.size(), limit);
    size_t part_start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (is_lower_alnum(c)) continue;
      if (c == '.') {
        if (i == 0) return fail(NameFault::BadStart, i, c);
        if (i == part_start) return fail(NameFault::EmptyPart, i, c);
        if (s[i - 1] == '-') return fail(NameFault::BadEnd, i - 1, '-', true);
        if (i + 1 == s.size()) return fail(NameFault::BadEnd, i, c);
        part_start = i + 1;
        continue;
      }
      if (c != '-') return fail(NameFault::BadChar, i, c);
      if (i == part_start) return fail(NameFault::BadStart, i, c, i > 0);
    }
    if (s.back() == '-') return fail(NameFault::BadEnd, s.size() - 1, '-');
    return pass();
  }

  // The name part of a qualified name: ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], at most 63.
  NameCheck name_part(std::string_view s) const noexcept {
    if (s.empty()) return fail(NameFault::Empty);
    if (s.size() > kMaxQualifiedNameLen) return too_long(s.size(), kMaxQualifiedNameLen);
    for (size_t i = 0; i < s.size(); ++i) {
      const char c = s[i];
      if (is_alnum(c)) continue;
      if (c != '-' && c != '_' && c != '.') return fail(NameFault::BadChar, i, c);
      if (i == 0) return fail(NameFault::BadStart, i, c);
      if (i + 1 == s.size()) return fail(NameFault::BadEnd, i, c);
    }
    return pass();
  }
};

// Reads "<prefix>/<name>" with the prefix a subdomain of at most `prefix_limit`.
NameCheck prefixed(NameRule rule, std::string_view s, size_t slash, size_t prefix_limit) noexcept {
  if (const size_t extra = s.find('/', slash + 1); extra != std::string_view::npos) {
    return Checker{rule, NamePart::Whole, 0}.fail(NameFault::ExtraSlash, extra, '/');
  }
  const std::string_view prefix = s.substr(0, slash);
  if (prefix.empty()) return Checker{rule, NamePart::Prefix, 0}.fail(NameFault::EmptyPrefix);
  if (auto c = Checker{rule, NamePart::Prefix, 0}.subdomain(prefix, prefix_limit); !c) return c;
  return Checker{rule, NamePart::Name, slash + 1}.name_part(s.substr(slash + 1));
}

std::string shown(char c) {
  if (c >= 0x20 && c < 0x7f) return std::string("'") + c + "'";
  static constexpr char kHex[] = "0123456789abcdef";
  const auto u = static_cast<unsigned char>(c);
  return std::string("\\x") + kHex[u >> 4] + kHex[u & 0xf];
}

std::string_view subject(NamePart part) noexcept {
  switch (part) {
    case NamePart::Prefix: return "the prefix before '/'";
    case NamePart::Name: return "the name after '/'";
    case NamePart::Whole: break;
  }
  return "it";
}

// The lower-case alphabet applies to the whole name or to a prefix.
bool lower_case_only(const NameCheck& c) noexcept {
  if (c.part == NamePart::Prefix) return true;
  return c.part == NamePart::Whole && (c.rule == NameRule::Dns1123Label || c.rule == NameRule::Dns1123Subdomain);
}

std::string what_failed(const NameCheck& c) {
  const std::string who(subject(c.part));
  const std::string pos = "character " + std::to_string(c.at + 1);
  switch (c.fault) {
    case NameFault::None: return "";
    case NameFault::Empty: return who + " is empty";
    case NameFault::TooLong:
      return who + " is " + std::to_string(c.length) + " characters long, over the limit of " + std::to_string(c.limit);
    case NameFault::BadChar:
      if (is_upper(c.found) && lower_case_only(c))
        return who + " has the upper-case " + shown(c.found) + " (" + pos + ")";
      return who + " has " + shown(c.found) + " (" + pos + "), which is not allowed";
    case NameFault::BadStart:
      if (c.inner) return who + " has a part starting with " + shown(c.found) + " (" + pos + ", after a '.')";
      return who + " starts with " + shown(c.found);
    case NameFault::BadEnd:
      if (c.inner) return who + " has a part ending with " + shown(c.found) + " (" + pos + ", before a '.')";
      return who + " ends with " + shown(c.found);
    case NameFault::EmptyPart: return who + " has two dots in a row (" + pos + ")";
    case NameFault::Dot: return who + " has a '.' (" + pos + "), which a label cannot have";
    case NameFault::EmptyPrefix: return "the prefix before '/' is empty";
    case NameFault::ExtraSlash: return who + " has a second '/' (" + pos + ")";
    case NameFault::NoPrefix: return "it has no <domain>/ in front";
    case NameFault::ReservedDomain:
      return "its domain is kubernetes.io or ends in it, which Kubernetes keeps for its own resources";
    case NameFault::RequestsPrefix: return "it starts with \"requests.\", which Kubernetes keeps for quota names";
  }
  return "";
}

std::string_view how_to_fix(NameRule rule) noexcept {
  switch (rule) {
    case NameRule::Dns1123Label:
      return "a DNS-1123 label is 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or "
             "digit, such as \"my-name\"";
    case NameRule::Dns1123Subdomain:
      return "a DNS-1123 subdomain is 1 to 253 lower-case letters, digits, '-' and '.', each part between dots "
             "starting and ending with a letter or digit, such as \"example.com\"";
    case NameRule::QualifiedName:
      return "a qualified name is an optional DNS-1123 subdomain and '/', then 1 to 63 letters, digits, '-', '_' and "
             "'.', starting and ending with a letter or digit, such as \"example.com/MyName\"";
    case NameRule::LabelValue:
      return "a label value is empty or 1 to 63 letters, digits, '-', '_' and '.', starting and ending with a letter "
             "or digit";
    case NameRule::ExtendedResourceName:
      return "an extended resource name is <domain>/<name>: a DNS-1123 subdomain of at most 244 characters outside "
             "kubernetes.io, '/', then 1 to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or "
             "digit, such as \"example.com/rdma\"";
  }
  return "";
}

}  // namespace

NameCheck check_name(NameRule rule, std::string_view s) noexcept {
  const Checker whole{rule, NamePart::Whole, 0};
  switch (rule) {
    case NameRule::Dns1123Label: return whole.label(s);
    case NameRule::Dns1123Subdomain: return whole.subdomain(s, kMaxDns1123SubdomainLen);
    case NameRule::LabelValue: return s.empty() ? whole.pass() : whole.name_part(s);
    case NameRule::QualifiedName: {
      const size_t slash = s.find('/');
      if (slash == std::string_view::npos) return whole.name_part(s);
      return prefixed(rule, s, slash, kMaxDns1123SubdomainLen);
    }
    case NameRule::ExtendedResourceName: {
      if (s.empty()) return whole.fail(NameFault::Empty);
      const size_t slash = s.find('/');
      if (slash == std::string_view::npos) return whole.fail(NameFault::NoPrefix);
      // IsNativeResource: any name containing "kubernetes.io/"; with one '/', a domain ending so.
      if (s.substr(0, slash).ends_with(kReservedDomain) && s.find('/', slash + 1) == std::string_view::npos) {
        return whole.fail(NameFault::ReservedDomain);
      }
      if (s.starts_with(kRequestsPrefix)) return whole.fail(NameFault::RequestsPrefix);
      return prefixed(rule, s, slash, kMaxExtendedResourceDomainLen);
    }
  }
  return whole.pass();
}

std::string_view rule_name(NameRule rule) noexcept {
  switch (rule) {
    case NameRule::Dns1123Label: return "a DNS-1123 label";
    case NameRule::Dns1123Subdomain: return "a DNS-1123 subdomain";
    case NameRule::QualifiedName: return "a qualified name";
    case NameRule::LabelValue: return "a label value";
    case NameRule::ExtendedResourceName: return "an extended resource name";
  }
  return "a name";
}

std::string describe(const NameCheck& check, std::string_view role) {
  if (check.ok()) return "";
  std::string out = "is not ";
  if (role.empty()) {
    out += rule_name(check.rule);
  } else {
    out.append(role).append(" (").append(rule_name(check.rule)).append(")");
  }
  out.append(": ").append(what_failed(check)).append("; ").append(how_to_fix(check.rule));
  return out;
}

}  // namespace erdma::common
