/* models/mimalloc_arena3.c -- mimalloc 3.x: pages allocated directly from
 * arenas of 64 KiB slices, the binned free-slice search, abandoned pages,
 * and the arena purge.
 *
 * Citations are to v3.0.1 src/arena.c unless marked: "bitmap" is 301
 * src/bitmap.c, "343" is v3.4.3.
 *
 * Purge in 3.x: a freed page's slices are marked for purging and the arena
 * gets an expiry (now + purge_delay * arena_purge_mult) only if it has none;
 * further frees do not extend it.  Once it has passed, the next
 * _mi_arenas_collect -- after a page is freed or abandoned, at heap collect
 * -- purges every marked slice that is still free, however recently it was
 * freed.  No timer.
 */
#include <stdlib.h>
#include <string.h>

#include "mimalloc_int.h"

#define SLICES_PER_CHUNK 512  /* MI_BCHUNK_BITS, 301 types.h:121-124 */
#define MAX_OBJ_SLICES   512  /* MI_ARENA_MAX_OBJ_SLICES (:129): 32 MiB */
#define PAGE_MAP_SUB     8192 /* MI_PAGE_MAP_SUB_COUNT, internal.h:497-498 */

/* Binned search bins (bitmap.h:218-237). */
enum { BB_NONE, BB_SMALL, BB_OTHER, BB_MEDIUM, BB_LARGE };

static uint8_t bbin_of(const mi_model_t *m, uint32_t n) {
  if (n == 1)
    return BB_SMALL;
  if (n == 8)
    return BB_MEDIUM;
  if (m->version == MV_343 && n == 64)
    return BB_LARGE; /* MI_ENABLE_LARGE_PAGES in 343 */
  return BB_OTHER;
}

static int64_t purge_delay3(const mi_model_t *m) {
  return m->purge_delay * m->arena_mult; /* mi_arena_purge_delay :1563-1566 */
}

/* ---- Arena reservation (:271-338, :1127-1240) -------------------------- */

/* mi_arena_info_slices_needed (:1127-1141): the arena struct and its 4 +
 * MI_BIN_COUNT bitmaps and the free bbitmap, each slices/8 bytes plus a
 * chunkmap header.  343 (:1489-1508): the struct (640 bytes), 4 +
 * MI_ARENA_BIN_COUNT (61) bitmaps of a 128-byte header plus 64 bytes per
 * 512 slices, the free bbitmap (a 448-byte header), then a page info of
 * 112 bytes for every slice (pages_meta, :1617-1619); sizes compiled from
 * the tag's headers.  Returns the bytes before the page infos. */
static uint64_t info_bitmaps_end(const mi_model_t *m, uint32_t slices) {
  if (!m->g.meta_apart)
    return 1024 + (4 + MI_BINS + 1) * ((uint64_t)slices / 8 + 128);
  uint64_t chunks = (uint64_t)slices / 512 * 64;
  return 640 + (4 + 61) * (128 + chunks) + (448 + chunks);
}

static uint32_t info_slices(const mi_model_t *m, uint32_t slices) {
  uint64_t size = info_bitmaps_end(m, slices);
  if (m->g.meta_apart)
    size += (uint64_t)slices * m->g.page_info;
  size = (size + 4095) / 4096 * 4096;
  return (uint32_t)((size + MI_SLICE_SIZE - 1) / MI_SLICE_SIZE);
}

/* The bitmaps of an arena of a->slices units (slices, or a meta page's
 * blocks), those from a->info_slices on free; false when out of memory. */
static bool arena3_tables(mi_model_t *m, marena3_t *a) {
  size_t ns = a->slices;
  a->free_map =
      calloc(ns * 4 + (ns + SLICES_PER_CHUNK - 1) / SLICES_PER_CHUNK, 1);
  a->page_at = calloc(ns, sizeof *a->page_at);
  a->cmap_words =
      (uint32_t)(((ns + SLICES_PER_CHUNK - 1) / SLICES_PER_CHUNK + 63) / 64);
  a->abandoned_map = calloc((size_t)MI_BINS * a->cmap_words, sizeof(uint64_t));
  if (a->free_map == NULL || a->page_at == NULL || a->abandoned_map == NULL) {
    mi_fail_oom(m);
    return false;
  }
  a->purge = a->free_map + ns;
  a->dirty = a->purge + ns;
  a->page_head = a->dirty + ns; /* abandoned bin + 1 at a page head */
  a->chunk_bin = a->page_head + ns;
  memset(a->free_map + a->info_slices, 1, ns - a->info_slices);
  return true;
}

static uint32_t arena3_reserve(mi_model_t *m, uint64_t req) {
  uint64_t size = MI_GIB; /* arena_reserve */
  uint32_t n = m->arenas3_n;
  if (n >= 1 && n <= 128) {
    uint32_t sh = n / 4 > 16 ? 16 : n / 4; /* :288-296 every 4 arenas */
    size <<= sh;
  }
  if (size > 16 * MI_GIB)
    size = 16 * MI_GIB;
  if (size < req)
    return 0;
  marena3_t *na = realloc(m->arenas3, (n + 1) * sizeof *na);
  if (na == NULL) {
    mi_fail_oom(m);
    return 0;
  }
  m->arenas3 = na;
  marena3_t *a = &na[n];
  memset(a, 0, sizeof *a);
  a->slices = (uint32_t)(size / MI_SLICE_SIZE);
  a->info_slices = info_slices(m, a->slices);
  a->meta_off = info_bitmaps_end(m, a->slices);
  /* 343 aligns an OS allocation of at least 8 x 2 MiB to 2 MiB (os.c:
   * 304-308; prim.c:341-355 maps it at an aligned hint) and madvises a
   * committed one MADV_HUGEPAGE when allow_thp (prim.c:456-464): on a
   * THP=madvise system the arena's 2 MiB blocks fault in whole, its info
   * block included (measured here: 22 MiB of AnonHugePages at the peak of
   * a 20,000 x 1,000 B burst; 3.0.1, which does neither, none). */
  bool huge = m->version == MV_343 && size >= 16 * MI_MIB;
  a->base = mi_os_alloc(m, size, huge ? 2 * MI_MIB : MI_SLICE_SIZE);
  if (huge && m->allow_thp && a->base != 0)
    mi_madvise_hugepage(m, a->base, size);
  if (!arena3_tables(m, a))
    return 0;
  memset(a->dirty, 1, a->info_slices);
  /* mi_manage_os_memory_ex2 (:1156-1240) writes the arena struct and
   * initialises every bitmap in the info slices (the page infos only as
   * pages take them) */
  mi_touch(m, a->base, a->meta_off);
  m->arenas3_n++;
  return n + 1;
}

/* ---- The binned free-slice search (bitmap :1543-1611) ----------------- */

static uint8_t *chunk_bins(marena3_t *a) {
  return a->chunk_bin;
}

/* mi_bchunk_try_find_and_clearNX (301 bitmap.c:767-819, 343 :763-815) for
 * 1 < n <= 64, n != 8: in each 64-slice field the lowest run of n, else a
 * run from the field's top free run (post slices) into the next field's
 * bottom one (pre slices).  3.0.1 tries that only when post + pre <= n
 * (:803) and the claim needs all n slices free (:406-431), so only an exact
 * fit crosses; 3.4.3 crosses when post + pre >= n. */
static bool chunk_find_nx(const mi_model_t *m, const marena3_t *a, uint32_t lo,
                          uint32_t n, uint32_t *out) {
  const uint8_t *fm = a->free_map;
  for (uint32_t f = lo; f < lo + SLICES_PER_CHUNK; f += 64) {
    for (uint32_t i = f; i + n <= f + 64;) {
      uint32_t k = i;
      while (k < f + 64 && fm[k])
        k++;
      if (k - i >= n) {
        *out = i;
        return true;
      }
      i = k + 1;
    }
    if (f + 64 == lo + SLICES_PER_CHUNK)
      break;
    uint32_t post = 0, pre = 0;
    while (post < 64 && fm[f + 63 - post])
      post++;
    while (pre < 64 && fm[f + 64 + pre])
      pre++;
    bool fits = m->version == MV_301 ? post + pre == n : post + pre >= n;
    if (post > 0 && fits) {
      *out = f + 64 - post;
      return true;
    }
  }
  return false;
}

/* Lowest run of n free slices in chunk c: n == 1 any slice, n == 8 an
 * aligned byte of the bitmap (mi_bchunk_try_find_and_clear_8), n <= 64 as
 * chunk_find_nx, else anywhere in the chunk (mi_bchunk_try_find_and_clearN_,
 * 301 :826-886, starts only at a field's top run or a field's start, which
 * for runs longer than a field is the lowest run). */
static bool chunk_find(const mi_model_t *m, const marena3_t *a, uint32_t c,
                       uint32_t n, uint32_t *out) {
  uint32_t lo = c * SLICES_PER_CHUNK, hi = lo + SLICES_PER_CHUNK;
  if (n > 1 && n <= 64 && n != 8)
    return chunk_find_nx(m, a, lo, n, out);
  uint32_t step = n == 8 ? 8 : 1;
  for (uint32_t i = lo; i + n <= hi; i += step) {
    uint32_t k = 0;
    while (k < n && a->free_map[i + k])
      k++;
    if (k == n) {
      *out = i;
      return true;
    }
    if (step == 1 && k > 0)
      i += k; /* skip past the blocker */
  }
  return false;
}

static bool chunk_all_used(const marena3_t *a, uint32_t c) {
  const uint8_t *f = a->free_map + (size_t)c * SLICES_PER_CHUNK;
  for (uint32_t i = 0; i < SLICES_PER_CHUNK; i++)
    if (f[i])
      return false;
  return true;
}

static bool arena3_find_free(mi_model_t *m, marena3_t *a, uint32_t n,
                             uint64_t tseq, uint32_t *out) {
  uint32_t nchunks = a->slices / SLICES_PER_CHUNK;
  uint8_t *bins = chunk_bins(a);
  uint8_t  bbin = bbin_of(m, n);
  uint32_t acc = a->search_hint; /* chunk_max_accessed */
  uint32_t cycle = acc % 64 + 1;
  if (cycle > nchunks)
    cycle = nchunks;
  /* 301 :1574 reduces tseq to 8 starts, 343 :1798 does not */
  uint32_t start = (uint32_t)((m->version == MV_343 ? tseq : tseq % 8) % cycle);
  /* The bins from SMALL up to the request's own; a free chunk (NONE) may
   * take it in that last pass in 301 (:1581), in a pass of its own after
   * it in 343 (:1791-1793). */
  bool    none_apart = m->version == MV_343;
  uint8_t last = none_apart ? (uint8_t)(bbin + 1) : bbin;
  for (uint8_t pass = BB_SMALL; pass <= last; pass++) {
    uint8_t bin = pass > bbin ? BB_NONE : pass;
    for (uint32_t k = 0; k < nchunks; k++) {
      /* [start, cycle), then [0, start), then [cycle, nchunks) */
      uint32_t c;
      if (k < cycle - start)
        c = start + k;
      else if (k < cycle)
        c = k - (cycle - start);
      else
        c = k;
      uint8_t cb = bins[c];
      if (!(cb == bin || (!none_apart && bin == bbin && cb == BB_NONE)))
        continue;
      uint32_t idx;
      if (chunk_find(m, a, c, n, &idx)) {
        if (idx == c * SLICES_PER_CHUNK && cb == BB_NONE)
          bins[c] = bbin;
        *out = idx;
        return true;
      }
      /* mi_bbitmap_chunkmap_try_clear (301 :1442-1456, 343 :1642-1656): a
       * chunk found all in use leaves the chunkmap and raises
       * chunk_max_accessed, which widens every later search's cycle */
      if (c > a->search_hint && chunk_all_used(a, c))
        a->search_hint = c;
    }
  }
  return false;
}

/* Marks slices free; a chunk that becomes wholly free returns to the NONE
 * bin, and frees raise chunk_max_accessed (bitmap :1426-1440). */
static void arena3_set_free(marena3_t *a, uint32_t idx, uint32_t n) {
  memset(a->free_map + idx, 1, n);
  uint8_t *bins = chunk_bins(a);
  for (uint32_t c = idx / SLICES_PER_CHUNK;
       c <= (idx + n - 1) / SLICES_PER_CHUNK; c++) {
    if (c > a->search_hint)
      a->search_hint = c;
    uint32_t lo = c * SLICES_PER_CHUNK, k = 0;
    if (lo < a->info_slices)
      continue;
    while (k < SLICES_PER_CHUNK && a->free_map[lo + k])
      k++;
    if (k == SLICES_PER_CHUNK)
      bins[c] = BB_NONE;
  }
}

/* ---- Page map (301 page-map.c, two-level on x86-64) -------------------- */

/* _mi_page_map_register / unregister write one pointer per slice in a
 * sub-map of 8192 entries (64 KiB, one per 512 MiB), mmapped on demand. */
static void page_map_write(mi_model_t *m, sim_addr_t addr, uint32_t slices) {
  if (m->page_map == 0) {
    /* the sub-maps are modelled as one reserved region indexed by the
     * address's 512 MiB unit within the first 8 TiB of arenas */
    m->page_map = mi_os_alloc(m, 128 * MI_MIB, MI_SLICE_SIZE);
    if (m->page_map == 0)
      return;
  }
  uint64_t slice = addr >> MI_SLICE_SHIFT;
  uint64_t off = (slice % (uint64_t)(128 * MI_MIB / 8)) * 8;
  uint64_t len = (uint64_t)slices * 8;
  if (off + len > 128 * MI_MIB)
    len = 128 * MI_MIB - off;
  mi_touch(m, m->page_map + off, len);
}

/* ---- Page allocation (:586-791) ----------------------------------------- */

static bool is_pow2(uint64_t x) {
  return x != 0 && (x & (x - 1)) == 0;
}

/* Where a page's first block lies from the page's start.  301
 * (:660-680): power-of-2 blocks <= 1 KiB aligned to their size, others
 * right after the page info.  343: with the info apart (an arena page,
 * :863-888), at 0, or one block in for power-of-2 blocks of 8-512 bytes;
 * with the info in front (mi_page_block_start, :808-834), power-of-2
 * blocks <= 4 KiB and multiples of 4 KiB aligned to 4 KiB at most. */
static uint64_t block_start(const mi_model_t *m, uint64_t block_size,
                            bool in_arena) {
  uint64_t info = m->g.page_info;
  if (!m->g.meta_apart)
    return is_pow2(block_size) && block_size <= 1024
               ? (info + block_size - 1) / block_size * block_size
               : info;
  if (in_arena)
    return is_pow2(block_size) && block_size >= 8 && block_size <= 512
               ? block_size
               : 0;
  if (is_pow2(block_size) && block_size <= 4096)
    return (info + block_size - 1) / block_size * block_size;
  if (block_size % 4096 == 0)
    return (info + 4095) / 4096 * 4096;
  return info;
}

static uint32_t page_record(mi_model_t *m, uint32_t arena, uint32_t idx,
                            uint32_t slices, sim_addr_t start,
                            uint64_t block_size, bool zero, bool singleton) {
  uint32_t page = mi_page_new(m);
  if (page == 0)
    return 0;
  mpage_t *p = P(m, page);
  p->seg = arena;
  p->slice_index = idx;
  p->slice_count = slices;
  p->slice_start = start;
  p->block_size = block_size;
  p->zero_init = zero;
  p->is_huge = singleton;
  uint64_t bstart = block_start(m, block_size, arena != 0);
  p->start = start + bstart;
  uint64_t area = (uint64_t)slices * MI_SLICE_SIZE - bstart;
  p->reserved = singleton ? 1 : (uint32_t)(area / block_size);
  if (arena != 0 && m->g.meta_apart) /* zeroed in pages_meta, 343 :886 */
    mi_touch(m,
             m->arenas3[arena - 1].base + m->arenas3[arena - 1].meta_off +
                 (uint64_t)idx * m->g.page_info,
             m->g.page_info);
  else /* written in the page's first slice (:681-705) */
    mi_touch(m, start, m->g.page_info);
  page_map_write(m, start, slices);
  return page;
}

/* mi_forall_arenas (301 arena.c:351-379; 343 :427-455 with
 * mi_arena_start_idx :402-406 for a program of one heap): the k-th arena
 * searched, the ones below the last from tseq % (count - 1) round, then
 * the last. */
static uint32_t arena_nth(uint32_t na, uint64_t tseq, uint32_t k) {
  uint32_t cycle = na == 0 ? 0 : na - 1;
  if (k >= cycle)
    return k;
  uint32_t i = k + (cycle <= 1 ? 0 : (uint32_t)(tseq % cycle));
  return i >= cycle ? i - cycle : i;
}

/* ---- Abandoned pages: pages_abandoned[bin] per arena ------------------- */

static uint64_t *abandoned_cmap(marena3_t *a, uint8_t bin) {
  return a->abandoned_map + (size_t)bin * a->cmap_words;
}

/* The lowest abandoned page head of bin in chunk c, or UINT32_MAX. */
static uint32_t chunk_abandoned(const marena3_t *a, uint32_t c, uint8_t bin) {
  uint32_t lo = c * SLICES_PER_CHUNK;
  for (uint32_t i = lo; i < lo + SLICES_PER_CHUNK && i < a->slices; i++)
    if (a->page_head[i] == (uint8_t)(bin + 1))
      return i;
  return UINT32_MAX;
}

/* mi_bitmap_set (301 bitmap.c:1083-1098): the bit and its chunk's. */
static void abandoned_set(marena3_t *a, uint32_t idx, uint8_t bin) {
  uint32_t c = idx / SLICES_PER_CHUNK;
  a->page_head[idx] = (uint8_t)(bin + 1);
  abandoned_cmap(a, bin)[c / 64] |= UINT64_C(1) << (c % 64);
}

/* mi_bitmap_clear_once_set (301 bitmap.c:1302-1308, 343 :1394-1400), as
 * _mi_arenas_page_unabandon clears a page's bit (301 arena.c:942, 343
 * :1268): the chunkmap keeps the chunk's bit, which only a search that
 * finds the chunk empty clears. */
static void abandoned_clear(marena3_t *a, uint32_t idx) {
  a->page_head[idx] = 0;
}

/* mi_arenas_page_alloc_fresh (:586-716) from the arenas (or the OS above
 * 32 MiB). */
/* mi_arenas_try_alloc (:375-451): n free slices from the arenas in
 * mi_forall_arenas order, reserving a new arena once when none has them.
 * *ai, *idx: where; *dirty: whether any was used before (not initially
 * zero, slices_dirty :194). */
static bool arenas3_alloc_slices(mi_model_t *m, uint64_t tseq, uint32_t n,
                                 uint32_t *ai, uint32_t *idx, bool *dirty) {
  for (int attempt = 0; attempt < 2; attempt++) {
    uint32_t na = m->arenas3_n;
    for (uint32_t k = 0; k < na; k++) {
      *ai = arena_nth(na, tseq, k);
      marena3_t *a = &m->arenas3[*ai];
      if (!arena3_find_free(m, a, n, tseq, idx))
        continue;
      *dirty = false;
      for (uint32_t s = *idx; s < *idx + n; s++) {
        a->free_map[s] = 0;
        a->purge[s] = 0;
        *dirty |= a->dirty[s];
        a->dirty[s] = 1;
      }
      return true;
    }
    if (attempt == 0 && arena3_reserve(m, (uint64_t)n * MI_SLICE_SIZE) == 0)
      break;
  }
  return false;
}

static uint32_t page_alloc_fresh(mi_model_t *m, uint32_t tld, uint32_t slices,
                                 uint64_t block_size, bool singleton) {
  uint32_t ai, idx;
  bool     dirty;
  if (slices <= MAX_OBJ_SLICES &&
      arenas3_alloc_slices(m, m->tlds[tld].thread_seq, slices, &ai, &idx,
                           &dirty)) {
    sim_addr_t start = m->arenas3[ai].base + (uint64_t)idx * MI_SLICE_SIZE;
    uint32_t   page = page_record(m, ai + 1, idx, slices, start, block_size,
                                  !dirty, singleton);
    if (page != 0)
      m->arenas3[ai].page_at[idx] = page;
    return page;
  }
  /* mi_arena_os_alloc_aligned (:454-472) */
  sim_addr_t start =
      mi_os_alloc(m, (uint64_t)slices * MI_SLICE_SIZE, MI_SLICE_SIZE);
  if (start == 0)
    return 0;
  return page_record(m, 0, 0, slices, start, block_size, true, singleton);
}

/* mi_bitmap_find (301 bitmap.c:1204-1224, 343 :1275-1295) over arena a's
 * pages_abandoned[bin], claiming with mi_arena_try_claim_abandoned (301
 * arena.c:512-537): per chunkmap word, the chunks whose bit is set, from
 * (tseq % 8) % (highest + 1) round; in a chunk its lowest page.  A chunk
 * with none leaves the chunkmap (mi_bitmap_chunkmap_try_clear); a claimed
 * page's chunk stays in it, however empty, until a search finds it so.  A
 * page of another heap tag stays abandoned and the search moves on to the
 * next chunk (the visitor returns false). */
static uint32_t arena_find_abandoned(mi_model_t *m, marena3_t *a, uint8_t bin,
                                     uint8_t tag, uint64_t tseq) {
  uint64_t *cmap = abandoned_cmap(a, bin);
  for (uint32_t w = 0; w < a->cmap_words; w++) {
    uint64_t entry = cmap[w];
    if (entry == 0)
      continue;
    /* 3.0.1's mi_bfield_find_highest_bit is mi_bsf, the lowest bit (301
     * bitmap.c:51-53; 343 :52-54 mi_bsr): its cycle ends at the lowest
     * chunk, so its search is in chunk order whatever the thread */
    uint32_t cycle = m->version == MV_301
                         ? (uint32_t)__builtin_ctzll(entry) + 1
                         : 64 - (uint32_t)__builtin_clzll(entry);
    uint32_t start = (uint32_t)(tseq % 8) % cycle;
    uint64_t upto = cycle == 64 ? ~UINT64_C(0) : (UINT64_C(1) << cycle) - 1;
    uint64_t ahead = entry & upto & ~((UINT64_C(1) << start) - 1);
    uint64_t order[2] = {ahead, entry & ~ahead};
    for (int part = 0; part < 2; part++)
      for (uint64_t b = order[part]; b != 0; b &= b - 1) {
        uint32_t bit = (uint32_t)__builtin_ctzll(b);
        uint32_t c = w * 64 + bit;
        uint32_t i = chunk_abandoned(a, c, bin);
        if (i == UINT32_MAX) {
          cmap[w] &= ~(UINT64_C(1) << bit);
          continue;
        }
        uint32_t page = a->page_at[i];
        if (P(m, page)->tag != tag)
          continue;
        a->page_head[i] = 0;
        return page;
      }
  }
  return 0;
}

/* mi_arenas_page_try_find_abandoned (:539-584): the arenas in
 * mi_forall_arenas order. */
static uint32_t find_abandoned(mi_model_t *m, uint32_t tld, uint8_t bin,
                               uint8_t tag) {
  if (m->abandoned_bin[bin] == 0)
    return 0;
  uint64_t tseq = m->tlds[tld].thread_seq;
  uint32_t na = m->arenas3_n;
  for (uint32_t k = 0; k < na; k++) {
    marena3_t *a = &m->arenas3[arena_nth(na, tseq, k)];
    uint32_t   page = arena_find_abandoned(m, a, bin, tag, tseq);
    if (page != 0) {
      m->abandoned_bin[bin]--;
      P(m, page)->abandoned_mapped = false;
      return page;
    }
  }
  return 0;
}

/* _mi_arenas_page_alloc (:764-791) plus the regular/singleton helpers. */
uint32_t mi_arenas3_page_alloc(mi_model_t *m, uint32_t heap,
                               uint64_t block_size) {
  uint32_t tld = H(m, heap)->tld;
  uint32_t slices;
  bool     regular = true;
  if (block_size <= m->g.small_max) {
    slices = 1;
  } else if (block_size <= m->g.medium_max) {
    slices = 8;
  } else if (m->version == MV_343 && block_size <= m->g.large_max) {
    slices = 64; /* 343: 4 MiB large pages */
  } else {
    regular = false;
    uint64_t sz = m->g.page_info + block_size;
    slices = (uint32_t)((sz + MI_SLICE_SIZE - 1) / MI_SLICE_SIZE);
  }
  if (regular) {
    uint32_t page =
        find_abandoned(m, tld, mi_model_bin(m, block_size), H(m, heap)->tag);
    if (page != 0) {
      /* _mi_heap_page_reclaim (301 page.c:233-245): at the queue's end */
      P(m, page)->heap = heap;
      mi_page_free_collect(m, page, false);
      mi_pq_push_end(m, heap, P(m, page)->bin, page);
      if (P(m, page)->free_n == 0)
        mi_page_extend_free(m, page);
      return page;
    }
  }
  uint32_t page = page_alloc_fresh(m, tld, slices, block_size, !regular);
  if (page == 0)
    return 0;
  mi_page_init(m, heap, page, block_size);
  P(m, page)->heap = 0; /* page_fresh pushes it on the queue */
  return page;
}

/* ---- Free, abandon (:793-966) ------------------------------------------- */

/* mi_arena_schedule_purge (:1602-1633). */
static void schedule_purge(mi_model_t *m, marena3_t *a, uint32_t idx,
                           uint32_t n) {
  int64_t delay = purge_delay3(m);
  if (delay < 0)
    return;
  if (delay == 0) {
    mi_os_purge(m, a->base + (uint64_t)idx * MI_SLICE_SIZE,
                (uint64_t)n * MI_SLICE_SIZE);
    m->purges++;
    m->purged_bytes += (uint64_t)n * MI_SLICE_SIZE;
    return;
  }
  if (a->purge_expire == 0) {
    a->purge_expire = m->now + delay;
    if (m->arenas_purge_expire == 0)
      m->arenas_purge_expire = a->purge_expire;
  }
  memset(a->purge + idx, 1, n);
}

/* _mi_arenas_page_free (:793-855) and _mi_arenas_free (:971-1026). */
void mi_arenas3_page_free(mi_model_t *m, uint32_t page) {
  mpage_t   *p = P(m, page);
  uint32_t   ai = p->seg, idx = p->slice_index, n = p->slice_count;
  sim_addr_t start = p->slice_start;
  page_map_write(m, start, n); /* unregister */
  if (p->abandoned_mapped && ai != 0) {
    abandoned_clear(&m->arenas3[ai - 1], idx);
    m->abandoned_bin[p->bin]--;
  }
  mi_page_release(m, page);
  if (ai == 0) {
    mi_os_free(m, start, (uint64_t)n * MI_SLICE_SIZE);
    return;
  }
  marena3_t *a = &m->arenas3[ai - 1];
  a->page_at[idx] = 0;
  schedule_purge(m, a, idx, n);
  arena3_set_free(a, idx, n);
}

static bool page_is_full(const mpage_t *p) {
  return p->used >= p->reserved;
}

/* _mi_arenas_page_abandon (:858-900): a page with room goes on the arena's
 * abandoned bitmap of its bin, where allocations of that bin find it; a
 * full page or a singleton waits for a free into it. */
void mi_arenas3_page_abandon(mi_model_t *m, uint32_t page) {
  mpage_t *p = P(m, page);
  if (p->seg != 0 && !page_is_full(p) && !p->is_huge) {
    abandoned_set(&m->arenas3[p->seg - 1], p->slice_index, p->bin);
    p->abandoned_mapped = true;
    m->abandoned_bin[p->bin]++;
  }
}

/* _mi_arenas_page_unabandon (:924-966). */
void mi_arenas3_page_unabandon(mi_model_t *m, uint32_t page) {
  mpage_t *p = P(m, page);
  if (p->abandoned_mapped) {
    abandoned_clear(&m->arenas3[p->seg - 1], p->slice_index);
    m->abandoned_bin[p->bin]--;
    p->abandoned_mapped = false;
  }
}

/* _mi_arenas_page_try_reabandon_to_mapped (:902-921). */
bool mi_arenas3_try_reabandon(mi_model_t *m, uint32_t page) {
  mpage_t *p = P(m, page);
  if (page_is_full(p) || p->abandoned_mapped || p->seg == 0)
    return false;
  mi_arenas3_page_abandon(m, page);
  return true;
}

/* ---- Thread metadata (301 arena-meta.c, 343 the same file) ------------
 * 3.x takes a thread's tld and heap (3.4.3: tld and theap) from meta pages:
 * an arena slice each, taken with thread sequence 0 and never returned,
 * cut into 128-byte blocks that a binned bitmap after the page's header
 * hands out (301 :65-142, 343 :70-147).  Main's are static.  So the first
 * thread's start takes a slice, and every page allocated after it lies a
 * slice further on than without it (measured with 3.0.1: the first
 * singleton page after a thread start at slice 9, not 8). */

#define META_BLOCK 128 /* MI_META_BLOCK_SIZE: 301 :28, 343 :29 */

/* Blocks per page (MI_META_BLOCKS_PER_PAGE, 301 :30, 343 :31) and the
 * header's blocks (info_blocks, 301 :88-89, 343 :93-94): ceil((64 + bbitmap
 * size) / 128), 832 bytes for 3.0.1's 1024 blocks (two 512-bit chunks), 576
 * for 3.4.3's 512 (sizes measured by compiling each tag's headers). */
static uint32_t meta_blocks(const mi_model_t *m) {
  return m->version == MV_343 ? 512 : 1024;
}
static uint32_t meta_info_blocks(const mi_model_t *m) {
  return m->version == MV_343 ? 5 : 7;
}

/* sizeof (mi_tld_t) and of the thread's heap, x86-64 release builds:
 * 3.0.1 tld 3120 (with its stats) and mi_heap_t 3080; 3.4.3 tld 112 and
 * mi_theap_t 8144. */
static uint64_t meta_tld_bytes(const mi_model_t *m) {
  return m->version == MV_343 ? 112 : 3120;
}
static uint64_t meta_heap_bytes(const mi_model_t *m) {
  return m->version == MV_343 ? 8144 : 3080;
}

/* mi_meta_page_zalloc (301 :65-101): a slice from the arenas; one used
 * before is zeroed whole (:74-76), a fresh one gets its header's bitmap
 * written (:85-92). */
static marena3_t *meta_page_new(mi_model_t *m) {
  uint32_t ai, idx;
  bool     dirty;
  if (!arenas3_alloc_slices(m, 0, 1, &ai, &idx, &dirty))
    return NULL;
  marena3_t *v = realloc(m->metas, (m->metas_n + 1) * sizeof *v);
  if (v == NULL) {
    mi_fail_oom(m);
    return NULL;
  }
  m->metas = v;
  marena3_t *mp = &v[m->metas_n];
  memset(mp, 0, sizeof *mp);
  mp->base = m->arenas3[ai].base + (uint64_t)idx * MI_SLICE_SIZE;
  mp->slices = meta_blocks(m);
  mp->info_slices = meta_info_blocks(m);
  if (!arena3_tables(m, mp))
    return NULL;
  m->metas_n++;
  mi_touch(m, mp->base,
           dirty ? MI_SLICE_SIZE : (uint64_t)mp->info_slices * META_BLOCK);
  return mp;
}

/* _mi_meta_zalloc (301 :105-142): the first fit in the meta pages, newest
 * first (each new page goes to the list's front), else in a new page; the
 * caller writes the blocks. */
static sim_addr_t meta_zalloc(mi_model_t *m, uint64_t size) {
  uint32_t   n = (uint32_t)((size + META_BLOCK - 1) / META_BLOCK);
  uint32_t   idx, i = m->metas_n;
  marena3_t *mp = NULL;
  while (i-- > 0 && !arena3_find_free(m, &m->metas[i], n, 0, &idx))
    ;
  if (i != UINT32_MAX)
    mp = &m->metas[i];
  else if ((mp = meta_page_new(m)) == NULL ||
           !arena3_find_free(m, mp, n, 0, &idx))
    return 0;
  memset(mp->free_map + idx, 0, n);
  return mp->base + (uint64_t)idx * META_BLOCK;
}

/* _mi_meta_free (301 :145-162): the blocks zeroed, then free. */
static void meta_free(mi_model_t *m, sim_addr_t addr, uint64_t size) {
  uint32_t n = (uint32_t)((size + META_BLOCK - 1) / META_BLOCK);
  for (uint32_t i = 0; i < m->metas_n; i++) {
    marena3_t *mp = &m->metas[i];
    if (addr < mp->base || addr >= mp->base + MI_SLICE_SIZE)
      continue;
    mi_touch(m, addr, (uint64_t)n * META_BLOCK);
    arena3_set_free(mp, (uint32_t)((addr - mp->base) / META_BLOCK), n);
    return;
  }
}

/* mi_tld_alloc then the heap (301 init.c:290-312, heap.c:209-226; 343
 * init.c:356-380, theap.c:250-273): both written (the heap by memcpy of
 * the empty one, the tld field by field and through its stats). */
void mi_meta3_thread_alloc(mi_model_t *m, mtld_t *t) {
  t->meta_tld = meta_zalloc(m, meta_tld_bytes(m));
  if (t->meta_tld != 0)
    mi_touch(m, t->meta_tld, meta_tld_bytes(m));
  t->meta_heap = meta_zalloc(m, meta_heap_bytes(m));
  if (t->meta_heap != 0)
    mi_touch(m, t->meta_heap, meta_heap_bytes(m));
}

/* The thread's exit: its heap, then its tld (mi_tld_free). */
void mi_meta3_thread_free(mi_model_t *m, mtld_t *t) {
  if (t->meta_heap != 0)
    meta_free(m, t->meta_heap, meta_heap_bytes(m));
  if (t->meta_tld != 0)
    meta_free(m, t->meta_tld, meta_tld_bytes(m));
  t->meta_heap = t->meta_tld = 0;
}

/* ---- Purge (:1560-1745) -------------------------------------------------- */

/* mi_arena_try_purge (:1672-1693) over mi_arena_try_purge_visitor
 * (:1650-1670): every marked run, whole if still free, else slice by
 * slice.  1: purged; -1: nothing due; 0 (343 only, :2195-2222): an
 * expiry is set but not reached, which keeps the global one set (3.0.1
 * reports it as nothing and clears it: the purge then waits for a
 * collect). */
static int arena3_try_purge(mi_model_t *m, marena3_t *a, bool force) {
  if (!force && a->purge_expire == 0)
    return -1;
  if (!force && a->purge_expire > m->now)
    return m->version == MV_343 ? 0 : -1;
  a->purge_expire = 0;
  bool any = false;
  for (uint32_t i = 0; i < a->slices;) {
    if (!a->purge[i]) {
      i++;
      continue;
    }
    uint32_t j = i;
    while (j < a->slices && a->purge[j])
      j++;
    for (uint32_t k = i; k < j;) {
      if (!a->free_map[k]) {
        k++;
        continue;
      }
      uint32_t e = k;
      while (e < j && a->free_map[e])
        e++;
      mi_os_purge(m, a->base + (uint64_t)k * MI_SLICE_SIZE,
                  (uint64_t)(e - k) * MI_SLICE_SIZE);
      m->purges++;
      m->purged_bytes += (uint64_t)(e - k) * MI_SLICE_SIZE;
      any = true;
      k = e;
    }
    memset(a->purge + i, 0, j - i);
    i = j;
  }
  return any ? 1 : -1;
}

/* mi_arenas_try_purge (:1695-1745; 343 :2224-2270). */
void mi_arenas3_collect(mi_model_t *m, bool force, bool visit_all,
                        uint32_t tld) {
  int64_t delay = purge_delay3(m);
  if (delay <= 0 || m->arenas3_n == 0)
    return;
  int64_t expire = m->arenas_purge_expire;
  if (!visit_all && !force && (expire == 0 || expire > m->now))
    return;
  if (expire > m->now)
    m->arenas_purge_expire = m->now + delay / 10;
  uint32_t n = m->arenas3_n;
  uint32_t start = (uint32_t)(m->tlds[tld].thread_seq % n);
  uint32_t max_count = visit_all ? n : n / 4 + 1;
  bool     all_visited = true, any = false;
  for (uint32_t k = 0; k < n; k++) {
    marena3_t *a = &m->arenas3[(k + start) % n];
    int        purged = arena3_try_purge(m, a, force);
    if (purged >= 0)
      any = true;
    if (purged >= 1) {
      if (max_count <= 1) {
        all_visited = false;
        break;
      }
      max_count--;
    }
  }
  if (all_visited && !any)
    m->arenas_purge_expire = 0;
}

uint64_t mi_arenas3_awaiting_purge(const mi_model_t *m) {
  uint64_t n = 0;
  for (uint32_t a = 0; a < m->arenas3_n; a++)
    for (uint32_t i = 0; i < m->arenas3[a].slices; i++)
      if (m->arenas3[a].purge[i])
        n += MI_SLICE_SIZE;
  return n;
}

void mi_arenas3_destroy(mi_model_t *m) {
  for (uint32_t a = 0; a < m->arenas3_n; a++) {
    free(m->arenas3[a].free_map);
    free(m->arenas3[a].page_at);
    free(m->arenas3[a].abandoned_map);
  }
  for (uint32_t i = 0; i < m->metas_n; i++) {
    free(m->metas[i].free_map);
    free(m->metas[i].page_at);
    free(m->metas[i].abandoned_map);
  }
  free(m->metas);
  free(m->arenas3);
}

/* ---- Heap map ------------------------------------------------------------ */

/* An arena: level 0, its info slices, then its pages and free runs in
 * address order, the runs split by the purge bitmap. */
size_t mimalloc_arenas3(const mi_model_t *m, uint64_t *base, uint64_t *bytes,
                        size_t max) {
  for (uint32_t i = 0; i < m->arenas3_n && i < max; i++) {
    base[i] = m->arenas3[i].base;
    bytes[i] = (uint64_t)m->arenas3[i].slices * MI_SLICE_SIZE;
  }
  return m->arenas3_n;
}

static as_status_t walk_arena(const mi_model_t *m, uint32_t ai,
                              const mi_walker_t *w) {
  const marena3_t *a = &m->arenas3[ai];
  model_region_t   r = {.addr = a->base,
                        .bytes = (uint64_t)a->slices * MI_SLICE_SIZE,
                        .live_bytes = w->unit_live[2 * (ai + 1)],
                        .live_objects = w->unit_live[2 * (ai + 1) + 1],
                        .kind = "arena",
                        .state = MODEL_REGION_LIVE};
  as_status_t      rc = w->fn(w->user, &r, w->err);
  if (rc == AS_OK)
    rc = mi_walk_emit(w, a->base, (uint64_t)a->info_slices * MI_SLICE_SIZE,
                      "arena info", MI_MECH_META, 1, MODEL_REGION_METADATA);
  for (uint32_t i = a->info_slices; i < a->slices && rc == AS_OK;) {
    if (a->page_at[i] != 0) {
      rc = mi_walk_page(m, a->page_at[i], w);
      i += m->pages[a->page_at[i]].slice_count;
      continue;
    }
    if (!a->free_map[i]) { /* in use without a page: a meta page */
      rc = mi_walk_emit(w, a->base + (uint64_t)i * MI_SLICE_SIZE, MI_SLICE_SIZE,
                        "meta page", MI_MECH_META, 1, MODEL_REGION_METADATA);
      i++;
      continue;
    }
    uint32_t j = i + 1;
    while (j < a->slices && a->page_at[j] == 0 && a->free_map[j])
      j++;
    rc = mi_walk_free_slices(w, a->base, i, j, a->purge, NULL);
    i = j;
  }
  return rc;
}

/* Arenas, pages mapped from the OS on their own (above 32 MiB), and the
 * page map. */
as_status_t mi_arenas3_walk(const mi_model_t *m, const mi_walker_t *w) {
  as_status_t rc = AS_OK;
  for (uint32_t ai = 0; ai < m->arenas3_n && rc == AS_OK; ai++)
    rc = walk_arena(m, ai, w);
  for (uint32_t i = 1; i < m->pages_n && rc == AS_OK; i++) {
    const mpage_t *p = &m->pages[i];
    if (!p->live || p->seg != 0)
      continue;
    uint64_t       bytes = (uint64_t)p->slice_count * MI_SLICE_SIZE;
    model_region_t r = {.addr = p->slice_start,
                        .bytes = bytes,
                        .live_bytes = (uint64_t)p->used * p->block_size,
                        .live_objects = p->used,
                        .kind = "OS page",
                        .state = MODEL_REGION_LIVE};
    rc = w->fn(w->user, &r, w->err);
    if (rc == AS_OK)
      rc = mi_walk_page(m, i, w);
  }
  if (m->page_map != 0 && rc == AS_OK)
    rc = mi_walk_unit(w, m->page_map, 128 * MI_MIB, "page map", MI_MECH_META,
                      MODEL_REGION_METADATA);
  return rc;
}
