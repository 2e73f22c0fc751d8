/* traces/capture/ownmap.c -- the recorder's own memory, mapped where it
 * does not move the program's mappings.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "capture_int.h"

/* Where the recorder's own mappings go: a hint address of their own,
 * 16 TiB, far from the top-down mmap area (near 128 TiB) and the brk heap
 * of a PIE (near 85 TiB) on x86-64.  Linux maps at a free hint (mm/mmap.c
 * generic_get_unmapped_area_topdown tries it first), so the program's
 * mappings land where they would without the recorder, as the models place
 * them from the probed mmap_top (stream.c); an occupied or out-of-range
 * hint falls back to the usual top-down search. */
#define OWN_MAP_BASE ((uintptr_t)1 << 44)
static _Atomic uintptr_t g_own_next = OWN_MAP_BASE;

static void *own_map(size_t len, int extra_flags) {
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t span = ((uintptr_t)len + page - 1) & ~(page - 1);
  uintptr_t hint = atomic_fetch_add(&g_own_next, span);
  void     *m = mmap((void *)hint, len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
  return m == MAP_FAILED ? NULL : m;
}

void *capture_own_map(size_t len) {
  return own_map(len, 0);
}

/* Populated: a private writable mapping is faulted in for writing
 * (Linux 6.1 mm/gup.c populate_vma_page_range: FOLL_WRITE when VM_WRITE
 * and not VM_SHARED), so every page is one of the process's own from the
 * start and never the shared zero page. */
void *capture_own_table(size_t len) {
  return own_map(len, MAP_POPULATE);
}
