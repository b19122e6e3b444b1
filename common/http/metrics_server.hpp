// A small plain-HTTP/1.1 server for Prometheus scraping and probes (GET /metrics, /healthz, ...),
// on a port separate from anything that serves real traffic. Runs on the caller's io_context;
// bounded: header size, idle timeout, connection caps in all and per peer address. Handlers run
// on the io_context's threads and must not block.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>

#include "common/listen_address.hpp"
#include "common/metrics.hpp"
#include "common/result.hpp"

namespace erdma::common::http {

struct PlainAnswer {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Maps a GET path (query removed) to an answer; return status 404 for unknown paths.
using PlainHandler = std::function<PlainAnswer(std::string_view path)>;

// Readiness for /readyz: nullopt when ready, else why not (shown to whoever probes).
using NotReadyReason = std::function<std::optional<std::string>()>;

// The endpoints every erdma program serves on its plain-HTTP port:
//   /metrics  the registry's exposition (Prometheus text format)
//   /healthz  200 "ok" while the process answers at all (liveness)
//   /readyz   200 "ok", or 503 with the reason `not_ready` gives (readiness)
//   anything else 404, naming the paths that exist.
// `registry` must outlive the handler.
[[nodiscard]] PlainHandler probe_handler(const metrics::Registry& registry, NotReadyReason not_ready);

// At either cap a new connection closes the connection that has waited longest while reading a
// request (the peer's own at the peer's cap); it is refused only when every connection concerned
// is writing an answer. A probe (a new connection that sends its request at once) is therefore
// answered however many connections a client holds open, idle or dribbling a request: every
// request this port serves is one short GET that arrives whole. 16 per peer: kubelet probes come
// from the node's address, one connection each, and Prometheus keeps one per target.
struct PlainServerLimits {
  size_t max_connections = 64;
  size_t max_connections_per_peer = 16;
  unsigned timeout_seconds = 10;  // per read/write and keep-alive idle time
  size_t max_header_bytes = 8192;
};

class MetricsServer {
 public:
  MetricsServer(boost::asio::io_context& ioc, PlainHandler handler, PlainServerLimits limits = {});
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Binds and starts accepting. Errors: Unavailable (address in use, permission), InvalidArgument.
  [[nodiscard]] Status listen(const ListenAddress& address);
  // The bound port (useful after listening on port 0).
  [[nodiscard]] uint16_t port() const noexcept;
  // Stops accepting and closes open connections. Safe to call from any thread, more than once.
  void stop();
  // Connections closed to make room, and new ones closed at once (at a cap, nothing to evict).
  [[nodiscard]] uint64_t evicted() const noexcept;
  [[nodiscard]] uint64_t refused() const noexcept;

  struct State;  // implementation detail, shared with the connections

 private:
  std::shared_ptr<State> state_;
};

}  // namespace erdma::common::http
