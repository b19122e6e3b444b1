// The HTTPS client's answers, decoded without a server: a call's status and body, one watch line.
#include "agent/kube/json_answers.hpp"

#include <doctest/doctest.h>

#include <string>

#include "agent/kube/api.hpp"

namespace erdma::agent::kube::https {
namespace {

using nlohmann::json;

TEST_CASE("call_answer: a 2xx is its JSON object, anything else an Error naming the call") {
  auto ok = call_answer("GET", "/api/v1/nodes/n1", 200, R"({"kind":"Node"})", "application/json", true);
  REQUIRE(ok.ok());
  CHECK(*ok == json{{"kind", "Node"}});

  auto deleted = call_answer("DELETE", "/api/v1/nodes/n1", 200, "not json at all", "text/plain", false);
  REQUIRE(deleted.ok());
  CHECK(deleted->is_null());

  auto html = call_answer("GET", "/api/v1/nodes/n1", 200, "<html></html>", "text/html", true);
  REQUIRE_FALSE(html.ok());
  CHECK(html.error().code == ErrorCode::InvalidArgument);
  CHECK(html.error().message ==
        "GET /api/v1/nodes/n1: HTTP 200 with a body that is not a JSON object (13 bytes, Content-Type text/html); "
        "nothing of it is used");
  CHECK(call_answer("GET", "/p", 200, "[1]", "application/json", true).error().code == ErrorCode::InvalidArgument);

  const std::string status = R"({"kind":"Status","reason":"NotFound"})";
  auto missing = call_answer("GET", "/api/v1/nodes/n1", 404, status, "", true);
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error() == error_from_answer("GET", "/api/v1/nodes/n1", 404, status));
}

TEST_CASE("watch_event: a blank line is nothing, an event is delivered, an ERROR is its Status's Error") {
  auto blank = watch_event("WATCH /p", "/p", " \t\r");
  REQUIRE(blank.ok());
  CHECK_FALSE(blank->has_value());

  auto added = watch_event("WATCH /p", "/p", R"({"type":"ADDED","object":{"metadata":{"name":"a"}}})");
  REQUIRE(added.ok());
  REQUIRE(added->has_value());
  CHECK((**added)["object"]["metadata"]["name"] == "a");

  for (const char* bad : {"{", "[]", R"({"object":{}})"}) {
    CAPTURE(bad);
    auto r = watch_event("WATCH /p", "/p", bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find("WATCH /p: an event that is not a JSON WatchEvent object") == 0);
  }

  auto gone =
      watch_event("WATCH /p", "/p", R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}})");
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.error().code == ErrorCode::NotFound);
  CHECK(gone.error().message.find("WATCH /p: HTTP 410") == 0);

  // A code that is no HTTP status counts as 500: retry.
  auto odd = watch_event("WATCH /p", "/p", R"({"type":"ERROR","object":{"code":7}})");
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().code == ErrorCode::Unavailable);
  CHECK(odd.error().message.find("HTTP 500") != std::string::npos);
}

}  // namespace
}  // namespace erdma::agent::kube::https
