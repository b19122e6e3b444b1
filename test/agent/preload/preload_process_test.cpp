// libsmc-preload.so loaded into real, dynamically linked programs on this machine: a probe that
// reports what each socket() returned, Debian's python3 and curl. On a kernel without SMC nothing a
// program sees may change; UDP and unix sockets are never touched; SMC_DEBUG explains each decision.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

#include "process.hpp"
#include "test/eventually.hpp"
#include "test/skip.hpp"
#include "test/support.hpp"

using namespace erdma::agent::testing;
using erdma::testing::skip_or_fail;
// Each test's files; declared before the processes that write there, so it outlives them.
using erdma::testing::skip_test;
using erdma::testing::TempDir;

namespace {

const std::string kLib = SMC_PRELOAD_SO;
const std::string kProbe = PRELOAD_PROBE;
const std::string kTakeoverProbe = TAKEOVER_PROBE;
const std::string kEcho = std::string(ERDMA_SOURCE_DIR) + "/test/vm/smc_echo.py";
const std::string kPython = "/usr/bin/python3";  // Debian's, never a pyenv one first on PATH

bool kernel_has_smc() {
  int fd = ::socket(43, SOCK_STREAM, 0);
  if (fd >= 0) ::close(fd);
  return fd >= 0;
}

void require_no_smc() {
  if (kernel_has_smc()) skip_test("this kernel has SMC; the no-SMC fallback is checked where it has none");
}

std::map<std::string, std::string> base_env() { return {{"PATH", "/usr/bin:/bin"}, {"LANG", "C"}}; }

std::map<std::string, std::string> preload_env(std::map<std::string, std::string> extra = {}) {
  auto env = base_env();
  env["LD_PRELOAD"] = kLib;
  for (auto& [k, v] : extra) env[k] = v;
  return env;
}

// "tcp4 fd=3 domain=2 ..." -> {"tcp4": {"fd": "3", "domain": "2", ...}}
std::map<std::string, std::map<std::string, std::string>> parse_kinds(const std::string& out) {
  std::map<std::string, std::map<std::string, std::string>> kinds;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    std::string kind, kv;
    words >> kind;
    while (words >> kv) {
      auto eq = kv.find('=');
      if (eq != std::string::npos) kinds[kind][kv.substr(0, eq)] = kv.substr(eq + 1);
    }
  }
  return kinds;
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = hay.find(needle); pos != std::string::npos; pos = hay.find(needle, pos + 1)) ++n;
  return n;
}

int sysctl_int(const char* path) {
  std::ifstream f(path);
  int v = 0;
  f >> v;
  return v;
}

}  // namespace

TEST_CASE("without SMC every socket is exactly what the program asked for") {
  require_no_smc();
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  auto plain = run({kProbe, "kinds"}, base_env(), dir, "plain");
  auto pre = run({kProbe, "kinds"}, preload_env(), dir, "pre");
  REQUIRE(plain.exit_code == 0);
  REQUIRE(pre.exit_code == 0);
  auto a = parse_kinds(plain.out);
  auto b = parse_kinds(pre.out);
  REQUIRE(a.size() == 7);
  for (const auto& entry : a) {
    const std::string& kind = entry.first;
    CAPTURE(kind);
    CHECK(b[kind] == entry.second);
  }
  CHECK(b["tcp4"]["domain"] == "2");
  CHECK(b["tcp4"]["protocol"] == "6");
  CHECK(b["tcp6"]["domain"] == "10");
  CHECK(b["tcp4flags"]["nonblock"] == "1");
  CHECK(b["tcp4flags"]["cloexec"] == "1");
  CHECK(b["tcp4"]["nonblock"] == "0");
  CHECK(pre.err.empty());  // silent unless asked
}

TEST_CASE("SMC_DEBUG prints one line per decision and remembers the missing kernel support") {
  require_no_smc();
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  auto r = run({kProbe, "kinds"}, preload_env({{"SMC_DEBUG", "1"}}), dir, "debug");
  REQUIRE(r.exit_code == 0);
  CHECK(count(r.err, "IPPROTO_SMC not offered by this kernel (EPROTONOSUPPORT)") == 1);
  CHECK(count(r.err, "AF_SMC not offered by this kernel (EAFNOSUPPORT)") == 1);
  CHECK(count(r.err, "-> TCP fd") == 3);  // tcp4, tcp4flags, tcp6; never udp, unix or sctp
  CHECK(count(r.err, "socket(AF_INET, SOCK_STREAM|SOCK_NONBLOCK|SOCK_CLOEXEC, 6) -> TCP") == 1);
  CHECK(count(r.err, "socket(AF_INET6, SOCK_STREAM, 0) -> TCP") == 1);
  CHECK(count(r.err, "smc-preload[") == count(r.err, "\n"));  // every line is ours and whole
}

TEST_CASE("SMC_PRELOAD_MODE=af_smc never tries IPPROTO_SMC") {
  require_no_smc();
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  auto r = run({kProbe, "kinds"}, preload_env({{"SMC_DEBUG", "1"}, {"SMC_PRELOAD_MODE", "af_smc"}}), dir, "afsmc");
  REQUIRE(r.exit_code == 0);
  CHECK(count(r.err, "IPPROTO_SMC") == 0);
  CHECK(count(r.err, "AF_SMC not offered") == 1);
  CHECK(count(r.err, "mode=af_smc") == 1);
}

TEST_CASE("garbage environment values are reported once and ignored") {
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  auto plain = run({kProbe, "kinds"}, base_env(), dir, "plain");
  auto r =
      run({kProbe, "kinds"}, preload_env({{"SMC_SNDBUF", "12x"}, {"SMC_RCVBUF", "-1"}, {"SMC_PRELOAD_MODE", "inet"}}),
          dir, "garbage");
  REQUIRE(r.exit_code == 0);
  CHECK(count(r.err, "ignoring SMC_SNDBUF=\"12x\"") == 1);
  CHECK(count(r.err, "ignoring SMC_RCVBUF=\"-1\"") == 1);
  CHECK(count(r.err, "ignoring SMC_PRELOAD_MODE=\"inet\"") == 1);
  auto a = parse_kinds(plain.out);
  auto b = parse_kinds(r.out);
  if (!kernel_has_smc()) CHECK(b["tcp4"]["sndbuf"] == a["tcp4"]["sndbuf"]);
  CHECK(b["udp4"] == a["udp4"]);
}

TEST_CASE("SMC_SNDBUF and SMC_RCVBUF size TCP sockets only") {
  require_no_smc();
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  auto plain = run({kProbe, "kinds"}, base_env(), dir, "plain");
  auto r = run({kProbe, "kinds"}, preload_env({{"SMC_SNDBUF", "64K"}, {"SMC_RCVBUF", "128k"}}), dir, "sized");
  REQUIRE(r.exit_code == 0);
  auto a = parse_kinds(plain.out);
  auto b = parse_kinds(r.out);
  // The kernel doubles the request and caps it at wmem_max / rmem_max.
  const int snd = 2 * std::min(65536, sysctl_int("/proc/sys/net/core/wmem_max"));
  const int rcv = 2 * std::min(131072, sysctl_int("/proc/sys/net/core/rmem_max"));
  CHECK(b["tcp4"]["sndbuf"] == std::to_string(snd));
  CHECK(b["tcp4"]["rcvbuf"] == std::to_string(rcv));
  CHECK(b["tcp6"]["sndbuf"] == std::to_string(snd));
  CHECK(b["udp4"] == a["udp4"]);
  CHECK(b["unix"]["sndbuf"] == a["unix"]["sndbuf"]);
}

TEST_CASE("many threads create sockets at once") {
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  auto r = run({kProbe, "threads", "16"}, preload_env({{"SMC_DEBUG", "1"}}), dir, "threads");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("failures=0") != std::string::npos);
}

TEST_CASE("errno is left as it was after a successful call") {
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  auto r = run({kProbe, "errno"}, preload_env(), dir, "errno");
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("fd_ok=1 errno_after=1234") != std::string::npos);
}

TEST_CASE("python client and server exchange data under the preload") {
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  auto r = run({kPython, kEcho, "selftest", "--bytes", "4194304"}, preload_env({{"SMC_DEBUG", "1"}}), dir, "python");
  CHECK(r.exit_code == 0);
  CHECK(r.out.find("OK bytes=4194304") != std::string::npos);
  CHECK(r.out.find("UDP OK") != std::string::npos);
  CHECK(r.out.find("UNIX OK") != std::string::npos);
  CHECK(count(r.err, "smc-preload[") >= 2);  // the listener and the client, at least
  if (!kernel_has_smc()) CHECK(count(r.err, "-> TCP fd") >= 2);
}

TEST_CASE("curl downloads from python's http.server, both preloaded") {
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  std::string blob(2 * 1024 * 1024, '\0');
  std::mt19937 rng(7);
  for (auto& c : blob) c = static_cast<char>(rng() & 0xff);
  {
    std::ofstream f(dir + "/blob.bin", std::ios::binary);
    f.write(blob.data(), static_cast<std::streamsize>(blob.size()));
  }
  auto env = preload_env({{"SMC_DEBUG", "1"}, {"PYTHONUNBUFFERED", "1"}});
  Process server({kPython, "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory", dir}, env, dir, "httpd");
  std::string port;
  // The server prints "... port N (http://...) ..." once it listens; the space after N ends it.
  REQUIRE(erdma::testing::eventually([&] {
    const auto out = server.out();
    const auto pos = out.find(" port ");
    const auto end = pos == std::string::npos ? pos : out.find(' ', pos + 6);
    if (end != std::string::npos) port = out.substr(pos + 6, end - pos - 6);
    return !port.empty();
  }));
  auto r = run(
      {"/usr/bin/curl", "-sS", "--max-time", "30", "-o", dir + "/got.bin", "http://127.0.0.1:" + port + "/blob.bin"},
      env, dir, "curl");
  CHECK(r.exit_code == 0);
  CHECK(slurp(dir + "/got.bin") == blob);
  CHECK(count(r.err, "smc-preload[") >= 1);
}

TEST_CASE("the library needs nothing but libc (and libdl for old glibc) and exports only socket") {
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  auto needed = run({"/usr/bin/readelf", "-d", kLib}, base_env(), dir, "readelf");
  REQUIRE(needed.exit_code == 0);
  CHECK(count(needed.out, "(NEEDED)") == 2);
  CHECK(needed.out.find("Shared library: [libc.so.6]") != std::string::npos);
  CHECK(needed.out.find("Shared library: [libdl.so.2]") != std::string::npos);  // dlsym before glibc 2.34
  auto syms = run({"/usr/bin/nm", "-D", "--defined-only", kLib}, base_env(), dir, "nm");
  REQUIRE(syms.exit_code == 0);
  CHECK(count(syms.out, "\n") == 1);
  CHECK(syms.out.find(" T socket") != std::string::npos);
}

// The object is injected into images built on any libc: older glibc refuses a symbol version it
// does not have, and musl fails at start on any symbol it lacks. So every undefined symbol must
// be a function both have since the x86_64 baseline, bound to GLIBC_2.2.5.
TEST_CASE("every undefined symbol is a portable libc function at version GLIBC_2.2.5") {
  const std::set<std::string> portable = {
      "getenv",  "__errno_location", "vsnprintf", "snprintf",       "setsockopt", "write",   "getpid", "strcmp",
      "syscall", "sched_yield",      "dlsym",     "__cxa_finalize", "getuid",     "geteuid", "getgid", "getegid"};
  // Weak references the toolchain adds to every shared object; nothing needs them to resolve.
  const std::set<std::string> weak_ok = {"__gmon_start__", "_ITM_deregisterTMCloneTable", "_ITM_registerTMCloneTable",
                                         "__cxa_finalize"};
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  auto r = run({"/usr/bin/objdump", "-T", kLib}, base_env(), dir, "objdump");
  REQUIRE(r.exit_code == 0);
  std::istringstream lines(r.out);
  std::string line;
  size_t undefined = 0;
  while (std::getline(lines, line)) {
    if (line.find("*UND*") == std::string::npos) continue;
    ++undefined;
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    REQUIRE(w.size() >= 3);
    const std::string name = w.back();
    const std::string version = w[w.size() - 2];
    const bool weak = line.find(" w ") != std::string::npos;
    CAPTURE(line);
    if (weak) {
      CHECK(weak_ok.count(name) == 1);
    } else {
      CHECK_MESSAGE(portable.count(name) == 1, name << " is not on the list of portable libc functions");
    }
    CHECK_MESSAGE(name.find("_chk") == std::string::npos, name << ": a _FORTIFY_SOURCE call glibc-only");
    if (version != "Base") CHECK_MESSAGE(version == "(GLIBC_2.2.5)", name << " needs " << version);
  }
  CHECK(undefined >= 10);  // the parse saw the table
  auto p = run({"/usr/bin/objdump", "-p", kLib}, base_env(), dir, "objdump-p");
  REQUIRE(p.exit_code == 0);
  // The only version any needed library must define.
  CHECK(count(p.out, "GLIBC_2.") == 1);
  CHECK(p.out.find("GLIBC_2.2.5") != std::string::npos);
}

TEST_CASE("a musl program starts and works with the library preloaded") {
  const std::string probe = MUSL_PROBE;
  if (probe.empty()) skip_or_fail("musl-gcc is not installed (Debian package musl-tools): no musl program to try");
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  auto plain = run({probe, "kinds"}, base_env(), dir, "musl-plain");
  REQUIRE(plain.exit_code == 0);
  auto pre = run({probe, "kinds"}, preload_env({{"SMC_DEBUG", "1"}}), dir, "musl-pre");
  CHECK(pre.exit_code == 0);
  CHECK(pre.err.find("Error relocating") == std::string::npos);
  CHECK(count(pre.err, "smc-preload[") >= 1);          // loaded and interposing under musl's loader
  if (!kernel_has_smc()) CHECK(pre.out == plain.out);  // nothing the program sees changes
}

// Review L7: an unprivileged caller of a setuid or setgid program (reached only when the library is
// in /etc/ld.so.preload: ld.so ignores LD_PRELOAD paths there) must not steer its diagnostics.
TEST_CASE("SMC_DEBUG is ignored when the real and effective ids differ") {
  if (::geteuid() != 0) skip_or_fail("needs root to give the probe a real uid or gid other than its effective one");
  TempDir scratch("preload");
  const std::string dir = scratch.path();
  auto env = base_env();
  env["SMC_DEBUG"] = "1";
  auto plain = run({kProbe, "dlopen", kLib}, env, dir, "dlopen");
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.err.find("smc-preload[") != std::string::npos);  // believed: the library says it loaded
  for (const char* which : {"uid", "gid"}) {
    CAPTURE(which);
    auto secure = run({kProbe, "secure", which, kLib}, env, dir, std::string("secure-") + which);
    REQUIRE_MESSAGE(secure.exit_code == 0, secure.out);
    CHECK(secure.out.find("dlopen=ok") != std::string::npos);
    CHECK(secure.err.find("smc-preload[") == std::string::npos);
  }
}

TEST_CASE("a child forked while another thread initialises takes the initialisation over") {
  TempDir scratch("preload");
  auto r = run({kTakeoverProbe}, base_env(), scratch.path(), "takeover");
  REQUIRE(r.exit_code == 0);
  // child_exit=0: the child saw its parent's pid in the init word, claimed it and made its socket.
  CHECK(r.out.find("child_exit=0 parent_takeovers=0 parent_socket=1") != std::string::npos);
}
