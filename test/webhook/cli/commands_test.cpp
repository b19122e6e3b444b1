// Tests for the offline CLI: manifest expansion, output formats, exit statuses, the examples.
#include "webhook/cli/commands.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/structured.hpp"
#include "test/support.hpp"
#include "webhook/cli/kube_yaml.hpp"
#include "webhook/cli/preview.hpp"

namespace fs = std::filesystem;
using namespace erdma;
using namespace erdma::webhook;
using nlohmann::json;

namespace {

struct CliRun {
  int status;
  std::string out;
  std::string err;
};

CliRun mutate_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int status = run_mutate(args, out, err);
  return {status, out.str(), err.str()};
}

// stdout holds one pretty JSON document per input; split them.
std::vector<json> json_stream(const std::string& text) {
  std::vector<json> docs;
  std::istringstream in(text);
  std::string buf, line;
  int depth = 0;
  while (std::getline(in, line)) {
    buf += line + "\n";
    for (char c : line) {
      depth += (c == '{' || c == '[') ? 1 : (c == '}' || c == ']') ? -1 : 0;
    }
    if (depth == 0 && !buf.empty()) {
      docs.push_back(json::parse(buf));
      buf.clear();
    }
  }
  return docs;
}

// One file in a directory of its own, removed with it.
struct TempFile {
  erdma::testing::TempDir dir{"cli-test"};
  fs::path path;
  explicit TempFile(const std::string& content, const std::string& name = "input.yaml") : path(dir.file(name)) {
    dir.write(name, content);
  }
};

const std::string kExamples = std::string(ERDMA_SOURCE_DIR) + "/examples/";

}  // namespace

TEST_CASE("workloads expand to the pod their controller would create") {
  auto docs = common::parse_documents(R"(
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: ml}
spec:
  schedule: "0 0 * * *"
  jobTemplate:
    spec:
      template:
        metadata: {labels: {a: b}}
        spec: {containers: [{name: c, image: x}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec: {template: {spec: {containers: [{name: c, image: x}]}}}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: p1}, spec: {containers: []}}
)",
                                      "t.yaml");
  REQUIRE(docs.ok());
  auto inputs = preview_inputs(*docs, "");
  REQUIRE(inputs.ok());
  REQUIRE(inputs->size() == 3);
  CHECK((*inputs)[0].label == "CronJob ml/nightly (pod template)");
  CHECK((*inputs)[0].pod["metadata"]["generateName"] == "nightly-");
  CHECK((*inputs)[0].pod["metadata"]["namespace"] == "ml");
  CHECK((*inputs)[0].pod["metadata"]["labels"]["a"] == "b");
  CHECK((*inputs)[1].pod["metadata"]["name"] == "db-0");
  CHECK((*inputs)[1].pod["metadata"]["namespace"] == "default");
  CHECK((*inputs)[2].label == "Pod default/p1");
  const json review = json::parse((*inputs)[0].review_body);
  CHECK(review["request"]["operation"] == "CREATE");
  CHECK(review["request"]["namespace"] == "ml");
  CHECK(review["request"]["object"] == (*inputs)[0].pod);

  auto overridden = preview_inputs(*docs, "other");
  REQUIRE(overridden.ok());
  CHECK((*overridden)[0].pod["metadata"]["namespace"] == "other");
}

TEST_CASE("documents that are not objects or lack their pod template are errors naming the document") {
  for (const auto& entry : std::vector<std::pair<std::string, std::string>>{
           {"kind: Service\nmetadata: {name: s}\n", "no pods in the input"},
           {"kind: Pod\n---\n- 1\n- 2\n", "document 2: expected a Kubernetes object (a map), got list"},
           {"kind: Deployment\nmetadata: {name: d}\nspec: {}\n", "document 1 (Deployment d): has no spec.template"},
           {"kind: CronJob\nmetadata: {name: c}\nspec: {jobTemplate: {}}\n",
            "document 1 (CronJob c): has no spec.jobTemplate.spec.template"},
       }) {
    // Named copies, not structured bindings: clang 14 cannot capture those.
    const auto& text = entry.first;
    const auto& want = entry.second;
    CAPTURE(text);
    auto docs = common::parse_documents(text, "t.yaml");
    REQUIRE(docs.ok());
    auto inputs = preview_inputs(*docs, "");
    REQUIRE_FALSE(inputs.ok());
    CHECK(inputs.error().message.rfind(want, 0) == 0);
  }
  auto none = preview_inputs({}, "");
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().message == "no documents in the input");
}

TEST_CASE("mutate -o patch|review|pod print consistent results") {
  TempFile f(R"(
apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations: {network.alibabacloud.com/erdma-smcr: "true"}
spec:
  containers: [{name: app, image: nginx}]
)");
  const CliRun patch = mutate_cli({"-f", f.path.string(), "-o", "patch"});
  REQUIRE(patch.status == kExitOk);
  const CliRun review = mutate_cli({"-f", f.path.string(), "-o", "review", "-n", "team-a"});
  REQUIRE(review.status == kExitOk);
  const CliRun pod = mutate_cli({"--filename=" + f.path.string(), "--output=pod"});
  REQUIRE(pod.status == kExitOk);

  const json p = json::parse(patch.out);
  CHECK(p.is_array());
  CHECK(p.size() > 3);
  const json r = json::parse(review.out);
  CHECK(r["response"]["allowed"] == true);
  CHECK(r["response"]["patchType"] == "JSONPatch");
  const json mutated = json::parse(pod.out);
  CHECK(mutated["spec"]["containers"][0]["env"][0] ==
        json({{"name", "LD_PRELOAD"}, {"value", "/usr/lib/smc/libsmc-preload.so"}}));
  CHECK(mutated["metadata"]["namespace"] == "default");
  CHECK(patch.err.find("Warning: added aliyun/erdma-smcr: 1 to container \"app\"") != std::string::npos);
  CHECK(patch.err.find("Pod default/web: mutated") != std::string::npos);
}

TEST_CASE("mutate -o request prints one AdmissionReview request per line, as the apiserver sends it") {
  TempFile f(R"(
apiVersion: v1
kind: Pod
metadata: {name: a, namespace: team-a}
spec: {containers: [{name: app, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b, namespace: team-a}
spec: {containers: [{name: app, image: nginx}]}
)");
  const CliRun run = mutate_cli({"-f", f.path.string(), "-o", "request"});
  REQUIRE(run.status == kExitOk);
  std::istringstream lines(run.out);
  std::vector<json> reviews;
  for (std::string line; std::getline(lines, line);) reviews.push_back(json::parse(line));
  REQUIRE(reviews.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CAPTURE(i);
    CHECK(reviews[i]["apiVersion"] == "admission.k8s.io/v1");
    CHECK(reviews[i]["kind"] == "AdmissionReview");
    CHECK(reviews[i]["request"]["operation"] == "CREATE");
    CHECK(reviews[i]["request"]["object"]["metadata"]["name"] == (i == 0 ? "a" : "b"));
    CHECK_FALSE(reviews[i].contains("response"));
  }
}

TEST_CASE("bad flags and bad input exit 2 with one error line - a refused pod exits 1") {
  TempFile good("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a}]}\n");
  struct Case {
    std::vector<std::string> args;
    int status;
    const char* err;
  };
  TempFile bad_yaml("kind: Pod\nmetadata: [unclosed\n", "bad.yaml");
  TempFile bad_cfg("smcr: {mountPath: lib}\n", "cfg.yaml");
  // With the library from a hostPath volume, a pod volume of that name with another source is
  // refused (by default the library comes in the device plugin's answer and nothing conflicts).
  TempFile host_path_cfg("smcr: {libraryFrom: hostPath}\n", "host-path.yaml");
  TempFile refused(
      R"({"kind":"Pod","metadata":{"name":"p","annotations":{"network.alibabacloud.com/erdma-smcr":"true"}},
                       "spec":{"volumes":[{"name":"erdma-smc-preload","emptyDir":{}}],"containers":[{"name":"a"}]}})",
      "refused.json");
  const std::vector<Case> cases = {
      {{}, kExitUsage, "error: -f FILE is required"},
      {{"-f"}, kExitUsage, "error: flag -f needs a value"},
      {{"--bogus", "x"}, kExitUsage, "error: unknown flag --bogus"},
      {{"-f", good.path.string(), "extra"}, kExitUsage, "error: unexpected argument extra"},
      {{"-f", good.path.string(), "-o", "xml"},
       kExitUsage,
       "error: -o must be yaml, json, patch, review, pod or request"},
      {{"-f", "/nonexistent/pod.yaml"}, kExitUsage, "error: /nonexistent/pod.yaml: cannot open"},
      {{"-f", bad_yaml.path.string()}, kExitUsage, "error: "},
      {{"-f", good.path.string(), "--config", bad_cfg.path.string()}, kExitUsage, "error: "},
      {{"-f", refused.path.string(), "--config", host_path_cfg.path.string()},
       kExitDenied,
       "Pod default/p: rejected: pod default/p: volume"},
      {{"-f", refused.path.string()}, kExitOk, ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args.size() > 1 ? c.args[1] : std::string());
    const CliRun r = mutate_cli(c.args);
    CHECK(r.status == c.status);
    CAPTURE(r.err);
    CHECK(r.err.rfind(c.err, 0) == 0);
  }
  const CliRun cfg_err = mutate_cli({"-f", good.path.string(), "--config", bad_cfg.path.string()});
  CHECK(cfg_err.err.find("cfg.yaml: smcr.mountPath: must be an absolute path") != std::string::npos);
  const CliRun refused_run =
      mutate_cli({"-f", refused.path.string(), "-o", "review", "--config", host_path_cfg.path.string()});
  CHECK(json::parse(refused_run.out)["response"]["allowed"] == false);
  CHECK(refused_run.err.find("rejected: pod default/p: volume \"erdma-smc-preload\" already exists") !=
        std::string::npos);
}

TEST_CASE("the examples the demo shows mutate as documented") {
  const CliRun nccl = mutate_cli({"-f", kExamples + "nccl-statefulset.yaml", "-o", "pod"});
  REQUIRE(nccl.status == kExitOk);
  const json pod = json::parse(nccl.out);
  const json& env = pod["spec"]["containers"][0]["env"];
  auto has = [&](const json& list, const std::string& name, const std::string& value) {
    for (const auto& e : list) {
      if (e["name"] == name && e.value("value", "") == value) return true;
    }
    return false;
  };
  // No NCCL env from the webhook by default: the agent's Allocate answer names the devices and
  // their GID index, and a pod-spec value would shadow it.
  for (const auto& e : env) CHECK(e["name"] != "NCCL_IB_HCA");
  for (const auto& e : env) CHECK(e["name"] != "NCCL_IB_GID_INDEX");
  CHECK(has(env, "NCCL_SOCKET_IFNAME", "eth0"));  // the user's own value stays
  CHECK(nccl.err.find(": unchanged (nothing is configured to inject)") != std::string::npos);

  const CliRun smcr = mutate_cli({"-f", kExamples + "smcr-deployment.yaml", "-o", "pod"});
  REQUIRE(smcr.status == kExitOk);
  const json spod = json::parse(smcr.out);
  CHECK(spod["spec"]["containers"][0]["resources"]["limits"]["aliyun/erdma-smcr"] == "1");
  CHECK_FALSE(spod["spec"]["initContainers"][0].contains("resources"));
  CHECK(has(spod["spec"]["containers"][0]["env"], "LD_PRELOAD", "/usr/lib/smc/libsmc-preload.so"));
  CHECK(has(spod["spec"]["containers"][1]["env"], "LD_PRELOAD", "/usr/lib/smc/libsmc-preload.so"));
  // Both regular containers (the server and its smcss sidecar) hold the resource (the library
  // comes in its Allocate answer), the init container gets nothing, and the spec has no hostPath.
  // (A container's own LD_PRELOAD kept in front: testdata/smcr-existing-ld-preload.)
  CHECK(spod["spec"]["containers"][1]["resources"]["limits"]["aliyun/erdma-smcr"] == "1");
  CHECK_FALSE(spod["spec"]["initContainers"][0].contains("env"));
  CHECK_FALSE(spod["spec"].contains("volumes"));

  const CliRun mixed = mutate_cli({"-f", kExamples + "mixed-pods.yaml", "-o", "patch"});
  REQUIRE(mixed.status == kExitOk);
  CHECK(json_stream(mixed.out).size() == 3);
  CHECK(mixed.err.find("Pod team-a/typo: skipped") != std::string::npos);
  CHECK(mixed.err.find("Pod team-a/opted-out: skipped") != std::string::npos);
  CHECK(mixed.err.find("Pod ml-training/host-network-nccl: mutated") != std::string::npos);

  for (const auto& entry : fs::directory_iterator(kExamples)) {
    if (!entry.is_regular_file() || entry.path().extension() != ".yaml") continue;  // examples/agent/ is not pods
    CAPTURE(entry.path().string());
    CHECK(mutate_cli({"-f", entry.path().string()}).status == kExitOk);
  }
}

TEST_CASE("config prints the effective configuration") {
  std::ostringstream out, err;
  CHECK(run_config({}, out, err) == kExitOk);
  const json cfg = json::parse(out.str());
  CHECK(cfg["resourceName"] == "aliyun/erdma");
  CHECK(cfg["smcr"]["mountPath"] == "/usr/lib/smc");
  std::ostringstream out2, err2;
  CHECK(run_config({"--config", "/nonexistent.yaml"}, out2, err2) == kExitUsage);
  CHECK(err2.str().rfind("error: /nonexistent.yaml: cannot open", 0) == 0);
}

TEST_CASE("plain scalars resolve as kubectl (sigs.k8s.io/yaml over go-yaml v2, YAML 1.1) reads them") {
  struct Case {
    const char* in;
    json want;
  };
  const std::vector<Case> cases = {
      {"yes", true},
      {"Yes", true},
      {"on", true},
      {"ON", true},
      {"y", true},
      {"true", true},
      {"no", false},
      {"off", false},
      {"N", false},
      {"FALSE", false},
      {"", nullptr},
      {"~", nullptr},
      {"null", nullptr},
      {"Null", nullptr},
      {"1", 1},
      {"-7", -7},
      {"+3", 3},
      {"1_000", 1000},
      {"0x1F", 31},
      {"0o17", 15},
      {"0777", 511},
      {"0b101", 5},
      {"-0b11", -3},
      {"08", 8.0},
      {"1.5", 1.5},
      {"1e3", 1000.0},
      {".5", 0.5},
      {"-1.", -1.0},
      {"18446744073709551615", 18446744073709551615ull},
      {"2001-12-14", "2001-12-14"},  // timestamps stay text when decoded into interface{}
      {"yess", "yes"
               "s"},
      {"True!", "True!"},
      {"1.2.3", "1.2.3"},
      {"0x", "0x"},
      {".inf", ".inf"},
      {"-", "-"},
      {"1Gi", "1Gi"},
      {"500m", "500m"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    const json got = common::resolve_plain_scalar(c.in, common::YamlSchema::Kubectl);
    CHECK(got == c.want);
    CHECK(got.type() == c.want.type());
  }
}

TEST_CASE("manifests parse as kubectl parses them: 1.1 booleans, merge keys, non-string keys; clear errors") {
  auto docs = parse_kube_manifests(R"(
base: &base {a: 1, b: two}
m:
  <<: *base
  b: three
on: x
1: one
quoted: "yes"
single: 'on'
tagged: !!str 010
list: [yes, "no", 0x10]
---
---
second: doc
)",
                                   "t.yaml");
  REQUIRE_OK(docs);
  REQUIRE(docs->size() == 2);
  const json& d = (*docs)[0];
  CHECK(d["m"] == json({{"a", 1}, {"b", "three"}}));
  CHECK(d["true"] == "x");  // the key "on" is the boolean true, which becomes the key "true"
  CHECK(d["1"] == "one");
  CHECK(d["quoted"] == "yes");
  CHECK(d["single"] == "on");
  CHECK(d["tagged"] == "010");
  CHECK(d["list"] == json::array({true, "no", 16}));
  CHECK((*docs)[1] == json({{"second", "doc"}}));

  for (const auto& tc : std::vector<std::pair<std::string, std::string>>{
           {"a: .inf\n", "t.yaml:1:4: \".inf\" reads as a float with no JSON form"},
           {"a: 1\na: 2\n", "t.yaml:2:1: duplicate key \"a\""},
           {"1.5: x\n", "t.yaml:1:1: map key 1.5 is a number"},
           {"~: x\n", "t.yaml:1:1: map key null is a null"},
           {"a: !!binary aGk=\n", "unsupported YAML tag"},
           {"a: !!int x\n", "does not match its tag"},
           {"a: [\n", "invalid YAML"},
       }) {
    const auto& text = tc.first;  // plain variables: clang 14 cannot capture bindings
    const auto& want = tc.second;
    CAPTURE(text);
    auto r = parse_kube_manifests(text, "t.yaml");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find(want) != std::string::npos);
  }
  // JSON input is JSON.
  auto j = parse_kube_manifests(R"({"kind":"Pod","metadata":{"annotations":{"x":"yes"}}})", "t.json");
  REQUIRE(j.ok());
  CHECK((*j)[0]["metadata"]["annotations"]["x"] == "yes");
}

TEST_CASE("the YAML writer quotes every string a YAML 1.1 or 1.2 reader would take for another type") {
  json doc = json::object();
  const std::vector<std::string> strings = {"yes",    "no",     "on",         "off",           "y",
                                            "n",      "true",   "True",       "null",          "~",
                                            "",       "1",      "0x1F",       "0o17",          "0777",
                                            "1_000",  "1e3",    ".5",         ".inf",          ".nan",
                                            "<<",     "=",      "2001-12-14", "a: b",          "# not a comment",
                                            "- item", "  lead", "trail  ",    "multi\nline\n", "tab\there",
                                            "üñí",    "[x]",    "{y}",        "@at",           "`tick",
                                            "%pct",   "!bang",  "&amp",       "*star",         "|pipe",
                                            ">gt",    "'q'",    "\"dq\""};
  for (size_t i = 0; i < strings.size(); ++i) {
    doc["k" + std::to_string(i)] = strings[i];
    doc[strings[i].empty() ? std::string("empty-key-not-allowed") : strings[i]] = i;  // as keys, too
  }
  doc["numbers"] = json::array({1, -2, 1.5, 1e300, 18446744073709551615ull});
  doc["bools"] = json::array({true, false});
  doc["nothing"] = nullptr;
  doc["empty"] = {{"map", json::object()}, {"list", json::array()}};
  const std::vector<json> docs = {doc, json({{"kind", "Service"}})};
  auto yaml = to_yaml_stream(docs);
  REQUIRE(yaml.ok());
  CAPTURE(*yaml);
  CHECK(yaml->rfind("---", 0) == 0);
  auto kube = parse_kube_manifests(*yaml, "out.yaml");
  REQUIRE_OK(kube);
  CHECK(*kube == docs);
  auto core = common::parse_documents(*yaml, "out.yaml");
  REQUIRE_OK(core);
  CHECK(*core == docs);
}

namespace {

// The pod template (or pod) of a mutated document.
const json& pod_of(const json& doc) {
  const std::string kind = doc["kind"];
  if (kind == "Pod") return doc;
  if (kind == "CronJob") return doc["spec"]["jobTemplate"]["spec"]["template"];
  return doc["spec"]["template"];
}

bool has_env(const json& container, const std::string& name) {
  if (!container.contains("env")) return false;
  for (const auto& e : container["env"]) {
    if (e["name"] == name) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("mutate -o yaml mutates Pods and every workload's pod template, passes other objects through") {
  const std::string smcr_template = R"(
      metadata:
        labels: {app: web}
        annotations: {network.alibabacloud.com/erdma-smcr: "true"}
      spec:
        containers: [{name: app, image: nginx}])";
  const std::string text = R"(apiVersion: v1
kind: Pod
metadata: {name: p, annotations: {network.alibabacloud.com/erdma-smcr: "true"}}
spec: {containers: [{name: app, image: nginx}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: team-a}
spec:
  selector: {matchLabels: {app: web}}
  template:)" + smcr_template +
                           R"(
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: s}
spec:
  serviceName: s
  template:)" + smcr_template +
                           R"(
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds}
spec:
  template:)" + smcr_template +
                           R"(
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs}
spec:
  template:)" + smcr_template +
                           R"(
---
apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  template:)" + smcr_template +
                           R"(
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: cj}
spec:
  schedule: "@hourly"
  jobTemplate:
    spec:
      template:)" + R"(
          metadata:
            annotations: {network.alibabacloud.com/erdma-smcr: "true"}
          spec:
            containers: [{name: app, image: nginx}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: team-a}
spec: {ports: [{port: 80, targetPort: "on"}]}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: vc}
spec: {tasks: [{name: t, template: {spec: {containers: [{name: c}]}}}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg}
data: {enabled: "yes", count: "1"}
)";
  TempFile f(text);
  const CliRun yaml = mutate_cli({"-f", f.path.string()});
  REQUIRE(yaml.status == kExitOk);
  CAPTURE(yaml.err);
  const CliRun js = mutate_cli({"-f", f.path.string(), "-o", "json"});
  REQUIRE(js.status == kExitOk);

  auto in = parse_kube_manifests(text, "in.yaml");
  REQUIRE(in.ok());
  auto out = parse_kube_manifests(yaml.out, "out.yaml");
  REQUIRE_OK(out);
  auto out_core = common::parse_documents(yaml.out, "out.yaml");
  REQUIRE(out_core.ok());
  CHECK(*out_core == *out);  // no scalar a YAML 1.2 reader would read differently
  const json list = json::parse(js.out);
  CHECK(list["kind"] == "List");
  REQUIRE(list["items"].size() == in->size());
  REQUIRE(out->size() == in->size());
  CHECK(json(*out) == list["items"]);

  for (size_t i = 0; i < 7; ++i) {
    const json& doc = (*out)[i];
    CAPTURE(doc["kind"].get<std::string>());
    const json& pod = pod_of(doc);
    CHECK(has_env(pod["spec"]["containers"][0], "LD_PRELOAD"));
    CHECK_FALSE(pod["spec"].contains("volumes"));
    CHECK(pod["spec"]["containers"][0]["resources"]["limits"]["aliyun/erdma-smcr"] == "1");
    CHECK(pod["metadata"]["annotations"]["network.alibabacloud.com/erdma-injected"] == "smcr-preload,erdma-resource");
    CHECK(pod["metadata"]["annotations"].contains("network.alibabacloud.com/erdma-warnings"));
    // The preview's made-up metadata does not leak into the manifest.
    if (i > 0) {
      CHECK_FALSE(pod["metadata"].contains("namespace"));
      CHECK_FALSE(pod["metadata"].contains("name"));
      CHECK_FALSE(pod["metadata"].contains("generateName"));
    }
    // Everything outside the pod (template) is as written.
    json outside = doc, outside_in = (*in)[i];
    if (doc["kind"] == "Pod") {
      outside.erase("spec");
      outside_in.erase("spec");
      outside["metadata"].erase("annotations");
      outside_in["metadata"].erase("annotations");
    } else {
      json::json_pointer p(doc["kind"] == "CronJob" ? "/spec/jobTemplate/spec/template" : "/spec/template");
      outside[p] = nullptr;
      outside_in[p] = nullptr;
    }
    CHECK(outside == outside_in);
  }
  CHECK((*out)[0]["metadata"].contains("namespace") == false);
  CHECK(pod_of((*out)[1])["metadata"]["labels"]["app"] == "web");
  for (size_t i = 7; i < in->size(); ++i) CHECK((*out)[i] == (*in)[i]);
  CHECK((*out)[7]["spec"]["ports"][0]["targetPort"] == "on");
  CHECK(yaml.err.find("Service team-a/web: passed through (holds no pod)") != std::string::npos);
  CHECK(yaml.err.find("Job default/vc: passed through") != std::string::npos);
  CHECK(yaml.err.find("CronJob default/cj (pod template): mutated") != std::string::npos);

  // One document stays one object in -o json.
  TempFile one("apiVersion: v1\nkind: Service\nmetadata: {name: s}\n", "one.yaml");
  const CliRun single = mutate_cli({"-f", one.path.string(), "-o", "json"});
  REQUIRE(single.status == kExitOk);
  CHECK(json::parse(single.out) == json({{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", {{"name", "s"}}}}));
  // Feeding the output back changes nothing more.
  TempFile again(yaml.out, "again.yaml");
  const CliRun second = mutate_cli({"-f", again.path.string()});
  REQUIRE(second.status == kExitOk);
  CHECK(second.out == yaml.out);
}

TEST_CASE("string fields that YAML typed otherwise are refused as the apiserver would, naming the field") {
  struct Case {
    const char* text;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, env: [{name: NUM, value: 1}]}]}\n",
       "document 1 (Pod default/p): spec.containers[0].env[0].value is the number 1 (kubectl reads unquoted numbers as "
       "numbers); the apiserver refuses the object because the field is a string: quote the value"},
      {"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    metadata:\n      "
       "annotations: {network.alibabacloud.com/erdma-smcr: yes}\n    spec: {containers: [{name: a}]}\n",
       "document 1 (Deployment default/d (pod template)): spec.template.metadata.annotations."
       "network.alibabacloud.com/erdma-smcr is the boolean true (kubectl reads unquoted true/false/yes/no/on/off/y/n "
       "as booleans)"},
      {"kind: Pod\nmetadata: {name: p, labels: {tier: on}}\nspec: {containers: [{name: a}]}\n",
       "metadata.labels.tier is the boolean true"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, args: [--n, 8]}]}\n",
       "spec.containers[0].args[1] is the number 8"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    TempFile f(c.text);
    const CliRun r = mutate_cli({"-f", f.path.string()});
    CHECK(r.status == kExitUsage);
    CHECK(r.err.find(c.want) != std::string::npos);
    CHECK(r.out.empty());
  }
  // kubectl reads an unquoted N (or y, on, ...) as a boolean, even as an env name.
  TempFile n("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: a, env: [{name: N, value: x}]}]}\n");
  const CliRun nr = mutate_cli({"-f", n.path.string()});
  CHECK(nr.status == kExitUsage);
  CHECK(nr.err.find("spec.containers[0].env[0].name is the boolean false") != std::string::npos);
  // Quoted, the same manifests are fine.
  TempFile ok("kind: Pod\nmetadata: {name: p, labels: {tier: \"on\"}}\n"
              "spec: {containers: [{name: a, env: [{name: NUM, value: \"1\"}]}]}\n");
  CHECK(mutate_cli({"-f", ok.path.string()}).status == kExitOk);
}
