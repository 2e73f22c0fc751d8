/* tests/integration/capture_progs/signals.c -- a SIGALRM every 200 us calls
 * allocsim_mark("tick") (async-signal-safe by contract) while the main
 * thread runs 200000 malloc/free pairs of 4242 bytes, so marks land in the
 * middle of the library's own recording.  Prints the ticks delivered. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "allocsim_mark.h"

static volatile sig_atomic_t ticks;

static void on_alarm(int sig) {
  (void)sig;
  ticks++;
  ALLOCSIM_MARK("tick");
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGALRM, &sa, NULL);
  struct itimerval it = {{0, 200}, {0, 200}};
  setitimer(ITIMER_REAL, &it, NULL);
  ALLOCSIM_MARK("begin");
  for (int i = 0; i < 200000; i++) {
    void *p = malloc(4242);
    free(p);
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  ALLOCSIM_MARK("end");
  printf("%d\n", (int)ticks);
  return 0;
}
