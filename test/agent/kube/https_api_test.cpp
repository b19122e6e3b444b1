// The HTTPS API client against a loopback TLS server answering as each case needs.
#include "agent/kube/api.hpp"

#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include <doctest/doctest.h>

#include "test/agent/kube/tls_test_server.hpp"
#include "test/eventually.hpp"
#include "test/log_capture.hpp"
#include "test/support.hpp"
#include "test/webhook/server/test_certs.hpp"

namespace erdma::agent::kube {
namespace {

using testing::ServerConn;
using testing::TlsTestServer;
using webhook::server::testing::CertSpec;
using webhook::server::testing::make_cert;
using webhook::server::testing::PemPair;
namespace http = testing::http;
using Request = http::request<http::string_body>;
using erdma::testing::TempDir;

CertSpec spec(std::string cn, std::string sans, bool ca = false) {
  CertSpec s;
  s.common_name = std::move(cn);
  s.subject_alt_names = std::move(sans);
  s.ca = ca;
  return s;
}

// A CA, a server certificate it signs for 127.0.0.1 and localhost, and the files a pod has.
struct Pki {
  PemPair ca = make_cert(spec("test-ca", "", true));
  PemPair server = make_cert(spec("kubernetes", "IP:127.0.0.1,DNS:localhost"), &ca);
};

const Pki& pki() {
  static const Pki p;
  return p;
}

struct Fixture {
  explicit Fixture(TlsTestServer::Handler handler, const PemPair& cert = pki().server)
      : server(cert.cert, cert.key, std::move(handler)) {
    dir.write("token", "token-1\n");
    dir.write("ca.crt", pki().ca.cert);
  }
  ApiConfig config(std::string host = "127.0.0.1") const {
    ApiConfig c;
    c.server = "https://" + host + ":" + std::to_string(server.port());
    c.token_file = dir.file("token");
    c.ca_file = dir.file("ca.crt");
    c.timeout = std::chrono::milliseconds(5000);
    c.watch_idle_timeout = std::chrono::milliseconds(10000);  // a broken watch fails the case, not the suite
    return c;
  }
  std::unique_ptr<Api> api(std::string host = "127.0.0.1") const {
    auto made = make_https_api(config(std::move(host)));
    REQUIRE(made.ok());
    return std::move(made).value();
  }
  TempDir dir;
  TlsTestServer server;
};

std::string status_body(unsigned code, const std::string& reason, const std::string& message) {
  return nlohmann::json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
                        {"reason", reason}, {"message", message}, {"code", code}}
      .dump();
}

TEST_CASE("GET, POST, PUT and DELETE send the token, JSON headers and bodies, answers come back parsed") {
  Fixture f([](ServerConn& c, const Request& req) {
    c.reply(req.method() == http::verb::post ? 201 : 200,
            nlohmann::json{{"method", std::string(req.method_string())}, {"echo", req.body()}}.dump());
  });
  auto api = f.api();

  auto got = api->get("/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dn1");
  REQUIRE(got.ok());
  CHECK((*got)["method"] == "GET");
  const nlohmann::json object = {{"metadata", {{"name", "a"}, {"resourceVersion", "7"}}}};
  auto created = api->create("/apis/resource.k8s.io/v1/resourceslices", object);
  REQUIRE(created.ok());
  CHECK(nlohmann::json::parse((*created)["echo"].get<std::string>()) == object);
  auto replaced = api->replace("/apis/resource.k8s.io/v1/resourceslices/a", object);
  REQUIRE(replaced.ok());
  CHECK((*replaced)["method"] == "PUT");
  CHECK(api->remove("/apis/resource.k8s.io/v1/resourceslices/a", "7").ok());
  CHECK(api->remove("/apis/resource.k8s.io/v1/resourceslices/b", "").ok());

  const auto r = f.server.received();
  REQUIRE(r.size() == 5);
  for (const auto& one : r) {
    CHECK(one.authorization == "Bearer token-1");
    CHECK(one.accept == "application/json");
    CHECK(one.connection == 1);  // one keep-alive connection for all
  }
  CHECK(r[0].method == "GET");
  CHECK(r[0].target == "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dn1");
  CHECK(r[0].body.empty());
  CHECK(r[1].method == "POST");
  CHECK(r[1].content_type == "application/json");
  CHECK(nlohmann::json::parse(r[1].body) == object);
  CHECK(r[2].method == "PUT");
  CHECK(r[2].content_type == "application/json");
  CHECK(r[3].method == "DELETE");
  CHECK(r[3].target == "/apis/resource.k8s.io/v1/resourceslices/a");
  const auto del = nlohmann::json::parse(r[3].body);
  CHECK(del["kind"] == "DeleteOptions");
  CHECK(del["preconditions"]["resourceVersion"] == "7");
  CHECK_FALSE(nlohmann::json::parse(r[4].body).contains("preconditions"));
}

TEST_CASE("every HTTP error maps to its code and carries the server's reason and message") {
  struct Case {
    unsigned status;
    std::string reason;
    http::verb verb;
    ErrorCode want;
  };
  const std::vector<Case> cases = {
      {400, "BadRequest", http::verb::post, ErrorCode::InvalidArgument},
      {422, "Invalid", http::verb::put, ErrorCode::InvalidArgument},
      {401, "Unauthorized", http::verb::get, ErrorCode::PermissionDenied},
      {403, "Forbidden", http::verb::get, ErrorCode::PermissionDenied},
      {404, "NotFound", http::verb::get, ErrorCode::NotFound},
      {410, "Expired", http::verb::get, ErrorCode::NotFound},
      {409, "AlreadyExists", http::verb::post, ErrorCode::AlreadyExists},
      {409, "Conflict", http::verb::put, ErrorCode::FailedPrecondition},
      {409, "Conflict", http::verb::delete_, ErrorCode::FailedPrecondition},
      {429, "TooManyRequests", http::verb::get, ErrorCode::Unavailable},
      {500, "InternalError", http::verb::get, ErrorCode::Unavailable},
      {503, "ServiceUnavailable", http::verb::put, ErrorCode::Unavailable},
  };
  std::mutex mu;
  const Case* current = nullptr;
  Fixture f([&](ServerConn& c, const Request&) {
    std::lock_guard<std::mutex> lock(mu);
    c.reply(current->status, status_body(current->status, current->reason, "the server says why"));
  });
  auto api = f.api();
  for (const auto& c : cases) {
    {
      std::lock_guard<std::mutex> lock(mu);
      current = &c;
    }
    CAPTURE(c.status);
    CAPTURE(c.reason);
    const std::string path = "/apis/resource.k8s.io/v1/resourceslices/x";
    Error err;
    switch (c.verb) {
      case http::verb::get: err = api->get(path).error(); break;
      case http::verb::post: err = api->create(path, nlohmann::json::object()).error(); break;
      case http::verb::put: err = api->replace(path, nlohmann::json::object()).error(); break;
      default: err = api->remove(path, "5").error(); break;
    }
    CHECK(err.code == c.want);
    CHECK(err.message.find("the server says why") != std::string::npos);
    CHECK(err.message.find(c.reason) != std::string::npos);
    CHECK(err.message.find(path) != std::string::npos);
    CHECK(err.message.find("HTTP " + std::to_string(c.status)) != std::string::npos);
  }
}

TEST_CASE("error_from_answer: 409 without a reason is AlreadyExists only for POST, 401 and 403 say which") {
  CHECK(error_from_answer("POST", "/p", 409, "").code == ErrorCode::AlreadyExists);
  CHECK(error_from_answer("PUT", "/p", 409, "").code == ErrorCode::FailedPrecondition);
  CHECK(error_from_answer("POST", "/p", 409, status_body(409, "Conflict", "m")).code == ErrorCode::FailedPrecondition);
  CHECK(error_from_answer("GET", "/p", 401, "").message.find("token") != std::string::npos);
  CHECK(error_from_answer("GET", "/p", 403, "").message.find("RBAC") != std::string::npos);
  // A body that is not a Status is quoted, bounded and printable.
  const auto html = error_from_answer("GET", "/p", 502,
                                      std::string("<html>\x01"
                                                  "bad gateway</html>") +
                                          std::string(2000, 'x'));
  CHECK(html.code == ErrorCode::Unavailable);
  CHECK(html.message.find("<html> bad gateway") != std::string::npos);
  CHECK(html.message.size() < 800);
}

TEST_CASE("url_query_escape keeps unreserved characters and encodes the rest") {
  CHECK(url_query_escape("spec.nodeName=n1,spec.driver=erdma.aliyun.com") ==
        "spec.nodeName%3Dn1%2Cspec.driver%3Derdma.aliyun.com");
  CHECK(url_query_escape("a b&c!~_-") == "a%20b%26c%21~_-");
  CHECK(url_query_escape("\xff") == "%FF");
}

TEST_CASE("a rotated token is picked up by the next request, and a 401 makes it read again") {
  Fixture f([](ServerConn& c, const Request&) { c.reply(200, "{}"); });
  auto api = f.api();
  REQUIRE(api->get("/api/v1/nodes/n1").ok());
  f.dir.write("token", "token-2");
  REQUIRE(api->get("/api/v1/nodes/n1").ok());
  const auto r = f.server.received();
  REQUIRE(r.size() == 2);
  CHECK(r[0].authorization == "Bearer token-1");
  CHECK(r[1].authorization == "Bearer token-2");

  // A token that goes away fails the request, naming the file, without sending anything.
  std::filesystem::remove(f.dir.file("token"));
  auto gone = api->get("/api/v1/nodes/n1");
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().code == ErrorCode::FailedPrecondition);
  CHECK(gone.error().message.find(f.dir.file("token")) != std::string::npos);
  CHECK(f.server.received().size() == 2);
}

TEST_CASE("a server certificate from another CA is refused") {
  const PemPair other_ca = make_cert(spec("other-ca", "", true));
  const PemPair cert = make_cert(spec("kubernetes", "IP:127.0.0.1"), &other_ca);
  Fixture f([](ServerConn& c, const Request&) { c.reply(200, "{}"); }, cert);
  auto api = f.api();
  auto got = api->get("/api/v1/nodes/n1");
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().code == ErrorCode::Unavailable);
  CHECK(got.error().message.find("certificate") != std::string::npos);
  CHECK(f.server.received().empty());
}

// The cluster's root CA rotates: the kubelet rewrites the pod's ca.crt, and the next connection
// trusts the new one without an agent restart.
TEST_CASE("a rotated CA file is trusted by the next connection; a broken one keeps the last good CA") {
  const PemPair other_ca = make_cert(spec("next-ca", "", true));
  const PemPair cert = make_cert(spec("kubernetes", "IP:127.0.0.1"), &other_ca);
  erdma::testing::LogCapture log;
  // Every answer closes its connection, so every call opens a new one.
  Fixture f([](ServerConn& c, const Request&) { c.reply(200, "{}", "application/json", true); }, cert);
  auto api = f.api();
  auto before = api->get("/api/v1/nodes/n1");
  REQUIRE_FALSE(before.ok());
  CHECK(before.error().message.find("certificate") != std::string::npos);

  f.dir.write("ca.crt", other_ca.cert);  // a new inode, as the kubelet's symlink swap gives
  REQUIRE_OK(api->get("/api/v1/nodes/n1"));
  CHECK(log.count(R"("msg":"the API server's CA file changed: new connections trust it")") == 1);

  // Mid-rotation garbage: the last good CA stays, said once however many connections look.
  f.dir.write("ca.crt", "not a certificate\n");
  REQUIRE_OK(api->get("/api/v1/nodes/n1"));
  REQUIRE_OK(api->get("/api/v1/nodes/n1"));
  CHECK(log.count(R"("msg":"the API server's CA file changed but cannot be used; the last one read is kept")") == 1);
  CHECK(log.count("holds no PEM certificate") == 1);

  // Rotated back to a CA that did not sign the server: the next connection is refused again.
  f.dir.write("ca.crt", pki().ca.cert);
  auto after = api->get("/api/v1/nodes/n1");
  REQUIRE_FALSE(after.ok());
  CHECK(after.error().message.find("certificate") != std::string::npos);
}

TEST_CASE("a server certificate for another name or address is refused, names go by SNI") {
  SUBCASE("IP not in the certificate") {
    const PemPair cert = make_cert(spec("kubernetes", "IP:10.0.0.1"), &pki().ca);
    Fixture f([](ServerConn& c, const Request&) { c.reply(200, "{}"); }, cert);
    auto got = f.api()->get("/api/v1/nodes/n1");
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code == ErrorCode::Unavailable);
    CHECK(f.server.received().empty());
  }
  SUBCASE("name not in the certificate") {
    const PemPair cert = make_cert(spec("kubernetes", "DNS:other.example,IP:127.0.0.1"), &pki().ca);
    Fixture f([](ServerConn& c, const Request&) { c.reply(200, "{}"); }, cert);
    auto got = f.api("localhost")->get("/api/v1/nodes/n1");
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code == ErrorCode::Unavailable);
    CHECK(f.server.received().empty());
  }
  SUBCASE("the right name, sent as SNI, an IP sends none") {
    Fixture f([](ServerConn& c, const Request&) { c.reply(200, "{}"); });
    CHECK(f.api("localhost")->get("/api/v1/nodes/n1").ok());
    CHECK(f.api("127.0.0.1")->get("/api/v1/nodes/n1").ok());
    const auto names = f.server.server_names();
    REQUIRE(names.size() == 2);
    CHECK(names[0] == "localhost");
    CHECK(names[1] == "");
  }
}

TEST_CASE("a keep-alive connection the server closed is reopened transparently") {
  std::atomic<int> answered{0};
  Fixture f([&](ServerConn& c, const Request&) {
    c.reply(200, "{\"n\":" + std::to_string(++answered) + "}");
    c.close();  // closed after the answer without saying so, as an idle timeout does
  });
  auto api = f.api();
  for (int i = 1; i <= 3; ++i) {
    auto got = api->get("/api/v1/nodes/n1");
    REQUIRE(got.ok());
    CHECK((*got)["n"] == i);
  }
  CHECK(f.server.connections() == 3);
  CHECK(f.server.received().size() == 3);  // each request was sent once to a server that answered
}

TEST_CASE("Connection: close from the server is honoured") {
  Fixture f([](ServerConn& c, const Request&) { c.reply(200, "{}", "application/json", /*close=*/true); });
  auto api = f.api();
  CHECK(api->get("/a").ok());
  CHECK(api->get("/b").ok());
  CHECK(f.server.connections() == 2);
}

TEST_CASE("a chunked answer is read whole") {
  Fixture f([](ServerConn& c, const Request&) {
    c.begin_chunked(200);
    c.chunk("{\"items\":[");
    c.chunk("{\"a\":1},");
    c.chunk("{\"b\":2}]}");
    c.end_chunked();
  });
  auto got = f.api()->get("/apis/resource.k8s.io/v1/resourceslices");
  REQUIRE(got.ok());
  CHECK((*got)["items"].size() == 2);
}

TEST_CASE("an answer over the size cap is ResourceExhausted, announced or chunked") {
  SUBCASE("Content-Length") {
    Fixture f([](ServerConn& c, const Request&) {
      c.write_raw("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
                  std::to_string(kMaxAnswerBytes + 1) + "\r\n\r\n{");
      c.wait_for_client_close();
    });
    auto got = f.api()->get("/big");
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code == ErrorCode::ResourceExhausted);
  }
  SUBCASE("chunks") {
    Fixture f([](ServerConn& c, const Request&) {
      // Three chunks of 1 MiB, then one announced just big enough to pass the cap in total
      // (sending all 64 MiB through TLS would make the case slow on a loaded machine).
      c.begin_chunked(200);
      const std::string piece(1 << 20, ' ');
      for (int i = 0; i < 3; ++i) c.chunk(piece);
      char header[32];
      std::snprintf(header, sizeof header, "%zx\r\n", kMaxAnswerBytes - 3 * piece.size() + 1);
      c.write_raw(std::string(header) + piece);
      c.wait_for_client_close();
    });
    auto got = f.api()->get("/big");
    REQUIRE_FALSE(got.ok());
    CHECK(got.error().code == ErrorCode::ResourceExhausted);
  }
}

TEST_CASE("a 2xx body that is not a JSON object is InvalidArgument") {
  Fixture f([](ServerConn& c, const Request& req) {
    c.reply(200, req.target() == "/array" ? "[1]" : "<html>hello</html>", "text/html");
  });
  auto api = f.api();
  auto html = api->get("/html");
  REQUIRE_FALSE(html.ok());
  CHECK(html.error().code == ErrorCode::InvalidArgument);
  CHECK(html.error().message.find("text/html") != std::string::npos);
  auto array = api->get("/array");
  REQUIRE_FALSE(array.ok());
  CHECK(array.error().code == ErrorCode::InvalidArgument);
}

TEST_CASE("a server that accepts the request and never answers costs one timeout: DeadlineExceeded") {
  std::atomic<int> got_request{0};
  Fixture f([&](ServerConn& c, const Request&) {
    ++got_request;
    c.wait_for_client_close();
  });
  auto config = f.config();
  config.timeout = std::chrono::milliseconds(300);
  auto api = std::move(make_https_api(config)).value();
  const auto start = std::chrono::steady_clock::now();
  auto got = api->get("/slow");
  REQUIRE_FALSE(got.ok());
  CHECK(got.error().code == ErrorCode::DeadlineExceeded);
  CHECK(got_request == 1);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

std::string event(const std::string& type, const std::string& name) {
  return nlohmann::json{{"type", type}, {"object", {{"metadata", {{"name", name}}}}}}.dump() + "\n";
}

TEST_CASE("watch: events split across chunks arrive whole and in order, the server's end ends it") {
  Fixture f([](ServerConn& c, const Request&) {
    c.begin_chunked(200);
    c.chunk(event("ADDED", "a") + event("MODIFIED", "a").substr(0, 10));
    c.chunk(event("MODIFIED", "a").substr(10) + event("DELETED", "a"));
    c.chunk("\n");  // an empty line is skipped
    c.end_chunked();
  });
  auto api = f.api();
  std::vector<std::string> seen;
  const Status done = api->watch(
      "/apis/resource.k8s.io/v1/resourceslices?watch=true",
      [&](const nlohmann::json& e) {
        seen.push_back(e["type"].get<std::string>());
        return true;
      },
      std::stop_token());
  CHECK(done.ok());
  CHECK(seen == std::vector<std::string>{"ADDED", "MODIFIED", "DELETED"});
  const auto r = f.server.received();
  REQUIRE(r.size() == 1);
  CHECK(r[0].target == "/apis/resource.k8s.io/v1/resourceslices?watch=true");
  CHECK(r[0].authorization == "Bearer token-1");
}

TEST_CASE("watch: an ERROR event with 410 ends it as NotFound with the server's message") {
  Fixture f([](ServerConn& c, const Request&) {
    c.begin_chunked(200);
    c.chunk(event("ADDED", "a"));
    c.chunk(nlohmann::json{
                {"type", "ERROR"},
                {"object", nlohmann::json::parse(status_body(410, "Expired", "too old resource version: 5 (9)"))}}
                .dump() +
            "\n");
    c.wait_for_client_close();
  });
  int events = 0;
  const Status done = f.api()->watch(
      "/w?watch=true", [&](const nlohmann::json&) { return ++events, true; }, std::stop_token());
  REQUIRE_FALSE(done.ok());
  CHECK(done.error().code == ErrorCode::NotFound);
  CHECK(done.error().message.find("too old resource version") != std::string::npos);
  CHECK(events == 1);
}

TEST_CASE("watch: the handler returning false ends it, a non-2xx start is mapped like any call") {
  Fixture f([](ServerConn& c, const Request& req) {
    if (req.target() == "/forbidden?watch=true") {
      c.reply(403, status_body(403, "Forbidden", "cannot watch resourceslices"));
      return;
    }
    c.begin_chunked(200);
    c.chunk(event("ADDED", "a") + event("ADDED", "b"));
    c.wait_for_client_close();
  });
  auto api = f.api();
  int events = 0;
  CHECK(api->watch(
               "/w?watch=true", [&](const nlohmann::json&) { return ++events < 1; }, std::stop_token())
            .ok());
  CHECK(events == 1);
  const Status forbidden = api->watch(
      "/forbidden?watch=true", [](const nlohmann::json&) { return true; }, std::stop_token());
  REQUIRE_FALSE(forbidden.ok());
  CHECK(forbidden.error().code == ErrorCode::PermissionDenied);
  CHECK(forbidden.error().message.find("cannot watch resourceslices") != std::string::npos);
}

TEST_CASE("watch: stop from another thread ends a quiet stream at once, ordinary calls do not wait for it") {
  Fixture f([](ServerConn& c, const Request& req) {
    if (req.target().starts_with("/w")) {
      c.begin_chunked(200);
      c.chunk(event("ADDED", "a"));
      c.wait_for_client_close();  // then nothing more, as a quiet collection
      return;
    }
    c.reply(200, "{}");
  });
  auto api = f.api();
  std::stop_source stop;
  std::atomic<int> events{0};
  std::optional<Status> result;
  std::thread watcher([&] {
    result = api->watch(
        "/w?watch=true", [&](const nlohmann::json&) { return ++events, true; }, stop.get_token());
  });
  const bool first = erdma::testing::eventually([&] { return events.load() == 1; });
  if (!first) {
    stop.request_stop();
    watcher.join();
  }
  REQUIRE(first);
  CHECK(api->get("/api/v1/nodes/n1").ok());  // the watch holds its own connection, not the call lock
  const auto asked = std::chrono::steady_clock::now();
  stop.request_stop();
  watcher.join();
  CHECK(std::chrono::steady_clock::now() - asked < std::chrono::seconds(2));
  REQUIRE(result.has_value());
  CHECK(result->ok());
}

TEST_CASE("watch: a stream quiet for longer than watch_idle_timeout is taken as dead: DeadlineExceeded") {
  Fixture f([](ServerConn& c, const Request&) {
    c.begin_chunked(200);
    c.chunk(event("ADDED", "a"));
    c.wait_for_client_close();
  });
  auto config = f.config();
  config.watch_idle_timeout = std::chrono::milliseconds(200);
  auto api = std::move(make_https_api(config)).value();
  int events = 0;
  const Status done = api->watch(
      "/w?watch=true", [&](const nlohmann::json&) { return ++events, true; }, std::stop_token());
  REQUIRE_FALSE(done.ok());
  CHECK(done.error().code == ErrorCode::DeadlineExceeded);
  CHECK(events == 1);
}

TEST_CASE("in_cluster_config_from: the service's address and the account's files, or what is missing") {
  TempDir dir;
  std::map<std::string, std::string> env = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                            {"KUBERNETES_SERVICE_PORT", "443"}};
  const auto getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto missing_token = in_cluster_config_from(getenv, dir.path());
  REQUIRE_FALSE(missing_token.ok());
  CHECK(missing_token.error().code == ErrorCode::FailedPrecondition);
  CHECK(missing_token.error().message.find("token") != std::string::npos);
  CHECK(missing_token.error().message.find("automountServiceAccountToken") != std::string::npos);

  dir.write("token", "t");
  auto missing_ca = in_cluster_config_from(getenv, dir.path());
  REQUIRE_FALSE(missing_ca.ok());
  CHECK(missing_ca.error().message.find("ca.crt") != std::string::npos);

  dir.write("ca.crt", pki().ca.cert);
  auto ok = in_cluster_config_from(getenv, dir.path());
  REQUIRE(ok.ok());
  CHECK(ok->server == "https://10.96.0.1:443");
  CHECK(ok->token_file == dir.file("token"));
  CHECK(ok->ca_file == dir.file("ca.crt"));

  env["KUBERNETES_SERVICE_HOST"] = "fd00::1";
  auto v6 = in_cluster_config_from(getenv, dir.path());
  REQUIRE(v6.ok());
  CHECK(v6->server == "https://[fd00::1]:443");

  env.erase("KUBERNETES_SERVICE_PORT");
  auto no_env = in_cluster_config_from(getenv, dir.path());
  REQUIRE_FALSE(no_env.ok());
  CHECK(no_env.error().code == ErrorCode::FailedPrecondition);
  CHECK(no_env.error().message.find("KUBERNETES_SERVICE_PORT") != std::string::npos);
}

TEST_CASE("make_https_api refuses a bad address or CA file") {
  TempDir dir;
  dir.write("ca.crt", pki().ca.cert);
  dir.write("empty.crt", "");
  ApiConfig c;
  c.ca_file = dir.file("ca.crt");
  for (const char* bad :
       {"http://10.0.0.1", "https://", "https://h:0", "https://h:99999", "https://::1:443", "https://h/path"}) {
    CAPTURE(bad);
    c.server = bad;
    auto made = make_https_api(c);
    REQUIRE_FALSE(made.ok());
    CHECK(made.error().code == ErrorCode::FailedPrecondition);
  }
  c.server = "https://[::1]:6443";
  CHECK(make_https_api(c).ok());
  c.ca_file = dir.file("empty.crt");
  CHECK_FALSE(make_https_api(c).ok());
  c.ca_file = dir.file("nope.crt");
  CHECK_FALSE(make_https_api(c).ok());
}

}  // namespace
}  // namespace erdma::agent::kube
