// Building a PodView from a simdjson DOM (see pod_view.hpp). Each object we read is walked once,
// field by field; a key we read that appears twice is an error, so the view can never disagree
// with a JSON Patch implementation that keeps the other duplicate.
#include "webhook/core/pod_view.hpp"

#include "common/text.hpp"
#include "webhook/core/names.hpp"
#include "webhook/core/quantity.hpp"

namespace erdma::webhook {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// Where we are in the document, as a chain of stack frames. The text ("spec.containers[1].env")
// is built only when something is wrong, so the happy path does no string work.
struct Path {
  const Path* parent = nullptr;
  std::string_view key;  // a member name, or empty for an index
  size_t idx = 0;

  [[nodiscard]] std::string str() const {
    std::string out = parent != nullptr ? parent->str() : std::string();
    if (!key.empty()) {
      if (!out.empty()) out += '.';
      out += key;
    } else {
      out += '[' + std::to_string(idx) + ']';
    }
    return out;
  }
};

Path child(const Path& parent, std::string_view key) { return Path{&parent, key, 0}; }
Path index(const Path& parent, size_t i) { return Path{&parent, {}, i}; }

Error type_error(const Path& path, const char* expected, element e) {
  return make_error(ErrorCode::InvalidArgument,
                    path.str() + ": expected " + expected + ", got " + std::string(element_type_name(e)));
}

Error duplicate_key(const Path& path, std::string_view key) {
  return make_error(ErrorCode::InvalidArgument, path.str() + ": duplicate key \"" + std::string(key) + "\"");
}

// Guards one key of an object against a second occurrence (inline: it runs for every key read).
inline Status once(bool& seen, const Path& path, std::string_view key) {
  if (seen) [[unlikely]]
    return duplicate_key(path, key);
  seen = true;
  return {};
}

Result<std::string_view> as_string(element e, const Path& path) {
  std::string_view s;
  if (e.get_string().get(s) != simdjson::SUCCESS) return type_error(path, "a string", e);
  return s;
}

Result<bool> as_bool(element e, const Path& path) {
  bool b = false;
  if (e.get_bool().get(b) != simdjson::SUCCESS) return type_error(path, "a boolean", e);
  return b;
}

// A map of string values; `pick` sees each entry. null counts as absent (returns false).
template <class Pick>
Result<bool> read_string_map(element e, const Path& path, Pick&& pick) {
  if (e.is_null()) return false;
  object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS) return type_error(path, "a map", e);
  for (auto field : obj) {
    ERDMA_TRY_ASSIGN(auto v, as_string(field.value, child(path, field.key)));
    ERDMA_TRY(pick(field.key, v));
  }
  return true;
}

Result<QuantitySign> read_quantity(element e, const Path& path) {
  switch (e.type()) {
    case element_type::STRING: {
      auto q = quantity_sign(e.get_string().value_unsafe());
      if (!q) return make_error(ErrorCode::InvalidArgument, path.str() + ": " + q.error().message);
      return q;
    }
    case element_type::INT64: {
      const int64_t v = e.get_int64().value_unsafe();
      return v > 0 ? QuantitySign::Positive : v == 0 ? QuantitySign::Zero : QuantitySign::Negative;
    }
    case element_type::UINT64: return e.get_uint64().value_unsafe() > 0 ? QuantitySign::Positive : QuantitySign::Zero;
    case element_type::DOUBLE: {
      const double v = e.get_double().value_unsafe();
      return v > 0 ? QuantitySign::Positive : v == 0 ? QuantitySign::Zero : QuantitySign::Negative;
    }
    default: return type_error(path, "a quantity (string or number)", e);
  }
}

// Reads resources.limits / resources.requests: every value must be a quantity; notes ours.
Result<bool> read_resource_list(element e, const Path& path, const ResourceNames& resource_name, ContainerView& c,
                                bool& seen_here) {
  if (e.is_null()) return false;
  object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS) return type_error(path, "a map of quantities", e);
  bool seen = false, seen_smcr = false;
  for (auto field : obj) {
    if (field.key == resource_name.erdma) {
      ERDMA_TRY(once(seen, path, field.key));
      ERDMA_TRY_ASSIGN(auto q, read_quantity(field.value, child(path, field.key)));
      c.resource_listed = true;
      if (q == QuantitySign::Positive) c.resource_positive = true;
      seen_here = true;
    } else if (!resource_name.smcr.empty() && field.key == resource_name.smcr) {
      ERDMA_TRY(once(seen_smcr, path, field.key));
      ERDMA_TRY_ASSIGN(auto q, read_quantity(field.value, child(path, field.key)));
      c.smcr_listed = true;
      if (q == QuantitySign::Positive) c.smcr_positive = true;
    }
  }
  return true;
}

Status read_resources(element e, const Path& path, const ResourceNames& resource_name, ContainerView& c) {
  if (e.is_null()) return {};
  object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS) return type_error(path, "a map", e);
  c.has_resources = true;
  bool seen_limits = false, seen_requests = false;
  for (auto field : obj) {
    if (field.key == "limits") {
      if (auto s = once(seen_limits, path, field.key); !s) return s;
      ERDMA_TRY_ASSIGN(auto r,
                       read_resource_list(field.value, child(path, "limits"), resource_name, c, c.resource_in_limits));
      c.has_limits = r;
    } else if (field.key == "requests") {
      if (auto s = once(seen_requests, path, field.key); !s) return s;
      ERDMA_TRY(read_resource_list(field.value, child(path, "requests"), resource_name, c, c.resource_in_requests));
    }
  }
  return {};
}

Status read_env(element e, const Path& path, ContainerView& c) {
  if (e.is_null()) return {};
  array arr;
  if (e.get_array().get(arr) != simdjson::SUCCESS) return type_error(path, "a list", e);
  c.has_env = true;
  c.env.reserve(arr.size());
  size_t i = 0;
  for (element item : arr) {
    const Path ip = index(path, i++);
    object obj;
    if (item.get_object().get(obj) != simdjson::SUCCESS) return type_error(ip, "a map", item);
    EnvEntryView entry;
    bool seen_name = false, seen_value = false, seen_from = false;
    for (auto field : obj) {
      if (field.key == "name") {
        if (auto s = once(seen_name, ip, field.key); !s) return s;
        ERDMA_TRY_ASSIGN(auto v, as_string(field.value, child(ip, "name")));
        entry.name = v;
      } else if (field.key == "value") {
        if (auto s = once(seen_value, ip, field.key); !s) return s;
        if (field.value.is_null()) continue;
        ERDMA_TRY_ASSIGN(auto v, as_string(field.value, child(ip, "value")));
        entry.has_value = true;
        entry.value = v;
      } else if (field.key == "valueFrom") {
        if (auto s = once(seen_from, ip, field.key); !s) return s;
        entry.has_value_from = !field.value.is_null();
      }
    }
    if (!seen_name) return make_error(ErrorCode::InvalidArgument, child(ip, "name").str() + ": required");
    c.env.push_back(entry);
  }
  return {};
}

Status read_mounts(element e, const Path& path, ContainerView& c) {
  if (e.is_null()) return {};
  array arr;
  if (e.get_array().get(arr) != simdjson::SUCCESS) return type_error(path, "a list", e);
  c.has_mounts = true;
  c.mounts.reserve(arr.size());
  size_t i = 0;
  for (element item : arr) {
    const Path ip = index(path, i++);
    object obj;
    if (item.get_object().get(obj) != simdjson::SUCCESS) return type_error(ip, "a map", item);
    MountView m;
    bool seen_name = false, seen_path = false;
    for (auto field : obj) {
      if (field.key == "name") {
        if (auto s = once(seen_name, ip, field.key); !s) return s;
        ERDMA_TRY_ASSIGN(auto v, as_string(field.value, child(ip, "name")));
        m.name = v;
      } else if (field.key == "mountPath") {
        if (auto s = once(seen_path, ip, field.key); !s) return s;
        ERDMA_TRY_ASSIGN(auto v, as_string(field.value, child(ip, "mountPath")));
        m.mount_path = v;
      }
    }
    c.mounts.push_back(m);
  }
  return {};
}

Status read_container(element e, const Path& path, const ResourceNames& resource_name, ContainerView& c) {
  object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS) return type_error(path, "a map", e);
  bool seen_name = false, seen_env = false, seen_from = false, seen_mounts = false, seen_res = false;
  for (auto field : obj) {
    const std::string_view k = field.key;
    if (k == "name") {
      if (auto s = once(seen_name, path, k); !s) return s;
      ERDMA_TRY_ASSIGN(auto v, as_string(field.value, child(path, k)));
      c.name = v;
    } else if (k == "env") {
      if (auto s = once(seen_env, path, k); !s) return s;
      if (auto s = read_env(field.value, child(path, k), c); !s) return s;
    } else if (k == "envFrom") {
      if (auto s = once(seen_from, path, k); !s) return s;
      if (field.value.is_null()) continue;
      array arr;
      if (field.value.get_array().get(arr) != simdjson::SUCCESS)
        return type_error(child(path, k), "a list", field.value);
      c.has_env_from = arr.begin() != arr.end();
    } else if (k == "volumeMounts") {
      if (auto s = once(seen_mounts, path, k); !s) return s;
      if (auto s = read_mounts(field.value, child(path, k), c); !s) return s;
    } else if (k == "resources") {
      if (auto s = once(seen_res, path, k); !s) return s;
      if (auto s = read_resources(field.value, child(path, k), resource_name, c); !s) return s;
    }
  }
  return {};
}

Status read_container_list(element e, const Path& path, ContainerList list, const ResourceNames& resource_name,
                           PodView& pod) {
  if (e.is_null()) return {};
  array arr;
  if (e.get_array().get(arr) != simdjson::SUCCESS) return type_error(path, "a list", e);
  if (pod.containers.size() + arr.size() > kMaxContainers) {
    return make_error(ErrorCode::InvalidArgument,
                      path.str() + ": " + std::to_string(pod.containers.size() + arr.size()) +
                          " containers and init containers; erdma-webhook mutates pods of at most " +
                          std::to_string(kMaxContainers));
  }
  pod.containers.reserve(pod.containers.size() + arr.size());
  size_t i = 0;
  for (element item : arr) {
    ContainerView c;
    c.list = list;
    c.index = i;
    if (auto s = read_container(item, index(path, i), resource_name, c); !s) return s;
    pod.containers.push_back(std::move(c));
    ++i;
  }
  if (list == ContainerList::Init) pod.init_count = i;
  return {};
}

Status read_volumes(element e, const Path& path, PodView& pod) {
  if (e.is_null()) return {};
  array arr;
  if (e.get_array().get(arr) != simdjson::SUCCESS) return type_error(path, "a list", e);
  pod.has_volumes = true;
  pod.volumes.reserve(arr.size());
  size_t i = 0;
  for (element item : arr) {
    const Path ip = index(path, i++);
    object obj;
    if (item.get_object().get(obj) != simdjson::SUCCESS) return type_error(ip, "a map", item);
    VolumeView v;
    bool seen_name = false, seen_host = false;
    for (auto field : obj) {
      if (field.key == "name") {
        if (auto s = once(seen_name, ip, field.key); !s) return s;
        ERDMA_TRY_ASSIGN(auto n, as_string(field.value, child(ip, "name")));
        v.name = n;
      } else if (field.key == "hostPath") {
        if (auto s = once(seen_host, ip, field.key); !s) return s;
        if (field.value.is_null()) continue;
        object hp;
        if (field.value.get_object().get(hp) != simdjson::SUCCESS) {
          return type_error(child(ip, "hostPath"), "a map", field.value);
        }
        v.is_host_path = true;
        bool seen_path = false;
        for (auto f : hp) {
          if (f.key != "path") continue;
          if (auto s = once(seen_path, child(ip, "hostPath"), f.key); !s) return s;
          ERDMA_TRY_ASSIGN(auto p, as_string(f.value, child(child(ip, "hostPath"), "path")));
          v.host_path = p;
        }
      }
    }
    pod.volumes.push_back(v);
  }
  return {};
}

Status read_metadata(element e, PodView& pod) {
  const Path path{nullptr, "metadata", 0};
  if (e.is_null()) return {};
  object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS) return type_error(path, "a map", e);
  pod.has_metadata = true;
  bool seen_name = false, seen_gen = false, seen_ns = false, seen_ann = false;
  for (auto field : obj) {
    const std::string_view k = field.key;
    if (k == "name" || k == "generateName" || k == "namespace") {
      bool& seen = k == "name" ? seen_name : k == "generateName" ? seen_gen : seen_ns;
      if (auto s = once(seen, path, k); !s) return s;
      if (field.value.is_null()) continue;
      ERDMA_TRY_ASSIGN(auto v, as_string(field.value, child(path, k)));
      (k == "name" ? pod.name : k == "generateName" ? pod.generate_name : pod.namespace_name) = v;
    } else if (k == "annotations") {
      if (auto s = once(seen_ann, path, k); !s) return s;
      // Keys of a JSON object from the apiserver are unique, but a hand-made review may repeat one.
      bool seen_smcr = false, seen_inject = false, seen_injected = false, seen_warnings = false, seen_mirror = false,
           seen_added = false;
      const Path ap = child(path, k);
      size_t bytes = 0;
      ERDMA_TRY_ASSIGN(
          auto r, read_string_map(field.value, ap, [&](std::string_view key, std::string_view value) -> Status {
            bytes += key.size() + value.size();
            if (bytes > kMaxAnnotationBytes) [[unlikely]] {
              return make_error(ErrorCode::InvalidArgument,
                                ap.str() + ": Too long: must have at most " + std::to_string(kMaxAnnotationBytes) +
                                    " bytes, keys and values together (the apiserver refuses such a pod too)");
            }
            if (key == kSmcrAnnotation) {
              if (auto s = once(seen_smcr, ap, key); !s) return s;
              pod.smcr_annotation = value;
            } else if (key == kInjectAnnotation) {
              if (auto s = once(seen_inject, ap, key); !s) return s;
              pod.inject_annotation = value;
            } else if (key == kInjectedAnnotation) {
              if (auto s = once(seen_injected, ap, key); !s) return s;
              pod.injected_annotation = value;
            } else if (key == kWarningsAnnotation) {
              if (auto s = once(seen_warnings, ap, key); !s) return s;
              pod.warnings_annotation = value;
            } else if (key == kResourceAddedAnnotation) {
              if (auto s = once(seen_added, ap, key); !s) return s;
              pod.resource_added_annotation = value;
            } else if (key == kMirrorAnnotation) {
              if (auto s = once(seen_mirror, ap, key); !s) return s;
              pod.is_mirror = true;
            }
            return {};
          }));
      pod.has_annotations = r;
    }
  }
  return {};
}

// spec.os: {name: linux|windows}; the apiserver allows only those two names.
Status read_os(element e, const Path& path, PodView& pod) {
  if (e.is_null()) return {};
  object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS) return type_error(path, "a map", e);
  bool seen_name = false;
  for (auto field : obj) {
    if (field.key != "name") continue;
    if (auto s = once(seen_name, path, field.key); !s) return s;
    ERDMA_TRY_ASSIGN(auto v, as_string(field.value, child(path, "name")));
    if (v == "windows") pod.windows_by = "spec.os.name";
  }
  return {};
}

Status read_spec(element e, const ResourceNames& resource_name, PodView& pod) {
  const Path path{nullptr, "spec", 0};
  if (e.is_null()) return {};
  object obj;
  if (e.get_object().get(obj) != simdjson::SUCCESS) return type_error(path, "a map", e);
  bool seen_init = false, seen_main = false, seen_vol = false, seen_hn = false, seen_os = false, seen_ns = false;
  // Init containers come first in the view whatever the key order in the document.
  element init_list, main_list;
  for (auto field : obj) {
    const std::string_view k = field.key;
    if (k == "initContainers") {
      if (auto s = once(seen_init, path, k); !s) return s;
      init_list = field.value;
    } else if (k == "containers") {
      if (auto s = once(seen_main, path, k); !s) return s;
      main_list = field.value;
    } else if (k == "volumes") {
      if (auto s = once(seen_vol, path, k); !s) return s;
      if (auto s = read_volumes(field.value, child(path, k), pod); !s) return s;
    } else if (k == "os") {
      if (auto s = once(seen_os, path, k); !s) return s;
      if (auto s = read_os(field.value, child(path, k), pod); !s) return s;
    } else if (k == "nodeSelector") {
      if (auto s = once(seen_ns, path, k); !s) return s;
      ERDMA_TRY(
          read_string_map(field.value, child(path, k), [&](std::string_view key, std::string_view value) -> Status {
            if (key == "kubernetes.io/os" && value == "windows" && pod.windows_by.empty())
              pod.windows_by = "spec.nodeSelector";
            return {};
          }));
    } else if (k == "hostNetwork") {
      if (auto s = once(seen_hn, path, k); !s) return s;
      if (field.value.is_null()) continue;
      // Not needed by the rules (hostNetwork pods are mutated like any other), only checked: a
      // wrong type here is a malformed pod.
      ERDMA_TRY(as_bool(field.value, child(path, k)));
    }
  }
  if (seen_init) {
    if (auto s = read_container_list(init_list, child(path, "initContainers"), ContainerList::Init, resource_name, pod);
        !s) {
      return s;
    }
  }
  if (seen_main) {
    if (auto s = read_container_list(main_list, child(path, "containers"), ContainerList::Main, resource_name, pod);
        !s) {
      return s;
    }
  }
  return {};
}

}  // namespace

std::string_view element_type_name(element e) noexcept {
  switch (e.type()) {
    case element_type::ARRAY: return "list";
    case element_type::OBJECT: return "map";
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE: return "number";
    case element_type::STRING: return "string";
    case element_type::BOOL: return "boolean";
    case element_type::NULL_VALUE: return "null";
  }
  return "unknown";
}

PodRef PodView::ref(std::string_view request_namespace) const {
  constexpr size_t kMaxPart = 253;
  PodRef out;
  out.namespace_ = common::cut_for_message(request_namespace.empty() ? namespace_name : request_namespace, kMaxPart);
  if (out.namespace_.empty()) out.namespace_ = "default";
  if (!name.empty()) {
    out.name = common::cut_for_message(name, kMaxPart);
  } else if (!generate_name.empty()) {
    out.name = common::cut_for_message(generate_name, kMaxPart) + '*';
  } else {
    out.name = "<unnamed>";
  }
  return out;
}

Result<PodView> read_pod(element pod, const ResourceNames& resource_name) {
  PodView view;
  object obj;
  if (pod.get_object().get(obj) != simdjson::SUCCESS) {
    return type_error(Path{nullptr, "object", 0}, "a Pod (a map)", pod);
  }
  const Path root{nullptr, "object", 0};
  bool seen_meta = false, seen_spec = false;
  for (auto field : obj) {
    if (field.key == "metadata") {
      ERDMA_TRY(once(seen_meta, root, field.key));
      ERDMA_TRY(read_metadata(field.value, view));
    } else if (field.key == "spec") {
      ERDMA_TRY(once(seen_spec, root, field.key));
      ERDMA_TRY(read_spec(field.value, resource_name, view));
    }
  }
  return view;
}

}  // namespace erdma::webhook
