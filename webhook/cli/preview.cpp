// Manifest -> AdmissionReview expansion and preview runs (see preview.hpp).
#include "webhook/cli/preview.hpp"

#include "common/json_types.hpp"

namespace erdma::webhook {
namespace {

using nlohmann::json;

std::string str_at(const json& obj, const char* key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The template (metadata + spec) of a workload, or nullptr with `why` set.
const json* pod_template(const json& doc, const std::string& kind, std::string& why) {
  const json* spec = doc.contains("spec") && doc["spec"].is_object() ? &doc["spec"] : nullptr;
  if (kind == "PodTemplate") {
    if (doc.contains("template") && doc["template"].is_object()) return &doc["template"];
    why = "has no template";
    return nullptr;
  }
  if (spec == nullptr) {
    why = "has no spec";
    return nullptr;
  }
  if (kind == "CronJob") {
    const json* p = spec;
    for (const char* k : {"jobTemplate", "spec"}) {
      if (!p->contains(k) || !(*p)[k].is_object()) {
        why = "has no spec.jobTemplate.spec.template";
        return nullptr;
      }
      p = &(*p)[k];
    }
    spec = p;
  }
  if (!spec->contains("template") || !(*spec)["template"].is_object()) {
    why = "has no spec.template";
    return nullptr;
  }
  return &(*spec)["template"];
}

bool is_workload(const std::string& kind) {
  for (const char* k : {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "ReplicationController", "Job",
                        "CronJob", "PodTemplate"}) {
    if (kind == k) return true;
  }
  return false;
}

std::string review_for(const json& pod, const std::string& ns, size_t n) {
  json review = {{"apiVersion", "admission.k8s.io/v1"},
                 {"kind", "AdmissionReview"},
                 {"request",
                  {{"uid", "preview-" + std::to_string(n)},
                   {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                   {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                   {"requestKind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
                   {"requestResource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
                   {"name", str_at(pod.value("metadata", json::object()), "name")},
                   {"namespace", ns},
                   {"operation", "CREATE"},
                   {"userInfo", {{"username", "erdma-webhook-preview"}}},
                   {"object", pod},
                   {"oldObject", nullptr},
                   {"dryRun", true},
                   {"options", {{"apiVersion", "meta.k8s.io/v1"}, {"kind", "CreateOptions"}}}}}};
  return review.dump();
}

Status expand(const json& doc, const std::string& where, std::string_view ns_override, std::vector<PreviewInput>& out,
              size_t depth) {
  if (!doc.is_object()) {
    return make_error(ErrorCode::InvalidArgument,
                      where + ": expected a Kubernetes object (a map), got " + std::string(common::json_type_name(doc)));
  }
  const std::string kind = str_at(doc, "kind");
  const json meta = doc.contains("metadata") && doc["metadata"].is_object() ? doc["metadata"] : json::object();
  std::string ns = ns_override.empty() ? str_at(meta, "namespace") : std::string(ns_override);
  if (ns.empty()) ns = "default";
  const std::string name = str_at(meta, "name");

  if (kind == "List" || (kind.size() > 4 && kind.ends_with("List") && doc.contains("items"))) {
    if (depth > 0 || !doc.contains("items") || !doc["items"].is_array()) {
      return make_error(ErrorCode::InvalidArgument, where + ": a List needs an items list (and cannot be nested)");
    }
    for (size_t i = 0; i < doc["items"].size(); ++i) {
      auto s = expand(doc["items"][i], where + " item " + std::to_string(i + 1), ns_override, out, depth + 1);
      if (!s) return s;
    }
    return {};
  }
  if (kind == "AdmissionReview") {
    PreviewInput in;
    in.label = "AdmissionReview " + str_at(doc.value("request", json::object()), "uid");
    in.review_body = doc.dump();
    const json& req = doc.value("request", json::object());
    in.pod = req.is_object() && req.contains("object") ? req["object"] : json();
    out.push_back(std::move(in));
    return {};
  }
  if (kind == "Pod") {
    json pod = doc;
    pod["metadata"] = meta;
    pod["metadata"]["namespace"] = ns;
    PreviewInput in;
    in.label = "Pod " + ns + "/" + (name.empty() ? str_at(meta, "generateName") + "*" : name);
    in.review_body = review_for(pod, ns, out.size() + 1);
    in.pod = std::move(pod);
    out.push_back(std::move(in));
    return {};
  }
  if (is_workload(kind)) {
    std::string why;
    const json* tmpl = pod_template(doc, kind, why);
    if (tmpl == nullptr) return make_error(ErrorCode::InvalidArgument, where + " (" + kind + " " + name + "): " + why);
    json pod_meta = tmpl->contains("metadata") && (*tmpl)["metadata"].is_object() ? (*tmpl)["metadata"] : json::object();
    pod_meta["namespace"] = ns;
    if (!pod_meta.contains("name") && !pod_meta.contains("generateName")) {
      // What the controller would do: StatefulSets name pods <set>-<ordinal>, others generate.
      if (kind == "StatefulSet") {
        pod_meta["name"] = name + "-0";
      } else {
        pod_meta["generateName"] = name + "-";
      }
    }
    json pod = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", pod_meta},
                {"spec", tmpl->contains("spec") ? (*tmpl)["spec"] : json::object()}};
    PreviewInput in;
    in.label = kind + " " + ns + "/" + name + " (pod template)";
    in.review_body = review_for(pod, ns, out.size() + 1);
    in.pod = std::move(pod);
    out.push_back(std::move(in));
    return {};
  }
  return make_error(ErrorCode::InvalidArgument,
                    where + ": kind \"" + kind +
                        "\" holds no pod; give a Pod, a workload (Deployment, StatefulSet, DaemonSet, ReplicaSet, "
                        "Job, CronJob, ...) or an AdmissionReview");
}

}  // namespace

Result<std::vector<PreviewInput>> preview_inputs(const std::vector<json>& docs, std::string_view namespace_override) {
  std::vector<PreviewInput> out;
  for (size_t i = 0; i < docs.size(); ++i) {
    auto s = expand(docs[i], "document " + std::to_string(i + 1), namespace_override, out, 0);
    if (!s) return std::move(s).error();
  }
  if (out.empty()) return make_error(ErrorCode::InvalidArgument, "no documents in the input");
  return out;
}

Result<PreviewOutput> run_preview(Reviewer& reviewer, const PreviewInput& input, const Config& cfg) {
  PreviewOutput out;
  out.result = reviewer.review(input.review_body, cfg);
  if (out.result.outcome == Outcome::Invalid) {
    return make_error(ErrorCode::InvalidArgument, input.label + ": " + out.result.error);
  }
  out.review = json::parse(out.result.body, nullptr, false);
  if (out.review.is_discarded()) {
    return make_error(ErrorCode::Internal, input.label + ": the webhook produced a response that is not JSON");
  }
  out.patch = out.result.patch.empty() ? json::array() : json::parse(out.result.patch, nullptr, false);
  if (out.patch.is_discarded()) {
    return make_error(ErrorCode::Internal, input.label + ": the webhook produced a patch that is not JSON");
  }
  try {
    out.pod = input.pod.is_null() ? json() : input.pod.patch(out.patch);
  } catch (const json::exception& e) {
    return make_error(ErrorCode::Internal, input.label + ": the patch does not apply to the pod: " + e.what());
  }
  return out;
}

}  // namespace erdma::webhook
