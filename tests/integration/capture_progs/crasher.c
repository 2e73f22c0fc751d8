/* tests/integration/capture_progs/crasher.c -- dies of a fatal signal a
 * few microseconds after its allocations, long before the recorder's next
 * flush: with argument "segv" by a null-pointer write, else by abort().
 * After the mark "begin" it mallocs 6006 bytes, which the trace must hold,
 * and the process must still die of that signal (exit status 128 + N). */
#include <stdlib.h>
#include <string.h>

#include "allocsim_mark.h"

int main(int argc, char **argv) {
  ALLOCSIM_MARK("begin");
  volatile char *p = malloc(6006);
  p[0] = 1;
  if (argc > 1 && strcmp(argv[1], "segv") == 0) {
    volatile int *null = NULL;
    *null = 1;
  }
  abort();
}
