// What the C++ suites share: a temporary directory that removes itself, and REQUIRE_OK / CHECK_OK
// for a Result, a Status or a grpc::Status, which say the error when the value is not ok.
#pragma once

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include <doctest/doctest.h>
#include <stdlib.h>

namespace erdma::testing {

// A new, empty directory /tmp/erdma-<tag>-XXXXXX, removed with everything in it when the object
// goes away: at the end of the scope, and also when a REQUIRE fails or an exception leaves the
// test, since both unwind the stack. Under /tmp rather than $TMPDIR: the unix sockets tests make in
// it must keep their paths within 107 bytes. Throws std::runtime_error when the directory cannot
// be made (doctest reports it as the test's failure).
class TempDir {
 public:
  explicit TempDir(std::string_view tag = "test") {
    std::string tmpl = "/tmp/erdma-" + std::string(tag) + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      throw std::runtime_error("mkdtemp " + tmpl + ": " + std::generic_category().message(errno));
    }
    path_ = std::move(tmpl);
  }
  ~TempDir() {
    std::error_code ec;  // never throws: a destructor may run while an exception unwinds
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  // path()/rel.
  [[nodiscard]] std::string file(std::string_view rel) const { return path_ + "/" + std::string(rel); }
  // Writes `text` to path()/rel, making the directories on the way. In one step: written beside,
  // then renamed over, so a reader sees the old or the new text, and a new inode, as when the
  // kubelet updates a projected volume.
  void write(std::string_view rel, std::string_view text) const {
    const std::filesystem::path p = file(rel);
    std::filesystem::create_directories(p.parent_path());
    const std::filesystem::path beside = p.string() + ".new";
    std::ofstream(beside, std::ios::binary) << text;
    std::filesystem::rename(beside, p);
  }

 private:
  std::string path_;
};

// The message of a value that is not ok: Result<T> and Status (.error().message), grpc::Status
// (.error_message()). Only called for a value that is not ok.
template <class R>
[[nodiscard]] std::string error_text(const R& r) {
  if constexpr (requires { r.error().message; }) {
    return r.error().message;
  } else {
    return r.error_message();
  }
}

}  // namespace erdma::testing

// REQUIRE_OK(expr): `expr` (evaluated once) must be ok, else the test stops here and the report
// shows the expression and its error. CHECK_OK records the failure and goes on. Variadic only so
// that an expression with a top-level comma (a braced initializer) needs no extra parentheses.
#define ERDMA_TESTING_OK(assert_message, ...)                                                          \
  do {                                                                                                 \
    const auto& erdma_testing_value_ = (__VA_ARGS__);                                                  \
    assert_message(erdma_testing_value_.ok(),                                                          \
                   #__VA_ARGS__ " is not ok: " << ::erdma::testing::error_text(erdma_testing_value_)); \
  } while (false)
#define REQUIRE_OK(...) ERDMA_TESTING_OK(REQUIRE_MESSAGE, __VA_ARGS__)
#define CHECK_OK(...) ERDMA_TESTING_OK(CHECK_MESSAGE, __VA_ARGS__)
