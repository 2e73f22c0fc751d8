/* tests/integration/capture_progs/heaptrack_steps.c -- the program behind
 * tests/data/heaptrack/ (the importer's fixtures, made by the real
 * heaptrack; commands in tests/data/heaptrack/README.md) and the live
 * heaptrack test: 200 blocks of 3000 bytes, every 10th kept, one grown by
 * realloc, a 2 MiB block (mmap'd by glibc) allocated and freed, then
 * malloc_trim(0), which heaptrack does not record.  The pauses let
 * heaptrack's 10 ms timer take RSS samples between the steps. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void pause_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(void) {
  static char *blocks[200];
  for (int i = 0; i < 200; i++) {
    blocks[i] = malloc(3000);
    memset(blocks[i], i, 3000);
  }
  pause_ms(40);
  for (int i = 0; i < 200; i++)
    if (i % 10 != 0)
      free(blocks[i]);
  blocks[0] = realloc(blocks[0], 6000);
  memset(blocks[0], 1, 6000);
  char *big = malloc(2 << 20);
  memset(big, 2, 2 << 20);
  pause_ms(40);
  free(big);
  pause_ms(40);
  malloc_trim(0);
  pause_ms(40);
  for (int i = 0; i < 200; i += 10)
    free(blocks[i]);
  return 0;
}
