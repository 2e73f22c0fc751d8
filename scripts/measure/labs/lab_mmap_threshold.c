/* scripts/measure/labs/lab_mmap_threshold.c -- lab 4 of the allocator course
 * notes (section 20):
 * trigger the dynamic mmap threshold.
 *
 * "Allocate and free a 4 MiB buffer once, then allocate and free 100 more and
 * watch RSS.  Repeat with MALLOC_MMAP_THRESHOLD_=131072."  Each buffer is
 * written in full.  Marks: start, first_alloc, first_free, second_alloc,
 * second_free (the first of the 100), repeat_done (after the other 99).
 * Comments record the brk offset and mallinfo2's hblkhd (bytes in mmapped
 * chunks) at each mark, so the docs can show where each buffer came from.
 * The allocsim workload `lab-mmap-threshold` (traces/wl_labs.c) replays it.
 *
 * Usage: lab_mmap_threshold OUT [SIZE [REPEAT]]   (defaults 4194304 100)
 */
#include "lab_common.h"

#include <malloc.h>

static void note(const char *what, const void *brk0) {
  struct mallinfo2 mi = mallinfo2();
  lab_note_brk(what, brk0);
  lab_body("# %s: hblkhd = %zu\n", what, mi.hblkhd);
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  long size = argc > 2 ? atol(argv[2]) : 4L << 20;
  long repeat = argc > 3 ? atol(argv[3]) : 100;
  if (size < 1 || repeat < 1)
    return 2;
  char workload[128];
  snprintf(workload, sizeof workload,
           "lab-mmap-threshold --size %ld --repeat %ld", size, repeat);
  lab_begin(argc, argv, workload);
  void *brk0 = sbrk(0);

  lab_mark("start");
  char *p = malloc((size_t)size);
  if (p == NULL)
    return 1;
  memset(p, 0xA5, (size_t)size);
  lab_escape(p);
  lab_mark("first_alloc");
  note("first_alloc", brk0);
  free(p);
  lab_mark("first_free");
  note("first_free", brk0);
  for (long i = 0; i < repeat; i++) {
    p = malloc((size_t)size);
    if (p == NULL)
      return 1;
    memset(p, 0xA5, (size_t)size);
    lab_escape(p);
    if (i == 0) {
      lab_mark("second_alloc");
      note("second_alloc", brk0);
    }
    free(p);
    if (i == 0) {
      lab_mark("second_free");
      note("second_free", brk0);
    }
  }
  lab_mark("repeat_done");
  note("repeat_done", brk0);
  lab_finish(argv[1]);
}
