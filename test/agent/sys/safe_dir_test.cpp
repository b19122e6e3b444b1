// Writing into host directories that other node components may share: nothing planted in them is
// followed (symbolic links, FIFOs, a fixed temporary name), and a directory someone else may write
// to is refused with the fix (security review 2026-12, M4 and L4).
#include "agent/sys/safe_dir.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/sys/file_install.hpp"
#include "agent/sys/kernel_modules.hpp"
#include "test/fakes/fake_sysfs.hpp"
#include "test/support.hpp"

namespace erdma::agent {
namespace {

namespace fs = std::filesystem;
using testing::FakeSysfs;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Directories the fixture made: the agent's own, whatever the umask.
void owned(const std::string& dir) { REQUIRE(::chmod(dir.c_str(), 0755) == 0); }

size_t entries(const std::string& dir) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

}  // namespace

TEST_CASE("NFD feature file: a planted .erdma.tmp symlink is not followed (M4)") {
  FakeSysfs s;
  s.dir("features.d");
  s.file("victim", "precious\n");
  const std::string dir = s.root() + "/features.d";
  owned(dir);
  // The temporary name the writer used before, pointing at a file the agent must never touch.
  s.symlink(s.root() + "/victim", "features.d/.erdma.tmp");
  auto w = write_file_atomically(dir + "/erdma", "erdma.driver=compat\n");
  REQUIRE_OK(w);
  CHECK(*w);
  CHECK(slurp(s.root() + "/victim") == "precious\n");
  CHECK(fs::is_regular_file(fs::symlink_status(dir + "/erdma")));
  CHECK(slurp(dir + "/erdma") == "erdma.driver=compat\n");
  CHECK(fs::is_symlink(fs::symlink_status(dir + "/.erdma.tmp")));  // left alone, not followed
  CHECK(entries(dir) == 2);

  // The feature file itself a symbolic link: replaced by a regular file, its target untouched.
  fs::remove(dir + "/erdma");
  fs::create_symlink(s.root() + "/victim", dir + "/erdma");
  w = write_file_atomically(dir + "/erdma", "erdma.driver=compat\n");
  REQUIRE_OK(w);
  CHECK(*w);  // a link is never "unchanged", whatever it points at
  CHECK(slurp(s.root() + "/victim") == "precious\n");
  CHECK(fs::is_regular_file(fs::symlink_status(dir + "/erdma")));
}

TEST_CASE("NFD feature file: a directory others may write to is refused with the fix") {
  FakeSysfs s;
  s.dir("features.d");
  const std::string dir = s.root() + "/features.d";
  REQUIRE(::chmod(dir.c_str(), 0777) == 0);  // as a drop-in directory "for everyone" might be
  auto w = write_file_atomically(dir + "/erdma", "x=1\n");
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().code == ErrorCode::FailedPrecondition);
  CHECK(w.error().message.find("chmod go-w " + dir) != std::string::npos);
  CHECK(entries(dir) == 0);
}

TEST_CASE("preload install: a symlink at the target is replaced, its target untouched (L4)") {
  FakeSysfs s;
  s.file("build/lib.so", "new library");
  s.file("victim", "precious");
  s.symlink(s.root() + "/victim", "host/lib/libsmc-preload.so");
  const std::string dir = s.root() + "/host/lib";
  owned(dir);
  owned(s.root() + "/host");
  auto r = install_file_atomically(s.root() + "/build/lib.so", dir, "libsmc-preload.so");
  REQUIRE_OK(r);
  CHECK(*r == InstallResult::Installed);
  CHECK(slurp(s.root() + "/victim") == "precious");
  const std::string target = dir + "/libsmc-preload.so";
  CHECK(fs::is_regular_file(fs::symlink_status(target)));
  CHECK(slurp(target) == "new library");
  struct stat st {};
  REQUIRE(::lstat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0755);
  CHECK(st.st_uid == ::geteuid());
  CHECK(install_file_atomically(s.root() + "/build/lib.so", dir, "libsmc-preload.so").value() ==
        InstallResult::Unchanged);
}

TEST_CASE("preload install: a FIFO at the target does not block and is replaced") {
  FakeSysfs s;
  s.file("build/lib.so", "new library");
  s.dir("lib");
  const std::string dir = s.root() + "/lib";
  owned(dir);
  REQUIRE(::mkfifo((dir + "/libsmc-preload.so").c_str(), 0644) == 0);
  // Before: open(O_RDONLY) of the FIFO waited for a writer forever.
  auto r = install_file_atomically(s.root() + "/build/lib.so", dir, "libsmc-preload.so");
  REQUIRE_OK(r);
  CHECK(*r == InstallResult::Installed);
  CHECK(fs::is_regular_file(fs::symlink_status(dir + "/libsmc-preload.so")));
  CHECK(entries(dir) == 1);
}

TEST_CASE("preload install: a group-writable directory, a foreign owner and a symlinked path are refused") {
  FakeSysfs s;
  s.file("build/lib.so", "lib");
  s.dir("lib");
  const std::string src = s.root() + "/build/lib.so";
  const std::string dir = s.root() + "/lib";
  REQUIRE(::chmod(dir.c_str(), 0775) == 0);
  auto r = install_file_atomically(src, dir, "libsmc-preload.so");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::FailedPrecondition);
  CHECK(r.error().message.find("0775") != std::string::npos);
  CHECK(r.error().message.find("chmod go-w " + dir) != std::string::npos);
  CHECK(entries(dir) == 0);

  // A parent others may write to (no sticky bit) could have the directory swapped.
  REQUIRE(::chmod(dir.c_str(), 0755) == 0);
  s.dir("open/lib");
  owned(s.root() + "/open/lib");
  REQUIRE(::chmod((s.root() + "/open").c_str(), 0777) == 0);
  r = install_file_atomically(src, s.root() + "/open/lib", "libsmc-preload.so");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message.find("a parent") != std::string::npos);

  // A symbolic link on the way is not followed.
  s.symlink(dir, "linked");
  r = install_file_atomically(src, s.root() + "/linked", "libsmc-preload.so");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::InvalidArgument);
  CHECK(r.error().message.find("symbolic link") != std::string::npos);

  if (::geteuid() == 0) {
    // Owned by someone else than the agent.
    REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
    r = install_file_atomically(src, dir, "libsmc-preload.so");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().message.find("owned by uid 65534") != std::string::npos);
    REQUIRE(::chown(dir.c_str(), 0, 0) == 0);
  }
  // Missing directories are created, each 0755 and the agent's.
  r = install_file_atomically(src, s.root() + "/new/a/b", "libsmc-preload.so");
  REQUIRE_OK(r);
  CHECK(fs::is_regular_file(s.root() + "/new/a/b/libsmc-preload.so"));
}

TEST_CASE("SafeDir::read_regular reads regular files only") {
  FakeSysfs s;
  s.file("d/plain", "text");
  s.symlink(s.root() + "/d/plain", "d/link");
  s.dir("d/sub");
  owned(s.root() + "/d");
  auto d = SafeDir::open(s.root() + "/d", false);
  REQUIRE_OK(d);
  auto plain = d->read_regular("plain", 100);
  REQUIRE(plain.ok());
  REQUIRE(plain->has_value());
  CHECK((*plain)->content == "text");
  CHECK_FALSE(d->read_regular("link", 100).value().has_value());
  CHECK_FALSE(d->read_regular("sub", 100).value().has_value());
  CHECK_FALSE(d->read_regular("missing", 100).value().has_value());
  CHECK(d->read_regular("plain", 2).error().code == ErrorCode::InvalidArgument);
  CHECK(SafeDir::open(s.root() + "/none", false).error().code == ErrorCode::NotFound);
  CHECK(SafeDir::open("relative/dir", false).error().code == ErrorCode::InvalidArgument);
  CHECK(SafeDir::open(s.root() + "/d/../d", false).error().code == ErrorCode::InvalidArgument);
}

}  // namespace erdma::agent
