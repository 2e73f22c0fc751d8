/* tests/integration/capture_progs/sleeper.c -- a program to interrupt:
 * `sleeper PIDFILE SECONDS [fork]` writes its pid (and, with "fork", its
 * child's) to PIDFILE, then every 5 ms mallocs and frees 2000 blocks and
 * marks "tick", for SECONDS.  The default signal actions stay, so SIGINT,
 * SIGTERM and SIGHUP kill it without running its destructors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allocsim_mark.h"

static void work(double seconds) {
  struct timespec t0, now, nap = {0, 5 * 1000 * 1000};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    void *b[2000];
    for (int i = 0; i < 2000; i++)
      b[i] = malloc(64 + (size_t)i % 512);
    for (int i = 0; i < 2000; i++)
      free(b[i]);
    ALLOCSIM_MARK("tick");
    nanosleep(&nap, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
    if ((double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9 >
        seconds)
      return;
  }
}

int main(int argc, char **argv) {
  if (argc < 3)
    return 2;
  pid_t child = 0;
  if (argc > 3 && strcmp(argv[3], "fork") == 0 && (child = fork()) == 0) {
    work(atof(argv[2]));
    _exit(0);
  }
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s.tmp", argv[1]);
  FILE *f = fopen(tmp, "w");
  if (f == NULL)
    return 3;
  fprintf(f, "%d %d\n", (int)getpid(), (int)child);
  fclose(f);
  rename(tmp, argv[1]);
  work(atof(argv[2]));
  return 0;
}
