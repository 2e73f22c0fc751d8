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
 * mincore, says whether this process maps the page, and whether it is the
 * shared zero page, which RSS does not count (PAGEMAP_SCAN, or the
 * exclusive bit on kernels without it; below).
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

#define PAGEMAP_PRESENT   (1ull << 63)
#define PAGEMAP_SWAPPED   (1ull << 62)
#define PAGEMAP_FILE      (1ull << 61)
#define PAGEMAP_EXCLUSIVE (1ull << 56)
#define PAGEMAP_CHUNK     512 /* entries read at once */

static int g_pagemap = -1;

/* Set in parent and child at a fork (capture_memmap_atfork): from then on
 * a page may be shared copy-on-write with the other process. */
static _Atomic bool g_forked;

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

void capture_memmap_no_scan(void) {
  g_scan_works = 0;
}

void capture_memmap_atfork(void) {
  g_forked = true;
}

/* Without PAGEMAP_SCAN (Linux before 6.7) a pagemap entry shows the zero
 * page only by its PFN, which an unprivileged reader gets as 0; but its
 * exclusive bit (56, PM_MMAP_EXCLUSIVE, Linux 4.2+; fs/proc/task_mmu.c
 * pte_to_pagemap_entry) is set only for a page with a struct page mapped
 * once, and the zero page has none (vm_normal_page returns NULL for it).
 * The huge zero page, mapped whole by a read of a THP-eligible range, has
 * a struct page that is not anonymous: pagemap_pmd_range calls it a file
 * page (bit 61), so a present anonymous page is never it.  A page a fork
 * shares copy-on-write is not exclusive either, yet RSS counts it, so
 * after a fork every present anonymous page counts, the zero page too, as
 * mincore would say. */
static bool entry_anon_held(uint64_t e) {
  return (e & PAGEMAP_PRESENT) && !(e & PAGEMAP_FILE) &&
         ((e & PAGEMAP_EXCLUSIVE) || g_forked);
}

/* Calls fn(user, i, entry) for page i of the n pages from page first (an
 * address); false if pagemap could not be read from the first page on. */
static bool pagemap_entries(uintptr_t first, size_t n,
                            void (*fn)(void *user, size_t i, uint64_t e),
                            void *user) {
  uint64_t e[PAGEMAP_CHUNK];
  for (size_t i = 0; i < n;) {
    size_t  want = n - i < PAGEMAP_CHUNK ? n - i : PAGEMAP_CHUNK;
    off_t   at = (off_t)((first / g_page + i) * sizeof e[0]);
    ssize_t got = pread(g_pagemap, e, want * sizeof e[0], at);
    if (got <= 0)
      return i > 0;
    for (size_t k = 0; k < (size_t)got / sizeof e[0]; k++)
      fn(user, i + k, e[k]);
    i += (size_t)got / sizeof e[0];
  }
  return true;
}

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

static void mark_entry(void *user, size_t i, uint64_t e) {
  ((unsigned char *)user)[i] = entry_anon_held(e) || (e & PAGEMAP_SWAPPED);
}

bool capture_held_pages(uintptr_t first, size_t npages, unsigned char *vec) {
  held_t h = {.first = first, .vec = vec};
  memset(vec, 0, npages);
  if (scan_pages(first, first + npages * g_page, SCAN_PFNZERO, SCAN_PFNZERO,
                 SCAN_PRESENT | SCAN_SWAPPED, mark_run, &h))
    return true;
  if (g_pagemap >= 0 && pagemap_entries(first, npages, mark_entry, vec))
    return true;
  return mincore((void *)first, npages * g_page, vec) == 0;
}

static void count_anon_entry(void *user, size_t i, uint64_t e) {
  (void)i;
  *(uint64_t *)user += entry_anon_held(e);
}

/* Anonymous pages this process maps in [lo, hi), the zero page left out:
 * with PAGEMAP_SCAN where the kernel has it, else from the entries
 * (entry_anon_held above). */
static uint64_t anon_pages(uintptr_t lo, uintptr_t hi) {
  if (g_pagemap < 0 || hi <= lo)
    return 0;
  uint64_t n = 0;
  if (scan_pages(lo, hi, SCAN_FILE | SCAN_PFNZERO,
                 SCAN_PRESENT | SCAN_FILE | SCAN_PFNZERO, 0, count_run, &n))
    return n * g_page;
  uintptr_t first = lo & ~(uintptr_t)(g_page - 1);
  (void)pagemap_entries(first, (hi - first + g_page - 1) / g_page,
                        count_anon_entry, &n);
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
