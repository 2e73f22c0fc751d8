/* tests/integration/capture_progs/shared_after_fork.c -- pages written
 * before a fork and probed after it, while the child still shares them
 * copy-on-write: an 8 MiB block (a mapping of its own) and 1 MiB of static
 * data are written between "begin" and the fork, with no probe between (no
 * mark; the test samples once a second), and the parent marks "forked"
 * while the child waits.  RSS counts the shared pages; each is mapped twice,
 * so pagemap does not call it exclusive. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "allocsim_mark.h"

#define MIB ((size_t)1 << 20)

static volatile unsigned char filled[1 * MIB];

int main(void) {
  int go[2];
  if (pipe(go) != 0)
    return 1;
  ALLOCSIM_MARK("begin");
  unsigned char *block = malloc(8 * MIB);
  if (block == NULL)
    return 1;
  memset(block, 1, 8 * MIB);
  for (size_t i = 0; i < sizeof filled; i += 64)
    filled[i] = 1;
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    _exit(read(go[0], &c, 1) == 1 ? 0 : 1);
  }
  ALLOCSIM_MARK("forked");
  int status = 0;
  if (pid < 0 || write(go[1], "x", 1) != 1 || waitpid(pid, &status, 0) != pid)
    return 1;
  free(block);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
