/* scripts/measure/jemalloc/je_decay.c -- when does jemalloc give freed
 * memory back?  COUNT objects of SIZE bytes are allocated and written, all
 * are freed, then for SECONDS the program does one of three things while
 * RSS is sampled every 100 ms:
 *
 *   idle  nothing (sleeps to each 100 ms deadline);
 *   tiny  one malloc(16), written and kept, at each 100 ms deadline;
 *   busy  allocation bursts without pause: BATCH objects of SIZE bytes
 *         allocated and written, then all freed, over and over.  A burst
 *         larger than the thread cache moves objects between the cache and
 *         the arena, which is what ticks jemalloc's decay clock (a malloc
 *         served from the thread cache does not).  The number of bursts in
 *         each 100 ms interval goes into a "# busy" comment, their mean
 *         pace into the workload's --batch-every.
 *
 * Decay settings come from MALLOC_CONF (dirty_decay_ms, background_thread,
 * ...), read by jemalloc; the program records what jemalloc reports.  Marks:
 * start, allocated, freed, end; the series between `freed` and `end` has one
 * unlabelled rss sample per 100 ms.  After every sample a "# je" comment
 * carries jemalloc's own statistics (je_common.h).  The allocsim workload
 * `decay` emits the same allocation sequence.
 *
 * Usage: je_decay OUT idle|tiny|busy [COUNT [SIZE [SECONDS [BATCH]]]]
 *        (defaults 20000 4096 12 100)
 */
#include "je_common.h"

#define MAX_COUNT 100000
#define MAX_TINY  1000
#define SAMPLE_NS 100000000LL

static void *objs[MAX_COUNT];
static void *tiny[MAX_TINY];

static void sleep_until(long long deadline_ns) {
  struct timespec ts;
  long long       abs_ns = lab_t0_ns + deadline_ns;
  ts.tv_sec = (time_t)(abs_ns / 1000000000LL);
  ts.tv_nsec = (long)(abs_ns % 1000000000LL);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

static void fill(void *p, size_t size) {
  memset(p, 0xA5, size);
  lab_escape(p);
}

/* One burst: batch objects allocated and written, then freed in order. */
static void burst(long batch, size_t size) {
  for (long i = 0; i < batch; i++) {
    objs[i] = malloc(size);
    if (objs[i] == NULL)
      _exit(1);
    fill(objs[i], size);
  }
  for (long i = 0; i < batch; i++)
    free(objs[i]);
}

int main(int argc, char **argv) {
  if (argc < 3)
    return 2;
  const char *mode = argv[2];
  long        count = argc > 3 ? atol(argv[3]) : 20000;
  long        size = argc > 4 ? atol(argv[4]) : 4096;
  long        seconds = argc > 5 ? atol(argv[5]) : 12;
  long        batch = argc > 6 ? atol(argv[6]) : 100;
  bool        busy = strcmp(mode, "busy") == 0;
  bool        is_tiny = strcmp(mode, "tiny") == 0;
  if ((!busy && !is_tiny && strcmp(mode, "idle") != 0) || count < 1 ||
      count > MAX_COUNT || size < 1 || seconds < 1 || seconds * 10 > MAX_TINY ||
      batch < 1 || batch > MAX_COUNT)
    return 2;
  je_begin(argc, argv, NULL); /* the workload needs the measured rate */
  memset(objs, 0, sizeof objs);
  memset(tiny, 0, sizeof tiny);

  je_mark("start");
  long long t_start = lab_now_ns();
  for (long i = 0; i < count; i++) {
    objs[i] = malloc((size_t)size);
    if (objs[i] == NULL)
      return 1;
    fill(objs[i], (size_t)size);
  }
  long long t_alloc = lab_now_ns();
  je_mark("allocated");
  long long t_free0 = lab_now_ns();
  for (long i = 0; i < count; i++)
    free(objs[i]);
  long long t_free = lab_now_ns();
  je_mark("freed");

  long long t_freed = lab_now_ns() - lab_t0_ns;
  long long total_batches = 0;
  for (long k = 1; k <= seconds * 10; k++) {
    long long deadline = t_freed + k * SAMPLE_NS;
    if (busy) {
      long long n = 0;
      while (lab_now_ns() - lab_t0_ns < deadline) {
        burst(batch, (size_t)size);
        n++;
      }
      total_batches += n;
      lab_body("# busy batches=%lld\n", n);
    } else {
      sleep_until(deadline);
      if (is_tiny) {
        tiny[k - 1] = malloc(16);
        if (tiny[k - 1] == NULL)
          return 1;
        fill(tiny[k - 1], 16);
      }
    }
    je_sample(k);
  }
  je_mark("end");
  /* The phases' measured durations (and the bursts' pace) time the
   * workload's calls. */
  long long every = total_batches ? seconds * 1000000000LL / total_batches : 0;
  lab_meta_set("workload",
               "decay --count %ld --size %ld --after %s --seconds %ld "
               "--batch %ld --batch-every %lldns --alloc-time %lldns "
               "--free-time %lldns",
               count, size, mode, seconds, batch, every, t_alloc - t_start,
               t_free - t_free0);
  lab_finish(argv[1]);
}
