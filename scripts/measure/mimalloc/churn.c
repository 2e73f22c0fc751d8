/* scripts/measure/mimalloc/churn.c -- the churn program of the jemalloc
 * issue, measured under any preloaded allocator.
 *
 * 150,000 x 512 B, 100,000 x 1 KiB and 50,000 x 2 KiB, interleaved in groups
 * of six (512, 1024, 512, 2048, 512, 1024), each written in full; of each
 * size, every 20th allocation is kept (the 1st, 21st, ... of that size; a
 * rule on the global index would keep only 512-byte objects, since 20 and 6
 * share a factor) and the others are freed in allocation order; then IDLE seconds with RSS every EVERY ms and nothing else; then the
 * allocator's explicit purge: mi_collect(true) under mimalloc, malloc_trim(0)
 * otherwise; then 1 s more of samples.  Marks: start, allocated, freed,
 * idle_end, purged, end.
 *
 * Usage: churn OUT [--idle-s SECONDS] [--every-ms MS] [--events]
 * Defaults: 10 100.  --events writes OUT.events (see mi_measure.h).
 */
#include "mi_measure.h"

#include <malloc.h>

#define COUNT 300000

static void *objs[COUNT];
static bool  keep[COUNT];
static const size_t group_sizes[6] = {512, 1024, 512, 2048, 512, 1024};

static void usage(void) {
  fprintf(stderr, "usage: churn OUT [--idle-s SECONDS] [--every-ms MS] "
                  "[--events]\n");
  exit(2);
}

static void samples_until(long long every_ns, long long end_ns) {
  for (long long t = mm_elapsed_ns() + every_ns; t <= end_ns; t += every_ns) {
    mm_sleep_until(t);
    mm_sample();
  }
}

int main(int argc, char **argv) {
  if (argc < 2)
    usage();
  double idle_s = 10;
  long   every_ms = 100;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "--events") == 0)
      mm_record_events = true;
    else if (i + 1 >= argc)
      usage();
    else if (strcmp(argv[i], "--idle-s") == 0)
      idle_s = atof(argv[++i]);
    else if (strcmp(argv[i], "--every-ms") == 0)
      every_ms = atol(argv[++i]);
    else
      usage();
  }
  if (idle_s < 0 || every_ms < 1)
    usage();
  char workload[128];
  snprintf(workload, sizeof workload, "churn --idle %gs --every %ldms", idle_s,
           every_ms);
  memset(objs, 0, sizeof objs);
  memset(keep, 0, sizeof keep);
  mm_begin(argc, argv, workload);
  const long long every_ns = every_ms * 1000000LL;

  uint64_t per_size[3] = {0, 0, 0}; /* allocations so far of 512, 1K, 2K */
  mm_mark("start");
  for (uint64_t i = 0; i < COUNT; i++) {
    size_t size = group_sizes[i % 6];
    uint64_t *k = &per_size[size == 512 ? 0 : size == 1024 ? 1 : 2];
    keep[i] = (*k)++ % 20 == 0;
    objs[i] = malloc(size);
    if (objs[i] == NULL)
      mm_die("churn: out of memory\n");
    mm_event('m', i, size);
    memset(objs[i], 0xA5, size);
    mm_escape(objs[i]);
  }
  mm_mark("allocated");
  for (uint64_t i = 0; i < COUNT; i++)
    if (!keep[i]) {
      mm_event('f', i, 0);
      free(objs[i]);
    }
  mm_mark("freed");
  samples_until(every_ns, mm_elapsed_ns() + (long long)(idle_s * 1e9));
  mm_mark("idle_end");
  mm_event('c', 1, 0);
  if (mm_mi_collect(true))
    mm_bodyf("# mi_collect(true)\n");
  else {
    malloc_trim(0);
    mm_bodyf("# malloc_trim(0)\n");
  }
  mm_mark("purged");
  samples_until(every_ns, mm_elapsed_ns() + 1000000000LL);
  mm_mark("end");
  mm_finish(argv[1]);
}
