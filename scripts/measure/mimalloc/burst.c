/* scripts/measure/mimalloc/burst.c -- a burst, then idle: does the freed
 * memory come back, and what makes it come back?
 *
 * COUNT blocks of SIZE bytes are allocated and written in full (allocsim
 * assumes programs write what they allocate), all freed, then the program
 * waits IDLE seconds doing one of:
 *   none       nothing at all;
 *   unrelated  every EVERY ms, malloc + write + free of 100,000 bytes (a size
 *              class the burst did not use: mimalloc needs a medium page);
 *   same       every EVERY ms, malloc + write + free of SIZE bytes (reuses the
 *              burst's size class).
 * RSS is sampled every EVERY ms.  Then mi_collect(false), 0.5 s of samples,
 * mi_collect(true), 0.5 s of samples (on another allocator these steps only
 * mark the time).  Marks: start, allocated, freed, idle_end, collected,
 * collected_force, end; each periodic sample is a mark (idle_tick,
 * collect_tick, force_tick by phase), which the workload emits at the same
 * times, so compare pairs and checks every sample.
 *
 * The measured-run file's workload is `lab-purge` (traces/wl_lab_purge.c)
 * with this run's measured allocation and free times, so that `allocsim
 * compare` replays the same sequence on the same clock.
 *
 * Usage: burst OUT [--size S] [--count N] [--activity none|unrelated|same]
 *                  [--idle-s SECONDS] [--every-ms MS] [--events]
 * Defaults: 4096 20000 none 12 100.  --events also writes OUT.events with
 * every malloc/free and its time (ns since start), for replay.
 */
#include "mi_measure.h"

#define UNRELATED_SIZE 100000
#define MAX_COUNT      1000000

static void *blocks[MAX_COUNT];

static void usage(void) {
  fprintf(stderr, "usage: burst OUT [--size S] [--count N] "
                  "[--activity none|unrelated|same] [--idle-s SECONDS] "
                  "[--every-ms MS] [--events]\n");
  exit(2);
}

/* malloc + full write of size bytes as object id, recorded. */
static void *alloc_written(uint64_t id, size_t size) {
  void *p = malloc(size);
  if (p == NULL)
    mm_die("burst: out of memory\n");
  mm_event('m', id, size);
  memset(p, 0xA5, size);
  mm_escape(p);
  return p;
}

static void free_recorded(uint64_t id, void *p) {
  mm_event('f', id, 0);
  free(p);
}

/* A phase of dur_ns from from_ns (ns since start): at from + k * every_ns
 * for k = 1, 2, ... within it, the activity, then an RSS sample as a mark
 * named tick (absolute deadlines, so samples do not drift and their number
 * is dur / every, as the workload's). */
static void ticking_phase(const char *activity, size_t size, long long from_ns,
                          long long every_ns, long long dur_ns,
                          const char *tick) {
  for (long long k = 1; k * every_ns <= dur_ns; k++) {
    mm_sleep_until(from_ns + k * every_ns);
    if (strcmp(activity, "unrelated") == 0)
      free_recorded(0, alloc_written(0, UNRELATED_SIZE));
    else if (strcmp(activity, "same") == 0)
      free_recorded(0, alloc_written(0, size));
    mm_mark(tick);
  }
  mm_sleep_until(from_ns + dur_ns);
}

int main(int argc, char **argv) {
  if (argc < 2)
    usage();
  size_t      size = 4096;
  long        count = 20000;
  const char *activity = "none";
  double      idle_s = 12;
  long        every_ms = 100;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--events") == 0)
      mm_record_events = true;
    else if (i + 1 >= argc)
      usage();
    else if (strcmp(argv[i], "--size") == 0)
      size = (size_t)atol(argv[++i]);
    else if (strcmp(argv[i], "--count") == 0)
      count = atol(argv[++i]);
    else if (strcmp(argv[i], "--activity") == 0)
      activity = argv[++i];
    else if (strcmp(argv[i], "--idle-s") == 0)
      idle_s = atof(argv[++i]);
    else if (strcmp(argv[i], "--every-ms") == 0)
      every_ms = atol(argv[++i]);
    else
      usage();
  }
  if (size < 1 || count < 1 || count > MAX_COUNT || every_ms < 1 ||
      idle_s < 0 ||
      (strcmp(activity, "none") != 0 && strcmp(activity, "unrelated") != 0 &&
       strcmp(activity, "same") != 0))
    usage();
  memset(blocks, 0, (size_t)count * sizeof blocks[0]);
  /* the burst, its frees, the activity (two per period) and two collects */
  mm_events_cap =
      (size_t)count * 2 + 2 * (size_t)(idle_s * 1000 / (double)every_ms) + 16;
  if (mm_events_cap > MM_EVENTS_MAX)
    usage();
  mm_begin(argc, argv, NULL);
  const long long every_ns = every_ms * 1000000LL;

  long long t0 = mm_elapsed_ns();
  mm_mark("start");
  for (long i = 0; i < count; i++)
    blocks[i] = alloc_written((uint64_t)i, size);
  long long t1 = mm_elapsed_ns();
  mm_mark("allocated");
  for (long i = 0; i < count; i++)
    free_recorded((uint64_t)i, blocks[i]);
  long long t2 = mm_elapsed_ns();
  mm_mark("freed");
  /* the allocsim workload of this run, with its measured phase times */
  mm_meta_set("workload",
              "lab-purge --size %zu --count %ld --activity %s --idle %lldms "
              "--every %ldms --alloc-time %lldns --free-time %lldns",
              size, count, activity, (long long)(idle_s * 1000), every_ms,
              t1 - t0, t2 - t1);
  ticking_phase(activity, size, t2, every_ns, (long long)(idle_s * 1e9),
                "idle_tick");
  mm_mark("idle_end");
  mm_event('c', 0, 0);
  if (mm_mi_collect(false))
    mm_bodyf("# mi_collect(false)\n");
  long long t3 = mm_elapsed_ns();
  mm_mark("collected");
  ticking_phase("none", 0, t3, every_ns, 500000000LL, "collect_tick");
  mm_event('c', 1, 0);
  if (mm_mi_collect(true))
    mm_bodyf("# mi_collect(true)\n");
  long long t4 = mm_elapsed_ns();
  mm_mark("collected_force");
  ticking_phase("none", 0, t4, every_ns, 500000000LL, "force_tick");
  mm_mark("end");
  mm_finish(argv[1]);
}
