/* Decisions of libsmc-preload.so as pure functions: which socket() calls become SMC, how SMC_*
 * environment values parse, what an errno from the kernel means. No I/O, no globals, so the unit
 * tests call them directly and the interposer (smc_preload.c) stays small. */
#ifndef ERDMA_SMC_PRELOAD_LOGIC_H
#define ERDMA_SMC_PRELOAD_LOGIC_H

#ifdef __cplusplus
extern "C" {
#endif

/* Numbers from the kernel ABI (include/linux/socket.h, net/smc/smc.h, include/uapi/linux/in.h). */
enum {
  SMC_PRELOAD_AF_SMC = 43,
  SMC_PRELOAD_SMCPROTO_SMC = 0,   /* AF_SMC over IPv4 */
  SMC_PRELOAD_SMCPROTO_SMC6 = 1,  /* AF_SMC over IPv6 */
  SMC_PRELOAD_IPPROTO_SMC = 256   /* socket(AF_INET[6], SOCK_STREAM, IPPROTO_SMC), Linux 6.11+ */
};

/* SMC_PRELOAD_MODE. */
enum smc_preload_mode {
  SMC_PRELOAD_MODE_AUTO = 0,        /* AF_SMC, else IPPROTO_SMC where only that is offered */
  SMC_PRELOAD_MODE_AF_SMC = 1,
  SMC_PRELOAD_MODE_IPPROTO_SMC = 2
};

/* What the process has learnt about one SMC mechanism. */
enum smc_preload_support { SMC_SUPPORT_UNKNOWN = 0, SMC_SUPPORT_YES = 1, SMC_SUPPORT_NO = 2 };

/* Which SMC socket to try next. */
enum smc_preload_attempt { SMC_TRY_NONE = 0, SMC_TRY_IPPROTO_SMC = 1, SMC_TRY_AF_SMC = 2 };

/* 1 when socket(domain, type, protocol) asks for TCP: AF_INET or AF_INET6, SOCK_STREAM with any
 * SOCK_NONBLOCK/SOCK_CLOEXEC flags, protocol 0 or IPPROTO_TCP. Everything else is left alone. */
int smc_preload_is_tcp_request(int domain, int type, int protocol);

/* Parses SMC_PRELOAD_MODE: NULL or "" is auto; "auto", "af_smc", "ipproto_smc" exactly. Returns 0
 * and sets *out, or -1 for anything else (then *out is auto). */
int smc_preload_parse_mode(const char *text, enum smc_preload_mode *out);

/* Parses SMC_SNDBUF / SMC_RCVBUF: decimal digits with an optional K or M suffix (either case),
 * 1 .. INT_MAX bytes. Returns 0 and sets *out, or -1 (no signs, blanks, fractions, hex or other
 * suffixes). */
int smc_preload_parse_size(const char *text, int *out);

/* SMC_DEBUG: on when set, non-empty and not starting with '0'. */
int smc_preload_debug_enabled(const char *text);

/* The next SMC socket to try for `mode`, given what is known about each mechanism. */
enum smc_preload_attempt smc_preload_next_attempt(enum smc_preload_mode mode, enum smc_preload_support ipproto_smc,
                                                  enum smc_preload_support af_smc);

/* 1 when an errno from an SMC socket() call means "this kernel (or policy) does not offer it", so
 * the process should stop trying; 0 for transient failures (descriptor or memory exhaustion). */
int smc_preload_errno_means_unsupported(int err);

/* One-time initialisation, without pthread_once. The state word holds SMC_INIT_NONE, SMC_INIT_DONE
 * or, while a thread initialises, the pid of its process. */
enum { SMC_INIT_NONE = 0, SMC_INIT_DONE = -1 };
enum smc_preload_init_action {
  SMC_INIT_READY = 0,     /* done: go on */
  SMC_INIT_RUN = 1,       /* nobody started: claim it (NONE -> self) and initialise */
  SMC_INIT_WAIT = 2,      /* a thread of this process is initialising: wait for it */
  SMC_INIT_TAKE_OVER = 3  /* the initialising thread was in another process: this one was forked
                             while it ran, and no thread here will ever finish it; claim it
                             (that pid -> self) and initialise */
};
enum smc_preload_init_action smc_preload_init_action(int state, int self_pid);

/* 1 when SMC_* environment variables may be believed: the real and effective user and group ids
 * agree. A program running with privileges it did not get from its caller (setuid, setgid) ignores
 * them, as glibc's secure_getenv would (which the GLIBC_2.2.5 baseline lacks). */
int smc_preload_env_trusted(unsigned uid, unsigned euid, unsigned gid, unsigned egid);

#ifdef __cplusplus
}
#endif

#endif
