// Loopback HTTPS server for tests (see tls_test_server.hpp).
#include "test/agent/kube/tls_test_server.hpp"

#include <sys/socket.h>

#include <cstdio>
#include <stdexcept>

#include <boost/asio/write.hpp>
#include <openssl/ssl.h>

namespace erdma::agent::kube::testing {

namespace net = boost::asio;
namespace ssl = net::ssl;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

ServerConn::ServerConn(tcp::socket socket, ssl::context& tls, int id) : stream_(std::move(socket), tls), id_(id) {}

void ServerConn::reply(unsigned status, const std::string& body, const std::string& content_type, bool close) {
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  res.set(http::field::content_type, content_type);
  res.body() = body;
  res.keep_alive(!close);
  res.prepare_payload();
  beast::error_code ec;
  http::write(stream_, res, ec);
  if (close) closing_ = true;
}

void ServerConn::write_raw(const std::string& bytes) {
  beast::error_code ec;
  net::write(stream_, net::buffer(bytes), ec);
}

void ServerConn::begin_chunked(unsigned status) {
  write_raw("HTTP/1.1 " + std::to_string(status) +
            " OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
}

void ServerConn::chunk(const std::string& data) {
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  write_raw(size + data + "\r\n");
}

void ServerConn::end_chunked() { write_raw("0\r\n\r\n"); }

void ServerConn::wait_for_client_close() {
  char byte = 0;
  beast::error_code ec;
  stream_.read_some(net::buffer(&byte, 1), ec);
  closing_ = true;
}

TlsTestServer::TlsTestServer(const std::string& cert_pem, const std::string& key_pem, Handler handler)
    : tls_(ssl::context::tls_server), acceptor_(ioc_), handler_(std::move(handler)) {
  tls_.use_certificate_chain(net::buffer(cert_pem));
  tls_.use_private_key(net::buffer(key_pem), ssl::context::pem);
  const tcp::endpoint ep(net::ip::make_address("127.0.0.1"), 0);
  acceptor_.open(ep.protocol());
  acceptor_.bind(ep);
  acceptor_.listen();
  port_ = acceptor_.local_endpoint().port();
  acceptor_thread_ = std::thread([this] { accept_loop(); });
}

TlsTestServer::~TlsTestServer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    // shutdown(2) wakes the threads blocked in accept and read; closing is left to their owners.
    ::shutdown(acceptor_.native_handle(), SHUT_RDWR);
    for (auto& c : conns_) ::shutdown(c->stream_.next_layer().native_handle(), SHUT_RDWR);
  }
  acceptor_thread_.join();
  for (auto& t : threads_) t.join();
}

void TlsTestServer::accept_loop() {
  while (true) {
    beast::error_code ec;
    tcp::socket socket(ioc_);
    acceptor_.accept(socket, ec);
    std::lock_guard<std::mutex> lock(mu_);
    if (ec || stopping_) return;
    auto conn = std::make_shared<ServerConn>(std::move(socket), tls_, ++accepted_);
    conns_.push_back(conn);
    threads_.emplace_back([this, conn] { serve(conn); });
  }
}

void TlsTestServer::serve(std::shared_ptr<ServerConn> conn) {
  beast::error_code ec;
  conn->stream_.handshake(ssl::stream_base::server, ec);
  if (ec) {
    std::lock_guard<std::mutex> lock(mu_);
    ++handshakes_failed_;
    return;
  }
  if (const char* sni = SSL_get_servername(conn->stream_.native_handle(), TLSEXT_NAMETYPE_host_name)) {
    conn->server_name_ = sni;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    server_names_.push_back(conn->server_name_);
  }
  while (!conn->closing_) {
    http::request<http::string_body> req;
    http::read(conn->stream_, conn->buffer_, req, ec);
    if (ec) break;
    {
      std::lock_guard<std::mutex> lock(mu_);
      received_.push_back(Received{conn->id_, std::string(req.method_string()), std::string(req.target()),
                                   std::string(req[http::field::authorization]), std::string(req[http::field::accept]),
                                   std::string(req[http::field::content_type]), req.body()});
    }
    handler_(*conn, req);
  }
  ::shutdown(conn->stream_.next_layer().native_handle(), SHUT_RDWR);
}

std::vector<Received> TlsTestServer::received() const {
  std::lock_guard<std::mutex> lock(mu_);
  return received_;
}

int TlsTestServer::connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_;
}

int TlsTestServer::handshakes_failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return handshakes_failed_;
}

std::vector<std::string> TlsTestServer::server_names() const {
  std::lock_guard<std::mutex> lock(mu_);
  return server_names_;
}

}  // namespace erdma::agent::kube::testing
