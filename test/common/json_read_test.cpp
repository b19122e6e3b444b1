// The reader for untrusted JSON: every read of every shape answers (a value, a fallback or an
// error naming the path) and none throws.
#include "common/json_read.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace {

using erdma::common::JsonAt;
using erdma::common::JsonKind;
using nlohmann::json;

template <typename T>
std::string message_of(const erdma::Result<T>& r) {
  return r.ok() ? std::string("ok") : r.error().message;
}
std::string message_of(const erdma::Status& s) { return s.ok() ? std::string("ok") : s.error().message; }

const json& doc() {
  static const json d = json::parse(R"({
    "s": "text", "empty": "", "n": 5, "neg": -1, "frac": 1.5, "b": true, "nul": null,
    "huge": 18446744073709551615, "past_int64": 9223372036854775808, "min": -9223372036854775808,
    "obj": {"inner": {"name": "x", "count": 3}}, "arr": ["a", 2, {"k": "v"}],
    "dotted.key": "d"
  })");
  return d;
}

TEST_CASE("string(): the string, or an error naming the subject and path") {
  struct Case {
    const char* path;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"s", "ok"},
      {"empty", "ok"},
      {"n", "claim ns/a: n: expected a string, got number 5"},
      {"b", "claim ns/a: b: expected a string, got boolean true"},
      {"nul", "claim ns/a: nul: expected a string, got null"},
      {"absent", "claim ns/a: absent is missing"},
      {"obj", "claim ns/a: obj: expected a string, got map"},
      {"arr", "claim ns/a: arr: expected a string, got list"},
      {"obj.inner.name", "ok"},
      {"obj.inner.count", "claim ns/a: obj.inner.count: expected a string, got number 3"},
      {"obj.none.name", "claim ns/a: obj.none.name is missing"},
      {"s.under_a_string", "claim ns/a: s.under_a_string is missing"},
  };
  const JsonAt root(doc(), "claim ns/a");
  for (const auto& c : cases) {
    CAPTURE(c.path);
    CHECK(message_of(root.path(c.path).string()) == c.want);
  }
  CHECK(*root.path("obj.inner.name").string() == "x");
  CHECK(*root.member("dotted.key").string() == "d");
}

TEST_CASE("integers: fractions, wrong types and out-of-range values are errors, huge numbers included") {
  const JsonAt root(doc(), "doc");
  struct Case {
    const char* key;
    std::string int64;
    std::string uint64;
  };
  const std::vector<Case> cases = {
      {"n", "ok", "ok"},
      {"neg", "ok", "doc: neg: expected an integer in [0, 18446744073709551615], got number -1"},
      {"frac", "doc: frac: expected an integer, got number 1.5", "doc: frac: expected an integer, got number 1.5"},
      {"s", "doc: s: expected an integer, got string \"text\"", "doc: s: expected an integer, got string \"text\""},
      {"huge",
       "doc: huge: expected an integer in [-9223372036854775808, 9223372036854775807], got number "
       "18446744073709551615",
       "ok"},
      {"past_int64",
       "doc: past_int64: expected an integer in [-9223372036854775808, 9223372036854775807], got number "
       "9223372036854775808",
       "ok"},
      {"min", "ok", "doc: min: expected an integer in [0, 18446744073709551615], got number -9223372036854775808"},
      {"nul", "doc: nul: expected an integer, got null", "doc: nul: expected an integer, got null"},
      {"absent", "doc: absent is missing", "doc: absent is missing"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.key);
    CHECK(message_of(root.member(c.key).int64()) == c.int64);
    CHECK(message_of(root.member(c.key).uint64()) == c.uint64);
  }
  CHECK(*root.member("huge").uint64() == 18446744073709551615ULL);
  CHECK(*root.member("min").int64() == std::numeric_limits<int64_t>::min());
  CHECK(*root.member("neg").int64() == -1);
  // Bounds of the caller's own.
  CHECK(message_of(root.member("n").int64(0, 4)) == "doc: n: expected an integer in [0, 4], got number 5");
  CHECK(message_of(root.member("n").uint64(4)) == "doc: n: expected an integer in [0, 4], got number 5");
  CHECK(message_of(root.member("huge").int64(0, 10)) ==
        "doc: huge: expected an integer in [0, 10], got number 18446744073709551615");
  CHECK(message_of(root.member("n").int64(-10, -1)) == "doc: n: expected an integer in [-10, -1], got number 5");
}

TEST_CASE("optional reads: missing and null give the fallback, a present value of another type is an error") {
  const JsonAt root(doc(), "doc");
  CHECK(*root.member("absent").string_or("dflt") == "dflt");
  CHECK(*root.member("nul").string_or("dflt") == "dflt");
  CHECK(*root.member("s").string_or("dflt") == "text");
  CHECK(message_of(root.member("n").string_or("dflt")) == "doc: n: expected a string, got number 5");
  CHECK(*root.member("absent").int64_or(7) == 7);
  CHECK(*root.member("n").int64_or(7) == 5);
  CHECK(message_of(root.member("s").int64_or(7)) == "doc: s: expected an integer, got string \"text\"");
  CHECK(*root.member("absent").boolean_or(true));
  CHECK(message_of(root.member("s").boolean_or(true)) == "doc: s: expected a boolean, got string \"text\"");
  CHECK(root.member("absent").expect_optional(JsonKind::Array).ok());
  CHECK(root.member("arr").expect_optional(JsonKind::Array).ok());
  CHECK(message_of(root.member("obj").expect_optional(JsonKind::Array)) == "doc: obj: expected an array, got map");
}

TEST_CASE("probes answer for any shape and never fail") {
  const JsonAt root(doc(), "doc");
  CHECK(root.member("s").if_string() == std::optional<std::string>("text"));
  CHECK_FALSE(root.member("n").if_string().has_value());
  CHECK_FALSE(root.member("absent").if_string().has_value());
  CHECK(root.member("n").if_int64() == std::optional<int64_t>(5));
  CHECK_FALSE(root.member("huge").if_int64().has_value());
  CHECK_FALSE(root.member("frac").if_int64().has_value());
  CHECK(root.member("b").if_boolean() == std::optional<bool>(true));
  CHECK_FALSE(root.member("s").if_boolean().has_value());
}

TEST_CASE("arrays: elements by index, past the end and on non-arrays missing; sizes") {
  const JsonAt root(doc(), "ResourceSlice list");
  const JsonAt arr = root.member("arr");
  CHECK(arr.size() == 3);
  CHECK(*arr.element(0).string() == "a");
  CHECK(message_of(arr.element(1).string()) == "ResourceSlice list: arr[1]: expected a string, got number 2");
  CHECK(*arr.element(2).member("k").string() == "v");
  CHECK(message_of(arr.element(3).string()) == "ResourceSlice list: arr[3] is missing");
  CHECK(message_of(root.member("obj").element(0).string()) == "ResourceSlice list: obj[0] is missing");
  CHECK(root.member("obj").size() == 1);
  CHECK(root.member("s").size() == 0);
  CHECK(root.member("absent").size() == 0);
  CHECK(message_of(arr.expect(JsonKind::Object)) == "ResourceSlice list: arr: expected an object, got list");
  CHECK(arr.expect(JsonKind::Array).ok());
}

TEST_CASE("the root: a document of any type reads as missing members, the subject alone names it") {
  for (const json& d : {json(5), json("x"), json(nullptr), json::array({1}), json(true)}) {
    CAPTURE(d.dump());
    const JsonAt root(d, "watch event");
    CHECK(message_of(root.member("type").string()) == "watch event: type is missing");
    CHECK(root.path("object.metadata.name").is_missing());
    CHECK(root.member("type").get() == nullptr);
  }
  const json n = 5;
  CHECK(message_of(JsonAt(n, "watch event").expect(JsonKind::Object)) ==
        "watch event: expected an object, got number 5");
  CHECK(JsonAt(n, "watch event").error("is not a WatchEvent").message == "watch event is not a WatchEvent");
}

TEST_CASE("long scalars are cut in messages") {
  const json d = {{"s", std::string(500, 'a')}};
  const auto m = message_of(JsonAt(d, "doc").member("s").int64());
  CHECK(m.size() < 120);
  CHECK(m.rfind("doc: s: expected an integer, got string \"aaa", 0) == 0);
}

}  // namespace
