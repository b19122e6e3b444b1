// TLS version and cipher suite names: parsing, the IANA -> OpenSSL mapping, the checks across both.
#include "webhook/server/tls_policy.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test/support.hpp"

namespace erdma::webhook::server {
namespace {

TEST_CASE("--tls-min-version values") {
  CHECK(parse_tls_version("1.2").value() == TlsVersion::Tls12);
  CHECK(parse_tls_version("1.3").value() == TlsVersion::Tls13);
  CHECK(parse_tls_version("VersionTLS12").value() == TlsVersion::Tls12);
  CHECK(parse_tls_version("VersionTLS13").value() == TlsVersion::Tls13);
  for (std::string_view bad : {"", "1.1", "1.0", "1", "tls1.2", "1.4", "VersionTLS11", " 1.2"}) {
    CAPTURE(bad);
    auto v = parse_tls_version(bad);
    REQUIRE_FALSE(v.ok());
    CHECK(v.error().code == ErrorCode::InvalidArgument);
    CHECK(v.error().message.find("expected 1.2 or 1.3") != std::string::npos);
  }
  CHECK(to_string(TlsVersion::Tls12) == "1.2");
  CHECK(to_string(TlsVersion::Tls13) == "1.3");
}

TEST_CASE("cipher suite names map to OpenSSL's, in the order given, TLS 1.2 and 1.3 apart") {
  struct Case {
    const char* name;
    const char* in;
    std::vector<std::string> tls12, tls13;
  };
  const std::vector<Case> cases = {
      {"one IANA name", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", {"ECDHE-ECDSA-AES128-GCM-SHA256"}, {}},
      {"kube-apiserver style list",
       "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,"
       "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
       {"ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-CHACHA20-POLY1305"},
       {}},
      {"older Go spelling of ChaCha20",
       "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
       {"ECDHE-ECDSA-CHACHA20-POLY1305"},
       {}},
      {"OpenSSL names too", "ECDHE-RSA-AES128-GCM-SHA256", {"ECDHE-RSA-AES128-GCM-SHA256"}, {}},
      {"blanks, letter case, repeats, empty items",
       " tls_ecdhe_ecdsa_with_aes_128_gcm_sha256 ,, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,",
       {"ECDHE-ECDSA-AES128-GCM-SHA256"},
       {}},
      {"mixed with TLS 1.3",
       "TLS_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
       {"ECDHE-ECDSA-AES128-GCM-SHA256"},
       {"TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256"}},
      {"TLS 1.3 only", "TLS_CHACHA20_POLY1305_SHA256", {}, {"TLS_CHACHA20_POLY1305_SHA256"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto got = parse_cipher_suites(c.in);
    REQUIRE_OK(got);
    CHECK(got->tls12 == c.tls12);
    CHECK(got->tls13 == c.tls13);
  }
}

TEST_CASE("unknown and insecure suite names are refused, listing the accepted ones") {
  for (const char* bad :
       {"TLS_RSA_WITH_AES_128_GCM_SHA256",          // no forward secrecy
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",       // CBC
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384",  // CBC
        "TLS_RSA_WITH_3DES_EDE_CBC_SHA", "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,NOPE", "AES128-GCM-SHA256", "ALL", "DEFAULT", "", ",", " , "}) {
    CAPTURE(bad);
    auto got = parse_cipher_suites(bad);
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code == ErrorCode::InvalidArgument);
    CHECK(got.error().message.starts_with("--tls-cipher-suites: "));
    CHECK(got.error().message.find("accepted: TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, ") != std::string::npos);
    CHECK(got.error().message.find("TLS_CHACHA20_POLY1305_SHA256") != std::string::npos);
  }
  auto named = parse_cipher_suites("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_RSA_WITH_AES_128_CBC_SHA");
  REQUIRE_FALSE(named.ok());
  CHECK(named.error().message.find("\"TLS_RSA_WITH_AES_128_CBC_SHA\" is not a suite this server offers") !=
        std::string::npos);
}

TEST_CASE("the table: every name is unique, TLS 1.2 suites are ECDHE, the defaults are all of them") {
  std::vector<std::string> seen;
  for (const auto& s : supported_cipher_suites()) {
    CAPTURE(std::string(s.iana));
    for (std::string_view n : {s.iana, s.openssl, s.alias}) {
      if (n.empty() || (n == s.openssl && n == s.iana)) continue;
      CHECK(std::find(seen.begin(), seen.end(), std::string(n)) == seen.end());
      seen.emplace_back(n);
    }
    if (!s.tls13) {
      CHECK(s.iana.starts_with(s.ecdsa ? "TLS_ECDHE_ECDSA_WITH_" : "TLS_ECDHE_RSA_WITH_"));
      CHECK(s.openssl.starts_with(s.ecdsa ? "ECDHE-ECDSA-" : "ECDHE-RSA-"));
    }
  }
  const TlsPolicy defaults;
  CHECK(tls12_cipher_list(defaults) ==
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
        "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305");
  CHECK(tls13_cipher_list(defaults).empty());
}

TEST_CASE("the version and the suites are checked together") {
  TlsPolicy p;
  CHECK(check_tls_policy(p).ok());
  p.min_version = TlsVersion::Tls13;
  CHECK(check_tls_policy(p).ok());
  p.tls13_suites = {"TLS_AES_256_GCM_SHA384"};
  CHECK(check_tls_policy(p).ok());
  p.tls12_ciphers = {"ECDHE-ECDSA-AES128-GCM-SHA256"};
  auto useless = check_tls_policy(p);
  REQUIRE_FALSE(useless.ok());
  CHECK(useless.error().message.find("--tls-min-version is 1.3, which never uses them") != std::string::npos);

  TlsPolicy only13;
  only13.tls13_suites = {"TLS_AES_128_GCM_SHA256"};
  auto starved = check_tls_policy(only13);
  REQUIRE_FALSE(starved.ok());
  CHECK(starved.error().message.find("TLS 1.2 clients would find no suite") != std::string::npos);
}

TEST_CASE("a TLS 1.2 suite must fit the serving key") {
  TlsPolicy p;
  CHECK(has_tls12_suite_for_key(p, true));
  CHECK(has_tls12_suite_for_key(p, false));
  p.tls12_ciphers = {"ECDHE-RSA-AES128-GCM-SHA256"};
  CHECK_FALSE(has_tls12_suite_for_key(p, true));
  CHECK(has_tls12_suite_for_key(p, false));
  p.tls12_ciphers.push_back("ECDHE-ECDSA-CHACHA20-POLY1305");
  CHECK(has_tls12_suite_for_key(p, true));
  TlsPolicy v13;
  v13.min_version = TlsVersion::Tls13;
  CHECK(has_tls12_suite_for_key(v13, true));
}

}  // namespace
}  // namespace erdma::webhook::server
