/* tests/validation/test_musl_differential.c -- the musl model against the
 * real mallocng of Debian 12's musl 1.2.3, state for state.
 *
 * One seeded sequence (tests/validation/seq_gen.h: malloc, calloc,
 * posix_memalign up to 4 KiB alignment, realloc, free) runs twice:
 *   real   in musl/musl_replay.c, a static program built with musl-gcc
 *          (static: no dynamic linker donates memory to the heap), which
 *          reads musl's struct malloc_context after every CHECK calls;
 *   model  in this process, as trace events on a fresh simulated kernel.
 * At every checkpoint both must agree on: ctx.mmap_counter and seq, the
 * number of meta areas and of queued free metas, and for every size class
 * usage_by_class, the bounce counter, the length of the active list and,
 * for its first groups from the head, the slot count, the avail and freed
 * masks, the mapping length and the active index; and between checkpoints,
 * for every object allocated or reallocated, its slot and where in the
 * slot it starts (enframe's offset cycling, meta.h:196-218).
 * Placements may differ where the model's one approximation shows: bytes
 * musl writes in the middle of a slot (the header before an object placed
 * mid-slot, which free sets to 255 and 0, free.c:112-115; a dead group's
 * header; set_size's zero byte) are not kept, and a group later born in
 * that slot finds zeros where mallocng finds them.  Measured (2026-12-07):
 * 53 of 112,040 placements in the mixed sequence, 319 of 55,658 in the one
 * with 300 ids (slots emptied and refilled all the time), 0 of 4,469
 * chunks.  A trial model that kept the headers freed mid-slot objects
 * leave had 13 and 151, but it replayed the churn benchmark trace 38 %
 * slower with 396 K such records, for no change in RSS on nine of ten
 * traces (8-32 KiB on the tenth), so the model does not keep them.
 * Reading a slot's recorded field one unit high (hdr_natural + 1) moves
 * 253 of the mixed sequence's, over its bound of 1 per 1000.
 * Configurations: a mixed sequence (55% 1-256 B ... 2% 64-600 KiB), the
 * same with 300 ids (classes emptying and filling again), and one of
 * 256 KiB - 3 MiB chunks.
 *
 * Alignments above a page are left out: mallocng's groups are mappings,
 * whose addresses ASLR draws, and the address decides where an object
 * aligned above a page sits in its slot, hence whether a later realloc
 * fits in place (aligned_alloc.c:274, realloc.c:21-23).
 *
 * Requirements: musl-gcc at configure time (apt-get install musl-tools;
 * the test skips without the helper).  Not here: RSS (the helper writes
 * nothing; the measured runs check RSS).
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../helpers/spawn_child.h"
#include "models/musl.h"
#include "musl/musl_snapshot.h"
#include "seq_gen.h"
#include "sim/kernel.h"

#ifndef ALLOCSIM_MUSL_REPLAY
#define ALLOCSIM_MUSL_REPLAY "" /* not built: musl-gcc was not found */
#endif

#define MAX_SNAPS 32

typedef struct mcfg_s {
  const char *name;
  uint64_t    seed;
  seq_mix_t   mix;
  uint32_t    nids, steps, check_every;
  uint32_t    moved_permille; /* placements allowed to differ, per 1000
                                 (the model's approximation, file comment) */
} mcfg_t;

static void run_real(const mcfg_t *cfg, msnap_t *snaps, size_t n) {
  static const char *const drop[] = {"LD_PRELOAD=", NULL};
  char                     a[5][32];
  snprintf(a[0], sizeof a[0], "%" PRIu64, cfg->seed);
  snprintf(a[1], sizeof a[1], "%d", (int)cfg->mix);
  snprintf(a[2], sizeof a[2], "%u", cfg->nids);
  snprintf(a[3], sizeof a[3], "%u", cfg->steps);
  snprintf(a[4], sizeof a[4], "%u", cfg->check_every);
  char           arg0[] = "musl_replay";
  char          *argv[] = {arg0, a[0], a[1], a[2], a[3], a[4], NULL};
  child_result_t r = spawn_child(ALLOCSIM_MUSL_REPLAY, argv, drop, NULL, snaps,
                                 n * sizeof *snaps);
  if (r.spawn_err != 0)
    fail_msg("%s: posix_spawn(%s): %s", cfg->name, ALLOCSIM_MUSL_REPLAY,
             strerror(r.spawn_err));
  if (r.status != 0)
    fail_msg("%s: musl_replay %s %d (2 bad arguments, 3 allocation failed, "
             "6 write failed)",
             cfg->name, r.signal ? "was killed by signal" : "exited",
             r.signal ? r.signal : r.status);
  if (r.got != n * sizeof *snaps || r.extra)
    fail_msg("%s: musl_replay wrote %s%zu bytes, expected %zu", cfg->name,
             r.extra ? "more than " : "", r.got, n * sizeof *snaps);
}

/* Fills s but for its placements, which run_model keeps. */
static void model_snapshot(const model_t *m, msnap_t *s) {
  static musl_class_state_t cls[MSNAP_CLASSES];
  musl_context_t            ctx;
  memset(s, 0, offsetof(msnap_t, nplaces));
  musl_context(m, &ctx);
  s->mmap_counter = ctx.mmap_counter;
  s->seq = ctx.seq;
  s->meta_areas = ctx.meta_areas;
  s->free_metas = ctx.free_metas;
  size_t n = musl_inspect(m, cls, MSNAP_CLASSES);
  for (size_t i = 0; i < n; i++) {
    msnap_class_t *k = &s->cls[cls[i].sizeclass];
    k->usage = cls[i].usage;
    k->bounces = cls[i].bounces;
    k->ngroups = cls[i].ngroups;
    for (uint32_t j = 0; j < cls[i].ngroups && j < MSNAP_GROUPS; j++) {
      const musl_group_state_t *g = &cls[i].group[j];
      k->group[j] = (msnap_group_t){g->slots, g->avail_mask, g->freed_mask,
                                    g->maplen, g->active_idx};
    }
  }
}

static size_t run_model(const mcfg_t *cfg, msnap_t *snaps) {
  static seq_gen_t    g;
  sim_kernel_config_t kc;
  sim_kernel_t       *k = NULL;
  model_t            *m = NULL;
  as_err_t            err;
  sim_kernel_config_default(&kc);
  assert_int_equal(sim_kernel_create(&kc, &k, &err), AS_OK);
  model_ctx_t ctx = {.kernel = k};
  assert_int_equal(model_create_from_spec("musl", &ctx, &m, &err), AS_OK);
  seq_init(&g, cfg->seed, cfg->mix, cfg->nids, 0, 12);
  memset(snaps, 0, MAX_SNAPS * sizeof *snaps);
  size_t n = 0;
  model_snapshot(m, &snaps[n++]);
  for (uint64_t step = 0; step < cfg->steps; step++) {
    seq_call_t    c;
    trace_event_t ev = {0};
    seq_next(&g, step, &c);
    ev.t_ns = step;
    ev.id = c.id;
    ev.size = c.size;
    ev.align = c.align;
    ev.prev_size = c.prev_size;
    ev.flags = TRACE_FLAG_UNWRITTEN; /* the helper writes nothing */
    as_status_t rc = AS_OK;
    switch (c.op) {
    case SEQ_MALLOC:
    case SEQ_CALLOC:
    case SEQ_MEMALIGN:
      ev.op = c.op == SEQ_MALLOC   ? TRACE_MALLOC
              : c.op == SEQ_CALLOC ? TRACE_CALLOC
                                   : TRACE_MEMALIGN;
      rc = model_alloc(m, &ev, &err);
      break;
    case SEQ_REALLOC:
      ev.op = TRACE_REALLOC;
      rc = model_realloc(m, &ev, &err);
      break;
    case SEQ_FREE:
      ev.op = TRACE_FREE;
      rc = model_free(m, &ev, &err);
      break;
    case SEQ_PURGE:
      break;
    }
    if (rc != AS_OK)
      fail_msg("%s: step %" PRIu64 ": %s", cfg->name, step, err.msg);
    if (c.op != SEQ_FREE && c.op != SEQ_PURGE) {
      uint32_t slot;
      uint64_t offset;
      assert_true(musl_object_place(m, c.id, &slot, &offset));
      snaps[n].place[snaps[n].nplaces++] = msnap_place(slot, offset / 16);
    }
    if ((step + 1) % cfg->check_every == 0)
      model_snapshot(m, &snaps[n++]);
  }
  model_destroy(m);
  sim_kernel_destroy(k);
  return n;
}

/* The first difference, named. */
static void compare(const mcfg_t *cfg, size_t s, const msnap_t *r,
                    const msnap_t *m) {
  const char *what = NULL;
  uint64_t    rv = 0, mv = 0;
  int         sc = -1, gi = -1;
#define DIFF(name, a, b)                                                       \
  if (what == NULL && (uint64_t)(a) != (uint64_t)(b)) {                        \
    what = name;                                                               \
    rv = (uint64_t)(a);                                                        \
    mv = (uint64_t)(b);                                                        \
  }
  DIFF("allocations since the last checkpoint", r->nplaces, m->nplaces);
  DIFF("mmap_counter", r->mmap_counter, m->mmap_counter);
  DIFF("seq", r->seq, m->seq);
  DIFF("meta areas", r->meta_areas, m->meta_areas);
  DIFF("free metas", r->free_metas, m->free_metas);
  for (int c = 0; c < MSNAP_CLASSES && what == NULL; c++) {
    const msnap_class_t *a = &r->cls[c], *b = &m->cls[c];
    sc = c;
    DIFF("usage_by_class", a->usage, b->usage);
    DIFF("bounces", a->bounces, b->bounces);
    DIFF("groups on the active list", a->ngroups, b->ngroups);
    gi = -1;
    for (int j = 0; j < MSNAP_GROUPS && what == NULL; j++) {
      gi = j;
      DIFF("slots", a->group[j].slots, b->group[j].slots);
      DIFF("avail_mask", a->group[j].avail_mask, b->group[j].avail_mask);
      DIFF("freed_mask", a->group[j].freed_mask, b->group[j].freed_mask);
      DIFF("maplen", a->group[j].maplen, b->group[j].maplen);
      DIFF("active_idx", a->group[j].active_idx, b->group[j].active_idx);
    }
  }
#undef DIFF
  if (what != NULL)
    fail_msg("%s: checkpoint %zu (after %zu calls): class %d group %d: %s is "
             "%#" PRIx64 " for mallocng, %#" PRIx64 " for the model",
             cfg->name, s, s * cfg->check_every, sc, gi, what, rv, mv);
}

/* Where objects sit in their slots: at most moved_permille of them may
 * sit elsewhere in the model than in mallocng. */
static void compare_places(const mcfg_t *cfg, const msnap_t *r,
                           const msnap_t *m, size_t n) {
  uint64_t all = 0, moved = 0;
  size_t   first_s = 0, first_i = 0;
  for (size_t s = 0; s < n; s++)
    for (uint32_t i = 0; i < r[s].nplaces; i++, all++)
      if (r[s].place[i] != m[s].place[i] && moved++ == 0) {
        first_s = s;
        first_i = i;
      }
  print_message("%s: %" PRIu64 " of %" PRIu64 " objects sit elsewhere in "
                "their slot than in mallocng\n",
                cfg->name, moved, all);
  if (moved * 1000 > all * cfg->moved_permille) {
    uint32_t a = r[first_s].place[first_i], b = m[first_s].place[first_i];
    fail_msg("%s: %" PRIu64 " of %" PRIu64 " objects sit elsewhere, over "
             "%u per 1000; the first is allocation %u after checkpoint %zu: "
             "slot %u, %u units in for mallocng, slot %u, %u units for the "
             "model",
             cfg->name, moved, all, cfg->moved_permille, first_i + 1,
             first_s - 1, a >> 27, a & ((1u << 27) - 1), b >> 27,
             b & ((1u << 27) - 1));
  }
}

static void check(const mcfg_t *cfg) {
  if (ALLOCSIM_MUSL_REPLAY[0] == '\0' || access(ALLOCSIM_MUSL_REPLAY, X_OK)) {
    print_message("musl_replay not built: apt-get install musl-tools and "
                  "reconfigure\n");
    skip();
  }
  static msnap_t real[MAX_SNAPS], model[MAX_SNAPS];
  size_t         n = cfg->steps / cfg->check_every + 1;
  assert_true(n <= MAX_SNAPS && cfg->check_every <= MSNAP_PLACES);
  run_real(cfg, real, n);
  assert_int_equal(run_model(cfg, model), n);
  for (size_t s = 0; s < n; s++)
    compare(cfg, s, &real[s], &model[s]);
  compare_places(cfg, real, model, n);
}

static void mixed(void **state) {
  (void)state;
  const mcfg_t c = {"mixed", 11, SEQ_MIX_MIXED, 3000, 200000, 10000, 1};
  check(&c);
}

static void few_ids(void **state) {
  (void)state;
  /* Slots refill so often that the unkept mid-slot bytes show more. */
  const mcfg_t c = {"few_ids", 12, SEQ_MIX_MIXED, 300, 100000, 5000, 10};
  check(&c);
}

static void large(void **state) {
  (void)state;
  const mcfg_t c = {"large", 13, SEQ_MIX_LARGE, 32, 8000, 400, 0};
  check(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mixed),
      cmocka_unit_test(few_ids),
      cmocka_unit_test(large),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
