// The TLS side of the admission server: loading and checking a certificate/key pair, and building
// the server ssl::context from it (TLS 1.2 and 1.3 only, ECDHE suites, server cipher preference).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/result.hpp"

namespace boost::asio::ssl {
class context;
}

namespace erdma::webhook::server {

using SslContext = boost::asio::ssl::context;

// What a loaded certificate says about itself, for logs and metrics.
struct CertInfo {
  std::string subject;             // of the leaf, one line
  std::string key_type;            // "ECDSA P-256", "RSA 3072", ...
  std::string sha256;              // leaf fingerprint, lower-case hex without colons
  int64_t not_before = 0;          // seconds since the epoch
  int64_t not_after = 0;
  size_t chain_length = 0;         // certificates in the file, leaf included
};

struct TlsCredentials {
  CertInfo info;
  std::shared_ptr<SslContext> context;  // ready for new connections; immutable once built
};

// Seconds since the epoch, from the system clock: the `now` certificate checks take.
[[nodiscard]] int64_t unix_now();

// `t` (seconds since the epoch) as an RFC 3339 UTC timestamp, e.g. 2026-12-02T17:58:58Z.
[[nodiscard]] std::string format_utc(int64_t t);

// Reads `cert_path` (PEM: the leaf first, then any intermediates) and `key_path` (PEM private key,
// unencrypted), checks them and builds a server context. `now` (seconds since the epoch) decides
// expiry. Errors name the file and the problem:
//   NotFound / PermissionDenied   a file cannot be read
//   InvalidArgument               not PEM, no certificate, no key, key does not match the
//                                 certificate, certificate expired (or not valid yet)
// Thread-safe; does file I/O, so call it off the I/O threads.
[[nodiscard]] Result<TlsCredentials> load_tls_credentials(const std::string& cert_path, const std::string& key_path,
                                                          int64_t now);

// The same from PEM text already in memory (`cert_name` / `key_name` name them in messages).
[[nodiscard]] Result<TlsCredentials> make_tls_credentials(const std::string& cert_pem, const std::string& key_pem,
                                                          int64_t now, const std::string& cert_name = "certificate",
                                                          const std::string& key_name = "key");

// The TLS 1.2 cipher list the server offers (TLS 1.3 uses OpenSSL's defaults, all AEAD).
inline constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

}  // namespace erdma::webhook::server
