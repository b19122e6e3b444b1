// Fuzz target: the DRA driver's decoders on raw bytes, each as the agent meets them: the
// checkpoint file, a ResourceClaim answer, a ResourceSlice list answer and a watch event on the
// node's slices. None may throw (an exception aborts the target) or crash; beyond that it checks
//   - a checkpoint that decodes encodes to the same bytes it decodes from again (round trip);
//   - a claim plan names at least one device, each on this node's pool and on one of its cards;
//   - a slice plan's actions name slices, creates and updates carry an object.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "agent/core/dra_checkpoint.hpp"
#include "agent/core/dra_claim.hpp"
#include "agent/core/dra_slices.hpp"
#include "agent/dra/slice_publisher.hpp"
#include "common/json_read.hpp"
#include "test/fakes/fake_rdma_devices.hpp"

namespace {

using nlohmann::json;
using namespace erdma::agent;

constexpr std::string_view kPool = "node-1";

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_dra: %s: %s\n", what, detail.c_str());
  std::abort();
}

const std::vector<RdmaDevice>& cards() {
  static const std::vector<RdmaDevice> c = {testing::make_device("erdma_0", "uverbs0", 0),
                                            testing::make_device("erdma_1", "uverbs1", 1)};
  return c;
}

const std::vector<json>& wanted() {
  static const std::vector<json> w = [] {
    SliceFacts facts;
    facts.node_name = std::string(kPool);
    facts.driver_mode = "default";
    auto set = build_slices(cards(), facts);
    if (!set) fail("build_slices", set.error().message);
    return set->slices;
  }();
  return w;
}

void checkpoint(std::string_view text) {
  auto decoded = decode_checkpoint(text);
  if (!decoded) {
    if (decoded.error().message.empty()) fail("checkpoint refused without a message", std::string(text));
    return;
  }
  const std::string again = encode_checkpoint(*decoded);
  auto back = decode_checkpoint(again);
  if (!back) fail("a checkpoint's own encoding does not decode", back.error().message);
  if (!(*back == *decoded)) fail("checkpoint round trip changed it", again);
  if (encode_checkpoint(*back) != again) fail("checkpoint encoding is not stable", again);
}

void claim(const json& doc) {
  // The kubelet's reference carries the claim's UID: take the document's, so the plan gets past
  // the UID check whenever the document has one.
  const erdma::common::JsonAt at(doc, "claim");
  const ClaimRef ref{"ns", "claim", at.path("metadata.uid").if_string().value_or("uid")};
  auto plan = plan_claim(doc, ref, cards(), kPool);
  if (plan) {
    if (plan->devices.empty()) fail("a plan without devices", doc.dump());
    for (const auto& d : plan->devices) {
      if (d.pool != kPool || (d.card != "erdma_0" && d.card != "erdma_1")) fail("a device off this node", doc.dump());
    }
  } else if (plan.error().message.empty()) {
    fail("claim refused without a message", doc.dump());
  }
  (void)reserved_pods(doc);
  (void)merged_device_status(doc, json::array({json{{"driver", "erdma.aliyun.com"}, {"device", "erdma-0"}}}));
}

void slices(const json& doc) {
  auto plan = plan_slices(wanted(), doc);
  if (plan) {
    for (const auto& a : plan->actions) {
      if (a.name.empty()) fail("an action without a name", doc.dump());
      if (a.op != SliceOp::Delete && !a.object.is_object()) fail("a write without an object", doc.dump());
    }
  }
  auto news = slice_event_needs_publish(doc, wanted(), kPool, "erdma.aliyun.com");
  if (!news && news.error().message.empty()) fail("event refused without a message", doc.dump());
  for (const auto& w : wanted()) (void)slice_has_content(w, doc);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  checkpoint(text);
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded()) return 0;
  claim(doc);
  slices(doc);
  // The same document as a list answer's item and a watch event's object.
  slices(json{{"items", json::array({doc})}});
  slices(json{{"type", "MODIFIED"}, {"object", doc}});
  return 0;
}
