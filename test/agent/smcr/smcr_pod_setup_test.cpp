// SMC-R pod setup end to end, in process: kubelet's PreStartContainer call through the real device
// plugin (gRPC), the real PodResources and CRI clients against fake servers (gRPC on unix
// sockets), the real pod netns configurator with an in-memory namespace runner and pnet tables,
// sysctls written to a stand-in procfs directory.
#include "agent/smcr/smcr_pod_setup.hpp"

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include <sys/stat.h>

#include <doctest/doctest.h>

#include "agent/deviceplugin/plugin_runtime.hpp"
#include "agent/proto/cri_runtime_v1.pb.h"
#include "agent/sys/pod_sources.hpp"
#include "common/log.hpp"
#include "test/eventually.hpp"
#include "test/fakes/fake_kubelet.hpp"
#include "test/fakes/fake_pod_apis.hpp"
#include "test/fakes/fake_rdma_devices.hpp"
#include "test/fakes/fake_smc.hpp"
#include "test/log_capture.hpp"
#include "test/support.hpp"

namespace erdma::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using erdma::testing::TempDir;
using testing::Behaviour;
using testing::FakeCriServer;
using testing::FakeKubelet;
using testing::FakePnetTable;
using testing::FakePodResourcesServer;
using testing::FakeRdmaDevices;
using testing::FakeSandbox;
using testing::make_device;

constexpr auto kWait = 10s;
const std::string kTrue = "true";

// Runs the work inline on the calling thread and remembers the namespace it stands for, so the
// pnet opener can hand out that namespace's table (the kernel's tables are per netns too).
thread_local std::string current_netns;

class PathNetns final : public Netns {
 public:
  Status run(const NetnsRef& ns, std::function<Status()> fn, std::chrono::steady_clock::time_point) override {
    {
      std::lock_guard lock(mu);
      if (std::find(gone.begin(), gone.end(), ns.path) != gone.end()) {
        return make_error(ErrorCode::NotFound, "network namespace " + ns.path + " is gone");
      }
      entered.push_back(ns.path);
    }
    current_netns = ns.path;
    auto s = fn();
    current_netns.clear();
    return s;
  }
  std::vector<std::string> entered_copy() {
    std::lock_guard lock(mu);
    return entered;
  }
  std::mutex mu;
  std::vector<std::string> entered;
  std::vector<std::string> gone;
};

// One fake pnet table per namespace path.
struct Tables {
  std::mutex mu;
  std::map<std::string, FakePnetTable> by_netns;
  bool no_smc = false;

  std::vector<PnetEntry> entries(const std::string& netns) {
    std::lock_guard lock(mu);
    return by_netns.count(netns) ? by_netns[netns].entries : std::vector<PnetEntry>{};
  }
};

class BorrowedTable final : public PnetTable {
 public:
  BorrowedTable(Tables& t, std::string ns) : t_(t), ns_(std::move(ns)) {}
  Result<std::vector<PnetEntry>> list() override {
    std::lock_guard lock(t_.mu);
    return t_.by_netns[ns_].list();
  }
  Result<Change> add(const PnetEntry& e) override {
    std::lock_guard lock(t_.mu);
    return t_.by_netns.try_emplace(ns_, false).first->second.add(e);
  }
  Result<Change> remove(const PnetId& id) override {
    std::lock_guard lock(t_.mu);
    return t_.by_netns[ns_].remove(id);
  }
  Status flush() override {
    std::lock_guard lock(t_.mu);
    return t_.by_netns[ns_].flush();
  }

 private:
  Tables& t_;
  std::string ns_;
};

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
}

uint64_t setups(AgentMetrics& m, PodSetupResult r) { return m.pod_setup(r).value(); }

// Hands out the facts a test sets and remembers which namespaces were asked about ("host" for a
// host-network pod). While held, each call waits (up to 10 s) for release().
class FakeInspector final : public PodNetworkInspector {
 public:
  Result<SmcrPodFacts> gather(const std::optional<NetnsRef>& pod, const std::string& interface, const std::string& pnet,
                              std::chrono::steady_clock::time_point) override {
    std::unique_lock lock(mu);
    ++entered;
    cv.notify_all();
    cv.wait_for(lock, 10s, [this] { return !held; });
    asked.push_back(pod ? pod->path : "host");
    pnet_ids.push_back(pnet);
    if (failure) return *failure;
    SmcrPodFacts f = facts;
    f.host_network = !pod;
    f.interface = interface;
    return f;
  }
  std::vector<std::string> asked_copy() {
    std::lock_guard lock(mu);
    return asked;
  }
  void hold() {
    std::lock_guard lock(mu);
    held = true;
  }
  void release() {
    {
      std::lock_guard lock(mu);
      held = false;
    }
    cv.notify_all();
  }
  // Waits until `n` calls have begun.
  bool wait_entered(int n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, kWait, [&] { return entered >= n; });
  }
  std::mutex mu;
  std::condition_variable cv;
  bool held = false;
  int entered = 0;
  std::vector<std::string> asked;
  std::vector<std::string> pnet_ids;
  SmcrPodFacts facts;
  std::optional<Error> failure;
};

// A node with eRDMA on eth0 10.77.0.1/24 and a UEID, a veth pod with the pod IP `pod_ip`.
SmcrPodFacts veth_pod(const char* pod_ip) {
  SmcrPodFacts f;
  f.kind = PodLinkKind::Veth;
  f.addresses = {Ipv4Prefix::parse(pod_ip).value()};
  f.pod_pnet_entry = true;
  f.rdma = {
      NodeRdmaNetdev{"eth0", "erdma_0", RdmaDriverKind::Erdma, {Ipv4Prefix::parse("10.77.0.1/24").value()}, false}};
  f.ueid_set = true;
  return f;
}

uint64_t predictions(AgentMetrics& m, SmcrReason r) { return m.pod_prediction(r).value(); }

// The Warning Events the pod setup posts, as {pod, reason, message, uid}.
struct RecordingSink final : PodEventSink {
  void warning(const std::string& pod, std::string_view uid, std::string_view reason,
               const std::string& message) override {
    std::lock_guard lock(mu);
    got.push_back({pod, std::string(reason), message, std::string(uid)});
  }
  std::vector<std::vector<std::string>> copy() {
    std::lock_guard lock(mu);
    return got;
  }
  std::mutex mu;
  std::vector<std::vector<std::string>> got;
};

struct PodHarness {
  TempDir dir;
  TempDir proc;  // stands in for the host's /proc: 1/ns/net and sys/net/smc/*
  AgentConfig cfg;
  FakePodResourcesServer podres{dir.path() + "/podres.sock"};
  FakeCriServer cri{dir.path() + "/cri.sock"};
  PathNetns netns;
  Tables tables;
  FakeInspector inspector;
  KernelPodNetns configurator{netns, [this]() -> Result<std::unique_ptr<PnetTable>> {
                                if (tables.no_smc) return make_error(ErrorCode::Unavailable, kNoSmcMessage);
                                return std::unique_ptr<PnetTable>(new BorrowedTable(tables, current_netns));
                              }};
  common::metrics::Registry registry;
  AgentMetrics metrics{registry};
  std::unique_ptr<GrpcPodResources> podres_client;
  std::unique_ptr<GrpcCriSandboxes> cri_client;
  std::unique_ptr<SmcrPodSetup> hook;
  FakeRdmaDevices devices{{make_device("erdma_0", "uverbs0", 0), make_device("erdma_1", "uverbs1", 0)}};
  FakeKubelet kubelet{dir.path()};
  std::unique_ptr<PluginRuntime> runtime;

  explicit PodHarness(unsigned call_timeout_ms = 5000) {
    fs::create_directories(proc.path() + "/1/ns");
    fs::create_symlink("/proc/self/ns/net", proc.path() + "/1/ns/net");
    write_text(proc.path() + "/sys/net/smc/wmem", "65536");
    write_text(proc.path() + "/sys/net/smc/tcp2smc", "0");
    fs::create_directories(dir.path() + "/netns");
    cfg.device_plugin_dir = dir.path();
    cfg.slots_per_device = 4;
    cfg.rescan_seconds = 3600;
    cfg.metrics_listen = "";
    cfg.pod_resources_socket = podres.socket();
    cfg.cri_socket = dir.path() + "/cri.sock";
    cfg.proc_root = proc.path();
    cfg.smcr.sysctls = {{"net.smc.wmem", "262144"}};
    cfg.smcr.call_timeout_ms = call_timeout_ms;
    podres_client =
        std::make_unique<GrpcPodResources>(cfg.pod_resources_socket, std::chrono::milliseconds(call_timeout_ms));
    cri_client = std::make_unique<GrpcCriSandboxes>(cfg.cri_socket, std::chrono::milliseconds(call_timeout_ms));
    hook = std::make_unique<SmcrPodSetup>(cfg, *podres_client, *cri_client, configurator, &metrics, inspector);
    hook->allow_netns_dir_for_test(dir.path() + "/netns/");  // where netns_file() puts the stand-ins
    kubelet.start();
    RuntimeTiming t;
    t.register_backoff_min = 20ms;
    t.register_backoff_max = 200ms;
    t.shutdown_grace = 100ms;
    runtime = std::make_unique<PluginRuntime>(cfg, devices, *hook, &metrics, t);
    REQUIRE(runtime->start().ok());
    REQUIRE(kubelet.wait_for_registrations(1, kWait).has_value());
  }
  ~PodHarness() {
    runtime->stop();
    kubelet.stop();
  }

  // A pod netns file (a plain file: the in-memory runner never joins it).
  std::string netns_file(const std::string& name) {
    const std::string p = dir.path() + "/netns/" + name;
    write_text(p, "");
    return p;
  }

  // A ready sandbox of ns/name asking for SMC-R, with nothing about its netns yet.
  static FakeSandbox sandbox(const std::string& name, const std::string& ns = "ns") {
    FakeSandbox s;
    s.id = "sb-" + name;
    s.ns = ns;
    s.name = name;
    s.annotations[std::string(kSmcrAnnotation)] = kTrue;
    return s;
  }

  // A pod with SMC-R annotation `value` (none when empty), its devices and a ready sandbox.
  std::string add_pod(const std::string& ns, const std::string& name, const std::vector<std::string>& ids,
                      const std::string& value = kTrue, bool host_network = false,
                      const std::string& resource = "aliyun/erdma") {
    podres.add(ns, name, "app", resource, ids);
    auto s = sandbox(name, ns);
    s.annotations.clear();
    if (!value.empty()) s.annotations[std::string(kSmcrAnnotation)] = value;
    s.annotations["kubernetes.io/config.seen"] = "2026-01-01T00:00:00Z";
    s.host_network = host_network;
    if (!host_network) s.netns_path = netns_file(name);
    s.pid = 0;
    cri.add(s);
    return host_network ? std::string() : *s.netns_path;
  }

  grpc::Status prestart(const std::vector<std::string>& ids, std::chrono::milliseconds client_deadline = 30s) {
    auto stub = kubelet.plugin(kPluginSocketName);
    v1beta1::PreStartContainerRequest req;
    for (const auto& id : ids) req.add_devices_ids(id);
    v1beta1::PreStartContainerResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + client_deadline);  // kubelet: 30 s
    return stub->PreStartContainer(&ctx, req, &resp);
  }
};

const PnetEntry kEth0 = PnetEntry::eth("ERDMA", "eth0").value();

}  // namespace

TEST_CASE("PreStartContainer configures the netns of the pod that owns the device IDs") {
  PodHarness h;
  const auto a = h.add_pod("team-a", "web-0", {"erdma_0-0"});
  const auto b = h.add_pod("team-b", "trainer-0", {"erdma_0-1", "erdma_1-2"});

  const auto t0 = std::chrono::steady_clock::now();
  const auto status = h.prestart({"erdma_1-2", "erdma_0-1"});
  const auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_OK(status);
  CHECK(h.tables.entries(b) == std::vector<PnetEntry>{kEth0});
  CHECK(h.tables.entries(a).empty());
  CHECK(h.netns.entered_copy() == std::vector<std::string>{b});
  CHECK(read_text(h.proc.path() + "/sys/net/smc/wmem") == "262144");
  CHECK(read_text(h.proc.path() + "/sys/net/smc/tcp2smc") == "1");
  CHECK(setups(h.metrics, PodSetupResult::Configured) == 1);
  CHECK(h.metrics.pod_setup_seconds.count() == 1);
  CHECK(h.metrics.pre_start_ok.value() == 1);
  const auto tracked = h.hook->tracked();
  REQUIRE(tracked.size() == 1);
  CHECK(tracked[0].pod == "team-b/trainer-0");
  CHECK(tracked[0].netns.path == b);
  // The runtime was asked for this pod's ready sandboxes only (kubelet's labels).
  const auto filter = h.cri.last_list_request();
  CHECK(filter.filter().state().state() == runtime::v1::SANDBOX_READY);
  const auto& selector = filter.filter().label_selector();
  CHECK(std::map<std::string, std::string>(selector.begin(), selector.end()) ==
        std::map<std::string, std::string>{{"io.kubernetes.pod.namespace", "team-b"},
                                           {"io.kubernetes.pod.name", "trainer-0"}});

  // Idempotent: a second container of the same pod finds the entry in place.
  REQUIRE(h.prestart({"erdma_0-1"}).ok());
  CHECK(h.tables.entries(b) == std::vector<PnetEntry>{kEth0});
  CHECK(setups(h.metrics, PodSetupResult::Configured) == 2);

  // Not an assertion (timings vary by machine): the latency the closing note reports.
  MESSAGE("PreStartContainer -> configured, through gRPC and the fake runtime: "
          << std::chrono::duration_cast<std::chrono::microseconds>(took).count() << " us (hook: "
          << h.metrics.pod_setup_seconds.sum() * 1e6 / static_cast<double>(h.metrics.pod_setup_seconds.count())
          << " us on average)");
}

TEST_CASE("the SMC-R resource's PreStartContainer looks its slot IDs up under that resource") {
  PodHarness h;
  // The same slot ID under both resources: only the resource tells the two pods apart.
  const auto nccl = h.add_pod("ns", "nccl", {"erdma_0-0"});
  const auto web = h.add_pod("ns", "web", {"erdma_0-0"}, kTrue, false, "aliyun/erdma-smcr");
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  PreStartHook& smcr = h.hook->for_resource("aliyun/erdma-smcr");
  CHECK(&smcr == &h.hook->for_resource("aliyun/erdma-smcr"));  // one per resource, kept
  REQUIRE(smcr.pre_start({"erdma_0-0"}, {"erdma_0"}, deadline).ok());
  REQUIRE(h.hook->wait_for_predictions(20s));
  CHECK(h.tables.entries(web) == std::vector<PnetEntry>{kEth0});
  CHECK(h.tables.entries(nccl).empty());
  REQUIRE(h.hook->pre_start({"erdma_0-0"}, {"erdma_0"}, deadline).ok());
  REQUIRE(h.hook->wait_for_predictions(20s));
  CHECK(h.tables.entries(nccl) == std::vector<PnetEntry>{kEth0});
  CHECK(setups(h.metrics, PodSetupResult::Configured) == 2);
  // Slot IDs no pod holds under that resource: the pod is not found, the container still starts.
  REQUIRE(h.hook->for_resource("example.com/other").pre_start({"erdma_0-0"}, {"erdma_0"}, deadline).ok());
  CHECK(setups(h.metrics, PodSetupResult::PodNotFound) == 1);
}

TEST_CASE("PreStartContainer latency over 50 pods, for the performance notes") {
  PodHarness h;
  std::vector<double> us;
  for (int i = 0; i < 50; ++i) {
    const std::string id = "erdma_" + std::to_string(i % 2) + "-" + std::to_string(i % 4);
    h.podres.set_response({});
    h.add_pod("bench", "pod-" + std::to_string(i), {id});
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(h.prestart({id}).ok());
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    h.cri.remove("sb-pod-" + std::to_string(i));
  }
  CHECK(setups(h.metrics, PodSetupResult::Configured) == 50);
  std::sort(us.begin(), us.end());
  MESSAGE("PreStartContainer -> configured over 50 calls (us): median " << us[25] << ", p90 " << us[45] << ", max "
                                                                        << us.back());
}

TEST_CASE("the SMC-R annotation must be exactly true") {
  PodHarness h;
  int n = 0;
  for (const std::string value : {"True", "yes", "1", " true", ""}) {
    CAPTURE(value);
    const std::string id = "erdma_" + std::to_string(n / 4) + "-" + std::to_string(n % 4);
    h.add_pod("ns", "pod" + std::to_string(n++), {id}, value);
    REQUIRE(h.prestart({id}).ok());
  }
  CHECK(setups(h.metrics, PodSetupResult::NotRequested) == 5);
  CHECK(h.netns.entered_copy().empty());
  CHECK(read_text(h.proc.path() + "/sys/net/smc/wmem") == "65536");
}

// The decisions themselves are table-tested in test/agent/core/pod_setup_test.cpp; these rows
// check that the shell gathers the facts behind them from real answers and files: the runtime's
// verbose info over gRPC, the netns path's visibility, the nsfs comparison with procRoot/1/ns/net.
TEST_CASE("the shell gathers the facts of each netns decision from the runtime and the filesystem") {
  PodHarness h;
  const std::string pid_ns = h.proc.path() + "/4242/ns/net";
  write_text(pid_ns, "");
  // Started (field 22, clock ticks since boot) long before the runtime named it.
  write_text(h.proc.path() + "/4242/stat", "4242 (pause) S 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1 1024 1");
  struct Row {
    const char* name;
    std::function<FakeSandbox(PodHarness&, const std::string&)> make;
    PodSetupResult want;
    std::string entered;  // the namespace file entered, "" for none
  };
  const std::vector<Row> rows = {
      {"runtime says NODE",
       [](PodHarness&, const std::string& n) {
         auto s = PodHarness::sandbox(n);
         s.host_network = true;
         return s;
       },
       PodSetupResult::HostNetwork, ""},
      {"OCI spec without a network namespace",
       [](PodHarness&, const std::string& n) {
         auto s = PodHarness::sandbox(n);
         s.raw_info = testing::containerd_info_json(std::nullopt, 77, true);
         return s;
       },
       PodSetupResult::HostNetwork, ""},
      {"a pod-network sandbox naming the host's netns",
       [](PodHarness& hh, const std::string& n) {
         auto s = PodHarness::sandbox(n);
         s.netns_path = hh.dir.path() + "/netns/" + n;
         fs::create_symlink("/proc/self/ns/net", *s.netns_path);
         return s;
       },
       PodSetupResult::HostNetnsRefused, ""},
      {"netns file removed, no pid",
       [](PodHarness& hh, const std::string& n) {
         auto s = PodHarness::sandbox(n);
         s.netns_path = hh.netns_file(n);
         fs::remove(*s.netns_path);
         return s;
       },
       PodSetupResult::SandboxGone, ""},
      {"netns path not visible here: the sandbox process's under procRoot",
       [](PodHarness&, const std::string& n) {
         auto s = PodHarness::sandbox(n);
         s.netns_path = "/var/run/netns/cni-not-mounted-here";
         s.pid = 4242;
         return s;
       },
       PodSetupResult::Configured, pid_ns},
      {"visible netns path",
       [](PodHarness& hh, const std::string& n) {
         auto s = PodHarness::sandbox(n);
         s.netns_path = hh.netns_file(n);
         s.pid = 4242;
         return s;
       },
       PodSetupResult::Configured, h.dir.path() + "/netns/row5"},
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    CAPTURE(r.name);
    const std::string name = "row" + std::to_string(i);
    const std::string id = "erdma_" + std::to_string(i / 4) + "-" + std::to_string(i % 4);
    h.podres.add("ns", name, "app", "aliyun/erdma", {id});
    h.cri.add(r.make(h, name));
    const auto before = h.netns.entered_copy().size();
    const auto o = h.hook->set_up({id}, std::chrono::steady_clock::now() + 5s);
    CHECK(o.result == r.want);
    const auto entered = h.netns.entered_copy();
    if (r.entered.empty()) {
      CHECK(entered.size() == before);
    } else {
      REQUIRE(entered.size() == before + 1);
      CHECK(entered.back() == r.entered);
      CHECK(h.tables.entries(r.entered) == std::vector<PnetEntry>{kEth0});
    }
  }
  // Only the configured ones are tracked; the host's namespace never is.
  CHECK(h.hook->tracked().size() == 2);
}

TEST_CASE("a vanished pod or sandbox is tolerated") {
  PodHarness h;
  // Listed as ready, but gone when its status is asked for.
  h.add_pod("ns", "a", {"erdma_0-0"});
  h.cri.hide_status("sb-a");
  REQUIRE(h.prestart({"erdma_0-0"}).ok());
  CHECK(setups(h.metrics, PodSetupResult::SandboxGone) == 1);

  // The namespace goes away while the agent enters it.
  const auto c = h.add_pod("ns", "c", {"erdma_0-2"});
  h.netns.gone.push_back(c);
  REQUIRE(h.prestart({"erdma_0-2"}).ok());
  CHECK(setups(h.metrics, PodSetupResult::SandboxGone) == 2);

  // No ready sandbox at all.
  h.podres.add("ns", "d", "app", "aliyun/erdma", {"erdma_0-3"});
  REQUIRE(h.prestart({"erdma_0-3"}).ok());
  CHECK(setups(h.metrics, PodSetupResult::SandboxGone) == 3);

  // Kubelet does not (or no longer) list the devices.
  REQUIRE(h.prestart({"erdma_1-3"}).ok());
  CHECK(setups(h.metrics, PodSetupResult::PodNotFound) == 1);

  CHECK(h.metrics.pre_start_ok.value() == 4);
  CHECK(h.metrics.pre_start_error.value() == 0);
  CHECK(h.hook->tracked().empty());
  // No prediction without a namespace to look at.
  CHECK(h.inspector.asked_copy().empty());
}

TEST_CASE("PreStartContainer predicts whether SMC-R can form, and a prediction never fails the container") {
  PodHarness h;
  SUBCASE("a configured veth pod in a per-node pod subnet will fall back") {
    h.inspector.facts = veth_pod("10.244.1.2/24");
    const auto path = h.add_pod("ns", "web", {"erdma_0-0"});
    const auto o = h.hook->set_up({"erdma_0-0"}, std::chrono::steady_clock::now() + 5s);
    CHECK(o.result == PodSetupResult::Configured);
    REQUIRE(o.prediction.has_value());
    CHECK(o.prediction->verdict == SmcrVerdict::WillFallBack);
    CHECK(o.prediction->reason == SmcrReason::PodSubnetOutsideRdmaNetdev);
    CHECK(o.prediction->fallback == "NOSMCDEV");
    CHECK(h.inspector.asked_copy() == std::vector<std::string>{path});
    CHECK(h.inspector.pnet_ids.back() == "ERDMA");
    // Through kubelet's call: counted, and the container starts.
    REQUIRE(h.prestart({"erdma_0-0"}).ok());
    REQUIRE(h.hook->wait_for_predictions(kWait));
    CHECK(predictions(h.metrics, SmcrReason::PodSubnetOutsideRdmaNetdev) == 1);
    CHECK(h.metrics.pre_start_ok.value() == 1);
  }
  SUBCASE("a host-network pod is predicted from the node's netns") {
    h.inspector.facts = veth_pod("10.244.1.2/24");  // the pod side is ignored for host network
    h.add_pod("ns", "host", {"erdma_0-1"}, kTrue, true);
    REQUIRE(h.prestart({"erdma_0-1"}).ok());
    REQUIRE(h.hook->wait_for_predictions(kWait));
    CHECK(h.inspector.asked_copy() == std::vector<std::string>{"host"});
    CHECK(predictions(h.metrics, SmcrReason::HostNetwork) == 1);
    h.inspector.facts.ueid_set = false;
    REQUIRE(h.prestart({"erdma_0-1"}).ok());
    REQUIRE(h.hook->wait_for_predictions(kWait));
    CHECK(predictions(h.metrics, SmcrReason::NoUeid) == 1);
    CHECK(setups(h.metrics, PodSetupResult::HostNetwork) == 2);
  }
  SUBCASE("facts that cannot be gathered make an unknown prediction") {
    h.inspector.failure = Error{ErrorCode::NotFound, "network namespace x is gone"};
    h.add_pod("ns", "gone", {"erdma_0-2"});
    const auto o = h.hook->set_up({"erdma_0-2"}, std::chrono::steady_clock::now() + 5s);
    CHECK(o.result == PodSetupResult::Configured);
    REQUIRE(o.prediction.has_value());
    CHECK(o.prediction->reason == SmcrReason::FactsUnavailable);
    CHECK(o.prediction->detail.find("is gone") != std::string::npos);
    REQUIRE(h.prestart({"erdma_0-2"}).ok());
    REQUIRE(h.hook->wait_for_predictions(kWait));
    CHECK(predictions(h.metrics, SmcrReason::FactsUnavailable) == 1);
  }
  SUBCASE("pods that are not set up get no prediction") {
    h.add_pod("ns", "plain", {"erdma_0-3"}, "");
    REQUIRE(h.prestart({"erdma_0-3"}).ok());
    REQUIRE(h.hook->wait_for_predictions(kWait));
    CHECK(h.hook->pending_predictions() == 0);
    CHECK(h.inspector.asked_copy().empty());
    for (auto r : kAllSmcrReasons) CHECK(predictions(h.metrics, r) == 0);
  }
}

TEST_CASE("Events: a predicted fall-back and a failed setup are reported on the pod, nothing else is") {
  PodHarness h;
  RecordingSink sink;
  h.hook->set_event_sink(&sink);
  h.inspector.facts = veth_pod("10.244.1.2/24");
  h.add_pod("ns", "web", {"erdma_0-0"});
  h.add_pod("ns", "plain", {"erdma_0-3"}, "");
  REQUIRE(h.prestart({"erdma_0-3"}).ok());  // no SMC-R asked: no Event
  REQUIRE(h.prestart({"erdma_0-0"}).ok());
  REQUIRE(h.hook->wait_for_predictions(kWait));
  auto got = sink.copy();
  REQUIRE(got.size() == 1);
  CHECK(got[0][0] == "ns/web");
  CHECK(got[0][3] == "uid-sb-web");  // the runtime's sandbox metadata (the fake's "uid-<sandbox id>")
  CHECK(got[0][1] == "SmcrWillFallBack");
  CHECK(got[0][2].find("pod-subnet-outside-rdma-netdev") != std::string::npos);
  CHECK(got[0][2].find("docs/smcr-pod-networks.md") != std::string::npos);

  h.cri.set_list_behaviour(Behaviour{false, grpc::StatusCode::UNAVAILABLE});
  REQUIRE(h.prestart({"erdma_0-0"}).ok());
  REQUIRE(h.hook->wait_for_predictions(kWait));
  got = sink.copy();
  REQUIRE(got.size() == 2);
  CHECK(got[1][1] == "SmcrSetupFailed");
  CHECK(got[1][2].find("SMC-R pod setup failed") == 0);
}

TEST_CASE("Events: a layout whose SMC-R connections break is reported as SmcrWillBreak") {
  PodHarness h;
  RecordingSink sink;
  h.hook->set_event_sink(&sink);
  // An ipvlan on a Soft-RoCE netdev, pod IP in its subnet, on a 7.x kernel.
  auto f = veth_pod("10.77.0.11/24");
  f.kind = PodLinkKind::Ipvlan;
  f.lower = "eth0";
  f.lower_in_node_netns = true;
  f.rdma[0].ib_device = "rxe0";
  f.rdma[0].kind = RdmaDriverKind::Rxe;
  f.kernel_major = 7;
  h.inspector.facts = f;
  h.add_pod("ns", "web", {"erdma_0-0"});
  REQUIRE(h.prestart({"erdma_0-0"}).ok());
  REQUIRE(h.hook->wait_for_predictions(kWait));
  const auto got = sink.copy();
  REQUIRE(got.size() == 1);
  CHECK(got[0][0] == "ns/web");
  CHECK(got[0][3] == "uid-sb-web");
  CHECK(got[0][1] == "SmcrWillBreak");
  CHECK(got[0][2].find("SMC-R will break this pod's connections (ipvlan-softroce-link-breaks)") == 0);
  CHECK(got[0][2].find("ECONNABORTED") != std::string::npos);
  CHECK(predictions(h.metrics, SmcrReason::IpvlanSoftroceLinkBreaks) == 1);
}

TEST_CASE("PreStartContainer answers within kubelet's budget when the runtime hangs") {
  SUBCASE("each call to the runtime is bounded by smcr.callTimeoutMs") {
    PodHarness h(300);
    h.add_pod("ns", "a", {"erdma_0-0"});
    h.cri.set_list_behaviour(Behaviour{true, std::nullopt});
    const auto t0 = std::chrono::steady_clock::now();
    const auto st = h.prestart({"erdma_0-0"});  // kubelet's own deadline: 30 s
    CHECK_OK(st);
    CHECK(setups(h.metrics, PodSetupResult::Timeout) == 1);
    MESSAGE("hung ListPodSandbox, callTimeoutMs 300: answered after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()
            << " ms");

    h.cri.set_list_behaviour({});
    h.cri.set_status_behaviour(Behaviour{true, std::nullopt});
    CHECK(h.prestart({"erdma_0-0"}).ok());
    CHECK(setups(h.metrics, PodSetupResult::Timeout) == 2);

    h.cri.set_status_behaviour({});
    h.podres.set_behaviour(Behaviour{true, std::nullopt});
    CHECK(h.prestart({"erdma_0-0"}).ok());
    CHECK(setups(h.metrics, PodSetupResult::Timeout) == 3);
    CHECK(h.netns.entered_copy().empty());
  }
  SUBCASE("the whole setup stays inside the deadline kubelet sent, whatever the call timeout") {
    PodHarness h(20000);
    h.add_pod("ns", "a", {"erdma_0-0"});
    h.cri.set_status_behaviour(Behaviour{true, std::nullopt});
    const auto t0 = std::chrono::steady_clock::now();
    // A kubelet deadline shorter than the call timeout: the answer must still arrive in time
    // (a late one would be DEADLINE_EXCEEDED here).
    const auto st = h.prestart({"erdma_0-0"}, 3s);
    CHECK_OK(st);
    CHECK(setups(h.metrics, PodSetupResult::Timeout) == 1);
    MESSAGE("hung PodSandboxStatus, kubelet deadline 3 s: answered after "
            << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()
            << " ms");
  }
}

TEST_CASE("an unreachable or misbehaving kubelet or runtime fails the setup, never the container") {
  PodHarness h;
  h.add_pod("ns", "a", {"erdma_0-0"});

  h.cri.set_list_behaviour(Behaviour{false, grpc::StatusCode::UNAVAILABLE});
  CHECK(h.prestart({"erdma_0-0"}).ok());
  h.cri.set_list_behaviour(Behaviour{false, grpc::StatusCode::UNIMPLEMENTED});
  CHECK(h.prestart({"erdma_0-0"}).ok());
  h.cri.set_list_behaviour({});
  h.podres.set_behaviour(Behaviour{false, grpc::StatusCode::PERMISSION_DENIED});
  CHECK(h.prestart({"erdma_0-0"}).ok());
  h.podres.set_behaviour({});
  CHECK(setups(h.metrics, PodSetupResult::Failed) == 3);

  // No PodResources socket at all.
  {
    GrpcPodResources missing(h.dir.path() + "/no-such.sock", 1s);
    SmcrPodSetup hook(h.cfg, missing, *h.cri_client, h.configurator, nullptr, h.inspector);
    const auto out = hook.set_up({"erdma_0-0"}, std::chrono::steady_clock::now() + 5s);
    CHECK(out.result == PodSetupResult::Failed);
    CHECK(out.message.find("no-such.sock") != std::string::npos);
  }
  // A kernel without SMC.
  h.tables.no_smc = true;
  auto out = h.hook->set_up({"erdma_0-0"}, std::chrono::steady_clock::now() + 5s);
  CHECK(out.result == PodSetupResult::Failed);
  CHECK(out.message == kNoSmcMessage);
  h.tables.no_smc = false;
  CHECK(h.metrics.pre_start_error.value() == 0);
}

TEST_CASE("a setup says which step its time went to, in its log line and its metrics") {
  PodHarness h;
  h.add_pod("ns", "a", {"erdma_0-0"});
  std::string lines;
  common::log::set_sink_for_test(&lines);
  struct Restore {
    ~Restore() { common::log::set_sink_for_test(nullptr); }
  } restore;

  SUBCASE("configured: every step is timed and observed once") {
    REQUIRE(h.prestart({"erdma_0-0"}).ok());
    REQUIRE(h.hook->wait_for_predictions(kWait));
    CHECK(setups(h.metrics, PodSetupResult::Configured) == 1);
    for (const char* key : {"\"podresources_us\":", "\"runtime_us\":", "\"netns_us\":", "\"predict_us\":"}) {
      CHECK_MESSAGE(lines.find(key) != std::string::npos, key << " in " << lines);
    }
    CHECK(h.metrics.step_pod_resources_seconds.count() == 1);
    CHECK(h.metrics.step_runtime_seconds.count() == 1);
    CHECK(h.metrics.step_netns_seconds.count() == 1);
    CHECK(h.metrics.step_prediction_seconds.count() == 1);
    // The steps before kubelet's answer are parts of the hook's time; the prediction comes after it.
    CHECK(h.metrics.step_pod_resources_seconds.sum() + h.metrics.step_runtime_seconds.sum() +
              h.metrics.step_netns_seconds.sum() <=
          h.metrics.pod_setup_seconds.sum());
  }
  SUBCASE("a hung runtime: the wait is charged to the runtime, later steps never ran") {
    h.cri.set_list_behaviour(Behaviour{true, std::nullopt});
    const auto out = h.hook->set_up({"erdma_0-0"}, std::chrono::steady_clock::now() + 400ms);
    h.cri.set_list_behaviour({});
    CHECK(out.result == PodSetupResult::Timeout);
    CHECK(out.steps.runtime >= 300ms);
    CHECK(out.steps.pod_resources < out.steps.runtime);
    CHECK(out.steps.netns.count() == 0);
    CHECK(out.steps.prediction.count() == 0);
    CHECK(out.duration >= out.steps.pod_resources + out.steps.runtime);
  }
  SUBCASE("a failed PodResources call: only its own step is logged") {
    h.podres.set_behaviour(Behaviour{false, grpc::StatusCode::PERMISSION_DENIED});
    REQUIRE(h.prestart({"erdma_0-0"}).ok());
    h.podres.set_behaviour({});
    CHECK(setups(h.metrics, PodSetupResult::Failed) == 1);
    CHECK(lines.find("\"podresources_us\":") != std::string::npos);
    CHECK(lines.find("\"runtime_us\":") == std::string::npos);
    CHECK(lines.find("\"netns_us\":") == std::string::npos);
    // Only configured setups feed the histograms.
    CHECK(h.metrics.step_pod_resources_seconds.count() == 0);
  }
}

namespace {
size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}
}  // namespace

TEST_CASE("kubelet's answer does not wait for the SMC-R prediction, and every setup is logged once with it") {
  PodHarness h;
  h.inspector.facts = veth_pod("10.244.1.2/24");
  std::string lines;
  common::log::set_sink_for_test(&lines);
  struct Restore {
    ~Restore() { common::log::set_sink_for_test(nullptr); }
  } restore;
  const std::string setup_line = "\"msg\":\"SMC-R pod setup\"";
  const auto pending = [&h] {
    return h.registry.expose().find("erdma_agent_smcr_pod_predictions_pending 1") != std::string::npos;
  };

  SUBCASE("the answer comes with the netns configured; the line and the prediction follow") {
    const auto path = h.add_pod("ns", "a", {"erdma_0-0"});
    h.inspector.hold();
    REQUIRE(h.prestart({"erdma_0-0"}).ok());  // answered while the prediction is held
    CHECK(h.tables.entries(path) == std::vector<PnetEntry>{kEth0});
    CHECK(setups(h.metrics, PodSetupResult::Configured) == 1);
    CHECK(h.metrics.pod_setup_seconds.count() == 1);
    REQUIRE(h.inspector.wait_entered(1));
    CHECK(h.hook->pending_predictions() == 1);
    CHECK(pending());
    CHECK(h.metrics.step_prediction_seconds.count() == 0);
    CHECK(count_of(lines, setup_line) == 0);
    CHECK_FALSE(h.hook->wait_for_predictions(50ms));
    h.inspector.release();
    REQUIRE(h.hook->wait_for_predictions(kWait));
    CHECK(h.hook->pending_predictions() == 0);
    CHECK_FALSE(pending());
    CHECK(count_of(lines, setup_line) == 1);
    CHECK(lines.find("\"smcr_reason\":\"pod-subnet-outside-rdma-netdev\"") != std::string::npos);
    CHECK(lines.find("\"predict_us\":") != std::string::npos);
    CHECK(predictions(h.metrics, SmcrReason::PodSubnetOutsideRdmaNetdev) == 1);
    CHECK(h.metrics.step_prediction_seconds.count() == 1);
  }
  SUBCASE("past the queue's bound a setup is logged at once, with an unknown prediction that says why") {
    h.hook->limit_queued_predictions(1);
    h.add_pod("ns", "a", {"erdma_0-0"});
    h.add_pod("ns", "b", {"erdma_0-1"});
    h.add_pod("ns", "c", {"erdma_0-2"});
    h.inspector.hold();
    REQUIRE(h.prestart({"erdma_0-0"}).ok());
    REQUIRE(h.inspector.wait_entered(1));     // a: being predicted
    REQUIRE(h.prestart({"erdma_0-1"}).ok());  // b: queued
    REQUIRE(h.prestart({"erdma_0-2"}).ok());  // c: no room
    CHECK(h.hook->pending_predictions() == 2);
    CHECK(count_of(lines, setup_line) == 1);
    CHECK(lines.find("\"pod\":\"ns/c\"") != std::string::npos);
    CHECK(lines.find("SMC-R predictions waiting: 1") != std::string::npos);
    CHECK(predictions(h.metrics, SmcrReason::FactsUnavailable) == 1);
    h.inspector.release();
    REQUIRE(h.hook->wait_for_predictions(kWait));
    CHECK(count_of(lines, setup_line) == 3);
    CHECK(predictions(h.metrics, SmcrReason::PodSubnetOutsideRdmaNetdev) == 2);
    CHECK(setups(h.metrics, PodSetupResult::Configured) == 3);
  }
  SUBCASE("stopping the agent logs every queued setup, predicted or not") {
    h.add_pod("ns", "a", {"erdma_0-0"});
    h.add_pod("ns", "b", {"erdma_0-1"});
    h.inspector.hold();
    REQUIRE(h.prestart({"erdma_0-0"}).ok());
    REQUIRE(h.inspector.wait_entered(1));
    REQUIRE(h.prestart({"erdma_0-1"}).ok());
    h.runtime->stop();
    // `a` is being predicted and `b` waits when the stop begins: `a` finishes its prediction, `b`
    // is logged without one, and neither is lost.
    std::thread stopper([&h] { h.hook->stop_predictions(); });
    REQUIRE(erdma::testing::eventually([&h] { return h.hook->predictions_stopping(); }, 20s));
    h.inspector.release();
    stopper.join();
    h.hook.reset();
    CHECK(count_of(lines, setup_line) == 2);
    CHECK(count_of(lines, "\"smcr_reason\":") == 2);
    CHECK(predictions(h.metrics, SmcrReason::PodSubnetOutsideRdmaNetdev) == 1);  // a
    CHECK(predictions(h.metrics, SmcrReason::FactsUnavailable) == 1);            // b
    CHECK(count_of(lines, "the agent stopped before predicting this pod") == 1);
  }
}

TEST_CASE("malformed answers from kubelet and the runtime are refused with a reason") {
  PodHarness h;
  auto run = [&](const std::vector<std::string>& ids) {
    return h.hook->set_up(ids, std::chrono::steady_clock::now() + 5s);
  };

  SUBCASE("a pod without a name") {
    h.podres.add("ns", "", "app", "aliyun/erdma", {"erdma_0-0"});
    const auto o = run({"erdma_0-0"});
    CHECK(o.result == PodSetupResult::Failed);
    CHECK(o.message.find("without namespace or name") != std::string::npos);
  }
  SUBCASE("the same devices listed for two containers") {
    h.podres.add("ns", "a", "app", "aliyun/erdma", {"erdma_0-0"});
    h.podres.add("ns", "b", "app", "aliyun/erdma", {"erdma_0-0"});
    const auto o = run({"erdma_0-0"});
    CHECK(o.result == PodSetupResult::Failed);
    CHECK(o.message.find("more than one container") != std::string::npos);
  }
  SUBCASE("devices of another resource do not count") {
    h.podres.add("ns", "a", "app", "example.com/gpu", {"erdma_0-0"});
    CHECK(run({"erdma_0-0"}).result == PodSetupResult::PodNotFound);
  }
  SUBCASE("sandbox info that is not JSON") {
    h.add_pod("ns", "a", {"erdma_0-0"});
    auto s = PodHarness::sandbox("a");
    s.raw_info = "{\"pid\": 12, \"runtimeSpec\": ";
    h.cri.add(s);
    const auto o = run({"erdma_0-0"});
    CHECK(o.result == PodSetupResult::Failed);
    CHECK(o.message.find("not a JSON object") != std::string::npos);
  }
  SUBCASE("sandbox info without netns path or pid") {
    h.add_pod("ns", "a", {"erdma_0-0"});
    auto s = PodHarness::sandbox("a");
    s.raw_info = "{}";
    h.cri.add(s);
    const auto o = run({"erdma_0-0"});
    CHECK(o.result == PodSetupResult::Failed);
    CHECK(o.message.find("neither a netns path nor a pid") != std::string::npos);
  }
  SUBCASE("a relative netns path and an absurd pid") {
    h.add_pod("ns", "a", {"erdma_0-0"});
    auto s = PodHarness::sandbox("a");
    s.raw_info = testing::containerd_info_json("run/netns/x", std::nullopt, false);
    h.cri.add(s);
    CHECK(run({"erdma_0-0"}).message.find("not an absolute path") != std::string::npos);
    s.raw_info = R"({"pid": 99999999999})";
    h.cri.add(s);
    CHECK(run({"erdma_0-0"}).message.find("not a process id") != std::string::npos);
  }
  SUBCASE("an answer larger than the agent accepts") {
    v1::ListPodResourcesResponse big;
    auto* pod = big.add_pod_resources();
    pod->set_namespace_("ns");
    pod->set_name(std::string(static_cast<size_t>(kMaxAnswerBytes) + 1024, 'x'));
    h.podres.set_response(big);
    const auto o = run({"erdma_0-0"});
    CHECK(o.result == PodSetupResult::Failed);
    CHECK(o.message.find("larger than") != std::string::npos);
  }
  SUBCASE("more pods than the agent accepts") {
    v1::ListPodResourcesResponse many;
    for (size_t i = 0; i <= kMaxPods; ++i) many.add_pod_resources()->set_name("p");
    h.podres.set_response(many);
    const auto o = run({"erdma_0-0"});
    CHECK(o.result == PodSetupResult::Failed);
    CHECK(o.message.find("more than the 10000 accepted") != std::string::npos);
  }
  CHECK(h.netns.entered_copy().empty());
}

TEST_CASE("a CRI sandbox list longer than the agent accepts is refused, one at the limit is not") {
  runtime::v1::ListPodSandboxResponse many;
  for (size_t i = 0; i <= kMaxPods; ++i) many.add_items()->set_id("sb-" + std::to_string(i));
  const auto refused = sandboxes_from(many);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::ResourceExhausted);
  CHECK(refused.error().message.find("10001 sandboxes, more than the 10000 accepted") != std::string::npos);
  many.mutable_items()->RemoveLast();
  const auto accepted = sandboxes_from(many);
  REQUIRE(accepted.ok());
  CHECK(accepted->size() == kMaxPods);
}

TEST_CASE("sysctls the kernel lacks are reported and the pnet entry stays") {
  PodHarness h;
  fs::remove(h.proc.path() + "/sys/net/smc/tcp2smc");  // most kernels have no tcp2smc: not an error
  auto cfg = h.cfg;
  cfg.smcr.sysctls = {{"net.smc.wmem", "131072"}, {"net.smc.no_such_knob", "1"}};
  SmcrPodSetup hook(cfg, *h.podres_client, *h.cri_client, h.configurator, &h.metrics, h.inspector);
  hook.allow_netns_dir_for_test(h.dir.path() + "/netns/");
  const auto ns = h.add_pod("ns", "a", {"erdma_0-0"});
  const auto o = hook.set_up({"erdma_0-0"}, std::chrono::steady_clock::now() + 5s);
  CHECK(o.result == PodSetupResult::Failed);
  CHECK(o.message.find("net.smc.no_such_knob") != std::string::npos);
  CHECK(h.tables.entries(ns) == std::vector<PnetEntry>{kEth0});
  CHECK(read_text(h.proc.path() + "/sys/net/smc/wmem") == "131072");
  CHECK_FALSE(fs::exists(h.proc.path() + "/sys/net/smc/tcp2smc"));

  // Without the unknown knob the same pod is configured, still without tcp2smc.
  cfg.smcr.sysctls = {{"net.smc.wmem", "131072"}};
  SmcrPodSetup good(cfg, *h.podres_client, *h.cri_client, h.configurator, &h.metrics, h.inspector);
  good.allow_netns_dir_for_test(h.dir.path() + "/netns/");
  const auto o2 = good.set_up({"erdma_0-0"}, std::chrono::steady_clock::now() + 5s);
  CHECK(o2.result == PodSetupResult::Configured);
  CHECK(o2.message.find("already present") != std::string::npos);
  CHECK_FALSE(fs::exists(h.proc.path() + "/sys/net/smc/tcp2smc"));
}

TEST_CASE("a procRoot without the host's netns stops the setup before any namespace is entered") {
  PodHarness h;
  h.add_pod("ns", "a", {"erdma_0-0"});
  fs::remove(h.proc.path() + "/1/ns/net");
  const auto o = h.hook->set_up({"erdma_0-0"}, std::chrono::steady_clock::now() + 5s);
  CHECK(o.result == PodSetupResult::Failed);
  CHECK(o.message.find("cannot compare with the host's netns") != std::string::npos);
  CHECK(o.message.find("procRoot") != std::string::npos);
  CHECK(h.netns.entered_copy().empty());
}

TEST_CASE("a PreStartContainer whose deadline passed in the queue still lets the container start") {
  PodHarness h;
  CHECK(h.hook->missed_turn({"erdma_0-0"}, "the PreStartContainer deadline passed while earlier pod setups ran").ok());
  CHECK(setups(h.metrics, PodSetupResult::Timeout) == 1);
}

TEST_CASE("a netns path outside the runtime's directories is never opened; a reused pid is refused (L2)") {
  PodHarness h;
  write_text(h.proc.path() + "/4242/ns/net", "");
  write_text(h.proc.path() + "/4242/stat", "4242 (pause) S 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 1 1024 1");
  // A process that took pid 4343 after the runtime named it: it started later than now.
  write_text(h.proc.path() + "/4343/ns/net", "");
  write_text(h.proc.path() + "/4343/stat", "4343 (sh) S 1 4343 4343 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 " +
                                               std::to_string(boot_ticks_now() + 100000) + " 1024 1");
  const std::string elsewhere = h.proc.path() + "/elsewhere";
  write_text(elsewhere, "");

  h.podres.add("ns", "a", "app", "aliyun/erdma", {"erdma_0-0"});
  auto a = PodHarness::sandbox("a");
  a.netns_path = elsewhere;  // visible, but not where a runtime puts namespaces
  h.cri.add(a);
  auto o = h.hook->set_up({"erdma_0-0"}, std::chrono::steady_clock::now() + 5s);
  CHECK(o.result == PodSetupResult::Failed);
  CHECK(o.message.find("outside /var/run/netns/, /run/netns/, /run/containerd/") != std::string::npos);
  CHECK(h.netns.entered_copy().empty());

  h.podres.add("ns", "b", "app", "aliyun/erdma", {"erdma_0-1"});
  auto b = PodHarness::sandbox("b");
  b.netns_path = elsewhere;
  b.pid = 4242;  // the sandbox process's namespace instead
  h.cri.add(b);
  o = h.hook->set_up({"erdma_0-1"}, std::chrono::steady_clock::now() + 5s);
  CHECK(o.result == PodSetupResult::Configured);
  CHECK(h.netns.entered_copy() == std::vector<std::string>{h.proc.path() + "/4242/ns/net"});

  h.podres.add("ns", "c", "app", "aliyun/erdma", {"erdma_0-2"});
  auto c = PodHarness::sandbox("c");
  c.netns_path = "/var/run/netns/../../etc/hostname";
  c.pid = 4343;
  h.cri.add(c);
  o = h.hook->set_up({"erdma_0-2"}, std::chrono::steady_clock::now() + 5s);
  CHECK(o.result == PodSetupResult::SandboxGone);
  CHECK(o.message.find("started after the runtime named it") != std::string::npos);
  CHECK(h.netns.entered_copy().size() == 1);

  // What the statistics loop keeps: the path and the namespace's identity, no open descriptor.
  const auto tracked = h.hook->tracked();
  REQUIRE(tracked.size() == 1);
  CHECK(tracked[0].netns.fd == nullptr);
  REQUIRE(tracked[0].netns.expect.has_value());
  struct stat st {};
  REQUIRE(::stat((h.proc.path() + "/4242/ns/net").c_str(), &st) == 0);
  CHECK(tracked[0].netns.expect->ino == st.st_ino);
}

TEST_CASE("resync survives an unfiltered sandbox list larger than the agent accepts (L3)") {
  PodHarness h;
  const auto a = h.add_pod("ns", "a", {"erdma_0-0"});
  // Pods without eRDMA devices whose annotations together outgrow kMaxAnswerBytes: the
  // unfiltered ListPodSandbox answer is refused, the per-pod ones stay small.
  for (int i = 0; i < 5; ++i) {
    auto big = PodHarness::sandbox("big-" + std::to_string(i), "other");
    big.annotations["example.com/blob"] = std::string(4u << 20, 'x');
    h.cri.add(big);
  }
  REQUIRE_FALSE(h.cri_client->list_ready(std::chrono::steady_clock::now() + 10s).ok());
  auto r = h.hook->resync(std::chrono::steady_clock::now() + 10s);
  REQUIRE_OK(r);
  CHECK(r->sandboxes == 1);
  CHECK(r->configured == 1);
  CHECK(h.tables.entries(a) == std::vector<PnetEntry>{kEth0});
  // Kubelet unreachable: nothing to resync from, retried later.
  h.podres.set_behaviour(Behaviour{false, grpc::StatusCode::UNAVAILABLE});
  CHECK_FALSE(h.hook->resync(std::chrono::steady_clock::now() + 1s).ok());
}

TEST_CASE("resync configures every ready SMC-R sandbox") {
  PodHarness h;
  const auto a = h.add_pod("ns", "a", {"erdma_0-0"});
  const auto b = h.add_pod("ns", "b", {"erdma_0-1"}, "false");
  h.add_pod("ns", "c", {"erdma_0-2"}, kTrue, true);
  FakeSandbox stopped;
  stopped.id = "sb-old";
  stopped.ns = "ns";
  stopped.name = "old";
  stopped.ready = false;
  stopped.annotations[std::string(kSmcrAnnotation)] = kTrue;
  stopped.netns_path = h.netns_file("old");
  h.cri.add(stopped);
  const auto d = h.add_pod("ns", "d", {"erdma_1-0"});
  h.cri.hide_status("sb-d");

  auto r = h.hook->resync(std::chrono::steady_clock::now() + 10s);
  REQUIRE(r.ok());
  CHECK(r->sandboxes == 4);  // ready ones only
  CHECK(r->smcr == 3);
  CHECK(r->configured == 1);
  CHECK(r->failed == 0);
  CHECK(h.tables.entries(a) == std::vector<PnetEntry>{kEth0});
  CHECK(h.tables.entries(b).empty());
  CHECK(h.netns.entered_copy() == std::vector<std::string>{a});
  REQUIRE(h.hook->tracked().size() == 1);
  h.hook->forget("sb-a");
  CHECK(h.hook->tracked().empty());

  h.cri.set_list_behaviour(Behaviour{false, grpc::StatusCode::UNAVAILABLE});
  CHECK_FALSE(h.hook->resync(std::chrono::steady_clock::now() + 10s).ok());
}

TEST_CASE("smcr.allowedNamespaces: pods elsewhere are not set up, at PreStart and at resync") {
  PodHarness h;
  h.cfg.smcr.allowed_namespaces = {"ml"};
  const auto in = h.add_pod("ml", "web", {"erdma_0-0"});
  const auto out = h.add_pod("tenant", "other", {"erdma_0-1"});
  REQUIRE(h.prestart({"erdma_0-1"}).ok());  // the container starts; its TCP stays TCP
  CHECK(h.tables.entries(out).empty());
  CHECK(setups(h.metrics, PodSetupResult::NotAllowed) == 1);
  REQUIRE(h.prestart({"erdma_0-0"}).ok());
  REQUIRE(h.hook->wait_for_predictions(20s));
  CHECK(h.tables.entries(in) == std::vector<PnetEntry>{kEth0});
  auto r = h.hook->resync(std::chrono::steady_clock::now() + 10s);
  REQUIRE(r.ok());
  CHECK(r->configured == 1);  // only ml/web
  CHECK(h.tables.entries(out).empty());
  CHECK(setups(h.metrics, PodSetupResult::NotAllowed) == 2);
  CHECK_FALSE(h.cfg.smcr.allows("tenant"));
  h.cfg.smcr.allowed_namespaces.clear();  // empty: every namespace
  CHECK(h.cfg.smcr.allows("tenant"));
}

TEST_CASE("an SMC-R claim's hook sets up its pod without the annotation, only in the claim's namespace") {
  PodHarness h;
  erdma::testing::LogCapture logs;
  auto pod = PodHarness::sandbox("bulk-0", "ml");
  pod.annotations.clear();  // the claim is the request
  pod.netns_path = h.netns_file("bulk-0");
  pod.pid = 0;
  h.cri.add(pod);
  const auto deadline = [] { return std::chrono::steady_clock::now() + 10s; };

  const auto done = h.hook->set_up_claim_pod("sb-bulk-0", "ml", deadline());
  CAPTURE(done.message);
  CHECK(done.result == PodSetupResult::Configured);
  CHECK(done.pod == "ml/bulk-0");
  CHECK(h.tables.entries(*pod.netns_path) == std::vector<PnetEntry>{kEth0});
  CHECK(read_text(h.proc.path() + "/sys/net/smc/wmem") == "262144");
  CHECK(setups(h.metrics, PodSetupResult::Configured) == 1);
  REQUIRE(h.hook->wait_for_predictions(20s));
  CHECK(logs.count(R"("trigger":"CDI hook","result":"configured","pod":"ml/bulk-0")") == 1);
  CHECK(h.hook->tracked().size() == 1);

  // A sandbox of another namespace's pod: the claim cannot be its (claims are namespaced).
  auto other = PodHarness::sandbox("web", "tenant");
  other.netns_path = h.netns_file("web");
  h.cri.add(other);
  const auto refused = h.hook->set_up_claim_pod("sb-web", "ml", deadline());
  CHECK(refused.result == PodSetupResult::Failed);
  CHECK(refused.message == "sandbox sb-web is pod tenant/web's, not one of namespace ml: the claim's pods are all of "
                           "its own namespace");
  CHECK(h.tables.entries(*other.netns_path).empty());

  const auto gone = h.hook->set_up_claim_pod("sb-none", "ml", deadline());
  CHECK(gone.result == PodSetupResult::SandboxGone);

  h.cfg.smcr.allowed_namespaces = {"prod"};
  const auto not_allowed = h.hook->set_up_claim_pod("sb-bulk-0", "ml", deadline());
  CHECK(not_allowed.result == PodSetupResult::NotAllowed);
  CHECK(setups(h.metrics, PodSetupResult::NotAllowed) == 1);
  REQUIRE(h.hook->wait_for_predictions(20s));
}

TEST_CASE("resync configures the pods that hold the SMC-R resource too") {
  PodHarness h;
  const auto web = h.add_pod("ns", "web", {"erdma_0-0"}, kTrue, false, "aliyun/erdma-smcr");
  const auto other = h.add_pod("ns", "other", {"erdma_0-1"}, kTrue, false, "example.com/unrelated");
  auto r = h.hook->resync(std::chrono::steady_clock::now() + 10s);
  REQUIRE(r.ok());
  CHECK(r->configured == 1);
  CHECK(h.tables.entries(web) == std::vector<PnetEntry>{kEth0});
  CHECK(h.tables.entries(other).empty());  // holds neither resource: not ours to set up
}

}  // namespace erdma::agent
