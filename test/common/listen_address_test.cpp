// Tests for common/listen_address.hpp.
#include "common/listen_address.hpp"

#include <doctest/doctest.h>

using namespace erdma::common;

TEST_CASE("listen addresses parse into host and port") {
  struct Case {
    const char* in;
    const char* host;
    uint16_t port;
  };
  for (const Case& c : {Case{"0.0.0.0:8443", "0.0.0.0", 8443}, Case{"127.0.0.1:0", "127.0.0.1", 0},
                        Case{":8080", "0.0.0.0", 8080}, Case{"[::1]:9", "::1", 9}, Case{"[::]:65535", "::", 65535}}) {
    CAPTURE(c.in);
    auto r = parse_listen_address(c.in);
    REQUIRE(r.ok());
    CHECK(r->host == c.host);
    CHECK(r->port == c.port);
  }
}

TEST_CASE("bad listen addresses are errors naming the input") {
  for (const char* bad : {"", "8443", "localhost:8443", "1.2.3.4:", "1.2.3.4:65536", "1.2.3.4:-1", "1.2.3.4:80x",
                          "::1:80", "[::1]", "[::1]80", "[nothost]:80", "300.1.1.1:80"}) {
    CAPTURE(bad);
    auto r = parse_listen_address(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("listen address \"") == 0);
  }
}
