// The decoders against replies a real kernel sent (Debian 6.12.95 in the VM test, recorded by
// test/vm/run.sh during an SMC-R connection from rxe0/veth0 10.99.0.1 to rxe1/veth1 10.99.0.2 with
// pnet entries PNETA: veth0, rxe0/1 and PNETB: veth1, rxe1/1 and UEID E2E-TEST-UEID).
#include "agent/sys/smc_codec.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "test/support.hpp"

using namespace erdma;
using namespace erdma::agent;

namespace {

// Hex bytes, '#' comments; returned 4-byte aligned as netlink wants.
struct Recorded {
  std::vector<uint32_t> words;
  size_t size = 0;
  std::span<const uint8_t> bytes() const { return {reinterpret_cast<const uint8_t*>(words.data()), size}; }
};

Recorded load(const std::string& name) {
  std::ifstream f(std::string(ERDMA_SOURCE_DIR) + "/test/agent/sys/testdata/" + name + ".hex");
  REQUIRE(f.good());
  std::vector<uint8_t> bytes;
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line[0] == '#') continue;
    for (size_t i = 0; i + 1 < line.size();) {
      if (std::isxdigit(static_cast<unsigned char>(line[i])) == 0) {
        ++i;
        continue;
      }
      bytes.push_back(static_cast<uint8_t>(std::stoi(line.substr(i, 2), nullptr, 16)));
      i += 2;
    }
  }
  Recorded r;
  r.size = bytes.size();
  r.words.resize((bytes.size() + 3) / 4);
  std::memcpy(r.words.data(), bytes.data(), bytes.size());
  return r;
}

std::vector<const nlmsghdr*> messages(const Recorded& r) {
  auto split = split_netlink_messages(r.bytes());
  REQUIRE(split.ok());
  return *split;
}

}  // namespace

TEST_CASE("recorded pnet dump: the four entries the scenario added") {
  auto rec = load("pnet_dump");
  std::vector<PnetEntry> got;
  for (const auto* h : messages(rec)) {
    auto e = decode_pnet_reply(h);
    REQUIRE_OK(e);
    got.insert(got.end(), e->begin(), e->end());
  }
  std::sort(got.begin(), got.end());
  std::vector<PnetEntry> want{PnetEntry::eth("PNETA", "veth0").value(), PnetEntry::ib("PNETA", "rxe0", 1).value(),
                              PnetEntry::eth("PNETB", "veth1").value(), PnetEntry::ib("PNETB", "rxe1", 1).value()};
  std::sort(want.begin(), want.end());
  CHECK(got == want);
}

TEST_CASE("recorded UEID dump") {
  auto rec = load("ueid_dump");
  auto msgs = messages(rec);
  REQUIRE(msgs.size() == 1);
  auto u = decode_ueid_reply(msgs[0]);
  REQUIRE(u.ok());
  CHECK(u->str() == "E2E-TEST-UEID");
}

TEST_CASE("recorded system info") {
  auto rec = load("sys_info");
  auto msgs = messages(rec);
  REQUIRE(msgs.size() == 1);
  auto info = decode_sys_info(msgs[0]);
  REQUIRE_OK(info);
  CHECK(info->version == 2);
  REQUIRE(info->smcr_v2.has_value());
  CHECK(*info->smcr_v2);
}

TEST_CASE("recorded link dump: one link group per side, each on its rxe device") {
  auto rec = load("link_dump");
  LinkDumpCollector c;
  for (const auto* h : messages(rec)) {
    auto st = c.add(h);
    REQUIRE_OK(st);
  }
  auto groups = c.take();
  REQUIRE(groups.size() == 2);
  std::vector<std::string> pnetids, devices;
  for (const auto& g : groups) {
    pnetids.push_back(g.pnet_id);
    REQUIRE(g.links.size() == 1);
    devices.push_back(g.links[0].ib_device);
    CHECK(smc_link_state_name(g.links[0].state) == "ACTIVE");
    CHECK(g.links[0].gid.find("ffff") != std::string::npos);  // an IPv4-mapped RoCE v2 GID
  }
  std::sort(pnetids.begin(), pnetids.end());
  std::sort(devices.begin(), devices.end());
  CHECK(pnetids == std::vector<std::string>{"PNETA", "PNETB"});
  CHECK(devices == std::vector<std::string>{"rxe0", "rxe1"});
}

TEST_CASE("recorded statistics: one SMC-R v2 connection on each side") {
  auto rec = load("stats");
  auto msgs = messages(rec);
  REQUIRE(msgs.size() == 1);
  auto s = decode_stats(msgs[0]);
  REQUIRE_OK(s);
  CHECK(s->smcr.client_v2_success == 1);
  CHECK(s->smcr.server_v2_success == 1);
  CHECK(s->smcr.client_v1_success == 0);
  CHECK(s->smcr.rx_bytes >= 16777216);
  CHECK(s->smcd.client_v2_success == 0);
}

TEST_CASE("recorded sock_diag: the client socket is SMCR on rxe0") {
  auto rec = load("smc_diag");
  bool found = false;
  for (const auto* h : messages(rec)) {
    if (h->nlmsg_type == NLMSG_DONE) continue;
    auto s = decode_smc_diag(h);
    REQUIRE_OK(s);
    if (s->local.rfind("10.99.0.1:", 0) == 0 && s->peer.rfind("10.99.0.2:", 0) == 0) {
      found = true;
      CHECK(s->mode == SmcMode::Smcr);
      CHECK(s->ib_device == "rxe0");
      CHECK(s->ib_port == 1);
      CHECK_FALSE(s->fallback_reason.has_value());
    }
  }
  CHECK(found);
}

TEST_CASE("recorded replies cut short are refused") {
  auto rec = load("stats");
  auto bytes = rec.bytes();
  auto cut = split_netlink_messages(bytes.first(bytes.size() - 8));
  CHECK_FALSE(cut.ok());
}
