// The mutation rules of docs/design.md ("erdma-webhook"), as JSON Patch operations (see mutate.hpp).
//
// Every rule checks the pod's current state before adding anything, so a pod that already went
// through the webhook (reinvocationPolicy: IfNeeded) yields no operations. Arrays and maps that
// are missing are created whole with one "add"; existing ones are appended to with "/-".
#include "webhook/core/mutate.hpp"

#include <algorithm>
#include <optional>

#include "common/json_pointer.hpp"
#include "common/text.hpp"
#include "webhook/core/names.hpp"
#include "webhook/core/pod_view.hpp"

namespace erdma::webhook {
namespace {

using common::append_json_string;

constexpr std::string_view kAllTokens[] = {kTokenErdmaEnv, kTokenDeviceMounts, kTokenSmcrPreload,
                                           kTokenErdmaResource};

std::string container_prefix(const ContainerView& c) {
  std::string p = c.list == ContainerList::Init ? "/spec/initContainers/" : "/spec/containers/";
  p += std::to_string(c.index);
  return p;
}

std::string describe(const ContainerView& c) {
  std::string s = c.list == ContainerList::Init ? "init container \"" : "container \"";
  s += c.name;
  s += '"';
  return s;
}

bool defines_env(const ContainerView& c, std::string_view name) {
  return std::any_of(c.env.begin(), c.env.end(), [&](const EnvEntryView& e) { return e.name == name; });
}

std::string_view trim_slashes(std::string_view p) {
  while (p.size() > 1 && p.back() == '/') p.remove_suffix(1);
  return p;
}

std::string_view basename(std::string_view p) {
  const auto slash = p.rfind('/');
  return slash == std::string_view::npos ? p : p.substr(slash + 1);
}

std::string array_of(const std::vector<const std::string*>& frags) {
  std::string s = "[";
  for (size_t i = 0; i < frags.size(); ++i) {
    if (i > 0) s += ',';
    s += *frags[i];
  }
  s += ']';
  return s;
}

// Marker tokens already on the pod that we know, so a reinvocation keeps e.g. "erdma-resource"
// (after the first pass the pod requests the resource itself and we cannot tell it was us).
std::vector<std::string_view> known_tokens(std::optional<std::string_view> marker) {
  std::vector<std::string_view> out;
  if (!marker) return out;
  std::string_view rest = *marker;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    std::string_view tok = rest.substr(0, comma);
    while (!tok.empty() && tok.front() == ' ') tok.remove_prefix(1);
    while (!tok.empty() && tok.back() == ' ') tok.remove_suffix(1);
    if (std::find(std::begin(kAllTokens), std::end(kAllTokens), tok) != std::end(kAllTokens)) out.push_back(tok);
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

class Builder {
 public:
  Builder(const PodView& pod, const Config& cfg, std::string display) : pod_(pod), cfg_(cfg), display_(std::move(display)) {}

  void warn(std::string w) { warnings_.push_back(std::move(w)); }
  const std::string& display() const { return display_; }

  Error conflict(const std::string& what) const {
    return make_error(ErrorCode::InvalidArgument, "pod " + display_ + ": " + what);
  }

  // Adds a hostPath volume unless the pod has it already. A volume of that name with another
  // source is a conflict: silently reusing it would mount the wrong thing.
  Status need_volume(std::string_view name, std::string_view host_path, const std::string& fragment) {
    for (const auto& v : pod_.volumes) {
      if (v.name != name) continue;
      if (v.is_host_path && trim_slashes(v.host_path) == host_path) return {};
      return conflict("volume \"" + std::string(name) + "\" already exists with another source; erdma-webhook " +
                      "needs that name for hostPath " + std::string(host_path) + " (rename your volume)");
    }
    new_volumes_.push_back(&fragment);
    return {};
  }

  // Adds a volumeMount to `c` unless it has one of `name` at `mount_path`; another volume at that
  // path is a conflict (Kubernetes forbids two mounts at one path).
  Status need_mount(const ContainerView& c, std::string_view name, std::string_view mount_path,
                    const std::string& fragment, std::vector<const std::string*>& out) {
    for (const auto& m : c.mounts) {
      if (trim_slashes(m.mount_path) != mount_path) continue;
      if (m.name == name) return {};
      return conflict(describe(c) + " already mounts volume \"" + std::string(m.name) + "\" at " +
                      std::string(mount_path) + ", where erdma-webhook mounts \"" + std::string(name) + "\"");
    }
    out.push_back(&fragment);
    return {};
  }

  Status container(const ContainerView& c, bool erdma, bool smcr, bool add_resource) {
    const auto& r = cfg_.rendered();
    const std::string prefix = container_prefix(c);
    std::vector<const std::string*> env;
    std::vector<std::string_view> env_names;
    std::vector<const std::string*> mounts;

    if (add_resource) {
      if (!c.has_resources) {
        ops_.push_back({PatchOp::Kind::Add, prefix + "/resources", "{\"limits\":" + r.resource_one + "}"});
      } else if (!c.has_limits) {
        ops_.push_back({PatchOp::Kind::Add, prefix + "/resources/limits", r.resource_one});
      } else {
        ops_.push_back({PatchOp::Kind::Add, prefix + "/resources/limits/" + r.resource_token, "\"1\""});
      }
    }
    if (erdma) {
      for (size_t i = 0; i < cfg_.erdma_env().size(); ++i) {
        if (defines_env(c, cfg_.erdma_env()[i].name)) continue;
        env.push_back(&r.erdma_env[i]);
        env_names.push_back(cfg_.erdma_env()[i].name);
      }
      for (size_t i = 0; i < cfg_.device_mounts().size(); ++i) {
        const auto& m = cfg_.device_mounts()[i];
        if (auto s = need_mount(c, m.name, m.mount_path, r.mount_mounts[i], mounts); !s) return s;
      }
    }
    if (smcr) {
      for (size_t i = 0; i < cfg_.smcr().env.size(); ++i) {
        if (defines_env(c, cfg_.smcr().env[i].name)) continue;
        env.push_back(&r.smcr_env[i]);
        env_names.push_back(cfg_.smcr().env[i].name);
      }
      preload(c, prefix, env, env_names);
      if (auto s = need_mount(c, kPreloadVolumeName, cfg_.smcr().mount_path, r.preload_mount, mounts); !s) return s;
    }

    if (!env.empty()) {
      if (!c.has_env) {
        ops_.push_back({PatchOp::Kind::Add, prefix + "/env", array_of(env)});
      } else {
        for (const auto* e : env) ops_.push_back({PatchOp::Kind::Add, prefix + "/env/-", *e});
      }
      if (c.has_env_from) {
        std::string names;
        for (const auto& n : env_names) {
          if (!names.empty()) names += ", ";
          names += n;
        }
        warn(describe(c) + " uses envFrom; injected " + names + " take precedence over the same names there");
      }
    }
    if (!mounts.empty()) {
      if (!c.has_mounts) {
        ops_.push_back({PatchOp::Kind::Add, prefix + "/volumeMounts", array_of(mounts)});
      } else {
        for (const auto* m : mounts) ops_.push_back({PatchOp::Kind::Add, prefix + "/volumeMounts/-", *m});
      }
    }
    return {};
  }

  // LD_PRELOAD: add it, or append our library to the value the container sets (the last entry of
  // that name is the one the container sees).
  void preload(const ContainerView& c, const std::string& prefix, std::vector<const std::string*>& env,
               std::vector<std::string_view>& env_names) {
    const auto& r = cfg_.rendered();
    const EnvEntryView* last = nullptr;
    size_t last_index = 0;
    for (size_t i = 0; i < c.env.size(); ++i) {
      if (c.env[i].name == kLdPreload) {
        last = &c.env[i];
        last_index = i;
      }
    }
    if (last == nullptr) {
      env.push_back(&r.preload_env);
      env_names.push_back(kLdPreload);
      return;
    }
    if (last->has_value_from) {
      warn(describe(c) + " takes LD_PRELOAD from valueFrom; the SMC-R preload library was not added");
      return;
    }
    for (auto element : split_ld_preload(last->value)) {
      if (element == r.preload_path) return;
      if (basename(element) == cfg_.smcr().library) {
        warn(describe(c) + " already preloads " + std::string(element) + "; LD_PRELOAD left unchanged");
        return;
      }
    }
    std::string value;
    append_json_string(value, merge_ld_preload(last->value, r.preload_path));
    ops_.push_back({last->has_value ? PatchOp::Kind::Replace : PatchOp::Kind::Add,
                    prefix + "/env/" + std::to_string(last_index) + "/value", std::move(value)});
  }

  void volumes() {
    if (new_volumes_.empty()) return;
    if (!pod_.has_volumes) {
      volume_ops_.push_back({PatchOp::Kind::Add, "/spec/volumes", array_of(new_volumes_)});
    } else {
      for (const auto* v : new_volumes_) volume_ops_.push_back({PatchOp::Kind::Add, "/spec/volumes/-", *v});
    }
  }

  // The marker annotation; returns the tokens it lists.
  std::vector<std::string> marker(const std::vector<std::string_view>& computed) {
    auto existing = known_tokens(pod_.injected_annotation);
    std::vector<std::string> tokens;
    std::string value;
    for (auto tok : kAllTokens) {
      const bool on = std::find(computed.begin(), computed.end(), tok) != computed.end() ||
                      std::find(existing.begin(), existing.end(), tok) != existing.end();
      if (!on) continue;
      tokens.emplace_back(tok);
      if (!value.empty()) value += ',';
      value += tok;
    }
    if (tokens.empty() || (pod_.injected_annotation && *pod_.injected_annotation == value)) return tokens;
    std::string quoted;
    append_json_string(quoted, value);
    if (!pod_.has_metadata) {
      std::string v = "{\"annotations\":{";
      append_json_string(v, kInjectedAnnotation);
      v += ':' + quoted + "}}";
      meta_ops_.push_back({PatchOp::Kind::Add, "/metadata", std::move(v)});
    } else if (!pod_.has_annotations) {
      std::string v = "{";
      append_json_string(v, kInjectedAnnotation);
      v += ':' + quoted + "}";
      meta_ops_.push_back({PatchOp::Kind::Add, "/metadata/annotations", std::move(v)});
    } else {
      std::string path = "/metadata/annotations/";
      common::append_pointer_token(path, kInjectedAnnotation);
      meta_ops_.push_back({pod_.injected_annotation ? PatchOp::Kind::Replace : PatchOp::Kind::Add, std::move(path),
                           std::move(quoted)});
    }
    return tokens;
  }

  std::vector<PatchOp> take_ops() {
    std::vector<PatchOp> all;
    all.reserve(meta_ops_.size() + volume_ops_.size() + ops_.size());
    for (auto* v : {&meta_ops_, &volume_ops_, &ops_}) {
      std::move(v->begin(), v->end(), std::back_inserter(all));
    }
    return all;
  }

  std::vector<std::string> take_warnings() {
    if (warnings_.size() > kMaxWarnings) {
      const size_t dropped = warnings_.size() - (kMaxWarnings - 1);
      warnings_.resize(kMaxWarnings - 1);
      warnings_.push_back("... and " + std::to_string(dropped) + " more warnings");
    }
    return std::move(warnings_);
  }

 private:
  const PodView& pod_;
  const Config& cfg_;
  std::string display_;
  std::vector<const std::string*> new_volumes_;
  std::vector<PatchOp> meta_ops_, volume_ops_, ops_;
  std::vector<std::string> warnings_;
};

Mutation finish(Decision d, std::string reason, Builder& b) {
  Mutation m;
  m.decision = d;
  m.reason = std::move(reason);
  m.pod = b.display();
  m.warnings = b.take_warnings();
  return m;
}

// Best effort "ns/name" for an error about a pod we could not read.
std::string display_of_unreadable(simdjson::dom::element pod, std::string_view ns) {
  std::string_view name;
  if (pod.at_pointer("/metadata/name").get(name) != simdjson::SUCCESS) name = "<unnamed>";
  if (ns.empty() && pod.at_pointer("/metadata/namespace").get(ns) != simdjson::SUCCESS) ns = "default";
  return std::string(ns.empty() ? "default" : ns) + "/" + std::string(name);
}

}  // namespace

std::string_view to_string(Decision d) noexcept {
  switch (d) {
    case Decision::Mutated: return "mutated";
    case Decision::Unchanged: return "unchanged";
    case Decision::Skipped: return "skipped";
  }
  return "unknown";
}

std::vector<std::string_view> split_ld_preload(std::string_view value) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 0; i <= value.size(); ++i) {
    if (i == value.size() || value[i] == ':' || value[i] == ' ') {
      if (i > start) out.push_back(value.substr(start, i - start));
      start = i + 1;
    }
  }
  return out;
}

std::string merge_ld_preload(std::string_view value, std::string_view library_path) {
  const auto elements = split_ld_preload(value);
  if (std::find(elements.begin(), elements.end(), library_path) != elements.end()) return std::string(value);
  if (elements.empty()) return std::string(library_path);
  std::string out(value);
  if (out.back() != ':' && out.back() != ' ') out += ':';
  out += library_path;
  return out;
}

void append_patch_json(std::string& out, const std::vector<PatchOp>& ops) {
  size_t size = 2;
  for (const auto& op : ops) size += op.path.size() + op.value.size() + 48;
  out.reserve(out.size() + size);
  out += '[';
  for (size_t i = 0; i < ops.size(); ++i) {
    if (i > 0) out += ',';
    out += ops[i].kind == PatchOp::Kind::Add ? "{\"op\":\"add\",\"path\":" : "{\"op\":\"replace\",\"path\":";
    append_json_string(out, ops[i].path);
    out += ",\"value\":";
    out += ops[i].value;
    out += '}';
  }
  out += ']';
}

Result<Mutation> mutate(simdjson::dom::element pod_element, const NamespaceInfo& ns, const Config& cfg) {
  auto read = read_pod(pod_element, cfg.resource_name());
  if (!read) {
    return make_error(ErrorCode::InvalidArgument,
                      "pod " + display_of_unreadable(pod_element, ns.name) + ": " + read.error().message);
  }
  const PodView& pod = *read;
  const std::string_view ns_name = ns.name.empty() ? pod.namespace_name : ns.name;
  Builder b(pod, cfg, pod.display_name(ns_name));

  if (cfg.is_excluded_namespace(ns_name)) {
    return finish(Decision::Skipped, "namespace " + std::string(ns_name) + " is excluded by configuration", b);
  }
  if (pod.is_mirror) return finish(Decision::Skipped, "mirror pod (managed by the kubelet)", b);
  if (pod.inject_annotation) {
    if (*pod.inject_annotation == "false") {
      return finish(Decision::Skipped, "opted out by annotation " + std::string(kInjectAnnotation), b);
    }
    if (*pod.inject_annotation != "true") {
      b.warn("annotation " + std::string(kInjectAnnotation) + ": \"" + std::string(*pod.inject_annotation) +
             "\" is neither \"true\" nor \"false\"; ignored");
    }
  }
  bool smcr = false;
  if (pod.smcr_annotation) {
    smcr = *pod.smcr_annotation == "true";
    if (!smcr && *pod.smcr_annotation != "false") {
      b.warn("annotation " + std::string(kSmcrAnnotation) + ": \"" + std::string(*pod.smcr_annotation) +
             "\" does not enable SMC-R; only the exact value \"true\" does");
    }
  }

  std::vector<bool> erdma(pod.containers.size());
  bool any_erdma = false;
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    erdma[i] = pod.containers[i].resource_positive;
    any_erdma = any_erdma || erdma[i];
  }
  if (!smcr && !any_erdma) {
    return finish(Decision::Skipped,
                  "requests no " + cfg.resource_name() + " and is not annotated " + std::string(kSmcrAnnotation) +
                      ": \"true\"",
                  b);
  }
  if (pod.containers.size() == pod.init_count) {
    return finish(Decision::Skipped, "pod has no containers", b);
  }

  // An SMC-R pod must land on an eRDMA node and pass through the agent's PreStartContainer hook,
  // which only runs for containers holding the device: give it to the container that starts first.
  std::optional<size_t> resource_to;
  if (smcr && !any_erdma) {
    const ContainerView& first = pod.containers.front();
    if (!cfg.smcr().add_resource) {
      b.warn("no container requests " + cfg.resource_name() +
             " and smcr.addResource is off: the pod may not land on an eRDMA node and SMC-R would fall back to TCP");
    } else if (first.resource_listed) {
      b.warn(describe(first) + " requests 0 " + cfg.resource_name() + "; not changed, so SMC-R may fall back to TCP");
    } else {
      resource_to = 0;
      erdma[0] = true;
      b.warn("added " + cfg.resource_name() + ": 1 to " + describe(first) +
             " so the pod is placed on an eRDMA node for SMC-R");
    }
  }
  any_erdma = any_erdma || resource_to.has_value();

  const auto& r = cfg.rendered();
  if (any_erdma) {
    for (size_t i = 0; i < cfg.device_mounts().size(); ++i) {
      const auto& m = cfg.device_mounts()[i];
      if (auto s = b.need_volume(m.name, m.host_path, r.mount_volumes[i]); !s) return std::move(s).error();
    }
  }
  if (smcr) {
    if (auto s = b.need_volume(kPreloadVolumeName, cfg.smcr().preload_host_dir, r.preload_volume); !s) {
      return std::move(s).error();
    }
  }
  b.volumes();
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    if (!erdma[i] && !smcr) continue;
    if (auto s = b.container(pod.containers[i], erdma[i], smcr, resource_to == i); !s) return std::move(s).error();
  }

  std::vector<std::string_view> computed;
  if (any_erdma && !cfg.erdma_env().empty()) computed.push_back(kTokenErdmaEnv);
  if (any_erdma && !cfg.device_mounts().empty()) computed.push_back(kTokenDeviceMounts);
  if (smcr) computed.push_back(kTokenSmcrPreload);
  if (resource_to) computed.push_back(kTokenErdmaResource);

  Mutation m;
  m.pod = b.display();
  m.injected = b.marker(computed);
  m.ops = b.take_ops();
  m.warnings = b.take_warnings();
  if (m.ops.empty()) {
    m.decision = Decision::Unchanged;
    m.reason = m.injected.empty() ? "nothing is configured to inject" : "already injected";
  } else {
    m.decision = Decision::Mutated;
    m.reason = std::to_string(m.ops.size()) + " patch operations";
  }
  return m;
}

}  // namespace erdma::webhook
