// The API server paths the agent calls, spelled out: what the apiserver routes (group, version,
// plural, namespace) and what RBAC in docs/dra.md grants must match these strings.
#include "agent/kube/api_paths.hpp"

#include <doctest/doctest.h>

#include <vector>

namespace erdma::agent::kube {
namespace {

TEST_CASE("api paths: each resource's path as the apiserver routes it") {
  struct Case {
    const char* name;
    std::string got;
    const char* want;
  };
  for (const auto& c : std::vector<Case>{
           {"slices", std::string(kResourceSlicesPath), "/apis/resource.k8s.io/v1/resourceslices"},
           {"slice", resource_slice_path("n1-erdma.aliyun.com-x7k2p"),
            "/apis/resource.k8s.io/v1/resourceslices/n1-erdma.aliyun.com-x7k2p"},
           {"node's slices", node_resource_slices_path("n1", "erdma.aliyun.com"),
            "/apis/resource.k8s.io/v1/resourceslices"
            "?fieldSelector=spec.nodeName%3Dn1%2Cspec.driver%3Derdma.aliyun.com"},
           {"claim", resource_claim_path("team-a", "claim-7"),
            "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/claim-7"},
           {"claim status", resource_claim_status_path("team-a", "claim-7"),
            "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/claim-7/status"},
           {"node", node_path("n1"), "/api/v1/nodes/n1"},
           {"events", events_path("team-a"), "/api/v1/namespaces/team-a/events"},
       }) {
    CAPTURE(c.name);
    CHECK(c.got == c.want);
  }
}

}  // namespace
}  // namespace erdma::agent::kube
