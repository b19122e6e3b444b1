// Test certificate factory (see test_certs.hpp).
#include "test_certs.hpp"

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>

namespace erdma::webhook::server::testing {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
};

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test cert: ") + what);
}

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

std::unique_ptr<EVP_PKEY, Free> read_key(const std::string& pem) {
  std::unique_ptr<BIO, Free> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return std::unique_ptr<EVP_PKEY, Free>(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

std::unique_ptr<X509, Free> read_cert(const std::string& pem) {
  std::unique_ptr<BIO, Free> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  return std::unique_ptr<X509, Free>(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
}

void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  check(ext != nullptr, "extension");
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

}  // namespace

PemPair make_cert(const CertSpec& spec, const PemPair* issuer) {
  std::unique_ptr<EVP_PKEY, Free> key(spec.kind == KeyKind::EcdsaP256 ? EVP_EC_gen("P-256") : EVP_RSA_gen(2048));
  check(key != nullptr, "key generation");
  std::unique_ptr<X509, Free> cert(X509_new());
  X509_set_version(cert.get(), 2);
  static long serial = 1;
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), ++serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), static_cast<long>(spec.not_before_offset));
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(spec.not_after_offset));
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(spec.common_name.c_str()),
                             -1, -1, 0);
  std::unique_ptr<EVP_PKEY, Free> issuer_key;
  std::unique_ptr<X509, Free> issuer_cert;
  if (issuer != nullptr) {
    issuer_key = read_key(issuer->key);
    issuer_cert = read_cert(issuer->cert);
    check(issuer_key && issuer_cert, "issuer");
    X509_set_issuer_name(cert.get(), X509_get_subject_name(issuer_cert.get()));
  } else {
    X509_set_issuer_name(cert.get(), name);
  }
  X509* signer_cert = issuer_cert ? issuer_cert.get() : cert.get();
  if (spec.ca) {
    add_ext(cert.get(), signer_cert, NID_basic_constraints, "critical,CA:TRUE");
  } else {
    add_ext(cert.get(), signer_cert, NID_basic_constraints, "critical,CA:FALSE");
    const std::string san = spec.subject_alt_names.empty() ? "DNS:" + spec.common_name : spec.subject_alt_names;
    add_ext(cert.get(), signer_cert, NID_subject_alt_name, san.c_str());
  }
  if (!spec.extended_key_usage.empty()) {
    add_ext(cert.get(), signer_cert, NID_ext_key_usage, spec.extended_key_usage.c_str());
  }
  check(X509_sign(cert.get(), issuer_key ? issuer_key.get() : key.get(), EVP_sha256()) > 0, "sign");

  PemPair out;
  std::unique_ptr<BIO, Free> cbio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(cbio.get(), cert.get());
  out.cert = bio_text(cbio.get());
  std::unique_ptr<BIO, Free> kbio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(kbio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  out.key = bio_text(kbio.get());
  return out;
}

}  // namespace erdma::webhook::server::testing
