// The offline subcommands (see commands.hpp).
#include "webhook/cli/commands.hpp"

#include <ostream>

#include "common/structured.hpp"
#include "webhook/config_io/config_file.hpp"
#include "webhook/cli/preview.hpp"

namespace erdma::webhook {
namespace {

constexpr const char* kMutateUsage = R"(Usage: erdma-webhook mutate -f FILE|- [-o patch|review|pod|request] [-n NAMESPACE] [--config FILE]

Shows what the webhook would do to the pods in FILE (YAML or JSON; '-' reads standard input):
a Pod, a workload whose pod template is used (Deployment, StatefulSet, DaemonSet, ReplicaSet,
Job, CronJob, ...), a List of those, or an AdmissionReview as the apiserver sends it.

  -f, --filename FILE   input file, or - for standard input
  -o, --output FORMAT   patch (default): the JSON Patch; review: the AdmissionReview response;
                        pod: the pod after the patch; request: the AdmissionReview
                        request the apiserver would send, one compact JSON per line
                        (for replaying against a running server)
  -n, --namespace NS    namespace of the pods (default: the one in the manifest, else "default")
      --config FILE     webhook configuration (YAML or JSON; default: built-in defaults)

Warnings (as kubectl would print them) and a one-line verdict per pod go to standard error.
Exit status: 0 all pods admitted, 1 the webhook would refuse a pod, 2 bad input or flags.
)";

constexpr const char* kConfigUsage = R"(Usage: erdma-webhook config [--config FILE]

Prints the effective webhook configuration as JSON: FILE validated with every default filled in,
or the built-in defaults without --config.
)";

// Pulls "--flag VALUE", "--flag=VALUE" and "-f VALUE" forms out of args.
struct Flags {
  std::vector<std::pair<std::string, std::string>> values;
  std::vector<std::string> positional;
  bool help = false;
  std::string error;
};

Flags parse_flags(const std::vector<std::string>& args, const std::vector<std::pair<std::string, std::string>>& known) {
  Flags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      f.help = true;
      continue;
    }
    if (a.size() < 2 || a[0] != '-' || a == "-") {
      f.positional.push_back(a);
      continue;
    }
    std::string name = a;
    std::string value;
    bool has_value = false;
    if (auto eq = a.find('='); a.starts_with("--") && eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    std::string canonical;
    for (const auto& [short_name, long_name] : known) {
      if (name == long_name || (!short_name.empty() && name == short_name)) canonical = long_name;
    }
    if (canonical.empty()) {
      f.error = "unknown flag " + name;
      return f;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        f.error = "flag " + name + " needs a value";
        return f;
      }
      value = args[++i];
    }
    f.values.emplace_back(canonical, value);
  }
  return f;
}

std::string flag(const Flags& f, const std::string& name) {
  std::string v;
  for (const auto& [k, val] : f.values) {
    if (k == name) v = val;
  }
  return v;
}

}  // namespace

int run_mutate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const Flags f = parse_flags(args, {{"-f", "--filename"}, {"-o", "--output"}, {"-n", "--namespace"}, {"", "--config"}});
  if (f.help) {
    out << kMutateUsage;
    return kExitOk;
  }
  if (!f.error.empty() || !f.positional.empty()) {
    err << "error: " << (f.error.empty() ? "unexpected argument " + f.positional.front() : f.error)
        << " (see erdma-webhook mutate --help)\n";
    return kExitUsage;
  }
  const std::string file = flag(f, "--filename");
  std::string output = flag(f, "--output");
  if (output.empty()) output = "patch";
  if (file.empty()) {
    err << "error: -f FILE is required (use -f - for standard input)\n";
    return kExitUsage;
  }
  if (output != "patch" && output != "review" && output != "pod" && output != "request") {
    err << "error: -o must be patch, review, pod or request, got \"" << output << "\"\n";
    return kExitUsage;
  }
  auto cfg = load_config_file(flag(f, "--config"));
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
  auto docs = common::parse_documents(*text, source);
  if (!docs) {
    err << "error: " << docs.error().message << "\n";
    return kExitUsage;
  }
  auto inputs = preview_inputs(*docs, flag(f, "--namespace"));
  if (!inputs) {
    err << "error: " << source << ": " << inputs.error().message << "\n";
    return kExitUsage;
  }

  if (output == "request") {
    for (const auto& in : *inputs) out << in.review_body << "\n";
    return kExitOk;
  }

  Reviewer reviewer;
  int status = kExitOk;
  for (const auto& in : *inputs) {
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
    const nlohmann::json& doc = output == "patch" ? res->patch : output == "review" ? res->review : res->pod;
    out << doc.dump(2) << "\n";
  }
  return status;
}

int run_config(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const Flags f = parse_flags(args, {{"", "--config"}});
  if (f.help) {
    out << kConfigUsage;
    return kExitOk;
  }
  if (!f.error.empty() || !f.positional.empty()) {
    err << "error: " << (f.error.empty() ? "unexpected argument " + f.positional.front() : f.error)
        << " (see erdma-webhook config --help)\n";
    return kExitUsage;
  }
  auto cfg = load_config_file(flag(f, "--config"));
  if (!cfg) {
    err << "error: " << cfg.error().message << "\n";
    return kExitUsage;
  }
  out << cfg->to_json().dump(2) << "\n";
  return kExitOk;
}

}  // namespace erdma::webhook
