// A ResourceClaim's preparation plan: UID check, this driver's results, the opaque config's mode
// and its precedence, devices mapped back to cards; the status entries.
#include "agent/core/dra_claim.hpp"

#include <doctest/doctest.h>

#include "test/fakes/fake_rdma_devices.hpp"

namespace erdma::agent {
namespace {
using nlohmann::json;
using testing::make_device;

constexpr const char* kUid = "6f1c2a9e-0b7d-4c53-9a41-3e8b2d7f0c11";
constexpr const char* kDriver = "erdma.aliyun.com";
constexpr const char* kPool = "node-1";

std::vector<RdmaDevice> node() { return {make_device("erdma_0", "uverbs0", 0), make_device("erdma_1", "uverbs1", 0)}; }

ClaimRef ref() { return ClaimRef{"team-a", "train-0", kUid}; }

json result(std::string request, std::string device, std::string driver = kDriver, std::string pool = kPool) {
  return json{{"request", request}, {"driver", driver}, {"pool", pool}, {"device", device}};
}

json params(std::string mode) {
  return json{{"apiVersion", "erdma.aliyun.com/v1alpha1"}, {"kind", "ErdmaConfig"}, {"mode", mode}};
}

json config(std::string source, std::string mode, json requests = json::array(), std::string driver = kDriver) {
  json c = {{"source", source}, {"opaque", {{"driver", driver}, {"parameters", params(mode)}}}};
  if (!requests.empty()) c["requests"] = requests;
  return c;
}

json claim_of(json results, json configs = json::array(), std::string uid = kUid) {
  json devices = {{"results", results}};
  if (!configs.empty()) devices["config"] = configs;
  return json{{"apiVersion", "resource.k8s.io/v1"},
              {"kind", "ResourceClaim"},
              {"metadata", {{"name", "train-0"}, {"namespace", "team-a"}, {"uid", uid}}},
              {"status", {{"allocation", {{"devices", devices}}}}}};
}

TEST_CASE("plan_claim: an RDMA claim of two cards") {
  auto plan =
      plan_claim(claim_of(json::array({result("nics", "erdma-1"), result("nics", "erdma-0")})), ref(), node(), kPool);
  REQUIRE(plan.ok());
  CHECK(plan->mode == ClaimMode::Rdma);
  REQUIRE(plan->devices.size() == 2);
  CHECK(plan->devices[0] == ClaimDevice{{"nics"}, kPool, "erdma-0", "erdma_0", ""});
  CHECK(plan->devices[1] == ClaimDevice{{"nics"}, kPool, "erdma-1", "erdma_1", ""});
  CHECK(plan->cdi.uid == kUid);
  CHECK(plan->cdi.cards == std::vector<std::string>{"erdma_0", "erdma_1"});
  CHECK_FALSE(plan->cdi.smcr);
}

TEST_CASE("plan_claim: errors, each with its code and the object it names") {
  struct Case {
    const char* name;
    json claim;
    ErrorCode code;
    const char* says;
  };
  json not_allocated = claim_of(json::array());
  not_allocated["status"].erase("allocation");
  json bad_params = claim_of(json::array({result("r", "erdma-0")}), json::array({config("FromClaim", "rdma")}));
  bad_params["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["extra"] = 1;
  json bad_kind = claim_of(json::array({result("r", "erdma-0")}), json::array({config("FromClass", "rdma")}));
  bad_kind["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["kind"] = "Other";
  json bad_version = claim_of(json::array({result("r", "erdma-0")}), json::array({config("FromClass", "rdma")}));
  bad_version["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"]["apiVersion"] = "v2";
  json bad_source = claim_of(json::array({result("r", "erdma-0")}), json::array({config("FromSomewhere", "rdma")}));
  const std::vector<Case> cases = {
      {"UID differs: the claim was recreated",
       claim_of(json::array({result("r", "erdma-0")}), json::array(), "other-uid"), ErrorCode::FailedPrecondition,
       "deleted and created again"},
      {"not allocated", not_allocated, ErrorCode::FailedPrecondition, "not allocated"},
      {"only other drivers' devices", claim_of(json::array({result("gpu", "gpu-0", "gpu.example.com")})),
       ErrorCode::FailedPrecondition, "no device of driver erdma.aliyun.com"},
      {"device not on the node", claim_of(json::array({result("r", "erdma-7")})), ErrorCode::NotFound, "erdma-7"},
      {"another node's pool", claim_of(json::array({result("r", "erdma-0", kDriver, "node-2")})), ErrorCode::NotFound,
       "node-2"},
      {"unknown parameter member", bad_params, ErrorCode::InvalidArgument, "\"extra\""},
      {"unknown kind", bad_kind, ErrorCode::InvalidArgument, "Other"},
      {"unknown apiVersion", bad_version, ErrorCode::InvalidArgument, "v2"},
      {"unknown mode", claim_of(json::array({result("r", "erdma-0")}), json::array({config("FromClaim", "roce")})),
       ErrorCode::InvalidArgument, "roce"},
      {"unknown source", bad_source, ErrorCode::InvalidArgument, "FromSomewhere"},
      {"mixed modes",
       claim_of(json::array({result("a", "erdma-0"), result("b", "erdma-1")}),
                json::array({config("FromClaim", "smcr", json::array({"b"}))})),
       ErrorCode::InvalidArgument, "two claims"},
      {"not a claim", json::array(), ErrorCode::InvalidArgument, "not a ResourceClaim"},
      {"result without device", claim_of(json::array({json{{"request", "r"}, {"driver", kDriver}, {"pool", kPool}}})),
       ErrorCode::InvalidArgument, ".device"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto plan = plan_claim(c.claim, ref(), node(), kPool);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.error().code == c.code);
    CHECK(plan.error().message.find(c.says) != std::string::npos);
    CHECK(plan.error().message.find("team-a/train-0") != std::string::npos);
  }
}

TEST_CASE("plan_claim: members of the wrong type are InvalidArgument naming the claim and the member, never a throw") {
  struct Case {
    const char* name;
    const char* pointer;
    json value;
    const char* says;
  };
  const json base = claim_of(json::array({result("r", "erdma-0")}), json::array({config("FromClaim", "rdma")}));
  const std::vector<Case> cases = {
      {"uid a number", "/metadata/uid", 5, "metadata.uid: expected a string, got number 5"},
      {"devices a list", "/status/allocation/devices", json::array(),
       "status.allocation.devices: expected an object, got list"},
      {"results a map", "/status/allocation/devices/results", json::object(),
       "status.allocation.devices.results: expected an array, got map"},
      {"result driver a number", "/status/allocation/devices/results/0/driver", 1,
       "status.allocation.devices.results[0].driver: expected a string, got number 1"},
      {"result pool empty", "/status/allocation/devices/results/0/pool", "",
       "status.allocation.devices.results[0].pool is empty"},
      {"shareID a number", "/status/allocation/devices/results/0/shareID", 7,
       "status.allocation.devices.results[0].shareID: expected a string, got number 7"},
      {"config a string", "/status/allocation/devices/config/0", "x",
       "status.allocation.devices.config[0]: expected an object, got string"},
      {"opaque driver a list", "/status/allocation/devices/config/0/opaque/driver", json::array(),
       "status.allocation.devices.config[0].opaque.driver: expected a string, got list"},
      {"source a bool", "/status/allocation/devices/config/0/source", true,
       "status.allocation.devices.config[0].source: expected a string, got boolean true"},
      {"requests a map", "/status/allocation/devices/config/0/requests", json::object(),
       "status.allocation.devices.config[0].requests: expected an array, got map"},
      {"a request a number", "/status/allocation/devices/config/0/requests", json::array({"r", 3}),
       "status.allocation.devices.config[0].requests[1]: expected a string, got number 3"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    json claim = base;
    claim[json::json_pointer(c.pointer)] = c.value;
    auto plan = plan_claim(claim, ref(), node(), kPool);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.error().code == ErrorCode::InvalidArgument);
    CHECK(plan.error().message.find(c.says) != std::string::npos);
    CHECK(plan.error().message.find("claim team-a/train-0 (" + std::string(kUid) + ")") == 0);
  }
}

TEST_CASE("reserved_pods and merged_device_status: entries of any shape are skipped or kept, never a throw") {
  json claim = claim_of(json::array());
  claim["status"]["reservedFor"] =
      json::array({json{{"resource", 5}, {"name", "x"}}, json{{"resource", "pods"}, {"name", 5}}, 7,
                   json{{"resource", "pods"}, {"name", "web-0"}}});
  CHECK(reserved_pods(claim) == std::vector<ReservedPod>{{"web-0", ""}});
  claim["status"]["devices"] = json::array({json{{"driver", 5}}, "odd", json{{"driver", kDriver}, {"device", "old"}}});
  const json merged = merged_device_status(claim, json::array({json{{"driver", kDriver}, {"device", "new"}}}));
  CHECK(merged == json::array({json{{"driver", 5}}, "odd", json{{"driver", kDriver}, {"device", "new"}}}));
  claim["status"]["devices"] = json::object({{"driver", kDriver}});
  CHECK(merged_device_status(claim, json::array()) == json::array());
}

TEST_CASE("plan_claim: the mode from the configs, FromClaim over FromClass, later over earlier") {
  struct Case {
    const char* name;
    json configs;
    ClaimMode want;
  };
  const std::vector<Case> cases = {
      {"no config: RDMA", json::array(), ClaimMode::Rdma},
      {"class says smcr", json::array({config("FromClass", "smcr")}), ClaimMode::Smcr},
      {"claim narrows the class's RDMA to SMC-R",
       json::array({config("FromClass", "rdma"), config("FromClaim", "smcr")}), ClaimMode::Smcr},
      {"claim restates the class's SMC-R", json::array({config("FromClass", "smcr"), config("FromClaim", "smcr")}),
       ClaimMode::Smcr},
      {"claim overrides class whatever the order",
       json::array({config("FromClaim", "smcr"), config("FromClass", "rdma")}), ClaimMode::Smcr},
      {"within a source the later wins", json::array({config("FromClaim", "rdma"), config("FromClaim", "smcr")}),
       ClaimMode::Smcr},
      {"a config for another request does not apply",
       json::array({config("FromClaim", "smcr", json::array({"other"}))}), ClaimMode::Rdma},
      {"the main request name covers a subrequest", json::array({config("FromClaim", "smcr", json::array({"nics"}))}),
       ClaimMode::Smcr},
      {"another driver's config is ignored, even when it is not ours to read",
       json::array(
           {json{{"source", "FromClaim"}, {"opaque", {{"driver", "gpu.example.com"}, {"parameters", {{"x", 1}}}}}}}),
       ClaimMode::Rdma},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto plan = plan_claim(claim_of(json::array({result("nics/fast", "erdma-0")}), c.configs), ref(), node(), kPool);
    REQUIRE(plan.ok());
    CHECK(plan->mode == c.want);
    CHECK(plan->cdi.smcr == (c.want == ClaimMode::Smcr));
    CHECK(plan->devices.at(0).requests == std::vector<std::string>{"nics"});  // subrequest stripped
  }
}

// The SMC-R class is not a door to raw verbs (security review M3): a claim that asks mode rdma of a
// request its class makes SMC-R is refused, whatever the order of the configs.
TEST_CASE("plan_claim: a claim cannot turn its class's SMC-R into raw RDMA") {
  for (const auto& configs :
       {json::array({config("FromClass", "smcr"), config("FromClaim", "rdma")}),
        json::array({config("FromClaim", "rdma"), config("FromClass", "smcr")}),
        json::array({config("FromClass", "smcr"), config("FromClaim", "smcr"), config("FromClaim", "rdma")})}) {
    CAPTURE(configs.dump());
    auto plan = plan_claim(claim_of(json::array({result("nics/fast", "erdma-0")}), configs), ref(), node(), kPool);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.error().code == ErrorCode::PermissionDenied);
    CHECK(plan.error().message.find("request \"nics/fast\" comes from a DeviceClass whose config makes it SMC-R") !=
          std::string::npos);
    CHECK(plan.error().message.find("never SMC-R into raw RDMA") != std::string::npos);
  }
  // A config of the claim for another request leaves this one to its class.
  auto other =
      plan_claim(claim_of(json::array({result("nics/fast", "erdma-0")}),
                          json::array({config("FromClass", "smcr"), config("FromClaim", "rdma", json::array({"x"}))})),
                 ref(), node(), kPool);
  REQUIRE(other.ok());
  CHECK(other->mode == ClaimMode::Smcr);
}

TEST_CASE("plan_claim: a claim of two drivers prepares only this driver's devices") {
  auto plan = plan_claim(claim_of(json::array({result("gpu", "gpu-0", "gpu.example.com"), result("nic", "erdma-1")})),
                         ref(), node(), kPool);
  REQUIRE(plan.ok());
  REQUIRE(plan->devices.size() == 1);
  CHECK(plan->devices[0].card == "erdma_1");
  CHECK(plan->notes.size() == 1);
}

TEST_CASE("plan_claim: one device for two requests is one device naming both") {
  auto plan = plan_claim(claim_of(json::array({result("b", "erdma-0"), result("a", "erdma-0")})), ref(), node(), kPool);
  REQUIRE(plan.ok());
  REQUIRE(plan->devices.size() == 1);
  CHECK(plan->devices[0].requests == std::vector<std::string>{"a", "b"});
}

TEST_CASE("plan_claim: shares of a shared card (consumable capacity) keep their shareID to the status") {
  constexpr const char* kShare1 = "0b7d6f1c-2a9e-4c53-9a41-3e8b2d7f0c11";
  constexpr const char* kShare2 = "1c8e7a2d-3b0f-4d64-8b52-4f9c3e8a1d22";
  json r1 = result("a", "erdma-0");
  r1["shareID"] = kShare1;
  json r2 = result("b", "erdma-0");
  r2["shareID"] = kShare2;
  auto plan = plan_claim(claim_of(json::array({r2, r1})), ref(), node(), kPool);
  REQUIRE(plan.ok());
  REQUIRE(plan->devices.size() == 2);  // two shares of one card: two devices of the answer
  CHECK(plan->devices[0] == ClaimDevice{{"a"}, kPool, "erdma-0", "erdma_0", kShare1});
  CHECK(plan->devices[1] == ClaimDevice{{"b"}, kPool, "erdma-0", "erdma_0", kShare2});
  auto spec = build_cdi_spec(plan->cdi, node(), AllocateOptions{});
  REQUIRE(spec.ok());
  auto prepared = prepared_claim(*plan, *spec);
  REQUIRE(prepared.ok());
  CHECK(prepared->devices[0].share_id == kShare1);
  auto entries = device_status_entries(*prepared, {});
  REQUIRE(entries.ok());
  CHECK((*entries)[0]["shareID"] == kShare1);
  CHECK((*entries)[1]["shareID"] == kShare2);
  auto back = decode_checkpoint(encode_checkpoint(with_claim({}, *prepared)));
  REQUIRE(back.ok());
  CHECK(back->claims.at(kUid) == *prepared);

  json bad = result("a", "erdma-0");
  bad["shareID"] = "not a uid!";
  auto refused = plan_claim(claim_of(json::array({bad})), ref(), node(), kPool);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::InvalidArgument);
  CHECK(refused.error().message.find("shareID") != std::string::npos);
}

TEST_CASE("reserved_pods: the pods of status.reservedFor; anything malformed gives none") {
  json c = claim_of(json::array({result("nics", "erdma-0")}));
  c["status"]["reservedFor"] = json::parse(R"([
    {"resource": "pods", "name": "train-0", "uid": "u1"},
    {"resource": "widgets", "name": "w", "uid": "u2"},
    {"resource": "pods", "name": 7},
    {"resource": "pods", "name": ""},
    "pods/x",
    {"resource": "pods", "name": "train-1", "uid": "u3"}])");
  CHECK(reserved_pods(c) == std::vector<ReservedPod>{{"train-0", "u1"}, {"train-1", "u3"}});
  for (const char* bad : {R"([])", R"("claim")", R"({})", R"({"status": 5})",
                          R"({"status": {"reservedFor": {"a": 1}}})", R"({"status": {"reservedFor": null}})"}) {
    CAPTURE(bad);
    CHECK(reserved_pods(json::parse(bad)).empty());
  }
}

TEST_CASE("prepared_claim takes the CDI names and file from the spec") {
  auto plan = plan_claim(claim_of(json::array({result("nics", "erdma-0")})), ref(), node(), kPool);
  REQUIRE(plan.ok());
  AllocateOptions opts;
  auto spec = build_cdi_spec(plan->cdi, node(), opts);
  REQUIRE(spec.ok());
  auto prepared = prepared_claim(*plan, *spec);
  REQUIRE(prepared.ok());
  CHECK(prepared->cdi_spec_file == spec->file_name);
  REQUIRE(prepared->devices.size() == 1);
  CHECK(prepared->devices[0].cdi_ids == std::vector<std::string>{cdi_device_id(kDriver, kUid, "erdma_0")});
  CHECK(decode_checkpoint(encode_checkpoint(with_claim({}, *prepared))).ok());
}

TEST_CASE("device_status_entries: networkData from card facts, limits checked") {
  PreparedClaim c{kUid,
                  "team-a",
                  "train-0",
                  false,
                  "f.json",
                  {PreparedDevice{{"r"}, kPool, "erdma-0", "erdma_0", {"x"}, ""},
                   PreparedDevice{{"r"}, kPool, "erdma-1", "erdma_1", {"y"}, ""}}};
  std::map<std::string, CardNetwork> nets = {
      {"erdma_0", {"eth0", {"10.0.0.5/24", "2001:db8::5/64"}, "00:16:3e:00:00:01"}}};
  auto e = device_status_entries(c, nets);
  REQUIRE(e.ok());
  CHECK(*e == json::parse(R"([
    {"driver":"erdma.aliyun.com","pool":"node-1","device":"erdma-0",
     "networkData":{"interfaceName":"eth0","ips":["10.0.0.5/24","2001:db8::5/64"],"hardwareAddress":"00:16:3e:00:00:01"}},
    {"driver":"erdma.aliyun.com","pool":"node-1","device":"erdma-1"}])"));
  for (const char* bad : {"10.0.0.5", "10.0.0.5/33", "2001:db8::5/129", "host/24", "10.0.0.5/024"}) {
    CAPTURE(bad);
    nets["erdma_0"].ips = {bad};
    auto r = device_status_entries(c, nets);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("erdma_0") != std::string::npos);
  }
  nets["erdma_0"].ips = {"10.0.0.5/24", "10.0.0.5/24"};
  CHECK_FALSE(device_status_entries(c, nets).ok());

  const json claim = {{"status",
                       {{"devices", json::array({json{{"driver", "gpu.example.com"}, {"pool", "p"}, {"device", "g"}},
                                                 json{{"driver", kDriver}, {"pool", kPool}, {"device", "old"}}})}}}};
  const auto merged = merged_device_status(claim, *device_status_entries(c, {}));
  REQUIRE(merged.size() == 3);
  CHECK(merged[0]["driver"] == "gpu.example.com");
  CHECK(merged[1]["device"] == "erdma-0");
  CHECK(merged[2]["device"] == "erdma-1");
}

TEST_CASE("pod_side_status_entries: the pod's interface on every device, and a Ready condition") {
  PreparedClaim c{kUid,
                  "team-a",
                  "smcr-0",
                  true,
                  "f.json",
                  {PreparedDevice{{"r"}, kPool, "erdma-0", "erdma_0", {"x"}, ""},
                   PreparedDevice{{"r"}, kPool, "erdma-1", "erdma_1", {"y"}, ""}}};
  auto nets = every_card(c, CardNetwork{"eth0", {"10.89.1.5/24"}, "0a:58:0a:59:01:05"});
  PodSideStatus side{true, "PodNetnsConfigured", "configured pod team-a/server", "2026-12-08T01:02:03Z"};
  auto e = pod_side_status_entries(c, nets, side);
  REQUIRE(e.ok());
  const json condition = json::parse(R"({"type":"Ready","status":"True","reason":"PodNetnsConfigured",
    "message":"configured pod team-a/server","lastTransitionTime":"2026-12-08T01:02:03Z"})");
  json want = json::parse(R"([
    {"driver":"erdma.aliyun.com","pool":"node-1","device":"erdma-0",
     "networkData":{"interfaceName":"eth0","ips":["10.89.1.5/24"],"hardwareAddress":"0a:58:0a:59:01:05"}},
    {"driver":"erdma.aliyun.com","pool":"node-1","device":"erdma-1",
     "networkData":{"interfaceName":"eth0","ips":["10.89.1.5/24"],"hardwareAddress":"0a:58:0a:59:01:05"}}])");
  for (auto& entry : want) entry["conditions"] = json::array({condition});
  CHECK(*e == want);

  SUBCASE("not set up: Ready False, and no network when none is known") {
    side = PodSideStatus{false, "PodSetupFailed", "the kernel has no SMC", "2026-12-08T01:02:03Z"};
    auto f = pod_side_status_entries(c, {}, side);
    REQUIRE(f.ok());
    CHECK_FALSE((*f)[0].contains("networkData"));
    CHECK((*f)[1]["conditions"][0]["status"] == "False");
    CHECK((*f)[1]["conditions"][0]["reason"] == "PodSetupFailed");
  }
  SUBCASE("the API's limits") {
    for (const char* bad : {"", "1Up", "Pod Setup", "Setup-Failed", "Trailing:", "Ünicode"}) {
      CAPTURE(bad);
      side.reason = bad;
      CHECK(pod_side_status_entries(c, nets, side).error().code == ErrorCode::InvalidArgument);
    }
    side.reason = "Ok_1:a,b";
    CHECK(pod_side_status_entries(c, nets, side).ok());
    side.since.clear();
    CHECK_FALSE(pod_side_status_entries(c, nets, side).ok());
    side.since = "2026-12-08T01:02:03Z";
    nets["erdma_0"].ips = {"10.89.1.5"};
    CHECK(pod_side_status_entries(c, nets, side).error().message.find("erdma_0") != std::string::npos);
  }
  SUBCASE("a long message is cut on a character, within 32768 bytes") {
    side.message = std::string(32767, 'a') + "\xc3\xa9" + "tail";  // an e-acute across the limit
    auto f = pod_side_status_entries(c, nets, side);
    REQUIRE(f.ok());
    CHECK((*f)[0]["conditions"][0]["message"].get<std::string>() == std::string(32767, 'a'));
    CHECK_NOTHROW((void)f->dump());
  }
}

TEST_CASE("ready_since: a Ready condition keeps its time while its status stays") {
  const json claim = json::parse(R"({"status":{"devices":[
    {"driver":"gpu.example.com","device":"g","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"T0"}]},
    {"driver":"erdma.aliyun.com","device":"erdma-0","conditions":[
      {"type":"Other","status":"True","lastTransitionTime":"T1"},
      {"type":"Ready","status":"False","lastTransitionTime":"T2"}]}]}})");
  CHECK(ready_since(claim, false, "NOW") == "T2");
  CHECK(ready_since(claim, true, "NOW") == "NOW");
  CHECK(ready_since(json::parse(R"({"status":{"devices":[{"driver":"erdma.aliyun.com","device":"d"}]}})"), true,
                    "NOW") == "NOW");
  for (const char* odd : {R"(null)", R"({"status":5})", R"({"status":{"devices":{}}})",
                          R"({"status":{"devices":[{"driver":"erdma.aliyun.com","conditions":[{"type":"Ready",
                              "status":"True","lastTransitionTime":7}]}]}})"}) {
    CAPTURE(odd);
    CHECK(ready_since(json::parse(odd), true, "NOW") == "NOW");
  }
}

}  // namespace
}  // namespace erdma::agent
