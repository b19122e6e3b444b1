// Tests for common/structured.hpp: YAML/JSON documents into nlohmann::json, and file reading.
#include "common/structured.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "test/support.hpp"

using namespace erdma;
using namespace erdma::common;
using nlohmann::json;

namespace {

json one(const std::string& text) {
  auto r = parse_document(text, "test.yaml");
  REQUIRE_OK(r);
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
  CHECK(error_of("? [a, b]\n: c\n").find("a map key must be a scalar, not a list") != std::string::npos);
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
  const erdma::testing::TempDir dir("structured");
  dir.write("f.txt", "hello");
  const std::string path = dir.file("f.txt");
  auto ok = read_file(path);
  REQUIRE(ok.ok());
  CHECK(*ok == "hello");

  auto big = read_file(path, 3);
  REQUIRE_FALSE(big.ok());
  CHECK(big.error().code == ErrorCode::ResourceExhausted);

  auto missing = read_file(dir.file("nope"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().code == ErrorCode::NotFound);
  CHECK(missing.error().message.find("nope: cannot open") != std::string::npos);

  auto directory = read_file(dir.path());
  REQUIRE_FALSE(directory.ok());
}

TEST_CASE("one loader, two scalar policies: the config's YAML 1.2 core schema and kubectl's YAML 1.1") {
  using erdma::common::YamlSchema;
  const std::string text = "a: yes\nb: on\nc: 0777\nd: 0o17\ne: 1_000\nf: \"yes\"\n";
  auto core = erdma::common::parse_documents(text, "t.yaml", {}, YamlSchema::Core);
  auto kube = erdma::common::parse_documents(text, "t.yaml", {}, YamlSchema::Kubectl);
  REQUIRE(core.ok());
  REQUIRE(kube.ok());
  CHECK((*core)[0] == nlohmann::json::parse(R"({"a":"yes","b":"on","c":777,"d":15,"e":"1_000","f":"yes"})"));
  CHECK((*kube)[0] == nlohmann::json::parse(R"({"a":true,"b":true,"c":511,"d":15,"e":1000,"f":"yes"})"));

  // Keys: as written under the core schema; resolved and turned back into text for kubectl.
  auto k = erdma::common::parse_documents("on: 1\n0x10: 2\n", "t.yaml", {}, YamlSchema::Kubectl);
  REQUIRE(k.ok());
  CHECK((*k)[0] == nlohmann::json::parse(R"({"true":1,"16":2})"));
  auto c = erdma::common::parse_documents("on: 1\n0x10: 2\n", "t.yaml", {}, YamlSchema::Core);
  REQUIRE(c.ok());
  CHECK((*c)[0] == nlohmann::json::parse(R"({"on":1,"0x10":2})"));

  // "<<" merges only for kubectl; for the config it is an ordinary key.
  const std::string merge = "base: &b {p: 1, q: 2}\nm:\n  <<: *b\n  q: 3\n";
  auto km = erdma::common::parse_documents(merge, "t.yaml", {}, YamlSchema::Kubectl);
  REQUIRE(km.ok());
  CHECK((*km)[0]["m"] == nlohmann::json::parse(R"({"p":1,"q":3})"));
  auto cm = erdma::common::parse_documents(merge, "t.yaml", {}, YamlSchema::Core);
  REQUIRE(cm.ok());
  CHECK((*cm)[0]["m"] == nlohmann::json::parse(R"({"<<":{"p":1,"q":2},"q":3})"));

  // A repeated key is refused under both, and kubectl's reading says what kubectl would do.
  auto kd = erdma::common::parse_documents("a: 1\na: 2\n", "t.yaml", {}, YamlSchema::Kubectl);
  REQUIRE_FALSE(kd.ok());
  CHECK(kd.error().message == "t.yaml:2:1: duplicate key \"a\" (kubectl would silently keep the last one); remove one");
  auto cd = erdma::common::parse_documents("a: 1\na: 2\n", "t.yaml", {}, YamlSchema::Core);
  REQUIRE_FALSE(cd.ok());
  CHECK(cd.error().message == "t.yaml:2:1: duplicate key \"a\"");
  // Under kubectl, "on" and "true" are the same key.
  CHECK_FALSE(erdma::common::parse_documents("on: 1\ntrue: 2\n", "t.yaml", {}, YamlSchema::Kubectl).ok());
  // .inf has no JSON form: kubectl refuses it, the config keeps the text.
  CHECK_FALSE(erdma::common::parse_documents("a: .inf\n", "t.yaml", {}, YamlSchema::Kubectl).ok());
  auto ci = erdma::common::parse_documents("a: .inf\n", "t.yaml", {}, YamlSchema::Core);
  REQUIRE(ci.ok());
  CHECK((*ci)[0]["a"] == ".inf");
}

TEST_CASE("a map with many keys loads in linear time under both policies") {
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "k" + std::to_string(i) + ": " + std::to_string(i) + "\n";
  for (auto schema : {erdma::common::YamlSchema::Core, erdma::common::YamlSchema::Kubectl}) {
    auto docs = erdma::common::parse_documents(text, "big.yaml", {}, schema);
    REQUIRE(docs.ok());
    CHECK((*docs)[0].size() == 100000);
  }
}
