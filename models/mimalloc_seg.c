/* models/mimalloc_seg.c -- mimalloc 2.x segments: slices and span queues,
 * commit and purge masks with their expiry, abandoned segments, the 2.0.9
 * segment cache and the 2.1 arenas.
 *
 * Citations are to v2.0.9 src/segment.c unless marked: "cache" is 209
 * src/segment-cache.c, "212"/"217" are v2.1.2 / v2.1.7 src/segment.c, and
 * "arena" is 212 src/arena.c.  2.0.9 says decommit where 2.1 says purge;
 * the code below uses 2.1's names.
 *
 * The rule that makes mimalloc keep memory: a freed span is only scheduled
 * for purging (purge mask + expiry, now + purge_delay, +1 ms per further
 * free into the segment); the purge itself runs only when something later
 * happens in that segment (a span free finding the mask expired, a page
 * allocated from it, abandon/reclaim, some collects) -- never on a timer.
 */
#include <stdlib.h>
#include <string.h>

#include "mimalloc_int.h"

#define NONE 0u

/* ---- Commit masks (segment.c:23-146) ----------------------------------- */

static void mask_clear_all(uint64_t *m) {
  memset(m, 0, MI_COMMIT_WORDS * 8);
}

static bool mask_is_empty(const uint64_t *m) {
  for (int i = 0; i < MI_COMMIT_WORDS; i++)
    if (m[i] != 0)
      return false;
  return true;
}

static void mask_create(uint32_t idx, uint32_t count, uint64_t *m) {
  mask_clear_all(m);
  for (uint32_t i = idx; i < idx + count && i < MI_SLICES_MAX; i++)
    m[i >> 6] |= UINT64_C(1) << (i & 63);
}

/* Every slice of a segment of the version (its mask has seg_slices bits). */
static void mask_set_all(const mi_model_t *mm, uint64_t *m) {
  mask_create(0, mm->g.seg_slices, m);
}

static bool mask_is_full(const mi_model_t *mm, const uint64_t *m) {
  for (uint32_t i = 0; i < mm->g.seg_slices / 64; i++)
    if (~m[i] != 0)
      return false;
  return true;
}

static bool mask_any_set(const uint64_t *c, const uint64_t *m) {
  for (int i = 0; i < MI_COMMIT_WORDS; i++)
    if ((c[i] & m[i]) != 0)
      return true;
  return false;
}

static bool mask_all_set(const uint64_t *c, const uint64_t *m) {
  for (int i = 0; i < MI_COMMIT_WORDS; i++)
    if ((c[i] & m[i]) != m[i])
      return false;
  return true;
}

static uint32_t mask_count(const uint64_t *m) {
  uint32_t n = 0;
  for (int i = 0; i < MI_COMMIT_WORDS; i++)
    n += (uint32_t)__builtin_popcountll(m[i]);
  return n;
}

/* ---- Kernel wrappers ----------------------------------------------------- */

/* Writes to a slice entry (the mi_page_t of the slice), field by field:
 * an entry can straddle two OS pages of the segment header, so which
 * fields are written decides which pages become resident. */
static void touch_field(mi_model_t *m, const mseg_t *s, uint32_t idx,
                        uint32_t off, uint32_t len) {
  mi_touch(
      m, s->base + m->g.slices_offset + (uint64_t)idx * m->g.page_struct + off,
      len);
}

/* slice_count and slice_offset (the first 8 bytes). */
static void touch_counts(mi_model_t *m, const mseg_t *s, uint32_t idx) {
  touch_field(m, s, idx, 0, 8);
}

/* slice_count, slice_offset and the block size that marks free/used. */
static void touch_span_mark(mi_model_t *m, const mseg_t *s, uint32_t idx) {
  touch_field(m, s, idx, 0, 8);
  touch_field(m, s, idx, m->g.off_bsize, m->g.len_bsize);
}

/* The span queue links (next, prev) and the block size. */
static void touch_links(mi_model_t *m, const mseg_t *s, uint32_t idx) {
  touch_field(m, s, idx, m->g.off_bsize, m->g.len_bsize);
  touch_field(m, s, idx, m->g.off_links, 16);
}

/* ---- Span queues (segment.c:177-235) ------------------------------------ */

/* mi_slice_bin8 (:177-185). */
static uint32_t slice_bin(uint32_t count) {
  if (count <= 1)
    return count;
  count--;
  unsigned s = 63u - (unsigned)__builtin_clzll(count);
  if (s <= 2)
    return count + 1;
  return ((s << 2) | ((count >> (s - 2)) & 3)) - 4;
}

static mslice_t *SL(mi_model_t *m, uint32_t seg, uint32_t idx) {
  return &m->segs[seg].slices[idx];
}

/* mi_span_queue_push (:207-216): at the front, marks the span free. */
static void spanq_push(mi_model_t *m, uint32_t tld, uint32_t seg,
                       uint32_t idx) {
  mspanq_t *q = &m->tlds[tld].spans[slice_bin(SL(m, seg, idx)->count)];
  mslice_t *sl = SL(m, seg, idx);
  if (m->g.debug) {
    /* the assertion reads next and prev, and proves the "paranoia" store
     * prev = NULL redundant: Ubuntu's build has it removed (v2.0.5
     * src/segment.c:209-210; its page of slice entries stays unwritten,
     * measured) */
    mi_read(m,
            S(m, seg)->base + m->g.slices_offset +
                (uint64_t)idx * m->g.page_struct + m->g.off_links,
            16);
    touch_field(m, S(m, seg), idx, m->g.off_bsize, m->g.len_bsize);
    touch_field(m, S(m, seg), idx, m->g.off_links, 8);
  } else {
    touch_links(m, S(m, seg), idx);
  }
  sl->qprev_seg = NONE;
  sl->qnext_seg = q->first_seg;
  sl->qnext_slice = q->first_slice;
  if (q->first_seg != NONE) {
    mslice_t *f = SL(m, q->first_seg, q->first_slice);
    f->qprev_seg = seg;
    f->qprev_slice = idx;
  } else {
    q->last_seg = seg;
    q->last_slice = idx;
  }
  q->first_seg = seg;
  q->first_slice = idx;
  sl->state = 0;
}

/* mi_span_queue_delete (:225-235): marks the span not free. */
static void spanq_delete(mi_model_t *m, uint32_t tld, uint32_t bin,
                         uint32_t seg, uint32_t idx) {
  mspanq_t *q = &m->tlds[tld].spans[bin];
  mslice_t *sl = SL(m, seg, idx);
  touch_links(m, S(m, seg), idx);
  if (sl->qprev_seg != NONE) {
    mslice_t *pv = SL(m, sl->qprev_seg, sl->qprev_slice);
    pv->qnext_seg = sl->qnext_seg;
    pv->qnext_slice = sl->qnext_slice;
  }
  if (q->first_seg == seg && q->first_slice == idx) {
    q->first_seg = sl->qnext_seg;
    q->first_slice = sl->qnext_slice;
  }
  if (sl->qnext_seg != NONE) {
    mslice_t *nx = SL(m, sl->qnext_seg, sl->qnext_slice);
    nx->qprev_seg = sl->qprev_seg;
    nx->qprev_slice = sl->qprev_slice;
  }
  if (q->last_seg == seg && q->last_slice == idx) {
    q->last_seg = sl->qprev_seg;
    q->last_slice = sl->qprev_slice;
  }
  sl->qprev_seg = sl->qnext_seg = NONE;
  sl->state = 1;
}

/* mi_segment_span_remove_from_queue (:620-626). */
static void span_remove_from_queue(mi_model_t *m, uint32_t seg, uint32_t idx) {
  spanq_delete(m, S(m, seg)->tld, slice_bin(SL(m, seg, idx)->count), seg, idx);
}

/* ---- Segment geometry ---------------------------------------------------- */

static uint64_t info_size(const mi_model_t *m) {
  return (uint64_t)m->g.info_slices * MI_SLICE_SIZE;
}

/* MI_SEGMENT_SIZE of the version. */
static uint64_t seg_size(const mi_model_t *m) {
  return (uint64_t)m->g.seg_slices * MI_SLICE_SIZE;
}

/* mi_segment_calculate_slices (:335-357): the info rounded to a slice; a
 * huge segment is the request plus the info, slice-rounded. */
static uint32_t calculate_slices(const mi_model_t *m, uint64_t required) {
  if (required == 0)
    return m->g.seg_slices;
  uint64_t size = required + info_size(m);
  return (uint32_t)((size + MI_SLICE_SIZE - 1) / MI_SLICE_SIZE);
}

/* Where the blocks of a page start and how many fit: 209 segment.c:314-323
 * (8..1024-byte blocks start 384 bytes in; v2.0.5 segment.c:319: 128),
 * 212 :319-325 (3 blocks in for <= 64 bytes, one block in for <= 512),
 * 217 :315-337 (first aligned to the block size when it is
 * <= MI_MAX_ALIGN_GUARANTEE = 128 KiB, 217 include/mimalloc/types.h:207). */
void mi_segment_page_layout(mi_model_t *m, uint32_t page) {
  mpage_t   *p = P(m, page);
  uint64_t   bsize = p->block_size;
  uint64_t   psize = (uint64_t)p->slice_count * MI_SLICE_SIZE;
  sim_addr_t pstart = p->slice_start;
  uint64_t   off = 0;
  if (p->is_huge) {
    /* a huge segment's page spans the rest of the segment */
    psize = S(m, p->seg)->size - info_size(m);
  }
  if (MI_IS_V20(m->version)) {
    if (bsize >= 8 && bsize <= 1024)
      off = m->g.small_start;
  } else {
    if (m->version == MV_217 && bsize > 0 && bsize <= MI_MEDIUM_OBJ_MAX) {
      uint64_t adjust = bsize - (pstart % bsize);
      if (adjust < bsize && psize >= bsize + adjust)
        off += adjust;
    }
    if (bsize >= 8) {
      if (bsize <= 64)
        off += 3 * bsize;
      else if (bsize <= 512)
        off += bsize;
    }
  }
  p->start = pstart + off;
  p->reserved = (uint32_t)((psize - off) / bsize);
  /* mi_page_init, the queue push and the first malloc write the page's
   * fields: all of its slice entry (page.c:649-695) */
  touch_field(m, S(m, p->seg), p->slice_index, 0, m->g.page_struct);
}

/* ---- Commit and purge (segment.c:412-570; 212 segment.c:413-591) -------- */

/* mi_segment_commit_mask (:412-461): the 64 KiB units of [p, p+size),
 * inward (conservative, for purging) or outward to MI_MINIMAL_COMMIT_SIZE
 * (liberal, for committing). */
static void commit_mask(const mi_model_t *m, const mseg_t *s, bool conservative,
                        sim_addr_t p, uint64_t size, sim_addr_t *start_p,
                        uint64_t *full, uint64_t *cm) {
  mask_clear_all(cm);
  *full = 0;
  if (size == 0 || size > seg_size(m) || s->kind == MI_SEG_HUGE)
    return;
  uint64_t segstart = info_size(m);
  uint64_t segsize = s->size;
  if (p >= s->base + segsize)
    return;
  uint64_t pstart = p - s->base;
  uint64_t start, end;
  if (conservative) {
    start = (pstart + MI_SLICE_SIZE - 1) / MI_SLICE_SIZE * MI_SLICE_SIZE;
    end = (pstart + size) / MI_SLICE_SIZE * MI_SLICE_SIZE;
  } else {
    uint64_t mc = m->g.min_commit;
    start = pstart / mc * mc;
    end = (pstart + size + mc - 1) / mc * mc;
  }
  if (pstart >= segstart && start < segstart)
    start = segstart;
  if (end > segsize)
    end = segsize;
  *start_p = s->base + start;
  *full = end > start ? end - start : 0;
  if (*full == 0)
    return;
  mask_create((uint32_t)(start / MI_SLICE_SIZE),
              (uint32_t)(*full / MI_SLICE_SIZE), cm);
}

/* Commit [p, p+size): mprotect is RSS-neutral, so only the masks change.
 * Re-using part of a scheduled purge pushes the expiry to now + delay
 * (209 :495-500, 212 :483-489) and clears those bits. */
static void segment_commit(mi_model_t *m, mseg_t *s, sim_addr_t p,
                           uint64_t size) {
  sim_addr_t start;
  uint64_t   full, mask[MI_COMMIT_WORDS];
  commit_mask(m, s, false, p, size, &start, &full, mask);
  if (full == 0 || mask_is_empty(mask))
    return;
  if (!mask_all_set(s->commit, mask)) /* 209 :467-476, 212 :459-468 */
    mi_os_commit(m, start, full);
  for (int i = 0; i < MI_COMMIT_WORDS; i++)
    s->commit[i] |= mask[i];
  if (mask_any_set(s->decommit, mask))
    s->expire = m->now + m->purge_delay;
  for (int i = 0; i < MI_COMMIT_WORDS; i++)
    s->decommit[i] &= ~mask[i];
}

/* mi_segment_ensure_committed (:502-507). */
static void ensure_committed(mi_model_t *m, mseg_t *s, sim_addr_t p,
                             uint64_t size) {
  if (mask_is_full(m, s->commit) && mask_is_empty(s->decommit))
    return;
  segment_commit(m, s, p, size);
}

/* Purge [p, p+size) now: 209 mi_segment_commitx(false) (:480-492)
 * decommits with MADV_DONTNEED and clears the commit bits; 212
 * mi_segment_purge (:501-528) purges (DONTNEED, or MADV_FREE when
 * purge_decommits=0) and keeps the commit bits (needs_recommit is false in
 * a release build, prim.c:373-378). */
static void segment_purge(mi_model_t *m, mseg_t *s, sim_addr_t p,
                          uint64_t size) {
  if (!s->allow_decommit)
    return;
  sim_addr_t start;
  uint64_t   full, mask[MI_COMMIT_WORDS];
  commit_mask(m, s, true, p, size, &start, &full, mask);
  if (full == 0 || mask_is_empty(mask))
    return;
  if (mask_any_set(s->commit, mask)) {
    if (MI_IS_V20(m->version))
      mi_os_decommit(m, start, full);
    else
      mi_os_purge(m, start, full);
    m->purges++;
    m->purged_bytes += full;
    if (MI_IS_V20(m->version))
      for (int i = 0; i < MI_COMMIT_WORDS; i++)
        s->commit[i] &= ~mask[i];
  }
  for (int i = 0; i < MI_COMMIT_WORDS; i++)
    s->decommit[i] &= ~mask[i];
}

/* mi_segment_delayed_decommit / mi_segment_try_purge (209 :548-570, 212
 * :570-591, 217 :575-592): purge every set bit once expired (or forced). */
static void try_purge(mi_model_t *m, uint32_t seg, bool force) {
  mseg_t *s = S(m, seg);
  if (!s->allow_decommit || mask_is_empty(s->decommit))
    return;
  if (m->version == MV_217 && s->expire == 0)
    return; /* 217 :576 */
  if (!force && m->now < s->expire)
    return;
  uint64_t mask[MI_COMMIT_WORDS];
  memcpy(mask, s->decommit, sizeof mask);
  s->expire = 0;
  mask_clear_all(s->decommit);
  for (uint32_t i = 0; i < m->g.seg_slices;) {
    if (!(mask[i >> 6] >> (i & 63) & 1)) {
      i++;
      continue;
    }
    uint32_t j = i;
    while (j < m->g.seg_slices && (mask[j >> 6] >> (j & 63) & 1))
      j++;
    segment_purge(m, s, s->base + (uint64_t)i * MI_SLICE_SIZE,
                  (uint64_t)(j - i) * MI_SLICE_SIZE);
    i = j;
  }
}

void mi_segment_collect(mi_model_t *m, uint32_t seg, bool force) {
  try_purge(m, seg, force); /* 217 _mi_segment_collect :598-602 */
}

/* mi_segment_perhaps_decommit / mi_segment_schedule_purge (209 :509-546,
 * 212 :530-568). */
static void schedule_purge(mi_model_t *m, uint32_t seg, sim_addr_t p,
                           uint64_t size) {
  mseg_t *s = S(m, seg);
  if (!s->allow_decommit)
    return;
  if (m->purge_delay == 0) {
    segment_purge(m, s, p, size);
    return;
  }
  if (m->purge_delay < 0)
    return; /* 212: allow_purge is false when purge_delay < 0 */
  sim_addr_t start;
  uint64_t   full, mask[MI_COMMIT_WORDS];
  commit_mask(m, s, true, p, size, &start, &full, mask);
  if (full == 0 || mask_is_empty(mask))
    return;
  for (int i = 0; i < MI_COMMIT_WORDS; i++)
    s->decommit[i] |= s->commit[i] & mask[i];
  if (s->expire == 0) {
    s->expire = m->now + m->purge_delay;
  } else if (s->expire <= m->now) {
    /* 2.0.5 only extends an expired mask (v2.0.5 segment.c:593-597) */
    if (s->expire + m->extend_delay <= m->now && m->version != MV_205)
      try_purge(m, seg, true);
    else
      s->expire = m->now + m->extend_delay;
  } else {
    s->expire += m->extend_delay;
  }
}

/* ---- Spans (segment.c:581-774) ------------------------------------------ */

/* mi_segment_span_free (:581-610): first and last entries, schedule a
 * purge of the span, and the span queue (not for huge or abandoned
 * segments). */
static void span_free(mi_model_t *m, uint32_t seg, uint32_t idx, uint32_t count,
                      bool allow_purge) {
  mseg_t *s = S(m, seg);
  bool    queued = s->kind != MI_SEG_HUGE && s->tld != 0;
  if (count == 0)
    count = 1;
  mslice_t *sl = &s->slices[idx];
  sl->count = count;
  sl->offset = 0;
  touch_counts(m, s, idx);
  if (count > 1) {
    uint32_t last = idx + count - 1;
    if (m->version == MV_217 && last > s->slice_entries)
      last = s->slice_entries; /* 217 :626-628 */
    mslice_t *ls = &s->slices[last];
    ls->count = 0;
    ls->offset = count - 1;
    ls->state = 0;
    touch_span_mark(m, s, last);
  }
  if (allow_purge)
    schedule_purge(m, seg, s->base + (uint64_t)idx * MI_SLICE_SIZE,
                   (uint64_t)count * MI_SLICE_SIZE);
  s = S(m, seg);
  if (queued) {
    spanq_push(m, s->tld, seg, idx);
  } else {
    s->slices[idx].state = 0;
    touch_field(m, s, idx, m->g.off_bsize, m->g.len_bsize);
  }
}

/* mi_segment_span_free_coalesce (:628-673): merge with free neighbours. */
static uint32_t span_free_coalesce(mi_model_t *m, uint32_t seg, uint32_t idx) {
  mseg_t *s = S(m, seg);
  bool    abandoned = s->tld == 0;
  if (s->kind == MI_SEG_HUGE) {
    s->slices[idx].state = 0;
    return idx;
  }
  uint32_t count = s->slices[idx].count;
  uint32_t next = idx + count;
  if (next < s->slice_entries && s->slices[next].state == 0) {
    count += s->slices[next].count;
    if (!abandoned)
      span_remove_from_queue(m, seg, next);
  }
  if (idx > 0) {
    uint32_t prev = (idx - 1) - s->slices[idx - 1].offset;
    if (s->slices[prev].state == 0) {
      count += s->slices[prev].count;
      if (!abandoned)
        span_remove_from_queue(m, seg, prev);
      idx = prev;
    }
  }
  span_free(m, seg, idx, count, true);
  return idx;
}

/* mi_segment_span_allocate (:676-723): a page of count slices at idx. */
static uint32_t span_allocate(mi_model_t *m, uint32_t seg, uint32_t idx,
                              uint32_t count) {
  mseg_t *s = S(m, seg);
  ensure_committed(m, s, s->base + (uint64_t)idx * MI_SLICE_SIZE,
                   (uint64_t)count * MI_SLICE_SIZE);
  mslice_t *sl = &s->slices[idx];
  sl->offset = 0;
  sl->count = count;
  sl->state = 2; /* in use (xblock_size > 1) */
  uint32_t extra = count - 1;
  if (extra > m->g.max_slice_off)
    extra = m->g.max_slice_off;
  if (idx + extra >= s->slice_entries)
    extra = s->slice_entries - idx - 1;
  touch_span_mark(m, s, idx);
  touch_field(m, s, idx, 8, 1); /* is_reset, is_committed (:720-721) */
  for (uint32_t i = 1; i <= extra; i++) {
    s->slices[idx + i].offset = i;
    s->slices[idx + i].count = 0;
    s->slices[idx + i].state = 1;
    touch_span_mark(m, s, idx + i);
  }
  uint32_t last = idx + count - 1;
  if (last > s->slice_entries)
    last = s->slice_entries;
  /* 2.0.5 writes the last entry only within the segment's entries
   * (v2.0.5 segment.c:766-767) */
  bool last_in = m->version != MV_205 || idx + count - 1 < s->slice_entries;
  if (last > idx && last_in) {
    s->slices[last].offset = last - idx;
    s->slices[last].count = 0;
    s->slices[last].state = 1;
    touch_span_mark(m, s, last);
  }
  s->used++;
  uint32_t page = mi_page_new(m);
  if (page == 0)
    return 0;
  s = S(m, seg);
  s->slices[idx].page = page;
  mpage_t *p = P(m, page);
  p->seg = seg;
  p->slice_index = idx;
  p->slice_count = count;
  p->slice_start = s->base + (uint64_t)idx * MI_SLICE_SIZE;
  p->block_size = (uint64_t)count * MI_SLICE_SIZE;
  p->is_huge = s->kind == MI_SEG_HUGE;
  p->zero_init = false; /* 209: never set (segment.c:1004) */
  return page;
}

/* mi_segment_slice_split (:725-735). */
static void slice_split(mi_model_t *m, uint32_t seg, uint32_t idx,
                        uint32_t count) {
  mslice_t *sl = SL(m, seg, idx);
  if (sl->count <= count)
    return;
  uint32_t next_count = sl->count - count;
  /* 2.0.5 schedules the rest for purging too (v2.0.5 segment.c:729, 654) */
  span_free(m, seg, idx + count, next_count, m->version == MV_205);
  SL(m, seg, idx)->count = count;
}

/* mi_segments_page_find_and_allocate (:737-774): first fit, from the
 * span queue of the best-fitting bin upward. */
static uint32_t find_and_allocate(mi_model_t *m, uint32_t tld,
                                  uint32_t slice_count) {
  uint32_t bin = slice_bin(slice_count);
  if (slice_count == 0)
    slice_count = 1;
  for (; bin <= MI_SEGMENT_BIN_MAX; bin++) {
    mspanq_t *q = &m->tlds[tld].spans[bin];
    uint32_t  seg = q->first_seg, idx = q->first_slice;
    while (seg != NONE) {
      mslice_t *sl = SL(m, seg, idx);
      if (sl->count >= slice_count) {
        spanq_delete(m, tld, bin, seg, idx);
        if (SL(m, seg, idx)->count > slice_count)
          slice_split(m, seg, idx, slice_count);
        return span_allocate(m, seg, idx, slice_count);
      }
      uint32_t ns = sl->qnext_seg, ni = sl->qnext_slice;
      seg = ns;
      idx = ni;
    }
  }
  return 0;
}

/* ---- Segment records ---------------------------------------------------- */

static uint32_t seg_new(mi_model_t *m, uint32_t entries) {
  uint32_t id = m->segs_free;
  if (id != 0) {
    m->segs_free = m->segs[id].abandoned_next;
  } else {
    id = m->segs_n++;
    if (id == 0)
      id = m->segs_n++;
    if (m->segs_n == UINT32_MAX || !sim_idtable_reach(&m->segs_tab, id)) {
      mi_fail_oom(m);
      return 0;
    }
  }
  mseg_t *s = &m->segs[id];
  memset(s, 0, sizeof *s);
  s->slices = calloc((size_t)entries + 1, sizeof *s->slices);
  if (s->slices == NULL) {
    mi_fail_oom(m);
    return 0;
  }
  s->live = true;
  m->segments_live++;
  return id;
}

static void seg_release(mi_model_t *m, uint32_t id) {
  mseg_t *s = S(m, id);
  free(s->slices);
  memset(s, 0, sizeof *s);
  s->abandoned_next = m->segs_free;
  m->segs_free = id;
  m->segments_live--;
}

/* ---- 2.0.9 segment cache (segment-cache.c) ------------------------------ */

/* Slot i's bytes in the library's cache[] (mimalloc_int.h). */
static sim_addr_t slot_addr(const mi_model_t *m, uint64_t i) {
  return m->cache_area + i * m->g.cache_slot;
}

/* mi_commit_mask_decommit (cache :110-132): the whole committed part. */
static void cache_slot_decommit(mi_model_t *m, mi_cache_slot_t *sl) {
  for (uint32_t i = 0; i < m->g.seg_slices;) {
    if (!(sl->commit[i >> 6] >> (i & 63) & 1)) {
      i++;
      continue;
    }
    uint32_t j = i;
    while (j < m->g.seg_slices && (sl->commit[j >> 6] >> (j & 63) & 1))
      j++;
    mi_os_decommit(m, sl->base + (uint64_t)i * MI_SLICE_SIZE,
                   (uint64_t)(j - i) * MI_SLICE_SIZE);
    m->purges++;
    m->purged_bytes += (uint64_t)(j - i) * MI_SLICE_SIZE;
    i = j;
  }
  mask_clear_all(sl->commit);
  mask_clear_all(sl->decommit);
}

/* mi_segment_cache_purge (cache :134-170): visit_all, or 16 slots from a
 * random start (the shuffled clock), at most 4 expired ones per push. */
static void cache_purge(mi_model_t *m, bool visit_all, bool force) {
  if (!m->allow_decommit)
    return;
  uint32_t purged = 0;
  uint32_t max_visits = visit_all ? MI_CACHE_MAX : 16;
  uint64_t idx =
      visit_all ? 0 : mi_random_shuffle((uint64_t)m->now) % MI_CACHE_MAX;
  for (uint32_t v = 0; v < max_visits; v++, idx++) {
    if (idx >= MI_CACHE_MAX)
      idx = 0;
    mi_cache_slot_t *sl = &m->cache[idx];
    /* every visited slot's expire is read (:147), so a thread's exit
     * (mi_heap_collect_ex -> _mi_segment_cache_collect(false), 209 heap.c:
     * 164, cache :172-180 visit_all) reads all 160 KiB of cache[] */
    mi_read(m, slot_addr(m, idx) + m->g.cache_slot - 8, 8); /* expire */
    if (sl->inuse && sl->expire != 0 && (force || m->now >= sl->expire)) {
      purged++;
      sl->expire = 0;
      mi_touch(m, slot_addr(m, idx), m->g.cache_slot); /* :153-162 */
      cache_slot_decommit(m, sl);
      if (!visit_all && purged > 4)
        break;
    }
  }
}

void mi_segment_cache_collect(mi_model_t *m, bool force) {
  if (m->version == MV_205) {
    /* 2.0.5 decommits, forced or expired, and keeps the segments (v2.0.5
     * segment-cache.c:154-156) */
    cache_purge(m, force, force);
    return;
  }
  if (force) {
    /* _mi_segment_cache_free_all (cache :182-204): back to the OS */
    for (uint32_t i = 0; i < MI_CACHE_MAX; i++)
      if (m->cache[i].inuse) {
        mi_os_free(m, m->cache[i].base, seg_size(m));
        memset(&m->cache[i], 0, sizeof m->cache[i]);
      }
  } else {
    cache_purge(m, true, false);
  }
}

/* _mi_segment_cache_push (cache :206-263); false when the cache is full. */
static bool cache_push(mi_model_t *m, const mseg_t *s) {
  cache_purge(m, false, false);
  uint32_t i = 0;
  while (i < MI_CACHE_MAX && m->cache[i].inuse)
    i++;
  if (i == MI_CACHE_MAX)
    return false;
  mi_cache_slot_t *sl = &m->cache[i];
  mi_touch(m, slot_addr(m, i), m->g.cache_slot); /* :240-246 */
  sl->inuse = true;
  sl->base = s->base;
  sl->expire = 0;
  memcpy(sl->commit, s->commit, sizeof sl->commit);
  memcpy(sl->decommit, s->decommit, sizeof sl->decommit);
  sl->large = s->large;
  if (!mask_is_empty(sl->commit) && !s->large && m->allow_decommit) {
    if (m->segment_delay == 0)
      cache_slot_decommit(m, sl);
    else
      sl->expire = m->now + m->segment_delay;
  }
  return true;
}

/* The first cached segment from one pool: large (THP advised) or not. */
static bool cache_pop_pool(mi_model_t *m, bool large, sim_addr_t *base,
                           uint64_t *commit, uint64_t *decommit) {
  for (uint32_t i = 0; i < MI_CACHE_MAX; i++) {
    mi_cache_slot_t *sl = &m->cache[i];
    if (!sl->inuse || sl->large != large)
      continue;
    mi_touch(m, slot_addr(m, i), m->g.cache_slot); /* :87-95 */
    *base = sl->base;
    memcpy(commit, sl->commit, sizeof sl->commit);
    memcpy(decommit, sl->decommit, sizeof sl->decommit);
    memset(sl, 0, sizeof *sl);
    return true;
  }
  return false;
}

/* _mi_segment_cache_pop (cache :48-108): a large segment first when large
 * pages are allowed (cache_available_large, :73-76), else a regular one;
 * *large says which. */
static bool cache_pop(mi_model_t *m, bool *large, sim_addr_t *base,
                      uint64_t *commit, uint64_t *decommit) {
  if (*large && cache_pop_pool(m, true, base, commit, decommit))
    return true;
  if (!cache_pop_pool(m, false, base, commit, decommit))
    return false;
  *large = false;
  return true;
}

/* use_large_os_page (209 os.c:110-114): 2 MiB multiples, when enabled. */
static bool use_large_os_page(const mi_model_t *m, uint64_t size,
                              uint64_t align) {
  const uint64_t large = 2 * MI_MIB; /* os.c:285 large_os_page_size */
  return m->large_os_pages && size % large == 0 && align % large == 0;
}

/* 2.1.x: a segment-aligned mapping of at most 1 GiB goes to the next
 * aligned hint, and takes its size, rounded up to a segment, from the
 * hints whether the kernel keeps the hint or not (217 os.c:95-119
 * _mi_os_get_aligned_hint; prim/unix/prim.c:214-230 mmap at the hint).
 * The hints start at a random point per process (os.c:112-115), which the
 * hint_start option gives; without it (0) the mapping is placed top-down
 * as mmap without a hint would: 0 here.  A hint the kernel moves is
 * remapped aligned by the caller's path (0 here too). */
static sim_addr_t hinted_os_alloc(mi_model_t *m, uint64_t size, bool commit) {
  uint64_t seg = seg_size(m);
  if (m->hint_next == 0 || size > MI_GIB || m->fail != AS_OK)
    return 0;
  sim_addr_t hint = m->hint_next;
  m->hint_next += (size + seg - 1) / seg * seg;
  sim_addr_t a = mi_os_map_hint(m, hint, size, commit);
  if (a % seg == 0)
    return a;
  mi_os_free(m, a, size);
  return 0;
}

/* A segment's memory from the OS (_mi_arena_alloc_aligned -> _mi_os_alloc_
 * aligned, 209 arena.c, os.c:708-790); *large: in, large pages allowed;
 * out, whether it got them.  With large pages on Linux, mi_unix_mmap
 * (os.c:596-700) tries MAP_HUGETLB, which fails without reserved hugetlb
 * pages, then maps normally and madvises MADV_HUGEPAGE (is_large, so
 * pinned: arena.c _mi_arena_alloc_aligned sets is_pinned = large).  A huge
 * segment's size is no multiple of the 32 MiB segment, so it gets no
 * aligned hint (os.c mi_os_get_aligned_hint), and an unaligned first
 * mapping is replaced by an over-allocation without large pages
 * (os.c:748-770): the model takes that path for every huge segment. */
static sim_addr_t segment_os_alloc(mi_model_t *m, uint64_t size, bool commit,
                                   bool *large) {
  bool want = *large && commit && size % seg_size(m) == 0 &&
              use_large_os_page(m, size, seg_size(m));
  *large = false;
  sim_addr_t base = hinted_os_alloc(m, size, commit);
  if (base == 0)
    base = commit ? mi_os_alloc(m, size, seg_size(m))
                  : mi_os_reserve(m, size, seg_size(m));
  if (want && base != 0) {
    mi_madvise_hugepage(m, base, size);
    *large = true;
  }
  return base;
}

/* ---- 2.1 arenas (arena.c) ---------------------------------------------- */

#define ARENA_BLOCK   MI_SEGMENT_SIZE   /* MI_ARENA_BLOCK_SIZE (arena.c:37) */
#define ARENA_MIN_OBJ (ARENA_BLOCK / 2) /* :38 */
/* The arena descriptor: sizeof(mi_arena_t) (arena.c:42-59, about 150
 * bytes) and 4 bitmaps of one 8-byte field for a 1 GiB arena; written
 * within one OS page either way. */
#define ARENA2_META_BYTES 192
#define MI_OS_PAGE        4096 /* _mi_os_good_alloc_size of it (os.c) */

/* mi_arena_purge_delay (arena.c:428-431). */
static int64_t arena_purge_delay(const mi_model_t *m) {
  return m->purge_delay * m->arena_mult;
}

/* mi_arena_reserve (arena.c:337-363): 1 GiB of committed (overcommit)
 * address space, scaled up after 8 arenas. */
static uint32_t arena2_reserve(mi_model_t *m, uint64_t req, bool allow_large) {
  uint64_t size = MI_GIB;
  if (m->arenas2_n >= 8 && m->arenas2_n <= 128)
    size <<= m->arenas2_n / 8;
  if (size < req)
    return 0;
  marena2_t *na = realloc(m->arenas2, (m->arenas2_n + 1) * sizeof *na);
  if (na == NULL) {
    mi_fail_oom(m);
    return 0;
  }
  m->arenas2 = na;
  marena2_t *a = &na[m->arenas2_n];
  memset(a, 0, sizeof *a);
  a->blocks = (uint32_t)(size / ARENA_BLOCK);
  /* committed (arena_eager_commit=2 with overcommit, :356-358), so large
   * OS pages are allowed as the request allows (:360); a 1 GiB arena
   * gets an aligned hint (212 os.c:105-127), a larger one none, and is
   * over-allocated without them (os.c:242-270) */
  bool large = allow_large && size <= MI_GIB;
  a->base = segment_os_alloc(m, size, true, &large);
  a->large = large; /* memid.is_pinned (212 internal.h:752-757) */
  a->inuse = calloc(a->blocks, 3);
  if (a->inuse == NULL) {
    mi_fail_oom(m);
    return 0;
  }
  a->purge = a->inuse + a->blocks;
  a->dirty = a->purge + a->blocks;
  /* The arena descriptor, mi_arena_t and 4 one-field bitmaps
   * (mi_manage_os_memory_ex2, arena.c:758-763): 2.1.7 puts it in
   * mimalloc's static area (217 arena.c:182, aligned to
   * MI_MAX_ALIGN_SIZE); 2.1.2 asks the static area for MI_ALIGNMENT_MAX
   * (16 MiB) alignment, which never fits its 8 KiB (arena.c:144, 157, 178),
   * so the descriptor gets an OS mapping of its own (:181). */
  if (m->version == MV_212) {
    sim_addr_t meta = mi_os_alloc(m, MI_OS_PAGE, 0);
    m->arenas2[m->arenas2_n].meta = meta;
    if (meta != 0)
      mi_touch(m, meta, ARENA2_META_BYTES);
  } else {
    mi_touch(m, m->static_area, ARENA2_META_BYTES);
  }
  return ++m->arenas2_n;
}

/* mi_arena_try_alloc_at (arena.c:219-270): first fit from block 0. */
static bool arena2_try_alloc(mi_model_t *m, uint32_t ai, uint32_t n,
                             sim_addr_t *addr, uint32_t *block, bool *zero) {
  marena2_t *a = &m->arenas2[ai - 1];
  for (uint32_t b = 0; b + n <= a->blocks; b++) {
    uint32_t k = 0;
    while (k < n && !a->inuse[b + k])
      k++;
    if (k < n) {
      b += k;
      continue;
    }
    bool dirty = false;
    for (k = 0; k < n; k++) {
      a->inuse[b + k] = 1;
      a->purge[b + k] = 0;
      dirty |= a->dirty[b + k];
      a->dirty[b + k] = 1;
    }
    *zero = !dirty;
    *block = b;
    *addr = a->base + (uint64_t)b * ARENA_BLOCK;
    return true;
  }
  return false;
}

/* _mi_arena_alloc_aligned (arena.c:366-405): arenas for >= 16 MiB, a new
 * arena when they are full, else the OS.  A request that may not have
 * large OS pages skips arenas that have them (:286).  *large: in, large
 * pages allowed; out, whether the memory has them (pinned). */
static sim_addr_t arena2_alloc(mi_model_t *m, uint64_t size, bool commit,
                               uint32_t *arena, uint32_t *block, bool *zero,
                               bool *large) {
  uint32_t   n = (uint32_t)((size + ARENA_BLOCK - 1) / ARENA_BLOCK);
  sim_addr_t addr;
  if (size >= ARENA_MIN_OBJ) {
    for (uint32_t ai = 1; ai <= m->arenas2_n; ai++)
      if ((*large || !m->arenas2[ai - 1].large) &&
          arena2_try_alloc(m, ai, n, &addr, block, zero)) {
        *arena = ai;
        *large = m->arenas2[ai - 1].large;
        return addr;
      }
    uint32_t ai = arena2_reserve(m, size, *large);
    if (ai != 0 && arena2_try_alloc(m, ai, n, &addr, block, zero)) {
      *arena = ai;
      *large = m->arenas2[ai - 1].large;
      return addr;
    }
  }
  *arena = 0;
  *zero = true;
  return segment_os_alloc(m, size, commit, large);
}

/* mi_arena_try_purge (arena.c:515-568): purge every scheduled run whose
 * blocks are all free, once the arena's expiry passed (or forced). */
static bool arena2_try_purge(mi_model_t *m, marena2_t *a, bool force) {
  if (a->large || a->purge_expire == 0) /* pinned: never (:517) */
    return false;
  if (!force && a->purge_expire > m->now)
    return false;
  a->purge_expire = 0;
  bool any = false, full = true;
  for (uint32_t b = 0; b < a->blocks;) {
    if (!a->purge[b]) {
      b++;
      continue;
    }
    uint32_t e = b;
    while (e < a->blocks && a->purge[e])
      e++;
    /* claim the longest prefix of the run that is not in use */
    uint32_t len = e - b;
    while (len > 0) {
      uint32_t k = 0;
      while (k < len && !a->inuse[b + k])
        k++;
      if (k == len)
        break;
      len--;
    }
    if (len > 0) {
      mi_os_purge(m, a->base + (uint64_t)b * ARENA_BLOCK,
                  (uint64_t)len * ARENA_BLOCK);
      m->purges++;
      m->purged_bytes += (uint64_t)len * ARENA_BLOCK;
      for (uint32_t k = 0; k < len; k++)
        a->purge[b + k] = 0;
      any = true;
    }
    if (len < e - b)
      full = false;
    b = e;
  }
  if (!full && a->purge_expire == 0)
    a->purge_expire = m->now + arena_purge_delay(m);
  return any;
}

/* mi_arenas_try_purge (arena.c:570-592). */
static void arenas2_try_purge(mi_model_t *m, bool force, bool visit_all) {
  if (arena_purge_delay(m) <= 0)
    return;
  uint32_t max_count = visit_all ? m->arenas2_n : 1;
  for (uint32_t i = 0; i < m->arenas2_n; i++)
    if (arena2_try_purge(m, &m->arenas2[i], force)) {
      if (max_count <= 1)
        break;
      max_count--;
    }
}

void mi_arenas2_collect(mi_model_t *m, bool force) {
  arenas2_try_purge(m, force, true); /* _mi_arena_collect (:704-706) */
}

/* _mi_arena_free (arena.c:599-677). */
static void arena2_free(mi_model_t *m, uint32_t ai, uint32_t block,
                        sim_addr_t addr, uint64_t size) {
  if (ai == 0) {
    mi_os_free(m, addr, size);
  } else {
    marena2_t *a = &m->arenas2[ai - 1];
    uint32_t   n = (uint32_t)((size + ARENA_BLOCK - 1) / ARENA_BLOCK);
    int64_t    delay = a->large ? -1 : arena_purge_delay(m); /* :639-641 */
    if (delay == 0) {
      mi_os_purge(m, addr, (uint64_t)n * ARENA_BLOCK);
      m->purges++;
      m->purged_bytes += (uint64_t)n * ARENA_BLOCK;
    } else if (delay > 0) {
      /* mi_arena_schedule_purge (:466-486) */
      if (a->purge_expire != 0)
        a->purge_expire += delay / 10;
      else
        a->purge_expire = m->now + delay;
      for (uint32_t k = 0; k < n; k++)
        a->purge[block + k] = 1;
    }
    for (uint32_t k = 0; k < n; k++)
      a->inuse[block + k] = 0;
  }
  arenas2_try_purge(m, false, false); /* :676 */
}

/* ---- Segment allocation and free (segment.c:776-977) -------------------- */

/* mi_segment_alloc (:847-945) with mi_segment_os_alloc (:776-844). */
static uint32_t segment_alloc(mi_model_t *m, uint32_t tld, uint64_t required,
                              uint32_t *huge_page) {
  uint32_t segment_slices = calculate_slices(m, required);
  uint64_t segment_size = (uint64_t)segment_slices * MI_SLICE_SIZE;
  /* :857-860; thread_count is a size_t, so below 0 it is above 1 */
  bool eager_delay =
      (uint64_t)m->thread_count > 1 &&
      m->tlds[tld].segment_count < (uint64_t)m->eager_commit_delay;
  bool     eager = !eager_delay && m->eager_commit;
  bool     commit = eager || required > 0;
  uint32_t entries =
      segment_slices > m->g.seg_slices ? m->g.seg_slices : segment_slices;
  uint32_t seg = seg_new(m, entries);
  if (seg == 0)
    return 0;
  mseg_t *s = S(m, seg);
  bool    is_zero = true;
  /* mem_large: large pages only once no longer lazy (:783) */
  bool large = !eager_delay;
  s->size = segment_size;
  if (MI_IS_V20(m->version)) {
    if (required == 0 &&
        cache_pop(m, &large, &s->base, s->commit, s->decommit)) { /* :804-807 */
      is_zero = false;
    } else {
      s->base = segment_os_alloc(m, segment_size, commit, &large);
      if (commit)
        mask_set_all(m, s->commit);
    }
  } else {
    s->base = arena2_alloc(m, segment_size, commit, &s->arena, &s->arena_block,
                           &is_zero, &large);
    /* arena memory is committed (arena_eager_commit=2 on overcommit);
     * direct OS memory as requested (212 :825-840) */
    if (s->arena != 0 || commit)
      mask_set_all(m, s->commit);
  }
  s = S(m, seg);
  if (s->base == 0)
    return 0;
  /* commit at least the info slices (:822-832).  In 2.0.9 that commit is
   * _mi_os_commit(segment, ..., is_zero), and mi_os_commitx clears *is_zero
   * first thing (209 os.c:929) and never sets it on Linux: a segment that
   * was not committed whole (a thread's first, eager_delay :857-860) has its
   * info memset below (:875-880) although the OS memory is fresh.  2.1+
   * pass NULL (212 segment.c:836). */
  uint64_t need[MI_COMMIT_WORDS];
  mask_create(0, m->g.info_slices, need);
  bool need_commit = !mask_all_set(s->commit, need);
  if (need_commit) /* _mi_os_commit(segment, commit_needed * MI_COMMIT_SIZE) */
    mi_os_commit(m, s->base, (uint64_t)m->g.info_slices * MI_SLICE_SIZE);
  for (int i = 0; i < MI_COMMIT_WORDS; i++)
    s->commit[i] |= need[i];
  if (need_commit && MI_IS_V20(m->version))
    is_zero = false; /* the same in v2.0.5 segment.c:871 */
  /* zero the info unless the memory is fresh (:875-880); 2.0.5 zeroes one
   * slice entry less (v2.0.5 segment.c:889) */
  uint64_t entries_zeroed = segment_slices + (m->version == MV_205 ? 0 : 1);
  if (!is_zero)
    mi_touch(m, s->base + m->g.zero_prefix,
             (m->g.slices_offset - m->g.zero_prefix) +
                 (uint64_t)m->g.page_struct * entries_zeroed);
  mi_touch(m, s->base, m->g.slices_offset); /* header fields */
  /* :884: never for pinned or large memory */
  s->large = large;
  s->allow_decommit = m->allow_decommit && !large;
  s->expire = 0;
  /* 2.0.5 starts the clock of the decommit mask (the cached segment's, or
   * empty) at once (v2.0.5 segment.c:893-897); 2.0.9 leaves it at 0 */
  if (m->version == MV_205 && s->allow_decommit)
    s->expire = m->now + m->purge_delay;
  if (!MI_IS_V20(m->version))
    mask_clear_all(s->decommit); /* 212 :845-851 */
  s->segment_slices = segment_slices;
  s->slice_entries = entries;
  s->tld = tld;
  s->kind = required == 0 ? MI_SEG_NORMAL : MI_SEG_HUGE;
  m->tlds[tld].segment_count++;
  /* the segment map bit (209 segment-cache.c _mi_segment_map_allocated_at,
   * 212 segment-map.c) is in the library's static data */
  mi_touch(m, m->static_area + 4096, 8);
  uint32_t page0 = span_allocate(m, seg, 0, m->g.info_slices);
  if (page0 == 0)
    return 0;
  /* the info "page" is not a page record the model needs */
  S(m, seg)->slices[0].page = 0;
  mi_page_release(m, page0);
  s = S(m, seg);
  s->used = 0;
  if (s->kind == MI_SEG_NORMAL) {
    /* 2.0.5 schedules the free slices for purging (v2.0.5 segment.c:950,
     * 654); 2.0.9 not (:933) */
    span_free(m, seg, m->g.info_slices, s->slice_entries - m->g.info_slices,
              m->version == MV_205);
  } else {
    *huge_page = span_allocate(m, seg, m->g.info_slices,
                               segment_slices - m->g.info_slices);
  }
  return seg;
}

/* mi_segment_os_free (:373-400): 209 into the cache, else the arena or the
 * OS. */
static void segment_os_free(mi_model_t *m, uint32_t seg) {
  mseg_t *s = S(m, seg);
  if (MI_IS_V20(m->version)) {
    /* 2.0.5 caches a huge segment of exactly the segment size too (v2.0.5
     * segment.c:389) */
    bool cacheable = s->size == seg_size(m) &&
                     (s->kind != MI_SEG_HUGE || m->version == MV_205);
    if (!cacheable || !cache_push(m, s))
      mi_os_free(m, s->base, s->size);
  } else {
    arena2_free(m, s->arena, s->arena_block, s->base, s->size);
  }
  seg_release(m, seg);
}

/* mi_segment_free (:948-977): remove the free spans from the queues. */
static void segment_free(mi_model_t *m, uint32_t seg) {
  mseg_t *s = S(m, seg);
  if (s->was_reclaimed && s->tld != 0) /* 217 :391-394 */
    m->tlds[s->tld].reclaim_count--;
  for (uint32_t i = 0; i < s->slice_entries;) {
    mslice_t *sl = &s->slices[i];
    uint32_t  n = sl->count ? sl->count : 1;
    if (sl->state == 0 && s->kind != MI_SEG_HUGE && s->tld != 0)
      span_remove_from_queue(m, seg, i);
    i += n;
  }
  if (s->tld != 0)
    m->tlds[s->tld].segment_count--;
  segment_os_free(m, seg);
}

/* ---- Page free (segment.c:985-1035) -------------------------------------- */

/* Areas are aligned inward to the OS page (v2.0.9 src/os.c:890-906
 * mi_os_page_align_areax), _mi_os_page_size() being sysconf(_SC_PAGESIZE)
 * (os.c:278-283): the simulated kernel's page, 4 to 64 KiB. */
static sim_addr_t os_page_up(const mi_model_t *m, sim_addr_t a) {
  uint64_t page = sim_kernel_page_size(m->kernel);
  return (a + page - 1) & ~(page - 1);
}

static sim_addr_t os_page_down(const mi_model_t *m, sim_addr_t a) {
  return a & ~(sim_kernel_page_size(m->kernel) - 1);
}

/* mi_segment_page_clear (:985-1015): returns the (coalesced) span index. */
static uint32_t page_clear(mi_model_t *m, uint32_t page) {
  mpage_t *p = P(m, page);
  uint32_t seg = p->seg, idx = p->slice_index;
  if (m->page_reset && !S(m, seg)->large) {
    /* page_reset option (:994-1000): _mi_os_reset of the page area, pages
     * aligned inward (os.c:1021-1025), with MADV_FREE (os.c:1047-1056) */
    sim_addr_t lo = os_page_up(m, p->start);
    sim_addr_t hi = os_page_down(m, p->slice_start + (uint64_t)p->slice_count *
                                                         MI_SLICE_SIZE);
    /* a debug build zeroes the area first (v2.0.5 src/os.c:975-979) */
    if (hi > lo && m->g.debug)
      mi_touch(m, lo, hi - lo);
    if (hi > lo)
      mi_madvise_free(m, lo, hi - lo);
  }
  mi_page_release(m, page);
  mseg_t *s = S(m, seg);
  s->slices[idx].page = 0;
  s->slices[idx].state = 1;
  /* memset of the page fields from `capacity` on, then xblock_size = 1
   * (:1002-1006) */
  touch_field(m, s, idx, 10, m->g.page_struct - 10);
  uint32_t r = span_free_coalesce(m, seg, idx);
  S(m, seg)->used--;
  return r;
}

static void segment_abandon(mi_model_t *m, uint32_t seg);

/* _mi_segment_page_free (:1017-1035; 217 :1030-1048). */
void mi_segment_page_free(mi_model_t *m, uint32_t page, bool force) {
  (void)force;
  uint32_t seg = P(m, page)->seg;
  page_clear(m, page);
  mseg_t *s = S(m, seg);
  if (s->used == 0)
    segment_free(m, seg);
  else if (s->used == s->abandoned)
    segment_abandon(m, seg);
  else if (m->version == MV_217)
    try_purge(m, seg, false); /* 217 :1044-1047 */
}

/* _mi_segment_huge_page_reset (:1581-1594): a free from another thread
 * decommits the huge block but its first word. */
void mi_huge_page_reset(mi_model_t *m, uint32_t page) {
  mpage_t *p = P(m, page);
  mseg_t  *s = S(m, p->seg);
  if (!s->allow_decommit)
    return;
  sim_addr_t lo = os_page_up(m, p->start + 8);
  sim_addr_t hi = os_page_down(m, p->start + p->block_size);
  if (hi > lo)
    mi_madvise_dontneed(m, lo, hi - lo);
}

/* ---- Abandoned segments (segment.c:1037-1460) -------------------------- */

static void abandoned_push(mi_model_t *m, uint32_t seg) {
  S(m, seg)->abandoned_next = m->abandoned;
  m->abandoned = seg;
  m->abandoned_count++;
}

/* 217 keeps no list: an abandoned segment of an arena is a bit of the
 * arena's blocks_abandoned map (_mi_arena_segment_mark_abandoned, 217
 * arena.c:780-800); one outside arenas is only counted, and only a free
 * into it reclaims it. */
static void mark_abandoned217(mi_model_t *m, uint32_t seg) {
  S(m, seg)->abandoned_mark = S(m, seg)->arena != 0;
  m->abandoned_count++;
}

/* A search of the abandoned maps (mi_arena_field_cursor_t): it starts at
 * bit 1 of the first arena's first field, as 217 arena.c:823-829 adds one
 * to the cursor's initial bit (so a segment at the first arena's block 0
 * is never found), and visits the arenas from a random one (:817-820):
 * the first, as with one arena. */
typedef struct cursor217_s cursor217_t;
struct cursor217_s {
  uint32_t arena, block; /* the last found; arena 1, block 0 at first */
};

/* _mi_arena_segment_clear_abandoned_next (217 arena.c:823-866): the marked
 * segment after the cursor in (arena, block) order, unmarked; 0 if none. */
static uint32_t abandoned_next217(mi_model_t *m, cursor217_t *c) {
  uint32_t best = 0;
  for (uint32_t i = 1; i < m->segs_n; i++) {
    const mseg_t *s = S(m, i);
    if (!s->live || !s->abandoned_mark || s->arena < c->arena ||
        (s->arena == c->arena && s->arena_block <= c->block))
      continue;
    if (best == 0 || s->arena < S(m, best)->arena ||
        (s->arena == S(m, best)->arena &&
         s->arena_block < S(m, best)->arena_block))
      best = i;
  }
  if (best == 0)
    return 0;
  S(m, best)->abandoned_mark = false;
  m->abandoned_count--;
  c->arena = S(m, best)->arena;
  c->block = S(m, best)->arena_block;
  return best;
}

static void visited_push(mi_model_t *m, uint32_t seg) {
  S(m, seg)->abandoned_next = m->abandoned_visited;
  S(m, seg)->in_visited = true;
  m->abandoned_visited = seg;
  m->abandoned_count++;
}

/* mi_abandoned_visited_revisit (:1111-1152): the visited list goes in
 * front of the abandoned list, in its order. */
static bool visited_revisit(mi_model_t *m) {
  uint32_t first = m->abandoned_visited;
  if (first == 0)
    return false;
  m->abandoned_visited = 0;
  uint32_t last = first;
  for (;;) {
    S(m, last)->in_visited = false;
    if (S(m, last)->abandoned_next == 0)
      break;
    last = S(m, last)->abandoned_next;
  }
  S(m, last)->abandoned_next = m->abandoned;
  m->abandoned = first;
  return true;
}

/* mi_abandoned_pop (:1180-1214). */
static uint32_t abandoned_pop(mi_model_t *m) {
  if (m->abandoned == 0 && !visited_revisit(m))
    return 0;
  uint32_t seg = m->abandoned;
  m->abandoned = S(m, seg)->abandoned_next;
  S(m, seg)->abandoned_next = 0;
  m->abandoned_count--;
  return seg;
}

/* The next abandoned segment of a search: 217's map order, else the list's
 * (mi_abandoned_pop). */
static uint32_t abandoned_take(mi_model_t *m, cursor217_t *c) {
  return m->version == MV_217 ? abandoned_next217(m, c) : abandoned_pop(m);
}

/* A segment a search looked at and left: 217 marks it again, behind the
 * search's cursor (217 segment.c:1328); the others put it on the visited
 * list (mi_abandoned_visited_push). */
static void abandoned_leave(mi_model_t *m, uint32_t seg) {
  if (m->version == MV_217)
    mark_abandoned217(m, seg);
  else
    visited_push(m, seg);
}

/* mi_segment_abandon (:1217-1247; 217 :1080-1113). */
static void segment_abandon(mi_model_t *m, uint32_t seg) {
  mseg_t *s = S(m, seg);
  for (uint32_t i = 0; i < s->slice_entries;) {
    mslice_t *sl = &s->slices[i];
    uint32_t  n = sl->count ? sl->count : 1;
    if (sl->state == 0) {
      span_remove_from_queue(m, seg, i);
      S(m, seg)->slices[i].state = 0;
    }
    i += n;
  }
  bool force = m->abandoned_purge;
  if (m->version == MV_217 && S(m, seg)->arena == 0)
    force = true; /* 217 :1100-1101: not reclaimable without a free */
  try_purge(m, seg, force);
  s = S(m, seg);
  m->tlds[s->tld].segment_count--;
  if (s->was_reclaimed) { /* 217 :1108-1111 */
    m->tlds[s->tld].reclaim_count--;
    s->was_reclaimed = false;
  }
  s->tld = 0;
  s->abandoned_visits = 1;
  if (m->version == MV_217)
    mark_abandoned217(m, seg);
  else
    abandoned_push(m, seg);
}

/* _mi_segment_page_abandon (:1249-1265). */
void mi_segment_page_abandon(mi_model_t *m, uint32_t page) {
  uint32_t seg = P(m, page)->seg;
  P(m, page)->delayed = MI_NEVER_DELAYED_FREE;
  mseg_t *s = S(m, seg);
  s->abandoned++;
  if (s->used == s->abandoned)
    segment_abandon(m, seg);
}

/* CPython's _PyMem_mi_page_is_safe_to_free (segment.c:1283, 1361): an
 * all-free page whose QSBR goal has not been reached stays. */
static bool safe_to_free(mi_model_t *m, uint32_t page) {
  return !m->has_hooks || m->hooks.page_safe_to_free == NULL ||
         m->hooks.page_safe_to_free(m->hooks.ctx, m, page);
}

static bool page_has_any_available(const mpage_t *p) {
  return p->used < p->reserved || p->tfree_n != 0;
}

/* mi_segment_check_free (:1279-1322): free the pages other threads
 * emptied; is there room for slices_needed or a block of block_size? */
static bool segment_check_free(mi_model_t *m, uint32_t seg,
                               uint32_t slices_needed, uint64_t block_size) {
  bool has_page = false;
  for (uint32_t i = m->g.info_slices; i < S(m, seg)->slice_entries;) {
    mslice_t *sl = &S(m, seg)->slices[i];
    if (sl->state != 0) {
      uint32_t page = sl->page;
      mi_page_free_collect(m, page, false);
      mpage_t *p = P(m, page);
      if (p->used == 0 && safe_to_free(m, page)) { /* CPython :1283 */
        S(m, seg)->abandoned--;
        i = page_clear(m, page);
        if (S(m, seg)->slices[i].count >= slices_needed)
          has_page = true;
      } else if (p->block_size == block_size && page_has_any_available(p)) {
        has_page = true;
      }
    } else if (sl->count >= slices_needed) {
      has_page = true;
    }
    i += S(m, seg)->slices[i].count;
  }
  return has_page;
}

/* mi_segment_reclaim (:1326-1387); 0 if the segment was freed. */
static uint32_t segment_reclaim(mi_model_t *m, uint32_t seg, uint32_t heap,
                                uint64_t requested, bool *right) {
  if (right)
    *right = false;
  uint32_t tld = H(m, heap)->tld;
  mseg_t  *s = S(m, seg);
  s->tld = tld;
  s->abandoned_visits = 0;
  m->tlds[tld].segment_count++;
  if (m->version == MV_217) { /* 217 :1195-1196 */
    s->was_reclaimed = true;
    m->tlds[tld].reclaim_count++;
  }
  for (uint32_t i = m->g.info_slices; i < S(m, seg)->slice_entries;) {
    mslice_t *sl = &S(m, seg)->slices[i];
    if (sl->state != 0) {
      uint32_t page = sl->page;
      S(m, seg)->abandoned--;
      uint32_t target = heap;
      if (m->version == MV_217 || m->heap_tags) /* 217 :1217, CPython :1350 */
        target = mi_heap_by_tag(m, heap, P(m, page)->tag);
      if (target == 0)
        target = heap;
      mpage_t *p = P(m, page);
      p->heap = target;
      p->delayed = MI_USE_DELAYED_FREE;
      mi_page_free_collect(m, page, false);
      p = P(m, page);
      if (p->used == 0 && safe_to_free(m, page)) { /* CPython :1361 */
        i = page_clear(m, page);
      } else {
        mi_pq_push(m, target, mi_page_queue_bin(m, p), page); /* page.c:246 */
        mi_hook_page_event(m, page, MI_PAGE_RECLAIMED); /* CPython page.c:277 */
        p = P(m, page);
        if (requested == p->block_size && page_has_any_available(p) &&
            target == heap && right)
          *right = true;
      }
    } else {
      i = span_free_coalesce(m, seg, i);
    }
    i += S(m, seg)->slices[i].count;
  }
  if (S(m, seg)->used == 0) {
    segment_free(m, seg);
    return 0;
  }
  return seg;
}

void mi_abandoned_reclaim_all(mi_model_t *m, uint32_t heap) {
  cursor217_t c = {1, 0};
  uint32_t    seg;
  while ((seg = abandoned_take(m, &c)) != 0)
    segment_reclaim(m, seg, heap, 0, NULL);
}

/* 217 _mi_segment_attempt_reclaim (segment.c:1258-1269), from a free by
 * the thread of tld into abandoned segment seg (free.c:243-254, with
 * abandoned_reclaim_on_free): into the thread's heap, unless it already
 * owns twice as many segments by reclaim as it has segments.  Whether the
 * free may then go on as the thread's own. */
bool mi_segment_attempt_reclaim(mi_model_t *m, uint32_t tld, uint32_t seg) {
  if (m->version != MV_217 || m->reclaim_on_free == 0 || tld == 0)
    return false;
  mseg_t *s = S(m, seg);
  mtld_t *t = &m->tlds[tld];
  if (s->tld != 0 || t->heap_backing == 0 ||
      t->reclaim_count * 2 > t->segment_count)
    return false;
  /* _mi_arena_segment_clear_abandoned (arena.c:762-778): the map's bit,
   * or (outside arenas) the count alone */
  if (s->arena != 0 && !s->abandoned_mark)
    return false;
  s->abandoned_mark = false;
  m->abandoned_count--;
  return segment_reclaim(m, seg, t->heap_backing, 0, NULL) != 0;
}

/* mi_segment_try_reclaim (:1396-1432). */
static uint32_t segment_try_reclaim(mi_model_t *m, uint32_t heap,
                                    uint32_t needed, uint64_t block_size,
                                    bool *reclaimed) {
  *reclaimed = false;
  int64_t tries = m->max_segment_reclaim;
  if (m->version == MV_217) {
    /* 217 mi_segment_get_reclaim_tries (:1279-1290): a percentage of the
     * abandoned segments, at least 8 when there are more than 8 */
    uint64_t total = m->abandoned_count;
    uint64_t rel = total * (uint64_t)tries / 100;
    tries = rel <= 1 ? 1 : (rel > 1024 ? 1024 : (int64_t)rel);
    if (tries < 8 && total > 8)
      tries = 8;
    if (total == 0)
      tries = 0;
  } else {
    if (tries < 8)
      tries = 8;
    if (tries > 1024)
      tries = 1024;
  }
  cursor217_t c = {1, 0};
  uint32_t    seg;
  while (tries-- > 0 && (seg = abandoned_take(m, &c)) != 0) {
    S(m, seg)->abandoned_visits++;
    bool has_page = segment_check_free(m, seg, needed, block_size);
    if (S(m, seg)->used == 0) {
      segment_reclaim(m, seg, heap, 0, NULL);
    } else if (has_page) {
      return segment_reclaim(m, seg, heap, block_size, reclaimed);
    } else if (S(m, seg)->abandoned_visits > 3) {
      segment_reclaim(m, seg, heap, 0, NULL);
    } else {
      try_purge(m, seg, m->version != MV_217); /* 217 :1327 */
      abandoned_leave(m, seg);
    }
  }
  return 0;
}

/* _mi_abandoned_collect (:1435-1460). */
void mi_abandoned_collect(mi_model_t *m, uint32_t heap, bool force) {
  int64_t tries = force ? 16 * 1024 : 1024;
  if (m->version == MV_217 && force) /* 217 :1339 */
    tries = (int64_t)m->abandoned_count;
  else if (force)
    visited_revisit(m);
  cursor217_t c = {1, 0};
  uint32_t    seg;
  while (tries-- > 0 && (seg = abandoned_take(m, &c)) != 0) {
    segment_check_free(m, seg, 0, 0);
    if (S(m, seg)->used == 0) {
      segment_reclaim(m, seg, heap, 0, NULL);
    } else {
      try_purge(m, seg, force);
      abandoned_leave(m, seg);
    }
  }
}

/* ---- Page allocation (segment.c:1463-1620) ----------------------------- */

/* mi_segment_reclaim_or_alloc (:1463-1480); 0 with *reclaimed when a page
 * with room went straight into the heap. */
static uint32_t reclaim_or_alloc(mi_model_t *m, uint32_t heap, uint32_t needed,
                                 uint64_t block_size) {
  bool     reclaimed;
  uint32_t seg = segment_try_reclaim(m, heap, needed, block_size, &reclaimed);
  if (reclaimed || seg != 0)
    return reclaimed ? 0 : seg;
  return segment_alloc(m, H(m, heap)->tld, 0, NULL);
}

/* The page size mi_segments_page_alloc takes for required bytes: whole
 * slices, whole 512 KiB medium pages above 512 KiB (:1494; 212 :1487,
 * 217 :1391). */
static uint64_t segments_page_size(uint64_t required) {
  uint64_t align = required > MI_MEDIUM_PAGE ? MI_MEDIUM_PAGE : MI_SLICE_SIZE;
  return (required + align - 1) / align * align;
}

/* The block of the one-block page a request above MI_MEDIUM_OBJ_SIZE_MAX
 * gets, block_size being its _mi_os_good_alloc_size (page.c:817; 212
 * :829, 217 :832).  At 209 and 212 such pages go to the huge queue, whose
 * pages take the page's whole span as their block (page.c:276; 212 :289):
 * a large page's slices (mi_segment_span_allocate :690-691; 212
 * :713-714), so malloc(131073) gets 3 slices, 196608 bytes; at 217 only a
 * huge segment's page does (217 page.c:290), a large page's block is
 * block_size.  Above MI_LARGE_OBJ_SIZE_MAX: a huge segment less its info
 * (mi_segment_huge_page_alloc :1534-1536; 212 :1527-1529, 217
 * :1431-1433).  2.0.5 keeps block_size, large or huge (v2.0.5
 * src/page.c:254, mi_page_init of the requested block size). */
uint64_t mi_segment_big_block_size(const mi_model_t *m, uint64_t block_size) {
  if (m->version == MV_205)
    return block_size;
  if (block_size <= m->g.large_obj_max)
    return m->version >= MV_217 ? block_size : segments_page_size(block_size);
  return (uint64_t)calculate_slices(m, block_size) * MI_SLICE_SIZE -
         info_size(m);
}

/* mi_segments_page_alloc (:1489-1519). */
static uint32_t segments_page_alloc(mi_model_t *m, uint32_t heap,
                                    uint64_t required, uint64_t block_size) {
  uint32_t tld = H(m, heap)->tld;
  uint64_t page_size = segments_page_size(required);
  uint32_t needed = (uint32_t)(page_size / MI_SLICE_SIZE);
  uint32_t page = find_and_allocate(m, tld, needed);
  while (page == 0) {
    if (m->fail != AS_OK || reclaim_or_alloc(m, heap, needed, block_size) == 0)
      return 0;
    page = find_and_allocate(m, tld, needed);
  }
  try_purge(m, P(m, page)->seg, false); /* :1517 */
  return page;
}

/* _mi_segment_page_alloc (:1598-1620). */
uint32_t mi_segment_page_alloc(mi_model_t *m, uint32_t heap,
                               uint64_t block_size) {
  if (block_size <= MI_SMALL_OBJ_MAX)
    return segments_page_alloc(m, heap, block_size, block_size);
  if (block_size <= MI_MEDIUM_OBJ_MAX)
    return segments_page_alloc(m, heap, MI_MEDIUM_PAGE, block_size);
  if (block_size <= m->g.large_obj_max)
    return segments_page_alloc(m, heap, block_size, block_size);
  /* mi_segment_huge_page_alloc (:1521-1551) */
  uint32_t page = 0;
  uint32_t seg = segment_alloc(m, H(m, heap)->tld, block_size, &page);
  if (seg == 0 || page == 0)
    return 0;
  mpage_t *p = P(m, page);
  p->block_size = S(m, seg)->size - info_size(m); /* :1540-1541 */
  return page;
}

/* ---- Counters and teardown ---------------------------------------------- */

uint64_t mi_segs_awaiting_purge(const mi_model_t *m) {
  uint64_t n = 0;
  for (uint32_t i = 1; i < m->segs_n; i++)
    if (m->segs[i].live)
      n += (uint64_t)mask_count(m->segs[i].decommit) * MI_SLICE_SIZE;
  if (m->cache != NULL)
    for (uint32_t i = 0; i < MI_CACHE_MAX; i++)
      if (m->cache[i].inuse)
        n += (uint64_t)mask_count(m->cache[i].commit) * MI_SLICE_SIZE;
  for (uint32_t a = 0; a < m->arenas2_n; a++)
    for (uint32_t b = 0; b < m->arenas2[a].blocks; b++)
      if (m->arenas2[a].purge[b])
        n += ARENA_BLOCK;
  return n;
}

/* ---- Heap map ------------------------------------------------------------ */

/* A live segment: level 0, its info slices, then its spans in address
 * order (a page, or a free span split by its purge-mask bits). */
static as_status_t walk_segment(const mi_model_t *m, uint32_t seg,
                                const mi_walker_t *w) {
  const mseg_t  *s = &m->segs[seg];
  model_region_t r = {.addr = s->base,
                      .bytes = s->size,
                      .live_bytes = w->unit_live[2 * seg],
                      .live_objects = w->unit_live[2 * seg + 1],
                      .kind =
                          s->kind == MI_SEG_HUGE ? "huge segment" : "segment",
                      .state = s->used ? MODEL_REGION_LIVE : MODEL_REGION_FREE};
  as_status_t    rc = w->fn(w->user, &r, w->err);
  if (rc == AS_OK)
    rc = mi_walk_emit(w, s->base, info_size(m), "segment info", MI_MECH_META, 1,
                      MODEL_REGION_METADATA);
  for (uint32_t i = m->g.info_slices; i < s->segment_slices && rc == AS_OK;) {
    const mslice_t *sl = i < s->slice_entries ? &s->slices[i] : NULL;
    if (sl != NULL && sl->state >= 2 && sl->page != 0) {
      rc = mi_walk_page(m, sl->page, w);
      i += m->pages[sl->page].slice_count;
      continue;
    }
    uint32_t n = sl != NULL && sl->count != 0 ? sl->count : 1;
    if (i + n > s->segment_slices)
      n = s->segment_slices - i;
    rc = mi_walk_free_slices(w, s->base, i, i + n, NULL, s->decommit);
    i += n;
  }
  return rc;
}

/* Segments, then 2.0.9's cached segments or 2.1's freed arena blocks
 * (ever used, not in use), then 2.1.2's arena descriptors. */
as_status_t mi_segs_walk(const mi_model_t *m, const mi_walker_t *w) {
  as_status_t rc = AS_OK;
  for (uint32_t i = 1; i < m->segs_n && rc == AS_OK; i++)
    if (m->segs[i].live)
      rc = walk_segment(m, i, w);
  for (uint32_t i = 0; m->cache != NULL && i < MI_CACHE_MAX && rc == AS_OK; i++)
    if (m->cache[i].inuse)
      rc = mi_walk_unit(w, m->cache[i].base, seg_size(m), "cached segment",
                        MI_MECH_CACHE, MODEL_REGION_CACHED);
  for (uint32_t a = 0; a < m->arenas2_n && rc == AS_OK; a++) {
    const marena2_t *ar = &m->arenas2[a];
    for (uint32_t b = 0; b < ar->blocks && rc == AS_OK; b++) {
      if (ar->inuse[b] || !ar->dirty[b])
        continue;
      rc = mi_walk_unit(w, ar->base + (uint64_t)b * ARENA_BLOCK, ARENA_BLOCK,
                        "freed arena block", MI_MECH_ARENA, MODEL_REGION_FREE);
    }
    if (ar->meta != 0 && rc == AS_OK)
      rc = mi_walk_unit(w, ar->meta, MI_OS_PAGE, "arena descriptor",
                        MI_MECH_META, MODEL_REGION_METADATA);
  }
  return rc;
}

void mi_segs_destroy(mi_model_t *m) {
  for (uint32_t i = 1; i < m->segs_n && i < m->segs_tab.len; i++)
    free(m->segs[i].slices);
  sim_idtable_free(&m->segs_tab);
  for (uint32_t a = 0; a < m->arenas2_n; a++)
    free(m->arenas2[a].inuse);
  free(m->arenas2);
  free(m->cache);
}
