// The offline subcommands (see commands.hpp).
#include "webhook/cli/commands.hpp"

#include <ostream>

#include "common/flags.hpp"
#include "common/structured.hpp"
#include "webhook/cli/kube_yaml.hpp"
#include "webhook/cli/preview.hpp"
#include "webhook/config_io/config_file.hpp"

namespace erdma::webhook {
namespace {

constexpr const char* kMutateUsage =
    R"(Usage: erdma-webhook mutate -f FILE|- [-o yaml|json|patch|review|pod|request] [-n NAMESPACE] [--config FILE]

Shows what the webhook would do to the pods in FILE (YAML or JSON, one or more documents; '-'
reads standard input), read as kubectl reads it: Pods, the pod templates of Deployments,
StatefulSets, DaemonSets, ReplicaSets, ReplicationControllers, Jobs, CronJobs and PodTemplates
(each as if its controller created the pod in the object's namespace), Lists of those, and
AdmissionReviews as the apiserver sends them. Other objects pass through unchanged.

  -f, --filename FILE   input file, or - for standard input
  -o, --output FORMAT   yaml (default): every document, pods and pod templates mutated, as a
                        YAML stream ('---' before each document), ready for kubectl apply -f -;
                        json: the same as JSON (one document as itself, several as a v1 List);
                        patch: the JSON Patch per pod; review: the AdmissionReview response
                        per pod; pod: each pod after the patch; request: the AdmissionReview
                        request the apiserver would send, one compact JSON per line
                        (for replaying against a running server)
  -n, --namespace NS    namespace of the pods (default: the one in the manifest, else "default")
      --config FILE     webhook configuration (YAML or JSON; default: built-in defaults)

Warnings and a one-line verdict per document go to standard error. A controller-created pod's
warnings never reach kubectl; the webhook also writes them into the pod's annotation
network.alibabacloud.com/erdma-warnings (kubectl describe pod shows it).
Exit status: 0 all pods admitted, 1 the webhook would refuse a pod, 2 bad input or flags.
)";

constexpr const char* kConfigUsage = R"(Usage: erdma-webhook config [--config FILE]

Prints the effective webhook configuration as JSON: FILE validated with every default filled in,
or the built-in defaults without --config.
)";

}  // namespace

int run_mutate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static constexpr common::FlagSpec kMutateFlags[] = {
      {"--filename", "-f"}, {"--output", "-o"}, {"--namespace", "-n"}, {"--config"}};
  auto parsed = common::parse_flags(args, kMutateFlags);
  if (parsed && parsed->help) {
    out << kMutateUsage;
    return kExitOk;
  }
  if (!parsed || !parsed->positional.empty()) {
    err << "error: " << (parsed ? "unexpected argument " + parsed->positional.front() : parsed.error().message)
        << " (see erdma-webhook mutate --help)\n";
    return kExitUsage;
  }
  const common::Flags& f = *parsed;
  const std::string file = f.get_or("--filename", "");
  std::string output = f.get_or("--output", "");
  if (output.empty()) output = "yaml";
  if (file.empty()) {
    err << "error: -f FILE is required (use -f - for standard input)\n";
    return kExitUsage;
  }
  const bool manifests = output == "yaml" || output == "json";
  if (!manifests && output != "patch" && output != "review" && output != "pod" && output != "request") {
    err << "error: -o must be yaml, json, patch, review, pod or request, got \"" << output << "\"\n";
    return kExitUsage;
  }
  auto cfg = load_config_file(f.get_or("--config", ""));
  if (!cfg) {
    err << "error: " << cfg.error().message << "\n";
    return kExitUsage;
  }
  auto text = common::read_file(file);
  if (!text) {
    err << "error: " << text.error().message << "\n";
    return kExitUsage;
  }
  const std::string source = file == "-" ? "<stdin>" : file;
  auto docs = parse_kube_manifests(*text, source);
  if (!docs) {
    err << "error: " << docs.error().message << "\n";
    return kExitUsage;
  }
  auto expansion = expand_manifests(*docs, f.get_or("--namespace", ""));
  if (!expansion) {
    err << "error: " << source << ": " << expansion.error().message << "\n";
    return kExitUsage;
  }
  const std::vector<PreviewInput>& inputs = expansion->pods;
  if (inputs.empty() && !manifests) {
    err << "error: " << source << ": no pods in the input (use -o yaml to pass other objects through)\n";
    return kExitUsage;
  }
  for (const auto& p : expansion->passed) err << p.label << ": passed through (holds no pod)\n";

  if (output == "request") {
    for (const auto& in : inputs) out << in.review_body << "\n";
    return kExitOk;
  }

  Reviewer reviewer;
  int status = kExitOk;
  std::vector<PreviewOutput> outputs;
  for (const auto& in : inputs) {
    auto res = run_preview(reviewer, in, *cfg);
    if (!res) {
      err << "error: " << source << ": " << res.error().message << "\n";
      return kExitUsage;
    }
    const ReviewResult& r = res->result;
    for (const auto& w : r.warnings) err << "Warning: " << w << "\n";
    err << in.label << ": " << to_string(r.outcome);
    if (r.outcome == Outcome::Rejected) {
      err << ": " << r.error;
      status = kExitDenied;
    } else if (!r.reason.empty()) {
      err << " (" << r.reason << ")";
    }
    err << "\n";
    if (!manifests) {
      const nlohmann::json& doc = output == "patch" ? res->patch : output == "review" ? res->review : res->pod;
      out << doc.dump(2) << "\n";
    }
    outputs.push_back(std::move(*res));
  }
  if (!manifests) return status;
  std::vector<nlohmann::json> result = mutated_documents(*docs, inputs, outputs);
  if (output == "json") {
    // Several documents become a v1 List, which kubectl apply -f takes as it is.
    const nlohmann::json doc =
        result.size() == 1
            ? result.front()
            : nlohmann::json{
                  {"apiVersion", "v1"}, {"kind", "List"}, {"items", result}, {"metadata", nlohmann::json::object()}};
    out << doc.dump(2) << "\n";
    return status;
  }
  auto yaml = to_yaml_stream(result);
  if (!yaml) {
    err << "error: " << yaml.error().message << "\n";
    return kExitUsage;
  }
  out << *yaml;
  return status;
}

int run_config(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  static constexpr common::FlagSpec kConfigFlags[] = {{"--config"}};
  auto parsed = common::parse_flags(args, kConfigFlags);
  if (parsed && parsed->help) {
    out << kConfigUsage;
    return kExitOk;
  }
  if (!parsed || !parsed->positional.empty()) {
    err << "error: " << (parsed ? "unexpected argument " + parsed->positional.front() : parsed.error().message)
        << " (see erdma-webhook config --help)\n";
    return kExitUsage;
  }
  auto cfg = load_config_file(parsed->get_or("--config", ""));
  if (!cfg) {
    err << "error: " << cfg.error().message << "\n";
    return kExitUsage;
  }
  out << cfg->to_json().dump(2) << "\n";
  return kExitOk;
}

}  // namespace erdma::webhook
