// The Pod Security Standards (https://kubernetes.io/docs/concepts/security/pod-security-standards/),
// baseline and restricted profiles, as a checker over a Pod's JSON: which rules a pod violates.
// Test-only: the golden runner uses it to prove that a mutation adds no violation the pod did not
// already have (except the ones it declares).
#pragma once

#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace erdma::webhook::test {

// Rule ids, "<profile>:<control>", e.g. "baseline:hostPathVolumes", "restricted:volumeTypes".
// The restricted profile includes baseline; only the controls restricted adds carry its prefix.
[[nodiscard]] std::set<std::string> pod_security_violations(const nlohmann::json& pod);

}  // namespace erdma::webhook::test
