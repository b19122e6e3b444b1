/* A dynamically linked program that creates sockets the way applications do and prints what it
 * got, so the preload tests can see exactly what libsmc-preload.so did to each call.
 *   preload_probe kinds        one line per socket kind: domain, type, protocol, flags, buffers
 *   preload_probe threads N    N threads creating TCP sockets at once
 *   preload_probe errno        errno after a successful socket()
 *   preload_probe dlopen LIB   loads LIB now (its constructor runs with this environment)
 *   preload_probe secure uid|gid LIB
 *                              as dlopen, after making the real uid (or gid) 65534 with the effective
 *                              one unchanged, as in a setuid (setgid) program; needs root */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int opt(int fd, int name) {
  int v = -1;
  socklen_t len = sizeof(v);
  if (getsockopt(fd, SOL_SOCKET, name, &v, &len) != 0) return -1;
  return v;
}

static void show(const char *kind, int domain, int type, int protocol) {
  int fd = socket(domain, type, protocol);
  if (fd < 0) {
    printf("%s fd=-1 errno=%d\n", kind, errno);
    return;
  }
  int fl = fcntl(fd, F_GETFL);
  int fdfl = fcntl(fd, F_GETFD);
  printf("%s fd=%d domain=%d type=%d protocol=%d nonblock=%d cloexec=%d sndbuf=%d rcvbuf=%d\n", kind, fd,
         opt(fd, SO_DOMAIN), opt(fd, SO_TYPE), opt(fd, SO_PROTOCOL), (fl & O_NONBLOCK) ? 1 : 0,
         (fdfl & FD_CLOEXEC) ? 1 : 0, opt(fd, SO_SNDBUF), opt(fd, SO_RCVBUF));
  close(fd);
}

static void *worker(void *arg) {
  long *failures = arg;
  for (int i = 0; i < 50; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || opt(fd, SO_TYPE) != SOCK_STREAM) __atomic_add_fetch(failures, 1, __ATOMIC_RELAXED);
    if (fd >= 0) close(fd);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "kinds") == 0) {
    show("tcp4", AF_INET, SOCK_STREAM, 0);
    show("tcp4flags", AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    show("tcp6", AF_INET6, SOCK_STREAM, 0);
    show("udp4", AF_INET, SOCK_DGRAM, 0);
    show("udp6", AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    show("unix", AF_UNIX, SOCK_STREAM, 0);
    show("sctp", AF_INET, SOCK_STREAM, 132);
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "threads") == 0) {
    int n = atoi(argv[2]);
    if (n < 1 || n > 64) return 2;
    pthread_t t[64];
    long failures = 0;
    for (int i = 0; i < n; ++i) pthread_create(&t[i], NULL, worker, &failures);
    for (int i = 0; i < n; ++i) pthread_join(t[i], NULL);
    printf("threads=%d sockets=%d failures=%ld\n", n, n * 50, failures);
    return failures == 0 ? 0 : 1;
  }
  if (argc >= 2 && strcmp(argv[1], "errno") == 0) {
    errno = 1234;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    printf("fd_ok=%d errno_after=%d\n", fd >= 0, errno);
    return 0;
  }
  if (argc >= 3 && strcmp(argv[1], "dlopen") == 0) {
    void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    printf("dlopen=%s\n", h != NULL ? "ok" : "failed");
    return h != NULL ? 0 : 1;
  }
  if (argc >= 4 && strcmp(argv[1], "secure") == 0) {
    /* Real id 65534, effective and saved ids still 0: what a setuid-root (setgid) program has. */
    int rc = strcmp(argv[2], "gid") == 0 ? setresgid(65534, 0, 0) : setresuid(65534, 0, 0);
    if (rc != 0) {
      printf("setres%sid failed: errno %d\n", argv[2], errno);
      return 3;
    }
    void *h = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
    printf("uid=%d euid=%d gid=%d egid=%d dlopen=%s\n", (int)getuid(), (int)geteuid(), (int)getgid(), (int)getegid(),
           h != NULL ? "ok" : "failed");
    return h != NULL ? 0 : 1;
  }
  fprintf(stderr, "usage: preload_probe kinds | threads N | errno | dlopen LIB | secure uid|gid LIB\n");
  return 2;
}
