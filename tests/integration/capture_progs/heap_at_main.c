/* tests/integration/capture_progs/heap_at_main.c -- writes the bytes in use
 * in glibc's main arena at the start of main (mallinfo2 uordblks) to the
 * file argv[1]: under capture, every one of those chunks must be in the
 * trace, but for glibc's own tcache struct. */
#include <malloc.h>
#include <stdio.h>

int main(int argc, char **argv) {
  struct mallinfo2 mi = mallinfo2();
  FILE            *f = argc > 1 ? fopen(argv[1], "w") : NULL;
  if (f == NULL)
    return 2;
  fprintf(f, "%zu\n", mi.uordblks);
  return fclose(f) == 0 ? 0 : 1;
}
