// The preload library's decisions, called directly (C functions, no process needed).
#include "preload_logic.h"

#include <doctest/doctest.h>

#include <cerrno>
#include <climits>
#include <netinet/in.h>
#include <string>
#include <sys/socket.h>
#include <vector>

TEST_CASE("only TCP stream requests are candidates") {
  struct Case {
    int domain, type, protocol, want;
  };
  const std::vector<Case> cases{
      {AF_INET, SOCK_STREAM, 0, 1},
      {AF_INET6, SOCK_STREAM, 0, 1},
      {AF_INET, SOCK_STREAM, IPPROTO_TCP, 1},
      {AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0, 1},
      {AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP, 1},
      {AF_INET, SOCK_DGRAM, 0, 0},
      {AF_INET, SOCK_DGRAM, IPPROTO_UDP, 0},
      {AF_UNIX, SOCK_STREAM, 0, 0},
      {AF_PACKET, SOCK_RAW, 0, 0},
      {AF_INET, SOCK_SEQPACKET, 0, 0},
      {AF_INET, SOCK_RAW, IPPROTO_TCP, 0},
      {AF_INET, SOCK_STREAM, 132 /* SCTP */, 0},
      {AF_INET, SOCK_STREAM, 262 /* MPTCP */, 0},
      {AF_INET, SOCK_STREAM, 256 /* IPPROTO_SMC already */, 0},
      {43 /* AF_SMC already */, SOCK_STREAM, 0, 0},
      {AF_INET, SOCK_STREAM | 0x10000000, 0, 0},
  };
  for (const auto& c : cases) {
    CAPTURE(c.domain);
    CAPTURE(c.type);
    CAPTURE(c.protocol);
    CHECK(smc_preload_is_tcp_request(c.domain, c.type, c.protocol) == c.want);
  }
}

TEST_CASE("SMC_SNDBUF and SMC_RCVBUF parse with K and M suffixes") {
  struct Case {
    const char* in;
    int rc;
    int want;
  };
  const std::vector<Case> cases{
      {"1", 0, 1},
      {"65536", 0, 65536},
      {"64K", 0, 65536},
      {"64k", 0, 65536},
      {"2M", 0, 2 * 1024 * 1024},
      {"2m", 0, 2 * 1024 * 1024},
      {"2047M", 0, 2047 * 1024 * 1024},
      {"2147483647", 0, INT_MAX},
      {"2048M", -1, 0},
      {"2147483648", -1, 0},
      {"99999999999999999999", -1, 0},
      {"0", -1, 0},
      {"0K", -1, 0},
      {"", -1, 0},
      {"K", -1, 0},
      {"12x", -1, 0},
      {"12KB", -1, 0},
      {"1G", -1, 0},
      {"-5", -1, 0},
      {"+5", -1, 0},
      {" 5", -1, 0},
      {"5 ", -1, 0},
      {"1.5M", -1, 0},
      {"0x10", -1, 0},
  };
  for (const auto& c : cases) {
    CAPTURE(std::string(c.in));
    int out = -7;
    CHECK(smc_preload_parse_size(c.in, &out) == c.rc);
    if (c.rc == 0) CHECK(out == c.want);
    if (c.rc != 0) CHECK(out == -7);  // untouched on error
  }
  int out = 0;
  CHECK(smc_preload_parse_size(nullptr, &out) == -1);
}

TEST_CASE("SMC_PRELOAD_MODE parses exactly") {
  smc_preload_mode m = SMC_PRELOAD_MODE_IPPROTO_SMC;
  CHECK(smc_preload_parse_mode(nullptr, &m) == 0);
  CHECK(m == SMC_PRELOAD_MODE_AUTO);
  CHECK(smc_preload_parse_mode("", &m) == 0);
  CHECK(smc_preload_parse_mode("auto", &m) == 0);
  CHECK(m == SMC_PRELOAD_MODE_AUTO);
  CHECK(smc_preload_parse_mode("af_smc", &m) == 0);
  CHECK(m == SMC_PRELOAD_MODE_AF_SMC);
  CHECK(smc_preload_parse_mode("ipproto_smc", &m) == 0);
  CHECK(m == SMC_PRELOAD_MODE_IPPROTO_SMC);
  for (const char* bad : {"AF_SMC", "af_smc ", "inet", "smc", "ipproto", "1"}) {
    CAPTURE(std::string(bad));
    CHECK(smc_preload_parse_mode(bad, &m) == -1);
    CHECK(m == SMC_PRELOAD_MODE_AUTO);
  }
}

TEST_CASE("SMC_DEBUG is on unless unset, empty or starting with 0") {
  CHECK(smc_preload_debug_enabled("1"));
  CHECK(smc_preload_debug_enabled("yes"));
  CHECK_FALSE(smc_preload_debug_enabled(nullptr));
  CHECK_FALSE(smc_preload_debug_enabled(""));
  CHECK_FALSE(smc_preload_debug_enabled("0"));
}

TEST_CASE("attempt order per mode and what is known") {
  using A = smc_preload_attempt;
  auto next = [](smc_preload_mode m, smc_preload_support ip, smc_preload_support af) {
    return smc_preload_next_attempt(m, ip, af);
  };
  CHECK(next(SMC_PRELOAD_MODE_AUTO, SMC_SUPPORT_UNKNOWN, SMC_SUPPORT_UNKNOWN) == A::SMC_TRY_AF_SMC);
  CHECK(next(SMC_PRELOAD_MODE_AUTO, SMC_SUPPORT_UNKNOWN, SMC_SUPPORT_YES) == A::SMC_TRY_AF_SMC);
  CHECK(next(SMC_PRELOAD_MODE_AUTO, SMC_SUPPORT_UNKNOWN, SMC_SUPPORT_NO) == A::SMC_TRY_IPPROTO_SMC);
  CHECK(next(SMC_PRELOAD_MODE_AUTO, SMC_SUPPORT_NO, SMC_SUPPORT_NO) == A::SMC_TRY_NONE);
  CHECK(next(SMC_PRELOAD_MODE_AF_SMC, SMC_SUPPORT_UNKNOWN, SMC_SUPPORT_UNKNOWN) == A::SMC_TRY_AF_SMC);
  CHECK(next(SMC_PRELOAD_MODE_AF_SMC, SMC_SUPPORT_YES, SMC_SUPPORT_NO) == A::SMC_TRY_NONE);
  CHECK(next(SMC_PRELOAD_MODE_IPPROTO_SMC, SMC_SUPPORT_UNKNOWN, SMC_SUPPORT_YES) == A::SMC_TRY_IPPROTO_SMC);
  CHECK(next(SMC_PRELOAD_MODE_IPPROTO_SMC, SMC_SUPPORT_NO, SMC_SUPPORT_YES) == A::SMC_TRY_NONE);
}

TEST_CASE("errno classes: unsupported is remembered, exhaustion is not") {
  for (int e : {EAFNOSUPPORT, EPROTONOSUPPORT, ESOCKTNOSUPPORT, EINVAL, EACCES, EPERM}) {
    CAPTURE(e);
    CHECK(smc_preload_errno_means_unsupported(e) == 1);
  }
  for (int e : {EMFILE, ENFILE, ENOBUFS, ENOMEM}) {
    CAPTURE(e);
    CHECK(smc_preload_errno_means_unsupported(e) == 0);
  }
}

TEST_CASE("initialisation: run once, wait for a thread of this process, take over from another process") {
  CHECK(smc_preload_init_action(SMC_INIT_DONE, 100) == SMC_INIT_READY);
  CHECK(smc_preload_init_action(SMC_INIT_NONE, 100) == SMC_INIT_RUN);
  CHECK(smc_preload_init_action(100, 100) == SMC_INIT_WAIT);  // another thread here is initialising
  // Forked while a thread of pid 100 initialised: nobody in pid 101 will finish it.
  CHECK(smc_preload_init_action(100, 101) == SMC_INIT_TAKE_OVER);
  CHECK(smc_preload_init_action(-7, 101) == SMC_INIT_WAIT);  // no such state: never claimed
}

TEST_CASE("SMC_* is believed only when real and effective ids agree") {
  CHECK(smc_preload_env_trusted(1000, 1000, 1000, 1000) == 1);
  CHECK(smc_preload_env_trusted(0, 0, 0, 0) == 1);
  CHECK(smc_preload_env_trusted(1000, 0, 1000, 1000) == 0);  // setuid root
  CHECK(smc_preload_env_trusted(1000, 1000, 1000, 0) == 0);  // setgid
}
