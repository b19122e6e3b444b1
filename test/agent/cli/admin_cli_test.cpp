// erdma-agent's command line: --help on every subcommand of the dispatch table, usage errors,
// smc-status/smc-stats --pod against a fake CRI server, and cleanup on files in a temp dir.
#include "agent/cli/dispatch.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "agent/cli/commands.hpp"
#include "test/fakes/fake_kubelet.hpp"
#include "test/fakes/fake_pod_apis.hpp"
#include "test/skip.hpp"
#include "test/support.hpp"

namespace erdma::agent {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Run {
  int rc;
  std::string out, err;
};

Run run(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int rc = dispatch(args, out, err);
  return Run{rc, out.str(), err.str()};
}

}  // namespace

TEST_CASE("every subcommand of the dispatch table has --help and -h: usage, flags, exit status on stdout") {
  const auto overview_text = overview();
  REQUIRE(subcommands().size() >= 10);
  for (const auto& c : subcommands()) {
    const std::string name(c.name);
    CAPTURE(name);
    CHECK(has(overview_text, "  " + name + " "));
    for (const char* flag : {"--help", "-h"}) {
      CAPTURE(flag);
      const auto r = run({name, flag});
      CHECK(r.rc == kExitOk);
      CHECK(r.err.empty());
      CHECK(r.out == std::string(c.help));
      CHECK(r.out.rfind("Usage:", 0) == 0);
      CHECK(has(r.out, "erdma-agent " + name));
      CHECK(has(r.out, "-h, --help"));
      CHECK(has(r.out, "Exit status: 0"));
    }
    // --help anywhere after the subcommand wins over the rest.
    CHECK(run({name, "--config", "/nonexistent.yaml", "--help"}).rc == kExitOk);
    CHECK(run({"help", name}).out == std::string(c.help));
  }
}

TEST_CASE("an unknown flag on any subcommand: exit 2 and a pointer to its --help on stderr") {
  for (const auto& c : subcommands()) {
    const std::string name(c.name);
    CAPTURE(name);
    const auto r = run({name, "--no-such-flag"});
    CHECK(r.rc == kExitUsage);
    CHECK(has(r.err, "error: "));
    CHECK(has(r.err, "see `erdma-agent " + name + " --help`"));
  }
  const auto unknown = run({"frobnicate"});
  CHECK(unknown.rc == kExitUsage);
  CHECK(has(unknown.err, "unknown command \"frobnicate\""));
  CHECK(has(unknown.err, "--help"));
  CHECK(run({}).rc == kExitUsage);
  CHECK(run({"--help"}).rc == kExitOk);
  CHECK(has(run({"--help"}).out, "cleanup"));
  CHECK(run({"--version"}).rc == kExitOk);
}

TEST_CASE("flags documented with their defaults") {
  for (const auto& want : std::vector<std::pair<std::string, std::string>>{{"run", "--metrics-listen ADDR"},
                                                                           {"run", "default 127.0.0.1:9467"},
                                                                           {"run", "default info"},
                                                                           {"devices", "default table"},
                                                                           {"smc-status", "--pod NAMESPACE/NAME"},
                                                                           {"smc-status", "default eth0"},
                                                                           {"smc-stats", "--pod NAMESPACE/NAME"},
                                                                           {"cleanup", "--dry-run"},
                                                                           {"cleanup", "--host-root DIR"},
                                                                           {"cleanup", "/etc/erdma-agent/config.yaml"},
                                                                           {"pnet", "default 1"}}) {
    CAPTURE(want.first);
    CAPTURE(want.second);
    CHECK(has(run({want.first, "--help"}).out, want.second));
  }
}

TEST_CASE("run --metrics-listen is validated before anything starts") {
  const auto r = run({"run", "--metrics-listen", "localhost:80"});
  CHECK(r.rc == kExitUsage);
  CHECK(has(r.err, "--metrics-listen"));
}

namespace {

// A config whose CRI socket is the fake's (or nothing), with short calls.
std::string write_config(const std::string& dir, const std::string& cri_socket, const std::string& extra = "") {
  const std::string path = dir + "/agent.yaml";
  std::ofstream out(path);
  out << "criSocket: " << cri_socket << "\nprocRoot: /proc\nsmcr:\n  callTimeoutMs: 1000\n" << extra;
  return path;
}

testing::FakeSandbox sandbox(const char* id, const char* ns, const char* name) {
  testing::FakeSandbox s;
  s.id = id;
  s.ns = ns;
  s.name = name;
  return s;
}

}  // namespace

TEST_CASE("smc-status --pod finds the pod over the CRI, with errors that say how to fix them") {
  erdma::testing::TempDir dir;
  testing::FakeCriServer cri(dir.path() + "/cri.sock");
  const auto config = write_config(dir.path(), cri.socket_for_test());

  SUBCASE("bad --pod is a usage error") {
    const auto r = run({"smc-status", "--pod", "web-0", "--config", config});
    CHECK(r.rc == kExitUsage);
    CHECK(has(r.err, "expected NAMESPACE/NAME"));
    CHECK(run({"smc-status", "--pod", "a/b", "--netns", "/x"}).rc == kExitUsage);
  }
  SUBCASE("not on this node") {
    auto other = sandbox("other", "team-b", "web-0");
    other.netns_path = "/var/run/netns/x";
    other.pid = 1;
    cri.add(other);
    for (const char* cmd : {"smc-status", "smc-stats"}) {
      CAPTURE(cmd);
      const auto r = run({cmd, "--pod", "team-a/web-0", "--config", config});
      CHECK(r.rc == kExitFailure);
      CHECK(has(r.err, "pod team-a/web-0 has no ready sandbox on this node"));
      CHECK(has(r.err, "kubectl get pod -n team-a web-0 -o wide"));
    }
    // The runtime was asked for that pod only, by kubelet's labels.
    const auto req = cri.last_list_request();
    CHECK(req.filter().label_selector().at("io.kubernetes.pod.namespace") == "team-a");
    CHECK(req.filter().label_selector().at("io.kubernetes.pod.name") == "web-0");
    CHECK(req.filter().state().state() == runtime::v1::SANDBOX_READY);
  }
  SUBCASE("two ready sandboxes") {
    auto one = sandbox("sb-one", "team-a", "web-0");
    one.pid = 1;
    auto two = one;
    two.id = "sb-two";
    two.created_at = 2;
    cri.add(one);
    cri.add(two);
    const auto r = run({"smc-status", "--pod", "team-a/web-0", "--config", config});
    CHECK(r.rc == kExitFailure);
    CHECK(has(r.err, "has 2 ready sandboxes on this node (sb-one, sb-two)"));
    CHECK(has(r.err, "--netns PATH"));
  }
  SUBCASE("the runtime names a netns this process cannot see and no pid") {
    auto s = sandbox("sb", "team-a", "web-0");
    s.netns_path = "/nonexistent/netns/cni-1";
    cri.add(s);
    const auto r = run({"smc-stats", "--pod", "team-a/web-0", "--config", config});
    CHECK(r.rc == kExitFailure);
    CHECK(has(r.err, "pod team-a/web-0: the sandbox's netns /nonexistent/netns/cni-1 does not exist here"));
    CHECK(has(r.err, "mount /var/run/netns"));
  }
  SUBCASE("a host-network pod is the node's namespace") {
    auto s = sandbox("sb", "kube-system", "proxy-1");
    s.host_network = true;
    s.pid = 1;
    cri.add(s);
    const auto r = run({"smc-stats", "--pod", "kube-system/proxy-1", "--config", config});
    if (r.rc == kExitOk) {
      CHECK(has(r.out, "pod kube-system/proxy-1 uses the node's network namespace"));
      CHECK(has(r.out, "fallbacks to TCP"));
    } else {
      // No SMC in this kernel: the message names the module and who loads it.
      CHECK(r.rc == kExitFailure);
      CHECK(has(r.err, "modprobe smc"));
      CHECK(has(r.err, "node's administrator"));
    }
  }
}

TEST_CASE("smc-status --pod with the CRI socket down names the socket and the config key") {
  erdma::testing::TempDir dir;
  const std::string missing = dir.path() + "/no-cri.sock";
  const auto config = write_config(dir.path(), missing);
  const auto r = run({"smc-status", "--pod", "team-a/web-0", "--config", config});
  CHECK(r.rc == kExitFailure);
  CHECK(has(r.err, "criSocket (now " + missing + ")"));
  CHECK(has(r.err, "mounted into the agent pod"));
}

TEST_CASE("cleanup removes the library, its directory and the NFD file once, and --dry-run only prints") {
  namespace fs = std::filesystem;
  erdma::testing::TempDir dir;
  const std::string lib = dir.path() + "/lib";
  const std::string nfd = dir.path() + "/features.d/erdma";
  fs::create_directories(lib);
  fs::create_directories(dir.path() + "/features.d");
  std::ofstream(lib + "/libsmc-preload.so") << "x";
  std::ofstream(nfd) << "erdma.driver-mode=default\n";
  // A PNETID nobody uses and no UEID: the test never changes the machine's SMC tables.
  const auto config = write_config(dir.path(), dir.path() + "/cri.sock",
                                   "  pnetId: CLEANUPTEST0\n  ueid: \"\"\n  preloadHostDir: " + lib +
                                       "\nnfdFeatureFile: " + nfd + "\n");

  const auto dry = run({"cleanup", "--dry-run", "--config", config});
  CAPTURE(dry.err);
  if (dry.rc == kExitFailure && has(dry.err, "cannot read the node's pnet table")) {
    // A kernel that has SMC but refuses this process its pnet table: nothing installable changes that.
    erdma::testing::skip_test(("netlink is not readable here: " + dry.err).c_str());
  }
  CHECK(dry.rc == kExitOk);
  CHECK(has(dry.out, "preload library " + lib + "/libsmc-preload.so would be removed (dry run)"));
  CHECK(has(dry.out, "directory " + lib + " would be removed (dry run)"));
  CHECK(has(dry.out, "NFD feature file " + nfd + " would be removed (dry run)"));
  CHECK(has(dry.out, "go with the pods"));
  CHECK(fs::exists(lib + "/libsmc-preload.so"));
  CHECK(fs::exists(nfd));

  const auto first = run({"cleanup", "--config", config});
  CHECK(first.rc == kExitOk);
  CHECK(has(first.out, "preload library " + lib + "/libsmc-preload.so removed"));
  CHECK(has(first.out, "directory " + lib + " removed"));
  CHECK(has(first.out, "NFD feature file " + nfd + " removed"));
  CHECK_FALSE(fs::exists(lib));
  CHECK_FALSE(fs::exists(nfd));

  const auto second = run({"cleanup", "--config", config});
  CHECK(second.rc == kExitOk);
  CHECK(has(second.out, "nothing to remove"));
  CHECK_FALSE(has(second.out, " removed\n"));

  // A directory holding something else stays.
  fs::create_directories(lib);
  std::ofstream(lib + "/keep.txt") << "mine";
  const auto kept = run({"cleanup", "--config", config});
  CHECK(kept.rc == kExitOk);
  CHECK(has(kept.out, lib + " kept: it holds 1 other entry"));
  CHECK(fs::exists(lib + "/keep.txt"));

  // --host-root prefixes the files (a debug pod with the node's / at /host).
  const auto rooted = run({"cleanup", "--dry-run", "--host-root", "relative", "--config", config});
  CHECK(rooted.rc == kExitUsage);
  CHECK(has(rooted.err, "--host-root must be an absolute path"));
}

}  // namespace erdma::agent
