/* scripts/measure/labs/lab_arenas.c -- lab 5 of the allocator course notes
 * (section 20):
 * multiply your arenas.
 *
 * "Run 64 threads each doing malloc(1024)/free in a loop ... Compare RSS at
 * MALLOC_ARENA_MAX unset, 8, and 1."  Done in C with pthreads (the lab's
 * point is that no GIL serialises the threads).  All threads are created
 * first and wait at a barrier before their first malloc, so every thread is
 * alive when it picks its arena (glibc 2.36 arena.c arena_get2: an arena is
 * reused from free_list only after its threads exit).  Marks: start (before
 * any thread), running (every thread has finished its loop and is parked at
 * a barrier, still alive), joined (after pthread_join of all).  After the
 * last mark the program counts arenas from malloc_info's <heap nr=...>
 * elements and records it as the provenance key arenas.  The allocsim
 * workload `lab-arenas` (traces/wl_labs.c) replays the same sequence.
 *
 * Thread stacks (8 MiB reservations with a few written pages each), TLS and
 * the DTV that pthread_create callocs in the parent are part of the measured
 * RSS but not of the allocsim trace.  ITERATIONS 0 is the control: the same
 * threads, barriers and marks with no malloc at all; docs/glibc-validation.md
 * subtracts its median from each setting's median, which leaves the arenas.
 *
 * HOLD > 0 adds a working set per thread after the loop: the threads take
 * turns (thread k waits for thread k-1, as the handlers of a pool serve
 * requests one after another, so each thread's first malloc of the burst
 * is uncontended), each mallocing HOLD blocks of SIZE, writing them and
 * freeing all but the last, which the program keeps to the end (a cache
 * entry).  `allocsim run lab-arenas --hold HOLD` replays it.
 *
 * Usage: lab_arenas OUT [THREADS [ITERATIONS [SIZE [HOLD]]]]
 *        (defaults 64 1000 1024 0)
 */
#include "lab_common.h"

#include <malloc.h>
#include <pthread.h>
#include <stdint.h>

static pthread_barrier_t go, done, release;
static long              iterations, size, hold;
static pthread_mutex_t   turn_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t    turn_cond = PTHREAD_COND_INITIALIZER;
static long              turn;          /* whose burst it is */
static void             *kept[1024];    /* each thread's last block */
static void             *burst[100000]; /* the burst's blocks (one at a time) */

/* Thread k's burst, once thread k-1's is over. */
static void hold_burst(long k) {
  pthread_mutex_lock(&turn_lock);
  while (turn != k)
    pthread_cond_wait(&turn_cond, &turn_lock);
  pthread_mutex_unlock(&turn_lock);
  for (long j = 0; j < hold; j++) {
    burst[j] = malloc((size_t)size);
    if (burst[j] == NULL)
      abort();
    memset(burst[j], 0xA5, (size_t)size);
    lab_escape(burst[j]);
  }
  for (long j = 0; j < hold - 1; j++)
    free(burst[j]);
  kept[k] = burst[hold - 1];
  pthread_mutex_lock(&turn_lock);
  turn++;
  pthread_cond_broadcast(&turn_cond);
  pthread_mutex_unlock(&turn_lock);
}

static void *worker(void *arg) {
  long k = (long)(intptr_t)arg;
  pthread_barrier_wait(&go);
  for (long i = 0; i < iterations; i++) {
    char *p = malloc((size_t)size);
    if (p == NULL)
      abort();
    memset(p, 0xA5, (size_t)size);
    lab_escape(p);
    free(p);
  }
  if (hold > 0)
    hold_burst(k);
  pthread_barrier_wait(&done);
  pthread_barrier_wait(&release);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  long nthreads = argc > 2 ? atol(argv[2]) : 64;
  iterations = argc > 3 ? atol(argv[3]) : 1000;
  size = argc > 4 ? atol(argv[4]) : 1024;
  hold = argc > 5 ? atol(argv[5]) : 0;
  if (nthreads < 1 || nthreads > 1024 || iterations < 0 || size < 1 ||
      hold < 0 || hold > (long)(sizeof burst / sizeof burst[0]))
    return 2;
  char workload[192];
  int  w = snprintf(workload, sizeof workload,
                    "lab-arenas --threads %ld --iterations %ld --size %ld",
                    nthreads, iterations, size);
  if (hold > 0)
    snprintf(workload + w, sizeof workload - (size_t)w, " --hold %ld", hold);
  lab_begin(argc, argv, workload);
  static pthread_t tids[1024];
  unsigned         n = (unsigned)nthreads + 1;
  pthread_barrier_init(&go, NULL, n);
  pthread_barrier_init(&done, NULL, n);
  pthread_barrier_init(&release, NULL, n);

  /* The burst's pointer array is the program's, not the heap's: write its
   * pages before `start`. */
  memset(burst, 0, (size_t)hold * sizeof burst[0]);
  lab_mark("start");
  for (long i = 0; i < nthreads; i++)
    if (pthread_create(&tids[i], NULL, worker, (void *)(intptr_t)i) != 0)
      return 1;
  pthread_barrier_wait(&go);
  pthread_barrier_wait(&done);
  lab_mark("running");
  pthread_barrier_wait(&release);
  for (long i = 0; i < nthreads; i++)
    pthread_join(tids[i], NULL);
  lab_mark("joined");

  /* Count arenas: malloc_info prints one <heap nr="N"> per arena.  This
   * allocates (open_memstream), so it runs after the last mark. */
  char  *xml = NULL;
  size_t len = 0;
  FILE  *f = open_memstream(&xml, &len);
  if (f == NULL || malloc_info(0, f) != 0)
    return 1;
  fclose(f);
  long arenas = 0;
  for (const char *q = xml; (q = strstr(q, "<heap nr=")) != NULL; q++)
    arenas++;
  lab_meta_set("arenas", "%ld", arenas);
  lab_finish(argv[1]);
}
