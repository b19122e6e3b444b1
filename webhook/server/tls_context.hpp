// The TLS side of the admission server: loading and checking a certificate/key pair (and the CAs
// of client certificates, when asked for), and building the server ssl::context from them (TLS 1.2
// and 1.3 only, ECDHE AEAD suites, the client's suite order).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "webhook/server/tls_policy.hpp"

namespace boost::asio::ssl {
class context;
}

namespace erdma::webhook::server {

using SslContext = boost::asio::ssl::context;

// What a loaded certificate says about itself, for logs and metrics.
struct CertInfo {
  std::string subject;     // of the leaf, one line
  std::string key_type;    // "ECDSA P-256", "RSA 3072", ...
  std::string sha256;      // leaf fingerprint, lower-case hex without colons
  int64_t not_before = 0;  // seconds since the epoch
  int64_t not_after = 0;
  size_t chain_length = 0;  // certificates in the file, leaf included
  // Subjects of the CAs client certificates must chain to; empty: no client certificate asked for.
  std::vector<std::string> client_ca_subjects;
};

// What the server context is built with beyond its own pair. Immutable once `serve` has parsed
// its flags; every reload builds the new context with the same settings.
struct TlsSettings {
  TlsPolicy policy;
  // PEM file with the CA certificate(s) that sign client certificates. Set: every handshake must
  // present a client certificate that verifies against them, or it fails. Empty: none is asked for.
  std::string client_ca_file;
};

// Client CA certificates already in memory, for make_tls_credentials; `name` names them in messages.
struct ClientCaPem {
  std::string pem;
  std::string name = "client CA";
};

struct TlsCredentials {
  CertInfo info;
  std::shared_ptr<SslContext> context;  // ready for new connections; immutable once built
};

// Seconds since the epoch, from the system clock: the `now` certificate checks take.
[[nodiscard]] int64_t unix_now();

// `t` (seconds since the epoch) as an RFC 3339 UTC timestamp, e.g. 2026-12-02T17:58:58Z.
[[nodiscard]] std::string format_utc(int64_t t);

// Reads `cert_path` (PEM: the leaf first, then any intermediates), `key_path` (PEM private key,
// unencrypted) and, when `settings.client_ca_file` is set, that file; checks them and builds a
// server context with `settings`. `now` (seconds since the epoch) decides expiry. Errors name the
// file and the problem:
//   NotFound / PermissionDenied   a file cannot be read
//   InvalidArgument               not PEM, no certificate, no key, key does not match the
//                                 certificate, certificate expired (or not valid yet), no TLS 1.2
//                                 suite of the policy fits the key, a client CA file without a
//                                 CA certificate or with an expired one
// Thread-safe; does file I/O, so call it off the I/O threads.
[[nodiscard]] Result<TlsCredentials> load_tls_credentials(const std::string& cert_path, const std::string& key_path,
                                                          int64_t now, const TlsSettings& settings = {});

// The same from PEM text already in memory (`cert_name` / `key_name` name them in messages);
// `client_ca` set: client certificates are required and verified against it.
[[nodiscard]] Result<TlsCredentials> make_tls_credentials(const std::string& cert_pem, const std::string& key_pem,
                                                          int64_t now, const std::string& cert_name = "certificate",
                                                          const std::string& key_name = "key",
                                                          const TlsPolicy& policy = {},
                                                          const std::optional<ClientCaPem>& client_ca = std::nullopt);

}  // namespace erdma::webhook::server
