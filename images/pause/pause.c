/* The pod sandbox's init process: holds the pod's namespaces open and does nothing else.
 * As PID 1 it gets no default signal handling, so it exits on SIGTERM/SIGINT itself and reaps
 * children that get reparented to it (SIGCHLD). Built static: gcc -static -O2 -s. */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction sa = {0};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_stop;
  if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0) return 1;
  sa.sa_handler = on_child;
  sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
  if (sigaction(SIGCHLD, &sa, NULL) != 0) return 1;
  for (;;) pause();
}
