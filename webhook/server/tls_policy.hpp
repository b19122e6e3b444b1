// What `serve` is told about TLS beyond its own certificate: the lowest protocol version and the
// cipher suites, given by their IANA names (as kube-apiserver's and Go's flags spell them) and
// mapped here to OpenSSL's. Pure: a table and string checks, no OpenSSL.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace erdma::webhook::server {

enum class TlsVersion { Tls12, Tls13 };

// "1.2" or "1.3" (what --tls-min-version prints).
[[nodiscard]] std::string_view to_string(TlsVersion v) noexcept;

// One suite the server can offer. TLS 1.3 suites have the same name in IANA's registry and
// OpenSSL; TLS 1.2 ones differ (TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 is
// ECDHE-ECDSA-AES128-GCM-SHA256). `alias` is an older Go spelling of the same suite, or empty.
struct CipherSuite {
  std::string_view iana;
  std::string_view openssl;
  std::string_view alias;
  bool tls13;
  bool ecdsa;  // TLS 1.2: needs an ECDSA serving key (else RSA); TLS 1.3: any key
};

// Every suite the server can offer, TLS 1.2 first, in the default order: ECDHE with AES-GCM or
// ChaCha20-Poly1305 for TLS 1.2 (AEAD with forward secrecy only), then the three TLS 1.3 suites.
[[nodiscard]] std::span<const CipherSuite> supported_cipher_suites() noexcept;

struct TlsPolicy {
  TlsVersion min_version = TlsVersion::Tls12;
  std::vector<std::string> tls12_ciphers;  // OpenSSL names in the order given; empty: every TLS 1.2 suite
  std::vector<std::string> tls13_suites;   // OpenSSL names; empty: OpenSSL's defaults (all three, AEAD)
};

// Parses --tls-min-version: "1.2" or "1.3"; kube-apiserver's spellings VersionTLS12 and
// VersionTLS13 are accepted too. InvalidArgument otherwise, naming the accepted values.
[[nodiscard]] Result<TlsVersion> parse_tls_version(std::string_view text);

// Parses --tls-cipher-suites: comma-separated IANA names (blanks around a name are ignored,
// letter case too; OpenSSL's own names for the same suites are accepted as well; repeats count
// once). Fills `tls12_ciphers` and `tls13_suites` of the result, in the order given. An empty
// list, or a name that is unknown or not offered (CBC, static RSA, 3DES, RC4, ...), is
// InvalidArgument listing the accepted names.
struct CipherSelection {
  std::vector<std::string> tls12;
  std::vector<std::string> tls13;
};
[[nodiscard]] Result<CipherSelection> parse_cipher_suites(std::string_view list);

// The checks that need both settings: TLS 1.2 suites are useless with a minimum of 1.3, and a
// list of TLS 1.3 suites only would leave TLS 1.2 clients nothing while 1.2 is allowed. Errors
// are InvalidArgument and say which setting to change.
[[nodiscard]] Status check_tls_policy(const TlsPolicy& policy);

// OpenSSL's cipher-list string for TLS 1.2 ("A:B:..."), the defaults when none were given.
[[nodiscard]] std::string tls12_cipher_list(const TlsPolicy& policy);
// OpenSSL's TLS 1.3 ciphersuites string, empty for OpenSSL's defaults.
[[nodiscard]] std::string tls13_cipher_list(const TlsPolicy& policy);

// Whether TLS 1.2 has a suite usable with the serving key (`ecdsa`: ECDSA key, else RSA). True when
// the minimum is 1.3 (TLS 1.3 suites work with any key).
[[nodiscard]] bool has_tls12_suite_for_key(const TlsPolicy& policy, bool ecdsa) noexcept;

// The accepted IANA names, comma-separated, for messages and --help.
[[nodiscard]] std::string accepted_cipher_suite_names();

}  // namespace erdma::webhook::server
