// TLS version and cipher suite names (see tls_policy.hpp).
#include "webhook/server/tls_policy.hpp"

#include <algorithm>
#include <array>

#include "common/text.hpp"

namespace erdma::webhook::server {
namespace {

// IANA names from the TLS Cipher Suites registry (RFC 5289 for ECDHE with AES-GCM, RFC 7905 for
// ChaCha20-Poly1305, RFC 8446 for TLS 1.3) beside OpenSSL's names for the same code points.
constexpr std::array<CipherSuite, 9> kSuites = {{
    {"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256", "", false, true},
    {"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256", "", false, false},
    {"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384", "", false, true},
    {"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384", "", false, false},
    {"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305",
     "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305", false, true},
    {"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305",
     "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", false, false},
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256", "", true, false},
    {"TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384", "", true, false},
    {"TLS_CHACHA20_POLY1305_SHA256", "TLS_CHACHA20_POLY1305_SHA256", "", true, false},
}};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

const CipherSuite* find_suite(std::string_view name) {
  for (const auto& s : kSuites) {
    if (common::iequals(name, s.iana) || common::iequals(name, s.openssl) ||
        (!s.alias.empty() && common::iequals(name, s.alias))) {
      return &s;
    }
  }
  return nullptr;
}

Error invalid(std::string message) { return make_error(ErrorCode::InvalidArgument, std::move(message)); }

std::string colon_joined(const std::vector<std::string>& names) { return common::join(names, ":"); }

}  // namespace

std::string_view to_string(TlsVersion v) noexcept { return v == TlsVersion::Tls13 ? "1.3" : "1.2"; }

std::span<const CipherSuite> supported_cipher_suites() noexcept { return kSuites; }

Result<TlsVersion> parse_tls_version(std::string_view text) {
  if (text == "1.2" || text == "VersionTLS12") return TlsVersion::Tls12;
  if (text == "1.3" || text == "VersionTLS13") return TlsVersion::Tls13;
  return invalid("--tls-min-version: expected 1.2 or 1.3 (VersionTLS12 or VersionTLS13 also accepted), got " +
                 common::json_quote(text.substr(0, 64)) + "; TLS 1.0 and 1.1 are never offered");
}

std::string accepted_cipher_suite_names() {
  std::vector<std::string> names;
  for (const auto& s : kSuites) names.emplace_back(s.iana);
  return common::join(names, ", ");
}

Result<CipherSelection> parse_cipher_suites(std::string_view list) {
  CipherSelection out;
  size_t start = 0;
  bool any = false;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string_view name = trim(list.substr(start, comma - start));
    start = comma + 1;
    if (name.empty()) continue;  // "A,,B" and a trailing comma are harmless
    any = true;
    const CipherSuite* s = find_suite(name);
    if (s == nullptr) {
      return invalid("--tls-cipher-suites: " + common::json_quote(name.substr(0, 80)) +
                     " is not a suite this server offers (only ECDHE with AES-GCM or ChaCha20-Poly1305 for "
                     "TLS 1.2, and the TLS 1.3 suites; CBC, static-RSA, 3DES and RC4 suites are refused); "
                     "accepted: " +
                     accepted_cipher_suite_names());
    }
    auto& into = s->tls13 ? out.tls13 : out.tls12;
    std::string openssl(s->openssl);
    if (std::find(into.begin(), into.end(), openssl) == into.end()) into.push_back(std::move(openssl));
  }
  if (!any) return invalid("--tls-cipher-suites: the list names no suite; accepted: " + accepted_cipher_suite_names());
  return out;
}

Status check_tls_policy(const TlsPolicy& policy) {
  if (policy.min_version == TlsVersion::Tls13 && !policy.tls12_ciphers.empty()) {
    return invalid("--tls-cipher-suites names TLS 1.2 suites (" + colon_joined(policy.tls12_ciphers) +
                   ") but --tls-min-version is 1.3, which never uses them: drop them, or set --tls-min-version 1.2");
  }
  if (policy.min_version == TlsVersion::Tls12 && policy.tls12_ciphers.empty() && !policy.tls13_suites.empty()) {
    return invalid("--tls-cipher-suites names only TLS 1.3 suites, so TLS 1.2 clients would find no suite: add "
                   "TLS 1.2 suites (e.g. TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256), or set --tls-min-version 1.3");
  }
  return {};
}

std::string tls12_cipher_list(const TlsPolicy& policy) {
  if (!policy.tls12_ciphers.empty()) return colon_joined(policy.tls12_ciphers);
  std::vector<std::string> all;
  for (const auto& s : kSuites) {
    if (!s.tls13) all.emplace_back(s.openssl);
  }
  return colon_joined(all);
}

std::string tls13_cipher_list(const TlsPolicy& policy) { return colon_joined(policy.tls13_suites); }

bool has_tls12_suite_for_key(const TlsPolicy& policy, bool ecdsa) noexcept {
  if (policy.min_version == TlsVersion::Tls13 || policy.tls12_ciphers.empty()) return true;
  for (const auto& name : policy.tls12_ciphers) {
    for (const auto& s : kSuites) {
      if (!s.tls13 && s.openssl == name && s.ecdsa == ecdsa) return true;
    }
  }
  return false;
}

}  // namespace erdma::webhook::server
