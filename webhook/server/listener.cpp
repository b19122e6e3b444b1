// The HTTPS listener and its sessions (see listener.hpp). The only translation unit of the
// admission server that includes Boost.Beast's HTTP and SSL headers.
#include "webhook/server/listener.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "common/connection_slots.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "webhook/server/handler.hpp"

namespace erdma::webhook::server {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
namespace log = common::log;
using tcp = net::ip::tcp;

namespace {

class Session;

// The request bodies' byte budget, shared by every session: common::ByteBudget under a mutex, its
// use mirrored in erdma_webhook_body_budget_used_bytes. Thread-safe.
class BodyBudget {
 public:
  BodyBudget(common::ByteBudget::Limits limits, ServerMetrics& metrics) : budget_(limits), metrics_(metrics) {
    metrics_.set_body_budget(limits.total);
  }

  [[nodiscard]] bool grow(size_t held, size_t want) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!budget_.grow(held, want)) return false;
    metrics_.set_body_budget_used(budget_.used());
    return true;
  }

  void release(size_t held) {
    std::lock_guard<std::mutex> lock(mu_);
    budget_.release(held);
    metrics_.set_body_budget_used(budget_.used());
  }

  [[nodiscard]] size_t used() {
    std::lock_guard<std::mutex> lock(mu_);
    return budget_.used();
  }

  [[nodiscard]] const common::ByteBudget::Limits& limits() const noexcept { return budget_.limits(); }

 private:
  std::mutex mu_;
  common::ByteBudget budget_;
  ServerMetrics& metrics_;
};

// One body's share of the budget; given back when the body is freed (answered, refused, or its
// connection closed), whichever way that happens. Move-only.
class BodyReservation {
 public:
  BodyReservation() = default;
  explicit BodyReservation(std::shared_ptr<BodyBudget> budget) : budget_(std::move(budget)) {}
  BodyReservation(BodyReservation&& other) noexcept
      : budget_(std::move(other.budget_)), held_(std::exchange(other.held_, 0)) {}
  BodyReservation& operator=(BodyReservation&& other) noexcept {
    if (this != &other) {
      reset();
      budget_ = std::move(other.budget_);
      held_ = std::exchange(other.held_, 0);
    }
    return *this;
  }
  BodyReservation(const BodyReservation&) = delete;
  BodyReservation& operator=(const BodyReservation&) = delete;
  ~BodyReservation() { reset(); }

  // Makes the reservation at least `bytes`; false (nothing changed) when that does not fit now.
  [[nodiscard]] bool grow_to(size_t bytes) {
    if (bytes <= held_) return true;
    if (!budget_) {
      // Every session attaches the budget before it reads a body: a body read outside it would
      // be the unbounded memory the budget exists to prevent.
      log::error("request body read without a body budget");
      std::abort();
    }
    if (!budget_->grow(held_, bytes)) return false;
    held_ = bytes;
    return true;
  }

  [[nodiscard]] size_t held() const noexcept { return held_; }

 private:
  void reset() noexcept {
    if (budget_ && held_ > 0) budget_->release(held_);
    held_ = 0;
  }

  std::shared_ptr<BodyBudget> budget_;
  size_t held_ = 0;
};

// What a body reader reports when the budget has no room for the body's next growth; the session
// answers it with 429.
beast::error_code over_budget_error() {
  return boost::system::errc::make_error_code(boost::system::errc::not_enough_memory);
}

// A request body read into one heap block with kBodyPadding spare bytes after it: the reviewer
// parses it where it lies (no padded copy), and no byte is zero-filled before being overwritten
// (Beast's string_body resizes, i.e. zero-fills, before each copy). A body with a Content-Length
// (checked against the limit before reading) is allocated once at that size. Every allocation is
// first reserved in the body budget (capacity bytes; the padding is not counted); the reader fails
// with over_budget_error() when it does not fit.
struct PaddedBody {
  struct value_type {
    std::unique_ptr<char[]> data;
    size_t size = 0;
    size_t capacity = 0;                                // without the padding
    size_t limit = std::numeric_limits<size_t>::max();  // the largest body accepted (body_limit)
    BodyReservation reservation;                        // declared after data: given back once data is freed

    std::string_view view() const noexcept { return {data.get(), size}; }
  };

  class reader {
   public:
    template <bool IsRequest, class Fields>
    reader(http::header<IsRequest, Fields>& /*header*/, value_type& body) : body_(body) {}

    void init(const boost::optional<std::uint64_t>& length, beast::error_code& ec) {
      ec = {};
      body_.size = 0;
      if (!grow(length ? static_cast<size_t>(*length) : std::min(kUnknownLengthStart, body_.limit))) {
        ec = over_budget_error();
      }
    }

    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, beast::error_code& ec) {
      ec = {};
      const size_t n = net::buffer_size(buffers);
      if (n > body_.capacity - body_.size) {
        // Chunked: double, but never past the body limit, and when the doubled size does not fit
        // the budget, try the bytes needed now.
        const size_t needed = body_.size + n;
        const size_t doubled = std::max(needed, std::min(body_.capacity * 2, body_.limit));
        if (!grow(doubled) && (doubled == needed || !grow(needed))) {
          ec = over_budget_error();
          return 0;
        }
      }
      body_.size += net::buffer_copy(net::buffer(body_.data.get() + body_.size, n), buffers);
      return n;
    }

    void finish(beast::error_code& ec) { ec = {}; }

   private:
    static constexpr size_t kUnknownLengthStart = 4096;  // chunked bodies grow by doubling

    // False when the budget has no room for `capacity` bytes now.
    [[nodiscard]] bool grow(size_t capacity) {
      if (body_.data && capacity <= body_.capacity) return true;
      if (!body_.reservation.grow_to(capacity)) return false;
      std::unique_ptr<char[]> bigger(new char[capacity + kBodyPadding]);
      if (body_.size != 0) std::memcpy(bigger.get(), body_.data.get(), body_.size);
      body_.data = std::move(bigger);
      body_.capacity = capacity;
      return true;
    }

    value_type& body_;
  };
};

// One Reviewer per I/O thread: it owns a simdjson parser whose buffers are reused across requests.
Reviewer& thread_reviewer() {
  thread_local Reviewer reviewer;
  return reviewer;
}

bool is_http_parse_error(const beast::error_code& ec) {
  return &ec.category() == &http::make_error_code(http::error::bad_target).category();
}

// The one error sink for connection-level failures. Expected endings (the peer went away, a
// timeout, our own cancellation) are not errors and are not logged.
void fail(const beast::error_code& ec, const char* what, uint64_t conn) {
  // A peer that closes TCP without a TLS close_notify produces stream_truncated. Every HTTP
  // client we serve frames its messages (Content-Length or chunked), so a truncation cannot cut
  // a message short unnoticed; the error is only noise (see Boost.Beast issue #38).
  if (ec == ssl::error::stream_truncated || ec == net::error::operation_aborted || ec == beast::error::timeout ||
      ec == net::error::eof || ec == net::error::connection_reset || ec == net::error::broken_pipe) {
    return;
  }
  log::debug("connection error").kv("conn", conn).kv("during", what).kv("error", ec.message());
}

using HandshakeFailure = ServerMetrics::HandshakeFailure;

HandshakeFailure classify_handshake_error(const beast::error_code& ec) {
  if (ec == beast::error::timeout) return HandshakeFailure::Timeout;
  if (ec == ssl::error::stream_truncated || ec == net::error::eof || ec == net::error::connection_reset ||
      ec == net::error::broken_pipe || ec == net::error::operation_aborted) {
    return HandshakeFailure::Closed;
  }
  if (&ec.category() == &net::error::get_ssl_category()) {
    switch (ERR_GET_REASON(static_cast<unsigned long>(ec.value()))) {
      case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
      case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
      case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
      case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
      case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE: return HandshakeFailure::UntrustedCertificate;
      case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
      case SSL_R_CERTIFICATE_VERIFY_FAILED: return HandshakeFailure::ClientCertificate;
      case SSL_R_UNSUPPORTED_PROTOCOL:
      case SSL_R_WRONG_VERSION_NUMBER:
      case SSL_R_VERSION_TOO_LOW:
      case SSL_R_HTTP_REQUEST:
      case SSL_R_NO_SHARED_CIPHER: return HandshakeFailure::Protocol;
      default: break;
    }
  }
  return HandshakeFailure::Other;
}

// True at most once per 10 s for each `last`: handshake failures that need an operator are logged
// at warn, but the apiserver retries every pod creation and would flood the log.
bool warn_due(std::atomic<int64_t>& last) {
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  int64_t prev = last.load();
  return now - prev >= 10 && last.compare_exchange_strong(prev, now);
}

// A client refusing the serving certificate needs an operator: the caBundle in the webhook
// configuration does not match the certificate.
void warn_untrusted(const beast::error_code& ec, const tcp::endpoint& peer) {
  static std::atomic<int64_t> last{0};
  if (!warn_due(last)) return;
  log::warn("a client refused the serving certificate; check that the caBundle of the webhook "
            "configuration holds the CA that signed it")
      .kv("peer", peer.address().to_string())
      .kv("error", ec.message());
}

// With --client-ca: why this client's certificate was refused. OpenSSL drops a certificate that
// failed verification, so the reason comes from the error and the verify result.
std::string client_certificate_problem(const beast::error_code& ec, SSL* ssl) {
  if (ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) {
    return "no client certificate presented";
  }
  const long result = SSL_get_verify_result(ssl);
  return std::string("client certificate refused: ") +
         (result != X509_V_OK ? X509_verify_cert_error_string(result) : "verification failed");
}

// A refused client certificate: every connection gets one debug line with the reason, and a
// warn line (at most one per 10 s) tells the operator what to check. A kubelet HTTPS probe sent
// to this port (it presents no certificate) shows up here too.
void log_client_certificate_refused(const std::string& problem, const tcp::endpoint& peer, uint64_t conn) {
  static std::atomic<int64_t> last{0};
  log::debug("handshake refused: client certificate")
      .kv("conn", conn)
      .kv("peer", peer.address().to_string())
      .kv("error", problem);
  if (!warn_due(last)) return;
  log::warn("a client was refused for its TLS client certificate (--client-ca); check that kube-apiserver's "
            "admission kubeconfig gives a client certificate signed by that CA, and that no HTTPS probe "
            "targets this port (probe the metrics port instead)")
      .kv("conn", conn)
      .kv("peer", peer.address().to_string())
      .kv("error", problem);
}

}  // namespace

struct Listener::State : std::enable_shared_from_this<Listener::State> {
  State(net::io_context& io, Current<SslContext>& t, Current<const Config>& c, ServerMetrics& m, ListenerLimits l)
      : ioc(io),
        acceptor(net::make_strand(io)),
        retry(acceptor.get_executor()),
        tls(t),
        config(c),
        metrics(m),
        limits(l),
        slots({l.max_connections, l.max_connections_per_peer}),
        body_budget(std::make_shared<BodyBudget>(l.body_budget, m)),
        large_reviews(net::make_strand(io)) {}

  net::io_context& ioc;
  tcp::acceptor acceptor;
  net::steady_timer retry;  // backs off after accept errors such as EMFILE
  Current<SslContext>& tls;
  Current<const Config>& config;
  ServerMetrics& metrics;
  ListenerLimits limits;
  std::atomic<size_t> open{0};
  std::atomic<bool> draining{false};
  uint16_t port = 0;
  std::mutex sessions_mu;                                         // guards sessions and slots
  std::unordered_map<uint64_t, std::weak_ptr<Session>> sessions;  // by slot id
  common::ConnectionSlots slots;
  std::shared_ptr<BodyBudget> body_budget;  // shared with every body's reservation
  // Reviews of bodies the parser does not keep buffers for run here, one at a time (Session::on_body).
  net::strand<net::io_context::executor_type> large_reviews;

  void accept();
  void admit(tcp::socket socket);
  // The sessions tell the slots when they wait for a request (evictable) and when they work.
  void set_idle(uint64_t id) {
    std::lock_guard<std::mutex> lock(sessions_mu);
    slots.set_idle(id);
    metrics.set_connections_idle(slots.idle());
  }
  void set_busy(uint64_t id) {
    std::lock_guard<std::mutex> lock(sessions_mu);
    slots.set_busy(id);
    metrics.set_connections_idle(slots.idle());
  }
  // A closed session gives its slot back; the idle gauge changes under the same lock as the slots.
  void release(uint64_t id) {
    std::lock_guard<std::mutex> lock(sessions_mu);
    sessions.erase(id);
    slots.release(id);
    metrics.set_connections_idle(slots.idle());
  }
  void set_proven(uint64_t id) {
    std::lock_guard<std::mutex> lock(sessions_mu);
    slots.set_proven(id);
  }
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket&& socket, std::shared_ptr<SslContext> ctx, std::shared_ptr<Listener::State> state, uint64_t id)
      : ctx_(std::move(ctx)), stream_(std::move(socket), *ctx_), state_(std::move(state)), id_(id) {}

  ~Session() {
    state_->release(id_);
    state_->open.fetch_sub(1);
    state_->metrics.connection_closed();
  }

  // Registered by the acceptor under the sessions lock, with its slot.
  void start() {
    net::dispatch(stream_.get_executor(), beast::bind_front_handler(&Session::do_handshake, shared_from_this()));
  }

  // From any thread: close if waiting for a request; a request in progress finishes first.
  void drain() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->phase_ == Phase::Idle) self->lowest().cancel();
    });
  }

  // From any thread: the slots gave this connection's place to a new one. Closed now if it is
  // waiting for a request; a request that has started meanwhile is answered with
  // "Connection: close".
  void evict() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      self->evicted_ = true;
      if (self->phase_ == Phase::Idle) self->lowest().cancel();
    });
  }

 private:
  enum class Phase { Handshake, Idle, Request, Closing };

  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }
  const ListenerLimits& limits() const { return state_->limits; }

  void do_handshake() {
    lowest().expires_after(limits().handshake_timeout);
    stream_.async_handshake(ssl::stream_base::server,
                            beast::bind_front_handler(&Session::on_handshake, shared_from_this()));
  }

  void on_handshake(beast::error_code ec) {
    // Plain HTTP, TLS 1.1 and scanners end here: the connection is closed, never served.
    if (ec) {
      const auto why = classify_handshake_error(ec);
      state_->metrics.handshake_failed(why);
      if (why == HandshakeFailure::UntrustedCertificate) {
        beast::error_code ignored;
        warn_untrusted(ec, lowest().socket().remote_endpoint(ignored));
      } else if (why == HandshakeFailure::ClientCertificate) {
        beast::error_code ignored;
        log_client_certificate_refused(client_certificate_problem(ec, stream_.native_handle()),
                                       lowest().socket().remote_endpoint(ignored), id_);
      } else {
        fail(ec, "handshake", id_);
      }
      return close_socket();
    }
    read_request(true);
  }

  // Waits for the first byte of the next request (idle time), then reads its header (header
  // time). Pipelined requests already in the buffer skip the wait.
  void read_request(bool first) {
    if (state_->draining.load() || evicted_) return do_close(false);
    if (buffer_.size() == 0) {
      phase_ = Phase::Idle;
      state_->set_idle(id_);
      lowest().expires_after(first       ? limits().header_timeout
                             : reviewed_ ? limits().idle_timeout
                                         : std::min(limits().idle_timeout, limits().idle_timeout_before_review));
      stream_.async_read_some(buffer_.prepare(kReadChunk),
                              beast::bind_front_handler(&Session::on_first_bytes, shared_from_this()));
      return;
    }
    read_header();
  }

  void on_first_bytes(beast::error_code ec, std::size_t n) {
    buffer_.commit(n);
    if (ec) {
      if (ec == net::error::operation_aborted) return do_close(false);  // draining or evicted
      if (ec == beast::error::timeout) return;                          // idle too long; the stream closed the socket
      fail(ec, "read", id_);
      return close_socket();
    }
    read_header();
  }

  void read_header() {
    if (phase_ == Phase::Idle) state_->set_busy(id_);
    phase_ = Phase::Request;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(limits().max_header_bytes));
    parser_->body_limit(static_cast<uint64_t>(limits().max_body_bytes));
    auto& body = parser_->get().body();
    body.limit = limits().max_body_bytes;
    body.reservation = BodyReservation(state_->body_budget);
    lowest().expires_after(limits().header_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&Session::on_header, shared_from_this()));
  }

  void on_header(beast::error_code ec, std::size_t) {
    if (ec) return on_read_error(ec, "read header");
    const auto len = parser_->content_length();
    if (len && *len > limits().max_body_bytes) return reply_error(http::status::payload_too_large, too_large_message());
    // Reserved before anything is read (or 100-continue sent): a body that does not fit now is
    // never buffered.
    if (len && !parser_->get().body().reservation.grow_to(static_cast<size_t>(*len))) {
      return refuse_over_budget("request body of " + std::to_string(*len) + " bytes");
    }
    const auto& req = parser_->get();
    if (req.version() >= 11 && common::iequals(req[http::field::expect], "100-continue")) {
      // The client waits for this before sending the body (curl does for large bodies).
      continue_.emplace(http::status::continue_, req.version());
      lowest().expires_after(limits().write_timeout);
      http::async_write(stream_, *continue_, [self = shared_from_this()](beast::error_code wec, std::size_t) {
        if (wec) {
          fail(wec, "write 100-continue", self->id_);
          return self->close_socket();
        }
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    lowest().expires_after(limits().body_timeout);
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::on_body, shared_from_this()));
  }

  void on_body(beast::error_code ec, std::size_t) {
    if (ec) return on_read_error(ec, "read body");
    // Decoding takes simdjson buffers of up to about 14 bytes per byte of JSON. Up to
    // kMaxKeptParserCapacity the I/O thread's parser already holds them; a larger body makes it
    // allocate (and free afterwards) that much more. Such bodies are reviewed one at a time in
    // the process, on a strand of their own, so that memory is needed once, not once per I/O
    // thread; no thread waits for it, and smaller bodies never queue behind them. The session
    // does nothing else meanwhile, and the answer goes out from its own strand.
    if (parser_->get().body().size > Reviewer::kMaxKeptParserCapacity) {
      return net::post(state_->large_reviews, [self = shared_from_this()] {
        self->serve();
        net::dispatch(self->stream_.get_executor(), [self] { self->answer(); });
      });
    }
    serve();
    answer();
  }

  void on_read_error(const beast::error_code& ec, const char* during) {
    if (ec == http::error::header_limit) {
      return reply_error(http::status::request_header_fields_too_large,
                         "request header larger than " + std::to_string(limits().max_header_bytes) + " bytes");
    }
    if (ec == http::error::body_limit) return reply_error(http::status::payload_too_large, too_large_message());
    if (ec == over_budget_error()) {
      return refuse_over_budget("chunked request body (" + std::to_string(parser_->get().body().size) +
                                " bytes so far)");
    }
    if (ec == beast::error::timeout) return;  // a slow client; the stream closed the socket
    if (ec == http::error::end_of_stream || ec == http::error::partial_message) return close_socket();
    if (is_http_parse_error(ec))
      return reply_error(http::status::bad_request, "malformed HTTP request: " + ec.message());
    fail(ec, during, id_);
    close_socket();
  }

  // 429 for a body that does not fit the body budget now, with Retry-After: kube-apiserver's
  // webhook client retries a 429, and by then the bodies in progress have been answered. The rest
  // of the body is discarded unread, as after a 413.
  void refuse_over_budget(const std::string& what) {
    static std::atomic<int64_t> last_warned{0};
    state_->metrics.body_budget_refused();
    const auto& b = state_->body_budget->limits();
    const size_t used = state_->body_budget->used();
    if (warn_due(last_warned)) {
      log::warn("request bodies refused with 429: the body budget is taken by bodies in progress (the apiserver "
                "retries; if this persists with legitimate traffic, raise --body-budget with the memory limit)")
          .kv("conn", id_)
          .kv("body", what)
          .kv("budget_used", static_cast<uint64_t>(used))
          .kv("budget", static_cast<uint64_t>(b.total));
    }
    reply_error(http::status::too_many_requests,
                what + " does not fit the webhook's body budget now (" + std::to_string(used) + " of " +
                    std::to_string(b.total) +
                    " bytes held by requests in progress, --body-budget); retry after 1 second",
                "1");
  }

  std::string too_large_message() const {
    return "request body larger than " + std::to_string(limits().max_body_bytes) + " bytes (--max-body-bytes)";
  }

  // Decides the answer into res_. Runs on the session's strand, or on large_reviews while the
  // session waits for it (nothing else of the session runs meanwhile).
  void serve() {
    const auto& req = parser_->get();
    HttpRequest in;
    in.method = req.method_string();
    in.target = req.target();
    in.content_type = req[http::field::content_type];
    in.body = req.body().view();
    in.body_padded = true;
    const ConfigPtr cfg = state_->config.get();
    const bool draining = state_->draining.load();
    const auto t0 = std::chrono::steady_clock::now();
    HttpResponse out = handle(in, *cfg, thread_reviewer(), !draining);
    const auto elapsed = std::chrono::steady_clock::now() - t0;
    if (out.admission) {
      record(*out.admission, elapsed);
      if (out.admission->outcome != Outcome::Invalid && !reviewed_) {
        reviewed_ = true;  // the apiserver's: the long idle timeout, evicted after strangers
        state_->set_proven(id_);
      }
    }

    res_.emplace(static_cast<http::status>(out.status), req.version());
    res_->set(http::field::content_type, out.content_type);
    if (!out.allow.empty()) res_->set(http::field::allow, out.allow);
    res_->keep_alive(req.keep_alive() && !draining);
    if (req.method() == http::verb::head) {
      res_->content_length(out.body.size());
    } else {
      res_->body() = std::move(out.body);
      res_->prepare_payload();
    }
    parser_.reset();  // frees the request body (and gives back its budget) before the response goes out
  }

  // On the session's strand, after serve(): evicted_ is written there.
  void answer() {
    if (evicted_) res_->keep_alive(false);
    write(false);
  }

  void record(const ReviewResult& rec, std::chrono::steady_clock::duration elapsed) {
    const double seconds = std::chrono::duration<double>(elapsed).count();
    state_->metrics.record_admission(rec.outcome, rec.warning_counts, seconds);
    const bool bad = rec.outcome == Outcome::Invalid;
    if (!log::enabled(bad ? log::Level::Warn : log::Level::Info)) return;
    log::Line line(bad ? log::Level::Warn : log::Level::Info, "admission");
    line.kv("conn", id_)
        .kv("uid", rec.uid)
        .kv("namespace", rec.pod.namespace_)
        .kv("pod", rec.pod.name)
        .kv("outcome", bad ? std::string_view("invalid") : to_string(rec.outcome))
        .kv("ops", static_cast<uint64_t>(rec.ops.size()))
        .kv("warnings", static_cast<uint64_t>(rec.warnings.size()))
        .kv("duration_us",
            static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(elapsed).count()));
    if (!rec.warnings.empty()) line.kv("warning_text", warning_text(rec));
    if (!rec.error.empty()) line.kv("error", rec.error);
  }

  // An error answer that ends the connection: the rest of the request may still be arriving, so
  // the close discards unread input for a while instead of resetting the connection (a reset could
  // destroy the answer before the client reads it).
  void reply_error(http::status status, std::string message, std::string_view retry_after = {}) {
    const unsigned version = parser_ && parser_->is_header_done() ? parser_->get().version() : 11;
    res_.emplace(status, version);
    res_->set(http::field::content_type, "text/plain; charset=utf-8");
    if (!retry_after.empty()) res_->set(http::field::retry_after, retry_after);
    res_->keep_alive(false);
    res_->body() = std::move(message) + "\n";
    res_->prepare_payload();
    parser_.reset();
    log::debug("request refused").kv("conn", id_).kv("status", static_cast<unsigned>(status));
    write(true);
  }

  void write(bool linger) {
    lowest().expires_after(limits().write_timeout);
    http::async_write(stream_, *res_, [self = shared_from_this(), linger](beast::error_code ec, std::size_t) {
      if (ec) {
        fail(ec, "write", self->id_);
        return self->close_socket();
      }
      const bool keep = self->res_->keep_alive();
      self->res_.reset();
      if (!keep) return self->do_close(linger);
      self->read_request(false);
    });
  }

  // A normal close sends the TLS close_notify and waits briefly for the peer's. After an early
  // error answer the rest of the request may still be arriving: then the write side is shut at
  // the TCP level and unread input is discarded until the peer closes (bounded in time and
  // bytes), because closing with unread data would send a reset that can destroy the answer
  // before the client reads it.
  void do_close(bool linger) {
    phase_ = Phase::Closing;
    if (linger) {
      beast::error_code ignored;
      lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      lowest().expires_after(limits().linger_timeout);
      return discard();
    }
    lowest().expires_after(limits().shutdown_timeout);
    stream_.async_shutdown([self = shared_from_this()](beast::error_code ec) {
      if (ec == beast::error::timeout) return;  // socket already closed by the stream
      self->close_socket();
    });
  }

  void discard() {
    lowest().async_read_some(net::buffer(scratch_), [self = shared_from_this()](beast::error_code ec, std::size_t n) {
      self->discarded_ += n;
      if (ec || self->discarded_ > kMaxDiscard) return self->close_socket();
      self->discard();
    });
  }

  void close_socket() {
    beast::error_code ignored;
    lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
    lowest().close();
  }

  static constexpr size_t kReadChunk = 16384;
  static constexpr size_t kMaxDiscard = 256u << 20;

  std::shared_ptr<SslContext> ctx_;  // the certificate this connection started with
  beast::ssl_stream<beast::tcp_stream> stream_;
  std::shared_ptr<Listener::State> state_;
  uint64_t id_;
  Phase phase_ = Phase::Handshake;
  bool evicted_ = false;   // its slot went to a newer connection: close after the current request
  bool reviewed_ = false;  // has carried an AdmissionReview
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<PaddedBody>> parser_;
  std::optional<http::response<http::empty_body>> continue_;
  std::optional<http::response<http::string_body>> res_;
  std::array<char, 16384> scratch_{};
  size_t discarded_ = 0;
};

}  // namespace

void Listener::State::accept() {
  acceptor.async_accept(net::make_strand(ioc), [self = shared_from_this()](beast::error_code ec, tcp::socket socket) {
    if (!self->acceptor.is_open() || self->draining.load()) return;
    if (ec) {
      // Out of descriptors or memory: say so and retry shortly instead of spinning.
      log::warn("accept failed").kv("error", ec.message());
      self->retry.expires_after(std::chrono::milliseconds(100));
      self->retry.async_wait([self](beast::error_code) { self->accept(); });
      return;
    }
    self->admit(std::move(socket));
    self->accept();
  });
}

// A new connection takes a slot, or closes at once; at a cap the idle connection the slots pick
// is closed to make room, so idle connections (however many, from whoever) never lock anyone out.
void Listener::State::admit(tcp::socket socket) {
  beast::error_code ec;
  const auto peer = socket.remote_endpoint(ec);
  if (ec) return;  // already gone; the socket closes with this scope
  // An IPv4 client of a dual-stack listener appears as ::ffff:a.b.c.d; one peer either way.
  auto address = peer.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped()) {
    address = net::ip::make_address_v4(net::ip::v4_mapped, address.to_v6());
  }
  std::shared_ptr<Session> victim;
  std::shared_ptr<Session> session;
  uint64_t id = 0;
  uint64_t victim_id = 0;
  {
    std::lock_guard<std::mutex> lock(sessions_mu);
    const auto a = slots.admit(address.to_string());
    if (a.verdict != common::ConnectionSlots::Verdict::Admitted) {
      // Closed at once: queuing would let a flood hold memory and descriptors.
      if (a.verdict == common::ConnectionSlots::Verdict::RefusedPeer) {
        metrics.connection_refused_peer();
      } else {
        metrics.connection_refused();
      }
      beast::error_code ignored;
      socket.close(ignored);
      return;
    }
    id = a.id;
    if (a.evicted) {
      victim_id = *a.evicted;
      metrics.connection_evicted();
      if (auto it = sessions.find(*a.evicted); it != sessions.end()) victim = it->second.lock();
      metrics.set_connections_idle(slots.idle());
    }
    beast::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);  // responses are single writes; do not wait for ACKs
    open.fetch_add(1);
    metrics.connection_opened();
    session = std::make_shared<Session>(std::move(socket), tls.get(), shared_from_this(), a.id);
    sessions.emplace(a.id, session);
  }
  if (victim) {
    log::debug("idle connection closed to make room")
        .kv("conn", victim_id)
        .kv("new_conn", id)
        .kv("new_peer", address.to_string());
    victim->evict();
  }
  session->start();
}

Listener::Listener(net::io_context& ioc, Current<SslContext>& tls, Current<const Config>& config,
                   ServerMetrics& metrics, ListenerLimits limits)
    : state_(std::make_shared<State>(ioc, tls, config, metrics, limits)) {}

Listener::~Listener() { drain(); }

Status Listener::listen(const common::ListenAddress& address) {
  beast::error_code ec;
  const auto ip = net::ip::make_address(address.host, ec);
  if (ec) return make_error(ErrorCode::InvalidArgument, "listen address " + address.host + ": " + ec.message());
  const tcp::endpoint ep(ip, address.port);
  const std::string where = "listen " + address.host + ":" + std::to_string(address.port) + ": ";
  auto& acc = state_->acceptor;
  if (acc.open(ep.protocol(), ec); ec) return make_error(ErrorCode::Unavailable, where + ec.message());
  if (acc.set_option(net::socket_base::reuse_address(true), ec); ec) {
    return make_error(ErrorCode::Unavailable, where + ec.message());
  }
  if (acc.bind(ep, ec); ec) return make_error(ErrorCode::Unavailable, where + ec.message());
  if (acc.listen(net::socket_base::max_listen_connections, ec); ec) {
    return make_error(ErrorCode::Unavailable, where + ec.message());
  }
  state_->port = acc.local_endpoint(ec).port();
  net::dispatch(acc.get_executor(), [s = state_] { s->accept(); });
  return {};
}

uint16_t Listener::port() const noexcept { return state_->port; }

void Listener::drain() {
  if (state_->draining.exchange(true)) return;
  net::post(state_->acceptor.get_executor(), [s = state_] {
    beast::error_code ignored;
    s->acceptor.close(ignored);
    s->retry.cancel();
  });
  std::vector<std::shared_ptr<Session>> live;
  {
    std::lock_guard<std::mutex> lock(state_->sessions_mu);
    live.reserve(state_->sessions.size());
    for (auto& [key, weak] : state_->sessions) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) s->drain();
}

bool Listener::draining() const noexcept { return state_->draining.load(); }

size_t Listener::open_connections() const noexcept { return state_->open.load(); }

}  // namespace erdma::webhook::server
