/* models/jemalloc.c -- jemalloc 5.3.0 (Debian 12: libjemalloc2 5.3.0-1),
 * as a preloaded malloc: size classes, arenas chosen per thread, thread
 * caches, slabs of small regions, large extents, the huge arena, and --
 * in jemalloc_extent.c -- extent caches with decay and background threads,
 * and -- in jemalloc_base.c -- its metadata.
 *
 * Why: jemalloc keeps freed pages as "dirty" extents and returns them on a
 * clock (dirty_decay_ms, 10 s by default) that advances only when the
 * program calls into the allocator: about one arena-level operation in a
 * thousand runs the decay (thread-cache hits never do).  An idle process
 * therefore keeps everything, a busy one returns memory along a smooth
 * curve, dirty_decay_ms:0 returns each freed extent at once with one
 * madvise, and background threads purge on their own timers.  Which pages
 * stay resident depends on exact placement: lowest slab and region first,
 * first-fit extents by age and address, per-thread caches and arenas.
 *
 * Citations are to tag 5.3.0 of github:jemalloc/jemalloc; the rules and
 * what is left out are in docs/models/jemalloc.md.
 *
 * Page touches: jemalloc never writes into the memory it hands out (slab
 * bitmaps and free lists live in its metadata), so a region's pages become
 * resident when the program writes them; calloc memsets a small region
 * (tcache_inlines.h:74-78) and zeroes a recycled large extent with
 * MADV_DONTNEED (ehooks.c:231-245).  A large object starts at a random
 * 64-byte multiple inside its first page (cache-oblivious, one extra page
 * per large extent: arena_inlines_b.h:426-452, sz.c:110).
 *
 * Sections
 *   Options                       Size classes
 *   Arenas                        Threads and arena choice
 *   Slabs and bins                Thread cache
 *   Large objects                 Allocation entry points
 *   Model interface               Introspection (models/jemalloc.h)
 */
#include "jemalloc_internal.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/threadtab.h"

#define E(jm, e) (&(jm)->ext[(e)])

/* ---- Options ------------------------------------------------------------- */

#define JEMALLOC_OPTIONS(X)                                                    \
  X(JO_VERSION, "version", OPT_ENUM, "5.3.0", "", "5.3.0|5.2.1",               \
    "meta:jemalloc_version",                                                   \
    "jemalloc tags 5.3.0 (Debian 12 libjemalloc2 5.3.0-1) and 5.2.1 "          \
    "(Ubuntu 22.04 libjemalloc2 5.2.1); 5.2.1: event-counted tcache "          \
    "GC (5.2.1 src/tcache.c:40-86), per-arena decay tickers in a0malloc'ed "   \
    "arenas_tdata (5.2.1 src/jemalloc.c:421-495), lg_tcache_max only",         \
    "jemalloc release whose behaviour to model")                               \
  X(JO_NARENAS, "narenas", OPT_U64, "0", "", NULL, "MALLOC_CONF:narenas",      \
    "jemalloc 5.3.0 src/jemalloc.c:1975-1993 malloc_narenas_default: "         \
    "0 = 4 * ncpus (opt_narenas_ratio 4, :153) when ncpus > 1, else 1",        \
    "automatic arenas for application threads")                                \
  X(JO_NCPUS, "ncpus", OPT_U64, "2", "", NULL, "meta:ncpus",                   \
    "jemalloc 5.3.0 src/jemalloc.c:717-760 malloc_ncpus (CPU_COUNT of "        \
    "sched_getaffinity); 2 = the machine the validation runs were measured "   \
    "on",                                                                      \
    "CPUs jemalloc sees: narenas = 4 * ncpus")                                 \
  X(JO_DIRTY_DECAY_MS, "dirty_decay_ms", OPT_I64, "10000", "ms", NULL,         \
    "MALLOC_CONF:dirty_decay_ms",                                              \
    "jemalloc 5.3.0 include/jemalloc/internal/arena_types.h:7 "                \
    "DIRTY_DECAY_MS_DEFAULT; range src/jemalloc.c:1312-1315",                  \
    "time freed pages stay resident before MADV_DONTNEED (-1 never, 0 at "     \
    "once)")                                                                   \
  X(JO_MUZZY_DECAY_MS, "muzzy_decay_ms", OPT_I64, "0", "ms", NULL,             \
    "MALLOC_CONF:muzzy_decay_ms",                                              \
    "jemalloc 5.3.0 arena_types.h:8 MUZZY_DECAY_MS_DEFAULT (0 since 5.2.0)",   \
    "time MADV_FREE'd pages wait before MADV_DONTNEED (0: no lazy step)")      \
  X(JO_BACKGROUND_THREAD, "background_thread", OPT_BOOL, "false", "", NULL,    \
    "MALLOC_CONF:background_thread",                                           \
    "jemalloc 5.3.0 src/background_thread.c:12-14 "                            \
    "BACKGROUND_THREAD_DEFAULT",                                               \
    "purge from background threads on their own timers")                       \
  X(JO_MAX_BG_THREADS, "max_background_threads", OPT_U64, "4", "", NULL,       \
    "MALLOC_CONF:max_background_threads",                                      \
    "jemalloc 5.3.0 src/background_thread.c:781-784, "                         \
    "background_thread_structs.h DEFAULT_NUM_BACKGROUND_THREAD 4",             \
    "background threads; thread i serves arenas i, i + max, ...")              \
  X(JO_RETAIN, "retain", OPT_BOOL, "true", "", NULL, "MALLOC_CONF:retain",     \
    "jemalloc 5.3.0 src/extent_mmap.c:10-16, configure.ac:700-702 (64-bit)",   \
    "keep purged address space (MADV_DONTNEED) instead of munmap")             \
  X(JO_OVERSIZE_THRESHOLD, "oversize_threshold", OPT_BYTES, "8388608",         \
    "bytes", NULL, "MALLOC_CONF:oversize_threshold",                           \
    "jemalloc 5.3.0 arena_types.h:42 OVERSIZE_THRESHOLD_DEFAULT; 0 disables "  \
    "(arena.c:1745-1763)",                                                     \
    "requests this large go to the huge arena, purged at once")                \
  X(JO_TCACHE, "tcache", OPT_BOOL, "true", "", NULL, "MALLOC_CONF:tcache",     \
    "jemalloc 5.3.0 src/tcache.c:13 opt_tcache", "per-thread caches")          \
  X(JO_TCACHE_MAX, "tcache_max", OPT_BYTES, "32768", "bytes", NULL,            \
    "MALLOC_CONF:tcache_max",                                                  \
    "jemalloc 5.3.0 src/tcache.c:16 opt_tcache_max; at most 8 MiB "            \
    "(tcache_types.h:30-31, src/jemalloc.c:1374-1376)",                        \
    "largest size class the thread cache holds")                               \
  X(JO_LG_TCACHE_MAX, "lg_tcache_max", OPT_I64, "-1", "", NULL,                \
    "MALLOC_CONF:lg_tcache_max",                                               \
    "jemalloc 5.3.0 src/jemalloc.c:1377-1391: tcache_max = 1 << value, "       \
    "clipped to 23; -1 = not set (tcache_max applies)",                        \
    "tcache_max as a power of two (the older spelling)")                       \
  X(JO_LG_PAGE, "lg_page", OPT_U64, "12", "", NULL, NULL,                      \
    "configure --with-lg-page: 12 in Debian's amd64 build (LG_PAGE, "          \
    "jemalloc_internal_defs.h)",                                               \
    "log2 of jemalloc's page; must be at least the OS page")                   \
  X(JO_PRNG_SEED, "prng_seed", OPT_U64, "140737354006784", "", NULL,           \
    "meta:jemalloc_prng_seed",                                                 \
    "jemalloc 5.3.0 src/tsd.c:222-232: a thread's prng state starts at its "   \
    "tsd's address (random under ASLR; an oracle run records the main "        \
    "thread's, traces/je_seeds.h); thread t uses seed + 8192 * t unless the "  \
    "run recorded its own (option seed.prng.t)",                               \
    "seed of the decay tickers and cache-oblivious offsets")                   \
  X(JO_JITTER_SEED, "jitter_seed", OPT_U64, "140737345617920", "", NULL,       \
    "meta:jemalloc_jitter_seed",                                               \
    "jemalloc 5.3.0 src/decay.c:40: the decay_t's address (random under "      \
    "ASLR; an oracle run records arena 0's dirty one, traces/je_seeds.h); "    \
    "arena a's dirty decay uses seed + 2a (or the run's own, option "          \
    "seed.jitter.a), its muzzy decay that + sizeof (decay_t) (1784; 5.2.1 "    \
    "arena_decay_t the same, scripts/measure/jemalloc/je_decay_seeds.c)",      \
    "seed of the decay epochs' jitter")                                        \
  X(JO_CLOCK_RES, "clock_res_ns", OPT_U64, "0", "ns", NULL,                    \
    "meta:jemalloc_clock_res_ns",                                              \
    "jemalloc 5.3.0 src/nstime.c:186-194: nstime_get reads "                   \
    "CLOCK_MONOTONIC_COARSE, which moves once per kernel tick (4 ms here: "    \
    "clock_getres)",                                                           \
    "tick of the clock decay reads; 0: the trace's own time")                  \
  X(JO_CLOCK_LAG, "clock_lag_ns", OPT_U64, "0", "ns", NULL,                    \
    "meta:jemalloc_clock_lag_ns",                                              \
    "measured by the oracle: CLOCK_MONOTONIC at the trace's origin less "      \
    "CLOCK_MONOTONIC_COARSE read just before it",                              \
    "how far that clock lagged the trace's at its origin")                     \
  X(JO_CLOCK_INIT, "clock_init_ns", OPT_U64, "0", "ns", NULL,                  \
    "meta:jemalloc_clock_init_ns",                                             \
    "measured by the oracle: CLOCK_MONOTONIC_COARSE at the origin less at "    \
    "jemalloc's initialisation (malloc_init: arena 0's decay epochs start)",   \
    "that clock's time from jemalloc's initialisation to the origin")          \
  X(JO_STARTUP_MALLOC, "startup_malloc", OPT_BYTES, "72704", "bytes", NULL,    \
    "meta:jemalloc_startup_malloc",                                            \
    "measured: the first malloc of every process that preloads Debian's "      \
    "libjemalloc2, which links libstdc++ (jemalloc_cpp): GCC 12 libsupc++/"    \
    "eh_alloc.cc's emergency pool, 64 x 1024 + 64 x 112 bytes, kept for the "  \
    "process's life",                                                          \
    "bytes malloc'ed before the program starts (0: none, as when jemalloc "    \
    "is dlopen'ed or the trace has that malloc: allocsim capture)")            \
  NPTL_STACK_OPTIONS(X, JO_STACK_SIZE, JO_THREAD_STACK_PAGES)

enum jemalloc_option_e { JEMALLOC_OPTIONS(MODEL_OPTION_KEY) JO_COUNT };
_Static_assert(JO_COUNT <= MODEL_OPTS_MAX, "model_opts_t holds the rows");

static const model_option_t jemalloc_options[] = {
    JEMALLOC_OPTIONS(MODEL_OPTION_ROW){0}};

/* ---- Helpers ------------------------------------------------------------- */

static as_status_t report(jemalloc_model_t *jm, as_err_t *err) {
  if (err != NULL) {
    if (jm->ferr.msg[0] != '\0')
      *err = jm->ferr;
    else
      as_err_set(err, jm->fail, "jemalloc: %s", as_status_message(jm->fail));
    err->code = jm->fail;
  }
  return jm->fail;
}

/* done's work when the event or the model failed: kept out of line so the
 * entry points' common ending is two tests (done was 2.7 % of a churn
 * replay's instructions as a call). */
__attribute__((noinline)) static as_status_t
done_failed(jemalloc_model_t *jm, as_status_t rc, as_err_t *err) {
  if (rc != AS_OK && jm->fail == AS_OK) {
    jm->fail = rc;
    if (err != NULL && err != &jm->ferr)
      jm->ferr = *err;
  }
  if (jm->fail != AS_OK)
    return report(jm, err);
  return AS_OK;
}

/* Every entry point ends here: a failure stops the model for good. */
static inline as_status_t done(jemalloc_model_t *jm, as_status_t rc,
                               as_err_t *err) {
  if (__builtin_expect(rc == AS_OK && jm->fail == AS_OK, 1))
    return AS_OK;
  return done_failed(jm, rc, err);
}

/* Every entry point starts here: a failed model stays failed (the same
 * error again), else the model's clock moves to the event's time. */
static as_status_t enter(jemalloc_model_t *jm, uint64_t t_ns, as_err_t *err) {
  if (jm->fail != AS_OK)
    return report(jm, err);
  jm->now_ns = t_ns;
  jm->clock_started = true;
  return AS_OK;
}

/* What jemalloc's nstime_get reads (5.3.0 src/nstime.c:186-194,
 * CLOCK_MONOTONIC_COARSE): the model's time floored to that clock's ticks,
 * counted from its reading at jemalloc's initialisation, which is the
 * model's creation (time 0).  Decay keeps its epochs and deadlines on it
 * (pac.c:498 nstime_init_update, decay.c:176-208), so whether a tick
 * advances an epoch depends on when the coarse clock last moved. */
uint64_t je_clock_ns(const jemalloc_model_t *jm) {
  if (jm->clock_res_ns == 0 || !jm->clock_started)
    return jm->now_ns;
  uint64_t res = jm->clock_res_ns;
  return (jm->now_ns + jm->clock_lag_ns) / res * res + jm->clock_init_ns;
}

as_status_t je_bug(jemalloc_model_t *jm, as_err_t *err, const char *what) {
  (void)jm;
  return as_err_set(err, AS_EINVAL, "jemalloc: model inconsistency: %s", what);
}

/* Inline: the kernel's fast test is most of a touch (as a call it was
 * 5 % of a churn replay's instructions). */
__attribute__((always_inline)) static inline as_status_t
touch(jemalloc_model_t *jm, uint64_t addr, uint64_t len, as_err_t *err) {
  return len ? sim_kernel_touch(jm->kernel, addr, len, err) : AS_OK;
}

static uint64_t ceil_to(uint64_t x, uint64_t a) {
  return (x + a - 1) & ~(a - 1);
}

static unsigned lg_floor(uint64_t x) {
  return 63 - (unsigned)__builtin_clzll(x);
}

/* ---- Size classes (src/sc.c, src/sz.c) ---------------------------------- */

/* slab_size (sc.c:22-51): the least page multiple holding whole regions. */
static uint64_t slab_pages(uint64_t page, uint64_t reg) {
  uint64_t try_size = page, try_nregs = try_size / reg, perfect = 0;
  for (;;) {
    perfect = try_size;
    uint64_t perfect_nregs = try_nregs;
    try_size += page;
    try_nregs = try_size / reg;
    if (perfect == perfect_nregs * reg)
      return perfect / page;
  }
}

/* tcache_ncached_max_compute (tcache.c:991-1047) with the default
 * tcache_nslots_small_min 20, _max 200, lg_tcache_nslots_mul 1,
 * tcache_nslots_large 20 (tcache.c:19-31). */
static uint16_t ncached_max_of(const jemalloc_model_t *jm, unsigned i) {
  if (i >= jm->nbins)
    return 20;
  uint32_t c = jm->bin_nregs[i] << 1;
  if (c % 2 != 0)
    c++;
  return (uint16_t)(c <= 20 ? 20 : c <= 200 ? c : 200);
}

/* size_classes (sc.c:85-253): tiny classes below the quantum (8), a first
 * group 16, 32, 48, 64, then four classes per doubling up to 7 * 2^60;
 * bins below PAGE << SC_LG_NGROUP (sc.c:70); page-size classes are the
 * multiples of PAGE (sc.c:66). */
static as_status_t size_classes_init(jemalloc_model_t *jm, as_err_t *err) {
  const unsigned ptr_bits = 64, ngroup = 1u << JE_LG_NGROUP;
  unsigned       n = 0, lg_base = JE_LG_TINY_MIN, lg_delta = lg_base;
  unsigned       ndelta = 0, ntiny = 0;
  uint64_t       page = jm->page;
  while (lg_base < JE_LG_QUANTUM) { /* tiny (:112-132) */
    jm->index2size[n++] = UINT64_C(1) << lg_base;
    ntiny++;
    lg_delta = lg_base;
    lg_base++;
  }
  if (ntiny != 0) { /* the first non-tiny pseudo group (:134-154) */
    lg_base--;
    ndelta = 1;
    jm->index2size[n++] =
        (UINT64_C(1) << lg_base) + ((uint64_t)ndelta << lg_delta);
    lg_base++;
    lg_delta++;
  }
  while (ndelta < ngroup) { /* :155-167 */
    jm->index2size[n++] =
        (UINT64_C(1) << lg_base) + ((uint64_t)ndelta << lg_delta);
    ndelta++;
  }
  for (lg_base += JE_LG_NGROUP; lg_base < ptr_bits - 1;
       lg_base++, lg_delta++) { /* :169-210 */
    unsigned limit = lg_base == ptr_bits - 2 ? ngroup - 1 : ngroup;
    for (ndelta = 1; ndelta <= limit; ndelta++) {
      if (n == JE_MAX_SIZES)
        return as_err_set(err, AS_EINVAL, "jemalloc: too many size classes");
      jm->index2size[n++] =
          (UINT64_C(1) << lg_base) + ((uint64_t)ndelta << lg_delta);
    }
  }
  jm->nsizes = n;
  jm->ntiny = ntiny;
  jm->nbins = 0;
  jm->npsizes = 0;
  for (unsigned i = 0; i < n; i++) {
    uint64_t sz = jm->index2size[i];
    if (sz < page << JE_LG_NGROUP) {
      if (jm->nbins == JE_MAX_BINS)
        return as_err_set(err, AS_EINVAL, "jemalloc: too many bins");
      jm->bin_slab_size[jm->nbins] = slab_pages(page, sz) * page;
      jm->bin_nregs[jm->nbins] = (uint32_t)(jm->bin_slab_size[jm->nbins] / sz);
      jm->nbins++;
    }
    if (sz % page == 0) {
      if (jm->npsizes == JE_MAX_PSIZES)
        return as_err_set(err, AS_EINVAL, "jemalloc: too many page sizes");
      jm->pind2sz[jm->npsizes++] = sz;
    }
  }
  jm->small_maxclass = jm->index2size[jm->nbins - 1];
  jm->large_minclass = page << JE_LG_NGROUP;
  jm->large_maxclass = jm->index2size[n - 1];
  jm->pind2sz[jm->npsizes] = jm->large_maxclass + page; /* sz.c:67-69 */
  jm->lookup_maxclass = 4096; /* sc.h SC_LG_MAX_LOOKUP 12 */
  for (uint64_t s = 0, i = 0; s <= jm->lookup_maxclass; s += 8) {
    while (jm->index2size[i] < s)
      i++;
    jm->lookup[s / 8] = (uint8_t)i;
  }
  return AS_OK;
}

/* lg_floor((v << 1) - 1): the lg of the first power of two >= v, v >= 1. */
static inline unsigned lg_ceil_of(uint64_t v) {
  return 63u - (unsigned)__builtin_clzll((v << 1) - 1);
}

/* The index of the first class >= size of a group series that starts at
 * 2^lg_min with JE_LG_NGROUP classes a doubling (sizes at or below 2^lg_min
 * are index 0): sz_size2index_compute past the tiny classes (5.3.0
 * include/jemalloc/internal/sz.h:171-184) with lg_min = LG_QUANTUM +
 * LG_NGROUP, and sz_psz2ind (5.2.1 sz.h:53-70; 5.3.0 :57-99 computes the
 * same) with lg_min = LG_PAGE + LG_NGROUP.  In closed form: a binary
 * search of the table here was 3 % of a jemalloc churn replay. */
static inline unsigned group_index(uint64_t size, unsigned lg_min) {
  unsigned x = lg_ceil_of(size);
  unsigned shift = x < lg_min ? 0 : x - lg_min;
  unsigned lg_delta =
      x < lg_min + 1 ? lg_min - JE_LG_NGROUP : x - JE_LG_NGROUP - 1;
  unsigned mod =
      (unsigned)((size - 1) >> lg_delta) & ((1u << JE_LG_NGROUP) - 1);
  return (shift << JE_LG_NGROUP) + mod;
}

unsigned je_size2index(const jemalloc_model_t *jm, uint64_t size) {
  if (size <= jm->lookup_maxclass)
    return jm->lookup[(size + 7) / 8];
  if (size > jm->large_maxclass)
    return jm->nsizes;
  /* the tiny classes first (sz.h:183 SC_NTINY + grp + mod) */
  return jm->ntiny + group_index(size, JE_LG_QUANTUM + JE_LG_NGROUP);
}

unsigned je_psz2ind(const jemalloc_model_t *jm, uint64_t psz) {
  if (psz > jm->large_maxclass)
    return jm->npsizes;
  return psz == 0 ? 0 : group_index(psz, jm->lg_page + JE_LG_NGROUP);
}

static uint64_t s2u(const jemalloc_model_t *jm, uint64_t size) {
  return jm->index2size[je_size2index(jm, size ? size : 1)];
}

/* sz_sa2u (include/.../sz.h:313-366); 5.2.1 takes a small class only
 * below PAGE alignment (5.2.1 include/jemalloc/internal/sz.h:269), so a
 * page-aligned small request is a large one. */
static uint64_t sa2u(const jemalloc_model_t *jm, uint64_t size,
                     uint64_t alignment) {
  bool small_align =
      jm->version == JE_V521 ? alignment < jm->page : alignment <= jm->page;
  if (size <= jm->small_maxclass && small_align) {
    uint64_t usize = s2u(jm, ceil_to(size, alignment));
    if (usize < jm->large_minclass)
      return usize;
  }
  return size <= jm->large_minclass ? jm->large_minclass : s2u(jm, size);
}

/* The smoothstep table (smoothstep.h, generated by "smoothstep.sh smoother
 * 200 24 3 15"): h[s-1] = floor(2^24 * (6x^5 - 15x^4 + 10x^3)), x = s/200,
 * exact in integers; and the geometric ticker's table (ticker.c:23-32 from
 * ticker.py): round(-61 * ln((i+1)/64)). */
static void tables_init(jemalloc_model_t *jm) {
  /* 200^5 * (6x^5 - 15x^4 + 10x^3) <= 200^5, so num << 24 < 2^63 */
  const uint64_t den = UINT64_C(200) * 200 * 200 * 200 * 200;
  for (uint64_t s = 1; s <= JE_NSTEPS; s++) {
    uint64_t num =
        6 * s * s * s * s * s + 400000 * s * s * s - 3000 * s * s * s * s;
    jm->h_steps[s - 1] = (num << JE_BFP) / den;
  }
  for (unsigned i = 0; i < 64; i++)
    jm->ticker_table[i] = (uint8_t)lround(-61.0 * log((i + 1) / 64.0));
}

/* ---- Arenas -------------------------------------------------------------- */

/* arena_new's writes to the arena_t at addr: all of it but the large-class
 * counters and (5.3.0) the HPA shard (lstats_off, hpa_off: JE_ARENA_*,
 * JE_521_*). */
static as_status_t arena_struct_write(jemalloc_model_t *jm, je_arena_t *a,
                                      uint64_t addr, as_err_t *err) {
  uint64_t lstats = addr + jm->lstats_off;
  uint64_t end = addr + jm->sizeof_arena + jm->sizeof_bin * (uint64_t)jm->nbins;
  uint64_t cold = ((lstats + jm->os_page - 1) & ~(jm->os_page - 1)) - lstats;
  a->lstats_addr = lstats;
  a->lstats_cold =
      (uint32_t)((cold + JE_ARENA_LSTATS_ELEM - 1) / JE_ARENA_LSTATS_ELEM);
  as_status_t rc = touch(jm, addr, jm->lstats_off, err);
  if (rc == AS_OK)
    rc = touch(jm, lstats + JE_ARENA_LSTATS_BYTES,
               jm->hpa_off - jm->lstats_off - JE_ARENA_LSTATS_BYTES, err);
  if (rc == AS_OK)
    rc = touch(jm, addr + jm->hpa_end, end - addr - jm->hpa_end, err);
  return rc;
}

/* arena_large_{malloc,dalloc}_stats_update (arena.c:291-321): a large
 * allocation or free of size class szind counts in lstats[szind -
 * SC_NBINS], which writes that entry's page if arena_new did not. */
static as_status_t lstats_write(jemalloc_model_t *jm, je_arena_t *a,
                                unsigned szind, as_err_t *err) {
  unsigned h = szind >= jm->nbins ? szind - jm->nbins : 0;
  if (h < a->lstats_cold)
    return AS_OK;
  return touch(jm, a->lstats_addr + (uint64_t)h * JE_ARENA_LSTATS_ELEM,
               JE_ARENA_LSTATS_ELEM, err);
}

as_status_t je_arena_create(jemalloc_model_t *jm, uint32_t ind, as_err_t *err) {
  je_arena_t *a = calloc(1, sizeof *a);
  if (a == NULL)
    return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory (arena)");
  jm->arenas[ind] = a;
  a->ind = ind;
  a->bins = calloc(jm->nbins, sizeof *a->bins);
  if (a->bins == NULL)
    return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory (bins)");
  as_status_t rc;
  if ((rc = je_eset_init(jm, &a->dirty, JE_DIRTY, true, err)) != AS_OK ||
      (rc = je_eset_init(jm, &a->muzzy, JE_MUZZY, false, err)) != AS_OK ||
      (rc = je_eset_init(jm, &a->retained, JE_RETAINED, false, err)) != AS_OK)
    return rc;
  /* base_new (base.c:345-403): the first block holds base_t; then the
   * arena (arena.c:1608-1612: sizeof (arena_t) + bins, CACHELINE). */
  sim_addr_t addr;
  if ((rc = je_base_alloc(jm, &a->base, ind, jm->sizeof_base, JE_CACHELINE,
                          true, &addr, err)) != AS_OK ||
      (rc = je_base_alloc(jm, &a->base, ind,
                          jm->sizeof_arena +
                              jm->sizeof_bin * (uint64_t)jm->nbins,
                          JE_CACHELINE, false, &addr, err)) != AS_OK ||
      (rc = arena_struct_write(jm, a, addr, err)) != AS_OK)
    return rc;
  /* exp_grow_init (exp_grow.c:5-8): from HUGEPAGE, no limit */
  a->exp_next = je_psz2ind(jm, UINT64_C(1) << JE_LG_HUGEPAGE);
  a->exp_limit = je_psz2ind(jm, jm->large_maxclass);
  a->jitter_seed = jm->arena_jitter != NULL && jm->arena_jitter[ind] != 0
                       ? jm->arena_jitter[ind]
                       : jm->jitter_seed + 2 * (uint64_t)ind;
  je_decay_init(jm, &a->decay_dirty, jm->dirty_decay_ms, je_clock_ns(jm),
                je_decay_seed(a, true));
  je_decay_init(jm, &a->decay_muzzy, jm->muzzy_decay_ms, je_clock_ns(jm),
                je_decay_seed(a, false));
  return AS_OK;
}

static void arena_destroy(jemalloc_model_t *jm, je_arena_t *a) {
  if (a == NULL)
    return;
  if (a->bins != NULL)
    for (unsigned i = 0; i < jm->nbins; i++)
      je_heap_fini(&a->bins[i].nonfull);
  free(a->bins);
  je_eset_fini(jm, &a->dirty);
  je_eset_fini(jm, &a->muzzy);
  je_eset_fini(jm, &a->retained);
  je_base_fini(&a->base);
  free(a);
}

/* arena_choose_huge (arena.c:1711-1743): created on first use, with its
 * decays set to 0 when the defaults are positive; no background thread of
 * its own (jemalloc.c:421-437). */
static as_status_t huge_arena(jemalloc_model_t *jm, je_arena_t **out,
                              as_err_t *err) {
  if (jm->arenas[jm->huge_ind] == NULL) {
    as_status_t rc = je_arena_create(jm, jm->huge_ind, err);
    if (rc != AS_OK)
      return rc;
    je_arena_t *a = jm->arenas[jm->huge_ind];
    if (jm->dirty_decay_ms > 0 &&
        (rc = je_decay_ms_set(jm, a, true, 0, err)) != AS_OK)
      return rc;
    if (jm->muzzy_decay_ms > 0 &&
        (rc = je_decay_ms_set(jm, a, false, 0, err)) != AS_OK)
      return rc;
  }
  *out = jm->arenas[jm->huge_ind];
  return AS_OK;
}

/* ---- Threads and arena choice -------------------------------------------- */

static as_status_t thread_slot(jemalloc_model_t *jm, uint32_t tid,
                               je_thread_t **out, as_err_t *err) {
  as_status_t rc = sim_threadtab_reach(
      (void **)&jm->threads, &jm->threads_cap, tid, sizeof *jm->threads, NULL,
      sim_kernel_max_memory_bytes(jm->kernel), err);
  *out = rc == AS_OK ? &jm->threads[tid] : NULL;
  return rc;
}

/* arena_choose_hard (src/jemalloc.c:503-614), done separately for
 * application (j = 0) and internal (j = 1) bindings: the lowest-index
 * arena with the fewest threads, or a new arena at the first free index
 * when that one already has threads. */
static as_status_t choose_arena(jemalloc_model_t *jm, je_thread_t *th,
                                as_err_t *err) {
  uint32_t choose[2] = {0, 0}, first_null = jm->narenas_auto;
  bool     created[2] = {false, false};
  for (uint32_t i = 1; i < jm->narenas_auto; i++) {
    if (jm->arenas[i] != NULL) {
      for (int j = 0; j < 2; j++)
        if (jm->arenas[i]->nthreads[j] < jm->arenas[choose[j]]->nthreads[j])
          choose[j] = i;
    } else if (first_null == jm->narenas_auto) {
      first_null = i;
    }
  }
  for (int j = 0; j < 2; j++) {
    if (jm->narenas_auto > 1 && jm->arenas[choose[j]]->nthreads[j] != 0 &&
        first_null != jm->narenas_auto) {
      choose[j] = first_null;
      if (jm->arenas[first_null] == NULL) {
        as_status_t rc = je_arena_create(jm, first_null, err);
        if (rc != AS_OK)
          return rc;
        created[j] = true;
      }
    }
    jm->arenas[choose[j]]->nthreads[j]++;
  }
  th->arena = choose[0];
  th->iarena = choose[1];
  th->bound = true;
  for (int j = 0; j < 2; j++)
    if (created[j]) {
      as_status_t rc = je_bg_create(jm, choose[j], err);
      if (rc != AS_OK)
        return rc;
    }
  return AS_OK;
}

static as_status_t tcache_init(jemalloc_model_t *jm, je_thread_t *th,
                               as_err_t *err);

/* arena_choose (jemalloc_internal_inlines_b.h:32-84): the thread's arena,
 * bound on first use. */
static as_status_t thread_arena(jemalloc_model_t *jm, je_thread_t *th,
                                je_arena_t **out, as_err_t *err) {
  if (!th->bound) {
    as_status_t rc = choose_arena(jm, th, err);
    if (rc != AS_OK)
      return rc;
  }
  *out = jm->arenas[th->arena];
  return AS_OK;
}

/* tsd_data_init (tsd.c:235-246): the prng and decay ticker, then the
 * thread cache (tsd_tcache_data_init, tcache.c:709-752: its stacks in
 * arena 0, then arena_choose -- except for the thread that initialises
 * malloc, whose cache is lent arena 0 and which binds an arena at its first
 * allocation that needs one, :733-744). */
static as_status_t thread_init(jemalloc_model_t *jm, uint32_t tid,
                               bool init_thread, bool minimal,
                               je_thread_t **out, as_err_t *err) {
  as_status_t rc = thread_slot(jm, tid, out, err);
  if (rc != AS_OK)
    return rc;
  je_thread_t *th = *out;
  if (th->tsd == JE_TSD_NOMINAL || (minimal && th->tsd == JE_TSD_MINIMAL))
    return AS_OK;
  if (th->tsd == JE_TSD_UNINIT)
    th->tick = JE_DECAY_NTICKS; /* TSD_INITIALIZER: TICKER_GEOM_INIT
                                   (tsd.h:112-113, ticker.h:127) */
  /* tsd_prng_state_init (tsd.c:222-232) at both transitions */
  th->prng = th->seed != 0 ? th->seed : jm->prng_seed + UINT64_C(8192) * tid;
  if (minimal) { /* tsd_data_init_nocleanup (tsd.c:258-276): no tcache */
    th->tsd = JE_TSD_MINIMAL;
    /* 5.2.1 src/tsd.c:261 sets arenas_tdata_bypass, which nothing clears
     * when the thread later becomes nominal (:292-300) */
    th->tdata_bypass = true;
    return AS_OK;
  }
  th->tsd = JE_TSD_NOMINAL;
  if ((rc = nptl_stack_call(&jm->nptl, &th->stack, JE_FIRST_CALL_STACK_BYTES,
                            err)) != AS_OK)
    return rc;
  th->alloc_last = th->alloc_bytes; /* te_init (thread_event.c:305-330) */
  th->dalloc_last = th->dalloc_bytes;
  if (!jm->tcache_enabled)
    return AS_OK;
  jm->booting = init_thread;
  rc = tcache_init(jm, th, err);
  jm->booting = false;
  if (rc != AS_OK || init_thread)
    return rc;
  return choose_arena(jm, th, err);
}

/* thread_of for a thread whose tsd must come alive first; out of line so
 * that thread_of's common case stays a few tests (as a call with this
 * inside it was 6 % of a churn replay's instructions). */
__attribute__((noinline)) static as_status_t
thread_start(jemalloc_model_t *jm, uint32_t tid, bool minimal,
             je_thread_t **out, as_err_t *err) {
  if (tid < jm->threads_cap && jm->threads[tid].exited) {
    /* a reused id: a new thread (whose seed, if recorded, came before) */
    je_thread_t *th = &jm->threads[tid];
    nptl_stack_t st = th->stack;
    uint64_t     seed = th->seed;
    memset(th, 0, sizeof *th);
    th->stack = st;
    th->seed = seed;
  }
  return thread_init(jm, tid, false, minimal, out, err);
}

/* The thread serving a call; its tsd comes alive on its first call: fully
 * for anything but free, which only sets up a minimal tsd without a
 * thread cache (free_default, src/jemalloc.c:2996-3027; tsd_fetch_slow,
 * tsd.c:278-325). */
static inline as_status_t thread_of(jemalloc_model_t *jm, uint32_t tid,
                                    bool minimal, je_thread_t **out,
                                    as_err_t *err) {
  if (tid < jm->threads_cap) {
    je_thread_t *th = &jm->threads[tid];
    if (!th->exited &&
        (th->tsd == JE_TSD_NOMINAL || (minimal && th->tsd == JE_TSD_MINIMAL))) {
      *out = th;
      return AS_OK;
    }
  }
  return thread_start(jm, tid, minimal, out, err);
}

/* ---- Slabs and bins (src/arena.c) ---------------------------------------- */

/* Where object o starts: its region of a slab, or its large extent's
 * start past the cache-oblivious offset. */
static uint64_t obj_addr(const jemalloc_model_t *jm, const je_obj_t *o) {
  const je_ext_t *x = E(jm, o->ext);
  return x->slab ? x->addr + (uint64_t)o->reg * jm->index2size[o->szind]
                 : x->addr + x->offset;
}

/* The region bitmap at word s of slab_bits (bit set = region free). */
static uint64_t *slab_row(const jemalloc_model_t *jm, uint32_t s) {
  return jm->slab_bits + s;
}

/* A bin's bitmap words: one bit per region, no more (a row sized for the
 * largest, 512 regions, was 64 bytes a slab: 4 MiB on the survivors trace,
 * whose 64-byte slabs need one word). */
static unsigned slab_words(const jemalloc_model_t *jm, unsigned binind) {
  return (jm->bin_nregs[binind] + 63) / 64;
}

static uint64_t *slab_bits(jemalloc_model_t *jm, uint32_t e) {
  return slab_row(jm, E(jm, e)->slab);
}

static as_status_t slab_data_new(jemalloc_model_t *jm, uint32_t e,
                                 unsigned binind, as_err_t *err) {
  uint32_t s = jm->slab_free[binind];
  unsigned words = slab_words(jm, binind);
  if (s != 0) {
    jm->slab_free[binind] = (uint32_t)slab_row(jm, s)[0];
  } else {
    if (jm->next_slab > UINT32_MAX - words ||
        !sim_idtable_reach(&jm->slab_tab, jm->next_slab + words - 1))
      return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory (slabs)");
    s = jm->next_slab;
    jm->next_slab += words;
  }
  /* bitmap_init (bitmap.c), all free: bit set = region free */
  uint32_t  nregs = jm->bin_nregs[binind];
  uint64_t *bits = slab_row(jm, s);
  for (unsigned w = 0; w < words; w++) {
    uint32_t lo = w * 64;
    bits[w] = nregs >= lo + 64 ? ~UINT64_C(0)
              : nregs > lo     ? (UINT64_C(1) << (nregs - lo)) - 1
                               : 0;
  }
  je_ext_t *x = E(jm, e);
  x->slab = s;
  x->binind = (uint8_t)binind;
  x->nfree = (uint16_t)nregs;
  return AS_OK;
}

static void slab_data_free(jemalloc_model_t *jm, uint32_t e) {
  uint32_t s = E(jm, e)->slab;
  unsigned b = E(jm, e)->binind;
  slab_row(jm, s)[0] = jm->slab_free[b];
  jm->slab_free[b] = s;
  E(jm, e)->slab = 0;
}

/* arena_slab_alloc (arena.c:831-862). */
static as_status_t slab_alloc(jemalloc_model_t *jm, je_arena_t *a,
                              unsigned binind, uint32_t *out, as_err_t *err) {
  as_status_t rc = je_pa_alloc(jm, a, jm->bin_slab_size[binind], jm->page, true,
                               false, out, err);
  return rc == AS_OK ? slab_data_new(jm, *out, binind, err) : rc;
}

/* bitmap_sfu: the lowest free region. */
static unsigned slab_take(jemalloc_model_t *jm, uint32_t e) {
  uint64_t *b = slab_bits(jm, e);
  unsigned  w = 0;
  while (b[w] == 0)
    w++;
  unsigned bit = (unsigned)__builtin_ctzll(b[w]);
  b[w] &= b[w] - 1;
  E(jm, e)->nfree--;
  return w * 64 + bit;
}

/* arena_bin_refill_slabcur_no_fresh_slab (arena.c:894-910). */
static bool bin_refill_slabcur(jemalloc_model_t *jm, je_bin_t *bin) {
  uint32_t e = je_heap_first(&bin->nonfull);
  if (e != JE_NONE)
    je_heap_remove(jm, &bin->nonfull, e);
  bin->slabcur = e;
  return e == JE_NONE;
}

/* arena_bin_lower_slab (arena.c:1317-1342). */
static as_status_t bin_lower_slab(jemalloc_model_t *jm, je_bin_t *bin,
                                  uint32_t e, as_err_t *err) {
  if (bin->slabcur != JE_NONE && je_snad_cmp(jm, bin->slabcur, e) > 0) {
    uint32_t old = bin->slabcur;
    bin->slabcur = e;
    if (E(jm, old)->nfree > 0)
      return je_heap_insert(jm, &bin->nonfull, old, err);
    return AS_OK; /* full: untracked in automatic arenas (:607-619) */
  }
  return je_heap_insert(jm, &bin->nonfull, e, err);
}

/* arena_dalloc_bin_locked_step (arena_inlines_b.h:503-532): frees region
 * reg; *empty is set when the slab must go back to the arena. */
static as_status_t bin_dalloc_step(jemalloc_model_t *jm, je_arena_t *a,
                                   uint32_t e, unsigned reg, bool *empty,
                                   as_err_t *err) {
  je_ext_t *x = E(jm, e);
  je_bin_t *bin = &a->bins[x->binind];
  slab_bits(jm, e)[reg / 64] |= UINT64_C(1) << (reg % 64);
  x->nfree++;
  *empty = false;
  if (x->nfree == jm->bin_nregs[x->binind]) {
    /* arena_dissociate_bin_slab (:1295-1315) */
    if (bin->slabcur == e)
      bin->slabcur = JE_NONE;
    else if (jm->bin_nregs[x->binind] > 1)
      je_heap_remove(jm, &bin->nonfull, e);
    *empty = true;
  } else if (x->nfree == 1 && bin->slabcur != e) {
    return bin_lower_slab(jm, bin, e, err);
  }
  return AS_OK;
}

/* arena_slab_dalloc (arena.c:568-575). */
static as_status_t slab_dalloc(jemalloc_model_t *jm, uint32_t e,
                               as_err_t *err) {
  je_arena_t *a = jm->arenas[E(jm, e)->arena];
  slab_data_free(jm, e);
  as_status_t rc = je_pa_dalloc(jm, a, e, err);
  return rc == AS_OK ? je_bg_inactivity_check(jm, a) : rc;
}

static as_status_t decay_ticks(jemalloc_model_t *jm, je_thread_t *th,
                               je_arena_t *a, unsigned nticks, as_err_t *err);

/* arena_cache_bin_fill_small (arena.c:928-1053) without contention: regions
 * from slabcur (lowest first), then from the lowest non-full slab, then
 * from fresh slabs; one tick at the end.  Regions go to out[]. */
static as_status_t bin_fill(jemalloc_model_t *jm, je_thread_t *th,
                            je_arena_t *a, unsigned binind, unsigned nfill,
                            uint64_t *out, as_err_t *err) {
  je_bin_t   *bin = &a->bins[binind];
  unsigned    filled = 0;
  as_status_t rc;
  while (filled < nfill) {
    uint32_t cur = bin->slabcur;
    if (cur != JE_NONE && E(jm, cur)->nfree > 0) {
      while (filled < nfill && E(jm, cur)->nfree > 0)
        out[filled++] = ((uint64_t)cur << 16) | slab_take(jm, cur);
      continue;
    }
    if (!bin_refill_slabcur(jm, bin))
      continue;
    uint32_t fresh;
    if ((rc = slab_alloc(jm, a, binind, &fresh, err)) != AS_OK)
      return rc;
    bin->slabcur = fresh;
  }
  return decay_ticks(jm, th, a, 1, err);
}

/* arena_malloc_small (arena.c:1142-1189) without a thread cache, but for
 * its tick. */
static as_status_t bin_malloc_untick(jemalloc_model_t *jm, je_arena_t *a,
                                     unsigned binind, uint64_t *out,
                                     as_err_t *err) {
  je_bin_t *bin = &a->bins[binind];
  if ((bin->slabcur == JE_NONE || E(jm, bin->slabcur)->nfree == 0) &&
      bin_refill_slabcur(jm, bin)) {
    uint32_t    fresh;
    as_status_t rc = slab_alloc(jm, a, binind, &fresh, err);
    if (rc != AS_OK)
      return rc;
    bin->slabcur = fresh;
  }
  *out = ((uint64_t)bin->slabcur << 16) | slab_take(jm, bin->slabcur);
  return AS_OK;
}

static as_status_t bin_malloc(jemalloc_model_t *jm, je_thread_t *th,
                              je_arena_t *a, unsigned binind, uint64_t *out,
                              as_err_t *err) {
  as_status_t rc = bin_malloc_untick(jm, a, binind, out, err);
  return rc == AS_OK ? decay_ticks(jm, th, a, 1, err) : rc;
}

/* ---- 5.2.1 decay tickers (arenas_tdata) ---------------------------------- */

/* a0malloc (5.2.1 src/jemalloc.c:235-253): an internal small region of
 * arena 0, no thread cache, no tick (tsdn NULL); written at once. */
static as_status_t a0_malloc(jemalloc_model_t *jm, uint64_t size, je_obj_t *o,
                             as_err_t *err) {
  unsigned    binind = je_size2index(jm, size);
  uint64_t    item;
  as_status_t rc = bin_malloc_untick(jm, jm->arenas[0], binind, &item, err);
  if (rc != AS_OK)
    return rc;
  *o = (je_obj_t){.ext = (uint32_t)(item >> 16),
                  .reg = (uint16_t)(item & 0xFFFF),
                  .szind = (uint8_t)binind};
  jm->arenas[0]->internal += jm->index2size[binind];
  return touch(jm,
               E(jm, o->ext)->addr + (uint64_t)o->reg * jm->index2size[binind],
               size, err);
}

/* An internal region back to its slab, the slab back to the arena if it
 * empties (arena_dalloc_bin), no tick: also a0dalloc (5.2.1
 * src/jemalloc.c:245-258). */
static as_status_t region_dalloc(jemalloc_model_t *jm, const je_obj_t *o,
                                 as_err_t *err) {
  bool        empty;
  je_arena_t *a = jm->arenas[E(jm, o->ext)->arena];
  a->internal -= jm->index2size[o->szind];
  as_status_t rc = bin_dalloc_step(jm, a, o->ext, o->reg, &empty, err);
  return rc == AS_OK && empty ? slab_dalloc(jm, o->ext, err) : rc;
}

/* arenas_tdata_cleanup (5.2.1 src/jemalloc.c:633-644). */
static as_status_t tdata_free(jemalloc_model_t *jm, je_thread_t *th,
                              as_err_t *err) {
  if (th->tdata.ext == JE_NONE)
    return AS_OK;
  je_obj_t old = th->tdata;
  th->tdata.ext = JE_NONE;
  free(th->dtick);
  th->dtick = NULL;
  th->ndtick = 0;
  return region_dalloc(jm, &old, err);
}

/* arena_tdata_get_hard (5.2.1 src/jemalloc.c:421-495): the thread's
 * tickers for every arena index in use (narenas_total: the automatic
 * arenas and the huge arena's index), a0malloc'ed on first need, only
 * once the tsd is nominal and outside the boot and exit (bypass).  A
 * larger index than the array holds reallocates it, copying, and frees
 * the old one after (:491-493). */
static as_status_t tdata_get(jemalloc_model_t *jm, je_thread_t *th,
                             uint32_t ind, bool *have, as_err_t *err) {
  *have = false;
  if (th->tsd != JE_TSD_NOMINAL || th->tdata_bypass)
    return AS_OK;
  if (th->dtick != NULL && ind < th->ndtick) {
    *have = true;
    return AS_OK;
  }
  /* the thread initialising malloc sets up its cache in malloc_tsd_boot0
   * (5.2.1 src/jemalloc.c:1756, src/tsd.c:429), before malloc_init_narenas
   * (:1768) counts more than arena 0 */
  uint32_t total = jm->booting ? 1 : jm->narenas_total;
  uint32_t n = ind < total ? total : ind + 1;
  int32_t *t = calloc(n, sizeof *t);
  if (t == NULL)
    return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory (tdata)");
  for (uint32_t i = 0; i < n; i++)
    t[i] = i < th->ndtick ? th->dtick[i] : JE_521_DECAY_NTICKS;
  je_obj_t    nu;
  as_status_t rc = a0_malloc(jm, (uint64_t)n * JE_521_SIZEOF_TDATA, &nu, err);
  if (rc == AS_OK)
    rc = tdata_free(jm, th, err);
  if (rc != AS_OK) {
    free(t);
    return rc;
  }
  th->tdata = nu;
  th->dtick = t;
  th->ndtick = n;
  *have = true;
  return AS_OK;
}

/* arena_decay_ticks: 5.3.0's per-thread geometric ticker (je_decay_ticks);
 * 5.2.1's countdown of 1000 per thread and arena (5.2.1 include/jemalloc/
 * internal/arena_inlines_b.h:113-128, ticker.h ticker_ticks). */
static as_status_t decay_ticks(jemalloc_model_t *jm, je_thread_t *th,
                               je_arena_t *a, unsigned nticks, as_err_t *err) {
  if (jm->version != JE_V521)
    return je_decay_ticks(jm, th, a, nticks, err);
  bool        have;
  as_status_t rc = tdata_get(jm, th, a->ind, &have, err);
  if (rc != AS_OK || !have)
    return rc;
  th->dtick[a->ind] -= (int32_t)nticks;
  if (th->dtick[a->ind] >= 0)
    return AS_OK;
  th->dtick[a->ind] = JE_521_DECAY_NTICKS;
  return je_arena_decay(jm, a, false, false, err);
}

/* ---- Thread cache (src/tcache.c, include/.../cache_bin.h) --------------- */

/* The stack slots of cache bin i lie at [empty - max * 8, empty) in the
 * thread's stack allocation (cache_bin_init, cache_bin.c:62-88); a fill or
 * free writes the slots below the deepest one written so far. */
__attribute__((noinline)) static as_status_t
cbin_touch_deeper(jemalloc_model_t *jm, je_thread_t *th, unsigned i,
                  as_err_t *err) {
  je_cbin_t *cb = &th->cbins[i];
  /* 5.3.0 puts a junk word first; 5.2.1 (src/tcache.c:422-438) does not,
   * and its stack sits at the cache-oblivious offset */
  uint64_t empty =
      obj_addr(jm, &th->tcache_stack) + (jm->version == JE_V521 ? 0 : 8);
  for (unsigned k = 0; k <= i; k++)
    empty += (uint64_t)th->cbins[k].max * 8;
  as_status_t rc = touch(jm, empty - (uint64_t)cb->n * 8,
                         (uint64_t)(cb->n - cb->deepest) * 8, err);
  cb->deepest = cb->n;
  return rc;
}

/* Nearly every push stays within the slots written before. */
static inline as_status_t cbin_touch(jemalloc_model_t *jm, je_thread_t *th,
                                     unsigned i, as_err_t *err) {
  if (th->cbins[i].n <= th->cbins[i].deepest)
    return AS_OK;
  return cbin_touch_deeper(jm, th, i, err);
}

static as_status_t large_palloc(jemalloc_model_t *jm, je_thread_t *th,
                                je_arena_t *a, uint64_t usize,
                                uint64_t alignment, bool zero, bool internal,
                                uint32_t *out, as_err_t *err);
static as_status_t large_dalloc(jemalloc_model_t *jm, je_thread_t *th,
                                uint32_t e, bool internal, as_err_t *err);

/* ipallocztm of usize at alignment, zeroed and internal, from arena 0
 * without a cache: arena_palloc (5.3.0 arena.c:1209-1235; 5.2.1 arena.c
 * :1532-1550) takes a small region when usize is a small class whose
 * alignment needs no special placement -- a tcache stack on 16 or 64 KiB
 * pages is one -- and a large extent otherwise.  Either way one tick. */
static as_status_t internal_palloc(jemalloc_model_t *jm, je_thread_t *th,
                                   uint64_t usize, uint64_t alignment,
                                   je_obj_t *o, as_err_t *err) {
  je_arena_t *a = jm->arenas[0];
  if (usize > jm->small_maxclass || alignment > jm->page ||
      (alignment == jm->page && usize % jm->page != 0)) {
    *o = (je_obj_t){.szind = (uint8_t)je_size2index(jm, usize)};
    return large_palloc(jm, th, a, usize, alignment, true, true, &o->ext, err);
  }
  unsigned    binind = je_size2index(jm, usize);
  uint64_t    item;
  as_status_t rc = bin_malloc(jm, th, a, binind, &item, err);
  if (rc != AS_OK)
    return rc;
  *o = (je_obj_t){.ext = (uint32_t)(item >> 16),
                  .reg = (uint16_t)(item & 0xFFFF),
                  .szind = (uint8_t)binind};
  a->internal += jm->index2size[binind];
  /* arena_malloc_small's zero: the region is memset (arena.c) */
  return touch(jm, obj_addr(jm, o), jm->index2size[binind], err);
}

static as_status_t region_dalloc(jemalloc_model_t *jm, const je_obj_t *o,
                                 as_err_t *err);

/* idalloctm of what internal_palloc gave, without a cache: a large extent
 * back to its arena, or the region to its slab (arena_dalloc_small); one
 * tick. */
static as_status_t internal_dalloc(jemalloc_model_t *jm, je_thread_t *th,
                                   const je_obj_t *o, as_err_t *err) {
  if (E(jm, o->ext)->slab == 0)
    return large_dalloc(jm, th, o->ext, true, err);
  je_arena_t *a = jm->arenas[E(jm, o->ext)->arena];
  as_status_t rc = region_dalloc(jm, o, err);
  return rc == AS_OK ? decay_ticks(jm, th, a, 1, err) : rc;
}

static as_status_t tcache_init(jemalloc_model_t *jm, je_thread_t *th,
                               as_err_t *err) {
  th->cbins = calloc(jm->nhbins, sizeof *th->cbins);
  uint64_t *slots = calloc(jm->tcache_stack_bytes / 8, sizeof *slots);
  if (th->cbins == NULL || slots == NULL) {
    free(slots);
    return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory (tcache)");
  }
  th->gc_tick = JE_521_GC_INCR; /* 5.2.1 src/tcache.c:416 */
  uint64_t off = 0;
  for (unsigned i = 0; i < jm->nhbins; i++) {
    th->cbins[i].slot = slots + off;
    th->cbins[i].max = jm->ncached_max[i];
    th->cbins[i].lg_fill_div = 1; /* tcache.c:675 */
    off += jm->ncached_max[i];
  }
  /* ipallocztm (tcache.c:717-719): sz_sa2u(stack bytes, alignment),
   * zeroed, internal, from arena 0 */
  uint64_t    align = jm->tcache_stack_align;
  uint64_t    usize = sa2u(jm, jm->tcache_stack_bytes, align);
  as_status_t rc =
      internal_palloc(jm, th, usize, align, &th->tcache_stack, err);
  if (rc != AS_OK || jm->version == JE_V521)
    return rc;
  /* the junk words at both ends (cache_bin.c:35-60), not in 5.2.1 */
  uint64_t base = obj_addr(jm, &th->tcache_stack);
  if ((rc = touch(jm, base, 8, err)) != AS_OK)
    return rc;
  return touch(jm, base + jm->tcache_stack_bytes - 8, 8, err);
}

/* tcache_bin_flush_impl (tcache.c:309-503) for the oldest n items of bin i
 * (slots [0, n), handed over newest first): passes by owning arena; small
 * regions return to their slabs, slabs emptied are freed after all passes;
 * each pass ticks its arena once per item.  5.2.1 hands them over oldest
 * first and frees an emptied slab at once (tcache_bin_flush_small, 5.2.1
 * src/tcache.c:134-229: *(avail - 1 - i); arena_dalloc_bin_locked_impl ->
 * arena_dalloc_bin_slab, src/arena.c). */
static as_status_t tcache_flush_bin(jemalloc_model_t *jm, je_thread_t *th,
                                    unsigned i, unsigned nflush,
                                    as_err_t *err) {
  je_cbin_t *cb = &th->cbins[i];
  bool       small = i < jm->nbins;
  uint64_t   item[1024],
      *items = nflush <= 1024 ? item : malloc(nflush * sizeof *items);
  uint32_t slab[1024],
      *slabs = nflush <= 1024 ? slab : malloc(nflush * sizeof *slabs);
  if (items == NULL || slabs == NULL) {
    if (items != item)
      free(items);
    if (slabs != slab)
      free(slabs);
    return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory (flush)");
  }
  bool oldest_first = jm->version == JE_V521;
  for (unsigned k = 0; k < nflush; k++)
    items[k] = cb->slot[oldest_first ? k : nflush - 1 - k];
  memmove(cb->slot, cb->slot + nflush, (size_t)(cb->n - nflush) * 8);
  cb->n = (uint16_t)(cb->n - nflush);
  if (cb->n < cb->low_water) /* cache_bin_low_water_adjust */
    cb->low_water = cb->n;
  unsigned    nslabs = 0, n = nflush;
  as_status_t rc = AS_OK;
  while (n > 0 && rc == AS_OK) {
    uint32_t    cur = E(jm, (uint32_t)(items[0] >> 16))->arena;
    je_arena_t *a = jm->arenas[cur];
    unsigned    ndeferred = 0;
    for (unsigned k = 0; k < n && rc == AS_OK; k++) {
      uint32_t e = (uint32_t)(items[k] >> 16);
      if (E(jm, e)->arena != cur) {
        items[ndeferred++] = items[k];
        continue;
      }
      if (small) {
        bool empty;
        rc = bin_dalloc_step(jm, a, e, (unsigned)(items[k] & 0xFFFF), &empty,
                             err);
        if (empty && oldest_first && rc == AS_OK)
          rc = slab_dalloc(jm, e, err);
        else if (empty)
          slabs[nslabs++] = e;
      } else {
        rc = large_dalloc(jm, NULL, e, false, err);
      }
    }
    if (rc == AS_OK)
      rc = decay_ticks(jm, th, a, n - ndeferred, err);
    n = ndeferred;
  }
  for (unsigned k = 0; k < nslabs && rc == AS_OK; k++)
    rc = slab_dalloc(jm, slabs[k], err);
  if (items != item)
    free(items);
  if (slabs != slab)
    free(slabs);
  return rc;
}

/* tcache_event (tcache.c:176-215): one bin per 64 KiB allocated or freed,
 * round robin: flush three quarters of its low water and halve its fill,
 * or double the fill of a bin refilled since the last look.  5.2.1's
 * tcache_event_hard (5.2.1 src/tcache.c:40-86) is the same step, its
 * "refilled" a low_water of -1 that every look resets. */
__attribute__((noinline)) static as_status_t
tcache_gc(jemalloc_model_t *jm, je_thread_t *th, as_err_t *err) {
  if (th->cbins == NULL)
    return AS_OK;
  unsigned    i = th->next_gc_bin;
  je_cbin_t  *cb = &th->cbins[i];
  as_status_t rc = AS_OK;
  unsigned    lw = cb->low_water;
  if (lw > 0) {
    if (i < jm->nbins) { /* tcache_gc_small :123-157 */
      unsigned nflush = lw - (lw >> 2);
      rc = tcache_flush_bin(jm, th, i, nflush, err);
      if ((cb->max >> (cb->lg_fill_div + 1)) >= 1)
        cb->lg_fill_div++;
    } else { /* tcache_gc_large :162-172 */
      rc = tcache_flush_bin(jm, th, i, lw - (lw >> 2), err);
    }
  } else if (i < jm->nbins && cb->refilled) {
    if (cb->lg_fill_div > 1)
      cb->lg_fill_div--;
    cb->refilled = false;
  }
  cb->low_water = cb->n;
  if (jm->version == JE_V521)
    cb->refilled = false;
  th->next_gc_bin = (i + 1 == jm->nhbins) ? 0 : i + 1;
  return rc;
}

/* 5.2.1's tcache_event (5.2.1 include/jemalloc/internal/tcache_inlines.h:
 * 30-39): every tcache allocation and free ticks gc_ticker, which runs the
 * GC when it goes below 0 (every JE_521_GC_INCR + 1 events). */
static inline as_status_t tcache_event_521(jemalloc_model_t *jm,
                                           je_thread_t *th, as_err_t *err) {
  if (jm->version != JE_V521 || --th->gc_tick >= 0)
    return AS_OK;
  th->gc_tick = JE_521_GC_INCR;
  return tcache_gc(jm, th, err);
}

/* thread_alloc_event / thread_dalloc_event (thread_event.h:292-299,
 * thread_event.c:235-290): the GC runs when a thread's allocated (or
 * deallocated) bytes reach 64 KiB past the last event. */
static as_status_t alloc_event(jemalloc_model_t *jm, je_thread_t *th,
                               uint64_t usize, as_err_t *err) {
  th->alloc_bytes += usize;
  if (jm->version == JE_V521) /* no thread events: tcache_event_521 */
    return AS_OK;
  if (th->alloc_bytes - th->alloc_last < JE_GC_INCR_BYTES)
    return AS_OK;
  th->alloc_last = th->alloc_bytes;
  return tcache_gc(jm, th, err);
}

static as_status_t dalloc_event(jemalloc_model_t *jm, je_thread_t *th,
                                uint64_t usize, as_err_t *err) {
  th->dalloc_bytes += usize;
  if (jm->version == JE_V521) /* no thread events: tcache_event_521 */
    return AS_OK;
  if (th->tsd != JE_TSD_NOMINAL) /* events wait (thread_event.c:243-244) */
    return AS_OK;
  if (th->dalloc_bytes - th->dalloc_last < JE_GC_INCR_BYTES)
    return AS_OK;
  th->dalloc_last = th->dalloc_bytes;
  return tcache_gc(jm, th, err);
}

/* tcache_alloc_small_hard (tcache.c:229-245): an empty bin i is filled
 * with ncached_max >> lg_fill_div regions; out of line, as it runs about
 * once per fill's worth of allocations. */
__attribute__((noinline)) static as_status_t cbin_fill(jemalloc_model_t *jm,
                                                       je_thread_t      *th,
                                                       unsigned          binind,
                                                       as_err_t         *err) {
  je_cbin_t  *cb = &th->cbins[binind];
  unsigned    nfill = (unsigned)cb->max >> cb->lg_fill_div;
  uint64_t    got[512];
  je_arena_t *a;
  as_status_t rc = thread_arena(jm, th, &a, err);
  if (rc == AS_OK)
    rc = bin_fill(jm, th, a, binind, nfill, got, err);
  if (rc != AS_OK)
    return rc;
  for (unsigned k = 0; k < nfill; k++) /* lowest region on top */
    cb->slot[nfill - 1 - k] = got[k];
  cb->n = (uint16_t)nfill;
  cb->refilled = true;
  return cbin_touch(jm, th, binind, err);
}

/* tcache_alloc_small (tcache_inlines.h:44-83): pop, else fill and pop. */
static inline as_status_t tcache_alloc_small(jemalloc_model_t *jm,
                                             je_thread_t *th, unsigned binind,
                                             uint64_t *out, as_err_t *err) {
  je_cbin_t *cb = &th->cbins[binind];
  if (__builtin_expect(cb->n == 0, 0)) {
    as_status_t rc = cbin_fill(jm, th, binind, err);
    if (rc != AS_OK)
      return rc;
  }
  *out = cb->slot[--cb->n];
  if (cb->n < cb->low_water)
    cb->low_water = cb->n;
  return AS_OK;
}

/* tcache_dalloc_small / _large (tcache_inlines.h:124-172): push; a full
 * bin first flushes down to half of its slots. */
static as_status_t tcache_dalloc(jemalloc_model_t *jm, je_thread_t *th,
                                 unsigned binind, uint64_t item,
                                 as_err_t *err) {
  je_cbin_t *cb = &th->cbins[binind];
  if (cb->n == cb->max) {
    as_status_t rc =
        tcache_flush_bin(jm, th, binind, cb->n - (cb->max >> 1), err);
    if (rc != AS_OK)
      return rc;
  }
  cb->slot[cb->n++] = item;
  return cbin_touch(jm, th, binind, err);
}

/* tcache_flush_cache (tcache.c:783-799): every bin to empty. */
static as_status_t tcache_flush_all(jemalloc_model_t *jm, je_thread_t *th,
                                    as_err_t *err) {
  as_status_t rc = AS_OK;
  for (unsigned i = 0; i < jm->nhbins && rc == AS_OK && th->cbins; i++)
    if (th->cbins[i].n > 0)
      rc = tcache_flush_bin(jm, th, i, th->cbins[i].n, err);
  return rc;
}

/* ---- Large objects (src/large.c) ----------------------------------------- */

/* arena_choose_maybe_huge (arena_inlines_b.h:21-39) for a request it
 * sees as size bytes (je_malloc's seen). */
static as_status_t large_arena(jemalloc_model_t *jm, je_thread_t *th,
                               uint64_t size, je_arena_t **out, as_err_t *err) {
  if (jm->huge_enabled && size >= jm->oversize_threshold)
    return huge_arena(jm, out, err);
  return thread_arena(jm, th, out, err);
}

/* large_palloc (large.c:21-53) with arena_extent_alloc_large (arena.c:330-
 * 356): usize + one page of padding, the object at a random 64-byte
 * multiple of the first page when the alignment allows (drawn from the
 * thread's prng, arena_inlines_b.h:426-452); one tick. */
static as_status_t large_palloc(jemalloc_model_t *jm, je_thread_t *th,
                                je_arena_t *a, uint64_t usize,
                                uint64_t alignment, bool zero, bool internal,
                                uint32_t *out, as_err_t *err) {
  as_status_t rc = je_pa_alloc(jm, a, usize + jm->large_pad, alignment, false,
                               zero, out, err);
  if (rc != AS_OK)
    return rc;
  je_ext_t *x = E(jm, *out);
  x->szind = (uint8_t)je_size2index(jm, usize);
  x->offset = 0;
  if (jm->large_pad != 0 && alignment < jm->page) {
    uint64_t cl = alignment < JE_CACHELINE ? JE_CACHELINE : alignment;
    unsigned lg_range = jm->lg_page - lg_floor(cl);
    uint64_t r = je_prng_lg_range(&th->prng, lg_range);
    E(jm, *out)->offset = (uint32_t)(r << (jm->lg_page - lg_range));
  }
  if (internal)
    a->internal += usize;
  if ((rc = lstats_write(jm, a, x->szind, err)) != AS_OK)
    return rc;
  return decay_ticks(jm, th, a, 1, err);
}

/* large_dalloc (large.c:270-276): back to the arena's dirty extents, then
 * arena_handle_deferred_work; th NULL inside a tcache flush (the flush
 * ticks per pass). */
static as_status_t large_dalloc(jemalloc_model_t *jm, je_thread_t *th,
                                uint32_t e, bool internal, as_err_t *err) {
  je_arena_t *a = jm->arenas[E(jm, e)->arena];
  unsigned    szind = E(jm, e)->szind;
  if (internal)
    a->internal -= jm->index2size[szind];
  as_status_t rc = lstats_write(jm, a, szind, err);
  if (rc == AS_OK)
    rc = je_pa_dalloc(jm, a, e, err);
  if (rc == AS_OK)
    rc = je_bg_inactivity_check(jm, a);
  if (rc == AS_OK && th != NULL)
    rc = decay_ticks(jm, th, a, 1, err);
  return rc;
}

/* ---- Allocation entry points -------------------------------------------- */

/* ---- The object table ---------------------------------------------------
 * An object's place by id: its extent, its region in a slab, its size
 * class, and whether realloc(p, 0) freed it with the id still live
 * (JE_OBJ_ZERO).  The size class is its extent's (binind for a slab, szind
 * for a large extent), so while every extent number fits beside the most
 * regions a slab has (reg_bits: 9 with 4 KiB pages, leaving 8 M extent
 * records), an entry is 4 bytes, ext << reg_bits | reg (OBJ_WORD_DEAD, or
 * OBJ_WORD_ZERO for an id realloc(p, 0) freed); ext_new has the table
 * rewritten to whole je_obj_t entries (je_widen_objs) before it makes a
 * number that does not fit.  This table is most of the simulator's memory
 * on a heap of small objects. */
#define OBJ_WORD_DEAD 0u
#define OBJ_WORD_ZERO 1u /* extent 0 is JE_NONE: no live object's word */

/* The extent a 4-byte entry names, JE_NONE for a dead or zero word. */
static uint32_t word_ext(const jemalloc_model_t *jm, uint32_t w) {
  return w <= OBJ_WORD_ZERO ? JE_NONE : w >> jm->reg_bits;
}

static je_obj_t obj_from_word(const jemalloc_model_t *jm, uint32_t w) {
  if (w <= OBJ_WORD_ZERO)
    return (je_obj_t){.ext = JE_NONE,
                      .pad = w == OBJ_WORD_ZERO ? JE_OBJ_ZERO : 0};
  je_obj_t        o = {.ext = word_ext(jm, w),
                       .reg = (uint16_t)(w & ((UINT32_C(1) << jm->reg_bits) - 1))};
  const je_ext_t *x = E(jm, o.ext);
  o.szind = x->slab ? x->binind : x->szind;
  return o;
}

static uint32_t obj_to_word(const jemalloc_model_t *jm, je_obj_t o) {
  if (o.ext == JE_NONE)
    return o.pad == JE_OBJ_ZERO ? OBJ_WORD_ZERO : OBJ_WORD_DEAD;
  return o.ext << jm->reg_bits | o.reg;
}

/* Id's place; ext JE_NONE when it is not live. */
static je_obj_t obj_get(const jemalloc_model_t *jm, uint64_t id) {
  if (id >= jm->obj_len)
    return (je_obj_t){.ext = JE_NONE};
  je_obj_t o;
  if (jm->obj_bytes == sizeof o) {
    memcpy(&o, jm->objs + id * sizeof o, sizeof o);
    return o;
  }
  uint32_t w;
  memcpy(&w, jm->objs + id * sizeof w, sizeof w);
  return obj_from_word(jm, w);
}

/* The extent of id's object, JE_NONE when there is none, without reading
 * the extent (obj_get reads its size class). */
static uint32_t obj_ext(const jemalloc_model_t *jm, uint64_t id) {
  if (id >= jm->obj_len)
    return JE_NONE;
  _Static_assert(offsetof(je_obj_t, ext) == 0, "a wide entry starts with ext");
  uint32_t w;
  memcpy(&w, jm->objs + id * jm->obj_bytes, sizeof w);
  return jm->obj_bytes == sizeof(je_obj_t) ? w : word_ext(jm, w);
}

/* id < obj_len (obj_slot). */
static void obj_put(jemalloc_model_t *jm, uint64_t id, je_obj_t o) {
  if (jm->obj_bytes == sizeof o) {
    memcpy(jm->objs + id * sizeof o, &o, sizeof o);
    return;
  }
  uint32_t w = obj_to_word(jm, o);
  assert(o.ext == JE_NONE || obj_from_word(jm, w).szind == o.szind);
  memcpy(jm->objs + id * sizeof w, &w, sizeof w);
}

bool je_widen_objs(jemalloc_model_t *jm) {
  uint64_t n = jm->obj_len;
  if (n > 0 && !sim_idtable_reach(&jm->obj_tab, n - 1))
    return false;
  for (uint64_t i = n; i-- > 0;) { /* last first: entry i's 8 bytes
                                      overlap 4-byte entries i and above */
    uint32_t w;
    memcpy(&w, jm->objs + i * sizeof w, sizeof w);
    je_obj_t o = obj_from_word(jm, w);
    memcpy(jm->objs + i * sizeof o, &o, sizeof o);
  }
  jm->obj_bytes = sizeof(je_obj_t);
  jm->obj_len = jm->obj_tab.len;
  return true;
}

/* Starts the table at 4 bytes an id (after size_classes_init). */
static void narrow_objs(jemalloc_model_t *jm) {
  uint32_t most = 1;
  for (unsigned b = 0; b < jm->nbins; b++)
    most = jm->bin_nregs[b] > most ? jm->bin_nregs[b] : most;
  jm->reg_bits = most > 1 ? 32 - (uint32_t)__builtin_clz(most - 1) : 1;
  jm->narrow_exts = UINT32_C(1) << (32 - jm->reg_bits);
  jm->obj_bytes = sizeof(uint32_t);
}

void jemalloc_narrow_exts_for_tests(model_t *m, uint32_t n) {
  jemalloc_model_t *jm = (jemalloc_model_t *)m;
  if (n < jm->narrow_exts)
    jm->narrow_exts = n;
}

static as_status_t obj_slot(jemalloc_model_t *jm, uint64_t id, as_err_t *err) {
  if (id < jm->obj_len ||
      (id < SIM_IDTABLE_MAX_IDS &&
       sim_idtable_reach_packed(&jm->obj_tab, id + 1, jm->obj_bytes,
                                &jm->obj_len)))
    return AS_OK; /* fresh entries read as not live (0) */
  if (id >= SIM_IDTABLE_MAX_IDS)
    return as_err_set(err, AS_EINVAL, "jemalloc: object id above 2^32");
  return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory (objects)");
}

/* The region item (extent id << 16 | region) of class ind is object o;
 * calloc's memset of its usize bytes (tcache_inlines.h:74-78) when zero. */
static inline as_status_t small_placed(jemalloc_model_t *jm, uint64_t item,
                                       unsigned ind, uint64_t usize, bool zero,
                                       je_obj_t *o, as_err_t *err) {
  o->szind = (uint8_t)ind;
  o->ext = (uint32_t)(item >> 16);
  o->reg = (uint16_t)(item & 0xFFFF);
  return zero ? touch(jm, obj_addr(jm, o), usize, err) : AS_OK;
}

/* je_malloc for all but a small class the thread cache serves: a small
 * region straight from the arena, or a large extent (out of line: the
 * cached small path is nearly every call). */
__attribute__((noinline)) static as_status_t
malloc_uncached_or_large(jemalloc_model_t *jm, je_thread_t *th, uint64_t usize,
                         uint64_t seen, uint64_t alignment, bool aligned,
                         bool zero, je_obj_t *o, as_err_t *err) {
  unsigned    ind = je_size2index(jm, usize);
  bool        cached = th->cbins != NULL && ind < jm->nhbins && !aligned;
  as_status_t rc;
  o->szind = (uint8_t)ind;
  o->reg = 0;
  if (usize <= jm->small_maxclass) {
    uint64_t    item;
    je_arena_t *a;
    if ((rc = thread_arena(jm, th, &a, err)) == AS_OK)
      rc = bin_malloc(jm, th, a, ind, &item, err);
    return rc == AS_OK ? small_placed(jm, item, ind, usize, zero, o, err) : rc;
  }
  if (cached && th->cbins[ind].n > 0) { /* tcache_alloc_large :85-120 */
    je_cbin_t *cb = &th->cbins[ind];
    o->ext = (uint32_t)(cb->slot[--cb->n] >> 16);
    if (cb->n < cb->low_water)
      cb->low_water = cb->n;
    rc = tcache_event_521(jm, th, err);
    if (rc == AS_OK && zero) /* memset of the usable size (tcache_inlines.h:
                                112-116) */
      return touch(jm, obj_addr(jm, o), usize, err);
    return rc;
  }
  /* A cache miss allocates in the thread's arena (tcache_inlines.h:
   * 100-110); otherwise arena_choose_maybe_huge picks. */
  je_arena_t *a;
  rc = cached ? thread_arena(jm, th, &a, err)
              : large_arena(jm, th, seen, &a, err);
  if (rc != AS_OK)
    return rc;
  uint32_t e;
  rc = large_palloc(jm, th, a, usize, alignment, zero, false, &e, err);
  o->ext = e;
  if (rc == AS_OK && cached) /* 5.2.1: a miss ticks too (tcache_inlines.h:
                                159) */
    rc = tcache_event_521(jm, th, err);
  return rc;
}

/* Allocates usize for th: arena_malloc (arena_inlines_b.h:145-163) for
 * malloc, calloc and realloc, arena_palloc (arena.c:1209-1235) for
 * memalign (small: the same cache; large: never the cache, with alignment
 * above CACHELINE placed by large_palloc).  *o receives where it is.
 * seen: the size arena_choose_maybe_huge compares with the oversize
 * threshold when the cache does not serve a large request: malloc's and
 * calloc's request (imalloc_no_sample passes it to arena_malloc_hard,
 * 5.3.0 src/jemalloc.c:2398, src/arena.c:1196; 5.2.1 src/arena.c:1519),
 * usize for memalign and realloc (large_palloc, large.c:42). */
static inline as_status_t je_malloc(jemalloc_model_t *jm, je_thread_t *th,
                                    uint64_t usize, uint64_t seen,
                                    uint64_t alignment, bool aligned, bool zero,
                                    je_obj_t *o, as_err_t *err) {
  if (usize <= jm->small_maxclass && th->cbins != NULL) {
    unsigned ind = je_size2index(jm, usize);
    if (ind < jm->nhbins) {
      uint64_t    item;
      as_status_t rc = tcache_alloc_small(jm, th, ind, &item, err);
      if (rc == AS_OK)
        rc = tcache_event_521(jm, th, err);
      return rc == AS_OK ? small_placed(jm, item, ind, usize, zero, o, err)
                         : rc;
    }
  }
  return malloc_uncached_or_large(jm, th, usize, seen, alignment, aligned, zero,
                                  o, err);
}

/* je_dalloc without a cache bin for o: straight to the arena
 * (arena_dalloc_small / large_dalloc, which tick). */
__attribute__((noinline)) static as_status_t
dalloc_uncached(jemalloc_model_t *jm, je_thread_t *th, const je_obj_t *o,
                as_err_t *err) {
  je_arena_t *a = jm->arenas[E(jm, o->ext)->arena];
  if (E(jm, o->ext)->slab) {
    bool        empty;
    as_status_t rc = bin_dalloc_step(jm, a, o->ext, o->reg, &empty, err);
    if (rc == AS_OK && empty)
      rc = slab_dalloc(jm, o->ext, err);
    return rc == AS_OK ? decay_ticks(jm, th, a, 1, err) : rc;
  }
  return large_dalloc(jm, th, o->ext, false, err);
}

/* Frees object o for th: tcache when there is a bin for it, else
 * dalloc_uncached. */
static inline as_status_t je_dalloc(jemalloc_model_t *jm, je_thread_t *th,
                                    const je_obj_t *o, as_err_t *err) {
  unsigned ind = o->szind;
  if (th->cbins != NULL && ind < jm->nhbins) {
    as_status_t rc =
        tcache_dalloc(jm, th, ind, ((uint64_t)o->ext << 16) | o->reg, err);
    return rc == AS_OK ? tcache_event_521(jm, th, err) : rc;
  }
  return dalloc_uncached(jm, th, o, err);
}

/* The program's writes to [addr, addr + len) of a new or grown object. */
static as_status_t program_writes(jemalloc_model_t *jm, const trace_event_t *ev,
                                  uint64_t addr, uint64_t len, as_err_t *err) {
  /* A calloc'd block reads as zero: the program is taken to rely on that
   * and write nothing (replayer.c; models/glibc.c glibc_alloc), so only
   * what calloc itself zeroes (je_malloc's zero) is touched. */
  if ((ev->flags & TRACE_FLAG_UNWRITTEN) || ev->op == TRACE_CALLOC)
    return AS_OK;
  return touch(jm, addr, len, err);
}

static as_status_t jemalloc_alloc(model_t *m, const trace_event_t *ev,
                                  as_err_t *err) {
  jemalloc_model_t *jm = (jemalloc_model_t *)m;
  if (enter(jm, ev->t_ns, err) != AS_OK)
    return jm->fail;
  je_thread_t *th;
  as_status_t  rc = thread_of(jm, ev->thread, false, &th, err);
  if (rc == AS_OK)
    rc = obj_slot(jm, ev->id, err);
  if (rc != AS_OK)
    return done(jm, rc, err);
  uint64_t align = ev->op == TRACE_MEMALIGN ? ev->align : 0;
  uint64_t usize = align ? sa2u(jm, ev->size, align) : s2u(jm, ev->size);
  je_obj_t o;
  rc = je_malloc(jm, th, usize, align ? usize : ev->size,
                 align > JE_CACHELINE ? align : JE_CACHELINE, align != 0,
                 ev->op == TRACE_CALLOC, &o, err);
  if (rc == AS_OK) {
    o.pad = 0;
    obj_put(jm, ev->id, o);
    jm->live_bytes += ev->size;
    jm->live_objects++;
    rc = program_writes(jm, ev, obj_addr(jm, &o), ev->size, err);
  }
  if (rc == AS_OK)
    rc = alloc_event(jm, th, usize, err);
  return done(jm, rc, err);
}

static as_status_t jemalloc_free(model_t *m, const trace_event_t *ev,
                                 as_err_t *err) {
  jemalloc_model_t *jm = (jemalloc_model_t *)m;
  if (enter(jm, ev->t_ns, err) != AS_OK)
    return jm->fail;
  je_obj_t o = obj_get(jm, ev->id);
  if (o.ext == JE_NONE && o.pad == JE_OBJ_ZERO) { /* freed by realloc(p, 0) */
    obj_put(jm, ev->id, (je_obj_t){.ext = JE_NONE});
    return AS_OK;
  }
  if (o.ext == JE_NONE)
    return done(jm,
                je_bug(jm, err,
                       "free of an object the model never "
                       "placed"),
                err);
  je_thread_t *th;
  as_status_t  rc = thread_of(jm, ev->thread, true, &th, err);
  obj_put(jm, ev->id, (je_obj_t){.ext = JE_NONE});
  jm->live_bytes -= ev->prev_size;
  jm->live_objects--;
  if (rc == AS_OK)
    rc = je_dalloc(jm, th, &o, err);
  if (rc == AS_OK)
    rc = dalloc_event(jm, th, jm->index2size[o.szind], err);
  return done(jm, rc, err);
}

/* large_ralloc_no_move (large.c:130-173) for old and new large: expand in
 * place, keep, or shrink in place; *moved when none applies. */
static as_status_t large_resize(jemalloc_model_t *jm, je_thread_t *th,
                                je_obj_t *o, uint64_t usize, bool *moved,
                                as_err_t *err) {
  uint32_t    e = o->ext;
  je_arena_t *a = jm->arenas[E(jm, e)->arena];
  uint64_t    old = jm->index2size[o->szind];
  bool        ok = true;
  as_status_t rc = AS_OK;
  if (usize > old)
    rc = je_pa_expand(jm, a, e, usize + jm->large_pad, false, &ok, err);
  else if (usize < old) {
    rc = je_pa_shrink(jm, a, e, usize + jm->large_pad, &ok, err);
    if (rc == AS_OK && ok)
      rc = je_bg_inactivity_check(jm, a);
  }
  if (rc != AS_OK)
    return rc;
  *moved = !ok;
  if (!ok)
    return AS_OK;
  unsigned szind = je_size2index(jm, usize);
  if (usize != old) /* arena_large_ralloc_stats_update (arena.c:323-327,
                       368-386): old freed, usize made */
    if ((rc = lstats_write(jm, a, o->szind, err)) != AS_OK ||
        (rc = lstats_write(jm, a, szind, err)) != AS_OK)
      return rc;
  o->szind = (uint8_t)szind;
  E(jm, e)->szind = o->szind;
  return decay_ticks(jm, th, a, 1, err);
}

/* do_rallocx (src/jemalloc.c:3493-3571) -> arena_ralloc (arena.c:1457-
 * 1508): same small class stays (one tick); large to large resizes in
 * place when it can; anything else moves: malloc, copy, free. */
static as_status_t jemalloc_realloc(model_t *m, const trace_event_t *ev,
                                    as_err_t *err) {
  jemalloc_model_t *jm = (jemalloc_model_t *)m;
  if (enter(jm, ev->t_ns, err) != AS_OK)
    return jm->fail;
  je_obj_t cur = obj_get(jm, ev->id);
  if (cur.ext == JE_NONE && cur.pad == JE_OBJ_ZERO) { /* realloc(NULL, n) */
    trace_event_t as_malloc = *ev;
    as_malloc.op = TRACE_MALLOC;
    obj_put(jm, ev->id, (je_obj_t){.ext = JE_NONE});
    return jemalloc_alloc(m, &as_malloc, err);
  }
  if (cur.ext == JE_NONE)
    return done(jm,
                je_bug(jm, err,
                       "realloc of an object the model never "
                       "placed"),
                err);
  je_thread_t *th;
  as_status_t  rc = thread_of(jm, ev->thread, false, &th, err);
  if (rc != AS_OK)
    return done(jm, rc, err);
  je_obj_t *o = &cur; /* written back by obj_put at the end */
  if (ev->size == 0) {
    /* do_realloc_nonnull_zero (jemalloc.c:3582-3620), zero_realloc:free
     * by default: a free; the trace keeps the id live with size 0. */
    je_obj_t old = *o;
    obj_put(jm, ev->id, (je_obj_t){.ext = JE_NONE, .pad = JE_OBJ_ZERO});
    jm->live_bytes -= ev->prev_size;
    jm->live_objects--;
    rc = je_dalloc(jm, th, &old, err);
    if (rc == AS_OK)
      rc = dalloc_event(jm, th, jm->index2size[old.szind], err);
    return done(jm, rc, err);
  }
  uint64_t old_usize = jm->index2size[o->szind];
  uint64_t usize = s2u(jm, ev->size);
  bool     moved = true;
  if (usize <= jm->small_maxclass && old_usize <= jm->small_maxclass &&
      je_size2index(jm, usize) == o->szind) {
    moved = false; /* arena_ralloc_no_move :1408-1423 */
    rc = decay_ticks(jm, th, jm->arenas[E(jm, o->ext)->arena], 1, err);
  } else if (old_usize >= jm->large_minclass && usize >= jm->large_minclass) {
    rc = large_resize(jm, th, o, usize, &moved, err);
  }
  uint64_t grow_from = ev->prev_size < ev->size ? ev->prev_size : ev->size;
  if (rc == AS_OK && moved) {
    je_obj_t old = *o, nu;
    /* large to large moves without the tcache (large_ralloc_move_helper,
     * large.c:175-182); otherwise arena_ralloc_move_helper */
    if (old_usize >= jm->large_minclass && usize >= jm->large_minclass) {
      je_arena_t *a;
      uint32_t    e = JE_NONE;
      rc = large_arena(jm, th, usize, &a, err);
      if (rc == AS_OK)
        rc =
            large_palloc(jm, th, a, usize, JE_CACHELINE, false, false, &e, err);
      nu = (je_obj_t){.ext = e, .szind = (uint8_t)je_size2index(jm, usize)};
    } else {
      rc =
          je_malloc(jm, th, usize, usize, JE_CACHELINE, false, false, &nu, err);
    }
    if (rc == AS_OK) { /* arena_ralloc (arena.c:1504-1505) and large_ralloc
                          (large.c:221-222) copy min(usize, oldusize): the old
                          usable size read, the new one written */
      uint64_t copy = usize < old_usize ? usize : old_usize;
      rc = sim_kernel_read(jm->kernel, obj_addr(jm, &old), copy, err);
      *o = nu;
      if (rc == AS_OK)
        rc = touch(jm, obj_addr(jm, o), copy, err);
    }
    if (rc == AS_OK)
      rc = je_dalloc(jm, th, &old, err);
  }
  obj_put(jm, ev->id, cur);
  if (rc == AS_OK && ev->size > grow_from)
    rc = program_writes(jm, ev, obj_addr(jm, o) + grow_from,
                        ev->size - grow_from, err);
  jm->live_bytes = jm->live_bytes - ev->prev_size + ev->size;
  if (rc == AS_OK)
    rc = alloc_event(jm, th, usize, err);
  if (rc == AS_OK)
    rc = dalloc_event(jm, th, old_usize, err);
  return done(jm, rc, err);
}

/* tsd_do_data_cleanup (tsd.c:378-385): unbind (arena_unbind, jemalloc.c:
 * 488-501), then tcache_destroy (tcache.c:807-840): flush everything, free
 * the stacks, decay arena 0 and the thread's arena -- all of it when no
 * thread is left on it and there are no background threads. */
static as_status_t thread_exit(jemalloc_model_t *jm, je_thread_t *th,
                               as_err_t *err) {
  as_status_t rc = AS_OK;
  if (th->bound) {
    jm->arenas[th->arena]->nthreads[0]--;
    jm->arenas[th->iarena]->nthreads[1]--;
  }
  /* 5.2.1: arenas_tdata_cleanup (5.2.1 src/jemalloc.c:633-644, called by
   * tsd_do_data_cleanup, src/tsd.c:363-370, before tcache_cleanup): no
   * tick after it, the array freed */
  th->tdata_bypass = true;
  rc = tdata_free(jm, th, err);
  if (rc == AS_OK && th->cbins != NULL) {
    rc = tcache_flush_all(jm, th, err);
    if (rc == AS_OK)
      rc = internal_dalloc(jm, th, &th->tcache_stack, err);
    if (rc == AS_OK)
      rc = je_arena_decay(jm, jm->arenas[0], false, false, err);
    /* the cache's arena: arena 0 if the thread never bound one */
    je_arena_t *a = jm->arenas[th->bound ? th->arena : 0];
    if (rc == AS_OK)
      rc = je_arena_decay(jm, a, false,
                          a->nthreads[0] == 0 && !jm->background_thread, err);
    free(th->cbins[0].slot);
    free(th->cbins);
    th->cbins = NULL;
  }
  th->bound = false;
  th->exited = true;
  return rc;
}

static as_status_t jemalloc_thread(model_t *m, const trace_event_t *ev,
                                   as_err_t *err) {
  jemalloc_model_t *jm = (jemalloc_model_t *)m;
  if (enter(jm, ev->t_ns, err) != AS_OK)
    return jm->fail;
  je_thread_t *th;
  as_status_t  rc = thread_slot(jm, ev->thread, &th, err);
  if (rc != AS_OK)
    return done(jm, rc, err);
  if (ev->op == TRACE_THREAD_START && ev->thread != 0) {
    if (th->tsd != JE_TSD_UNINIT && !th->exited) /* a reused id */
      rc = thread_exit(jm, th, err);
    if (rc == AS_OK)
      rc = nptl_stack_release(&jm->nptl, &th->stack, err);
    uint64_t seed = th->seed; /* recorded before the thread's start */
    memset(th, 0, sizeof *th);
    th->seed = seed;
    if (rc == AS_OK)
      rc = nptl_stack_acquire(&jm->nptl, &th->stack, err);
  } else if (ev->op == TRACE_THREAD_EXIT) {
    if (th->tsd != JE_TSD_UNINIT && !th->exited)
      rc = thread_exit(jm, th, err);
    if (rc == AS_OK)
      rc = nptl_stack_release(&jm->nptl, &th->stack, err);
    th->seed = 0; /* the next thread with this id has its own tsd */
  }
  return done(jm, rc, err);
}

/* ---- Model interface ----------------------------------------------------- */

/* mallctl arena.<i>.purge (all) / arena.<i>.decay (ctl.c:2533-2578) and
 * thread.tcache.flush. */
static as_status_t jemalloc_purge(model_t *m, const trace_event_t *ev,
                                  as_err_t *err) {
  jemalloc_model_t *jm = (jemalloc_model_t *)m;
  if (enter(jm, ev->t_ns, err) != AS_OK)
    return jm->fail;
  as_status_t rc = AS_OK;
  if (ev->size == TRACE_PURGE_TCACHE) {
    je_thread_t *th;
    rc = thread_of(jm, ev->thread, false, &th, err);
    if (rc == AS_OK)
      rc = tcache_flush_all(jm, th, err);
    return done(jm, rc, err);
  }
  bool all = ev->size == TRACE_PURGE_ALL;
  if (ev->id != TRACE_ALL_ARENAS && ev->id >= jm->narenas_total)
    return as_err_set(err, AS_EINVAL,
                      "jemalloc: purge of arena %" PRIu64 ": arenas are 0..%u",
                      ev->id, jm->narenas_total - 1); /* the model goes on */
  for (uint32_t i = 0; i < jm->narenas_total && rc == AS_OK; i++)
    if (jm->arenas[i] != NULL && (ev->id == TRACE_ALL_ARENAS || ev->id == i))
      rc = je_arena_decay(jm, jm->arenas[i], false, all, err);
  return done(jm, rc, err);
}

/* arena.<i>.dirty_decay_ms / muzzy_decay_ms writes for every arena, and
 * arenas.*_decay_ms for arenas created later (ctl.c, pac_decay_ms_set). */
static as_status_t jemalloc_set_option(model_t *m, const char *name,
                                       int64_t value, uint64_t now_ns,
                                       as_err_t *err) {
  jemalloc_model_t *jm = (jemalloc_model_t *)m;
  if (enter(jm, now_ns, err) != AS_OK)
    return jm->fail;
  bool dirty = strcmp(name, "dirty_decay_ms") == 0;
  if (!dirty && strcmp(name, "muzzy_decay_ms") != 0)
    return as_err_set(err, AS_EINVAL,
                      "jemalloc: option %s cannot change at run time (only "
                      "dirty_decay_ms and muzzy_decay_ms can)",
                      name);
  if (value < -1)
    return as_err_set(err, AS_EINVAL,
                      "jemalloc: %s=%" PRId64 ": expected -1 or more", name,
                      value);
  if (dirty)
    jm->dirty_decay_ms = value;
  else
    jm->muzzy_decay_ms = value;
  as_status_t rc = AS_OK;
  for (uint32_t i = 0; i < jm->narenas_total && rc == AS_OK; i++)
    if (jm->arenas[i] != NULL && !(jm->huge_enabled && i == jm->huge_ind))
      rc = je_decay_ms_set(jm, jm->arenas[i], dirty, value, err);
  return done(jm, rc, err);
}

/* A seed the run recorded (traces/je_seeds.h): "prng" for thread index,
 * its tsd address, which seeds its prng when its tsd comes alive (so it
 * comes before the thread's first call); "jitter" for arena index, its
 * decay_dirty address, which seeds the arena's epochs when it is created
 * (decay_muzzy's lies JE_SIZEOF_DECAY past it). */
static as_status_t jemalloc_seed(model_t *m, const char *kind, uint64_t index,
                                 uint64_t value, as_err_t *err) {
  jemalloc_model_t *jm = (jemalloc_model_t *)m;
  if (jm->fail != AS_OK)
    return report(jm, err);
  as_status_t rc = AS_OK;
  if (strcmp(kind, "prng") == 0) {
    je_thread_t *th;
    if ((rc = thread_slot(jm, (uint32_t)index, &th, err)) == AS_OK)
      th->seed = value;
  } else if (strcmp(kind, "jitter") == 0 && index < jm->narenas_total &&
             jm->arenas[index] != NULL) {
    je_decay_reseed(jm->arenas[index], value); /* recorded once it was made */
  } else if (strcmp(kind, "jitter") == 0 && index < jm->narenas_total) {
    if (jm->arena_jitter == NULL)
      jm->arena_jitter = calloc(jm->narenas_total, sizeof *jm->arena_jitter);
    if (jm->arena_jitter != NULL)
      jm->arena_jitter[index] = value;
    else
      rc = as_err_set(err, AS_ENOMEM, "jemalloc: out of memory (seeds)");
  } /* else not jemalloc's, or an arena this model never makes */
  return done(jm, rc, err);
}

static bool jemalloc_locate(const model_t *m, uint64_t id, sim_addr_t *addr) {
  const jemalloc_model_t *jm = (const jemalloc_model_t *)m;
  je_obj_t                o = obj_get(jm, id);
  if (o.ext == JE_NONE)
    return false;
  *addr = obj_addr(jm, &o);
  return true;
}

static uint64_t jemalloc_usable_size(const model_t *m, uint64_t size,
                                     uint8_t domain) {
  (void)domain;
  return s2u((const jemalloc_model_t *)m, size);
}

static uint64_t tcache_bytes(const jemalloc_model_t *jm) {
  uint64_t b = 0;
  for (size_t t = 0; t < jm->threads_cap; t++)
    if (jm->threads[t].cbins != NULL)
      for (unsigned i = 0; i < jm->nhbins; i++)
        b += (uint64_t)jm->threads[t].cbins[i].n * jm->index2size[i];
  return b;
}

static void jemalloc_stats(const model_t *m, model_stats_t *out) {
  const jemalloc_model_t *jm = (const jemalloc_model_t *)m;
  jemalloc_totals_t       t;
  jemalloc_inspect_totals(m, &t);
  uint64_t free_pages = 0, nextents = 0;
  for (uint32_t i = 0; i < jm->narenas_total; i++) {
    const je_arena_t *a = jm->arenas[i];
    if (a == NULL)
      continue;
    free_pages += a->dirty.npages + a->muzzy.npages;
    nextents += a->dirty.nextents + a->muzzy.nextents + a->retained.nextents;
  }
  out->live_bytes = jm->live_bytes;
  out->live_objects = jm->live_objects;
  out->mapped_bytes = t.mapped + t.retained;
  out->arenas = jm->nrecords;
  (void)nextents;
  out->free_bytes = (free_pages << jm->lg_page) + tcache_bytes(jm);
}

static size_t jemalloc_counters(const model_t *m, model_counter_t *out,
                                size_t cap) {
  const jemalloc_model_t *jm = (const jemalloc_model_t *)m;
  jemalloc_totals_t       t;
  jemalloc_inspect_totals(m, &t);
  uint64_t dirty = 0, muzzy = 0, npurge = 0, nmadvise = 0, purged = 0;
  uint64_t arenas = 0, runs = 0;
  for (uint32_t i = 0; i < jm->narenas_total; i++) {
    const je_arena_t *a = jm->arenas[i];
    if (a == NULL)
      continue;
    arenas++;
    dirty += a->dirty.npages;
    muzzy += a->muzzy.npages;
    npurge += a->decay_dirty.npurge + a->decay_muzzy.npurge;
    nmadvise += a->decay_dirty.nmadvise + a->decay_muzzy.nmadvise;
    purged += a->decay_dirty.purged + a->decay_muzzy.purged;
  }
  for (uint32_t i = 0; jm->bg != NULL && i < jm->max_bg_threads; i++)
    runs += jm->bg[i].runs;
  size_t      n = 0;
  const char *p = "jemalloc";
  n = model_counter_put(out, n, cap, p, "active_bytes", t.active, "bytes",
                        "pages of active extents (stats.active)");
  n = model_counter_put(out, n, cap, p, "dirty_bytes", dirty << jm->lg_page,
                        "bytes", "freed, still resident, awaiting decay");
  n = model_counter_put(out, n, cap, p, "muzzy_bytes", muzzy << jm->lg_page,
                        "bytes", "MADV_FREE'd, awaiting muzzy decay");
  n = model_counter_put(out, n, cap, p, "retained_bytes", t.retained, "bytes",
                        "purged address space kept (retain)");
  n = model_counter_put(out, n, cap, p, "metadata_bytes", t.metadata, "bytes",
                        "base allocations (stats.metadata)");
  n = model_counter_put(out, n, cap, p, "tcache_bytes", tcache_bytes(jm),
                        "bytes", "regions held in thread caches");
  n = model_counter_put(out, n, cap, p, "arenas", arenas, "count",
                        "arenas created (the huge arena included)");
  n = model_counter_put(out, n, cap, p, "purges", npurge, "count",
                        "decay purge passes (dirty_npurge + muzzy_npurge)");
  n = model_counter_put(out, n, cap, p, "madvise_extents", nmadvise, "count",
                        "extents purged (one madvise each)");
  n = model_counter_put(out, n, cap, p, "purged_bytes", purged << jm->lg_page,
                        "bytes", "pages purged since start");
  n = model_counter_put(out, n, cap, p, "bg_runs", runs, "count",
                        "background thread wakeups");
  return n;
}

/* ---- Heap map (model_walk) ----------------------------------------------- */

static const model_mechanism_t jemalloc_mechanisms[] = {
    {"jemalloc.small", "small objects in slabs",
     "Requests up to 14 KiB get a region of their size class in a slab of "
     "a few pages holding a whole number of regions (arena_malloc_small, "
     "bin_infos).",
     "freeing the objects", true},
    {"jemalloc.large", "large objects in extents of their own",
     "Larger requests get whole pages plus one page of padding, the object "
     "placed at a random cache line of the first page (large_palloc, "
     "sz_large_pad).",
     "freeing the objects", true},
    {"jemalloc.tcache", "freed objects in per-thread caches (tcache)",
     "free() keeps up to ncached_max objects of each size class up to "
     "tcache_max (32 KiB) in the calling thread's cache; to the arena they "
     "are still allocated (tcache_dalloc_small, tcache_dalloc_large).",
     "the cache's GC (every 64 KiB the thread allocates, 3/4 of a bin's "
     "unused part), the thread's exit, or mallctl(\"thread.tcache.flush\")",
     false},
    {"jemalloc.slab_free", "free regions in slabs that hold objects",
     "A slab goes back to the arena's extents only when every region in it "
     "is free (arena_dalloc_bin_locked_step), so one live object pins the "
     "slab's pages.",
     "nothing short of freeing the last objects in each slab", false},
    {"jemalloc.dirty", "freed extents awaiting decay (dirty)",
     "Freed pages stay resident and are purged over dirty_decay_ms (10 s, a "
     "200-step smootherstep curve); decay advances only on allocator ticks "
     "(about one arena-level event in 1000) or in background threads, so an "
     "idle process purges nothing (arena_decay).",
     "allocation activity or background_thread:true (decay), "
     "dirty_decay_ms:0, or mallctl(\"arena.<i>.purge\")",
     false},
    {"jemalloc.muzzy", "extents given MADV_FREE (muzzy)",
     "With muzzy_decay_ms above 0 decay first marks pages MADV_FREE; the "
     "kernel counts them in RSS until memory pressure takes them "
     "(pac_decay_stashed).",
     "memory pressure, muzzy decay (MADV_DONTNEED), or "
     "mallctl(\"arena.<i>.purge\")",
     false},
    {"jemalloc.retained", "purged address space kept mapped (retained)",
     "With retain (Linux's default) purged extents keep their address "
     "space for reuse and growth (extent_grow_retained); it is not "
     "resident.",
     "nothing needed: not resident", false},
    {"jemalloc.metadata", "jemalloc's own bookkeeping",
     "Arena structs, a 128-byte edata_t per extent and the rtree leaves "
     "mapping pages to extents come from base blocks that are never "
     "returned (base_alloc); thread caches' pointer stacks are internal "
     "allocations in arena 0.",
     "nothing while the process runs (a thread cache's stack at the "
     "thread's exit)",
     false},
    {NULL, NULL, NULL, NULL, false},
};

/* What the walk needs beyond the extents: which regions and extents sit
 * in thread caches and which extents hold tcache stacks. */
typedef struct je_walk_s je_walk_t;
struct je_walk_s {
  const jemalloc_model_t *jm;
  uint64_t       *cached;   /* per slab record, as slab_row: region cached */
  uint64_t       *internal; /* likewise: region holds a tcache stack */
  uint8_t        *flag;     /* per extent: WALK_CACHED / _INTERNAL */
  uint64_t       *order;    /* live extent ids sorted by address */
  size_t          n;
  model_region_fn fn;
  void           *user;
};
#define WALK_CACHED   1
#define WALK_INTERNAL 2

static int by_addr(const void *x, const void *y, void *ctx) {
  const jemalloc_model_t *jm = ctx;
  uint64_t                a = E(jm, *(const uint64_t *)x)->addr;
  uint64_t                b = E(jm, *(const uint64_t *)y)->addr;
  return a < b ? -1 : a > b;
}

typedef enum { REG_FREE, REG_CACHED, REG_LIVE, REG_INTERNAL } reg_class_t;

static reg_class_t reg_class(const je_walk_t *w, const je_ext_t *x,
                             unsigned r) {
  uint64_t bit = UINT64_C(1) << (r % 64);
  size_t   word = (size_t)x->slab + r / 64;
  if (w->jm->slab_bits[word] & bit)
    return REG_FREE; /* bit set = region free */
  if (w->internal[word] & bit)
    return REG_INTERNAL;
  return w->cached[word] & bit ? REG_CACHED : REG_LIVE;
}

/* Sets region r of extent e in a per-slab bitmap of the walk. */
static void walk_mark(const je_walk_t *w, uint64_t *rows, uint32_t e,
                      unsigned r) {
  rows[(size_t)E(w->jm, e)->slab + r / 64] |= UINT64_C(1) << (r % 64);
}

/* jemalloc's own allocation o (a tcache stack, 5.2.1's tickers): a large
 * extent, or a small region (a stack on 16 or 64 KiB pages,
 * internal_palloc; a0_malloc), metadata either way. */
static void walk_internal(je_walk_t *w, const je_obj_t *o) {
  if (E(w->jm, o->ext)->slab == 0)
    w->flag[o->ext] |= WALK_INTERNAL;
  else
    walk_mark(w, w->internal, o->ext, o->reg);
}

/* A slab's regions as runs of one class each, then its unused tail. */
static as_status_t walk_slab(const je_walk_t *w, const je_ext_t *x,
                             as_err_t *err) {
  const jemalloc_model_t  *jm = w->jm;
  uint64_t                 size = jm->index2size[x->binind];
  uint32_t                 nregs = jm->bin_nregs[x->binind];
  static const char *const mech[] = {"jemalloc.slab_free", "jemalloc.tcache",
                                     "jemalloc.small", "jemalloc.metadata"};
  static const uint8_t     state[] = {MODEL_REGION_FREE, MODEL_REGION_CACHED,
                                      MODEL_REGION_LIVE, MODEL_REGION_METADATA};
  for (uint32_t r = 0; r < nregs;) {
    reg_class_t c = reg_class(w, x, r);
    uint32_t    end = r + 1;
    while (end < nregs && reg_class(w, x, end) == c)
      end++;
    model_region_t q = {.addr = x->addr + r * size,
                        .bytes = (end - r) * size,
                        .kind = c == REG_INTERNAL ? "internal" : "regions",
                        .mechanism = mech[c],
                        .level = 1,
                        .state = state[c]};
    if (c == REG_LIVE) {
      q.live_objects = end - r;
      q.live_bytes = q.bytes;
    }
    as_status_t rc = w->fn(w->user, &q, err);
    if (rc != AS_OK)
      return rc;
    r = end;
  }
  uint64_t used = nregs * size;
  if (used == x->size)
    return AS_OK;
  return w->fn(w->user,
               &(model_region_t){.addr = x->addr + used,
                                 .bytes = x->size - used,
                                 .kind = "slab tail",
                                 .mechanism = "jemalloc.slab_free",
                                 .level = 1,
                                 .state = MODEL_REGION_FREE},
               err);
}

static as_status_t walk_extent(const je_walk_t *w, uint32_t e, as_err_t *err) {
  const jemalloc_model_t *jm = w->jm;
  const je_ext_t         *x = E(jm, e);
  model_region_t          q = {.addr = x->addr, .bytes = x->size, .level = 1};
  switch (x->state) {
  case JE_ACTIVE:
    if (x->slab)
      return walk_slab(w, x, err);
    if (w->flag[e] & WALK_INTERNAL) {
      q.kind = "internal";
      q.mechanism = "jemalloc.metadata";
      q.state = MODEL_REGION_METADATA;
    } else if (w->flag[e] & WALK_CACHED) {
      q.kind = "large";
      q.mechanism = "jemalloc.tcache";
      q.state = MODEL_REGION_CACHED;
    } else {
      q.kind = "large";
      q.mechanism = "jemalloc.large";
      q.state = MODEL_REGION_LIVE;
      q.live_objects = 1;
      q.live_bytes = jm->index2size[x->szind];
    }
    break;
  case JE_DIRTY:
    q.kind = "dirty extent";
    q.mechanism = "jemalloc.dirty";
    q.state = MODEL_REGION_FREE;
    break;
  case JE_MUZZY:
    q.kind = "muzzy extent";
    q.mechanism = "jemalloc.muzzy";
    q.state = MODEL_REGION_FREE;
    break;
  default:
    q.kind = "retained extent";
    q.mechanism = "jemalloc.retained";
    q.state = MODEL_REGION_RELEASED;
    break;
  }
  return w->fn(w->user, &q, err);
}

/* Live objects in extent e (the unit's pinning count): neither free nor
 * cached nor a tcache stack. */
static uint64_t extent_objects(const je_walk_t *w, uint32_t e) {
  const je_ext_t *x = E(w->jm, e);
  if (x->state != JE_ACTIVE || (w->flag[e] & (WALK_CACHED | WALK_INTERNAL)))
    return 0;
  if (!x->slab)
    return 1;
  uint64_t n = 0;
  for (uint32_t r = 0; r < w->jm->bin_nregs[x->binind]; r++)
    n += reg_class(w, x, r) == REG_LIVE;
  return n;
}

/* The program's bytes in extent e: its live objects' size classes. */
static uint64_t extent_live_bytes(const je_walk_t *w, uint32_t e) {
  const je_ext_t *x = E(w->jm, e);
  unsigned        ind = x->slab ? x->binind : x->szind;
  return extent_objects(w, e) * w->jm->index2size[ind];
}

/* Whether extent order[i] starts a mapping: a head extent (extent_grow,
 * extent_alloc_wrapper mark one per mmap), or one not adjoining its
 * predecessor in the same arena (retain:false unmaps heads). */
static bool starts_unit(const je_walk_t *w, size_t i) {
  const je_ext_t *x = E(w->jm, w->order[i]);
  if (i == 0 || x->is_head)
    return true;
  const je_ext_t *p = E(w->jm, w->order[i - 1]);
  return p->addr + p->size != x->addr || p->arena != x->arena;
}

static as_status_t walk_extents(je_walk_t *w, as_err_t *err) {
  const jemalloc_model_t *jm = w->jm;
  for (size_t i = 0; i < w->n;) {
    size_t         end = i + 1;
    model_region_t u = {.addr = E(jm, w->order[i])->addr, .kind = "mapping"};
    while (end < w->n && !starts_unit(w, end))
      end++;
    for (size_t k = i; k < end; k++) {
      u.bytes += E(jm, w->order[k])->size;
      u.live_objects += extent_objects(w, (uint32_t)w->order[k]);
      u.live_bytes += extent_live_bytes(w, (uint32_t)w->order[k]);
    }
    as_status_t rc = w->fn(w->user, &u, err);
    for (size_t k = i; k < end && rc == AS_OK; k++)
      rc = walk_extent(w, (uint32_t)w->order[k], err);
    if (rc != AS_OK)
      return rc;
    i = end;
  }
  return AS_OK;
}

/* Each arena's base blocks: one unit each, all metadata. */
static as_status_t walk_bases(const je_walk_t *w, as_err_t *err) {
  const jemalloc_model_t *jm = w->jm;
  as_status_t             rc = AS_OK;
  for (uint32_t i = 0; i < jm->narenas_total && rc == AS_OK; i++) {
    const je_arena_t *a = jm->arenas[i];
    for (uint32_t k = 0; a != NULL && k < a->base.nblocks && rc == AS_OK; k++) {
      rc = model_walk_single((model_region_t){.addr = a->base.blocks[k].addr,
                                              .bytes = a->base.blocks[k].size,
                                              .kind = "base block",
                                              .mechanism = "jemalloc.metadata",
                                              .state = MODEL_REGION_METADATA},
                             w->fn, w->user, err);
    }
  }
  return rc;
}

/* Units: each mapping of extents (in address order, with its slabs'
 * regions, large objects and free extents), each base block, then the
 * threads' stacks and nptl's stack cache. */
static as_status_t jemalloc_walk(const model_t *m, model_region_fn fn,
                                 void *user, as_err_t *err) {
  const jemalloc_model_t *jm = (const jemalloc_model_t *)m;
  je_walk_t               w = {.jm = jm, .fn = fn, .user = user};
  size_t                  rows = (size_t)jm->next_slab + 1;
  w.cached = calloc(rows, sizeof *w.cached);
  w.internal = calloc(rows, sizeof *w.internal);
  w.flag = calloc(jm->next_ext + 1, 1);
  w.order = malloc(((size_t)jm->next_ext + 1) * sizeof *w.order);
  as_status_t rc = AS_OK;
  if (w.cached == NULL || w.internal == NULL || w.flag == NULL ||
      w.order == NULL)
    rc = as_err_set(err, AS_ENOMEM, "jemalloc: out of memory (walk)");
  for (size_t t = 0; rc == AS_OK && t < jm->threads_cap; t++) {
    const je_thread_t *th = &jm->threads[t];
    if (th->tdata.ext != JE_NONE)
      walk_internal(&w, &th->tdata);
    if (th->cbins == NULL)
      continue;
    walk_internal(&w, &th->tcache_stack);
    for (unsigned i = 0; i < jm->nhbins; i++)
      for (unsigned k = 0; k < th->cbins[i].n; k++) {
        uint64_t item = th->cbins[i].slot[k];
        uint32_t e = (uint32_t)(item >> 16);
        if (i < jm->nbins)
          walk_mark(&w, w.cached, e, (unsigned)(item & 0xffff));
        else
          w.flag[e] |= WALK_CACHED;
      }
  }
  for (uint32_t e = 1; rc == AS_OK && e < jm->next_ext; e++)
    if (E(jm, e)->state <= JE_RETAINED)
      w.order[w.n++] = e;
  if (rc == AS_OK) {
    qsort_r(w.order, w.n, sizeof *w.order, by_addr, (void *)jm);
    rc = walk_extents(&w, err);
  }
  if (rc == AS_OK)
    rc = walk_bases(&w, err);
  for (size_t t = 0; rc == AS_OK && t < jm->threads_cap; t++)
    rc = nptl_stack_walk(&jm->threads[t].stack, fn, user, err);
  if (rc == AS_OK)
    rc = nptl_stacks_walk_cache(&jm->nptl, fn, user, err);
  free(w.cached);
  free(w.internal);
  free(w.flag);
  free(w.order);
  return rc;
}

static void jemalloc_destroy(model_t *m) {
  jemalloc_model_t *jm = (jemalloc_model_t *)m;
  if (jm == NULL)
    return;
  for (uint32_t i = 0; jm->arenas != NULL && i < jm->narenas_total; i++)
    arena_destroy(jm, jm->arenas[i]);
  for (size_t t = 0; t < jm->threads_cap; t++) {
    if (jm->threads[t].cbins != NULL) {
      free(jm->threads[t].cbins[0].slot);
      free(jm->threads[t].cbins);
    }
    free(jm->threads[t].dtick);
  }
  if (jm->bg != NULL)
    for (uint32_t i = 0; i < jm->max_bg_threads; i++)
      sim_event_queue_cancel(jm->timers, &jm->bg[i].timer);
  free(jm->bg);
  free(jm->arenas);
  free(jm->arena_jitter);
  free(jm->threads);
  sim_idtable_free(&jm->ext_tab);
  sim_idtable_free(&jm->slab_tab);
  je_emap_free(&jm->emap);
  sim_idtable_free(&jm->obj_tab);
  free(jm->leaf_key);
  free(jm->leaf_addr);
  nptl_stacks_fini(&jm->nptl);
  free(jm);
}

/* The options 5.2.1 reads otherwise.  Background threads are not modelled
 * for it.  5.2.1 knows lg_tcache_max only (5.2.1 src/jemalloc.c:1291-1292:
 * -1..63, default LG_TCACHE_MAXCLASS_DEFAULT 15, tcache_types.h:37);
 * tcache_boot raises anything below SC_SMALL_MAXCLASS to it (5.2.1
 * src/tcache.c:734-740), done in geometry_init; 0 here stands for "below". */
static as_status_t read_options_521(jemalloc_model_t *jm, const model_opts_t *o,
                                    as_err_t *err) {
  if (jm->background_thread)
    return as_err_set(err, AS_EINVAL,
                      "jemalloc: background_thread=true: not modelled for "
                      "jemalloc 5.2.1 (its background threads follow their "
                      "own timing, src/background_thread.c of tag 5.2.1)");
  if (model_opt_was_set(o, JO_TCACHE_MAX))
    return as_err_set(err, AS_EINVAL,
                      "jemalloc: tcache_max: not an option of jemalloc 5.2.1 "
                      "(it has lg_tcache_max)");
  int64_t lg = model_opt_was_set(o, JO_LG_TCACHE_MAX)
                   ? model_opt_i64(o, JO_LG_TCACHE_MAX)
                   : 15;
  if (lg < -1 || lg > 62) /* 2^63 is above SC_LARGE_MAXCLASS */
    return as_err_set(err, AS_EINVAL,
                      "jemalloc: lg_tcache_max=%" PRId64 ": expected -1..62",
                      lg);
  jm->tcache_maxclass = lg < 0 ? 0 : UINT64_C(1) << lg;
  return AS_OK;
}

/* Options with their ranges (src/jemalloc.c malloc_conf_init_helper). */
static as_status_t read_options(jemalloc_model_t *jm, const model_opts_t *o,
                                as_err_t *err) {
  uint64_t ncpus = model_opt_u64(o, JO_NCPUS);
  uint64_t narenas = model_opt_u64(o, JO_NARENAS);
  int64_t  dd = model_opt_i64(o, JO_DIRTY_DECAY_MS);
  int64_t  md = model_opt_i64(o, JO_MUZZY_DECAY_MS);
  uint64_t lg_page = model_opt_u64(o, JO_LG_PAGE);
  if (ncpus < 1)
    return as_err_set(err, AS_EINVAL, "jemalloc: ncpus=0: expected 1 or more");
  if (narenas > UINT32_MAX)
    return as_err_set(err, AS_EINVAL,
                      "jemalloc: narenas=%" PRIu64 ": expected 0..%" PRIu32,
                      narenas, UINT32_MAX);
  /* decay_ms_valid (decay.c:63-73): -1 .. NSTIME_SEC_MAX * 1000 */
  if (dd < -1 || md < -1)
    return as_err_set(err, AS_EINVAL,
                      "jemalloc: %s=%" PRId64 ": expected -1 (never), 0 "
                      "(at once) or a positive number of ms",
                      dd < -1 ? "dirty_decay_ms" : "muzzy_decay_ms",
                      dd < -1 ? dd : md);
  if (lg_page < 12 || lg_page > 16 || (UINT64_C(1) << lg_page) < jm->os_page)
    return as_err_set(err, AS_EINVAL,
                      "jemalloc: lg_page=%" PRIu64 ": expected 12..16 and a "
                      "page of at least the OS page (%" PRIu64 " bytes; "
                      "src/pages.c pages_boot refuses a larger OS page)",
                      lg_page, jm->os_page);
  uint64_t max_bg = model_opt_u64(o, JO_MAX_BG_THREADS);
  if (max_bg < 1 || max_bg > 4096)
    return as_err_set(err, AS_EINVAL,
                      "jemalloc: max_background_threads=%" PRIu64
                      ": expected 1..4096",
                      max_bg);
  jm->lg_page = (unsigned)lg_page;
  jm->page = UINT64_C(1) << lg_page;
  jm->large_pad = jm->page; /* cache_oblivious (sz.c:110) */
  /* malloc_narenas_default (jemalloc.c:1975-1993), then the limit of
   * MALLOCX_ARENA() indexing: at least MALLOCX_ARENA_LIMIT (4095,
   * jemalloc_internal_types.h:50) becomes 4094 (jemalloc.c:2068-2072). */
  uint64_t want = narenas != 0 ? narenas : ncpus > 1 ? ncpus * 4 : 1;
  jm->narenas_auto = want >= 4095 || ncpus > UINT32_MAX ? 4094 : (uint32_t)want;
  jm->dirty_decay_ms = dd;
  jm->muzzy_decay_ms = md;
  jm->background_thread = model_opt_bool(o, JO_BACKGROUND_THREAD);
  jm->max_bg_threads = (uint32_t)max_bg;
  jm->retain = model_opt_bool(o, JO_RETAIN);
  jm->tcache_enabled = model_opt_bool(o, JO_TCACHE);
  jm->prng_seed = model_opt_u64(o, JO_PRNG_SEED);
  jm->jitter_seed = model_opt_u64(o, JO_JITTER_SEED);
  jm->clock_res_ns = model_opt_u64(o, JO_CLOCK_RES);
  jm->clock_lag_ns = model_opt_u64(o, JO_CLOCK_LAG);
  jm->clock_init_ns = model_opt_u64(o, JO_CLOCK_INIT);
  jm->oversize_threshold = model_opt_u64(o, JO_OVERSIZE_THRESHOLD);
  jm->version = (je_version_t)model_opt_i64(o, JO_VERSION);
  if (jm->version == JE_V521)
    return read_options_521(jm, o, err);
  uint64_t tmax = model_opt_u64(o, JO_TCACHE_MAX);
  int64_t  lg_tmax = model_opt_i64(o, JO_LG_TCACHE_MAX);
  /* both set opt_tcache_max, the later one last (jemalloc.c:1374-1390) */
  if (lg_tmax >= 0 && model_opt_set_after(o, JO_LG_TCACHE_MAX, JO_TCACHE_MAX))
    tmax = UINT64_C(1) << (lg_tmax > 23 ? 23 : lg_tmax);
  if (tmax > (UINT64_C(1) << 23)) /* clipped (jemalloc.c:1374-1376) */
    tmax = UINT64_C(1) << 23;
  jm->tcache_maxclass = tmax;
  return AS_OK;
}

/* BITMAP_GROUPS_MAX (bitmap.h:8-144, 5.2.1 and 5.3.0 alike) for a slab's
 * most regions, PAGE / 8 (sc.h SC_LG_SLAB_MAXREGS), or LG_CEIL(SC_NSIZES)
 * bits if that is more: one 64-bit group per 64 bits, and over 2^9 bits a
 * tree, each level a group per 64 groups below it, up to one group. */
static uint64_t bitmap_groups_max(unsigned lg_page) {
  unsigned lg_bits = lg_page - JE_LG_TINY_MIN > 8 ? lg_page - JE_LG_TINY_MIN
                                                  : 8; /* SC_NSIZES <= 256 */
  uint64_t level = (UINT64_C(1) << lg_bits) / 64;
  if (lg_bits - 6 <= 3) /* no BITMAP_USE_TREE */
    return level;
  uint64_t groups = level;
  while (level > 1) {
    level = (level + 63) / 64;
    groups += level;
  }
  return groups;
}

/* The sizes and layout of jemalloc's structures in the version modelled. */
static void struct_sizes_init(jemalloc_model_t *jm) {
  jm->sizeof_edata = JE_EDATA_HEAD + 8 * bitmap_groups_max(jm->lg_page);
  if (jm->version == JE_V521) {
    jm->sizeof_arena = JE_521_SIZEOF_ARENA;
    jm->sizeof_bin = JE_521_SIZEOF_BIN;
    jm->sizeof_base = JE_521_SIZEOF_BASE;
    jm->edata_align = JE_CACHELINE;
    jm->lstats_off = JE_521_LSTATS_OFF;
    jm->hpa_off = jm->hpa_end =
        jm->sizeof_arena + jm->sizeof_bin * (uint64_t)jm->nbins;
    return;
  }
  jm->sizeof_arena = JE_SIZEOF_ARENA;
  jm->sizeof_bin = JE_SIZEOF_BIN;
  jm->sizeof_base = JE_SIZEOF_BASE;
  jm->edata_align = JE_EDATA_ALIGNMENT;
  jm->lstats_off = JE_ARENA_LSTATS_OFF;
  jm->hpa_off = JE_ARENA_HPA_OFF;
  jm->hpa_end = JE_ARENA_HPA_END;
}

static as_status_t geometry_init(jemalloc_model_t *jm, as_err_t *err) {
  as_status_t rc = size_classes_init(jm, err);
  if (rc != AS_OK)
    return rc;
  tables_init(jm);
  struct_sizes_init(jm);
  if (jm->version == JE_V521) {
    /* 5.2.1 src/tcache.c:734-740: at least SC_SMALL_MAXCLASS */
    if (jm->tcache_maxclass < jm->small_maxclass)
      jm->tcache_maxclass = jm->small_maxclass;
  } else { /* tcache_boot (tcache.c:1049-1083): tcache_maxclass = s2u(opt) */
    jm->tcache_maxclass =
        jm->tcache_maxclass ? s2u(jm, jm->tcache_maxclass) : 0;
  }
  jm->nhbins =
      jm->tcache_maxclass ? je_size2index(jm, jm->tcache_maxclass) + 1 : 0;
  if (jm->nhbins > JE_MAX_SIZES)
    return as_err_set(err, AS_EINVAL, "jemalloc: tcache_max too large");
  uint64_t slots = 0;
  for (unsigned i = 0; i < jm->nhbins; i++) {
    jm->ncached_max[i] = ncached_max_of(jm, i);
    slots += jm->ncached_max[i];
  }
  if (jm->version == JE_V521) {
    /* 5.2.1 src/tcache.c:446-452 tsd_tcache_data_init: stack_nelms
     * pointers, sz_sa2u(size, CACHELINE) */
    jm->tcache_stack_bytes = 8 * slots;
    jm->tcache_stack_align = JE_CACHELINE;
  } else {
    /* cache_bin_info_compute_alloc (cache_bin.c:14-33): two spare slots;
     * ipallocztm at PAGE (tcache.c:717-719) */
    jm->tcache_stack_bytes = 8 * (slots + 2);
    jm->tcache_stack_align = jm->page;
  }
  if (jm->nhbins == 0)
    jm->tcache_enabled = false;
  /* arena_init_huge (arena.c:1745-1763) */
  uint64_t ot = jm->oversize_threshold;
  jm->huge_enabled = ot >= jm->large_minclass && ot <= jm->large_maxclass;
  if (!jm->huge_enabled)
    jm->oversize_threshold = jm->large_maxclass + jm->page;
  jm->narenas_total = jm->narenas_auto + (jm->huge_enabled ? 1 : 0);
  jm->huge_ind = jm->narenas_auto;
  /* 5.2.1's per-thread tickers, a0malloc'ed (tdata_get), are modelled as
   * the small region they are up to this many arenas.  Past it a0malloc
   * makes a large extent placed from arena 0's own prng, seeded with the
   * arena's address (5.2.1 extent_inlines.h:216-240, arena.c:1997), which
   * the model does not follow: refused, not run wrong. */
  uint64_t tdata_max = jm->small_maxclass / JE_521_SIZEOF_TDATA;
  if (jm->version == JE_V521 && jm->narenas_total > tdata_max)
    return as_err_set(err, AS_EINVAL,
                      "jemalloc: version=5.2.1 with %" PRIu32
                      " arenas: the model follows 5.2.1's per-thread decay "
                      "tickers for at most %" PRIu64 " arenas (narenas at "
                      "most %" PRIu64 " with %" PRIu64 "-byte pages)",
                      jm->narenas_total, tdata_max,
                      tdata_max - (jm->huge_enabled ? 1 : 0), jm->page);
  return AS_OK;
}

static as_status_t jemalloc_create(const model_opts_t *opts,
                                   const model_ctx_t *ctx, model_t **out,
                                   as_err_t *err) {
  *out = NULL;
  jemalloc_model_t *jm = calloc(1, sizeof *jm);
  if (jm == NULL)
    return as_err_set(err, AS_ENOMEM, "jemalloc: out of memory");
  jm->kernel = ctx->kernel;
  jm->timers = ctx->timers;
  jm->os_page = sim_kernel_page_size(ctx->kernel);
  jm->next_ext = 1; /* id 0 is "none" */
  jm->next_slab = 1;
  as_status_t rc = read_options(jm, opts, err);
  if (rc == AS_OK)
    rc = geometry_init(jm, err);
  if (rc == AS_OK)
    rc = nptl_stacks_init(
        &jm->nptl, ctx->kernel, model_opt_u64(opts, JO_STACK_SIZE),
        model_opt_u64(opts, JO_THREAD_STACK_PAGES),
        jm->version == JE_V521 ? JE_521_TLS_STATIC_BYTES : JE_TLS_STATIC_BYTES,
        "jemalloc", err);
  if (rc == AS_OK &&
      (sim_idtable_init(&jm->obj_tab, sizeof *jm->objs) != AS_OK ||
       sim_idtable_init(&jm->ext_tab, sizeof *jm->ext) != AS_OK ||
       sim_idtable_init(&jm->slab_tab, sizeof *jm->slab_bits) != AS_OK))
    rc = as_err_set(err, AS_ENOMEM, "jemalloc: no address space for tables");
  jm->objs = sim_idtable_base(&jm->obj_tab);
  narrow_objs(jm);
  jm->ext = sim_idtable_base(&jm->ext_tab);
  jm->slab_bits = sim_idtable_base(&jm->slab_tab);
  if (rc == AS_OK) {
    jm->arenas = calloc(jm->narenas_total, sizeof *jm->arenas);
    jm->bg = calloc(jm->max_bg_threads, sizeof *jm->bg);
    if (jm->arenas == NULL || jm->bg == NULL)
      rc = as_err_set(err, AS_ENOMEM, "jemalloc: out of memory");
  }
  /* malloc_init_hard_a0_locked (jemalloc.c:1764-1923): b0 and arena 0,
   * tcache_bin_info (tcache.c:1063-1068); background_thread_boot1 (:775-
   * 818) allocates the info array whether or not threads are enabled. */
  sim_addr_t addr;
  if (rc == AS_OK)
    rc = je_arena_create(jm, 0, err);
  if (rc == AS_OK)
    rc = je_base_alloc(
        jm, &jm->arenas[0]->base, 0,
        2 * (uint64_t)(jm->nhbins > jm->nbins ? jm->nhbins : jm->nbins),
        JE_CACHELINE, true, &addr, err);
  if (rc == AS_OK)
    rc = je_base_alloc(jm, &jm->arenas[0]->base, 0,
                       JE_SIZEOF_BG_INFO * (uint64_t)jm->max_bg_threads,
                       JE_CACHELINE, true, &addr, err);
  for (uint32_t i = 0; rc == AS_OK && i < jm->max_bg_threads; i++)
    je_bg_init(jm, &jm->bg[i], i);
  if (rc == AS_OK)
    rc = je_bg_create(jm, 0, err); /* malloc_init_hard (:2168-2180) */
  /* The main thread has called malloc before the trace starts: its tsd,
   * tcache and arena 0 binding exist. */
  je_thread_t *th = NULL;
  if (rc == AS_OK)
    rc = thread_init(jm, 0, true, false, &th, err);
  uint64_t startup = model_opt_u64(opts, JO_STARTUP_MALLOC);
  if (rc == AS_OK && startup > 0) { /* eh_alloc.cc pool::pool() writes the
                                       free list head: 16 bytes */
    je_obj_t pool;
    uint64_t usize = s2u(jm, startup);
    rc = je_malloc(jm, th, usize, startup, JE_CACHELINE, false, false, &pool,
                   err);
    if (rc == AS_OK)
      rc = touch(jm, obj_addr(jm, &pool), 16, err);
    if (rc == AS_OK)
      rc = alloc_event(jm, th, usize, err);
  }
  if (rc != AS_OK) {
    jemalloc_destroy(&jm->base);
    return rc;
  }
  *out = &jm->base;
  return AS_OK;
}

/* MALLOC_CONF keys 5.3.0 reads (src/jemalloc.c:1216-1222, 1320-1325,
 * 1362-1366; 5.2.1: 1170-1176, 1252-1255, 1285-1288) that only print,
 * abort or trace.  stats_print's report runs at exit (atexit,
 * src/jemalloc.c:1823), after the program's last call, through a 64 KiB
 * buffer jemalloc allocates for it (src/jemalloc.c:4047-4063). */
static const char *const jemalloc_neutral_env[] = {
    "MALLOC_CONF:abort",
    "MALLOC_CONF:abort_conf",
    "MALLOC_CONF:confirm_conf",
    "MALLOC_CONF:stats_print",
    "MALLOC_CONF:stats_print_opts",
    "MALLOC_CONF:utrace",
    "MALLOC_CONF:xmalloc",
    NULL};

/* A free or realloc reads the object's extent (its size class, its slab):
 * in a trace that frees in random order, the miss that dominates. */
static void jemalloc_prefetch(const model_t *m, const trace_event_t *ev) {
  const jemalloc_model_t *jm = (const jemalloc_model_t *)m;
  uint32_t                e = obj_ext(jm, ev->id);
  if (e != JE_NONE)
    __builtin_prefetch(E(jm, e));
}

const model_methods_t model_jemalloc_methods = {
    .name = "jemalloc",
    .summary = "jemalloc 5.3.0 (Debian 12) or 5.2.1 (Ubuntu 22.04): arenas, "
               "tcache, slabs, extents, decay, background threads",
    .options = jemalloc_options,
    .preload = "libjemalloc",
    .neutral_env = jemalloc_neutral_env,
    .create = jemalloc_create,
    .destroy = jemalloc_destroy,
    .alloc = jemalloc_alloc,
    .realloc = jemalloc_realloc,
    .free = jemalloc_free,
    .thread = jemalloc_thread,
    .stats = jemalloc_stats,
    .locate = jemalloc_locate,
    .purge = jemalloc_purge,
    .set_option = jemalloc_set_option,
    .seed = jemalloc_seed,
    .counters = jemalloc_counters,
    .walk = jemalloc_walk,
    .mechanisms = jemalloc_mechanisms,
    .usable_size = jemalloc_usable_size,
    .prefetch = jemalloc_prefetch,
};

/* ---- Introspection (models/jemalloc.h) ----------------------------------- */

static const jemalloc_model_t *as_je(const model_t *m) {
  return m->methods == &model_jemalloc_methods ? (const jemalloc_model_t *)m
                                               : NULL;
}

uint32_t jemalloc_inspect_narenas(const model_t *m) {
  const jemalloc_model_t *jm = as_je(m);
  return jm ? jm->narenas_total : 0;
}

bool jemalloc_inspect_arena(const model_t *m, uint32_t ind,
                            jemalloc_arena_info_t *out) {
  const jemalloc_model_t *jm = as_je(m);
  if (jm == NULL || ind >= jm->narenas_total || jm->arenas[ind] == NULL)
    return false;
  const je_arena_t *a = jm->arenas[ind];
  memset(out, 0, sizeof *out);
  out->nthreads = a->nthreads[0];
  out->pactive = a->nactive;
  out->pdirty = a->dirty.npages;
  out->pmuzzy = a->muzzy.npages;
  out->retained = a->retained.npages << jm->lg_page;
  out->mapped = a->base.mapped + a->pac_mapped;
  out->resident =
      a->base.resident + ((a->nactive + a->dirty.npages) << jm->lg_page);
  out->base = a->base.allocated;
  out->internal = a->internal;
  out->dirty_npurge = a->decay_dirty.npurge;
  out->dirty_nmadvise = a->decay_dirty.nmadvise;
  out->dirty_purged = a->decay_dirty.purged;
  out->muzzy_npurge = a->decay_muzzy.npurge;
  out->muzzy_nmadvise = a->decay_muzzy.nmadvise;
  out->muzzy_purged = a->decay_muzzy.purged;
  out->dirty_decay_ms = a->decay_dirty.ms;
  out->muzzy_decay_ms = a->decay_muzzy.ms;
  for (uint32_t e = 1; e < jm->next_ext; e++) {
    const je_ext_t *x = E(jm, e);
    if (x->state == JE_ACTIVE && x->arena == ind && !x->slab)
      out->large_allocated += jm->index2size[x->szind];
  }
  return true;
}

bool jemalloc_inspect_bin_stats(const model_t *m, uint32_t arena,
                                unsigned binind, uint64_t *curslabs,
                                uint64_t *curregs, uint64_t *nonfull_slabs) {
  const jemalloc_model_t *jm = as_je(m);
  if (jm == NULL || arena >= jm->narenas_total || jm->arenas[arena] == NULL ||
      binind >= jm->nbins)
    return false;
  *curslabs = *curregs = 0;
  for (uint32_t e = 1; e < jm->next_ext; e++) {
    const je_ext_t *x = E(jm, e);
    if (x->state == JE_ACTIVE && x->arena == arena && x->slab &&
        x->binind == binind) {
      (*curslabs)++;
      *curregs += jm->bin_nregs[binind] - x->nfree;
    }
  }
  *nonfull_slabs = jm->arenas[arena]->bins[binind].nonfull.n;
  return true;
}

void jemalloc_inspect_totals(const model_t *m, jemalloc_totals_t *out) {
  memset(out, 0, sizeof *out);
  const jemalloc_model_t *jm = as_je(m);
  for (uint32_t i = 0; jm != NULL && i < jm->narenas_total; i++) {
    jemalloc_arena_info_t a;
    if (!jemalloc_inspect_arena(m, i, &a))
      continue;
    out->active += a.pactive << jm->lg_page;
    out->resident += a.resident;
    out->mapped += a.mapped;
    out->retained += a.retained;
    out->metadata += a.base + a.internal;
  }
}

bool jemalloc_inspect_object(const model_t *m, uint64_t id, uint64_t *addr,
                             uint64_t *usize, uint32_t *arena) {
  const jemalloc_model_t *jm = as_je(m);
  je_obj_t o = jm != NULL ? obj_get(jm, id) : (je_obj_t){.ext = JE_NONE};
  if (o.ext == JE_NONE)
    return false;
  *addr = obj_addr(jm, &o);
  *usize = jm->index2size[o.szind];
  *arena = E(jm, o.ext)->arena;
  return true;
}

int32_t jemalloc_inspect_thread_arena(const model_t *m, uint32_t tid) {
  const jemalloc_model_t *jm = as_je(m);
  if (jm == NULL || tid >= jm->threads_cap || !jm->threads[tid].bound)
    return -1;
  return (int32_t)jm->threads[tid].arena;
}

uint32_t jemalloc_inspect_tcache_count(const model_t *m, uint32_t tid,
                                       uint64_t usize) {
  const jemalloc_model_t *jm = as_je(m);
  if (jm == NULL || tid >= jm->threads_cap || jm->threads[tid].cbins == NULL)
    return 0;
  unsigned i = je_size2index(jm, usize);
  return i < jm->nhbins ? jm->threads[tid].cbins[i].n : 0;
}

void jemalloc_inspect_bin(const model_t *m, uint64_t usize, uint32_t *pages,
                          uint32_t *nregs, uint32_t *ncached_max) {
  const jemalloc_model_t *jm = as_je(m);
  *pages = *nregs = *ncached_max = 0;
  if (jm == NULL)
    return;
  unsigned i = je_size2index(jm, usize);
  if (i < jm->nbins) {
    *pages = (uint32_t)(jm->bin_slab_size[i] >> jm->lg_page);
    *nregs = jm->bin_nregs[i];
  }
  if (i < jm->nhbins)
    *ncached_max = jm->ncached_max[i];
}

bool jemalloc_inspect_bg(const model_t *m, uint32_t ind, uint64_t *wakeup_ns,
                         uint64_t *runs) {
  const jemalloc_model_t *jm = as_je(m);
  if (jm == NULL || !jm->background_thread || ind >= jm->max_bg_threads ||
      !jm->bg[ind].started)
    return false;
  *wakeup_ns = jm->bg[ind].indefinite ? UINT64_MAX : jm->bg[ind].wakeup_ns;
  *runs = jm->bg[ind].runs;
  return true;
}

/* Heap order of every slot against its parent. */
static bool heap_ok(const jemalloc_model_t *jm, const je_heap_t *h) {
  for (uint32_t i = 0; i < h->n; i++) {
    if (E(jm, h->a[i])->heap_pos != i)
      return false;
    if (i > 0 && je_snad_cmp(jm, h->a[(i - 1) / 2], h->a[i]) > 0)
      return false;
  }
  return true;
}

as_status_t jemalloc_check_invariants(const model_t *m, as_err_t *err) {
  const jemalloc_model_t *jm = as_je(m);
  if (jm == NULL)
    return as_err_set(err, AS_EINVAL, "not a jemalloc model");
  for (uint32_t i = 0; i < jm->narenas_total; i++) {
    const je_arena_t *a = jm->arenas[i];
    if (a == NULL)
      continue;
    uint64_t active = 0, pages[4] = {0}, count[4] = {0};
    for (uint32_t e = 1; e < jm->next_ext; e++) {
      const je_ext_t *x = E(jm, e);
      if (x->state > JE_RETAINED || x->arena != i)
        continue;
      if (x->state == JE_ACTIVE)
        active += x->size >> jm->lg_page;
      pages[x->state] += x->size >> jm->lg_page;
      count[x->state]++;
    }
    const je_eset_t *sets[3] = {&a->dirty, &a->muzzy, &a->retained};
    for (int s = 0; s < 3; s++) {
      uint64_t n = 0, lru_pages = 0;
      for (uint32_t e = sets[s]->lru_head; e != JE_NONE; e = E(jm, e)->lru_next)
        n++, lru_pages += E(jm, e)->size >> jm->lg_page;
      if (n != sets[s]->nextents || lru_pages != sets[s]->npages ||
          n != count[s + 1] || lru_pages != pages[s + 1])
        return as_err_set(err, AS_EINVAL,
                          "arena %u eset %d: %" PRIu64 " extents / %" PRIu64
                          " pages listed, counters %" PRIu64 " / %" PRIu64
                          ", records %" PRIu64 " / %" PRIu64,
                          i, s, n, lru_pages, sets[s]->nextents,
                          sets[s]->npages, count[s + 1], pages[s + 1]);
      for (unsigned b = 0; b <= jm->npsizes; b++)
        if (!heap_ok(jm, &sets[s]->bins[b]))
          return as_err_set(err, AS_EINVAL,
                            "arena %u eset %d bin %u: heap "
                            "out of order",
                            i, s, b);
    }
    if (active != a->nactive)
      return as_err_set(err, AS_EINVAL,
                        "arena %u: active extents hold %" PRIu64
                        " pages, nactive %" PRIu64,
                        i, active, a->nactive);
    for (unsigned b = 0; b < jm->nbins; b++)
      if (!heap_ok(jm, &a->bins[b].nonfull))
        return as_err_set(err, AS_EINVAL,
                          "arena %u bin %u: nonfull heap out "
                          "of order",
                          i, b);
  }
  return AS_OK;
}
