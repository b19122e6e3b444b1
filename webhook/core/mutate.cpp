// The mutation rules of docs/design.md ("erdma-webhook"), as JSON Patch operations (see mutate.hpp).
//
// Every rule checks the pod's current state before adding anything, so a pod that already went
// through the webhook (reinvocationPolicy: IfNeeded) yields no operations. Arrays and maps that
// are missing are created whole with one "add"; existing ones are appended to with "/-".
//
// The pod is the tenant's input: every loop here is a single pass over it with lookups that cost
// at most 16 comparisons or one hash (NameList), never a pass per item, and every tenant string that reaches a warning is cut to a bounded length
// (read_pod caps the counts and the annotation bytes, see pod_view.hpp).
#include "webhook/core/mutate.hpp"

#include <algorithm>
#include <optional>
#include <unordered_set>

#include "common/config_reader.hpp"
#include "common/json_pointer.hpp"
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
  Builder(const PodView& pod, const Config& cfg, std::string display)
      : pod_(pod), cfg_(cfg), display_(std::move(display)),
        host_path_library_(cfg.smcr().library_from == LibraryFrom::HostPath) {}

  // Every warning is counted by kind; the text of the first kKeptWarnings is kept (more than the
  // answer and the annotation can carry, see take_warnings and warnings_annotation).
  void warn(WarningKind kind, std::string w) {
    ++counts_[static_cast<size_t>(kind)];
    ++total_warnings_;
    if (warnings_.size() < kKeptWarnings) warnings_.push_back(std::move(w));
  }
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
        warn(WarningKind::EnvFromPrecedence,
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
        warn(WarningKind::LdPreloadOtherCopy, describe(c) + " already preloads " +
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
    std::string value = warnings_annotation_value(pod_.warnings_annotation, warnings_, total_warnings_ > warnings_.size());
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
        meta_ops_.push_back({a.present ? PatchOp::Kind::Replace : PatchOp::Kind::Add, std::move(path), std::move(quoted)});
      }
    }
    annotations_.clear();
  }

  const std::array<uint32_t, kWarningKindCount>& counts() const { return counts_; }

  std::vector<PatchOp> take_ops() {
    std::vector<PatchOp> all;
    all.reserve(meta_ops_.size() + volume_ops_.size() + ops_.size());
    for (auto* v : {&meta_ops_, &volume_ops_, &ops_}) {
      std::move(v->begin(), v->end(), std::back_inserter(all));
    }
    return all;
  }

  std::vector<std::string> take_warnings() {
    if (total_warnings_ > kMaxWarnings) {
      const size_t dropped = total_warnings_ - (kMaxWarnings - 1);
      warnings_.resize(kMaxWarnings - 1);
      warnings_.push_back("... and " + std::to_string(dropped) + " more warnings");
    }
    return std::move(warnings_);
  }

 private:
  const PodView& pod_;
  const Config& cfg_;
  std::string display_;
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
  static constexpr size_t kKeptWarnings = 2 * kMaxWarnings;
  std::vector<std::string> warnings_;
  size_t total_warnings_ = 0;
  std::array<uint32_t, kWarningKindCount> counts_{};
};

// A pod left alone. `annotate`: a pod the webhook looked at (not excluded, not opted out) still
// gets its warnings as an annotation, so whoever reads the pod learns why nothing was injected.
Mutation finish(Decision d, std::string reason, Builder& b, bool annotate = true) {
  Mutation m;
  m.decision = d;
  m.reason = std::move(reason);
  m.pod = b.display();
  if (annotate) {
    b.warnings_annotation();
    b.annotation_ops();
    m.ops = b.take_ops();
  }
  m.warning_counts = b.counts();
  m.warnings = b.take_warnings();
  return m;
}

// A user's value inside a warning: JSON-quoted (so a newline cannot split the warning) and cut
// after 64 bytes at a UTF-8 character boundary.
std::string quoted_value(std::string_view v) {
  constexpr size_t kMax = 64;
  if (v.size() <= kMax) return common::json_quote(v);
  return common::json_quote(common::utf8_prefix(v, kMax)) + "...";
}

// Copies `s` for one line of the warnings annotation: control characters become blanks, and a
// line longer than kMaxWarningLineBytes is cut at a UTF-8 character boundary and marked.
std::string annotation_line(std::string_view s) {
  std::string out;
  out.reserve(std::min(s.size(), kMaxWarningLineBytes));
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    out += (u < 0x20 || u == 0x7f) ? ' ' : ch;
  }
  if (out.size() <= kMaxWarningLineBytes) return out;
  return common::cut_for_message(out, kMaxWarningLineBytes - 3);  // "..." included
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
    if (!common::config::is_dns_label(c.name)) {
      return refuse(quoted_value(c.name) + " is not a DNS-1123 label (lower-case letters, digits and '-', at most " +
                    "63, starting and ending with a letter or digit); the apiserver refuses it");
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
  constexpr size_t kMaxPart = 253;  // as PodView::display_name
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

std::string_view to_string(WarningKind k) noexcept {
  switch (k) {
    case WarningKind::InjectAnnotationValue: return "inject_annotation_value";
    case WarningKind::SmcrAnnotationValue: return "smcr_annotation_value";
    case WarningKind::EnvFromPrecedence: return "envfrom_precedence";
    case WarningKind::LdPreloadValueFrom: return "ld_preload_value_from";
    case WarningKind::LdPreloadOtherCopy: return "ld_preload_other_copy";
    case WarningKind::ResourceAdded: return "resource_added";
    case WarningKind::ResourceZero: return "resource_zero";
    case WarningKind::AddResourceOff: return "add_resource_off";
    case WarningKind::WindowsPod: return "windows_pod";
    case WarningKind::RequestsWithoutLimits: return "requests_without_limits";
  }
  return "unknown";
}

std::string warnings_annotation_value(std::optional<std::string_view> existing, const std::vector<std::string>& warnings,
                                      bool more) {
  std::vector<std::string> lines;
  std::unordered_set<std::string> seen;  // the lines above, for a single pass over the new ones
  bool left_out = more;
  if (existing) {
    std::string_view rest = *existing;
    while (!rest.empty()) {
      const auto nl = rest.find('\n');
      const std::string_view line = rest.substr(0, nl);
      if (line == kWarningsLeftOut) {
        left_out = true;
      } else if (!line.empty()) {
        lines.emplace_back(line);
        seen.emplace(line);
      }
      if (nl == std::string_view::npos) break;
      rest.remove_prefix(nl + 1);
    }
  }
  for (const auto& w : warnings) {
    std::string line = annotation_line(w);
    if (!line.empty() && seen.insert(line).second) lines.push_back(std::move(line));
  }
  // A line is taken if the left-out note would still fit after it, or if it is the last line and
  // no note is needed. Deterministic, so a second pass over the result reproduces it.
  std::string value;
  size_t kept = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t bytes = value.size() + (value.empty() ? 0 : 1) + lines[i].size();
    const bool with_note = bytes + 1 + kWarningsLeftOut.size() <= kMaxWarningsAnnotationBytes && kept + 2 <= kMaxWarnings;
    const bool alone = i + 1 == lines.size() && !left_out && bytes <= kMaxWarningsAnnotationBytes && kept + 1 <= kMaxWarnings;
    if (!with_note && !alone) {
      left_out = true;
      break;
    }
    if (!value.empty()) value += '\n';
    value += lines[i];
    ++kept;
  }
  if (left_out) {
    if (!value.empty()) value += '\n';
    value += kWarningsLeftOut;
  }
  return value;
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

// The order of the decisions, each one final:
//   1. read the pod view (a malformed field the rules read is an error naming it);
//   2. leave alone: excluded namespaces, mirror pods, pods opted out by annotation;
//   3. warn about near-miss annotation values ("True" enables nothing);
//   4. skip pods that ask for neither eRDMA nor SMC-R, and Windows pods (with a warning);
//   5. warn about requests without limits (the apiserver refuses them); refuse a pod whose
//      container names are missing, not DNS-1123 labels or repeated (the apiserver refuses it too,
//      and the resource-added annotation could not say which container got the resource);
//   6. SMC-R: with libraryFrom devicePlugin, a slot for every regular container without one;
//      with hostPath, one slot for the first regular container when no container has one;
//   7. per container: NCCL env and device mounts where eRDMA was asked for, the preload library
//      where SMC-R applies and the file is (not where LD_PRELOAD comes from valueFrom);
//   8. the marker, resource-added and warnings annotations, and the patch as diff(pod, edited).
Result<Mutation> mutate(simdjson::dom::element pod_element, const NamespaceInfo& ns, const Config& cfg) {
  auto read = read_pod(pod_element, cfg.resource_name());
  if (!read) {
    return make_error(ErrorCode::InvalidArgument,
                      "pod " + display_of_unreadable(pod_element, ns.name) + ": " + read.error().message);
  }
  const PodView& pod = *read;
  const std::string_view ns_name = ns.name.empty() ? pod.namespace_name : ns.name;
  Builder b(pod, cfg, pod.display_name(ns_name));

  // Pods the operator or the pod's author put out of scope are not touched at all.
  if (cfg.is_excluded_namespace(ns_name)) {
    return finish(Decision::Skipped, "namespace " + std::string(ns_name) + " is excluded by configuration", b, false);
  }
  if (pod.is_mirror) return finish(Decision::Skipped, "mirror pod (managed by the kubelet)", b, false);
  if (pod.inject_annotation) {
    if (*pod.inject_annotation == "false") {
      return finish(Decision::Skipped, "opted out by annotation " + std::string(kInjectAnnotation), b, false);
    }
    if (*pod.inject_annotation != "true") {
      b.warn(WarningKind::InjectAnnotationValue, "annotation " + std::string(kInjectAnnotation) + ": " +
                                                     quoted_value(*pod.inject_annotation) +
                                                     " is neither \"true\" nor \"false\"; ignored");
    }
  }
  bool smcr = false;
  if (pod.smcr_annotation) {
    smcr = *pod.smcr_annotation == "true";
    if (!smcr && *pod.smcr_annotation != "false") {
      b.warn(WarningKind::SmcrAnnotationValue, "annotation " + std::string(kSmcrAnnotation) + ": " +
                                                   quoted_value(*pod.smcr_annotation) +
                                                   " does not enable SMC-R; only the exact value \"true\" does");
    }
  }

  // Containers that ask for eRDMA themselves. The containers the webhook gave the resource to for
  // SMC-R (named in kResourceAddedAnnotation after a first pass) ask for it only because of us:
  // they get no NCCL env and no device mounts, on any pass.
  const auto ours = split_names(pod.resource_added_annotation);
  auto is_ours = [&](const ContainerView& c) {
    return c.resource_positive && ours.contains(c.name);
  };
  std::vector<bool> erdma(pod.containers.size());
  bool any_erdma = false, any_ours = false;
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    const bool mine = is_ours(pod.containers[i]);
    erdma[i] = pod.containers[i].resource_positive && !mine;
    any_erdma = any_erdma || erdma[i];
    any_ours = any_ours || mine;
  }
  if (!smcr && !any_erdma) {
    return finish(Decision::Skipped,
                  "requests no " + cfg.resource_name() + " and is not annotated " + std::string(kSmcrAnnotation) +
                      ": \"true\"",
                  b);
  }
  if (!pod.windows_by.empty()) {
    b.warn(WarningKind::WindowsPod, "pod runs on Windows (" + std::string(pod.windows_by) +
                                        "); erdma-webhook injects nothing: eRDMA and SMC-R work on Linux only");
    return finish(Decision::Skipped, "Windows pod (" + std::string(pod.windows_by) + ")", b);
  }
  // Kubernetes does not overcommit extended resources: a request needs a limit of the same
  // quantity, or the apiserver refuses the pod. The webhook does not invent the limit (the user's
  // quantities are theirs) and adds nothing to that container's resources.
  for (const auto& c : pod.containers) {
    if (c.resource_in_requests && !c.resource_in_limits) {
      b.warn(WarningKind::RequestsWithoutLimits,
             describe(c) + " requests " + cfg.resource_name() + " without a limit; the apiserver refuses extended " +
                 "resources whose requests do not equal their limits: set limits." + cfg.resource_name() +
                 " to the requested quantity");
    }
  }
  if (pod.containers.size() == pod.init_count) {
    return finish(Decision::Skipped, "pod has no containers", b);
  }
  if (auto s = check_container_names(pod); !s) {
    return make_error(ErrorCode::InvalidArgument, "pod " + b.display() + ": " + s.error().message);
  }

  // An SMC-R pod must land on an eRDMA node and pass through the agent's PreStartContainer hook,
  // which only runs for containers holding the device; with libraryFrom: devicePlugin the library
  // also reaches only those containers (the agent's Allocate answer mounts it). Regular containers
  // get it, init containers do not: kubelet's PodResources List, where the agent looks up whose
  // device the hook is called for, reports regular (and sidecar) containers only, so the agent
  // could not find a pod whose only holder is an init container. Init containers run before the
  // pod's network namespace is set up anyway; their TCP would fall back.
  const bool via_plugin = cfg.smcr().library_from == LibraryFrom::DevicePlugin;
  std::vector<bool> holds(pod.containers.size()), add_to(pod.containers.size());
  std::vector<const ContainerView*> added, unserved;
  for (size_t i = 0; i < pod.containers.size(); ++i) holds[i] = pod.containers[i].resource_positive;
  if (smcr && via_plugin) {
    for (size_t i = pod.init_count; i < pod.containers.size(); ++i) {
      const ContainerView& c = pod.containers[i];
      if (c.resource_positive) continue;
      if (c.resource_listed) {
        b.warn(WarningKind::ResourceZero, describe(c) + " requests 0 " + cfg.resource_name() +
                                              "; not changed, so it gets no SMC-R preload library and its TCP stays TCP");
        unserved.push_back(&c);
      } else if (!cfg.smcr().add_resource) {
        unserved.push_back(&c);
      } else {
        holds[i] = add_to[i] = true;
        added.push_back(&c);
      }
    }
    if (!cfg.smcr().add_resource && !unserved.empty()) {
      const bool none = std::none_of(holds.begin(), holds.end(), [](bool h) { return h; });
      b.warn(WarningKind::AddResourceOff,
             "smcr.addResource is off: " + describe_all(unserved) + (unserved.size() == 1 ? " holds" : " hold") +
                 " no " + cfg.resource_name() + ", so " + (unserved.size() == 1 ? "it gets" : "they get") +
                 " no SMC-R preload library" +
                 (none ? "; the pod may not land on an eRDMA node and SMC-R would fall back to TCP" : ""));
    }
    if (!added.empty()) {
      b.warn(WarningKind::ResourceAdded, "added " + cfg.resource_name() + ": 1 to " + describe_all(added) +
                                             ": SMC-R needs an eRDMA node, and erdma-agent mounts the preload " +
                                             "library into the containers holding it");
    }
  } else if (smcr && !any_erdma && !any_ours) {
    const size_t first_regular = pod.init_count;
    const ContainerView& first = pod.containers[first_regular];
    if (!cfg.smcr().add_resource) {
      b.warn(WarningKind::AddResourceOff,
             "no container requests " + cfg.resource_name() +
                 " and smcr.addResource is off: the pod may not land on an eRDMA node and SMC-R would fall back to TCP");
    } else if (first.resource_listed) {
      b.warn(WarningKind::ResourceZero, describe(first) + " requests 0 " + cfg.resource_name() +
                                            "; not changed, so SMC-R may fall back to TCP");
    } else {
      add_to[first_regular] = holds[first_regular] = true;
      added.push_back(&first);
      b.warn(WarningKind::ResourceAdded, "added " + cfg.resource_name() + ": 1 to " + describe(first) +
                                             " so the pod is placed on an eRDMA node for SMC-R");
    }
  }

  // SMC-R containers get the preload library where the file is (with devicePlugin: where the
  // resource is), unless their LD_PRELOAD comes from valueFrom: its value is unknown here, and
  // replacing it would drop what the user preloads. A container never gets LD_PRELOAD without the
  // file: the dynamic loader would only print an error and run the program over TCP.
  const auto& r = cfg.rendered();
  std::vector<bool> preload(pod.containers.size());
  size_t preloaded = 0, left_out = unserved.size();
  for (size_t i = 0; i < pod.containers.size() && smcr; ++i) {
    const ContainerView& c = pod.containers[i];
    if (via_plugin && !holds[i]) continue;
    const EnvEntryView* last = nullptr;
    for (const auto& e : c.env) {
      if (e.name == kLdPreload) last = &e;
    }
    if (last != nullptr && last->has_value_from) {
      ++left_out;
      b.warn(WarningKind::LdPreloadValueFrom,
             describe(c) + " takes LD_PRELOAD from valueFrom; the webhook leaves it and the SMC env alone" +
                 (via_plugin ? "" : " and mounts no library") + ", so its TCP stays TCP unless that value includes " +
                 r.preload_path);
      continue;
    }
    preload[i] = true;
    ++preloaded;
  }

  if (any_erdma) {
    for (size_t i = 0; i < cfg.device_mounts().size(); ++i) {
      const auto& m = cfg.device_mounts()[i];
      ERDMA_TRY(b.need_volume(m.name, m.host_path, r.mount_volumes[i]));
    }
  }
  if (preloaded > 0 && !via_plugin) {
    ERDMA_TRY(b.need_volume(kPreloadVolumeName, cfg.smcr().preload_host_dir, r.preload_volume));
  }
  b.volumes();
  for (size_t i = 0; i < pod.containers.size(); ++i) {
    if (!erdma[i] && !preload[i] && !add_to[i]) continue;
    ERDMA_TRY(b.container(pod.containers[i], erdma[i], preload[i], add_to[i]));
  }
  NameList added_names = ours;
  for (const auto* c : added) added_names.add(c->name);

  std::vector<std::string_view> computed;
  if (any_erdma && !cfg.erdma_env().empty()) computed.push_back(kTokenErdmaEnv);
  if (any_erdma && !cfg.device_mounts().empty()) computed.push_back(kTokenDeviceMounts);
  if (preloaded > 0) computed.push_back(kTokenSmcrPreload);
  if (preloaded > 0 && left_out > 0) computed.push_back(kTokenSmcrPreloadPartial);
  if (!added.empty()) computed.push_back(kTokenErdmaResource);

  Mutation m;
  m.pod = b.display();
  m.injected = b.marker(computed);
  b.resource_added_annotation(added_names.names());
  b.warnings_annotation();
  b.annotation_ops();
  m.ops = b.take_ops();
  m.warning_counts = b.counts();
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
