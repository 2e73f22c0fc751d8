/* tests/integration/capture_progs/random_sizes.c -- 20,000 random calls:
 * a slot of 4,000 is freed when live, else malloc'ed at a random size (70%
 * 16 B-1 KiB, 25% 1-65 KiB, 5% 64 KiB-2 MiB) and written whole; a mark
 * every 2,000 calls (m0..m9).  argv[1]: the srand seed.  Where its blocks
 * land depends on everything the allocator held before main, so a capture
 * predicted exactly says the trace and the model agree on that start. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocsim_mark.h"

#define SLOTS 4000
#define CALLS 20000

static size_t random_size(void) {
  int k = rand() % 100;
  if (k < 70)
    return 16 + (size_t)(rand() % 1024);
  if (k < 95)
    return 1024 + (size_t)(rand() % 65536);
  return 65536 + (size_t)(rand() % (2 << 20));
}

int main(int argc, char **argv) {
  static char *live[SLOTS];
  srand(argc > 1 ? (unsigned)atoi(argv[1]) : 1);
  ALLOCSIM_MARK("start");
  for (int call = 0; call < CALLS; call++) {
    int i = rand() % SLOTS;
    if (live[i] != NULL) {
      free(live[i]);
      live[i] = NULL;
    } else {
      size_t n = random_size();
      live[i] = malloc(n);
      if (live[i] == NULL)
        return 1;
      memset(live[i], 1, n);
    }
    if (call % 2000 == 1999) {
      char label[16];
      snprintf(label, sizeof label, "m%d", call / 2000);
      ALLOCSIM_MARK(label);
    }
  }
  return 0;
}
