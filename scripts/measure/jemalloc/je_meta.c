/* scripts/measure/jemalloc/je_meta.c -- jemalloc's own memory (metadata) as
 * the library reports it, for the model's base-allocation rules.
 *
 * Prints, at each step, RSS (smaps_rollup) and jemalloc's statistics: total
 * metadata, resident, mapped, active, and per arena its base bytes
 * (stats.arenas.<i>.base), internal bytes (.internal), resident, mapped and
 * active pages.  Steps:
 *   init        after the first mallctl (ctl metadata allocated)
 *   thread K    after thread K (K = 1..THREADS) made one malloc(16) and
 *               parked: each new thread binds a new arena while fewer than
 *               narenas exist (arena_choose_hard), so this shows the cost of
 *               an arena and of a thread's cache (tcache stacks);
 *   slabs N     after the main thread allocated N 4 KiB objects (N slabs:
 *               one edata_t each from its arena's base);
 *   large       after one 8 MiB allocation (the huge arena is created);
 *   joined      after every thread exited.
 * Output: whitespace-separated "key=value" lines, one per step and arena.
 *
 * Usage: je_meta [THREADS [SLABS]]   (defaults 10 1000)
 */
#include "je_common.h"

#include <pthread.h>

static pthread_barrier_t parked, release;
static void             *slab_objs[100000];

static void *thread_main(void *arg) {
  (void)arg;
  void *p = malloc(16);
  memset(p, 1, 16);
  lab_escape(p);
  pthread_barrier_wait(&parked);
  pthread_barrier_wait(&release); /* all threads and main: at the end */
  free(p);
  return NULL;
}

static void report(const char *step) {
  je_epoch();
  printf("step=%s rss=%lld metadata=%llu resident=%llu mapped=%llu "
         "active=%llu retained=%llu\n",
         step, lab_rss_bytes(),
         (unsigned long long)je_read_u64("stats.metadata"),
         (unsigned long long)je_read_u64("stats.resident"),
         (unsigned long long)je_read_u64("stats.mapped"),
         (unsigned long long)je_read_u64("stats.active"),
         (unsigned long long)je_read_u64("stats.retained"));
  unsigned narenas = je_read_unsigned("arenas.narenas");
  for (unsigned i = 0; i < narenas; i++) {
    char name[96];
    snprintf(name, sizeof name, "stats.arenas.%u.base", i);
    uint64_t base = je_read_u64(name);
    if (base == 0)
      continue; /* not initialized */
    snprintf(name, sizeof name, "stats.arenas.%u.internal", i);
    uint64_t internal = je_read_u64(name);
    snprintf(name, sizeof name, "stats.arenas.%u.resident", i);
    uint64_t resident = je_read_u64(name);
    snprintf(name, sizeof name, "stats.arenas.%u.mapped", i);
    uint64_t mapped = je_read_u64(name);
    snprintf(name, sizeof name, "stats.arenas.%u.pactive", i);
    uint64_t pactive = je_read_u64(name);
    snprintf(name, sizeof name, "stats.arenas.%u.pdirty", i);
    uint64_t pdirty = je_read_u64(name);
    snprintf(name, sizeof name, "stats.arenas.%u.nthreads", i);
    unsigned nthreads = je_read_unsigned(name);
    printf("  arena=%u base=%llu internal=%llu resident=%llu mapped=%llu "
           "pactive=%llu pdirty=%llu nthreads=%u\n",
           i, (unsigned long long)base, (unsigned long long)internal,
           (unsigned long long)resident, (unsigned long long)mapped,
           (unsigned long long)pactive, (unsigned long long)pdirty, nthreads);
  }
  fflush(stdout);
}

int main(int argc, char **argv) {
  long nthreads = argc > 1 ? atol(argv[1]) : 10;
  long nslabs = argc > 2 ? atol(argv[2]) : 1000;
  if (nthreads < 0 || nthreads > 256 || nslabs < 0 || nslabs > 100000)
    return 2;
  je_begin(argc, argv, "je_meta");
  if (je_mallctl == NULL) {
    fprintf(stderr, "je_meta: run with LD_PRELOAD=libjemalloc.so.2\n");
    return 1;
  }
  report("init");
  pthread_t th[256];
  pthread_barrier_init(&release, NULL, (unsigned)nthreads + 1);
  for (long k = 0; k < nthreads; k++) {
    pthread_barrier_init(&parked, NULL, 2);
    if (pthread_create(&th[k], NULL, thread_main, NULL) != 0)
      return 1;
    pthread_barrier_wait(&parked);
    char step[32];
    snprintf(step, sizeof step, "thread_%ld", k + 1);
    report(step);
    pthread_barrier_destroy(&parked);
  }
  for (long i = 0; i < nslabs; i++) {
    slab_objs[i] = malloc(4096);
    memset(slab_objs[i], 1, 4096);
    lab_escape(slab_objs[i]);
  }
  char step[32];
  snprintf(step, sizeof step, "slabs_%ld", nslabs);
  report(step);
  void *big = malloc((size_t)8 << 20);
  memset(big, 1, (size_t)8 << 20);
  lab_escape(big);
  report("large");
  free(big);
  report("large_freed");
  pthread_barrier_wait(&release);
  for (long k = 0; k < nthreads; k++)
    pthread_join(th[k], NULL);
  report("joined");
  return 0;
}
