// The HTTPS Api (see api.hpp): Boost.Beast over OpenSSL, synchronous calls run to completion on a
// private io_context with a deadline on every step, so a silent server costs one timeout and no
// thread. The only translation unit of the agent that includes Beast's HTTP and SSL headers.
#include "agent/kube/api.hpp"

#include <sys/stat.h>

#include <array>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include "common/json_read.hpp"

namespace erdma::agent::kube {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr const char* kAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";
constexpr size_t kMaxTokenBytes = 64 * 1024;
constexpr uint32_t kMaxHeaderBytes = 64 * 1024;
// Even an unchanged token file is read again this often: a file system that keeps mtime and inode
// across a rewrite cannot hide a rotation for longer.
constexpr auto kTokenMaxAge = std::chrono::minutes(1);
constexpr const char* kUserAgent = "erdma-agent";

// Where to connect, from ApiConfig::server.
struct Endpoint {
  std::string host;         // a name, or an IP address without brackets
  std::string port;         // decimal
  bool is_ip = false;
  std::string host_header;  // Host: as sent ("[::1]:6443")
};

Result<Endpoint> parse_server(std::string_view server) {
  const auto bad = [&](std::string_view why) {
    return make_error(ErrorCode::FailedPrecondition,
                      "API server address \"" + std::string(server) + "\": " + std::string(why) +
                          " (want https://host[:port])");
  };
  constexpr std::string_view kScheme = "https://";
  if (server.substr(0, kScheme.size()) != kScheme) return bad("not https");
  std::string_view rest = server.substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return bad("has a path");
  Endpoint e;
  std::string_view port = "443";
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string_view::npos) return bad("unclosed '['");
    e.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return bad("junk after ']'");
      port = rest.substr(1);
    }
  } else {
    const auto colon = rest.rfind(':');
    if (colon != std::string_view::npos) {
      if (rest.find(':') != colon) return bad("an IPv6 address must be in brackets");
      port = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
    }
    e.host = std::string(rest);
  }
  if (e.host.empty()) return bad("no host");
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
      std::stoul(std::string(port)) == 0 || std::stoul(std::string(port)) > 65535) {
    return bad("bad port");
  }
  e.port = std::string(port);
  boost::system::error_code ec;
  const auto addr = net::ip::make_address(e.host, ec);
  e.is_ip = !ec;
  e.host_header = (e.is_ip && addr.is_v6() ? "[" + e.host + "]" : e.host) + ":" + e.port;
  return e;
}

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

// The bearer token, read again when the file changes (kubelet rotates projected tokens by
// swapping the ..data symlink: a new inode) or is older than kTokenMaxAge, or after a 401.
class TokenFile {
 public:
  explicit TokenFile(std::string path) : path_(std::move(path)) {}

  Result<std::string> current() {
    std::lock_guard<std::mutex> lock(mu_);
    struct stat st {};
    if (::stat(path_.c_str(), &st) != 0) {
      return make_error(ErrorCode::FailedPrecondition, "service-account token " + path_ + ": " +
                                                           std::strerror(errno) +
                                                           " (is automountServiceAccountToken off?)");
    }
    const bool changed = !have_ || st.st_ino != ino_ || st.st_dev != dev_ || st.st_size != size_ ||
                         st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec;
    if (changed || Clock::now() - read_at_ > kTokenMaxAge) {
      std::ifstream in(path_, std::ios::binary);
      if (!in.is_open()) {
        return make_error(ErrorCode::FailedPrecondition,
                          "service-account token " + path_ + ": cannot open: " + std::strerror(errno));
      }
      std::string text(kMaxTokenBytes + 1, '\0');
      in.read(text.data(), static_cast<std::streamsize>(text.size()));
      if (in.bad()) return make_error(ErrorCode::FailedPrecondition, "service-account token " + path_ + ": unreadable");
      text.resize(static_cast<size_t>(in.gcount()));
      if (text.size() > kMaxTokenBytes) {
        return make_error(ErrorCode::FailedPrecondition, "service-account token " + path_ + ": over 64 KiB");
      }
      while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
      if (text.empty()) return make_error(ErrorCode::FailedPrecondition, "service-account token " + path_ + ": empty");
      if (text.find_first_of("\r\n") != std::string::npos) {
        return make_error(ErrorCode::FailedPrecondition,
                          "service-account token " + path_ + ": holds a line break (not a token)");
      }
      token_ = std::move(text);
      have_ = true;
      ino_ = st.st_ino;
      dev_ = st.st_dev;
      size_ = st.st_size;
      mtime_ = st.st_mtim;
      read_at_ = Clock::now();
    }
    return token_;
  }

  // The server refused it: read the file again before the next request.
  void invalidate() {
    std::lock_guard<std::mutex> lock(mu_);
    have_ = false;
  }

 private:
  const std::string path_;
  std::mutex mu_;
  bool have_ = false;
  ino_t ino_ = 0;
  dev_t dev_ = 0;
  off_t size_ = 0;
  timespec mtime_{};
  Clock::time_point read_at_{};
  std::string token_;
};

// One TLS connection to the server and the io_context its operations run on. Each operation
// starts, then runs the context until it completes or its deadline passes (beast::error::timeout).
// Not thread-safe, except cancel_from_any_thread().
class Connection {
 public:
  Connection(ssl::context& tls, const Endpoint& endpoint) : tls_(tls), endpoint_(endpoint) {}

  bool is_open() const { return stream_.has_value(); }
  bool reused() const { return uses_ > 0; }  // a request went over it already

  // TCP connect and TLS handshake, verifying the certificate's chain and name (or IP).
  Result<void> open(Clock::duration timeout) {
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
    stream_.emplace(ioc_, tls_);
    SSL* native = stream_->native_handle();
    if (endpoint_.is_ip) {
      X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(native), endpoint_.host.c_str());
    } else {
      // SNI, for names only (RFC 6066); SSL_set_tlsext_host_name is this call behind a C cast.
      SSL_ctrl(native, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
               const_cast<char*>(endpoint_.host.c_str()));
      SSL_set1_host(native, endpoint_.host.c_str());
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

  void close() {
    if (stream_) {
      beast::error_code ignored;
      beast::get_lowest_layer(*stream_).socket().close(ignored);
      stream_.reset();
    }
    buffer_.clear();
    ioc_.restart();
  }

  // From another thread: the operation under way ends with operation_aborted, and so does every
  // later one (the flag is checked by run()).
  void cancel_from_any_thread() {
    cancelled_ = true;
    net::post(ioc_, [this] {
      if (stream_) beast::get_lowest_layer(*stream_).cancel();
    });
  }
  bool cancelled() const { return cancelled_; }

  static Error unavailable(const std::string& what, const beast::error_code& ec) {
    if (ec == beast::error::timeout) return make_error(ErrorCode::DeadlineExceeded, what + ": timed out");
    std::string detail = ec.message();
    if (const auto more = openssl_errors(); !more.empty()) detail += " [" + more + "]";
    return make_error(ErrorCode::Unavailable, what + ": " + detail);
  }

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

  void run() {
    ioc_.restart();
    if (cancelled_ && stream_) beast::get_lowest_layer(*stream_).cancel();
    ioc_.run();
  }

  net::io_context ioc_{1};
  ssl::context& tls_;
  const Endpoint& endpoint_;
  std::optional<beast::ssl_stream<beast::tcp_stream>> stream_;
  beast::flat_buffer buffer_;
  int uses_ = 0;  // requests written since open()
  std::atomic<bool> cancelled_{false};
};

class HttpsApi final : public Api {
 public:
  HttpsApi(ApiConfig config, Endpoint endpoint, std::unique_ptr<ssl::context> tls)
      : config_(std::move(config)), endpoint_(std::move(endpoint)), tls_(std::move(tls)),
        token_(config_.token_file), conn_(*tls_, endpoint_) {}

  // Api
  Result<nlohmann::json> get(std::string_view path) override { return call(http::verb::get, path, nullptr); }
  Result<nlohmann::json> create(std::string_view path, const nlohmann::json& object) override {
    return call(http::verb::post, path, &object);
  }
  Result<nlohmann::json> replace(std::string_view path, const nlohmann::json& object) override {
    return call(http::verb::put, path, &object);
  }
  Status remove(std::string_view path, std::string_view resource_version) override {
    nlohmann::json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
    if (!resource_version.empty()) options["preconditions"] = {{"resourceVersion", std::string(resource_version)}};
    auto answer = call(http::verb::delete_, path, &options, /*want_object=*/false);
    if (!answer) return std::move(answer).error();
    return {};
  }
  Status watch(std::string_view path, const WatchHandler& on_event, std::stop_token stop) override;
  bool can_watch() const noexcept override { return true; }

 private:
  http::request<http::string_body> make_request(http::verb verb, std::string_view path, const nlohmann::json* body,
                                                const std::string& token) const {
    http::request<http::string_body> req{verb, std::string(path), 11};
    req.set(http::field::host, endpoint_.host_header);
    req.set(http::field::user_agent, kUserAgent);
    req.set(http::field::accept, "application/json");
    req.set(http::field::authorization, "Bearer " + token);
    if (body != nullptr) {
      req.set(http::field::content_type, "application/json");
      req.body() = body->dump();
    }
    req.keep_alive(true);
    req.prepare_payload();
    return req;
  }

  static std::string verb_name(http::verb verb) { return std::string(http::to_string(verb)); }

  Result<nlohmann::json> call(http::verb verb, std::string_view path, const nlohmann::json* body,
                              bool want_object = true) {
    std::lock_guard<std::mutex> lock(mu_);
    const std::string what = verb_name(verb) + " " + std::string(path);
    auto token_read = token_.current();
    if (!token_read) return make_error(token_read.error().code, what + ": " + token_read.error().message);
    const std::string token = std::move(token_read).value();
    auto req = make_request(verb, path, body, token);
    const auto deadline = Clock::now() + config_.timeout;
    // At most two tries: the second only when a reused connection failed before any answer
    // arrived (the server closed it while it was idle).
    for (int attempt = 0;; ++attempt) {
      if (!conn_.is_open()) {
        if (auto opened = conn_.open(deadline - Clock::now()); !opened) {
          return make_error(opened.error().code, what + ": " + opened.error().message);
        }
      }
      const bool reused = conn_.reused();
      http::response_parser<http::string_body> parser;
      parser.header_limit(kMaxHeaderBytes);
      parser.body_limit(kMaxAnswerBytes);
      beast::error_code ec = conn_.write(req, deadline);
      if (!ec) ec = conn_.read(parser, deadline);
      if (ec) {
        const bool nothing_read = !parser.got_some();
        conn_.close();
        if (ec == beast::error::timeout) {
          return make_error(ErrorCode::DeadlineExceeded,
                            what + ": no answer within " + std::to_string(config_.timeout.count()) + " ms");
        }
        if (ec == http::error::body_limit || ec == http::error::header_limit) {
          return make_error(ErrorCode::ResourceExhausted,
                            what + ": the answer exceeds " + std::to_string(kMaxAnswerBytes >> 20) +
                                " MiB; nothing of it is used (narrow the request with a selector)");
        }
        if (reused && nothing_read && attempt == 0) continue;
        return Connection::unavailable(what, ec);
      }
      auto& res = parser.get();
      if (!res.keep_alive()) conn_.close();
      const unsigned status = res.result_int();
      if (status == 401) token_.invalidate();
      if (status < 200 || status > 299) return error_from_answer(verb_name(verb), path, status, res.body());
      if (!want_object) return nlohmann::json();
      auto doc = nlohmann::json::parse(res.body(), nullptr, false);
      if (doc.is_discarded() || !doc.is_object()) {
        return make_error(ErrorCode::InvalidArgument,
                          what + ": HTTP " + std::to_string(status) + " with a body that is not a JSON object (" +
                              std::to_string(res.body().size()) + " bytes, Content-Type " +
                              std::string(res[http::field::content_type]) + "); nothing of it is used");
      }
      return doc;
    }
  }

  const ApiConfig config_;
  const Endpoint endpoint_;
  const std::unique_ptr<ssl::context> tls_;
  TokenFile token_;
  std::mutex mu_;  // serializes calls on conn_
  Connection conn_;
};

// The watch body: newline-delimited JSON events, read a buffer at a time as they arrive.
Status HttpsApi::watch(std::string_view path, const WatchHandler& on_event, std::stop_token stop) {
  const std::string what = "WATCH " + std::string(path);
  auto token_read = token_.current();
  if (!token_read) return make_error(token_read.error().code, what + ": " + token_read.error().message);
  const std::string token = std::move(token_read).value();
  Connection conn(*tls_, endpoint_);
  std::stop_callback on_stop(stop, [&conn] { conn.cancel_from_any_thread(); });
  const auto stopped = [&] { return stop.stop_requested(); };
  const auto start_deadline = Clock::now() + config_.timeout;
  if (auto opened = conn.open(config_.timeout); !opened) {
    if (stopped()) return {};
    return make_error(opened.error().code, what + ": " + opened.error().message);
  }
  auto req = make_request(http::verb::get, path, nullptr, token);
  http::response_parser<http::buffer_body> parser;
  parser.header_limit(kMaxHeaderBytes);
  parser.body_limit(boost::none);  // a watch is unbounded in total; each event is bounded below
  beast::error_code ec = conn.write(req, start_deadline);
  if (!ec) ec = conn.read_header(parser, start_deadline);
  if (stopped()) return {};
  if (ec) {
    if (ec == beast::error::timeout) return make_error(ErrorCode::DeadlineExceeded, what + ": no answer in time");
    return Connection::unavailable(what, ec);
  }
  const unsigned status = parser.get().result_int();
  std::string pending;  // bytes of the event being read
  std::array<char, 16 * 1024> buf{};
  // What has arrived, into `pending`, waiting until `deadline` at most.
  const auto read_some = [&](Clock::time_point deadline) -> beast::error_code {
    parser.get().body().data = buf.data();
    parser.get().body().size = buf.size();
    auto e = conn.read_some(parser, deadline);
    if (e == http::error::need_buffer) e = {};
    pending.append(buf.data(), buf.size() - parser.get().body().size);
    return e;
  };
  if (status < 200 || status > 299) {
    if (status == 401) token_.invalidate();
    while (!parser.is_done() && pending.size() <= kMaxAnswerBytes) {
      if (read_some(start_deadline)) break;
    }
    return error_from_answer("GET", path, status, pending);
  }
  while (true) {
    // Deliver every whole line first.
    for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
      const std::string_view line = std::string_view(pending).substr(0, nl);
      if (line.find_first_not_of(" \t\r") != std::string_view::npos) {
        auto event = nlohmann::json::parse(line, nullptr, false);
        if (event.is_discarded() || !event.is_object() || !event.contains("type")) {
          return make_error(ErrorCode::InvalidArgument,
                            what + ": an event that is not a JSON WatchEvent object (" +
                                std::to_string(line.size()) + " bytes)");
        }
        const common::JsonAt at(event, "watch event");
        if (at.member("type").if_string() == "ERROR") {
          // A Status object; its code, when it is a plausible HTTP status, picks the Error.
          const auto code = at.path("object.code").uint64(599);
          const nlohmann::json* obj = at.member("object").get();
          return error_from_answer("WATCH", path, code && *code >= 100 ? static_cast<unsigned>(*code) : 500,
                                   obj != nullptr ? obj->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                                                  : std::string("{}"));
        }
        if (!on_event(event)) return {};
      }
      pending.erase(0, nl + 1);
      if (stopped()) return {};
    }
    if (pending.size() > kMaxAnswerBytes) {
      return make_error(ErrorCode::ResourceExhausted,
                        what + ": one event exceeds " + std::to_string(kMaxAnswerBytes >> 20) + " MiB");
    }
    if (parser.is_done()) return {};  // the server ended the stream (timeoutSeconds)
    if (stopped()) return {};
    ec = read_some(Clock::now() + config_.watch_idle_timeout);
    if (stopped()) return {};
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == ssl::error::stream_truncated) {
      // The server closed the connection: a watch ends this way too. A partial last line is lost,
      // which the caller's relist covers.
      return {};
    }
    if (ec == beast::error::timeout) {
      return make_error(ErrorCode::DeadlineExceeded,
                        what + ": nothing for " + std::to_string(config_.watch_idle_timeout.count()) +
                            " ms; the stream is taken as dead (watch again)");
    }
    if (ec) return Connection::unavailable(what, ec);
  }
}

Result<std::string> read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(ErrorCode::FailedPrecondition, path + ": " + std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

Result<ApiConfig> in_cluster_config_from(const std::function<const char*(const char*)>& getenv,
                                         const std::string& account_dir) {
  const char* host = getenv("KUBERNETES_SERVICE_HOST");
  const char* port = getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return make_error(ErrorCode::FailedPrecondition,
                      "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set: the agent does not "
                      "run in a pod, or its pod has enableServiceLinks off and no such variables");
  }
  ApiConfig config;
  const std::string h = host;
  config.server = "https://" + (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" + port;
  ERDMA_TRY(parse_server(config.server));
  config.token_file = account_dir + "/token";
  config.ca_file = account_dir + "/ca.crt";
  for (const auto* file : {&config.token_file, &config.ca_file}) {
    struct stat st {};
    if (::stat(file->c_str(), &st) != 0) {
      return make_error(ErrorCode::FailedPrecondition,
                        *file + ": " + std::strerror(errno) +
                            " (no service-account token mounted: set automountServiceAccountToken: true on the "
                            "agent's pod or service account)");
    }
  }
  return config;
}

Result<ApiConfig> in_cluster_config() {
  return in_cluster_config_from([](const char* name) { return std::getenv(name); }, kAccountDir);
}

Result<std::unique_ptr<Api>> make_https_api(ApiConfig config) {
  ERDMA_TRY_ASSIGN(Endpoint endpoint, parse_server(config.server));
  ERDMA_TRY_ASSIGN(const std::string ca, read_small_file(config.ca_file));
  if (ca.find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
    return make_error(ErrorCode::FailedPrecondition, "CA file " + config.ca_file + ": holds no PEM certificate");
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
                      "CA file " + config.ca_file + ": no PEM certificate could be used (" + ec.message() + ")");
  }
  tls->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  return std::unique_ptr<Api>(new HttpsApi(std::move(config), std::move(endpoint), std::move(tls)));
}

}  // namespace erdma::agent::kube
