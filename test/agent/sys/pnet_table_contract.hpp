// The behaviour every PnetTable must show, run over the fake (always) and over the kernel
// (needs-kernel, in the VM). Uses PNETIDs and device names no real setup uses, and leaves the
// table empty.
#pragma once

#include <algorithm>

#include <doctest/doctest.h>

#include "agent/sys/pnet_table.hpp"

namespace erdma::agent::testing {

inline bool contains(const std::vector<PnetEntry>& v, const PnetEntry& e) {
  return std::find(v.begin(), v.end(), e) != v.end();
}

// `initial_netns`: IB entries are only kept in the initial network namespace.
inline void check_pnet_table_contract(PnetTable& table, bool initial_netns) {
  REQUIRE(table.flush().ok());
  auto empty = table.list();
  REQUIRE(empty.ok());
  CHECK(empty->empty());

  const auto eth = PnetEntry::eth("CONTRACTA", "ctveth0").value();
  const auto ib = PnetEntry::ib("CONTRACTA", "ctrxe9", 1).value();
  auto added = table.add(eth);
  REQUIRE(added.ok());
  CHECK(*added == Change::Changed);
  auto again = table.add(eth);
  REQUIRE(again.ok());
  CHECK(*again == Change::Unchanged);

  // The same interface under another PNETID is refused by the kernel with EEXIST: unchanged.
  auto other = table.add(PnetEntry::eth("CONTRACTB", "ctveth0").value());
  REQUIRE(other.ok());
  CHECK(*other == Change::Unchanged);

  auto ib_added = table.add(ib);
  REQUIRE(ib_added.ok());
  CHECK(*ib_added == (initial_netns ? Change::Changed : Change::Unchanged));

  auto listed = table.list();
  REQUIRE(listed.ok());
  CHECK(contains(*listed, eth));
  CHECK(contains(*listed, ib) == initial_netns);
  CHECK(listed->size() == (initial_netns ? 2U : 1U));

  auto removed = table.remove(PnetId::parse("contracta").value());
  REQUIRE(removed.ok());
  CHECK(*removed == Change::Changed);
  auto removed_again = table.remove(PnetId::parse("CONTRACTA").value());
  REQUIRE(removed_again.ok());
  CHECK(*removed_again == Change::Unchanged);
  auto after = table.list();
  REQUIRE(after.ok());
  CHECK(after->empty());

  REQUIRE(table.add(PnetEntry::eth("CONTRACTC", "ctveth1").value()).ok());
  REQUIRE(table.flush().ok());
  auto flushed = table.list();
  REQUIRE(flushed.ok());
  CHECK(flushed->empty());
}

}  // namespace erdma::agent::testing
