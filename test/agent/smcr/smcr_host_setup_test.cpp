// SMC-R host setup against the in-memory kernel tables, the background service that runs it on
// device changes, the kernel statistics as metrics, and the preload library install.
#include "agent/smcr/smcr_host_setup.hpp"

#include <filesystem>
#include <fstream>
#include <thread>

#include <doctest/doctest.h>
#include <sys/stat.h>

#include "agent/smcr/smc_stats.hpp"
#include "agent/smcr/smcr_service.hpp"
#include "agent/sys/file_install.hpp"
#include "test/eventually.hpp"
#include "test/fakes/fake_kubelet.hpp"
#include "test/fakes/fake_rdma_devices.hpp"
#include "test/fakes/fake_smc.hpp"
#include "test/support.hpp"

namespace erdma::agent {
using erdma::testing::eventually;

namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::FakePnetTable;
using testing::FakeSmcInfo;
using testing::make_device;

// Openers hand out the same fakes each time (the kernel's tables outlive any socket).
class BorrowedTable final : public PnetTable {
 public:
  explicit BorrowedTable(FakePnetTable& t) : t_(t) {}
  Result<std::vector<PnetEntry>> list() override { return t_.list(); }
  Result<Change> add(const PnetEntry& e) override { return t_.add(e); }
  Result<Change> remove(const PnetId& id) override { return t_.remove(id); }
  Status flush() override { return t_.flush(); }

 private:
  FakePnetTable& t_;
};

class BorrowedInfo final : public SmcInfo {
 public:
  explicit BorrowedInfo(FakeSmcInfo& i) : i_(i) {}
  Result<SmcSystemInfo> system_info() override { return i_.system_info(); }
  Result<std::vector<SmcrLinkGroup>> link_groups() override { return i_.link_groups(); }
  Result<SmcStats> stats() override { return i_.stats(); }
  Result<FallbackStats> fallback_stats() override { return i_.fallback_stats(); }
  Result<std::vector<Ueid>> ueids() override { return i_.ueids(); }
  Result<Change> add_ueid(const Ueid& u) override { return i_.add_ueid(u); }
  Result<Change> remove_ueid(const Ueid& u) override { return i_.remove_ueid(u); }

 private:
  FakeSmcInfo& i_;
};

struct Kernel {
  FakePnetTable table;
  FakeSmcInfo info;
  bool smc = true;

  PnetTableOpener table_opener() {
    return [this]() -> Result<std::unique_ptr<PnetTable>> {
      if (!smc) return make_error(ErrorCode::Unavailable, kNoSmcMessage);
      return std::unique_ptr<PnetTable>(new BorrowedTable(table));
    };
  }
  SmcInfoOpener info_opener() {
    return [this]() -> Result<std::unique_ptr<SmcInfo>> {
      if (!smc) return make_error(ErrorCode::Unavailable, kNoSmcMessage);
      return std::unique_ptr<SmcInfo>(new BorrowedInfo(info));
    };
  }
};

PnetEntry ib(const char* id, const char* dev) { return PnetEntry::ib(id, dev, 1).value(); }
PnetEntry eth(const char* id, const char* dev) { return PnetEntry::eth(id, dev).value(); }

std::vector<PnetEntry> sorted(std::vector<PnetEntry> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("host setup adds an IB entry per port, an ETH entry per netdev and the UEID, once") {
  Kernel k;
  SmcrConfig cfg;
  SmcrHostSetup setup(cfg, k.table_opener(), k.info_opener());
  const std::vector<RdmaDevice> devices = {make_device("erdma_0", "uverbs0", 0, PortState::Active, "eth0"),
                                           make_device("erdma_1", "uverbs1", 0, PortState::Down, "eth1")};
  auto r = setup.reconcile(devices);
  REQUIRE_OK(r);
  CHECK(r->applied.size() == 5);
  CHECK(r->conflicts.empty());
  CHECK(sorted(k.table.entries) ==
        sorted({ib("ERDMA", "erdma_0"), ib("ERDMA", "erdma_1"), eth("ERDMA", "eth0"), eth("ERDMA", "eth1")}));
  REQUIRE(k.info.table.size() == 1);
  CHECK(k.info.table[0].str() == "ERDMA-CONTROLLER");

  // Idempotent.
  auto again = setup.reconcile(devices);
  REQUIRE(again.ok());
  CHECK(again->applied.empty());

  // A device gone: its entries go, the others are rebuilt on the same PNETID.
  auto fewer = setup.reconcile({devices[0]});
  REQUIRE(fewer.ok());
  CHECK(sorted(k.table.entries) == sorted({ib("ERDMA", "erdma_0"), eth("ERDMA", "eth0")}));
  CHECK(k.info.table.size() == 1);
}

TEST_CASE("host setup leaves entries of other PNETIDs and a full UEID table alone") {
  Kernel k;
  k.table.entries = {ib("ADMIN", "erdma_0"), eth("OTHER", "eth9")};
  for (const char* u : {"A", "B", "C", "D"}) k.info.table.push_back(Ueid::parse(u).value());
  SmcrConfig cfg;
  cfg.pnet_id = *PnetId::parse("NET1");
  SmcrHostSetup setup(cfg, k.table_opener(), k.info_opener());
  auto r = setup.reconcile({make_device("erdma_0", "uverbs0", 0, PortState::Active, "eth0")});
  REQUIRE(r.ok());
  CHECK(r->conflicts.size() == 2);
  CHECK(sorted(k.table.entries) == sorted({ib("ADMIN", "erdma_0"), eth("OTHER", "eth9"), eth("NET1", "eth0")}));
  CHECK(k.info.table.size() == 4);
}

TEST_CASE("host setup without a UEID in the config never touches the UEID table") {
  Kernel k;
  SmcrConfig cfg;
  cfg.ueid.clear();
  k.info.failures.fail_next(make_error(ErrorCode::Internal, "must not be called"), 10);
  SmcrHostSetup setup(cfg, k.table_opener(), k.info_opener());
  auto r = setup.reconcile({make_device("erdma_0", "uverbs0", 0)});
  REQUIRE(r.ok());
  CHECK(r->applied.size() == 2);
}

TEST_CASE("host setup reports a kernel without SMC and a failing operation") {
  Kernel k;
  SmcrConfig cfg;
  SmcrHostSetup setup(cfg, k.table_opener(), k.info_opener());
  k.smc = false;
  auto r = setup.reconcile({make_device("erdma_0", "uverbs0", 0)});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message == kNoSmcMessage);

  k.smc = true;
  k.table.failures.fail_next(make_error(ErrorCode::PermissionDenied, "needs CAP_NET_ADMIN"));
  r = setup.reconcile({make_device("erdma_0", "uverbs0", 0)});
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::PermissionDenied);
  CHECK(r.error().message.find("reading the pnet table") != std::string::npos);

  auto empty = setup.reconcile({});
  REQUIRE(empty.ok());
  CHECK(empty->applied == std::vector<std::string>{"add UEID ERDMA-CONTROLLER"});
}

TEST_CASE("the SMC-R service sets the host up at start and again when devices change") {
  Kernel k;
  AgentConfig cfg;
  cfg.slots_per_device = 2;
  testing::FakeRdmaDevices devices({make_device("erdma_0", "uverbs0", 0, PortState::Active, "eth0")});
  DeviceState state(cfg.slots_per_device);
  REQUIRE(state.update(devices.scan().value()));
  // The fakes are not thread-safe: this test reads them only while the service is idle or stopped.
  SmcrHostSetup host(cfg.smcr, k.table_opener(), k.info_opener());
  common::metrics::Registry registry;
  AgentMetrics metrics(registry);
  SmcrServiceTiming timing;
  timing.host_period = 1h;
  SmcrService service(cfg, state, host, nullptr, nullptr, &metrics, timing);
  service.start();
  REQUIRE(eventually([&] { return service.host_setups_ok() == 1; }));
  devices.set_devices({make_device("erdma_0", "uverbs0", 0, PortState::Active, "eth0"),
                       make_device("erdma_1", "uverbs1", 0, PortState::Active, "eth1")});
  REQUIRE(state.update(devices.scan().value()));
  REQUIRE(eventually([&] { return service.host_setups_ok() == 2; }));
  service.stop();
  CHECK(sorted(k.table.entries) ==
        sorted({ib("ERDMA", "erdma_0"), ib("ERDMA", "erdma_1"), eth("ERDMA", "eth0"), eth("ERDMA", "eth1")}));
  CHECK(metrics.host_setups_ok.value() == 2);
  CHECK(metrics.host_setup_ops.value() == 5);
}

TEST_CASE("kernel SMC statistics become gauges summed per scope") {
  Kernel host;
  host.info.counters.smcr.client_v2_success = 3;
  host.info.counters.smcr.server_v1_success = 1;
  host.info.fallbacks.reasons = {{false, 0x03030002, 4}, {true, 0x03010000, 2}};
  common::metrics::Registry registry;
  AgentMetrics metrics(registry);
  testing::FakeNetns netns;
  SmcStatsCollector collector(metrics, netns, host.info_opener());

  // Two pod namespaces read through the same fake (each adds the same counters), one gone.
  const std::vector<TrackedPod> pods = {{"sb-1", "ns/a", NetnsRef::of_path("/run/netns/a")},
                                        {"sb-2", "ns/b", NetnsRef::of_path("/run/netns/b")},
                                        {"sb-3", "ns/c", NetnsRef::of_path("/run/netns/c")}};
  netns.gone = {"/run/netns/c"};
  auto reading = collector.collect(pods, std::chrono::steady_clock::now() + 5s);
  CHECK(reading.host_ok);
  CHECK(reading.pods_read == 2);
  CHECK(reading.gone == std::vector<std::string>{"sb-3"});
  CHECK(metrics.smcr_connections("host", "client", "v2").value() == 3);
  CHECK(metrics.smcr_connections("host", "server", "v1").value() == 1);
  CHECK(metrics.smcr_connections("pods", "client", "v2").value() == 6);
  CHECK(metrics.smc_fallbacks("host", "client", "NOSMCRDEV").value() == 4);
  CHECK(metrics.smc_fallbacks("pods", "server", "PEERNOSMC").value() == 4);
  const auto text = registry.expose();
  CHECK(text.find("erdma_agent_smc_fallbacks{scope=\"host\",side=\"client\",reason=\"NOSMCRDEV\"} 4") !=
        std::string::npos);

  // A reason no longer reported drops to 0.
  host.info.fallbacks.reasons = {{true, 0x03010000, 2}};
  (void)collector.collect({}, std::chrono::steady_clock::now() + 5s);
  CHECK(metrics.smc_fallbacks("host", "client", "NOSMCRDEV").value() == 0);
  CHECK(metrics.smc_fallbacks("pods", "server", "PEERNOSMC").value() == 0);

  host.smc = false;
  reading = collector.collect({}, std::chrono::steady_clock::now() + 5s);
  CHECK_FALSE(reading.host_ok);
  CHECK(metrics.smcr_connections("host", "client", "v2").value() == 3);  // kept, not zeroed
}

TEST_CASE("the preload library is installed atomically and only when it changed") {
  erdma::testing::TempDir dir;
  const std::string src = dir.path() + "/build/libsmc-preload.so";
  fs::create_directories(dir.path() + "/build");
  std::ofstream(src) << "first version";
  const std::string host_dir = dir.path() + "/var/lib/erdma-controller/lib";

  auto r = install_file_atomically(src, host_dir, "libsmc-preload.so");
  REQUIRE_OK(r);
  CHECK(*r == InstallResult::Installed);
  const std::string target = host_dir + "/libsmc-preload.so";
  struct stat st {};
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0755);
  const auto inode = st.st_ino;

  CHECK(install_file_atomically(src, host_dir, "libsmc-preload.so").value() == InstallResult::Unchanged);
  std::ofstream(src) << "second version, longer";
  CHECK(install_file_atomically(src, host_dir, "libsmc-preload.so").value() == InstallResult::Installed);
  REQUIRE(::stat(target.c_str(), &st) == 0);
  CHECK(st.st_ino != inode);  // a new file renamed over the old: mappings of the old one stay valid
  std::ifstream in(target);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(content == "second version, longer");
  // No temporary files left behind.
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(host_dir)) ++files;
  CHECK(files == 1);

  CHECK(install_file_atomically(dir.path() + "/missing.so", host_dir, "x.so").error().code == ErrorCode::NotFound);
  CHECK(install_file_atomically(dir.path(), host_dir, "x.so").error().code == ErrorCode::InvalidArgument);
  CHECK(install_file_atomically(src, host_dir, "x.so", 4).error().message.find("larger") != std::string::npos);
  std::ofstream(dir.path() + "/plainfile") << "x";
  CHECK_FALSE(install_file_atomically(src, dir.path() + "/plainfile", "x.so").ok());

  common::metrics::Registry registry;
  AgentMetrics metrics(registry);
  SmcrConfig cfg;
  cfg.preload_source = src;
  cfg.preload_host_dir = host_dir;
  CHECK(install_preload(cfg, &metrics).ok());
  CHECK(metrics.preload_unchanged.value() == 1);
  cfg.preload_source = dir.path() + "/missing.so";
  CHECK_FALSE(install_preload(cfg, &metrics).ok());
  CHECK(metrics.preload_error.value() == 1);
}

TEST_CASE("host setup turns the SMC-D loopback device off and on again, and says which it is") {
  Kernel k;
  SmcrConfig cfg;
  cfg.smcd_loopback = false;
  const std::vector<RdmaDevice> devices = {make_device("rxe0", "uverbs0", 0, PortState::Active, "eth0")};
  SmcrHostSetup off(cfg, k.table_opener(), k.info_opener(), [] { return std::string("lo"); });
  auto r = off.reconcile(devices);
  REQUIRE_OK(r);
  CHECK(r->smcd_loopback == "off");
  CHECK(sorted(k.table.entries) == sorted({ib("ERDMA", "rxe0"), eth("ERDMA", "eth0"), ib("ERDMANOSMCD", "lo")}));
  auto again = off.reconcile(devices);
  REQUIRE(again.ok());
  CHECK(again->applied.empty());

  cfg.smcd_loopback = true;
  SmcrHostSetup on(cfg, k.table_opener(), k.info_opener(), [] { return std::string("lo"); });
  auto r2 = on.reconcile(devices);
  REQUIRE(r2.ok());
  CHECK(r2->smcd_loopback == "on");
  CHECK(r2->applied == std::vector<std::string>{"delete pnet entries of ERDMANOSMCD"});
  CHECK(sorted(k.table.entries) == sorted({ib("ERDMA", "rxe0"), eth("ERDMA", "eth0")}));

  // An administrator's PNETID on the device: off, whatever the setting, and left alone.
  k.table.entries.push_back(ib("ADMIN", "lo"));
  auto r3 = on.reconcile(devices);
  REQUIRE(r3.ok());
  CHECK(r3->smcd_loopback == "off");
  CHECK(r3->applied.empty());

  // A kernel without the device: nothing to turn off, and no error.
  k.table.entries.clear();
  cfg.smcd_loopback = false;
  SmcrHostSetup none(cfg, k.table_opener(), k.info_opener(), [] { return std::string(); });
  auto r4 = none.reconcile(devices);
  REQUIRE(r4.ok());
  CHECK(r4->smcd_loopback == "absent");
  CHECK(sorted(k.table.entries) == sorted({ib("ERDMA", "rxe0"), eth("ERDMA", "eth0")}));
}

}  // namespace erdma::agent
