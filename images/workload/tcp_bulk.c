/* tcp-bulk: a TCP bulk-transfer client and server for checking SMC-R data paths end to end.
 * The client sends N bytes from a fixed pseudo-random stream and the server answers with the
 * byte count and SHA-256 of what arrived, so a corrupted or truncated transfer is caught. Both
 * ends use plain socket(AF_INET, SOCK_STREAM, 0), so libsmc-preload.so (LD_PRELOAD) can turn
 * them into SMC sockets; that is why this program is linked dynamically against glibc.
 * Build: gcc -O2 -s -o tcp-bulk tcp_bulk.c */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (64 * 1024)
#define DEFAULT_SEED UINT64_C(0x65726d6461)

static const char *g_mode = "tcp-bulk";

static const char *errno_name(int err) {
  const char *n = strerrorname_np(err);
  return n ? n : "E?";
}

/* Prints "tcp-bulk MODE: what: ENAME (text)" for the current errno and exits 1. */
static void die_errno(const char *fmt, ...) {
  int err = errno;
  va_list ap;
  fprintf(stderr, "%s: ", g_mode);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, ": %s (%s)\n", errno_name(err), strerror(err));
  exit(1);
}

static void die(const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "%s: ", g_mode);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

/* ---- SHA-256 (FIPS 180-4) ---- */

struct sha256 {
  uint32_t h[8];
  uint64_t len;
  uint8_t buf[64];
  size_t used;
};

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, unsigned n) { return (x >> n) | (x << (32 - n)); }

static void sha256_init(struct sha256 *s) {
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(s->h, h0, sizeof h0);
  s->len = 0;
  s->used = 0;
}

static void sha256_block(struct sha256 *s, const uint8_t *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = s->h[0], b = s->h[1], c = s->h[2], d = s->h[3];
  uint32_t e = s->h[4], f = s->h[5], g = s->h[6], h = s->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  s->h[0] += a;
  s->h[1] += b;
  s->h[2] += c;
  s->h[3] += d;
  s->h[4] += e;
  s->h[5] += f;
  s->h[6] += g;
  s->h[7] += h;
}

static void sha256_update(struct sha256 *s, const void *data, size_t n) {
  const uint8_t *p = data;
  s->len += n;
  if (s->used) {
    size_t take = 64 - s->used < n ? 64 - s->used : n;
    memcpy(s->buf + s->used, p, take);
    s->used += take;
    p += take;
    n -= take;
    if (s->used < 64) return;
    sha256_block(s, s->buf);
    s->used = 0;
  }
  for (; n >= 64; p += 64, n -= 64) sha256_block(s, p);
  memcpy(s->buf, p, n);
  s->used = n;
}

/* Writes the digest as 64 lower-case hex digits and a NUL into hex. */
static void sha256_hex(struct sha256 *s, char hex[65]) {
  uint64_t bits = s->len * 8;
  uint8_t pad[72] = {0x80};
  size_t padlen = (s->used < 56 ? 56 : 120) - s->used;
  for (int i = 0; i < 8; i++) pad[padlen + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
  sha256_update(s, pad, padlen + 8);
  for (int i = 0; i < 8; i++) sprintf(hex + 8 * i, "%08" PRIx32, s->h[i]);
}

/* ---- the data stream: splitmix64, eight bytes per step, little-endian ---- */

struct stream {
  uint64_t state;
};

static void stream_fill(struct stream *st, uint8_t *buf, size_t n) {
  for (size_t i = 0; i < n; i += 8) {
    uint64_t z = (st->state += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    for (size_t j = 0; j < 8 && i + j < n; j++) buf[i + j] = (uint8_t)(z >> (8 * j));
  }
}

/* ---- flags ---- */

struct opts {
  const char *bind, *port_file, *to;
  long port;
  int once, have_bytes;
  uint64_t bytes, seed;
  double hold, timeout;
};

static void usage(FILE *f) {
  fputs("Usage:\n"
        "  tcp-bulk serve --port P [--bind ADDR] [--once] [--port-file F] [--hold S] [--timeout S]\n"
        "      accept connections, read each until EOF, answer {\"bytes\":N,\"sha256\":\"...\"} and close.\n"
        "      --port 0 picks a free port; --port-file writes it there. Without --once each\n"
        "      connection is served by its own process. --hold keeps the socket open S seconds after\n"
        "      answering. One JSON line per connection on stdout.\n"
        "  tcp-bulk send --to HOST:PORT --bytes N [--seed X] [--hold S] [--timeout S]\n"
        "      send N bytes of the stream, shut down writing, compare the server's answer and print\n"
        "      {\"bytes\":N,\"sha256\":\"...\",\"match\":true,\"seconds\":S,\"mib_per_s\":X}. --hold keeps\n"
        "      the connection open S seconds afterwards. Exit 0 only when the server saw the same data.\n"
        "  tcp-bulk gen --bytes N [--seed X]\n"
        "      write the same N bytes to stdout (to check the digest with sha256sum).\n"
        "N takes a K, M or G suffix (KiB, MiB, GiB). --timeout (default 60 s) bounds connect, every\n"
        "read and write, and the whole exchange. The stream is splitmix64 from --seed (default\n"
        "0x65726d6461), eight little-endian bytes per step. Exit status: 0 ok, 1 failed, 2 bad flags.\n"
        "Sockets are socket(AF_INET, SOCK_STREAM, 0): run with LD_PRELOAD=libsmc-preload.so for SMC.\n",
        f);
}

static void bad_flag(const char *fmt, const char *arg) {
  fprintf(stderr, "%s: ", g_mode);
  fprintf(stderr, fmt, arg);
  fputs(" (see tcp-bulk --help)\n", stderr);
  exit(2);
}

static uint64_t parse_size(const char *s) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s || *s == '-') bad_flag("--bytes %s: not a byte count", s);
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10;
  if (*end == 'M' || *end == 'm') shift = 20;
  if (*end == 'G' || *end == 'g') shift = 30;
  if (shift) end++;
  if (*end || (shift && v > (UINT64_MAX >> shift))) bad_flag("--bytes %s: not a byte count", s);
  return (uint64_t)v << shift;
}

static double parse_seconds(const char *flag, const char *s) {
  char *end;
  double v = strtod(s, &end);
  if (end == s || *end || !(v >= 0) || v > 86400 * 365) {
    fprintf(stderr, "%s: %s %s: not a number of seconds (see tcp-bulk --help)\n", g_mode, flag, s);
    exit(2);
  }
  return v;
}

static void parse(int argc, char **argv, struct opts *o) {
  memset(o, 0, sizeof *o);
  o->port = -1;
  o->seed = DEFAULT_SEED;
  o->timeout = 60;
  o->bind = "0.0.0.0";
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    }
    if (!strcmp(a, "--once")) {
      o->once = 1;
      continue;
    }
    if (strncmp(a, "--", 2)) bad_flag("unexpected argument %s", a);
    if (!v) bad_flag("%s needs a value", a);
    i++;
    if (!strcmp(a, "--port")) {
      char *end;
      o->port = strtol(v, &end, 10);
      if (*end || end == v || o->port < 0 || o->port > 65535) bad_flag("--port %s: want 0-65535", v);
    } else if (!strcmp(a, "--bind")) {
      o->bind = v;
    } else if (!strcmp(a, "--port-file")) {
      o->port_file = v;
    } else if (!strcmp(a, "--to")) {
      o->to = v;
    } else if (!strcmp(a, "--bytes")) {
      o->bytes = parse_size(v);
      o->have_bytes = 1;
    } else if (!strcmp(a, "--seed")) {
      char *end;
      errno = 0;
      o->seed = strtoull(v, &end, 0);
      if (errno || *end || end == v) bad_flag("--seed %s: not a number", v);
    } else if (!strcmp(a, "--hold")) {
      o->hold = parse_seconds(a, v);
    } else if (!strcmp(a, "--timeout")) {
      o->timeout = parse_seconds(a, v);
      if (o->timeout <= 0) bad_flag("--timeout %s: must be more than 0", v);
    } else {
      bad_flag("unknown flag %s", a);
    }
  }
}

/* ---- helpers ---- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_seconds(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void set_io_timeout(int fd, double seconds) {
  struct timeval tv = {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
  if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
    die_errno("setsockopt SO_RCVTIMEO/SO_SNDTIMEO");
}

static const char *io_error(int err) {
  return err == EAGAIN || err == EWOULDBLOCK ? " (--timeout passed)" : "";
}

static void write_all(int fd, const uint8_t *p, size_t n, const char *peer, uint64_t done) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      int err = errno;
      fprintf(stderr, "%s: send to %s after %" PRIu64 " bytes: %s (%s)%s\n", g_mode, peer, done,
              errno_name(err), strerror(err), io_error(err));
      exit(1);
    }
    p += w;
    n -= (size_t)w;
    done += (uint64_t)w;
  }
}

static char g_timeout_msg[160];

static void on_alarm(int sig) {
  (void)sig;
  ssize_t r = write(2, g_timeout_msg, strlen(g_timeout_msg));
  (void)r;
  _exit(1);
}

/* The whole exchange is bounded by --timeout, on top of the per-call socket timeouts. */
static void arm_deadline(double seconds, const char *what) {
  snprintf(g_timeout_msg, sizeof g_timeout_msg, "%s: %s: timed out after %g s (--timeout)\n", g_mode, what, seconds);
  struct sigaction sa = {0};
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = {{0, 0}, {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)}};
  setitimer(ITIMER_REAL, &it, NULL);
}

static void disarm_deadline(void) {
  struct itimerval it = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &it, NULL);
}

/* ---- serve ---- */

static void peer_name(int fd, char *out, size_t n) {
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  char ip[INET_ADDRSTRLEN] = "?";
  if (getpeername(fd, (struct sockaddr *)&a, &len) == 0 && a.sin_family == AF_INET)
    inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  snprintf(out, n, "%s:%u", ip, (unsigned)ntohs(a.sin_port));
}

static void serve_one(int fd, const struct opts *o) {
  char peer[64];
  peer_name(fd, peer, sizeof peer);
  set_io_timeout(fd, o->timeout);
  struct sha256 sha;
  sha256_init(&sha);
  static uint8_t buf[CHUNK];
  uint64_t total = 0;
  for (;;) {
    ssize_t r = recv(fd, buf, sizeof buf, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      fprintf(stderr, "%s: recv from %s after %" PRIu64 " bytes: %s (%s)%s\n", g_mode, peer, total,
              errno_name(err), strerror(err), io_error(err));
      close(fd);
      return;
    }
    if (r == 0) break;
    sha256_update(&sha, buf, (size_t)r);
    total += (uint64_t)r;
  }
  char hex[65], line[160];
  sha256_hex(&sha, hex);
  int len = snprintf(line, sizeof line, "{\"bytes\":%" PRIu64 ",\"sha256\":\"%s\"}\n", total, hex);
  write_all(fd, (const uint8_t *)line, (size_t)len, peer, 0);
  printf("{\"peer\":\"%s\",\"bytes\":%" PRIu64 ",\"sha256\":\"%s\"}\n", peer, total, hex);
  fflush(stdout);
  if (o->hold > 0) sleep_seconds(o->hold);
  close(fd);
}

static void write_port_file(const char *path, unsigned port) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) die("--port-file %s: path too long", path);
  FILE *f = fopen(tmp, "w");
  if (!f) die_errno("--port-file: open %s", tmp);
  fprintf(f, "%u\n", port);
  if (fclose(f) != 0) die_errno("--port-file: write %s", tmp);
  if (rename(tmp, path) != 0) die_errno("--port-file: rename %s to %s", tmp, path);
}

static int cmd_serve(const struct opts *o) {
  if (o->port < 0) bad_flag("%s needs --port (0 picks a free one)", "serve");
  struct sockaddr_in a = {0};
  a.sin_family = AF_INET;
  a.sin_port = htons((uint16_t)o->port);
  if (inet_pton(AF_INET, o->bind, &a.sin_addr) != 1) bad_flag("--bind %s: not an IPv4 address", o->bind);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die_errno("socket");
  int one = 1;
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) die_errno("setsockopt SO_REUSEADDR");
  if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) die_errno("bind %s:%ld", o->bind, o->port);
  if (listen(fd, 64) != 0) die_errno("listen on %s:%ld", o->bind, o->port);
  socklen_t len = sizeof a;
  if (getsockname(fd, (struct sockaddr *)&a, &len) != 0) die_errno("getsockname");
  unsigned port = ntohs(a.sin_port);
  if (o->port_file) write_port_file(o->port_file, port);
  fprintf(stderr, "%s: listening on %s:%u\n", g_mode, o->bind, port);
  if (!o->once) {
    struct sigaction sa = {0};
    sa.sa_handler = SIG_DFL;
    sa.sa_flags = SA_NOCLDWAIT;  // children reap themselves
    sigaction(SIGCHLD, &sa, NULL);
  }
  for (;;) {
    int c = accept(fd, NULL, NULL);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      die_errno("accept on %s:%u", o->bind, port);
    }
    if (o->once) {
      close(fd);
      serve_one(c, o);
      return 0;
    }
    pid_t pid = fork();
    if (pid < 0) die_errno("fork");
    if (pid == 0) {
      close(fd);
      serve_one(c, o);
      _exit(0);
    }
    close(c);
  }
}

/* ---- send ---- */

/* Finds "key": in a JSON line and returns a pointer just past it, or NULL. */
static const char *json_field(const char *line, const char *key) {
  char pat[32];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(line, pat);
  return p ? p + strlen(pat) : NULL;
}

static int cmd_send(const struct opts *o) {
  if (!o->to) bad_flag("%s needs --to HOST:PORT", "send");
  if (!o->have_bytes) bad_flag("%s needs --bytes N", "send");
  char host[256];
  const char *colon = strrchr(o->to, ':');
  if (!colon || colon == o->to || !colon[1] || (size_t)(colon - o->to) >= sizeof host)
    bad_flag("--to %s: want HOST:PORT", o->to);
  memcpy(host, o->to, (size_t)(colon - o->to));
  host[colon - o->to] = 0;
  const char *port = colon + 1;

  arm_deadline(o->timeout, o->to);
  struct addrinfo hints = {0}, *res = NULL;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  int gai = getaddrinfo(host, port, &hints, &res);
  if (gai != 0) die("--to %s: cannot resolve: %s", o->to, gai_strerror(gai));

  double t0 = now();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) die_errno("socket");
  set_io_timeout(fd, o->timeout);
  if (connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    int err = errno;
    fprintf(stderr, "%s: connect to %s: %s (%s)%s\n", g_mode, o->to, errno_name(err), strerror(err),
            err == EINPROGRESS || err == EAGAIN ? " (--timeout passed)" : "");
    return 1;
  }
  freeaddrinfo(res);

  struct stream st = {o->seed};
  struct sha256 sha;
  sha256_init(&sha);
  static uint8_t buf[CHUNK];
  for (uint64_t done = 0; done < o->bytes;) {
    size_t n = o->bytes - done < CHUNK ? (size_t)(o->bytes - done) : CHUNK;
    stream_fill(&st, buf, n);
    sha256_update(&sha, buf, n);
    write_all(fd, buf, n, o->to, done);
    done += n;
  }
  if (shutdown(fd, SHUT_WR) != 0) die_errno("shutdown(SHUT_WR) to %s", o->to);

  char reply[512];
  size_t got = 0;
  while (got < sizeof reply - 1 && !memchr(reply, '\n', got)) {
    ssize_t r = recv(fd, reply + got, sizeof reply - 1 - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int err = errno;
      fprintf(stderr, "%s: recv the answer from %s: %s (%s)%s\n", g_mode, o->to, errno_name(err), strerror(err),
              io_error(err));
      return 1;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  reply[got] = 0;
  double seconds = now() - t0;
  disarm_deadline();

  char hex[65];
  sha256_hex(&sha, hex);
  const char *pb = json_field(reply, "bytes"), *ps = json_field(reply, "sha256");
  if (!pb || !ps || ps[0] != '"' || strlen(ps) < 66 || ps[65] != '"') {
    fprintf(stderr, "%s: %s answered %zu bytes that are not {\"bytes\":N,\"sha256\":\"...\"}: %.80s\n", g_mode,
            o->to, got, reply);
    return 1;
  }
  uint64_t server_bytes = strtoull(pb, NULL, 10);
  int match = server_bytes == o->bytes && strncmp(ps + 1, hex, 64) == 0;
  double mib = (double)o->bytes / 1048576.0;
  printf("{\"bytes\":%" PRIu64 ",\"sha256\":\"%s\",\"match\":%s,\"seconds\":%.6f,\"mib_per_s\":%.2f}\n", o->bytes,
         hex, match ? "true" : "false", seconds, seconds > 0 ? mib / seconds : 0.0);
  fflush(stdout);
  if (!match)
    fprintf(stderr, "%s: %s received %" PRIu64 " bytes with sha256 %.64s; sent %" PRIu64 " bytes with sha256 %s\n",
            g_mode, o->to, server_bytes, ps + 1, o->bytes, hex);
  if (o->hold > 0) sleep_seconds(o->hold);
  close(fd);
  return match ? 0 : 1;
}

/* ---- gen ---- */

static int cmd_gen(const struct opts *o) {
  if (!o->have_bytes) bad_flag("%s needs --bytes N", "gen");
  struct stream st = {o->seed};
  static uint8_t buf[CHUNK];
  for (uint64_t done = 0; done < o->bytes;) {
    size_t n = o->bytes - done < CHUNK ? (size_t)(o->bytes - done) : CHUNK;
    stream_fill(&st, buf, n);
    if (fwrite(buf, 1, n, stdout) != n) die_errno("write to stdout");
    done += n;
  }
  if (fflush(stdout) != 0) die_errno("write to stdout");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  static char mode[64];
  snprintf(mode, sizeof mode, "tcp-bulk %s", argv[1]);
  g_mode = mode;
  struct opts o;
  parse(argc, argv, &o);
  if (!strcmp(argv[1], "serve")) return cmd_serve(&o);
  if (!strcmp(argv[1], "send")) return cmd_send(&o);
  if (!strcmp(argv[1], "gen")) return cmd_gen(&o);
  g_mode = "tcp-bulk";
  bad_flag("unknown command %s", argv[1]);
  return 2;
}
