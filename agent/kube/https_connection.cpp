// One TLS connection to the API server, and the client context (see https_connection.hpp).
#include "agent/kube/https_connection.hpp"

#include "agent/kube/trust_file.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

namespace erdma::agent::kube::https {
namespace {

using tcp = net::ip::tcp;

std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    std::array<char, 256> buf{};
    ERR_error_string_n(e, buf.data(), buf.size());
    if (!out.empty()) out += "; ";
    out += buf.data();
  }
  return out;
}

Result<std::string> read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::FailedPrecondition, path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Result<std::unique_ptr<ssl::context>> client_tls_context(const std::string& ca_file) {
  ERDMA_TRY_ASSIGN(const std::string ca, read_small_file(ca_file));
  if (ca.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return make_error(ErrorCode::FailedPrecondition, "CA file " + ca_file + ": holds no PEM certificate");
  }
  auto tls = std::make_unique<ssl::context>(ssl::context::tls_client);
  SSL_CTX* native = tls->native_handle();
  SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION);
  SSL_CTX_set_options(native, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  ERR_clear_error();
  boost::system::error_code ec;
  tls->add_certificate_authority(net::buffer(ca), ec);
  if (ec) {
    return make_error(ErrorCode::FailedPrecondition,
                      "CA file " + ca_file + ": no PEM certificate could be used (" + ec.message() + ")");
  }
  tls->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  return tls;
}

Result<void> Connection::open(Clock::duration timeout) {
  close();
  const auto deadline = Clock::now() + timeout;
  std::vector<tcp::endpoint> targets;
  if (endpoint_.is_ip) {
    targets.emplace_back(net::ip::make_address(endpoint_.host), static_cast<uint16_t>(std::stoul(endpoint_.port)));
  } else {
    tcp::resolver resolver(ioc_);
    net::steady_timer timer(ioc_);
    beast::error_code rec = net::error::would_block;
    tcp::resolver::results_type found;
    resolver.async_resolve(endpoint_.host, endpoint_.port, [&](beast::error_code ec, tcp::resolver::results_type r) {
      rec = ec;
      found = std::move(r);
      timer.cancel();
    });
    timer.expires_at(deadline);
    timer.async_wait([&](beast::error_code ec) {
      if (!ec) resolver.cancel();
    });
    run();
    if (rec) return unavailable("resolving " + endpoint_.host, rec);
    for (const auto& r : found) targets.push_back(r.endpoint());
  }
  tls_ = trust_.current();
  stream_.emplace(ioc_, *tls_);
  SSL* native = stream_->native_handle();
  // The name or address the certificate must carry. Both calls fail only when OpenSSL cannot
  // allocate or cannot parse the address: then no connection is made, rather than one whose
  // certificate would be checked against nothing.
  if (endpoint_.is_ip) {
    if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(native), endpoint_.host.c_str()) != 1) {
      close();
      return make_error(ErrorCode::Internal, "TLS: cannot require " + endpoint_.host +
                                                 " in the API server's certificate (X509_VERIFY_PARAM_set1_ip_asc)");
    }
  } else {
    // SNI, for names only (RFC 6066); SSL_set_tlsext_host_name is this call behind a C cast.
    SSL_ctrl(native, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
             const_cast<char*>(endpoint_.host.c_str()));
    if (SSL_set1_host(native, endpoint_.host.c_str()) != 1) {
      close();
      return make_error(ErrorCode::Internal,
                        "TLS: cannot require " + endpoint_.host + " in the API server's certificate (SSL_set1_host)");
    }
  }
  stream_->set_verify_mode(ssl::verify_peer);
  auto& tcp_stream = beast::get_lowest_layer(*stream_);
  tcp_stream.expires_at(deadline);
  beast::error_code ec = net::error::would_block;
  tcp_stream.async_connect(targets, [&](beast::error_code e, const tcp::endpoint&) { ec = e; });
  run();
  if (ec) {
    close();
    return unavailable("connecting to " + endpoint_.host_header, ec);
  }
  tcp_stream.expires_at(deadline);
  ec = net::error::would_block;
  stream_->async_handshake(ssl::stream_base::client, [&](beast::error_code e) { ec = e; });
  run();
  if (ec) {
    std::string what = "TLS handshake with " + endpoint_.host_header;
    const long verify = SSL_get_verify_result(native);
    if (verify != X509_V_OK) {
      what += " (certificate refused: " + std::string(X509_verify_cert_error_string(verify)) +
              "; is ca_file the cluster's CA and the address one the certificate names?)";
    }
    close();
    return unavailable(what, ec);
  }
  uses_ = 0;
  return {};
}

void Connection::close() {
  if (stream_) {
    beast::error_code ignored;
    beast::get_lowest_layer(*stream_).socket().close(ignored);
    stream_.reset();
  }
  buffer_.clear();
  ioc_.restart();
}

void Connection::cancel_from_any_thread() {
  cancelled_ = true;
  net::post(ioc_, [this] {
    if (stream_) beast::get_lowest_layer(*stream_).cancel();
  });
}

Error Connection::unavailable(const std::string& what, const beast::error_code& ec) {
  if (ec == beast::error::timeout) return make_error(ErrorCode::DeadlineExceeded, what + ": timed out");
  std::string detail = ec.message();
  if (const auto more = openssl_errors(); !more.empty()) detail += " [" + more + "]";
  return make_error(ErrorCode::Unavailable, what + ": " + detail);
}

void Connection::run() {
  ioc_.restart();
  if (cancelled_ && stream_) beast::get_lowest_layer(*stream_).cancel();
  ioc_.run();
}

}  // namespace erdma::agent::kube::https
