// Tests for common/text.hpp: JSON quoting, UTF-8 validation, base64.
#include "common/text.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace erdma::common;

TEST_CASE("json_quote escapes what JSON requires and round-trips through a JSON parser") {
  struct Case {
    std::string in;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"", "\"\""},
      {"plain", "\"plain\""},
      {"a\"b", "\"a\\\"b\""},
      {"back\\slash", "\"back\\\\slash\""},
      {"nl\ncr\rtab\t", "\"nl\\ncr\\rtab\\t\""},
      {std::string("nul\0x", 5), "\"nul\\u0000x\""},
      {"\x01\x1f", "\"\\u0001\\u001f\""},
      {"\b\f", "\"\\b\\f\""},
      {"caf\xc3\xa9 \xe4\xb8\x96", "\"caf\xc3\xa9 \xe4\xb8\x96\""},
      {"/slash stays", "\"/slash stays\""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    CHECK(json_quote(c.in) == c.want);
    CHECK(nlohmann::json::parse(json_quote(c.in)).get<std::string>() == c.in);
  }
}

TEST_CASE("is_valid_utf8 accepts well-formed text and rejects the classic bad forms") {
  struct Case {
    const char* name;
    std::string in;
    bool want;
  };
  const std::vector<Case> cases = {
      {"empty", "", true},
      {"ascii", "hello", true},
      {"2-byte", "\xc3\xa9", true},
      {"3-byte", "\xe2\x82\xac", true},
      {"4-byte", "\xf0\x9f\x98\x80", true},
      {"max code point", "\xf4\x8f\xbf\xbf", true},
      {"lone continuation", "\x80", false},
      {"truncated 2-byte", "\xc3", false},
      {"truncated 4-byte", "\xf0\x9f\x98", false},
      {"overlong slash", "\xc0\xaf", false},
      {"overlong 3-byte", "\xe0\x80\xaf", false},
      {"surrogate", "\xed\xa0\x80", false},
      {"above U+10FFFF", "\xf4\x90\x80\x80", false},
      {"invalid lead byte", "\xff", false},
      {"bad continuation", "\xe2\x28\xa1", false},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    CHECK(is_valid_utf8(c.in) == c.want);
  }
}

TEST_CASE("base64 matches RFC 4648 test vectors and round-trips") {
  const std::vector<std::pair<std::string, std::string>> vectors = {
      {"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},         {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
  };
  for (const auto& v : vectors) {
    const std::string& plain = v.first;
    const std::string& encoded = v.second;
    CAPTURE(plain);
    CHECK(base64_encode(plain) == encoded);
    auto back = base64_decode(encoded);
    REQUIRE(back.has_value());
    CHECK(*back == plain);
  }
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  CHECK(base64_decode(base64_encode(all)) == all);
}

TEST_CASE("base64_decode rejects malformed input") {
  for (const char* bad : {"Zg", "Zg=", "Z===", "====", "Zm9v!", "Zg==Zg==", "Zh==", "Zm9=", "Zm=v", "Zm9v\n"}) {
    CAPTURE(bad);
    CHECK_FALSE(base64_decode(bad).has_value());
  }
}

TEST_CASE("join puts the separator between parts only") {
  using erdma::common::join;
  CHECK(join({}, ", ").empty());
  CHECK(join({"a"}, ", ") == "a");
  CHECK(join({"a", "", "c"}, ",") == "a,,c");
}

TEST_CASE("iequals compares ASCII without case, and only ASCII") {
  using erdma::common::iequals;
  CHECK(iequals("100-Continue", "100-continue"));
  CHECK(iequals("", ""));
  CHECK_FALSE(iequals("abc", "abd"));
  CHECK_FALSE(iequals("abc", "ab"));
  CHECK_FALSE(iequals("\xc3\x84", "\xc3\xa4"));  // Ä and ä: not ASCII, not folded
}
