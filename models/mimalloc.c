/* models/mimalloc.c -- mimalloc (Microsoft), versions 2.0.5 (Ubuntu 22.04's
 * libmimalloc2.0, a debug build), 2.0.9 (Debian 12's), 2.1.2 (vendored in
 * CPython 3.13/3.14), 2.1.7, 3.0.1 and 3.4.3: the model interface, options,
 * threads and heaps.
 *
 * Why: mimalloc frees pages into 64 KiB-slice segments (2.x) or arenas
 * (3.x) and gives their memory back only through a delayed purge that runs
 * when the program later touches the same segment or arena -- a later free
 * into it, a page allocated from it, a collect -- never on a timer.  Which
 * segment a page lands in, which pages stay retired, and when each purge
 * expires decide RSS, so this model keeps mimalloc's pages, span queues,
 * purge masks and clocks exactly (mimalloc_int.h: representation;
 * mimalloc_page.c, mimalloc_seg.c, mimalloc_arena3.c: the rules, each
 * citing mimalloc's source at the version's tag).
 *
 * Time.  mimalloc reads a millisecond clock (_mi_clock_now); the model
 * uses the event's time in ms.  Nothing is scheduled: a purge happens only
 * inside an event, as in the real allocator.
 *
 * What it leaves out: secure/debug builds (MI_SECURE, MI_DEBUG, padding:
 * release builds have none), except Ubuntu's 2.0.5, which is one (its
 * padding, fills and mprotect decommit; mi_geometry); large OS pages and
 * huge-page reservations (options default off); NUMA; heap destroy/delete by
 * the program; 3.x's exact free-slice search inside a 64-bit bitmap field
 * and 3.4.3's separated page metadata (see docs/models/mimalloc.md).
 *
 * Sections
 *   Options and versions        Kernel helpers
 *   Threads and heaps           Objects
 *   Model interface             Composition API (mimalloc.h)
 */
#include "mimalloc_int.h"

#include "../sim/threadtab.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Options and versions ----------------------------------------------- */

/* Rows valid only for some versions say so in their help; create() refuses
 * a row the version does not have, naming that version's spelling.  The
 * environment spellings are the ones each version reads (mi_option_init,
 * 209 src/options.c:575-589: MIMALLOC_<name>, else the legacy name of
 * MI_OPTION_LEGACY, listed first here so that the name wins), each guarded
 * by the versions that read it: a version ignores the others' names. */
#define MI_ENV_20   "?version=2.0.5|2.0.9"
#define MI_ENV_21X  "?version=2.1.2|2.1.7"
#define MI_ENV_2X   "?version=2.0.5|2.0.9|2.1.2|2.1.7"
#define MI_ENV_21UP "?version=2.1.2|2.1.7|3.0.1|3.4.3"
#define MI_ENV_3X   "?version=3.0.1|3.4.3"
#define MIMALLOC_OPTIONS(X)                                                    \
  X(MO_VERSION, "version", OPT_ENUM, "2.0.9", "",                              \
    "2.0.5|2.0.9|2.1.2|2.1.7|3.0.1|3.4.3", "meta:mimalloc_version",            \
    "Debian 12 libmimalloc2.0 2.0.9+ds-2; Ubuntu 22.04 2.0.5+ds-2; 2.1.2 in "  \
    "CPython 3.13/3.14",                                                       \
    "mimalloc version (mi_version() of the run)")                              \
  X(MO_DECOMMIT_DELAY, "decommit_delay", OPT_I64, "25", "ms", NULL,            \
    "MIMALLOC_RESET_DELAY" MI_ENV_20 " MIMALLOC_DECOMMIT_DELAY" MI_ENV_20,     \
    "v2.0.9 src/options.c:88",                                                 \
    "2.0.x: delay before freed slices are decommitted (2.1+: purge_delay)")    \
  X(MO_DECOMMIT_EXTEND_DELAY, "decommit_extend_delay", OPT_I64, "1", "ms",     \
    NULL, "MIMALLOC_DECOMMIT_EXTEND_DELAY" MI_ENV_20,                          \
    "v2.0.9 src/options.c:97 (1); v2.0.5 :96 (2)",                             \
    "2.0.x: extra delay per further free into the segment")                    \
  X(MO_SEGMENT_DECOMMIT_DELAY, "segment_decommit_delay", OPT_I64, "500", "ms", \
    NULL, "MIMALLOC_SEGMENT_DECOMMIT_DELAY" MI_ENV_20,                         \
    "v2.0.9 src/options.c:96", "2.0.x: delay for segments in the cache")       \
  X(MO_ALLOW_DECOMMIT, "allow_decommit", OPT_BOOL, "1", "", NULL,              \
    "MIMALLOC_ALLOW_DECOMMIT" MI_ENV_20, "v2.0.9 src/options.c:95",            \
    "2.0.x: decommit freed memory at all")                                     \
  X(MO_ABANDONED_PAGE_DECOMMIT, "abandoned_page_decommit", OPT_BOOL, "0", "",  \
    NULL,                                                                      \
    "MIMALLOC_ABANDONED_PAGE_RESET" MI_ENV_20                                  \
    " MIMALLOC_ABANDONED_PAGE_DECOMMIT" MI_ENV_20,                             \
    "v2.0.9 src/options.c:79",                                                 \
    "2.0.x: decommit at once when a thread abandons a segment")                \
  X(MO_PURGE_DELAY, "purge_delay", OPT_I64, "10", "ms", NULL,                  \
    "MIMALLOC_RESET_DELAY" MI_ENV_21UP " MIMALLOC_PURGE_DELAY" MI_ENV_21UP,    \
    "v2.1.2 src/options.c:78 (10); v3.0.1 :147 (2500); v3.4.3 :140 (1000)",    \
    "2.1+: delay before freed memory is purged; 0 = at once, <0 = never")      \
  X(MO_PURGE_EXTEND_DELAY, "purge_extend_delay", OPT_I64, "1", "ms", NULL,     \
    "MIMALLOC_DECOMMIT_EXTEND_DELAY?version=2.1.2|2.1.7|3.0.1"                 \
    " MIMALLOC_PURGE_EXTEND_DELAY?version=2.1.2|2.1.7|3.0.1",                  \
    "v2.1.2 src/options.c:92 (3.4.3: deprecated_purge_extend_delay, :150)",    \
    "2.1+: extra delay per further free into the segment")                     \
  X(MO_PURGE_DECOMMITS, "purge_decommits", OPT_BOOL, "1", "", NULL,            \
    "MIMALLOC_RESET_DECOMMITS" MI_ENV_21UP                                     \
    " MIMALLOC_PURGE_DECOMMITS" MI_ENV_21UP,                                   \
    "v2.1.2 src/options.c:64",                                                 \
    "2.1+: purge with MADV_DONTNEED (0: MADV_FREE, RSS stays until pressure)") \
  X(MO_ARENA_PURGE_MULT, "arena_purge_mult", OPT_I64, "10", "", NULL,          \
    "MIMALLOC_ARENA_PURGE_MULT" MI_ENV_21UP,                                   \
    "v2.1.2 src/options.c:91 (10); v3.0.1 :156 (1)",                           \
    "2.1+: arena purge delay = purge_delay times this")                        \
  X(MO_ABANDONED_PAGE_PURGE, "abandoned_page_purge", OPT_BOOL, "0", "", NULL,  \
    "MIMALLOC_ABANDONED_PAGE_RESET" MI_ENV_21X                                 \
    " MIMALLOC_ABANDONED_PAGE_PURGE" MI_ENV_21X,                               \
    "v2.1.2 src/options.c:71",                                                 \
    "2.1: purge at once when a thread abandons a segment")                     \
  X(MO_EAGER_COMMIT, "eager_commit", OPT_BOOL, "1", "", NULL,                  \
    "MIMALLOC_EAGER_COMMIT" MI_ENV_2X, "v2.0.9 src/options.c:70",              \
    "2.x: commit segments whole (commit is RSS-neutral; decides the mask)")    \
  X(MO_EAGER_COMMIT_DELAY, "eager_commit_delay", OPT_I64, "1", "", NULL,       \
    "MIMALLOC_EAGER_COMMIT_DELAY" MI_ENV_2X, "v2.0.9 src/options.c:86",        \
    "2.x: first segments of a thread committed lazily once threads exist")     \
  X(MO_PAGE_RESET, "page_reset", OPT_BOOL, "0", "", NULL,                      \
    "MIMALLOC_PAGE_RESET" MI_ENV_20,                                           \
    "v2.0.9 src/options.c:78 (2.1: deprecated_page_reset, unused, :70)",       \
    "2.0.x: MADV_FREE a page's memory when it is freed")                       \
  X(MO_LARGE_OS_PAGES, "large_os_pages", OPT_BOOL, "0", "", NULL,              \
    "MIMALLOC_LARGE_OS_PAGES MIMALLOC_ALLOW_LARGE_OS_PAGES" MI_ENV_21UP,       \
    "v2.0.9 src/options.c:73; v2.1.2 :65 (allow_large_os_pages, legacy "       \
    "large_os_pages); v3.0.1 :131 (on: 2 on Linux, :81-87); v3.4.3 :129",      \
    "2.x: segments (2.0) or arenas (2.1) madvised MADV_HUGEPAGE and never "    \
    "purged; 3.x: no effect on RSS (3.0.1 off: THP disabled)")                 \
  X(MO_MAX_SEGMENT_RECLAIM, "max_segment_reclaim", OPT_I64, "8", "", NULL,     \
    "MIMALLOC_MAX_SEGMENT_RECLAIM?version=2.0.9|2.1.2|2.1.7",                  \
    "v2.0.9 src/options.c:94 (8); v2.1.7 :84 (10, a percentage); v2.0.5 "      \
    "src/segment.c:1427 (fixed 8)",                                            \
    "2.x: abandoned segments visited per reclaim")                             \
  X(MO_RECLAIM_ON_FREE, "reclaim_on_free", OPT_I64, "1", "", NULL,             \
    "MIMALLOC_ABANDONED_RECLAIM_ON_FREE?version=2.1.7|3.0.1|3.4.3"             \
    " MIMALLOC_RECLAIM_ON_FREE?version=3.0.1"                                  \
    " MIMALLOC_PAGE_RECLAIM_ON_FREE?version=3.4.3",                            \
    "v2.1.7 src/options.c:93 (1); v3.0.1 :172 (1); v3.4.3 :165 (0)",           \
    "a free into an abandoned page reclaims it (3.4.3: -1 never, 0 into the "  \
    "heap it came from, 1 any)")                                               \
  X(MO_PAGE_MAX_RECLAIM, "page_max_reclaim", OPT_I64, "-1", "", NULL,          \
    "MIMALLOC_PAGE_MAX_RECLAIM?version=3.4.3", "v3.4.3 src/options.c:96,172",  \
    "3.4.3: no reclaim on free into the heap the page came from once it "      \
    "holds more pages of the size (-1: no limit)")                             \
  X(MO_PAGE_CROSS_THREAD_MAX_RECLAIM, "page_cross_thread_max_reclaim",         \
    OPT_I64, "32", "", NULL,                                                   \
    "MIMALLOC_PAGE_CROSS_THREAD_MAX_RECLAIM?version=3.4.3",                    \
    "v3.4.3 src/options.c:100,174",                                            \
    "3.4.3: the same limit for reclaim into another thread's heap")            \
  X(MO_PAGE_FULL_RETAIN, "page_full_retain", OPT_I64, "2", "", NULL,           \
    "MIMALLOC_PAGE_FULL_RETAIN" MI_ENV_3X,                                     \
    "v3.0.1 src/options.c:173; v3.4.3 :166",                                   \
    "3.x: full pages kept in a queue before they are abandoned")               \
  X(MO_PAGE_MAX_CANDIDATES, "page_max_candidates", OPT_I64, "4", "", NULL,     \
    "MIMALLOC_PAGE_MAX_CANDIDATES" MI_ENV_3X,                                  \
    "v3.0.1 src/options.c:174; v3.4.3 :167",                                   \
    "3.x: pages compared when looking for room")                               \
  X(MO_GENERIC_COLLECT, "generic_collect", OPT_I64, "10000", "", NULL,         \
    "MIMALLOC_GENERIC_COLLECT?version=3.4.3",                                  \
    "v3.4.3 src/options.c:164 (3.0.1: fixed, src/page.c:922)",                 \
    "3.x: collect retired pages every N generic allocations")                  \
  X(MO_ALLOW_THP, "allow_thp", OPT_BOOL, "1", "", NULL,                        \
    "MIMALLOC_ALLOW_THP?version=3.4.3", "v3.4.3 src/options.c:177",            \
    "3.4.3: arenas madvised MADV_HUGEPAGE (huge pages under THP=madvise)")     \
  X(MO_HINT_START, "hint_start", OPT_U64, "0", "", NULL,                       \
    "meta:mimalloc_hint_start" MI_ENV_21X,                                     \
    "v2.1.7 src/os.c:91-119, src/prim/unix/prim.c:214-230",                    \
    "2.1.x: where the first aligned-hint mapping went (the process's "         \
    "random pick in [2, 6) TiB; the oracle records it); 0: unknown, "          \
    "mapped top-down")                                                         \
  NPTL_STACK_OPTIONS(X, MO_STACK_SIZE, MO_THREAD_STACK_PAGES)
enum mimalloc_option_e { MIMALLOC_OPTIONS(MODEL_OPTION_KEY) MO_COUNT };
_Static_assert(MO_COUNT <= MODEL_OPTS_MAX, "model_opts_t holds the rows");
static const model_option_t mimalloc_options[] = {
    MIMALLOC_OPTIONS(MODEL_OPTION_ROW){0}};

static const char *const version_names[MV_COUNT] = {"2.0.5", "2.0.9", "2.1.2",
                                                    "2.1.7", "3.0.1", "3.4.3"};

/* Which versions have a row: bit per version. */
#define V209 (1u << MV_209)
#define V20  ((1u << MV_205) | V209)
#define V21X ((1u << MV_212) | (1u << MV_217))
#define V3X  ((1u << MV_301) | (1u << MV_343))
#define VALL (V20 | V21X | V3X)
typedef struct row_scope_s row_scope_t;
struct row_scope_s {
  int         key;
  unsigned    versions;
  const char *other; /* the spelling the other versions use, or NULL */
};
static const row_scope_t row_scopes[] = {
    {MO_DECOMMIT_DELAY, V20, "purge_delay"},
    {MO_DECOMMIT_EXTEND_DELAY, V20, "purge_extend_delay"},
    {MO_SEGMENT_DECOMMIT_DELAY, V20, "arena_purge_mult"},
    {MO_ALLOW_DECOMMIT, V20, "purge_delay (<0 disables purging)"},
    {MO_ABANDONED_PAGE_DECOMMIT, V20, "abandoned_page_purge"},
    {MO_PURGE_DELAY, V21X | V3X, "decommit_delay"},
    {MO_PURGE_EXTEND_DELAY, V21X | V3X, "decommit_extend_delay"},
    {MO_PURGE_DECOMMITS, V21X | V3X, NULL},
    {MO_ARENA_PURGE_MULT, V21X | V3X, "segment_decommit_delay"},
    {MO_ABANDONED_PAGE_PURGE, V21X, "abandoned_page_decommit"},
    {MO_EAGER_COMMIT, V20 | V21X, NULL},
    {MO_EAGER_COMMIT_DELAY, V20 | V21X, NULL},
    {MO_PAGE_RESET, V20, NULL},
    {MO_MAX_SEGMENT_RECLAIM, V209 | V21X, NULL},
    {MO_RECLAIM_ON_FREE, (1u << MV_217) | V3X, NULL},
    {MO_PAGE_FULL_RETAIN, V3X, NULL},
    {MO_PAGE_MAX_CANDIDATES, V3X, NULL},
    {MO_GENERIC_COLLECT, 1u << MV_343, NULL},
    {MO_PAGE_MAX_RECLAIM, 1u << MV_343, NULL},
    {MO_PAGE_CROSS_THREAD_MAX_RECLAIM, 1u << MV_343, NULL},
    {MO_ALLOW_THP, 1u << MV_343, NULL},
    {MO_HINT_START, V21X, NULL},
};

/* Version defaults that differ from the rows' (2.0.9 / 2.1) defaults. */
static const char *version_default(mi_version_t v, int key) {
  switch (key) {
  case MO_PURGE_DELAY:
    return v == MV_301 ? "2500" : v == MV_343 ? "1000" : NULL;
  case MO_ARENA_PURGE_MULT:
    return MI_IS_V3(v) ? "1" : NULL;
  case MO_DECOMMIT_EXTEND_DELAY:
    return v == MV_205 ? "2" : NULL; /* v2.0.5 src/options.c:96 */
  case MO_MAX_SEGMENT_RECLAIM:
    return v == MV_217 ? "10" : NULL;
  case MO_RECLAIM_ON_FREE:
    return v == MV_343 ? "0" : NULL;
  case MO_LARGE_OS_PAGES:
    return v == MV_301 ? "1" : NULL; /* 2 on Linux: v3.0.1 options.c:81-87 */
  default:
    return NULL;
  }
}

/* The geometry and rule constants of a version (mimalloc_int.h; sizes
 * compiled against each tag's headers: sizeof(mi_page_t) 80/80/80/96,
 * offsetof(mi_segment_t, slices) 368/264, offsetof(mi_segment_t, next)
 * 288/184/184/176 (205/209/212/217), 3.x page info 128 (301) / separate
 * (343)). */
static void mi_geometry(mi_version_t v, mi_geom_t *g) {
  memset(g, 0, sizeof *g);
  g->slices_offset = 264;
  g->info_slices = 1; /* segment.c:335-357 */
  g->off_bsize = 28;  /* offsetof(mi_page_t, xblock_size) in 209/212 */
  g->len_bsize = 4;
  g->off_links = 56; /* offsetof(mi_page_t, next), prev at 64 */
  g->min_extend = 4; /* 209 page.c:590 */
  g->seg_slices = MI_SLICES_PER_SEG;
  g->max_slice_off = MI_MAX_SLICE_OFFSET;
  g->large_obj_max = MI_LARGE_OBJ_MAX;
  g->small_start = 3 * 128; /* 3*MI_MAX_ALIGN_GUARANTEE, 209 segment.c:319 */
  g->cache_slot = MI_CACHE_SLOT_209;
  switch (v) {
  case MV_205:
    /* 64 MiB segments (v2.0.5 include/mimalloc-types.h:135): 1024 slices,
     * objects up to 32 MiB in them (:157), back offsets for 1 MiB (:175,
     * MI_ALIGNMENT_MAX include/mimalloc.h:169); the header is 82,288
     * bytes, two slices */
    g->seg_slices = MI_SLICES_MAX;
    g->max_slice_off = 15;
    g->large_obj_max = 32 * MI_MIB;
    g->slices_offset = 368;
    g->zero_prefix = 288;
    g->info_slices = 2;
    g->min_commit = 2 * MI_MIB; /* types.h:330 */
    g->small_start = 128;       /* MI_MAX_ALIGN_GUARANTEE, segment.c:319 */
    g->cache_slot = MI_CACHE_SLOT_205;
    /* Ubuntu's package is built with CMAKE_BUILD_TYPE None, so without
     * NDEBUG: MI_DEBUG=2 (v2.0.5 include/mimalloc-types.h:49-55, "debug
     * level : 2" in its verbose output), which brings MI_PADDING (:59-61)
     * and MI_ENCODE_FREELIST (:66-68): mi_page_t gains keys[2], 96 bytes,
     * xblock_size at 44 and next at 72 (compiled) */
    g->debug = true;
    g->page_struct = 96;
    g->off_bsize = 44;
    g->off_links = 72;
    g->min_extend = 1;      /* page.c:565 */
    g->retire_cycles = 8;   /* page.c:395 */
    g->retire_plus1 = true; /* page.c:420 */
    break;
  case MV_209:
    g->page_struct = 80;
    g->zero_prefix = 184;
    g->min_commit = MI_MIB; /* 209 types.h:335 */
    g->retire_cycles = 8;   /* page.c:420 */
    g->retire_plus1 = true; /* page.c:445 */
    break;
  case MV_212:
    g->page_struct = 80;
    g->zero_prefix = 184;
    g->min_commit = MI_SLICE_SIZE; /* 212 types.h:356 */
    g->retire_cycles = 16;         /* 212 page.c:432 */
    g->retire_plus1 = true;        /* 212 page.c:457 */
    break;
  case MV_217:
    g->page_struct = 96;
    g->zero_prefix = 176;
    g->off_bsize = 40; /* 217 block_size is a size_t */
    g->len_bsize = 8;
    g->off_links = 72;
    g->min_commit = MI_SLICE_SIZE; /* 217 types.h:372 */
    g->retire_cycles = 16;
    g->retire_any_size = true; /* 217 page.c:455-458 */
    break;
  case MV_301:
    g->min_extend = 1;     /* 301 page.c:571 */
    g->retire_cycles = 16; /* 301 page.c:368 */
    g->retire_any_size = true;
    g->page_info = 128;    /* mi_page_info_size(): sizeof 120 -> 128 */
    g->small_max = 8176;   /* (64 KiB - 128) / 8, 301 types.h:337 */
    g->medium_max = 65520; /* (512 KiB - 128) / 8, :338 */
    g->large_max = MI_MIB; /* 4 MiB / 4, :339 (large pages off, :104) */
    break;
  default: /* MV_343 */
    g->min_extend = 1;
    g->retire_cycles = 16;
    g->retire_any_size = true;
    /* sizeof(mi_page_t) 112 (compiled from the tag's headers), already a
     * multiple of MI_MAX_ALIGN_SIZE: mi_page_info_size, internal.h:703 */
    g->page_info = 112;
    g->meta_apart = true; /* MI_PAGE_META_IS_SEPARATED, 343 types.h:119-128 */
    g->small_max = 10240; /* 343 types.h (compiled) */
    g->medium_max = 86698;
    g->large_max = 512 * MI_KIB; /* :426 */
    break;
  }
}

static as_status_t check_rows(mi_version_t v, const model_opts_t *o,
                              as_err_t *err) {
  for (size_t i = 0; i < sizeof row_scopes / sizeof row_scopes[0]; i++) {
    const row_scope_t *r = &row_scopes[i];
    if ((r->versions & (1u << v)) || !model_opt_was_set(o, r->key))
      continue;
    const char *name = mimalloc_options[r->key].name;
    if (r->other != NULL)
      return as_err_set(err, AS_EUSAGE,
                        "mimalloc %s has no option %s; its spelling is %s",
                        version_names[v], name, r->other);
    return as_err_set(err, AS_EUSAGE, "mimalloc %s has no option %s",
                      version_names[v], name);
  }
  return AS_OK;
}

/* Stores the version's default of row key as its effective value (not
 * "set": it was not given). */
static void apply_version_default(model_opts_t *o, mi_version_t v, int key) {
  const char *d = version_default(v, key);
  if (d == NULL || o->set[key])
    return;
  o->num[key] = strtoll(d, NULL, 10);
  snprintf(o->text[key], sizeof o->text[key], "%s", d);
}

static bool row_applies(mi_version_t v, int key) {
  for (size_t i = 0; i < sizeof row_scopes / sizeof row_scopes[0]; i++)
    if (row_scopes[i].key == key)
      return (row_scopes[i].versions & (1u << v)) != 0;
  return true;
}

/* base.opts: the version's own rows with their effective values, the
 * provenance of a run (model_describe), valid as a spec again. */
static void publish_options(mi_model_t *m) {
  model_opts_t *o = &m->base.opts;
  memset(o, 0, sizeof *o);
  o->table = m->shown;
  for (int k = 0; k < MO_COUNT; k++) {
    if (!row_applies(m->version, k))
      continue;
    m->shown[o->count] = mimalloc_options[k];
    o->num[o->count] = m->opts.num[k];
    o->set[o->count] = m->opts.set[k];
    memcpy(o->text[o->count], m->opts.text[k], sizeof o->text[0]);
    o->count++;
  }
  memset(&m->shown[o->count], 0, sizeof m->shown[0]);
}

static void read_options(mi_model_t *m, const model_opts_t *o) {
  bool v20 = MI_IS_V20(m->version);
  m->purge_delay = model_opt_i64(o, v20 ? MO_DECOMMIT_DELAY : MO_PURGE_DELAY);
  m->extend_delay =
      model_opt_i64(o, v20 ? MO_DECOMMIT_EXTEND_DELAY : MO_PURGE_EXTEND_DELAY);
  m->segment_delay = model_opt_i64(o, MO_SEGMENT_DECOMMIT_DELAY);
  m->arena_mult = model_opt_i64(o, MO_ARENA_PURGE_MULT);
  m->purge_decommits = v20 || model_opt_bool(o, MO_PURGE_DECOMMITS);
  /* 2.1 has no allow_decommit: purging is off when purge_delay < 0
   * (212 segment.c:845-846) */
  m->allow_decommit =
      v20 ? model_opt_bool(o, MO_ALLOW_DECOMMIT) : m->purge_delay >= 0;
  m->page_reset = model_opt_bool(o, MO_PAGE_RESET);
  m->large_os_pages = model_opt_bool(o, MO_LARGE_OS_PAGES);
  m->abandoned_purge = model_opt_bool(o, v20 ? MO_ABANDONED_PAGE_DECOMMIT
                                             : MO_ABANDONED_PAGE_PURGE);
  m->eager_commit = model_opt_bool(o, MO_EAGER_COMMIT);
  m->eager_commit_delay = model_opt_i64(o, MO_EAGER_COMMIT_DELAY);
  /* 2.0.5 has no such option: max_tries = 8 (v2.0.5 src/segment.c:1427) */
  m->max_segment_reclaim =
      m->version == MV_205 ? 8 : model_opt_i64(o, MO_MAX_SEGMENT_RECLAIM);
  m->reclaim_on_free = model_opt_i64(o, MO_RECLAIM_ON_FREE);
  if (m->version == MV_343) {
    m->page_max_reclaim = model_opt_i64(o, MO_PAGE_MAX_RECLAIM);
    m->cross_thread_max_reclaim =
        model_opt_i64(o, MO_PAGE_CROSS_THREAD_MAX_RECLAIM);
  }
  m->page_full_retain = model_opt_i64(o, MO_PAGE_FULL_RETAIN);
  if (m->page_full_retain > 32)
    m->page_full_retain = 32; /* mi_option_get_clamp(-1, 32), heap.c:180 */
  m->generic_collect = model_opt_i64(o, MO_GENERIC_COLLECT);
  m->max_candidates = model_opt_i64(o, MO_PAGE_MAX_CANDIDATES);
  m->allow_thp = m->version == MV_343 && model_opt_bool(o, MO_ALLOW_THP);
  m->hint_next = MI_IS_V21(m->version) ? model_opt_u64(o, MO_HINT_START) : 0;
}

/* ---- Kernel helpers ----------------------------------------------------- */

static void kfail(mi_model_t *m, as_status_t rc) {
  if (rc != AS_OK && m->fail == AS_OK)
    m->fail = rc;
}

void mi_fail_oom(mi_model_t *m) {
  if (m->fail == AS_OK)
    m->fail = as_err_set(m->err, AS_ENOMEM, "mimalloc: out of memory");
}

void mi_touch(mi_model_t *m, sim_addr_t addr, uint64_t len) {
  if (len != 0 && m->fail == AS_OK)
    kfail(m, sim_kernel_touch(m->kernel, addr, len, m->err));
}

/* A read of memory the program never wrote: the realloc copy reads the
 * old block's whole usable size; a page only without the zero page. */
void mi_read(mi_model_t *m, sim_addr_t addr, uint64_t len) {
  if (len != 0 && m->fail == AS_OK)
    kfail(m, sim_kernel_read(m->kernel, addr, len, m->err));
}

void mi_madvise_dontneed(mi_model_t *m, sim_addr_t addr, uint64_t len) {
  if (len != 0 && m->fail == AS_OK)
    kfail(m,
          sim_kernel_madvise(m->kernel, addr, len, SIM_MADV_DONTNEED, m->err));
}

void mi_madvise_free(mi_model_t *m, sim_addr_t addr, uint64_t len) {
  if (len != 0 && m->fail == AS_OK)
    kfail(m, sim_kernel_madvise(m->kernel, addr, len, SIM_MADV_FREE, m->err));
}

void mi_madvise_hugepage(mi_model_t *m, sim_addr_t addr, uint64_t len) {
  if (len != 0 && m->fail == AS_OK)
    kfail(m,
          sim_kernel_madvise(m->kernel, addr, len, SIM_MADV_HUGEPAGE, m->err));
}

/* mmap of size bytes: at hint when it is not 0 and the range is free
 * (else top-down), or top-down aligned to align; 0 after a failure. */
static sim_addr_t os_map(mi_model_t *m, sim_addr_t hint, uint64_t size,
                         uint64_t align, sim_prot_t prot) {
  sim_addr_t a = 0;
  if (m->fail != AS_OK)
    return 0;
  kfail(m, hint != 0 ? sim_kernel_mmap_hint(m->kernel, hint, size, prot,
                                            SIM_OWNER_MIMALLOC, &a, m->err)
                     : sim_kernel_mmap(m->kernel, size, align, prot,
                                       SIM_OWNER_MIMALLOC, &a, m->err));
  return m->fail == AS_OK ? a : 0;
}

sim_addr_t mi_os_map_hint(mi_model_t *m, sim_addr_t hint, uint64_t size,
                          bool commit) {
  return os_map(m, hint, size, 0, commit ? SIM_PROT_RW : SIM_PROT_NONE);
}

/* Committed memory from the OS is mapped RW: committing with mprotect
 * (209 os.c:969-973) or mapping committed arenas makes no page resident,
 * so only the writes matter for RSS. */
sim_addr_t mi_os_alloc(mi_model_t *m, uint64_t size, uint64_t align) {
  return os_map(m, 0, size, align, SIM_PROT_RW);
}

/* Uncommitted OS memory: mapped PROT_NONE (209 os.c:596-610 mi_unix_mmap
 * with protect_flags PROT_NONE, 212 prim.c the same), committed later by
 * mi_os_commit.  Only placement under THP sees the difference: a 2 MiB
 * block that is not wholly RW at its first fault gets small pages. */
sim_addr_t mi_os_reserve(mi_model_t *m, uint64_t size, uint64_t align) {
  return os_map(m, 0, size, align, SIM_PROT_NONE);
}

/* _mi_os_commit: mprotect RW (209 os.c:905-990 mi_os_commitx). */
void mi_os_commit(mi_model_t *m, sim_addr_t addr, uint64_t len) {
  if (len != 0 && m->fail == AS_OK)
    kfail(m, sim_kernel_mprotect(m->kernel, addr, len, SIM_PROT_RW, m->err));
}

void mi_os_free(mi_model_t *m, sim_addr_t addr, uint64_t size) {
  if (m->fail == AS_OK)
    kfail(m, sim_kernel_munmap(m->kernel, addr, size, m->err));
}

/* 209 decommit is MADV_DONTNEED in a release build (os.c:974-978); 2.1+
 * _mi_os_purge_ex (212 os.c:475-494) decommits (DONTNEED, prim.c:369-387)
 * when purge_decommits, else resets with MADV_FREE (prim.c:389-408). */
void mi_os_purge(mi_model_t *m, sim_addr_t addr, uint64_t len) {
  if (m->purge_decommits)
    mi_madvise_dontneed(m, addr, len);
  else
    mi_madvise_free(m, addr, len);
}

void mi_os_decommit(mi_model_t *m, sim_addr_t addr, uint64_t len) {
  if (!m->g.debug)
    mi_madvise_dontneed(m, addr, len);
}

/* ---- Threads and heaps ------------------------------------------------- */

static uint32_t heap_new(mi_model_t *m, uint32_t tld, uint8_t tag) {
  if (m->heaps_n == m->heaps_cap) {
    uint32_t cap = m->heaps_cap ? m->heaps_cap * 2 : 16;
    mheap_t *nh = realloc(m->heaps, (size_t)cap * sizeof *nh);
    if (nh == NULL) {
      mi_fail_oom(m);
      return 0;
    }
    m->heaps = nh;
    m->heaps_cap = cap;
  }
  if (m->heaps_n == 0)
    m->heaps_n = 1; /* 0 = none */
  uint32_t id = m->heaps_n++;
  mheap_t *h = &m->heaps[id];
  memset(h, 0, sizeof *h);
  for (uint32_t b = 0; b < MI_BINS; b++)
    h->pages[b].block_size = b < MI_BIN_HUGE ? mi_bin_size((uint8_t)b) : 0;
  h->tld = tld;
  h->tag = tag;
  h->live = true;
  h->retired_min = MI_BIN_FULL;
  h->retired_max = 0;
  h->full_page_retain = (int32_t)m->page_full_retain; /* 301 heap.c:180 */
  h->next_in_tld = m->tlds[tld].heaps;
  m->tlds[tld].heaps = id;
  return id;
}

/* Thread data of a non-main thread: heap + tld from the OS
 * (`mi_thread_data_alloc`, 209 init.c:207-230; 212 :219-250), 4.6 KiB
 * written (memcpy of the empty heap and tld, init.c:265-266), so 8 KiB
 * mapped (_mi_os_good_alloc_size); up to 8 (209) / 16 (212) freed ones are
 * kept for later threads. */
#define THREAD_DATA_BYTES 4600
static sim_addr_t thread_data_alloc(mi_model_t *m) {
  for (int i = 0; i < 8; i++)
    if (m->td_cache[i] != 0) {
      sim_addr_t a = m->td_cache[i];
      m->td_cache[i] = 0;
      mi_touch(m, a, THREAD_DATA_BYTES);
      return a;
    }
  sim_addr_t a = mi_os_alloc(m, 8192, 4096);
  if (a != 0)
    mi_touch(m, a, THREAD_DATA_BYTES);
  return a;
}

static void thread_data_free(mi_model_t *m, sim_addr_t a) {
  int cap = m->version == MV_209 ? 8 : 8; /* model keeps 8 */
  for (int i = 0; i < cap; i++)
    if (m->td_cache[i] == 0) {
      m->td_cache[i] = a;
      return;
    }
  mi_os_free(m, a, 8192);
}

static bool ensure_thread_slots(mi_model_t *m, uint32_t thread) {
  kfail(m, sim_threadtab_reach((void **)&m->tld_of_thread, &m->threads_cap,
                               thread, sizeof *m->tld_of_thread, NULL,
                               sim_kernel_max_memory_bytes(m->kernel), m->err));
  return m->fail == AS_OK;
}

/* The tld of trace thread `thread`, created at its first allocation
 * (mi_thread_init: a thread's heap is set up by its first malloc). */
static uint32_t tld_get(mi_model_t *m, uint32_t thread, bool create) {
  if (thread < m->threads_cap && m->tld_of_thread[thread] != 0)
    return m->tld_of_thread[thread];
  if (!create)
    return 0;
  if (!ensure_thread_slots(m, thread))
    return 0;
  if (m->tlds_n == m->tlds_cap) {
    uint32_t cap = m->tlds_cap ? m->tlds_cap * 2 : 16;
    mtld_t  *nt = realloc(m->tlds, (size_t)cap * sizeof *nt);
    if (nt == NULL) {
      mi_fail_oom(m);
      return 0;
    }
    m->tlds = nt;
    m->tlds_cap = cap;
  }
  if (m->tlds_n == 0) {
    memset(&m->tlds[0], 0, sizeof m->tlds[0]); /* 0 = none */
    m->tlds_n = 1;
  }
  uint32_t id = m->tlds_n++;
  mtld_t  *t = &m->tlds[id];
  memset(t, 0, sizeof *t);
  t->thread = thread;
  t->live = true;
  /* 3.x: the main thread's static tld has sequence 0, every other tld the
   * count of those before it, from 0 (fetch_add: 301 init.c:279, 310;
   * 343 init.c:377) */
  t->thread_seq = thread == 0 ? 0 : m->thread_total++;
  if (thread != 0) {
    if (MI_IS_V3(m->version))
      mi_meta3_thread_alloc(m, t);
    else
      t->data = thread_data_alloc(m);
    m->threads_live++;
    m->thread_count++; /* mi_thread_init (209 init.c:431-441) */
  }
  m->tld_of_thread[thread] = id;
  t = &m->tlds[id];
  t->heap_backing = heap_new(m, id, 0);
  return id;
}

/* Thread exit (_mi_thread_done -> _mi_heap_done, 209 init.c:296-346):
 * other heaps of the thread are deleted into the backing heap, whose pages
 * are collected and the rest abandoned; the thread data goes back. */
static void thread_done(mi_model_t *m, uint32_t tld) {
  mtld_t  *t = &m->tlds[tld];
  uint32_t backing = t->heap_backing;
  for (uint32_t h = t->heaps; h != 0; h = H(m, h)->next_in_tld) {
    if (h == backing)
      continue;
    /* mi_heap_delete -> mi_heap_absorb: pages move to the backing heap
     * (209 heap.c:280-300), after their delayed frees */
    mi_heap_delayed_free_all(m, h);
    for (uint32_t bin = 0; bin <= MI_BIN_FULL; bin++) {
      uint32_t pg;
      while ((pg = H(m, h)->pages[bin].last) != 0) {
        mi_pq_remove(m, h, bin, pg);
        mi_pq_push_end(m, backing, bin, pg);
      }
    }
    H(m, h)->live = false;
  }
  if (m->tlds[tld].thread != 0)
    mi_heap_abandon_all(m, backing);
  t = &m->tlds[tld];
  if (t->data != 0)
    thread_data_free(m, t->data);
  mi_meta3_thread_free(m, t);
  t->live = false;
  m->tld_of_thread[t->thread] = 0;
  if (t->thread != 0) {
    m->threads_live--;
    /* 2.0.x count a thread's exit twice: _mi_heap_done sets the heap key
     * to _mi_heap_empty (209 init.c:300, 459-482), so the key's destructor
     * runs again and _mi_thread_done decrements before it checks the
     * thread (:447-450); 2.1.2 returns first for an empty heap (issue
     * #699, 212 init.c).  Measured with 2.0.9: -1 after two threads. */
    m->thread_count -= MI_IS_V20(m->version) ? 2 : 1;
  }
}

/* ---- Objects ------------------------------------------------------------- */

/* An object's place by id is 4 bytes, page << MI_OBJ_BLOCK_BITS | block,
 * while its page number fits beside the block index, the block index fits
 * 13 bits (a small page, 64 KiB: v2.0.9 include/mimalloc-types.h:161,
 * v3.0.1 include/mimalloc/types.h:134, holds at most 8192 blocks of the
 * smallest size, 8 bytes, MI_INTPTR_SIZE: v2.0.9 :125) and the object is
 * not over-allocated for an alignment.  The first place that does not fit
 * has the table rewritten to whole mobj_t entries, once (widen_objs).
 * This table is most of the simulator's memory on a heap of small
 * objects.  Page 0 is no page, so a word of 0 is a dead id. */
#define MI_OBJ_BLOCK_BITS 13

static inline mobj_t obj_get(const mi_model_t *m, uint64_t id) {
  mobj_t o = {0};
  if (id >= m->obj_len)
    return o;
  if (__builtin_expect(m->obj_bytes == sizeof(uint32_t), 1)) {
    uint32_t w;
    memcpy(&w, m->objs + id * sizeof w, sizeof w);
    o.page = w >> MI_OBJ_BLOCK_BITS;
    o.block = w & ((UINT32_C(1) << MI_OBJ_BLOCK_BITS) - 1);
    return o;
  }
  memcpy(&o, m->objs + id * sizeof o, sizeof o);
  return o;
}

/* Rewrites the table from 4-byte to whole entries in place, last id first
 * (entry i's 8 bytes overlap only 4-byte entries i and above, already
 * moved). */
static bool widen_objs(mi_model_t *m) {
  uint64_t n = m->obj_len;
  if (n > 0 && !sim_idtable_reach(&m->obj_tab, n - 1))
    return false;
  for (uint64_t i = n; i-- > 0;) {
    mobj_t o = obj_get(m, i);
    memcpy(m->objs + i * sizeof o, &o, sizeof o);
  }
  m->obj_bytes = sizeof(mobj_t);
  m->obj_len = m->obj_tab.len;
  return true;
}

/* Sets id's place (id < obj_len: ensure_objects): block in page, over-
 * allocated for an alignment of 2^align_shift (0: none); false, with the
 * model failed, when the table must widen and cannot. */
static inline bool obj_put(mi_model_t *m, uint64_t id, uint32_t page,
                           uint32_t block, uint8_t align_shift) {
  if (__builtin_expect(m->obj_bytes == sizeof(uint32_t), 1)) {
    if (__builtin_expect(page < m->narrow_pages &&
                             block >> MI_OBJ_BLOCK_BITS == 0 &&
                             align_shift == 0,
                         1)) {
      uint32_t w = page << MI_OBJ_BLOCK_BITS | block;
      memcpy(m->objs + id * sizeof w, &w, sizeof w);
      return true;
    }
    if (!widen_objs(m)) {
      mi_fail_oom(m);
      return false;
    }
  }
  mobj_t o = {
      .page = page, .block = block & 0xffffff, .align_shift = align_shift};
  memcpy(m->objs + id * sizeof o, &o, sizeof o);
  return true;
}

void mimalloc_narrow_pages_for_tests(model_t *mm, uint32_t n) {
  mi_model_t *m = (mi_model_t *)mm;
  if (n < m->narrow_pages)
    m->narrow_pages = n;
}

static bool ensure_objects(mi_model_t *m, uint64_t id) {
  if (id >= m->obj_len && /* fresh entries: page 0 */
      (id >= SIM_IDTABLE_MAX_IDS ||
       !sim_idtable_reach_packed(&m->obj_tab, id + 1, m->obj_bytes,
                                 &m->obj_len)))
    return false;
  return !m->g.debug || sim_idtable_reach(&m->req_tab, id);
}

/* Where an object placed at o starts: its block, or the block's first
 * address of its alignment (an over-allocation, alloc-aligned.c). */
static sim_addr_t obj_addr(const mi_model_t *m, mobj_t o) {
  const mpage_t *p = &m->pages[o.page];
  sim_addr_t     a = p->start + (uint64_t)o.block * p->block_size;
  uint64_t       mask = o.align_shift ? (UINT64_C(1) << o.align_shift) - 1 : 0;
  return (a + mask) & ~mask;
}

/* Entry bookkeeping: the clock, the error sink. */
static void enter(mi_model_t *m, uint64_t t_ns, as_err_t *err) {
  m->err = err;
  m->fail = AS_OK;
  m->now_ns = t_ns;
  /* _mi_clock_now: CLOCK_MONOTONIC in whole ms (209 stats.c:428-436; 301
   * prim/unix/prim.c:598-606).  The trace's t = 0 sits clock_phase_ns past
   * a tick of the machine's clock when the recorder knew it, so an expiry
   * a few ms ahead passes at the same event as it did; + 1000: a clock
   * that is never 0. */
  m->now = (int64_t)((t_ns + m->clock_phase_ns) / 1000000) + 1000;
}

/* The call's status; every failure set its message in m->err (the call's
 * err) where it happened. */
static as_status_t leave(const mi_model_t *m) {
  return m->fail;
}

/* Whether the next block the first page of size's bin hands out is aligned
 * (mi_heap_malloc_aligned's small fast path: 209 alloc-aligned.c:119-134,
 * 217 :107-125, 301 :188-205, 343 :211-229; release builds have no
 * padding): then the request is a plain allocation of size. */
static bool head_block_aligned(mi_model_t *m, uint32_t heap, uint64_t size,
                               uint64_t align) {
  if (size > 1024 || align > size) /* MI_SMALL_SIZE_MAX */
    return false;
  uint32_t pg = H(m, heap)->pages[mi_model_bin(m, size)].first;
  if (pg == 0 || P(m, pg)->free_n == 0)
    return false;
  const mpage_t *p = P(m, pg);
  sim_addr_t     b =
      p->start + (uint64_t)mi_free_entry(p, p->free_n - 1) * p->block_size;
  return (b & (align - 1)) == 0;
}

/* mi_good_size without padding: the bin's block size, above the largest
 * bin's objects whole OS pages (_mi_os_page_size, the kernel's page; 217
 * page-queue.c:114-121; 343 :114-125). */
static uint64_t good_size(const mi_model_t *m, uint64_t size) {
  uint64_t binned = MI_IS_V3(m->version) ? m->g.large_max : MI_MEDIUM_OBJ_MAX;
  uint64_t page = sim_kernel_page_size(m->kernel);
  return size <= binned ? mi_bin_size(mi_model_bin(m, size))
                        : (size + page - 1) / page * page;
}

/* mi_malloc_is_naturally_aligned: block sizes whose blocks lie aligned,
 * which the page layouts guarantee (mi_segment_page_layout, block_start).
 * 217 alloc-aligned.c:15-21: up to 16 bytes any, else blocks up to 128 KiB
 * (MI_MAX_ALIGN_GUARANTEE) whose size align divides.  301 :18-26:
 * power-of-2 blocks up to 1 KiB (MI_PAGE_MAX_START_BLOCK_ALIGN2).  343
 * :18-29: up to 4 KiB, or any multiple of 4 KiB for a 4 KiB alignment. */
static bool naturally_aligned(const mi_model_t *m, uint64_t size,
                              uint64_t align) {
  if (align > size)
    return false;
  uint64_t gs = good_size(m, size);
  bool     pow2 = (gs & (gs - 1)) == 0;
  switch (m->version) {
  case MV_217:
    return align <= 16 || (gs <= MI_MEDIUM_OBJ_MAX && gs % align == 0);
  case MV_301:
    return pow2 && gs <= 1024;
  default: /* MV_343 */
    return (pow2 && gs <= 4096) || (align == 4096 && gs % 4096 == 0);
  }
}

typedef enum align_way_e {
  ALIGN_PLAIN,   /* a plain allocation of size is aligned */
  ALIGN_NATURAL, /* a plain allocation of size, freed if not aligned */
  ALIGN_OVER     /* size + align - 1, the object at the first aligned byte */
} align_way_t;

/* How mi_malloc_aligned(size, align) is served.  209 and 212
 * (alloc-aligned.c; 212 the same): the small fast path, and the
 * fallback's size-aligned blocks (:27-31).  217 and 3.x: the fast path,
 * then a naturally aligned size as a plain allocation whose result is
 * checked (217 :84-95, 301 :149-160, 343 :165-176).  Otherwise they
 * over-allocate size + align - 1 (209 :52-55, 217 :41-43).  2.0.5 (a
 * debug build) is modelled as plain up to 16 bytes, over-allocated above. */
static align_way_t aligned_way(mi_model_t *m, uint32_t heap, uint64_t size,
                               uint64_t align) {
  if (m->version == MV_205)
    return align <= 16 ? ALIGN_PLAIN : ALIGN_OVER;
  if (head_block_aligned(m, heap, size, align))
    return ALIGN_PLAIN;
  if (m->version == MV_209 || m->version == MV_212) {
    bool pow2 = (size & (size - 1)) == 0;
    return (size <= 1024 && pow2 && size >= align) ||
                   (align <= size && size <= 128 && (size & (align - 1)) == 0)
               ? ALIGN_PLAIN
               : ALIGN_OVER;
  }
  return naturally_aligned(m, size, align) ? ALIGN_NATURAL : ALIGN_OVER;
}

/* Allocates size bytes as object id through heap; the program's writes
 * (unless unwritten) and calloc's zeroing included. */
static void alloc_object(mi_model_t *m, uint32_t heap, const trace_event_t *ev,
                         uint64_t size) {
  if (!ensure_objects(m, ev->id)) {
    mi_fail_oom(m);
    return;
  }
  uint64_t    align = ev->op == TRACE_MEMALIGN ? ev->align : 0;
  align_way_t way =
      align >= 8 ? aligned_way(m, heap, size, align) : ALIGN_PLAIN;
  uint64_t req = way == ALIGN_OVER ? size + align - 1 : size;
  uint32_t page, block;
  /* a debug build asks for the padding too (v2.0.5 src/alloc.c:82, 106) */
  uint64_t pad = m->g.debug ? MI_PADDING_SIZE : 0;
  if (!mi_malloc(m, heap, req + pad, &page, &block))
    return;
  mpage_t   *p = P(m, page);
  sim_addr_t a = p->start + (uint64_t)block * p->block_size;
  if (way == ALIGN_NATURAL && (a & (align - 1)) != 0) {
    /* 217 alloc-aligned.c:88-93: not aligned after all (a page start the
     * block size could not align): freed, then over-allocated */
    mi_free_block(m, H(m, heap)->tld, page, block);
    way = ALIGN_OVER;
    req = size + align - 1;
    if (!mi_malloc(m, heap, req, &page, &block))
      return;
    p = P(m, page);
    a = p->start + (uint64_t)block * p->block_size;
  }
  if (way != ALIGN_OVER)
    align = 0;
  if (!obj_put(m, ev->id, page, block,
               align ? (uint8_t)__builtin_ctzll(align) : 0))
    return;
  if (m->g.debug)
    m->requested[ev->id] = req;
  if (m->g.debug)
    mi_debug_alloc_fill(m, page, a, req); /* calloc's zeroing is within */
  if (align != 0)
    a = (a + align - 1) & ~(align - 1);
  if (m->g.debug) {
    if (!(ev->flags & TRACE_FLAG_UNWRITTEN))
      mi_touch(m, a, size);
  } else if (ev->op == TRACE_CALLOC) {
    /* _mi_page_malloc zero (209 alloc.c:47-51): the whole block unless the
     * page's free list is known zero (never in 209), then the next-pointer
     * word only.  3.0.1 zeroes a huge page's block whole, known zero or
     * not (301 page.c:947-951; mi_page_is_huge, internal.h:721-724: a
     * block above MI_LARGE_MAX_OBJ_SIZE); 3.4.3 no longer does (343
     * page.c:1032). */
    bool     huge = m->version == MV_301 && p->block_size > m->g.large_max;
    uint64_t z = p->free_is_zero && !huge ? 8 : p->block_size;
    mi_touch(m, a, z);
  } else if (!(ev->flags & TRACE_FLAG_UNWRITTEN)) {
    mi_touch(m, a, size);
  }
  m->live_bytes += size;
  m->live_objects++;
}

static void free_object(mi_model_t *m, uint32_t tld, uint64_t id,
                        uint64_t size) {
  mobj_t   o = obj_get(m, id);
  uint32_t page = o.page, block = o.block;
  obj_put(m, id, 0, 0, 0); /* a dead id fits any width */
  m->live_bytes -= size;
  m->live_objects--;
  if (m->g.debug)
    mi_debug_free_fill(m, tld, page, block, m->requested[id]);
  mi_free_block(m, tld, page, block);
}

/* ---- Model interface ----------------------------------------------------- */

/* The record tables of a model being created; zeroed ones are skipped. */
static void free_tables(mi_model_t *m) {
  sim_idtable_free(&m->obj_tab);
  sim_idtable_free(&m->req_tab);
  sim_idtable_free(&m->pages_tab);
  sim_idtable_free(&m->segs_tab);
}

/* _mi_prim_mem_init at process start: 3.0.1 disables THP for the whole
 * process unless large OS pages are allowed (v3.0.1 src/prim/unix/prim.c:
 * 155-172: prctl(PR_GET_THP_DISABLE, &val) fails on its non-zero argument,
 * so PR_SET_THP_DISABLE follows), 3.4.3 unless allow_thp (:265-275).
 * 2.1.7 has the same code, but includes <sys/prctl.h> only under MI_NO_THP
 * (v2.1.7 prim.c:32-36), so a default build compiles it out: measured, a
 * 2.1.7 built from its tag got THP under THP=always (22 MiB more at the
 * peak) and made no prctl call.  2.0.x and 2.1.2 have none. */
static bool thp_disabled_at_init(const mi_model_t *m) {
  switch (m->version) {
  case MV_301:
    return !m->large_os_pages;
  case MV_343:
    return !m->allow_thp;
  default:
    return false;
  }
}

static as_status_t mimalloc_create(const model_opts_t *opts,
                                   const model_ctx_t *ctx, model_t **out,
                                   as_err_t *err) {
  mi_version_t v = (mi_version_t)model_opt_i64(opts, MO_VERSION);
  as_status_t  rc = check_rows(v, opts, err);
  if (rc != AS_OK)
    return rc;
  mi_model_t *m = calloc(1, sizeof *m);
  if (m == NULL)
    return as_err_set(err, AS_ENOMEM, "mimalloc: out of memory");
  if (sim_idtable_init(&m->obj_tab, sizeof(mobj_t)) != AS_OK ||
      sim_idtable_init(&m->req_tab, sizeof *m->requested) != AS_OK ||
      sim_idtable_init(&m->pages_tab, sizeof *m->pages) != AS_OK ||
      sim_idtable_init(&m->segs_tab, sizeof *m->segs) != AS_OK) {
    free_tables(m);
    free(m);
    return as_err_set(err, AS_ENOMEM, "mimalloc: no address space for tables");
  }
  m->objs = sim_idtable_base(&m->obj_tab);
  m->obj_bytes = sizeof(uint32_t);
  m->narrow_pages = UINT32_C(1) << (32 - MI_OBJ_BLOCK_BITS);
  m->requested = sim_idtable_base(&m->req_tab);
  m->pages = sim_idtable_base(&m->pages_tab);
  m->segs = sim_idtable_base(&m->segs_tab);
  m->kernel = ctx->kernel;
  m->clock_phase_ns = sim_kernel_clock_origin_ns(ctx->kernel) % 1000000;
  m->version = v;
  mi_geometry(v, &m->g);
  m->opts = *opts;
  for (int k = 0; k < MO_COUNT; k++)
    apply_version_default(&m->opts, v, k);
  read_options(m, &m->opts);
  publish_options(m);
  m->threads_live = 1;
  m->thread_count = 1; /* thread_count starts at 1 (209 init.c:422) */
  rc = nptl_stacks_init(
      &m->nptl, ctx->kernel, model_opt_u64(&m->opts, MO_STACK_SIZE),
      /* libmimalloc.so.2's 9-byte TLS fits the static TLS's slack
       * (_dl_get_tls_static_info: 4224 with or without it, measured) */
      model_opt_u64(&m->opts, MO_THREAD_STACK_PAGES), 0, "mimalloc", err);
  if (rc != AS_OK) {
    free_tables(m);
    free(m);
    return rc;
  }
  if (MI_IS_V20(v)) {
    m->cache = calloc(MI_CACHE_MAX, sizeof *m->cache);
    if (m->cache == NULL) {
      free_tables(m);
      free(m);
      return as_err_set(err, AS_ENOMEM, "mimalloc: out of memory");
    }
  }
  /* the library's static data that the model writes: segment map, arena
   * descriptors (RSS only when first written) */
  enter(m, 0, err);
  if (thp_disabled_at_init(m))
    sim_kernel_disable_thp(m->kernel);
  kfail(m, sim_kernel_mmap(m->kernel, 64 * MI_KIB, 4096, SIM_PROT_RW,
                           SIM_OWNER_METADATA, &m->static_area, err));
  if (MI_IS_V20(v) && m->fail == AS_OK)
    kfail(m, sim_kernel_mmap(
                 m->kernel, (uint64_t)MI_CACHE_MAX * m->g.cache_slot, 4096,
                 SIM_PROT_RW, SIM_OWNER_METADATA, &m->cache_area, err));
  if (m->fail != AS_OK) {
    as_status_t fail = leave(m);
    free(m->cache);
    free_tables(m);
    free(m);
    return fail;
  }
  *out = &m->base;
  return AS_OK;
}

static void mimalloc_destroy(model_t *mm) {
  mi_model_t *m = (mi_model_t *)mm;
  for (uint32_t i = 1; i < m->pages_n && i < m->pages_tab.len; i++)
    if (m->pages[i].live) {
      free(m->pages[i].blocks);
      free(m->pages[i].tfree);
    }
  sim_idtable_free(&m->pages_tab);
  for (uint32_t i = 1; i < m->heaps_n; i++)
    free(m->heaps[i].delayed);
  free(m->heaps);
  free(m->tlds);
  free(m->tld_of_thread);
  free(m->stacks);
  nptl_stacks_fini(&m->nptl);
  sim_idtable_free(&m->obj_tab);
  sim_idtable_free(&m->req_tab);
  mi_segs_destroy(m);
  mi_arenas3_destroy(m);
  free(m);
}

static uint32_t backing_heap(mi_model_t *m, uint32_t thread) {
  uint32_t tld = tld_get(m, thread, true);
  return tld != 0 ? m->tlds[tld].heap_backing : 0;
}

static as_status_t mimalloc_alloc(model_t *mm, const trace_event_t *ev,
                                  as_err_t *err) {
  mi_model_t *m = (mi_model_t *)mm;
  enter(m, ev->t_ns, err);
  uint32_t heap = backing_heap(m, ev->thread);
  if (heap != 0)
    alloc_object(m, heap, ev, ev->size);
  return leave(m);
}

static as_status_t mimalloc_free_ev(model_t *mm, const trace_event_t *ev,
                                    as_err_t *err) {
  mi_model_t *m = (mi_model_t *)mm;
  enter(m, ev->t_ns, err);
  free_object(m, tld_get(m, ev->thread, false), ev->id, ev->prev_size);
  return leave(m);
}

/* _mi_heap_realloc_zero (209 alloc.c:679-707): in place while the new size
 * fits the block and wastes at most half of it; else malloc, copy, free.
 * A debug build's usable size is what malloc was asked (v2.0.5
 * src/alloc.c:622-638 with mi_page_usable_size_of :227-233): an in-place
 * realloc keeps it. */
static void realloc_object(mi_model_t *m, uint32_t heap,
                           const trace_event_t *ev) {
  uint64_t   old = ev->prev_size;
  mobj_t     o = obj_get(m, ev->id);
  mpage_t   *p = P(m, o.page);
  sim_addr_t a = obj_addr(m, o);
  /* mi_usable_size: from an aligned object to its block's end (217
   * free.c mi_page_usable_aligned_size_of; 209 alloc.c:603-619) */
  uint64_t usable = m->g.debug ? m->requested[ev->id]
                               : p->start + (uint64_t)o.block * p->block_size +
                                     p->block_size - a;
  if (ev->size <= usable && ev->size >= usable / 2 && ev->size > 0) {
    if (ev->size > old && !(ev->flags & TRACE_FLAG_UNWRITTEN))
      mi_touch(m, a + old, ev->size - old);
    m->live_bytes += ev->size - old;
    return;
  }
  uint32_t tld = H(m, heap)->tld;
  uint32_t page, block;
  uint64_t pad = m->g.debug ? MI_PADDING_SIZE : 0;
  if (!mi_malloc(m, heap, ev->size + pad, &page, &block))
    return;
  mpage_t   *np = P(m, page);
  sim_addr_t na = np->start + (uint64_t)block * np->block_size;
  if (m->g.debug)
    mi_debug_alloc_fill(m, page, na, ev->size);
  uint64_t copy = ev->size < usable ? ev->size : usable;
  mi_read(m, a, copy);
  mi_touch(m, na, copy);
  if (ev->size > copy && !(ev->flags & TRACE_FLAG_UNWRITTEN))
    mi_touch(m, na + copy, ev->size - copy);
  if (!obj_put(m, ev->id, page, block, 0))
    return;
  m->live_bytes += ev->size - old;
  if (m->g.debug) {
    mi_debug_free_fill(m, tld, o.page, o.block, m->requested[ev->id]);
    m->requested[ev->id] = ev->size;
  }
  mi_free_block(m, tld, o.page, o.block);
}

static as_status_t mimalloc_realloc(model_t *mm, const trace_event_t *ev,
                                    as_err_t *err) {
  mi_model_t *m = (mi_model_t *)mm;
  enter(m, ev->t_ns, err);
  uint32_t heap = backing_heap(m, ev->thread);
  if (heap != 0)
    realloc_object(m, heap, ev);
  return leave(m);
}

/* The thread's stack: mimalloc preloaded into a glibc program (Debian's
 * libmimalloc2.0) leaves pthread_create to glibc, whose nptl maps and
 * caches the stacks (models/nptl_stacks.c, glibc 2.36 nptl/allocatestack.c,
 * nptl/nptl-stack.c), as for jemalloc.  The main thread (0) runs on the
 * process stack. */
static void thread_stack(mi_model_t *m, const trace_event_t *ev) {
  if (ev->thread == 0 || m->fail != AS_OK)
    return;
  if (ev->thread >= m->stacks_cap) {
    if (ev->op != TRACE_THREAD_START)
      return;
    kfail(m,
          sim_threadtab_reach((void **)&m->stacks, &m->stacks_cap, ev->thread,
                              sizeof *m->stacks, NULL,
                              sim_kernel_max_memory_bytes(m->kernel), m->err));
    if (m->fail != AS_OK)
      return;
  }
  nptl_stack_t *st = &m->stacks[ev->thread];
  kfail(m, nptl_stack_release(&m->nptl, st, m->err)); /* exit, or an id
                                                         started again */
  if (ev->op == TRACE_THREAD_START && m->fail == AS_OK)
    kfail(m, nptl_stack_acquire(&m->nptl, st, m->err));
}

static as_status_t mimalloc_thread(model_t *mm, const trace_event_t *ev,
                                   as_err_t *err) {
  mi_model_t *m = (mi_model_t *)mm;
  enter(m, ev->t_ns, err);
  if (ev->op == TRACE_THREAD_EXIT) {
    uint32_t tld = tld_get(m, ev->thread, false);
    if (tld != 0)
      thread_done(m, tld);
  }
  thread_stack(m, ev);
  return leave(m);
}

/* mi_collect(force) of the calling thread's default heap: purge all =
 * mi_collect(true), decay = mi_collect(false) (209 heap.c:180-182). */
static as_status_t mimalloc_purge(model_t *mm, const trace_event_t *ev,
                                  as_err_t *err) {
  mi_model_t *m = (mi_model_t *)mm;
  enter(m, ev->t_ns, err);
  if (ev->size != TRACE_PURGE_TCACHE) {
    uint32_t heap = backing_heap(m, ev->thread);
    if (heap != 0)
      mi_heap_collect_ex(m, heap,
                         ev->size == TRACE_PURGE_ALL ? MI_FORCE : MI_NORMAL);
  }
  return leave(m);
}

/* mi_option_set at run time: the purge knobs take effect at once. */
static as_status_t mimalloc_set_option(model_t *mm, const char *name,
                                       int64_t value, uint64_t now_ns,
                                       as_err_t *err) {
  mi_model_t *m = (mi_model_t *)mm;
  (void)now_ns;
  int key = model_option_find(mimalloc_options, name, strlen(name));
  /* mi_option_set sets mimalloc's own options; the stack options describe
   * glibc's threads (nptl_stacks.h), which no mimalloc call changes. */
  if (key < 0 || key == MO_VERSION || key == MO_STACK_SIZE ||
      key == MO_THREAD_STACK_PAGES)
    return as_err_set(err, AS_EINVAL,
                      "mimalloc: option '%s' cannot change at run time", name);
  /* A yes/no option is on for any value but 0: mi_option_is_enabled is
   * mi_option_get(option) != 0 (v2.0.9 src/options.c:154-156). */
  if (mimalloc_options[key].kind == OPT_BOOL)
    value = value != 0;
  char text[32];
  snprintf(text, sizeof text, "%" PRId64, value);
  model_opts_t o = m->opts;
  as_status_t rc = model_opts_set("mimalloc", &o, key, text, strlen(text), err);
  if (rc == AS_OK)
    rc = check_rows(m->version, &o, err);
  if (rc != AS_OK)
    return rc;
  m->opts = o;
  read_options(m, &m->opts);
  publish_options(m);
  return AS_OK;
}

static size_t mimalloc_counters(const model_t *mm, model_counter_t *out,
                                size_t cap) {
  const mi_model_t *m = (const mi_model_t *)mm;
  size_t            n = 0;
  uint64_t awaiting = MI_IS_V3(m->version) ? mi_arenas3_awaiting_purge(m)
                                           : mi_segs_awaiting_purge(m);
  n = model_counter_put(out, n, cap, "mimalloc", "segments", m->segments_live,
                        "count", "2.x segments held (32 MiB each, or huge)");
  n = model_counter_put(out, n, cap, "mimalloc", "pages", m->pages_live,
                        "count", "pages in use or retired");
  n = model_counter_put(out, n, cap, "mimalloc", "pages_awaiting_purge",
                        awaiting, "bytes",
                        "freed memory scheduled for a purge that has not run");
  n = model_counter_put(out, n, cap, "mimalloc", "abandoned_segments",
                        m->abandoned_count, "count",
                        "segments of exited threads, not yet reclaimed");
  n = model_counter_put(out, n, cap, "mimalloc", "purges", m->purges, "count",
                        "purge (madvise) calls made");
  n = model_counter_put(out, n, cap, "mimalloc", "purged_bytes",
                        m->purged_bytes, "bytes", "bytes purged so far");
  n = model_counter_put(out, n, cap, "mimalloc", "threads", m->threads_live,
                        "count", "threads mimalloc has initialised");
  return n;
}

static bool mimalloc_locate(const model_t *mm, uint64_t id, sim_addr_t *addr) {
  const mi_model_t *m = (const mi_model_t *)mm;
  mobj_t            o = obj_get(m, id);
  if (o.page == 0)
    return false;
  *addr = obj_addr(m, o);
  return true;
}

/* mi_usable_size: the block size of the block's page less MI_PADDING_SIZE,
 * 0 in release builds (209 alloc.c:603-619, 307-310,
 * include/mimalloc-internal.h:540-542): the bin's block size
 * (page-queue.c:110-117); above the size classes the OS-rounded request
 * (page.c:817) on 3.x, whose singleton pages keep it as their block size (301
 * arena.c:743-754), and on 2.x the whole large page or huge segment it lands
 * in. */
static uint64_t mimalloc_usable_size(const model_t *mm, uint64_t size,
                                     uint8_t domain) {
  const mi_model_t *m = (const mi_model_t *)mm;
  (void)domain;
  uint8_t bin = mi_model_bin(m, size ? size : 1);
  if (bin < MI_BIN_HUGE)
    return mi_bin_size(bin);
  uint64_t bsize = mi_good_alloc_size(size);
  return MI_IS_V3(m->version) ? bsize : mi_segment_big_block_size(m, bsize);
}

static void mimalloc_stats(const model_t *mm, model_stats_t *out) {
  const mi_model_t *m = (const mi_model_t *)mm;
  memset(out, 0, sizeof *out);
  out->live_bytes = m->live_bytes;
  out->live_objects = m->live_objects;
  out->mapped_bytes = sim_kernel_mapped_bytes(m->kernel);
  out->arenas = MI_IS_V3(m->version) ? m->arenas3_n : m->segments_live;
  for (uint32_t i = 1; i < m->pages_n; i++) {
    const mpage_t *p = &m->pages[i];
    if (p->live && p->reserved > p->used)
      out->free_bytes += (uint64_t)(p->reserved - p->used) * p->block_size;
  }
}

/* ---- Heap map (walk) and mechanisms ------------------------------------- */

/* Why mimalloc holds each kind of region (explain), by the rules the
 * model's files implement and cite. */
static const model_mechanism_t mimalloc_mechanisms[] = {
    {MI_MECH_IN_USE, "pages holding the program's objects",
     "Objects live in 64 KiB pages (512 KiB for medium sizes) of one size "
     "class each; a page's free blocks serve only that size, and only the "
     "thread that owns the page (mi_find_page).",
     "freeing the objects", true},
    {MI_MECH_ABANDONED, "pages no heap owns (abandoned)",
     "A thread that exits with live objects abandons their pages "
     "(_mi_page_abandon), and 3.x also abandons a heap's full pages beyond "
     "page_full_retain (mi_page_to_full); their free blocks serve no "
     "allocation until a thread reclaims the segment (2.x) or finds the "
     "page in its arena's abandoned map (3.x).",
     "freeing the objects, or a reclaim", true},
    {MI_MECH_EMPTY, "empty pages kept in their size class (retired)",
     "A page that empties while it is the only page of its size class is "
     "kept for retire_expire (1 + 8 in 2.0.9, 16 from 2.1) rounds of "
     "_mi_heap_collect_retired, which run when an allocation finds no free "
     "block in its size class (_mi_page_retire).",
     "allocations that need a new page, or mi_collect", false},
    {MI_MECH_PENDING, "freed pages awaiting their purge",
     "A freed page's slices are purged purge_delay (decommit_delay in "
     "2.0.9) after the free, but only when the program later frees into or "
     "allocates from the same segment (v3: frees a page anywhere) or calls "
     "mi_collect: never on a timer, so an idle program keeps them "
     "(mi_segment_schedule_purge, mi_arena_schedule_purge).",
     "a later free or page allocation in the same segment, mi_collect, or "
     "MIMALLOC_PURGE_DELAY=0 (MIMALLOC_DECOMMIT_DELAY=0 in 2.0.9)",
     false},
    {MI_MECH_FREE, "free slices not scheduled for purge",
     "Free slices outside the purge mask: purged already or never written, "
     "or written and then unscheduled when a neighbouring page was "
     "committed (2.0.9 commits 1 MiB around a page, mi_segment_commitx) "
     "or with purging off (purge_delay < 0).",
     "freeing a neighbouring page, which schedules the merged span again",
     false},
    {MI_MECH_CACHE, "free segments in 2.0.9's segment cache",
     "2.0.9 keeps whole free 32 MiB segments in a process-wide cache "
     "(_mi_segment_cache_push) and decommits them segment_decommit_delay "
     "(500 ms) later, but only on a later cache push or a collect.",
     "another segment freed after the delay, or mi_collect", false},
    {MI_MECH_ARENA, "freed segments' arena blocks (2.1)",
     "2.1 returns a free segment to its 1 GiB arena and purges it "
     "purge_delay x arena_purge_mult (100 ms) later, but only when another "
     "segment is freed or on mi_collect(true) from the main thread "
     "(_mi_arena_free, mi_arenas_try_purge).",
     "another segment freed after the delay, or mi_collect(true)", false},
    {MI_MECH_META, "mimalloc's own bookkeeping",
     "Segment headers (one slice entry per 64 KiB), arena bitmaps, 3.x page "
     "infos and page map, each thread's heap and tld, and the library's "
     "static data.",
     "nothing while the segments, arenas and threads exist", false},
    {NULL, NULL, NULL, NULL, false},
};

as_status_t mi_walk_emit(const mi_walker_t *w, sim_addr_t addr, uint64_t bytes,
                         const char *kind, const char *mech, uint8_t level,
                         uint8_t state) {
  model_region_t r = {.addr = addr,
                      .bytes = bytes,
                      .kind = kind,
                      .mechanism = level == 0 ? NULL : mech,
                      .level = level,
                      .state = state};
  return bytes == 0 ? AS_OK : w->fn(w->user, &r, w->err);
}

as_status_t mi_walk_unit(const mi_walker_t *w, sim_addr_t addr, uint64_t bytes,
                         const char *kind, const char *mech, uint8_t state) {
  as_status_t rc = mi_walk_emit(w, addr, bytes, kind, NULL, 0, state);
  return rc == AS_OK ? mi_walk_emit(w, addr, bytes, kind, mech, 1, state) : rc;
}

/* Live bytes count whole blocks: the model keeps no request sizes. */
as_status_t mi_walk_page(const mi_model_t *m, uint32_t page,
                         const mi_walker_t *w) {
  const mpage_t *p = &m->pages[page];
  model_region_t r = {.addr = p->slice_start,
                      .bytes = (uint64_t)p->slice_count * MI_SLICE_SIZE,
                      .live_bytes = (uint64_t)p->used * p->block_size,
                      .live_objects = p->used,
                      .kind = "page",
                      .level = 1};
  if (p->used == 0) {
    r.mechanism = MI_MECH_EMPTY;
    r.state = MODEL_REGION_CACHED;
  } else {
    r.mechanism = p->heap == 0 ? MI_MECH_ABANDONED : MI_MECH_IN_USE;
    r.state = MODEL_REGION_LIVE;
  }
  return w->fn(w->user, &r, w->err);
}

static bool slice_pending(const uint8_t *pending, const uint64_t *mask,
                          uint32_t i) {
  return pending != NULL ? pending[i] != 0 : (mask[i >> 6] >> (i & 63)) & 1;
}

as_status_t mi_walk_free_slices(const mi_walker_t *w, sim_addr_t base,
                                uint32_t from, uint32_t to,
                                const uint8_t *pending, const uint64_t *mask) {
  as_status_t rc = AS_OK;
  while (from < to && rc == AS_OK) {
    bool     on = slice_pending(pending, mask, from);
    uint32_t end = from + 1;
    while (end < to && slice_pending(pending, mask, end) == on)
      end++;
    rc =
        mi_walk_emit(w, base + (uint64_t)from * MI_SLICE_SIZE,
                     (uint64_t)(end - from) * MI_SLICE_SIZE, "free slices",
                     on ? MI_MECH_PENDING : MI_MECH_FREE, 1, MODEL_REGION_FREE);
    from = end;
  }
  return rc;
}

/* Thread data (live threads' and the cache's) and the static data. */
static as_status_t walk_thread_data(const mi_model_t *m, const mi_walker_t *w) {
  as_status_t rc = AS_OK;
  for (uint32_t t = 1; t < m->tlds_n && rc == AS_OK; t++)
    if (m->tlds[t].live && m->tlds[t].data != 0)
      rc = mi_walk_unit(w, m->tlds[t].data, 8192, "thread data", MI_MECH_META,
                        MODEL_REGION_METADATA);
  for (int i = 0; i < 8 && rc == AS_OK; i++)
    if (m->td_cache[i] != 0)
      rc = mi_walk_unit(w, m->td_cache[i], 8192, "cached thread data",
                        MI_MECH_META, MODEL_REGION_METADATA);
  if (rc == AS_OK)
    rc = mi_walk_unit(w, m->static_area, 64 * MI_KIB, "static data",
                      MI_MECH_META, MODEL_REGION_METADATA);
  if (rc == AS_OK && m->cache_area != 0)
    rc = mi_walk_unit(
        w, m->cache_area, (uint64_t)MI_CACHE_MAX * m->g.cache_slot,
        "segment cache slots", MI_MECH_META, MODEL_REGION_METADATA);
  return rc;
}

/* Heap map: 2.x segments with their pages and free spans, or 3.x arenas
 * with theirs, then what lies outside them. */
static as_status_t mimalloc_walk(const model_t *mm, model_region_fn fn,
                                 void *user, as_err_t *err) {
  const mi_model_t *m = (const mi_model_t *)mm;
  bool              v3 = MI_IS_V3(m->version);
  size_t            units = (v3 ? m->arenas3_n : m->segs_n) + 1u;
  uint64_t         *live = calloc(2 * units, sizeof *live);
  if (live == NULL)
    return as_err_set(err, AS_ENOMEM, "mimalloc: out of memory");
  for (uint32_t i = 1; i < m->pages_n; i++) {
    const mpage_t *p = &m->pages[i];
    if (p->live && p->seg < units) {
      live[2 * p->seg] += (uint64_t)p->used * p->block_size;
      live[2 * p->seg + 1] += p->used;
    }
  }
  mi_walker_t w = {.fn = fn, .user = user, .err = err, .unit_live = live};
  as_status_t rc = v3 ? mi_arenas3_walk(m, &w) : mi_segs_walk(m, &w);
  if (rc == AS_OK)
    rc = walk_thread_data(m, &w);
  for (uint32_t t = 0; rc == AS_OK && t < m->stacks_cap; t++)
    rc = nptl_stack_walk(&m->stacks[t], fn, user, err);
  if (rc == AS_OK)
    rc = nptl_stacks_walk_cache(&m->nptl, fn, user, err);
  free(live);
  return rc;
}

/* What the library reads and the model does not: memory reserved up front
 * (huge pages or OS memory, arenas that are never decommitted: v2.0.9
 * src/arena.c:171) and no OS memory past the reservations.  v2.0.9
 * src/options.c:74-90, v3.4.3 :129-142 (disallow_os_alloc, legacy
 * limit_os_alloc). */
static const char *const mimalloc_unmodelled_env[] = {
    "MIMALLOC_RESERVE_HUGE_OS_PAGES=0", "MIMALLOC_RESERVE_OS_MEMORY=0",
    "MIMALLOC_LIMIT_OS_ALLOC=0", "MIMALLOC_DISALLOW_OS_ALLOC=0", NULL};

const model_methods_t model_mimalloc_methods = {
    .name = "mimalloc",
    .summary =
        "mimalloc 2.0.5/2.0.9/2.1.2/2.1.7/3.0.1/3.4.3: segments or arenas "
        "of 64 KiB pages, delayed purge run only by later activity",
    .options = mimalloc_options,
    .preload = "libmimalloc",
    .unmodelled_env = mimalloc_unmodelled_env,
    .mechanisms = mimalloc_mechanisms,
    .create = mimalloc_create,
    .destroy = mimalloc_destroy,
    .alloc = mimalloc_alloc,
    .realloc = mimalloc_realloc,
    .free = mimalloc_free_ev,
    .thread = mimalloc_thread,
    .trim = NULL,
    .stats = mimalloc_stats,
    .locate = mimalloc_locate,
    .purge = mimalloc_purge,
    .set_option = mimalloc_set_option,
    .counters = mimalloc_counters,
    .walk = mimalloc_walk,
    .usable_size = mimalloc_usable_size,
};

/* ---- Composition API (mimalloc.h) --------------------------------------- */

void mimalloc_set_hooks(mi_model_t *m, const mi_hooks_t *hooks) {
  if (hooks == NULL) {
    memset(&m->hooks, 0, sizeof m->hooks);
    m->has_hooks = false;
  } else {
    m->hooks = *hooks;
    m->has_hooks = true;
  }
}

as_status_t mimalloc_thread_heap(mi_model_t *m, uint32_t thread,
                                 uint64_t now_ns, mi_heap_ref_t *out,
                                 as_err_t *err) {
  enter(m, now_ns, err);
  *out = backing_heap(m, thread);
  return leave(m);
}

as_status_t mimalloc_heap_new(mi_model_t *m, uint32_t thread, uint8_t tag,
                              uint64_t now_ns, mi_heap_ref_t *out,
                              as_err_t *err) {
  enter(m, now_ns, err);
  uint32_t tld = tld_get(m, thread, true);
  *out = tld != 0 ? heap_new(m, tld, tag) : 0;
  if (tag != 0)
    m->heap_tags = true;
  return leave(m);
}

static as_status_t heap_check(mi_model_t *m, mi_heap_ref_t heap,
                              uint32_t thread, as_err_t *err) {
  if (heap == 0 || heap >= m->heaps_n || !m->heaps[heap].live)
    return as_err_set(err, AS_EINVAL, "mimalloc: no heap %u", heap);
  if (m->tlds[m->heaps[heap].tld].thread != thread)
    return as_err_set(err, AS_EINVAL,
                      "mimalloc: heap %u belongs to thread %u, not %u", heap,
                      m->tlds[m->heaps[heap].tld].thread, thread);
  return AS_OK;
}

as_status_t mimalloc_heap_alloc(mi_model_t *m, mi_heap_ref_t heap,
                                const trace_event_t *ev, as_err_t *err) {
  as_status_t rc = heap_check(m, heap, ev->thread, err);
  if (rc != AS_OK)
    return rc;
  enter(m, ev->t_ns, err);
  alloc_object(m, heap, ev, ev->size);
  return leave(m);
}

as_status_t mimalloc_heap_realloc(mi_model_t *m, mi_heap_ref_t heap,
                                  const trace_event_t *ev, as_err_t *err) {
  as_status_t rc = heap_check(m, heap, ev->thread, err);
  if (rc != AS_OK)
    return rc;
  enter(m, ev->t_ns, err);
  realloc_object(m, heap, ev);
  return leave(m);
}

as_status_t mimalloc_free(mi_model_t *m, const trace_event_t *ev,
                          as_err_t *err) {
  return mimalloc_free_ev(&m->base, ev, err);
}

static as_status_t heap_live(const mi_model_t *m, mi_heap_ref_t heap,
                             as_err_t *err) {
  if (heap == 0 || heap >= m->heaps_n || !m->heaps[heap].live)
    return as_err_set(err, AS_EINVAL, "mimalloc: no heap %u", heap);
  return AS_OK;
}

as_status_t mimalloc_heap_collect(mi_model_t *m, mi_heap_ref_t heap, bool force,
                                  uint64_t now_ns, as_err_t *err) {
  as_status_t rc = heap_live(m, heap, err);
  if (rc != AS_OK)
    return rc;
  enter(m, now_ns, err);
  mi_heap_collect_ex(m, heap, force ? MI_FORCE : MI_NORMAL);
  return leave(m);
}

as_status_t mimalloc_heap_abandon(mi_model_t *m, mi_heap_ref_t heap,
                                  uint64_t now_ns, as_err_t *err) {
  as_status_t rc = heap_live(m, heap, err);
  if (rc != AS_OK)
    return rc;
  enter(m, now_ns, err);
  mi_heap_abandon_all(m, heap);
  return leave(m);
}

as_status_t mimalloc_heap_visit(mi_model_t *m, mi_heap_ref_t heap,
                                uint64_t now_ns, as_err_t *err) {
  as_status_t rc = heap_live(m, heap, err);
  if (rc != AS_OK)
    return rc;
  enter(m, now_ns, err);
  mi_heap_visit_pages(m, heap);
  return leave(m);
}

bool mimalloc_page_in_full(const mi_model_t *m, mi_page_ref_t p) {
  return m->pages[p].in_full;
}

void mimalloc_page_unfull(mi_model_t *m, mi_page_ref_t p) {
  mi_page_unfull(m, p);
}

bool mimalloc_page_all_free(const mi_model_t *m, mi_page_ref_t p) {
  return m->pages[p].used == 0;
}

mi_heap_ref_t mimalloc_page_heap(const mi_model_t *m, mi_page_ref_t p) {
  return m->pages[p].heap;
}

uint8_t mimalloc_page_tag(const mi_model_t *m, mi_page_ref_t p) {
  return m->pages[p].tag;
}

uint64_t mimalloc_page_bytes(const mi_model_t *m, mi_page_ref_t p) {
  return (uint64_t)m->pages[p].slice_count * MI_SLICE_SIZE;
}

mi_page_ref_t mimalloc_object_page(const mi_model_t *m, uint64_t id) {
  return obj_get(m, id).page;
}

uint64_t mimalloc_page_block_size(const mi_model_t *m, mi_page_ref_t p) {
  return m->pages[p].block_size;
}

uint64_t mimalloc_page_blocks(const mi_model_t *m, mi_page_ref_t p) {
  return m->pages[p].reserved;
}

uint64_t *mimalloc_page_user(mi_model_t *m, mi_page_ref_t p) {
  return &m->pages[p].user;
}

as_status_t mimalloc_page_free(mi_model_t *m, mi_page_ref_t p, bool force,
                               uint64_t now_ns, as_err_t *err) {
  if (p == 0 || p >= m->pages_n || !m->pages[p].live || m->pages[p].used != 0 ||
      m->pages[p].heap == 0)
    return as_err_set(err, AS_EINVAL,
                      "mimalloc: page %u is not an empty page of a heap", p);
  enter(m, now_ns, err);
  mi_page_free(m, p, force);
  return leave(m);
}
