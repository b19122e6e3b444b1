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
  size_t document = 0;      // index of the document it came from
  // Where the pod sits in that document: "" for a Pod (the document itself), the JSON Pointer of
  // the pod template ("/spec/template", "/items/2/spec/jobTemplate/spec/template", ...).
  nlohmann::json::json_pointer location;
  bool is_review = false;  // the document is an AdmissionReview
  bool is_template = false;
  // metadata fields the preview set for the review (namespace; name/generateName of a template):
  // each with its value in the manifest (null = absent), restored when the pod goes back.
  std::vector<std::pair<std::string, nlohmann::json>> restore_metadata;
};

// A document (or List item) that holds no pod and passes through unchanged.
struct PassThrough {
  size_t document = 0;
  std::string label;  // "Service team-a/web"
};

struct Expansion {
  std::vector<PreviewInput> pods;
  std::vector<PassThrough> passed;
};

// Expands parsed documents. Pods: Pod (v1), the pod template of Deployment, StatefulSet,
// DaemonSet, ReplicaSet (apps), ReplicationController and PodTemplate (v1), Job (batch,
// spec.template) and CronJob (batch, spec.jobTemplate.spec.template), each as if the controller
// created the pod in the object's namespace with the template's metadata; List items; an
// AdmissionReview as it is. Any other object (another kind, or these kinds of another API group,
// e.g. a Volcano Job) passes through. A document without apiVersion is taken by its kind alone.
// `namespace_override` (may be empty) replaces the namespace the documents name ("default" if
// none). Errors (InvalidArgument) name the document: `document 2 (Deployment web): has no
// spec.template`; a document that is not a map; a nested List; a string field the apiserver would
// refuse because YAML gave it another type (`env[0].value` written as 1 or yes, unquoted).
[[nodiscard]] Result<Expansion> expand_manifests(const std::vector<nlohmann::json>& docs,
                                                 std::string_view namespace_override);

// The pods of expand_manifests(); an error when there is none.
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

// The manifests after admission: `docs` with each input's pod (or pod template) replaced by the
// mutated pod from `outputs` (same order as `inputs`), the preview's made-up metadata removed
// again; an AdmissionReview becomes the response review. Everything else is left as it is.
[[nodiscard]] std::vector<nlohmann::json> mutated_documents(const std::vector<nlohmann::json>& docs,
                                                            const std::vector<PreviewInput>& inputs,
                                                            const std::vector<PreviewOutput>& outputs);

}  // namespace erdma::webhook
