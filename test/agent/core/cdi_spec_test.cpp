// CDI specs for prepared claims: device nodes, NCCL env shared with the device plugin, SMC-R.
#include "agent/core/cdi_spec.hpp"

#include <doctest/doctest.h>

#include <cctype>
#include <set>

#include "test/fakes/fake_rdma_devices.hpp"
#include "test/support.hpp"

namespace erdma::agent {
namespace {
using nlohmann::json;
using testing::make_device;

constexpr const char* kUid = "6f1c2a9e-0b7d-4c53-9a41-3e8b2d7f0c11";
constexpr const char* kUid2 = "0a7c2a9e-0b7d-4c53-9a41-3e8b2d7f0c12";

RdmaDevice roce(std::string name, std::string uverbs, unsigned gid_index, std::string netdev) {
  RdmaDevice d = make_device(std::move(name), std::move(uverbs), 0, PortState::Active, std::move(netdev));
  d.ports.front().gids = {Gid{gid_index, "0000:0000:0000:0000:0000:ffff:0a00:0005", GidType::RoceV2, "eth0"}};
  return d;
}

std::vector<RdmaDevice> node() {
  return {roce("erdma_0", "uverbs0", 3, "eth0"), roce("erdma_1", "uverbs1", 3, "eth1"),
          make_device("erdma_2", "uverbs2", 1)};
}

AllocateOptions options() {
  AllocateOptions o;
  o.preload_host_dir = std::string(contract::kPreloadHostDir);
  return o;
}

CdiClaim claim(std::vector<std::string> cards, bool smcr = false, std::string uid = kUid) {
  return CdiClaim{std::move(uid), "team-a", "train-0", std::move(cards), smcr};
}

// The rules CDI checks when it loads a spec of version 0.5.0 (specs-go v1.1.1 version.go and
// pkg/cdi: device names, env entries, non-empty device edits, nothing from 0.6.0 or later).
void check_cdi_rules(const json& spec) {
  CHECK(spec["cdiVersion"] == "0.5.0");
  const std::string kind = spec["kind"];
  REQUIRE(kind.find('/') != std::string::npos);
  CHECK(kind.substr(kind.find('/') + 1).find('.') == std::string::npos);  // '.' in the class needs 0.6.0
  CHECK_FALSE(spec.contains("annotations"));
  auto check_edits = [](const json& e) {
    for (const auto& item : e.items()) {
      const std::string k = item.key();  // a plain name: CAPTURE's lambda cannot take a structured binding in clang 14
      CAPTURE(k);
      CHECK((k == "env" || k == "deviceNodes" || k == "mounts" || k == "hooks"));
    }
    // specs-go Hook; pkg/cdi validates the name against the OCI hook points it knows.
    for (const auto& h : e.value("hooks", json::array())) {
      const std::set<std::string> names = {"prestart",       "createRuntime", "createContainer",
                                           "startContainer", "poststart",     "poststop"};
      CHECK(names.count(h["hookName"].get<std::string>()) == 1);
      CHECK(h["path"].get<std::string>().starts_with("/"));
      CHECK_FALSE(h.contains("timeout"));  // a runtime fails the container when a hook's timeout passes
    }
    for (const auto& env : e.value("env", json::array())) CHECK(env.get<std::string>().find('=') > 0);
    for (const auto& dn : e.value("deviceNodes", json::array()))
      CHECK(dn["path"].get<std::string>().starts_with("/dev/"));
    for (const auto& m : e.value("mounts", json::array())) {
      CHECK_FALSE(m["hostPath"].get<std::string>().empty());
      CHECK_FALSE(m["containerPath"].get<std::string>().empty());
    }
  };
  check_edits(spec["containerEdits"]);
  for (const auto& d : spec["devices"]) {
    CHECK_FALSE(d.contains("annotations"));
    const std::string name = d["name"];
    CHECK(std::isalnum(static_cast<unsigned char>(name.front())));
    CHECK(std::isalnum(static_cast<unsigned char>(name.back())));
    REQUIRE(d["containerEdits"].is_object());
    CHECK_FALSE(d["containerEdits"].empty());
    check_edits(d["containerEdits"]);
  }
}

std::vector<std::string> env_of(const json& edits) { return edits.value("env", std::vector<std::string>{}); }

}  // namespace

TEST_CASE("an RDMA claim: uverbs per card, rdma_cm and the device plugin's NCCL env once") {
  auto r = build_cdi_spec(claim({"erdma_1", "erdma_0", "erdma_1"}), node(), options());
  REQUIRE_OK(r);
  CHECK(r->file_name == std::string("erdma.aliyun.com-claim_") + kUid + ".json");
  CHECK(r->cards == std::vector<std::string>{"erdma_0", "erdma_1"});
  CHECK(r->cdi_ids ==
        std::map<std::string, std::string>{{"erdma_0", std::string("erdma.aliyun.com/claim=") + kUid + "-erdma_0"},
                                           {"erdma_1", std::string("erdma.aliyun.com/claim=") + kUid + "-erdma_1"}});
  const std::string u = kUid;
  CHECK(r->spec == json::parse(R"({
    "cdiVersion": "0.5.0",
    "kind": "erdma.aliyun.com/claim",
    "containerEdits": {
      "env": ["ERDMA_DEVICES=erdma_0,erdma_1", "NCCL_IB_GID_INDEX=3", "NCCL_IB_HCA==erdma_0,erdma_1"],
      "deviceNodes": [{"path": "/dev/infiniband/rdma_cm", "permissions": "rw"}]
    },
    "devices": [
      {"name": ")" + u + R"(-erdma_0",
       "containerEdits": {"deviceNodes": [{"path": "/dev/infiniband/uverbs0", "permissions": "rw"}]}},
      {"name": ")" + u + R"(-erdma_1",
       "containerEdits": {"deviceNodes": [{"path": "/dev/infiniband/uverbs1", "permissions": "rw"}]}}
    ]})"));
  check_cdi_rules(r->spec);
  CHECK(r->notes.empty());
}

TEST_CASE("an RDMA claim's env is exactly what Allocate gives a container holding the same cards") {
  for (bool socket_ifname : {false, true}) {
    for (bool nccl : {false, true}) {
      CAPTURE(socket_ifname);
      CAPTURE(nccl);
      auto o = options();
      o.nccl_env = nccl;
      o.nccl_socket_ifname = socket_ifname;
      auto r = build_cdi_spec(claim({"erdma_0", "erdma_1"}), node(), o);
      REQUIRE(r.ok());
      auto plugin = allocate_container({"erdma_0-0", "erdma_1-0"}, node(), 1, o);
      REQUIRE(plugin.ok());
      std::vector<std::string> want;
      for (const auto& [k, v] : plugin->envs) want.push_back(k + "=" + v);
      CHECK(env_of(r->spec["containerEdits"]) == want);
      // The preload mount is for SMC-R claims only.
      CHECK_FALSE(r->spec.dump().find("mounts") != std::string::npos);
    }
  }
}

TEST_CASE("an RDMA claim: no rdma_cm on the host is a note, not a device node that would stop the container") {
  auto o = options();
  o.rdma_cm_present = false;
  auto r = build_cdi_spec(claim({"erdma_0"}), node(), o);
  REQUIRE(r.ok());
  CHECK_FALSE(r->spec["containerEdits"].contains("deviceNodes"));
  CHECK(r->notes.size() == 1);
  check_cdi_rules(r->spec);
}

TEST_CASE("an SMC-R claim: the preload library and LD_PRELOAD, no raw RDMA devices, no NCCL env") {
  auto r = build_cdi_spec(claim({"erdma_0", "erdma_1"}, true), node(), options());
  REQUIRE_OK(r);
  const std::string text = r->spec.dump();
  CHECK(text.find("/dev/infiniband") == std::string::npos);
  CHECK(text.find("NCCL") == std::string::npos);
  CHECK(env_of(r->spec["containerEdits"]) ==
        std::vector<std::string>{"ERDMA_DEVICES=erdma_0,erdma_1", "LD_PRELOAD=/usr/lib/smc/libsmc-preload.so"});
  REQUIRE(r->spec["devices"].size() == 2);
  for (const auto& d : r->spec["devices"]) {
    CHECK(d["containerEdits"] == json::parse(R"({"mounts": [{"hostPath": "/var/lib/erdma-controller/lib",
        "containerPath": "/usr/lib/smc", "options": ["ro", "nosuid", "nodev", "bind"]}]})"));
  }
  check_cdi_rules(r->spec);

  auto o = options();
  o.preload_host_dir.clear();
  auto off = build_cdi_spec(claim({"erdma_0"}, true), node(), o);
  REQUIRE_FALSE(off.ok());
  CHECK(off.error().code == ErrorCode::FailedPrecondition);
  CHECK(off.error().message.find("team-a/train-0") != std::string::npos);
}

TEST_CASE("an SMC-R claim names the agent's createRuntime hook once, spec-wide; an RDMA claim never does") {
  CHECK_FALSE(build_cdi_spec(claim({"erdma_0"}, true), node(), options())->spec["containerEdits"].contains("hooks"));
  auto o = options();
  o.cdi_hook_dir = "/var/lib/erdma-controller/dra/";
  auto r = build_cdi_spec(claim({"erdma_0", "erdma_1"}, true), node(), o);
  REQUIRE_OK(r);
  CHECK(r->spec["containerEdits"]["hooks"] == json::parse(std::string(R"([{"hookName": "createRuntime",
      "path": "/var/lib/erdma-controller/dra/erdma-cdi-hook",
      "args": ["erdma-cdi-hook", "smcr", "--claim", ")") + kUid +
                                                          R"(", "--socket",
               "/var/lib/erdma-controller/dra/hook.sock"]}])"));
  for (const auto& d : r->spec["devices"]) CHECK_FALSE(d["containerEdits"].contains("hooks"));
  check_cdi_rules(r->spec);

  auto rdma = build_cdi_spec(claim({"erdma_0"}), node(), o);
  REQUIRE_OK(rdma);
  CHECK(rdma->spec.dump().find("hooks") == std::string::npos);
}

TEST_CASE("CDI names never collide across claims, and spec files are found again by name") {
  auto a = build_cdi_spec(claim({"erdma_0"}), node(), options());
  auto b = build_cdi_spec(claim({"erdma_0"}, false, kUid2), node(), options());
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->file_name != b->file_name);
  CHECK(a->cdi_ids.at("erdma_0") != b->cdi_ids.at("erdma_0"));
  CHECK(a->spec["devices"][0]["name"] != b->spec["devices"][0]["name"]);
  CHECK(is_claim_spec_file(a->file_name));
  CHECK_FALSE(is_claim_spec_file(a->file_name, "other.example.com"));
  for (const char* other : {"erdma.aliyun.com-claim_.json", "erdma.aliyun.com-claim_x y.json", "erdma-test.json",
                            "erdma.aliyun.com-claim_abc.yaml"}) {
    CAPTURE(other);
    CHECK_FALSE(is_claim_spec_file(other));
  }
  // The same claim gives the same bytes: a retried prepare rewrites an identical file.
  auto again = build_cdi_spec(claim({"erdma_0"}), node(), options());
  REQUIRE(again.ok());
  CHECK(again->spec.dump() == a->spec.dump());
}

TEST_CASE("build_cdi_spec refuses what it cannot describe, naming the claim") {
  struct Case {
    const char* name;
    CdiClaim claim;
    ErrorCode code;
  };
  std::vector<RdmaDevice> devices = node();
  devices.push_back(make_device("erdma_9", "", 0));
  devices.push_back(make_device("erdma_", "uverbs7", 0));
  const std::vector<Case> cases = {
      {"bad UID", claim({"erdma_0"}, false, "../x"), ErrorCode::InvalidArgument},
      {"empty UID", claim({"erdma_0"}, false, ""), ErrorCode::InvalidArgument},
      {"no cards", claim({}), ErrorCode::InvalidArgument},
      {"card not on the node", claim({"erdma_5"}), ErrorCode::NotFound},
      {"SMC-R card not on the node", claim({"erdma_5"}, true), ErrorCode::NotFound},
      {"card without uverbs", claim({"erdma_9"}), ErrorCode::FailedPrecondition},
      {"name CDI refuses", claim({"erdma_"}), ErrorCode::InvalidArgument},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto r = build_cdi_spec(c.claim, devices, options());
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == c.code);
    CHECK(r.error().message.find("team-a/train-0") != std::string::npos);
  }
}

TEST_CASE("is_claim_uid") {
  CHECK(is_claim_uid(kUid));
  CHECK(is_claim_uid("a"));
  for (const char* bad : {"", "-a", "a-", "a/b", "a b", "a_b"}) {
    CAPTURE(bad);
    CHECK_FALSE(is_claim_uid(bad));
  }
  CHECK_FALSE(is_claim_uid(std::string(65, 'a')));
}

}  // namespace erdma::agent
