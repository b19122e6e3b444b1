/* libsmc-preload.so: with LD_PRELOAD, an unmodified program's TCP sockets become SMC sockets, so
 * the kernel carries them over SMC-R (RDMA) where it can and over TCP where it cannot. When the
 * kernel has no SMC at all the original socket() call is made and the answer remembered, so a
 * program never fails because of this library. Needs nothing but libc at load time.
 *
 * Environment: SMC_PRELOAD_MODE=auto|af_smc|ipproto_smc (default auto), SMC_DEBUG (one line per
 * decision on stderr), SMC_SNDBUF / SMC_RCVBUF (bytes, K or M suffix; applied to each TCP/SMC
 * socket created). Invalid values are reported once on stderr and ignored. All of them are
 * ignored in a process whose real and effective user or group ids differ (setuid/setgid).
 *
 * Portability: the library is injected into images built on any libc, so it references only
 * functions every x86_64 glibc since 2.2.5 and musl have, each bound to the GLIBC_2.2.5 version:
 * no pthread (its symbols moved to libc in glibc 2.34 with new versions), no glibc-only
 * functions such as strerrorname_np, no _FORTIFY_SOURCE __*_chk calls, no stack protector.
 * dlsym lived in libdl before glibc 2.34, so libdl.so.2 stays NEEDED (musl maps it to itself).
 * test/agent/preload/preload_process_test.cpp checks the built object. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "preload_logic.h"

#define SMC_EXPORT __attribute__((visibility("default")))

#if defined(__x86_64__) && defined(__GLIBC__)
/* Bind dlsym to the x86_64 baseline version (libdl before glibc 2.34, a compat alias in libc
 * after) instead of the GLIBC_2.34 default this toolchain would pick. */
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
#endif

typedef int (*socket_fn)(int, int, int);

/* One-time initialisation without pthread_once: SMC_INIT_NONE, the pid of the process whose thread
 * is initialising, or SMC_INIT_DONE (preload_logic.h). The pid lets a child forked while another
 * thread initialised take the work over instead of waiting for a thread it does not have. */
static _Atomic int g_init = SMC_INIT_NONE;
static socket_fn g_real_socket; /* written before g_init becomes SMC_INIT_DONE (release) */

#ifdef SMC_PRELOAD_TEST_HOOKS
/* Test builds only (test/agent/preload/takeover_probe.c links this file into a program): called
 * inside init_once, and counts take-overs. Never in libsmc-preload.so. */
void smc_preload_during_init_for_test(void);
int smc_preload_takeovers_for_test;
#endif
static enum smc_preload_mode g_mode = SMC_PRELOAD_MODE_AUTO;
static int g_debug;
static int g_sndbuf; /* 0 = leave alone */
static int g_rcvbuf;
/* What this process learnt about each mechanism; races only cost a redundant probe. */
static _Atomic int g_ipproto_support = SMC_SUPPORT_UNKNOWN;
static _Atomic int g_afsmc_support = SMC_SUPPORT_UNKNOWN;

/* One line on stderr with a single write(2), so lines of different threads never interleave. */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...) {
  char line[512];
  int n = snprintf(line, sizeof(line), "smc-preload[%ld]: ", (long)getpid());
  if (n < 0 || (size_t)n >= sizeof(line)) return;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (m < 0) return;
  size_t len = (size_t)n + (size_t)m;
  if (len > sizeof(line) - 2) len = sizeof(line) - 2;
  line[len++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, len);
  (void)ignored;
}

/* Names of the errnos this library can print (strerrorname_np is glibc-only, 2.32+). */
static const char *errno_name(int err) {
  switch (err) {
    case EAFNOSUPPORT: return "EAFNOSUPPORT";
    case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
    case ESOCKTNOSUPPORT: return "ESOCKTNOSUPPORT";
    case EOPNOTSUPP: return "EOPNOTSUPP";
    case EINVAL: return "EINVAL";
    case EACCES: return "EACCES";
    case EPERM: return "EPERM";
    case EMFILE: return "EMFILE";
    case ENFILE: return "ENFILE";
    case ENOBUFS: return "ENOBUFS";
    case ENOMEM: return "ENOMEM";
    case EINTR: return "EINTR";
    case EBADF: return "EBADF";
    case ENOPROTOOPT: return "ENOPROTOOPT";
    case ENOTSOCK: return "ENOTSOCK";
    default: return "another errno";
  }
}

/* Whether SMC_* may be read: not in a process whose real and effective ids differ (setuid or setgid,
 * reached only through /etc/ld.so.preload: ld.so ignores an LD_PRELOAD path with a '/' in AT_SECURE
 * programs, so as injected the library never loads there and such programs stay on TCP). An
 * unprivileged caller must not steer diagnostics onto a privileged program's fd 2 or size its
 * buffers. secure_getenv would also cover file capabilities, but it needs GLIBC_2.17. */
static int g_env_trusted;

static const char *smc_env(const char *var) { return g_env_trusted ? getenv(var) : NULL; }

static int size_from_env(const char *var) {
  const char *text = smc_env(var);
  int value = 0;
  if (text == NULL || text[0] == '\0') return 0;
  if (smc_preload_parse_size(text, &value) != 0) {
    say("ignoring %s=\"%.64s\": expected a positive size such as 65536, 256K or 4M", var, text);
    return 0;
  }
  return value;
}

static int syscall_socket(int domain, int type, int protocol) {
  return (int)syscall(SYS_socket, domain, type, protocol);
}

static void init_once(void) {
  /* dlsym returns an object pointer; POSIX guarantees it converts to the function pointer. ISO C
   * has no cast for that, so go through a union (no memcpy: its x86_64 glibc version is 2.14). */
  union {
    void *object;
    socket_fn function;
  } next;
  next.object = dlsym(RTLD_NEXT, "socket");
  g_real_socket = next.object != NULL ? next.function : syscall_socket;
  g_env_trusted = smc_preload_env_trusted(getuid(), geteuid(), getgid(), getegid());
  g_debug = smc_preload_debug_enabled(smc_env("SMC_DEBUG"));
  const char *mode = smc_env("SMC_PRELOAD_MODE");
  if (smc_preload_parse_mode(mode, &g_mode) != 0) {
    say("ignoring SMC_PRELOAD_MODE=\"%.64s\": expected auto, af_smc or ipproto_smc; using auto", mode);
  }
  g_sndbuf = size_from_env("SMC_SNDBUF");
  g_rcvbuf = size_from_env("SMC_RCVBUF");
#ifdef SMC_PRELOAD_TEST_HOOKS
  smc_preload_during_init_for_test();
#endif
  if (g_debug) {
    say("loaded: mode=%s sndbuf=%d rcvbuf=%d",
        g_mode == SMC_PRELOAD_MODE_AF_SMC ? "af_smc" : g_mode == SMC_PRELOAD_MODE_IPPROTO_SMC ? "ipproto_smc" : "auto",
        g_sndbuf, g_rcvbuf);
  }
}

/* Returns 1 once initialisation is complete. A second thread waits for the first; a call made
 * while this very thread initialises (nothing in init_once creates sockets, but a hooked libc
 * function might) gives up after a bounded wait and the caller makes the plain system call. A
 * process forked while a thread of its parent initialised finds the parent's pid in g_init and
 * initialises itself (the forking thread was not the initialising one, which does not exist in
 * the child). */
static int ensure_init(void) {
  int state = atomic_load_explicit(&g_init, memory_order_acquire);
  if (state == SMC_INIT_DONE) return 1;
  const int self = (int)getpid();
  for (int i = 0; i < 100000; ++i) {
    const enum smc_preload_init_action action = smc_preload_init_action(state, self);
    if (action == SMC_INIT_READY) return 1;
    if (action == SMC_INIT_RUN || action == SMC_INIT_TAKE_OVER) {
      /* On failure `state` gets the current value and the loop decides again. */
      if (atomic_compare_exchange_strong_explicit(&g_init, &state, self, memory_order_acq_rel, memory_order_acquire)) {
#ifdef SMC_PRELOAD_TEST_HOOKS
        if (action == SMC_INIT_TAKE_OVER) ++smc_preload_takeovers_for_test;
#endif
        init_once();
        atomic_store_explicit(&g_init, SMC_INIT_DONE, memory_order_release);
        return 1;
      }
      continue;
    }
    sched_yield();
    state = atomic_load_explicit(&g_init, memory_order_acquire);
  }
  return 0;
}

__attribute__((constructor)) static void smc_preload_init(void) { (void)ensure_init(); }

static void apply_buffers(int fd) {
  if (g_sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &g_sndbuf, sizeof(g_sndbuf)) != 0 && g_debug) {
    say("fd %d: SO_SNDBUF %d failed: %s", fd, g_sndbuf, errno_name(errno));
  }
  if (g_rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &g_rcvbuf, sizeof(g_rcvbuf)) != 0 && g_debug) {
    say("fd %d: SO_RCVBUF %d failed: %s", fd, g_rcvbuf, errno_name(errno));
  }
}

static const char *family_name(int domain) { return domain == AF_INET6 ? "AF_INET6" : "AF_INET"; }

static const char *type_name(int type) {
  switch (type & (SOCK_NONBLOCK | SOCK_CLOEXEC)) {
    case SOCK_NONBLOCK: return "SOCK_STREAM|SOCK_NONBLOCK";
    case SOCK_CLOEXEC: return "SOCK_STREAM|SOCK_CLOEXEC";
    case SOCK_NONBLOCK | SOCK_CLOEXEC: return "SOCK_STREAM|SOCK_NONBLOCK|SOCK_CLOEXEC";
    default: return "SOCK_STREAM";
  }
}

SMC_EXPORT int socket(int domain, int type, int protocol) {
  if (!ensure_init()) return syscall_socket(domain, type, protocol);
  if (!smc_preload_is_tcp_request(domain, type, protocol)) return g_real_socket(domain, type, protocol);

  const int saved_errno = errno;
  const char *why = "SMC unavailable";
  for (;;) {
    enum smc_preload_attempt attempt =
        smc_preload_next_attempt(g_mode, (enum smc_preload_support)atomic_load_explicit(&g_ipproto_support, memory_order_relaxed),
                                 (enum smc_preload_support)atomic_load_explicit(&g_afsmc_support, memory_order_relaxed));
    if (attempt == SMC_TRY_NONE) break;
    int fd;
    const char *what;
    _Atomic int *support;
    if (attempt == SMC_TRY_IPPROTO_SMC) {
      fd = g_real_socket(domain, type, SMC_PRELOAD_IPPROTO_SMC);
      what = "IPPROTO_SMC";
      support = &g_ipproto_support;
    } else {
      fd = g_real_socket(SMC_PRELOAD_AF_SMC, type,
                         domain == AF_INET6 ? SMC_PRELOAD_SMCPROTO_SMC6 : SMC_PRELOAD_SMCPROTO_SMC);
      what = "AF_SMC";
      support = &g_afsmc_support;
    }
    if (fd >= 0) {
      atomic_store_explicit(support, SMC_SUPPORT_YES, memory_order_relaxed);
      apply_buffers(fd);
      if (g_debug) say("socket(%s, %s, %d) -> %s fd %d", family_name(domain), type_name(type), protocol, what, fd);
      errno = saved_errno;
      return fd;
    }
    int err = errno;
    if (!smc_preload_errno_means_unsupported(err)) {
      why = "transient error";
      if (g_debug) say("%s socket failed: %s; this one stays TCP", what, errno_name(err));
      break;
    }
    atomic_store_explicit(support, SMC_SUPPORT_NO, memory_order_relaxed);
    if (g_debug) say("%s not offered by this kernel (%s); not trying it again", what, errno_name(err));
  }

  errno = saved_errno;
  int fd = g_real_socket(domain, type, protocol);
  if (fd >= 0) {
    apply_buffers(fd);
    if (g_debug) say("socket(%s, %s, %d) -> TCP fd %d (%s)", family_name(domain), type_name(type), protocol, fd, why);
  }
  return fd;
}
