// Certificate loading and the server TLS context (see tls_context.hpp).
#include "webhook/server/tls_context.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <chrono>
#include <ctime>
#include <vector>

#include <boost/asio/ssl/context.hpp>

#include "common/structured.hpp"

namespace erdma::webhook::server {
namespace {

struct BioFree {
  void operator()(BIO* b) const noexcept { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const noexcept { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const noexcept { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// The oldest error OpenSSL queued for this thread (the root cause), then clears the queue.
std::string openssl_error() {
  const unsigned long e = ERR_peek_error();
  std::string out;
  if (e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out = buf;
  } else {
    out = "unknown OpenSSL error";
  }
  ERR_clear_error();
  return out;
}

Error invalid(const std::string& what, const std::string& why) {
  return make_error(ErrorCode::InvalidArgument, what + ": " + why);
}

BioPtr memory_bio(const std::string& text) {
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

Result<int64_t> to_unix(const ASN1_TIME* t, const std::string& what) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return invalid(what, "unreadable validity date");
  return static_cast<int64_t>(timegm(&tm));
}

std::string describe_key(EVP_PKEY* key) {
  const int id = EVP_PKEY_get_base_id(key);
  const int bits = EVP_PKEY_get_bits(key);
  if (id == EVP_PKEY_EC) {
    char group[64] = {0};
    size_t len = 0;
    if (EVP_PKEY_get_group_name(key, group, sizeof group, &len) == 1) {
      const std::string g(group, len);
      if (g == "prime256v1") return "ECDSA P-256";
      if (g == "secp384r1") return "ECDSA P-384";
      if (g == "secp521r1") return "ECDSA P-521";
      return "ECDSA " + g;
    }
    return "ECDSA";
  }
  if (id == EVP_PKEY_RSA) return "RSA " + std::to_string(bits);
  if (id == EVP_PKEY_ED25519) return "Ed25519";
  return "key type " + std::to_string(id);
}

std::string sha256_hex(X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (X509_digest(cert, EVP_sha256(), md, &n) != 1) return "";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (unsigned i = 0; i < n; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 0xf];
  }
  return out;
}

// Every PEM CERTIFICATE block of `pem`, in order. InvalidArgument (naming `name`) when there is
// none or one is broken.
Result<std::vector<X509Ptr>> read_certificates(const std::string& pem, const std::string& name) {
  std::vector<X509Ptr> out;
  BioPtr bio = memory_bio(pem);
  if (!bio) return make_error(ErrorCode::Internal, "out of memory reading " + name);
  while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) out.emplace_back(x);
  const unsigned long last = ERR_peek_last_error();
  // Reading stops with "no start line" at the end of the input; anything else is a broken block.
  if (out.empty()) {
    ERR_clear_error();
    return invalid(name, "no PEM certificate found (expected -----BEGIN CERTIFICATE-----)");
  }
  if (last != 0 && !(ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE)) {
    return invalid(name, "certificate " + std::to_string(out.size() + 1) + " is malformed: " + openssl_error());
  }
  ERR_clear_error();
  return out;
}

std::string subject_of(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio) return "";
  X509_NAME_print_ex(bio.get(), X509_get_subject_name(cert), 0, XN_FLAG_ONELINE & ~ASN1_STRFLGS_ESC_MSB);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return len > 0 ? std::string(data, static_cast<size_t>(len)) : "";
}

// Makes `ctx` require a client certificate that chains to one of the CAs in `ca`, and returns
// their subjects. Every certificate in the file must be a CA and valid at `now`: a client
// certificate put there by mistake, or an expired CA, would make every handshake fail, which is
// better said at load than discovered by the apiserver.
Result<std::vector<std::string>> require_client_certificates(SSL_CTX* ctx, const ClientCaPem& ca, int64_t now) {
  ERDMA_TRY_ASSIGN(auto certs, read_certificates(ca.pem, ca.name));
  std::vector<std::string> subjects;
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  for (size_t i = 0; i < certs.size(); ++i) {
    X509* x = certs[i].get();
    const std::string which = "certificate " + std::to_string(i + 1) + " (" + subject_of(x) + ")";
    if (X509_check_ca(x) == 0) {
      return invalid(ca.name, which + " is not a CA certificate (no basicConstraints CA:TRUE): give the CA that "
                                      "signed the client certificate, not the client certificate itself");
    }
    ERDMA_TRY_ASSIGN(auto na, to_unix(X509_get0_notAfter(x), ca.name));
    if (na <= now) return invalid(ca.name, which + " expired at " + format_utc(na) + "; renew it");
    if (X509_STORE_add_cert(store, x) != 1 || SSL_CTX_add_client_CA(ctx, x) != 1) {
      return invalid(ca.name, which + ": the TLS library refused it: " + openssl_error());
    }
    subjects.push_back(subject_of(x));
  }
  // A CA in the file is a trust anchor even when it is an intermediate, as a Go server's ClientCAs
  // pool treats it; without this OpenSSL would also want the root.
  X509_STORE_set_flags(store, X509_V_FLAG_PARTIAL_CHAIN);
  // No certificate, or one that does not verify, fails the handshake. OpenSSL checks the client
  // certificate's purpose too (extendedKeyUsage, when present, must allow clientAuth).
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // The server resumes no sessions (no tickets, no session cache; see make_tls_credentials). Were
  // that ever turned on, a resumed session skips verification, so it must be bound to this
  // context: OpenSSL refuses to resume without a session id context once peers are verified.
  static constexpr unsigned char kSessionContext[] = "erdma-webhook client-auth";
  if (SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1) != 1) {
    return make_error(ErrorCode::Internal, "TLS session id context: " + openssl_error());
  }
  return subjects;
}

}  // namespace

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string format_utc(int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Result<TlsCredentials> make_tls_credentials(const std::string& cert_pem, const std::string& key_pem, int64_t now,
                                            const std::string& cert_name, const std::string& key_name,
                                            const TlsPolicy& policy, const std::optional<ClientCaPem>& client_ca) {
  ERDMA_TRY(check_tls_policy(policy));
  ERR_clear_error();
  // The certificate chain: every PEM CERTIFICATE block in order, the leaf first.
  ERDMA_TRY_ASSIGN(auto read_chain, read_certificates(cert_pem, cert_name));
  std::vector<X509Ptr> chain = std::move(read_chain);
  PkeyPtr key;
  {
    BioPtr bio = memory_bio(key_pem);
    if (!bio) return make_error(ErrorCode::Internal, "out of memory reading " + key_name);
    // A null passphrase callback that fails: encrypted keys are refused instead of prompting.
    key.reset(PEM_read_bio_PrivateKey(
        bio.get(), nullptr, [](char*, int, int, void*) { return -1; }, nullptr));
    if (!key) {
      ERR_clear_error();
      return invalid(key_name, "no unencrypted PEM private key found (expected a PEM block of type "
                               "\"PRIVATE KEY\", \"EC PRIVATE KEY\" or \"RSA PRIVATE KEY\")");
    }
  }
  X509* leaf = chain.front().get();
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return invalid(key_name, "the private key does not match the certificate in " + cert_name +
                                 " (a certificate and key from different pairs?)");
  }

  TlsCredentials out;
  out.info.chain_length = chain.size();
  out.info.subject = subject_of(leaf);
  out.info.key_type = describe_key(key.get());
  out.info.sha256 = sha256_hex(leaf);
  ERDMA_TRY_ASSIGN(auto nb, to_unix(X509_get0_notBefore(leaf), cert_name));
  ERDMA_TRY_ASSIGN(auto na, to_unix(X509_get0_notAfter(leaf), cert_name));
  out.info.not_before = nb;
  out.info.not_after = na;
  if (na <= now) return invalid(cert_name, "certificate expired at " + format_utc(na) + "; renew it");
  // A little slack for clocks that disagree with the issuer's; beyond it the cert cannot work.
  constexpr int64_t kClockSkew = 300;
  if (nb > now + kClockSkew) {
    return invalid(cert_name, "certificate is not valid before " + format_utc(nb) + " (check the clocks)");
  }
  const bool ecdsa = EVP_PKEY_get_base_id(key.get()) == EVP_PKEY_EC;
  if (!has_tls12_suite_for_key(policy, ecdsa)) {
    return invalid(cert_name, std::string("none of the TLS 1.2 suites in --tls-cipher-suites works with its ") +
                                  (ecdsa ? "ECDSA key: add a TLS_ECDHE_ECDSA_WITH_... suite"
                                         : "RSA key: add a TLS_ECDHE_RSA_WITH_... suite") +
                                  ", or set --tls-min-version 1.3");
  }

  namespace ssl = boost::asio::ssl;
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  // TLS 1.2 (unless the policy says 1.3) and 1.3 only: what kube-apiserver speaks, and nothing
  // with known weaknesses.
  SSL_CTX_set_min_proto_version(native, policy.min_version == TlsVersion::Tls13 ? TLS1_3_VERSION : TLS1_2_VERSION);
  SSL_CTX_set_max_proto_version(native, TLS1_3_VERSION);
  // The client's order decides among the suites on offer: every one of them is AEAD with ECDHE, so
  // letting kube-apiserver (Go: AES-128-GCM first where the CPU has AES) choose costs no security
  // and spares it AES-256/SHA-384, which server preference forced on every handshake.
  SSL_CTX_clear_options(native, SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  // No session resumption: kube-apiserver's webhook client (client-go's transport) sets no
  // ClientSessionCache, so Go's TLS client never resumes and every new connection is a full
  // handshake. The two TLS 1.3 session tickets OpenSSL would send after each handshake, and the
  // server-side session cache for TLS 1.2, were work on every connection that nobody used.
  SSL_CTX_set_options(native, SSL_OP_NO_TICKET);
  SSL_CTX_set_num_tickets(native, 0);
  SSL_CTX_set_session_cache_mode(native, SSL_SESS_CACHE_OFF);
  if (SSL_CTX_set_cipher_list(native, tls12_cipher_list(policy).c_str()) != 1) {
    return make_error(ErrorCode::Internal, "TLS 1.2 cipher list: " + openssl_error());
  }
  if (const std::string suites = tls13_cipher_list(policy);
      !suites.empty() && SSL_CTX_set_ciphersuites(native, suites.c_str()) != 1) {
    return make_error(ErrorCode::Internal, "TLS 1.3 cipher suites: " + openssl_error());
  }
  if (SSL_CTX_set1_groups_list(native, "X25519:P-256:P-384") != 1) {
    return make_error(ErrorCode::Internal, "TLS groups: " + openssl_error());
  }
  STACK_OF(X509)* extra = sk_X509_new_null();
  for (size_t i = 1; i < chain.size(); ++i) sk_X509_push(extra, chain[i].get());
  const int used = SSL_CTX_use_cert_and_key(native, leaf, key.get(), extra, 1);
  sk_X509_free(extra);  // the context took its own references
  if (used != 1) return invalid(cert_name, "the TLS library refused the certificate: " + openssl_error());
  if (SSL_CTX_check_private_key(native) != 1) return invalid(key_name, "key check failed: " + openssl_error());
  if (client_ca) {
    ERDMA_TRY_ASSIGN(auto subjects, require_client_certificates(native, *client_ca, now));
    out.info.client_ca_subjects = std::move(subjects);
  }
  out.context = std::move(ctx);
  return out;
}

Result<TlsCredentials> load_tls_credentials(const std::string& cert_path, const std::string& key_path, int64_t now,
                                            const TlsSettings& settings) {
  // 1 MiB is far above any real chain or key; the cap keeps a wrong path (a log file) harmless.
  constexpr size_t kMaxPemBytes = 1u << 20;
  auto cert = common::read_file(cert_path, kMaxPemBytes);
  if (!cert) return make_error(cert.error().code, "TLS certificate: " + cert.error().message);
  auto key = common::read_file(key_path, kMaxPemBytes);
  if (!key) return make_error(key.error().code, "TLS key: " + key.error().message);
  std::optional<ClientCaPem> client_ca;
  if (!settings.client_ca_file.empty()) {
    auto ca = common::read_file(settings.client_ca_file, kMaxPemBytes);
    if (!ca) return make_error(ca.error().code, "client CA (--client-ca): " + ca.error().message);
    client_ca = ClientCaPem{std::move(ca).value(), settings.client_ca_file};
  }
  return make_tls_credentials(*cert, *key, now, cert_path, key_path, settings.policy, client_ca);
}

}  // namespace erdma::webhook::server
