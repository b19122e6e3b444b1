// The shared configuration reader, and that both programs' configs speak through it: the same slip
// gets the same words from erdma-webhook and erdma-agent.
#include "common/config_reader.hpp"

#include <doctest/doctest.h>

#include <string>

#include "agent/core/config.hpp"
#include "webhook/core/config.hpp"

namespace cfg = erdma::common::config;
using nlohmann::json;

namespace {

std::string message_of(const erdma::Status& s) { return s.ok() ? std::string("ok") : s.error().message; }

template <typename T>
std::string message_of(const erdma::Result<T>& r) {
  return r.ok() ? std::string("ok") : r.error().message;
}

}  // namespace

TEST_CASE("check_keys names the unknown key and every key allowed there") {
  const json obj = {{"listen", 1}, {"lisen", 2}};
  CHECK(message_of(cfg::check_keys(obj, "server", {"listen", "threads"})) ==
        "server.lisen: unknown key (known keys of server: listen, threads)");
  CHECK(message_of(cfg::check_keys(json{{"x", 1}}, "", {"a"})) == "x: unknown key (known keys: a)");
  CHECK(cfg::check_keys(json::object(), "", {}).ok());
}

TEST_CASE("typed getters: absent and null take the fallback, wrong types say what belongs there") {
  const json obj = json::parse(R"({"s":"v","n":7,"b":true,"qb":"true","nul":null,"big":99999999999,
                                   "neg":-1,"list":["a","b"],"mixed":["a",1]})");
  CHECK(*cfg::get_string(obj, "s", "x.s", "d") == "v");
  CHECK(*cfg::get_string(obj, "absent", "x.absent", "d") == "d");
  CHECK(*cfg::get_string(obj, "nul", "x.nul", "d") == "d");
  CHECK(message_of(cfg::get_string(obj, "n", "x.n", "")) == "x.n: expected a string, got number (quote it)");
  CHECK(*cfg::get_bool(obj, "b", "x.b", false));
  CHECK(message_of(cfg::get_bool(obj, "qb", "x.qb", false)) ==
        "x.qb: expected true or false, got string (write it without quotes)");
  CHECK(*cfg::get_int(obj, "n", "x.n", 0, 1, 10) == 7);
  CHECK(message_of(cfg::get_int(obj, "big", "x.big", 0, 1, 10)) == "x.big: must be between 1 and 10, got 99999999999");
  CHECK(message_of(cfg::get_int(obj, "neg", "x.neg", 0, 1, 10)) == "x.neg: must be between 1 and 10, got -1");
  CHECK(message_of(cfg::get_int(obj, "s", "x.s", 0, 1, 10)) == "x.s: expected an integer, got string");
  CHECK(*cfg::get_string_list(obj, "list", "x.list", {}) == std::vector<std::string>{"a", "b"});
  CHECK(message_of(cfg::get_string_list(obj, "mixed", "x.mixed", {})) ==
        "x.mixed[1]: expected a string, got number (quote it)");
  CHECK(message_of(cfg::expect_map(json::array(), "smcr")) == "smcr: expected a map, got list");
}

TEST_CASE("check_name: the key, the quoted value, the role and rule, what failed and the rule spelled out") {
  using erdma::common::NameRule;
  CHECK(cfg::check_name("team-a", NameRule::Dns1123Label, "k").ok());
  CHECK(
      message_of(cfg::check_name("Team-a", NameRule::Dns1123Label, "ns", "a namespace name")) ==
      "ns: \"Team-a\" is not a namespace name (a DNS-1123 label): it has the upper-case 'T' (character 1); a "
      "DNS-1123 label is 1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit, such "
      "as \"my-name\"");
  CHECK(message_of(cfg::check_name("a..b", NameRule::Dns1123Subdomain, "node")) ==
        "node: \"a..b\" is not a DNS-1123 subdomain: it has two dots in a row (character 3); a DNS-1123 subdomain is 1 "
        "to 253 lower-case letters, digits, '-' and '.', each part between dots starting and ending with a letter or "
        "digit, such as \"example.com\"");
  CHECK(cfg::check_name(std::string(64, 'a') + ".b", NameRule::Dns1123Subdomain, "node").ok());
}

TEST_CASE("paths: absolute, without .. or NUL; trailing slashes trimmed") {
  CHECK(cfg::check_abs_path("/var/lib/x", "k").ok());
  CHECK(message_of(cfg::check_abs_path("lib", "k")) == "k: must be an absolute path, got \"lib\"");
  CHECK(message_of(cfg::check_abs_path("/a/../b", "k")) == "k: must not contain \"..\", got \"/a/../b\"");
  CHECK(message_of(cfg::check_abs_path(std::string("/a\0b", 4), "k")) == "k: must not contain NUL");
  CHECK(cfg::trim_trailing_slashes("/a/b//") == "/a/b");
  CHECK(cfg::trim_trailing_slashes("/") == "/");
}

// One wording for both programs: the same slip in either config file reads the same.
TEST_CASE("erdma-webhook and erdma-agent word the same mistakes the same way") {
  auto both = [](const json& doc) {
    return std::pair{message_of(erdma::webhook::Config::load(doc)), message_of(erdma::agent::AgentConfig::load(doc))};
  };
  SUBCASE("an unknown top-level key") {
    const auto [webhook, agent] = both(json{{"resourceNmae", "aliyun/erdma"}});
    CHECK(webhook.rfind("resourceNmae: unknown key (known keys: resourceName, ", 0) == 0);
    CHECK(agent.rfind("resourceNmae: unknown key (known keys: resourceName, ", 0) == 0);
  }
  SUBCASE("a number where a name belongs") {
    const auto [webhook, agent] = both(json{{"resourceName", 5}});
    CHECK(webhook == "resourceName: expected a string, got number (quote it)");
    CHECK(agent == webhook);
  }
  SUBCASE("a resource name that is not an extended resource") {
    const auto [webhook, agent] = both(json{{"resourceName", "erdma"}});
    CHECK(webhook.rfind("resourceName: \"erdma\" is not an extended resource name: it has no <domain>/ in front; ",
                        0) == 0);
    CHECK(agent == webhook);
  }
  SUBCASE("a namespace name that is not a DNS-1123 label") {
    const auto [webhook, agent] = both(json{{"smcr", {{"allowedNamespaces", json::array({"ml", "ML"})}}}});
    CHECK(webhook.rfind("smcr.allowedNamespaces[1]: \"ML\" is not a namespace name (a DNS-1123 label): ", 0) == 0);
    CHECK(agent == webhook);
  }
  SUBCASE("smcr is not a map") {
    const auto [webhook, agent] = both(json{{"smcr", true}});
    CHECK(webhook == "smcr: expected a map, got boolean");
    CHECK(agent == webhook);
  }
  SUBCASE("a relative preload directory") {
    const auto [webhook, agent] = both(json{{"smcr", {{"preloadHostDir", "lib"}}}});
    CHECK(webhook == "smcr.preloadHostDir: must be an absolute path, got \"lib\"");
    CHECK(agent == webhook);
  }
  SUBCASE("a top level that is not a map") {
    const auto [webhook, agent] = both(json::array({1}));
    CHECK(webhook == "config: expected a map at the top level, got list");
    CHECK(agent == webhook);
  }
}
