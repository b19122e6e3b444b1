// Manifest -> AdmissionReview expansion and preview runs (see preview.hpp).
#include "webhook/cli/preview.hpp"

#include <optional>

#include "common/json_types.hpp"

namespace erdma::webhook {
namespace {

using nlohmann::json;

std::string str_at(const json& obj, const char* key) {
  if (!obj.is_object()) return {};
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Where the pod template of a workload kind sits; nullopt for kinds that hold no pod. `group` is
// the API group of the document's apiVersion; a document without apiVersion matches by kind.
std::optional<std::vector<const char*>> template_path(const std::string& kind, const std::string& group,
                                                      bool has_api_version) {
  auto in = [&](std::initializer_list<const char*> groups) {
    if (!has_api_version) return true;
    for (const char* g : groups) {
      if (group == g) return true;
    }
    return false;
  };
  if ((kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet" || kind == "ReplicaSet") &&
      in({"apps", "extensions"})) {
    return std::vector<const char*>{"spec", "template"};
  }
  if (kind == "ReplicationController" && in({""})) return std::vector<const char*>{"spec", "template"};
  if (kind == "PodTemplate" && in({""})) return std::vector<const char*>{"template"};
  if (kind == "Job" && in({"batch"})) return std::vector<const char*>{"spec", "template"};
  if (kind == "CronJob" && in({"batch"})) return std::vector<const char*>{"spec", "jobTemplate", "spec", "template"};
  return std::nullopt;
}

std::string joined(const std::vector<const char*>& path) {
  std::string s;
  for (const char* p : path) {
    if (!s.empty()) s += '.';
    s += p;
  }
  return s;
}

// The apiserver decodes a Pod into typed fields before any webhook runs, so a number or a boolean
// where a string belongs (YAML's unquoted 1, true, yes, on, ...) is refused with "cannot unmarshal"
// and the pod is never admitted. Checks the string fields people write by hand.
Status check_string_fields(const json& pod, const std::string& where, const std::string& prefix) {
  auto bad = [&](const std::string& path, const json& v) {
    std::string what = v.is_boolean()  ? "the boolean " + v.dump()
                       : v.is_number() ? "the number " + v.dump()
                                       : "a " + std::string(common::json_type_name(v));
    std::string hint = v.is_boolean()  ? " (kubectl reads unquoted true/false/yes/no/on/off/y/n as booleans)"
                       : v.is_number() ? " (kubectl reads unquoted numbers as numbers)"
                                       : "";
    return make_error(ErrorCode::InvalidArgument,
                      where + ": " + prefix + path + " is " + what + hint +
                          "; the apiserver refuses the object because the field is a string: quote the value");
  };
  auto scalar_ok = [](const json& v) { return v.is_string() || v.is_null(); };
  const json& meta = pod.contains("metadata") ? pod["metadata"] : json();
  for (const char* m : {"labels", "annotations"}) {
    if (!meta.is_object() || !meta.contains(m) || !meta[m].is_object()) continue;
    for (const auto& [k, v] : meta[m].items()) {
      if (!scalar_ok(v)) return bad("metadata." + std::string(m) + "." + k, v);
    }
  }
  const json& spec = pod.contains("spec") ? pod["spec"] : json();
  if (!spec.is_object()) return {};
  if (spec.contains("nodeSelector") && spec["nodeSelector"].is_object()) {
    for (const auto& [k, v] : spec["nodeSelector"].items()) {
      if (!scalar_ok(v)) return bad("spec.nodeSelector." + k, v);
    }
  }
  for (const char* list : {"initContainers", "containers", "ephemeralContainers"}) {
    if (!spec.contains(list) || !spec[list].is_array()) continue;
    for (size_t i = 0; i < spec[list].size(); ++i) {
      const json& c = spec[list][i];
      if (!c.is_object()) continue;
      const std::string cp = "spec." + std::string(list) + "[" + std::to_string(i) + "].";
      for (const char* f : {"name", "image", "workingDir"}) {
        if (c.contains(f) && !scalar_ok(c[f])) return bad(cp + f, c[f]);
      }
      for (const char* f : {"command", "args"}) {
        if (!c.contains(f) || !c[f].is_array()) continue;
        for (size_t j = 0; j < c[f].size(); ++j) {
          if (!scalar_ok(c[f][j])) return bad(cp + f + "[" + std::to_string(j) + "]", c[f][j]);
        }
      }
      if (c.contains("env") && c["env"].is_array()) {
        for (size_t j = 0; j < c["env"].size(); ++j) {
          const json& e = c["env"][j];
          if (!e.is_object()) continue;
          for (const char* f : {"name", "value"}) {
            if (e.contains(f) && !scalar_ok(e[f])) return bad(cp + "env[" + std::to_string(j) + "]." + f, e[f]);
          }
        }
      }
    }
  }
  return {};
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

Status expand(const json& doc, const std::string& where, std::string_view ns_override, size_t index,
              json::json_pointer at, Expansion& out, size_t depth) {
  if (!doc.is_object()) {
    return make_error(ErrorCode::InvalidArgument, where + ": expected a Kubernetes object (a map), got " +
                                                      std::string(common::json_type_name(doc)));
  }
  const std::string kind = str_at(doc, "kind");
  const std::string api_version = str_at(doc, "apiVersion");
  const auto slash = api_version.find('/');
  const std::string group = slash == std::string::npos ? std::string() : api_version.substr(0, slash);
  const bool has_api_version = doc.contains("apiVersion");
  const json meta = doc.contains("metadata") && doc["metadata"].is_object() ? doc["metadata"] : json::object();
  std::string ns = ns_override.empty() ? str_at(meta, "namespace") : std::string(ns_override);
  if (ns.empty()) ns = "default";
  const std::string name = str_at(meta, "name");
  const size_t n = out.pods.size() + 1;

  if (kind == "List" || (kind.size() > 4 && kind.ends_with("List") && doc.contains("items"))) {
    if (depth > 0 || !doc.contains("items") || !doc["items"].is_array()) {
      return make_error(ErrorCode::InvalidArgument, where + ": a List needs an items list (and cannot be nested)");
    }
    for (size_t i = 0; i < doc["items"].size(); ++i) {
      auto s = expand(doc["items"][i], where + " item " + std::to_string(i + 1), ns_override, index, at / "items" / i,
                      out, depth + 1);
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
    in.document = index;
    in.location = at;
    in.is_review = true;
    out.pods.push_back(std::move(in));
    return {};
  }
  if (kind == "Pod" && (!has_api_version || group.empty())) {
    const std::string label = "Pod " + ns + "/" + (name.empty() ? str_at(meta, "generateName") + "*" : name);
    if (auto s = check_string_fields(doc, where + " (" + label + ")", ""); !s) return s;
    json pod = doc;
    PreviewInput in;
    in.restore_metadata.emplace_back("namespace", meta.contains("namespace") ? meta["namespace"] : json());
    pod["metadata"] = meta;
    pod["metadata"]["namespace"] = ns;
    in.label = label;
    in.review_body = review_for(pod, ns, n);
    in.pod = std::move(pod);
    in.document = index;
    in.location = at;
    if (!doc.contains("metadata")) in.restore_metadata.emplace_back("", json());  // drop metadata if left empty
    out.pods.push_back(std::move(in));
    return {};
  }
  const auto path = template_path(kind, group, has_api_version);
  if (!path) {
    out.passed.push_back(PassThrough{index, (kind.empty() ? std::string("object") : kind) + " " +
                                                (meta.contains("namespace") || !name.empty() ? ns + "/" : "") +
                                                (name.empty() ? "<unnamed>" : name)});
    return {};
  }
  const json* tmpl = &doc;
  json::json_pointer tmpl_at = at;
  for (const char* k : *path) {
    if (!tmpl->contains(k) || !(*tmpl)[k].is_object()) {
      return make_error(ErrorCode::InvalidArgument, where + " (" + kind + " " + name + "): has no " + joined(*path));
    }
    tmpl = &(*tmpl)[k];
    tmpl_at /= k;
  }
  const std::string label = kind + " " + ns + "/" + name + " (pod template)";
  json pod_meta = tmpl->contains("metadata") && (*tmpl)["metadata"].is_object() ? (*tmpl)["metadata"] : json::object();
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", pod_meta},
              {"spec", tmpl->contains("spec") ? (*tmpl)["spec"] : json::object()}};
  if (auto s = check_string_fields(pod, where + " (" + label + ")", joined(*path) + "."); !s) return s;
  PreviewInput in;
  in.is_template = true;
  in.restore_metadata.emplace_back("namespace", pod_meta.contains("namespace") ? pod_meta["namespace"] : json());
  pod["metadata"]["namespace"] = ns;
  if (!pod_meta.contains("name") && !pod_meta.contains("generateName")) {
    // What the controller would do: StatefulSets name pods <set>-<ordinal>, others generate.
    const char* key = kind == "StatefulSet" ? "name" : "generateName";
    in.restore_metadata.emplace_back(key, json());
    pod["metadata"][key] = kind == "StatefulSet" ? name + "-0" : name + "-";
  }
  if (!tmpl->contains("metadata")) in.restore_metadata.emplace_back("", json());
  in.label = label;
  in.review_body = review_for(pod, ns, n);
  in.pod = std::move(pod);
  in.document = index;
  in.location = tmpl_at;
  out.pods.push_back(std::move(in));
  return {};
}

}  // namespace

Result<Expansion> expand_manifests(const std::vector<json>& docs, std::string_view namespace_override) {
  Expansion out;
  for (size_t i = 0; i < docs.size(); ++i) {
    ERDMA_TRY(
        expand(docs[i], "document " + std::to_string(i + 1), namespace_override, i, json::json_pointer(), out, 0));
  }
  if (docs.empty()) return make_error(ErrorCode::InvalidArgument, "no documents in the input");
  return out;
}

Result<std::vector<PreviewInput>> preview_inputs(const std::vector<json>& docs, std::string_view namespace_override) {
  ERDMA_TRY_ASSIGN(auto e, expand_manifests(docs, namespace_override));
  if (e.pods.empty()) {
    return make_error(ErrorCode::InvalidArgument,
                      "no pods in the input: give a Pod, a workload (Deployment, StatefulSet, DaemonSet, ReplicaSet, "
                      "Job, CronJob, ...) or an AdmissionReview");
  }
  return std::move(e.pods);
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

namespace erdma::webhook {

std::vector<json> mutated_documents(const std::vector<json>& docs, const std::vector<PreviewInput>& inputs,
                                    const std::vector<PreviewOutput>& outputs) {
  std::vector<json> out = docs;
  for (size_t i = 0; i < inputs.size() && i < outputs.size(); ++i) {
    const PreviewInput& in = inputs[i];
    const PreviewOutput& res = outputs[i];
    json& doc = out[in.document];
    if (in.is_review) {
      doc[in.location] = res.review;
      continue;
    }
    if (res.result.outcome == Outcome::Rejected || res.pod.is_null()) continue;  // the manifest stays as written
    json meta = res.pod.contains("metadata") ? res.pod["metadata"] : json::object();
    bool drop_metadata = false;
    for (const auto& [key, value] : in.restore_metadata) {
      if (key.empty()) {
        drop_metadata = true;
      } else if (value.is_null()) {
        meta.erase(key);
      } else {
        meta[key] = value;
      }
    }
    json& target = doc[in.location];
    if (in.is_template) {
      if (res.pod.contains("spec")) target["spec"] = res.pod["spec"];
    } else {
      target = res.pod;
    }
    if (drop_metadata && meta.empty()) {
      target.erase("metadata");
    } else {
      target["metadata"] = std::move(meta);
    }
  }
  return out;
}

}  // namespace erdma::webhook
