/* Pure decisions of libsmc-preload.so (see preload_logic.h). */
#include "preload_logic.h"

#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

int smc_preload_is_tcp_request(int domain, int type, int protocol) {
  if (domain != AF_INET && domain != AF_INET6) return 0;
  /* The kernel keeps the socket type in the low 4 bits (SOCK_TYPE_MASK); the rest are flags. */
  if ((type & 0xf) != SOCK_STREAM) return 0;
  if (type & ~(0xf | SOCK_NONBLOCK | SOCK_CLOEXEC)) return 0; /* unknown flags: not ours to judge */
  return protocol == 0 || protocol == IPPROTO_TCP;
}

int smc_preload_parse_mode(const char *text, enum smc_preload_mode *out) {
  *out = SMC_PRELOAD_MODE_AUTO;
  if (text == NULL || text[0] == '\0' || strcmp(text, "auto") == 0) return 0;
  if (strcmp(text, "af_smc") == 0) {
    *out = SMC_PRELOAD_MODE_AF_SMC;
    return 0;
  }
  if (strcmp(text, "ipproto_smc") == 0) {
    *out = SMC_PRELOAD_MODE_IPPROTO_SMC;
    return 0;
  }
  return -1;
}

int smc_preload_parse_size(const char *text, int *out) {
  long long value = 0;
  const char *p = text;
  if (text == NULL || *p < '0' || *p > '9') return -1;
  while (*p >= '0' && *p <= '9') {
    value = value * 10 + (*p - '0');
    if (value > INT_MAX) return -1;
    ++p;
  }
  if (*p == 'k' || *p == 'K') {
    value *= 1024;
    ++p;
  } else if (*p == 'm' || *p == 'M') {
    value *= 1024 * 1024;
    ++p;
  }
  if (*p != '\0' || value <= 0 || value > INT_MAX) return -1;
  *out = (int)value;
  return 0;
}

int smc_preload_debug_enabled(const char *text) { return text != NULL && text[0] != '\0' && text[0] != '0'; }

enum smc_preload_attempt smc_preload_next_attempt(enum smc_preload_mode mode, enum smc_preload_support ipproto_smc,
                                                  enum smc_preload_support af_smc) {
  switch (mode) {
    case SMC_PRELOAD_MODE_IPPROTO_SMC:
      return ipproto_smc == SMC_SUPPORT_NO ? SMC_TRY_NONE : SMC_TRY_IPPROTO_SMC;
    case SMC_PRELOAD_MODE_AF_SMC:
      return af_smc == SMC_SUPPORT_NO ? SMC_TRY_NONE : SMC_TRY_AF_SMC;
    case SMC_PRELOAD_MODE_AUTO:
    default:
      /* AF_SMC first: it is on every SMC kernel, and sock_diag reports its addresses (on 6.12 an
       * IPPROTO_SMC socket shows up with none, so smc-status could not tell connections apart). */
      if (af_smc != SMC_SUPPORT_NO) return SMC_TRY_AF_SMC;
      return ipproto_smc == SMC_SUPPORT_NO ? SMC_TRY_NONE : SMC_TRY_IPPROTO_SMC;
  }
}

int smc_preload_errno_means_unsupported(int err) {
  switch (err) {
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
    case EINTR:
      return 0;
    default:
      /* EAFNOSUPPORT (no AF_SMC), EPROTONOSUPPORT (no IPPROTO_SMC), ESOCKTNOSUPPORT, EINVAL, and
       * EACCES/EPERM from a security policy: none of these improve by retrying. */
      return 1;
  }
}

enum smc_preload_init_action smc_preload_init_action(int state, int self_pid) {
  if (state == SMC_INIT_DONE) return SMC_INIT_READY;
  if (state == SMC_INIT_NONE) return SMC_INIT_RUN;
  if (state == self_pid || state < 0) return SMC_INIT_WAIT;
  return SMC_INIT_TAKE_OVER;
}

int smc_preload_env_trusted(unsigned uid, unsigned euid, unsigned gid, unsigned egid) {
  return uid == euid && gid == egid;
}
