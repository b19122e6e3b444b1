// The HTTPS/1.1 admission listener: accepts TLS connections and runs one session per connection
// (Boost.Beast over Asio and OpenSSL), each on its own strand, calling handle() for every request.
// Bounded everywhere: handshake, header, body and idle timeouts, header and body size caps, one
// byte budget for the bodies of all connections together (common/byte_budget.hpp; a body that
// does not fit is answered 429 before it is read), caps on open connections in all and per peer
// address that evict idle connections before refusing new ones (common/connection_slots.hpp). Nothing blocks an I/O
// thread and no exception crosses an Asio callback.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "common/byte_budget.hpp"
#include "common/listen_address.hpp"
#include "common/result.hpp"
#include "webhook/core/config.hpp"
#include "webhook/server/current.hpp"
#include "webhook/server/server_metrics.hpp"
#include "webhook/server/tls_context.hpp"

namespace erdma::webhook::server {

struct ListenerLimits {
  size_t max_body_bytes = 8u << 20;  // larger bodies get 413, decided from the headers when they say
  // What the bodies of every connection may hold together, reserved before a body is read (from
  // its Content-Length; a chunked body as it grows) and given back once it is answered or its
  // connection closes. A body that does not fit is answered 429 with Retry-After, unread.
  // total - reserve must be at least max_body_bytes (serve_options checks it).
  common::ByteBudget::Limits body_budget{};
  size_t max_header_bytes = 16u << 10;  // larger request headers get 431
  // At either cap a new connection closes the connection that has waited longest for a request
  // (one that never carried an AdmissionReview first, the peer's own at the peer's cap); only
  // when every connection concerned is mid-request is the new one closed at once. Counted.
  size_t max_connections = 1024;
  size_t max_connections_per_peer = 64;
  // Each phase of a request is bounded well below the apiserver's default timeoutSeconds (10 s).
  std::chrono::milliseconds handshake_timeout{5000};
  std::chrono::milliseconds header_timeout{5000};  // from the first byte of a request to its last header
  std::chrono::milliseconds body_timeout{8000};
  std::chrono::milliseconds write_timeout{5000};
  // Longer than the 90 s idle timeout of Go's HTTP transport (what kube-apiserver uses), so the
  // client, not the server, retires an idle connection and no request races a server-side close.
  std::chrono::milliseconds idle_timeout{120000};
  // The idle timeout of a connection that has not yet carried an AdmissionReview (a probe, a
  // scanner, a client holding slots): the apiserver's connections earn the long one at once.
  std::chrono::milliseconds idle_timeout_before_review{15000};
  // Closing: how long to wait for the peer's close_notify after sending ours, and how long to
  // keep discarding a request body still arriving after an early error answer (413, 431, 400).
  std::chrono::milliseconds shutdown_timeout{500};
  std::chrono::milliseconds linger_timeout{10000};
};

class Listener {
 public:
  // `tls` and `config` are read for every new connection / request; swap them to reload.
  Listener(boost::asio::io_context& ioc, Current<SslContext>& tls, Current<const Config>& config,
           ServerMetrics& metrics, ListenerLimits limits);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Binds and starts accepting. Errors: InvalidArgument (address), Unavailable (in use, denied).
  [[nodiscard]] Status listen(const common::ListenAddress& address);
  [[nodiscard]] uint16_t port() const noexcept;

  // Starts a graceful drain: /readyz answers 503, the listening socket closes, connections
  // waiting for a request are closed, requests in progress finish and get "Connection: close".
  // Thread-safe, idempotent.
  void drain();
  [[nodiscard]] bool draining() const noexcept;
  [[nodiscard]] size_t open_connections() const noexcept;

  struct State;  // shared with the sessions

 private:
  std::shared_ptr<State> state_;
};

}  // namespace erdma::webhook::server
