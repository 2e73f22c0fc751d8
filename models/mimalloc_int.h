/* models/mimalloc_int.h -- the mimalloc model's internal types, shared by
 * mimalloc.c (interface, options, threads), mimalloc_page.c (pages, queues,
 * free lists), mimalloc_seg.c (2.x segments, purge, segment cache, 2.1
 * arenas) and mimalloc_arena3.c (3.x arenas).  Not for other files: a
 * composition uses models/mimalloc.h.
 *
 * Representation.  Records live in growable pools and are named by 32-bit
 * indexes, 0 meaning "none": pages (mpage_t), 2.x segments (mseg_t), heaps
 * (mheap_t), thread-local data (mtld_t).  A page keeps its free blocks as
 * block indexes in one array of `reserved` uint16_t: the `free` list is a
 * stack at the bottom (head = top, at free_n - 1), `local_free` a stack at
 * the top (head at index cap - local_n), so mimalloc's list order -- which
 * block malloc returns next, hence which OS pages get written -- is kept
 * exactly; blocks freed by other threads wait in a separate stack.  A 2.x
 * segment keeps mimalloc's slice entries (slice_count, slice_offset,
 * block-size state) and the same writes to them, so span coalescing and the
 * first-fit span search see exactly what mimalloc sees, and the OS pages of
 * the segment header those writes land on become resident in the same
 * order.
 */
#ifndef ALLOCSIM_MIMALLOC_INT_H
#define ALLOCSIM_MIMALLOC_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "../sim/idtable.h"
#include "mimalloc.h"
#include "nptl_stacks.h"

/* ---- Versions and their geometry --------------------------------------- */

typedef enum mi_version_e {
  MV_205, /* v2.0.5, Ubuntu 22.04 libmimalloc2.0 2.0.5+ds-2 */
  MV_209, /* v2.0.9, Debian 12 libmimalloc2.0 2.0.9+ds-2 */
  MV_212, /* v2.1.2, vendored in CPython 3.13/3.14 */
  MV_217, /* v2.1.7 */
  MV_301, /* v3.0.1 */
  MV_343, /* v3.4.3 */
  MV_COUNT
} mi_version_t;

#define MI_IS_V3(v)  ((v) >= MV_301)
#define MI_IS_V20(v) ((v) <= MV_209) /* 2.0.x: segment cache, "decommit" */
#define MI_IS_V21(v) ((v) == MV_212 || (v) == MV_217)

#define MI_KIB UINT64_C(1024)
#define MI_MIB (MI_KIB * MI_KIB)
#define MI_GIB (MI_MIB * MI_KIB)

/* v2 geometry: 209 include/mimalloc-types.h:142-171; 212
 * include/mimalloc/types.h:160-185 (same values).  2.0.5's segments are
 * twice as large (v2.0.5 include/mimalloc-types.h:135, 64 MiB of 1024
 * slices): what depends on the segment size is in mi_geom_t, and the
 * arrays below hold the larger. */
#define MI_SLICE_SHIFT    16 /* 64 KiB slices (:142) */
#define MI_SLICE_SIZE     (UINT64_C(1) << MI_SLICE_SHIFT)
#define MI_SEGMENT_SHIFT  25 /* 32 MiB (:145) */
#define MI_SEGMENT_SIZE   (UINT64_C(1) << MI_SEGMENT_SHIFT)
#define MI_SLICES_PER_SEG 512 /* (:159) */
/* 2.0.5's 64 MiB segments (v2.0.5 include/mimalloc-types.h:135) */
#define MI_SLICES_MAX      1024
#define MI_MEDIUM_PAGE     (8 * MI_SLICE_SIZE)   /* 512 KiB (:151) */
#define MI_SMALL_OBJ_MAX   (MI_SLICE_SIZE / 4)   /* 16 KiB (:164) */
#define MI_MEDIUM_OBJ_MAX  (MI_MEDIUM_PAGE / 4)  /* 128 KiB (:165) */
#define MI_LARGE_OBJ_MAX   (MI_SEGMENT_SIZE / 2) /* 16 MiB (:167) */
#define MI_BIN_HUGE        73                    /* (:171) */
#define MI_BIN_FULL        (MI_BIN_HUGE + 1)
#define MI_BINS            (MI_BIN_FULL + 1)
#define MI_SEGMENT_BIN_MAX 35 /* 209 types.h:578 */
/* Back offsets kept for a page's first slices: MI_ALIGNMENT_MAX (segment/2,
 * 209 types.h:187) / slice - 1 = 255 (:178; its comment "15" is stale;
 * 212 types.h:196, 217 :213). */
#define MI_MAX_SLICE_OFFSET 255
#define MI_COMMIT_WORDS     (MI_SLICES_MAX / 64) /* commit mask words */

/* What changes between versions, filled by mi_geometry(). */
typedef struct mi_geom_s mi_geom_t;
struct mi_geom_s {
  /* v2 segments */
  uint32_t page_struct;   /* sizeof(mi_page_t): the slice entry */
  uint32_t off_bsize;     /* offsetof xblock_size (209/212) / block_size */
  uint32_t len_bsize;     /* its size: 4 / 8 (217) */
  uint32_t off_links;     /* offsetof next; prev follows (16 bytes) */
  uint32_t slices_offset; /* offsetof(mi_segment_t, slices) */
  uint32_t zero_prefix;   /* offsetof(mi_segment_t, next): memset start */
  uint64_t min_commit;    /* MI_MINIMAL_COMMIT_SIZE */
  uint32_t info_slices;   /* segment info slices */
  uint32_t seg_slices;    /* MI_SLICES_PER_SEGMENT */
  uint32_t max_slice_off; /* MI_MAX_SLICE_OFFSET */
  uint64_t large_obj_max; /* MI_LARGE_OBJ_SIZE_MAX: huge segments above */
  uint32_t small_start;   /* 2.0.x: first block's offset, 8..1024 B blocks */
  uint32_t cache_slot;    /* 2.0.x: sizeof(mi_cache_slot_t) */
  /* a build with MI_DEBUG=2, as Ubuntu's 2.0.5 (mimalloc.c, mi_geometry):
   * blocks padded, filled on malloc and free, decommit by mprotect */
  bool debug;
  /* pages */
  uint32_t retire_cycles;   /* MI_RETIRE_CYCLES */
  bool     retire_plus1;    /* retire_expire = 1 + cycles (209, 212) */
  bool     retire_any_size; /* 217+: no MI_MAX_RETIRE_SIZE test */
  uint32_t min_extend;      /* MI_MIN_EXTEND */
  /* v3 pages */
  uint32_t page_info;  /* mi_page_info_size() */
  bool     meta_apart; /* an arena page's info in the arena's info slices */
  uint64_t small_max;  /* MI_SMALL_MAX_OBJ_SIZE (v3) */
  uint64_t medium_max; /* MI_MEDIUM_MAX_OBJ_SIZE (v3) */
  uint64_t large_max;  /* MI_LARGE_MAX_OBJ_SIZE (v3): huge queue above */
};

/* ---- Pages ------------------------------------------------------------- */

/* Cross-thread free state of a page (209 include/mimalloc-types.h:208-213). */
enum {
  MI_USE_DELAYED_FREE = 0,
  MI_DELAYED_FREEING = 1,
  MI_NO_DELAYED_FREE = 2,
  MI_NEVER_DELAYED_FREE = 3
};

typedef struct mpage_s mpage_t;
struct mpage_s {
  sim_addr_t start;       /* first block (mi_page_start) */
  sim_addr_t slice_start; /* the page's first slice */
  uint64_t   block_size;  /* bin size, or the page area for huge pages */
  uint64_t   user;        /* one word for a composition (mimalloc.h) */
  sim_addr_t origin;      /* 343: the theap it was abandoned from (address) */
  uint32_t   seg;         /* 2.x: segment; 3.x: arena */
  uint32_t   heap;        /* owning heap, 0 = none (abandoned) */
  uint32_t   next, prev;  /* page queue links */
  uint32_t   slice_index; /* in its segment (2.x) or arena (3.x) */
  uint32_t   slice_count;
  uint32_t   reserved; /* blocks that fit */
  uint32_t   capacity; /* blocks initialised (free list extended) */
  uint32_t   used;     /* blocks in use, thread-free ones included */
  uint32_t   free_n;   /* `free` stack: blocks[0 .. free_n) */
  uint32_t   local_n;  /* `local_free`: blocks[reserved - local_n ..) */
  uint32_t   tfree_n, tfree_cap; /* thread_free stack */
  /* reserved entries, or NULL while the page has had no local free: its
   * free stack is then the run mi_page_extend_free made, entry i being
   * run_hi - i (2 bytes per block of every page was a sixth of the
   * simulator's memory on a heap of small objects, most of it full
   * pages' empty lists) */
  uint16_t *blocks;
  uint32_t  run_hi;
  uint16_t *tfree; /* thread_free, head at tfree_n - 1 */
  uint8_t   bin;
  uint8_t   tag; /* heap tag (CPython, 217 heap_tag) */
  uint8_t   retire_expire;
  uint8_t   delayed; /* MI_*_DELAYED_FREE */
  bool      in_full;
  bool      is_huge;          /* 2.x huge segment page / 3.x singleton */
  bool      abandoned_mapped; /* 3.x: in the arena's abandoned bitmap */
  bool      zero_init;        /* memory was zero when the page was made */
  bool      free_is_zero;     /* the free list holds zeroed blocks only */
  bool      live;             /* record in use */
  uint32_t  slice_committed;  /* 3.x commit-on-demand bytes, 0 = all */
};

/* ---- Heaps and threads ------------------------------------------------- */

typedef struct mqueue_s mqueue_t;
struct mqueue_s {
  uint32_t first, last;
  uint64_t block_size;
};

typedef struct mdelayed_s mdelayed_t; /* one block on a heap's delayed list */
struct mdelayed_s {
  uint32_t page;
  uint32_t block;
};

typedef struct mheap_s mheap_t;
struct mheap_s {
  mqueue_t pages[MI_BINS];
  uint32_t tld;         /* its thread's tld */
  uint32_t next_in_tld; /* heaps of one thread */
  uint32_t retired_min, retired_max;
  uint32_t page_count;
  uint8_t  tag;
  bool     live;
  bool     no_reclaim;
  /* thread_delayed_free (209 alloc.c:421-440): LIFO */
  mdelayed_t *delayed;
  uint32_t    delayed_n, delayed_cap;
  uint32_t    generic_count;    /* 3.x generic collect counter */
  int32_t     full_page_retain; /* 3.x */
};

/* A free span in a 2.x span queue: segment and slice index. */
typedef struct mspanq_s mspanq_t;
struct mspanq_s {
  uint32_t first_seg, first_slice;
  uint32_t last_seg, last_slice;
};

typedef struct mtld_s mtld_t;
struct mtld_s {
  uint32_t   thread; /* trace thread id */
  uint32_t   heap_backing;
  uint32_t   heaps; /* first heap of the thread */
  mspanq_t   spans[MI_SEGMENT_BIN_MAX + 1];
  uint64_t   segment_count;
  uint64_t   reclaim_count; /* 217 */
  uint64_t   thread_seq;    /* 3.x */
  sim_addr_t data;          /* mi_thread_data_t mapping (0 for main) */
  sim_addr_t meta_tld;      /* 3.x: its tld and heap in a meta page */
  sim_addr_t meta_heap;
  bool       live;
};

/* ---- 2.x segments ------------------------------------------------------ */

typedef struct mslice_s mslice_t; /* mimalloc's mi_slice_t fields we need */
struct mslice_s {
  uint32_t count;  /* slice_count */
  uint32_t offset; /* slice_offset, in entries */
  uint32_t state;  /* xblock_size: 0 free, 1 interior, else in use */
  uint32_t page;   /* page record when a used span head */
  uint32_t qnext_seg, qnext_slice; /* span queue links (free heads) */
  uint32_t qprev_seg, qprev_slice;
};

enum { MI_SEG_NORMAL, MI_SEG_HUGE };

typedef struct mseg_s mseg_t;
struct mseg_s {
  sim_addr_t base;
  uint64_t   size; /* segment_slices * slice */
  uint64_t   commit[MI_COMMIT_WORDS];
  uint64_t   decommit[MI_COMMIT_WORDS]; /* 209 decommit / 21x purge mask */
  int64_t    expire; /* decommit_expire / purge_expire (ms) */
  uint32_t   segment_slices;
  uint32_t   slice_entries;
  uint32_t   used, abandoned, abandoned_visits;
  uint32_t   tld;                /* owner, 0 = abandoned */
  uint32_t   abandoned_next;     /* global abandoned list */
  uint32_t   arena, arena_block; /* 21x: arena memory (arena 0 = OS) */
  uint8_t    kind;
  bool       allow_decommit;
  bool       large;      /* 209 mem_is_large (and mem_is_pinned): THP advised */
  bool       in_visited; /* on the abandoned visited list */
  bool       abandoned_mark; /* 217: its bit in its arena's abandoned map */
  bool       was_reclaimed;  /* 217: counted in its tld's reclaim_count */
  bool       live;
  mslice_t  *slices; /* slice_entries + 1 */
};

/* ---- The model ---------------------------------------------------------- */

typedef struct mi_cache_slot_s mi_cache_slot_t; /* 209 segment cache */
struct mi_cache_slot_s {
  sim_addr_t base;
  uint64_t   commit[MI_COMMIT_WORDS];
  uint64_t   decommit[MI_COMMIT_WORDS];
  int64_t    expire;
  bool       inuse;
  bool       large; /* in cache_available_large (209 cache :258) */
};
#define MI_CACHE_MAX 1024 /* 209 segment-cache.c:21-22 */
/* The library's static cache[MI_CACHE_MAX] (209 segment-cache.c:27-36):
 * sizeof (mi_cache_slot_t) = p 8 + memid 8 + is_pinned 1 (padded to 8) +
 * two mi_commit_mask_t of 8 words (32 MiB / 64 KiB / 64, 209 types.h) +
 * expire 8 = 160 bytes (2.0.5: masks of 16 words, 288 bytes), expire
 * last: 160 (288) KiB of .bss, taken as starting on a page. */
#define MI_CACHE_SLOT_209 160
#define MI_CACHE_SLOT_205 288

typedef struct marena2_s marena2_t; /* 21x arena of 32 MiB blocks */
struct marena2_s {
  sim_addr_t base;
  uint32_t   blocks;
  int64_t    purge_expire;
  uint8_t   *inuse, *purge, *dirty; /* one byte per block */
  sim_addr_t meta;  /* 2.1.2: the descriptor's own OS page, else 0 */
  bool       large; /* THP advised and pinned: never purged */
};

typedef struct marena3_s marena3_t; /* 3.x arena of 64 KiB slices */
struct marena3_s {
  sim_addr_t base;
  uint32_t   slices;
  uint32_t   info_slices;
  uint64_t   meta_off; /* meta_apart: offset of the page infos (pages_meta) */
  int64_t    purge_expire;
  uint8_t   *free_map;      /* 1 = free */
  uint8_t   *purge;         /* 1 = scheduled */
  uint8_t   *dirty;         /* 1 = ever used */
  uint8_t   *page_head;     /* bin + 1 of an abandoned page head, else 0 */
  uint8_t   *chunk_bin;     /* per 512-slice chunk: its size bin */
  uint32_t  *page_at;       /* page record at a head slice */
  uint32_t   search_hint;   /* chunk_max_accessed */
  uint64_t  *abandoned_map; /* per bin, the chunkmap of pages_abandoned[bin]:
                               cmap_words bits, a bit per 512-slice chunk
                               that may hold one of the bin's pages */
  uint32_t cmap_words;
};

/* Where a live object is: its page (0: not live) and block index. */
typedef struct mobj_s mobj_t;
struct mobj_s {
  uint32_t page;
  uint32_t block : 24;      /* a page holds at most 512 KiB / 8 blocks */
  uint32_t align_shift : 8; /* an over-allocated aligned object: log2 of
                               its alignment (it starts at the block's first
                               such address); 0 otherwise */
};

struct mi_model_s {
  model_t       base;
  sim_kernel_t *kernel;
  mi_version_t  version;
  mi_geom_t     g;
  as_err_t     *err;  /* the current call's error sink */
  as_status_t   fail; /* first kernel failure inside a call */
  int64_t       now;  /* ms, the current event's clock */
  uint64_t      now_ns;
  uint64_t      clock_phase_ns; /* where the machine's ms ticks fall */
  /* options: every row (by MO_ key), and the rows of this version alone
   * as base.opts, so the spec a run reports can be given back */
  model_opts_t   opts;
  model_option_t shown[MODEL_OPTS_MAX + 1];
  /* options (effective values) */
  int64_t  purge_delay;   /* decommit_delay (209) / purge_delay */
  int64_t  extend_delay;  /* decommit_extend_delay / purge_extend */
  int64_t  segment_delay; /* 209 segment_decommit_delay */
  int64_t  arena_mult;    /* arena_purge_mult */
  bool     purge_decommits;
  bool     allow_decommit;
  bool     page_reset;
  bool     large_os_pages; /* 2.0.x: large_os_pages (mi_seg_os_alloc) */
  bool     abandoned_purge;
  bool     eager_commit;
  int64_t  eager_commit_delay;
  int64_t  max_segment_reclaim;
  int64_t  reclaim_on_free;          /* 343: -1, 0, 1; before, 0 or not */
  int64_t  page_max_reclaim;         /* 343 */
  int64_t  cross_thread_max_reclaim; /* 343 */
  int64_t  page_full_retain;
  int64_t  generic_collect;
  int64_t  max_candidates;
  bool     allow_thp; /* 3.4.3: arenas get MADV_HUGEPAGE */
  uint64_t hint_next; /* 2.1.x: the next aligned hint (aligned_base), 0
                         unknown (hint_start) */
  /* records */
  sim_idtable_t pages_tab;           /* page records by id: never moved */
  mpage_t      *pages;               /* pages_tab's base */
  uint32_t      pages_n, pages_free; /* free records chain through next */
  mheap_t      *heaps;
  uint32_t      heaps_n, heaps_cap;
  mtld_t       *tlds;
  uint32_t      tlds_n, tlds_cap;
  uint32_t     *tld_of_thread; /* trace thread -> tld, 0 = none */
  size_t        threads_cap;
  uint32_t      threads_live; /* threads with a heap, not exited */
  int64_t       thread_count; /* _mi_current_thread_count(), a size_t */
  uint64_t      thread_total; /* 3.x thread_total_count: tlds made so far */
  /* glibc's thread stacks (nptl_stacks.h), by trace thread */
  nptl_stacks_t nptl;
  nptl_stack_t *stacks;
  size_t        stacks_cap;
  sim_idtable_t segs_tab; /* segment records by id: never moved */
  mseg_t       *segs;     /* segs_tab's base */
  uint32_t      segs_n, segs_free;
  uint32_t      abandoned, abandoned_visited; /* 2.x lists */
  uint64_t      abandoned_count;
  /* objects: id -> place in obj_bytes bytes (mimalloc.c obj_get, obj_put) */
  uint8_t      *objs;         /* obj_tab's base: one cache line per free */
  sim_idtable_t obj_tab;      /* counts whole (mobj_t) entries */
  uint64_t      obj_len;      /* ids usable at obj_bytes */
  uint32_t      obj_bytes;    /* 4 (narrow) or sizeof(mobj_t) */
  uint32_t      narrow_pages; /* page numbers a 4-byte entry holds */
  uint64_t     *requested;    /* debug build, by object id (req_tab's base):
                                 the size malloc was asked, which
                                 mi_usable_size returns under MI_PADDING; a
                                 release build keeps no table */
  sim_idtable_t req_tab;
  uint64_t      live_bytes, live_objects;
  /* 209 segment cache */
  mi_cache_slot_t *cache;
  sim_addr_t       cache_area; /* the slots' memory (MI_CACHE_SLOT_BYTES) */
  /* arenas */
  marena2_t *arenas2;
  uint32_t   arenas2_n;
  marena3_t *arenas3;
  uint32_t   arenas3_n;
  marena3_t *metas; /* 3.x meta pages: 128-byte blocks in an arena slice */
  uint32_t   metas_n;
  int64_t    arenas_purge_expire;    /* 3.x subproc->purge_expire */
  uint64_t   abandoned_bin[MI_BINS]; /* 3.x abandoned counts */
  /* metadata outside segments: the library's static data (segment map,
   * arena metadata) and 3.x page map */
  sim_addr_t static_area;
  sim_addr_t page_map;
  /* thread data cache (209 init.c:204-245) */
  sim_addr_t td_cache[8];
  /* hooks (mimalloc.h) */
  mi_hooks_t hooks;
  bool       has_hooks;
  bool       heap_tags; /* a heap with a non-zero tag exists */
  /* counters */
  uint64_t purges, purged_bytes, segments_live, pages_live;
  uint64_t collects;
};

/* ---- Shared helpers ----------------------------------------------------- */

/* Kernel calls that cannot fail on a valid model; a failure is kept in
 * m->fail (the first one) and reported by the entry point. */
/* Out of memory for the model's own tables: the message goes to m->err at
 * once, as the kernel's and the thread table's do, so that a call passes on
 * every failure with the message set where it happened. */
void       mi_fail_oom(mi_model_t *m);
void       mi_touch(mi_model_t *m, sim_addr_t addr, uint64_t len);
void       mi_read(mi_model_t *m, sim_addr_t addr, uint64_t len);
void       mi_madvise_dontneed(mi_model_t *m, sim_addr_t addr, uint64_t len);
void       mi_madvise_free(mi_model_t *m, sim_addr_t addr, uint64_t len);
void       mi_madvise_hugepage(mi_model_t *m, sim_addr_t addr, uint64_t len);
sim_addr_t mi_os_alloc(mi_model_t *m, uint64_t size, uint64_t align);
sim_addr_t mi_os_reserve(mi_model_t *m, uint64_t size, uint64_t align);
/* mmap(hint, size) RW (commit) or PROT_NONE: at the hint when the range is
 * free, else top-down (sim_kernel_mmap_hint); 0 after a failure. */
sim_addr_t mi_os_map_hint(mi_model_t *m, sim_addr_t hint, uint64_t size,
                          bool commit);
void       mi_os_commit(mi_model_t *m, sim_addr_t addr, uint64_t len);
void       mi_os_free(mi_model_t *m, sim_addr_t addr, uint64_t size);
/* _mi_os_purge (212 os.c:475-500): DONTNEED, or MADV_FREE when
 * purge_decommits is off; 209 always decommits. */
void mi_os_purge(mi_model_t *m, sim_addr_t addr, uint64_t len);
/* 2.0.x _mi_os_decommit: MADV_DONTNEED (209 os.c), mprotect(PROT_NONE) in
 * a debug build (v2.0.5 src/os.c:920-927), which keeps the pages. */
void mi_os_decommit(mi_model_t *m, sim_addr_t addr, uint64_t len);
#define MI_PADDING_SIZE 8 /* sizeof(mi_padding_t), v2.0.5 types.h:417-422 */

uint8_t  mi_bin(uint64_t size);
uint8_t  mi_model_bin(const mi_model_t *m, uint64_t size);
uint64_t mi_bin_size(uint8_t bin);
uint64_t mi_good_alloc_size(uint64_t size);
uint64_t mi_random_shuffle(uint64_t x);

/* pages (mimalloc_page.c) */
uint32_t mi_page_new(mi_model_t *m);
void     mi_page_release(mi_model_t *m, uint32_t page);
void     mi_page_init(mi_model_t *m, uint32_t heap, uint32_t page,
                      uint64_t block_size);
void     mi_page_extend_free(mi_model_t *m, uint32_t page);
void     mi_page_free_collect(mi_model_t *m, uint32_t page, bool force);
void     mi_page_unfull(mi_model_t *m, uint32_t page);
void     mi_heap_visit_pages(mi_model_t *m, uint32_t heap);
/* The composition's page_event hook, if any (mimalloc.h). */
void mi_hook_page_event(mi_model_t *m, uint32_t page, mi_page_event_t what);
void mi_pq_push(mi_model_t *m, uint32_t heap, uint32_t bin, uint32_t page);
void mi_pq_push_end(mi_model_t *m, uint32_t heap, uint32_t bin, uint32_t page);
void mi_pq_remove(mi_model_t *m, uint32_t heap, uint32_t bin, uint32_t page);
uint32_t mi_page_queue_bin(const mi_model_t *m, const mpage_t *p);
void     mi_page_free(mi_model_t *m, uint32_t page, bool force);
void     mi_heap_collect_ex(mi_model_t *m, uint32_t heap, int kind);
void     mi_heap_delayed_free_all(mi_model_t *m, uint32_t heap);
uint32_t mi_heap_by_tag(mi_model_t *m, uint32_t heap, uint8_t tag);
bool     mi_malloc(mi_model_t *m, uint32_t heap, uint64_t size, uint32_t *page,
                   uint32_t *block);
void mi_free_block(mi_model_t *m, uint32_t tld, uint32_t page, uint32_t block);
bool mi_segment_attempt_reclaim(mi_model_t *m, uint32_t tld, uint32_t seg);
/* Debug build: what _mi_page_malloc writes into a new block of padded size
 * (fill and padding), and what a free writes over the old one. */
void mi_debug_alloc_fill(mi_model_t *m, uint32_t page, sim_addr_t a,
                         uint64_t padded);
void mi_debug_free_fill(mi_model_t *m, uint32_t tld, uint32_t page,
                        uint32_t block, uint64_t size);
void mi_heap_abandon_all(mi_model_t *m, uint32_t heap);

enum { MI_NORMAL, MI_FORCE, MI_ABANDON }; /* 209 heap.c:81-85 */

/* 2.x segments (mimalloc_seg.c) */
void     mi_segment_page_layout(mi_model_t *m, uint32_t page);
uint32_t mi_segment_page_alloc(mi_model_t *m, uint32_t heap,
                               uint64_t block_size);
uint64_t mi_segment_big_block_size(const mi_model_t *m, uint64_t block_size);
void     mi_segment_page_free(mi_model_t *m, uint32_t page, bool force);
void     mi_segment_page_abandon(mi_model_t *m, uint32_t page);
void     mi_abandoned_collect(mi_model_t *m, uint32_t heap, bool force);
void     mi_abandoned_reclaim_all(mi_model_t *m, uint32_t heap);
void     mi_segment_cache_collect(mi_model_t *m, bool force);
void     mi_arenas2_collect(mi_model_t *m, bool force);
void     mi_segment_collect(mi_model_t *m, uint32_t seg, bool force);
void     mi_huge_page_reset(mi_model_t *m, uint32_t page);
void     mi_segs_destroy(mi_model_t *m);
uint64_t mi_segs_awaiting_purge(const mi_model_t *m);

/* 3.x arenas (mimalloc_arena3.c) */
uint32_t mi_arenas3_page_alloc(mi_model_t *m, uint32_t heap,
                               uint64_t block_size);
void     mi_arenas3_page_free(mi_model_t *m, uint32_t page);
void     mi_arenas3_page_abandon(mi_model_t *m, uint32_t page);
void     mi_arenas3_page_unabandon(mi_model_t *m, uint32_t page);
bool     mi_arenas3_try_reabandon(mi_model_t *m, uint32_t page);
void     mi_arenas3_collect(mi_model_t *m, bool force, bool visit_all,
                            uint32_t tld);
void     mi_arenas3_destroy(mi_model_t *m);
/* 3.x thread metadata (arena-meta.c): a thread's tld and heap. */
void     mi_meta3_thread_alloc(mi_model_t *m, mtld_t *t);
void     mi_meta3_thread_free(mi_model_t *m, mtld_t *t);
uint64_t mi_arenas3_awaiting_purge(const mi_model_t *m);

/* ---- Heap map (the walk in mimalloc.c) --------------------------------- */

/* Mechanism keys of the walk's level-1 regions; mimalloc.c's table says
 * what each means. */
#define MI_MECH_IN_USE    "mimalloc.in_use"
#define MI_MECH_ABANDONED "mimalloc.abandoned"
#define MI_MECH_EMPTY     "mimalloc.empty_page"
#define MI_MECH_PENDING   "mimalloc.awaiting_purge"
#define MI_MECH_FREE      "mimalloc.free_slices"
#define MI_MECH_CACHE     "mimalloc.segment_cache"
#define MI_MECH_ARENA     "mimalloc.arena_free"
#define MI_MECH_META      "mimalloc.metadata"

typedef struct mi_walker_s mi_walker_t;
struct mi_walker_s {
  model_region_fn fn;
  void           *user;
  as_err_t       *err;
  const uint64_t *unit_live; /* per 2.x segment / 3.x arena + 1: live
                                bytes, then live objects */
};

/* Reports one region. */
as_status_t mi_walk_emit(const mi_walker_t *w, sim_addr_t addr, uint64_t bytes,
                         const char *kind, const char *mech, uint8_t level,
                         uint8_t state);
/* A unit that is one region: level 0 and its one level-1 region. */
as_status_t mi_walk_unit(const mi_walker_t *w, sim_addr_t addr, uint64_t bytes,
                         const char *kind, const char *mech, uint8_t state);
/* A page as a level-1 region (its slices, blocks and mechanism). */
as_status_t mi_walk_page(const mi_model_t *m, uint32_t page,
                         const mi_walker_t *w);
/* Free slices [from, to) of a unit at base as level-1 regions, split
 * where pending (one byte per slice, or NULL with mask: one bit per slice)
 * changes between scheduled for purge and not. */
as_status_t mi_walk_free_slices(const mi_walker_t *w, sim_addr_t base,
                                uint32_t from, uint32_t to,
                                const uint8_t *pending, const uint64_t *mask);
as_status_t mi_segs_walk(const mi_model_t *m, const mi_walker_t *w);
as_status_t mi_arenas3_walk(const mi_model_t *m, const mi_walker_t *w);

static inline mpage_t *P(mi_model_t *m, uint32_t id) {
  return &m->pages[id];
}
static inline mheap_t *H(mi_model_t *m, uint32_t id) {
  return &m->heaps[id];
}
static inline mseg_t *S(mi_model_t *m, uint32_t id) {
  return &m->segs[id];
}

/* Entry i of a page's free stack (i < free_n), array or run. */
static inline uint32_t mi_free_entry(const mpage_t *p, uint32_t i) {
  return p->blocks != NULL ? p->blocks[i] : p->run_hi - i;
}

#endif
