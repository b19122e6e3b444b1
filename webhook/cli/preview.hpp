// Offline preview of what the webhook would do to manifests: turns Pods, workloads (their pod
// template) and AdmissionReviews into the review the apiserver would send, runs it through the
// same Reviewer as the server, and derives the mutated pod by applying the patch.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.hpp"
#include "webhook/core/admission.hpp"
#include "webhook/core/config.hpp"

namespace erdma::webhook {

struct PreviewInput {
  std::string label;        // for people: "StatefulSet team-a/nccl-test (pod template)"
  std::string review_body;  // the AdmissionReview request, as the apiserver would send it
  nlohmann::json pod;       // the pod in that review (null for a review without an object)
};

// Expands parsed documents into review inputs. Accepted: Pod, Deployment, StatefulSet, DaemonSet,
// ReplicaSet, ReplicationController, Job, CronJob, PodTemplate, List (of those), AdmissionReview.
// `namespace_override` (may be empty) replaces the namespace the documents name ("default" if
// none). Errors (InvalidArgument) name the document: `document 2 (kind Service): not a Pod ...`.
[[nodiscard]] Result<std::vector<PreviewInput>> preview_inputs(const std::vector<nlohmann::json>& docs,
                                                               std::string_view namespace_override);

struct PreviewOutput {
  ReviewResult result;
  nlohmann::json review;  // the response AdmissionReview, parsed (null when Invalid)
  nlohmann::json patch;   // the JSON Patch (an empty list when none)
  nlohmann::json pod;     // the pod after the patch
};

// Runs one input through `reviewer`. Errors: the review is Invalid, or the patch does not apply
// to the pod (which would be a bug in the webhook; reported rather than hidden).
[[nodiscard]] Result<PreviewOutput> run_preview(Reviewer& reviewer, const PreviewInput& input, const Config& cfg);

}  // namespace erdma::webhook
