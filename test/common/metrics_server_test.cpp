// Tests for common/http/metrics_server.hpp over real loopback sockets.
#include "common/http/metrics_server.hpp"

#include <doctest/doctest.h>

#include "test/eventually.hpp"
#include "test/support.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace erdma::common;

namespace {

// A connection to the server on 127.0.0.1 from `source` (every 127.0.0.0/8 address is local, and
// each is a peer of its own to the server).
tcp::socket connect_from(net::io_context& ioc, uint16_t port, const char* source = "127.0.0.1") {
  tcp::socket s(ioc);
  s.open(tcp::v4());
  s.bind(tcp::endpoint(net::ip::make_address(source), 0));
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  return s;
}

// Reads until the server closes; returns what arrived.
std::string read_to_end(tcp::socket& s) {
  std::string out;
  boost::system::error_code ec;
  char buf[4096];
  for (;;) {
    const size_t n = s.read_some(net::buffer(buf), ec);
    out.append(buf, n);
    if (ec) break;
  }
  return out;
}

// Sends raw bytes and reads until the server closes; returns what arrived.
std::string exchange(uint16_t port, const std::string& request, bool half_close = true,
                     const char* source = "127.0.0.1") {
  net::io_context ioc;
  tcp::socket s = connect_from(ioc, port, source);
  boost::system::error_code write_ec;
  net::write(s, net::buffer(request), write_ec);  // the server may answer and stop reading early
  boost::system::error_code ignored;
  if (half_close) s.shutdown(tcp::socket::shutdown_send, ignored);
  return read_to_end(s);
}

struct Fixture {
  net::io_context ioc;
  http::MetricsServer server;
  std::thread thread;
  explicit Fixture(http::PlainServerLimits limits = {})
      : server(
            ioc,
            [](std::string_view path) {
              if (path == "/metrics") return http::PlainAnswer{200, "text/plain; version=0.0.4", "m 1\n"};
              if (path == "/healthz") return http::PlainAnswer{200, "text/plain", "ok\n"};
              return http::PlainAnswer{404, "text/plain", "not found\n"};
            },
            limits) {
    auto st = server.listen(ListenAddress{"127.0.0.1", 0});
    REQUIRE_OK(st);
    thread = std::thread([this] { ioc.run(); });
  }
  ~Fixture() {
    server.stop();
    ioc.stop();
    thread.join();
  }
};

}  // namespace

TEST_CASE("metrics server answers GET, HEAD, unknown paths and wrong methods") {
  Fixture f;
  REQUIRE(f.server.port() != 0);
  const auto ok = exchange(f.server.port(), "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  CHECK(ok.find("HTTP/1.1 200 OK") == 0);
  CHECK(ok.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
  CHECK(ok.substr(ok.size() - 4) == "m 1\n");

  const auto head = exchange(f.server.port(), "HEAD /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  CHECK(head.find("HTTP/1.1 200 OK") == 0);
  CHECK(head.find("ok\n") == std::string::npos);

  CHECK(exchange(f.server.port(), "GET /nope HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").find("HTTP/1.1 404") ==
        0);
  const auto post =
      exchange(f.server.port(), "POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
  CHECK(post.find("HTTP/1.1 405") == 0);
  CHECK(post.find("Allow: GET, HEAD") != std::string::npos);
}

TEST_CASE("metrics server keeps connections alive and refuses oversized headers and bodies") {
  Fixture f;
  const auto two =
      exchange(f.server.port(),
               "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\nGET /metrics HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  CHECK(two.find("ok\n") != std::string::npos);
  CHECK(two.find("m 1\n") != std::string::npos);

  const std::string huge = "GET /metrics HTTP/1.1\r\nHost: a\r\nX-Big: " + std::string(20000, 'a') + "\r\n\r\n";
  CHECK(exchange(f.server.port(), huge).find("HTTP/1.1 431") == 0);
  CHECK(exchange(f.server.port(), "GET /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
            .find("HTTP/1.1 413") == 0);
  CHECK(exchange(f.server.port(), "NOT HTTP AT ALL\r\n\r\n").find("HTTP/1.1 400") == 0);
  // Still serving after all that.
  CHECK(exchange(f.server.port(), "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").find("200 OK") !=
        std::string::npos);
}

TEST_CASE("a second server on a taken port reports the address") {
  Fixture f;
  net::io_context ioc;
  http::MetricsServer other(ioc, [](std::string_view) { return http::PlainAnswer{}; });
  auto st = other.listen(ListenAddress{"127.0.0.1", f.server.port()});
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("127.0.0.1:" + std::to_string(f.server.port())) != std::string::npos);
}

TEST_CASE("probe_handler: metrics exposition, liveness, readiness with its reason, 404 elsewhere") {
  metrics::Registry registry;
  registry.counter("erdma_test_total", "A test counter.").inc();
  bool ready = false;
  const auto handler = http::probe_handler(registry, [&]() -> std::optional<std::string> {
    if (ready) return std::nullopt;
    return "not registered with kubelet";
  });

  const auto m = handler("/metrics");
  CHECK(m.status == 200);
  CHECK(m.content_type == metrics::kContentType);
  CHECK(m.body.find("erdma_test_total 1") != std::string::npos);

  CHECK(handler("/healthz").status == 200);  // alive even while not ready
  const auto not_ready = handler("/readyz");
  CHECK(not_ready.status == 503);
  CHECK(not_ready.body == "not registered with kubelet\n");
  ready = true;
  CHECK(handler("/readyz").status == 200);
  CHECK(handler("/readyz").body == "ok\n");

  const auto missing = handler("/metricz");
  CHECK(missing.status == 404);
  CHECK(missing.body.find("/metrics") != std::string::npos);

  // No readiness function: always ready.
  CHECK(http::probe_handler(registry, nullptr)("/readyz").status == 200);
}

namespace {

constexpr const char* kProbe = "GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";

// Holds `n` connections from `source`: every other one has had an answer and waits, kept alive;
// the rest have sent half a request header and stall (a slow loris).
std::vector<tcp::socket> hoard(net::io_context& ioc, uint16_t port, const char* source, int n) {
  std::vector<tcp::socket> held;
  for (int i = 0; i < n; ++i) {
    tcp::socket s = connect_from(ioc, port, source);
    if (i % 2 == 0) {
      net::write(s, net::buffer(std::string("GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n")));
      std::string got;
      char buf[512];
      while (got.find("ok\n") == std::string::npos) got.append(buf, s.read_some(net::buffer(buf)));
    } else {
      net::write(s, net::buffer(std::string("GET /metrics HTTP/1.1\r\nHost: ")));
    }
    held.push_back(std::move(s));
  }
  return held;
}

}  // namespace

// Security review M1 / L6: liveness shares this port with anyone who can reach it (on the agent,
// every hostNetwork pod of the node, from the same loopback address as kubelet).
TEST_CASE("a client holding every connection idle or half-sent does not keep a probe out") {
  Fixture f(http::PlainServerLimits{.max_connections = 64, .max_connections_per_peer = 64});
  net::io_context ioc;
  auto held = hoard(ioc, f.server.port(), "127.0.0.1", 64);
  const auto answer = exchange(f.server.port(), kProbe, false, "127.0.0.1");
  CHECK(answer.find("HTTP/1.1 200 OK") == 0);
  CHECK(f.server.evicted() == 1);
  CHECK(f.server.refused() == 0);
  // Again and again (each takes a freed slot or a held one's).
  for (int i = 0; i < 8; ++i) CHECK(exchange(f.server.port(), kProbe, false).find("HTTP/1.1 200 OK") == 0);
  CHECK(f.server.refused() == 0);
}

TEST_CASE("per peer: four hoarders filling the port leave room for kubelet, each evicting its own") {
  Fixture f;  // 64 connections, 16 per peer
  net::io_context ioc;
  std::vector<tcp::socket> held;
  for (const char* peer : {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"}) {
    for (auto& s : hoard(ioc, f.server.port(), peer, 16)) held.push_back(std::move(s));
  }
  CHECK(exchange(f.server.port(), kProbe, false, "127.0.0.1").find("HTTP/1.1 200 OK") == 0);
  CHECK(f.server.evicted() == 1);

  // A hoarder past its 16 closes its own oldest connections, never another peer's.
  auto more = hoard(ioc, f.server.port(), "127.0.0.2", 10);
  // (the last connection sent half a request and got nothing: wait until it was accepted)
  CHECK(erdma::testing::eventually([&] { return f.server.evicted() >= 10; }));
  CHECK(f.server.refused() == 0);
  // Which connections are still open: a request completed on each gets an answer, or nothing.
  const auto answers = [](tcp::socket& sock, bool half_sent) {
    boost::system::error_code ec;
    net::write(sock, net::buffer(std::string(half_sent ? "a\r\nConnection: close\r\n\r\n" : kProbe)), ec);
    return read_to_end(sock).find("HTTP/1.1 200 OK") == 0;
  };
  CHECK_FALSE(answers(held[0], false));  // 127.0.0.2's two oldest
  CHECK_FALSE(answers(held[1], true));
  int open_of_hoarder = 0;
  for (size_t i = 2; i < 16; ++i) open_of_hoarder += answers(held[i], i % 2 == 1) ? 1 : 0;
  for (size_t i = 0; i < more.size(); ++i) open_of_hoarder += answers(more[i], i % 2 == 1) ? 1 : 0;
  CHECK(open_of_hoarder <= 16);  // of the 26 it opened
  CHECK(open_of_hoarder >= 15);  // (kubelet's probe took one of its slots)
  for (size_t i = 16; i < held.size(); ++i) {
    CAPTURE(i);
    CHECK(answers(held[i], i % 2 == 1));  // the other peers lost nothing
  }
}
