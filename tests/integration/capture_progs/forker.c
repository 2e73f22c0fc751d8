/* tests/integration/capture_progs/forker.c -- fork: the parent and the child
 * each allocate blocks of their own sizes; the child writes its own log.
 * The child also frees a block inherited from the parent (unmatched in the
 * child's trace by design). */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "allocsim_mark.h"

int main(void) {
  ALLOCSIM_MARK("begin");
  void *inherited = malloc(7001);
  pid_t pid = fork();
  if (pid == 0) {
    ALLOCSIM_MARK("child");
    void *c = malloc(7002);
    free(c);
    free(inherited);
    exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  void *p = malloc(7003);
  free(p);
  free(inherited);
  ALLOCSIM_MARK("end");
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
