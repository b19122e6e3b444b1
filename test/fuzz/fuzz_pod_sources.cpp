// Fuzz target: the answers of kubelet's PodResources API and the CRI RuntimeService, as the agent
// handles them in PreStartContainer. The first byte picks the message; the rest is its protobuf
// encoding (protobuf's own parser is trusted; what is fuzzed is our handling of whatever it
// yields: pod lookup by device IDs, sandbox choice, the runtime's verbose info JSON).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/proto/cri_runtime_v1.pb.h"
#include "agent/proto/podresources_v1.pb.h"
#include "agent/sys/pod_sources.hpp"

namespace {

template <class R>
void must_explain(const R& r) {
  if (!r.ok() && r.error().message.empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1 || size > 1 << 20) return 0;
  const int body_size = static_cast<int>(size - 1);
  const uint8_t* body = data + 1;
  using namespace erdma::agent;
  switch (data[0] % 4) {
    case 0: {
      v1::ListPodResourcesResponse r;
      if (!r.ParseFromArray(body, body_size)) return 0;
      auto pods = pod_devices_from(r);
      must_explain(pods);
      if (!pods.ok()) return 0;
      // Look up the first device of every container, as PreStart does for its device IDs.
      for (const auto& p : *pods) {
        for (const auto& c : p.containers) {
          for (const auto& [resource, ids] : c.devices) {
            if (ids.empty()) continue;
            auto found = find_pod_for_devices(*pods, resource, {ids.front()});
            must_explain(found);
          }
        }
      }
      break;
    }
    case 1: {
      runtime::v1::ListPodSandboxResponse r;
      if (!r.ParseFromArray(body, body_size)) return 0;
      auto sandboxes = sandboxes_from(r);
      must_explain(sandboxes);
      if (!sandboxes.ok()) return 0;
      for (const auto& s : *sandboxes) {
        auto chosen = choose_sandbox(*sandboxes, s.pod_namespace, s.pod_name);
        must_explain(chosen);
        (void)wants_smcr(s.annotations);
      }
      break;
    }
    case 2: {
      runtime::v1::PodSandboxStatusResponse r;
      if (!r.ParseFromArray(body, body_size)) return 0;
      must_explain(sandbox_status_from("fuzz", r));
      break;
    }
    default: {
      // The verbose info document alone, as text, in both network modes.
      std::map<std::string, std::string> info{{"info", std::string(reinterpret_cast<const char*>(body), size - 1)}};
      must_explain(parse_sandbox_netns(info, false));
      must_explain(parse_sandbox_netns(info, true));
      break;
    }
  }
  return 0;
}
