/* A dynamically linked program that creates sockets the way applications do and prints what it
 * got, so the preload tests can see exactly what libsmc-preload.so did to each call.
 *   preload_probe kinds        one line per socket kind: domain, type, protocol, flags, buffers
 *   preload_probe threads N    N threads creating TCP sockets at once
 *   preload_probe errno        errno after a successful socket() */
#define _GNU_SOURCE
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
  fprintf(stderr, "usage: preload_probe kinds | threads N | errno\n");
  return 2;
}
