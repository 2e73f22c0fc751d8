/* tests/validation/musl/musl_replay.c -- runs tests/validation/seq_gen.h's
 * sequence through the real mallocng of musl 1.2.3 and writes a snapshot of
 * its struct malloc_context (musl/musl_snapshot.h), with where each object
 * allocated since the last one sits in its slot, before the first call and
 * after every CHECK calls (at most MSNAP_PLACES), to stdout.
 *
 *   musl_replay SEED MIX NIDS STEPS CHECK      (built with musl-gcc -static)
 *
 * Alignments stop at a page (seq_init's 12): above it, where the kernel
 * puts a mapping (ASLR) decides where an aligned object lands in its slot,
 * and so whether a later realloc fits in place.
 * A static program can read the context although it is hidden: hidden
 * symbols are resolved within the one executable.  The declarations below
 * mirror meta.h:24-58 of musl v1.2.3 (struct meta, struct meta_area,
 * struct malloc_context; PAGESIZE is a constant on x86-64, so the context
 * has no pagesize field).  Nothing here allocates but the sequence: no
 * stdio, output with write(2).  Exit status: 2 bad arguments, 3 an
 * allocation failed, 6 write failed.
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../seq_gen.h"
#include "musl_snapshot.h"

struct meta {
  struct meta   *prev, *next;
  unsigned char *mem; /* struct group: meta pointer, active_idx:5 */
  volatile int   avail_mask, freed_mask;
  uintptr_t      last_idx : 5;
  uintptr_t      freeable : 1;
  uintptr_t      sizeclass : 6;
  uintptr_t      maplen : 8 * sizeof(uintptr_t) - 12;
};

struct meta_area {
  uint64_t          check;
  struct meta_area *next;
  int               nslots;
};

struct malloc_context {
  uint64_t          secret;
  int               init_done;
  unsigned          mmap_counter;
  struct meta      *free_meta_head;
  struct meta      *avail_meta;
  size_t            avail_meta_count, avail_meta_area_count, meta_alloc_shift;
  struct meta_area *meta_area_head, *meta_area_tail;
  unsigned char    *avail_meta_areas;
  struct meta      *active[48];
  size_t            usage_by_class[48];
  uint8_t           unmap_seq[32], bounces[32];
  uint8_t           seq;
  uintptr_t         brk;
};

extern struct malloc_context __malloc_context
    __attribute__((visibility("hidden")));
extern const uint16_t __malloc_size_classes[] /* glue.h:17 */
    __attribute__((visibility("hidden")));

#define UNIT 16

/* Where object p sits (musl_snapshot.h), from the header before it as
 * get_meta finds its group (meta.h:129-160). */
static uint32_t place_of(const unsigned char *p) {
  uint64_t offset = *(const uint16_t *)(p - 2);
  if (p[-4])
    offset = *(const uint32_t *)(p - 8);
  const struct meta *m = *(struct meta *const *)(p - UNIT * offset - UNIT);
  uint32_t           slot = p[-3] & 31u;
  return msnap_place(
      slot, offset - (m->sizeclass < 48
                          ? (uint64_t)__malloc_size_classes[m->sizeclass] * slot
                          : 0));
}

/* Fills s but for its placements, which main keeps. */
static void snapshot(msnap_t *s) {
  const struct malloc_context *c = &__malloc_context;
  memset(s, 0, offsetof(msnap_t, nplaces));
  s->mmap_counter = c->mmap_counter;
  s->seq = c->seq;
  for (const struct meta_area *a = c->meta_area_head; a != NULL; a = a->next)
    s->meta_areas++;
  if (c->free_meta_head != NULL) {
    const struct meta *m = c->free_meta_head;
    do
      s->free_metas++;
    while ((m = m->next) != c->free_meta_head);
  }
  for (int sc = 0; sc < MSNAP_CLASSES; sc++) {
    msnap_class_t *k = &s->cls[sc];
    k->usage = c->usage_by_class[sc];
    k->bounces = sc >= 7 && sc < 39 ? c->bounces[sc - 7] : 0;
    const struct meta *h = c->active[sc], *m = h;
    if (h == NULL)
      continue;
    do {
      if (k->ngroups < MSNAP_GROUPS)
        k->group[k->ngroups] = (msnap_group_t){
            (uint32_t)m->last_idx + 1, (uint32_t)m->avail_mask,
            (uint32_t)m->freed_mask, (uint32_t)m->maplen, m->mem[8] & 31u};
      k->ngroups++;
    } while ((m = m->next) != h);
  }
}

int main(int argc, char **argv) {
  static void     *ptr[SEQ_MAX_IDS];
  static msnap_t   snap;
  static seq_gen_t g;
  if (argc != 6)
    return 2;
  uint64_t seed = strtoull(argv[1], NULL, 10);
  unsigned mix = (unsigned)atoi(argv[2]), nids = (unsigned)atoi(argv[3]);
  uint64_t steps = strtoull(argv[4], NULL, 10),
           check = strtoull(argv[5], NULL, 10);
  if (check == 0 || check > MSNAP_PLACES || nids == 0 || nids > SEQ_MAX_IDS)
    return 2;
  seq_init(&g, seed, (seq_mix_t)mix, nids, 0, 12);
  snapshot(&snap);
  if (write(1, &snap, sizeof snap) != (ssize_t)sizeof snap)
    return 6;
  for (uint64_t step = 0; step < steps; step++) {
    seq_call_t c;
    seq_next(&g, step, &c);
    switch (c.op) {
    case SEQ_MALLOC:
      ptr[c.id] = malloc(c.size);
      break;
    case SEQ_CALLOC:
      ptr[c.id] = calloc(1, c.size);
      break;
    case SEQ_MEMALIGN:
      if (posix_memalign(&ptr[c.id], c.align, c.size) != 0)
        ptr[c.id] = NULL;
      break;
    case SEQ_REALLOC:
      ptr[c.id] = realloc(ptr[c.id], c.size);
      break;
    case SEQ_FREE:
      free(ptr[c.id]);
      ptr[c.id] = NULL;
      break;
    case SEQ_PURGE:
      break;
    }
    if (c.op != SEQ_FREE && c.op != SEQ_PURGE) {
      if (ptr[c.id] == NULL)
        return 3;
      snap.place[snap.nplaces++] = place_of(ptr[c.id]);
    }
    if ((step + 1) % check == 0) {
      snapshot(&snap);
      if (write(1, &snap, sizeof snap) != (ssize_t)sizeof snap)
        return 6;
      snap.nplaces = 0;
    }
  }
  return 0;
}
