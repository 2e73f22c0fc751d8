/* tests/integration/capture_progs/execer.c -- exec: the first image
 * allocates 9001 bytes and execs itself with argument "second" (through
 * execve, or execv when run as `execer execv`), whose image allocates 9002
 * bytes.  `execer execl` uses the variadic execl.  The command's trace is
 * the last image; the first image's records were flushed by the exec
 * wrapper. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "allocsim_mark.h"

extern char **environ;

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "second") == 0) {
    void *q = malloc(9002);
    free(q);
    ALLOCSIM_MARK("second");
    return 0;
  }
  void *p = malloc(9001);
  ALLOCSIM_MARK("first");
  char *const args[] = {argv[0], "second", NULL};
  if (argc > 1 && strcmp(argv[1], "execv") == 0)
    execv("/proc/self/exe", args);
  else if (argc > 1 && strcmp(argv[1], "execl") == 0)
    execl("/proc/self/exe", argv[0], "second", (char *)NULL);
  else
    execve("/proc/self/exe", args, environ);
  free(p);
  return 1; /* exec failed */
}
