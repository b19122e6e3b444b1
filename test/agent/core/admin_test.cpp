// Admin subcommand decisions: --pod parsing, the sandbox of a pod, error wording, cleanup plans.
#include "agent/core/admin.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace erdma;
using namespace erdma::agent;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

SandboxSummary sandbox(std::string id, std::string ns, std::string name, SandboxState state = SandboxState::Ready) {
  SandboxSummary s;
  s.id = std::move(id);
  s.pod_namespace = std::move(ns);
  s.pod_name = std::move(name);
  s.state = state;
  return s;
}

}  // namespace

TEST_CASE("parse_pod_name takes NAMESPACE/NAME as Kubernetes spells them") {
  struct Case {
    std::string name, in;
    bool ok;
    std::string ns, pod, message;
  };
  const std::vector<Case> cases{
      {"plain", "team-a/web-0", true, "team-a", "web-0", ""},
      {"dotted name", "default/web.v2-0", true, "default", "web.v2-0", ""},
      {"no slash", "web-0", false, "", "", "expected NAMESPACE/NAME"},
      {"two slashes", "a/b/c", false, "", "", "expected NAMESPACE/NAME"},
      {"empty namespace", "/web-0", false, "", "", "is not a Kubernetes namespace name"},
      {"empty name", "team-a/", false, "", "", "is not a pod name"},
      {"upper case", "Team-A/web-0", false, "", "", "is not a Kubernetes namespace name"},
      {"dot in namespace", "team.a/web-0", false, "", "", "is not a Kubernetes namespace name"},
      {"trailing dash", "team-a/web-", false, "", "", "is not a pod name"},
      {"namespace too long", std::string(64, 'a') + "/x", false, "", "", "over the limit of 63"},
      // The apiserver's subdomain rule holds for each part between dots; until the validator was
      // shared, --pod took these names, which no pod can have.
      {"empty part in name", "team-a/web..0", false, "", "",
       "is not a pod name (a DNS-1123 subdomain): it has two dots"},
      {"part starting with '-'", "team-a/web.-0", false, "", "",
       "it has a part starting with '-' (character 5, after a '.')"},
      {"part ending with '-'", "team-a/web-.0", false, "", "",
       "it has a part ending with '-' (character 4, before a '.')"},
      {"name of 253", "a/" + std::string(253, 'b'), true, "a", std::string(253, 'b'), ""},
      {"name too long", "a/" + std::string(254, 'b'), false, "", "", "is not a pod name"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto r = parse_pod_name(c.in);
    REQUIRE(r.ok() == c.ok);
    if (c.ok) {
      CHECK(r->namespace_ == c.ns);
      CHECK(r->name == c.pod);
    } else {
      CHECK(r.error().code == ErrorCode::InvalidArgument);
      CHECK(has(r.error().message, c.message));
    }
  }
}

TEST_CASE("pick_pod_sandbox: exactly one ready sandbox of the pod, else a message that says what to do") {
  const PodName web{"team-a", "web-0"};
  struct Case {
    std::string name;
    std::vector<SandboxSummary> in;
    bool ok;
    std::string want_id;
    ErrorCode code;
    std::vector<std::string> message;
  };
  const std::vector<Case> cases{
      {"one", {sandbox("s1", "team-a", "web-0")}, true, "s1", ErrorCode::Internal, {}},
      {"others ignored",
       {sandbox("s0", "team-b", "web-0"), sandbox("s1", "team-a", "web-0"), sandbox("s2", "team-a", "web-1")},
       true,
       "s1",
       ErrorCode::Internal,
       {}},
      {"a not-ready one beside the ready one",
       {sandbox("old", "team-a", "web-0", SandboxState::NotReady), sandbox("s1", "team-a", "web-0")},
       true,
       "s1",
       ErrorCode::Internal,
       {}},
      {"none on this node",
       {sandbox("s0", "team-b", "web-0")},
       false,
       "",
       ErrorCode::NotFound,
       {"pod team-a/web-0 has no ready sandbox on this node", "kubectl get pod -n team-a web-0 -o wide",
        "erdma-agent pod on the pod's node"}},
      {"only a not-ready one",
       {sandbox("old", "team-a", "web-0", SandboxState::NotReady)},
       false,
       "",
       ErrorCode::NotFound,
       {"no ready sandbox"}},
      {"two ready",
       {sandbox("aaaaaaaaaaaaaaaaaaaa", "team-a", "web-0"), sandbox("bbbb", "team-a", "web-0")},
       false,
       "",
       ErrorCode::FailedPrecondition,
       {"has 2 ready sandboxes", "aaaaaaaaaaaaa, bbbb", "retry", "--netns PATH"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    auto r = pick_pod_sandbox(c.in, web);
    REQUIRE(r.ok() == c.ok);
    if (c.ok) {
      CHECK(r->id == c.want_id);
      continue;
    }
    CHECK(r.error().code == c.code);
    for (const auto& m : c.message) {
      CAPTURE(m);
      CHECK(has(r.error().message, m));
    }
  }
}

TEST_CASE("CRI and SMC errors say how to fix them") {
  const auto down = explain_cri_error(
      make_error(ErrorCode::Unavailable, "CRI ListPodSandbox (/run/x.sock): connect failed"), "/run/x.sock");
  CHECK(down.code == ErrorCode::Unavailable);
  CHECK(has(down.message, "connect failed"));
  CHECK(has(down.message, "criSocket (now /run/x.sock)"));
  CHECK(has(down.message, "mounted into the agent pod"));
  CHECK(has(explain_cri_error(make_error(ErrorCode::DeadlineExceeded, "x"), "/s").message, "did not answer in time"));

  struct Case {
    std::string name;
    Error in;
    SmcNeed need;
    std::vector<std::string> want;
    std::vector<std::string> not_want;
  };
  const std::vector<Case> cases{
      {"no smc for pnet",
       make_error(ErrorCode::Unavailable, "the kernel has no SMC (module smc not loaded)"),
       SmcNeed::PnetTable,
       {"module smc not loaded", "`modprobe smc`", "node's administrator", "never loads"},
       {"smc_diag"}},
      {"no smc_diag for the socket list",
       make_error(ErrorCode::Unavailable, "the kernel has no SMC (module smc_diag not loaded)"),
       SmcNeed::SockDiag,
       {"smc and smc_diag", "`modprobe smc smc_diag`"},
       {}},
      {"permission",
       make_error(ErrorCode::PermissionDenied, "setns: EPERM"),
       SmcNeed::SmcInfo,
       {"CAP_NET_ADMIN", "kubectl -n erdma-system exec ds/erdma-agent"},
       {}},
      {"vanished netns",
       make_error(ErrorCode::NotFound, "network namespace /proc/9/ns/net is gone"),
       SmcNeed::SockDiag,
       {"is gone", "--pod NAMESPACE/NAME"},
       {}},
      {"not a netns",
       make_error(ErrorCode::InvalidArgument, "/tmp/x is not a network namespace"),
       SmcNeed::PnetTable,
       {"/var/run/netns/NAME"},
       {}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto e = explain_smc_error(c.in, c.need);
    CHECK(e.code == c.in.code);
    CHECK(has(e.message, c.in.message));
    for (const auto& w : c.want) {
      CAPTURE(w);
      CHECK(has(e.message, w));
    }
    for (const auto& w : c.not_want) {
      CAPTURE(w);
      CHECK_FALSE(has(e.message, w));
    }
  }
}

namespace {

PnetEntry eth(const char* id, const char* dev) { return *PnetEntry::eth(id, dev); }
PnetEntry ib(const char* id, const char* dev, unsigned port) { return *PnetEntry::ib(id, dev, port); }

CleanupFacts node_facts() {
  CleanupFacts f;
  f.pnet_id = "ERDMA";
  f.ueid = "ERDMA-CONTROLLER";
  f.preload.dir = "/var/lib/erdma-controller/lib";
  f.preload.file = "/var/lib/erdma-controller/lib/libsmc-preload.so";
  f.cdi_hook.dir = "/var/lib/erdma-controller/dra";
  f.cdi_hook.file = "/var/lib/erdma-controller/dra/erdma-cdi-hook";
  return f;
}

std::vector<std::string> texts(const CleanupPlan& p) {
  std::vector<std::string> out;
  for (const auto& a : p.actions) out.push_back(a.text);
  return out;
}

}  // namespace

TEST_CASE("plan_cleanup removes only what the agent adds") {
  struct Case {
    std::string name;
    CleanupFacts facts;
    std::vector<std::string> actions;
    std::vector<std::string> notes;  // substrings, each in some note
    size_t problems = 0;
  };
  std::vector<Case> cases;
  {
    Case c{"a node as the agent leaves it", node_facts(), {}, {}, 0};
    c.facts.pnet_table = std::vector<PnetEntry>{ib("ERDMA", "erdma_0", 1), eth("ERDMA", "eth0"), eth("MINE", "eth1")};
    c.facts.ueid_table = std::vector<std::string>{"OTHER", "ERDMA-CONTROLLER"};
    c.facts.preload.present = true;
    c.facts.preload.dir_present = true;
    c.facts.cdi_hook.present = true;
    c.facts.cdi_hook.dir_present = true;
    c.facts.nfd_file = "/etc/kubernetes/node-feature-discovery/features.d/erdma";
    c.facts.nfd_present = true;
    c.actions = {"pnet entries ERDMA (erdma_0 port 1, eth0)",
                 "UEID ERDMA-CONTROLLER",
                 "preload library /var/lib/erdma-controller/lib/libsmc-preload.so",
                 "directory /var/lib/erdma-controller/lib",
                 "CDI hook /var/lib/erdma-controller/dra/erdma-cdi-hook",
                 "directory /var/lib/erdma-controller/dra",
                 "NFD feature file /etc/kubernetes/node-feature-discovery/features.d/erdma"};
    c.notes = {"1 entry with another PNETID left alone", "go with the pods"};
    cases.push_back(c);
  }
  {
    Case c{"after a cleanup: nothing to do", node_facts(), {}, {"go with the pods"}, 0};
    c.facts.pnet_table = std::vector<PnetEntry>{eth("MINE", "eth1")};
    c.facts.ueid_table = std::vector<std::string>{"OTHER"};
    c.facts.nfd_file = "/etc/nfd/erdma";
    cases.push_back(c);
  }
  {
    Case c{"directory with other files is kept", node_facts(), {}, {"kept: it holds 2 other entries"}, 0};
    c.facts.preload.present = true;
    c.facts.preload.dir_present = true;
    c.facts.preload.dir_other_entries = 2;
    c.actions = {"preload library /var/lib/erdma-controller/lib/libsmc-preload.so"};
    cases.push_back(c);
  }
  {
    // Inside the agent's pod: the directory is its hostPath mount, which no rmdir can remove.
    Case c{"a mounted directory is kept, the library goes", node_facts(), {}, {"kept: it is mounted here"}, 0};
    c.facts.preload.present = true;
    c.facts.preload.dir_present = true;
    c.facts.preload.dir_is_mount = true;
    c.actions = {"preload library /var/lib/erdma-controller/lib/libsmc-preload.so"};
    cases.push_back(c);
  }
  {
    // An agent killed without its stop leaves the hook's socket: the directory is not emptied for it.
    Case c{"the hook goes; its directory with a socket left in it stays",
           node_facts(),
           {},
           {"/var/lib/erdma-controller/dra kept: it holds 1 other entry"},
           0};
    c.facts.cdi_hook.present = true;
    c.facts.cdi_hook.dir_present = true;
    c.facts.cdi_hook.dir_other_entries = 1;
    c.actions = {"CDI hook /var/lib/erdma-controller/dra/erdma-cdi-hook"};
    cases.push_back(c);
  }
  {
    Case c{"UEID not managed", node_facts(), {}, {"smcr.ueid is empty"}, 0};
    c.facts.ueid = "";
    c.facts.ueid_table = std::vector<std::string>{"ERDMA-CONTROLLER"};
    cases.push_back(c);
  }
  {
    Case c{"kernel without SMC", node_facts(), {}, {"no pnet entries or UEID to remove"}, 0};
    c.facts.pnet_table = make_error(ErrorCode::Unavailable, "the kernel has no SMC (module smc not loaded)");
    c.facts.ueid_table = make_error(ErrorCode::Unavailable, "the kernel has no SMC (module smc not loaded)");
    cases.push_back(c);
  }
  {
    Case c{"unreadable tables are problems", node_facts(), {}, {}, 2};
    c.facts.pnet_table = make_error(ErrorCode::PermissionDenied, "netlink: EPERM");
    c.facts.ueid_table = make_error(ErrorCode::PermissionDenied, "netlink: EPERM");
    cases.push_back(c);
  }
  {
    Case c{"NFD file not configured is never touched", node_facts(), {}, {}, 0};
    c.facts.nfd_present = true;  // a path of "" cannot be present; guard anyway
    cases.push_back(c);
  }
  for (const auto& c : cases) {
    CAPTURE(c.name);
    const auto plan = plan_cleanup(c.facts);
    CHECK(texts(plan) == c.actions);
    CHECK(plan.problems.size() == c.problems);
    for (const auto& n : c.notes) {
      CAPTURE(n);
      bool found = false;
      for (const auto& pn : plan.notes) found = found || has(pn, n);
      CHECK(found);
    }
  }
  // The steps and targets the shell acts on.
  auto f = node_facts();
  f.pnet_table = std::vector<PnetEntry>{eth("ERDMA", "eth0")};
  f.ueid_table = std::vector<std::string>{"ERDMA-CONTROLLER"};
  f.preload.present = true;
  const auto plan = plan_cleanup(f);
  REQUIRE(plan.actions.size() == 3);
  CHECK(plan.actions[0].step == CleanupStep::RemovePnetId);
  CHECK(plan.actions[0].target == "ERDMA");
  CHECK(plan.actions[1].step == CleanupStep::RemoveUeid);
  CHECK(plan.actions[1].target == "ERDMA-CONTROLLER");
  CHECK(plan.actions[2].step == CleanupStep::RemoveFile);
}

TEST_CASE("mountinfo_lists finds a mount point by its fifth field, unescaped, and passes over bad lines") {
  const std::string info =
      "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw\n"
      "101 36 0:52 /var/lib/erdma-controller/lib /var/lib/erdma-controller/lib ro,relatime - ext4 /dev/vda rw\n"
      "102 36 0:53 / /mnt/with\\040blank rw - tmpfs tmpfs rw\n"
      "short line\n"
      "\n"
      "103 36 0:54 / /mnt/back\\134slash rw - tmpfs tmpfs rw\n"
      "104 36 0:55 / /mnt/not\\08octal rw - tmpfs tmpfs rw\n"
      "105 36 0:56 / /mnt/cut\\04";  // no newline at the end, an escape cut short
  CHECK(mountinfo_lists(info, "/var/lib/erdma-controller/lib"));
  CHECK(mountinfo_lists(info, "/mnt/parent"));
  CHECK(mountinfo_lists(info, "/mnt/with blank"));
  CHECK_FALSE(mountinfo_lists(info, "/mnt/with\\040blank"));
  CHECK(mountinfo_lists(info, "/mnt/back\\slash"));
  CHECK(mountinfo_lists(info, "/mnt/not\\08octal"));  // not an escape: taken as it is
  CHECK(mountinfo_lists(info, "/mnt/cut\\04"));
  CHECK_FALSE(mountinfo_lists(info, "line"));   // "short line" has two fields
  CHECK_FALSE(mountinfo_lists(info, "/mnt1"));  // the root field, not the mount point
  CHECK_FALSE(mountinfo_lists(info, "/var/lib/erdma-controller"));
  CHECK_FALSE(mountinfo_lists("", "/"));
}
