/* tests/integration/capture_progs/raw_fork.c -- a child made by a raw
 * clone system call, which runs none of fork()'s handlers: it allocates
 * 20,000 blocks of 7102 bytes (enough records to fill its inherited
 * buffer many times) and leaves by _exit; the parent allocates 7101 and
 * 7103 bytes around it.  None of the child's blocks may reach the
 * parent's trace. */
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
  void *a = malloc(7101);
  long  pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
  if (pid == 0) {
    for (int i = 0; i < 20000; i++)
      free(malloc(7102));
    _exit(0);
  }
  int status = 0;
  waitpid((pid_t)pid, &status, 0);
  free(malloc(7103));
  free(a);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
