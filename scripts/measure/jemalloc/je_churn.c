/* scripts/measure/jemalloc/je_churn.c -- fragmentation after churn, and what
 * an explicit purge returns.
 *
 * 150,000 x 512 B, 100,000 x 1 KiB and 50,000 x 2 KiB objects are allocated
 * in a shuffled order (Fisher-Yates driven by splitmix64 from SEED, the rule
 * the allocsim workload `churn-purge` uses), each written in full.  Every
 * 20th object in allocation order is kept; the others are freed in
 * allocation order.  Then IDLE seconds of nothing, RSS sampled every 100 ms,
 * then the thread cache is flushed (mallctl "thread.tcache.flush") and every
 * arena purged (mallctl "arena.4096.purge", 4096 = MALLCTL_ARENAS_ALL).
 *
 * Marks: start, allocated, freed, s1 ... s(10 * IDLE_S) every 100 ms,
 * idle_end, tcache_flushed, purged.  After
 * every sample a "# je" comment carries jemalloc's statistics (je_common.h).
 *
 * Usage: je_churn OUT [SEED [IDLE_S [KEEP_EVERY]]]   (defaults 1 10 20)
 */
#include "je_common.h"

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

/* sizes[] holds the three counts in a shuffled order: for i from N_ALL-1
 * down to 1, swap i with splitmix64() % (i + 1). */
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
  je_begin(argc, argv, NULL); /* the workload needs the phase durations */
  memset(objs, 0, sizeof objs);
  shuffle_sizes((uint64_t)seed);

  je_mark("start");
  long long t_start = lab_now_ns();
  for (size_t i = 0; i < N_ALL; i++) {
    objs[i] = malloc(sizes[i]);
    if (objs[i] == NULL)
      return 1;
    memset(objs[i], 0xA5, sizes[i]);
    lab_escape(objs[i]);
  }
  long long t_alloc = lab_now_ns();
  je_mark("allocated");
  long long t_free0 = lab_now_ns();
  for (size_t i = 0; i < N_ALL; i++)
    if (i % (size_t)keep_every != 0)
      free(objs[i]);
  long long t_free = lab_now_ns();
  je_mark("freed");
  long long t_freed = lab_now_ns() - lab_t0_ns;
  for (long k = 1; k <= idle_s * 10; k++) {
    long long       abs_ns = lab_t0_ns + t_freed + k * SAMPLE_NS;
    struct timespec ts = {(time_t)(abs_ns / 1000000000LL),
                          (long)(abs_ns % 1000000000LL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
      ;
    je_sample(k);
  }
  je_mark("idle_end");
  if (je_ctl_void("thread.tcache.flush") != 0 && je_mallctl != NULL)
    return 1;
  je_mark("tcache_flushed");
  if (je_ctl_void("arena.4096.purge") != 0 && je_mallctl != NULL)
    return 1;
  je_mark("purged");
  lab_meta_set("workload",
               "churn-purge --seed %ld --idle %lds --keep-every %ld "
               "--alloc-time %lldns --free-time %lldns --sample-every 100ms",
               seed, idle_s, keep_every, t_alloc - t_start, t_free - t_free0);
  lab_finish(argv[1]);
}
