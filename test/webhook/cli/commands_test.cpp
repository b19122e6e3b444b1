// Tests for the offline CLI: manifest expansion, output formats, exit statuses, the examples.
#include "webhook/cli/commands.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/structured.hpp"
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

struct TempFile {
  fs::path path;
  explicit TempFile(const std::string& content, const std::string& name = "input.yaml") {
    path = fs::temp_directory_path() / ("erdma-cli-test-" + std::to_string(::getpid())) / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path) << content;
  }
  ~TempFile() { fs::remove_all(path.parent_path()); }
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
)", "t.yaml");
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

TEST_CASE("documents that hold no pod are errors naming the document") {
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"kind: Service\nmetadata: {name: s}\n", "document 1: kind \"Service\" holds no pod"},
           {"kind: Pod\n---\n- 1\n- 2\n", "document 2: expected a Kubernetes object (a map), got list"},
           {"kind: Deployment\nmetadata: {name: d}\nspec: {}\n", "document 1 (Deployment d): has no spec.template"},
           {"kind: CronJob\nmetadata: {name: c}\nspec: {jobTemplate: {}}\n",
            "document 1 (CronJob c): has no spec.jobTemplate.spec.template"},
       }) {
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
  const CliRun patch = mutate_cli({"-f", f.path.string()});
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
  CHECK(mutated["spec"]["containers"][0]["env"][2] == json({{"name", "LD_PRELOAD"}, {"value", "/usr/lib/smc/libsmc-preload.so"}}));
  CHECK(mutated["metadata"]["namespace"] == "default");
  CHECK(patch.err.find("Warning: added aliyun/erdma: 1 to container \"app\"") != std::string::npos);
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
  TempFile refused(R"({"kind":"Pod","metadata":{"name":"p","annotations":{"network.alibabacloud.com/erdma-smcr":"true"}},
                       "spec":{"volumes":[{"name":"erdma-smc-preload","emptyDir":{}}],"containers":[{"name":"a"}]}})",
                   "refused.json");
  const std::vector<Case> cases = {
      {{}, kExitUsage, "error: -f FILE is required"},
      {{"-f"}, kExitUsage, "error: flag -f needs a value"},
      {{"--bogus", "x"}, kExitUsage, "error: unknown flag --bogus"},
      {{"-f", good.path.string(), "extra"}, kExitUsage, "error: unexpected argument extra"},
      {{"-f", good.path.string(), "-o", "yaml"}, kExitUsage, "error: -o must be patch, review, pod or request"},
      {{"-f", "/nonexistent/pod.yaml"}, kExitUsage, "error: /nonexistent/pod.yaml: cannot open"},
      {{"-f", bad_yaml.path.string()}, kExitUsage, "error: "},
      {{"-f", good.path.string(), "--config", bad_cfg.path.string()}, kExitUsage, "error: "},
      {{"-f", refused.path.string()}, kExitDenied, "Pod default/p: rejected: pod default/p: volume"},
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
  const CliRun refused_run = mutate_cli({"-f", refused.path.string(), "-o", "review"});
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
  CHECK(has(env, "NCCL_IB_HCA", "erdma"));
  CHECK(has(env, "NCCL_IB_GID_INDEX", "1"));
  CHECK(has(env, "NCCL_SOCKET_IFNAME", "eth0"));  // the user's own value stays
  CHECK(nccl.err.find("uses envFrom") != std::string::npos);

  const CliRun smcr = mutate_cli({"-f", kExamples + "smcr-deployment.yaml", "-o", "pod"});
  REQUIRE(smcr.status == kExitOk);
  const json spod = json::parse(smcr.out);
  CHECK(spod["spec"]["initContainers"][0]["resources"]["limits"]["aliyun/erdma"] == "1");
  CHECK(has(spod["spec"]["containers"][0]["env"], "LD_PRELOAD", "/usr/lib/smc/libsmc-preload.so"));
  CHECK(has(spod["spec"]["containers"][1]["env"], "LD_PRELOAD",
            "/usr/lib/libjemalloc.so.2:/usr/lib/smc/libsmc-preload.so"));
  CHECK(spod["spec"]["volumes"][0]["name"] == "erdma-smc-preload");

  const CliRun mixed = mutate_cli({"-f", kExamples + "mixed-pods.yaml"});
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
