// A small, typed view of the parts of a Pod the mutation rules read, taken from a simdjson DOM
// without copying: string_views point into the parser's buffers and live as long as the document.
// Everything not listed here is never read and never rewritten.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "common/result.hpp"

namespace erdma::webhook {

// Limits on sizes the pod's author controls, checked while reading, before any work per item
// (the apiserver validates a pod only after the mutating webhooks, so its own limits do not
// protect the webhook):
// - the bytes of all annotations, keys and values together: the apiserver's limit, so a pod over
//   it is refused here with the apiserver's words instead of after the webhook's work;
// - containers and init containers together: Kubernetes sets no number, but a pod that large is
//   an attack on the webhook, not a workload (each one costs patch operations and memory).
inline constexpr size_t kMaxAnnotationBytes = 256 * 1024;
inline constexpr size_t kMaxContainers = 4096;

struct EnvEntryView {
  std::string_view name;
  bool has_value = false;  // "value" key present (possibly "")
  std::string_view value;
  bool has_value_from = false;
};

struct MountView {
  std::string_view name;
  std::string_view mount_path;
};

struct VolumeView {
  std::string_view name;
  bool is_host_path = false;
  std::string_view host_path;
};

enum class ContainerList { Init, Main };

struct ContainerView {
  ContainerList list = ContainerList::Main;
  size_t index = 0;  // position in its list
  std::string_view name;
  bool has_env = false;  // "env" is a (possibly empty) list
  std::vector<EnvEntryView> env;
  bool has_env_from = false;  // "envFrom" is a non-empty list
  bool has_mounts = false;    // "volumeMounts" is a list
  std::vector<MountView> mounts;
  bool has_resources = false;         // "resources" is a map
  bool has_limits = false;            // "resources.limits" is a map
  bool resource_listed = false;       // the eRDMA resource appears in limits or requests
  bool resource_positive = false;     // ... with a quantity above zero in either
  bool resource_in_limits = false;    // the eRDMA resource appears in limits
  bool resource_in_requests = false;  // ... in requests
  bool smcr_listed = false;           // the SMC-R resource (smcr.resourceName) appears in limits or requests
  bool smcr_positive = false;         // ... with a quantity above zero in either
};

// The resources read_pod notes per container: the eRDMA resource (resourceName) and the SMC-R
// resource the webhook gives SMC-R containers (smcr.resourceName; empty = none).
struct ResourceNames {
  std::string_view erdma;
  std::string_view smcr;
};

// The pod a review is about, each part cut after 253 bytes (the longest name the apiserver
// accepts): for log fields, and "namespace/name" in messages.
struct PodRef {
  std::string namespace_;
  std::string name;  // "prefix-*" for a generateName pod, "<unnamed>" without either
  [[nodiscard]] std::string display() const { return namespace_ + "/" + name; }
};

struct PodView {
  bool has_metadata = false;
  bool has_annotations = false;
  std::string_view name;
  std::string_view generate_name;
  std::string_view namespace_name;
  // The annotations the rules read; nullopt when absent.
  std::optional<std::string_view> smcr_annotation;
  std::optional<std::string_view> inject_annotation;
  std::optional<std::string_view> injected_annotation;
  std::optional<std::string_view> warnings_annotation;
  std::optional<std::string_view> resource_added_annotation;
  bool is_mirror = false;

  // Where the pod says it runs on Windows: "spec.os.name" or "spec.nodeSelector" (the
  // kubernetes.io/os label); empty for a Linux (or unspecified) pod.
  std::string_view windows_by;
  bool has_volumes = false;
  std::vector<VolumeView> volumes;
  std::vector<ContainerView> containers;  // init containers first, then containers, in order
  size_t init_count = 0;

  // Which pod this is (see PodRef): the request's namespace, else metadata.namespace, else
  // "default"; the name, else the generateName prefix with '*'.
  [[nodiscard]] PodRef ref(std::string_view request_namespace) const;
};

// Reads `pod` into a PodView, checking the type of every field it touches. `resource_name` is the
// extended resource that marks an eRDMA container. Errors are InvalidArgument with a JSON path:
// `spec.containers[1].env[0].name: expected a string, got number`.
[[nodiscard]] Result<PodView> read_pod(simdjson::dom::element pod, const ResourceNames& resource_name);

// "string", "number", "object", ... for messages.
[[nodiscard]] std::string_view element_type_name(simdjson::dom::element e) noexcept;

}  // namespace erdma::webhook
