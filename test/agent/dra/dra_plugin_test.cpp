// The DRA driver's kubelet plugin, driven as the kubelet drives it: GetInfo and
// NotifyRegistrationStatus on the registration socket, NodePrepareResources and
// NodeUnprepareResources on the service socket, all in a temporary directory; claims come from a
// in-memory API server (test/fakes/fake_kube_api.hpp).
#include "agent/dra/dra_plugin.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/kube/api_paths.hpp"
#include "test/eventually.hpp"
#include "test/exposition.hpp"
#include "test/fakes/fake_kube_api.hpp"
#include "test/fakes/fake_rdma_devices.hpp"
#include "test/log_capture.hpp"
#include "test/support.hpp"

namespace erdma::agent::dra {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::make_device;
namespace regpb = ::pluginregistration;

constexpr const char* kDriver = "erdma.aliyun.com";
constexpr const char* kNode = "node-1";

using testing::FakeKubeApi;

// The claim, stored at its path with the uid it names (the kubelet refers to claims by uid).
void put(FakeKubeApi& api, const json& claim) {
  const json& meta = claim["metadata"];
  api.put_keeping_uid_for_test(
      kube::resource_claim_path(meta["namespace"].get<std::string>(), meta["name"].get<std::string>()), claim);
}

std::string uid(int n) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "6f1c2a9e-0b7d-4c53-9a41-%012d", n);
  return buf;
}

json result(std::string request, std::string device, std::string driver = kDriver) {
  return json{{"request", request}, {"driver", driver}, {"pool", kNode}, {"device", device}};
}

json claim(int n, json results, json configs = json::array()) {
  json devices = {{"results", results}};
  if (!configs.empty()) devices["config"] = configs;
  return json{{"metadata", {{"name", "claim-" + std::to_string(n)}, {"namespace", "team-a"}, {"uid", uid(n)}}},
              {"status", {{"allocation", {{"devices", devices}}}}}};
}

json smcr_config() {
  return json::array({json{
      {"source", "FromClass"},
      {"opaque",
       {{"driver", kDriver},
        {"parameters", {{"apiVersion", "erdma.aliyun.com/v1alpha1"}, {"kind", "ErdmaConfig"}, {"mode", "smcr"}}}}}}});
}

drapb::Claim ref(int n, std::string id = "") {
  drapb::Claim c;
  c.set_namespace_("team-a");
  c.set_name("claim-" + std::to_string(n));
  c.set_uid(id.empty() ? uid(n) : id);
  return c;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A temporary root holding the kubelet's directories and the CDI directory; removed at the end.
struct Dirs {
  erdma::testing::TempDir tmp{"dra"};
  fs::path root{tmp.path()};
  DraPluginConfig config() const {
    DraPluginConfig c;
    c.node_name = kNode;
    c.registry_dir = (root / "plugins_registry").string();
    c.plugin_dir = (root / "plugins" / kDriver).string();
    c.cdi_dir = (root / "cdi").string();
    c.allocate.preload_host_dir = "/var/lib/erdma-controller/lib";
    c.socket_check = std::chrono::milliseconds(50);
    return c;
  }
  fs::path cdi() const { return root / "cdi"; }
  fs::path spec(int n) const { return cdi() / (std::string(kDriver) + "-claim_" + uid(n) + ".json"); }
  fs::path checkpoint() const { return root / "plugins" / kDriver / "checkpoint.json"; }
};

// The kubelet's side of both sockets.
struct Kubelet {
  std::unique_ptr<regpb::Registration::Stub> reg;
  std::unique_ptr<drapb::DRAPlugin::Stub> dra;
  explicit Kubelet(const DraPluginConfig& c)
      : reg(regpb::Registration::NewStub(
            grpc::CreateChannel("unix:" + c.registration_socket(), grpc::InsecureChannelCredentials()))),
        dra(drapb::DRAPlugin::NewStub(
            grpc::CreateChannel("unix:" + c.dra_socket(), grpc::InsecureChannelCredentials()))) {}

  drapb::NodePrepareResourcesResponse prepare(std::vector<drapb::Claim> claims) {
    drapb::NodePrepareResourcesRequest req;
    for (auto& c : claims) *req.add_claims() = c;
    drapb::NodePrepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const auto st = dra->NodePrepareResources(&ctx, req, &resp);
    REQUIRE_OK(st);
    REQUIRE(resp.claims_size() == static_cast<int>(claims.size()));
    return resp;
  }
  drapb::NodeUnprepareResourcesResponse unprepare(std::vector<drapb::Claim> claims) {
    drapb::NodeUnprepareResourcesRequest req;
    for (auto& c : claims) *req.add_claims() = c;
    drapb::NodeUnprepareResourcesResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const auto st = dra->NodeUnprepareResources(&ctx, req, &resp);
    REQUIRE_OK(st);
    REQUIRE(resp.claims_size() == static_cast<int>(claims.size()));
    return resp;
  }
};

std::vector<RdmaDevice> cards() {
  return {make_device("erdma_0", "uverbs0", 0, PortState::Active, "eth0"),
          make_device("erdma_1", "uverbs1", 0, PortState::Active, "eth1")};
}

// The plugin, started, with the in-memory API, the two fake cards and a metrics registry.
struct Fixture {
  Dirs dirs;
  FakeKubeApi api;
  common::metrics::Registry registry;
  std::unique_ptr<DraKubeletPlugin> plugin;
  std::unique_ptr<Kubelet> kubelet;
  Fixture() { start(); }
  void start() {
    plugin = std::make_unique<DraKubeletPlugin>(
        dirs.config(), api, [] { return cards(); }, &registry);
    const auto s = plugin->start();
    REQUIRE_OK(s);
    kubelet = std::make_unique<Kubelet>(dirs.config());
  }
  void restart() {
    kubelet.reset();
    plugin->stop();
    plugin.reset();
    start();
  }
};

TEST_CASE("GetInfo names the driver, the service socket and v1.DRAPlugin and the kubelet's verdict is kept") {
  Fixture f;
  regpb::PluginInfo info;
  {
    grpc::ClientContext ctx;
    REQUIRE(f.kubelet->reg->GetInfo(&ctx, regpb::InfoRequest(), &info).ok());
  }
  CHECK(info.type() == "DRAPlugin");
  CHECK(info.name() == kDriver);
  CHECK(info.endpoint() == f.dirs.config().dra_socket());
  CHECK(std::vector<std::string>(info.supported_versions().begin(), info.supported_versions().end()) ==
        (std::vector<std::string>{"v1.DRAPlugin", "v1.DRAResourceHealth"}));
  CHECK(f.dirs.config().registration_socket() ==
        (f.dirs.root / "plugins_registry" / "erdma.aliyun.com-reg.sock").string());
  CHECK_FALSE(f.plugin->registration().notified);

  regpb::RegistrationStatus refused;
  refused.set_plugin_registered(false);
  refused.set_error("RegisterPlugin error -- plugin validation failed");
  regpb::RegistrationStatusResponse r;
  {
    grpc::ClientContext ctx;
    REQUIRE(f.kubelet->reg->NotifyRegistrationStatus(&ctx, refused, &r).ok());
  }
  CHECK(f.plugin->registration().notified);
  CHECK_FALSE(f.plugin->registration().registered);
  CHECK(f.plugin->registration().error == refused.error());
  regpb::RegistrationStatus ok;
  ok.set_plugin_registered(true);
  {
    grpc::ClientContext ctx;
    REQUIRE(f.kubelet->reg->NotifyRegistrationStatus(&ctx, ok, &r).ok());
  }
  CHECK(f.plugin->registration().registered);
  CHECK(f.plugin->registration().error.empty());
}

TEST_CASE("prepare an RDMA claim: spec with the card's nodes and env, CDI ids answered, recorded, and again the same") {
  Fixture f;
  put(f.api, claim(1, json::array({result("nics", "erdma-1")})));
  const auto resp = f.kubelet->prepare({ref(1)});
  const auto& one = resp.claims().at(uid(1));
  REQUIRE_MESSAGE(one.error().empty(), one.error());
  REQUIRE(one.devices_size() == 1);
  CHECK(one.devices(0).pool_name() == kNode);
  CHECK(one.devices(0).device_name() == "erdma-1");
  CHECK(one.devices(0).request_names(0) == "nics");
  REQUIRE(one.devices(0).cdi_device_ids_size() == 1);
  CHECK(one.devices(0).cdi_device_ids(0) == std::string(kDriver) + "/claim=" + uid(1) + "-erdma_1");

  REQUIRE(fs::exists(f.dirs.spec(1)));
  const json spec = json::parse(read(f.dirs.spec(1)));
  CHECK(spec["kind"] == "erdma.aliyun.com/claim");
  CHECK(spec["devices"][0]["name"] == uid(1) + "-erdma_1");
  CHECK(spec["devices"][0]["containerEdits"]["deviceNodes"][0]["path"] == "/dev/infiniband/uverbs1");
  CHECK(spec["containerEdits"]["deviceNodes"][0]["path"] == "/dev/infiniband/rdma_cm");
  const auto env = spec["containerEdits"]["env"];
  CHECK(std::find(env.begin(), env.end(), json("ERDMA_DEVICES=erdma_1")) != env.end());
  CHECK(std::find(env.begin(), env.end(), json("NCCL_IB_HCA==erdma_1")) != env.end());
  CHECK((fs::status(f.dirs.spec(1)).permissions() & fs::perms::others_read) != fs::perms::none);

  const auto cp = decode_checkpoint(read(f.dirs.checkpoint()));
  REQUIRE(cp.ok());
  REQUIRE(cp->claims.count(uid(1)) == 1);
  CHECK(cp->claims.at(uid(1)).devices.at(0).card == "erdma_1");
  CHECK(f.plugin->service()->recorded(uid(1)) == cp->claims.at(uid(1)));  // what the CDI hook reads
  CHECK_FALSE(f.plugin->service()->recorded(uid(2)).has_value());

  struct stat before {};
  REQUIRE(::stat(f.dirs.spec(1).c_str(), &before) == 0);
  const size_t gets = f.api.calls_of("GET");
  const auto writes = f.plugin->service()->counters().spec_writes;
  const auto again = f.kubelet->prepare({ref(1)});
  CHECK(again.claims().at(uid(1)).SerializeAsString() == one.SerializeAsString());
  struct stat after {};
  REQUIRE(::stat(f.dirs.spec(1).c_str(), &after) == 0);
  CHECK(after.st_ino == before.st_ino);  // not rewritten
  CHECK(f.plugin->service()->counters().spec_writes == writes);
  CHECK(f.api.calls_of("GET") == gets);  // answered from the record
}

TEST_CASE("an SMC-R claim gets the library mount and no uverbs") {
  Fixture f;
  put(f.api, claim(2, json::array({result("nics", "erdma-0")}), smcr_config()));
  const auto resp = f.kubelet->prepare({ref(2)});
  REQUIRE_MESSAGE(resp.claims().at(uid(2)).error().empty(), resp.claims().at(uid(2)).error());
  const json spec = json::parse(read(f.dirs.spec(2)));
  const std::string text = spec.dump();
  CHECK(text.find("uverbs") == std::string::npos);
  CHECK(text.find("rdma_cm") == std::string::npos);
  CHECK(spec["devices"][0]["containerEdits"]["mounts"][0]["containerPath"] == "/usr/lib/smc");
  CHECK(spec["devices"][0]["containerEdits"]["mounts"][0]["hostPath"] == "/var/lib/erdma-controller/lib");
  CHECK(decode_checkpoint(read(f.dirs.checkpoint()))->claims.at(uid(2)).smcr);
}

TEST_CASE("smcr.allowedNamespaces: an SMC-R claim of another namespace is refused, an RDMA claim is not") {
  Dirs dirs;
  FakeKubeApi api;
  auto cfg = dirs.config();
  cfg.smcr_allowed_namespaces = {"ml-prod"};  // the claims below are in team-a
  DraKubeletPlugin plugin(cfg, api, [] { return cards(); });
  REQUIRE_OK(plugin.start());
  Kubelet k(cfg);
  put(api, claim(40, json::array({result("nics", "erdma-0")}), smcr_config()));
  put(api, claim(41, json::array({result("nics", "erdma-1")})));
  const auto resp = k.prepare({ref(40), ref(41)});
  const std::string refused = resp.claims().at(uid(40)).error();
  CHECK(refused.find("SMC-R claims are refused in namespace team-a") != std::string::npos);
  CHECK(refused.find("smcr.allowedNamespaces") != std::string::npos);
  CHECK(resp.claims().at(uid(40)).devices_size() == 0);
  CHECK_FALSE(fs::exists(dirs.spec(40)));  // nothing written for it
  CHECK(plugin.service()->checkpoint().claims.count(uid(40)) == 0);
  CHECK(resp.claims().at(uid(41)).error().empty());  // RDMA: not SMC-R's list to decide
  CHECK(fs::exists(dirs.spec(41)));

  // The same SMC-R claim in an allowed namespace: prepared.
  Dirs dirs2;
  FakeKubeApi api2;
  auto cfg2 = dirs2.config();
  cfg2.smcr_allowed_namespaces = {"ml-prod", "team-a"};
  DraKubeletPlugin plugin2(cfg2, api2, [] { return cards(); });
  REQUIRE_OK(plugin2.start());
  Kubelet k2(cfg2);
  put(api2, claim(40, json::array({result("nics", "erdma-0")}), smcr_config()));
  const auto ok = k2.prepare({ref(40)});
  CHECK_MESSAGE(ok.claims().at(uid(40)).error().empty(), ok.claims().at(uid(40)).error());
  CHECK(fs::exists(dirs2.spec(40)));
}

TEST_CASE("a claim of two drivers: only this driver's device is prepared and answered") {
  Fixture f;
  put(f.api, claim(3, json::array({result("gpu", "gpu-0", "gpu.example.com"), result("nic", "erdma-0")})));
  const auto resp = f.kubelet->prepare({ref(3)});
  const auto& one = resp.claims().at(uid(3));
  REQUIRE_MESSAGE(one.error().empty(), one.error());
  REQUIRE(one.devices_size() == 1);
  CHECK(one.devices(0).device_name() == "erdma-0");
}

TEST_CASE("per-claim errors (recreated, not allocated, device not on the node, API down) and the others prepared") {
  Fixture f;
  json recreated = claim(4, json::array({result("r", "erdma-0")}));
  recreated["metadata"]["uid"] = uid(44);
  put(f.api, recreated);
  json unallocated = claim(5, json::array());
  unallocated["status"] = json::object();
  put(f.api, unallocated);
  put(f.api, claim(6, json::array({result("r", "erdma-9")})));
  put(f.api, claim(7, json::array({result("r", "erdma-0")})));
  put(f.api, claim(8, json::array({result("r", "erdma-1")})));
  const std::string down = kube::resource_claim_path("team-a", "claim-7");
  f.api.fail_next(FakeKubeApi::kAlways, Error{ErrorCode::Unavailable, "GET " + down + ": connection refused"}, "GET",
                  down);
  // A namespace is a DNS-1123 label: until the validator was shared, a dotted one passed the
  // reference check (it was read as a subdomain) and went into the claim's API path.
  drapb::Claim dotted = ref(10);
  dotted.set_namespace_("team.a");

  const auto resp = f.kubelet->prepare({ref(4), ref(5), ref(6), ref(7), ref(8), ref(9, "not a uid!"), dotted});
  auto err = [&](int n) { return resp.claims().at(uid(n)).error(); };
  CHECK(err(4).find("deleted and created again") != std::string::npos);
  CHECK(err(5).find("not allocated") != std::string::npos);
  CHECK(err(6).find("erdma-9") != std::string::npos);
  CHECK(err(6).find("not on this node") != std::string::npos);
  CHECK(err(7).find("API server") != std::string::npos);
  CHECK(err(7).find("connection refused") != std::string::npos);
  CHECK(resp.claims().at("not a uid!").error().find("not a Kubernetes UID") != std::string::npos);
  CHECK(err(10).find("claim team.a/claim-10 (" + uid(10) +
                     "): the namespace is not a namespace name (a DNS-1123 label): it has a '.' (character 5)") !=
        std::string::npos);
  for (int n : {4, 5, 6, 7, 10}) {
    CAPTURE(n);
    CHECK(resp.claims().at(uid(n)).devices_size() == 0);
    CHECK_FALSE(fs::exists(f.dirs.spec(n)));
  }
  CHECK(err(8).empty());
  CHECK(fs::exists(f.dirs.spec(8)));
  CHECK(f.plugin->service()->checkpoint().claims.size() == 1);
}

TEST_CASE("restart keeps prepared claims, unprepare then removes spec and record, unknown claims are fine") {
  Fixture f;
  put(f.api, claim(10, json::array({result("r", "erdma-0")})));
  const auto first = f.kubelet->prepare({ref(10)});
  REQUIRE(first.claims().at(uid(10)).error().empty());
  f.restart();
  f.api.delete_for_test(
      kube::resource_claim_path("team-a", "claim-10"));  // the API server is not asked again for a prepared claim
  const auto again = f.kubelet->prepare({ref(10)});
  CHECK(again.claims().at(uid(10)).SerializeAsString() == first.claims().at(uid(10)).SerializeAsString());
  CHECK(fs::exists(f.dirs.spec(10)));

  const auto un = f.kubelet->unprepare({ref(10), ref(11)});
  CHECK(un.claims().at(uid(10)).error().empty());
  CHECK(un.claims().at(uid(11)).error().empty());
  CHECK_FALSE(fs::exists(f.dirs.spec(10)));
  CHECK(decode_checkpoint(read(f.dirs.checkpoint()))->claims.empty());
  const auto twice = f.kubelet->unprepare({ref(10)});
  CHECK(twice.claims().at(uid(10)).error().empty());
}

TEST_CASE("a spec file gone while the claim is recorded (reboot empties /var/run/cdi) is written again") {
  Fixture f;
  put(f.api, claim(12, json::array({result("r", "erdma-0")})));
  REQUIRE(f.kubelet->prepare({ref(12)}).claims().at(uid(12)).error().empty());
  fs::remove(f.dirs.spec(12));
  const auto again = f.kubelet->prepare({ref(12)});
  CHECK(again.claims().at(uid(12)).error().empty());
  CHECK(fs::exists(f.dirs.spec(12)));
}

TEST_CASE("latency histograms: one observation per kubelet call, result=\"error\" when a claim of it failed") {
  Fixture f;
  const auto prepares = [&](const std::string& result) {
    return erdma::testing::sample(f.registry,
                                  "erdma_agent_dra_prepare_duration_seconds_count{result=\"" + result + "\"}");
  };
  const auto unprepares = [&](const std::string& result) {
    return erdma::testing::sample(f.registry,
                                  "erdma_agent_dra_unprepare_duration_seconds_count{result=\"" + result + "\"}");
  };
  // Registered at start, before any call: the dashboard and the alert see zeros, not nothing.
  CHECK(prepares("ok") == 0);
  CHECK(prepares("error") == 0);
  CHECK(unprepares("ok") == 0);
  CHECK(unprepares("error") == 0);

  put(f.api, claim(30, json::array({result("r", "erdma-0")})));
  put(f.api, claim(31, json::array({result("r", "erdma-1")})));
  const auto two = f.kubelet->prepare({ref(30), ref(31)});
  REQUIRE(two.claims().at(uid(30)).error().empty());
  REQUIRE(two.claims().at(uid(31)).error().empty());
  CHECK(prepares("ok") == 1);  // two claims, one call: one pod's wait
  CHECK(prepares("error") == 0);
  CHECK(erdma::testing::sample(f.registry,
                               "erdma_agent_dra_prepare_duration_seconds_bucket{result=\"ok\",le=\"+Inf\"}") == 1);

  // A claim the API server does not have, beside one it has: the pod does not start, so the
  // call counts as an error.
  put(f.api, claim(32, json::array({result("r", "erdma-0")})));
  const auto mixed = f.kubelet->prepare({ref(32), ref(33)});
  CHECK(mixed.claims().at(uid(32)).error().empty());
  CHECK_FALSE(mixed.claims().at(uid(33)).error().empty());
  CHECK(prepares("ok") == 1);
  CHECK(prepares("error") == 1);

  const auto un = f.kubelet->unprepare({ref(30)});
  CHECK(un.claims().at(uid(30)).error().empty());
  CHECK(unprepares("ok") == 1);
  CHECK(unprepares("error") == 0);

  // A directory where claim 31's spec file was: removing the spec fails, the claim stays prepared.
  REQUIRE(fs::remove(f.dirs.spec(31)));
  REQUIRE(fs::create_directory(f.dirs.spec(31)));
  const auto failed = f.kubelet->unprepare({ref(31)});
  CHECK(failed.claims().at(uid(31)).error().find("removing its CDI spec failed") != std::string::npos);
  CHECK(unprepares("ok") == 1);
  CHECK(unprepares("error") == 1);
  CHECK(f.plugin->service()->checkpoint().claims.count(uid(31)) == 1);
}

TEST_CASE("start: a corrupt checkpoint refuses to start and deletes nothing, stale specs are removed") {
  Dirs dirs;
  FakeKubeApi api;
  const auto cfg = dirs.config();
  fs::create_directories(cfg.plugin_dir);
  fs::create_directories(cfg.cdi_dir);
  const fs::path stale = dirs.spec(20);
  const fs::path foreign = dirs.cdi() / "vendor.example.com-gpu.json";
  std::ofstream(stale) << "{}";
  std::ofstream(foreign) << "{}";

  SUBCASE("corrupt") {
    std::ofstream(dirs.checkpoint()) << "{\"kind\": \"erdma-agent/dra-checkpoint\", \"version\": 1, \"claims\": [";
    DraKubeletPlugin plugin(cfg, api, [] { return cards(); });
    const auto s = plugin.start();
    REQUIRE_FALSE(s.ok());
    CHECK(s.error().message.find(dirs.checkpoint().string()) != std::string::npos);
    CHECK(s.error().message.find("deletes nothing") != std::string::npos);
    CHECK(fs::exists(stale));
    CHECK(fs::exists(foreign));
    CHECK(fs::exists(dirs.checkpoint()));
    CHECK_FALSE(fs::exists(cfg.registration_socket()));
    CHECK_FALSE(fs::exists(cfg.dra_socket()));
  }
  SUBCASE("missing checkpoint: empty, and the spec no claim owns goes") {
    DraKubeletPlugin plugin(cfg, api, [] { return cards(); });
    REQUIRE(plugin.start().ok());
    CHECK_FALSE(fs::exists(stale));
    CHECK(fs::exists(foreign));
    CHECK(plugin.service()->removed_at_start() == std::vector<std::string>{stale.filename().string()});
    plugin.stop();
    CHECK_FALSE(fs::exists(cfg.registration_socket()));
  }
}

TEST_CASE("concurrent prepare calls are serialized and all recorded") {
  Fixture f;
  std::atomic<int> inside{0}, most{0};
  // Again, with a scan (called under the service's lock) that measures overlap.
  f.kubelet.reset();
  f.plugin->stop();
  f.plugin = std::make_unique<DraKubeletPlugin>(f.dirs.config(), f.api, [&] {
    const int now = ++inside;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // widens the window; not a deadline
    --inside;
    return cards();
  });
  REQUIRE(f.plugin->start().ok());
  f.kubelet = std::make_unique<Kubelet>(f.dirs.config());
  constexpr int kThreads = 8;
  for (int n = 100; n < 100 + kThreads; ++n) {
    put(f.api, claim(n, json::array({result("r", n % 2 ? "erdma-0" : "erdma-1")})));
  }
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int n = 100; n < 100 + kThreads; ++n) {
    threads.emplace_back([&, n] {
      Kubelet k(f.dirs.config());
      const auto r = k.prepare({ref(n)});
      if (r.claims().at(uid(n)).error().empty()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  CHECK(ok == kThreads);
  CHECK(most == 1);
  const auto cp = decode_checkpoint(read(f.dirs.checkpoint()));
  REQUIRE(cp.ok());
  CHECK(cp->claims.size() == static_cast<size_t>(kThreads));
}

TEST_CASE("the registration socket removed (as by hand or a cleanup) is served again") {
  Fixture f;
  const auto path = f.dirs.config().registration_socket();
  REQUIRE(fs::is_socket(path));
  REQUIRE(::unlink(path.c_str()) == 0);
  CHECK(erdma::testing::eventually([&] { return f.plugin->reregistrations() == 1 && fs::is_socket(path); }));
  Kubelet k(f.dirs.config());
  regpb::PluginInfo info;
  grpc::ClientContext ctx;
  REQUIRE(k.reg->GetInfo(&ctx, regpb::InfoRequest(), &info).ok());
  CHECK(info.name() == kDriver);
}

// Swaps two paths in one step (renameat2 RENAME_EXCHANGE), so the loop never sees neither.
void exchange(const fs::path& a, const fs::path& b) {
  REQUIRE(::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0);
}

// A socket that cannot be served again is tried at every check (50 ms here) and logged once per
// distinct error: the first failure, a different one, and the first one again after a success.
TEST_CASE("a socket that cannot be served again is logged once per distinct error, not at every check") {
  erdma::testing::LogCapture log;
  Fixture f;
  using erdma::testing::eventually;
  const auto checks_pass = [&](uint64_t n) {
    const uint64_t from = f.plugin->socket_checks_for_test();
    return eventually([&] { return f.plugin->socket_checks_for_test() >= from + n; });
  };

  SUBCASE("the DRA socket") {
    const std::string line = R"("msg":"cannot serve the DRA socket; retrying")";
    const fs::path socket = f.dirs.config().dra_socket();
    const fs::path dir = socket.parent_path();
    // Moved away in one step: removing its entries one by one would let the loop serve again
    // in between.
    const auto take_away = [&](const char* where) { fs::rename(dir, f.dirs.root / where); };
    take_away("gone-1");  // the plugin directory gone
    REQUIRE(eventually([&] { return log.count(line) == 1; }));
    REQUIRE(checks_pass(3));
    CHECK(log.count(line) == 1);
    CHECK(log.count("\"error\":\"directory " + dir.string() + " does not exist") == 1);
    // Back, with a file where the socket belongs: another error.
    const fs::path blocked = f.dirs.root / "blocked";
    fs::create_directories(blocked);
    std::ofstream(blocked / socket.filename()) << "not a socket";
    fs::rename(blocked, dir);
    REQUIRE(eventually([&] { return log.count(line) == 2; }));
    REQUIRE(checks_pass(3));
    CHECK(log.count(line) == 2);
    CHECK(log.count("\"error\":\"" + socket.string() + " exists and is not a socket") == 1);
    fs::remove(socket);  // served again
    REQUIRE(eventually([&] { return fs::is_socket(socket); }));
    take_away("gone-2");  // the first error is news again after the success
    REQUIRE(eventually([&] { return log.count(line) == 3; }));
    REQUIRE(checks_pass(3));
    CHECK(log.count(line) == 3);
  }
  SUBCASE("the registration socket") {
    const std::string line = R"("msg":"cannot serve the DRA registration socket; retrying")";
    const fs::path registry = f.dirs.config().registry_dir;
    const fs::path socket = f.dirs.config().registration_socket();
    // A file where the registry directory was (the loop cannot make the directory again).
    const fs::path file = f.dirs.root / "file";
    std::ofstream(file) << "not a directory";
    exchange(file, registry);
    REQUIRE(eventually([&] { return log.count(line) == 1; }));
    REQUIRE(checks_pass(3));
    CHECK(log.count(line) == 1);
    CHECK(log.count("\"error\":\"directory " + registry.string() + " does not exist") == 1);
    // A directory again, with a directory where the socket belongs: another error.
    const fs::path blocked = f.dirs.root / "blocked";
    fs::create_directories(blocked / socket.filename());
    exchange(blocked, registry);
    REQUIRE(eventually([&] { return log.count(line) == 2; }));
    REQUIRE(checks_pass(3));
    CHECK(log.count(line) == 2);
    CHECK(log.count("\"error\":\"" + socket.string() + " exists and is not a socket") == 1);
    const uint64_t served = f.plugin->reregistrations();
    fs::remove(socket);  // served again
    REQUIRE(eventually([&] { return f.plugin->reregistrations() == served + 1; }));
    exchange(blocked, registry);  // the file (now at `blocked`) once more: news again after the success
    REQUIRE(eventually([&] { return log.count(line) == 3; }));
    REQUIRE(checks_pass(3));
    CHECK(log.count(line) == 3);
  }
}

TEST_CASE("with report_status the claim's status.devices get this driver's entries with networkData") {
  Dirs dirs;
  FakeKubeApi api;
  auto cfg = dirs.config();
  cfg.report_status = true;
  cfg.networks = [] {
    return std::map<std::string, CardNetwork>{{"erdma_1", CardNetwork{"eth1", {"10.0.1.5/24"}, "00:16:3e:00:00:02"}}};
  };
  DraKubeletPlugin plugin(cfg, api, [] { return cards(); });
  REQUIRE(plugin.start().ok());
  Kubelet k(cfg);
  json c = claim(30, json::array({result("gpu", "gpu-0", "gpu.example.com"), result("nic", "erdma-1")}));
  c["status"]["devices"] = json::array({json{{"driver", "gpu.example.com"}, {"pool", "p"}, {"device", "gpu-0"}}});
  put(api, c);
  const std::string path = kube::resource_claim_path("team-a", "claim-30");
  api.before_next_write([&] {  // someone wrote the claim meanwhile: a 409, read again, write again
    json other = *api.object(path);
    other["metadata"]["labels"] = {{"someone", "else"}};
    api.put_for_test(path, other);
  });
  REQUIRE(k.prepare({ref(30)}).claims().at(uid(30)).error().empty());
  const json stored = *api.object(path);
  REQUIRE(stored["status"]["devices"].size() == 2);
  CHECK(stored["status"]["devices"][0]["driver"] == "gpu.example.com");
  CHECK(stored["status"]["devices"][1] ==
        json::parse(R"({"driver":"erdma.aliyun.com","pool":"node-1","device":"erdma-1",
                        "networkData":{"interfaceName":"eth1","ips":["10.0.1.5/24"],"hardwareAddress":"00:16:3e:00:00:02"}})"));
  CHECK(plugin.service()->counters().status_reports == 1);
  CHECK(api.calls_of("PUT") == 2);
}

TEST_CASE("pod_side_status: an SMC-R claim names no interface until the pod's side is reported, then the pod's") {
  Dirs dirs;
  FakeKubeApi api;
  auto cfg = dirs.config();
  cfg.report_status = true;
  cfg.pod_side_status = true;
  cfg.networks = [] {
    return std::map<std::string, CardNetwork>{{"erdma_0", CardNetwork{"eth0", {"10.0.0.5/24"}, "00:16:3e:00:00:01"}}};
  };
  DraKubeletPlugin plugin(cfg, api, [] { return cards(); });
  REQUIRE(plugin.start().ok());
  Kubelet k(cfg);
  put(api, claim(31, json::array({result("nic", "erdma-0")}), smcr_config()));
  REQUIRE(k.prepare({ref(31)}).claims().at(uid(31)).error().empty());
  const std::string path = kube::resource_claim_path("team-a", "claim-31");
  json entry = (*api.object(path))["status"]["devices"].at(0);
  CHECK_FALSE(entry.contains("networkData"));  // never the node's eth0 for a pod that may have its own netns
  CHECK(entry["conditions"][0]["type"] == "Ready");
  CHECK(entry["conditions"][0]["status"] == "False");
  CHECK(entry["conditions"][0]["reason"] == "WaitingForPod");

  const auto claim_record = plugin.service()->recorded(uid(31));
  REQUIRE(claim_record.has_value());
  const auto pod_net = every_card(*claim_record, CardNetwork{"eth0", {"10.89.1.5/24"}, "0a:58:0a:59:01:05"});
  plugin.service()->report_pod_side(*claim_record, pod_net,
                                    PodSideStatus{true, "PodNetnsSetUp", "configured", "2026-12-08T01:00:00Z"});
  entry = (*api.object(path))["status"]["devices"].at(0);
  CHECK(entry["networkData"] == json::parse(R"({"interfaceName":"eth0","ips":["10.89.1.5/24"],
                                               "hardwareAddress":"0a:58:0a:59:01:05"})"));
  CHECK(entry["conditions"][0]["status"] == "True");
  CHECK(entry["conditions"][0]["reason"] == "PodNetnsSetUp");
  // The next container's hook says the same: the condition keeps its time.
  plugin.service()->report_pod_side(*claim_record, pod_net,
                                    PodSideStatus{true, "PodNetnsSetUp", "configured", "2026-12-08T02:00:00Z"});
  CHECK((*api.object(path))["status"]["devices"][0]["conditions"][0]["lastTransitionTime"] == "2026-12-08T01:00:00Z");
  const auto reports = plugin.service()->counters().status_reports;
  CHECK(plugin.service()->counters().status_errors == 0);

  api.delete_for_test(path);  // the claim is gone: counted, nothing thrown
  plugin.service()->report_pod_side(*claim_record, pod_net,
                                    PodSideStatus{false, "PodSetupFailed", "gone", "2026-12-08T03:00:00Z"});
  CHECK(plugin.service()->counters().status_errors == 1);
  CHECK(plugin.service()->counters().status_reports == reports);
}

TEST_CASE("on_prepared: once per pod the claim is reserved for, when newly prepared, naming mode and cards") {
  Dirs dirs;
  FakeKubeApi api;
  auto cfg = dirs.config();
  std::mutex mu;
  std::vector<std::vector<std::string>> told;
  cfg.on_prepared = [&](const std::string& pod, const std::string& pod_uid, const std::string& message) {
    std::lock_guard lock(mu);
    told.push_back({pod, pod_uid, message});
  };
  DraKubeletPlugin plugin(cfg, api, [] { return cards(); });
  REQUIRE(plugin.start().ok());
  Kubelet k(cfg);
  json c = claim(31, json::array({result("nics", "erdma-0"), result("nics", "erdma-1")}));
  c["status"]["reservedFor"] = json::array({json{{"resource", "pods"}, {"name", "train-0"}, {"uid", uid(90)}},
                                            json{{"resource", "widgets"}, {"name", "w"}, {"uid", uid(91)}}});
  put(api, c);
  REQUIRE(k.prepare({ref(31)}).claims().at(uid(31)).error().empty());
  REQUIRE(k.prepare({ref(31)}).claims().at(uid(31)).error().empty());  // already prepared: nothing new to tell
  std::lock_guard lock(mu);
  REQUIRE(told.size() == 1);
  CHECK(told[0][0] == "team-a/train-0");
  CHECK(told[0][1] == uid(90));  // the reservedFor entry's: an Event needs it, and the agent never reads pods
  CHECK(told[0][2] == "claim claim-31 prepared by the DRA driver erdma.aliyun.com: rdma, cards erdma_0,erdma_1");
}

TEST_CASE("the health stream: every card by its device name, again when one goes down, stop ends it") {
  Dirs dirs;
  FakeKubeApi api;
  std::mutex mu;
  std::vector<RdmaDevice> now = cards();
  auto cfg = dirs.config();
  cfg.health_refresh = std::chrono::hours(1);  // only changes send
  DraKubeletPlugin plugin(cfg, api, [&] {
    std::lock_guard lock(mu);
    return now;
  });
  REQUIRE(plugin.start().ok());
  auto stub = healthpb::DRAResourceHealth::NewStub(
      grpc::CreateChannel("unix:" + cfg.dra_socket(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  auto stream = stub->NodeWatchResources(&ctx, healthpb::NodeWatchResourcesRequest());
  healthpb::NodeWatchResourcesResponse r;
  REQUIRE(stream->Read(&r));
  REQUIRE(r.devices_size() == 2);
  CHECK(r.devices(0).device().pool_name() == kNode);
  CHECK(r.devices(0).device().device_name() == "erdma-0");
  CHECK(r.devices(0).health() == healthpb::HEALTHY);
  CHECK(r.devices(1).health() == healthpb::HEALTHY);
  CHECK(r.devices(0).last_updated_time() > 0);

  plugin.devices_changed();  // nothing changed: nothing sent
  {
    std::lock_guard lock(mu);
    now[0].ports[0].state = PortState::Down;
  }
  plugin.devices_changed();
  REQUIRE(stream->Read(&r));
  CHECK(r.devices(0).health() == healthpb::UNHEALTHY);
  CHECK(r.devices(0).message().find("DOWN") != std::string::npos);
  CHECK(r.devices(1).health() == healthpb::HEALTHY);

  plugin.stop();
  CHECK_FALSE(stream->Read(&r));
}

}  // namespace
}  // namespace erdma::agent::dra
