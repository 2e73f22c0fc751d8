/* tests/integration/capture_progs/own_mmap.c -- memory the program maps
 * itself, which no allocator holds.  After "begin": 32 MiB mapped private
 * and anonymous, 12 MiB of it written ("mapped"); moved by mremap to 48 MiB
 * and 4 MiB more written at its end ("grown"); a private writable mapping of
 * a 4 MiB file, 2 MiB of it written: copies of the file's pages, anonymous
 * ("file_written"); both unmapped ("unmapped").  A
 * shared anonymous mapping (shmem: file-backed RSS) and a 64 MiB malloc
 * (the allocator's mmap) are written alongside and kept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "allocsim_mark.h"

#define MIB ((size_t)1 << 20)

int main(void) {
  ALLOCSIM_MARK("begin");
  char *shared = mmap(NULL, 4 * MIB, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  char *own = mmap(NULL, 32 * MIB, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char *heap = malloc(64 * MIB);
  if (shared == MAP_FAILED || own == MAP_FAILED || heap == NULL)
    return 1;
  memset(shared, 1, 4 * MIB);
  memset(own, 1, 12 * MIB);
  memset(heap, 1, 8 * MIB);
  ALLOCSIM_MARK("mapped");
  own = mremap(own, 32 * MIB, 48 * MIB, MREMAP_MAYMOVE);
  if (own == MAP_FAILED)
    return 1;
  memset(own + 44 * MIB, 1, 4 * MIB);
  ALLOCSIM_MARK("grown");
  FILE *f = tmpfile();
  if (f == NULL || ftruncate(fileno(f), 4 * MIB) != 0)
    return 1;
  char *copy =
      mmap(NULL, 4 * MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE, fileno(f), 0);
  if (copy == MAP_FAILED)
    return 1;
  memset(copy, 1, 2 * MIB);
  ALLOCSIM_MARK("file_written");
  munmap(copy, 4 * MIB);
  fclose(f);
  munmap(own, 48 * MIB);
  ALLOCSIM_MARK("unmapped");
  free(heap);
  return 0;
}
