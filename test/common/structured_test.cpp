// Tests for common/structured.hpp: YAML/JSON documents into nlohmann::json, and file reading.
#include "common/structured.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

using namespace erdma;
using namespace erdma::common;
using nlohmann::json;

namespace {

json one(const std::string& text) {
  auto r = parse_document(text, "test.yaml");
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? std::string() : r.error().message));
  return *r;
}

std::string error_of(const std::string& text, const ParseLimits& limits = {}) {
  auto r = parse_documents(text, "test.yaml", limits);
  REQUIRE_FALSE(r.ok());
  return r.error().message;
}

}  // namespace

TEST_CASE("YAML plain scalars resolve by the 1.2 core schema - quoted ones stay strings") {
  const json doc = one(R"(
int: 42
neg: -7
hex: 0x1F
oct: 0o17
float: 1.5
exp: 1e3
t: true
f: False
n: null
tilde: ~
empty:
quoted_int: "42"
single: 'true'
yes_is_a_string: yes
version: 1.2.3
big: 99999999999999999999
explicit: !!str 12
)");
  CHECK(doc["int"] == 42);
  CHECK(doc["neg"] == -7);
  CHECK(doc["hex"] == 31);
  CHECK(doc["oct"] == 15);
  CHECK(doc["float"] == 1.5);
  CHECK(doc["exp"] == 1000.0);
  CHECK(doc["t"] == true);
  CHECK(doc["f"] == false);
  CHECK(doc["n"].is_null());
  CHECK(doc["tilde"].is_null());
  CHECK(doc["empty"].is_null());
  CHECK(doc["quoted_int"] == "42");
  CHECK(doc["single"] == "true");
  CHECK(doc["yes_is_a_string"] == "yes");
  CHECK(doc["version"] == "1.2.3");
  CHECK(doc["big"].is_number_float());
  CHECK(doc["explicit"] == "12");
}

TEST_CASE("YAML structures, multiple documents and JSON input") {
  auto docs = parse_documents("---\na: [1, {b: c}]\n---\n---\nx: y\n", "m.yaml");
  REQUIRE(docs.ok());
  REQUIRE(docs->size() == 2);  // the empty document in the middle is dropped
  CHECK((*docs)[0] == json::parse(R"({"a":[1,{"b":"c"}]})"));
  CHECK((*docs)[1] == json::parse(R"({"x":"y"})"));

  CHECK(one("  {\"a\": 1, \"b\": [true, null]}") == json::parse(R"({"a":1,"b":[true,null]})"));
  CHECK(one("") == json::object());
}

TEST_CASE("malformed YAML and JSON give errors with the source and position") {
  CHECK(error_of("a: [1, 2\nb: c\n").find("test.yaml:") == 0);
  CHECK(error_of("a: b\na: c\n").find("duplicate key \"a\"") != std::string::npos);
  CHECK(error_of("? [a, b]\n: c\n").find("map keys must be plain strings") != std::string::npos);
  CHECK(error_of("a: !!int abc\n").find("does not match its tag") != std::string::npos);
  CHECK(error_of("a: !custom x\n").find("unsupported YAML tag") != std::string::npos);
  CHECK(error_of("{\"a\": }").find("invalid JSON") != std::string::npos);
  CHECK(error_of("{\"a\": 1} trailing").find("invalid JSON") != std::string::npos);
  CHECK(error_of("{\"a\": 1e999}").find("invalid JSON: number overflow") != std::string::npos);
  CHECK(error_of(",nmen[an[}").find("test.yaml:1:1: invalid YAML") == 0);  // once hung the YAML reader
  CHECK(error_of(std::string("a: b\0c", 6)).find("NUL") != std::string::npos);
  CHECK(error_of("a: \"\xff\"\n").find("UTF-8") != std::string::npos);
  auto two = parse_document("a: 1\n---\nb: 2\n", "two.yaml");
  REQUIRE_FALSE(two.ok());
  CHECK(two.error().message == "two.yaml: expected one document, found 2");
}

TEST_CASE("limits stop alias bombs and deep nesting instead of exhausting memory or stack") {
  // Each level doubles the expanded size: 2^30 values if expanded blindly.
  std::string bomb = "a0: &a0 [x, x]\n";
  for (int i = 1; i <= 30; ++i) {
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [*a" + std::to_string(i - 1) + ", *a" +
            std::to_string(i - 1) + "]\n";
  }
  CHECK(error_of(bomb).find("more than 1000000 values") != std::string::npos);

  ParseLimits shallow;
  shallow.max_depth = 8;
  CHECK(error_of(std::string(20, '[') + std::string(20, ']'), shallow).find("nesting deeper than 8") !=
        std::string::npos);
  CHECK(error_of("a:\n" + std::string("  - ") + "[[[[[[[[[[1]]]]]]]]]]\n", shallow).find("nesting deeper") !=
        std::string::npos);
}

TEST_CASE("read_file reads, limits size and reports missing files") {
  const auto dir = std::filesystem::temp_directory_path() / "erdma-structured-test";
  std::filesystem::create_directories(dir);
  const auto path = (dir / "f.txt").string();
  {
    std::ofstream(path) << "hello";
  }
  auto ok = read_file(path);
  REQUIRE(ok.ok());
  CHECK(*ok == "hello");

  auto big = read_file(path, 3);
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().code == ErrorCode::ResourceExhausted);

  auto missing = read_file((dir / "nope").string());
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::NotFound);
  CHECK(missing.error().message.find("nope: cannot open") != std::string::npos);

  auto directory = read_file(dir.string());
  REQUIRE_FALSE(directory.ok());
  std::filesystem::remove_all(dir);
}
