#include "common/flags.hpp"

#include <doctest/doctest.h>

namespace erdma::common {
namespace {

constexpr FlagSpec kSpecs[] = {
    {"--config", "-c"},
    {"--output", "-o"},
    {"--dry-run", {}, true},
};

Result<Flags> parse(std::vector<std::string> args, UnknownFlags unknown = UnknownFlags::Refuse) {
  return parse_flags(args, kSpecs, unknown);
}

TEST_CASE("parse_flags: the three spellings of a value, switches, help and positionals") {
  auto f = parse({"--config", "a.yaml", "-o=json", "-o", "table", "--output=yaml", "pos", "--dry-run", "-"});
  // "-o=json" is not a spelling: '=' only splits long flags, so "-o=json" is unknown.
  CHECK_FALSE(f.ok());
  CHECK(f.error().message == "unknown flag -o=json");

  f = parse({"--config", "a.yaml", "-o", "table", "--output=yaml", "pos", "--dry-run", "-", "-h"});
  REQUIRE(f.ok());
  CHECK(*f->get("--config") == "a.yaml");
  CHECK(*f->get("--output") == "yaml");  // the last one wins
  CHECK(f->values.size() == 4);
  CHECK(f->has("--dry-run"));
  CHECK(f->get("--dry-run")->empty());
  CHECK(f->positional == std::vector<std::string>{"pos", "-"});
  CHECK(f->help);
  CHECK(f->get_or("--missing", "dflt") == "dflt");
  CHECK(f->get("--missing") == nullptr);

  f = parse({"-c", "", "--config="});
  REQUIRE(f.ok());
  CHECK(f->get("--config")->empty());  // an empty value is a value
}

TEST_CASE("parse_flags: errors name the flag and what it needs") {
  auto f = parse({"--config"});
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().message == "flag --config needs a value");
  f = parse({"-c"});
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().message == "flag -c needs a value");
  f = parse({"--dry-run=yes"});
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().message == "flag --dry-run takes no value");
  f = parse({"--bogus", "x"});
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().message == "unknown flag --bogus");
  CHECK(f.error().code == ErrorCode::InvalidArgument);
  f = parse({"--" + std::string(1000, 'x')});
  REQUIRE_FALSE(f.ok());
  CHECK(f.error().message.size() < 100);  // an argument is quoted only in part
}

TEST_CASE("parse_flags: unknown flags kept as positionals for commands whose verbs parse the rest") {
  auto f = parse({"add", "--eth", "eth0", "-c", "x.yaml", "--eth=eth1"}, UnknownFlags::AsPositional);
  REQUIRE(f.ok());
  CHECK(f->positional == std::vector<std::string>{"add", "--eth", "eth0", "--eth=eth1"});
  CHECK(*f->get("--config") == "x.yaml");
}

TEST_CASE("parse_flags: a value that looks like a flag is taken as the value") {
  auto f = parse({"--config", "--output"});
  REQUIRE(f.ok());
  CHECK(*f->get("--config") == "--output");
  CHECK_FALSE(f->has("--output"));
}

}  // namespace
}  // namespace erdma::common
