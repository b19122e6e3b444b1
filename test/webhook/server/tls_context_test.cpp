// Loading and checking certificate/key pairs, and the TLS settings of the server context.
#include "webhook/server/tls_context.hpp"

#include <doctest/doctest.h>
#include <openssl/ssl.h>

#include <chrono>

#include <boost/asio/ssl/context.hpp>

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
    REQUIRE_MESSAGE(creds.ok(), (creds.ok() ? "" : creds.error().message));
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
      {"corrupt base64 in certificate",
       a.cert.substr(0, 40) + "!!!!" + a.cert.substr(44), a.key, "certificate"},
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

}  // namespace
}  // namespace erdma::webhook::server
