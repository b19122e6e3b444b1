// The driver-mode decision: what is found, what is wanted (auto included), and the one line.
#include "agent/core/driver_mode.hpp"

#include <doctest/doctest.h>

namespace erdma::agent {
namespace {

DriverFacts node(bool erdma, std::optional<bool> compat, bool ofed = false, bool nvidia = false, bool peermem = false,
                 bool smc = true) {
  DriverFacts f;
  f.erdma_loaded = erdma;
  f.compat_mode = compat;
  f.ofed_stack = ofed;
  f.nvidia_loaded = nvidia;
  f.nvidia_peermem_loaded = peermem;
  f.smc_loaded = smc;
  return f;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("judge_driver: want vs have, one line that says how to fix it") {
  struct Case {
    const char* name;
    DriverMode prefer;
    DriverFacts facts;
    const char* want;
    const char* have;
    bool mismatch;
    bool smcr;
    const char* in_line;
  };
  const std::vector<Case> cases = {
      {"SMC-R node as wanted", DriverMode::Default, node(true, false), "default", "default", false, true, "as wanted"},
      {"SMC-R node in compat", DriverMode::Default, node(true, true), "default", "compat", true, false,
       "SMC-R is not supported with the compat driver"},
      {"SMC-R node with OFED", DriverMode::Default, node(true, true, true), "default", "ofed", true, false,
       "preferDriver: default"},
      {"no module", DriverMode::Default, node(false, std::nullopt), "default", "none", true, false, "modprobe erdma"},
      {"GPU node as wanted", DriverMode::Ofed, node(true, true, true, true, true), "ofed", "ofed", false, false,
       "as wanted"},
      {"GPU node with the default driver", DriverMode::Ofed, node(true, false, false, true, true), "ofed", "default",
       true, true, "preferDriver: ofed"},
      {"compat wanted, default found", DriverMode::Compat, node(true, false), "compat", "default", true, true,
       "compat_mode=Y"},
      {"auto on a GPU node", DriverMode::Auto, node(true, true, true, true, true), "ofed", "ofed", false, false,
       "NVIDIA driver loaded"},
      {"auto without GPU", DriverMode::Auto, node(true, false), "default", "default", false, true, "no NVIDIA driver"},
      {"auto on a GPU node with the default driver", DriverMode::Auto, node(true, false, false, true, true), "ofed",
       "default", true, true, "want ofed"},
      {"default without smc module", DriverMode::Default, node(true, false, false, false, false, false), "default",
       "default", false, false, "as wanted"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto v = judge_driver(c.prefer, c.facts);
    CHECK(v.want == c.want);
    CHECK(v.have == c.have);
    CHECK(v.mismatch == c.mismatch);
    CHECK(v.smcr_capable == c.smcr);
    CHECK_MESSAGE(contains(v.line, c.in_line), v.line);
    CHECK(v.line.find('\n') == std::string::npos);
    CHECK(contains(v.line, "mismatch") == c.mismatch);
  }
}

TEST_CASE("judge_driver notes missing smc and nvidia_peermem") {
  auto no_smc = judge_driver(DriverMode::Default, node(true, false, false, false, false, false));
  REQUIRE(no_smc.notes.size() == 1);
  CHECK(contains(no_smc.notes[0], "modprobe smc"));
  CHECK(no_smc.modules_to_load == std::vector<std::string>{"smc"});

  auto no_peermem = judge_driver(DriverMode::Ofed, node(true, true, true, true, false));
  REQUIRE(no_peermem.notes.size() == 1);
  CHECK(contains(no_peermem.notes[0], "nvidia_peermem"));
  CHECK(no_peermem.modules_to_load == std::vector<std::string>{"nvidia_peermem"});

  auto fine = judge_driver(DriverMode::Ofed, node(true, true, true, true, true));
  CHECK(fine.notes.empty());
}

TEST_CASE("found_mode: node types decide without a compat_mode parameter") {
  auto f = node(true, std::nullopt);
  f.node_types = {{"erdma_0", "RNIC"}};
  CHECK(found_mode(f) == "default");
  f.node_types.push_back({"erdma_1", "CA"});
  CHECK(found_mode(f) == "compat");
  f.compat_mode = false;  // the parameter, where present, decides
  CHECK(found_mode(f) == "default");
}

TEST_CASE("nfd_features: name=value lines NFD turns into feature.node.kubernetes.io labels") {
  const auto v = judge_driver(DriverMode::Default, node(true, true));
  const std::string text = nfd_features(v, 2);
  CHECK(contains(text, "\nerdma-driver-mode=compat\n"));
  CHECK(contains(text, "\nerdma-driver-want=default\n"));
  CHECK(contains(text, "\nerdma-driver-mismatch=true\n"));
  CHECK(contains(text, "\nerdma-smcr=false\n"));
  CHECK(contains(text, "\nerdma-devices=2\n"));
  CHECK(text.front() == '#');
  CHECK(text.back() == '\n');
}

}  // namespace erdma::agent

namespace erdma::agent {

TEST_CASE("plan_module_loads: what driver.loadModules may load, never a mode change") {
  using V = std::vector<std::string>;
  // default wanted, nothing loaded: erdma first (smc comes into the plan once erdma is there).
  CHECK(plan_module_loads(judge_driver(DriverMode::Default, node(false, std::nullopt, false, false, false, false))) ==
        V{"erdma"});
  // default, erdma there, smc missing: smc together with smc_diag.
  CHECK(plan_module_loads(judge_driver(DriverMode::Default, node(true, false, false, false, false, false))) ==
        V{"smc", "smc_diag"});
  // all well: nothing.
  CHECK(plan_module_loads(judge_driver(DriverMode::Default, node(true, false))).empty());
  // compat or ofed wanted without erdma: the driver build and its options are the operator's.
  CHECK(plan_module_loads(judge_driver(DriverMode::Compat, node(false, std::nullopt))).empty());
  // (nvidia_peermem does not depend on the erdma build, so it is still planned.)
  CHECK(plan_module_loads(judge_driver(DriverMode::Ofed, node(false, std::nullopt, false, true))) ==
        V{"nvidia_peermem"});
  // ofed node with a GPU driver but no nvidia_peermem: that one.
  CHECK(plan_module_loads(judge_driver(DriverMode::Ofed, node(true, std::nullopt, true, true, false))) ==
        V{"nvidia_peermem"});
  // a compat node where default is wanted: a mismatch, but nothing to load (a reload is maintenance).
  CHECK(plan_module_loads(judge_driver(DriverMode::Default, node(true, true))).empty());
}

}  // namespace erdma::agent
