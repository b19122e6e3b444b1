// NodePrepareResources / NodeUnprepareResources of the agent's DRA driver through its real gRPC
// unix socket, as the kubelet calls them, with claims served from memory instead of an API server
// (the API round trip is the client's, measured elsewhere).
//
//   build/bench/dra_bench [--claims N] [--runs N] [--dir DIR]
//
// Each run starts the driver in a fresh directory under DIR (default /tmp; the CDI spec and the
// checkpoint are fsynced, so the file system matters), then: N calls of one claim each (a pod with
// one claim: GET, decide, spec write, checkpoint write), the same N calls again (answered from the
// checkpoint), one call with all N claims, and N unprepare calls. Prints p50 / p99 / max per call
// over all runs, and the batch call's total. For comparison, the device plugin's Allocate and
// PreStartContainer for the same number of containers (one slot each, on its real socket, with a
// PreStartContainer hook that does nothing: the plugin's own cost, not SMC-R's pod setup).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <stdlib.h>

#include "agent/deviceplugin/plugin_runtime.hpp"
#include "agent/dra/dra_plugin.hpp"
#include "agent/kube/api_paths.hpp"
#include "common/log.hpp"
#include "test/fakes/fake_rdma_devices.hpp"

namespace {
using namespace erdma;
using namespace erdma::agent;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

class MemoryApi final : public kube::Api {
 public:
  void put(const std::string& path, json claim) {
    std::lock_guard lock(mu_);
    claims_[path] = std::move(claim);
  }
  Result<json> get(std::string_view path) override {
    std::lock_guard lock(mu_);
    const auto it = claims_.find(std::string(path));
    if (it == claims_.end()) return make_error(ErrorCode::NotFound, "404");
    return it->second;
  }
  Result<json> create(std::string_view, const json&) override { return make_error(ErrorCode::Internal, "unused"); }
  Result<json> replace(std::string_view, const json&) override { return make_error(ErrorCode::Internal, "unused"); }
  Status remove(std::string_view, std::string_view) override { return make_error(ErrorCode::Internal, "unused"); }

 private:
  std::mutex mu_;
  std::map<std::string, json> claims_;
};

std::string uid(int n) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "6f1c2a9e-0b7d-4c53-9a41-%012d", n);
  return buf;
}

RdmaDevice card(int i) {
  RdmaDevice d;
  d.name = "erdma_" + std::to_string(i);
  d.driver = "erdma";
  d.uverbs = "uverbs" + std::to_string(i);
  d.netdev = "eth" + std::to_string(i);
  d.ports.push_back(RdmaPort{1, PortState::Active, "Ethernet", {}});
  return d;
}

class NoopHook final : public PreStartHook {
 public:
  Status pre_start(const std::vector<std::string>&, const std::vector<std::string>&, Clock::time_point) override {
    return {};
  }
};

double us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

void print(const char* what, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
  std::printf("%-44s n=%-5zu p50 %8.1f us   p99 %8.1f us   max %8.1f us\n", what, v.size(), at(0.5), at(0.99),
              v.back());
}

}  // namespace

int main(int argc, char** argv) {
  int claims = 100, runs = 5;
  std::string base = "/tmp";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--claims" && i + 1 < argc)
      claims = std::atoi(argv[++i]);
    else if (a == "--runs" && i + 1 < argc)
      runs = std::atoi(argv[++i]);
    else if (a == "--dir" && i + 1 < argc)
      base = argv[++i];
    else {
      std::fprintf(stderr, "usage: dra_bench [--claims N] [--runs N] [--dir DIR]\n");
      return 2;
    }
  }
  common::log::set_level(common::log::Level::Warn);
  std::vector<double> first, again, unprep, batch;
  for (int run = 0; run < runs; ++run) {
    std::string tmpl = base + "/erdma-dra-bench-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::perror("mkdtemp");
      return 1;
    }
    const std::filesystem::path root = tmpl;
    MemoryApi api;
    for (int n = 0; n < 2 * claims; ++n) {
      const std::string name = "claim-" + std::to_string(n);
      api.put(kube::resource_claim_path("bench", name),
              json{{"metadata", {{"name", name}, {"namespace", "bench"}, {"uid", uid(n)}}},
                   {"status",
                    {{"allocation",
                      {{"devices",
                        {{"results", json::array({json{{"request", "nic"},
                                                       {"driver", "erdma.aliyun.com"},
                                                       {"pool", "node-1"},
                                                       {"device", "erdma-" + std::to_string(n % 2)}}})}}}}}}}});
    }
    dra::DraPluginConfig cfg;
    cfg.node_name = "node-1";
    cfg.registry_dir = (root / "plugins_registry").string();
    cfg.plugin_dir = (root / "plugins" / "erdma.aliyun.com").string();
    cfg.cdi_dir = (root / "cdi").string();
    dra::DraKubeletPlugin plugin(cfg, api, [] { return std::vector<RdmaDevice>{card(0), card(1)}; });
    if (auto s = plugin.start(); !s) {
      std::fprintf(stderr, "start: %s\n", s.error().message.c_str());
      return 1;
    }
    auto stub = dra::drapb::DRAPlugin::NewStub(
        grpc::CreateChannel("unix:" + cfg.dra_socket(), grpc::InsecureChannelCredentials()));
    auto ref = [](int n) {
      dra::drapb::Claim c;
      c.set_namespace_("bench");
      c.set_name("claim-" + std::to_string(n));
      c.set_uid(uid(n));
      return c;
    };
    auto prepare = [&](int from, int count) {
      dra::drapb::NodePrepareResourcesRequest req;
      for (int n = from; n < from + count; ++n) *req.add_claims() = ref(n);
      dra::drapb::NodePrepareResourcesResponse resp;
      grpc::ClientContext ctx;
      const auto t0 = Clock::now();
      const auto st = stub->NodePrepareResources(&ctx, req, &resp);
      const auto t = Clock::now() - t0;
      for (const auto& c : resp.claims()) {
        if (!c.second.error().empty()) {
          std::fprintf(stderr, "prepare: %s\n", c.second.error().c_str());
          std::exit(1);
        }
      }
      if (!st.ok() || resp.claims_size() != count) std::exit(1);
      return us(t);
    };
    for (int n = 0; n < claims; ++n) first.push_back(prepare(n, 1));
    for (int n = 0; n < claims; ++n) again.push_back(prepare(n, 1));
    batch.push_back(prepare(claims, claims));
    for (int n = 0; n < claims; ++n) {
      dra::drapb::NodeUnprepareResourcesRequest req;
      *req.add_claims() = ref(n);
      dra::drapb::NodeUnprepareResourcesResponse resp;
      grpc::ClientContext ctx;
      const auto t0 = Clock::now();
      if (!stub->NodeUnprepareResources(&ctx, req, &resp).ok()) return 1;
      unprep.push_back(us(Clock::now() - t0));
    }
    plugin.stop();
    std::filesystem::remove_all(root);
  }
  // The device plugin, for comparison: no kubelet to register with, which it keeps retrying
  // meanwhile; its socket is served all the same.
  std::vector<double> alloc, prestart;
  for (int run = 0; run < runs; ++run) {
    std::string tmpl = base + "/erdma-dp-bench-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return 1;
    AgentConfig acfg;
    acfg.device_plugin_dir = tmpl;
    acfg.slots_per_device = 1000;
    acfg.rescan_seconds = 3600;
    acfg.metrics_listen = "";
    agent::testing::FakeRdmaDevices devices({card(0), card(1)});
    NoopHook hook;
    PluginRuntime runtime(acfg, devices, hook, nullptr);
    if (!runtime.start().ok()) return 1;
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!std::filesystem::exists(acfg.plugin_socket_path())) {
      if (Clock::now() > deadline) return 1;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    auto stub = v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + acfg.plugin_socket_path(), grpc::InsecureChannelCredentials()));
    for (int n = 0; n < claims; ++n) {
      const std::string id = slot_id(n % 2 ? "erdma_1" : "erdma_0", static_cast<unsigned>(n));
      v1beta1::AllocateRequest areq;
      areq.add_container_requests()->add_devices_ids(id);
      v1beta1::AllocateResponse aresp;
      grpc::ClientContext actx;
      auto t0 = Clock::now();
      if (!stub->Allocate(&actx, areq, &aresp).ok()) return 1;
      alloc.push_back(us(Clock::now() - t0));
      v1beta1::PreStartContainerRequest preq;
      preq.add_devices_ids(id);
      v1beta1::PreStartContainerResponse presp;
      grpc::ClientContext pctx;
      t0 = Clock::now();
      if (!stub->PreStartContainer(&pctx, preq, &presp).ok()) return 1;
      prestart.push_back(us(Clock::now() - t0));
    }
    runtime.stop();
    std::filesystem::remove_all(tmpl);
  }

  std::printf("dra_bench: %d claims x %d runs, files under %s\n", claims, runs, base.c_str());
  print("NodePrepareResources, 1 claim, new", first);
  print("NodePrepareResources, 1 claim, prepared", again);
  print("NodeUnprepareResources, 1 claim", unprep);
  std::vector<double> per_claim;
  for (double b : batch) per_claim.push_back(b / claims);
  print("NodePrepareResources, all claims in one call", batch);
  print("  the same, per claim", per_claim);
  print("device plugin Allocate, 1 container, 1 slot", alloc);
  print("device plugin PreStartContainer (no-op hook)", prestart);
  return 0;
}
