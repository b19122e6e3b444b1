/* erdma-cdi-hook: the OCI createRuntime hook that the CDI spec of an SMC-R ResourceClaim names
 * (agent/core/cdi_hook.hpp says why a hook and what the agent does with the request).
 *
 *   erdma-cdi-hook smcr --claim UID --socket PATH [--timeout-ms N]
 *
 * The runtime (runc, crun) runs it on the host, in the runtime's namespaces, once per container
 * that references the claim, after the container's namespaces exist and before the application
 * starts; the container's OCI state arrives on stdin. The hook sends the request to the agent's
 * socket, waits for the one-line answer (at most --timeout-ms for the whole exchange) and prints
 * it on stderr. It exits 0 whatever happens: a container never fails because its SMC-R setup did
 * (SMC then falls back to TCP, and the agent's log and the pod's Events say why). Only a command
 * line that is not the one above exits 2, so that a hand-made spec is caught on first use.
 *
 * Plain C, libc only, linked statically: it runs on the node's own filesystem, whatever the node's
 * libraries are. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent/core/cdi_hook_protocol.h"

static long long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int left_ms(long long deadline) {
  const long long left = deadline - now_ms();
  if (left <= 0) return 0;
  return left > 60000 ? 60000 : (int)left;
}

/* Waits until fd is ready for `events` or the deadline passes: 1 ready, 0 timed out, -1 error. */
static int wait_fd(int fd, short events, long long deadline) {
  for (;;) {
    struct pollfd p = {fd, events, 0};
    const int ms = left_ms(deadline);
    if (ms == 0) return 0;
    const int n = poll(&p, 1, ms);
    if (n > 0) return 1;
    if (n == 0) return 0;
    if (errno != EINTR) return -1;
  }
}

/* Every exit but a usage error goes through here: one line on stderr, status 0. */
static int done(const char *claim, const char *what, const char *detail) {
  fprintf(stderr, "erdma-cdi-hook: claim %s: %s%s%s\n", claim != NULL ? claim : "?", what,
          detail != NULL ? ": " : "", detail != NULL ? detail : "");
  return 0;
}

static int usage(const char *why) {
  fprintf(stderr,
          "erdma-cdi-hook: %s\n"
          "usage: erdma-cdi-hook smcr --claim UID --socket PATH [--timeout-ms N]\n"
          "  The createRuntime hook of the erdma-agent's SMC-R claims: reads the container's OCI state on\n"
          "  stdin, asks the agent at PATH to set up the pod's network namespace, prints its answer.\n",
          why);
  return 2;
}

/* Reads stdin into buf (at most cap bytes) until EOF: the length, or -1 with errno (EFBIG when
 * the state does not fit, ETIMEDOUT at the deadline). */
static long read_state(char *buf, size_t cap, long long deadline) {
  size_t len = 0;
  for (;;) {
    const int ready = wait_fd(STDIN_FILENO, POLLIN, deadline);
    if (ready == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    if (ready < 0) return -1;
    if (len == cap) {
      char probe;
      const ssize_t extra = read(STDIN_FILENO, &probe, 1);
      if (extra == 0) return (long)len;
      if (extra < 0 && errno == EINTR) continue;
      if (extra < 0) return -1;
      errno = EFBIG;
      return -1;
    }
    const ssize_t n = read(STDIN_FILENO, buf + len, cap - len);
    if (n == 0) return (long)len;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return -1;
    }
    len += (size_t)n;
  }
}

static int send_all(int fd, const char *buf, size_t len, long long deadline) {
  while (len > 0) {
    const int ready = wait_fd(fd, POLLOUT, deadline);
    if (ready == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    if (ready < 0) return -1;
    const ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return -1;
    }
    buf += n;
    len -= (size_t)n;
  }
  return 0;
}

/* Reads the answer until the agent closes the connection; -1 with errno on failure. */
static long read_answer(int fd, char *buf, size_t cap, long long deadline) {
  size_t len = 0;
  while (len < cap) {
    const int ready = wait_fd(fd, POLLIN, deadline);
    if (ready == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    if (ready < 0) return -1;
    const ssize_t n = recv(fd, buf + len, cap - len, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return -1;
    }
    len += (size_t)n;
  }
  return (long)len;
}

int main(int argc, char **argv) {
  const char *claim = NULL;
  const char *socket_path = NULL;
  long timeout_ms = ERDMA_CDI_HOOK_TIMEOUT_MS;
  if (argc < 2 || strcmp(argv[1], ERDMA_CDI_HOOK_MODE_SMCR) != 0) return usage("the first argument must be smcr");
  for (int i = 2; i < argc; ++i) {
    if (i + 1 >= argc) return usage("every option takes a value");
    if (strcmp(argv[i], "--claim") == 0) {
      claim = argv[++i];
    } else if (strcmp(argv[i], "--socket") == 0) {
      socket_path = argv[++i];
    } else if (strcmp(argv[i], "--timeout-ms") == 0) {
      char *end = NULL;
      errno = 0;
      timeout_ms = strtol(argv[++i], &end, 10);
      if (errno != 0 || end == argv[i] || *end != '\0' || timeout_ms < 1 || timeout_ms > 600000) {
        return usage("--timeout-ms must be 1..600000");
      }
    } else {
      return usage("unknown option");
    }
  }
  if (claim == NULL || *claim == '\0' || strchr(claim, ' ') != NULL || strchr(claim, '\n') != NULL) {
    return usage("--claim needs the claim's UID");
  }
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  if (socket_path == NULL || socket_path[0] != '/' || strlen(socket_path) >= sizeof addr.sun_path) {
    return usage("--socket needs an absolute path shorter than 108 bytes");
  }
  memcpy(addr.sun_path, socket_path, strlen(socket_path));
  signal(SIGPIPE, SIG_IGN);
  const long long deadline = now_ms() + timeout_ms;

  static char request[ERDMA_CDI_HOOK_MAX_REQUEST];
  const int header = snprintf(request, sizeof request, "%s %s %s\n", ERDMA_CDI_HOOK_PROTOCOL,
                              ERDMA_CDI_HOOK_MODE_SMCR, claim);
  if (header < 0 || (size_t)header >= sizeof request) return done(claim, "not set up", "the claim UID is too long");
  const long state = read_state(request + header, sizeof request - (size_t)header, deadline);
  if (state < 0) {
    return done(claim, "not set up", errno == EFBIG ? "the OCI state on stdin is larger than the agent accepts"
                                                    : errno == ETIMEDOUT ? "no end of the OCI state on stdin in time"
                                                                         : strerror(errno));
  }

  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return done(claim, "not set up", strerror(errno));
  /* A unix connect waits while the agent's backlog is full: bounded by the send timeout. */
  const int connect_ms = left_ms(deadline) > 0 ? left_ms(deadline) : 1;
  const struct timeval tv = {connect_ms / 1000, (connect_ms % 1000) * 1000};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (connect(fd, (const struct sockaddr *)&addr, sizeof addr) != 0) {
    char why[256];
    if (errno == EAGAIN || errno == EINPROGRESS) {
      snprintf(why, sizeof why, "the agent at %s did not accept the connection in time", socket_path);
    } else {
      snprintf(why, sizeof why, "cannot reach the agent at %s (%s); is erdma-agent running with dra.enabled?",
               socket_path, strerror(errno));
    }
    close(fd);
    return done(claim, "not set up", why);
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (send_all(fd, request, (size_t)header + (size_t)state, deadline) != 0) {
    const int e = errno;
    close(fd);
    return done(claim, "not set up", e == ETIMEDOUT ? "the agent did not read the request in time" : strerror(e));
  }
  shutdown(fd, SHUT_WR);
  char answer[ERDMA_CDI_HOOK_MAX_ANSWER + 1];
  const long got = read_answer(fd, answer, ERDMA_CDI_HOOK_MAX_ANSWER, deadline);
  const int e = errno;
  close(fd);
  if (got < 0) return done(claim, "no answer", e == ETIMEDOUT ? "the agent did not answer in time" : strerror(e));
  if (got == 0) return done(claim, "no answer", "the agent closed the connection without one");
  answer[got] = '\0';
  answer[strcspn(answer, "\n")] = '\0';
  return done(claim, answer, NULL);
}
