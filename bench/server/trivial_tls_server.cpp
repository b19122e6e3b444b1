// trivial_tls_server: the floor for the admission server's cost per request. The same stack —
// Boost.Beast over Asio, OpenSSL, the same TLS context (webhook/server/tls_context) — reading each
// request with its body exactly as the admission server does, and answering a constant 200.
// Whatever the admission server spends beyond this is its own work (decode, mutate, encode, log,
// metrics). One thread, keep-alive, no timeouts: a benchmark tool, not a server.
//
// Usage: trivial_tls_server CERT KEY PORT_FILE   (listens on 127.0.0.1, port 0; writes the port)
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "webhook/server/tls_context.hpp"

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

namespace {

class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(tcp::socket&& s, std::shared_ptr<ssl::context> ctx) : ctx_(std::move(ctx)), stream_(std::move(s), *ctx_) {}

  void start() {
    stream_.async_handshake(ssl::stream_base::server, [self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->read();
    });
  }

 private:
  void read() {
    parser_.emplace();
    parser_->body_limit(8u << 20);
    http::async_read(stream_, buffer_, *parser_, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return;
      self->respond();
    });
  }

  void respond() {
    const bool keep = parser_->get().keep_alive();
    res_.emplace(http::status::ok, 11);
    res_->set(http::field::content_type, "application/json");
    res_->body() = "{}";
    res_->keep_alive(keep);
    res_->prepare_payload();
    parser_.reset();
    http::async_write(stream_, *res_, [self = shared_from_this(), keep](beast::error_code ec, std::size_t) {
      if (ec || !keep) return;
      self->read();
    });
  }

  std::shared_ptr<ssl::context> ctx_;
  beast::ssl_stream<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::optional<http::response<http::string_body>> res_;
};

void accept(tcp::acceptor& acc, const std::shared_ptr<ssl::context>& ctx) {
  acc.async_accept([&acc, ctx](beast::error_code ec, tcp::socket s) {
    if (!acc.is_open()) return;
    if (!ec) {
      beast::error_code ignored;
      s.set_option(tcp::no_delay(true), ignored);
      std::make_shared<Conn>(std::move(s), ctx)->start();
    }
    accept(acc, ctx);
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: trivial_tls_server CERT KEY PORT_FILE\n";
    return 2;
  }
  const auto now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto creds = erdma::webhook::server::load_tls_credentials(argv[1], argv[2], now);
  if (!creds) {
    std::cerr << "error: " << creds.error().message << "\n";
    return 1;
  }
  net::io_context ioc(1);
  tcp::acceptor acc(ioc, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
  {
    std::ofstream f(std::string(argv[3]) + ".tmp");
    f << "{\"https\":" << acc.local_endpoint().port() << "}\n";
  }
  std::rename((std::string(argv[3]) + ".tmp").c_str(), argv[3]);
  accept(acc, creds->context);
  net::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](beast::error_code, int) { ioc.stop(); });
  ioc.run();
  return 0;
}
