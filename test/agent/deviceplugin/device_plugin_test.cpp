// The device plugin end to end, in process: the real runtime and gRPC server, a fake device
// source, and a fake kubelet (real Registration server + real DevicePlugin clients).
#include "agent/deviceplugin/plugin_runtime.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <doctest/doctest.h>
#include <sys/stat.h>

#include "test/eventually.hpp"
#include "test/fakes/fake_kubelet.hpp"
#include "test/fakes/fake_rdma_devices.hpp"
#include "test/log_capture.hpp"
#include "test/support.hpp"

namespace erdma::agent {
using erdma::testing::eventually;

namespace {

using namespace std::chrono_literals;
using erdma::testing::TempDir;
using testing::count_health;
using testing::FakeKubelet;
using testing::FakeRdmaDevices;
using testing::make_device;
using testing::WatchStream;

// Generous bounds: these waits end as soon as the condition holds.
constexpr auto kWait = 10s;

class RecordingHook final : public PreStartHook {
 public:
  Status pre_start(const std::vector<std::string>& ids, const std::vector<std::string>& devices,
                   std::chrono::steady_clock::time_point deadline) override {
    std::lock_guard lock(mu);
    calls.push_back({ids, devices});
    had_future_deadline = deadline > std::chrono::steady_clock::now();
    if (fail) return make_error(ErrorCode::FailedPrecondition, "pod network not ready");
    return {};
  }
  std::mutex mu;
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> calls;
  bool had_future_deadline = false;
  bool fail = false;
};

RuntimeTiming fast_timing() {
  RuntimeTiming t;
  t.register_timeout = 2000ms;
  t.register_backoff_min = 20ms;
  t.register_backoff_max = 200ms;
  t.socket_check = 200ms;
  t.shutdown_grace = 100ms;
  return t;
}

struct Harness {
  TempDir dir;
  AgentConfig cfg;
  FakeRdmaDevices devices{
      {make_device("erdma_0", "uverbs0", 0), make_device("erdma_1", "uverbs1", 1, PortState::Active, "eth1")}};
  RecordingHook hook;
  common::metrics::Registry registry;
  AgentMetrics metrics{registry};
  std::unique_ptr<PluginRuntime> runtime;
  FakeKubelet kubelet{dir.path()};

  explicit Harness(bool start_kubelet = true, std::string plugin_dir = "",
                   const std::function<void(AgentConfig&)>& tweak = {}) {
    cfg.device_plugin_dir = plugin_dir.empty() ? dir.path() : plugin_dir;
    cfg.slots_per_device = 4;
    cfg.rescan_seconds = 3600;  // tests ask for scans explicitly
    cfg.metrics_listen = "";
    if (tweak) tweak(cfg);
    if (start_kubelet) kubelet.start();
    runtime = std::make_unique<PluginRuntime>(cfg, devices, hook, &metrics, fast_timing());
    REQUIRE(runtime->start().ok());
    if (start_kubelet) {
      REQUIRE(kubelet.wait_for_registrations(1, kWait).has_value());
      // Kubelet has the request before the plugin has the answer.
      REQUIRE(eventually([&] { return runtime->registered(); }));
    }
  }
  ~Harness() {
    runtime->stop();
    kubelet.stop();
  }
  std::unique_ptr<v1beta1::DevicePlugin::Stub> client() const { return kubelet.plugin(kPluginSocketName); }
};

grpc::Status allocate(v1beta1::DevicePlugin::Stub& stub, const std::vector<std::vector<std::string>>& containers,
                      v1beta1::AllocateResponse& response) {
  v1beta1::AllocateRequest req;
  for (const auto& ids : containers) {
    auto* c = req.add_container_requests();
    for (const auto& id : ids) c->add_devices_ids(id);
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kWait);
  return stub.Allocate(&ctx, req, &response);
}

bool is_socket(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

}  // namespace

TEST_CASE("registers with kubelet: version, endpoint, resource name, options") {
  Harness h;
  const auto req = h.kubelet.wait_for_registrations(1, kWait);
  REQUIRE(req.has_value());
  CHECK(req->version() == "v1beta1");
  CHECK(req->endpoint() == "erdma.sock");
  CHECK(req->resource_name() == "aliyun/erdma");
  CHECK(req->has_options());
  CHECK(req->options().pre_start_required());
  CHECK(req->options().get_preferred_allocation_available());
  CHECK(is_socket(h.cfg.plugin_socket_path()));
  CHECK(h.runtime->registered());
  CHECK(h.metrics.registrations_ok.value() == 1);
}

TEST_CASE("the SMC-R resource: its own socket and registration; Allocate mounts the library, nothing else") {
  Harness h;  // the eRDMA devices, registered first
  auto endpoint = smcr_endpoint(h.cfg);
  REQUIRE(endpoint.has_value());
  PluginRuntime smcr(h.cfg, *endpoint, h.devices, h.hook, nullptr, fast_timing());
  REQUIRE(smcr.start().ok());
  const auto req = h.kubelet.wait_for_registrations(2, kWait);
  REQUIRE(req.has_value());
  CHECK(req->endpoint() == "erdma-smcr.sock");
  CHECK(req->resource_name() == "aliyun/erdma-smcr");
  CHECK(req->options().pre_start_required());  // the pod's netns is set up at PreStart, as for eRDMA
  REQUIRE(eventually([&] { return smcr.registered(); }));
  CHECK(is_socket(h.cfg.smcr_plugin_socket_path()));

  auto stub = h.kubelet.plugin(kSmcrPluginSocketName);
  v1beta1::AllocateResponse resp;
  // Slot 200 of a device: the SMC-R resource has 256 per device, beyond the eRDMA resource's 4.
  const auto status = allocate(*stub, {{"erdma_0-200"}, {"erdma_1-0"}}, resp);
  REQUIRE_OK(status);
  REQUIRE(resp.container_responses_size() == 2);
  for (const auto& c : resp.container_responses()) {
    CHECK(c.devices_size() == 0);  // no /dev/infiniband/uverbsN, no rdma_cm
    CHECK(c.envs().empty());       // no NCCL_IB_HCA
    REQUIRE(c.mounts_size() == 1);
    CHECK(c.mounts(0).container_path() == "/usr/lib/smc");
    CHECK(c.mounts(0).host_path() == h.cfg.smcr.preload_host_dir);
    CHECK(c.mounts(0).read_only());
  }
  // The eRDMA resource's answer is unchanged: devices, env, and the library as well.
  v1beta1::AllocateResponse erdma;
  REQUIRE(allocate(*h.client(), {{"erdma_0-0"}}, erdma).ok());
  CHECK(erdma.container_responses(0).devices_size() == 2);
  CHECK(erdma.container_responses(0).envs().count("NCCL_IB_HCA") == 1);
  smcr.stop();
  CHECK_FALSE(is_socket(h.cfg.smcr_plugin_socket_path()));
}

TEST_CASE("dra.extendedResource: the eRDMA resource is scanned but never served or registered; SMC-R's still is") {
  TempDir dir;
  AgentConfig cfg;
  cfg.device_plugin_dir = dir.path();
  cfg.rescan_seconds = 3600;
  cfg.metrics_listen = "";
  cfg.dra.enabled = true;
  cfg.dra.extended_resource = true;
  FakeRdmaDevices devices{{make_device("erdma_0", "uverbs0", 0)}};
  RecordingHook hook;
  FakeKubelet kubelet{dir.path()};
  kubelet.start();
  PluginRuntime erdma(cfg, devices, hook, nullptr, fast_timing());
  REQUIRE(erdma.start().ok());
  auto endpoint = smcr_endpoint(cfg);
  REQUIRE(endpoint.has_value());
  PluginRuntime smcr(cfg, *endpoint, devices, hook, nullptr, fast_timing());
  REQUIRE(smcr.start().ok());
  const auto req = kubelet.wait_for_registrations(1, kWait);
  REQUIRE(req.has_value());
  CHECK(req->resource_name() == "aliyun/erdma-smcr");
  // Several passes of the eRDMA loop after the SMC-R registration: nothing of its own appeared.
  const auto passes = erdma.loop_passes();
  erdma.request_rescan();
  REQUIRE(eventually([&] { return erdma.loop_passes() >= passes + 2; }));
  CHECK_FALSE(is_socket(cfg.plugin_socket_path()));
  CHECK_FALSE(kubelet.wait_for_registrations(2, std::chrono::milliseconds(0)).has_value());
  CHECK(erdma.registered());  // not meant to register: ready
  CHECK(erdma.state().snapshot()->devices.size() == 1);
  smcr.stop();
  erdma.stop();
  kubelet.stop();
}

TEST_CASE("GetDevicePluginOptions announces PreStartContainer and GetPreferredAllocation") {
  Harness h;
  auto stub = h.client();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kWait);
  v1beta1::DevicePluginOptions opts;
  REQUIRE(stub->GetDevicePluginOptions(&ctx, v1beta1::Empty(), &opts).ok());
  CHECK(opts.pre_start_required());
  CHECK(opts.get_preferred_allocation_available());
}

TEST_CASE("ListAndWatch lists every slot with health and NUMA topology") {
  Harness h;
  h.devices.set_devices({make_device("erdma_0", "uverbs0", 0), make_device("erdma_1", "uverbs1", 1),
                         make_device("erdma_2", "uverbs2", -1, PortState::Down)});
  h.runtime->request_rescan();
  auto stub = h.client();
  WatchStream watch(*stub);
  auto r = watch.until([](const auto& resp) { return resp.devices_size() == 12; }, kWait);
  REQUIRE(r.has_value());
  std::set<std::string> ids;
  for (const auto& d : r->devices()) {
    ids.insert(d.id());
    CAPTURE(d.id());
    if (d.id().starts_with("erdma_2-")) {
      CHECK(d.health() == "Unhealthy");
      CHECK_FALSE(d.has_topology());  // unknown NUMA node: no topology rather than a wrong one
    } else {
      CHECK(d.health() == "Healthy");
      REQUIRE(d.topology().nodes_size() == 1);
      CHECK(d.topology().nodes(0).id() == (d.id().starts_with("erdma_0-") ? 0 : 1));
    }
  }
  CHECK(ids == std::set<std::string>{"erdma_0-0", "erdma_0-1", "erdma_0-2", "erdma_0-3", "erdma_1-0", "erdma_1-1",
                                     "erdma_1-2", "erdma_1-3", "erdma_2-0", "erdma_2-1", "erdma_2-2", "erdma_2-3"});
}

TEST_CASE("ListAndWatch sends an update when a device turns unhealthy and again when it recovers") {
  Harness h;
  auto stub = h.client();
  WatchStream watch(*stub);
  auto first = watch.next(kWait);
  REQUIRE(first.has_value());
  CHECK(count_health(*first, "erdma_1", "Healthy") == 4);

  REQUIRE(h.devices.set_port_state("erdma_1", PortState::Down));
  h.runtime->request_rescan();
  auto down = watch.until([](const auto& r) { return count_health(r, "erdma_1", "Unhealthy") == 4; }, kWait);
  REQUIRE(down.has_value());
  CHECK(count_health(*down, "erdma_0", "Healthy") == 4);

  REQUIRE(h.devices.set_port_state("erdma_1", PortState::Active));
  h.runtime->request_rescan();
  auto up = watch.until([](const auto& r) { return count_health(r, "erdma_1", "Healthy") == 4; }, kWait);
  REQUIRE(up.has_value());
  CHECK(h.metrics.health_changes.value() >= 2);

  // A scan that changes nothing sends nothing.
  const int before = h.devices.scans();
  h.runtime->request_rescan();
  CHECK(eventually([&] { return h.devices.scans() > before; }));
  CHECK_FALSE(watch.next(300ms).has_value());
}

TEST_CASE("a device that disappears is withdrawn and one that appears is added") {
  Harness h;
  auto stub = h.client();
  WatchStream watch(*stub);
  REQUIRE(watch.next(kWait).has_value());
  h.devices.set_devices({make_device("erdma_0", "uverbs0", 0)});
  h.runtime->request_rescan();
  REQUIRE(watch.until([](const auto& r) { return r.devices_size() == 4; }, kWait).has_value());
  h.devices.set_devices({make_device("erdma_0", "uverbs0", 0), make_device("erdma_3", "uverbs3", 1)});
  h.runtime->request_rescan();
  auto r = watch.until([](const auto& resp) { return count_health(resp, "erdma_3", "Healthy") == 4; }, kWait);
  REQUIRE(r.has_value());
  CHECK(r->devices_size() == 8);
}

TEST_CASE("Allocate gives uverbs and rdma_cm device specs and names the devices in ERDMA_DEVICES") {
  Harness h;
  auto stub = h.client();
  v1beta1::AllocateResponse resp;
  const auto status = allocate(*stub, {{"erdma_0-1"}, {"erdma_1-2", "erdma_0-2"}}, resp);
  REQUIRE_OK(status);
  REQUIRE(resp.container_responses_size() == 2);

  const auto& c0 = resp.container_responses(0);
  CHECK(c0.envs().at("ERDMA_DEVICES") == "erdma_0");
  REQUIRE(c0.devices_size() == 2);
  CHECK(c0.devices(0).container_path() == "/dev/infiniband/uverbs0");
  CHECK(c0.devices(0).host_path() == "/dev/infiniband/uverbs0");
  CHECK(c0.devices(0).permissions() == "rw");
  CHECK(c0.devices(1).container_path() == "/dev/infiniband/rdma_cm");
  CHECK(c0.devices(1).host_path() == "/dev/infiniband/rdma_cm");
  CHECK(c0.devices(1).permissions() == "rw");
  // The SMC-R preload library's directory, read-only, where the webhook's LD_PRELOAD points.
  REQUIRE(c0.mounts_size() == 1);
  CHECK(c0.mounts(0).container_path() == "/usr/lib/smc");
  CHECK(c0.mounts(0).host_path() == h.cfg.smcr.preload_host_dir);
  CHECK(c0.mounts(0).read_only());

  const auto& c1 = resp.container_responses(1);
  CHECK(c1.envs().at("ERDMA_DEVICES") == "erdma_0,erdma_1");
  REQUIRE(c1.devices_size() == 3);
  CHECK(c1.devices(0).host_path() == "/dev/infiniband/uverbs0");
  CHECK(c1.devices(1).host_path() == "/dev/infiniband/uverbs1");
  CHECK(c1.devices(2).host_path() == "/dev/infiniband/rdma_cm");
  CHECK(c1.mounts_size() == 1);
  CHECK(h.metrics.allocate_ok.value() == 1);
  CHECK(h.metrics.slots_allocated.value() == 3);
}

TEST_CASE("Allocate leaves rdma_cm out when the host has none") {
  Harness h;
  h.devices.set_rdma_cm_present(false);
  h.runtime->request_rescan();
  auto stub = h.client();
  v1beta1::AllocateResponse resp;
  // The snapshot changes without a health change; wait until the scan has been applied.
  REQUIRE(eventually([&] { return !h.runtime->state().snapshot()->rdma_cm_present; }));
  REQUIRE(allocate(*stub, {{"erdma_1-0"}}, resp).ok());
  REQUIRE(resp.container_responses(0).devices_size() == 1);
  CHECK(resp.container_responses(0).devices(0).host_path() == "/dev/infiniband/uverbs1");
}

TEST_CASE("Allocate refuses unknown, malformed and empty requests with a clear status") {
  Harness h;
  auto stub = h.client();
  struct Case {
    const char* name;
    std::vector<std::vector<std::string>> containers;
    grpc::StatusCode code;
    const char* in_message;
  };
  const std::vector<Case> cases = {
      {"unknown device", {{"erdma_9-1"}}, grpc::StatusCode::NOT_FOUND, "erdma_9-1"},
      {"unknown among known", {{"erdma_0-1", "mlx5_0-3"}}, grpc::StatusCode::NOT_FOUND, "mlx5_0-3"},
      {"slot beyond slotsPerDevice", {{"erdma_0-4"}}, grpc::StatusCode::INVALID_ARGUMENT, "erdma_0-4"},
      {"not a slot ID", {{"erdma_0"}}, grpc::StatusCode::INVALID_ARGUMENT, "erdma_0"},
      {"empty ID", {{""}}, grpc::StatusCode::INVALID_ARGUMENT, "device ID"},
      {"duplicate", {{"erdma_0-1", "erdma_0-1"}}, grpc::StatusCode::INVALID_ARGUMENT, "duplicate"},
      {"container without IDs", {{}}, grpc::StatusCode::INVALID_ARGUMENT, "no device IDs"},
      {"no containers", {}, grpc::StatusCode::INVALID_ARGUMENT, "no container requests"},
      {"second container bad", {{"erdma_0-0"}, {"erdma_7-0"}}, grpc::StatusCode::NOT_FOUND, "container request 1"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    v1beta1::AllocateResponse resp;
    const auto status = allocate(*stub, c.containers, resp);
    CHECK(status.error_code() == c.code);
    CHECK_MESSAGE(status.error_message().find(c.in_message) != std::string::npos, status.error_message());
  }
  CHECK(h.metrics.allocate_error.value() == cases.size());
  CHECK(h.metrics.allocate_ok.value() == 0);

  // Absurd size: more IDs than the node advertises.
  std::vector<std::string> many;
  for (int i = 0; i < 20000; ++i) many.push_back("erdma_0-" + std::to_string(i % 4));
  v1beta1::AllocateResponse resp;
  const auto status = allocate(*stub, {many}, resp);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(status.error_message().find("20000") != std::string::npos);
}

std::vector<std::string> ids_of(const v1beta1::PreferredAllocationResponse& r) {
  const auto& ids = r.container_responses(0).deviceids();
  return std::vector<std::string>(ids.begin(), ids.end());
}

grpc::Status ask_preferred(v1beta1::DevicePlugin::Stub& stub, std::vector<std::string> available,
                           std::vector<std::string> must, int size, v1beta1::PreferredAllocationResponse& out) {
  v1beta1::PreferredAllocationRequest req;
  auto* c = req.add_container_requests();
  for (auto& id : available) c->add_available_deviceids(id);
  for (auto& id : must) c->add_must_include_deviceids(id);
  c->set_allocation_size(size);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kWait);
  return stub.GetPreferredAllocation(&ctx, req, &out);
}

TEST_CASE("two-device node: a request for 2 gets both devices, Allocate gives both uverbs and NCCL env naming both") {
  Harness h;
  // The NCCL GPU node: one device per NUMA node, each with its IPv4 RoCE v2 GID at another index.
  auto d0 = make_device("erdma_0", "uverbs0", 0);
  d0.ports[0].gids = {{0, "fe80:0000:0000:0000:0216:3eff:fe00:0001", GidType::RoceV2, "eth0"},
                      {1, "0000:0000:0000:0000:0000:ffff:0a00:0005", GidType::RoceV2, "eth0"}};
  auto d1 = make_device("erdma_1", "uverbs1", 1, PortState::Active, "eth1");
  d1.ports[0].gids = {{2, "0000:0000:0000:0000:0000:ffff:0a00:0106", GidType::RoceV2, "eth1"}};
  h.devices.set_devices({d0, d1});
  h.runtime->request_rescan();
  REQUIRE(eventually([&] {
    return !h.runtime->state().snapshot()->devices.empty() &&
           !h.runtime->state().snapshot()->devices[0].ports[0].gids.empty();
  }));
  auto stub = h.client();
  std::vector<std::string> all;
  for (const char* d : {"erdma_0", "erdma_1"}) {
    for (int i = 0; i < 4; ++i) all.push_back(std::string(d) + "-" + std::to_string(i));
  }
  v1beta1::PreferredAllocationResponse r;
  REQUIRE(ask_preferred(*stub, all, {}, 2, r).ok());
  CHECK(ids_of(r) == std::vector<std::string>{"erdma_0-0", "erdma_1-0"});

  v1beta1::AllocateResponse resp;
  REQUIRE(allocate(*stub, {ids_of(r)}, resp).ok());
  const auto& c = resp.container_responses(0);
  REQUIRE(c.devices_size() == 3);
  CHECK(c.devices(0).host_path() == "/dev/infiniband/uverbs0");
  CHECK(c.devices(1).host_path() == "/dev/infiniband/uverbs1");
  CHECK(c.devices(2).host_path() == "/dev/infiniband/rdma_cm");
  CHECK(c.envs().at("ERDMA_DEVICES") == "erdma_0,erdma_1");
  CHECK(c.envs().at("NCCL_IB_HCA") == "=erdma_0,erdma_1");
  CHECK(c.envs().at("NCCL_IB_GID_INDEX") == "1");  // erdma_0's; erdma_1 (2) disagrees and is logged
  CHECK(c.envs().count("NCCL_SOCKET_IFNAME") == 0);
}

TEST_CASE("allocateAllDevices: one slot gives the container every device") {
  Harness h(true, "", [](AgentConfig& c) {
    c.allocate_all_devices = true;
    c.smcr.enabled = false;
  });
  auto stub = h.client();
  v1beta1::AllocateResponse resp;
  REQUIRE(allocate(*stub, {{"erdma_1-3"}}, resp).ok());
  const auto& c = resp.container_responses(0);
  REQUIRE(c.devices_size() == 3);
  CHECK(c.devices(0).host_path() == "/dev/infiniband/uverbs0");
  CHECK(c.devices(1).host_path() == "/dev/infiniband/uverbs1");
  CHECK(c.envs().at("NCCL_IB_HCA") == "=erdma_0,erdma_1");
  CHECK(c.mounts_size() == 0);  // smcr.enabled off: no preload library directory
}

TEST_CASE("GetPreferredAllocation spreads over devices, NUMA-aware, then packs") {
  Harness h;
  h.devices.set_devices({make_device("erdma_0", "uverbs0", 0), make_device("erdma_1", "uverbs1", 0),
                         make_device("erdma_2", "uverbs2", 1)});
  h.runtime->request_rescan();
  REQUIRE(eventually([&] { return h.runtime->state().snapshot()->devices.size() == 3; }));
  auto stub = h.client();
  std::vector<std::string> all;
  for (const char* d : {"erdma_0", "erdma_1", "erdma_2"}) {
    for (int i = 0; i < 4; ++i) all.push_back(std::string(d) + "-" + std::to_string(i));
  }
  {
    // Two devices of NUMA node 0; the one with more free slots first.
    v1beta1::PreferredAllocationResponse r;
    REQUIRE(ask_preferred(*stub, {"erdma_0-0", "erdma_1-0", "erdma_1-1", "erdma_2-3"}, {}, 2, r).ok());
    REQUIRE(r.container_responses_size() == 1);
    CHECK(ids_of(r) == std::vector<std::string>{"erdma_1-0", "erdma_0-0"});
  }
  {
    v1beta1::PreferredAllocationResponse r;
    REQUIRE(ask_preferred(*stub, all, {"erdma_2-1"}, 3, r).ok());
    CHECK(ids_of(r) == std::vector<std::string>{"erdma_2-1", "erdma_0-0", "erdma_1-0"});
  }
  {
    // 6 slots: one on each device, then packed onto the first.
    v1beta1::PreferredAllocationResponse r;
    REQUIRE(ask_preferred(*stub, all, {}, 6, r).ok());
    CHECK(ids_of(r) ==
          std::vector<std::string>{"erdma_0-0", "erdma_1-0", "erdma_2-0", "erdma_0-1", "erdma_0-2", "erdma_0-3"});
  }
  {
    v1beta1::PreferredAllocationResponse r;
    const auto status = ask_preferred(*stub, {"erdma_0-0"}, {}, 2, r);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    const auto bad = ask_preferred(*stub, {"erdma_0-0", "bogus"}, {}, 1, r);
    CHECK(bad.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK(bad.error_message().find("bogus") != std::string::npos);
  }
}

TEST_CASE("PreStartContainer hands the device names to the hook and answers") {
  Harness h;
  auto stub = h.client();
  auto call = [&](std::vector<std::string> ids) {
    v1beta1::PreStartContainerRequest req;
    for (auto& id : ids) req.add_devices_ids(id);
    v1beta1::PreStartContainerResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kWait);
    return stub->PreStartContainer(&ctx, req, &resp);
  };
  REQUIRE(call({"erdma_1-3", "erdma_0-1", "erdma_1-0"}).ok());
  {
    std::lock_guard lock(h.hook.mu);
    REQUIRE(h.hook.calls.size() == 1);
    CHECK(h.hook.calls[0].first == std::vector<std::string>{"erdma_1-3", "erdma_0-1", "erdma_1-0"});
    CHECK(h.hook.calls[0].second == std::vector<std::string>{"erdma_0", "erdma_1"});
    CHECK(h.hook.had_future_deadline);
    h.hook.fail = true;
  }
  const auto failed = call({"erdma_0-0"});
  CHECK(failed.error_code() == grpc::StatusCode::FAILED_PRECONDITION);
  CHECK(failed.error_message().find("pod network not ready") != std::string::npos);
  CHECK(call({"nonsense"}).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(call({}).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(h.metrics.pre_start_ok.value() == 1);
  CHECK(h.metrics.pre_start_error.value() == 3);
}

TEST_CASE("kubelet restart: the socket is recreated and the plugin registers again, device state kept") {
  Harness h;
  // Make the state distinguishable from a fresh start: erdma_1 is down.
  REQUIRE(h.devices.set_port_state("erdma_1", PortState::Down));
  h.runtime->request_rescan();
  {
    auto stub = h.client();
    WatchStream watch(*stub);
    REQUIRE(watch.until([](const auto& r) { return count_health(r, "erdma_1", "Unhealthy") == 4; }, kWait));
  }
  // Discovery fails from now on: whatever the plugin advertises after the restart is what it kept.
  h.devices.fail_next(1000);

  const auto restarted = std::chrono::steady_clock::now();
  h.kubelet.restart();
  const auto req = h.kubelet.wait_for_registrations(2, kWait);
  REQUIRE(req.has_value());
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(h.kubelet.registration_time(2) - restarted);
  std::printf("measured: re-registration %lld ms after the simulated kubelet restart (in process)\n",
              static_cast<long long>(ms.count()));
  CHECK(req->endpoint() == "erdma.sock");
  CHECK(is_socket(h.cfg.plugin_socket_path()));
  CHECK(eventually([&] { return h.runtime->registered(); }));
  CHECK(h.metrics.kubelet_restarts.value() == 1);

  auto stub = h.client();
  WatchStream watch(*stub);
  auto r = watch.next(kWait);
  REQUIRE(r.has_value());
  CHECK(r->devices_size() == 8);
  CHECK(count_health(*r, "erdma_0", "Healthy") == 4);
  CHECK(count_health(*r, "erdma_1", "Unhealthy") == 4);
  v1beta1::AllocateResponse resp;
  CHECK(allocate(*stub, {{"erdma_0-0"}}, resp).ok());

  // A second restart is seen too.
  h.kubelet.restart();
  REQUIRE(h.kubelet.wait_for_registrations(3, kWait).has_value());
  CHECK(eventually([&] { return h.runtime->registered(); }));
  CHECK(h.metrics.kubelet_restarts.value() == 2);
  // One registration per restart: late inotify events must not cause extra ones. The restart's
  // events are queued already; once the loop has made two passes after a wake-up it has handled
  // them, and nothing may be left to register.
  const uint64_t passes = h.runtime->loop_passes();
  h.runtime->request_rescan();
  CHECK(eventually([&] { return h.runtime->loop_passes() >= passes + 2; }));
  CHECK_FALSE(h.runtime->work_pending());
  CHECK(h.kubelet.registration_count() == 3);
}

TEST_CASE("a registration names the kubelet socket file it reached, and refuses what is no kubelet") {
  TempDir dir;
  const Registration reg{dir.path() + "/kubelet.sock", kPluginSocketName, "aliyun/erdma"};
  auto id_of = [](const std::string& path) {
    const auto id = socket_file_id(path);
    REQUIRE(id.ino != 0);
    return id;
  };
  SUBCASE("a listening kubelet: its file, and kubelet has the request") {
    FakeKubelet kubelet(dir.path());
    kubelet.start();
    const auto r = register_with_kubelet(reg, 2000ms);
    REQUIRE(r.ok());
    CHECK(*r == id_of(reg.kubelet_socket));
    CHECK(kubelet.registration_count() == 1);
    // After a restart the file is another one (its inode number may be reused), and the answer says so.
    kubelet.restart();
    const auto again = register_with_kubelet(reg, 2000ms);
    REQUIRE(again.ok());
    CHECK(*again == id_of(reg.kubelet_socket));
    CHECK_FALSE(*again == *r);
  }
  SUBCASE("no kubelet.sock") {
    const auto r = register_with_kubelet(reg, 2000ms);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::Unavailable);
    CHECK(r.error().message.find(reg.kubelet_socket) != std::string::npos);
    CHECK(r.error().message.find("cannot open it") != std::string::npos);
  }
  SUBCASE("a regular file in its place") {
    std::FILE* f = std::fopen(reg.kubelet_socket.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fclose(f);
    const auto r = register_with_kubelet(reg, 2000ms);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::Unavailable);
    CHECK(r.error().message.find("not a unix socket") != std::string::npos);
  }
  SUBCASE("a socket file nobody listens on (kubelet gone, file left behind)") {
    FakeKubelet kubelet(dir.path());
    kubelet.start();
    const auto live = id_of(reg.kubelet_socket);
    // Keep a hard link to the socket file: stop() removes the path, the link keeps the inode.
    const std::string stale = dir.path() + "/stale.sock";
    REQUIRE(::link(reg.kubelet_socket.c_str(), stale.c_str()) == 0);
    kubelet.stop();
    REQUIRE(::rename(stale.c_str(), reg.kubelet_socket.c_str()) == 0);
    CHECK(id_of(reg.kubelet_socket).ino == live.ino);  // the same inode (link and rename change ctime)
    const auto r = register_with_kubelet(reg, 2000ms);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::Unavailable);
    CHECK(r.error().message.find(reg.kubelet_socket) != std::string::npos);
  }
}

TEST_CASE("the plugin socket deleted on its own is recreated and registered again") {
  Harness h;
  std::filesystem::remove(h.cfg.plugin_socket_path());
  REQUIRE(h.kubelet.wait_for_registrations(2, kWait).has_value());
  CHECK(is_socket(h.cfg.plugin_socket_path()));
}

TEST_CASE("registration is retried until kubelet is there and accepts it") {
  Harness h(false);
  CHECK_FALSE(h.runtime->registered());
  h.kubelet.fail_next_registrations(2);
  h.kubelet.start();
  const auto req = h.kubelet.wait_for_registrations(1, kWait);
  REQUIRE(req.has_value());
  CHECK(req->resource_name() == "aliyun/erdma");
  CHECK(eventually([&] { return h.runtime->registered(); }));
  CHECK(h.metrics.registrations_error.value() >= 2);
}

TEST_CASE("a device-plugin directory that appears later is served and registered in") {
  TempDir parent;
  const std::string dp = parent.path() + "/device-plugins";
  Harness h(false, dp);
  // Several passes of the loop have tried to serve in the missing directory...
  const uint64_t passes = h.runtime->loop_passes();
  CHECK(eventually([&] { return h.runtime->loop_passes() >= passes + 3; }));
  CHECK(h.runtime->work_pending());
  CHECK_FALSE(std::filesystem::exists(dp));  // ...and the agent does not create kubelet's directory
  std::filesystem::create_directory(dp);
  FakeKubelet kubelet(dp);
  kubelet.start();
  REQUIRE(kubelet.wait_for_registrations(1, kWait).has_value());
  CHECK(is_socket(dp + "/erdma.sock"));
  // And a kubelet restart there is noticed like anywhere else.
  CHECK(eventually([&] { return h.runtime->registered(); }));
  kubelet.restart();
  REQUIRE(kubelet.wait_for_registrations(2, kWait).has_value());
  h.runtime->stop();
}

// The directory watch is tried again at every pass of the loop; a failure is logged once per
// distinct error, and the same error is news again once the watch has worked.
TEST_CASE("a device-plugin directory that cannot be watched is logged once per distinct error") {
  erdma::testing::LogCapture log;
  TempDir parent;
  const std::string kubelet_dir = parent.path() + "/kubelet";
  const std::string dp = kubelet_dir + "/device-plugins";
  std::ofstream(kubelet_dir) << "a file where the kubelet's directory belongs";
  Harness h(false, dp);
  const std::string line = R"("msg":"cannot watch the device plugin directory; retrying")";
  const std::string not_a_dir = "\"error\":\"watching " + dp + ": Not a directory\"";
  const std::string missing = "\"error\":\"watching " + dp + ": No such file or directory\"";
  const auto passes = [&](uint64_t n) {
    const uint64_t from = h.runtime->loop_passes();
    return eventually([&] { return h.runtime->loop_passes() >= from + n; });
  };
  REQUIRE(eventually([&] { return log.count(line) == 1; }));  // the first failure
  REQUIRE(passes(3));
  CHECK(log.count(line) == 1);  // the same failure at the next passes: not logged
  CHECK(log.count(not_a_dir) == 1);
  std::filesystem::remove(kubelet_dir);  // another error
  REQUIRE(eventually([&] { return log.count(line) == 2; }));
  REQUIRE(passes(3));
  CHECK(log.count(line) == 2);
  CHECK(log.count(missing) == 1);
  std::filesystem::create_directories(dp);  // watched and served...
  REQUIRE(eventually([&] { return log.count(R"("msg":"serving device plugin")") == 1; }));
  REQUIRE(passes(2));
  CHECK(log.count(line) == 2);
  // ...so the same error as before is news again. Moved away in one step (removing the entries one
  // by one would let the loop serve again in between); the watch ends with the move.
  std::filesystem::rename(dp, parent.path() + "/gone");
  REQUIRE(eventually([&] { return log.count(line) == 3; }));
  REQUIRE(passes(3));
  CHECK(log.count(line) == 3);
  CHECK(log.count(missing) == 2);
  h.runtime->stop();
}

TEST_CASE("a failing discovery keeps the previous view") {
  Harness h;
  h.devices.fail_next(3);
  for (uint64_t i = 1; i <= 3; ++i) {
    h.runtime->request_rescan();
    // The failure counted, not just the fake called: the count is what is checked below.
    REQUIRE(eventually([&] { return h.metrics.scans_error.value() >= i; }));
  }
  CHECK(h.metrics.scans_error.value() == 3);
  const auto snap = h.runtime->state().snapshot();
  CHECK(snap->devices.size() == 2);
  CHECK(snap->advertisement.slots.size() == 8);
}

TEST_CASE("stop ends open streams and removes the socket") {
  Harness h;
  auto stub = h.client();
  WatchStream watch(*stub);
  REQUIRE(watch.next(kWait).has_value());
  h.runtime->stop();
  CHECK_FALSE(std::filesystem::exists(h.cfg.plugin_socket_path()));
  CHECK(eventually([&] { return watch.ended(); }));
}

// Holds each call until `want` calls have been inside at once (or `hold` passes), recording the most
// that ever were.
class OverlapHook final : public PreStartHook {
 public:
  OverlapHook(int want, std::chrono::milliseconds hold) : want_(want), hold_(hold) {}
  Status pre_start(const std::vector<std::string>&, const std::vector<std::string>&,
                   std::chrono::steady_clock::time_point) override {
    std::unique_lock lock(mu_);
    ++inside_;
    most = std::max(most, inside_);
    cv_.notify_all();
    cv_.wait_for(lock, hold_, [&] { return most >= want_; });
    --inside_;
    return {};
  }
  int most = 0;

 private:
  const int want_;
  const std::chrono::milliseconds hold_;
  std::mutex mu_;
  std::condition_variable cv_;
  int inside_ = 0;
};

int overlap_with(size_t workers, int calls, std::chrono::milliseconds hold) {
  OverlapHook hook(calls, hold);
  std::atomic<int> ok{0};
  {
    HookRunner runner(hook, workers);
    for (int i = 0; i < calls; ++i) {
      runner.submit({"erdma_0-" + std::to_string(i)}, {"erdma_0"}, std::chrono::steady_clock::now() + 20s,
                    [&ok](Status st) {
                      if (st) ++ok;
                    });
    }
    REQUIRE(eventually([&] { return ok.load() == calls; }, 20s));
  }
  return hook.most;
}

TEST_CASE("PreStartContainer setups of a burst run at once, up to the worker count") {
  // Four pods at once on four workers: all four setups are inside the hook together (each waits
  // for the others; with fewer workers they would only end by the hold).
  CHECK(overlap_with(kPreStartWorkers, static_cast<int>(kPreStartWorkers), 20s) == static_cast<int>(kPreStartWorkers));
  // More pods than workers: never more than the workers at once.
  CHECK(overlap_with(2, 5, 50ms) == 2);
  // One worker: one after another (each call ends by its hold).
  CHECK(overlap_with(1, 3, 50ms) == 1);
}

// Holds every pre_start() until released; missed_turn() succeeds and records why, as SMC-R's does.
class GateHook final : public PreStartHook {
 public:
  Status pre_start(const std::vector<std::string>&, const std::vector<std::string>&,
                   std::chrono::steady_clock::time_point) override {
    std::unique_lock lock(mu_);
    ++inside_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return open_; });
    return {};
  }
  Status missed_turn(const std::vector<std::string>&, const std::string& why) override {
    std::lock_guard lock(mu_);
    missed_.push_back(why);
    return {};
  }
  bool wait_inside(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 20s, [&] { return inside_ >= n; });
  }
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  std::vector<std::string> missed() {
    std::lock_guard lock(mu_);
    return missed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int inside_ = 0;
  bool open_ = false;
  std::vector<std::string> missed_;
};

TEST_CASE("a full PreStartContainer queue answers at once through missed_turn, never failing the start") {
  GateHook hook;
  std::mutex mu;
  std::vector<Status> answers;
  auto record = [&](Status st) {
    std::lock_guard lock(mu);
    answers.push_back(std::move(st));
  };
  {
    HookRunner runner(hook, 1, 1);  // one worker, one call queued behind it
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    runner.submit({"erdma_0-0"}, {"erdma_0"}, deadline, record);
    REQUIRE(hook.wait_inside(1));
    runner.submit({"erdma_0-1"}, {"erdma_0"}, deadline, record);  // queued
    runner.submit({"erdma_0-2"}, {"erdma_0"}, deadline, record);  // refused: answered here, now
    {
      std::lock_guard lock(mu);
      REQUIRE(answers.size() == 1);
      CHECK(answers[0].ok());
    }
    CHECK(hook.missed() == std::vector<std::string>{"PreStartContainer calls queued: 1, the most the agent holds"});
    hook.open();
    REQUIRE(eventually(
        [&] {
          std::lock_guard lock(mu);
          return answers.size() == 3;
        },
        20s));
  }
  for (const auto& a : answers) CHECK(a.ok());
}

TEST_CASE("a stale socket file is replaced, anything else in its place is refused") {
  TempDir dir;
  AgentConfig cfg;
  cfg.device_plugin_dir = dir.path();
  cfg.metrics_listen = "";
  FakeRdmaDevices devices{{make_device("erdma_0", "uverbs0", 0)}};
  RecordingHook hook;
  HookRunner hooks(hook);
  DeviceState state(cfg.slots_per_device);
  DevicePluginService service(state, hooks, nullptr, {});
  {
    PluginServer stale(service);
    REQUIRE(stale.start(cfg.plugin_socket_path(), 0ms).ok());
    // Simulate a crash: the file stays, the server is gone without cleanup.
    ::rename(cfg.plugin_socket_path().c_str(), (dir.path() + "/keep").c_str());
    stale.stop(0ms);
    ::rename((dir.path() + "/keep").c_str(), cfg.plugin_socket_path().c_str());
  }
  REQUIRE(is_socket(cfg.plugin_socket_path()));
  PluginServer server(service);
  CHECK(server.start(cfg.plugin_socket_path(), 0ms).ok());
  CHECK(server.socket_is_ours());
  server.stop(0ms);
  CHECK_FALSE(std::filesystem::exists(cfg.plugin_socket_path()));

  std::FILE* f = std::fopen(cfg.plugin_socket_path().c_str(), "w");
  REQUIRE(f != nullptr);
  std::fclose(f);
  const auto s = server.start(cfg.plugin_socket_path(), 0ms);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == ErrorCode::FailedPrecondition);
  CHECK(std::filesystem::is_regular_file(cfg.plugin_socket_path()));
}

TEST_CASE("Allocate round trip over the unix socket (measured, reported)") {
  Harness h;
  auto stub = h.client();
  std::vector<double> us;
  constexpr int kCalls = 2000;
  for (int i = 0; i < kCalls; ++i) {
    v1beta1::AllocateResponse resp;
    const auto t0 = std::chrono::steady_clock::now();
    const auto status = allocate(*stub, {{"erdma_" + std::to_string(i % 2) + "-" + std::to_string(i % 4)}}, resp);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    REQUIRE(status.ok());
  }
  std::sort(us.begin(), us.end());
  std::printf("measured: Allocate round trip over gRPC/unix socket, %d calls: median %.0f us, p99 %.0f us; "
              "in the handler: mean %.1f us\n",
              kCalls, us[us.size() / 2], us[us.size() * 99 / 100],
              h.metrics.allocate_seconds.sum() / static_cast<double>(h.metrics.allocate_seconds.count()) * 1e6);
  CHECK(h.metrics.allocate_ok.value() == kCalls);
}

}  // namespace erdma::agent
