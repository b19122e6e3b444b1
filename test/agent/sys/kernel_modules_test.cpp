// Driver facts and NCCL's GID choice read from fake sysfs trees, and the atomic feature-file
// write. The same GID choice on a real Soft-RoCE device: test/agent/hw/verbs_hw_test.cpp.
#include "agent/sys/kernel_modules.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "agent/core/plugin_model.hpp"
#include "agent/sys/sysfs_rdma.hpp"
#include "test/fakes/fake_sysfs.hpp"
#include "test/support.hpp"

namespace erdma::agent {
namespace {
using testing::FakeSysfs;

constexpr const char* kZero = "0000:0000:0000:0000:0000:0000:0000:0000";
constexpr const char* kLinkLocal = "fe80:0000:0000:0000:0216:3eff:fe00:0001";
constexpr const char* kV4 = "0000:0000:0000:0000:0000:ffff:0a00:0005";

std::optional<unsigned> gid_index_from(const FakeSysfs& s, const std::string& dev) {
  sysfs::SysfsRdmaReader reader(s.root());
  auto read = reader.read_device(dev, {});
  REQUIRE_OK(read);
  return ipv4_roce_v2_gid_index(read->device);
}
}  // namespace

TEST_CASE("GID index from a sysfs GID table: the RoCE v2 entry with an IPv4-mapped GID") {
  FakeSysfs s;
  // The usual RoCE table: 0 = link-local v1, 1 = link-local v2, 2 = IPv4 v1, 3 = IPv4 v2.
  s.rdma_device("erdma_0", "1: CA",
                {{0, kLinkLocal, "IB/RoCE v1"},
                 {1, kLinkLocal, "RoCE v2"},
                 {2, kV4, "IB/RoCE v1"},
                 {3, kV4, "RoCE v2"},
                 {4, kZero, ""}});
  // Another card whose table has no link-local v2 entry: the IPv4 v2 entry sits at 1.
  s.rdma_device("erdma_1", "1: CA", {{0, kLinkLocal, "IB/RoCE v1"}, {1, kV4, "RoCE v2"}}, "eth1");
  // iWARP-style table: one GID from the MAC, type unreadable.
  s.rdma_device("erdma_2", "4: RNIC", {{0, "0216:3e00:0001:0000:0000:0000:0000:0000", ""}});
  CHECK(gid_index_from(s, "erdma_0") == 3u);
  CHECK(gid_index_from(s, "erdma_1") == 1u);
  CHECK(gid_index_from(s, "erdma_2") == std::nullopt);
}

TEST_CASE("driver facts from /sys/module and the devices' node types") {
  SUBCASE("nothing loaded") {
    FakeSysfs s;
    const auto f = read_driver_facts(s.root());
    CHECK_FALSE(f.erdma_loaded);
    CHECK_FALSE(f.compat_mode.has_value());
    CHECK(found_mode(f) == "none");
  }
  SUBCASE("default erdma with SMC") {
    FakeSysfs s;
    s.file("module/erdma/parameters/compat_mode", "N\n");
    s.file("module/erdma/version", "0.2.38\n");
    s.dir("module/smc");
    s.rdma_device("erdma_0", "4: RNIC", {});
    const auto f = read_driver_facts(s.root());
    CHECK(f.erdma_loaded);
    CHECK(f.compat_mode == false);
    CHECK(f.erdma_version == "0.2.38");
    CHECK(f.smc_loaded);
    REQUIRE(f.node_types.size() == 1);
    CHECK(f.node_types[0] == std::pair<std::string, std::string>{"erdma_0", "RNIC"});
    CHECK(found_mode(f) == "default");
  }
  SUBCASE("compat_mode=Y") {
    FakeSysfs s;
    s.file("module/erdma/parameters/compat_mode", "Y\n");
    s.rdma_device("erdma_0", "1: CA", {});
    CHECK(found_mode(read_driver_facts(s.root())) == "compat");
  }
  SUBCASE("OFED stack on a GPU node") {
    FakeSysfs s;
    s.file("module/erdma/parameters/compat_mode", "Y\n");
    for (const char* m : {"mlx_compat", "nvidia", "nvidia_peermem"}) s.dir(std::string("module/") + m);
    const auto f = read_driver_facts(s.root());
    CHECK(f.ofed_stack);
    CHECK(f.nvidia_loaded);
    CHECK(f.nvidia_peermem_loaded);
    CHECK(found_mode(f) == "ofed");
  }
  SUBCASE("no compat_mode parameter: the node type decides; other drivers' devices are ignored") {
    FakeSysfs s;
    s.dir("module/erdma");
    s.rdma_device("mlx5_0", "1: CA", {});
    s.rdma_device("erdma_0", "4: RNIC", {});
    CHECK(found_mode(read_driver_facts(s.root())) == "default");
    s.rdma_device("erdma_1", "1: CA", {});
    CHECK(found_mode(read_driver_facts(s.root())) == "compat");
  }
}

TEST_CASE("parse_node_type") {
  CHECK(parse_node_type("1: CA\n") == "CA");
  CHECK(parse_node_type("4: RNIC") == "RNIC");
  CHECK(parse_node_type("CA") == "");
  CHECK(parse_node_type("7: BOGUS") == "");
}

TEST_CASE("write_file_atomically: replaces, reports unchanged, leaves no temporary file") {
  FakeSysfs s;
  const std::string path = s.root() + "/erdma";
  auto first = write_file_atomically(path, "a=1\n");
  REQUIRE_OK(first);
  CHECK(*first);
  auto same = write_file_atomically(path, "a=1\n");
  REQUIRE(same.ok());
  CHECK_FALSE(*same);
  auto changed = write_file_atomically(path, "a=2\n");
  REQUIRE(changed.ok());
  CHECK(*changed);
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  CHECK(line == "a=2");
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(s.root())) ++entries;
  CHECK(entries == 1);
  auto missing_dir = write_file_atomically(s.root() + "/no/such/dir/erdma", "x\n");
  REQUIRE_FALSE(missing_dir.ok());
  CHECK(missing_dir.error().message.find("no/such/dir/erdma") != std::string::npos);
}

}  // namespace erdma::agent

namespace erdma::agent {

TEST_CASE("run_modprobe: exit status, modprobe's own message, a missing binary, a hang") {
  testing::FakeSysfs dir;  // a scratch directory removed at the end
  const std::string log = dir.root() + "/args";
  auto script = [&](const std::string& name, const std::string& body) {
    const std::string path = dir.root() + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path;
  };
  const std::string ok = script("ok", "echo \"$@\" >> " + log + "\nexit 0\n");
  CHECK(run_modprobe(ok, "smc").ok());
  std::ifstream in(log);
  std::string line;
  std::getline(in, line);
  CHECK(line == "-- smc");  // the module is never taken for an option

  const std::string fail =
      script("fail", "echo 'modprobe: ERROR: could not insert smc: Operation not permitted' >&2\nexit 1\n");
  auto s = run_modprobe(fail, "smc");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == ErrorCode::FailedPrecondition);
  CAPTURE(s.error().message);
  CHECK(s.error().message.find(
            "modprobe smc failed (exit 1): modprobe: ERROR: could not insert smc: Operation not permitted") == 0);
  CHECK(s.error().message.find("CAP_SYS_MODULE") != std::string::npos);

  auto missing = run_modprobe(dir.root() + "/no-such-modprobe", "smc");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("cannot run") != std::string::npos);
  CHECK(missing.error().message.find("driver.modprobe") != std::string::npos);

  const std::string hang = script("hang", "exec sleep 30\n");
  auto slow = run_modprobe(hang, "smc", 200);
  REQUIRE_FALSE(slow.ok());
  CHECK(slow.error().code == ErrorCode::DeadlineExceeded);
}

}  // namespace erdma::agent
