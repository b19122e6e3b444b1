// Test-only certificate factory: keys and X.509 certificates made in memory with OpenSSL, so the
// TLS tests need no files from the repository and no openssl command.
#pragma once

#include <cstdint>
#include <string>

namespace erdma::webhook::server::testing {

enum class KeyKind { EcdsaP256, Rsa2048 };

struct PemPair {
  std::string cert;  // PEM certificate (self-signed, or signed by the issuer given)
  std::string key;   // PEM private key (PKCS#8)
};

struct CertSpec {
  KeyKind kind = KeyKind::EcdsaP256;
  std::string common_name = "erdma-webhook.erdma-system.svc";
  int64_t not_before_offset = -60;       // seconds from now
  int64_t not_after_offset = 24 * 3600;  // seconds from now
  bool ca = false;
  std::string extended_key_usage;  // e.g. "clientAuth", "serverAuth"; empty: none
  std::string subject_alt_names;   // e.g. "IP:127.0.0.1,DNS:localhost"; empty: DNS:<common_name>
};

// A new key and a certificate for it; signed by `issuer` when given, else self-signed.
[[nodiscard]] PemPair make_cert(const CertSpec& spec, const PemPair* issuer = nullptr);

}  // namespace erdma::webhook::server::testing
