/* traces/capture/dlwalk.c -- the recorder's dl_iterate_phdr calls and fork.
 *
 * dl_iterate_phdr holds ld.so's dl_load_write_lock while it walks, and fork
 * does not take that lock (glibc 2.36 posix/fork.c): a fork while the
 * flusher's sample is in the walk leaves the child a lock no thread will
 * release, and the child's first sample (atfork_child) waits for it for
 * ever (test_callsites hung so, 1 capture in about 50 under load).  The
 * recorder's own walks therefore register, and the fork's prepare handler
 * holds new walks off and waits for the current ones, for at most a
 * second (a fork from a signal handler that interrupted a walk must not
 * wait on itself). */
#include <errno.h>
#include <time.h>

#include "capture_int.h"

static atomic_int g_walkers, g_forking;

static void walk_pause(void) {
  struct timespec ts = {.tv_sec = 0, .tv_nsec = 100000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

void capture_dl_walk_enter(void) {
  for (;;) {
    atomic_fetch_add(&g_walkers, 1);
    if (!atomic_load(&g_forking))
      return;
    atomic_fetch_sub(&g_walkers, 1);
    walk_pause();
  }
}

void capture_dl_walk_exit(void) {
  atomic_fetch_sub(&g_walkers, 1);
}

void capture_dl_walk_atfork_prepare(void) {
  atomic_store(&g_forking, 1);
  for (int i = 0; i < 10000 && atomic_load(&g_walkers) > 0; i++)
    walk_pause();
}

void capture_dl_walk_atfork_parent(void) {
  atomic_store(&g_forking, 0);
}

void capture_dl_walk_atfork_child(void) {
  atomic_store(&g_walkers, 0); /* the walkers were the parent's threads */
  atomic_store(&g_forking, 0);
}
