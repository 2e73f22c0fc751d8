/* tests/integration/capture_progs/daemonizer.c -- daemon(): the process the
 * capture started exits at once and its child, reparented, allocates only
 * 300 ms later.
 *   daemonizer               daemon(1, 1): keeps the directory and streams
 *   daemonizer --full FILE   daemon(0, 0), then writes to FILE the child's
 *                            working directory and whether its stdout is
 *                            /dev/null ("/ null"), what daemon(3) promises */
#define _DEFAULT_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "allocsim_mark.h"

/* "/ null" when the working directory is / and stdout is /dev/null. */
static void report(const char *path) {
  char        cwd[256];
  struct stat out, null;
  bool        to_null = fstat(STDOUT_FILENO, &out) == 0 &&
                 stat("/dev/null", &null) == 0 && out.st_rdev == null.st_rdev;
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return;
  fprintf(f, "%s %s\n", getcwd(cwd, sizeof cwd) ? cwd : "?",
          to_null ? "null" : "other");
  fclose(f);
}

int main(int argc, char **argv) {
  bool full = argc == 3 && strcmp(argv[1], "--full") == 0;
  if (daemon(!full, !full) != 0)
    return 1;
  usleep(300000);
  char *p = malloc(70001);
  if (p == NULL)
    return 1;
  memset(p, 1, 70001);
  ALLOCSIM_MARK("daemon");
  free(p);
  if (full)
    report(argv[2]);
  return 0;
}
