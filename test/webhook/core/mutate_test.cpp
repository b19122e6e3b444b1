// Tests for webhook/core/mutate.hpp beyond the golden cases: helpers, big pods, limits.
#include "webhook/core/mutate.hpp"

#include <doctest/doctest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/json_pointer.hpp"

using namespace erdma;
using namespace erdma::webhook;
using nlohmann::json;

namespace {

struct Run {
  Result<Mutation> mutation;
  json patched;
};

// The NCCL presets operators set for nodes without erdma-agent's device plugin, so eRDMA
// containers get something to inject (the defaults inject no NCCL env).
const Config& preset_config() {
  static const Config c = [] {
    auto r = Config::load(
        json{{"erdmaEnv",
              {{{"name", "NCCL_IB_HCA"}, {"value", "erdma"}}, {{"name", "NCCL_IB_GID_INDEX"}, {"value", "1"}}}}});
    REQUIRE(r.ok());
    return *r;
  }();
  return c;
}

// Parses `pod`, mutates it and applies the patch with nlohmann (an independent implementation).
Run run(const json& pod, const Config& cfg = preset_config(), std::string_view ns = "team-a") {
  simdjson::dom::parser parser;
  const std::string text = pod.dump();
  simdjson::dom::element el = parser.parse(text);
  auto m = mutate(el, NamespaceInfo{ns}, cfg);
  json patched = pod;
  if (m.ok() && !m->ops.empty()) {
    std::string patch;
    append_patch_json(patch, m->ops);
    patched = pod.patch(json::parse(patch));
  }
  return Run{std::move(m), std::move(patched)};
}

json container(const std::string& name, bool erdma) {
  json c = {{"name", name}, {"image", "img:1"}};
  if (erdma) c["resources"] = {{"limits", {{"aliyun/erdma", "1"}}}};
  return c;
}

}  // namespace

TEST_CASE("JSON Pointer tokens escape '~' before '/'") {
  using erdma::common::escape_pointer_token;
  CHECK(escape_pointer_token("aliyun/erdma") == "aliyun~1erdma");
  CHECK(escape_pointer_token("a~b") == "a~0b");
  CHECK(escape_pointer_token("~/") == "~0~1");
  CHECK(escape_pointer_token("~1") == "~01");
  CHECK(escape_pointer_token("") == "");
  // nlohmann agrees on what the escaped token points to.
  const json doc = {{"a/b~c", 1}};
  CHECK(doc.at(json::json_pointer("/" + escape_pointer_token("a/b~c"))) == 1);
}

TEST_CASE("LD_PRELOAD splits like ld.so and merges without duplicates") {
  CHECK(split_ld_preload("") == std::vector<std::string_view>{});
  CHECK(split_ld_preload("/a.so") == std::vector<std::string_view>{"/a.so"});
  CHECK(split_ld_preload("/a.so:/b.so /c.so") == std::vector<std::string_view>{"/a.so", "/b.so", "/c.so"});
  CHECK(split_ld_preload("::/a.so  :") == std::vector<std::string_view>{"/a.so"});

  struct Case {
    const char* value;
    const char* want;
  };
  const char* lib = "/usr/lib/smc/libsmc-preload.so";
  for (const Case& c :
       {Case{"", "/usr/lib/smc/libsmc-preload.so"}, Case{" : ", "/usr/lib/smc/libsmc-preload.so"},
        Case{"/a.so", "/a.so:/usr/lib/smc/libsmc-preload.so"}, Case{"/a.so:", "/a.so:/usr/lib/smc/libsmc-preload.so"},
        Case{"/a.so ", "/a.so /usr/lib/smc/libsmc-preload.so"},
        Case{"/usr/lib/smc/libsmc-preload.so", "/usr/lib/smc/libsmc-preload.so"},
        Case{"/a.so /usr/lib/smc/libsmc-preload.so:/b.so", "/a.so /usr/lib/smc/libsmc-preload.so:/b.so"},
        Case{"/usr/lib/smc/libsmc-preload.so.1", "/usr/lib/smc/libsmc-preload.so.1:/usr/lib/smc/libsmc-preload.so"}}) {
    CAPTURE(c.value);
    CHECK(merge_ld_preload(c.value, lib) == c.want);
  }
}

Config host_path_config() {
  auto c =
      Config::load(json{{"smcr", {{"libraryFrom", "hostPath"}}}, {"erdmaEnv", preset_config().to_json()["erdmaEnv"]}});
  REQUIRE(c.ok());
  return *c;
}

json huge_pod() {
  json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata", {{"name", "huge"}, {"annotations", {{"network.alibabacloud.com/erdma-smcr", "true"}}}}}};
  for (int i = 0; i < 1000; ++i) {
    pod["spec"]["containers"].push_back(container("c" + std::to_string(i), i % 2 == 0));
    pod["spec"]["initContainers"].push_back(container("i" + std::to_string(i), false));
  }
  return pod;
}

TEST_CASE("a pod with 1000 containers and 1000 init containers mutates correctly and idempotently (devicePlugin)") {
  const json pod = huge_pod();
  Run first = run(pod);
  REQUIRE(first.mutation.ok());
  CHECK(first.mutation->decision == Decision::Mutated);
  // 3 annotations (marker, resource-added, warnings) + per container: env, and the resource for
  // the 500 without one. Init containers hold no resource, so no file and no LD_PRELOAD.
  CHECK(first.mutation->ops.size() == 3 + 1000 + 500);
  const json& spec = first.patched["spec"];
  CHECK_FALSE(spec.contains("volumes"));
  for (int i = 0; i < 1000; ++i) {
    const json& c = spec["containers"][static_cast<size_t>(i)];
    CHECK_FALSE(c.contains("volumeMounts"));
    const bool erdma = i % 2 == 0;
    // The containers that asked for eRDMA keep it; the others get the library-only resource.
    CHECK(c["resources"]["limits"][erdma ? "aliyun/erdma" : "aliyun/erdma-smcr"] == "1");
    CHECK(c["resources"]["limits"].size() == 1);
    CHECK(c["env"].size() == (erdma ? 3u : 1u));
    CHECK(c["env"].back()["name"] == "LD_PRELOAD");
    CHECK_FALSE(spec["initContainers"][static_cast<size_t>(i)].contains("env"));
  }
  const std::string added = first.patched["metadata"]["annotations"]["network.alibabacloud.com/erdma-resource-added"];
  CHECK(added.rfind("c1,c3,c5,", 0) == 0);
  CHECK(std::count(added.begin(), added.end(), ',') == 499);
  Run second = run(first.patched);
  REQUIRE(second.mutation.ok());
  CHECK(second.mutation->decision == Decision::Unchanged);
  CHECK(second.mutation->ops.empty());
}

TEST_CASE("a pod with 1000 containers and 1000 init containers mutates correctly and idempotently (hostPath)") {
  const Config cfg = host_path_config();
  Run first = run(huge_pod(), cfg);
  REQUIRE(first.mutation.ok());
  CHECK(first.mutation->decision == Decision::Mutated);
  // annotation + volumes + per init container (env, mounts) + per container (env, mounts).
  CHECK(first.mutation->ops.size() == 1 + 1 + 2 * 1000 + 2 * 1000);
  const json& spec = first.patched["spec"];
  for (int i = 0; i < 1000; ++i) {
    const json& c = spec["containers"][static_cast<size_t>(i)];
    CHECK(c["volumeMounts"][0]["name"] == "erdma-smc-preload");
    const bool erdma = i % 2 == 0;
    CHECK(c["env"].size() == (erdma ? 3u : 1u));
  }
  Run second = run(first.patched, cfg);
  REQUIRE(second.mutation.ok());
  CHECK(second.mutation->decision == Decision::Unchanged);
  CHECK(second.mutation->ops.empty());
}

TEST_CASE("with devicePlugin, exactly the containers holding the resource get LD_PRELOAD") {
  // An eRDMA container, one asking for 0, one the webhook gives a slot, one init container the
  // user gave the resource, one init container without.
  const json pod = json::parse(R"({"metadata":{"name":"p","annotations":{"network.alibabacloud.com/erdma-smcr":"true"}},
    "spec":{"initContainers":[{"name":"i-dev","resources":{"limits":{"aliyun/erdma":"1"}}},{"name":"i-plain"}],
            "containers":[{"name":"nccl","resources":{"limits":{"aliyun/erdma":"2"}}},
                          {"name":"zero","resources":{"limits":{"aliyun/erdma":"0"}}},{"name":"web"}]}})");
  Run r = run(pod);
  REQUIRE(r.mutation.ok());
  auto has_preload = [](const json& c) {
    if (!c.contains("env")) return false;
    return std::any_of(c["env"].begin(), c["env"].end(), [](const json& e) { return e["name"] == "LD_PRELOAD"; });
  };
  const json& spec = r.patched["spec"];
  CHECK(has_preload(spec["initContainers"][0]));
  CHECK_FALSE(has_preload(spec["initContainers"][1]));
  CHECK(has_preload(spec["containers"][0]));
  CHECK_FALSE(has_preload(spec["containers"][1]));
  CHECK(has_preload(spec["containers"][2]));
  CHECK(spec["containers"][1]["resources"]["limits"]["aliyun/erdma"] == "0");
  CHECK(spec["containers"][2]["resources"]["limits"]["aliyun/erdma-smcr"] == "1");
  CHECK_FALSE(spec["containers"][2]["resources"]["limits"].contains("aliyun/erdma"));  // no RDMA device for SMC-R
  const json& ann = r.patched["metadata"]["annotations"];
  CHECK(ann["network.alibabacloud.com/erdma-resource-added"] == "web");
  CHECK(ann["network.alibabacloud.com/erdma-injected"] == "erdma-env,smcr-preload,smcr-preload-partial,erdma-resource");
  // The container the webhook gave a slot gets no NCCL env, now or on a second pass.
  CHECK(spec["containers"][2]["env"].size() == 1);
  Run again = run(r.patched);
  REQUIRE(again.mutation.ok());
  CHECK(again.mutation->ops.empty());
}

TEST_CASE("warnings are capped, the last one counting what was left out") {
  json pod = {{"metadata", {{"name", "many"}}}};
  for (int i = 0; i < 40; ++i) {
    json c = container("c" + std::to_string(i), true);
    c["envFrom"] = json::array({{{"configMapRef", {{"name", "x"}}}}});
    pod["spec"]["containers"].push_back(c);
  }
  Run r = run(pod);
  REQUIRE(r.mutation.ok());
  REQUIRE(r.mutation->warnings.size() == kMaxWarnings);
  CHECK(r.mutation->warnings.back() == "... and 25 more warnings");
}

TEST_CASE("init containers come first whatever the key order, and paths use the right list") {
  const json pod = json::parse(R"({"metadata":{"name":"p","annotations":{"network.alibabacloud.com/erdma-smcr":"true"}},
    "spec":{"containers":[{"name":"app"}],"initContainers":[{"name":"init"}]}})");
  Run r = run(pod);
  REQUIRE(r.mutation.ok());
  // The SMC-R slot goes to the first regular container: kubelet's PodResources (where the agent
  // finds the pod) does not report init containers.
  CHECK(r.patched["spec"]["containers"][0]["resources"]["limits"]["aliyun/erdma-smcr"] == "1");
  CHECK_FALSE(r.patched["spec"]["initContainers"][0].contains("resources"));
  // Without the resource the init container gets no library, so no LD_PRELOAD either ...
  CHECK_FALSE(r.patched["spec"]["initContainers"][0].contains("env"));
  // ... unless the library comes from a hostPath volume.
  Run h = run(pod, host_path_config());
  REQUIRE(h.mutation.ok());
  CHECK(h.patched["spec"]["initContainers"][0]["env"][0]["name"] == "LD_PRELOAD");
  CHECK(h.patched["spec"]["initContainers"][0]["volumeMounts"][0]["name"] == "erdma-smc-preload");
}

TEST_CASE("a pod without metadata gets the whole metadata map") {
  const json pod =
      json::parse(R"({"spec":{"containers":[{"name":"app","resources":{"limits":{"aliyun/erdma":"1"}}}]}})");
  Run r = run(pod);
  REQUIRE(r.mutation.ok());
  CHECK(r.patched["metadata"]["annotations"]["network.alibabacloud.com/erdma-injected"] == "erdma-env");
}

TEST_CASE("the request namespace wins over metadata.namespace for exclusion") {
  json pod = json::parse(R"({"metadata":{"name":"p","namespace":"team-a"},
    "spec":{"containers":[{"name":"app","resources":{"limits":{"aliyun/erdma":"1"}}}]}})");
  Run excluded = run(pod, preset_config(), "kube-system");
  REQUIRE(excluded.mutation.ok());
  CHECK(excluded.mutation->decision == Decision::Skipped);
  Run from_meta = run(pod, preset_config(), "");
  REQUIRE(from_meta.mutation.ok());
  CHECK(from_meta.mutation->decision == Decision::Mutated);
  CHECK(from_meta.mutation->pod.display() == "team-a/p");
  CHECK(from_meta.mutation->pod.namespace_ == "team-a");
}

TEST_CASE("not a pod object, and errors name the pod and the field") {
  simdjson::dom::parser parser;
  for (const char* text : {"[]", "\"pod\"", "42", "null"}) {
    CAPTURE(text);
    simdjson::dom::element el = parser.parse(std::string_view(text));
    auto m = mutate(el, NamespaceInfo{"ns"}, Config::defaults());
    REQUIRE_FALSE(m.ok());
    CHECK(m.error().message.find("expected a Pod (a map)") != std::string::npos);
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"metadata":{"name":"x"},"spec":{"containers":[{"name":"a","env":[{"value":"v"}]}]}})",
       "pod ns/x: spec.containers[0].env[0].name: required"},
      {R"({"metadata":{"name":"x"},"spec":{"containers":[{"name":"a","env":[{"name":5}]}]}})",
       "pod ns/x: spec.containers[0].env[0].name: expected a string, got number"},
      {R"({"metadata":{"name":"x"},"spec":{"initContainers":[{"name":"a","volumeMounts":[{"name":"v","mountPath":7}]}],"containers":[]}})",
       "pod ns/x: spec.initContainers[0].volumeMounts[0].mountPath: expected a string, got number"},
      {R"({"metadata":{"name":"x"},"spec":{"containers":[{"name":"a","resources":{"limits":[]}}]}})",
       "pod ns/x: spec.containers[0].resources.limits: expected a map of quantities, got list"},
      {R"({"metadata":{"name":"x"},"spec":{"containers":[{"name":"a","resources":{"requests":{"aliyun/erdma":true}}}]}})",
       "pod ns/x: spec.containers[0].resources.requests.aliyun/erdma: expected a quantity (string or number), got boolean"},
      {R"({"metadata":{"name":"x"},"spec":{"volumes":[{"name":"v","hostPath":"/x"}],"containers":[]}})",
       "pod ns/x: spec.volumes[0].hostPath: expected a map, got string"},
      {R"({"metadata":{"name":"x","annotations":["a"]},"spec":{}})",
       "pod ns/x: metadata.annotations: expected a map, got list"},
      {R"({"metadata":{"name":"x"},"spec":[]})", "pod ns/x: spec: expected a map, got list"},
      {R"({"metadata":"x"})", "pod ns/<unnamed>: metadata: expected a map, got string"},
      {R"({"metadata":{"name":"x"},"metadata":{"name":"y"}})", "pod ns/x: object: duplicate key \"metadata\""},
  };
  for (const auto& entry : cases) {
    // Named copies, not structured bindings: clang 14 cannot capture those.
    const auto& text = entry.first;
    const auto& want = entry.second;
    CAPTURE(text);
    simdjson::dom::element el = parser.parse(text);
    auto m = mutate(el, NamespaceInfo{"ns"}, Config::defaults());
    REQUIRE_FALSE(m.ok());
    CHECK(m.error().message == want);
  }
}

TEST_CASE("mutate is deterministic") {
  const json pod = json::parse(R"({"metadata":{"name":"p","annotations":{"network.alibabacloud.com/erdma-smcr":"true"}},
    "spec":{"containers":[{"name":"a"},{"name":"b","resources":{"limits":{"aliyun/erdma":"2"}}}]}})");
  Run a = run(pod), b = run(pod);
  REQUIRE(a.mutation.ok());
  REQUIRE(b.mutation.ok());
  std::string pa, pb;
  append_patch_json(pa, a.mutation->ops);
  append_patch_json(pb, b.mutation->ops);
  CHECK(pa == pb);
  CHECK(a.mutation->warnings == b.mutation->warnings);
}

TEST_CASE("the warnings annotation: merged, cut, bounded, and stable when computed again") {
  CHECK(warnings_annotation_value(std::nullopt, {}).empty());
  CHECK(warnings_annotation_value(std::nullopt, {"a", "b", "a"}) == "a\nb");
  CHECK(warnings_annotation_value(std::string_view("old\nb"), {"b", "new"}) == "old\nb\nnew");
  CHECK(warnings_annotation_value(std::nullopt, {"tab\there\x01"}) == "tab here ");
  // A long line is cut at a character boundary (the euro sign is 3 bytes).
  std::string long_line(kMaxWarningLineBytes - 4, 'x');
  long_line += "\xe2\x82\xac\xe2\x82\xac";
  const std::string cut = warnings_annotation_value(std::nullopt, {long_line});
  CHECK(cut.size() <= kMaxWarningLineBytes);
  CHECK(cut.ends_with("x..."));
  // Too many lines: the note is last, and a second pass over the result (with or without the
  // warnings again) keeps it exactly.
  std::vector<std::string> many;
  for (int i = 0; i < 40; ++i) many.push_back("warning " + std::to_string(i));
  const std::string v = warnings_annotation_value(std::nullopt, many);
  CHECK(v.size() <= kMaxWarningsAnnotationBytes);
  CHECK(v.ends_with(kWarningsLeftOut));
  CHECK(std::count(v.begin(), v.end(), '\n') == static_cast<long>(kMaxWarnings) - 1);
  CHECK(warnings_annotation_value(std::string_view(v), many) == v);
  CHECK(warnings_annotation_value(std::string_view(v), {}) == v);
  // Too many bytes.
  std::vector<std::string> wide(12, std::string(200, 'w'));
  for (size_t i = 0; i < wide.size(); ++i) wide[i] += std::to_string(i);
  const std::string w = warnings_annotation_value(std::nullopt, wide);
  CHECK(w.size() <= kMaxWarningsAnnotationBytes);
  CHECK(w.ends_with(kWarningsLeftOut));
  CHECK(warnings_annotation_value(std::string_view(w), wide) == w);
}
