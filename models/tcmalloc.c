/* models/tcmalloc.c -- gperftools 2.10 tcmalloc (Debian 12's
 * libtcmalloc_minimal.so.4) bookkeeping: size classes, per-thread caches
 * under one shared budget, central free lists with their transfer caches,
 * and the page heap of 8 KiB pages with its incremental scavenger.
 *
 * Why: tcmalloc keeps freed memory in three tiers, and only the page heap
 * ever gives pages back, one whole span at a time, when a countdown of freed
 * pages runs out (about one page per 1000 freed at the default rate) or
 * when MallocExtension::ReleaseFreeMemory() is called.  Which spans empty
 * out depends on exactly which objects sit in which cache, so this file
 * keeps every free object's span and slot in the same LIFO orders as the
 * real lists, and replays the page heap's best-fit search, coalescing and
 * round-robin release exactly.  Citations are to gperftools tag
 * gperftools-2.10, whose src/ is byte-identical to Debian's 2.10-1 source
 * (its patches touch only pprof), unless they name 2.15 or 2.16: the
 * option version models those releases' few differences (pre-main calls,
 * the first thread cache, TLS size, the mmap hint; docs/models/tcmalloc.md
 * "Releases"); 2.9.1 takes 2.10's rules.
 *
 * Measured here, and modelled (docs/models/tcmalloc.md):
 *   - The release rate is a C++ global with a dynamic initializer
 *     (page_heap.cc:47-48) and the first malloc (libstdc++'s emergency
 *     pool, before main) runs before it: that first scavenge sees rate 0
 *     and sets the countdown to kDefaultReleaseDelay, 2^18 pages (2 GiB).
 *     So no page goes back on its own before 2 GiB of pages have been
 *     freed to the page heap, whatever TCMALLOC_RELEASE_RATE says
 *     (option premain, default on).
 *   - The calls made before main (gdb on tc_malloc/tc_free/tc_new):
 *     malloc(72704) (libstdc++ 12's pool), malloc(1) + free before the
 *     thread-specific key exists (that free goes to the central list and
 *     its span back to the page heap), malloc(1) + free, new(16) and new(8)
 *     (the MallocExtension objects).  The first thread cache is leaked:
 *     the key did not exist when it was made (thread_cache.cc:322-405).
 *   - sbrk before mmap (system-alloc.cc:461-482, NDEBUG build); metadata
 *     comes in 8 MiB chunks from the same sbrk heap (common.cc:248-287),
 *     first, so the layout is [8 MiB metadata][page heap ...].
 *
 * Page touches: the program writes what it requests unless the event is
 * TRACE_FLAG_UNWRITTEN; tcmalloc itself writes the first word of every
 * object of a span it carves for a size class (central_freelist.cc:343-357
 * threads the free list through them), every byte calloc returns
 * (tcmalloc.cc:1422-1424 memsets the whole class size or span), the
 * pagemap leaves it memsets (pagemap.h:171-176) and its metadata objects.
 * Free-list links written into free objects land on pages already
 * resident.  Released spans go back with MADV_DONTNEED (system-alloc.cc:
 * 65-78, 550-551: MADV_FREE is #undef'd on Linux).
 *
 * Left out (deliberately): sampling (compiled out of _minimal:
 * NO_TCMALLOC_SAMPLES, Makefile.am:472-484); the pagemap cache in bss and
 * the root array (both touched before main: baseline); lock contention;
 * emergency malloc; /dev/mem allocation; sbrk failing part-way (the
 * simulated break only fails at the mmap area, then mmap takes over as in
 * DefaultSysAllocator, system-alloc.cc:435-452).  The simulated kernel owns
 * the brk heap as libc_heap, so tcmalloc's sbrk memory is reported there;
 * only its mmap fallback is reported as tcmalloc.
 *
 * Sections
 *   Constants and options        Size map
 *   Records                      Kernel: system allocation and release
 *   Metadata allocators          Spans and the pagemap
 *   Large span sets (treap)      Page heap
 *   Central free lists           Thread caches
 *   Front end                    Start-up
 *   Model interface
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/idtable.h"
#include "../sim/threadtab.h"
#include "model.h"
#include "nptl_stacks.h"
#include "tcmalloc.h"

/* ---- Constants and options --------------------------------------------- */

#define TC_MIN_ALIGN        16                  /* common.h:64 kMinAlign */
#define TC_CLASS_SIZES_MAX  128                 /* common.h:81 kClassSizesMax */
#define TC_MAX_TC_SIZE      (UINT64_C(4) << 20) /* common.h:83 */
#define TC_MAX_SIZE         (256 * 1024)        /* common.h:86 kMaxSize */
#define TC_ALIGNMENT        8                   /* common.h:87 kAlignment */
#define TC_MIN_TC_SIZE      (2 * TC_MAX_SIZE)   /* common.h:101 512 KiB */
#define TC_STEAL_AMOUNT     (1 << 16)           /* common.h:106 kStealAmount */
#define TC_MAX_OVERAGES     3                   /* common.h:110 kMaxOverages */
#define TC_MAX_DYN_LIST_LEN 8192                /* common.h:117 */
#define TC_MAX_SMALL_SIZE   1024                /* common.h:183 kMaxSmallSize */
/* common.h:184-185 kClassArraySize */
#define TC_CLASS_ARRAY_SIZE (((TC_MAX_SIZE + 127 + (120 << 7)) >> 7) + 1)
#define TC_META_CHUNK       (UINT64_C(8) << 20) /* common.cc:238 */
#define TC_META_ALIGN                                                          \
  64 /* common.cc:241 sizeof(MemoryAligner):                                   \
        CACHELINE_ALIGNED, basictypes.h:404-408 */
#define TC_ALLOC_INCREMENT       (128 << 10) /* page_heap_allocator.h:99 */
#define TC_MAX_RELEASE_DELAY     (INT64_C(1) << 20)    /* page_heap.h:250 */
#define TC_DEFAULT_RELEASE_DELAY (INT64_C(1) << 18)    /* page_heap.h:254 */
#define TC_FORCED_COALESCE       (UINT64_C(128) << 20) /* page_heap.cc:111 */
#define TC_MAX_TRANSFER          64 /* central_freelist.h:111 */
#define TC_ADDRESS_BITS          48 /* common.h:138 x86-64 */
/* Metadata object sizes (x86-64): Span, span.h:69-98 (5 words + 4 bytes of
 * bit-fields, padded); an std::set node of SpanPtrWithLength (span.h:55-60;
 * 32-byte red-black header + 16); StackTrace, common.h:300-305 (2 + 31 words);
 * ThreadCache, thread_cache.h:69-354 (128 FreeLists of 32 bytes, sizes,
 * Sampler, tid, flag, links, CACHELINE_ALIGNED to 64). */
#define TC_SPAN_BYTES        48
#define TC_SETNODE_BYTES     48
#define TC_STACKTRACE_BYTES  264
#define TC_THREADCACHE_BYTES 4160
/* Pre-main calls, measured (file comment): libstdc++ 12 eh_alloc.cc pool
 * = 64 * 1024 + 64 * sizeof(__cxa_dependent_exception) (112). */
#define TC_PREMAIN_POOL 72704
/* Measured (docs/models/tcmalloc.md): the large-span sets are std::sets,
 * and the first insert and the first erase run libstdc++ code that a C
 * program had not run before, _Rb_tree_insert_and_rebalance (Debian 12
 * libstdc++.so.6.0.30 text at 0xbfe80) and _Rb_tree_rebalance_for_erase
 * (0xc0160): a read fault each, which maps the 64 KiB window of cached
 * text around it (Linux mm/memory.c do_fault_around, fault_around_bytes
 * 65536).  RSS grew by exactly these 128 KiB in every C run. */
#define TC_STL_WINDOW (UINT64_C(64) << 10)
/* 2.16 src/thread_cache_ptr.cc:67-88 SlowTLS::Entry: cache pointer, two
 * bools, thread id, next, prev (x86-64: 40 bytes). */
#define TC_SLOWTLS_ENTRY_BYTES 40
#define TC_NIL                 0u

#define TCMALLOC_OPTIONS(X)                                                    \
  X(TO_RELEASE_RATE, "release_rate", OPT_DECIMAL, "1.0", "", NULL,             \
    "TCMALLOC_RELEASE_RATE",                                                   \
    "gperftools 2.10 src/page_heap.cc:47-53 FLAGS_tcmalloc_release_rate",      \
    "pages released per 1000 pages freed to the page heap; 0 = never "         \
    "(the first 2^18 pages wait regardless when premain is on)")               \
  X(TO_MAX_TOTAL_THREAD_CACHE_BYTES, "max_total_thread_cache_bytes",           \
    OPT_BYTES, "33554432", "bytes", NULL,                                      \
    "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES",                                   \
    "gperftools 2.10 src/common.h:97 kDefaultOverallThreadCacheSize = 8 * "    \
    "4 MiB; read at thread_cache.cc:290-293, clipped to [512 KiB, 1 GiB]",     \
    "budget all thread caches share")                                          \
  X(TO_AGGRESSIVE_DECOMMIT, "aggressive_decommit", OPT_BOOL, "false", "",      \
    NULL, "TCMALLOC_AGGRESSIVE_DECOMMIT",                                      \
    "gperftools 2.10 src/static_vars.cc:94-106",                               \
    "release every span the moment it is freed to the page heap")              \
  X(TO_TRANSFER_NUM_OBJ, "transfer_num_obj", OPT_U64, "32", "", NULL,          \
    "TCMALLOC_TRANSFER_NUM_OBJ",                                               \
    "gperftools 2.10 src/common.cc:47-59 kDefaultTransferNumObjecs",           \
    "most objects moved between a thread cache and a central list at once "    \
    "(also sizes the spans of small classes)")                                 \
  X(TO_HEAP_LIMIT_MB, "heap_limit_mb", OPT_U64, "0", "MiB", NULL,              \
    "TCMALLOC_HEAP_LIMIT_MB",                                                  \
    "gperftools 2.10 src/page_heap.cc:55-61, EnsureLimit 521-543",             \
    "releases free spans before the heap would pass this; 0 = no limit")       \
  X(TO_SKIP_SBRK, "skip_sbrk", OPT_BOOL, "false", "", NULL,                    \
    "TCMALLOC_SKIP_SBRK", "gperftools 2.10 src/system-alloc.cc:133-135",       \
    "take memory with mmap only")                                              \
  X(TO_DISABLE_MEMORY_RELEASE, "disable_memory_release", OPT_BOOL, "false",    \
    "", NULL, "TCMALLOC_DISABLE_MEMORY_RELEASE",                               \
    "gperftools 2.10 src/system-alloc.cc:139-142, 520",                        \
    "never give pages back (TCMalloc_SystemRelease fails)")                    \
  X(TO_PAGE_SHIFT, "page_shift", OPT_ENUM, "13", "", "13|15|18", NULL,         \
    "gperftools 2.10 src/common.h:75-79 kPageShift (configure "                \
    "--with-tcmalloc-pagesize=8|32|256; Debian: 8 KiB)",                       \
    "log2 of tcmalloc's page size")                                            \
  X(TO_PREMAIN, "premain", OPT_ENUM, "true", "", "true|false|traced",          \
    "meta:tcmalloc_premain",                                                   \
    "measured on Debian 12 with gdb (docs/models/tcmalloc.md): libstdc++'s "   \
    "malloc(72704) and TCMallocGuard's calls run before the release-rate "     \
    "flag is initialised",                                                     \
    "start as a process does at main(): true: the pre-main allocations made, " \
    "the scavenge countdown at 2^18 pages; traced: the trace has the "         \
    "program's own (allocsim capture), tcmalloc's are added after its first "  \
    "allocation")                                                              \
  X(TO_STL_TEXT_PAGES, "stl_text_pages", OPT_BOOL, "true", "", NULL,           \
    "meta:rss_file_pages",                                                     \
    "measured (docs/models/tcmalloc.md): the first large-span set insert "     \
    "and erase page in 64 KiB of libstdc++ text each; file pages, so an "      \
    "RSS of anonymous memory only (allocsim oracle) never has them",           \
    "count the 128 KiB of libstdc++ text the large-span sets page in "         \
    "(false where RSS is anonymous memory only)")                              \
  X(TO_VERSION, "version", OPT_ENUM, "2.10", "", "2.9|2.10|2.15|2.16",         \
    "meta:tcmalloc_version",                                                   \
    "gperftools tags gperftools-2.9.1 (Ubuntu 22.04; its src/ differs from "   \
    "2.10 only in off-by-default FREE_MMAP_PROT_NONE and loongarch), -2.10 "   \
    "(Debian 12), -2.15 (Ubuntu 24.04), -2.16 (Debian 13); "                   \
    "docs/models/tcmalloc.md lists what differs",                              \
    "gperftools release whose behaviour to model")                             \
  NPTL_STACK_OPTIONS(X, TO_STACK_SIZE, TO_THREAD_STACK_PAGES)

enum tcmalloc_option_e { TCMALLOC_OPTIONS(MODEL_OPTION_KEY) TO_COUNT };
_Static_assert(TO_COUNT <= MODEL_OPTS_MAX, "model_opts_t holds the rows");

static const model_option_t tcmalloc_options[] = {
    TCMALLOC_OPTIONS(MODEL_OPTION_ROW){0}};

/* ---- Size map ----------------------------------------------------------- */

typedef struct tsizemap_s {
  uint32_t nclasses;                    /* class 0 unused */
  uint32_t size[TC_CLASS_SIZES_MAX];    /* class_to_size_ */
  uint32_t pages[TC_CLASS_SIZES_MAX];   /* class_to_pages_ */
  uint32_t batch[TC_CLASS_SIZES_MAX];   /* num_objects_to_move_ */
  uint32_t objects[TC_CLASS_SIZES_MAX]; /* objects a span of the class
                                          holds (Populate's count) */
  uint8_t class_array[TC_CLASS_ARRAY_SIZE];
} tsizemap_t;

/* common.h:199-209 ClassIndexMaybe */
static inline uint32_t class_index(uint64_t s) {
  return s <= TC_MAX_SMALL_SIZE ? (uint32_t)((s + 7) >> 3)
                                : (uint32_t)((s + 127 + (120 << 7)) >> 7);
}

/* common.cc:63-75 LgFloor */
static int lg_floor(uint64_t n) {
  int log = 0;
  while (n >>= 1)
    log++;
  return log;
}

/* common.cc:77-97 AlignmentForSize */
static uint64_t alignment_for_size(uint64_t size, uint64_t page) {
  uint64_t a = TC_ALIGNMENT;
  if (size > TC_MAX_SIZE)
    a = page;
  else if (size >= 128)
    a = (UINT64_C(1) << lg_floor(size)) / 8;
  else if (size >= TC_MIN_ALIGN)
    a = TC_MIN_ALIGN;
  return a > page ? page : a;
}

/* common.cc:99-119 NumMoveSize */
static uint32_t num_move_size(uint64_t size, uint32_t transfer_num) {
  int64_t num = (int64_t)(64.0 * 1024.0 / (double)size);
  if (num < 2)
    num = 2;
  if (num > (int64_t)transfer_num)
    num = transfer_num;
  return (uint32_t)num;
}

/* common.cc:122-234 SizeMap::Init.  The sanity checks of 192-228 hold for
 * every page size and batch the options allow (tests/unit/test_tcmalloc.c
 * compares the table with the running library's nallocx). */
static bool sizemap_init(tsizemap_t *sm, unsigned page_shift,
                         uint32_t transfer_num) {
  uint64_t page = UINT64_C(1) << page_shift;
  uint32_t sc = 1;
  uint64_t alignment = TC_ALIGNMENT;
  memset(sm, 0, sizeof *sm);
  for (uint64_t size = TC_ALIGNMENT; size <= TC_MAX_SIZE; size += alignment) {
    alignment = alignment_for_size(size, page);
    uint32_t blocks_to_move = num_move_size(size, transfer_num) / 4;
    uint64_t psize = 0;
    do {
      psize += page;
      /* Leftover at most 1/8 of the span. */
      while ((psize % size) > (psize >> 3))
        psize += page;
    } while ((psize / size) < blocks_to_move);
    uint32_t my_pages = (uint32_t)(psize >> page_shift);
    if (sc > 1 && my_pages == sm->pages[sc - 1]) {
      uint64_t mine = ((uint64_t)my_pages << page_shift) / size;
      uint64_t prev =
          ((uint64_t)sm->pages[sc - 1] << page_shift) / sm->size[sc - 1];
      if (mine == prev) {
        sm->size[sc - 1] = (uint32_t)size;
        continue;
      }
    }
    if (sc >= TC_CLASS_SIZES_MAX)
      return false;
    sm->pages[sc] = my_pages;
    sm->size[sc] = (uint32_t)size;
    sc++;
  }
  sm->nclasses = sc;
  uint64_t next_size = 0;
  for (uint32_t c = 1; c < sc; c++) {
    for (uint64_t s = next_size; s <= sm->size[c]; s += TC_ALIGNMENT)
      sm->class_array[class_index(s)] = (uint8_t)c;
    next_size = sm->size[c] + TC_ALIGNMENT;
  }
  for (uint32_t c = 1; c < sc; c++) {
    sm->batch[c] = num_move_size(sm->size[c], transfer_num);
    sm->objects[c] =
        (uint32_t)(((uint64_t)sm->pages[c] << page_shift) / sm->size[c]);
    if (sm->objects[c] > UINT16_MAX) /* tobj_t's 16-bit slot, the free */
      return false;                  /* stack's 16-bit counts */
  }
  return true;
}

/* ---- Records ------------------------------------------------------------ */

/* A span: a run of pages.  Records are indexed by uint32_t; index 0 is NIL
 * and the list heads (page-heap lists, central span lists) are records too,
 * so every doubly linked list is tcmalloc's circular one with a dummy head. */
enum { LOC_IN_USE, LOC_NORMAL, LOC_RETURNED, LOC_HEAD, LOC_DEAD };

/* 56 bytes: a span either serves a size class (in use, sizeclass != 0)
 * or waits in a large set (free, longer than kMaxPages), never both, so
 * the fields of the two share their bytes.  A span leaves a large set
 * with tl = tr = node = 0 (treap_erase, remove_from_free_list), which
 * reads as an empty free stack; a size-class span leaves with its stack
 * freed (release_to_spans).  The objects a size-class span holds come
 * from its class (tsizemap_t.objects) and the treap priority from its
 * number (span_prio), so neither is stored.  This table is the second
 * largest of the model's memory on a heap of small objects. */
typedef struct tspan_s {
  uint64_t   start;  /* first page (address >> page_shift) */
  uint64_t   length; /* pages */
  sim_addr_t meta;   /* the Span object in the metadata */
  uint32_t   prev, next;
  uint32_t   refcount; /* objects handed out of this span */
  uint8_t    sizeclass;
  uint8_t    location;
  union {
    struct {           /* serving a size class */
      uint32_t virgin; /* slots from here on were never handed out */
      uint16_t nstack, capstack;
    };
    struct {           /* in a large set */
      uint32_t tl, tr; /* treap children */
    };
  };
  union {
    uint16_t *stack; /* serving a size class: returned slots, the list
                        head last */
    sim_addr_t node; /* in a large set: its std::set node */
  };
} tspan_t;
_Static_assert(sizeof(tspan_t) == 56, "a span record stays 56 bytes");

/* A free object: span << 16 | slot. */
typedef uint64_t tobj_t;
#define OBJ(span, slot) (((tobj_t)(span) << 16) | (slot))
#define OBJ_SPAN(o)     ((uint32_t)((o) >> 16))
#define OBJ_SLOT(o)     ((uint32_t)((o)&0xffff))

/* A thread cache's list of one class: a LIFO, the list head last. */
typedef struct tlist_s {
  tobj_t  *v;
  uint32_t len, cap;
  uint32_t lowater, max_length, overages;
} tlist_t;

typedef struct tcache_s {
  tlist_t    list[TC_CLASS_SIZES_MAX];
  int64_t    size;       /* bytes in the lists */
  int64_t    max_size;   /* size_ > max_size_ -> Scavenge */
  int32_t    next, prev; /* thread_heaps_ list; -1 = none */
  bool       in_use;
  sim_addr_t meta;
} tcache_t;

/* A central free list's transfer cache entry: batch objects, head first. */
typedef struct tcentral_s {
  uint32_t nonempty, empty; /* list heads (span records) */
  uint64_t counter;         /* free objects in the spans */
  uint64_t num_spans;
  tobj_t  *slots; /* max_cache_size entries of batch objects */
  int32_t  used_slots, cache_size, max_cache_size;
} tcentral_t;

/* PageHeapAllocator<T> (page_heap_allocator.h:46-110): carve sizeof(T) from
 * 128 KiB metadata blocks, reuse through a LIFO free list. */
typedef struct tmeta_pool_s {
  uint64_t    obj_bytes;
  sim_addr_t  area;
  uint64_t    avail;
  sim_addr_t *free;
  uint64_t    nfree, capfree;
  uint64_t    inuse;
  bool        inited;
} tmeta_pool_t;

/* A system allocation MetaDataAlloc made (an 8 MiB chunk, or one object
 * of 8 MiB or more), kept so that the heap map can show it. */
typedef struct tmeta_region_s {
  sim_addr_t addr;
  uint64_t   bytes;
} tmeta_region_t;

/* The pagemap's boundary entries, in leaves of 2^16 pages found through an
 * open-addressing table of leaf numbers. */
#define PM_LEAF_BITS 16
typedef struct tpagemap_s {
  uint64_t  *keys; /* leaf number + 1; 0 = empty slot */
  uint32_t **leaves;
  uint64_t   cap, used;
} tpagemap_t;

/* The gperftools releases modelled (option version). */
typedef enum tc_version_e {
  TC_V2_9,
  TC_V2_10,
  TC_V2_15,
  TC_V2_16
} tc_version_t;

/* Option premain, in the order of its choices. */
typedef enum tc_premain_e {
  TC_PREMAIN_MODELLED, /* true: every pre-main call made at the start */
  TC_PREMAIN_NONE,     /* false */
  TC_PREMAIN_TRACED    /* the trace has the program's (premain_traced) */
} tc_premain_t;

typedef struct tcmalloc_model_s {
  model_t       base; /* must be first */
  sim_kernel_t *kernel;
  as_status_t   fail;
  as_err_t      ferr;

  /* options */
  tc_version_t version;
  double       release_rate;
  uint64_t     heap_limit_mb;
  bool         aggressive, skip_sbrk, disable_release;
  bool     flags_ready; /* false while the pre-main calls run (file comment) */
  bool     premain_pending; /* premain=traced, before the first allocation */
  unsigned page_shift;
  uint64_t page;      /* tcmalloc page size */
  uint64_t max_pages; /* common.h:89 kMaxPages */
  uint64_t os_page;

  tsizemap_t sm;

  /* spans */
  sim_idtable_t sp_tab; /* span records, indexed by number: never moved */
  tspan_t      *sp;     /* sp_tab's base */
  uint32_t      nsp, free_sp;
  tpagemap_t    pm;

  /* page heap (page_heap.h:114-350) */
  uint32_t *free_normal, *free_returned;  /* heads, index len - 1 */
  uint32_t  large_normal, large_returned; /* treap roots */
  uint64_t  system_bytes, free_bytes, unmapped_bytes, committed_bytes;
  uint64_t  scavenge_count, commit_count, total_commit_bytes;
  uint64_t  decommit_count, total_decommit_bytes, reserve_count;
  uint64_t  total_reserve_bytes;
  int64_t   scavenge_counter;
  int64_t   release_index;
  uint64_t  system_taken; /* TCMalloc_SystemTaken */
  bool      sbrk_failed, mmap_failed;
  uint64_t  mmap_hint;   /* 2.16 MmapSysAllocator::hint_ */
  uint64_t *leaves_made; /* pagemap leaves (TCMalloc_PageMap2), sorted */
  uint64_t  nleaves, capleaves;

  /* libstdc++'s rb-tree text, paged in on first use (TC_STL_WINDOW) */
  sim_addr_t stl_text;
  bool       stl_insert_paged, stl_erase_paged;

  /* metadata */
  sim_addr_t      meta_chunk;
  uint64_t        meta_avail, metadata_bytes;
  tmeta_region_t *meta_regions; /* every chunk, in the order taken */
  uint64_t        nmeta_regions, capmeta_regions;
  tmeta_pool_t    span_pool, setnode_pool, stack_pool, cache_pool;

  /* central free lists */
  tcentral_t central[TC_CLASS_SIZES_MAX];
  int64_t    race_counter;

  /* thread caches */
  tcache_t *caches;
  uint32_t  ncaches, capcaches;
  int32_t   thread_heaps, next_steal;
  int64_t   heap_count;
  uint64_t  overall_tc_size;
  int64_t   per_thread_tc_size, unclaimed;
  int32_t  *thread_cache; /* trace thread -> cache, -1 = none */
  size_t    nthreads;

  /* program objects: id -> OBJ(span, slot) in obj_bytes bytes (obj_get,
   * obj_put); 0 = not live */
  uint8_t      *obj;          /* obj_tab's base */
  sim_idtable_t obj_tab;      /* in OBJ_ID_BYTES_MAX units */
  uint64_t      obj_len;      /* ids usable at obj_bytes */
  uint32_t      obj_bytes;    /* 4 or OBJ_ID_BYTES_MAX */
  uint32_t      slot_bits;    /* a 4-byte entry's slot field */
  uint32_t      narrow_spans; /* span numbers a 4-byte entry holds */
  uint64_t      live_bytes, live_objects;
  tobj_t        extension[2]; /* TCMallocGuard's MallocExtension objects
                                 (premain_calls): tcmalloc's own, never
                                 freed; 0 = not made */
  tobj_t *chain;              /* scratch: one batch in flight (batch objects) */
  tobj_t *chain2;             /* scratch: a later chunk of RemoveRange */

  /* glibc's thread stacks (nptl_stacks.h), by trace thread */
  nptl_stacks_t nptl;
  nptl_stack_t *stacks;
  size_t        stacks_cap;
} tcmalloc_model_t;

#define SP(t, i) (&(t)->sp[i])

static void set_fail(tcmalloc_model_t *t, as_status_t rc, const char *what) {
  if (t->fail == AS_OK) {
    t->fail = rc;
    as_err_set(&t->ferr, rc, "tcmalloc: %s", what);
  }
}

/* Keeps the first kernel error verbatim. */
static bool kcheck(tcmalloc_model_t *t, as_status_t rc, const as_err_t *e) {
  if (rc == AS_OK)
    return true;
  if (t->fail == AS_OK) {
    t->fail = rc;
    t->ferr = *e;
  }
  return false;
}

static as_status_t report(tcmalloc_model_t *t, as_err_t *err) {
  if (err != NULL)
    *err = t->ferr;
  return t->fail;
}

static bool grow(void **v, uint64_t *cap, uint64_t need, size_t elem) {
  if (need <= *cap)
    return true;
  uint64_t n = *cap ? *cap : 16;
  while (n < need)
    n *= 2;
  void *p = realloc(*v, (size_t)(n * elem));
  if (p == NULL)
    return false;
  memset((char *)p + *cap * elem, 0, (size_t)((n - *cap) * elem));
  *v = p;
  *cap = n;
  return true;
}

/* Makes entry thread of a table by trace thread usable, new entries copies
 * of blank (zeros if NULL); a sparse thread id is refused against
 * --max-memory (sim/threadtab.h). */
static bool thread_table(tcmalloc_model_t *t, void **v, size_t *cap,
                         uint32_t thread, size_t elem, const void *blank) {
  as_err_t e;
  return kcheck(t,
                sim_threadtab_reach(v, cap, thread, elem, blank,
                                    sim_kernel_max_memory_bytes(t->kernel), &e),
                &e);
}

static void touch(tcmalloc_model_t *t, sim_addr_t addr, uint64_t len) {
  as_err_t e;
  if (len != 0)
    kcheck(t, sim_kernel_touch(t->kernel, addr, len, &e), &e);
}

/* The realloc copy reads the old object's whole size class; a page only
 * without the zero page. */
static void read_mem(tcmalloc_model_t *t, sim_addr_t addr, uint64_t len) {
  as_err_t e;
  if (len != 0)
    kcheck(t, sim_kernel_read(t->kernel, addr, len, &e), &e);
}

/* ---- Kernel: system allocation and release ------------------------------ */

/* SbrkSysAllocator::Alloc (system-alloc.cc:207-276); 0 on failure. */
static sim_addr_t sbrk_alloc(tcmalloc_model_t *t, uint64_t size,
                             uint64_t *actual, uint64_t align) {
  as_err_t   e;
  sim_addr_t cur = sim_kernel_brk_current(t->kernel);
  size = (size + align - 1) / align * align;
  if (sim_kernel_brk(t->kernel, cur + size, &e) != AS_OK)
    return 0;
  *actual = size;
  if ((cur & (align - 1)) == 0)
    return cur;
  /* 256-262: ask for the alignment's worth more; the simulated break is
   * always contiguous with the previous sbrk. */
  uint64_t extra = align - (cur & (align - 1));
  if (!kcheck(t, sim_kernel_brk(t->kernel, cur + size + extra, &e), &e))
    return 0;
  return cur + extra;
}

/* 2.16's first try (system-alloc.cc:284-305): continue the previous
 * mapping at its end; a mapping placed elsewhere is kept when it has the
 * alignment, else unmapped.  0 when the full logic must run. */
static sim_addr_t mmap_at_hint(tcmalloc_model_t *t, uint64_t size,
                               uint64_t align) {
  as_err_t   e;
  sim_addr_t a;
  if (t->mmap_hint == 0 || t->mmap_hint + size <= size ||
      (t->mmap_hint & (align - 1)) != 0)
    return 0;
  if (sim_kernel_mmap_hint(t->kernel, t->mmap_hint, size, SIM_PROT_RW,
                           SIM_OWNER_TCMALLOC, &a, &e) != AS_OK)
    return 0; /* MAP_FAILED is not aligned: the full logic runs */
  if ((a & (align - 1)) == 0)
    return a;
  kcheck(t, sim_kernel_munmap(t->kernel, a, size, &e), &e);
  return 0;
}

/* MmapSysAllocator::Alloc (2.10 system-alloc.cc:278-344, 2.16 254-344):
 * the simulated mmap aligns by itself where the real one over-maps and
 * trims.  2.16 remembers where the last mapping ended (hint_). */
static sim_addr_t mmap_alloc(tcmalloc_model_t *t, uint64_t size,
                             uint64_t *actual, uint64_t align) {
  as_err_t   e;
  sim_addr_t a = 0;
  if (align < t->os_page)
    align = t->os_page;
  size = (size + align - 1) / align * align;
  if (t->version == TC_V2_16)
    a = mmap_at_hint(t, size, align);
  if (a == 0 && sim_kernel_mmap(t->kernel, size, align, SIM_PROT_RW,
                                SIM_OWNER_TCMALLOC, &a, &e) != AS_OK)
    return 0;
  t->mmap_hint = a + size;
  *actual = size;
  return a;
}

/* TCMalloc_SystemAlloc (system-alloc.cc:484-511) over DefaultSysAllocator
 * (435-452): sbrk, then mmap; a child that failed is skipped until both
 * have failed. */
static sim_addr_t system_alloc(tcmalloc_model_t *t, uint64_t size,
                               uint64_t *actual, uint64_t align) {
  uint64_t   act = 0;
  sim_addr_t r = 0;
  if (align < TC_META_ALIGN)
    align = TC_META_ALIGN;
  if (!t->sbrk_failed && !(t->flags_ready && t->skip_sbrk)) {
    r = sbrk_alloc(t, size, &act, align);
    t->sbrk_failed = r == 0;
  }
  if (r == 0 && !t->mmap_failed) {
    r = mmap_alloc(t, size, &act, align);
    t->mmap_failed = r == 0;
  }
  if (r == 0) {
    t->sbrk_failed = t->mmap_failed = false;
    return 0;
  }
  t->system_taken += act;
  if (actual != NULL)
    *actual = act;
  return r;
}

/* TCMalloc_SystemRelease (system-alloc.cc:513-562): MADV_DONTNEED. */
static bool system_release(tcmalloc_model_t *t, sim_addr_t start,
                           uint64_t len) {
  if (t->flags_ready && t->disable_release)
    return false;
  as_err_t e;
  return kcheck(
      t, sim_kernel_madvise(t->kernel, start, len, SIM_MADV_DONTNEED, &e), &e);
}

/* ---- Metadata allocators ------------------------------------------------ */

/* A system allocation for metadata: remembered for the heap map, which
 * would otherwise leave the Span objects, thread caches and pagemap leaves
 * in it outside every region. */
static sim_addr_t meta_system_alloc(tcmalloc_model_t *t, uint64_t bytes,
                                    uint64_t *actual) {
  sim_addr_t r = system_alloc(t, bytes, actual, TC_META_ALIGN);
  if (r == 0)
    return 0;
  if (!grow((void **)&t->meta_regions, &t->capmeta_regions,
            t->nmeta_regions + 1, sizeof *t->meta_regions)) {
    set_fail(t, AS_ENOMEM, "out of memory for metadata regions");
    return 0;
  }
  t->meta_regions[t->nmeta_regions++] = (tmeta_region_t){r, *actual};
  return r;
}

/* MetaDataAlloc (common.cc:248-287). */
static sim_addr_t meta_alloc(tcmalloc_model_t *t, uint64_t bytes) {
  uint64_t real;
  if (bytes >= TC_META_CHUNK) {
    sim_addr_t r = meta_system_alloc(t, bytes, &real);
    if (r != 0)
      t->metadata_bytes += bytes;
    return r;
  }
  uint64_t align = (uint64_t)(-(int64_t)t->meta_chunk) & (TC_META_ALIGN - 1);
  if (t->meta_avail < bytes + align) {
    sim_addr_t p = meta_system_alloc(t, TC_META_CHUNK, &real);
    if (p == 0)
      return 0;
    t->meta_chunk = p;
    t->meta_avail = real;
    align = 0;
  }
  sim_addr_t r = t->meta_chunk + align;
  bytes += align;
  t->meta_chunk += bytes;
  t->meta_avail -= bytes;
  t->metadata_bytes += bytes;
  return r;
}

/* PageHeapAllocator::New; the caller's writes of the new object touch it. */
static sim_addr_t pool_new(tcmalloc_model_t *t, tmeta_pool_t *p) {
  sim_addr_t r;
  if (p->nfree > 0) {
    r = p->free[--p->nfree];
  } else {
    if (p->avail < p->obj_bytes) {
      p->area = meta_alloc(t, TC_ALLOC_INCREMENT);
      if (p->area == 0) {
        set_fail(t, AS_ENOMEM, "out of metadata memory");
        return 0;
      }
      p->avail = TC_ALLOC_INCREMENT;
    }
    r = p->area;
    p->area += p->obj_bytes;
    p->avail -= p->obj_bytes;
  }
  p->inuse++;
  touch(t, r, p->obj_bytes);
  return r;
}

static void pool_delete(tcmalloc_model_t *t, tmeta_pool_t *p, sim_addr_t a) {
  if (!grow((void **)&p->free, &p->capfree, p->nfree + 1, sizeof *p->free)) {
    set_fail(t, AS_ENOMEM, "out of memory");
    return;
  }
  p->free[p->nfree++] = a;
  p->inuse--;
}

/* PageHeapAllocator::Init (page_heap_allocator.h:52-60). */
static void pool_init(tcmalloc_model_t *t, tmeta_pool_t *p, uint64_t bytes) {
  p->obj_bytes = bytes;
  p->inited = true;
  pool_delete(t, p, pool_new(t, p));
}

/* ---- The object table --------------------------------------------------- */

/* An object's place, its span number and slot, in the table by id: 4
 * bytes (span << slot_bits | slot) while every span number fits beside the
 * most slots a span of the size map has (tc_create sets slot_bits: 10 with
 * 8 KiB pages, so 4 M span records), else 6 (a 32-bit span number, a
 * 16-bit slot).  span_record rewrites the table once (widen_objs) before it
 * makes a span number 4 bytes cannot hold.  This table is most of the
 * simulator's memory on a heap of small objects (one entry per live id). */
#define OBJ_ID_BYTES_MAX 6
_Static_assert(sizeof(uint32_t) + sizeof(uint16_t) == OBJ_ID_BYTES_MAX,
               "span number and slot fill a wide entry");

/* The place in an entry of bytes bytes at p. */
static inline tobj_t obj_read(const uint8_t *p, uint32_t bytes,
                              uint32_t slot_bits) {
  uint32_t span;
  memcpy(&span, p, sizeof span);
  if (bytes == sizeof span)
    return OBJ(span >> slot_bits, span & ((UINT32_C(1) << slot_bits) - 1));
  uint16_t slot;
  memcpy(&slot, p + sizeof span, sizeof slot);
  return OBJ(span, slot);
}

static inline void obj_write(uint8_t *p, uint32_t bytes, uint32_t slot_bits,
                             tobj_t o) {
  uint32_t span = OBJ_SPAN(o);
  if (bytes == sizeof span) {
    uint32_t w = span << slot_bits | OBJ_SLOT(o);
    memcpy(p, &w, sizeof w);
    return;
  }
  uint16_t slot = (uint16_t)OBJ_SLOT(o);
  memcpy(p, &span, sizeof span);
  memcpy(p + sizeof span, &slot, sizeof slot);
}

static tobj_t obj_get(const tcmalloc_model_t *t, uint64_t id) {
  if (id >= t->obj_len)
    return 0;
  return obj_read(t->obj + id * t->obj_bytes, t->obj_bytes, t->slot_bits);
}

/* id < t->obj_len (ensure_obj); o's span fits the width (span_record). */
static void obj_put(tcmalloc_model_t *t, uint64_t id, tobj_t o) {
  obj_write(t->obj + id * t->obj_bytes, t->obj_bytes, t->slot_bits, o);
}

/* Makes ids [0, n) usable at the table's width (obj_tab counts wide
 * entries). */
static bool reach_objs(tcmalloc_model_t *t, uint64_t n) {
  return sim_idtable_reach_packed(&t->obj_tab, n, t->obj_bytes, &t->obj_len);
}

/* Rewrites the table from 4-byte to 6-byte entries, in place and last
 * first (entry i's six bytes overlap only 4-byte entries i and above,
 * already moved). */
static bool widen_objs(tcmalloc_model_t *t) {
  uint64_t n = t->obj_len;
  if (n > 0 && !sim_idtable_reach(&t->obj_tab, n - 1))
    return false;
  for (uint64_t i = n; i-- > 0;)
    obj_write(t->obj + i * OBJ_ID_BYTES_MAX, OBJ_ID_BYTES_MAX, 0,
              obj_read(t->obj + i * sizeof(uint32_t), sizeof(uint32_t),
                       t->slot_bits));
  t->obj_bytes = OBJ_ID_BYTES_MAX;
  t->obj_len = t->obj_tab.len;
  return true;
}

static bool ensure_obj(tcmalloc_model_t *t, uint64_t id) {
  if (id < t->obj_len || (id < SIM_IDTABLE_MAX_IDS && reach_objs(t, id + 1)))
    return true; /* fresh entries read as 0: not live */
  if (id >= SIM_IDTABLE_MAX_IDS)
    set_fail(t, AS_EINVAL, "object id above 2^32");
  else
    set_fail(t, AS_ENOMEM, "out of memory for objects");
  return false;
}

/* ---- Spans and the pagemap ---------------------------------------------- */

static uint32_t span_record(tcmalloc_model_t *t) {
  uint32_t i;
  if (t->free_sp != TC_NIL) {
    i = t->free_sp;
    t->free_sp = SP(t, i)->next;
  } else {
    if (t->nsp == UINT32_MAX || !sim_idtable_reach(&t->sp_tab, t->nsp) ||
        (t->nsp >= t->narrow_spans && t->obj_bytes < OBJ_ID_BYTES_MAX &&
         !widen_objs(t))) {
      set_fail(t, AS_ENOMEM, "out of memory for span records");
      return TC_NIL;
    }
    i = t->nsp++;
  }
  memset(SP(t, i), 0, sizeof *SP(t, i));
  return i;
}

/* NewSpan (span.cc:45-51): a Span object from the span allocator. */
static uint32_t new_span(tcmalloc_model_t *t, uint64_t start, uint64_t len) {
  uint32_t i = span_record(t);
  if (i == TC_NIL)
    return TC_NIL;
  tspan_t *s = SP(t, i);
  s->start = start;
  s->length = len;
  s->location = LOC_IN_USE;
  s->meta = pool_new(t, &t->span_pool);
  return i;
}

/* DeleteSpan (span.cc:53-59). */
static void delete_span(tcmalloc_model_t *t, uint32_t i) {
  tspan_t *s = SP(t, i);
  pool_delete(t, &t->span_pool, s->meta);
  if (s->sizeclass != 0)
    free(s->stack);
  memset(s, 0, sizeof *s);
  s->location = LOC_DEAD;
  s->next = t->free_sp;
  t->free_sp = i;
}

static uint32_t *pm_slot(tcmalloc_model_t *t, uint64_t page, bool create) {
  uint64_t leaf = page >> PM_LEAF_BITS;
  if (t->pm.cap == 0 || (create && (t->pm.used + 1) * 2 > t->pm.cap)) {
    if (!create)
      return NULL;
    uint64_t   ncap = t->pm.cap ? t->pm.cap * 2 : 16;
    uint64_t  *keys = calloc(ncap, sizeof *keys);
    uint32_t **lv = calloc(ncap, sizeof *lv);
    if (keys == NULL || lv == NULL) {
      free(keys);
      free(lv);
      set_fail(t, AS_ENOMEM, "out of memory for the pagemap");
      return NULL;
    }
    for (uint64_t i = 0; i < t->pm.cap; i++)
      if (t->pm.keys[i] != 0) {
        uint64_t h = (t->pm.keys[i] * UINT64_C(0x9E3779B97F4A7C15)) >> 7;
        while (keys[h & (ncap - 1)] != 0)
          h++;
        keys[h & (ncap - 1)] = t->pm.keys[i];
        lv[h & (ncap - 1)] = t->pm.leaves[i];
      }
    free(t->pm.keys);
    free(t->pm.leaves);
    t->pm.keys = keys;
    t->pm.leaves = lv;
    t->pm.cap = ncap;
  }
  uint64_t h = ((leaf + 1) * UINT64_C(0x9E3779B97F4A7C15)) >> 7;
  for (;; h++) {
    uint64_t j = h & (t->pm.cap - 1);
    if (t->pm.keys[j] == leaf + 1)
      return &t->pm.leaves[j][page & ((1u << PM_LEAF_BITS) - 1)];
    if (t->pm.keys[j] == 0) {
      if (!create)
        return NULL;
      t->pm.leaves[j] = calloc((size_t)1 << PM_LEAF_BITS, sizeof(uint32_t));
      if (t->pm.leaves[j] == NULL) {
        set_fail(t, AS_ENOMEM, "out of memory for the pagemap");
        return NULL;
      }
      t->pm.keys[j] = leaf + 1;
      t->pm.used++;
      return &t->pm.leaves[j][page & ((1u << PM_LEAF_BITS) - 1)];
    }
  }
}

static void pm_set(tcmalloc_model_t *t, uint64_t page, uint32_t span) {
  uint32_t *slot = pm_slot(t, page, true);
  if (slot != NULL)
    *slot = span;
}

/* RecordSpan (page_heap.h:298-303). */
static void record_span(tcmalloc_model_t *t, uint32_t i) {
  tspan_t *s = SP(t, i);
  pm_set(t, s->start, i);
  if (s->length > 1)
    pm_set(t, s->start + s->length - 1, i);
}

/* GetDescriptor for a neighbour: the span whose boundary page is page.
 * Entries of interior pages go stale when spans merge, as in tcmalloc;
 * only boundary pages are asked for (page_heap.cc:342-346), and the check
 * against the record keeps a recycled record from answering. */
static uint32_t span_ending_at(tcmalloc_model_t *t, uint64_t page) {
  uint32_t *slot = pm_slot(t, page, false);
  if (slot == NULL || *slot == TC_NIL)
    return TC_NIL;
  const tspan_t *s = SP(t, *slot);
  return s->location != LOC_DEAD && s->start + s->length - 1 == page ? *slot
                                                                     : TC_NIL;
}

static uint32_t span_starting_at(tcmalloc_model_t *t, uint64_t page) {
  uint32_t *slot = pm_slot(t, page, false);
  if (slot == NULL || *slot == TC_NIL)
    return TC_NIL;
  const tspan_t *s = SP(t, *slot);
  return s->location != LOC_DEAD && s->start == page ? *slot : TC_NIL;
}

static sim_addr_t span_addr(const tcmalloc_model_t *t, const tspan_t *s) {
  return s->start << t->page_shift;
}

/* Circular doubly linked lists with a head record (span.cc DLL_*). */
static void dll_init(tcmalloc_model_t *t, uint32_t h) {
  SP(t, h)->next = SP(t, h)->prev = h;
  SP(t, h)->location = LOC_HEAD;
}

static bool dll_empty(tcmalloc_model_t *t, uint32_t h) {
  return SP(t, h)->next == h;
}

static void dll_remove(tcmalloc_model_t *t, uint32_t i) {
  tspan_t *s = SP(t, i);
  SP(t, s->prev)->next = s->next;
  SP(t, s->next)->prev = s->prev;
  s->prev = s->next = TC_NIL;
}

static void dll_prepend(tcmalloc_model_t *t, uint32_t h, uint32_t i) {
  tspan_t *s = SP(t, i);
  s->next = SP(t, h)->next;
  s->prev = h;
  SP(t, s->next)->prev = i;
  SP(t, h)->next = i;
}

/* ---- Large span sets (treap) -------------------------------------------- */

/* large_normal_ / large_returned_ are std::sets ordered by SpanBestFitLess
 * (span.h:63-66, 105-111): by length, then start. */
static bool set_less(const tspan_t *a, const tspan_t *b) {
  return a->length < b->length ||
         (a->length == b->length && a->start < b->start);
}

/* A span's treap priority: MurmurHash3's fmix32 of its number, a
 * bijection, so no two spans tie.  The set's order is its key's
 * (set_less); the priorities shape the tree, which changes only what a
 * search costs, never what it finds. */
static uint32_t span_prio(uint32_t i) {
  i ^= i >> 16;
  i *= 0x85ebca6bu;
  i ^= i >> 13;
  i *= 0xc2b2ae35u;
  return i ^ (i >> 16);
}

static uint32_t treap_insert(tcmalloc_model_t *t, uint32_t root, uint32_t i) {
  if (root == TC_NIL)
    return i;
  tspan_t *r = SP(t, root), *s = SP(t, i);
  if (set_less(s, r)) {
    r->tl = treap_insert(t, r->tl, i);
    if (span_prio(r->tl) > span_prio(root)) { /* rotate right */
      uint32_t l = r->tl;
      r->tl = SP(t, l)->tr;
      SP(t, l)->tr = root;
      return l;
    }
  } else {
    r->tr = treap_insert(t, r->tr, i);
    if (span_prio(r->tr) > span_prio(root)) { /* rotate left */
      uint32_t rr = r->tr;
      r->tr = SP(t, rr)->tl;
      SP(t, rr)->tl = root;
      return rr;
    }
  }
  return root;
}

static uint32_t treap_join(tcmalloc_model_t *t, uint32_t a, uint32_t b) {
  if (a == TC_NIL)
    return b;
  if (b == TC_NIL)
    return a;
  if (span_prio(a) > span_prio(b)) {
    SP(t, a)->tr = treap_join(t, SP(t, a)->tr, b);
    return a;
  }
  SP(t, b)->tl = treap_join(t, a, SP(t, b)->tl);
  return b;
}

static uint32_t treap_erase(tcmalloc_model_t *t, uint32_t root, uint32_t i) {
  if (root == i) {
    uint32_t j = treap_join(t, SP(t, i)->tl, SP(t, i)->tr);
    SP(t, i)->tl = SP(t, i)->tr = TC_NIL;
    return j;
  }
  tspan_t *r = SP(t, root);
  if (set_less(SP(t, i), r))
    r->tl = treap_erase(t, r->tl, i);
  else
    r->tr = treap_erase(t, r->tr, i);
  return root;
}

/* upper_bound(SpanPtrWithLength{length n, start 0}): the first span with
 * length >= n (page_heap.cc:173-178; no span starts at page 0). */
static uint32_t treap_first_fit(tcmalloc_model_t *t, uint32_t root,
                                uint64_t n) {
  uint32_t best = TC_NIL;
  while (root != TC_NIL) {
    if (SP(t, root)->length >= n) {
      best = root;
      root = SP(t, root)->tl;
    } else {
      root = SP(t, root)->tr;
    }
  }
  return best;
}

/* ---- Page heap ---------------------------------------------------------- */

static uint64_t npages(const tcmalloc_model_t *t, uint64_t bytes) {
  return (bytes >> t->page_shift) + ((bytes & (t->page - 1)) > 0);
}

static double release_rate(const tcmalloc_model_t *t) {
  return t->flags_ready ? t->release_rate : 0.0;
}

/* PrependToFreeList (page_heap.cc:391-415).  A span longer than kMaxPages
 * goes into a std::set, whose node comes from an STLPageHeapAllocator
 * initialised on first use (page_heap_allocator.h:151-155). */
static void prepend_to_free_list(tcmalloc_model_t *t, uint32_t i) {
  uint64_t bytes = SP(t, i)->length << t->page_shift;
  if (SP(t, i)->location == LOC_NORMAL)
    t->free_bytes += bytes;
  else
    t->unmapped_bytes += bytes;
  if (SP(t, i)->length > t->max_pages) {
    if (!t->setnode_pool.inited)
      pool_init(t, &t->setnode_pool, TC_SETNODE_BYTES);
    SP(t, i)->node = pool_new(t, &t->setnode_pool);
    SP(t, i)->tl = SP(t, i)->tr = TC_NIL; /* were its class's fields */
    if (!t->stl_insert_paged) {
      t->stl_insert_paged = true;
      touch(t, t->stl_text, TC_STL_WINDOW);
    }
    if (SP(t, i)->location == LOC_RETURNED)
      t->large_returned = treap_insert(t, t->large_returned, i);
    else
      t->large_normal = treap_insert(t, t->large_normal, i);
    return;
  }
  uint64_t len = SP(t, i)->length;
  dll_prepend(t,
              SP(t, i)->location == LOC_NORMAL ? t->free_normal[len - 1]
                                               : t->free_returned[len - 1],
              i);
}

/* RemoveFromFreeList (page_heap.cc:417-435). */
static void remove_from_free_list(tcmalloc_model_t *t, uint32_t i) {
  tspan_t *s = SP(t, i);
  uint64_t bytes = s->length << t->page_shift;
  if (s->location == LOC_NORMAL)
    t->free_bytes -= bytes;
  else
    t->unmapped_bytes -= bytes;
  if (s->length > t->max_pages) {
    if (s->location == LOC_RETURNED)
      t->large_returned = treap_erase(t, t->large_returned, i);
    else
      t->large_normal = treap_erase(t, t->large_normal, i);
    pool_delete(t, &t->setnode_pool, s->node);
    s->node = 0;
    if (!t->stl_erase_paged) {
      t->stl_erase_paged = true;
      touch(t, t->stl_text + TC_STL_WINDOW, TC_STL_WINDOW);
    }
  } else {
    dll_remove(t, i);
  }
}

/* CommitSpan (page_heap.cc:235-242): TCMalloc_SystemCommit is a no-op on
 * Linux (system-alloc.cc:564-575); the pages come back as they are
 * written. */
static void commit_span(tcmalloc_model_t *t, uint32_t i) {
  uint64_t bytes = SP(t, i)->length << t->page_shift;
  t->commit_count++;
  t->committed_bytes += bytes;
  t->total_commit_bytes += bytes;
}

/* DecommitSpan (page_heap.cc:244-255). */
static bool decommit_span(tcmalloc_model_t *t, uint32_t i) {
  uint64_t bytes = SP(t, i)->length << t->page_shift;
  t->decommit_count++;
  if (!system_release(t, span_addr(t, SP(t, i)), bytes))
    return false;
  t->committed_bytes -= bytes;
  t->total_decommit_bytes += bytes;
  return true;
}

static uint64_t release_at_least(tcmalloc_model_t *t, uint64_t num_pages);

/* EnsureLimit (page_heap.cc:521-543). */
static bool ensure_limit(tcmalloc_model_t *t, uint64_t n, bool with_release) {
  /* FLAGS_tcmalloc_heap_limit_mb is an int64 (page_heap.cc:55): a size_t
   * set above INT64_MAX reads negative and shifts arithmetically. */
  int64_t  mb = t->flags_ready ? (int64_t)t->heap_limit_mb : 0;
  uint64_t limit =
      (uint64_t)((int64_t)((uint64_t)mb * 1024 * 1024) >> t->page_shift);
  if (limit == 0)
    return true;
  uint64_t taken = t->system_taken >> t->page_shift;
  taken -= t->unmapped_bytes >> t->page_shift;
  if (taken + n > limit && with_release)
    taken -= release_at_least(t, taken + n - limit);
  return taken + n <= limit;
}

/* Carve (page_heap.cc:257-296). */
static uint32_t carve(tcmalloc_model_t *t, uint32_t i, uint64_t n) {
  uint8_t old = SP(t, i)->location;
  remove_from_free_list(t, i);
  SP(t, i)->location = LOC_IN_USE;
  uint64_t extra = SP(t, i)->length - n;
  if (extra > 0) {
    uint32_t left = new_span(t, SP(t, i)->start + n, extra);
    if (left == TC_NIL)
      return TC_NIL;
    SP(t, left)->location = old;
    record_span(t, left);
    prepend_to_free_list(t, left); /* no coalescing candidates (274-283) */
    SP(t, i)->length = n;
    pm_set(t, SP(t, i)->start + n - 1, i);
  }
  if (old == LOC_RETURNED)
    commit_span(t, i);
  return i;
}

static uint32_t treap_min(tcmalloc_model_t *t, uint32_t root) {
  while (root != TC_NIL && SP(t, root)->tl != TC_NIL)
    root = SP(t, root)->tl;
  return root;
}

/* AllocLarge (page_heap.cc:168-217): best fit, a normal span unless a
 * returned one is shorter, or as long and lower. */
static uint32_t alloc_large(tcmalloc_model_t *t, uint64_t n) {
  uint32_t best_normal = treap_first_fit(t, t->large_normal, n);
  uint32_t best = best_normal;
  uint32_t c = treap_first_fit(t, t->large_returned, n);
  if (c != TC_NIL &&
      (best_normal == TC_NIL || SP(t, c)->length < SP(t, best)->length ||
       (SP(t, c)->length == SP(t, best)->length &&
        SP(t, c)->start < SP(t, best)->start)))
    best = c;
  if (best == best_normal)
    return best == TC_NIL ? TC_NIL : carve(t, best, n);
  if (ensure_limit(t, n, false))
    return carve(t, best, n);
  if (ensure_limit(t, n, true))
    return alloc_large(t, n);
  return TC_NIL;
}

/* SearchFreeAndLargeLists (page_heap.cc:78-109): the exact-size lists from
 * n pages up, the normal list before the returned one, then the sets. */
static uint32_t search_free_and_large(tcmalloc_model_t *t, uint64_t n) {
  for (uint64_t s = n; s <= t->max_pages; s++) {
    uint32_t h = t->free_normal[s - 1];
    if (!dll_empty(t, h))
      return carve(t, SP(t, h)->next, n);
    h = t->free_returned[s - 1];
    if (!dll_empty(t, h) && ensure_limit(t, n, true) && !dll_empty(t, h))
      return carve(t, SP(t, h)->next, n);
  }
  return alloc_large(t, n);
}

/* CheckAndHandlePreMerge (page_heap.cc:319-337). */
static uint32_t pre_merge(tcmalloc_model_t *t, uint32_t i, uint32_t other) {
  if (other == TC_NIL)
    return TC_NIL;
  if (t->aggressive && SP(t, other)->location == LOC_NORMAL &&
      SP(t, i)->location == LOC_RETURNED) {
    if (!decommit_span(t, other))
      return TC_NIL;
  } else if (SP(t, other)->location != SP(t, i)->location) {
    return TC_NIL;
  }
  remove_from_free_list(t, other);
  return other;
}

/* MergeIntoFreeList (page_heap.cc:339-389). */
static void merge_into_free_list(tcmalloc_model_t *t, uint32_t i) {
  uint64_t p = SP(t, i)->start, n = SP(t, i)->length;
  if (t->aggressive && SP(t, i)->location == LOC_NORMAL && decommit_span(t, i))
    SP(t, i)->location = LOC_RETURNED;
  uint32_t prev = pre_merge(t, i, span_ending_at(t, p - 1));
  if (prev != TC_NIL) {
    uint64_t len = SP(t, prev)->length;
    delete_span(t, prev);
    SP(t, i)->start -= len;
    SP(t, i)->length += len;
    pm_set(t, SP(t, i)->start, i);
  }
  uint32_t next = pre_merge(t, i, span_starting_at(t, p + n));
  if (next != TC_NIL) {
    uint64_t len = SP(t, next)->length;
    delete_span(t, next);
    SP(t, i)->length += len;
    pm_set(t, SP(t, i)->start + SP(t, i)->length - 1, i);
  }
  prepend_to_free_list(t, i);
}

/* ReleaseSpan (page_heap.cc:470-482). */
static uint64_t release_span(tcmalloc_model_t *t, uint32_t i) {
  if (!decommit_span(t, i))
    return 0;
  remove_from_free_list(t, i);
  uint64_t n = SP(t, i)->length;
  SP(t, i)->location = LOC_RETURNED;
  merge_into_free_list(t, i);
  return n;
}

/* ReleaseAtLeastNPages (page_heap.cc:484-519): round robin from the list
 * after the last one released from; a list gives its oldest span (tail),
 * the large set its smallest. */
static uint64_t release_at_least(tcmalloc_model_t *t, uint64_t num_pages) {
  uint64_t released = 0;
  int64_t  lists = (int64_t)t->max_pages;
  while (released < num_pages && t->free_bytes > 0 && t->fail == AS_OK) {
    for (int64_t i = 0; i < lists + 1 && released < num_pages;
         i++, t->release_index++) {
      uint32_t s;
      if (t->release_index > lists)
        t->release_index = 0;
      if (t->release_index == lists) {
        if (t->large_normal == TC_NIL)
          continue;
        s = treap_min(t, t->large_normal);
      } else {
        uint32_t h = t->free_normal[t->release_index];
        if (dll_empty(t, h))
          continue;
        s = SP(t, h)->prev;
      }
      uint64_t len = release_span(t, s);
      if (len == 0)
        return released;
      released += len;
    }
  }
  return released;
}

/* IncrementalScavenge (page_heap.cc:437-468). */
static void incremental_scavenge(tcmalloc_model_t *t, uint64_t n) {
  t->scavenge_counter -= (int64_t)n;
  if (t->scavenge_counter >= 0)
    return;
  double rate = release_rate(t);
  if (rate <= 1e-6) {
    t->scavenge_counter = TC_DEFAULT_RELEASE_DELAY;
    return;
  }
  t->scavenge_count++;
  uint64_t released = release_at_least(t, 1);
  if (released == 0) {
    t->scavenge_counter = TC_DEFAULT_RELEASE_DELAY;
  } else {
    double wait = 1000.0 / rate * (double)released;
    if (wait > (double)TC_MAX_RELEASE_DELAY)
      wait = (double)TC_MAX_RELEASE_DELAY;
    t->scavenge_counter = (int64_t)wait;
  }
}

/* Delete (page_heap.cc:298-312). */
static void page_heap_delete(tcmalloc_model_t *t, uint32_t i) {
  uint64_t n = SP(t, i)->length;
  SP(t, i)->sizeclass = 0;
  SP(t, i)->location = LOC_NORMAL;
  merge_into_free_list(t, i);
  incremental_scavenge(t, n);
}

/* TCMalloc_PageMap2::Ensure (pagemap.h:162-182): every 2^LEAF_BITS pages of
 * address space the heap reaches cost a leaf of pointers, MetaDataAlloc'd
 * and memset (all of it resident).  BITS = 48 - page shift
 * (page_heap.h:93-96), LEAF_BITS = (BITS + 1) / 2 (pagemap.h:123). */
static bool ensure_leaves(tcmalloc_model_t *t, uint64_t start, uint64_t n) {
  unsigned leaf_bits = (TC_ADDRESS_BITS - t->page_shift + 1) / 2;
  for (uint64_t key = start; key <= start + n - 1;) {
    uint64_t i1 = key >> leaf_bits;
    uint64_t pos = 0;
    while (pos < t->nleaves && t->leaves_made[pos] < i1)
      pos++;
    if (pos == t->nleaves || t->leaves_made[pos] != i1) {
      uint64_t   bytes = UINT64_C(8) << leaf_bits;
      sim_addr_t leaf = meta_alloc(t, bytes);
      if (leaf == 0 || !grow((void **)&t->leaves_made, &t->capleaves,
                             t->nleaves + 1, sizeof *t->leaves_made))
        return false;
      touch(t, leaf, bytes);
      memmove(t->leaves_made + pos + 1, t->leaves_made + pos,
              (size_t)(t->nleaves - pos) * sizeof *t->leaves_made);
      t->leaves_made[pos] = i1;
      t->nleaves++;
    }
    key = (i1 + 1) << leaf_bits;
  }
  return true;
}

/* GrowHeap (page_heap.cc:616-677): at least kMinSystemAlloc (= kMaxPages)
 * pages; the new region is Delete()d, so it coalesces with free neighbours
 * and counts towards IncrementalScavenge.  Its PreallocateMoreMemory once
 * the heap passes 128 MiB (655-658, page_heap.h:236) does nothing to the
 * two-level pagemap of x86-64 (pagemap.h:184-189: only below 20 bits). */
static bool grow_heap(tcmalloc_model_t *t, uint64_t n) {
  if (n > (~UINT64_C(0) >> t->page_shift))
    return false;
  uint64_t   ask = n > t->max_pages ? n : t->max_pages, actual = 0;
  sim_addr_t ptr = 0;
  if (ensure_limit(t, ask, true))
    ptr = system_alloc(t, ask << t->page_shift, &actual, t->page);
  if (ptr == 0 && n < ask) {
    ask = n;
    if (ensure_limit(t, ask, true))
      ptr = system_alloc(t, ask << t->page_shift, &actual, t->page);
  }
  if (ptr == 0)
    return false;
  ask = actual >> t->page_shift;
  pool_new(t, &t->stack_pool); /* RecordGrowth (608-614): never freed */
  t->reserve_count++;
  t->commit_count++;
  t->system_bytes += ask << t->page_shift;
  t->committed_bytes += ask << t->page_shift;
  t->total_commit_bytes += ask << t->page_shift;
  t->total_reserve_bytes += ask << t->page_shift;
  uint64_t p = ptr >> t->page_shift;
  if (!ensure_leaves(t, p - 1, ask + 2))
    return false;
  uint32_t i = new_span(t, p, ask);
  if (i == TC_NIL)
    return false;
  record_span(t, i);
  page_heap_delete(t, i);
  return t->fail == AS_OK;
}

/* New (page_heap.cc:113-166). */
static uint32_t page_heap_new(tcmalloc_model_t *t, uint64_t n) {
  uint32_t r = search_free_and_large(t, n);
  if (r != TC_NIL || t->fail != AS_OK)
    return r;
  uint64_t sys = t->system_bytes;
  if (t->free_bytes != 0 && t->unmapped_bytes != 0 &&
      t->free_bytes + t->unmapped_bytes >= sys / 4 &&
      sys / TC_FORCED_COALESCE !=
          (sys + (n << t->page_shift)) / TC_FORCED_COALESCE) {
    /* 121-151: release everything so that free and returned neighbours
     * coalesce before the heap grows. */
    release_at_least(t, 0x7fffffff);
    r = search_free_and_large(t, n);
    if (r != TC_NIL || t->fail != AS_OK)
      return r;
  }
  if (!grow_heap(t, n)) {
    set_fail(t, AS_ENOMEM, "the system allocator failed");
    return TC_NIL;
  }
  return search_free_and_large(t, n);
}

/* Split (page_heap.cc:219-233): the tail as a new in-use span. */
static uint32_t split(tcmalloc_model_t *t, uint32_t i, uint64_t n) {
  uint64_t extra = SP(t, i)->length - n;
  uint32_t left = new_span(t, SP(t, i)->start + n, extra);
  if (left == TC_NIL)
    return TC_NIL;
  record_span(t, left);
  pm_set(t, SP(t, i)->start + n - 1, i);
  SP(t, i)->length = n;
  return left;
}

/* ---- Central free lists ------------------------------------------------- */

static tspan_t *span_of(tcmalloc_model_t *t, tobj_t o) {
  return SP(t, OBJ_SPAN(o));
}

/* The objects size-class span s holds. */
static uint32_t span_objects(const tcmalloc_model_t *t, const tspan_t *s) {
  return t->sm.objects[s->sizeclass];
}

static bool span_has_free(const tcmalloc_model_t *t, const tspan_t *s) {
  return s->nstack > 0 || s->virgin < span_objects(t, s);
}

/* FetchFromOneSpans (central_freelist.cc:288-315): up to n objects from the
 * first non-empty span, head first: returned slots (LIFO), then the slots
 * Populate threaded in address order and nobody took yet. */
static uint32_t fetch_from_one_spans(tcmalloc_model_t *t, uint32_t cl,
                                     uint32_t n, tobj_t *out) {
  tcentral_t *c = &t->central[cl];
  if (dll_empty(t, c->nonempty))
    return 0;
  uint32_t i = SP(t, c->nonempty)->next, k = 0;
  tspan_t *s = SP(t, i);
  while (k < n && span_has_free(t, s))
    out[k++] = OBJ(i, s->nstack ? s->stack[--s->nstack] : s->virgin++);
  if (!span_has_free(t, s)) {
    dll_remove(t, i);
    dll_prepend(t, c->empty, i);
  }
  s->refcount += k;
  c->counter -= k;
  return k;
}

/* Populate (central_freelist.cc:318-365): a span of class_to_pages pages,
 * its free list threaded through every object, which writes each object's
 * first word. */
static void populate(tcmalloc_model_t *t, uint32_t cl) {
  uint32_t i = page_heap_new(t, t->sm.pages[cl]);
  if (i == TC_NIL)
    return;
  tspan_t   *s = SP(t, i);
  uint64_t   size = t->sm.size[cl];
  uint64_t   num = t->sm.objects[cl];
  sim_addr_t base = span_addr(t, s);
  s->sizeclass = (uint8_t)cl; /* RegisterSizeClass, page_heap.cc:545-554 */
  s->refcount = 0;
  s->virgin = 0;
  s->stack = NULL; /* the large-set fields it had read as these */
  s->nstack = s->capstack = 0;
  if (size <= t->os_page) /* an object starts in every OS page */
    touch(t, base, (num - 1) * size + sizeof(void *));
  else
    for (uint64_t k = 0; k < num; k++)
      touch(t, base + k * size, sizeof(void *));
  dll_prepend(t, t->central[cl].nonempty, i);
  t->central[cl].num_spans++;
  t->central[cl].counter += num;
}

/* ReleaseToSpans (central_freelist.cc:104-147): the span's last object
 * back sends the span to the page heap. */
static void release_to_spans(tcmalloc_model_t *t, uint32_t cl, tobj_t o) {
  tcentral_t *c = &t->central[cl];
  uint32_t    i = OBJ_SPAN(o);
  tspan_t    *s = span_of(t, o);
  if (!span_has_free(t, s)) {
    dll_remove(t, i);
    dll_prepend(t, c->nonempty, i);
  }
  c->counter++;
  if (--s->refcount == 0) {
    c->counter -= span_objects(t, s);
    dll_remove(t, i);
    c->num_spans--;
    free(s->stack);
    s->stack = NULL;
    s->nstack = s->capstack = 0;
    page_heap_delete(t, i);
    return;
  }
  if (s->nstack == s->capstack) { /* nstack < span_objects <= UINT16_MAX */
    uint32_t cap = s->capstack ? 2u * s->capstack : 8;
    cap = cap < span_objects(t, s) ? cap : span_objects(t, s);
    uint16_t *p = realloc(s->stack, cap * sizeof *p);
    if (p == NULL) {
      set_fail(t, AS_ENOMEM, "out of memory for span free lists");
      return;
    }
    s->stack = p;
    s->capstack = (uint16_t)cap;
  }
  s->stack[s->nstack++] = (uint16_t)OBJ_SLOT(o);
}

static void release_list_to_spans(tcmalloc_model_t *t, uint32_t cl,
                                  const tobj_t *v, uint32_t n) {
  for (uint32_t k = 0; k < n && t->fail == AS_OK; k++)
    release_to_spans(t, cl, v[k]);
}

static bool shrink_cache(tcmalloc_model_t *t, uint32_t cl, bool force);

/* EvictRandomSizeClass (central_freelist.cc:149-163): not random, a
 * round robin over every class, class 0 included. */
static bool evict_random(tcmalloc_model_t *t, uint32_t locked, bool force) {
  int64_t c = t->race_counter++, n = t->sm.nclasses;
  if (c >= n) {
    while (c >= n)
      c -= n;
    t->race_counter = c;
  }
  if ((uint32_t)c == locked)
    return false;
  return shrink_cache(t, (uint32_t)c, force);
}

/* ShrinkCache (central_freelist.cc:201-227). */
static bool shrink_cache(tcmalloc_model_t *t, uint32_t cl, bool force) {
  tcentral_t *c = &t->central[cl];
  if (c->cache_size == 0 || (!force && c->used_slots == c->cache_size))
    return false;
  c->cache_size--;
  if (c->used_slots == c->cache_size + 1) {
    c->used_slots--;
    uint32_t b = t->sm.batch[cl];
    release_list_to_spans(t, cl, c->slots + (uint64_t)c->used_slots * b, b);
  }
  return true;
}

/* MakeCacheSpace (central_freelist.cc:165-184). */
static bool make_cache_space(tcmalloc_model_t *t, uint32_t cl) {
  tcentral_t *c = &t->central[cl];
  if (c->used_slots < c->cache_size)
    return true;
  if (c->cache_size == c->max_cache_size)
    return false;
  if ((evict_random(t, cl, false) || evict_random(t, cl, true)) &&
      c->cache_size < c->max_cache_size) {
    c->cache_size++;
    return true;
  }
  return false;
}

/* InsertRange (central_freelist.cc:229-242): a whole batch into a transfer
 * cache entry, else object by object to the spans. */
static void insert_range(tcmalloc_model_t *t, uint32_t cl, const tobj_t *v,
                         uint32_t n) {
  tcentral_t *c = &t->central[cl];
  uint32_t    b = t->sm.batch[cl];
  if (n == b && make_cache_space(t, cl)) {
    memcpy(c->slots + (uint64_t)c->used_slots++ * b, v, n * sizeof *v);
    return;
  }
  release_list_to_spans(t, cl, v, n);
}

/* RemoveRange (central_freelist.cc:244-276): a transfer entry for a whole
 * batch, else spans; later chunks go in front of the earlier ones
 * (SLL_PushRange). */
static uint32_t remove_range(tcmalloc_model_t *t, uint32_t cl, uint32_t n,
                             tobj_t *out) {
  tcentral_t *c = &t->central[cl];
  uint32_t    b = t->sm.batch[cl];
  if (n == b && c->used_slots > 0) {
    memcpy(out, c->slots + (uint64_t)--c->used_slots * b, n * sizeof *out);
    return n;
  }
  uint32_t got = fetch_from_one_spans(t, cl, n, out);
  if (got == 0) { /* FetchFromOneSpansSafe (279-286) */
    populate(t, cl);
    if (t->fail != AS_OK)
      return 0;
    got = fetch_from_one_spans(t, cl, n, out);
  }
  while (got != 0 && got < n) {
    uint32_t k = fetch_from_one_spans(t, cl, n - got, t->chain2);
    if (k == 0)
      break;
    memmove(out + k, out, got * sizeof *out);
    memcpy(out, t->chain2, k * sizeof *out);
    got += k;
  }
  return got;
}

/* ---- Thread caches ------------------------------------------------------ */

static bool list_reserve(tcmalloc_model_t *t, tlist_t *l, uint32_t extra) {
  uint64_t cap = l->cap;
  if (!grow((void **)&l->v, &cap, (uint64_t)l->len + extra, sizeof *l->v)) {
    set_fail(t, AS_ENOMEM, "out of memory for thread caches");
    return false;
  }
  l->cap = (uint32_t)cap;
  return true;
}

/* FreeList::Pop / PopRange (thread_cache.h:212-242): from the head; the
 * low-water mark follows the length down. */
static tobj_t list_pop(tlist_t *l) {
  tobj_t o = l->v[--l->len];
  if (l->len < l->lowater)
    l->lowater = l->len;
  return o;
}

static void list_pop_range(tlist_t *l, uint32_t n, tobj_t *out) {
  for (uint32_t k = 0; k < n; k++)
    out[k] = l->v[l->len - 1 - k];
  l->len -= n;
  if (l->len < l->lowater)
    l->lowater = l->len;
}

/* PushRange (thread_cache.h:232-235): chain[0] becomes the head. */
static void list_push_range(tcmalloc_model_t *t, tlist_t *l,
                            const tobj_t *chain, uint32_t n) {
  if (!list_reserve(t, l, n))
    return;
  for (uint32_t k = n; k-- > 0;)
    l->v[l->len++] = chain[k];
}

static uint64_t class_size(const tcmalloc_model_t *t, uint32_t cl) {
  return t->sm.size[cl];
}

/* ReleaseToCentralCache (thread_cache.cc:191-209). */
static void release_to_central(tcmalloc_model_t *t, int32_t tc, uint32_t cl,
                               uint32_t n) {
  tcache_t *c = &t->caches[tc];
  tlist_t  *l = &c->list[cl];
  uint32_t  b = t->sm.batch[cl];
  if (n > l->len)
    n = l->len;
  int64_t delta = (int64_t)n * (int64_t)class_size(t, cl);
  while (n > b) {
    list_pop_range(l, b, t->chain);
    insert_range(t, cl, t->chain, b);
    n -= b;
  }
  list_pop_range(l, n, t->chain);
  insert_range(t, cl, t->chain, n);
  c->size -= delta;
}

/* IncreaseCacheLimitLocked (thread_cache.cc:250-278): from the unclaimed
 * budget while there is some, else 64 KiB from the next cache round robin
 * that has more than 512 KiB, ten tries at most. */
static void increase_cache_limit(tcmalloc_model_t *t, int32_t tc) {
  if (t->unclaimed > 0) {
    t->unclaimed -= TC_STEAL_AMOUNT;
    t->caches[tc].max_size += TC_STEAL_AMOUNT;
    return;
  }
  for (int i = 0; i < 10; ++i, t->next_steal = t->caches[t->next_steal].next) {
    if (t->next_steal < 0)
      t->next_steal = t->thread_heaps;
    if (t->next_steal < 0)
      return;
    tcache_t *v = &t->caches[t->next_steal];
    if (t->next_steal == tc || v->max_size <= TC_MIN_TC_SIZE)
      continue;
    v->max_size -= TC_STEAL_AMOUNT;
    t->caches[tc].max_size += TC_STEAL_AMOUNT;
    t->next_steal = v->next;
    return;
  }
}

/* Scavenge (thread_cache.cc:212-243): give back half of what each list
 * never dipped below since the last time. */
static void tc_scavenge(tcmalloc_model_t *t, int32_t tc) {
  for (uint32_t cl = 0; cl < t->sm.nclasses; cl++) {
    tlist_t *l = &t->caches[tc].list[cl];
    uint32_t low = l->lowater;
    if (low > 0) {
      release_to_central(t, tc, cl, low > 1 ? low / 2 : 1);
      uint32_t b = t->sm.batch[cl];
      if (l->max_length > b)
        l->max_length = l->max_length - b > b ? l->max_length - b : b;
    }
    l->lowater = l->len;
  }
  increase_cache_limit(t, tc);
}

/* ListTooLong (thread_cache.cc:160-188). */
static void list_too_long(tcmalloc_model_t *t, int32_t tc, uint32_t cl) {
  tcache_t *c = &t->caches[tc];
  tlist_t  *l = &c->list[cl];
  uint32_t  b = t->sm.batch[cl];
  c->size += (int64_t)class_size(t, cl);
  release_to_central(t, tc, cl, b);
  if (l->max_length < b) {
    l->max_length++;
  } else if (l->max_length > b && ++l->overages > TC_MAX_OVERAGES) {
    l->max_length -= b;
    l->overages = 0;
  }
  if (c->size > c->max_size)
    tc_scavenge(t, tc);
}

/* Deallocate (thread_cache.h:386-406). */
static void tc_deallocate(tcmalloc_model_t *t, int32_t tc, uint32_t cl,
                          tobj_t o) {
  tcache_t *c = &t->caches[tc];
  tlist_t  *l = &c->list[cl];
  if (!list_reserve(t, l, 1))
    return;
  l->v[l->len++] = o;
  if (l->len > l->max_length) {
    list_too_long(t, tc, cl);
    return;
  }
  c->size += (int64_t)class_size(t, cl);
  if (c->size > c->max_size)
    tc_scavenge(t, tc);
}

/* Allocate and FetchFromCentralCache (thread_cache.h:366-384,
 * thread_cache.cc:117-158): slow start of max_length up to the batch, then
 * whole batches (capped at 8192). */
static tobj_t tc_allocate(tcmalloc_model_t *t, int32_t tc, uint32_t cl) {
  tcache_t *c = &t->caches[tc];
  tlist_t  *l = &c->list[cl];
  if (l->len > 0) {
    c->size -= (int64_t)class_size(t, cl);
    return list_pop(l);
  }
  uint32_t b = t->sm.batch[cl];
  uint32_t num = l->max_length < b ? l->max_length : b;
  uint32_t got = remove_range(t, cl, num, t->chain);
  if (got == 0) {
    set_fail(t, AS_ENOMEM, "a central free list is out of memory");
    return 0;
  }
  tobj_t first = t->chain[0];
  if (got > 1) {
    c->size += (int64_t)class_size(t, cl) * (got - 1);
    list_push_range(t, l, t->chain + 1, got - 1);
  }
  if (l->max_length < b) {
    l->max_length++;
  } else {
    uint32_t nl = l->max_length + b;
    if (nl > TC_MAX_DYN_LIST_LEN)
      nl = TC_MAX_DYN_LIST_LEN;
    l->max_length = nl - nl % b;
  }
  return first;
}

/* NewHeap + ThreadCache::Init (thread_cache.cc:407-423, 78-104). */
static int32_t new_cache(tcmalloc_model_t *t) {
  uint32_t i = 0;
  while (i < t->ncaches && t->caches[i].in_use)
    i++;
  if (i == t->ncaches) {
    uint64_t cap = t->capcaches;
    if (!grow((void **)&t->caches, &cap, (uint64_t)t->ncaches + 1,
              sizeof *t->caches)) {
      set_fail(t, AS_ENOMEM, "out of memory for thread caches");
      return -1;
    }
    t->capcaches = (uint32_t)cap;
    t->ncaches++;
  }
  tcache_t *c = &t->caches[i];
  c->meta = pool_new(t, &t->cache_pool);
  c->in_use = true;
  c->size = 0;
  c->max_size = 0;
  increase_cache_limit(t, (int32_t)i);
  if (c->max_size == 0) {
    c->max_size = TC_MIN_TC_SIZE;
    t->unclaimed -= TC_MIN_TC_SIZE;
  }
  for (uint32_t cl = 0; cl < TC_CLASS_SIZES_MAX; cl++) {
    tlist_t *l = &c->list[cl];
    l->len = 0;
    l->lowater = 0;
    l->max_length = 1;
    l->overages = 0;
  }
  c->prev = -1;
  c->next = t->thread_heaps;
  if (t->thread_heaps >= 0)
    t->caches[t->thread_heaps].prev = (int32_t)i;
  else
    t->next_steal = (int32_t)i;
  t->thread_heaps = (int32_t)i;
  t->heap_count++;
  return (int32_t)i;
}

/* Cleanup (thread_cache.cc:106-113): every list to the central lists. */
static void tc_cleanup(tcmalloc_model_t *t, int32_t tc) {
  for (uint32_t cl = 0; cl < t->sm.nclasses; cl++)
    if (t->caches[tc].list[cl].len > 0)
      release_to_central(t, tc, cl, t->caches[tc].list[cl].len);
}

/* DeleteCache (thread_cache.cc:468-484), run by the thread-specific key's
 * destructor at thread exit. */
static void delete_cache(tcmalloc_model_t *t, int32_t tc) {
  tc_cleanup(t, tc);
  tcache_t *c = &t->caches[tc];
  if (c->next >= 0)
    t->caches[c->next].prev = c->prev;
  if (c->prev >= 0)
    t->caches[c->prev].next = c->next;
  if (t->thread_heaps == tc)
    t->thread_heaps = c->next;
  t->heap_count--;
  if (t->next_steal == tc)
    t->next_steal = c->next;
  if (t->next_steal < 0)
    t->next_steal = t->thread_heaps;
  t->unclaimed += c->max_size;
  pool_delete(t, &t->cache_pool, c->meta);
  c->in_use = false;
}

/* set_overall_thread_cache_size + RecomputePerThreadCacheSize
 * (thread_cache.cc:520-527, 486-507). */
static void set_overall_cache_size(tcmalloc_model_t *t, uint64_t new_size) {
  if (new_size < TC_MIN_TC_SIZE)
    new_size = TC_MIN_TC_SIZE;
  if (new_size > (UINT64_C(1) << 30))
    new_size = UINT64_C(1) << 30;
  t->overall_tc_size = new_size;
  int64_t  n = t->heap_count > 0 ? t->heap_count : 1;
  uint64_t space = new_size / (uint64_t)n;
  if (space < TC_MIN_TC_SIZE)
    space = TC_MIN_TC_SIZE;
  if (space > TC_MAX_TC_SIZE)
    space = TC_MAX_TC_SIZE;
  double  per = t->per_thread_tc_size > 1 ? (double)t->per_thread_tc_size : 1.0;
  double  ratio = (double)space / per;
  int64_t claimed = 0;
  for (int32_t h = t->thread_heaps; h >= 0; h = t->caches[h].next) {
    if (ratio < 1.0)
      t->caches[h].max_size = (int32_t)((double)t->caches[h].max_size * ratio);
    claimed += t->caches[h].max_size;
  }
  t->unclaimed = (int64_t)new_size - claimed;
  t->per_thread_tc_size = (int64_t)space;
}

/* The cache of a trace thread: GetCache creates one (thread_cache.h:
 * 428-439), GetCacheIfPresent does not (444-449). */
static int32_t cache_of(tcmalloc_model_t *t, uint32_t thread, bool create) {
  static const int32_t no_cache = -1;
  if (thread >= t->nthreads) {
    if (!create || !thread_table(t, (void **)&t->thread_cache, &t->nthreads,
                                 thread, sizeof *t->thread_cache, &no_cache))
      return -1;
  }
  if (t->thread_cache[thread] < 0 && create)
    t->thread_cache[thread] = new_cache(t);
  return t->thread_cache[thread];
}

/* ---- Front end ---------------------------------------------------------- */

static bool size_class(const tcmalloc_model_t *t, uint64_t size, uint32_t *cl) {
  if (size > TC_MAX_SIZE)
    return false;
  *cl = t->sm.class_array[class_index(size)];
  return true;
}

static sim_addr_t obj_addr(const tcmalloc_model_t *t, tobj_t o) {
  const tspan_t *s = &t->sp[OBJ_SPAN(o)];
  return span_addr(t, s) + (uint64_t)OBJ_SLOT(o) * class_size(t, s->sizeclass);
}

/* What malloc_usable_size says of a live object (GetSizeWithCallback,
 * tcmalloc.cc:1537-1562). */
static uint64_t obj_bytes(const tcmalloc_model_t *t, tobj_t o) {
  const tspan_t *s = &t->sp[OBJ_SPAN(o)];
  return s->sizeclass ? class_size(t, s->sizeclass)
                      : s->length << t->page_shift;
}

/* do_malloc (tcmalloc.cc:1376-1400): the thread's cache is created first,
 * for every size; above 256 KiB pages come straight from the page heap
 * (do_malloc_pages, 1342-1370). */
static tobj_t do_malloc(tcmalloc_model_t *t, uint32_t thread, uint64_t size) {
  int32_t  tc = cache_of(t, thread, true);
  uint32_t cl;
  if (tc < 0)
    return 0;
  if (size_class(t, size, &cl))
    return tc_allocate(t, tc, cl);
  uint32_t i = page_heap_new(t, npages(t, size));
  return i == TC_NIL ? 0 : OBJ(i, 0);
}

/* do_memalign_pages (tcmalloc.cc:1618-1659): pages for size + align, the
 * unaligned head and the unneeded tail split off and freed. */
static tobj_t do_memalign_pages(tcmalloc_model_t *t, uint64_t align,
                                uint64_t size) {
  if (size == 0)
    size = 1;
  uint32_t i = page_heap_new(t, npages(t, size + align));
  if (i == TC_NIL)
    return 0;
  uint64_t skip = 0;
  while ((((SP(t, i)->start + skip) << t->page_shift) & (align - 1)) != 0)
    skip++;
  if (skip > 0) {
    uint32_t rest = split(t, i, skip);
    if (rest == TC_NIL)
      return 0;
    page_heap_delete(t, i);
    i = rest;
  }
  uint64_t needed = npages(t, size);
  if (SP(t, i)->length > needed) {
    uint32_t trailer = split(t, i, needed);
    if (trailer == TC_NIL)
      return 0;
    page_heap_delete(t, trailer);
  }
  return OBJ(i, 0);
}

/* tc_memalign (tcmalloc.cc:1903-1920, 2086-2089): up to a page of
 * alignment, a size class of the size rounded up to the alignment
 * (align_size_up, 1039-1053). */
static tobj_t do_memalign(tcmalloc_model_t *t, uint32_t thread, uint64_t align,
                          uint64_t size) {
  if (align > t->page)
    return do_memalign_pages(t, align, size);
  if (align == 0)
    align = 1;
  uint64_t up = (size + align - 1) & ~(align - 1);
  return do_malloc(t, thread, up == 0 ? (size == 0 ? align : size) : up);
}

/* do_free_with_callback (tcmalloc.cc:1467-1529): page allocations to the
 * page heap, objects to the thread's cache, or, for a thread that has
 * none, straight to the central list. */
static void do_free(tcmalloc_model_t *t, uint32_t thread, tobj_t o) {
  uint32_t cl = span_of(t, o)->sizeclass;
  if (cl == 0) {
    page_heap_delete(t, OBJ_SPAN(o));
    return;
  }
  int32_t tc = cache_of(t, thread, false);
  if (tc >= 0)
    tc_deallocate(t, tc, cl, o);
  else
    insert_range(t, cl, &o, 1);
}

/* ---- Start-up ----------------------------------------------------------- */

/* Static::InitStaticVars (static_vars.cc:80-111) and InitModule
 * (thread_cache.cc:284-302): the metadata allocators' first blocks (the
 * first MetaDataAlloc takes the first 8 MiB chunk), the two spans taken
 * "to reduce cache conflicts", the central lists and the page heap. */
static bool init_static_vars(tcmalloc_model_t *t) {
  as_err_t e;
  if (!kcheck(t,
              sim_kernel_mmap(t->kernel, 2 * TC_STL_WINDOW, TC_STL_WINDOW,
                              SIM_PROT_RW, SIM_OWNER_BASELINE, &t->stl_text,
                              &e),
              &e))
    return false;
  pool_init(t, &t->span_pool, TC_SPAN_BYTES);
  pool_new(t, &t->span_pool);
  pool_new(t, &t->span_pool);
  pool_init(t, &t->stack_pool, TC_STACKTRACE_BYTES);
  pool_init(t, &t->cache_pool, TC_THREADCACHE_BYTES);
  return t->fail == AS_OK;
}

/* The calls a Debian 12 process makes before main (file comment), while the
 * release-rate and heap-limit flags are still zero, around libstdc++'s pool
 * (pool_bytes, served from the first thread cache; its object returned):
 * TCMallocGuard's malloc(1) + free before and after InitTSD and, when
 * program_calls, the two MallocExtension objects (2.10 src/tcmalloc.cc:
 * 1132-1150, malloc_extension.cc:208-216).  None of them is freed.
 * 2.15 makes the same calls but the last two (measured with gdb): it
 * constructs both objects in static space (2.15 src/tcmalloc.cc:1132,
 * src/malloc_extension.cc:206-210).  2.16 (measured with gdb on tc_malloc/
 * tc_free/tc_new: malloc(72704), then malloc(1) + free twice; the
 * MallocExtension lives in static storage, 2.16 src/tcmalloc.cc:1211-1215):
 * the first malloc finds no thread-specific key, so GetReallySlow makes the
 * thread's cache and a leaked SlowTLS entry for it (src/thread_cache_ptr.cc:
 * 267-300); the free before InitThreadCachePtrLate sees no fast-path cache
 * and goes to the central list (tcmalloc.cc:1575, 1630-1632); the malloc
 * after it adopts the same cache as the thread's own (GetSlow,
 * thread_cache_ptr.cc:217-230, and TryToReleaseCacheFromAllocation,
 * 159-174), so, unlike 2.10, no cache is leaked. */
static tobj_t premain_calls(tcmalloc_model_t *t, uint64_t pool_bytes,
                            bool program_calls) {
  uint32_t cl;
  int32_t  first = t->version == TC_V2_16 ? cache_of(t, 0, true)
                                          : new_cache(t); /* no TSD yet */
  if (first < 0 || !size_class(t, pool_bytes, &cl))
    return 0;
  if (t->version == TC_V2_16)
    touch(t, meta_alloc(t, TC_SLOWTLS_ENTRY_BYTES), TC_SLOWTLS_ENTRY_BYTES);
  tobj_t pool = tc_allocate(t, first, cl);
  size_class(t, 1, &cl);
  tobj_t o = tc_allocate(t, first, cl);
  if (o != 0)
    insert_range(t, cl, &o, 1); /* no cache found: the central list */
  o = do_malloc(t, 0, 1);       /* thread 0's own cache from here on */
  if (o != 0)
    do_free(t, 0, o);
  if (program_calls && t->version < TC_V2_15) {
    t->extension[0] = do_malloc(t, 0, 16); /* new TCMallocImplementation */
    t->extension[1] = do_malloc(t, 0, 8);  /* new MallocExtension */
  }
  return pool;
}

/* premain=traced: the trace holds the calls the program's malloc and
 * operator new received before main (allocsim capture records from the
 * first), libstdc++'s pool first; tcmalloc's own calls, which reach no
 * symbol a recorder wraps, are made here, after that pool, as the process
 * made them.  A trace that starts otherwise gets the modelled calls. */
static tobj_t premain_traced(tcmalloc_model_t *t, const trace_event_t *ev) {
  uint32_t cl;
  tobj_t   o = 0;
  t->premain_pending = false;
  if (ev->thread == 0 && ev->op != TRACE_MEMALIGN &&
      size_class(t, ev->size, &cl))
    o = premain_calls(t, ev->size, false);
  else
    premain_calls(t, TC_PREMAIN_POOL, true);
  t->flags_ready = true;
  return o;
}

/* ---- Model interface ---------------------------------------------------- */

static as_status_t tc_alloc(model_t *m, const trace_event_t *ev,
                            as_err_t *err) {
  tcmalloc_model_t *t = (tcmalloc_model_t *)m;
  if (t->fail != AS_OK || !ensure_obj(t, ev->id))
    return report(t, err);
  tobj_t o = 0;
  if (__builtin_expect(t->premain_pending, 0))
    o = premain_traced(t, ev);
  if (o == 0 && t->fail == AS_OK)
    o = ev->op == TRACE_MEMALIGN
            ? do_memalign(t, ev->thread, ev->align, ev->size)
            : do_malloc(t, ev->thread, ev->size);
  if (t->fail != AS_OK)
    return report(t, err);
  obj_put(t, ev->id, o);
  t->live_bytes += ev->size;
  t->live_objects++;
  if (ev->op == TRACE_CALLOC) /* memset(nallocx(size)), tcmalloc.cc:1422 */
    touch(t, obj_addr(t, o), obj_bytes(t, o));
  else if (!(ev->flags & TRACE_FLAG_UNWRITTEN))
    touch(t, obj_addr(t, o), ev->size);
  return t->fail != AS_OK ? report(t, err) : AS_OK;
}

static as_status_t tc_free(model_t *m, const trace_event_t *ev, as_err_t *err) {
  tcmalloc_model_t *t = (tcmalloc_model_t *)m;
  if (t->fail != AS_OK)
    return report(t, err);
  tobj_t o = obj_get(t, ev->id);
  if (o == 0)
    return AS_OK; /* freed by realloc(p, 0): free(NULL) does nothing */
  obj_put(t, ev->id, 0);
  t->live_bytes -= ev->prev_size;
  t->live_objects--;
  do_free(t, ev->thread, o);
  return t->fail != AS_OK ? report(t, err) : AS_OK;
}

/* tc_realloc and do_realloc_with_callback (tcmalloc.cc:1999-2016,
 * 1566-1611): in place unless growing past the allocated size or shrinking
 * below half of it; growth by less than a quarter asks for old * 1.25. */
static as_status_t tc_realloc(model_t *m, const trace_event_t *ev,
                              as_err_t *err) {
  tcmalloc_model_t *t = (tcmalloc_model_t *)m;
  if (t->fail != AS_OK || !ensure_obj(t, ev->id))
    return report(t, err);
  tobj_t   old = obj_get(t, ev->id);
  uint64_t n = ev->size;
  bool     written = !(ev->flags & TRACE_FLAG_UNWRITTEN);
  if (old == 0) { /* realloc(NULL, n) after realloc(p, 0) */
    trace_event_t as_malloc = *ev;
    as_malloc.op = TRACE_MALLOC;
    t->live_bytes -= ev->prev_size;
    t->live_objects--;
    return tc_alloc(m, &as_malloc, err);
  }
  t->live_bytes = t->live_bytes - ev->prev_size + n;
  if (n == 0) {
    obj_put(t, ev->id, 0);
    t->live_objects--;
    do_free(t, ev->thread, old);
    return t->fail != AS_OK ? report(t, err) : AS_OK;
  }
  uint64_t old_size = obj_bytes(t, old);
  if (n > old_size || n < old_size / 2) {
    tobj_t fresh = 0;
    if (n > old_size && n < old_size + old_size / 4)
      fresh = do_malloc(t, ev->thread, old_size + old_size / 4);
    if (fresh == 0 && t->fail == AS_OK)
      fresh = do_malloc(t, ev->thread, n);
    if (t->fail != AS_OK)
      return report(t, err);
    uint64_t copy = old_size < n ? old_size : n;
    read_mem(t, obj_addr(t, old), copy);
    touch(t, obj_addr(t, fresh), written ? n : copy);
    obj_put(t, ev->id, fresh);
    do_free(t, ev->thread, old);
  } else if (written && n > ev->prev_size) {
    touch(t, obj_addr(t, old) + ev->prev_size, n - ev->prev_size);
  }
  return t->fail != AS_OK ? report(t, err) : AS_OK;
}

/* The thread's stack: tcmalloc preloaded into a glibc program (Debian's
 * libtcmalloc-minimal4) leaves pthread_create to glibc, whose nptl maps and
 * caches the stacks (models/nptl_stacks.c, glibc 2.36 nptl/allocatestack.c,
 * nptl/nptl-stack.c), as for jemalloc.  The main thread (0) runs on the
 * process stack. */
static void thread_stack(tcmalloc_model_t *t, const trace_event_t *ev) {
  if (ev->thread == 0 || t->fail != AS_OK)
    return;
  if (ev->thread >= t->stacks_cap &&
      (ev->op != TRACE_THREAD_START ||
       !thread_table(t, (void **)&t->stacks, &t->stacks_cap, ev->thread,
                     sizeof *t->stacks, NULL)))
    return;
  nptl_stack_t *st = &t->stacks[ev->thread];
  as_err_t      e = {0};
  /* exit, or an id started again */
  if (kcheck(t, nptl_stack_release(&t->nptl, st, &e), &e) &&
      ev->op == TRACE_THREAD_START)
    kcheck(t, nptl_stack_acquire(&t->nptl, st, &e), &e);
}

/* A thread's cache goes away at its exit (DestroyThreadCache, pthread key
 * destructor); it is made again at the first malloc of a new thread. */
static as_status_t tc_thread(model_t *m, const trace_event_t *ev,
                             as_err_t *err) {
  tcmalloc_model_t *t = (tcmalloc_model_t *)m;
  if (t->fail != AS_OK)
    return report(t, err);
  int32_t tc = cache_of(t, ev->thread, false);
  if (tc >= 0 && (ev->op == TRACE_THREAD_EXIT || ev->thread != 0)) {
    delete_cache(t, tc);
    t->thread_cache[ev->thread] = -1;
  }
  thread_stack(t, ev);
  return t->fail != AS_OK ? report(t, err) : AS_OK;
}

/* purge all = MallocExtension::ReleaseFreeMemory() = ReleaseToSystem(
 * SIZE_MAX) (malloc_extension.cc:166-168, tcmalloc.cc:888-910): every
 * normal span; caches keep what they hold.  purge tcache =
 * MarkThreadTemporarilyIdle (tcmalloc.cc:692-694: BecomeTemporarilyIdle,
 * thread_cache.cc:449-453): the calling thread's cache to the central
 * lists.  purge decay has no counterpart: AS_DONE. */
static as_status_t tc_purge(model_t *m, const trace_event_t *ev,
                            as_err_t *err) {
  tcmalloc_model_t *t = (tcmalloc_model_t *)m;
  if (t->fail != AS_OK)
    return report(t, err);
  if (ev->size == TRACE_PURGE_ALL) {
    release_at_least(t, ~UINT64_C(0) >> t->page_shift);
  } else if (ev->size == TRACE_PURGE_TCACHE) {
    int32_t tc = cache_of(t, ev->thread, false);
    if (tc >= 0)
      tc_cleanup(t, tc);
  } else {
    /* decay: gperftools releases only as pages are freed (the release
     * rate), with no call that runs it; no such notion, which the engine
     * counts (an error under --strict), as for a model without purge. */
    return AS_DONE;
  }
  return t->fail != AS_OK ? report(t, err) : AS_OK;
}

/* MallocExtension::SetNumericProperty (tcmalloc.cc:848-868) takes a size_t,
 * so a negative value is what the program passed cast to size_t (-1 is
 * SIZE_MAX); SetMemoryReleaseRate (913-915) takes a double, and a rate at or
 * below 1e-6 disables releasing (page_heap.cc:442-446). */
static as_status_t tc_set_option(model_t *m, const char *name, int64_t value,
                                 uint64_t now_ns, as_err_t *err) {
  tcmalloc_model_t *t = (tcmalloc_model_t *)m;
  (void)now_ns;
  if (t->fail != AS_OK)
    return report(t, err);
  switch (model_option_find(tcmalloc_options, name, strlen(name))) {
  case TO_RELEASE_RATE:
    t->release_rate = (double)value;
    break;
  case TO_MAX_TOTAL_THREAD_CACHE_BYTES:
    set_overall_cache_size(t, (uint64_t)value);
    break;
  case TO_AGGRESSIVE_DECOMMIT:
    t->aggressive = value != 0;
    break;
  case TO_HEAP_LIMIT_MB:
    t->heap_limit_mb = (uint64_t)value;
    break;
  default:
    return as_err_set(err, AS_EINVAL,
                      "tcmalloc: option %s cannot change at run time "
                      "(release_rate, max_total_thread_cache_bytes, "
                      "aggressive_decommit, heap_limit_mb can)",
                      name);
  }
  return AS_OK;
}

static void tc_totals(const tcmalloc_model_t *t, uint64_t *thread,
                      uint64_t *central, uint64_t *transfer) {
  *thread = *central = *transfer = 0;
  for (uint32_t i = 0; i < t->ncaches; i++)
    if (t->caches[i].in_use)
      *thread += (uint64_t)t->caches[i].size;
  /* ExtractStats (tcmalloc.cc:362-397): central bytes include each span's
   * unusable tail (OverheadBytes, central_freelist.cc:372-382). */
  for (uint32_t cl = 1; cl < t->sm.nclasses; cl++) {
    const tcentral_t *c = &t->central[cl];
    uint64_t          size = t->sm.size[cl];
    uint64_t tail = ((uint64_t)t->sm.pages[cl] << t->page_shift) % size;
    *central += size * c->counter + c->num_spans * tail;
    *transfer += size * (uint64_t)c->used_slots * t->sm.batch[cl];
  }
}

static size_t tc_counters(const model_t *m, model_counter_t *out, size_t cap) {
  const tcmalloc_model_t *t = (const tcmalloc_model_t *)m;
  uint64_t                thread, central, transfer;
  tc_totals(t, &thread, &central, &transfer);
  uint64_t allocated = t->system_bytes - thread - central - transfer -
                       t->free_bytes - t->unmapped_bytes;
  size_t n = 0;
#define PUT(name, v, unit, help)                                               \
  n = model_counter_put(out, n, cap, "tcmalloc", name, v, unit, help)
  PUT("heap_bytes", t->system_bytes, "bytes",
      "page heap bytes from the system (generic.heap_size)");
  PUT("current_allocated_bytes", allocated, "bytes",
      "heap bytes in objects handed out (generic.current_allocated_bytes)");
  PUT("pageheap_free_bytes", t->free_bytes, "bytes",
      "free spans still resident (tcmalloc.pageheap_free_bytes)");
  PUT("pageheap_unmapped_bytes", t->unmapped_bytes, "bytes",
      "free spans given back (tcmalloc.pageheap_unmapped_bytes)");
  PUT("thread_cache_bytes", thread, "bytes",
      "free objects in thread caches (tcmalloc.thread_cache_free_bytes)");
  PUT("central_cache_bytes", central, "bytes",
      "free objects in central lists (tcmalloc.central_cache_free_bytes)");
  PUT("transfer_cache_bytes", transfer, "bytes",
      "free objects in transfer caches (tcmalloc.transfer_cache_free_bytes)");
  PUT("metadata_bytes", t->metadata_bytes, "bytes",
      "metadata taken from the system");
  PUT("scavenge_count", t->scavenge_count, "count",
      "incremental scavenges (tcmalloc.pageheap_scavenge_count)");
  PUT("scavenge_countdown_pages",
      t->scavenge_counter > 0 ? (uint64_t)t->scavenge_counter : 0, "pages",
      "pages still to free to the page heap before the next scavenge");
  PUT("decommit_count", t->decommit_count, "count",
      "spans released (tcmalloc.pageheap_decommit_count)");
  PUT("total_decommit_bytes", t->total_decommit_bytes, "bytes",
      "bytes released over the run (tcmalloc.pageheap_total_decommit_bytes)");
  PUT("thread_caches", (uint64_t)t->heap_count, "count",
      "thread caches alive, the one leaked before main included");
  PUT("max_total_thread_cache_bytes", t->overall_tc_size, "bytes",
      "the thread caches' shared budget");
#undef PUT
  return n;
}

static void tc_stats(const model_t *m, model_stats_t *out) {
  const tcmalloc_model_t *t = (const tcmalloc_model_t *)m;
  uint64_t                thread, central, transfer;
  tc_totals(t, &thread, &central, &transfer);
  memset(out, 0, sizeof *out);
  out->live_bytes = t->live_bytes;
  out->live_objects = t->live_objects;
  out->mapped_bytes = t->system_bytes + t->metadata_bytes;
  out->arenas = t->reserve_count;
  out->free_bytes =
      thread + central + transfer + t->free_bytes + t->unmapped_bytes;
}

static bool tc_locate(const model_t *m, uint64_t id, sim_addr_t *addr) {
  const tcmalloc_model_t *t = (const tcmalloc_model_t *)m;
  tobj_t                  o = obj_get(t, id);
  if (o == 0)
    return false;
  *addr = obj_addr(t, o);
  return true;
}

/* nallocx (tcmalloc.cc:1072-1112). */
static uint64_t tc_usable_size(const model_t *m, uint64_t size,
                               uint8_t domain) {
  const tcmalloc_model_t *t = (const tcmalloc_model_t *)m;
  uint32_t                cl;
  (void)domain;
  if (size_class(t, size, &cl))
    return t->sm.size[cl];
  return npages(t, size) << t->page_shift;
}

/* ---- Heap map (model_walk) ---------------------------------------------- */

static const model_mechanism_t tcmalloc_mechanisms[] = {
    {"tcmalloc.small", "small objects in size-class spans",
     "Requests up to 256 KiB get an object of their size class, carved from "
     "a span of a few pages that holds a whole number of them (Populate, "
     "central_freelist.cc:318-365).",
     "freeing the objects", true},
    {"tcmalloc.large", "large objects in spans of their own",
     "Larger requests get whole pages (8 KiB on Debian) straight from the "
     "page heap (do_malloc_pages, tcmalloc.cc:1342-1370).",
     "freeing the objects", true},
    {"tcmalloc.thread_cache", "freed objects in per-thread caches",
     "free() keeps objects in the calling thread's list of their class, up "
     "to the caches' shared budget (32 MiB by default, common.h:97); to the "
     "central lists and spans they are still allocated (Deallocate, "
     "thread_cache.h:386-406).",
     "the list growing too long (ListTooLong, thread_cache.cc:160-188), the "
     "cache passing its share (Scavenge, thread_cache.cc:212-243), or the "
     "thread's exit (DeleteCache, thread_cache.cc:468-484)",
     false},
    {"tcmalloc.transfer_cache", "freed objects in the transfer caches",
     "A thread cache hands back whole batches, which the central list keeps "
     "as they are for the next thread that asks (InsertRange, "
     "central_freelist.cc:229-242); their spans still count them as "
     "allocated.",
     "another class needing the slot (ShrinkCache, central_freelist.cc:"
     "201-227)",
     false},
    {"tcmalloc.span_free", "free objects in spans that hold objects",
     "A span goes back to the page heap only when its last object comes "
     "back (ReleaseToSpans, central_freelist.cc:104-147), so one object "
     "still allocated pins the span's pages.",
     "nothing short of freeing the last objects in each span", false},
    {"tcmalloc.pageheap_free", "free spans in the page heap",
     "Freed spans stay resident until the scavenger releases one, about a "
     "page per 1000 pages freed at the default rate, after a first "
     "countdown of 2^18 pages (IncrementalScavenge, page_heap.cc:437-468; "
     "page_heap.h:254 kDefaultReleaseDelay).",
     "more frees (the release rate), TCMALLOC_AGGRESSIVE_DECOMMIT, or "
     "MallocExtension::ReleaseFreeMemory() (ReleaseAtLeastNPages, "
     "page_heap.cc:484-519)",
     false},
    {"tcmalloc.returned", "free spans given back (returned)",
     "Released spans keep their address space, given back with "
     "MADV_DONTNEED (TCMalloc_SystemRelease, system-alloc.cc:513-562); "
     "they are not resident.",
     "nothing needed: not resident", false},
    {"tcmalloc.metadata", "tcmalloc's own bookkeeping",
     "Span objects, thread caches and the pagemap's leaves come from 8 MiB "
     "chunks that are never returned (MetaDataAlloc, common.cc:248-287); "
     "before main, 2.9 and 2.10 also allocate their two MallocExtension "
     "objects (TCMallocGuard, tcmalloc.cc:1132-1150; measured, "
     "docs/models/tcmalloc.md).",
     "nothing while the process runs", false},
    {NULL, NULL, NULL, NULL, false},
};

/* What a slot of a size-class span holds, two bits each in the walk. */
typedef enum {
  SLOT_LIVE,     /* handed out and in no cache: the program's */
  SLOT_FREE,     /* on the span's free list, or never handed out */
  SLOT_THREAD,   /* in a thread cache's list */
  SLOT_TRANSFER, /* in a transfer cache entry */
  SLOT_OWN       /* tcmalloc's own object (not in the marks) */
} slot_class_t;

typedef struct tc_walk_s {
  const tcmalloc_model_t *t;
  uint64_t               *first; /* per span record: its slot 0 in marks */
  uint8_t                *marks; /* slot_class_t, 2 bits per slot */
  uint32_t               *order; /* spans in address order */
  uint32_t                n;
  model_region_fn         fn;
  void                   *user;
} tc_walk_t;

/* The class of slot k of span; the MallocExtension objects TCMallocGuard
 * makes before main are the allocator's, not the program's. */
static slot_class_t slot_get(const tc_walk_t *w, uint32_t span, uint32_t k) {
  uint64_t     i = w->first[span] + k;
  slot_class_t c = (slot_class_t)((w->marks[i / 4] >> (i % 4 * 2)) & 3);
  tobj_t       o = OBJ(span, k);
  if (c == SLOT_LIVE && (o == w->t->extension[0] || o == w->t->extension[1]))
    return SLOT_OWN;
  return c;
}

static void slot_set(tc_walk_t *w, tobj_t o, slot_class_t c) {
  uint64_t i = w->first[OBJ_SPAN(o)] + OBJ_SLOT(o);
  w->marks[i / 4] = (uint8_t)((w->marks[i / 4] & ~(3u << (i % 4 * 2))) |
                              ((unsigned)c << (i % 4 * 2)));
}

static bool walk_shown(const tspan_t *s) {
  return s->location <= LOC_RETURNED && s->length > 0;
}

static int span_by_addr(const void *x, const void *y, void *ctx) {
  const tcmalloc_model_t *t = ctx;
  uint64_t                a = t->sp[*(const uint32_t *)x].start;
  uint64_t                b = t->sp[*(const uint32_t *)y].start;
  return a < b ? -1 : a > b;
}

/* Numbers the slots of every size-class span and lists the spans shown,
 * in address order. */
static bool walk_index(tc_walk_t *w) {
  const tcmalloc_model_t *t = w->t;
  uint64_t                slots = 0;
  w->first = calloc(t->nsp + 1, sizeof *w->first);
  w->order = malloc((t->nsp + 1) * sizeof *w->order);
  if (w->first == NULL || w->order == NULL)
    return false;
  for (uint32_t i = 1; i < t->nsp; i++) {
    const tspan_t *s = &t->sp[i];
    if (!walk_shown(s))
      continue;
    w->order[w->n++] = i;
    w->first[i] = slots;
    if (s->location == LOC_IN_USE && s->sizeclass != 0)
      slots += span_objects(w->t, s);
  }
  qsort_r(w->order, w->n, sizeof *w->order, span_by_addr, (void *)t);
  w->marks = calloc(slots / 4 + 1, 1); /* zero: SLOT_LIVE */
  return w->marks != NULL;
}

/* Marks the slots no program object holds: the spans' free lists and
 * untouched tails, the thread caches' lists, the transfer caches. */
static void walk_mark_free(tc_walk_t *w) {
  const tcmalloc_model_t *t = w->t;
  for (uint32_t k = 0; k < w->n; k++) {
    const tspan_t *s = &t->sp[w->order[k]];
    if (s->location != LOC_IN_USE || s->sizeclass == 0)
      continue;
    for (uint32_t j = 0; j < s->nstack; j++)
      slot_set(w, OBJ(w->order[k], s->stack[j]), SLOT_FREE);
    for (uint32_t j = s->virgin; j < span_objects(t, s); j++)
      slot_set(w, OBJ(w->order[k], j), SLOT_FREE);
  }
  for (uint32_t i = 0; i < t->ncaches; i++)
    for (uint32_t cl = 1; t->caches[i].in_use && cl < t->sm.nclasses; cl++)
      for (uint32_t j = 0; j < t->caches[i].list[cl].len; j++)
        slot_set(w, t->caches[i].list[cl].v[j], SLOT_THREAD);
  for (uint32_t cl = 1; cl < t->sm.nclasses; cl++) {
    const tcentral_t *c = &t->central[cl];
    for (uint64_t j = 0; j < (uint64_t)c->used_slots * t->sm.batch[cl]; j++)
      slot_set(w, c->slots[j], SLOT_TRANSFER);
  }
}

static uint32_t span_live_objects(const tc_walk_t *w, uint32_t i) {
  const tspan_t *s = &w->t->sp[i];
  uint32_t       n = 0;
  if (s->location != LOC_IN_USE)
    return 0;
  if (s->sizeclass == 0)
    return 1;
  for (uint32_t k = 0; k < span_objects(w->t, s); k++)
    n += slot_get(w, i, k) == SLOT_LIVE;
  return n;
}

/* A size-class span's slots as runs of one class each, then the tail no
 * object fits in (free, as central_freelist.cc:372-382 counts it). */
static as_status_t walk_slots(const tc_walk_t *w, uint32_t i, as_err_t *err) {
  static const char *const mech[] = {
      "tcmalloc.small", "tcmalloc.span_free", "tcmalloc.thread_cache",
      "tcmalloc.transfer_cache", "tcmalloc.metadata"};
  static const char *const kind[] = {"objects", "free objects",
                                     "cached objects", "cached objects",
                                     "MallocExtension"};
  static const uint8_t     state[] = {MODEL_REGION_LIVE, MODEL_REGION_FREE,
                                      MODEL_REGION_CACHED, MODEL_REGION_CACHED,
                                      MODEL_REGION_METADATA};
  const tspan_t           *s = &w->t->sp[i];
  uint64_t                 size = w->t->sm.size[s->sizeclass];
  sim_addr_t               base = span_addr(w->t, s);
  uint32_t                 nobj = span_objects(w->t, s);
  for (uint32_t k = 0; k < nobj;) {
    slot_class_t c = slot_get(w, i, k);
    uint32_t     end = k + 1;
    while (end < nobj && slot_get(w, i, end) == c)
      end++;
    model_region_t q = {.addr = base + k * size,
                        .bytes = (end - k) * size,
                        .kind = kind[c],
                        .mechanism = mech[c],
                        .level = 1,
                        .state = state[c]};
    if (c == SLOT_LIVE) {
      q.live_objects = end - k;
      q.live_bytes = q.bytes;
    }
    as_status_t rc = w->fn(w->user, &q, err);
    if (rc != AS_OK)
      return rc;
    k = end;
  }
  uint64_t used = span_objects(w->t, s) * size,
           bytes = s->length << w->t->page_shift;
  if (used == bytes)
    return AS_OK;
  return w->fn(w->user,
               &(model_region_t){.addr = base + used,
                                 .bytes = bytes - used,
                                 .kind = "span tail",
                                 .mechanism = "tcmalloc.span_free",
                                 .level = 1,
                                 .state = MODEL_REGION_FREE},
               err);
}

/* A span as a unit: pages go back to the page heap (and only from there to
 * the kernel) one whole span at a time, so a span is what its objects pin. */
static as_status_t walk_span(const tc_walk_t *w, uint32_t i, as_err_t *err) {
  const tspan_t *s = &w->t->sp[i];
  uint64_t       size = s->sizeclass ? w->t->sm.size[s->sizeclass] : 0;
  model_region_t q = {.addr = span_addr(w->t, s),
                      .bytes = s->length << w->t->page_shift,
                      .live_objects = span_live_objects(w, i)};
  if (s->location == LOC_NORMAL) {
    q.kind = "free span", q.mechanism = "tcmalloc.pageheap_free";
    q.state = MODEL_REGION_FREE;
  } else if (s->location == LOC_RETURNED) {
    q.kind = "returned span", q.mechanism = "tcmalloc.returned";
    q.state = MODEL_REGION_RELEASED;
  } else if (s->sizeclass == 0) {
    q.kind = "large span", q.mechanism = "tcmalloc.large";
    q.state = MODEL_REGION_LIVE;
    q.live_bytes = q.bytes;
  } else {
    q.live_bytes = q.live_objects * size;
    q.kind = "class span";
    q.state = MODEL_REGION_LIVE;
    as_status_t rc = w->fn(w->user, &q, err); /* level 0 */
    return rc == AS_OK ? walk_slots(w, i, err) : rc;
  }
  return model_walk_single(q, w->fn, w->user, err);
}

/* The metadata chunks, each a unit of its own: what was carved from them
 * is resident (written as it was carved), the rest never touched. */
static as_status_t walk_metadata(const tc_walk_t *w, as_err_t *err) {
  as_status_t rc = AS_OK;
  for (uint64_t k = 0; k < w->t->nmeta_regions && rc == AS_OK; k++)
    rc =
        model_walk_single((model_region_t){.addr = w->t->meta_regions[k].addr,
                                           .bytes = w->t->meta_regions[k].bytes,
                                           .kind = "metadata chunk",
                                           .mechanism = "tcmalloc.metadata",
                                           .state = MODEL_REGION_METADATA},
                          w->fn, w->user, err);
  return rc;
}

/* Units: the metadata chunks, every span the page heap knows in address
 * order (a size-class span with its slots by what holds them), then the
 * threads' stacks and nptl's stack cache. */
static as_status_t tc_walk(const model_t *m, model_region_fn fn, void *user,
                           as_err_t *err) {
  const tcmalloc_model_t *t = (const tcmalloc_model_t *)m;
  tc_walk_t               w = {.t = t, .fn = fn, .user = user};
  as_status_t             rc = AS_OK;
  if (!walk_index(&w))
    rc = as_err_set(err, AS_ENOMEM, "tcmalloc: out of memory (walk)");
  if (rc == AS_OK) {
    walk_mark_free(&w);
    rc = walk_metadata(&w, err);
  }
  for (uint32_t k = 0; k < w.n && rc == AS_OK; k++)
    rc = walk_span(&w, w.order[k], err);
  for (uint32_t i = 0; rc == AS_OK && i < t->stacks_cap; i++)
    rc = nptl_stack_walk(&t->stacks[i], fn, user, err);
  if (rc == AS_OK)
    rc = nptl_stacks_walk_cache(&t->nptl, fn, user, err);
  free(w.first);
  free(w.marks);
  free(w.order);
  return rc;
}

static void tc_destroy(model_t *m) {
  tcmalloc_model_t *t = (tcmalloc_model_t *)m;
  if (t == NULL)
    return;
  for (uint32_t i = 0; i < t->nsp && i < t->sp_tab.len; i++)
    if (t->sp[i].location == LOC_IN_USE && t->sp[i].sizeclass != 0)
      free(t->sp[i].stack);
  sim_idtable_free(&t->sp_tab);
  for (uint64_t i = 0; i < t->pm.cap; i++)
    free(t->pm.leaves[i]);
  free(t->pm.keys);
  free(t->pm.leaves);
  free(t->free_normal);
  free(t->free_returned);
  free(t->leaves_made);
  free(t->meta_regions);
  free(t->span_pool.free);
  free(t->setnode_pool.free);
  free(t->stack_pool.free);
  free(t->cache_pool.free);
  for (uint32_t cl = 0; cl < TC_CLASS_SIZES_MAX; cl++)
    free(t->central[cl].slots);
  for (uint32_t i = 0; i < t->ncaches; i++)
    for (uint32_t cl = 0; cl < TC_CLASS_SIZES_MAX; cl++)
      free(t->caches[i].list[cl].v);
  free(t->caches);
  free(t->thread_cache);
  sim_idtable_free(&t->obj_tab);
  free(t->chain);
  free(t->chain2);
  free(t->stacks);
  nptl_stacks_fini(&t->nptl);
  free(t);
}

/* CentralFreeList::Init (central_freelist.cc:47-80): at most 1 MiB of
 * objects per class in transfer entries, at most 64 entries. */
static bool central_init(tcmalloc_model_t *t) {
  for (uint32_t cl = 0; cl < t->sm.nclasses; cl++) {
    tcentral_t *c = &t->central[cl];
    c->nonempty = span_record(t);
    c->empty = span_record(t);
    if (c->empty == TC_NIL)
      return false;
    dll_init(t, c->nonempty);
    dll_init(t, c->empty);
    c->max_cache_size = TC_MAX_TRANSFER;
    c->cache_size = 16;
    if (cl > 0) {
      int64_t per =
          (1024 * 1024) / ((int64_t)t->sm.size[cl] * (int64_t)t->sm.batch[cl]);
      if (per < 1)
        per = 1;
      if (per < c->max_cache_size)
        c->max_cache_size = (int32_t)per;
      if (c->cache_size > c->max_cache_size)
        c->cache_size = c->max_cache_size;
      c->slots = malloc((size_t)c->max_cache_size * t->sm.batch[cl] *
                        sizeof *c->slots);
      if (c->slots == NULL)
        return false;
    }
  }
  return true;
}

/* Starts the object table at 4 bytes per id: slot_bits for the most
 * objects a span of the size map holds, the rest for span numbers. */
static void narrow_objs(tcmalloc_model_t *t) {
  uint64_t most = 1;
  for (uint32_t cl = 1; cl < t->sm.nclasses; cl++)
    most = t->sm.objects[cl] > most ? t->sm.objects[cl] : most;
  t->slot_bits = most > 1 ? 64 - (uint32_t)__builtin_clzll(most - 1) : 1;
  t->narrow_spans = UINT32_C(1) << (32 - t->slot_bits);
  t->obj_bytes = sizeof(uint32_t);
  t->obj_len = 0;
}

void tcmalloc_narrow_spans_for_tests(model_t *m, uint32_t n) {
  tcmalloc_model_t *t = (tcmalloc_model_t *)m;
  if (n < t->narrow_spans)
    t->narrow_spans = n;
}

static as_status_t tc_create(const model_opts_t *opts, const model_ctx_t *ctx,
                             model_t **out, as_err_t *err) {
  *out = NULL;
  tcmalloc_model_t *t = calloc(1, sizeof *t);
  if (t == NULL)
    return as_err_set(err, AS_ENOMEM, "tcmalloc: out of memory");
  if (sim_idtable_init(&t->obj_tab, OBJ_ID_BYTES_MAX) != AS_OK ||
      sim_idtable_init(&t->sp_tab, sizeof *t->sp) != AS_OK) {
    sim_idtable_free(&t->obj_tab);
    free(t);
    return as_err_set(err, AS_ENOMEM, "tcmalloc: no address space for tables");
  }
  t->obj = sim_idtable_base(&t->obj_tab);
  t->obj_bytes = OBJ_ID_BYTES_MAX; /* until the size map is made */
  t->sp = sim_idtable_base(&t->sp_tab);
  static const unsigned shifts[] = {13, 15, 18};
  uint64_t              transfer = model_opt_u64(opts, TO_TRANSFER_NUM_OBJ);
  t->kernel = ctx->kernel;
  t->os_page = sim_kernel_page_size(ctx->kernel);
  t->page_shift = shifts[model_opt_u64(opts, TO_PAGE_SHIFT)];
  t->page = UINT64_C(1) << t->page_shift;
  t->max_pages = UINT64_C(1) << (20 - t->page_shift);
  t->version = (tc_version_t)model_opt_i64(opts, TO_VERSION);
  t->release_rate = model_opt_decimal(opts, TO_RELEASE_RATE);
  t->heap_limit_mb = model_opt_u64(opts, TO_HEAP_LIMIT_MB);
  t->aggressive = model_opt_bool(opts, TO_AGGRESSIVE_DECOMMIT);
  t->skip_sbrk = model_opt_bool(opts, TO_SKIP_SBRK);
  t->disable_release = model_opt_bool(opts, TO_DISABLE_MEMORY_RELEASE);
  t->release_index = (int64_t)t->max_pages; /* page_heap.cc:69 */
  t->thread_heaps = t->next_steal = -1;
  t->unclaimed = (int64_t)(UINT64_C(8) * TC_MAX_TC_SIZE);
  t->per_thread_tc_size = (int64_t)TC_MAX_TC_SIZE; /* thread_cache.cc:64-66 */
  t->nsp = 1;                                      /* record 0 is NIL */
  if (transfer < 1 || transfer > 1024 || t->os_page > t->page) {
    tc_destroy(&t->base);
    return as_err_set(err, AS_EUSAGE,
                      transfer < 1 || transfer > 1024
                          ? "tcmalloc: transfer_num_obj must be 1..1024"
                          : "tcmalloc: the OS page is larger than page_shift");
  }
  as_status_t src = nptl_stacks_init(
      &t->nptl, ctx->kernel, model_opt_u64(opts, TO_STACK_SIZE),
      /* libtcmalloc_minimal.so.4 (2.10-1) has 88 bytes of TLS, 64-aligned:
       * _dl_get_tls_static_info gives 4352 with it preloaded, 4224 without
       * (measured); so do Ubuntu's 2.9.1 (4480 against its glibc 2.35's
       * 4352) and 2.15 (4352 against 4224).  Debian 13's 2.16 has 8 bytes
       * (ThreadCachePtr::tls_data_): 4288 against its glibc 2.41's 4224
       * (measured in that userland; on Debian 12's glibc a build of the tag
       * adds nothing, 64 bytes that stay on the same two pages) */
      model_opt_u64(opts, TO_THREAD_STACK_PAGES),
      t->version == TC_V2_16 ? 64 : 128, "tcmalloc", err);
  if (src != AS_OK) {
    tc_destroy(&t->base);
    return src;
  }
  if (!sizemap_init(&t->sm, t->page_shift, (uint32_t)transfer)) {
    tc_destroy(&t->base);
    return as_err_set(err, AS_EUSAGE,
                      "tcmalloc: page_shift=%u gives more than %d size "
                      "classes or a span of more than %u objects",
                      t->page_shift, TC_CLASS_SIZES_MAX, UINT16_MAX);
  }
  narrow_objs(t);
  t->free_normal = calloc(t->max_pages, sizeof *t->free_normal);
  t->free_returned = calloc(t->max_pages, sizeof *t->free_returned);
  t->chain = malloc((transfer + 2) * sizeof *t->chain);
  t->chain2 = malloc((transfer + 2) * sizeof *t->chain2);
  bool ok = t->free_normal && t->free_returned && t->chain && t->chain2;
  for (uint64_t i = 0; ok && i < t->max_pages; i++) {
    t->free_normal[i] = span_record(t);
    t->free_returned[i] = span_record(t);
    ok = t->free_returned[i] != TC_NIL;
    if (ok) {
      dll_init(t, t->free_normal[i]);
      dll_init(t, t->free_returned[i]);
    }
  }
  ok = ok && central_init(t);
  if (!ok) {
    tc_destroy(&t->base);
    return as_err_set(err, AS_ENOMEM, "tcmalloc: out of memory");
  }
  if (init_static_vars(t)) {
    set_overall_cache_size(
        t, model_opt_u64(opts, TO_MAX_TOTAL_THREAD_CACHE_BYTES));
    /* Without file pages in RSS the text is never counted: as if paged
     * in already. */
    t->stl_insert_paged = t->stl_erase_paged =
        !model_opt_bool(opts, TO_STL_TEXT_PAGES);
    tc_premain_t pm = (tc_premain_t)model_opt_i64(opts, TO_PREMAIN);
    if (pm == TC_PREMAIN_MODELLED)
      premain_calls(t, TC_PREMAIN_POOL, true);
    t->premain_pending = pm == TC_PREMAIN_TRACED;
    t->flags_ready = !t->premain_pending;
  }
  if (t->fail != AS_OK) {
    as_status_t rc = report(t, err);
    tc_destroy(&t->base);
    return rc;
  }
  *out = &t->base;
  return AS_OK;
}

const model_methods_t model_tcmalloc_methods = {
    .name = "tcmalloc",
    .summary = "gperftools 2.10 tcmalloc (Debian 12 libtcmalloc_minimal; "
               "2.9, 2.15, 2.16 by version): thread caches, central lists, "
               "page heap, scavenger",
    .options = tcmalloc_options,
    .preload = "libtcmalloc",
    .create = tc_create,
    .destroy = tc_destroy,
    .alloc = tc_alloc,
    .realloc = tc_realloc,
    .free = tc_free,
    .thread = tc_thread,
    .trim = NULL, /* malloc_trim is glibc's: no effect on tcmalloc */
    .stats = tc_stats,
    .locate = tc_locate,
    .purge = tc_purge,
    .set_option = tc_set_option,
    .counters = tc_counters,
    .walk = tc_walk,
    .mechanisms = tcmalloc_mechanisms,
    .usable_size = tc_usable_size,
};

/* ---- Introspection (models/tcmalloc.h) ---------------------------------- */

size_t tcmalloc_classes(const model_t *m, tcmalloc_class_t *out, size_t cap) {
  const tcmalloc_model_t *t = (const tcmalloc_model_t *)m;
  for (uint32_t c = 1; c < t->sm.nclasses && c - 1 < cap; c++)
    out[c - 1] =
        (tcmalloc_class_t){t->sm.size[c], t->sm.pages[c], t->sm.batch[c]};
  return t->sm.nclasses - 1;
}
