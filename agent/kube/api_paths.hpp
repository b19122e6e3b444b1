// The API server paths the agent calls, all in this one header: a resource's group, version and
// plural are spelled here only, and every caller (the DRA driver, the slice publisher, the Event
// poster) builds its paths with these. docs/dra.md lists the calls and the RBAC they need.
#pragma once

#include <string>
#include <string_view>

#include "agent/kube/api.hpp"

namespace erdma::agent::kube {

inline constexpr std::string_view kCoreV1Path = "/api/v1";
inline constexpr std::string_view kResourceV1Path = "/apis/resource.k8s.io/v1";

// resource.k8s.io/v1 ResourceSlices (cluster-scoped): the collection (POST, list, watch).
inline constexpr std::string_view kResourceSlicesPath = "/apis/resource.k8s.io/v1/resourceslices";
static_assert(kResourceSlicesPath.substr(0, kResourceV1Path.size()) == kResourceV1Path);

// One slice (PUT, DELETE).
[[nodiscard]] inline std::string resource_slice_path(std::string_view name) {
  return std::string(kResourceSlicesPath) + "/" + std::string(name);
}

// The list (and, with watch=true appended, watch) path of one node's slices of one driver: the
// collection with fieldSelector spec.nodeName and spec.driver, escaped.
[[nodiscard]] inline std::string node_resource_slices_path(std::string_view node_name, std::string_view driver) {
  return std::string(kResourceSlicesPath) + "?fieldSelector=" +
         url_query_escape("spec.nodeName=" + std::string(node_name) + ",spec.driver=" + std::string(driver));
}

// resource.k8s.io/v1 ResourceClaims: one claim (GET), and its status subresource (PUT).
[[nodiscard]] inline std::string resource_claim_path(std::string_view ns, std::string_view name) {
  return std::string(kResourceV1Path) + "/namespaces/" + std::string(ns) + "/resourceclaims/" + std::string(name);
}
[[nodiscard]] inline std::string resource_claim_status_path(std::string_view ns, std::string_view name) {
  return resource_claim_path(ns, name) + "/status";
}

// core/v1: one Node (GET) and a namespace's Events (POST). No pod is ever read (no RBAC for it).
[[nodiscard]] inline std::string node_path(std::string_view name) {
  return std::string(kCoreV1Path) + "/nodes/" + std::string(name);
}
[[nodiscard]] inline std::string events_path(std::string_view ns) {
  return std::string(kCoreV1Path) + "/namespaces/" + std::string(ns) + "/events";
}

}  // namespace erdma::agent::kube
