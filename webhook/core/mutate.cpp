// The mutation rules of docs/design.md ("erdma-webhook"), as JSON Patch operations (see mutate.hpp).
//
// Every rule checks the pod's current state before adding anything, so a pod that already went
// through the webhook (reinvocationPolicy: IfNeeded) yields no operations. Arrays and maps that
// are missing are created whole with one "add"; existing ones are appended to with "/-".
//
// The pod is the tenant's input: every loop here is a single pass over it with lookups that cost
// at most 16 comparisons or one hash (NameList), never a pass per item, and every tenant string that reaches a warning
// is cut to a bounded length (read_pod caps the counts and the annotation bytes, see pod_view.hpp).
#include "webhook/core/mutate.hpp"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "common/json_pointer.hpp"
#include "common/k8s_names.hpp"
#include "common/text.hpp"
#include "webhook/core/names.hpp"
#include "webhook/core/pod_view.hpp"

namespace erdma::webhook {
namespace {

using common::append_json_string;

constexpr std::string_view kAllTokens[] = {kTokenErdmaEnv, kTokenDeviceMounts, kTokenSmcrPreload,
                                           kTokenSmcrPreloadPartial, kTokenErdmaResource};

std::string container_prefix(const ContainerView& c) {
  std::string p = c.list == ContainerList::Init ? "/spec/initContainers/" : "/spec/containers/";
  p += std::to_string(c.index);
  return p;
}

// Container names are checked to be DNS labels (at most 63 bytes) before most warnings are made;
// the ones made earlier see whatever the tenant sent, so the name is cut here too.
constexpr size_t kMaxNameInMessage = 64;
// An LD_PRELOAD element quoted in a warning: a path, cut at PATH_MAX.
constexpr size_t kMaxPathInMessage = 4096;

std::string describe(const ContainerView& c) {
  std::string s = c.list == ContainerList::Init ? "init container \"" : "container \"";
  const auto name = common::utf8_prefix(c.name, kMaxNameInMessage);
  s += name;
  if (name.size() < c.name.size()) s += "...";
  s += '"';
  return s;
}

// Up to this many names a linear search is cheaper than a hash set and still bounded work.
constexpr size_t kLinearNames = 16;

// Container names, in first-seen order. The tenant decides how many: past kLinearNames lookups
// go through a hash set, so the work stays linear in the count.
class NameList {
 public:
  // Adds `name` unless it is listed already; false when it was.
  bool add(std::string_view name) {
    if (contains(name)) return false;
    order_.push_back(name);
    if (!set_.empty()) {
      set_.insert(name);
    } else if (order_.size() > kLinearNames) {
      set_.insert(order_.begin(), order_.end());
    }
    return true;
  }
  [[nodiscard]] bool contains(std::string_view name) const {
    if (set_.empty()) return std::find(order_.begin(), order_.end(), name) != order_.end();
    return set_.count(name) > 0;
  }
  [[nodiscard]] const std::vector<std::string_view>& names() const { return order_; }

 private:
  std::vector<std::string_view> order_;
  std::unordered_set<std::string_view> set_;  // filled once order_ outgrows kLinearNames
};

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

// Calls fn(item) for each item of a comma-separated list, blanks around items removed, empty
// items skipped.
template <class Fn>
void for_each_listed(std::string_view list, Fn&& fn) {
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) fn(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

// Marker tokens already on the pod that we know, so a reinvocation keeps e.g. "erdma-resource"
// (after the first pass the pod requests the resource itself and we cannot tell it was us).
std::vector<std::string_view> known_tokens(std::optional<std::string_view> marker) {
  std::vector<std::string_view> out;
  if (!marker) return out;
  for_each_listed(*marker, [&](std::string_view tok) {
    if (std::find(std::begin(kAllTokens), std::end(kAllTokens), tok) != std::end(kAllTokens)) out.push_back(tok);
  });
  return out;
}

class Builder {
 public:
  Builder(const PodView& pod, const Config& cfg, const std::string& display, Warnings& warnings)
      : pod_(pod),
        cfg_(cfg),
        display_(display),
        warnings_(warnings),
        host_path_library_(cfg.smcr().library_from == LibraryFrom::HostPath) {}

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
      if (host_path_library_) {
        if (auto s = need_mount(c, kPreloadVolumeName, cfg_.smcr().mount_path, r.preload_mount, mounts); !s) return s;
      }
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
        warnings_.add(WarningKind::EnvFromPrecedence,
                      describe(c) + " uses envFrom; injected " + names + " take precedence over the same names there");
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
    // A container whose LD_PRELOAD comes from valueFrom never gets here (see mutate()).
    for (auto element : split_ld_preload(last->value)) {
      if (element == r.preload_path) return;
      if (basename(element) == cfg_.smcr().library) {
        warnings_.add(WarningKind::LdPreloadOtherCopy, describe(c) + " already preloads " +
                                                           common::cut_for_message(element, kMaxPathInMessage) +
                                                           "; LD_PRELOAD left unchanged");
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
    if (!tokens.empty()) set_annotation(kInjectedAnnotation, pod_.injected_annotation, std::move(value));
    return tokens;
  }

  // The names of the containers holding the resource because of the webhook, kept across passes.
  void resource_added_annotation(const std::vector<std::string_view>& names) {
    if (names.empty()) return;
    std::string value;
    for (auto n : names) {
      if (!value.empty()) value += ',';
      value += n;
    }
    set_annotation(kResourceAddedAnnotation, pod_.resource_added_annotation, std::move(value));
  }

  // The warnings annotation, merged with the one the pod has.
  void warnings_annotation() {
    std::string value = warnings_.annotation(pod_.warnings_annotation);
    if (!value.empty()) set_annotation(kWarningsAnnotation, pod_.warnings_annotation, std::move(value));
  }

  // The operations that write the annotations set so far: one "add" of the whole map (or the whole
  // metadata) when the pod has none, else one add/replace per key.
  void annotation_ops() {
    if (annotations_.empty()) return;
    auto map_of = [&] {
      std::string v = "{";
      for (size_t i = 0; i < annotations_.size(); ++i) {
        if (i > 0) v += ',';
        append_json_string(v, annotations_[i].key);
        v += ':';
        append_json_string(v, annotations_[i].value);
      }
      v += '}';
      return v;
    };
    if (!pod_.has_metadata) {
      meta_ops_.push_back({PatchOp::Kind::Add, "/metadata", "{\"annotations\":" + map_of() + "}"});
    } else if (!pod_.has_annotations) {
      meta_ops_.push_back({PatchOp::Kind::Add, "/metadata/annotations", map_of()});
    } else {
      for (const auto& a : annotations_) {
        std::string path = "/metadata/annotations/";
        common::append_pointer_token(path, a.key);
        std::string quoted;
        append_json_string(quoted, a.value);
        meta_ops_.push_back(
            {a.present ? PatchOp::Kind::Replace : PatchOp::Kind::Add, std::move(path), std::move(quoted)});
      }
    }
    annotations_.clear();
  }

  std::vector<PatchOp> take_ops() {
    std::vector<PatchOp> all;
    all.reserve(meta_ops_.size() + volume_ops_.size() + ops_.size());
    for (auto* v : {&meta_ops_, &volume_ops_, &ops_}) {
      std::move(v->begin(), v->end(), std::back_inserter(all));
    }
    return all;
  }

 private:
  const PodView& pod_;
  const Config& cfg_;
  const std::string& display_;
  Warnings& warnings_;
  bool host_path_library_;
  std::vector<const std::string*> new_volumes_;
  struct Annotation {
    std::string_view key;
    std::string value;
    bool present;  // the pod has this key (with another value)
  };

  void set_annotation(std::string_view key, std::optional<std::string_view> current, std::string value) {
    if (current && *current == value) return;
    annotations_.push_back({key, std::move(value), current.has_value()});
  }

  std::vector<PatchOp> meta_ops_, volume_ops_, ops_;
  std::vector<Annotation> annotations_;
};

// A user's value inside a warning: JSON-quoted (so a newline cannot split the warning) and cut
// after 64 bytes at a UTF-8 character boundary.
std::string quoted_value(std::string_view v) {
  constexpr size_t kMax = 64;
  if (v.size() <= kMax) return common::json_quote(v);
  return common::json_quote(common::utf8_prefix(v, kMax)) + "...";
}

// The comma-separated names of kResourceAddedAnnotation, each once.
NameList split_names(std::optional<std::string_view> value) {
  NameList out;
  if (value) for_each_listed(*value, [&](std::string_view name) { out.add(name); });
  return out;
}

// "container \"a\", container \"b\" and container \"c\"": the first kListed, then how many more.
std::string describe_all(const std::vector<const ContainerView*>& cs) {
  constexpr size_t kListed = 8;
  std::string s;
  const size_t shown = cs.size() > kListed ? kListed : cs.size();
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) s += i + 1 == cs.size() ? " and " : ", ";
    s += describe(*cs[i]);
  }
  if (shown < cs.size()) s += " and " + std::to_string(cs.size() - shown) + " more containers";
  return s;
}

// The webhook records the containers it gave the resource to by name (kResourceAddedAnnotation),
// so it can only mutate a pod whose container names identify the containers; the apiserver refuses
// any other pod after admission anyway (validation runs after the mutating webhooks). The message
// names the field as the apiserver would.
Status check_container_names(const PodView& pod) {
  NameList seen;  // only for pods of more than kLinearNames containers: the others allocate nothing
  const bool few = pod.containers.size() <= kLinearNames;
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    const ContainerView& c = pod.containers[i];
    auto refuse = [&c](const std::string& why) {
      return make_error(ErrorCode::InvalidArgument,
                        std::string(c.list == ContainerList::Init ? "spec.initContainers[" : "spec.containers[") +
                            std::to_string(c.index) + "].name: " + why);
    };
    if (c.name.empty()) return refuse("required (the apiserver refuses a container without a name)");
    if (const auto check = common::check_name(common::NameRule::Dns1123Label, c.name); !check) {
      return refuse(quoted_value(c.name) + " " + common::describe(check) + "; the apiserver refuses it");
    }
    const bool repeated = few ? std::any_of(pod.containers.begin(), pod.containers.begin() + static_cast<ptrdiff_t>(i),
                                            [&](const ContainerView& o) { return o.name == c.name; })
                              : !seen.add(c.name);
    if (repeated) {
      return refuse(quoted_value(c.name) + " is used by another container of the pod; names must be unique");
    }
  }
  return {};
}

// Best effort "ns/name" for an error about a pod we could not read.
std::string display_of_unreadable(simdjson::dom::element pod, std::string_view ns) {
  std::string_view name;
  if (pod.at_pointer("/metadata/name").get(name) != simdjson::SUCCESS) name = "<unnamed>";
  if (ns.empty() && pod.at_pointer("/metadata/namespace").get(ns) != simdjson::SUCCESS) ns = "default";
  constexpr size_t kMaxPart = 253;  // as PodView::ref
  return common::cut_for_message(ns.empty() ? "default" : ns, kMaxPart) + "/" + common::cut_for_message(name, kMaxPart);
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

namespace {

// --- Deciding ------------------------------------------------------------------------------------

// What one container gets, and why. Decided for every container before any operation is written.
struct ContainerPlan {
  bool erdma = false;         // asks for eRDMA itself: the eRDMA env and device mounts
  bool holds = false;         // holds the resource once mutated (asked for it, or given it here)
  bool add_resource = false;  // given aliyun/erdma: 1 here, for SMC-R
  bool preload = false;       // gets the SMC-R preload library and the SMC env
};

// The decision for the pod. `skip` set: leave the pod alone (with its warnings annotated when
// `annotate_skip`); otherwise `containers` says what each container gets.
struct Plan {
  std::optional<std::string> skip;
  bool annotate_skip = true;
  bool smcr = false;                           // the pod asks for SMC-R
  bool any_erdma = false;                      // some container asks for eRDMA itself
  std::vector<ContainerPlan> containers;       // parallel to PodView::containers
  NameList ours;                               // given the resource by earlier passes (annotation)
  std::vector<const ContainerView*> added;     // given the resource by this pass
  std::vector<const ContainerView*> unserved;  // SMC-R containers left without the resource
  size_t preloaded = 0;                        // containers getting the library
  size_t left_out = 0;                         // SMC-R containers that do not (each warned about)
};

// Whether the pod is a target at all, in this order, each decision final: excluded namespaces,
// mirror pods and pods opted out by annotation are left alone without a word; near-miss
// annotation values ("True" enables nothing) are warned about; pods that ask for neither eRDMA nor
// SMC-R, Windows pods (with a warning) and pods without regular containers are skipped; requests
// without limits are warned about (the apiserver refuses them).
void decide_scope(const PodView& pod, std::string_view ns_name, const Config& cfg, Plan& plan, Warnings& w) {
  auto skip = [&](std::string why, bool annotate = true) {
    plan.skip = std::move(why);
    plan.annotate_skip = annotate;
  };
  if (cfg.is_excluded_namespace(ns_name)) {
    return skip("namespace " + std::string(ns_name) + " is excluded by configuration", false);
  }
  if (pod.is_mirror) return skip("mirror pod (managed by the kubelet)", false);
  if (pod.inject_annotation) {
    if (*pod.inject_annotation == "false") {
      return skip("opted out by annotation " + std::string(kInjectAnnotation), false);
    }
    if (*pod.inject_annotation != "true") {
      w.add(WarningKind::InjectAnnotationValue, "annotation " + std::string(kInjectAnnotation) + ": " +
                                                    quoted_value(*pod.inject_annotation) +
                                                    " is neither \"true\" nor \"false\"; ignored");
    }
  }
  if (pod.smcr_annotation) {
    plan.smcr = *pod.smcr_annotation == "true";
    if (!plan.smcr && *pod.smcr_annotation != "false") {
      w.add(WarningKind::SmcrAnnotationValue, "annotation " + std::string(kSmcrAnnotation) + ": " +
                                                  quoted_value(*pod.smcr_annotation) +
                                                  " does not enable SMC-R; only the exact value \"true\" does");
    }
    if (plan.smcr && !cfg.smcr().allows(ns_name)) {
      plan.smcr = false;
      w.add(WarningKind::SmcrNotAllowed,
            "SMC-R is not allowed in namespace " + common::cut_for_message(ns_name, 253) +
                " (smcr.allowedNamespaces of the webhook's config); nothing is injected for it and the pod's TCP "
                "stays TCP: ask the cluster admin");
    }
  }

  // Containers that ask for eRDMA themselves. The containers the webhook gave the resource to for
  // SMC-R (named in kResourceAddedAnnotation after a first pass) ask for it only because of us:
  // they get no eRDMA env and no device mounts, on any pass.
  plan.ours = split_names(pod.resource_added_annotation);
  plan.containers.resize(pod.containers.size());
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    const ContainerView& c = pod.containers[i];
    plan.containers[i].holds = c.resource_positive || c.smcr_positive;
    plan.containers[i].erdma = c.resource_positive && !plan.ours.contains(c.name);
    plan.any_erdma = plan.any_erdma || plan.containers[i].erdma;
  }
  if (!plan.smcr && !plan.any_erdma) {
    if (pod.smcr_annotation == "true") return skip("SMC-R is not allowed in namespace " + std::string(ns_name));
    return skip("requests no " + cfg.resource_name() + " and is not annotated " + std::string(kSmcrAnnotation) +
                ": \"true\"");
  }
  if (!pod.windows_by.empty()) {
    w.add(WarningKind::WindowsPod, "pod runs on Windows (" + std::string(pod.windows_by) +
                                       "); erdma-webhook injects nothing: eRDMA and SMC-R work on Linux only");
    return skip("Windows pod (" + std::string(pod.windows_by) + ")");
  }
  // Kubernetes does not overcommit extended resources: a request needs a limit of the same
  // quantity, or the apiserver refuses the pod. The webhook does not invent the limit (the user's
  // quantities are theirs) and adds nothing to that container's resources.
  for (const auto& c : pod.containers) {
    if (c.resource_in_requests && !c.resource_in_limits) {
      w.add(WarningKind::RequestsWithoutLimits, describe(c) + " requests " + cfg.resource_name() +
                                                    " without a limit; the apiserver refuses extended " +
                                                    "resources whose requests do not equal their limits: set limits." +
                                                    cfg.resource_name() + " to the requested quantity");
    }
  }
  if (pod.containers.size() == pod.init_count) return skip("pod has no containers");
}

// Which containers hold the resource for SMC-R. An SMC-R pod must land on an eRDMA node and pass
// through the agent's PreStartContainer hook, which only runs for containers holding the device;
// with libraryFrom: devicePlugin the library also reaches only those containers (the agent's
// Allocate answer mounts it), so every regular container without the resource is given one; with
// hostPath, the first regular container is, when no container holds it. Regular containers get
// it, init containers do not: kubelet's PodResources List, where the agent looks up whose device
// the hook is called for, reports regular (and sidecar) containers only, so the agent could not
// find a pod whose only holder is an init container. Init containers run before the pod's network
// namespace is set up anyway; their TCP would fall back.
void decide_holders(const PodView& pod, const Config& cfg, Plan& plan, Warnings& w) {
  if (!plan.smcr) return;
  const bool via_plugin = cfg.smcr().library_from == LibraryFrom::DevicePlugin;
  const std::string& added = cfg.rendered().added_resource;
  if (via_plugin) {
    for (size_t i = pod.init_count; i < pod.containers.size(); ++i) {
      const ContainerView& c = pod.containers[i];
      if (c.resource_positive || c.smcr_positive) continue;
      if (c.resource_listed || c.smcr_listed) {
        w.add(WarningKind::ResourceZero,
              describe(c) + " requests 0 " + (c.smcr_listed ? cfg.smcr().resource_name : cfg.resource_name()) +
                  "; not changed, so it gets no SMC-R preload library and its TCP stays TCP");
        plan.unserved.push_back(&c);
      } else if (!cfg.smcr().add_resource) {
        plan.unserved.push_back(&c);
      } else {
        plan.containers[i].holds = plan.containers[i].add_resource = true;
        plan.added.push_back(&c);
      }
    }
    if (!cfg.smcr().add_resource && !plan.unserved.empty()) {
      const bool none =
          std::none_of(plan.containers.begin(), plan.containers.end(), [](const ContainerPlan& p) { return p.holds; });
      const size_t n = plan.unserved.size();
      w.add(WarningKind::AddResourceOff,
            "smcr.addResource is off: " + describe_all(plan.unserved) + (n == 1 ? " holds" : " hold") + " no " + added +
                ", so " + (n == 1 ? "it gets" : "they get") + " no SMC-R preload library" +
                (none ? "; the pod may not land on an eRDMA node and SMC-R would fall back to TCP" : ""));
    }
    if (!plan.added.empty()) {
      w.add(WarningKind::ResourceAdded, "added " + added + ": 1 to " + describe_all(plan.added) +
                                            ": SMC-R needs an eRDMA node, and erdma-agent mounts the preload " +
                                            "library into the containers holding it");
    }
    return;
  }
  const bool any_held = std::any_of(pod.containers.begin(), pod.containers.end(),
                                    [](const ContainerView& c) { return c.resource_positive; });
  if (any_held) return;
  const size_t first_regular = pod.init_count;
  const ContainerView& first = pod.containers[first_regular];
  if (!cfg.smcr().add_resource) {
    w.add(WarningKind::AddResourceOff,
          "no container requests " + cfg.resource_name() +
              " and smcr.addResource is off: the pod may not land on an eRDMA node and SMC-R would fall back to TCP");
  } else if (first.resource_listed) {
    w.add(WarningKind::ResourceZero,
          describe(first) + " requests 0 " + cfg.resource_name() + "; not changed, so SMC-R may fall back to TCP");
  } else {
    plan.containers[first_regular].add_resource = plan.containers[first_regular].holds = true;
    plan.added.push_back(&first);
    w.add(WarningKind::ResourceAdded, "added " + cfg.resource_name() + ": 1 to " + describe(first) +
                                          " so the pod is placed on an eRDMA node for SMC-R");
  }
}

// Which SMC-R containers get the preload library: where the file is (with devicePlugin: where the
// resource is), unless their LD_PRELOAD comes from valueFrom: its value is unknown here, and
// replacing it would drop what the user preloads. A container never gets LD_PRELOAD without the
// file: the dynamic loader would only print an error and run the program over TCP.
void decide_preload(const PodView& pod, const Config& cfg, Plan& plan, Warnings& w) {
  plan.left_out = plan.unserved.size();
  if (!plan.smcr) return;
  const bool via_plugin = cfg.smcr().library_from == LibraryFrom::DevicePlugin;
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    const ContainerView& c = pod.containers[i];
    if (via_plugin && !plan.containers[i].holds) continue;
    const EnvEntryView* last = nullptr;
    for (const auto& e : c.env) {
      if (e.name == kLdPreload) last = &e;
    }
    if (last != nullptr && last->has_value_from) {
      ++plan.left_out;
      w.add(WarningKind::LdPreloadValueFrom,
            describe(c) + " takes LD_PRELOAD from valueFrom; the webhook leaves it and the SMC env alone" +
                (via_plugin ? "" : " and mounts no library") + ", so its TCP stays TCP unless that value includes " +
                cfg.rendered().preload_path);
      continue;
    }
    plan.containers[i].preload = true;
    ++plan.preloaded;
  }
}

// The marker annotation's tokens for what this pass decided.
std::vector<std::string_view> tokens_of(const Plan& plan, const Config& cfg) {
  std::vector<std::string_view> out;
  if (plan.any_erdma && !cfg.erdma_env().empty()) out.push_back(kTokenErdmaEnv);
  if (plan.any_erdma && !cfg.device_mounts().empty()) out.push_back(kTokenDeviceMounts);
  if (plan.preloaded > 0) out.push_back(kTokenSmcrPreload);
  if (plan.preloaded > 0 && plan.left_out > 0) out.push_back(kTokenSmcrPreloadPartial);
  if (!plan.added.empty()) out.push_back(kTokenErdmaResource);
  return out;
}

// --- Building -------------------------------------------------------------------------------------

// The operations for `plan`: volumes, then each container's resource, env and mounts, then the
// marker, resource-added and warnings annotations. Errors: a volume or mount the pod already has
// under our name or path with another source (Builder::conflict).
Status emit(const PodView& pod, const Config& cfg, const Plan& plan, Builder& b, Mutation& m) {
  const auto& r = cfg.rendered();
  if (plan.any_erdma) {
    for (size_t i = 0; i < cfg.device_mounts().size(); ++i) {
      const auto& mount = cfg.device_mounts()[i];
      ERDMA_TRY(b.need_volume(mount.name, mount.host_path, r.mount_volumes[i]));
    }
  }
  if (plan.preloaded > 0 && cfg.smcr().library_from == LibraryFrom::HostPath) {
    ERDMA_TRY(b.need_volume(kPreloadVolumeName, cfg.smcr().preload_host_dir, r.preload_volume));
  }
  b.volumes();
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    const ContainerPlan& c = plan.containers[i];
    if (!c.erdma && !c.preload && !c.add_resource) continue;
    ERDMA_TRY(b.container(pod.containers[i], c.erdma, c.preload, c.add_resource));
  }
  NameList added_names = plan.ours;
  for (const auto* c : plan.added) added_names.add(c->name);
  m.injected = b.marker(tokens_of(plan, cfg));
  b.resource_added_annotation(added_names.names());
  return {};
}

}  // namespace

// Decides first (decide_scope, decide_holders, decide_preload: what each container gets and why),
// then writes the operations for that plan (emit); each rule checks the pod's current state, so
// a second pass writes nothing new. A pod the rules refuse (unreadable fields, container names
// the apiserver would refuse, a conflicting volume or mount) is an error naming the pod.
Result<Mutation> mutate(simdjson::dom::element pod_element, const NamespaceInfo& ns, const Config& cfg) {
  auto read = read_pod(pod_element, ResourceNames{cfg.resource_name(), cfg.smcr().resource_name});
  if (!read) {
    return make_error(ErrorCode::InvalidArgument,
                      "pod " + display_of_unreadable(pod_element, ns.name) + ": " + read.error().message);
  }
  const PodView& pod = *read;
  const std::string_view ns_name = ns.name.empty() ? pod.namespace_name : ns.name;
  Mutation m;
  m.pod = pod.ref(ns_name);
  const std::string display = m.pod.display();
  Warnings warnings;
  Builder b(pod, cfg, display, warnings);

  Plan plan;
  decide_scope(pod, ns_name, cfg, plan, warnings);
  if (!plan.skip) {
    // The webhook records the containers it gives the resource to by name, so it can only mutate
    // a pod whose names identify its containers.
    if (auto s = check_container_names(pod); !s) {
      return make_error(ErrorCode::InvalidArgument, "pod " + display + ": " + s.error().message);
    }
    decide_holders(pod, cfg, plan, warnings);
    decide_preload(pod, cfg, plan, warnings);
    ERDMA_TRY(emit(pod, cfg, plan, b, m));
  }
  if (!plan.skip || plan.annotate_skip) {
    // A pod the webhook looked at (not excluded, not opted out) gets its warnings as an
    // annotation even when nothing else changes, so whoever reads the pod learns why.
    b.warnings_annotation();
    b.annotation_ops();
    m.ops = b.take_ops();
  }
  m.warning_counts = warnings.counts();
  m.warnings = warnings.take_for_response();
  if (plan.skip) {
    m.decision = Decision::Skipped;
    m.reason = std::move(*plan.skip);
  } else if (m.ops.empty()) {
    m.decision = Decision::Unchanged;
    m.reason = m.injected.empty() ? "nothing is configured to inject" : "already injected";
  } else {
    m.decision = Decision::Mutated;
    m.reason = std::to_string(m.ops.size()) + " patch operations";
  }
  return m;
}

}  // namespace erdma::webhook
