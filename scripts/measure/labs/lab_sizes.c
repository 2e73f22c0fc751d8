/* scripts/measure/labs/lab_sizes.c -- lab 1 of the allocator course notes
 * (section 20): enumerate your allocator's size classes.
 *
 * "On glibc use malloc_usable_size() ... Plot usable-vs-requested and find
 * the quantum doublings."  Two parts:
 *   - RSS: one object of every size MIN..MAX (each written in full) held at
 *     once, then freed in the same order.  Marks: start, held, freed.  The
 *     allocsim workload `lab-sizes` replays it.
 *   - The ladder: malloc(n), malloc_usable_size, free for every n from 1
 *     to LADDER (default 256 KiB, the notes' section 8 sweep), written to
 *     OUT.ladder as "request usable" at each request whose usable size
 *     differs from the previous one.  It runs first, in a child process, so
 *     it sees a fresh heap and leaves none of its chunks in the measured
 *     one: after the RSS part glibc would hand malloc(1113) a freed
 *     1152-byte chunk from a bin (a remainder under MINSIZE is not split,
 *     glibc 2.36 malloc/malloc.c:4203-4208, 4306) and the sweep would
 *     measure the heap's history, not the classes.  Two more settings keep
 * every request of the glibc sweep as a fresh process would serve it: a freed
 * mmapped chunk would raise the dynamic mmap threshold (malloc.c:3364-3372), so
 * the sweep sets M_MMAP_THRESHOLD to its initial 128 KiB, which only freezes
 * it; and a top chunk grown by the requests under the threshold would serve
 * those above it from the heap, so M_TRIM_THRESHOLD 0 and M_TOP_PAD 0 (128 KiB
 * by default, sysdeps/generic/ malloc-machine.h:38) give the whole top back at
 * every free of 64 KiB or more (malloc.c:4668-4678), leaving sysmalloc to mmap
 * them.  Under a preloaded allocator mallopt is glibc's and changes nothing.
 * Run it under LD_PRELOAD=libjemalloc.so.2 (and so on) for the others:
 * `allocsim lab sizes --measure` does.
 *
 * Usage: lab_sizes OUT [MIN [MAX [LADDER]]]  (defaults 1 4096 262144)
 */
#include "lab_common.h"

#include <malloc.h>
#include <sys/wait.h>

static void *held[1 << 20];

/* The rungs, kept in static memory until the sweep ends so that no FILE
 * buffer is allocated among the chunks it measures. */
static struct {
  long   request;
  size_t usable;
} rung[1 << 17];

/* The child's work: the sweep, then OUT.ladder.  Exit status 0 on success. */
static int write_ladder(const char *out, long ladder, const char *preload) {
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_TRIM_THRESHOLD, 0);
  mallopt(M_TOP_PAD, 0);
  size_t n = 0, last = 0;
  for (long r = 1; r <= ladder; r++) {
    void *p = malloc((size_t)r);
    if (p == NULL)
      return 1;
    size_t u = malloc_usable_size(p);
    free(p);
    if (u != last) {
      if (n == sizeof rung / sizeof rung[0])
        return 4;
      rung[n].request = r, rung[n++].usable = u;
    }
    last = u;
  }
  char path[4096];
  snprintf(path, sizeof path, "%s.ladder", out);
  FILE *f = fopen(path, "w");
  if (f == NULL)
    return 5;
  fprintf(f,
          "# request usable: malloc_usable_size at each change, 1..%ld"
          "%s%s\n",
          ladder, preload ? ", LD_PRELOAD=" : "", preload ? preload : "");
  for (size_t i = 0; i < n; i++)
    fprintf(f, "%ld %zu\n", rung[i].request, rung[i].usable);
  return fclose(f) == 0 ? 0 : 5;
}

/* Runs write_ladder in a child: a fresh heap the measured one never sees. */
static int ladder_in_child(const char *out, long ladder, const char *preload) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0)
    return 6;
  if (pid == 0)
    _exit(write_ladder(out, ladder, preload));
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
    return 6;
  return WEXITSTATUS(status);
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  long min = argc > 2 ? atol(argv[2]) : 1;
  long max = argc > 3 ? atol(argv[3]) : 4096;
  long ladder = argc > 4 ? atol(argv[4]) : 256L << 10;
  if (min < 1 || max < min || max >= (long)(sizeof held / sizeof held[0]) ||
      ladder < 1)
    return 2;
  char workload[128];
  snprintf(workload, sizeof workload,
           "lab-sizes --min %ld --max %ld --domain raw", min, max);
  lab_begin(argc, argv, workload);
  const char *preload = getenv("LD_PRELOAD");
  int         rc = ladder_in_child(argv[1], ladder, preload);
  if (rc != 0)
    return rc;
  /* The pointer array is the program's: written before `start`. */
  memset(held, 0, (size_t)(max + 1) * sizeof held[0]);

  lab_mark("start");
  for (long n = min; n <= max; n++) {
    held[n] = malloc((size_t)n);
    if (held[n] == NULL)
      return 1;
    memset(held[n], 0xA5, (size_t)n);
    lab_escape(held[n]);
  }
  lab_mark("held");
  for (long n = min; n <= max; n++)
    free(held[n]);
  lab_mark("freed");

  lab_finish(argv[1]);
}
