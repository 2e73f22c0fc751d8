/* traces/addr_ids.c -- addresses to dense, recycled object ids (see
 * addr_ids.h).
 *
 * Moved out of analysis/record.c so that every importer shares one mapper.
 * Trade-off: the free ids sit in a binary min-heap (O(log n) per free and
 * reuse) rather than a bitmap scanned for the lowest clear bit, which would
 * be O(peak / 64) per allocation for programs with many live objects.
 */
#include "addr_ids.h"

#include "../sim/grow.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

/* ---- Map ---------------------------------------------------------------- */

static size_t map_hash(uint64_t k, size_t cap) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return (size_t)k & (cap - 1);
}

static bool map_grow(addr_ids_map_t *m) {
  size_t           cap = m->cap ? 2 * m->cap : 4096;
  addr_ids_slot_t *slot = calloc(cap, sizeof *slot);
  if (slot == NULL)
    return false;
  for (size_t i = 0; i < m->cap; i++)
    if (m->slot[i].key != 0) {
      size_t j = map_hash(m->slot[i].key, cap);
      while (slot[j].key != 0)
        j = (j + 1) & (cap - 1);
      slot[j] = m->slot[i];
    }
  free(m->slot);
  m->slot = slot;
  m->cap = cap;
  return true;
}

bool addr_ids_map_get(const addr_ids_map_t *m, uint64_t k, uint64_t *v) {
  if (k == 0) {
    if (m->has_zero)
      *v = m->zero_val;
    return m->has_zero;
  }
  if (m->cap == 0)
    return false;
  for (size_t i = map_hash(k, m->cap);; i = (i + 1) & (m->cap - 1)) {
    if (m->slot[i].key == 0)
      return false;
    if (m->slot[i].key == k) {
      *v = m->slot[i].val;
      return true;
    }
  }
}

bool addr_ids_map_put(addr_ids_map_t *m, uint64_t k, uint64_t v) {
  if (k == 0) {
    m->has_zero = true;
    m->zero_val = v;
    return true;
  }
  if ((m->n + 1) * 2 > m->cap && !map_grow(m))
    return false;
  size_t i = map_hash(k, m->cap);
  while (m->slot[i].key != 0 && m->slot[i].key != k)
    i = (i + 1) & (m->cap - 1);
  if (m->slot[i].key == 0)
    m->n++;
  m->slot[i].key = k;
  m->slot[i].val = v;
  return true;
}

bool addr_ids_map_del(addr_ids_map_t *m, uint64_t k, uint64_t *v) {
  if (k == 0) {
    if (!m->has_zero)
      return false;
    if (v != NULL)
      *v = m->zero_val;
    m->has_zero = false;
    return true;
  }
  if (m->cap == 0)
    return false;
  size_t i = map_hash(k, m->cap);
  while (m->slot[i].key != k) {
    if (m->slot[i].key == 0)
      return false;
    i = (i + 1) & (m->cap - 1);
  }
  if (v != NULL)
    *v = m->slot[i].val;
  /* Backward shift: pull later members of the cluster into the hole. */
  size_t hole = i;
  for (size_t j = (i + 1) & (m->cap - 1); m->slot[j].key != 0;
       j = (j + 1) & (m->cap - 1)) {
    size_t home = map_hash(m->slot[j].key, m->cap);
    bool   movable =
        hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
    if (movable) {
      m->slot[hole] = m->slot[j];
      hole = j;
    }
  }
  m->slot[hole].key = 0;
  m->n--;
  return true;
}

size_t addr_ids_map_count(const addr_ids_map_t *m) {
  return m->n + (m->has_zero ? 1 : 0);
}

void addr_ids_map_free(addr_ids_map_t *m) {
  free(m->slot);
  memset(m, 0, sizeof *m);
}

/* ---- Id pool ------------------------------------------------------------ */

/* The lowest free id, or false when a fresh id needs heap room that cannot
 * be had (heap_cap >= next keeps addr_ids_release allocation-free). */
static bool pool_take(addr_ids_t *p, uint64_t *out) {
  uint64_t id;
  if (p->n == 0) {
    if (p->next == p->heap_cap) {
      uint64_t *h =
          as_grow(p->heap, &p->heap_cap, p->next + 1, sizeof *h, 1024);
      if (h == NULL)
        return false;
      p->heap = h;
    }
    id = p->next++;
  } else {
    id = p->heap[0];
    uint64_t last = p->heap[--p->n];
    size_t   i = 0;
    for (;;) {
      size_t   l = 2 * i + 1, r = l + 1, m = i;
      uint64_t mv = last;
      if (l < p->n && p->heap[l] < mv)
        m = l, mv = p->heap[l];
      if (r < p->n && p->heap[r] < mv)
        m = r;
      if (m == i)
        break;
      p->heap[i] = p->heap[m];
      i = m;
    }
    if (p->n > 0)
      p->heap[i] = last;
  }
  if (++p->live > p->peak)
    p->peak = p->live;
  *out = id;
  return true;
}

void addr_ids_release(addr_ids_t *p, uint64_t id) {
  assert(id < p->next && p->n < p->heap_cap && p->live > 0);
  size_t i = p->n++;
  while (i > 0 && p->heap[(i - 1) / 2] > id) {
    p->heap[i] = p->heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  p->heap[i] = id;
  p->live--;
}

/* ---- Mapper ------------------------------------------------------------- */

bool addr_ids_lookup(const addr_ids_t *m, uint64_t addr, uint64_t *id) {
  return addr_ids_map_get(&m->addr, addr, id);
}

bool addr_ids_add(addr_ids_t *m, uint64_t addr, uint64_t *id) {
  addr_ids_remove(m, addr, NULL); /* contract: addr unmapped; stay sane */
  if (!pool_take(m, id))
    return false;
  if (!addr_ids_map_put(&m->addr, addr, *id)) {
    addr_ids_release(m, *id);
    return false;
  }
  return true;
}

bool addr_ids_remove(addr_ids_t *m, uint64_t addr, uint64_t *id) {
  uint64_t v;
  if (!addr_ids_map_del(&m->addr, addr, &v))
    return false;
  addr_ids_release(m, v);
  if (id != NULL)
    *id = v;
  return true;
}

bool addr_ids_detach(addr_ids_t *m, uint64_t addr, uint64_t *id) {
  return addr_ids_map_del(&m->addr, addr, id);
}

bool addr_ids_attach(addr_ids_t *m, uint64_t addr, uint64_t id) {
  assert(id < m->next);
  addr_ids_remove(m, addr, NULL); /* contract: addr unmapped; stay sane */
  return addr_ids_map_put(&m->addr, addr, id);
}

void addr_ids_free(addr_ids_t *m) {
  addr_ids_map_free(&m->addr);
  free(m->heap);
  memset(m, 0, sizeof *m);
}
