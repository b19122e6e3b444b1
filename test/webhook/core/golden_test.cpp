// Golden mutations: every directory under test/webhook/testdata/ is one case.
//
//   pod.json | review.json   input: a Pod (sent as a CREATE review in its metadata.namespace,
//                            else "default") or a whole AdmissionReview
//   config.json | config.yaml   optional webhook configuration
//   want_outcome.txt         mutated | unchanged | skipped | rejected | invalid
//   want.json                the pod after applying the patch (not for rejected/invalid)
//   want_warnings.txt        the warnings, one per line (present iff there are warnings)
//   want_error.txt           the error message (rejected/invalid only)
//
// Each case also checks the response envelope, that the patch applies with an independent JSON
// Patch implementation (nlohmann's), that it only touches paths the webhook owns, and that
// mutating the result again yields no operations. UPDATE_GOLDEN=1 rewrites the want_* files.
#include "webhook/core/admission.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/structured.hpp"
#include "common/text.hpp"
#include "pod_security.hpp"
#include "test/support.hpp"
#include "webhook/core/names.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace erdma;
using namespace erdma::webhook;

namespace {

const fs::path kCases = fs::path(ERDMA_SOURCE_DIR) / "test/webhook/testdata";

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const fs::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << s;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

bool update_golden() {
  const char* v = std::getenv("UPDATE_GOLDEN");
  return v != nullptr && std::string(v) == "1";
}

json review_for_pod(const json& pod) {
  std::string ns = "default";
  if (pod.contains("metadata") && pod["metadata"].is_object() && pod["metadata"].contains("namespace") &&
      pod["metadata"]["namespace"].is_string()) {
    ns = pod["metadata"]["namespace"].get<std::string>();
  }
  std::string name;
  if (pod.contains("metadata") && pod["metadata"].is_object() && pod["metadata"].contains("name") &&
      pod["metadata"]["name"].is_string()) {
    name = pod["metadata"]["name"].get<std::string>();
  }
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"request",
           {{"uid", "golden-0001"},
            {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
            {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "pods"}}},
            {"operation", "CREATE"},
            {"namespace", ns},
            {"name", name},
            {"object", pod}}}};
}

// hostPath volumes of `pod` by name -> path.
std::map<std::string, std::string> host_path_volumes(const json& pod) {
  std::map<std::string, std::string> out;
  if (!pod.contains("spec") || !pod["spec"].is_object() || !pod["spec"].contains("volumes")) return out;
  for (const auto& v : pod["spec"]["volumes"]) {
    if (v.contains("hostPath") && v["hostPath"].is_object()) {
      out[v.value("name", "")] = v["hostPath"].value("path", "");
    }
  }
  return out;
}

// The Pod Security Standards rules a hostPath volume breaks. Only configurations that ask for one
// (smcr.libraryFrom: hostPath, deviceMounts) may bring them; by default the preload library
// comes through the device plugin and a mutated pod breaks no rule its input kept.
const std::set<std::string> kKnownHostPathViolations = {"baseline:hostPathVolumes", "restricted:volumeTypes"};

// Rules newly violated by the mutation, per case, for the summary printed after the run.
std::map<std::string, std::set<std::string>>& new_violations_by_case() {
  static std::map<std::string, std::set<std::string>> m;
  return m;
}

// The mutation adds no hostPath volume except the preload volume (with smcr.libraryFrom: hostPath)
// and the configured device mounts, and no Pod Security Standards violation except what those
// volumes bring.
void check_security(const std::string& name, const json& pod, const json& mutated, const Config& cfg) {
  const auto before = host_path_volumes(pod);
  const auto after = host_path_volumes(mutated);
  bool added_host_path = false;
  for (const auto& entry : after) {
    // plain variables: clang 14 cannot capture structured bindings (INFO captures them)
    const std::string& vol = entry.first;
    const std::string& path = entry.second;
    if (before.count(vol) == 1) continue;
    added_host_path = true;
    bool known = cfg.smcr().library_from == LibraryFrom::HostPath && vol == kPreloadVolumeName &&
                 path == cfg.smcr().preload_host_dir;
    for (const auto& m : cfg.device_mounts()) known = known || (vol == m.name && path == m.host_path);
    INFO("hostPath volume added: ", vol, " -> ", path);
    CHECK(known);
  }
  const auto was = test::pod_security_violations(pod);
  const auto now = test::pod_security_violations(mutated);
  std::set<std::string> added;
  std::set_difference(now.begin(), now.end(), was.begin(), was.end(), std::inserter(added, added.end()));
  std::set<std::string> want;
  if (added_host_path) {
    std::set_difference(kKnownHostPathViolations.begin(), kKnownHostPathViolations.end(), was.begin(), was.end(),
                        std::inserter(want, want.end()));
  }
  std::string shown;
  for (const auto& a : added) shown += a + " ";
  INFO("Pod Security Standards rules the mutation newly violates: ", shown);
  CHECK(added == want);
  new_violations_by_case()[name] = added;
}

// Paths the webhook may write: its annotation, volumes, and per container env, volumeMounts and
// the resources that hold limits. Anything else would be a bug.
bool owned_path(const std::string& path) {
  static const std::regex re(
      R"(^/metadata(/annotations(/network\.alibabacloud\.com~1erdma-(injected|warnings|resource-added))?)?$)"
      R"(|^/spec/volumes(/-)?$)"
      R"(|^/spec/(initContainers|containers)/[0-9]+/(env(/-|/[0-9]+/value)?|volumeMounts(/-)?|resources(/limits(/[^/]+)?)?)$)");
  return std::regex_match(path, re);
}

void run_case(const fs::path& dir) {
  new_violations_by_case()[dir.filename().string()];
  const std::set<std::string> allowed = {"pod.json",          "review.json",      "config.json",
                                         "config.yaml",       "want_outcome.txt", "want.json",
                                         "want_warnings.txt", "want_error.txt",   "README.md"};
  for (const auto& entry : fs::directory_iterator(dir)) {
    INFO("unexpected file in a golden case: ", entry.path().string());
    CHECK(allowed.count(entry.path().filename().string()) == 1);
  }
  const bool has_pod = fs::exists(dir / "pod.json");
  const bool has_review = fs::exists(dir / "review.json");
  REQUIRE_MESSAGE(has_pod != has_review, "a case needs exactly one of pod.json and review.json");

  // Config.
  Config cfg = Config::defaults();
  for (const char* name : {"config.json", "config.yaml"}) {
    if (!fs::exists(dir / name)) continue;
    auto doc = common::parse_document(slurp(dir / name), name);
    REQUIRE_OK(doc);
    auto loaded = Config::load(*doc);
    REQUIRE_OK(loaded);
    cfg = *loaded;
  }

  // Input.
  std::string body;
  json pod;
  if (has_pod) {
    pod = json::parse(slurp(dir / "pod.json"));
    body = review_for_pod(pod).dump();
  } else {
    body = slurp(dir / "review.json");
    const json review = json::parse(body, nullptr, false);
    if (!review.is_discarded() && review.is_object() && review.contains("request") && review["request"].is_object() &&
        review["request"].contains("object")) {
      pod = review["request"]["object"];
    }
  }

  Reviewer reviewer;
  const ReviewResult r = reviewer.review(body, cfg);
  const std::string outcome(to_string(r.outcome));
  const bool failed = r.outcome == Outcome::Rejected || r.outcome == Outcome::Invalid;

  // Envelope checks that hold for every answer.
  if (r.outcome == Outcome::Invalid) {
    CHECK(r.body.empty());
  } else {
    const json resp = json::parse(r.body);
    const json req = json::parse(body);
    CHECK(resp["apiVersion"] == req["apiVersion"]);
    CHECK(resp["kind"] == "AdmissionReview");
    CHECK(resp["response"]["uid"] == req["request"]["uid"]);
    CHECK(resp["response"]["allowed"] == (r.outcome != Outcome::Rejected));
    CHECK(resp["response"].contains("patch") == (!r.ops.empty()));
    CHECK(resp["response"].contains("patchType") == (!r.ops.empty()));
    if (!r.ops.empty()) {
      CHECK(resp["response"]["patchType"] == "JSONPatch");
      const auto decoded = common::base64_decode(resp["response"]["patch"].get<std::string>());
      REQUIRE(decoded.has_value());
      CHECK(*decoded == r.patch);
    }
    if (!r.warnings.empty()) CHECK(resp["response"]["warnings"] == json(r.warnings));
  }

  json mutated = pod;
  if (!failed) {
    const json patch = r.patch.empty() ? json::array() : json::parse(r.patch);
    CHECK(patch.size() == r.ops.size());
    for (const auto& op : patch) {
      INFO("patch op: ", op.dump());
      CHECK(owned_path(op["path"].get<std::string>()));
      CHECK((op["op"] == "add" || op["op"] == "replace"));
    }
    REQUIRE_NOTHROW(mutated = pod.patch(patch));
    check_security(dir.filename().string(), pod, mutated, cfg);

    // Idempotence: the mutated pod, sent again, needs nothing more.
    const json again_review = has_pod ? review_for_pod(mutated) : [&] {
      json rv = json::parse(body);
      rv["request"]["object"] = mutated;
      return rv;
    }();
    Reviewer second;
    const ReviewResult again = second.review(again_review.dump(), cfg);
    INFO("second pass: ", to_string(again.outcome), " ", again.patch);
    CHECK(again.ops.size() == 0);
    CHECK(again.outcome != Outcome::Rejected);
    if (r.outcome == Outcome::Mutated) CHECK(again.outcome == Outcome::Unchanged);
  }

  if (update_golden()) {
    spit(dir / "want_outcome.txt", outcome + "\n");
    fs::remove(dir / "want.json");
    fs::remove(dir / "want_error.txt");
    fs::remove(dir / "want_warnings.txt");
    if (failed) {
      spit(dir / "want_error.txt", r.error + "\n");
    } else {
      spit(dir / "want.json", mutated.dump(2) + "\n");
    }
    if (!r.warnings.empty()) {
      std::string w;
      for (const auto& l : r.warnings) w += l + "\n";
      spit(dir / "want_warnings.txt", w);
    }
    return;
  }

  REQUIRE_MESSAGE(fs::exists(dir / "want_outcome.txt"), "missing want_outcome.txt (run with UPDATE_GOLDEN=1)");
  CHECK(trim(slurp(dir / "want_outcome.txt")) == outcome);
  if (failed) {
    REQUIRE_MESSAGE(fs::exists(dir / "want_error.txt"), "missing want_error.txt");
    CHECK_FALSE(fs::exists(dir / "want.json"));
    CHECK(trim(slurp(dir / "want_error.txt")) == r.error);
  } else {
    REQUIRE_MESSAGE(fs::exists(dir / "want.json"), "missing want.json");
    CHECK_FALSE(fs::exists(dir / "want_error.txt"));
    const json want = json::parse(slurp(dir / "want.json"));
    if (want != mutated) {
      INFO("diff want -> got: ", json::diff(want, mutated).dump());
      CHECK(want == mutated);
    }
  }
  const std::vector<std::string> want_warnings =
      fs::exists(dir / "want_warnings.txt") ? lines(slurp(dir / "want_warnings.txt")) : std::vector<std::string>{};
  CHECK(want_warnings == r.warnings);
}

}  // namespace

TEST_CASE("golden mutations") {
  REQUIRE(fs::is_directory(kCases));
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(kCases)) {
    if (entry.is_directory()) {
      dirs.push_back(entry.path());
    } else {
      INFO("stray file in testdata: ", entry.path().string());
      CHECK(entry.path().filename() == "README.md");
    }
  }
  std::sort(dirs.begin(), dirs.end());
  CHECK(dirs.size() >= 30);
  for (const auto& dir : dirs) {
    SUBCASE(dir.filename().string().c_str()) {
      CAPTURE(dir.filename().string());
      run_case(dir);
    }
  }
  // Once every case ran (doctest runs this body once per subcase): which cases' mutations newly
  // violate a Pod Security Standards rule, all through a known hostPath volume as checked above.
  static bool reported = false;
  if (!reported && new_violations_by_case().size() == dirs.size()) {
    reported = true;
    size_t with_violations = 0;
    for (const auto& [name, rules] : new_violations_by_case()) {
      if (rules.empty()) continue;
      ++with_violations;
      std::string shown;
      for (const auto& r : rules) shown += " " + r;
      std::printf("pod security: %s:%s\n", name.c_str(), shown.c_str());
    }
    std::printf("pod security: %zu of %zu cases add a violation (each through a known hostPath volume)\n",
                with_violations, dirs.size());
  }
}
