/* traces/capture/progmap.c -- private memory the program maps itself.
 *
 * Programs with their own heaps map memory with mmap: GCC's cc1 keeps its
 * garbage-collected heap in 2 MiB anonymous mappings (26 MiB of them for
 * one -O2 compile, strace), and language runtimes and JITs do the same.
 * None of it is malloc's, so no model can predict it; counted as allocator
 * memory, it showed as model error (cc1: 54.6 MiB measured, 10.0 MiB
 * predicted, 22 MiB of the gap unexplained).  So the recorder interposes
 * mmap, mremap and munmap, keeps the private anonymous ranges the program
 * made, and every sample counts their resident pages as "other" (memmap.c).
 * Private writable file mappings too: a page written there is a private
 * copy, anonymous, which neither file-backed RSS nor any allocator holds.
 * OpenJDK 17 maps its class-data archive so (lib/server/classes.jsa,
 * PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_FIXED, strace) and writes 10.6 MiB
 * of it (smaps: Anonymous of the rw-p mapping).  memmap.c counts only
 * anonymous pages, so the file's own pages there stay file-backed RSS.
 *
 * Not the program's, so not kept:
 *   - glibc malloc's and nptl's mappings: libc calls its own mmap
 *     directly, never through these wrappers;
 *   - a preloaded allocator's (jemalloc, mimalloc, tcmalloc call mmap
 *     through the PLT): calls whose return address lies in the module that
 *     defines the real malloc;
 *   - this library's own buffers: return addresses in this library;
 *   - pymalloc's arenas: mmap'd inside a CPython domain call (t_self
 *     in_domain); the arenas mapped before the hook are dropped when the
 *     hook is installed (capture_progmap_clear): start-up, like every
 *     allocation before "hooked";
 *   - shared mappings (MAP_SHARED: shmem, counted as file-backed RSS) and
 *     read-only file mappings (a later mprotect to writable is not
 *     followed: a limit; pages of a file mapped read-only are file-backed
 *     RSS, and counting them here would read a large file's pagemap at
 *     every sample).
 * Mappings made before the recorder's start-up are not seen; the table
 * holds PROGMAP_MAX ranges (adjacent ones merge), and ranges beyond it are
 * counted as dropped, which the trace's provenance says.
 */
#include <link.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "capture_int.h"

#define PROGMAP_MAX 4096

typedef struct range_s range_t;
struct range_s {
  uintptr_t lo, hi;
};

static range_t    g_ranges[PROGMAP_MAX]; /* sorted, disjoint, not touching */
static size_t     g_nranges;
static atomic_int g_lock;
static uint64_t   g_dropped;
static uintptr_t  g_alloc_lo, g_alloc_hi; /* the real malloc's module */

extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));
extern char _end[] __attribute__((visibility("hidden")));

static void lock(void) {
  int expect = 0;
  while (!atomic_compare_exchange_weak_explicit(
      &g_lock, &expect, 1, memory_order_acquire, memory_order_relaxed))
    expect = 0;
}

static void unlock(void) {
  atomic_store_explicit(&g_lock, 0, memory_order_release);
}

/* The extent of the loaded object holding g_real.malloc. */
static int find_alloc_module(struct dl_phdr_info *info, size_t size,
                             void *arg) {
  (void)size;
  uintptr_t target = (uintptr_t)arg, lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    lo = a < lo ? a : lo;
    hi = a + ph->p_memsz > hi ? a + ph->p_memsz : hi;
  }
  if (target < lo || target >= hi)
    return 0;
  g_alloc_lo = lo;
  g_alloc_hi = hi;
  return 1;
}

void capture_progmap_init(void) {
  capture_dl_walk_enter();
  dl_iterate_phdr(find_alloc_module, (void *)(uintptr_t)g_real.malloc);
  capture_dl_walk_exit();
}

/* Called from an allocator or from this library, or inside a CPython
 * domain call: not the program's own mapping. */
static bool not_the_programs(uintptr_t ra) {
  if (!atomic_load_explicit(&g_recording, memory_order_relaxed) ||
      t_self.in_domain)
    return true;
  if (ra >= (uintptr_t)&__ehdr_start && ra < (uintptr_t)_end)
    return true;
  return ra >= g_alloc_lo && ra < g_alloc_hi;
}

/* Removes [lo, hi) from the table; the lock is held. */
static void cut(uintptr_t lo, uintptr_t hi) {
  for (size_t i = 0; i < g_nranges && g_ranges[i].lo < hi; i++) {
    range_t *r = &g_ranges[i];
    if (r->hi <= lo)
      continue;
    if (r->lo < lo && r->hi > hi) { /* a hole in the middle: two ranges */
      if (g_nranges == PROGMAP_MAX) {
        g_dropped++; /* the part above the hole is forgotten */
        r->hi = lo;
        return;
      }
      memmove(&g_ranges[i + 2], &g_ranges[i + 1],
              (g_nranges - i - 1) * sizeof g_ranges[0]);
      g_ranges[i + 1] = (range_t){hi, r->hi};
      r->hi = lo;
      g_nranges++;
      return;
    }
    if (r->lo < lo) {
      r->hi = lo;
    } else if (r->hi > hi) {
      r->lo = hi;
    } else { /* wholly inside: gone */
      memmove(r, r + 1, (g_nranges - i - 1) * sizeof g_ranges[0]);
      g_nranges--;
      i--; /* the next range moved here (wraps to 0 from 0: defined) */
    }
  }
}

/* Adds [lo, hi), merging with neighbours it touches; the lock is held and
 * the range overlaps none (cut first). */
static void add(uintptr_t lo, uintptr_t hi) {
  size_t i = 0;
  while (i < g_nranges && g_ranges[i].hi < lo)
    i++;
  if (i < g_nranges && g_ranges[i].hi == lo) {
    g_ranges[i].hi = hi;
    if (i + 1 < g_nranges && g_ranges[i + 1].lo == hi) {
      g_ranges[i].hi = g_ranges[i + 1].hi;
      memmove(&g_ranges[i + 1], &g_ranges[i + 2],
              (g_nranges - i - 2) * sizeof g_ranges[0]);
      g_nranges--;
    }
    return;
  }
  if (i < g_nranges && g_ranges[i].lo == hi) {
    g_ranges[i].lo = lo;
    return;
  }
  if (g_nranges == PROGMAP_MAX) {
    g_dropped++;
    return;
  }
  memmove(&g_ranges[i + 1], &g_ranges[i], (g_nranges - i) * sizeof g_ranges[0]);
  g_ranges[i] = (range_t){lo, hi};
  g_nranges++;
}

static uintptr_t page_up(uintptr_t v) {
  return (v + g_page - 1) & ~(uintptr_t)(g_page - 1);
}

static void note_unmapped(void *p, size_t len) {
  lock();
  cut((uintptr_t)p, page_up((uintptr_t)p + len));
  unlock();
}

static void note_mapped(void *p, size_t len, bool programs) {
  lock();
  cut((uintptr_t)p, page_up((uintptr_t)p + len)); /* MAP_FIXED replaced it */
  if (programs)
    add((uintptr_t)p, page_up((uintptr_t)p + len));
  unlock();
}

static bool overlaps(void *p, size_t len) {
  uintptr_t lo = (uintptr_t)p, hi = page_up(lo + len);
  bool      found = false;
  lock();
  for (size_t i = 0; i < g_nranges && !found; i++)
    found = g_ranges[i].lo < hi && g_ranges[i].hi > lo;
  unlock();
  return found;
}

/* ---- The wrappers --------------------------------------------------------
 * They forward by system call: the next definition would be libc's, which
 * makes the same call, and this needs no lookup before start-up. */

static void *sys_mmap(void *addr, size_t len, int prot, int flags, int fd,
                      off_t off) {
  return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd,
                  off_t off) {
  void *p = sys_mmap(addr, len, prot, flags, fd, off);
  if (p == MAP_FAILED ||
      !atomic_load_explicit(&g_recording, memory_order_relaxed))
    return p;
  bool programs = !(flags & MAP_SHARED) &&
                  ((flags & MAP_ANONYMOUS) || (prot & PROT_WRITE)) &&
                  !not_the_programs((uintptr_t)__builtin_return_address(0));
  if (programs || (flags & MAP_FIXED))
    note_mapped(p, len, programs);
  return p;
}

EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd,
                    off_t off) __attribute__((alias("mmap")));

EXPORT int munmap(void *addr, size_t len) {
  int rc = (int)syscall(SYS_munmap, addr, len);
  if (rc == 0 && atomic_load_explicit(&g_recording, memory_order_relaxed))
    note_unmapped(addr, len);
  return rc;
}

EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
  void *want = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    want = va_arg(ap, void *);
    va_end(ap);
  }
  bool  had = overlaps(old, old_len);
  void *p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, want);
  if (p == MAP_FAILED ||
      !atomic_load_explicit(&g_recording, memory_order_relaxed))
    return p;
  note_unmapped(old, old_len);
  note_mapped(p, new_len, had);
  return p;
}

/* ---- For the sampler, the Python hook and fork --------------------------- */

uint64_t capture_progmap_resident(uint64_t (*count)(uintptr_t, uintptr_t)) {
  static range_t copy[PROGMAP_MAX]; /* only the flusher samples */
  lock();
  size_t n = g_nranges;
  memcpy(copy, g_ranges, n * sizeof copy[0]);
  unlock();
  uint64_t bytes = 0;
  for (size_t i = 0; i < n; i++)
    bytes += count(copy[i].lo, copy[i].hi);
  return bytes;
}

uint64_t capture_progmap_dropped(void) {
  return g_dropped;
}

void capture_progmap_clear(void) {
  lock();
  g_nranges = 0;
  unlock();
}

void capture_progmap_atfork_prepare(void) {
  lock();
}

void capture_progmap_atfork_release(void) {
  unlock();
}
