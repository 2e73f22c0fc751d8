/* traces/capture/touch.c -- which pages of large allocations the program
 * wrote, as TOUCH records.
 *
 * A trace says nothing about which pages a program wrote, so every model
 * used to assume all of them: `sort` mallocs 1.55 GiB for a 1M-line file and
 * writes about 86 MiB of it.  For allocations of g_touch_threshold bytes or
 * more (default one page) the recorder keeps a table entry, and at free, at
 * realloc, at each mark and at each RSS sample it asks the kernel which of
 * the allocation's pages it holds (capture_held_pages) and records the ones not
 * reported before as TOUCH addr offset length (byte ranges clipped to the
 * allocation).  The trace then declares touch_threshold=N and the models
 * fault only touched pages of such allocations.
 *
 * The rule and its limits (docs/capture.md):
 *   - A page is reported when it is resident at a probe.  A page shared
 *     with a neighbouring chunk may be resident because of the neighbour;
 *     reporting it changes nothing the neighbour's own writes do not.
 *   - Memory the allocator reuses may still be resident from its last
 *     owner: it is reported at the first probe, as it is resident.
 *   - A page only read maps the shared zero page, which RSS does not
 *     count: it is not reported (memmap.c: PAGEMAP_SCAN, or pagemap's
 *     exclusive bit before Linux 6.7), except on an older kernel once the
 *     program has forked.  Pages freed with
 *     MADV_FREE stay resident until reclaimed, as they do in RSS.
 *   - Writes between the last probe and a free are seen at the free; writes
 *     after a sample are seen at the next one.
 *   - An allocation the table cannot hold (out of memory, or made from a
 *     signal handler while its thread holds the table) is reported written
 *     at once, whole: the old assumption, never an under-count.
 *
 * Concurrency: 64 stripes, each an open-addressing table (linear probing,
 * backward-shift deletion) under its own spinlock.  A record is emitted
 * under the stripe's lock, so a TOUCH is ordered after its allocation's
 * record (the entry is inserted after it) and before its release's.
 * Bitmaps of reported pages: one inline word up to 64 pages, else words
 * from a slab of power-of-two size classes.
 */
#include <sched.h>
#include <string.h>
#include <sys/mman.h>

#include "capture_int.h"

#define STRIPES         64
#define STRIPE_MIN      256 /* slots at first use */
#define INLINE_PAGES    64
#define SLAB_ARENA      ((size_t)1 << 20)
#define SLAB_CLASSES    10 /* 2 .. 1024 words; larger bitmaps are mmap'd */
#define SLAB_MAX_ARENAS 4096
#define PROBE_WINDOW    512 /* pages asked about at once */

typedef struct tent_s tent_t;
struct tent_s {
  uint64_t addr; /* 0 = empty slot */
  uint64_t size;
  uint64_t bits; /* npages <= 64: the bitmap; else a uint64_t * */
  uint32_t npages, reported;
};

typedef struct stripe_s stripe_t;
struct stripe_s {
  atomic_flag lock;
  tent_t     *tab;
  size_t      cap, n;
};

static stripe_t g_stripes[STRIPES];

/* ---- Locks ------------------------------------------------------------------
 */

static void spin_lock(atomic_flag *f) {
  for (unsigned i = 0;
       atomic_flag_test_and_set_explicit(f, memory_order_acquire); i++)
    if (i > 64)
      sched_yield();
}

static void spin_unlock(atomic_flag *f) {
  atomic_flag_clear_explicit(f, memory_order_release);
}

/* ---- Bitmap slab ------------------------------------------------------------
 */

static atomic_flag g_slab_lock = ATOMIC_FLAG_INIT;
static uint64_t   *g_free_words[SLAB_CLASSES]; /* class k: 2 << k words */
static void       *g_arenas[SLAB_MAX_ARENAS];
static size_t      g_narenas;
static uint8_t    *g_arena_pos, *g_arena_end;

static unsigned class_of(size_t words) {
  unsigned k = 0;
  while (((size_t)2 << k) < words)
    k++;
  return k;
}

/* Bytes of the bitmaps mapped on their own (above the slab's classes):
 * populated, so resident whole, and counted in the recorder's own bytes
 * (an allocation of 2.4 GB, as sort makes, has a 74 KiB bitmap). */
static _Atomic uint64_t g_big_bitmap_bytes;

static size_t big_bitmap_bytes(size_t words) {
  return (words * 8 + g_page - 1) & ~(g_page - 1);
}

static uint64_t *words_alloc(size_t words) {
  unsigned k = class_of(words);
  if (k >= SLAB_CLASSES) {
    uint64_t *w = capture_own_table(words * 8);
    if (w != NULL)
      atomic_fetch_add(&g_big_bitmap_bytes, big_bitmap_bytes(words));
    return w;
  }
  size_t    bytes = ((size_t)2 << k) * 8;
  uint64_t *w = NULL;
  spin_lock(&g_slab_lock);
  if (g_free_words[k] != NULL) {
    w = g_free_words[k];
    g_free_words[k] = (uint64_t *)w[0];
  } else {
    if (g_arena_pos == NULL || (size_t)(g_arena_end - g_arena_pos) < bytes) {
      uint8_t *a =
          g_narenas < SLAB_MAX_ARENAS ? capture_own_map(SLAB_ARENA) : NULL;
      if (a != NULL) {
        g_arenas[g_narenas++] = a;
        g_arena_pos = a;
        g_arena_end = a + SLAB_ARENA;
      }
    }
    if (g_arena_pos != NULL && (size_t)(g_arena_end - g_arena_pos) >= bytes) {
      w = (uint64_t *)g_arena_pos;
      g_arena_pos += bytes;
    }
  }
  spin_unlock(&g_slab_lock);
  if (w != NULL)
    memset(w, 0, bytes);
  return w;
}

static void words_free(uint64_t *w, size_t words) {
  unsigned k = class_of(words);
  if (k >= SLAB_CLASSES) {
    munmap(w, words * 8);
    atomic_fetch_sub(&g_big_bitmap_bytes, big_bitmap_bytes(words));
    return;
  }
  spin_lock(&g_slab_lock);
  w[0] = (uint64_t)(uintptr_t)g_free_words[k];
  g_free_words[k] = w;
  spin_unlock(&g_slab_lock);
}

static uint64_t *bitmap(tent_t *e) {
  return e->npages <= INLINE_PAGES ? &e->bits : (uint64_t *)(uintptr_t)e->bits;
}

static void entry_forget(tent_t *e) {
  if (e->npages > INLINE_PAGES)
    words_free((uint64_t *)(uintptr_t)e->bits, (e->npages + 63) / 64);
}

/* ---- Tables -----------------------------------------------------------------
 */

static uint64_t hash_addr(uint64_t a) {
  return (a >> 4) * 0x9E3779B97F4A7C15ull;
}

static stripe_t *stripe_of(uint64_t addr) {
  return &g_stripes[hash_addr(addr) >> 58];
}

static size_t slot_of(const stripe_t *s, uint64_t addr) {
  return (size_t)hash_addr(addr) & (s->cap - 1);
}

/* The slot holding addr, or the empty slot where it would go. */
static tent_t *find(stripe_t *s, uint64_t addr) {
  size_t i = slot_of(s, addr);
  while (s->tab[i].addr != 0 && s->tab[i].addr != addr)
    i = (i + 1) & (s->cap - 1);
  return &s->tab[i];
}

static bool grow(stripe_t *s) {
  size_t  cap = s->cap ? 2 * s->cap : STRIPE_MIN;
  tent_t *t = capture_own_table(cap * sizeof *t);
  if (t == NULL)
    return false;
  tent_t *old = s->tab;
  size_t  oldcap = s->cap;
  s->tab = t;
  s->cap = cap;
  for (size_t i = 0; i < oldcap; i++)
    if (old[i].addr != 0)
      *find(s, old[i].addr) = old[i];
  if (old != NULL)
    munmap(old, oldcap * sizeof *old);
  return true;
}

/* Backward-shift deletion keeps probe chains whole without tombstones. */
static void erase(stripe_t *s, tent_t *e) {
  size_t i = (size_t)(e - s->tab);
  size_t j = i;
  for (;;) {
    j = (j + 1) & (s->cap - 1);
    if (s->tab[j].addr == 0)
      break;
    size_t home = slot_of(s, s->tab[j].addr);
    /* j's entry may move to i if its home is not in (i, j]. */
    bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!between) {
      s->tab[i] = s->tab[j];
      i = j;
    }
  }
  s->tab[i].addr = 0;
  s->n--;
}

/* ---- Probing ----------------------------------------------------------------
 */

static void emit_touch(const tent_t *e, uint64_t first, uint32_t p0,
                       uint32_t p1) {
  uint64_t lo = first + (uint64_t)p0 * g_page;
  uint64_t hi = first + (uint64_t)p1 * g_page;
  if (lo < e->addr)
    lo = e->addr;
  if (hi > e->addr + e->size)
    hi = e->addr + e->size;
  cap_rec_t r = {
      .op = CAPTURE_OP_TOUCH, .addr = e->addr, .x = lo - e->addr, .y = hi - lo};
  capture_emit(&r);
}

/* Reports e's pages that the process holds now and did not before. */
static void probe(tent_t *e) {
  if (e->reported == e->npages)
    return;
  uint64_t      first = e->addr & ~((uint64_t)g_page - 1);
  uint64_t     *bits = bitmap(e);
  unsigned char vec[PROBE_WINDOW];
  uint32_t      run = UINT32_MAX; /* first page of the open run */
  for (uint32_t i = 0; i < e->npages; i += PROBE_WINDOW) {
    uint32_t n = e->npages - i < PROBE_WINDOW ? e->npages - i : PROBE_WINDOW;
    if (!capture_held_pages(first + (uint64_t)i * g_page, n, vec))
      break; /* no longer mapped: nothing more to learn */
    for (uint32_t k = 0; k < n; k++) {
      uint32_t p = i + k;
      bool     fresh = (vec[k] & 1) && !(bits[p / 64] >> (p % 64) & 1);
      if (fresh) {
        bits[p / 64] |= (uint64_t)1 << (p % 64);
        e->reported++;
        if (run == UINT32_MAX)
          run = p;
      } else if (run != UINT32_MAX) {
        emit_touch(e, first, run, p);
        run = UINT32_MAX;
      }
    }
  }
  if (run != UINT32_MAX)
    emit_touch(e, first, run, e->npages);
}

/* ---- Entry points -----------------------------------------------------------
 */

static void report_whole(uint64_t addr, uint64_t size) {
  cap_rec_t r = {.op = CAPTURE_OP_TOUCH, .addr = addr, .x = 0, .y = size};
  capture_emit(&r);
}

static void mark_prefix(tent_t *e, uint64_t prefix) {
  uint64_t  first = e->addr & ~((uint64_t)g_page - 1);
  uint64_t *bits = bitmap(e);
  for (uint32_t p = 0; p < e->npages; p++) {
    uint64_t hi = first + (uint64_t)(p + 1) * g_page;
    if (hi > e->addr + e->size)
      hi = e->addr + e->size;
    if (hi > e->addr + prefix)
      break;
    bits[p / 64] |= (uint64_t)1 << (p % 64);
    e->reported++;
  }
}

void capture_touch_track(uint64_t addr, uint64_t size, uint64_t prefix) {
  if (t_self.in_table) {
    report_whole(addr, size);
    return;
  }
  uint64_t first = addr & ~((uint64_t)g_page - 1);
  uint64_t npages = (addr + size - first + g_page - 1) / g_page;
  if (npages > UINT32_MAX) {
    report_whole(addr, size);
    return;
  }
  uint64_t *words = NULL;
  if (npages > INLINE_PAGES &&
      (words = words_alloc((npages + 63) / 64)) == NULL) {
    report_whole(addr, size);
    return;
  }
  stripe_t *s = stripe_of(addr);
  t_self.in_table = 1;
  spin_lock(&s->lock);
  bool ok = (s->n + 1) * 2 <= s->cap || grow(s);
  if (ok) {
    tent_t *e = find(s, addr);
    if (e->addr != 0)
      entry_forget(e); /* a stale entry: its free was not seen */
    else
      s->n++;
    e->addr = addr;
    e->size = size;
    e->npages = (uint32_t)npages;
    e->reported = 0;
    e->bits = words != NULL ? (uint64_t)(uintptr_t)words : 0;
    if (prefix > 0)
      mark_prefix(e, prefix < size ? prefix : size);
  }
  spin_unlock(&s->lock);
  t_self.in_table = 0;
  if (!ok) {
    if (words != NULL)
      words_free(words, (npages + 63) / 64);
    report_whole(addr, size);
  }
}

uint64_t capture_touch_release(uint64_t addr) {
  if (g_touch_threshold == 0 || t_self.in_table)
    return 0;
  stripe_t *s = stripe_of(addr);
  /* Most frees are of small blocks: an empty stripe needs no lock.  An
   * entry for addr was inserted before addr was handed to the program, so
   * the count that includes it is visible to whoever frees addr. */
  if (__atomic_load_n(&s->n, __ATOMIC_RELAXED) == 0)
    return 0;
  uint64_t size = 0;
  t_self.in_table = 1;
  spin_lock(&s->lock);
  if (s->cap != 0) {
    tent_t *e = find(s, addr);
    if (e->addr == addr) {
      probe(e);
      size = e->size;
      entry_forget(e);
      erase(s, e);
    }
  }
  spin_unlock(&s->lock);
  t_self.in_table = 0;
  return size;
}

void capture_touch_probe_all(void) {
  if (g_touch_threshold == 0 || t_self.in_table)
    return;
  t_self.in_table = 1;
  for (size_t k = 0; k < STRIPES; k++) {
    stripe_t *s = &g_stripes[k];
    spin_lock(&s->lock);
    for (size_t i = 0; i < s->cap; i++)
      if (s->tab[i].addr != 0)
        probe(&s->tab[i]);
    spin_unlock(&s->lock);
  }
  t_self.in_table = 0;
}

/* fork: the child's table must not be caught half-changed by a thread that
 * no longer exists there, so every lock is held across the fork. */
void capture_touch_atfork_prepare(void) {
  for (size_t k = 0; k < STRIPES; k++)
    spin_lock(&g_stripes[k].lock);
  spin_lock(&g_slab_lock);
}

void capture_touch_atfork_parent(void) {
  spin_unlock(&g_slab_lock);
  for (size_t k = 0; k < STRIPES; k++)
    spin_unlock(&g_stripes[k].lock);
}

void capture_touch_atfork_child(void) {
  capture_touch_atfork_parent();
}

uint64_t capture_touch_own_rss(void) {
  uint64_t total = 0;
  for (size_t k = 0; k < STRIPES; k++)
    if (g_stripes[k].tab != NULL)
      total +=
          capture_resident(g_stripes[k].tab, g_stripes[k].cap * sizeof(tent_t));
  size_t n = g_narenas; /* arenas are only ever added */
  for (size_t i = 0; i < n; i++)
    total += capture_resident(g_arenas[i], SLAB_ARENA);
  return total + atomic_load(&g_big_bitmap_bytes);
}
