// Loading and checking certificate/key pairs, and the TLS settings of the server context.
#include "webhook/server/tls_context.hpp"

#include <doctest/doctest.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include <boost/asio/ssl/context.hpp>

#include "test/support.hpp"
#include "test_certs.hpp"

namespace erdma::webhook::server {
namespace {

using testing::CertSpec;
using testing::KeyKind;
using testing::make_cert;

int64_t now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TEST_CASE("ECDSA and RSA pairs load, the context speaks TLS 1.2 and 1.3 only with server preference") {
  for (KeyKind kind : {KeyKind::EcdsaP256, KeyKind::Rsa2048}) {
    CAPTURE(static_cast<int>(kind));
    CertSpec spec;
    spec.kind = kind;
    const auto pair = make_cert(spec);
    auto creds = make_tls_credentials(pair.cert, pair.key, now());
    REQUIRE_OK(creds);
    CHECK(creds->info.key_type == (kind == KeyKind::EcdsaP256 ? "ECDSA P-256" : "RSA 2048"));
    CHECK(creds->info.subject.find("erdma-webhook.erdma-system.svc") != std::string::npos);
    CHECK(creds->info.sha256.size() == 64);
    CHECK(creds->info.not_after > now());
    CHECK(creds->info.chain_length == 1);
    SSL_CTX* ctx = creds->context->native_handle();
    CHECK(SSL_CTX_get_min_proto_version(ctx) == TLS1_2_VERSION);
    CHECK(SSL_CTX_get_max_proto_version(ctx) == TLS1_3_VERSION);
    CHECK((SSL_CTX_get_options(ctx) & SSL_OP_CIPHER_SERVER_PREFERENCE) == 0);  // the client's order wins
    CHECK((SSL_CTX_get_options(ctx) & SSL_OP_NO_RENEGOTIATION) != 0);
    // Every TLS 1.2 suite on offer is ECDHE with an AEAD.
    SSL* ssl = SSL_new(ctx);
    REQUIRE(ssl != nullptr);
    STACK_OF(SSL_CIPHER)* ciphers = SSL_get1_supported_ciphers(ssl);
    int tls12 = 0;
    for (int i = 0; i < sk_SSL_CIPHER_num(ciphers); ++i) {
      const SSL_CIPHER* c = sk_SSL_CIPHER_value(ciphers, i);
      const std::string name = SSL_CIPHER_get_name(c);
      CAPTURE(name);
      if (name.starts_with("TLS_")) continue;  // TLS 1.3 suites
      ++tls12;
      CHECK(name.starts_with("ECDHE-"));
      CHECK(SSL_CIPHER_is_aead(c) == 1);
    }
    CHECK(tls12 > 0);
    sk_SSL_CIPHER_free(ciphers);
    SSL_free(ssl);
  }
}

TEST_CASE("a chain file (leaf then CA) loads with the leaf described") {
  CertSpec ca_spec;
  ca_spec.common_name = "test-ca";
  ca_spec.ca = true;
  const auto ca = make_cert(ca_spec);
  const auto leaf = make_cert(CertSpec{}, &ca);
  auto creds = make_tls_credentials(leaf.cert + ca.cert, leaf.key, now());
  REQUIRE(creds.ok());
  CHECK(creds->info.chain_length == 2);
  CHECK(creds->info.subject.find("erdma-webhook") != std::string::npos);
}

TEST_CASE("bad pairs are refused with a message that says why") {
  const auto a = make_cert(CertSpec{});
  const auto b = make_cert(CertSpec{});
  CertSpec old_spec;
  old_spec.not_before_offset = -7200;
  old_spec.not_after_offset = -3600;
  const auto expired = make_cert(old_spec);
  CertSpec future_spec;
  future_spec.not_before_offset = 86400;
  future_spec.not_after_offset = 2 * 86400;
  const auto future = make_cert(future_spec);

  struct Case {
    const char* name;
    std::string cert, key;
    const char* want;
  };
  // Well-formed PEM armour around a body that is no key at all, put together here so the tree
  // holds nothing that looks like a key file.
  const std::string dashes = "-----";
  const std::string kind = "PRIVATE KEY";
  const std::string garbage_key =
      dashes + "BEGIN " + kind + dashes + "\nAAAA\n" + dashes + "END " + kind + dashes + "\n";
  const std::vector<Case> cases = {
      {"key of another pair", a.cert, b.key, "does not match"},
      {"expired", expired.cert, expired.key, "expired"},
      {"not yet valid", future.cert, future.key, "not valid before"},
      {"garbage certificate", "hello world\n", a.key, "no PEM certificate"},
      {"empty certificate", "", a.key, "no PEM certificate"},
      {"garbage key", a.cert, garbage_key, "no unencrypted PEM private key"},
      {"certificate as key", a.cert, a.cert, "no unencrypted PEM private key"},
      {"key as certificate", a.key, a.key, "no PEM certificate"},
      {"corrupt base64 in certificate", a.cert.substr(0, 40) + "!!!!" + a.cert.substr(44), a.key, "certificate"},
      {"second certificate malformed", a.cert + "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", a.key,
       "malformed"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto creds = make_tls_credentials(c.cert, c.key, now(), "tls.crt", "tls.key");
    REQUIRE_FALSE(creds.ok());
    CHECK(creds.error().code == ErrorCode::InvalidArgument);
    CAPTURE(creds.error().message);
    CHECK(creds.error().message.find(c.want) != std::string::npos);
    CHECK((creds.error().message.starts_with("tls.crt") || creds.error().message.starts_with("tls.key")));
  }
}

TEST_CASE("missing files are NotFound and name the file") {
  auto creds = load_tls_credentials("/nonexistent/tls.crt", "/nonexistent/tls.key", now());
  REQUIRE_FALSE(creds.ok());
  CHECK(creds.error().code == ErrorCode::NotFound);
  CHECK(creds.error().message.find("/nonexistent/tls.crt") != std::string::npos);
}

// --- Handshakes, in memory: the server context as built above against an OpenSSL client. ---

struct SslCtxFree {
  void operator()(SSL_CTX* c) const noexcept { SSL_CTX_free(c); }
};
using ClientCtx = std::unique_ptr<SSL_CTX, SslCtxFree>;

struct ClientSpec {
  const testing::PemPair* cert = nullptr;  // presented when set
  int max_version = TLS1_3_VERSION;
  const char* tls12_ciphers = nullptr;  // OpenSSL list; null: the client's defaults
  const char* tls13_suites = nullptr;
};

ClientCtx client_ctx(const ClientSpec& spec) {
  ClientCtx ctx(SSL_CTX_new(TLS_client_method()));
  REQUIRE(ctx != nullptr);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);  // the server's side is what is tested
  SSL_CTX_set_max_proto_version(ctx.get(), spec.max_version);
  if (spec.tls12_ciphers != nullptr) REQUIRE(SSL_CTX_set_cipher_list(ctx.get(), spec.tls12_ciphers) == 1);
  if (spec.tls13_suites != nullptr) REQUIRE(SSL_CTX_set_ciphersuites(ctx.get(), spec.tls13_suites) == 1);
  if (spec.cert != nullptr) {
    BIO* cb = BIO_new_mem_buf(spec.cert->cert.data(), static_cast<int>(spec.cert->cert.size()));
    X509* x = PEM_read_bio_X509(cb, nullptr, nullptr, nullptr);
    BIO_free(cb);
    BIO* kb = BIO_new_mem_buf(spec.cert->key.data(), static_cast<int>(spec.cert->key.size()));
    EVP_PKEY* k = PEM_read_bio_PrivateKey(kb, nullptr, nullptr, nullptr);
    BIO_free(kb);
    REQUIRE((x != nullptr && k != nullptr));
    REQUIRE(SSL_CTX_use_certificate(ctx.get(), x) == 1);
    REQUIRE(SSL_CTX_use_PrivateKey(ctx.get(), k) == 1);
    X509_free(x);
    EVP_PKEY_free(k);
  }
  return ctx;
}

struct HandshakeOutcome {
  bool server_ok = false;
  int server_reason = 0;  // ERR_GET_REASON of the server's failure
  std::string cipher;     // negotiated, when the server finished
  std::string version;
};

// Runs both ends of one handshake over a BIO pair until the server finishes or either side fails.
HandshakeOutcome handshake(SSL_CTX* server_ctx, SSL_CTX* client) {
  SSL* srv = SSL_new(server_ctx);
  SSL* cli = SSL_new(client);
  REQUIRE((srv != nullptr && cli != nullptr));
  BIO* a = nullptr;
  BIO* b = nullptr;
  REQUIRE(BIO_new_bio_pair(&a, 0, &b, 0) == 1);
  SSL_set_bio(srv, a, a);
  SSL_set_bio(cli, b, b);
  SSL_set_accept_state(srv);
  SSL_set_connect_state(cli);
  ERR_clear_error();
  HandshakeOutcome out;
  bool server_done = false, client_done = false, failed = false;
  for (int round = 0; round < 50 && !server_done && !failed; ++round) {
    if (!client_done) {
      const int r = SSL_do_handshake(cli);
      if (r == 1) {
        client_done = true;
      } else {
        const int e = SSL_get_error(cli, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) failed = true;
      }
      ERR_clear_error();
    }
    const int r = SSL_do_handshake(srv);
    if (r == 1) {
      server_done = true;
    } else {
      const int e = SSL_get_error(srv, r);
      if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
        out.server_reason = ERR_GET_REASON(ERR_peek_error());
        failed = true;
      }
    }
    ERR_clear_error();
  }
  out.server_ok = server_done;
  if (server_done) {
    out.cipher = SSL_get_cipher_name(srv);
    out.version = SSL_get_version(srv);
  }
  SSL_free(srv);
  SSL_free(cli);
  return out;
}

struct Pki {
  testing::PemPair ca, other_ca, intermediate, server, client, other_client, self_signed, expired_client,
      server_auth_only, from_intermediate;
  Pki() {
    CertSpec ca_spec;
    ca_spec.common_name = "apiserver-client-ca";
    ca_spec.ca = true;
    ca = make_cert(ca_spec);
    ca_spec.common_name = "someone-else-ca";
    other_ca = make_cert(ca_spec);
    ca_spec.common_name = "apiserver-client-intermediate";
    intermediate = make_cert(ca_spec, &ca);
    server = make_cert(CertSpec{});
    CertSpec c;
    c.common_name = "kube-apiserver-webhook-client";
    c.extended_key_usage = "clientAuth";
    client = make_cert(c, &ca);
    other_client = make_cert(c, &other_ca);
    self_signed = make_cert(c);
    from_intermediate = make_cert(c, &intermediate);
    CertSpec old = c;
    old.not_before_offset = -7200;
    old.not_after_offset = -3600;
    expired_client = make_cert(old, &ca);
    CertSpec wrong_use = c;
    wrong_use.extended_key_usage = "serverAuth";
    server_auth_only = make_cert(wrong_use, &ca);
  }
};

TEST_CASE("without --client-ca no client certificate is asked for") {
  const Pki pki;
  auto creds = make_tls_credentials(pki.server.cert, pki.server.key, now());
  REQUIRE(creds.ok());
  CHECK(creds->info.client_ca_subjects.empty());
  CHECK((SSL_CTX_get_verify_mode(creds->context->native_handle()) & SSL_VERIFY_PEER) == 0);
  for (int v : {TLS1_2_VERSION, TLS1_3_VERSION}) {
    CAPTURE(v);
    ClientSpec spec;
    spec.max_version = v;
    CHECK(handshake(creds->context->native_handle(), client_ctx(spec).get()).server_ok);
  }
}

TEST_CASE("with --client-ca only clients with a certificate from that CA complete the handshake") {
  const Pki pki;
  auto creds = make_tls_credentials(pki.server.cert, pki.server.key, now(), "tls.crt", "tls.key", {},
                                    ClientCaPem{pki.ca.cert, "client-ca.crt"});
  REQUIRE_OK(creds);
  REQUIRE(creds->info.client_ca_subjects.size() == 1);
  CHECK(creds->info.client_ca_subjects[0].find("apiserver-client-ca") != std::string::npos);
  SSL_CTX* server = creds->context->native_handle();

  struct Case {
    const char* name;
    const testing::PemPair* cert;
    bool ok;
    int reason;
  };
  const std::vector<Case> cases = {
      {"signed by the CA", &pki.client, true, 0},
      {"no certificate", nullptr, false, SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE},
      {"signed by another CA", &pki.other_client, false, SSL_R_CERTIFICATE_VERIFY_FAILED},
      {"self-signed", &pki.self_signed, false, SSL_R_CERTIFICATE_VERIFY_FAILED},
      {"expired, from the CA", &pki.expired_client, false, SSL_R_CERTIFICATE_VERIFY_FAILED},
      {"from the CA, but for servers only (extendedKeyUsage serverAuth)", &pki.server_auth_only, false,
       SSL_R_CERTIFICATE_VERIFY_FAILED},
  };
  for (const auto& c : cases) {
    for (int v : {TLS1_2_VERSION, TLS1_3_VERSION}) {
      CAPTURE(c.name);
      CAPTURE(v);
      ClientSpec spec;
      spec.cert = c.cert;
      spec.max_version = v;
      const HandshakeOutcome got = handshake(server, client_ctx(spec).get());
      CHECK(got.server_ok == c.ok);
      if (!c.ok) CHECK(got.server_reason == c.reason);
    }
  }
}

TEST_CASE("an intermediate CA in the --client-ca file is enough to verify what it signed") {
  const Pki pki;
  auto creds = make_tls_credentials(pki.server.cert, pki.server.key, now(), "tls.crt", "tls.key", {},
                                    ClientCaPem{pki.intermediate.cert, "client-ca.crt"});
  REQUIRE(creds.ok());
  ClientSpec spec;
  spec.cert = &pki.from_intermediate;
  CHECK(handshake(creds->context->native_handle(), client_ctx(spec).get()).server_ok);
  spec.cert = &pki.client;  // signed by the root, which the file does not hold
  CHECK_FALSE(handshake(creds->context->native_handle(), client_ctx(spec).get()).server_ok);
}

TEST_CASE("bad --client-ca files are refused with a message that says why") {
  const Pki pki;
  CertSpec old_ca;
  old_ca.ca = true;
  old_ca.common_name = "old-ca";
  old_ca.not_before_offset = -7200;
  old_ca.not_after_offset = -3600;
  const auto expired_ca = make_cert(old_ca);
  struct Case {
    const char* name;
    std::string pem;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"empty", "", "no PEM certificate"},
      {"garbage", "hello\n", "no PEM certificate"},
      {"the client certificate instead of its CA", pki.client.cert, "is not a CA certificate"},
      {"a good CA, then a leaf", pki.ca.cert + pki.client.cert, "certificate 2"},
      {"expired CA", expired_ca.cert, "expired"},
      {"second block broken", pki.ca.cert + "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
       "malformed"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto creds = make_tls_credentials(pki.server.cert, pki.server.key, now(), "tls.crt", "tls.key", {},
                                      ClientCaPem{c.pem, "client-ca.crt"});
    REQUIRE_FALSE(creds.ok());
    CAPTURE(creds.error().message);
    CHECK(creds.error().code == ErrorCode::InvalidArgument);
    CHECK(creds.error().message.starts_with("client-ca.crt: "));
    CHECK(creds.error().message.find(c.want) != std::string::npos);
  }
  // Two CAs in one file: both are trusted.
  auto two = make_tls_credentials(pki.server.cert, pki.server.key, now(), "tls.crt", "tls.key", {},
                                  ClientCaPem{pki.other_ca.cert + pki.ca.cert, "client-ca.crt"});
  REQUIRE(two.ok());
  CHECK(two->info.client_ca_subjects.size() == 2);
  for (const auto* cert : {&pki.client, &pki.other_client}) {
    ClientSpec spec;
    spec.cert = cert;
    CHECK(handshake(two->context->native_handle(), client_ctx(spec).get()).server_ok);
  }
}

TEST_CASE("the --client-ca file is read with the pair; a missing one is NotFound and named") {
  const Pki pki;
  const erdma::testing::TempDir dir("tls-context");
  dir.write("tls.crt", pki.server.cert);
  dir.write("tls.key", pki.server.key);
  dir.write("client-ca.crt", pki.ca.cert);
  TlsSettings settings;
  settings.client_ca_file = dir.file("client-ca.crt");
  auto loaded = load_tls_credentials(dir.file("tls.crt"), dir.file("tls.key"), now(), settings);
  CHECK(loaded.ok());
  if (loaded.ok()) CHECK(loaded->info.client_ca_subjects.size() == 1);
  settings.client_ca_file = dir.file("missing-ca.crt");
  auto missing = load_tls_credentials(dir.file("tls.crt"), dir.file("tls.key"), now(), settings);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::NotFound);
  CHECK(missing.error().message.find("--client-ca") != std::string::npos);
  CHECK(missing.error().message.find("missing-ca.crt") != std::string::npos);
}

TEST_CASE("--tls-min-version 1.3 refuses a client that speaks at most TLS 1.2") {
  const Pki pki;
  TlsPolicy policy;
  policy.min_version = TlsVersion::Tls13;
  auto creds = make_tls_credentials(pki.server.cert, pki.server.key, now(), "tls.crt", "tls.key", policy);
  REQUIRE(creds.ok());
  SSL_CTX* server = creds->context->native_handle();
  CHECK(SSL_CTX_get_min_proto_version(server) == TLS1_3_VERSION);
  ClientSpec old;
  old.max_version = TLS1_2_VERSION;
  const HandshakeOutcome refused = handshake(server, client_ctx(old).get());
  CHECK_FALSE(refused.server_ok);
  CHECK(refused.server_reason == SSL_R_UNSUPPORTED_PROTOCOL);
  const HandshakeOutcome ok = handshake(server, client_ctx(ClientSpec{}).get());
  CHECK(ok.server_ok);
  CHECK(ok.version == "TLSv1.3");
  // The default still takes TLS 1.2.
  auto defaults = make_tls_credentials(pki.server.cert, pki.server.key, now());
  REQUIRE(defaults.ok());
  CHECK(handshake(defaults->context->native_handle(), client_ctx(old).get()).version == "TLSv1.2");
}

TEST_CASE("--tls-cipher-suites: only the named suites are offered, in TLS 1.2 and 1.3") {
  const Pki pki;
  auto picked = parse_cipher_suites("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_CHACHA20_POLY1305_SHA256");
  REQUIRE(picked.ok());
  TlsPolicy policy;
  policy.tls12_ciphers = picked->tls12;
  policy.tls13_suites = picked->tls13;
  auto creds = make_tls_credentials(pki.server.cert, pki.server.key, now(), "tls.crt", "tls.key", policy);
  REQUIRE_OK(creds);
  SSL_CTX* server = creds->context->native_handle();

  ClientSpec other12;
  other12.max_version = TLS1_2_VERSION;
  other12.tls12_ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305";
  const HandshakeOutcome refused12 = handshake(server, client_ctx(other12).get());
  CHECK_FALSE(refused12.server_ok);
  CHECK(refused12.server_reason == SSL_R_NO_SHARED_CIPHER);
  ClientSpec named12 = other12;
  named12.tls12_ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384";
  const HandshakeOutcome ok12 = handshake(server, client_ctx(named12).get());
  CHECK(ok12.server_ok);
  CHECK(ok12.cipher == "ECDHE-ECDSA-AES256-GCM-SHA384");

  ClientSpec other13;
  other13.tls13_suites = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384";
  other13.tls12_ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256";  // no TLS 1.2 fallback either
  const HandshakeOutcome refused13 = handshake(server, client_ctx(other13).get());
  CHECK_FALSE(refused13.server_ok);
  ClientSpec named13;
  named13.tls13_suites = "TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256";
  const HandshakeOutcome ok13 = handshake(server, client_ctx(named13).get());
  CHECK(ok13.server_ok);
  CHECK(ok13.cipher == "TLS_CHACHA20_POLY1305_SHA256");
}

TEST_CASE("every supported suite is the one OpenSSL knows by that IANA name") {
  const Pki pki;
  CertSpec rsa_spec;
  rsa_spec.kind = KeyKind::Rsa2048;
  const auto rsa = make_cert(rsa_spec);
  for (const auto& suite : supported_cipher_suites()) {
    const std::string iana(suite.iana);
    CAPTURE(iana);
    auto one = parse_cipher_suites(iana);
    REQUIRE(one.ok());
    TlsPolicy policy;
    policy.tls12_ciphers = one->tls12;
    policy.tls13_suites = one->tls13;
    if (suite.tls13) policy.min_version = TlsVersion::Tls13;
    const auto& pair = suite.tls13 || suite.ecdsa ? pki.server : rsa;
    auto creds = make_tls_credentials(pair.cert, pair.key, now(), "tls.crt", "tls.key", policy);
    REQUIRE_OK(creds);
    SSL* ssl = SSL_new(creds->context->native_handle());
    STACK_OF(SSL_CIPHER)* offered = SSL_get1_supported_ciphers(ssl);
    int matches = 0;
    for (int i = 0; i < sk_SSL_CIPHER_num(offered); ++i) {
      const SSL_CIPHER* c = sk_SSL_CIPHER_value(offered, i);
      const bool is13 = std::string(SSL_CIPHER_get_version(c)) == "TLSv1.3";
      if (is13 != suite.tls13) continue;
      CHECK(std::string(SSL_CIPHER_standard_name(c)) == iana);
      CHECK(std::string(SSL_CIPHER_get_name(c)) == std::string(suite.openssl));
      ++matches;
    }
    CHECK(matches == 1);
    sk_SSL_CIPHER_free(offered);
    SSL_free(ssl);
  }
}

TEST_CASE("a policy whose TLS 1.2 suites do not fit the key is refused when the pair loads") {
  const Pki pki;
  TlsPolicy rsa_only;
  rsa_only.tls12_ciphers = {"ECDHE-RSA-AES128-GCM-SHA256"};
  auto creds = make_tls_credentials(pki.server.cert, pki.server.key, now(), "tls.crt", "tls.key", rsa_only);
  REQUIRE_FALSE(creds.ok());
  CHECK(creds.error().message.find("ECDSA key") != std::string::npos);
  CHECK(creds.error().message.starts_with("tls.crt: "));
}

}  // namespace
}  // namespace erdma::webhook::server
