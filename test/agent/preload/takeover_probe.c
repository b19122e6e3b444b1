/* The preload library's code linked into a program (built with SMC_PRELOAD_TEST_HOOKS), so that a
 * fork happens at a known point inside its initialisation: the hook forks on its first call, and
 * the child, like a process forked by another thread while the library initialised, has no thread
 * that will finish that initialisation. The child creates a socket and exits 0 when it took the
 * initialisation over (3 when it did not, 2 when socket() failed). Prints
 * "child_exit=N parent_takeovers=N parent_socket=1". */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern int smc_preload_takeovers_for_test;
void smc_preload_during_init_for_test(void);

static int g_forked;
static int g_child_exit = -1;

void smc_preload_during_init_for_test(void) {
  if (g_forked) return; /* the child's own initialisation, after its take-over */
  g_forked = 1;
  pid_t pid = fork();
  if (pid == 0) {
    /* Never returns into the parent's init_once, as a forking thread other than the initialising one. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    _exit(fd < 0 ? 2 : smc_preload_takeovers_for_test == 1 ? 0 : 3);
  }
  int status = 0;
  if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)) g_child_exit = WEXITSTATUS(status);
}

int main(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  printf("child_exit=%d parent_takeovers=%d parent_socket=%d\n", g_child_exit, smc_preload_takeovers_for_test, fd >= 0);
  return 0;
}
