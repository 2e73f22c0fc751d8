/* scripts/measure/labs/lab_brk.c -- lab 3 of the allocator course notes
 * (section 20): make the brk heap refuse to shrink.
 *
 * "In C: malloc 1000 chunks of 1 KiB, free all but the last, call
 * malloc_trim(0), and watch RSS.  Then free the last one and trim again."
 * Every chunk is written in full (memset), as allocsim assumes programs write
 * what they allocate.  Marks: start, allocated, freed_but_last,
 * trimmed_but_last, freed_last, trimmed_all; the brk offset from its value at
 * start goes into a comment after each mark.  The allocsim workload
 * `lab-brk` (traces/wl_labs.c) replays the same malloc/free/trim sequence.
 *
 * Usage: lab_brk OUT [COUNT [SIZE]]   (defaults 1000 1024)
 */
#include "lab_common.h"

#include <malloc.h>

static void *chunks[100000];

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  long count = argc > 2 ? atol(argv[2]) : 1000;
  long size = argc > 3 ? atol(argv[3]) : 1024;
  if (count < 1 || count > (long)(sizeof chunks / sizeof chunks[0]) || size < 1)
    return 2;
  char workload[128];
  snprintf(workload, sizeof workload, "lab-brk --count %ld --size %ld", count,
           size);
  lab_begin(argc, argv, workload);
  void *brk0 = sbrk(0);
  /* The pointer array is the program's, not the heap's: write its pages
   * before `start` so that they are not counted as heap growth. */
  memset(chunks, 0, (size_t)count * sizeof chunks[0]);

  lab_mark("start");
  for (long i = 0; i < count; i++) {
    chunks[i] = malloc((size_t)size);
    if (chunks[i] == NULL)
      return 1;
    memset(chunks[i], 0xA5, (size_t)size);
    lab_escape(chunks[i]);
  }
  lab_mark("allocated");
  lab_note_brk("allocated", brk0);
  for (long i = 0; i < count - 1; i++)
    free(chunks[i]);
  lab_mark("freed_but_last");
  lab_note_brk("freed_but_last", brk0);
  malloc_trim(0);
  lab_mark("trimmed_but_last");
  lab_note_brk("trimmed_but_last", brk0);
  free(chunks[count - 1]);
  lab_mark("freed_last");
  lab_note_brk("freed_last", brk0);
  malloc_trim(0);
  lab_mark("trimmed_all");
  lab_note_brk("trimmed_all", brk0);
  lab_finish(argv[1]);
}
