// The HTTPS client's transport: one TLS connection to the API server (Boost.Beast over OpenSSL),
// its operations run to completion on a private io_context with a deadline on every step, so a
// silent server costs one timeout and no thread; and the TLS client context those connections
// share. Internal to the agent's API client (agent_kube); callers use api.hpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "agent/kube/server_address.hpp"
#include "common/result.hpp"

namespace erdma::agent::kube::https {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using Clock = std::chrono::steady_clock;

// A TLS 1.2+ client context that trusts the PEM certificates of `ca_file` only and verifies the
// peer. FailedPrecondition when the file cannot be read or holds no usable PEM certificate.
[[nodiscard]] Result<std::unique_ptr<ssl::context>> client_tls_context(const std::string& ca_file);

class TrustFile;  // trust_file.hpp

// One TLS connection to the server and the io_context its operations run on. Each operation
// starts, then runs the context until it completes or its deadline passes (beast::error::timeout).
// Each open() takes the trust file's current CA context (a rotated CA serves the next connection).
// Not thread-safe, except cancel_from_any_thread(). `trust` and `endpoint` must outlive it.
class Connection {
 public:
  Connection(TrustFile& trust, const Endpoint& endpoint) : trust_(trust), endpoint_(endpoint) {}

  bool is_open() const { return stream_.has_value(); }
  bool reused() const { return uses_ > 0; }  // a request went over it already

  // TCP connect and TLS handshake, verifying the certificate's chain and name (or IP).
  // Errors: Unavailable (resolving, connecting, the handshake; a refused certificate says why),
  // DeadlineExceeded when `timeout` passes first.
  Result<void> open(Clock::duration timeout);

  // Each runs one Beast operation on the stream until it completes or `deadline` passes.
  template <class Message>
  beast::error_code write(Message& msg, Clock::time_point deadline) {
    ++uses_;
    return run_until(deadline, [&](auto done) { http::async_write(*stream_, msg, done); });
  }

  template <class Parser>
  beast::error_code read_header(Parser& parser, Clock::time_point deadline) {
    return run_until(deadline, [&](auto done) { http::async_read_header(*stream_, buffer_, parser, done); });
  }

  template <class Parser>
  beast::error_code read(Parser& parser, Clock::time_point deadline) {
    return run_until(deadline, [&](auto done) { http::async_read(*stream_, buffer_, parser, done); });
  }

  // What has arrived, at least one byte (for a stream: returns without waiting to fill the body
  // buffer, which async_read would).
  template <class Parser>
  beast::error_code read_some(Parser& parser, Clock::time_point deadline) {
    return run_until(deadline, [&](auto done) { http::async_read_some(*stream_, buffer_, parser, done); });
  }

  void close();

  // From another thread: the operation under way ends with operation_aborted, and so does every
  // later one (the flag is checked by run()).
  void cancel_from_any_thread();
  bool cancelled() const { return cancelled_; }

  // The Error for a failed step `what`: DeadlineExceeded for a timeout, else Unavailable with the
  // error's message and OpenSSL's queued errors.
  static Error unavailable(const std::string& what, const beast::error_code& ec);

 private:
  // Starts `op` with a completion handler, runs the context until it is called (or the stream's
  // expiry at `deadline` cancels it), and returns its error.
  template <class Start>
  beast::error_code run_until(Clock::time_point deadline, Start op) {
    beast::get_lowest_layer(*stream_).expires_at(deadline);
    beast::error_code ec = net::error::would_block;
    op([&ec](beast::error_code e, size_t) { ec = e; });
    run();
    return ec;
  }

  void run();

  net::io_context ioc_{1};
  TrustFile& trust_;
  const Endpoint& endpoint_;
  std::shared_ptr<ssl::context> tls_;  // the stream's: declared before it, so it outlives it
  std::optional<beast::ssl_stream<beast::tcp_stream>> stream_;
  beast::flat_buffer buffer_;
  int uses_ = 0;  // requests written since open()
  std::atomic<bool> cancelled_{false};
};

}  // namespace erdma::agent::kube::https
