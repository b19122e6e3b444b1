// The suites' shared helpers (test/support.hpp): the temporary directory goes away with its
// contents however the scope ends, and REQUIRE_OK / CHECK_OK pass ok values, name the error of
// the others, and evaluate their expression once.
#include "test/support.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "common/result.hpp"

namespace fs = std::filesystem;
using erdma::testing::error_text;
using erdma::testing::TempDir;

namespace {

// What grpc::Status offers the helpers, without gRPC.
struct GrpcLikeStatus {
  bool good;
  std::string message;
  [[nodiscard]] bool ok() const { return good; }
  [[nodiscard]] std::string error_message() const { return message; }
};

}  // namespace

TEST_CASE("TempDir: a new directory under /tmp named for its tag, removed with its contents at the end of the scope") {
  std::string path;
  {
    const TempDir dir("support");
    path = dir.path();
    CHECK(path.rfind("/tmp/erdma-support-", 0) == 0);
    CHECK(fs::is_directory(path));
    CHECK(fs::is_empty(path));
    dir.write("a/b/c.txt", "text");
    CHECK(dir.file("a/b/c.txt") == path + "/a/b/c.txt");
    std::ifstream in(dir.file("a/b/c.txt"));
    std::string got;
    std::getline(in, got);
    CHECK(got == "text");
    CHECK_FALSE(fs::exists(dir.file("a/b/c.txt.new")));  // written beside, then renamed over
    fs::create_directories(dir.file("d/e"));
    const TempDir other("support");
    CHECK(other.path() != path);
  }
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("TempDir: removed when the test stops on a failed REQUIRE or an exception") {
  // A failed REQUIRE throws to end the test case, as this exception does: the stack unwinds
  // through the directory's destructor either way.
  std::string path;
  CHECK_THROWS_AS(
      [&] {
        const TempDir dir("support");
        path = dir.path();
        dir.write("left.txt", "behind?");
        throw std::runtime_error("the test stops here");
      }(),
      std::runtime_error);
  REQUIRE_FALSE(path.empty());
  CHECK_FALSE(fs::exists(path));
}

TEST_CASE("REQUIRE_OK and CHECK_OK pass ok values and evaluate the expression once") {
  int calls = 0;
  const auto status = [&calls] {
    ++calls;
    return erdma::Status{};
  };
  REQUIRE_OK(status());
  CHECK(calls == 1);
  CHECK_OK(status());
  CHECK(calls == 2);
  const erdma::Result<int> value = 7;
  REQUIRE_OK(value);
  CHECK(*value == 7);
  REQUIRE_OK(GrpcLikeStatus{true, ""});
}

TEST_CASE("error_text: the message of a Result, a Status and a gRPC status that are not ok") {
  const erdma::Result<int> bad_result = erdma::make_error(erdma::ErrorCode::NotFound, "no such pod");
  CHECK(error_text(bad_result) == "no such pod");
  const erdma::Status bad_status = erdma::make_error(erdma::ErrorCode::Internal, "broken");
  CHECK(error_text(bad_status) == "broken");
  CHECK(error_text(GrpcLikeStatus{false, "UNAVAILABLE: connection refused"}) == "UNAVAILABLE: connection refused");
}

// The failure path itself: doctest counts this case as passed only if it fails, here.
TEST_CASE("REQUIRE_OK stops the test at a value that is not ok" * doctest::should_fail()) {
  REQUIRE_OK(erdma::Status(erdma::make_error(erdma::ErrorCode::Internal, "broken")));
}
