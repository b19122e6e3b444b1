// The prepared-claims checkpoint: its format, strict decoding, and idempotent prepare/unprepare.
#include "agent/core/dra_checkpoint.hpp"

#include <doctest/doctest.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "agent/core/cdi_spec.hpp"
#include "test/support.hpp"

namespace erdma::agent {
namespace {
using nlohmann::json;

constexpr const char* kUidA = "6f1c2a9e-0b7d-4c53-9a41-3e8b2d7f0c11";
constexpr const char* kUidB = "7a2d3b0f-1c8e-4d64-8b52-4f9c3e8a1d22";
constexpr const char* kUidC = "8b3e4c1a-2d9f-4e75-9c63-5a0d4f9b2e33";

PreparedDevice device(std::string dev, std::string card, std::string uid,
                      std::vector<std::string> requests = {"rdma"}) {
  return PreparedDevice{
      std::move(requests), "node-a", std::move(dev), card, {cdi_device_id("erdma.aliyun.com", uid, card)}, ""};
}

PreparedClaim claim_a() {
  return PreparedClaim{kUidA,
                       "team-a",
                       "train-0",
                       false,
                       cdi_spec_file_name("erdma.aliyun.com", kUidA),
                       {device("erdma-1", "erdma_1", kUidA, {"rdma", "extra"}), device("erdma-0", "erdma_0", kUidA)}};
}

PreparedClaim claim_b() {
  return PreparedClaim{kUidB,
                       "web",
                       "smc-7",
                       true,
                       cdi_spec_file_name("erdma.aliyun.com", kUidB),
                       {device("erdma-0", "erdma_0", kUidB, {"smc"})}};
}

// Re-signs an edited document, so that the rule under test is what refuses it, not the checksum.
std::string resigned(json doc) {
  doc.erase("checksum");
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", crc32(doc.dump()));
  doc["checksum"] = std::string("crc32:") + buf;
  return doc.dump();
}

}  // namespace

TEST_CASE("claims_on_cards: the recorded claims holding any of the cards, with those cards") {
  const Checkpoint cp = with_claim(with_claim({}, claim_b()), claim_a());
  CHECK(claims_on_cards(cp, {"erdma_1"}) == std::map<std::string, std::vector<std::string>>{{kUidA, {"erdma_1"}}});
  CHECK(claims_on_cards(cp, {"erdma_0", "erdma_1"}) ==
        std::map<std::string, std::vector<std::string>>{{kUidA, {"erdma_0", "erdma_1"}}, {kUidB, {"erdma_0"}}});
  CHECK(claims_on_cards(cp, {"erdma_7"}).empty());
  CHECK(claims_on_cards({}, {"erdma_0"}).empty());
}

TEST_CASE("crc32 is the IEEE CRC-32 zlib computes") {
  CHECK(crc32("") == 0u);
  CHECK(crc32("123456789") == 0xcbf43926u);
  CHECK(crc32("The quick brown fox jumps over the lazy dog") == 0x414fa339u);
}

TEST_CASE("a checkpoint round-trips, canonical and byte-for-byte stable") {
  const Checkpoint cp = with_claim(with_claim({}, claim_b()), claim_a());
  const std::string text = encode_checkpoint(cp);
  auto back = decode_checkpoint(text);
  REQUIRE_OK(back);
  CHECK(*back == cp);
  CHECK(encode_checkpoint(*back) == text);
  // Normalized on the way in: devices by name, requests sorted.
  const auto& a = back->claims.at(kUidA);
  CHECK(a.devices[0].device == "erdma-0");
  CHECK(a.devices[1].requests == std::vector<std::string>{"extra", "rdma"});
  const json doc = json::parse(text);
  CHECK(doc["kind"] == "erdma-agent/dra-checkpoint");
  CHECK(doc["version"] == 1);
  CHECK(doc["checksum"].get<std::string>().starts_with("crc32:"));

  auto empty = decode_checkpoint(encode_checkpoint({}));
  REQUIRE(empty.ok());
  CHECK(empty->claims.empty());
}

TEST_CASE("the file is one compact JSON object with sorted keys, its checksum over the other members") {
  const std::string text = encode_checkpoint(with_claim(with_claim({}, claim_b()), claim_a()));
  const json doc = json::parse(text);
  CHECK(doc.dump() + "\n" == text);  // exactly what nlohmann writes for the object
  CHECK(doc.begin().key() == "checksum");
  CHECK(resigned(doc) + "\n" == text);
  CHECK(encode_checkpoint({}) ==
        resigned(json{{"kind", kCheckpointKind}, {"version", 1}, {"claims", json::array()}}) + "\n");
}

TEST_CASE("decode refuses corrupt, foreign and unknown-version checkpoints with a clear error") {
  const Checkpoint cp = with_claim(with_claim({}, claim_a()), claim_b());
  const std::string text = encode_checkpoint(cp);
  const json doc = json::parse(text);
  struct Case {
    const char* name;
    std::string text;
    const char* in_message;
  };
  auto edit = [&](auto fn) {
    json d = doc;
    fn(d);
    return resigned(d);
  };
  std::string flipped = text;
  flipped[flipped.find("train-0")] = 'T';
  const std::vector<Case> cases = {
      {"empty", "", "not JSON"},
      {"truncated", text.substr(0, text.size() / 2), "not JSON"},
      {"a byte changed", flipped, "corrupt"},
      {"checksum removed",
       [&] {
         json d = doc;
         d.erase("checksum");
         return d.dump();
       }(),
       "checksum"},
      {"array", "[]", "not a JSON object"},
      {"other kind", edit([](json& d) { d["kind"] = "something-else"; }), "kind"},
      {"newer version", edit([](json& d) { d["version"] = 2; }), "newer agent"},
      {"older version", edit([](json& d) { d["version"] = 0; }), "version 0"},
      {"version a string", edit([](json& d) { d["version"] = "1"; }), "integer version"},
      {"unknown top member", edit([](json& d) { d["extra"] = 1; }), "unknown member \"extra\""},
      {"claims an object", edit([](json& d) { d["claims"] = json::object(); }), "claims is not an array"},
      {"unknown claim member", edit([](json& d) { d["claims"][0]["x"] = 1; }), "unknown member \"x\""},
      {"claim without uid", edit([](json& d) { d["claims"][0].erase("uid"); }), "no member \"uid\""},
      {"bad uid", edit([](json& d) { d["claims"][0]["uid"] = "../etc"; }), "claim UID"},
      {"bad namespace", edit([](json& d) { d["claims"][0]["namespace"] = "Team_A"; }), "namespace"},
      {"smcr a string", edit([](json& d) { d["claims"][0]["smcr"] = "true"; }), "smcr"},
      {"spec file with a slash", edit([](json& d) { d["claims"][0]["cdiSpecFile"] = "../x.json"; }), "cdiSpecFile"},
      {"no devices", edit([](json& d) { d["claims"][0]["devices"] = json::array(); }), "devices"},
      {"device member unknown", edit([](json& d) { d["claims"][0]["devices"][0]["y"] = 1; }), "unknown member \"y\""},
      {"device name invalid", edit([](json& d) { d["claims"][0]["devices"][0]["device"] = "erdma_0"; }),
       "DNS-1123 label"},
      {"card invalid", edit([](json& d) { d["claims"][0]["devices"][0]["card"] = "a b"; }), "RDMA device name"},
      {"no CDI ids", edit([](json& d) { d["claims"][0]["devices"][0]["cdiDeviceIds"] = json::array(); }), "empty"},
      {"CDI id malformed", edit([](json& d) { d["claims"][0]["devices"][0]["cdiDeviceIds"] = {"x"}; }), "CDI"},
      {"request invalid", edit([](json& d) { d["claims"][0]["devices"][0]["requests"] = {"A/"}; }), "request"},
      {"device twice", edit([](json& d) { d["claims"][0]["devices"].push_back(d["claims"][0]["devices"][0]); }),
       "twice"},
      {"claim twice", edit([](json& d) { d["claims"].push_back(d["claims"][0]); }), "twice"},
      {"share ID not a UID", edit([](json& d) { d["claims"][0]["devices"][0]["shareID"] = "../x"; }), "share UID"},
      {"share ID a number", edit([](json& d) { d["claims"][0]["devices"][0]["shareID"] = 5; }), "shareID"},
      {"too big", std::string(kMaxCheckpointBytes + 1, ' '), "bytes"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto r = decode_checkpoint(c.text);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::InvalidArgument);
    CHECK(r.error().message.find(c.in_message) != std::string::npos);
    CHECK(r.error().message.starts_with("DRA checkpoint"));
    CHECK(r.error().message.find("move the file away") != std::string::npos);  // says how to get out
  }
}

TEST_CASE("prepare is idempotent: the same claim again answers with what was recorded") {
  Checkpoint cp;
  auto first = decide_prepare(cp, claim_a());
  REQUIRE(first.ok());
  CHECK(first->verdict == PrepareVerdict::Prepare);
  cp = with_claim(cp, first->claim);

  // The kubelet retries (or a restarted agent is asked again): devices in another order, and CDI
  // names an upgraded agent would spell differently; the recorded names are the ones on disk.
  PreparedClaim again = claim_a();
  std::swap(again.devices[0], again.devices[1]);
  for (auto& d : again.devices) d.cdi_ids = {"erdma.aliyun.com/claim=new-" + d.card};
  auto second = decide_prepare(cp, again);
  REQUIRE(second.ok());
  CHECK(second->verdict == PrepareVerdict::AlreadyPrepared);
  CHECK(second->claim == cp.claims.at(kUidA));
}

TEST_CASE("prepare of a recorded claim with other devices is an error naming both") {
  const Checkpoint cp = with_claim({}, claim_a());
  struct Case {
    const char* name;
    void (*edit)(PreparedClaim&);
  };
  const std::vector<Case> cases = {
      {"another card", [](PreparedClaim& c) { c.devices[0].card = "erdma_7"; }},
      {"a device fewer", [](PreparedClaim& c) { c.devices.pop_back(); }},
      {"another pool", [](PreparedClaim& c) { c.devices[0].pool = "node-b"; }},
      {"other requests", [](PreparedClaim& c) { c.devices[0].requests = {"other"}; }},
      {"now SMC-R", [](PreparedClaim& c) { c.smcr = true; }},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    PreparedClaim changed = claim_a();
    c.edit(changed);
    auto r = decide_prepare(cp, changed);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::FailedPrecondition);
    CHECK(r.error().message.find("team-a/train-0") != std::string::npos);
    CHECK(r.error().message.find("node-a/erdma-0 (erdma_0)") != std::string::npos);
  }
  PreparedClaim no_uid = claim_a();
  no_uid.uid.clear();
  CHECK(decide_prepare(cp, no_uid).error().code == ErrorCode::InvalidArgument);
  PreparedClaim no_devices = claim_a();
  no_devices.devices.clear();
  CHECK(decide_prepare(cp, no_devices).error().code == ErrorCode::InvalidArgument);
}

TEST_CASE("unprepare of an unknown claim is success; of a known one names its spec file") {
  const Checkpoint cp = with_claim({}, claim_a());
  const auto unknown = decide_unprepare(cp, kUidB);
  CHECK_FALSE(unknown.known);
  const auto known = decide_unprepare(cp, kUidA);
  REQUIRE(known.known);
  CHECK(known.claim.cdi_spec_file == claim_a().cdi_spec_file);
  const Checkpoint after = without_claim(cp, kUidA);
  CHECK(after.claims.empty());
  CHECK(without_claim(after, kUidA) == after);  // twice is fine
}

TEST_CASE("an agent restart: recorded claims survive the file, stray specs are found") {
  Checkpoint cp = with_claim(with_claim({}, claim_a()), claim_b());
  auto reread = decode_checkpoint(encode_checkpoint(cp));
  REQUIRE(reread.ok());
  // The kubelet asks again after the restart: nothing is prepared twice.
  auto again = decide_prepare(*reread, claim_b());
  REQUIRE(again.ok());
  CHECK(again->verdict == PrepareVerdict::AlreadyPrepared);
  // A crash between writing C's spec and recording C left C's spec behind.
  const std::vector<std::string> dir = {cdi_spec_file_name("erdma.aliyun.com", kUidC),
                                        claim_a().cdi_spec_file,
                                        claim_b().cdi_spec_file,
                                        "erdma.aliyun.com-claim_not a uid.json",
                                        "other.example.com-claim_" + std::string(kUidC) + ".json",
                                        "nvidia.com-gpu.yaml"};
  CHECK(stale_spec_files(*reread, dir) == std::vector<std::string>{cdi_spec_file_name("erdma.aliyun.com", kUidC)});
  CHECK(stale_spec_files(*reread, dir, "other.example.com") ==
        std::vector<std::string>{"other.example.com-claim_" + std::string(kUidC) + ".json"});
}

}  // namespace erdma::agent
