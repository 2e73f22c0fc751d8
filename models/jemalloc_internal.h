/* models/jemalloc_internal.h -- the jemalloc 5.3.0 model's state, shared by
 * its three files:
 *   jemalloc.c         options, size classes, threads, thread caches, bins,
 *                      slabs, large objects, the model interface
 *   jemalloc_extent.c  extents: ecaches (dirty / muzzy / retained), the
 *                      first-fit search, split, coalesce, retained growth,
 *                      purging, decay epochs and background threads
 *   jemalloc_base.c    base (metadata) allocation and the rtree leaves
 * Nothing outside these files includes it but tests/unit/test_jemalloc.c,
 * which checks the geometry and tables; other code uses models/jemalloc.h.
 *
 * Citations are to jemalloc tag 5.3.0 (github:jemalloc/jemalloc), the
 * version Debian 12 ships as libjemalloc2 5.3.0-1, whose build options
 * (cache_oblivious, retain, 48-bit virtual addresses, LG_PAGE 12) the model
 * assumes; docs/models/jemalloc.md has the rules and what is left out.
 */
#ifndef ALLOCSIM_JEMALLOC_INTERNAL_H
#define ALLOCSIM_JEMALLOC_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "../sim/event_queue.h"
#include "../sim/idtable.h"
#include "../sim/kernel.h"
#include "jemalloc.h"
#include "nptl_stacks.h"

/* ---- Constants ----------------------------------------------------------- */

#define JE_LG_QUANTUM  4   /* include/jemalloc/internal/quantum.h: x86-64 */
#define JE_LG_TINY_MIN 3   /* include/jemalloc/internal/sc.h:183 */
#define JE_LG_NGROUP   2   /* sc.h:196 SC_LG_NGROUP */
#define JE_LG_HUGEPAGE 21  /* configure: 2 MiB on x86-64 */
#define JE_LG_VADDR    48  /* Debian's build (configure --with-lg-vaddr) */
#define JE_MAX_SIZES   256 /* 232 size classes with 4 KiB pages (sc.h) */
#define JE_MAX_BINS    64  /* 36 bins with 4 KiB pages */
#define JE_MAX_PSIZES  256 /* 199 page-size classes with 4 KiB pages */
#define JE_NSTEPS      200 /* smoothstep.h:27 SMOOTHSTEP_NSTEPS */
#define JE_BFP         24  /* smoothstep.h:28 SMOOTHSTEP_BFP */
#define JE_NONE        0u  /* extent id 0: no extent */
#define JE_NO_POS      UINT32_MAX
/* arena_types.h:10 ARENA_DECAY_NTICKS_PER_UPDATE */
#define JE_DECAY_NTICKS 1000
/* arena_externs.h:15 ARENA_DEFERRED_PURGE_NPAGES_THRESHOLD */
#define JE_DEFERRED_PURGE_NPAGES 1024
/* background_thread.c:117 BACKGROUND_THREAD_MIN_INTERVAL_NS */
#define JE_BG_MIN_INTERVAL_NS UINT64_C(100000000)
#define JE_UNBOUNDED          UINT64_MAX /* decay.h:6 DECAY_UNBOUNDED_TIME_TO_PURGE */
/* tcache.c:37 opt_tcache_gc_incr_bytes; peak_event.c:15 PEAK_EVENT_WAIT is
 * the same, so both thread events fire on the same allocation. */
#define JE_GC_INCR_BYTES UINT64_C(65536)
/* Sizes of jemalloc's own structures in Debian's build (measured with
 * sizeof on the tag configured as Debian's: --enable-prof
 * --with-lg-vaddr=48; the statistics of that build equal the .so's). */
#define JE_SIZEOF_ARENA 78952 /* arena_t */
#define JE_SIZEOF_BIN   224   /* bin_t, one shard per class */
/* edata_t (5.2.1: extent_t) is 64 bytes of fields, then a union the slab's
 * region bitmap fills: 128 bytes with 4 KiB pages, 1,112 with 64 KiB
 * (5.3.0 include/jemalloc/internal/edata.h:92-251, slab_data.h:9; 5.2.1
 * extent_structs.h:20-183).  struct_sizes_init computes it per page size
 * (bitmap_groups_max). */
#define JE_EDATA_HEAD      64
#define JE_EDATA_ALIGNMENT 128  /* 5.3.0 edata.h:20 */
#define JE_SIZEOF_BASE     3912 /* base_t */
#define JE_SIZEOF_BLOCK    144  /* base_block_t */
#define JE_SIZEOF_BG_INFO  208  /* background_thread_info_t */
/* decay_t: pac_t holds decay_dirty, then decay_muzzy (5.3.0 pac.h:114-115;
 * 5.2.1's arena_t holds two arena_decay_t the same way, arena_structs_b.h:
 * 174-175), so a muzzy decay's jitter seed is the dirty one's plus this.
 * The same in both: scripts/measure/jemalloc/je_decay_seeds.c finds arena
 * 0's muzzy decay 1,784 bytes past its dirty one in Debian's 5.3.0 and in
 * a build of tag 5.2.1 (MALLOC_CONF=muzzy_decay_ms:10000), whose debug
 * information gives sizeof (arena_decay_t) = 1784. */
#define JE_SIZEOF_DECAY 1784
#define JE_CACHELINE    64
/* The parts of arena_t that arena_new (arena.c:1599-1708) leaves as
 * base_alloc gave them, demand-zero: stats.lstats, the per-large-class
 * counters ("Memory is zeroed, so there is no need to clear stats",
 * arena_stats.h:88-100), written by a large allocation or free of that
 * class (arena.c:291-321, arena_stats.h:103-112); and pa_shard.hpa_sec and
 * .hpa_shard, set up only when opt_hpa is on (arena.c:1679-1687; off by
 * default).  Offsets from gdb's ptype /o of the same build: stats at 24,
 * lstats at 24 + 952, 196 entries of 48 bytes; pa_shard at 10648,
 * hpa_sec at 10648 + 62264, edata_cache (after hpa_shard) at
 * 10648 + 68096.  Measured on Debian's library (mincore after
 * mallctl("arenas.create")): of a new arena's 23 base pages, the two
 * wholly inside these ranges stay non-resident. */
#define JE_ARENA_LSTATS_OFF   976
#define JE_ARENA_LSTATS_ELEM  48
#define JE_ARENA_LSTATS_BYTES (196 * JE_ARENA_LSTATS_ELEM)
#define JE_ARENA_HPA_OFF      72912
#define JE_ARENA_HPA_END      78744
/* What libjemalloc.so.2 adds to every thread's static TLS (its tsd, a
 * 2632-byte PT_TLS segment): _dl_get_tls_static_info gives 6848 bytes
 * with it preloaded, 4224 without (measured, Debian 5.3.0-1). */
#define JE_TLS_STATIC_BYTES 2624
/* How far below stacktop a thread's first allocation writes the stack:
 * tsd_fetch_slow -> tsd_data_init -> tsd_tcache_data_init and
 * arena_choose_hard (tsd.c:278-325, tcache.c:709-752, jemalloc.c:503-614).
 * Measured on Debian's library with LD_BIND_NOW=1 (no lazy binding), a
 * canary below the caller of malloc(1024) called from the start routine:
 * 2984 bytes below stacktop whether the thread creates its arena or
 * shares one (the caller's frames: 305 bytes).  With the TLS above, this
 * reaches the third page below the stack's top, which a thread calling
 * glibc's malloc (1704 bytes) does not. */
#define JE_FIRST_CALL_STACK_BYTES 2984

/* The releases modelled (the version option).  Citations without a tag
 * are to 5.3.0; the 5.2.1 rules cite tag 5.2.1, the release Ubuntu 22.04
 * ships as libjemalloc2. */
typedef enum je_version_e {
  JE_V530, /* the default */
  JE_V521
} je_version_t;

/* 5.2.1: the tcache GC runs every TCACHE_GC_INCR + 1 tcache events
 * (tcache_types.h:44-48: 8192 / SC_NBINS + 1 = 228; ticker.h ticker_ticks
 * fires when the count goes below 0). */
#define JE_521_GC_INCR 228
/* jemalloc 5.2.1 include/jemalloc/internal/arena_types.h:10
 * DECAY_NTICKS_PER_UPDATE: a plain countdown per thread and arena. */
#define JE_521_DECAY_NTICKS 1000
/* Sizes in the 5.2.1 build configured as the 5.3.0 one (sizeof, compiled
 * against the configured tag): arena_t, bin_t, base_t; the large-class
 * counters at offset 768 of arena_t (stats at 24), 196 x 48 bytes, left
 * zero by arena_new as in 5.3.0 (5.2.1 arena_stats.h:143 "Memory is
 * zeroed"); no HPA shard. */
#define JE_521_SIZEOF_ARENA 29496
#define JE_521_SIZEOF_BIN   280
#define JE_521_SIZEOF_BASE  2040
#define JE_521_LSTATS_OFF   768
#define JE_521_SIZEOF_TDATA 8 /* arena_tdata_t: one ticker_t */
/* The 5.2.1 library's addition to static TLS, measured as JE_TLS_STATIC_
 * BYTES was: _dl_get_tls_static_info gives 10432 bytes with the 5.2.1 build
 * preloaded, 4224 without (its PT_TLS segment: 6216 bytes). */
#define JE_521_TLS_STATIC_BYTES 6208

typedef enum je_state_e {
  JE_ACTIVE,
  JE_DIRTY,
  JE_MUZZY,
  JE_RETAINED /* edata.h extent_state_t */
} je_state_t;

/* ---- Records ------------------------------------------------------------- */

/* An extent (edata_t): a run of pages in one arena.  Active extents are
 * slabs or large objects; inactive ones sit in one of the arena's ecaches. */
typedef struct je_ext_s je_ext_t;
struct je_ext_s {
  uint64_t addr;     /* base, page aligned */
  uint64_t size;     /* bytes, a multiple of the page */
  uint64_t sn;       /* serial number: its mapping's age (extent.c:50) */
  uint32_t heap_pos; /* slot in an eset bin heap or a bin's nonfull heap */
  uint32_t lru_prev, lru_next; /* the eset's LRU list */
  uint32_t slab;               /* slab: its bitmap's first word, 0 = none */
  uint32_t offset;             /* large: the object's cache-oblivious offset */
  uint32_t next_free;          /* pool free list */
  uint16_t arena;
  uint16_t nfree;   /* slab: free regions */
  uint8_t  state;   /* je_state_t */
  uint8_t  binind;  /* slab: size class */
  uint8_t  is_head; /* first extent of a mapping (EXTENT_IS_HEAD) */
  uint8_t  zeroed;  /* known zero (fresh mmap, or purged) */
  uint8_t  szind;   /* large: size class of the object */
  uint8_t  rt_slab; /* 5.2.1: the slab bit its rtree entries hold at its
                       first (JE_RT_FIRST) and last (JE_RT_LAST) page */
};
#define JE_RT_FIRST 1
#define JE_RT_LAST  2

/* A min-heap of extent ids ordered by (sn, addr) (edata_snad_comp,
 * include/jemalloc/internal/edata.h:663-680); each extent keeps its slot. */
typedef struct je_heap_s je_heap_t;
struct je_heap_s {
  uint32_t *a;
  uint32_t  n, cap;
};

/* eset_t (src/eset.c): extents of one state by page-size class, plus the
 * LRU order eviction follows. */
typedef struct je_eset_s je_eset_t;
struct je_eset_s {
  je_heap_t *bins;     /* npsizes + 1 heaps */
  uint64_t  *nonempty; /* bit per bin (fb_* in eset.c) */
  uint32_t   lru_head, lru_tail;
  uint64_t   npages;
  uint64_t   nextents;
  uint8_t    state;
  bool       delay_coalesce; /* dirty only (pac.c:49-50) */
};

/* decay_t (include/jemalloc/internal/decay.h, src/decay.c). */
typedef struct je_decay_s je_decay_t;
struct je_decay_s {
  int64_t  ms;          /* -1 never, 0 at once, > 0 smoothly */
  uint64_t interval_ns; /* ms * 1e6 / 200 */
  uint64_t epoch_ns;
  uint64_t deadline_ns;
  uint64_t jitter_state;
  uint64_t nunpurged;
  uint64_t npages_limit;
  uint64_t backlog[JE_NSTEPS];
  bool     advanced; /* an epoch advanced since the (re)init: the jitter
                        drawn from the seed is spent */
  /* Statistics (pac_decay_stats_t). */
  uint64_t npurge, nmadvise, purged;
};

/* Base allocator (src/base.c): bump allocation in blocks of 2 MiB and up.
 * A block's unused tail is a free extent in avail[] (edata_heap by size
 * class); few exist at a time, so a short list stands for the heaps. */
typedef struct je_base_free_s je_base_free_t;
struct je_base_free_s {
  uint64_t addr, size, sn;
};

typedef struct je_base_s je_base_t;
struct je_base_s {
  je_base_free_t *avail;
  uint32_t        navail, avail_cap;
  je_base_free_t *blocks; /* every block mapped, for the heap map */
  uint32_t        nblocks, blocks_cap;
  uint32_t        pind_last; /* psz index of the last block */
  uint64_t        sn_next;
  uint64_t        allocated, resident, mapped; /* base_stats_get */
  uint64_t        edata_avail; /* edata_cache: recycled edata_t's */
};

/* bin_t (include/jemalloc/internal/bin.h). */
typedef struct je_bin_s je_bin_t;
struct je_bin_s {
  uint32_t  slabcur;
  je_heap_t nonfull;
};

/* arena_t, reduced to what decides placement and residency. */
typedef struct je_arena_s je_arena_t;
struct je_arena_s {
  uint32_t   ind;
  uint32_t   nthreads[2]; /* application, internal (arena.c:1584-1597) */
  je_bin_t  *bins;        /* nbins */
  je_eset_t  dirty, muzzy, retained;
  uint32_t   exp_next, exp_limit; /* exp_grow_t (exp_grow.h) */
  uint64_t   sn_next;
  je_decay_t decay_dirty, decay_muzzy;
  uint64_t   jitter_seed; /* decay_dirty's address, which seeds its jitter
                             (decay_muzzy's lies JE_SIZEOF_DECAY past it) */
  uint64_t nactive;       /* pages (pa_shard_t nactive) */
  uint64_t pac_mapped;    /* bytes (pac_stats_t pac_mapped) */
  uint64_t internal;      /* bytes of internal allocations (tcache stacks) */
  uint64_t lstats_addr;   /* the arena_t's stats.lstats[0] */
  uint32_t lstats_cold;   /* the first lstats entry on a page arena_new
                             leaves unwritten */
  je_base_t base;
};

/* One cache bin: a stack of cached regions, oldest at [0], newest at
 * [n - 1] (cache_bin.h's stack grows down; this is its mirror image). */
typedef struct je_cbin_s je_cbin_t;
struct je_cbin_s {
  uint64_t *slot; /* ncached_max entries: (extent id << 16) | region */
  uint16_t  n, low_water, max;
  uint8_t   lg_fill_div;
  bool      refilled;
  uint16_t  deepest; /* slots ever written: the stack pages touched */
};

/* A live object of the trace: where its region or large extent is. */
typedef struct je_obj_s je_obj_t;
struct je_obj_s {
  uint32_t ext;   /* JE_NONE: not live here */
  uint16_t reg;   /* region index in a slab */
  uint8_t  szind; /* size class */
  uint8_t  pad;   /* JE_OBJ_ZERO: freed by realloc(p, 0), id still live */
};
#define JE_OBJ_ZERO 1

/* tsd_state_t (include/jemalloc/internal/tsd.h:200-215), reduced. */
typedef enum je_tsd_state_e {
  JE_TSD_UNINIT,  /* never called jemalloc */
  JE_TSD_MINIMAL, /* only freed: no thread cache, no arena */
  JE_TSD_NOMINAL  /* fully initialised */
} je_tsd_state_t;

typedef struct je_thread_s je_thread_t;
struct je_thread_s {
  uint8_t    tsd; /* je_tsd_state_t */
  bool       exited;
  bool       bound; /* arena chosen (arena_choose_hard) */
  uint32_t   arena, iarena;
  je_cbin_t *cbins;        /* nhbins, NULL until the tcache exists */
  je_obj_t   tcache_stack; /* the stack's allocation in arena 0: a large
                              extent, or a small region (big pages) */
  uint32_t next_gc_bin;
  uint64_t alloc_bytes, alloc_last; /* thread_allocated, last event */
  uint64_t dalloc_bytes, dalloc_last;
  uint64_t prng; /* tsd prng_state (tsd.c:222-232) */
  uint64_t seed; /* the thread's tsd address as the run recorded it
                    (option seed.prng.T), 0: unknown */
  int32_t tick;  /* tsd arena_decay_ticker (ticker_geom_t) */
  /* 5.2.1 only: the tcache's gc_ticker, and arenas_tdata -- one decay
   * countdown per arena, in a0malloc'ed memory (tdata, a small internal
   * region of arena 0) -- which tdata_bypass forbids (a thread that was
   * minimal, or is exiting). */
  int32_t      gc_tick;
  int32_t     *dtick;
  uint32_t     ndtick;
  bool         tdata_bypass;
  nptl_stack_t stack;
  je_obj_t     tdata; /* 5.2.1: where arenas_tdata is; ext JE_NONE if none */
};

/* background_thread_info_t (background_thread_structs.h), one per thread
 * index; sleeping is an engine timer. */
typedef struct je_bg_s je_bg_t;
struct je_bg_s {
  sim_timer_t              timer;
  struct jemalloc_model_s *jm;
  uint32_t                 ind;
  bool                     started;
  bool                     indefinite; /* BACKGROUND_THREAD_INDEFINITE_SLEEP */
  uint64_t                 wakeup_ns;  /* next_wakeup when not indefinite */
  uint64_t                 wakeup_clock_ns; /* the same, on je_clock_ns */
  uint64_t                 npages_to_purge_new;
  uint64_t                 runs; /* tot_n_runs */
};

/* emap: page number -> extent id (JE_NONE = 0: none) for the first and
 * last page of every registered extent (what emap_register_boundary
 * writes into the rtree), in a radix tree over page numbers as jemalloc's
 * own rtree is (5.3.0 include/jemalloc/internal/rtree.h:116-122, its
 * levels; the model's simulated copy is jemalloc_base.c's): a top array,
 * then middle nodes and leaves of 2^12 entries each, made when first
 * written and kept until the model goes.  (A hash table grew by copying,
 * old and new resident at once.) */
#define JE_EMAP_LEAF_BITS 12
#define JE_EMAP_MID_BITS  12
typedef struct je_emap_mid_s je_emap_mid_t;
struct je_emap_mid_s {
  uint32_t *leaf[1u << JE_EMAP_MID_BITS];
};
typedef struct je_emap_s je_emap_t;
struct je_emap_s {
  je_emap_mid_t **top;  /* ntop entries, NULL until the first write */
  uint64_t        ntop; /* page numbers >> (leaf + mid bits) */
};

typedef struct jemalloc_model_s jemalloc_model_t;
struct jemalloc_model_s {
  model_t            base; /* must be first */
  sim_kernel_t      *kernel;
  sim_event_queue_t *timers;
  as_status_t        fail; /* first failure inside a timer, or AS_OK */
  as_err_t           ferr;

  /* Options. */
  je_version_t version;
  bool         booting;      /* malloc_init_hard is running */
  bool         split_done;   /* the last extent allocation split one */
  uint32_t     narenas_auto; /* opt.narenas or 4 * ncpus */
  int64_t      dirty_decay_ms, muzzy_decay_ms;
  bool         background_thread;
  uint32_t     max_bg_threads;
  bool         retain;
  uint64_t     oversize_threshold; /* 0: no huge arena */
  bool         tcache_enabled;
  uint64_t     tcache_maxclass;
  uint64_t     prng_seed, jitter_seed;
  uint64_t    *arena_jitter; /* narenas_total: arena a's decay_dirty
                                address as the run recorded it (option
                                seed.jitter.A), 0: unknown; NULL: none */
  uint64_t clock_res_ns, clock_lag_ns, clock_init_ns; /* je_clock_ns */
  bool     clock_started; /* an event has set now_ns */

  /* Geometry. */
  uint64_t page; /* jemalloc's PAGE (1 << lg_page) */
  unsigned lg_page;
  uint64_t os_page;   /* the simulated kernel's page */
  uint64_t large_pad; /* sz_large_pad: PAGE (cache_oblivious) */
  unsigned nsizes, nbins, npsizes, nhbins;
  unsigned ntiny; /* classes below the quantum (sc.h SC_NTINY) */
  uint64_t index2size[JE_MAX_SIZES];
  uint64_t pind2sz[JE_MAX_PSIZES + 1];
  uint64_t small_maxclass, large_minclass, large_maxclass, lookup_maxclass;
  uint8_t  lookup[4096 / 8 + 1]; /* size2index for <= lookup_maxclass */
  uint32_t bin_nregs[JE_MAX_BINS];
  uint64_t bin_slab_size[JE_MAX_BINS];
  uint16_t ncached_max[JE_MAX_SIZES]; /* per tcache bin (< nhbins) */
  uint64_t tcache_stack_bytes;        /* cache_bin_info_compute_alloc */
  uint64_t tcache_stack_align;        /* its allocation's alignment */
  /* Structure sizes of the version modelled (JE_SIZEOF_*, JE_521_*). */
  uint64_t sizeof_arena, sizeof_bin, sizeof_base, edata_align;
  uint64_t sizeof_edata;
  uint64_t lstats_off, hpa_off, hpa_end; /* arena_t parts left unwritten */
  uint64_t h_steps[JE_NSTEPS];           /* smoothstep.h */
  uint8_t  ticker_table[64];             /* ticker.c:23-32 */

  /* State. */
  je_arena_t  **arenas; /* narenas_total slots, NULL until created */
  uint32_t      narenas_total, huge_ind;
  bool          huge_enabled;
  je_thread_t  *threads;
  size_t        threads_cap;
  sim_idtable_t ext_tab; /* extent pool, [0] unused; never moved */
  je_ext_t     *ext;     /* ext_tab's base */
  uint32_t      next_ext, ext_free;
  sim_idtable_t slab_tab;  /* slab bitmaps, word [0] unused; never moved */
  uint64_t     *slab_bits; /* slab_tab's base: a slab's row, one bit a region,
                              starts at word x->slab */
  uint32_t  next_slab;     /* the next word never used */
  uint32_t  slab_free[JE_MAX_BINS]; /* freed rows by bin, via word 0 */
  je_emap_t emap;
  uint8_t  *objs;            /* by object id: obj_tab's base, entries of
                                obj_bytes (obj_get in jemalloc.c) */
  sim_idtable_t obj_tab;     /* in je_obj_t units */
  uint64_t      obj_len;     /* ids usable at obj_bytes */
  uint32_t      obj_bytes;   /* 4, or sizeof(je_obj_t) once widened */
  uint32_t      reg_bits;    /* a 4-byte entry's region field */
  uint32_t      narrow_exts; /* extent numbers a 4-byte entry holds */
  je_bg_t      *bg;          /* max_bg_threads, when background_thread */
  uint64_t      nrecords;    /* extent records alive */
  sim_addr_t   *leaf_addr;   /* rtree leaves by key (1 GiB of VA each) */
  uint64_t     *leaf_key;
  uint32_t      nleaves, leaves_cap;
  uint64_t      live_bytes, live_objects;
  uint64_t      now_ns; /* time of the event being served */
  nptl_stacks_t nptl;
};

/* ---- jemalloc.c ---------------------------------------------------------- */

/* sz_size2index / sz_index2size / sz_psz2ind (include/.../sz.h). */
unsigned je_size2index(const jemalloc_model_t *jm, uint64_t size);
unsigned je_psz2ind(const jemalloc_model_t *jm, uint64_t psz);
/* Creates arena ind (arena_new, arena.c:1599-1709). */
as_status_t je_arena_create(jemalloc_model_t *jm, uint32_t ind, as_err_t *err);
/* Records an inconsistency as the model's failure. */
as_status_t je_bug(jemalloc_model_t *jm, as_err_t *err, const char *what);

/* ---- jemalloc_extent.c --------------------------------------------------- */

as_status_t je_eset_init(jemalloc_model_t *jm, je_eset_t *s, je_state_t st,
                         bool delay_coalesce, as_err_t *err);
void        je_eset_fini(jemalloc_model_t *jm, je_eset_t *s);
void        je_heap_fini(je_heap_t *h);
as_status_t je_heap_insert(jemalloc_model_t *jm, je_heap_t *h, uint32_t e,
                           as_err_t *err);
void        je_heap_remove(jemalloc_model_t *jm, je_heap_t *h, uint32_t e);
uint32_t    je_heap_first(const je_heap_t *h);
int         je_snad_cmp(const jemalloc_model_t *jm, uint32_t a, uint32_t b);
void        je_decay_init(jemalloc_model_t *jm, je_decay_t *d, int64_t ms,
                          uint64_t now_ns, uint64_t jitter_seed);
/* The jitter seed of arena a's dirty or muzzy decay: its decay_t's
 * address (decay_reinit, decay.c:40). */
static inline uint64_t je_decay_seed(const je_arena_t *a, bool dirty) {
  return a->jitter_seed + (dirty ? 0 : JE_SIZEOF_DECAY);
}
/* Seeds arena a's decays anew, as if a had been made with seed, where
 * that is still possible: each decay whose first deadline is not yet
 * spent draws it again (a seed recorded just after the arena was made). */
void     je_decay_reseed(je_arena_t *a, uint64_t seed);
uint64_t je_clock_ns(const jemalloc_model_t *jm);

/* pa_alloc (pa.c:122-154): an active extent of size bytes (a multiple of
 * the page), or AS_ENOMEM. */
as_status_t je_pa_alloc(jemalloc_model_t *jm, je_arena_t *a, uint64_t size,
                        uint64_t alignment, bool slab, bool zero, uint32_t *out,
                        as_err_t *err);
/* pa_dalloc (pa.c:206-221) followed by arena_handle_deferred_work
 * (arena.c:216-224). */
as_status_t je_pa_dalloc(jemalloc_model_t *jm, je_arena_t *a, uint32_t e,
                         as_err_t *err);
/* In-place large resize (pac_expand_impl / pac_shrink_impl); *done false
 * when it could not. */
as_status_t je_pa_expand(jemalloc_model_t *jm, je_arena_t *a, uint32_t e,
                         uint64_t new_size, bool zero, bool *done,
                         as_err_t *err);
as_status_t je_pa_shrink(jemalloc_model_t *jm, je_arena_t *a, uint32_t e,
                         uint64_t new_size, bool *done, as_err_t *err);
/* arena_decay (arena.c:476-490). */
as_status_t je_arena_decay(jemalloc_model_t *jm, je_arena_t *a, bool is_bg,
                           bool all, as_err_t *err);
/* arena_decay_ticks (arena_inlines_b.h:118-138). */
as_status_t je_decay_ticks(jemalloc_model_t *jm, je_thread_t *th, je_arena_t *a,
                           unsigned nticks, as_err_t *err);
/* Background threads (background_thread.c). */
as_status_t je_bg_create(jemalloc_model_t *jm, uint32_t arena_ind,
                         as_err_t *err);
void        je_bg_init(jemalloc_model_t *jm, je_bg_t *bg, uint32_t ind);
/* arena_background_thread_inactivity_check (arena.c:200-214). */
as_status_t je_bg_inactivity_check(jemalloc_model_t *jm, je_arena_t *a);
/* Changes an arena's decay time (pac_decay_ms_set, pac.c:520-547). */
as_status_t je_decay_ms_set(jemalloc_model_t *jm, je_arena_t *a, bool dirty,
                            int64_t ms, as_err_t *err);
uint64_t    je_prng_lg_range(uint64_t *state, unsigned lg_range);

/* ---- jemalloc_base.c ----------------------------------------------------- */

/* Frees the emap's nodes (models/jemalloc_extent.c). */
void je_emap_free(je_emap_t *m);

/* base_alloc (base.c:435-480) in arena a's base, touching the structure's
 * pages (every structure jemalloc allocates there is written at creation). */
as_status_t je_base_alloc(jemalloc_model_t *jm, je_base_t *b, uint32_t ind,
                          uint64_t size, uint64_t alignment, bool touch,
                          sim_addr_t *out, as_err_t *err);
void        je_base_fini(je_base_t *b);
/* edata_cache_get / _put (edata_cache.c:22-42). */
as_status_t je_edata_get(jemalloc_model_t *jm, je_arena_t *a, as_err_t *err);
/* Rewrites the object table to whole je_obj_t entries (jemalloc.c); false
 * when out of memory.  ext_new calls it before an extent number that a
 * 4-byte entry cannot hold. */
bool je_widen_objs(jemalloc_model_t *jm);
void je_edata_put(je_arena_t *a);
/* The rtree leaf entries for [addr, addr + size) are written (emap
 * registration): the leaf's pages holding them become resident. */
as_status_t je_rtree_write(jemalloc_model_t *jm, uint64_t addr, uint64_t npages,
                           as_err_t *err);

#endif
