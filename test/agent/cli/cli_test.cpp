// erdma-agent devices/config: output for admins, exit statuses, config errors.
#include "agent/cli/commands.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "test/fakes/fake_kubelet.hpp"
#include "test/fakes/fake_rdma_devices.hpp"
#include "test/support.hpp"

namespace erdma::agent {

TEST_CASE("devices table and JSON show what discovery sees") {
  DeviceScan scan;
  scan.devices = {testing::make_device("erdma_0", "uverbs0", 0),
                  testing::make_device("erdma_1", "uverbs1", 1, PortState::Down, "eth1")};
  scan.devices[0].ports[0].gids.push_back(Gid{1, "0000:0000:0000:0000:0000:ffff:0a00:0005", GidType::RoceV2, "eth0"});
  scan.notes = {"mlx5_0 left out: driver mlx5 is not in devices.drivers (erdma)"};

  const std::string table = render_devices_table(scan, 64);
  std::istringstream lines(table);
  std::string header, row0, row1;
  std::getline(lines, header);
  std::getline(lines, row0);
  std::getline(lines, row1);
  CHECK(header.find("DEVICE") == 0);
  CHECK(header.find("HEALTH") != std::string::npos);
  CHECK(row0.find("erdma_0") == 0);
  CHECK(row0.find("uverbs0") != std::string::npos);
  CHECK(row0.find("ACTIVE") != std::string::npos);
  CHECK(row0.find("Healthy") != std::string::npos);
  CHECK(row0.find("1=0000:0000:0000:0000:0000:ffff:0a00:0005(RoCE v2)") != std::string::npos);
  CHECK(row1.find("erdma_1") == 0);
  CHECK(row1.find("Unhealthy") != std::string::npos);
  CHECK(row1.find("eth1") != std::string::npos);

  const auto j = render_devices_json(scan, "fake", 64);
  CHECK(j["source"] == "fake");
  REQUIRE(j["devices"].size() == 2);
  CHECK(j["devices"][0]["name"] == "erdma_0");
  CHECK(j["devices"][0]["devicePath"] == "/dev/infiniband/uverbs0");
  CHECK(j["devices"][0]["health"] == "Healthy");
  CHECK(j["devices"][0]["slots"] == 64);
  CHECK(j["devices"][0]["numaNode"] == 0);
  CHECK(j["devices"][0]["ports"][0]["gids"][0]["type"] == "RoCE v2");
  CHECK(j["devices"][1]["health"] == "Unhealthy");
  CHECK(j["notes"].size() == 1);
}

TEST_CASE("erdma-agent devices with a static config, and its errors") {
  erdma::testing::TempDir dir;
  const std::string config = dir.path() + "/agent.yaml";
  {
    std::ofstream out(config);
    out << "devices:\n  source: static\n  static:\n  - {name: erdma_0, uverbs: uverbs0, netdev: eth0, numaNode: 0}\n";
  }
  {
    std::ostringstream out, err;
    CHECK(run_devices({"--config", config}, out, err) == kExitOk);
    CHECK(out.str().find("erdma_0") != std::string::npos);
    CHECK(out.str().find("Healthy") != std::string::npos);
  }
  {
    std::ostringstream out, err;
    CHECK(run_devices({"-o", "json", "--config=" + config}, out, err) == kExitOk);
    const auto j = nlohmann::json::parse(out.str());
    CHECK(j["devices"][0]["uverbs"] == "uverbs0");
    CHECK(j["source"] == "static (1 device)");
  }
  {
    std::ofstream out(config);
    out << "devices: {source: static, static: []}\n";
  }
  {
    std::ostringstream out, err;
    CHECK(run_devices({"--config", config}, out, err) == kExitFailure);
    CHECK(out.str().find("no RDMA devices found") != std::string::npos);
  }
  {
    std::ofstream out(config);
    out << "devices: {source: static, static: [{name: erdma_0, uverbs: uverbs0, numa: 1}]}\n";
  }
  {
    std::ostringstream out, err;
    CHECK(run_devices({"--config", config}, out, err) == kExitUsage);
    CHECK(err.str().find("devices.static[0].numa: unknown key") != std::string::npos);
    CHECK(err.str().find(config) != std::string::npos);
  }
  {
    std::ostringstream out, err;
    CHECK(run_devices({"-o", "yaml"}, out, err) == kExitUsage);
    CHECK(run_devices({"--bogus"}, out, err) == kExitUsage);
    CHECK(run_devices({"--config"}, out, err) == kExitUsage);
    CHECK(run_devices({"--config", dir.path() + "/missing.yaml"}, out, err) == kExitUsage);
  }
  {
    std::ostringstream out, err;
    CHECK(run_config({}, out, err) == kExitOk);
    const auto j = nlohmann::json::parse(out.str());
    CHECK(j["resourceName"] == "aliyun/erdma");
    CHECK(j["slotsPerDevice"] == 64);
  }
}

}  // namespace erdma::agent

namespace erdma::agent {

TEST_CASE("status: mode wanted and found, each device's NCCL GID index, SMC-R and preload") {
  NodeStatus st;
  st.facts.erdma_loaded = true;
  st.facts.compat_mode = true;
  st.facts.smc_loaded = true;
  st.facts.node_types = {{"erdma_0", "CA"}, {"erdma_1", "CA"}};
  st.driver = judge_driver(DriverMode::Default, st.facts);
  auto d0 = testing::make_device("erdma_0", "uverbs0", 0);
  d0.ports[0].gids = {{3, "0000:0000:0000:0000:0000:ffff:0a00:0005", GidType::RoceV2, "eth0"}};
  st.scan.devices = {d0, testing::make_device("erdma_1", "uverbs1", 1, PortState::Down, "eth1")};
  st.configured_ueid = "ERDMA-CONTROLLER";
  st.ueids = {"OTHER"};
  st.preload_path = "/var/lib/erdma-controller/lib/libsmc-preload.so";

  const std::string text = render_status(st);
  CAPTURE(text);
  CHECK(text.find("driver mode mismatch: want default, have compat") != std::string::npos);
  CHECK(text.find("compat_mode=Y") != std::string::npos);
  CHECK(text.find("NCCL_IB_GID_INDEX 3") != std::string::npos);
  CHECK(text.find("NCCL_IB_GID_INDEX - (no IPv4 RoCE v2 GID)") != std::string::npos);
  CHECK(text.find("smc-r:    not capable") != std::string::npos);
  CHECK(text.find("configured ERDMA-CONTROLLER MISSING") != std::string::npos);
  CHECK(text.find("not installed") != std::string::npos);

  const auto j = render_status_json(st);
  CHECK(j["driver"]["mismatch"] == true);
  CHECK(j["driver"]["have"] == "compat");
  CHECK(j["devices"][0]["ncclGidIndex"] == 3);
  CHECK(j["devices"][1]["ncclGidIndex"].is_null());
  CHECK(j["smcr"]["capable"] == false);
}

}  // namespace erdma::agent
