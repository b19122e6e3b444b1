// The PnetTable contract over the in-memory fake (the kernel runs it in agent_smc_kernel_test).
#include "pnet_table_contract.hpp"

#include "test/fakes/fake_smc.hpp"

using namespace erdma::agent;

TEST_CASE("fake pnet table keeps the contract in the initial netns") {
  testing::FakePnetTable table(true);
  testing::check_pnet_table_contract(table, true);
}

TEST_CASE("fake pnet table keeps the contract in a pod netns") {
  testing::FakePnetTable table(false);
  testing::check_pnet_table_contract(table, false);
}

TEST_CASE("fake pnet table fails on request") {
  testing::FakePnetTable table;
  table.failures.fail_next(erdma::make_error(erdma::ErrorCode::PermissionDenied, "no"));
  CHECK(table.list().error().code == erdma::ErrorCode::PermissionDenied);
  CHECK(table.list().ok());
}
