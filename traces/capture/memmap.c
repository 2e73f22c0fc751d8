/* traces/capture/memmap.c -- measured RSS, split into what an allocator
 * could hold and what none does.
 *
 * A trace explains memory the program got from malloc; the rest of its RSS
 * the trace cannot see.  For gzip compressing a 38 MB file that rest is
 * nearly all of the growth after main(): 480 KiB of its static buffers
 * (.bss), 76 KiB of its code and 156 KiB of libc's code faulted in, against
 * 4 KiB of heap.  So every sample also measures "other": resident bytes no
 * allocator holds, and `allocsim compare` reports its growth apart from the
 * model's error.
 *
 *   other = file-backed RSS            Rss - Anonymous (smaps_rollup): code,
 *                                      read-only data, the program's own
 *                                      file mmaps
 *         + anonymous pages inside     written .data and .bss of every
 *           loaded objects' writable   loaded object (PT_LOAD segments,
 *           segments                   dl_iterate_phdr)
 *         + anonymous pages of the     the main thread's stack, below
 *           main stack                 __libc_stack_end
 *         + anonymous pages of the     private anonymous mmaps the
 *           program's own mappings     program made, and the pages it
 *                                      wrote in its private writable
 *                                      file mmaps (progmap.c)
 *
 * Anonymous pages are counted from /proc/self/pagemap, which, unlike
 * mincore, says whether this process maps the page, and (PAGEMAP_SCAN,
 * below) whether it is the shared zero page, which RSS does not count.
 * Left in "allocator" memory: thread stacks (the models map those).  The
 * library's own writable segments are counted as its own bytes (subtracted
 * from every sample), not as other.
 */
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "capture_int.h"

#define PAGEMAP_PRESENT (1ull << 63)
#define PAGEMAP_FILE    (1ull << 61)
#define PAGEMAP_CHUNK   512 /* entries read at once */

static int g_pagemap = -1;

extern void *__libc_stack_end;
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

void capture_memmap_open(void) {
  if (g_pagemap >= 0)
    capture_close_own(g_pagemap);
  int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, 900);
    if (hi >= 0) {
      close(fd);
      fd = hi;
    }
  }
  g_pagemap = fd;
}

int capture_memmap_fd(void) {
  return g_pagemap;
}

/* PAGEMAP_SCAN (Linux 6.7+; include/uapi/linux/fs.h, fs/proc/task_mmu.c
 * pagemap_scan_ioctl): the pages of a range by category.  It tells the
 * shared zero page apart (PAGE_IS_PFNZERO), which a pagemap entry shows only
 * as a PFN, and an unprivileged reader gets every PFN as 0.  A read of an
 * anonymous page never written maps that page (a static table only looked
 * up, jemalloc's rtree root in its .bss), and RSS does not count it
 * (smaps_pte_entry counts only vm_normal_page). */
#define SCAN_IOCTL   _IOWR('f', 16, scan_arg_t)
#define SCAN_FILE    (1u << 2)
#define SCAN_PRESENT (1u << 3)
#define SCAN_SWAPPED (1u << 4)
#define SCAN_PFNZERO (1u << 5)
#define SCAN_REGIONS 64

typedef struct scan_arg_s scan_arg_t;
struct scan_arg_s { /* struct pm_scan_arg */
  uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
  uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};

typedef struct scan_region_s scan_region_t;
struct scan_region_s { /* struct page_region */
  uint64_t start, end, categories;
};

static _Atomic int g_scan_works = -1; /* -1 not yet tried, 0 no */

/* Calls fn for each run of pages in [lo, hi) whose categories, XORed with
 * inverted, have every bit of mask and one of anyof; false when the kernel
 * has no PAGEMAP_SCAN. */
static bool scan_pages(uintptr_t lo, uintptr_t hi, uint64_t inverted,
                       uint64_t mask, uint64_t anyof,
                       void (*fn)(void *user, uint64_t start, uint64_t end),
                       void *user) {
  if (g_scan_works == 0 || g_pagemap < 0)
    return false;
  scan_region_t v[SCAN_REGIONS];
  for (uintptr_t at = lo & ~(uintptr_t)(g_page - 1); at < hi;) {
    scan_arg_t a = {.size = sizeof a,
                    .start = at,
                    .end = hi,
                    .vec = (uintptr_t)v,
                    .vec_len = SCAN_REGIONS,
                    .category_inverted = inverted,
                    .category_mask = mask,
                    .category_anyof_mask = anyof,
                    .return_mask = SCAN_PRESENT | SCAN_SWAPPED};
    long       got = ioctl(g_pagemap, SCAN_IOCTL, &a);
    if (g_scan_works < 0)
      g_scan_works = got >= 0;
    if (got < 0)
      return false;
    for (long k = 0; k < got; k++)
      fn(user, v[k].start, v[k].end);
    if (a.walk_end <= at)
      break;
    at = a.walk_end;
  }
  return true;
}

static void count_run(void *user, uint64_t start, uint64_t end) {
  *(uint64_t *)user += (end - start) / g_page;
}

typedef struct held_s held_t;
struct held_s {
  uintptr_t      first;
  unsigned char *vec;
};

static void mark_run(void *user, uint64_t start, uint64_t end) {
  held_t *h = user;
  memset(h->vec + (start - h->first) / g_page, 1, (end - start) / g_page);
}

bool capture_held_pages(uintptr_t first, size_t npages, unsigned char *vec) {
  held_t h = {.first = first, .vec = vec};
  memset(vec, 0, npages);
  if (scan_pages(first, first + npages * g_page, SCAN_PFNZERO, SCAN_PFNZERO,
                 SCAN_PRESENT | SCAN_SWAPPED, mark_run, &h))
    return true;
  return mincore((void *)first, npages * g_page, vec) == 0;
}

/* Anonymous pages this process maps in [lo, hi), from pagemap: with
 * PAGEMAP_SCAN where the kernel has it, else from the entries (bit 63
 * present, bit 61 file-page or shared), which count the zero page too. */
static uint64_t anon_pages(uintptr_t lo, uintptr_t hi) {
  if (g_pagemap < 0 || hi <= lo)
    return 0;
  uint64_t n = 0;
  if (scan_pages(lo, hi, SCAN_FILE | SCAN_PFNZERO,
                 SCAN_PRESENT | SCAN_FILE | SCAN_PFNZERO, 0, count_run, &n))
    return n * g_page;
  uint64_t e[PAGEMAP_CHUNK];
  for (uintptr_t p = lo / g_page; p < (hi + g_page - 1) / g_page;) {
    uintptr_t want = (hi + g_page - 1) / g_page - p;
    if (want > PAGEMAP_CHUNK)
      want = PAGEMAP_CHUNK;
    ssize_t got = pread(g_pagemap, e, want * sizeof e[0], (off_t)(p * 8));
    if (got <= 0)
      break;
    for (ssize_t k = 0; k < got / 8; k++)
      n += (e[k] & PAGEMAP_PRESENT) && !(e[k] & PAGEMAP_FILE);
    p += (uintptr_t)got / 8;
  }
  return n * g_page;
}

typedef struct scan_s scan_t;
struct scan_s {
  uint64_t other; /* anonymous pages of the program's writable segments */
  uint64_t own;   /* of this library's */
};

static int scan_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  scan_t *s = arg;
  bool    self = info->dlpi_addr == (uintptr_t)&__ehdr_start;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W))
      continue;
    uintptr_t lo = (info->dlpi_addr + ph->p_vaddr) & ~(uintptr_t)(g_page - 1);
    uintptr_t hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
    *(self ? &s->own : &s->other) += anon_pages(lo, hi);
  }
  return 0;
}

/* The main thread's stack: from __libc_stack_end down by the stack limit
 * (at most 64 MiB looked at). */
static uint64_t main_stack(void) {
  struct rlimit rl;
  uintptr_t     top = ((uintptr_t)__libc_stack_end + g_page) & ~(g_page - 1);
  uint64_t      lim = 8u << 20;
  if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
    lim = rl.rlim_cur;
  if (lim > (64u << 20))
    lim = 64u << 20;
  return anon_pages(top > lim ? top - lim : 0, top);
}

void capture_memmap_static(uint64_t *other_anon, uint64_t *own_static) {
  scan_t s = {0};
  capture_dl_walk_enter();
  dl_iterate_phdr(scan_object, &s);
  capture_dl_walk_exit();
  *other_anon = s.other + main_stack() + capture_progmap_resident(anon_pages);
  *own_static = s.own;
}
