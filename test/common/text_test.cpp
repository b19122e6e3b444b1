// Tests for common/text.hpp: JSON quoting, UTF-8 validation, base64.
#include "common/text.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/repeat_filter.hpp"

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

namespace {

// The escaping as the JSON grammar states it, one byte at a time.
std::string reference_quote(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20) {
      static const std::map<unsigned char, std::string> kShort = {
          {'\n', "\\n"}, {'\r', "\\r"}, {'\t', "\\t"}, {'\b', "\\b"}, {'\f', "\\f"}};
      if (auto it = kShort.find(c); it != kShort.end()) {
        out += it->second;
      } else {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out += buf;
      }
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

TEST_CASE("json_quote finds every byte to escape at every position of a word") {
  // The fast path looks at 8 bytes at a time: put each byte value at each offset of strings of
  // lengths around one and two words, among plain ASCII and among bytes of 0x80 and above.
  for (const char filler : {'a', '\x80', '\xff', '\x7f', ' '}) {
    for (size_t len = 1; len <= 19; ++len) {
      for (size_t at = 0; at < len; ++at) {
        for (int v = 0; v < 256; ++v) {
          std::string s(len, filler);
          s[at] = static_cast<char>(v);
          CAPTURE(len);
          CAPTURE(at);
          CAPTURE(v);
          REQUIRE(json_quote(s) == reference_quote(s));
        }
      }
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string s(rng() % 70, '\0');
    for (auto& c : s) c = static_cast<char>(rng() % 4 == 0 ? rng() % 0x24 + 0x10 : rng() % 256);
    CAPTURE(s);
    REQUIRE(json_quote(s) == reference_quote(s));
    std::string appended = "prefix";
    append_json_string(appended, s);
    REQUIRE(appended == "prefix" + reference_quote(s));
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
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="},
      {"foobar", "Zm9vYmFy"},
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
  // Against RFC 4648 section 4 taken literally: the bits in order, six at a time.
  const auto reference = [](const std::string& in) {
    static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string bits;
    for (const char c : in) {
      for (int b = 7; b >= 0; --b) bits += ((static_cast<unsigned char>(c) >> b) & 1) ? '1' : '0';
    }
    while (bits.size() % 6 != 0) bits += '0';
    std::string out;
    for (size_t i = 0; i < bits.size(); i += 6) out += kAlphabet[std::stoi(bits.substr(i, 6), nullptr, 2)];
    while (out.size() % 4 != 0) out += '=';
    return out;
  };
  std::mt19937 rng(11);
  for (int i = 0; i < 3000; ++i) {
    std::string in(rng() % 40, '\0');
    for (auto& c : in) c = static_cast<char>(rng() % 256);
    CAPTURE(in);
    REQUIRE(base64_encode(in) == reference(in));
    std::string appended = "x";
    append_base64(appended, in);
    REQUIRE(appended == "x" + reference(in));
  }
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

TEST_CASE("utf8_prefix never ends inside a character; cut_for_message marks the cut") {
  using erdma::common::cut_for_message;
  using erdma::common::utf8_prefix;
  CHECK(utf8_prefix("abc", 5) == "abc");
  CHECK(utf8_prefix("abc", 2) == "ab");
  CHECK(utf8_prefix("", 0).empty());
  const std::string e_acute = "a\xC3\xA9";  // "aé": 'a' then a two-byte character
  CHECK(utf8_prefix(e_acute, 2) == "a");
  CHECK(utf8_prefix(e_acute, 3) == e_acute);
  const std::string euro = "\xE2\x82\xAC\xE2\x82\xAC";  // two three-byte characters
  CHECK(utf8_prefix(euro, 5) == "\xE2\x82\xAC");
  CHECK(utf8_prefix(euro, 2).empty());
  CHECK(cut_for_message("abcdef", 3) == "abc...");
  CHECK(cut_for_message("abc", 3) == "abc");
  CHECK(cut_for_message(euro, 4) == "\xE2\x82\xAC...");
}

TEST_CASE("RepeatFilter: a failure is news once until it changes or the operation works") {
  erdma::common::RepeatFilter f;
  CHECK_FALSE(f.succeeded());  // nothing was failing
  CHECK(f.failed("disk full"));
  CHECK_FALSE(f.failed("disk full"));
  CHECK(f.failed("permission denied"));
  CHECK(f.failed("disk full"));  // changed back: news again
  CHECK(f.succeeded());          // a recovery to log
  CHECK_FALSE(f.succeeded());
  CHECK(f.failed("disk full"));  // after a success the same error is news
  CHECK(f.failed(""));           // an empty message is still a failure
  CHECK_FALSE(f.failed(""));
}
