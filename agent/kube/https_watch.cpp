// The HTTPS Api's watch (see Api::watch in api.hpp): a connection of its own, the body read as it
// arrives and cut into newline-delimited events, each decoded by watch_event (json_answers.hpp).
#include "agent/kube/https_api.hpp"

#include <array>
#include <string>

#include "agent/kube/https_request.hpp"
#include "agent/kube/json_answers.hpp"

namespace erdma::agent::kube::https {

// The watch body: newline-delimited JSON events, read a buffer at a time as they arrive.
Status HttpsApi::watch(std::string_view path, const WatchHandler& on_event, std::stop_token stop) {
  const std::string what = "WATCH " + std::string(path);
  auto token_read = token_.current();
  if (!token_read) return make_error(token_read.error().code, what + ": " + token_read.error().message);
  const std::string token = std::move(token_read).value();
  Connection conn(*trust_, endpoint_);
  std::stop_callback on_stop(stop, [&conn] { conn.cancel_from_any_thread(); });
  const auto stopped = [&] { return stop.stop_requested(); };
  const auto start_deadline = Clock::now() + config_.timeout;
  if (auto opened = conn.open(config_.timeout); !opened) {
    if (stopped()) return {};
    return make_error(opened.error().code, what + ": " + opened.error().message);
  }
  auto req = make_request(http::verb::get, path, nullptr, token, endpoint_.host_header);
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
      auto event = watch_event(what, path, std::string_view(pending).substr(0, nl));
      if (!event) return std::move(event).error();
      if (*event && !on_event(**event)) return {};
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
      return make_error(ErrorCode::DeadlineExceeded, what + ": nothing for " +
                                                         std::to_string(config_.watch_idle_timeout.count()) +
                                                         " ms; the stream is taken as dead (watch again)");
    }
    if (ec) return Connection::unavailable(what, ec);
  }
}

}  // namespace erdma::agent::kube::https
