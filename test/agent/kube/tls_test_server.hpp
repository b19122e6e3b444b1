// A loopback HTTPS server for the API client's tests: one thread per connection, blocking Beast
// calls, and a handler per request that answers as the test wants (a canned answer, raw bytes,
// a stream, silence, a closed connection).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace erdma::agent::kube::testing {

namespace http = boost::beast::http;

struct Received {
  int connection = 0;  // 1 for the first connection accepted, 2 for the next...
  std::string method;
  std::string target;
  std::string authorization;
  std::string accept;
  std::string content_type;
  std::string body;
};

// One accepted connection, handed to the handler with each request.
class ServerConn {
 public:
  ServerConn(boost::asio::ip::tcp::socket socket, boost::asio::ssl::context& tls, int id);
  // A whole answer with Content-Length (and Connection: close when `close`).
  void reply(unsigned status, const std::string& body, const std::string& content_type = "application/json",
             bool close = false);
  void write_raw(const std::string& bytes);
  // The header of a chunked answer, then chunks, then the last chunk.
  void begin_chunked(unsigned status);
  void chunk(const std::string& data);
  void end_chunked();
  // Blocks until the client sends something more or closes the connection (a server that has
  // accepted a request and never answers).
  void wait_for_client_close();
  // Closes the connection once the handler returns.
  void close() { closing_ = true; }

  int id() const { return id_; }
  std::string server_name() const { return server_name_; }  // SNI the client sent ("" = none)

 private:
  friend class TlsTestServer;
  boost::asio::ssl::stream<boost::asio::ip::tcp::socket> stream_;
  boost::beast::flat_buffer buffer_;
  int id_;
  bool closing_ = false;
  std::string server_name_;
};

class TlsTestServer {
 public:
  using Handler = std::function<void(ServerConn&, const http::request<http::string_body>&)>;

  // Listens on 127.0.0.1, port chosen by the kernel, with this certificate chain and key (PEM).
  TlsTestServer(const std::string& cert_pem, const std::string& key_pem, Handler handler);
  ~TlsTestServer();
  TlsTestServer(const TlsTestServer&) = delete;
  TlsTestServer& operator=(const TlsTestServer&) = delete;

  uint16_t port() const { return port_; }
  std::vector<Received> received() const;
  int connections() const;
  int handshakes_failed() const;
  std::vector<std::string> server_names() const;

 private:
  void accept_loop();
  void serve(std::shared_ptr<ServerConn> conn);

  boost::asio::io_context ioc_;
  boost::asio::ssl::context tls_;
  boost::asio::ip::tcp::acceptor acceptor_;
  Handler handler_;
  uint16_t port_ = 0;
  mutable std::mutex mu_;
  std::vector<Received> received_;
  std::vector<std::string> server_names_;
  std::vector<std::shared_ptr<ServerConn>> conns_;
  std::vector<std::thread> threads_;
  int accepted_ = 0;
  int handshakes_failed_ = 0;
  bool stopping_ = false;
  std::thread acceptor_thread_;
};

}  // namespace erdma::agent::kube::testing
