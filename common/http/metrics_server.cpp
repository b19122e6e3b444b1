// Plain-HTTP metrics/probe server on Boost.Beast (see metrics_server.hpp).
#include "common/http/metrics_server.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/connection_slots.hpp"

namespace erdma::common::http {
namespace {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

class PlainSession;

}  // namespace

struct MetricsServer::State : std::enable_shared_from_this<MetricsServer::State> {
  State(net::io_context& io, PlainHandler h, PlainServerLimits l)
      : ioc(io),
        acceptor(net::make_strand(io)),
        handler(std::move(h)),
        limits(l),
        slots({l.max_connections, l.max_connections_per_peer}) {}

  net::io_context& ioc;
  tcp::acceptor acceptor;
  PlainHandler handler;
  PlainServerLimits limits;
  std::atomic<size_t> open{0};
  std::atomic<bool> stopped{false};
  std::atomic<uint64_t> evicted{0};
  std::atomic<uint64_t> refused{0};
  uint16_t port = 0;
  std::mutex mu;  // guards slots and sessions
  ConnectionSlots slots;
  std::unordered_map<uint64_t, std::weak_ptr<PlainSession>> sessions;  // by slot id

  void accept();
  void admit(tcp::socket socket);
  void set_idle(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    slots.set_idle(id);
  }
  void set_busy(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    slots.set_busy(id);
  }
};

namespace {

class PlainSession : public std::enable_shared_from_this<PlainSession> {
 public:
  PlainSession(tcp::socket&& socket, std::shared_ptr<MetricsServer::State> state, uint64_t id)
      : stream_(std::move(socket)), state_(std::move(state)), id_(id) {}
  ~PlainSession() {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->sessions.erase(id_);
      state_->slots.release(id_);
    }
    state_->open.fetch_sub(1);
  }

  void run() {
    net::dispatch(stream_.get_executor(), beast::bind_front_handler(&PlainSession::do_read, shared_from_this()));
  }

  // From any thread: its slot went to a new connection. Closed now if it is reading a request
  // (all this port serves arrive whole, so one still arriving is a client holding the slot);
  // an answer being written is finished first.
  void evict() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      self->evicted_ = true;
      if (self->reading_) self->stream_.cancel();
    });
  }

 private:
  void do_read() {
    if (state_->stopped.load() || evicted_) return close();
    reading_ = true;
    state_->set_idle(id_);
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(state_->limits.max_header_bytes));
    parser_->body_limit(0);  // GET only; any body is refused
    stream_.expires_after(std::chrono::seconds(state_->limits.timeout_seconds));
    bhttp::async_read(stream_, buffer_, *parser_,
                      beast::bind_front_handler(&PlainSession::on_read, shared_from_this()));
  }

  void on_read(beast::error_code ec, std::size_t) {
    reading_ = false;
    state_->set_busy(id_);
    if (ec) {
      // Timeouts, resets and clients that just close: nothing to answer.
      if (ec == bhttp::error::header_limit) return reply_error(bhttp::status::request_header_fields_too_large);
      if (ec == bhttp::error::body_limit) return reply_error(bhttp::status::payload_too_large);
      if (ec != bhttp::error::end_of_stream && ec != net::error::operation_aborted && ec != beast::error::timeout &&
          ec != net::error::connection_reset) {
        return reply_error(bhttp::status::bad_request);
      }
      return close();
    }
    const auto& req = parser_->get();
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>();
    res->version(req.version());
    res->keep_alive(req.keep_alive());
    if (req.method() != bhttp::verb::get && req.method() != bhttp::verb::head) {
      res->result(bhttp::status::method_not_allowed);
      res->set(bhttp::field::allow, "GET, HEAD");
      res->set(bhttp::field::content_type, "text/plain; charset=utf-8");
      res->body() = "method not allowed\n";
    } else {
      std::string_view target(req.target().data(), req.target().size());
      if (auto q = target.find('?'); q != std::string_view::npos) target = target.substr(0, q);
      PlainAnswer a = state_->handler(target);
      res->result(a.status);
      res->set(bhttp::field::content_type, a.content_type);
      if (req.method() == bhttp::verb::get) res->body() = std::move(a.body);
    }
    res->prepare_payload();
    write(std::move(res));
  }

  void reply_error(bhttp::status status) {
    auto res = std::make_shared<bhttp::response<bhttp::string_body>>(status, 11);
    res->set(bhttp::field::content_type, "text/plain; charset=utf-8");
    res->body() = std::string(bhttp::obsolete_reason(status)) + "\n";
    res->keep_alive(false);
    res->prepare_payload();
    write(std::move(res));
  }

  void write(std::shared_ptr<bhttp::response<bhttp::string_body>> res) {
    stream_.expires_after(std::chrono::seconds(state_->limits.timeout_seconds));
    bhttp::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      if (!res->keep_alive() || self->evicted_) return self->linger_close();
      self->do_read();
    });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.close();
  }

  // After an error answer the client may still be sending (an oversized header, say). Closing at
  // once with unread data makes the kernel send RST, which can destroy the answer before the
  // client reads it; so stop sending, drain briefly, then close.
  void linger_close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(2));
    drain();
  }

  void drain() {
    stream_.async_read_some(net::buffer(drain_buf_), [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->stream_.close();
      self->drain();
    });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  char drain_buf_[4096];
  std::shared_ptr<MetricsServer::State> state_;
  uint64_t id_;
  bool reading_ = false;  // strand only
  bool evicted_ = false;  // strand only
};

}  // namespace

void MetricsServer::State::accept() {
  acceptor.async_accept(net::make_strand(ioc), [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
    if (self->stopped.load() || !self->acceptor.is_open()) return;
    if (!ec) self->admit(std::move(socket));
    self->accept();
  });
}

// A new connection takes a slot, or closes at once; at a cap the connection the slots pick is
// closed to make room.
void MetricsServer::State::admit(tcp::socket socket) {
  beast::error_code ec;
  auto address = socket.remote_endpoint(ec).address();
  if (ec) return;
  // An IPv4 client of a dual-stack listener appears as ::ffff:a.b.c.d; one peer either way.
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6());
  }
  std::shared_ptr<PlainSession> victim;
  std::shared_ptr<PlainSession> session;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto a = slots.admit(address.to_string(), true);  // reading its first request
    if (a.verdict != ConnectionSlots::Verdict::Admitted) {
      // Every connection concerned is writing an answer: close at once rather than queue.
      refused.fetch_add(1);
      beast::error_code ignored;
      socket.close(ignored);
      return;
    }
    if (a.evicted) {
      evicted.fetch_add(1);
      if (auto it = sessions.find(*a.evicted); it != sessions.end()) victim = it->second.lock();
    }
    open.fetch_add(1);
    session = std::make_shared<PlainSession>(std::move(socket), shared_from_this(), a.id);
    sessions.emplace(a.id, session);
  }
  if (victim) victim->evict();
  session->run();
}

MetricsServer::MetricsServer(net::io_context& ioc, PlainHandler handler, PlainServerLimits limits)
    : state_(std::make_shared<State>(ioc, std::move(handler), limits)) {}

MetricsServer::~MetricsServer() { stop(); }

Status MetricsServer::listen(const ListenAddress& address) {
  beast::error_code ec;
  const auto ip = net::ip::make_address(address.host, ec);
  if (ec) return make_error(ErrorCode::InvalidArgument, "metrics listen address " + address.host + ": " + ec.message());
  const tcp::endpoint ep(ip, address.port);
  auto& acc = state_->acceptor;
  const std::string where = address.host + ":" + std::to_string(address.port);
  if (acc.open(ep.protocol(), ec); ec)
    return make_error(ErrorCode::Unavailable, "metrics " + where + ": " + ec.message());
  if (acc.set_option(net::socket_base::reuse_address(true), ec); ec) {
    return make_error(ErrorCode::Unavailable, "metrics " + where + ": " + ec.message());
  }
  if (acc.bind(ep, ec); ec) return make_error(ErrorCode::Unavailable, "metrics " + where + ": " + ec.message());
  if (acc.listen(net::socket_base::max_listen_connections, ec); ec) {
    return make_error(ErrorCode::Unavailable, "metrics " + where + ": " + ec.message());
  }
  state_->port = acc.local_endpoint(ec).port();
  state_->accept();
  return {};
}

PlainHandler probe_handler(const metrics::Registry& registry, NotReadyReason not_ready) {
  return [&registry, not_ready = std::move(not_ready)](std::string_view path) {
    PlainAnswer a;
    if (path == "/metrics") {
      a.content_type = metrics::kContentType;
      a.body = registry.expose();
    } else if (path == "/healthz") {
      a.body = "ok\n";
    } else if (path == "/readyz") {
      const auto reason = not_ready ? not_ready() : std::nullopt;
      a.status = reason ? 503 : 200;
      a.body = reason ? *reason + "\n" : "ok\n";
    } else {
      a.status = 404;
      a.body = "not found; this port serves /metrics, /healthz and /readyz\n";
    }
    return a;
  };
}

uint16_t MetricsServer::port() const noexcept { return state_->port; }

uint64_t MetricsServer::evicted() const noexcept { return state_->evicted.load(); }

uint64_t MetricsServer::refused() const noexcept { return state_->refused.load(); }

void MetricsServer::stop() {
  if (state_->stopped.exchange(true)) return;
  net::post(state_->acceptor.get_executor(), [s = state_] {
    beast::error_code ignored;
    s->acceptor.close(ignored);
  });
}

}  // namespace erdma::common::http
