/* tests/integration/capture_progs/own_tables.c -- frees that look up the
 * recorder's touch table.  48 blocks of 16 KiB (above the touch threshold,
 * so each has an entry) are kept while 200,000 small blocks are allocated
 * and freed; every small free looks its address up in the table.  A 2 GiB
 * block, one page of it written, gets a bitmap of its own (64 KiB).  At mark
 * "end" the program writes to argv[1] what the mark's measured RSS should
 * be: its RSS (/proc/self/smaps) less the recorder's own memory, its
 * mappings at 16 TiB and the anonymous pages of its library's writable
 * segments.  It reads smaps once before the mark
 * too, so that the code doing it is resident by then. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocsim_mark.h"

#define LARGE       48
#define SMALL_PAIRS 200000

/* The recorder's mappings: at 16 TiB (traces/capture/ownmap.c), its
 * library's, and the anonymous one right after the library's last (its
 * .bss past the file's end). */
static unsigned long long rss_less_recorder(void) {
  FILE              *f = fopen("/proc/self/smaps", "r");
  char               line[512];
  unsigned long long total = 0, start, end, kib, lib_end = 0;
  int                own_region = 0, own_lib = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL) {
    if (sscanf(line, "%llx-%llx ", &start, &end) == 2 &&
        strstr(line, " kB") == NULL) {
      own_region = start >= (1ull << 44) && start < (1ull << 45);
      own_lib = strstr(line, "liballocsim_capture") != NULL ||
                (start == lib_end && strchr(line, '/') == NULL);
      lib_end = strstr(line, "liballocsim_capture") != NULL ? end : 0;
    } else if (sscanf(line, "Rss: %llu", &kib) == 1 && !own_region) {
      total += kib << 10;
    } else if (sscanf(line, "Anonymous: %llu", &kib) == 1 && own_lib) {
      total -= kib << 10;
    }
  }
  if (f != NULL)
    fclose(f);
  return total;
}

int main(int argc, char **argv) {
  if (argc != 2)
    return 2;
  static char *large[LARGE];
  char        *huge = malloc((size_t)2 << 30);
  if (huge == NULL)
    return 1;
  huge[0] = 1;
  for (int i = 0; i < LARGE; i++) {
    large[i] = malloc(16 << 10);
    if (large[i] == NULL)
      return 1;
    memset(large[i], 1, 16 << 10);
  }
  for (int i = 0; i < SMALL_PAIRS; i++) {
    char *p = malloc(16 + (size_t)(i % 64) * 16);
    if (p == NULL)
      return 1;
    p[0] = (char)i;
    free(p);
  }
  /* once before the mark: the code that reads smaps is then resident */
  rss_less_recorder();
  ALLOCSIM_MARK("end");
  unsigned long long truth = rss_less_recorder();
  FILE              *out = fopen(argv[1], "w");
  if (out == NULL || fprintf(out, "%llu\n", truth) < 0 || fclose(out) != 0)
    return 1;
  for (int i = 0; i < LARGE; i++)
    free(large[i]);
  free(huge);
  return 0;
}
