// In-memory fakes for the SMC-R interfaces: PnetTable, SmcInfo, SmcStatus and Netns. They keep
// state like the kernel does (per-table entries, EEXIST/ENOENT as Unchanged, IB entries ignored
// outside the initial netns, at most 4 UEIDs) and can be told to fail their next calls.
#pragma once

#include <algorithm>
#include <deque>
#include <string>
#include <vector>

#include "agent/sys/netns.hpp"
#include "agent/sys/pnet_table.hpp"
#include "agent/sys/smc_info.hpp"
#include "agent/sys/smc_status.hpp"

namespace erdma::agent::testing {

// Queued failures: each call pops one if present and returns it.
class FailQueue {
 public:
  void fail_next(Error e, int times = 1) {
    for (int i = 0; i < times; ++i) q_.push_back(e);
  }
  [[nodiscard]] std::optional<Error> pop() {
    if (q_.empty()) return std::nullopt;
    Error e = q_.front();
    q_.pop_front();
    return e;
  }

 private:
  std::deque<Error> q_;
};

class FakePnetTable final : public PnetTable {
 public:
  explicit FakePnetTable(bool initial_netns = true) : initial_netns_(initial_netns) {}

  std::vector<PnetEntry> entries;
  FailQueue failures;

  Result<std::vector<PnetEntry>> list() override {
    if (auto e = failures.pop()) return *e;
    return entries;
  }
  Result<Change> add(const PnetEntry& entry) override {
    if (auto e = failures.pop()) return *e;
    if (entry.kind == PnetEntryKind::Ib && !initial_netns_) return Change::Unchanged;  // kernel: EEXIST
    for (const auto& have : entries) {
      if (have.same_device(entry)) return Change::Unchanged;
    }
    entries.push_back(entry);
    return Change::Changed;
  }
  Result<Change> remove(const PnetId& id) override {
    if (auto e = failures.pop()) return *e;
    auto n = std::erase_if(entries, [&](const PnetEntry& x) { return x.pnet_id == id; });
    return n ? Change::Changed : Change::Unchanged;
  }
  Status flush() override {
    if (auto e = failures.pop()) return *e;
    entries.clear();
    return {};
  }

 private:
  bool initial_netns_;
};

class FakeSmcInfo final : public SmcInfo {
 public:
  SmcSystemInfo info{2, 1, false, true, "node-a", ""};
  std::vector<SmcrLinkGroup> groups;
  SmcStats counters;
  FallbackStats fallbacks;
  std::vector<Ueid> table;
  FailQueue failures;

  Result<SmcSystemInfo> system_info() override {
    if (auto e = failures.pop()) return *e;
    return info;
  }
  Result<std::vector<SmcrLinkGroup>> link_groups() override {
    if (auto e = failures.pop()) return *e;
    return groups;
  }
  Result<SmcStats> stats() override {
    if (auto e = failures.pop()) return *e;
    return counters;
  }
  Result<FallbackStats> fallback_stats() override {
    if (auto e = failures.pop()) return *e;
    return fallbacks;
  }
  Result<std::vector<Ueid>> ueids() override {
    if (auto e = failures.pop()) return *e;
    return table;
  }
  Result<Change> add_ueid(const Ueid& u) override {
    if (auto e = failures.pop()) return *e;
    if (std::find(table.begin(), table.end(), u) != table.end()) return Change::Unchanged;
    if (table.size() >= kMaxUeids) return make_error(ErrorCode::ResourceExhausted, "UEID table full");
    table.push_back(u);
    return Change::Changed;
  }
  Result<Change> remove_ueid(const Ueid& u) override {
    if (auto e = failures.pop()) return *e;
    auto n = std::erase(table, u);
    return n ? Change::Changed : Change::Unchanged;
  }
};

class FakeSmcStatus final : public SmcStatus {
 public:
  std::vector<SmcSocket> list;
  FailQueue failures;
  Result<std::vector<SmcSocket>> sockets() override {
    if (auto e = failures.pop()) return *e;
    return list;
  }
};

// Runs the work inline and remembers which namespaces it was asked for. Paths in `gone` are
// reported as vanished, like a pod deleted mid-way.
class FakeNetns final : public Netns {
 public:
  std::vector<std::string> entered;
  std::vector<std::string> gone;
  Status run(const NetnsRef& ns, std::function<Status()> fn, std::chrono::steady_clock::time_point) override {
    if (std::find(gone.begin(), gone.end(), ns.path) != gone.end()) {
      return make_error(ErrorCode::NotFound, "network namespace " + ns.path + " is gone");
    }
    entered.push_back(ns.path);
    return fn();
  }
};

}  // namespace erdma::agent::testing
