/* scripts/measure/mimalloc/churn.c -- the churn program of the jemalloc
 * issue under a preloaded mimalloc: fragmentation after churn, and what an
 * explicit collect returns.
 *
 * The sequence of the allocsim workload `churn-purge`
 * (traces/wl_churn_purge.c; scripts/measure/jemalloc/je_churn.c runs it
 * under jemalloc), recording its measured allocation and free times: 150,000 x
 * 512 B, 100,000 x 1 KiB and 50,000 x 2 KiB objects in a shuffled order
 * (Fisher-Yates driven by splitmix64 from SEED), each written in full; every
 * KEEP_EVERY-th object in allocation order is kept, the others freed in
 * allocation order; IDLE seconds of nothing with RSS every 100 ms; then the
 * point where jemalloc flushes its thread cache (mimalloc has none: a mark
 * only) and mi_collect(true) (or malloc_trim(0) when the process does not run
 * on mimalloc). Marks: start, allocated, freed, idle_end, tcache_flushed,
 * purged.
 *
 * Usage: churn OUT [SEED [IDLE_S [KEEP_EVERY]]]   (defaults 1 10 20)
 */
#include "mi_measure.h"

#include <malloc.h>

#define N_512     150000
#define N_1K      100000
#define N_2K      50000
#define N_ALL     (N_512 + N_1K + N_2K)
#define SAMPLE_NS 100000000LL

static void          *objs[N_ALL];
static unsigned short sizes[N_ALL];

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* The three counts in a shuffled order: for i from N_ALL-1 down to 1, swap
 * i with splitmix64() % (i + 1). */
static void shuffle_sizes(uint64_t seed) {
  size_t k = 0;
  for (size_t i = 0; i < N_512; i++)
    sizes[k++] = 512;
  for (size_t i = 0; i < N_1K; i++)
    sizes[k++] = 1024;
  for (size_t i = 0; i < N_2K; i++)
    sizes[k++] = 2048;
  uint64_t state = seed;
  for (size_t i = N_ALL - 1; i > 0; i--) {
    size_t         j = (size_t)(splitmix64(&state) % (i + 1));
    unsigned short t = sizes[i];
    sizes[i] = sizes[j];
    sizes[j] = t;
  }
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  long seed = argc > 2 ? atol(argv[2]) : 1;
  long idle_s = argc > 3 ? atol(argv[3]) : 10;
  long keep_every = argc > 4 ? atol(argv[4]) : 20;
  if (seed < 0 || idle_s < 0 || keep_every < 1)
    return 2;
  memset(objs, 0, sizeof objs);
  mm_begin(argc, argv, NULL);
  shuffle_sizes((uint64_t)seed);

  long long t0 = mm_elapsed_ns();
  mm_mark("start");
  for (size_t i = 0; i < N_ALL; i++) {
    objs[i] = malloc(sizes[i]);
    if (objs[i] == NULL)
      mm_die("churn: out of memory\n");
    mm_event('m', i, sizes[i]);
    memset(objs[i], 0xA5, sizes[i]);
    mm_escape(objs[i]);
  }
  long long t1 = mm_elapsed_ns();
  mm_mark("allocated");
  for (size_t i = 0; i < N_ALL; i++)
    if (i % (size_t)keep_every != 0) {
      mm_event('f', i, 0);
      free(objs[i]);
    }
  long long t2 = mm_elapsed_ns();
  mm_mark("freed");
  /* the allocsim workload of this run, with its measured phase times */
  mm_meta_set("workload",
              "churn-purge --seed %ld --idle %lds --keep-every %ld "
              "--alloc-time %lldns --free-time %lldns",
              seed, idle_s, keep_every, t1 - t0, t2 - t1);
  long long end = mm_elapsed_ns() + idle_s * 1000000000LL;
  for (long long t = mm_elapsed_ns() + SAMPLE_NS; t <= end; t += SAMPLE_NS) {
    mm_sleep_until(t);
    mm_sample();
  }
  mm_mark("idle_end");
  mm_mark("tcache_flushed");
  mm_event('c', 1, 0);
  if (mm_mi_collect(true))
    mm_bodyf("# mi_collect(true)\n");
  else {
    malloc_trim(0);
    mm_bodyf("# malloc_trim(0)\n");
  }
  mm_mark("purged");
  mm_finish(argv[1]);
}
