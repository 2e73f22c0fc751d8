/* models/glibc.c -- glibc malloc (ptmalloc2) bookkeeping: chunks with
 * boundary tags, tcache, fastbins, unsorted/small/large bins, the brk heap,
 * 64 MiB thread heaps, mmapped chunks, trimming and arenas per thread.
 *
 * Why: glibc keeps freed memory wherever a live chunk, a tcache entry or a
 * fastbin entry pins it, returns only the top of a heap on free, and returns
 * interior pages only on malloc_trim.  RSS after a spike is therefore a
 * function of the exact placement of every chunk, so this file keeps every
 * chunk's address and size and replays glibc's search order exactly.  Line
 * citations are to glibc 2.36 (tag glibc-2.36, the version in Debian 12)
 * unless marked g241 / g242 / gmaster (master 04e750e75b, the 2.43 tree);
 * docs/models/glibc.md summarises the rules, omissions and validation.
 *
 * What it leaves out (deliberately): payload bytes; lock contention (a replay
 * has none, so reused_arena's trylock always succeeds on the first arena it
 * tries, arena.c:876); the sbrk-failure fallback to mmap (malloc.c:2727-2753,
 * reported as AS_ENOMEM instead); foreign sbrk (nothing else moves the
 * simulated break); glibc.malloc.hugetlb=2 and above (hugetlbfs pages,
 * MAP_HUGETLB); check_may_shrink_heap() being true
 * (overcommit_memory=2, arena.c:622); 2.37's realloc shortcut and 2.38's
 * aligned-chunk bin scan (those two versions are not offered).
 *
 * Representation.  Every chunk is a record in one pool (gchunk_t), named by a
 * 32-bit index; index 0 is "none".  Records of one contiguous region (the brk
 * heap, or one thread heap) are linked in address order (prev/next), which is
 * all boundary tags are used for: finding neighbours to coalesce.  Bin lists
 * are glibc's circular doubly linked lists, with one head record per bin per
 * arena, so insertion and search order are glibc's, including the large-bin
 * nextsize skip list, which is kept as what it links: a sorted array of each
 * large bin's size groups, where a binary search finds the group glibc's
 * skip-list walk finds.  The object id
 * of a trace indexes obj[] -> record.  Per event the work is O(1) except
 * glibc's own loops (unsorted scan, consolidation, mtrim) and O(log n)
 * large-bin searches.
 *
 * Arenas: arena_get2's limit, free_list reuse and reused_arena follow
 * arena.c exactly; since a replay has no lock contention, reused_arena's
 * trylock (arena.c:876) always succeeds on next_to_use, so full arenas are
 * handed out round-robin along the ring main -> newest -> ... -> oldest.
 * ncpus stands for __get_nprocs() (default 2, the measured machine).
 *
 * Page touches (first write makes a page resident: Linux 6.1.170
 * mm/memory.c:4227 do_anonymous_page counts MM_ANONPAGES on a write): the
 * program writes every byte it requests (malloc, memalign, realloc growth);
 * calloc writes nothing itself beyond glibc's memset; glibc writes headers
 * (size at chunk+8), footers (prev_size at next chunk), free-list links
 * (chunk+16..), and tcache/fastbin next pointers, each through touch().
 *
 * Sections
 *   Constants and options          Records and bins
 *   Large-bin index                Kernel helpers
 *   Threads, tcache, arenas        sysmalloc, systrim, heap_trim
 *   _int_free, malloc_consolidate  _int_malloc
 *   Public entry points            Model interface
 *   Introspection (models/glibc.h)
 */
#include "glibc.h"
#include "nptl_stacks.h"

#include "../sim/idtable.h"
#include "../sim/reserve.h"
#include "../sim/threadtab.h"

#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Constants and options --------------------------------------------- */

#define SIZE_SZ UINT64_C(8) /* malloc.c: INTERNAL_SIZE_T on x86-64 */
#define MALLOC_ALIGNMENT                                                       \
  UINT64_C(16) /* sysdeps/generic/malloc-alignment.h:27 */
#define MALLOC_ALIGN_MASK (MALLOC_ALIGNMENT - 1)
#define CHUNK_HDR_SZ      (2 * SIZE_SZ)  /* malloc.c:1295 */
#define MINSIZE           UINT64_C(32)   /* malloc.c:1312 MIN_CHUNK_SIZE 32 */
#define NBINS             128            /* malloc.c:1570 */
#define NSMALLBINS        64             /* malloc.c:1571 */
#define MIN_LARGE_SIZE    UINT64_C(1024) /* malloc.c:1574 */
#define NFASTBINS         10             /* malloc.c:1748 */
#define MAX_FAST_SIZE     UINT64_C(160)  /* malloc.c:1746 80*SIZE_SZ/4 */
#define BINMAPSIZE        4              /* malloc.c:1711 NBINS/32 */
/* malloc.c:1761; gmaster:1701 calls it ATTEMPT_TRIMMING_THRESHOLD. */
#define FASTBIN_CONSOLIDATION_THRESHOLD UINT64_C(65536)
/* malloc.c:972 4 MiB * sizeof(long): the dynamic threshold's ceiling. */
#define DEFAULT_MMAP_THRESHOLD_MAX (UINT64_C(32) << 20)
#define HEAP_MIN_SIZE              (UINT64_C(32) * 1024) /* arena.c:28 */
#define HEAP_MAX_SIZE              (UINT64_C(64) << 20) /* arena.c:31 2*32 MiB */
/* arena.c:75-87 heap_info: 5 words + pad[-3*SIZE_SZ & 15] = 48 bytes. */
#define HEAP_INFO_SZ UINT64_C(48)
/* malloc.c:1724-1760 struct malloc_state: mutex, flags, have_fastchunks,
 * fastbinsY[10], top, last_remainder, bins[254], binmap[4], next, next_free,
 * attached_threads, system_mem, max_system_mem = 2200 bytes.  gmaster
 * 1724-1759 drops have_fastchunks and fastbinsY: 2112 bytes. */
#define MALLOC_STATE_SZ_236    UINT64_C(2200)
#define MALLOC_STATE_SZ_MASTER UINT64_C(2112)
#define MAX_ITERS              10000 /* malloc.c:4161 unsorted scan bound */
#define TCACHE_SMALL_BINS      64 /* malloc.c:309 TCACHE_MAX_BINS; g242:294 */
#define TCACHE_LARGE_BINS      12 /* g242:295 "Up to 4M chunks" */
#define TCACHE_ALL_BINS        (TCACHE_SMALL_BINS + TCACHE_LARGE_BINS)

#define MAX_TCACHE_COUNT UINT64_C(65535) /* malloc.c:332 UINT16_MAX */
/* malloc.c:310,313 tidx2usize(63) = 63*16 + 32 - 8: the largest request. */
#define MAX_TCACHE_SIZE UINT64_C(1032)

typedef enum glibc_version_e {
  GV_236, /* Debian 12: glibc-2.36 tag + release branch; 2.35 too */
  GV_239, /* memalign: tcache and merged leader/trailer; realloc returns a
             chunk that fits early (2.38-2.39 commits; 2.40 identical) */
  GV_241, /* calloc takes from the tcache (g241 malloc.c:3795); freed small
             chunks go to their small bin (e2436d6f5a) */
  GV_242, /* tcache large bins option; internal frees skip tcache */
  GV_243  /* master 04e750e75b: no fastbins, tcache count 16 */
} glibc_version_t;

/* Environment spellings: glibc 2.36 elf/dl-tunables.list, the glibc.malloc
 * tunables and their env_alias names (MALLOC_ARENA_MAX, MALLOC_ARENA_TEST,
 * MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, MALLOC_TOP_PAD_,
 * MALLOC_MMAP_MAX_). */
#define GLIBC_OPTIONS(X)                                                       \
  X(GO_ARENA_MAX, "arena_max", OPT_U64, "0", "", NULL,                         \
    "MALLOC_ARENA_MAX GLIBC_TUNABLES:glibc.malloc.arena_max",                  \
    "glibc 2.36 malloc/arena.c:936 mp_.arena_max; 0 = 8*ncpus "                \
    "(arena.c:938-947)",                                                       \
    "most arenas (M_ARENA_MAX, MALLOC_ARENA_MAX)")                             \
  X(GO_ARENA_TEST, "arena_test", OPT_U64, "8", "", NULL,                       \
    "MALLOC_ARENA_TEST GLIBC_TUNABLES:glibc.malloc.arena_test",                \
    "glibc 2.36 malloc/malloc.c:1935 NARENAS_FROM_NCORES(1) = 8 on 64-bit",    \
    "arenas created before the limit is computed (M_ARENA_TEST)")              \
  X(GO_MMAP_THRESHOLD, "mmap_threshold", OPT_BYTES, "131072", "bytes", NULL,   \
    "MALLOC_MMAP_THRESHOLD_ GLIBC_TUNABLES:glibc.malloc.mmap_threshold",       \
    "glibc 2.36 malloc/malloc.c:961,1071 DEFAULT_MMAP_THRESHOLD_MIN",          \
    "chunks >= this are mmapped; setting it freezes the dynamic threshold")    \
  X(GO_TRIM_THRESHOLD, "trim_threshold", OPT_BYTES, "131072", "bytes", NULL,   \
    "MALLOC_TRIM_THRESHOLD_ GLIBC_TUNABLES:glibc.malloc.trim_threshold",       \
    "glibc 2.36 malloc/malloc.c:919 DEFAULT_TRIM_THRESHOLD",                   \
    "top size that triggers systrim on free; setting it freezes thresholds")   \
  X(GO_TOP_PAD, "top_pad", OPT_BYTES, "131072", "bytes", NULL,                 \
    "MALLOC_TOP_PAD_ GLIBC_TUNABLES:glibc.malloc.top_pad",                     \
    "glibc 2.36 sysdeps/generic/malloc-machine.h:37-38 DEFAULT_TOP_PAD "       \
    "(malloc.c:952's 0 is preempted by that earlier definition)",              \
    "extra bytes per brk/heap growth and kept by trims")                       \
  X(GO_MMAP_MAX, "mmap_max", OPT_U64, "65536", "", NULL,                       \
    "MALLOC_MMAP_MAX_ GLIBC_TUNABLES:glibc.malloc.mmap_max",                   \
    "glibc 2.36 malloc/malloc.c:1088 DEFAULT_MMAP_MAX",                        \
    "most simultaneous mmapped chunks; setting it freezes thresholds")         \
  X(GO_MXFAST, "mxfast", OPT_BYTES, "128", "bytes", NULL,                      \
    "GLIBC_TUNABLES:glibc.malloc.mxfast",                                      \
    "glibc 2.36 malloc/malloc.c:852 DEFAULT_MXFAST 64*SIZE_SZ/4",              \
    "largest fastbin request; above 160 ignored, as glibc does; ignored by "   \
    "version=2.43")                                                            \
  X(GO_TCACHE_COUNT, "tcache_count", OPT_U64, "7", "", NULL,                   \
    "GLIBC_TUNABLES:glibc.malloc.tcache_count",                                \
    "glibc 2.36 malloc/malloc.c:328 TCACHE_FILL_COUNT 7 (16 in master, "       \
    "gmaster:317; used when version=2.43 and not set)",                        \
    "chunks per tcache bin; above 65535 ignored, as glibc does")               \
  X(GO_TCACHE_MAX, "tcache_max", OPT_BYTES, "1032", "bytes", NULL,             \
    "GLIBC_TUNABLES:glibc.malloc.tcache_max",                                  \
    "glibc 2.36 malloc/malloc.c:310 MAX_TCACHE_SIZE; g242:1935 large bins "    \
    "up to 4 MiB when raised",                                                 \
    "largest request the tcache holds; above 1032 ignored before 2.42, as "    \
    "glibc does")                                                              \
  X(GO_VERSION, "version", OPT_ENUM, "2.36", "",                               \
    "2.35|2.36|2.39|2.40|2.41|2.42|2.43", "meta:glibc_version",                \
    "glibc tags glibc-2.35..2.42 (2.35 = 2.36 in malloc: arena.c identical, "  \
    "malloc.c refactors; 2.40 = 2.39 byte for byte; 2.37 and 2.38 differ and " \
    "are not offered); 2.43 = master 04e750e75b",                              \
    "glibc release whose behaviour to model")                                  \
  X(GO_HUGETLB, "hugetlb", OPT_ENUM, "0", "", "0|1",                           \
    "GLIBC_TUNABLES:glibc.malloc.hugetlb",                                     \
    "glibc 2.36 malloc/malloc.c:5428-5442 do_set_hugetlb, 2017-2036 "          \
    "madvise_thp; gmaster:1906-1937,5131-5146",                                \
    "1: brk growth to 2 MiB boundaries, trims in 2 MiB, and MADV_HUGEPAGE "    \
    "on areas of 2 MiB or more, where THP is madvise (2.43: or always)")       \
  X(GO_NCPUS, "ncpus", OPT_U64, "2", "", NULL, "meta:ncpus",                   \
    "glibc 2.36 malloc/arena.c:940 __get_nprocs (Debian backport "             \
    "8e99cc76a2); 2 = nproc of the machine the validation runs were "          \
    "measured on",                                                             \
    "online CPUs: the arena limit is 8*ncpus")                                 \
  NPTL_STACK_OPTIONS(X, GO_STACK_SIZE, GO_THREAD_STACK_PAGES)

enum glibc_option_e { GLIBC_OPTIONS(MODEL_OPTION_KEY) GO_COUNT };
_Static_assert(GO_COUNT <= MODEL_OPTS_MAX, "model_opts_t holds the rows");

static const model_option_t glibc_options[] = {
    GLIBC_OPTIONS(MODEL_OPTION_ROW){0}};

/* ---- Records and bins --------------------------------------------------- */

#define NIL 0u

typedef enum gstate_e {
  CS_DEAD,   /* record on the recycle list */
  CS_INUSE,  /* held by the program (or glibc: tcache struct) */
  CS_TCACHE, /* in a thread's tcache: in use as far as the arena knows */
  CS_FAST,   /* in a fastbin: in-use bit stays set (malloc.c:4489-4559) */
  CS_BINNED, /* free: in the unsorted list or a small/large bin */
  CS_TOP,    /* an arena's top chunk */
  CS_FENCE,  /* fencepost at the end of a full thread heap (2635-2666) */
  CS_MMAP,   /* an mmapped chunk (IS_MMAPPED) */
  CS_BINHEAD /* a bin's list head (bin_at) */
} gstate_t;

/* A chunk.  Invariants: records of one region are linked in address order
 * and tile it without gaps, ending with the top chunk (newest heap) or a
 * fence (older heaps); a CS_BINNED chunk never borders another CS_BINNED
 * chunk or the top (glibc coalesces on free).  For CS_MMAP, addr/size are
 * the chunk (mapping + aux) and aux is prev_size, the offset of the chunk in
 * its mapping (memalign).  A field lives only in the states that use it, as
 * glibc keeps its links in a free chunk's payload: an in-use chunk's request
 * size where a listed chunk keeps its links.  A large bin's skip list
 * (fd_nextsize/bk_nextsize) is not stored: it links the bin's size groups
 * in order, which is what its index (glindex_t) holds, so a chunk records
 * only whether it heads a group. */
typedef struct gchunk_s gchunk_t;
struct gchunk_s {
  uint64_t addr48 : 48; /* chunk start (prev_size field); user space is
                          below 2^47 (sim/kernel.h) */
  uint64_t arena : 16;  /* arena_for_chunk */
  uint64_t size48 : 48; /* chunksize() */
  uint64_t state : 8;   /* gstate_t */
  uint64_t user : 1;    /* the program's object (not the tcache struct) */
  uint64_t ns_head : 1; /* CS_BINNED in a large bin: heads its size group
                           (its fd_nextsize is not NULL) */
  union {
    uint64_t aux;    /* CS_MMAP: offset from the mapping's start */
    struct {         /* any other: its region's address order */
      uint32_t prev; /* physical neighbour below, NIL at a region's start */
      uint32_t next; /* physical neighbour above, NIL at a region's end */
    };
  };
  union {
    uint64_t req; /* CS_INUSE or CS_MMAP held by the program: bytes it
                     asked for */
    struct {      /* in a list: bins (circular), fastbin/tcache (NIL end),
                     the record recycle list */
      uint32_t fd;
      uint32_t bk;
    };
  };
};

/* Search index of one large bin: its size groups (the chunks the nextsize
 * skip list links), sorted by decreasing size like the list.  glibc walks
 * the skip list (malloc.c:4117-4121, 4193-4196); the index finds the same
 * group by binary search, so results are identical and a bin with
 * thousands of distinct sizes costs O(log n) instead of a walk. */
typedef struct glgroup_s glgroup_t;
struct glgroup_s {
  uint64_t size; /* the group's chunk size */
  uint32_t head; /* its first chunk (the one with fd/bk_nextsize) */
};
typedef struct glindex_s glindex_t;
struct glindex_s {
  glgroup_t *v;   /* v[0] is the largest size */
  uint32_t   n;   /* groups */
  uint32_t   cap; /* allocated */
};

typedef struct garena_s garena_t;
/* An arena (struct malloc_state).  Arena 0 is main_arena (brk heap).
 * 'top' is NIL until the first sysmalloc of the main arena (initial_top has
 * size 0, malloc.c:1974). */
struct garena_s {
  uint32_t  bins;               /* record index of bin 0; bin i = bins + i */
  uint32_t  fast[NFASTBINS];    /* fastbin heads (LIFO via fd) */
  uint32_t  top;                /* top chunk record */
  uint64_t  last_remainder;     /* address (glibc compares pointers) */
  uint32_t  binmap[BINMAPSIZE]; /* malloc.c:1709-1716 */
  bool      have_fastchunks;    /* malloc.c:4523 */
  int32_t   heap;               /* newest heap (thread arenas), -1 main */
  uint32_t  next;               /* arena ring: main -> newest -> ... */
  int32_t   next_free;          /* free_list link, -1 end */
  uint32_t  attached_threads;   /* arena.c:757 */
  uint64_t  system_mem;         /* bytes obtained from the kernel */
  glindex_t lidx[NBINS - NSMALLBINS]; /* large bins 64..127 */
};

typedef struct gheap_s gheap_t;
/* A thread-arena heap: 64 MiB aligned PROT_NONE reservation, the first
 * mprotect_size bytes RW, the first size bytes in use (arena.c:553-556). */
struct gheap_s {
  uint64_t addr;          /* heap_info start, HEAP_MAX_SIZE aligned */
  uint64_t size;          /* h->size */
  uint64_t mprotect_size; /* h->mprotect_size */
  int32_t  prev;          /* h->prev, -1 for an arena's first heap */
  uint32_t arena;
  uint32_t prev_fence; /* fence record at the end of prev's region */
  bool     live;
};

typedef struct gthread_s gthread_t;
/* A thread: its sticky arena (thread_arena TLS) and its tcache. */
struct gthread_s {
  int32_t      arena;         /* -1 until the first arena_get */
  bool         seen;          /* started (or the main thread) */
  bool         shutting_down; /* tcache_shutting_down (malloc.c:3138) */
  uint32_t     tcache;        /* record of the tcache struct, NIL = NULL */
  uint32_t     tc_head[TCACHE_ALL_BINS];  /* entries[] */
  uint16_t     tc_count[TCACHE_ALL_BINS]; /* counts[] */
  nptl_stack_t stack;                     /* nptl stack block, addr 0 = none */
};

typedef struct glibc_model_s glibc_model_t;
struct glibc_model_s {
  model_t         base; /* must be first */
  sim_kernel_t   *kernel;
  uint64_t        page; /* GLRO(dl_pagesize) */
  glibc_version_t version;

  /* mp_ (struct malloc_par, malloc.c:1868-1926; defaults 1929-1946) */
  uint64_t mmap_threshold;
  uint64_t trim_threshold;
  uint64_t top_pad;
  uint64_t n_mmaps_max;
  uint64_t n_mmaps;
  bool     no_dyn_threshold;
  uint64_t arena_test;
  uint64_t arena_max;
  uint64_t ncpus;
  uint64_t global_max_fast; /* 0: no fastbins (master) */
  uint64_t tcache_count;
  uint64_t tcache_bins;         /* 2.36/2.41: csize2tidx limit */
  uint64_t tcache_small_bins;   /* 2.42+: stash limit */
  uint64_t tcache_max_bytes;    /* 2.42+: eligible iff nb < this */
  uint64_t tcache_struct_bytes; /* sizeof(tcache_perthread_struct) */
  uint64_t malloc_state_sz;
  uint64_t sbrk_base;
  uint64_t mmapped_mem;
  uint64_t thp_pagesize; /* mp_.thp_pagesize: 0, or 2 MiB (hugetlb=1) */
  bool     thp_madvise;  /* madvise_thp calls madvise: the THP mode is
                            madvise and thp_pagesize is set */

  /* arena.c statics */
  garena_t *arenas;
  uint32_t  narenas; /* arena.c:88 narenas */
  uint32_t  arenas_cap;
  uint64_t  narenas_limit; /* arena.c:928, computed once */
  int32_t   free_list;     /* arena.c:93 */
  uint32_t  next_to_use;   /* arena.c:867 */

  gheap_t *heaps;
  uint32_t nheaps, heaps_cap;

  gthread_t *threads;
  size_t     nthreads;

  /* nptl thread stacks (nptl/allocatestack.c, nptl/nptl-stack.c) */
  nptl_stacks_t nptl; /* thread stacks and their cache */

  gchunk_t    *ch;          /* ch_res.base: records never move */
  uint32_t     nch, ch_cap; /* records in use / committed */
  uint32_t     recycled;    /* recycle list through fd */
  as_reserve_t ch_res;

  uint32_t     *obj;     /* object id -> record (obj_tab's base) */
  sim_idtable_t obj_tab; /* obj_tab.len: ids usable */

  uint64_t live_bytes, live_objects, inuse_heap_bytes, heaps_live;

  /* Bytes the program writes at mem of the chunk the malloc being served
   * returns, not yet touched (0: none or done): split_top touches them
   * with the headers it writes, else glibc_alloc does. */
  uint64_t payload_due;

  as_status_t fail; /* first failure, sticky */
  as_err_t    ferr;
};

#define C(i) (&g->ch[(i)])

static void set_fail(glibc_model_t *g, as_status_t code, const char *what) {
  if (g->fail == AS_OK) {
    g->fail = code;
    if (what != NULL)
      as_err_set(&g->ferr, code, "glibc: %s", what);
  }
}

/* The record pool: reserved address space (sim/reserve.h), grown by
 * committing more of it: records never move and are never copied.  A
 * record is 32 bytes: the fields a chunk needs in one state share room with
 * those of another (an in-use chunk's request size with a listed chunk's
 * links, a mmapped chunk's offset with a heap chunk's neighbours), as
 * glibc's chunks keep their links in the free payload, and addresses and
 * sizes take the 48 bits an address needs, since the simulator's memory
 * per chunk is the figure that decides which heaps fit: 32 + 6 bytes per
 * 528-byte chunk of a 512 B object is 7.2 % of the heap it simulates. */
_Static_assert(sizeof(gchunk_t) == 32, "a chunk record is 32 bytes");
/* Addresses and sizes fit the records' 48 bits: every address the
 * simulated kernel hands out is below 2^SIM_KERNEL_TASK_SIZE_BITS, and a
 * chunk's size is the distance between two of them. */
_Static_assert(SIM_KERNEL_TASK_SIZE_BITS <= 48, "addresses fit 48 bits");
#define FIELD48_MASK ((UINT64_C(1) << 48) - 1)

/* A record's address and size as 64-bit values: gcc computes with a
 * 48-bit bit-field's own width when the other operand is an int (x - 8
 * would wrap at 2^48), so every read goes through these. */
static inline uint64_t ch_addr(const gchunk_t *c) {
  return c->addr48;
}

static inline uint64_t ch_size(const gchunk_t *c) {
  return c->size48;
}

static inline void set_addr(gchunk_t *c, uint64_t addr) {
  assert(addr <= FIELD48_MASK);
  c->addr48 = addr & FIELD48_MASK;
}

static inline void set_size(gchunk_t *c, uint64_t size) {
  assert(size <= FIELD48_MASK);
  c->size48 = size & FIELD48_MASK;
}

#define MAX_RECORDS (UINT32_MAX / 2) /* 32-bit indices, NIL = 0 */

static uint32_t rec_new(glibc_model_t *g) {
  uint32_t i;
  if (g->recycled != NIL) {
    i = g->recycled;
    g->recycled = C(i)->fd;
  } else {
    if (g->nch == g->ch_cap) {
      if (g->nch >= MAX_RECORDS) {
        set_fail(g, AS_ENOMEM, "more than 2^31 chunk records");
        return NIL;
      }
      if (as_reserve_need(&g->ch_res, (size_t)g->nch + 1) == NULL) {
        set_fail(g, AS_ENOMEM, "out of memory for chunk records");
        return NIL;
      }
      size_t cap = g->ch_res.committed / sizeof(gchunk_t);
      g->ch_cap = (uint32_t)(cap < MAX_RECORDS ? cap : MAX_RECORDS);
    }
    i = g->nch++;
    /* Fresh records come in index order: their pages are made resident a
     * batch at a time, not by a page fault each (sim/reserve.h). */
    if ((size_t)g->nch * sizeof(gchunk_t) > g->ch_res.populated)
      as_reserve_populate(&g->ch_res, g->nch);
  }
  memset(C(i), 0, sizeof(gchunk_t));
  return i;
}

static void rec_free(glibc_model_t *g, uint32_t i) {
  C(i)->state = CS_DEAD;
  C(i)->fd = g->recycled;
  g->recycled = i;
}

/* malloc.c:1326-1329 request2size; 0 for requests too large (checked_). */
static uint64_t request2size(uint64_t req) {
  if (req > (UINT64_C(1) << 62))
    return 0;
  return req + SIZE_SZ + MALLOC_ALIGN_MASK < MINSIZE
             ? MINSIZE
             : (req + SIZE_SZ + MALLOC_ALIGN_MASK) & ~MALLOC_ALIGN_MASK;
}

/* malloc.c:1576 */
static bool in_smallbin_range(uint64_t sz) {
  return sz < MIN_LARGE_SIZE;
}
/* malloc.c:1579 SMALLBIN_WIDTH 16, correction 0 */
static unsigned smallbin_index(uint64_t sz) {
  return (unsigned)(sz >> 4);
}
/* malloc.c:1602-1608 largebin_index_64 */
static unsigned largebin_index(uint64_t sz) {
  if ((sz >> 6) <= 48)
    return 48 + (unsigned)(sz >> 6);
  if ((sz >> 9) <= 20)
    return 91 + (unsigned)(sz >> 9);
  if ((sz >> 12) <= 10)
    return 110 + (unsigned)(sz >> 12);
  if ((sz >> 15) <= 4)
    return 119 + (unsigned)(sz >> 15);
  if ((sz >> 18) <= 2)
    return 124 + (unsigned)(sz >> 18);
  return 126;
}
/* malloc.c:1615 bin_index */
static unsigned bin_index(uint64_t sz) {
  return in_smallbin_range(sz) ? smallbin_index(sz) : largebin_index(sz);
}
/* malloc.c:1741 */
static unsigned fastbin_index(uint64_t sz) {
  return (unsigned)(sz >> 4) - 2;
}

static uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) & ~(a - 1);
}
static uint64_t align_down(uint64_t x, uint64_t a) {
  return x & ~(a - 1);
}

/* malloc.c:1713-1716 idx2block, idx2bit, mark_bin */
static void mark_bin(garena_t *av, unsigned i) {
  av->binmap[i >> 5] |= 1u << (i & 31);
}

/* Splits chunk p at nb: p keeps [addr, addr+nb), the new record (returned)
 * takes the rest with p's arena; physical links are updated. */
static uint32_t split(glibc_model_t *g, uint32_t p, uint64_t nb) {
  uint32_t r = rec_new(g);
  if (r == NIL)
    return NIL;
  gchunk_t *P = C(p), *R = C(r);
  set_addr(R, ch_addr(P) + nb);
  set_size(R, ch_size(P) - nb);
  R->arena = P->arena;
  R->prev = p;
  R->next = P->next;
  if (P->next != NIL)
    C(P->next)->prev = r;
  P->next = r;
  set_size(P, nb);
  return r;
}

/* p absorbs its physical successor q (which is released). */
static void absorb_next(glibc_model_t *g, uint32_t p) {
  uint32_t q = C(p)->next;
  set_size(C(p), ch_size(C(p)) + ch_size(C(q)));
  C(p)->next = C(q)->next;
  if (C(q)->next != NIL)
    C(C(q)->next)->prev = p;
  rec_free(g, q);
}

/* ---- Large-bin index --------------------------------------------------- */

static glindex_t *lindex(glibc_model_t *g, uint32_t arena, uint64_t size) {
  return &g->arenas[arena].lidx[largebin_index(size) - NSMALLBINS];
}

/* First position whose size is <= size (n if none).  The halving step is
 * a conditional move, not a branch: the sizes searched for are random, so
 * a branch would be mispredicted every other step. */
static uint32_t lfind_le(const glindex_t *li, uint64_t size) {
  uint32_t first = 0, len = li->n;
  if (len == 0)
    return 0;
  while (len > 1) { /* the answer lies in [first, first + len] */
    uint32_t half = len / 2;
    first = li->v[first + half].size > size ? first + half : first;
    len -= half;
  }
  return first + (li->v[first].size > size);
}

static void linsert(glibc_model_t *g, glindex_t *li, uint32_t at, uint64_t size,
                    uint32_t head) {
  if (li->n == li->cap) {
    uint32_t   cap = li->cap ? li->cap * 2 : 8;
    glgroup_t *v = realloc(li->v, (size_t)cap * sizeof *v);
    if (v == NULL) {
      set_fail(g, AS_ENOMEM, "out of memory for the large-bin index");
      return;
    }
    li->v = v;
    li->cap = cap;
  }
  memmove(&li->v[at + 1], &li->v[at], (size_t)(li->n - at) * sizeof *li->v);
  li->v[at] = (glgroup_t){.size = size, .head = head};
  li->n++;
}

/* malloc.c:1620-1655 unlink_chunk, including the nextsize skip list.  A
 * bin header's fd_nextsize overlays the next bin's fd (bin_at, 1535-1537),
 * never NULL, so a head that is last in its bin is removed as a group. */
static void unlink_nextsize(glibc_model_t *g, uint32_t p);

/* The list part inline (every coalesce and bin take runs it); the skip
 * list of a large bin's group head out of line. */
static inline void unlink_chunk(glibc_model_t *g, uint32_t p) {
  gchunk_t *P = C(p);
  uint32_t  fd = P->fd, bk = P->bk;
  C(fd)->bk = bk;
  C(bk)->fd = fd;
  if (P->ns_head)
    unlink_nextsize(g, p);
}

__attribute__((noinline)) static void unlink_nextsize(glibc_model_t *g,
                                                      uint32_t       p) {
  gchunk_t  *P = C(p);
  uint32_t   fd = P->fd;
  glindex_t *li = lindex(g, P->arena, ch_size(P));
  uint32_t   at = lfind_le(li, ch_size(P));
  P->ns_head = 0;
  if (C(fd)->state != CS_BINHEAD && !C(fd)->ns_head) {
    li->v[at].head = fd; /* fd heads the group now, in p's place */
    C(fd)->ns_head = 1;
  } else { /* the group was p alone: it leaves the skip list */
    memmove(&li->v[at], &li->v[at + 1],
            (size_t)(li->n - at - 1) * sizeof *li->v);
    li->n--;
  }
}

/* ---- Kernel helpers ----------------------------------------------------- */

/* A write by glibc or the program: the pages become resident.  Several
 * per event: inline at every call site, so the common case (pages already
 * resident, sim/kernel.h's fast test) costs no call. */
__attribute__((always_inline)) static inline void
touch(glibc_model_t *g, uint64_t addr, uint64_t len) {
  if (len == 0 || g->fail != AS_OK)
    return;
  as_status_t rc = sim_kernel_touch(g->kernel, addr, len, &g->ferr);
  if (rc != AS_OK)
    g->fail = rc;
}

/* Two writes in one event, [a, a + alen) then [b, b + blen) with a <= b.
 * Residency is per OS page and nothing runs between them, so when both
 * lie on one page a single touch of the span from a to b's end makes
 * exactly the same page resident as the two writes, at one fast test. */
static void touch_pair(glibc_model_t *g, uint64_t a, uint64_t alen, uint64_t b,
                       uint64_t blen) {
  if ((a ^ (b + blen - 1)) < g->page) {
    touch(g, a, b + blen - a);
    return;
  }
  touch(g, a, alen);
  touch(g, b, blen);
}

/* set_head (malloc.c:1449): the size word at chunk+8. */
static void w_head(glibc_model_t *g, uint32_t p) {
  touch(g, ch_addr(C(p)) + SIZE_SZ, SIZE_SZ);
}
/* set_foot (malloc.c:1452): prev_size of the next chunk. */
static void w_foot(glibc_model_t *g, uint32_t p) {
  touch(g, ch_addr(C(p)) + ch_size(C(p)), SIZE_SZ);
}
/* set/clear_inuse_bit_at_offset (malloc.c:1438-1442): next chunk's size. */
static void w_inuse_at(glibc_model_t *g, uint32_t p, uint64_t off) {
  touch(g, ch_addr(C(p)) + off + SIZE_SZ, SIZE_SZ);
}
/* fd/bk (and fd/bk_nextsize for large sizes) of a chunk put on a list. */
static void w_links(glibc_model_t *g, uint32_t p) {
  touch(g, ch_addr(C(p)) + CHUNK_HDR_SZ,
        in_smallbin_range(ch_size(C(p))) ? 2 * SIZE_SZ : 4 * SIZE_SZ);
}

static void k_status(glibc_model_t *g, as_status_t rc) {
  if (rc != AS_OK && g->fail == AS_OK)
    g->fail = rc;
}

/* ---- Threads, tcache, arenas -------------------------------------------- */

/* madvise_thp (malloc.c:2017-2036; gmaster:1918-1937): MADV_HUGEPAGE on
 * an area of a huge page or more.  An unaligned start happens only for the
 * initial data segment: 2.36-2.42 widen the area down to its page, master
 * narrows it up to the next. */
static void madvise_thp(glibc_model_t *g, uint64_t p, uint64_t size) {
  if (!g->thp_madvise || size < g->thp_pagesize)
    return;
  if (p % g->page != 0) {
    uint64_t down = align_down(p, g->page);
    if (g->version >= GV_243) {
      size -= g->page - (p - down);
      p = down + g->page;
    } else {
      size += p - down;
      p = down;
    }
  }
  k_status(g,
           sim_kernel_madvise(g->kernel, p, size, SIM_MADV_HUGEPAGE, &g->ferr));
}

static gthread_t *thread_grow(glibc_model_t *g, uint32_t tid);

/* The thread record for tid, grown on first use.  Every event calls this:
 * the known-thread case stays inline and the growth out of line. */
static inline gthread_t *thread_get(glibc_model_t *g, uint32_t tid) {
  if (__builtin_expect(tid < g->nthreads, 1))
    return &g->threads[tid];
  return thread_grow(g, tid);
}

__attribute__((noinline)) static gthread_t *thread_grow(glibc_model_t *g,
                                                        uint32_t       tid) {
  static const gthread_t blank = {.arena = -1};
  as_status_t            rc = sim_threadtab_reach(
                 (void **)&g->threads, &g->nthreads, tid, sizeof blank, &blank,
                 sim_kernel_max_memory_bytes(g->kernel), &g->ferr);
  k_status(g, rc);
  return rc == AS_OK ? &g->threads[tid] : NULL;
}

/* The tcache bin the fast paths (__libc_malloc/__libc_free) use for chunk
 * size nb, or -1.  2.36/2.41: csize2tidx (malloc.c:316) below tcache_bins
 * (3303, 4446).  2.42+: only nb < tcache_max_bytes (g242:3474, 3525), small
 * bins by csize2tidx, larger ones by large_csize2tidx (g242:3163-3169). */
static int tc_index(const glibc_model_t *g, uint64_t nb) {
  if (g->version >= GV_242) {
    if (nb >= g->tcache_max_bytes)
      return -1;
    uint64_t idx = (nb - MINSIZE) / MALLOC_ALIGNMENT; /* g242:303 */
    if (idx < TCACHE_SMALL_BINS)
      return (int)idx;
    /* g242:3166 TCACHE_SMALL_BINS + clz(MAX_TCACHE_SMALL_SIZE) - clz(nb);
     * clz of the 32-bit value (1032 in 2.42, 1040 in master: both 21). */
    int large = TCACHE_SMALL_BINS + 21 - __builtin_clz((unsigned)nb);
    return large < TCACHE_ALL_BINS ? large : -1;
  }
  uint64_t idx = (nb - MINSIZE + MALLOC_ALIGN_MASK) / MALLOC_ALIGNMENT;
  return idx < g->tcache_bins ? (int)idx : -1;
}

/* The bin _int_malloc may stash into for nb (malloc.c:3860, 3918, 3980:
 * tc_idx < mp_.tcache_bins; g242:4056, 4116, 4178: < tcache_small_bins). */
static int tc_stash_index(const glibc_model_t *g, uint64_t nb) {
  uint64_t idx = (nb - MINSIZE + MALLOC_ALIGN_MASK) / MALLOC_ALIGNMENT;
  uint64_t lim = g->version >= GV_242 ? g->tcache_small_bins : g->tcache_bins;
  return idx < lim ? (int)idx : -1;
}

/* tcache_put (malloc.c:3169-3180): e->key and e->next are written. */
static void tcache_put(glibc_model_t *g, gthread_t *th, uint32_t p, int idx) {
  C(p)->state = CS_TCACHE;
  C(p)->fd = th->tc_head[idx];
  th->tc_head[idx] = p;
  th->tc_count[idx]++;
  touch(g, ch_addr(C(p)) + CHUNK_HDR_SZ, 2 * SIZE_SZ);
}

/* tcache_put_large (g242:3252-3259): the list is kept in ascending size. */
static void tcache_put_large(glibc_model_t *g, gthread_t *th, uint32_t p,
                             int idx) {
  uint32_t *link = &th->tc_head[idx];
  while (*link != NIL && ch_size(C(*link)) < ch_size(C(p)))
    link = &C(*link)->fd;
  C(p)->state = CS_TCACHE;
  C(p)->fd = *link;
  *link = p;
  th->tc_count[idx]++;
  touch(g, ch_addr(C(p)) + CHUNK_HDR_SZ, 2 * SIZE_SZ);
}

/* tcache_get (malloc.c:3185-3194): pops the head, writes e->key = 0. */
static uint32_t tcache_take(glibc_model_t *g, gthread_t *th, int idx) {
  uint32_t p = th->tc_head[idx];
  th->tc_head[idx] = C(p)->fd;
  th->tc_count[idx]--;
  C(p)->state = CS_INUSE;
  C(p)->fd = NIL;
  return p;
}
static uint32_t tcache_get(glibc_model_t *g, gthread_t *th, int idx) {
  uint32_t p = tcache_take(g, th, idx);
  touch(g, ch_addr(C(p)) + CHUNK_HDR_SZ + SIZE_SZ, SIZE_SZ);
  return p;
}

/* tcache_get_large: 2.42 takes the first chunk >= nb (g242:3262-3273);
 * master only an exact size (gmaster:3104-3115, commit b2b4b46a52). */
static uint32_t tcache_get_large(glibc_model_t *g, gthread_t *th, int idx,
                                 uint64_t nb) {
  uint32_t *link = &th->tc_head[idx];
  while (*link != NIL && ch_size(C(*link)) < nb)
    link = &C(*link)->fd;
  uint32_t p = *link;
  if (p == NIL || (g->version >= GV_243 && ch_size(C(p)) != nb))
    return NIL;
  *link = C(p)->fd;
  th->tc_count[idx]--;
  C(p)->state = CS_INUSE;
  C(p)->fd = NIL;
  touch(g, ch_addr(C(p)) + CHUNK_HDR_SZ + SIZE_SZ, SIZE_SZ);
  return p;
}

/* Allocates an arena struct with its 128 bin heads (malloc_init_state,
 * malloc.c:1954-1975: every bin points to itself). */
static int32_t arena_alloc(glibc_model_t *g) {
  if (g->narenas == g->arenas_cap) {
    uint32_t  cap = g->arenas_cap ? g->arenas_cap * 2 : 16;
    garena_t *a = realloc(g->arenas, (size_t)cap * sizeof *a);
    if (a == NULL) {
      set_fail(g, AS_ENOMEM, "out of memory for arenas");
      return -1;
    }
    g->arenas = a;
    g->arenas_cap = cap;
  }
  /* The heads are taken from the end of the pool, never the recycle
   * list, so that bin i is record bins + i. */
  uint32_t saved = g->recycled, first = NIL;
  g->recycled = NIL;
  for (unsigned i = 0; i < NBINS; i++) {
    uint32_t r = rec_new(g);
    if (r == NIL) {
      g->recycled = saved;
      return -1;
    }
    if (i == 0)
      first = r;
    C(r)->state = CS_BINHEAD;
    C(r)->fd = C(r)->bk = r;
  }
  g->recycled = saved;
  int32_t   ai = (int32_t)g->narenas++;
  garena_t *av = &g->arenas[ai];
  memset(av, 0, sizeof *av);
  av->bins = first;
  av->heap = -1;
  av->next = (uint32_t)ai;
  av->next_free = -1;
  return ai;
}

static int32_t heap_alloc_slot(glibc_model_t *g) {
  if (g->nheaps == g->heaps_cap) {
    uint32_t cap = g->heaps_cap ? g->heaps_cap * 2 : 16;
    gheap_t *h = realloc(g->heaps, (size_t)cap * sizeof *h);
    if (h == NULL) {
      set_fail(g, AS_ENOMEM, "out of memory for heaps");
      return -1;
    }
    g->heaps = h;
    g->heaps_cap = cap;
  }
  return (int32_t)g->nheaps++;
}

/* alloc_new_heap (arena.c:482-559): a HEAP_MAX_SIZE-aligned PROT_NONE
 * reservation of HEAP_MAX_SIZE (arena.c:505-544; glibc maps twice the size
 * and trims, the simulated kernel aligns directly), then mprotect RW of the
 * first size bytes (545).  -1 if the kernel has no room (glibc returns 0). */
static int32_t new_heap(glibc_model_t *g, uint64_t size, uint64_t top_pad) {
  if (size + top_pad < HEAP_MIN_SIZE) /* arena.c:491-498 */
    size = HEAP_MIN_SIZE;
  else if (size + top_pad <= HEAP_MAX_SIZE)
    size += top_pad;
  else if (size > HEAP_MAX_SIZE)
    return -1;
  else
    size = HEAP_MAX_SIZE;
  size = align_up(size, g->page); /* arena.c:499 */
  sim_addr_t  addr;
  as_err_t    e;
  as_status_t rc =
      sim_kernel_mmap(g->kernel, HEAP_MAX_SIZE, HEAP_MAX_SIZE, SIM_PROT_NONE,
                      SIM_OWNER_LIBC_HEAP, &addr, &e);
  if (rc == AS_ENOMEM)
    return -1;
  if (rc != AS_OK) {
    g->ferr = e;
    k_status(g, rc);
    return -1;
  }
  k_status(g,
           sim_kernel_mprotect(g->kernel, addr, size, SIM_PROT_RW, &g->ferr));
  madvise_thp(g, addr, size); /* arena.c:551 */
  int32_t hi = heap_alloc_slot(g);
  if (hi < 0)
    return -1;
  gheap_t *h = &g->heaps[hi];
  h->addr = addr;
  h->size = size;
  h->mprotect_size = size;
  h->prev = -1;
  h->prev_fence = NIL;
  h->live = true;
  g->heaps_live++;
  touch(g, addr, HEAP_INFO_SZ); /* h->size, h->mprotect_size ... */
  return hi;
}

/* grow_heap (arena.c:582-607). */
static int grow_heap(glibc_model_t *g, gheap_t *h, uint64_t diff) {
  diff = align_up(diff, g->page);
  uint64_t new_size = h->size + diff;
  if (new_size > HEAP_MAX_SIZE)
    return -1;
  if (new_size > h->mprotect_size) {
    k_status(g, sim_kernel_mprotect(g->kernel, h->addr + h->mprotect_size,
                                    new_size - h->mprotect_size, SIM_PROT_RW,
                                    &g->ferr));
    h->mprotect_size = new_size;
  }
  h->size = new_size;
  return 0;
}

/* shrink_heap (arena.c:611-637): MADV_DONTNEED (631), the range stays RW. */
static int shrink_heap(glibc_model_t *g, gheap_t *h, uint64_t diff) {
  if (h->size < diff || h->size - diff < HEAP_INFO_SZ)
    return -1;
  uint64_t new_size = h->size - diff;
  k_status(g, sim_kernel_madvise(g->kernel, h->addr + new_size, diff,
                                 SIM_MADV_DONTNEED, &g->ferr));
  h->size = new_size;
  return 0;
}

/* _int_new_arena (arena.c:736-803): a heap holding heap_info, the
 * malloc_state and the top chunk, linked after main_arena (777-782). */
static int32_t int_new_arena(glibc_model_t *g, uint64_t size) {
  uint64_t ms = g->malloc_state_sz;
  int32_t  hi =
      new_heap(g, size + (HEAP_INFO_SZ + ms + MALLOC_ALIGNMENT), g->top_pad);
  if (hi < 0 && g->fail == AS_OK)
    hi = new_heap(g, HEAP_INFO_SZ + ms + MALLOC_ALIGNMENT, g->top_pad);
  if (hi < 0)
    return -1;
  int32_t ai = arena_alloc(g);
  if (ai < 0)
    return -1;
  garena_t *a = &g->arenas[ai];
  gheap_t  *h = &g->heaps[hi];
  h->arena = (uint32_t)ai;
  a->heap = hi;
  a->attached_threads = 1; /* arena.c:757 */
  a->system_mem = h->size;
  /* arena.c:762-767: top right after the malloc_state, aligned so that
   * chunk2mem is 16-aligned. */
  uint64_t ptr = h->addr + HEAP_INFO_SZ + ms;
  uint64_t misalign = (ptr + CHUNK_HDR_SZ) & MALLOC_ALIGN_MASK;
  if (misalign > 0)
    ptr += MALLOC_ALIGNMENT - misalign;
  touch(g, h->addr, ptr - h->addr); /* malloc_init_state writes the bins */
  uint32_t t = rec_new(g);
  if (t == NIL)
    return -1;
  a = &g->arenas[ai];
  set_addr(C(t), ptr);
  set_size(C(t), h->addr + h->size - ptr);
  C(t)->state = CS_TOP;
  C(t)->arena = (uint16_t)ai;
  a->top = t;
  w_head(g, t);
  a->next = g->arenas[0].next; /* arena.c:777-782 */
  g->arenas[0].next = (uint32_t)ai;
  return ai;
}

/* detach_arena (arena.c:722-734). */
static void detach_arena(glibc_model_t *g, int32_t replaced) {
  if (replaced >= 0)
    g->arenas[replaced].attached_threads--;
}

/* arena_get2 (arena.c:923-971) for a thread without an arena. */
static int32_t arena_get2(glibc_model_t *g, gthread_t *th, uint64_t size) {
  /* get_free_list (arena.c:807-837): LIFO reuse of arenas whose threads
   * all exited. */
  if (g->free_list >= 0) {
    int32_t a = g->free_list;
    g->free_list = g->arenas[a].next_free;
    g->arenas[a].attached_threads = 1;
    detach_arena(g, th->arena);
    th->arena = a;
    return a;
  }
  if (g->narenas_limit == 0) { /* arena.c:934-949, computed once */
    if (g->arena_max != 0)
      g->narenas_limit = g->arena_max;
    else if (g->narenas > g->arena_test)
      /* NARENAS_FROM_NCORES (malloc.c:1935): 8 per CPU on 64-bit; with no
       * CPU information glibc assumes 2 (arena.c:945-947). */
      g->narenas_limit = 8 * (g->ncpus >= 1 ? g->ncpus : 2);
  }
  /* arena.c:959: n <= narenas_limit - 1, with limit 0 wrapping around. */
  if ((uint64_t)g->narenas <= g->narenas_limit - 1) {
    int32_t a = int_new_arena(g, size);
    if (a < 0) {
      if (g->fail == AS_OK)
        set_fail(g, AS_ENOMEM, "no address space for a new arena heap");
      return -1;
    }
    detach_arena(g, th->arena); /* arena.c:787 */
    th->arena = a;
    return a;
  }
  /* reused_arena (arena.c:862-921).  In a replay no arena is ever locked
   * by another thread, so the trylock at 876 succeeds on next_to_use
   * itself: arenas are handed out round-robin along the ring. */
  int32_t result = (int32_t)g->next_to_use;
  detach_arena(g, th->arena);
  /* remove_from_free_list (arena.c:909): the free list is empty here. */
  int32_t *link = &g->free_list;
  while (*link >= 0) {
    if (*link == result) {
      *link = g->arenas[result].next_free;
      break;
    }
    link = &g->arenas[*link].next_free;
  }
  g->arenas[result].attached_threads++;
  th->arena = result;
  g->next_to_use = g->arenas[result].next; /* arena.c:918 */
  return result;
}

/* arena_get (arena.c:138-142): the thread's sticky arena. */
static int32_t arena_get(glibc_model_t *g, gthread_t *th, uint64_t size) {
  if (th->arena >= 0)
    return th->arena;
  return arena_get2(g, th, size);
}

/* ---- sysmalloc, systrim, heap_trim -------------------------------------- */

static void int_free(glibc_model_t *g, int32_t ai, uint32_t p, gthread_t *th,
                     bool tcache_ok);
static void malloc_consolidate(glibc_model_t *g, int32_t ai);

/* The chunk header sizes of glibc's mmapped chunks: 2.36-2.42 add SIZE_SZ
 * (malloc.c:2427), master adds CHUNK_HDR_SZ (gmaster:2261, 614cfd0f8a). */
static uint64_t mmap_chunk_size(const glibc_model_t *g, uint64_t nb) {
  return align_up(nb + (g->version >= GV_243 ? CHUNK_HDR_SZ : SIZE_SZ),
                  g->page);
}

/* sysmalloc_mmap (malloc.c:2413-2493): its own mapping, header written. */
static uint32_t sysmalloc_mmap(glibc_model_t *g, uint64_t nb, int32_t ai) {
  uint64_t size = mmap_chunk_size(g, nb);
  if (size <= nb)
    return NIL;
  sim_addr_t  mm;
  as_err_t    e;
  as_status_t rc = sim_kernel_mmap(g->kernel, size, 0, SIM_PROT_RW,
                                   SIM_OWNER_LIBC_MMAP, &mm, &e);
  if (rc == AS_ENOMEM)
    return NIL; /* MAP_FAILED: the caller tries the heap */
  if (rc != AS_OK) {
    g->ferr = e;
    k_status(g, rc);
    return NIL;
  }
  uint32_t p = rec_new(g);
  if (p == NIL)
    return NIL;
  set_addr(C(p), mm);
  set_size(C(p), size);
  C(p)->aux = 0;
  C(p)->state = CS_MMAP;
  C(p)->arena = (uint16_t)ai;
  madvise_thp(g, mm, size);   /* 2441-2444 */
  touch(g, mm, CHUNK_HDR_SZ); /* set_prev_size, set_head (2477-2479) */
  g->n_mmaps++;               /* 2483 */
  g->mmapped_mem += size;     /* 2487 */
  return p;
}

/* Splits nb bytes off the arena's top (malloc.c:2940-2953, 4355-4370):
 * writes the victim's header and the new top's header at victim+nb. */
static uint32_t split_top(glibc_model_t *g, int32_t ai, uint64_t nb) {
  uint32_t victim = g->arenas[ai].top;
  uint32_t rem = split(g, victim, nb);
  if (rem == NIL)
    return NIL;
  C(rem)->state = CS_TOP;
  g->arenas[ai].top = rem;
  C(victim)->state = CS_INUSE;
  /* set_head of victim, then of the new top right above it. */
  uint64_t head = ch_addr(C(victim)) + SIZE_SZ;
  uint64_t top_head = ch_addr(C(rem)) + SIZE_SZ;
  if (g->payload_due != 0) {
    /* With the program's write of [mem, mem + payload_due), which ends at
     * most 24 bytes below top_head (request2size), a page that meets the
     * span from head to the end of top's size word meets one of the three
     * writes: one touch makes the same pages resident. */
    g->payload_due = 0;
    touch(g, head, top_head + SIZE_SZ - head);
    return victim;
  }
  touch_pair(g, head, SIZE_SZ, top_head, SIZE_SZ);
  return victim;
}

/* sysmalloc (malloc.c:2540-2958).  Returns an in-use chunk or NIL. */
static uint32_t sysmalloc(glibc_model_t *g, int32_t ai, uint64_t nb,
                          gthread_t *th) {
  bool tried_mmap = false;
  /* 2573-2592: big requests get their own mapping. */
  if (nb >= g->mmap_threshold && g->n_mmaps < g->n_mmaps_max) {
    uint32_t mm = sysmalloc_mmap(g, nb, ai);
    if (mm != NIL || g->fail != AS_OK)
      return mm;
    tried_mmap = true;
  }
  garena_t *av = &g->arenas[ai];
  uint32_t  old_top = av->top;
  uint64_t  old_size = old_top != NIL ? ch_size(C(old_top)) : 0;

  if (ai != 0) {
    /* 2620-2676: grow the current heap, else a new heap, else mmap. */
    gheap_t *h = &g->heaps[av->heap];
    uint64_t old_hsz = h->size;
    if (MINSIZE + nb > old_size &&
        grow_heap(g, h, MINSIZE + nb - old_size) == 0) {
      av->system_mem += h->size - old_hsz; /* 2631 */
      set_size(C(old_top), h->addr + h->size - ch_addr(C(old_top)));
      w_head(g, old_top);
    } else {
      int32_t nh = new_heap(g, nb + (MINSIZE + HEAP_INFO_SZ), g->top_pad);
      if (g->fail != AS_OK)
        return NIL;
      if (nh >= 0) {
        av = &g->arenas[ai];
        gheap_t *H = &g->heaps[nh];
        H->arena = (uint32_t)ai;
        H->prev = av->heap;
        av->heap = nh;
        av->system_mem += H->size; /* 2640 */
        uint32_t t = rec_new(g);
        if (t == NIL)
          return NIL;
        set_addr(C(t), H->addr + HEAP_INFO_SZ); /* 2642-2643 */
        set_size(C(t), H->size - HEAP_INFO_SZ);
        C(t)->state = CS_TOP;
        C(t)->arena = (uint16_t)ai;
        g->arenas[ai].top = t;
        w_head(g, t);
        /* 2645-2665: the old top keeps (old_size - MINSIZE) & ~15 bytes
         * and is freed; the rest becomes the fenceposts (one record). */
        uint64_t keep = (old_size - MINSIZE) & ~MALLOC_ALIGN_MASK;
        uint32_t fence;
        if (keep >= MINSIZE) {
          fence = split(g, old_top, keep);
          if (fence == NIL)
            return NIL;
          C(fence)->state = CS_FENCE;
          touch(g, ch_addr(C(fence)) + SIZE_SZ, 3 * SIZE_SZ); /* 2651-2657 */
          C(old_top)->state = CS_INUSE;
          w_head(g, old_top);
        } else {
          /* 2661-2664: the whole old top is the fencepost; its size word
           * says keep + 16, so the footer and the second fencepost's head
           * are written at keep + 16 .. keep + 32, inside the old top (the
           * record keeps the full size, which can end where the heap's RW
           * part ends). */
          fence = old_top;
          C(fence)->state = CS_FENCE;
          w_head(g, fence);
          touch(g, ch_addr(C(fence)) + keep + CHUNK_HDR_SZ, 2 * SIZE_SZ);
        }
        g->heaps[nh].prev_fence = fence;
        if (keep >= MINSIZE)
          /* _int_free (2659) in 2.36/2.41; _int_free_chunk, no tcache, in
           * 2.42+ (g242:2655). */
          int_free(g, ai, old_top, th, g->version < GV_242);
      } else if (!tried_mmap) {
        return sysmalloc_mmap(g, nb, ai); /* 2667-2675 */
      }
    }
  } else {
    /* 2677-2933: the main arena extends the program break. */
    uint64_t   size = nb + g->top_pad + MINSIZE; /* 2681 */
    sim_addr_t brk = sim_kernel_brk_current(g->kernel);
    size -= old_size; /* 2689-2690 contiguous */
    /* 2702-2711: with thp_pagesize the new break is a huge-page boundary
     * (__curbrk + size rounded up), otherwise size is whole pages. */
    size = g->thp_pagesize != 0 ? align_up(brk + size, g->thp_pagesize) - brk
                                : align_up(size, g->page);
    as_err_t    e;
    as_status_t rc = sim_kernel_brk(g->kernel, brk + size, &e);
    if (rc != AS_OK) {
      /* glibc would fall back to mmap (2727-2753); not modelled. */
      g->ferr = e;
      k_status(g, rc);
      return NIL;
    }
    madvise_thp(g, brk, size); /* 2723 */
    if (g->sbrk_base == 0)     /* 2758 */
      g->sbrk_base = brk;
    av->system_mem += size;
    if (old_top != NIL && brk == ch_addr(C(old_top)) + old_size) {
      set_size(C(old_top), old_size + size); /* 2766-2767 */
      w_head(g, old_top);
    } else if (old_top != NIL) {
      set_fail(g, AS_EINVAL, "the break moved under the main heap");
      return NIL;
    } else {
      /* First time (2792-2891): align the first chunk and extend the
       * break to a page boundary. */
      uint64_t aligned = brk, correction = 0;
      uint64_t front = (brk + CHUNK_HDR_SZ) & MALLOC_ALIGN_MASK;
      if (front > 0) {
        correction = MALLOC_ALIGNMENT - front;
        aligned += correction;
      }
      uint64_t end = brk + size + correction;
      correction += align_up(end, g->page) - end;
      if (correction > 0) {
        rc = sim_kernel_brk(g->kernel, brk + size + correction, &e);
        if (rc != AS_OK)
          correction = 0; /* 2847-2851 */
        else
          madvise_thp(g, brk + size, correction); /* 2853 */
      }
      uint32_t t = rec_new(g);
      if (t == NIL)
        return NIL;
      av = &g->arenas[ai];
      set_addr(C(t), aligned);
      set_size(C(t), brk + size - aligned + correction); /* 2890 */
      C(t)->state = CS_TOP;
      C(t)->arena = 0;
      av->top = t;
      av->system_mem += correction;
      w_head(g, t);
    }
  }
  av = &g->arenas[ai];
  if (av->top != NIL && ch_size(C(av->top)) >= nb + MINSIZE) /* 2944 */
    return split_top(g, ai, nb);
  /* 2955-2957: ENOMEM.  It happens in a thread arena when freeing the old
   * top behind a new heap's fencepost (2659) coalesces >= 64 KiB, so that
   * heap_trim (4684) unmaps the heap just made; callers then retry in
   * main_arena (arena_get_retry, arena.c:977-994). */
  return NIL;
}

/* systrim (malloc.c:2970-3034): gives back whole pages above
 * top_pad + MINSIZE by lowering the break.
 *
 * Unlike heap_trim (arena.c:697, "top_area < 0 ||"), systrim compares the
 * long top_area with the size_t pad (2983; 2.41 :2971, master :2764), so
 * a 32-byte top (top_area -1) passes as ULONG_MAX; extra is then a negative
 * long (2992) and MORECORE (-extra) raises the break by pad + 1 rounded up
 * to a page, which "released" (negative) adds to the top (3021-3027).
 * Measured with glibc 2.36 and 2.41: malloc_trim(0) with a 32-byte top
 * raises the break by 4096 bytes and leaves a 4128-byte top; a free of 64
 * KiB or more with M_TRIM_THRESHOLD 0 and a 32-byte top raises it by
 * 135,168. */
static void systrim(glibc_model_t *g, uint64_t pad) {
  garena_t *av = &g->arenas[0];
  if (av->top == NIL)
    return;
  uint64_t top_size = ch_size(C(av->top));
  uint64_t top_area = top_size - MINSIZE - 1; /* 2982, wraps below 33 */
  if (top_area <= pad)                        /* 2983 */
    return;
  /* 2986-2992: in huge pages when thp_pagesize is set. */
  int64_t extra = (int64_t)align_down(
      top_area - pad, g->thp_pagesize != 0 ? g->thp_pagesize : g->page);
  if (extra == 0)
    return;
  sim_addr_t cur = sim_kernel_brk_current(g->kernel);
  if (cur != ch_addr(C(av->top)) + top_size) /* 3002 */
    return;
  as_err_t e;
  /* 3014-3024: a failed MORECORE leaves the break: released is 0. */
  if (sim_kernel_brk(g->kernel, cur - (uint64_t)extra, &e) != AS_OK)
    return;
  av->system_mem -= (uint64_t)extra; /* 3026-3027 */
  set_size(C(av->top), ch_size(C(av->top)) - (uint64_t)extra);
  w_head(g, av->top);
}

/* heap_trim (arena.c:641-715): drops whole heaps whose only content is the
 * top chunk, then shrinks the newest heap with MADV_DONTNEED. */
static void heap_trim(glibc_model_t *g, int32_t ai, uint64_t pad) {
  garena_t *av = &g->arenas[ai];
  int32_t   hi = av->heap;
  /* 651: while top sits right after this heap's heap_info. */
  while (ch_addr(C(av->top)) == g->heaps[hi].addr + HEAP_INFO_SZ &&
         g->heaps[hi].prev >= 0) {
    gheap_t *heap = &g->heaps[hi];
    gheap_t *prev_heap = &g->heaps[heap->prev];
    uint32_t fence = heap->prev_fence;
    uint32_t p = C(fence)->prev;
    /* 654-664: the fenceposts plus a free chunk before them. */
    uint64_t new_size = ch_size(C(fence));
    bool     merge = p != NIL && C(p)->state == CS_BINNED;
    if (merge)
      new_size += ch_size(C(p));
    /* 666-668 */
    if (new_size + (HEAP_MAX_SIZE - prev_heap->size) < pad + MINSIZE + g->page)
      break;
    av->system_mem -= heap->size; /* 669 */
    k_status(g, sim_kernel_munmap(g->kernel, heap->addr, HEAP_MAX_SIZE,
                                  &g->ferr)); /* 673 */
    heap->live = false;
    g->heaps_live--;
    rec_free(g, av->top);
    int32_t prev = heap->prev;
    av->heap = prev;
    hi = prev;
    uint32_t top = fence;
    if (merge) { /* 675-679 */
      unlink_chunk(g, p);
      absorb_next(g, p);
      top = p;
    }
    C(top)->state = CS_TOP; /* 683-684 */
    C(top)->next = NIL;
    set_size(C(top), new_size);
    av->top = top;
    w_head(g, top);
  }
  /* 691-714 */
  uint64_t top_size = ch_size(C(av->top));
  if (top_size < g->trim_threshold)
    return;
  int64_t top_area = (int64_t)top_size - (int64_t)MINSIZE - 1;
  if (top_area < 0 || (uint64_t)top_area <= pad)
    return;
  uint64_t extra = align_down((uint64_t)top_area - pad, g->page);
  if (extra == 0)
    return;
  if (shrink_heap(g, &g->heaps[hi], extra) != 0)
    return;
  av->system_mem -= extra;
  set_size(C(av->top), top_size - extra);
  w_head(g, av->top);
}

/* ---- _int_free, malloc_consolidate -------------------------------------- */

/* Puts a free chunk at the front of the unsorted list with its header,
 * footer and links written (malloc.c:4623-4638). */
/* Links p at the front of bin i (1: the unsorted list). */
static void bin_link_front(glibc_model_t *g, garena_t *av, unsigned i,
                           uint32_t p) {
  uint32_t bck = av->bins + i, fwd = C(bck)->fd;
  C(p)->fd = fwd;
  C(p)->bk = bck;
  C(p)->ns_head = 0; /* 4629-4633 */
  C(bck)->fd = p;
  C(fwd)->bk = p;
  C(p)->state = CS_BINNED;
}

static void unsorted_link(glibc_model_t *g, garena_t *av, uint32_t p) {
  bin_link_front(g, av, 1, p);
}

/* The writes that put free chunk p in a list: its header, links and
 * footer. */
static void write_free_chunk(glibc_model_t *g, uint32_t p) {
  /* set_head (size at +8) and the links (+16..) are one contiguous write,
   * then set_foot at the next chunk. */
  uint64_t head = ch_addr(C(p)) + SIZE_SZ, foot = ch_addr(C(p)) + ch_size(C(p));
  touch_pair(g, head,
             SIZE_SZ + (in_smallbin_range(ch_size(C(p))) ? 2 : 4) * SIZE_SZ,
             foot, SIZE_SZ);
}

/* Where a chunk coalesced by free goes: the unsorted list, or from 2.41 a
 * small chunk straight to the front of its small bin, marked in the binmap
 * (g241 malloc.c:4770-4795 _int_free_create_chunk, commit e2436d6f5a
 * "malloc: send freed small chunks to smallbin"); malloc_consolidate still
 * uses the unsorted list (g241:4938-4945).  Either way glibc writes the
 * same header, links and footer. */
static void free_push(glibc_model_t *g, garena_t *av, uint32_t p,
                      bool by_free) {
  if (by_free && g->version >= GV_241 && in_smallbin_range(ch_size(C(p)))) {
    unsigned i = smallbin_index(ch_size(C(p)));
    bin_link_front(g, av, i, p);
    mark_bin(av, i);
  } else {
    unsorted_link(g, av, p);
  }
  write_free_chunk(g, p);
}

static void unsorted_push(glibc_model_t *g, garena_t *av, uint32_t p) {
  unsorted_link(g, av, p);
  write_free_chunk(g, p);
}

/* Starts fetching the records unlink_chunk(g, p) writes. */
static void prefetch_list_neighbours(const glibc_model_t *g, uint32_t p) {
  __builtin_prefetch(C(C(p)->fd));
  __builtin_prefetch(C(C(p)->bk));
}

/* Coalesces chunk p (in use, not in any list) with free neighbours and puts
 * it in a bin (free_push; by_free: for free, not malloc_consolidate) or
 * into top; returns the coalesced size (malloc.c:4594-4653, also
 * malloc_consolidate 4757-4799). */
static uint64_t merge_chunk(glibc_model_t *g, int32_t ai, uint32_t p,
                            bool by_free) {
  garena_t *av = &g->arenas[ai];
  uint32_t  prev = C(p)->prev, next = C(p)->next;
  bool      prev_free = prev != NIL && C(prev)->state == CS_BINNED;
  bool      next_free = next != av->top && C(next)->state == CS_BINNED;
  /* The records the unlinks below write are at random places in the pool:
   * fetching all of them now overlaps their misses instead of taking the
   * lower neighbour's, then the upper one's, one after the other. */
  if (prev_free)
    prefetch_list_neighbours(g, prev);
  if (next_free) {
    prefetch_list_neighbours(g, next);
    __builtin_prefetch(C(C(next)->next)); /* absorb_next links it */
  }
  if (prev_free) { /* 4597-4604 */
    unlink_chunk(g, prev);
    absorb_next(g, prev); /* p's upper neighbour stays next */
    p = prev;
  }
  if (next != av->top) { /* 4606-4641 */
    if (next_free) {
      unlink_chunk(g, next);
      absorb_next(g, p);
    } else {
      w_inuse_at(g, p, ch_size(C(p))); /* clear_inuse_bit_at_offset */
    }
    free_push(g, av, p, by_free);
    return ch_size(C(p));
  }
  absorb_next(g, p); /* 4648-4653: into top */
  C(p)->state = CS_TOP;
  av->top = p;
  w_head(g, p);
  return ch_size(C(p));
}

/* The trim attempt after a large coalesced free (malloc.c:4668-4686;
 * g241 _int_free_maybe_consolidate; gmaster:4545 _int_free_maybe_trim). */
static void maybe_trim(glibc_model_t *g, int32_t ai, uint64_t size) {
  if (size < FASTBIN_CONSOLIDATION_THRESHOLD)
    return;
  if (g->arenas[ai].have_fastchunks) /* 4669-4670 */
    malloc_consolidate(g, ai);
  if (ai == 0) {
    if (ch_size(C(g->arenas[0].top)) >= g->trim_threshold) /* 4674-4676 */
      systrim(g, g->top_pad);
  } else {
    heap_trim(g, ai, g->top_pad); /* 4681-4684: always */
  }
}

/* _int_free (malloc.c:4416-4698) for a non-mmapped chunk of arena ai.
 * tcache_ok: whether the tcache may take it (2.36/2.41 _int_free has the
 * tcache at 4443-4481; 2.42+ internal frees call _int_free_chunk). */
static void int_free_coalesce(glibc_model_t *g, int32_t ai, uint32_t p);

/* The tcache and fastbin pushes, most frees, stay inline in the free entry
 * points (a call per level cost 10-20 instructions of an 80-instruction
 * push); the coalescing path is out of line. */
static inline void int_free(glibc_model_t *g, int32_t ai, uint32_t p,
                            gthread_t *th, bool tcache_ok) {
  uint64_t size = ch_size(C(p));
  if (tcache_ok && th != NULL && th->tcache != NIL) {
    int idx = tc_index(g, size);
    if (idx >= 0 && th->tc_count[idx] < g->tcache_count) { /* 4475-4479 */
      tcache_put(g, th, p, idx);
      return;
    }
  }
  if (size <= g->global_max_fast) { /* 4489-4559 (TRIM_FASTBINS 0) */
    garena_t *av = &g->arenas[ai];
    unsigned  idx = fastbin_index(size);
    av->have_fastchunks = true;
    C(p)->state = CS_FAST;
    C(p)->fd = av->fast[idx];
    av->fast[idx] = p;
    touch(g, ch_addr(C(p)) + CHUNK_HDR_SZ, SIZE_SZ); /* p->fd */
    return;
  }
  int_free_coalesce(g, ai, p);
}

/* _int_free's coalescing and trim (malloc.c:4594-4686). */
__attribute__((noinline)) static void
int_free_coalesce(glibc_model_t *g, int32_t ai, uint32_t p) {
  uint64_t merged = merge_chunk(g, ai, p, true);
  maybe_trim(g, ai, merged);
}

/* malloc_consolidate (malloc.c:4710-4805): every fastbin chunk is
 * coalesced and put in the unsorted list (or top), bins in index order,
 * each bin from its head. */
static void malloc_consolidate(glibc_model_t *g, int32_t ai) {
  garena_t *av = &g->arenas[ai];
  av->have_fastchunks = false;
  for (unsigned i = 0; i < NFASTBINS; i++) {
    uint32_t p = g->arenas[ai].fast[i];
    g->arenas[ai].fast[i] = NIL;
    while (p != NIL) {
      uint32_t nextp = C(p)->fd;
      __builtin_prefetch(C(nextp)); /* overlaps merge_chunk's misses */
      C(p)->state = CS_INUSE;
      merge_chunk(g, ai, p, false);
      p = nextp;
    }
  }
}

/* ---- _int_malloc -------------------------------------------------------- */

/* Puts an unsorted chunk into its small or large bin (malloc.c:4081-4152),
 * keeping large bins sorted by size with the nextsize skip list. */
static void place_in_bin(glibc_model_t *g, garena_t *av, uint32_t victim) {
  uint64_t size = ch_size(C(victim));
  unsigned vi;
  uint32_t bck, fwd;
  if (in_smallbin_range(size)) {
    vi = smallbin_index(size);
    bck = av->bins + vi;
    fwd = C(bck)->fd;
  } else {
    vi = largebin_index(size);
    bck = av->bins + vi;
    fwd = C(bck)->fd;
    glindex_t *li = &av->lidx[vi - NSMALLBINS];
    if (fwd != bck) {
      /* 4105-4113: smaller than all.  glibc reads the size of the bin's
       * last chunk (4102-4103); the index holds it (its last group), so
       * the test needs no record from a random place in the pool. */
      if (size < li->v[li->n - 1].size) {
        fwd = bck;
        bck = C(bck)->bk;
        C(victim)->ns_head = 1; /* 4108-4110: the last group */
        linsert(g, li, li->n, size, victim);
      } else {
        /* 4117-4121: the first group (from the largest) <= size. */
        uint32_t at = lfind_le(li, size);
        fwd = li->v[at].head;
        if (size == ch_size(C(fwd))) {
          fwd = C(fwd)->fd; /* 4123-4126: second position */
        } else {
          C(victim)->ns_head = 1; /* 4127-4132: a group before fwd's */
          linsert(g, li, at, size, victim);
        }
        bck = C(fwd)->bk;
      }
    } else {
      C(victim)->ns_head = 1; /* 4140: the only group */
      li->n = 0;
      linsert(g, li, 0, size, victim);
    }
  }
  mark_bin(av, vi);
  C(victim)->bk = bck;
  C(victim)->fd = fwd;
  C(fwd)->bk = victim;
  C(bck)->fd = victim;
}

/* Splits a chunk taken from a bin; the remainder goes to the front of the
 * unsorted list (malloc.c:4206-4232, 4310-4336). */
static void split_to_unsorted(glibc_model_t *g, int32_t ai, uint32_t victim,
                              uint64_t nb, bool advertise) {
  uint32_t rem = split(g, victim, nb);
  if (rem == NIL)
    return;
  garena_t *av = &g->arenas[ai];
  if (advertise) /* 4318-4320: only for small requests */
    av->last_remainder = ch_addr(C(rem));
  /* The remainder's header, links and footer, then the victim's header:
   * when all of them fall in one OS page, one touch from the victim's
   * header to the footer makes that same page resident. */
  uint64_t lo = ch_addr(C(victim)) + SIZE_SZ;
  uint64_t hi = ch_addr(C(rem)) + ch_size(C(rem)) + SIZE_SZ;
  if ((lo ^ (hi - 1)) < g->page) {
    unsorted_link(g, av, rem);
    touch(g, lo, hi - lo);
    return;
  }
  unsorted_push(g, av, rem);
  w_head(g, victim);
}

/* _int_malloc (malloc.c:3765-4413).  th is the calling thread (its tcache
 * receives stashed chunks).  Returns an in-use chunk or NIL on failure. */
static uint32_t int_malloc(glibc_model_t *g, int32_t ai, uint64_t nb,
                           gthread_t *th) {
  garena_t *av = &g->arenas[ai];
  bool      tc = th != NULL && th->tcache != NIL;
  unsigned  idx;

  /* 3828-3889: fastbins, then stash same-size chunks in the tcache. */
  if (nb <= g->global_max_fast) {
    idx = fastbin_index(nb);
    uint32_t victim = av->fast[idx];
    if (victim != NIL) {
      av->fast[idx] = C(victim)->fd;
      int tci = tc ? tc_stash_index(g, nb) : -1;
      if (tci >= 0) {
        uint32_t tv;
        while (th->tc_count[tci] < g->tcache_count &&
               (tv = av->fast[idx]) != NIL) {
          av->fast[idx] = C(tv)->fd;
          tcache_put(g, th, tv, tci);
        }
      }
      C(victim)->state = CS_INUSE;
      C(victim)->fd = NIL;
      return victim;
    }
  }

  /* 3897-3946: smallbins hold one size each; take the oldest (last). */
  if (in_smallbin_range(nb)) {
    idx = smallbin_index(nb);
    uint32_t bin = av->bins + idx;
    uint32_t victim = C(bin)->bk;
    if (victim != bin) {
      uint32_t bck = C(victim)->bk;
      __builtin_prefetch(C(bck)); /* the next chunk the stash takes */
      w_inuse_at(g, victim, nb);
      C(bin)->bk = bck;
      C(bck)->fd = bin;
      int tci = tc ? tc_stash_index(g, nb) : -1;
      if (tci >= 0) {
        uint32_t tv;
        while (th->tc_count[tci] < g->tcache_count &&
               (tv = C(bin)->bk) != bin) {
          bck = C(tv)->bk;
          __builtin_prefetch(C(bck));
          w_inuse_at(g, tv, nb);
          C(bin)->bk = bck;
          C(bck)->fd = bin;
          tcache_put(g, th, tv, tci);
        }
      }
      C(victim)->state = CS_INUSE;
      return victim;
    }
  } else {
    idx = largebin_index(nb); /* 3957-3962 */
    if (av->have_fastchunks)
      malloc_consolidate(g, ai);
  }

  /* 3976-3983 */
  int  tc_idx = tc ? tc_stash_index(g, nb) : -1;
  bool return_cached = false;

  for (;;) {
    int      iters = 0;
    uint32_t unsorted = av->bins + 1;
    uint32_t victim;
    while ((victim = C(unsorted)->bk) != unsorted) { /* 3990 */
      uint32_t bck = C(victim)->bk;
      uint64_t size = ch_size(C(victim));
      __builtin_prefetch(
          C(bck)); /* the next victim, while this one is binned */
      /* 4018-4042: last_remainder split for small requests. */
      if (in_smallbin_range(nb) && bck == unsorted &&
          ch_addr(C(victim)) == av->last_remainder && size > nb + MINSIZE) {
        uint32_t rem = split(g, victim, nb);
        if (rem == NIL)
          return NIL;
        av = &g->arenas[ai];
        C(unsorted)->bk = C(unsorted)->fd = rem;
        av->last_remainder = ch_addr(C(rem));
        C(rem)->bk = C(rem)->fd = unsorted;
        C(rem)->ns_head = 0;
        C(rem)->state = CS_BINNED;
        C(victim)->state = CS_INUSE;
        w_head(g, victim);
        w_head(g, rem);
        w_links(g, rem);
        w_foot(g, rem);
        return victim;
      }
      /* 4046-4048: remove from the unsorted list. */
      C(unsorted)->bk = bck;
      C(bck)->fd = unsorted;
      if (size == nb) { /* 4051-4079: exact fit */
        w_inuse_at(g, victim, size);
        if (tc_idx >= 0 && th->tc_count[tc_idx] < g->tcache_count) {
          tcache_put(g, th, victim, tc_idx);
          return_cached = true;
          continue;
        }
        C(victim)->state = CS_INUSE;
        return victim;
      }
      place_in_bin(g, av, victim);
      /* 4150-4157: tcache_unsorted_limit is 0 (no limit) by default. */
      if (++iters >= MAX_ITERS)
        break;
    }
    if (return_cached) /* 4167-4172 */
      return tcache_get(g, th, tc_idx);

    /* 4179-4239: large request: best fit in its own bin. */
    if (!in_smallbin_range(nb)) {
      /* 4183-4186: the bin's first chunk is its largest.  The sizes glibc
       * reads from chunks here are those of the index's groups (group i
       * is the chunks of size v[i].size, in list order), so only the
       * chunk taken is read from the pool. */
      uint32_t   bin = av->bins + idx;
      glindex_t *li = &av->lidx[idx - NSMALLBINS];
      if (li->n != 0 && li->v[0].size >= nb) {
        /* 4188-4191: from the smallest group up, the first >= nb. */
        uint32_t at = lfind_le(li, nb);
        if (at == li->n || li->v[at].size < nb)
          at--;
        victim = li->v[at].head;
        uint64_t size = li->v[at].size;
        /* 4195-4198: take the group's second chunk if it has one (its fd
         * has the same size unless it heads the next group, or is the
         * bin itself after the last group), leaving the skip links. */
        uint32_t next_group = at + 1 < li->n ? li->v[at + 1].head : bin;
        if (C(victim)->fd != next_group)
          victim = C(victim)->fd;
        uint64_t remainder_size = size - nb;
        unlink_chunk(g, victim);
        if (remainder_size < MINSIZE) {
          w_inuse_at(g, victim, size);
        } else {
          split_to_unsorted(g, ai, victim, nb, false);
          av = &g->arenas[ai];
        }
        C(victim)->state = CS_INUSE;
        return victim;
      }
    }

    /* 4241-4346: the next non-empty bin by binmap, smallest chunk (last). */
    unsigned i = idx + 1;
    for (;;) {
      unsigned block = i >> 5;
      uint32_t map =
          block < BINMAPSIZE ? av->binmap[block] & (~0u << (i & 31)) : 0;
      while (map == 0) {
        if (++block >= BINMAPSIZE)
          goto use_top;
        map = av->binmap[block];
      }
      i = (block << 5) + (unsigned)__builtin_ctz(map);
      uint32_t bin = av->bins + i;
      victim = C(bin)->bk;
      if (victim == bin) { /* 4285-4290: false alarm, clear the bit */
        av->binmap[block] &= ~(1u << (i & 31));
        i++;
        continue;
      }
      uint64_t size = ch_size(C(victim));
      uint64_t remainder_size = size - nb;
      unlink_chunk(g, victim);
      if (remainder_size < MINSIZE) {
        w_inuse_at(g, victim, size);
      } else {
        split_to_unsorted(g, ai, victim, nb, in_smallbin_range(nb));
        av = &g->arenas[ai];
      }
      C(victim)->state = CS_INUSE;
      return victim;
    }

  use_top:
    /* 4349-4407 */
    if (av->top != NIL && ch_size(C(av->top)) >= nb + MINSIZE)
      return split_top(g, ai, nb);
    if (av->have_fastchunks) {
      malloc_consolidate(g, ai);
      av = &g->arenas[ai];
      idx = in_smallbin_range(nb) ? smallbin_index(nb) : largebin_index(nb);
      continue;
    }
    return sysmalloc(g, ai, nb, th);
  }
}

/* ---- Public entry points (malloc ... trim) ------------------------------ */

static uint64_t mem_of(glibc_model_t *g, uint32_t p) {
  return ch_addr(C(p)) + CHUNK_HDR_SZ; /* chunk2mem */
}

/* _int_malloc with __libc_malloc's retry (malloc.c:3323-3331): a thread
 * arena that cannot grow hands the request to main_arena
 * (arena_get_retry, arena.c:981-986); the thread stays attached to its
 * own arena. */
static uint32_t int_malloc_retry(glibc_model_t *g, int32_t ai, uint64_t nb,
                                 gthread_t *th) {
  uint32_t p = int_malloc(g, ai, nb, th);
  if (p == NIL && g->fail == AS_OK && ai != 0)
    p = int_malloc(g, 0, nb, th);
  return p;
}

/* tcache_init (malloc.c:3228-3261; g242:3380-3399): the thread's first
 * malloc takes the tcache struct from its arena and zeroes it. */
static void tcache_init(glibc_model_t *g, gthread_t *th) {
  if (th->shutting_down || th->tcache != NIL)
    return;
  int32_t ai = arena_get(g, th, g->tcache_struct_bytes);
  if (ai < 0)
    return;
  uint64_t due = g->payload_due; /* the program's chunk's, not this one's */
  g->payload_due = 0;
  uint32_t p =
      int_malloc_retry(g, ai, request2size(g->tcache_struct_bytes), th);
  g->payload_due = due;
  if (p == NIL)
    return;
  C(p)->user = 0;
  th->tcache = p;
  if (C(p)->state == CS_MMAP)
    touch(g, ch_addr(C(p)) + CHUNK_HDR_SZ, g->tcache_struct_bytes);
  else
    touch(g, mem_of(g, p), g->tcache_struct_bytes); /* memset 3258 */
}

/* __libc_malloc (malloc.c:3279-3341; g242:3467-3495 and __libc_malloc2).
 * covered: the caller writes [mem, mem+n) with n > 0 right after, with no
 * kernel call in between.  tcache_get's e->key write (mem+8..16) lies in
 * the same 16-byte block as mem, hence on mem's OS page, so it is left to
 * that write: the same pages become resident with one touch fewer.
 * Inline: a tcache hit is a few dozen instructions, and a call level cost
 * a third of them. */
static inline uint32_t gl_malloc(glibc_model_t *g, gthread_t *th, uint64_t nb,
                                 bool covered) {
  int idx = tc_index(g, nb);
  if (g->version < GV_242 || idx >= 0) /* 3300 MAYBE_INIT_TCACHE */
    tcache_init(g, th);
  if (idx >= 0 && th->tcache != NIL) {
    if (idx < TCACHE_SMALL_BINS) {
      if (th->tc_count[idx] > 0) /* 3303-3309 */
        return covered ? tcache_take(g, th, idx) : tcache_get(g, th, idx);
    } else {
      uint32_t v = tcache_get_large(g, th, idx, nb); /* g242:3486-3490 */
      if (v != NIL)
        return v;
    }
  }
  int32_t ai = arena_get(g, th, nb);
  if (ai < 0)
    return NIL;
  return int_malloc_retry(g, ai, nb, th);
}

/* munmap_chunk (malloc.c:3036-3063). */
static void munmap_chunk(glibc_model_t *g, uint32_t p) {
  uint64_t block = ch_addr(C(p)) - C(p)->aux;
  uint64_t total = C(p)->aux + ch_size(C(p));
  g->n_mmaps--;
  g->mmapped_mem -= total;
  k_status(g, sim_kernel_munmap(g->kernel, block, total, &g->ferr));
  rec_free(g, p);
}

/* __libc_free (malloc.c:3344-3389; g242:3497-3557). */
static inline void gl_free(glibc_model_t *g, gthread_t *th, uint32_t p) {
  if (C(p)->state == CS_MMAP) {
    /* 3362-3375: the dynamic threshold follows the largest freed mapping
     * up to DEFAULT_MMAP_THRESHOLD_MAX; chunksize_nomask has IS_MMAPPED. */
    uint64_t nomask = ch_size(C(p)) | 2;
    if (!g->no_dyn_threshold && nomask > g->mmap_threshold &&
        nomask <= DEFAULT_MMAP_THRESHOLD_MAX) {
      g->mmap_threshold = ch_size(C(p));
      g->trim_threshold = 2 * g->mmap_threshold;
    }
    munmap_chunk(g, p);
    return;
  }
  int32_t ai = C(p)->arena;
  if (g->version < GV_242) {
    tcache_init(g, th); /* 3379 MAYBE_INIT_TCACHE */
    int_free(g, ai, p, th, true);
    return;
  }
  uint64_t size = ch_size(C(p));
  if (th->tcache != NIL && size < g->tcache_max_bytes) { /* g242:3525-3548 */
    int idx = tc_index(g, size);
    if (idx >= 0 && idx < TCACHE_SMALL_BINS) {
      if (th->tc_count[idx] < g->tcache_count) {
        tcache_put(g, th, p, idx);
        return;
      }
    } else if (idx >= 0 && th->tc_count[idx] < g->tcache_count) {
      tcache_put_large(g, th, p, idx);
      return;
    }
  }
  int_free(g, ai, p, th, false); /* _int_free_chunk */
}

/* mremap_chunk (malloc.c:3067-3111).  Returns false if glibc would fall
 * back to malloc-copy-free.  The kernel does what Linux's mremap does: a
 * shrink unmaps the tail, a grow extends in place when the range above the
 * mapping is free, and otherwise the mapping moves with its pages' residency
 * and lazyfree state, so RSS never changes on a move and the old range is
 * free for the next mmap.  The moved or grown mapping is advised again
 * (3097); master does so only for one that was smaller than a huge page,
 * as mremap keeps the flag (gmaster:2876-2879). */
static bool mremap_chunk(glibc_model_t *g, uint32_t p, uint64_t nb) {
  uint64_t offset = C(p)->aux;
  uint64_t total = offset + ch_size(C(p));
  uint64_t block = ch_addr(C(p)) - offset;
  uint64_t new_size = align_up(nb + offset + SIZE_SZ, g->page); /* 3085 */
  if (new_size == total)                                        /* 3088 */
    return true;
  sim_addr_t  cp;
  as_err_t    e;
  as_status_t rc = sim_kernel_mremap(g->kernel, block, total, new_size, &cp,
                                     &e); /* 3091-3092 MREMAP_MAYMOVE */
  if (rc == AS_ENOMEM)
    return false; /* 3094-3095 MAP_FAILED: the caller copies */
  if (rc != AS_OK) {
    g->ferr = e;
    k_status(g, rc);
    return true;
  }
  if (g->version < GV_243 || total < g->thp_pagesize)
    madvise_thp(g, cp, new_size);
  set_addr(C(p), cp + offset);        /* 3099 */
  g->mmapped_mem += new_size - total; /* 3106-3109 */
  set_size(C(p), new_size - offset);
  touch(g, ch_addr(C(p)) + SIZE_SZ, SIZE_SZ); /* set_head 3104 */
  return true;
}

/* _int_realloc (malloc.c:4811-4929) for chunk p of arena ai; returns the
 * chunk now holding the object (p itself if it stayed). */
static uint32_t int_realloc(glibc_model_t *g, int32_t ai, uint32_t p,
                            uint64_t nb, gthread_t *th) {
  bool     tcache_internal = g->version < GV_242;
  uint64_t oldsize = ch_size(C(p));
  uint32_t next = C(p)->next;
  uint32_t newp = p;
  if (oldsize < nb) {
    garena_t *av = &g->arenas[ai];
    if (next == av->top && oldsize + ch_size(C(next)) >= nb + MINSIZE) {
      /* 4850-4859: expand forward into top. */
      uint64_t grow = nb - oldsize;
      set_size(C(p), nb);
      set_addr(C(next), ch_addr(C(next)) + grow);
      set_size(C(next), ch_size(C(next)) - grow);
      w_head(g, p);
      w_head(g, next);
      return p;
    }
    if (next != av->top && C(next)->state == CS_BINNED &&
        oldsize + ch_size(C(next)) >= nb) {
      unlink_chunk(g, next); /* 4862-4869 */
      absorb_next(g, p);
    } else {
      uint32_t nc = int_malloc(g, ai, nb, th); /* 4874 */
      if (nc == NIL)
        return NIL;
      if (nc == C(p)->next && C(nc)->state != CS_MMAP) {
        absorb_next(g, p); /* 4884-4888: newp == next */
      } else {
        /* 4889-4899: copy and free the old chunk. */
        C(nc)->user = 1;
        C(nc)->req = C(p)->req;
        C(p)->user = 0;
        C(p)->state = CS_INUSE;
        int_free(g, ai, p, th, tcache_internal);
        return nc;
      }
    }
  }
  /* 4903-4925: split off what is left over. */
  uint64_t newsize = ch_size(C(newp));
  if (newsize - nb < MINSIZE) {
    w_inuse_at(g, newp, newsize);
  } else {
    uint32_t rem = split(g, newp, nb);
    if (rem == NIL)
      return NIL;
    C(rem)->state = CS_INUSE;
    w_head(g, newp);
    w_head(g, rem);
    w_inuse_at(g, rem, ch_size(C(rem)));
    int_free(g, ai, rem, th, tcache_internal);
  }
  return newp;
}

/* Whether _int_memalign gives back the tail of p beyond nb: 2.36 when the
 * tail is a chunk of MINSIZE or more beyond a MINSIZE margin (5011,
 * strictly larger); from 2.39 (542b110585) any tail of MINSIZE or more,
 * or a smaller one that merges with top or a free chunk above
 * (g241:5176-5186); master any tail of MINSIZE or more (gmaster:4752). */
static bool memalign_gives_back_tail(const glibc_model_t *g, int32_t ai,
                                     uint32_t p, uint64_t nb) {
  uint64_t size = ch_size(C(p));
  if (g->version >= GV_243)
    return size - nb >= MINSIZE;
  if (g->version < GV_239)
    return size > nb + MINSIZE;
  uint32_t next = C(p)->next;
  return size > nb && (size - nb >= MINSIZE || next == g->arenas[ai].top ||
                       C(next)->state == CS_BINNED);
}

/* _int_memalign (malloc.c:4935-5027). */
static uint32_t int_memalign(glibc_model_t *g, int32_t ai, uint64_t alignment,
                             uint64_t bytes, gthread_t *th) {
  bool     tcache_internal = g->version < GV_242;
  uint64_t nb = request2size(bytes);
  uint64_t padded = request2size(nb + alignment + MINSIZE); /* 4965 */
  if (nb == 0 || padded == 0) {
    set_fail(g, AS_EINVAL, "memalign request too large");
    return NIL;
  }
  uint32_t p = int_malloc(g, ai, padded, th);
  if (p == NIL)
    return NIL;
  uint64_t m = mem_of(g, p);
  if (m % alignment != 0) { /* 4972-5008 */
    uint64_t brk = align_up(m, alignment) - CHUNK_HDR_SZ;
    if (brk - ch_addr(C(p)) < MINSIZE)
      brk += alignment;
    uint64_t leadsize = brk - ch_addr(C(p));
    if (C(p)->state == CS_MMAP) { /* 4991-4996 */
      C(p)->aux += leadsize;
      set_addr(C(p), ch_addr(C(p)) + leadsize);
      set_size(C(p), ch_size(C(p)) - leadsize);
      touch(g, ch_addr(C(p)), CHUNK_HDR_SZ);
      return p;
    }
    uint32_t newp = split(g, p, leadsize);
    if (newp == NIL)
      return NIL;
    C(newp)->state = CS_INUSE;
    w_head(g, newp);
    w_inuse_at(g, newp, ch_size(C(newp)));
    w_head(g, p);
    if (g->version >= GV_239) {
      /* Since 2.39 (542b110585) the leader is merged into the bins past
       * the tcache and fastbins, then the large-free trim check runs
       * (g241:5162 _int_free_merge_chunk, 4743). */
      maybe_trim(g, ai, merge_chunk(g, ai, p, true));
    } else {
      int_free(g, ai, p, th, tcache_internal); /* 5003 */
    }
    p = newp;
  }
  if (C(p)->state != CS_MMAP && memalign_gives_back_tail(g, ai, p, nb)) {
    uint32_t rem = split(g, p, nb);
    if (rem == NIL)
      return NIL;
    C(rem)->state = CS_INUSE;
    w_head(g, rem);
    w_head(g, p);
    if (g->version >= GV_239) { /* g241:5188-5193, g242:5234-5237 */
      uint64_t s = merge_chunk(g, ai, rem, true);
      maybe_trim(g, ai, s);
    } else {
      int_free(g, ai, rem, th, tcache_internal); /* 5021 */
    }
  }
  return p;
}

/* __libc_calloc (malloc.c:3617-3757; g241:3773-3810 adds the tcache).
 * Writes: only glibc's clearing; fresh top memory and mmaps stay clean. */
static uint32_t gl_calloc(glibc_model_t *g, gthread_t *th, uint64_t nb) {
  if (g->version >= GV_241) {
    /* tcache_try_malloc: a cached chunk is cleared whole (g241:3795-3808). */
    int idx = tc_index(g, nb);
    if (g->version < GV_242 || idx >= 0)
      tcache_init(g, th);
    if (idx >= 0 && th->tcache != NIL) {
      uint32_t v = NIL;
      if (idx < TCACHE_SMALL_BINS) {
        if (th->tc_count[idx] > 0)
          v = tcache_get(g, th, idx);
      } else {
        v = tcache_get_large(g, th, idx, nb);
      }
      if (v != NIL) {
        touch(g, mem_of(g, v), ch_size(C(v)) - SIZE_SZ);
        return v;
      }
    }
  } else {
    tcache_init(g, th); /* 3640 */
  }
  int32_t ai = arena_get(g, th, nb);
  if (ai < 0)
    return NIL;
  garena_t *av = &g->arenas[ai];
  uint64_t  oldtop_addr = UINT64_MAX, oldtopsize = 0;
  if (av->top != NIL) { /* 3651-3666 MORECORE_CLEARS */
    oldtop_addr = ch_addr(C(av->top));
    oldtopsize = ch_size(C(av->top));
    /* Linux builds malloc.c with MORECORE_CLEARS=2 (sysdeps/unix/sysv/
     * linux/Makefile:53, :56 from 2.41), which compiles out 3654-3659: in
     * the main arena everything past the top is trusted to be fresh, even
     * below the heap's high-water mark after a trim (measured: a
     * 404,936-byte calloc extending a 31,312-byte top after malloc_trim
     * clears 31,304 bytes). */
    if (ai != 0) {
      gheap_t *h = &g->heaps[av->heap];
      uint64_t hw = h->addr + h->mprotect_size - oldtop_addr;
      if (oldtopsize < hw)
        oldtopsize = hw;
    }
  }
  uint32_t p = int_malloc_retry(g, ai, nb, th); /* 3674-3686 */
  if (p == NIL)
    return NIL;
  if (C(p)->state == CS_MMAP) /* 3707-3713 */
    return p;
  uint64_t csz = ch_size(C(p));
  if (ch_addr(C(p)) == oldtop_addr && csz > oldtopsize) /* 3716-3720 */
    csz = oldtopsize;
  touch(g, mem_of(g, p), csz - SIZE_SZ); /* 3727-3754 */
  return p;
}

/* tcache_thread_shutdown and __malloc_arena_thread_freeres (malloc.c:
 * 3196-3226, arena.c:997-1021): cached chunks go back to their arenas,
 * then the arena goes on free_list if no thread uses it any more. */
static void thread_exit(glibc_model_t *g, gthread_t *th) {
  th->shutting_down = true;
  if (th->tcache != NIL) {
    for (int i = 0; i < TCACHE_ALL_BINS; i++) {
      while (th->tc_head[i] != NIL) {
        uint32_t e = th->tc_head[i];
        th->tc_head[i] = C(e)->fd;
        th->tc_count[i]--;
        C(e)->state = CS_INUSE;
        C(e)->fd = NIL;
        int_free(g, C(e)->arena, e, NULL, false);
      }
    }
    uint32_t t = th->tcache;
    th->tcache = NIL;
    if (C(t)->state == CS_MMAP)
      munmap_chunk(g, t);
    else
      int_free(g, C(t)->arena, t, NULL, false);
  }
  int32_t a = th->arena;
  th->arena = -1;
  if (a >= 0 && --g->arenas[a].attached_threads == 0) {
    g->arenas[a].next_free = g->free_list;
    g->free_list = a;
  }
}

/* mtrim (malloc.c:5034-5089): consolidate fastbins, then MADV_DONTNEED the
 * whole pages inside every free chunk of the unsorted bin and of the bins
 * from bin_index(pagesize) up, keeping each chunk's first 48 bytes
 * (sizeof(struct malloc_chunk)); then systrim for the main arena only. */
static void mtrim(glibc_model_t *g, int32_t ai, uint64_t pad) {
  if (g->version < GV_243) /* master has no consolidation (gmaster mtrim) */
    malloc_consolidate(g, ai);
  garena_t *av = &g->arenas[ai];
  uint64_t  ps = g->page;
  unsigned  psindex = bin_index(ps);
  for (unsigned i = 1; i < NBINS; i++) {
    if (i != 1 && i < psindex)
      continue;
    uint32_t bin = av->bins + i;
    for (uint32_t p = C(bin)->bk; p != bin; p = C(p)->bk) {
      uint64_t size = ch_size(C(p));
      if (size > ps - 1 + 4 * SIZE_SZ + 2 * SIZE_SZ) { /* 5054 */
        uint64_t paligned = align_up(ch_addr(C(p)) + 6 * SIZE_SZ, ps);
        size -= paligned - ch_addr(C(p));
        if (size > ps - 1) /* 5068-5076 */
          k_status(g, sim_kernel_madvise(g->kernel, paligned, size & ~(ps - 1),
                                         SIM_MADV_DONTNEED, &g->ferr));
      }
    }
  }
  if (ai == 0) /* 5084 */
    systrim(g, pad);
}

/* A cached chunk of exactly nb bytes whose payload is aligned, taken from
 * wherever it sits in its tcache list (since 2.38, 24cdd6c71d: g241
 * malloc.c:3684-3712 with tcache_get_n 3176-3195; g242:3278-3314
 * tcache_get_align, which also creates a missing tcache and then returns
 * nothing; gmaster:3120-3156), or NIL. */
static uint32_t tcache_get_aligned(glibc_model_t *g, gthread_t *th, uint64_t nb,
                                   uint64_t alignment) {
  if (g->version == GV_242 && th->tcache == NIL && nb < g->tcache_max_bytes) {
    tcache_init(g, th);
    return NIL;
  }
  int idx = tc_index(g, nb);
  if (idx < 0 || th->tcache == NIL || th->tc_count[idx] == 0)
    return NIL;
  uint32_t *link = &th->tc_head[idx], prev = NIL;
  while (*link != NIL &&
         (ch_size(C(*link)) < nb ||
          (ch_size(C(*link)) == nb && mem_of(g, *link) % alignment != 0))) {
    prev = *link;
    link = &C(*link)->fd;
  }
  uint32_t p = *link;
  if (p == NIL || ch_size(C(p)) != nb || mem_of(g, p) % alignment != 0)
    return NIL;
  *link = C(p)->fd;
  th->tc_count[idx]--;
  C(p)->state = CS_INUSE;
  C(p)->fd = NIL;
  if (prev != NIL) /* the entry before it now points past it */
    touch(g, mem_of(g, prev), SIZE_SZ);
  touch(g, ch_addr(C(p)) + CHUNK_HDR_SZ + SIZE_SZ, SIZE_SZ); /* e->key = 0 */
  return p;
}

/* _mid_memalign (malloc.c:3523-3579).  2.36 consults no tcache here and
 * does not initialise it; from 2.38 a cached aligned chunk serves first. */
static uint32_t gl_memalign(glibc_model_t *g, gthread_t *th, uint64_t alignment,
                            uint64_t bytes) {
  if (alignment <= MALLOC_ALIGNMENT) { /* 3530-3531 */
    uint64_t nb = request2size(bytes);
    return nb ? gl_malloc(g, th, nb, bytes != 0) : NIL;
  }
  if (alignment < MINSIZE) /* 3534-3535 */
    alignment = MINSIZE;
  if (alignment > (UINT64_C(1) << 62)) {
    set_fail(g, AS_EINVAL, "memalign alignment too large");
    return NIL;
  }
  if ((alignment & (alignment - 1)) != 0) { /* 3547-3553 */
    uint64_t a = MALLOC_ALIGNMENT * 2;
    while (a < alignment)
      a <<= 1;
    alignment = a;
  }
  if (g->version >= GV_239) {
    uint64_t nb = request2size(bytes);
    uint32_t p = nb ? tcache_get_aligned(g, th, nb, alignment) : NIL;
    if (p != NIL)
      return p;
  }
  int32_t ai = arena_get(g, th, bytes + alignment + MINSIZE); /* 3563 */
  if (ai < 0)
    return NIL;
  uint32_t p = int_memalign(g, ai, alignment, bytes, th);
  if (p == NIL && g->fail == AS_OK && ai != 0) /* 3566-3571 */
    p = int_memalign(g, 0, alignment, bytes, th);
  return p;
}

/* ---- Model interface ---------------------------------------------------- */

static as_status_t report(glibc_model_t *g, as_err_t *err) {
  if (err != NULL) {
    if (g->ferr.msg[0] != '\0')
      *err = g->ferr;
    else
      as_err_set(err, g->fail, "glibc: %s", as_status_message(g->fail));
    err->code = g->fail;
  }
  return g->fail;
}

static bool obj_grow(glibc_model_t *g, uint64_t id);

/* Makes obj[id] addressable; false (with g->fail set) if it cannot. */
static inline bool ensure_obj(glibc_model_t *g, uint64_t id) {
  if (__builtin_expect(id < g->obj_tab.len, 1))
    return true;
  return obj_grow(g, id);
}

/* Fresh entries read as NIL (0) and the table never moves (idtable.h). */
__attribute__((noinline)) static bool obj_grow(glibc_model_t *g, uint64_t id) {
  if (sim_idtable_grow(&g->obj_tab, id))
    return true;
  if (id >= SIM_IDTABLE_MAX_IDS)
    set_fail(g, AS_EINVAL, "object id above 2^32");
  else
    set_fail(g, AS_ENOMEM, "out of memory for the object table");
  return false;
}

/* Binds chunk p to object id: counters and the program's writes of
 * [mem, mem+bytes) unless nothing is written (calloc). */
static void adopt(glibc_model_t *g, uint64_t id, uint32_t p, uint64_t bytes) {
  g->obj[id] = p;
  C(p)->user = 1;
  C(p)->req = bytes;
  g->live_bytes += bytes;
  g->live_objects++;
  if (C(p)->state != CS_MMAP)
    g->inuse_heap_bytes += ch_size(C(p));
}

static void release(glibc_model_t *g, uint64_t id, uint32_t p) {
  g->obj[id] = NIL;
  C(p)->user = 0;
  g->live_bytes -= C(p)->req;
  g->live_objects--;
  if (C(p)->state != CS_MMAP)
    g->inuse_heap_bytes -= ch_size(C(p));
}

static as_status_t glibc_alloc(model_t *m, const trace_event_t *ev,
                               as_err_t *err) {
  glibc_model_t *g = (glibc_model_t *)m;
  if (g->fail != AS_OK)
    return report(g, err);
  gthread_t *th = thread_get(g, ev->thread);
  if (th == NULL || !ensure_obj(g, ev->id))
    return report(g, err);
  uint64_t bytes = ev->size, nb = request2size(bytes);
  if (nb == 0) {
    set_fail(g, AS_EINVAL, "request too large");
    return report(g, err);
  }
  uint32_t p;
  uint64_t written =
      ev->op != TRACE_CALLOC && !(ev->flags & TRACE_FLAG_UNWRITTEN) ? bytes : 0;
  if (ev->op == TRACE_CALLOC) {
    p = gl_calloc(g, th, nb);
  } else if (ev->op == TRACE_MEMALIGN) {
    p = gl_memalign(g, th, ev->align, bytes);
  } else {
    g->payload_due = written; /* split_top may touch it (the chunk it
                                 returns is p; memalign's is not) */
    p = gl_malloc(g, th, nb, bytes != 0);
    written = g->payload_due;
    g->payload_due = 0;
  }
  if (p == NIL && g->fail == AS_OK)
    set_fail(g, AS_ENOMEM, "allocation failed");
  if (g->fail != AS_OK)
    return report(g, err);
  adopt(g, ev->id, p, bytes);
  touch(g, mem_of(g, p), written);
  return g->fail != AS_OK ? report(g, err) : AS_OK;
}

static as_status_t glibc_free(model_t *m, const trace_event_t *ev,
                              as_err_t *err) {
  glibc_model_t *g = (glibc_model_t *)m;
  if (g->fail != AS_OK)
    return report(g, err);
  gthread_t *th = thread_get(g, ev->thread);
  if (th == NULL)
    return report(g, err);
  if (ev->id >= g->obj_tab.len || g->obj[ev->id] == NIL)
    return AS_OK; /* freed by realloc(p, 0): free(NULL) is a no-op */
  uint32_t p = g->obj[ev->id];
  /* A chunk above the fastbin sizes is coalesced unless the tcache takes
   * it: start fetching its neighbours' records (random places in the
   * pool) now, so that their misses overlap each other and the work
   * before merge_chunk instead of coming one after the other. */
  if (ch_size(C(p)) > g->global_max_fast) {
    __builtin_prefetch(C(C(p)->prev));
    __builtin_prefetch(C(C(p)->next));
  }
  release(g, ev->id, p);
  gl_free(g, th, p);
  return g->fail != AS_OK ? report(g, err) : AS_OK;
}

/* Whether realloc returns chunk p as it is before anything else, tcache
 * set-up included: from 2.38 (2fb12bbd09) when bytes fit its usable size
 * with less than 16 bytes to spare, or, mmapped, at most a page
 * (g241 malloc.c:3513-3524, musable 5377-5388).  2.36 gets there through
 * _int_realloc for a heap chunk, but mremaps an mmapped one to its
 * request's page count (3447-3476): a 4096-byte mapping realloc'd to 4079
 * bytes grew to 8192 there and stays 4096 from 2.38 (measured on Debian
 * 13's glibc 2.41, tests/validation/test_glibc_differential.c). */
static bool realloc_stays(const glibc_model_t *g, uint32_t p, uint64_t bytes) {
  if (g->version < GV_239)
    return false;
  bool     mmapped = C(p)->state == CS_MMAP;
  uint64_t usable = ch_size(C(p)) - (mmapped ? CHUNK_HDR_SZ : SIZE_SZ);
  if (bytes > usable)
    return false;
  return usable - bytes < 2 * SIZE_SZ || (mmapped && usable - bytes <= g->page);
}

/* __libc_realloc (malloc.c:3392-3510). */
static as_status_t glibc_realloc(model_t *m, const trace_event_t *ev,
                                 as_err_t *err) {
  glibc_model_t *g = (glibc_model_t *)m;
  if (g->fail != AS_OK)
    return report(g, err);
  gthread_t *th = thread_get(g, ev->thread);
  if (th == NULL || !ensure_obj(g, ev->id))
    return report(g, err);
  uint32_t p = g->obj[ev->id];
  uint64_t bytes = ev->size;
  if (p == NIL) { /* 3411-3412: realloc(NULL, n) is malloc */
    trace_event_t as_malloc = *ev;
    as_malloc.op = TRACE_MALLOC;
    return glibc_alloc(m, &as_malloc, err);
  }
  if (bytes == 0) { /* 3403-3408 REALLOC_ZERO_BYTES_FREES (360) */
    release(g, ev->id, p);
    gl_free(g, th, p);
    return g->fail != AS_OK ? report(g, err) : AS_OK;
  }
  uint64_t nb = request2size(bytes);
  if (nb == 0) {
    set_fail(g, AS_EINVAL, "realloc request too large");
    return report(g, err);
  }
  uint64_t old_req = C(p)->req;
  release(g, ev->id, p);
  uint32_t np;
  if (realloc_stays(g, p, bytes)) {
    np = p;
  } else if (C(p)->state == CS_MMAP) { /* 3447-3476 */
    if (mremap_chunk(g, p, nb) || ch_size(C(p)) - SIZE_SZ >= nb) {
      np = p;
    } else {
      np = gl_malloc(g, th, nb, false);
      if (np != NIL)
        munmap_chunk(g, p);
    }
  } else {
    if (g->version < GV_242)
      tcache_init(g, th); /* 3428 MAYBE_INIT_TCACHE */
    int32_t ai = C(p)->arena;
    np = int_realloc(g, ai, p, nb, th);
    if (np == NIL && g->fail == AS_OK && ai != 0) {
      /* 3495-3507: try another arena, copy, free the old chunk. */
      np = gl_malloc(g, th, nb, false);
      if (np != NIL) /* g242:3682 _int_free_chunk: no tcache */
        int_free(g, ai, p, th, g->version < GV_242);
    }
  }
  if (np == NIL && g->fail == AS_OK)
    set_fail(g, AS_ENOMEM, "realloc failed");
  if (g->fail != AS_OK)
    return report(g, err);
  adopt(g, ev->id, np, bytes);
  /* A chunk that moved gets the old contents by memcpy (3472, 3501); one
   * that mremap moved keeps its record (np == p) and its pages.  Growth is
   * the program's to write. */
  uint64_t kept = bytes < old_req ? bytes : old_req;
  if (np != p)
    touch(g, mem_of(g, np), kept);
  if (bytes > old_req && !(ev->flags & TRACE_FLAG_UNWRITTEN))
    touch(g, mem_of(g, np) + old_req, bytes - old_req);
  return g->fail != AS_OK ? report(g, err) : AS_OK;
}

/* ---- nptl thread stacks ------------------------------------------------ */

/* models/nptl_stacks.c does the work; a failure stops the model. */
static void stack_acquire(glibc_model_t *g, gthread_t *th) {
  if (g->fail == AS_OK)
    g->fail = nptl_stack_acquire(&g->nptl, &th->stack, &g->ferr);
}

static void stack_release(glibc_model_t *g, gthread_t *th) {
  if (g->fail == AS_OK)
    g->fail = nptl_stack_release(&g->nptl, &th->stack, &g->ferr);
}

static as_status_t glibc_thread(model_t *m, const trace_event_t *ev,
                                as_err_t *err) {
  glibc_model_t *g = (glibc_model_t *)m;
  if (g->fail != AS_OK)
    return report(g, err);
  gthread_t *th = thread_get(g, ev->thread);
  if (th == NULL)
    return report(g, err);
  if (ev->op == TRACE_THREAD_START) {
    if (th->shutting_down || ev->thread != 0) {
      /* A new thread (or a reused id): fresh TLS. */
      if (th->tcache != NIL || th->arena >= 0)
        thread_exit(g, th);
      stack_release(g, th); /* a reused id: the old thread has exited */
      memset(th, 0, sizeof *th);
      th->arena = ev->thread == 0 ? 0 : -1;
      if (ev->thread != 0) /* the main thread runs on the process stack */
        stack_acquire(g, th);
    }
    th->seen = true;
  } else if (ev->op == TRACE_THREAD_EXIT) {
    thread_exit(g, th);
    stack_release(g, th);
  }
  return g->fail != AS_OK ? report(g, err) : AS_OK;
}

/* __malloc_trim (malloc.c:5092-5112): mtrim on every arena, in list order
 * from main_arena. */
static as_status_t glibc_trim(model_t *m, uint64_t pad, uint64_t now_ns,
                              as_err_t *err) {
  glibc_model_t *g = (glibc_model_t *)m;
  (void)now_ns;
  if (g->fail != AS_OK)
    return report(g, err);
  uint32_t ai = 0;
  do {
    mtrim(g, (int32_t)ai, pad);
    ai = g->arenas[ai].next;
  } while (ai != 0 && g->fail == AS_OK);
  return g->fail != AS_OK ? report(g, err) : AS_OK;
}

static void glibc_stats(const model_t *m, model_stats_t *out) {
  const glibc_model_t *g = (const glibc_model_t *)m;
  uint64_t             sys = 0;
  for (uint32_t i = 0; i < g->narenas; i++)
    sys += g->arenas[i].system_mem;
  out->live_bytes = g->live_bytes;
  out->live_objects = g->live_objects;
  out->mapped_bytes = sys + g->mmapped_mem;
  out->arenas = g->heaps_live + (g->sbrk_base != 0 ? 1 : 0);
  out->free_bytes = sys - g->inuse_heap_bytes;
}

static void glibc_destroy(model_t *m) {
  glibc_model_t *g = (glibc_model_t *)m;
  if (g == NULL)
    return;
  for (uint32_t a = 0; a < g->narenas; a++)
    for (unsigned i = 0; i < NBINS - NSMALLBINS; i++)
      free(g->arenas[a].lidx[i].v);
  as_reserve_free(&g->ch_res);
  sim_idtable_free(&g->obj_tab);
  free(g->arenas);
  free(g->heaps);
  free(g->threads);
  nptl_stacks_fini(&g->nptl);
  free(g);
}

/* ---- Heap map (walk) and mechanisms ------------------------------------ */

/* Why glibc holds each kind of region (explain).  The rules are the ones
 * this file implements, cited at the functions named. */
static const model_mechanism_t glibc_mechanisms[] = {
    {"glibc.in_use", "chunks the program holds",
     "Each object is a chunk with an 8-byte size header, rounded up to 16 "
     "bytes (request2size).",
     "freeing the objects", true},
    {"glibc.mmapped", "mmapped chunks the program holds",
     "Requests at or above the mmap threshold get a mapping of their own "
     "(sysmalloc), returned to the kernel by free.",
     "freeing the objects", true},
    {"glibc.tcache", "chunks in per-thread caches (tcache)",
     "free() keeps up to tcache_count chunks of each small size per thread "
     "for reuse; to the arena they are still in use (tcache_put).",
     "nothing but reuse or the thread's exit (malloc_trim does not flush "
     "tcaches)",
     false},
    {"glibc.fastbin", "chunks in fastbins",
     "Small freed chunks stay unmerged in fastbins (_int_free) until a large "
     "request or a trim consolidates them.",
     "malloc_trim(0), which consolidates them and returns whole free pages",
     false},
    {"glibc.binned", "free chunks inside the heap",
     "A heap gives memory back only from its top; free chunks below a live "
     "chunk stay (systrim, heap_trim).",
     "malloc_trim(0), which madvises away the whole pages inside free "
     "chunks (mtrim)",
     false},
    {"glibc.top", "the free top of a heap",
     "The top is trimmed on free only beyond trim_threshold, and a trim "
     "keeps top_pad (systrim, heap_trim).",
     "malloc_trim(0), or a lower trim_threshold and top_pad", false},
    {"glibc.metadata", "glibc's own bookkeeping",
     "Arena state (malloc_state), heap headers (heap_info), tcache structs "
     "and fenceposts live inside the heaps.",
     "nothing while the arena exists", false},
    {"glibc.thread_stack", "stacks of running threads",
     "nptl maps a stack per thread (allocate_stack); its resident pages are "
     "the thread's frames, TCB and TLS.",
     "the threads' exit", true},
    {"glibc.stack_cache", "stacks of exited threads in nptl's cache",
     "Up to 40 MiB of exited threads' stacks are kept for reuse "
     "(__nptl_free_stacks).",
     "nothing: the cache is trimmed only beyond 40 MiB", false},
    {NULL, NULL, NULL, NULL, false},
};

static const char *chunk_mechanism(const gchunk_t *c) {
  switch ((gstate_t)c->state) {
  case CS_INUSE:
    return c->user ? "glibc.in_use" : "glibc.metadata";
  case CS_TCACHE:
    return "glibc.tcache";
  case CS_FAST:
    return "glibc.fastbin";
  case CS_BINNED:
    return "glibc.binned";
  case CS_TOP:
    return "glibc.top";
  case CS_MMAP:
    return "glibc.mmapped";
  case CS_FENCE:
  case CS_DEAD:
  case CS_BINHEAD:
    break;
  }
  return "glibc.metadata";
}

static uint8_t chunk_state(const gchunk_t *c) {
  switch ((gstate_t)c->state) {
  case CS_INUSE:
    return c->user ? MODEL_REGION_LIVE : MODEL_REGION_METADATA;
  case CS_MMAP:
    return MODEL_REGION_LIVE;
  case CS_TCACHE:
  case CS_FAST:
    return MODEL_REGION_CACHED;
  case CS_BINNED:
  case CS_TOP:
    return MODEL_REGION_FREE;
  default:
    return MODEL_REGION_METADATA;
  }
}

/* One contiguous region (brk heap or thread heap) from start to the end of
 * chunk last: the region, the bookkeeping before its first chunk, then
 * every chunk in address order. */
static as_status_t walk_region(const glibc_model_t *g, const char *kind,
                               uint64_t start, uint32_t last,
                               model_region_fn fn, void *user, as_err_t *err) {
  uint32_t first = last;
  while (g->ch[first].prev != NIL)
    first = g->ch[first].prev;
  model_region_t r = {.addr = start,
                      .bytes =
                          ch_addr(&g->ch[last]) + ch_size(&g->ch[last]) - start,
                      .kind = kind};
  for (uint32_t p = first; p != NIL; p = g->ch[p].next)
    if (g->ch[p].state == CS_INUSE && g->ch[p].user) {
      r.live_bytes += g->ch[p].req;
      r.live_objects++;
    }
  as_status_t rc = fn(user, &r, err);
  if (rc == AS_OK && ch_addr(&g->ch[first]) > start)
    rc = fn(user,
            &(model_region_t){.addr = start,
                              .bytes = ch_addr(&g->ch[first]) - start,
                              .kind = "header",
                              .mechanism = "glibc.metadata",
                              .level = 1,
                              .state = MODEL_REGION_METADATA},
            err);
  for (uint32_t p = first; p != NIL && rc == AS_OK; p = g->ch[p].next) {
    const gchunk_t *c = &g->ch[p];
    bool            live = c->state == CS_INUSE && c->user;
    rc = fn(user,
            &(model_region_t){.addr = ch_addr(c),
                              .bytes = ch_size(c),
                              .live_bytes = live ? c->req : 0,
                              .live_objects = live ? 1 : 0,
                              .kind = "chunk",
                              .mechanism = chunk_mechanism(c),
                              .level = 1,
                              .state = chunk_state(c)},
            err);
  }
  return rc;
}

static as_status_t glibc_walk(const model_t *m, model_region_fn fn, void *user,
                              as_err_t *err) {
  const glibc_model_t *g = (const glibc_model_t *)m;
  as_status_t          rc = AS_OK;
  for (uint32_t a = 0; a < g->narenas && rc == AS_OK; a++) {
    const garena_t *av = &g->arenas[a];
    if (av->top == NIL)
      continue;
    if (a == 0) {
      rc = walk_region(g, "brk heap", g->sbrk_base, av->top, fn, user, err);
      continue;
    }
    uint32_t last = av->top;
    for (int32_t h = av->heap; h >= 0 && rc == AS_OK; h = g->heaps[h].prev) {
      rc = walk_region(g, "heap", g->heaps[h].addr, last, fn, user, err);
      last = g->heaps[h].prev_fence;
    }
  }
  for (uint32_t p = 1; p < g->nch && rc == AS_OK; p++) {
    const gchunk_t *c = &g->ch[p];
    if (c->state == CS_MMAP)
      rc = model_walk_single((model_region_t){.addr = ch_addr(c) - c->aux,
                                              .bytes = ch_size(c) + c->aux,
                                              .live_bytes = c->req,
                                              .live_objects = 1,
                                              .kind = "mmapped chunk",
                                              .mechanism = "glibc.mmapped",
                                              .state = MODEL_REGION_LIVE},
                             fn, user, err);
  }
  for (uint32_t t = 0; t < g->nthreads && rc == AS_OK; t++)
    rc = nptl_stack_walk(&g->threads[t].stack, fn, user, err);
  if (rc == AS_OK)
    rc = nptl_stacks_walk_cache(&g->nptl, fn, user, err);
  return rc;
}

/* set_max_fast (malloc.c:1791-1793); master has no fastbins. */
static void set_max_fast(glibc_model_t *g, uint64_t mxfast) {
  g->global_max_fast = g->version >= GV_243 ? 0
                       : mxfast <= MALLOC_ALIGN_MASK - SIZE_SZ
                           ? MINSIZE / 2
                           : (mxfast + SIZE_SZ) & ~MALLOC_ALIGN_MASK;
}

/* ---- Run-time options, counters, locate -------------------------------- */

/* __libc_mallopt (malloc.c:5446-5512): the main arena is consolidated
 * first (5459-5461), then the parameter's do_set_* (5308-5431) runs;
 * negative values wrap to huge size_t values (5463-5467).  Every mallopt
 * parameter but M_MXFAST and the arena pair freezes the dynamic
 * thresholds. */
static as_status_t glibc_set_option(model_t *m, const char *name, int64_t value,
                                    uint64_t now_ns, as_err_t *err) {
  glibc_model_t *g = (glibc_model_t *)m;
  (void)now_ns;
  if (g->fail != AS_OK)
    return report(g, err);
  int      key = model_option_find(glibc_options, name, strlen(name));
  uint64_t v = (uint64_t)value;
  switch (key) {
  case GO_MXFAST:
  case GO_TRIM_THRESHOLD:
  case GO_TOP_PAD:
  case GO_MMAP_THRESHOLD:
  case GO_MMAP_MAX:
  case GO_ARENA_TEST:
  case GO_ARENA_MAX:
    break;
  default:
    return as_err_set(err, AS_EINVAL,
                      "glibc: option %s cannot change at run time (mallopt "
                      "sets mxfast, trim_threshold, top_pad, mmap_threshold, "
                      "mmap_max, arena_test, arena_max)",
                      name);
  }
  malloc_consolidate(g, 0);
  switch (key) {
  case GO_MXFAST: /* do_set_mxfast 5419-5428: refused above MAX_FAST_SIZE */
    if (v <= MAX_FAST_SIZE)
      set_max_fast(g, v);
    break;
  case GO_TRIM_THRESHOLD:
    g->trim_threshold = v;
    g->no_dyn_threshold = true;
    break;
  case GO_TOP_PAD:
    g->top_pad = v;
    g->no_dyn_threshold = true;
    break;
  case GO_MMAP_THRESHOLD:
    g->mmap_threshold = v;
    g->no_dyn_threshold = true;
    break;
  case GO_MMAP_MAX: /* an int32_t: a negative limit allows no mapping */
    g->n_mmaps_max = value < 0 ? 0 : v;
    g->no_dyn_threshold = true;
    break;
  case GO_ARENA_TEST: /* 5494-5497: only positive values */
    if (value > 0)
      g->arena_test = v;
    break;
  case GO_ARENA_MAX:
    if (value > 0)
      g->arena_max = v;
    break;
  }
  return g->fail != AS_OK ? report(g, err) : AS_OK;
}

static bool glibc_locate(const model_t *m, uint64_t id, sim_addr_t *addr) {
  const glibc_model_t *g = (const glibc_model_t *)m;
  if (id >= g->obj_tab.len || g->obj[id] == NIL)
    return false;
  *addr = ch_addr(&g->ch[g->obj[id]]) + CHUNK_HDR_SZ;
  return true;
}

/* malloc_usable_size of a fresh request of size bytes (musable,
 * malloc.c:5120-5131, with memsize at 1459-1462): a heap chunk has
 * request2size(size) - CHUNK_HDR_SZ + SIZE_SZ usable bytes (the next
 * chunk's prev_size field is the last word), an mmapped chunk its page-
 * rounded size less CHUNK_HDR_SZ.  A request at or above the current
 * (possibly dynamic) mmap threshold is mmapped, as sysmalloc takes it when
 * no bin or top can serve it (malloc.c:2573-2592): the state of a fresh
 * heap, which is what the size-class lab asks about. */
static uint64_t glibc_usable_size(const model_t *m, uint64_t size,
                                  uint8_t domain) {
  (void)domain;
  const glibc_model_t *g = (const glibc_model_t *)m;
  uint64_t             nb = request2size(size);
  if (nb == 0)
    return 0;
  if (nb >= g->mmap_threshold && g->n_mmaps < g->n_mmaps_max)
    return mmap_chunk_size(g, nb) - CHUNK_HDR_SZ;
  return nb - CHUNK_HDR_SZ + SIZE_SZ;
}

static uint64_t list_bytes(const glibc_model_t *g, uint32_t first,
                           uint32_t end) {
  uint64_t bytes = 0;
  for (uint32_t p = first; p != end; p = g->ch[p].fd)
    bytes += ch_size(&g->ch[p]);
  return bytes;
}

/* Bytes of the chunks in each free state, from the lists that hold them
 * (tcaches, fastbins, bins, tops), for glibc_check_invariants to hold
 * against free_bytes_pooled.  Not the counters' way: a list walk is a
 * chain of dependent loads, and on the survivors benchmark trace, with
 * 4.19 M chunks in fastbins at the end, it took 12 % of the replay where
 * the streaming pool walk takes 5 %. */
static void free_bytes_listed(const glibc_model_t *g,
                              uint64_t             by_state[CS_BINHEAD + 1]) {
  memset(by_state, 0, (CS_BINHEAD + 1) * sizeof *by_state);
  for (uint32_t t = 0; t < g->nthreads; t++)
    for (int i = 0; i < TCACHE_ALL_BINS; i++)
      by_state[CS_TCACHE] += list_bytes(g, g->threads[t].tc_head[i], NIL);
  for (uint32_t a = 0; a < g->narenas; a++) {
    const garena_t *av = &g->arenas[a];
    if (av->top != NIL)
      by_state[CS_TOP] += ch_size(&g->ch[av->top]);
    for (int i = 0; i < NFASTBINS; i++)
      by_state[CS_FAST] += list_bytes(g, av->fast[i], NIL);
    for (uint32_t i = 1; i < NBINS; i++)
      by_state[CS_BINNED] +=
          list_bytes(g, g->ch[av->bins + i].fd, av->bins + i);
  }
}

/* The record a free or realloc of ev's object reads first. */
static void glibc_prefetch(const model_t *m, const trace_event_t *ev) {
  const glibc_model_t *g = (const glibc_model_t *)m;
  if ((ev->op == TRACE_FREE || ev->op == TRACE_REALLOC) &&
      ev->id < g->obj_tab.len)
    __builtin_prefetch(&g->ch[g->obj[ev->id]]);
}

/* Bytes of the chunks in each state, from a walk of the record pool. */
static void free_bytes_pooled(const glibc_model_t *g,
                              uint64_t             by_state[CS_BINHEAD + 1]) {
  memset(by_state, 0, (CS_BINHEAD + 1) * sizeof *by_state);
  for (uint32_t i = 1; i < g->nch; i++)
    if (g->ch[i].state <= CS_BINHEAD)
      by_state[g->ch[i].state] += ch_size(&g->ch[i]);
}

static size_t glibc_counters(const model_t *m, model_counter_t *out,
                             size_t cap) {
  const glibc_model_t *g = (const glibc_model_t *)m;
  uint64_t             by_state[CS_BINHEAD + 1], system = 0, seen = 0;
  for (uint32_t t = 0; t < g->nthreads; t++)
    seen += g->threads[t].seen;
  free_bytes_pooled(g, by_state);
  for (uint32_t i = 0; i < g->narenas; i++)
    system += g->arenas[i].system_mem;
  size_t n = 0;
#define PUT(name, v, unit, help)                                               \
  n = model_counter_put(out, n, cap, "glibc", name, v, unit, help)
  PUT("arenas", g->narenas, "count", "arenas created, main_arena included");
  PUT("heaps", g->heaps_live, "count", "64 MiB thread-arena heaps mapped");
  PUT("system_bytes", system, "bytes", "heap bytes obtained from the kernel");
  PUT("top_bytes", by_state[CS_TOP], "bytes",
      "free bytes in arenas' top chunks (trimmable at the end of a heap)");
  PUT("binned_bytes", by_state[CS_BINNED], "bytes",
      "free chunks in unsorted, small and large bins (interior free)");
  PUT("fastbin_bytes", by_state[CS_FAST], "bytes", "chunks in fastbins");
  PUT("tcache_bytes", by_state[CS_TCACHE], "bytes",
      "chunks held in per-thread caches");
  PUT("mmapped_chunks", g->n_mmaps, "count", "chunks with their own mapping");
  PUT("mmapped_bytes", g->mmapped_mem, "bytes", "bytes of mmapped chunks");
  PUT("mmap_threshold", g->mmap_threshold, "bytes",
      "current (possibly dynamic) mmap threshold");
  PUT("trim_threshold", g->trim_threshold, "bytes",
      "current (possibly dynamic) trim threshold");
  PUT("threads", seen, "count", "threads seen (started, or the main one)");
#undef PUT
  return n;
}

/* Tunable key's value.  glibc's do_set_* functions take no value above
 * max and leave the default in force (malloc.c:5379-5421), and so does
 * the model: a run measured with GLIBC_TUNABLES=glibc.malloc.tcache_max=
 * 65536 on 2.36 ran with the default. */
static uint64_t tunable(const model_opts_t *opts, int key, uint64_t max) {
  uint64_t v = model_opt_u64(opts, key);
  if (v <= max)
    return v;
  model_opts_t defaults;
  (void)model_opts_parse("glibc", opts->table, NULL, &defaults, NULL);
  return model_opt_u64(&defaults, key);
}

static as_status_t glibc_create(const model_opts_t *opts,
                                const model_ctx_t *ctx, model_t **out,
                                as_err_t *err) {
  *out = NULL;
  glibc_model_t *g = calloc(1, sizeof *g);
  if (g == NULL)
    return as_err_set(err, AS_ENOMEM, "glibc: out of memory");
  g->kernel = ctx->kernel;
  g->page = sim_kernel_page_size(ctx->kernel);
  /* The choices in order: 2.35 2.36 2.39 2.40 2.41 2.42 2.43. */
  static const glibc_version_t by_choice[] = {GV_236, GV_236, GV_239, GV_239,
                                              GV_241, GV_242, GV_243};
  g->version = by_choice[model_opt_i64(opts, GO_VERSION)];
  g->mmap_threshold = model_opt_u64(opts, GO_MMAP_THRESHOLD);
  g->trim_threshold = model_opt_u64(opts, GO_TRIM_THRESHOLD);
  g->top_pad = model_opt_u64(opts, GO_TOP_PAD);
  g->n_mmaps_max = model_opt_u64(opts, GO_MMAP_MAX);
  /* malloc.c:5308-5346: setting any of these freezes the thresholds. */
  g->no_dyn_threshold = model_opt_was_set(opts, GO_MMAP_THRESHOLD) ||
                        model_opt_was_set(opts, GO_TRIM_THRESHOLD) ||
                        model_opt_was_set(opts, GO_TOP_PAD) ||
                        model_opt_was_set(opts, GO_MMAP_MAX);
  g->arena_test = model_opt_u64(opts, GO_ARENA_TEST);
  g->arena_max = model_opt_u64(opts, GO_ARENA_MAX);
  g->ncpus = model_opt_u64(opts, GO_NCPUS);
  if (model_opt_i64(opts, GO_HUGETLB) == 1) {
    /* do_set_hugetlb (5428-5442): only under THP=madvise, where the
     * madvise calls matter; master also under always, without the calls
     * (gmaster:5138-5143, 1927). */
    sim_thp_mode_t mode = sim_kernel_thp_mode(ctx->kernel);
    g->thp_madvise = mode == SIM_THP_MADVISE;
    if (g->thp_madvise || (g->version >= GV_243 && mode == SIM_THP_ALWAYS))
      g->thp_pagesize = SIM_KERNEL_THP_BYTES;
  }
  if (nptl_stacks_init(
          &g->nptl, ctx->kernel, model_opt_u64(opts, GO_STACK_SIZE),
          model_opt_u64(opts, GO_THREAD_STACK_PAGES), 0, "glibc", err) != AS_OK)
    goto fail;

  /* do_set_mxfast (5413-5421) ignores a value above MAX_FAST_SIZE */
  set_max_fast(g, tunable(opts, GO_MXFAST, MAX_FAST_SIZE));

  /* do_set_tcache_count (5392-5401) ignores one above MAX_TCACHE_COUNT */
  g->tcache_count = tunable(opts, GO_TCACHE_COUNT, MAX_TCACHE_COUNT);
  if (g->version >= GV_243 && !model_opt_was_set(opts, GO_TCACHE_COUNT))
    g->tcache_count = 16; /* gmaster:317 TCACHE_FILL_COUNT */
  uint64_t tmax = model_opt_u64(opts, GO_TCACHE_MAX);
  if (g->version < GV_242) { /* do_set_tcache_max (5379-5389) ignores a
                                value above MAX_TCACHE_SIZE */
    tmax = tunable(opts, GO_TCACHE_MAX, MAX_TCACHE_SIZE);
    uint64_t tnb = request2size(tmax);
    g->tcache_bins = (tnb - MINSIZE + MALLOC_ALIGN_MASK) / MALLOC_ALIGNMENT + 1;
  } else {
    /* g242:5590-5610, gmaster:5081-5102 */
    g->tcache_small_bins = TCACHE_SMALL_BINS;
    g->tcache_max_bytes = g->version >= GV_243 ? 1040 + 1 : 1032;
    if (model_opt_was_set(opts, GO_TCACHE_MAX)) {
      /* csize2tidx, then large_csize2tidx when 2.42's nb exceeds
       * MAX_TCACHE_SMALL_SIZE (g242:5598) or master's index passes the
       * small bins (gmaster:5089). */
      uint64_t tnb = request2size(tmax);
      uint64_t idx = (tnb - MINSIZE) / MALLOC_ALIGNMENT;
      bool     large = g->version >= GV_243 ? idx >= TCACHE_SMALL_BINS
                                            : tnb > MAX_TCACHE_SIZE;
      if (tnb == 0 || tnb > UINT32_MAX)
        idx = TCACHE_ALL_BINS;
      else if (large)
        idx = (uint64_t)(TCACHE_SMALL_BINS + 21 - __builtin_clz((unsigned)tnb));
      if (idx >= TCACHE_ALL_BINS) {
        as_err_set(err, AS_EINVAL,
                   "glibc: tcache_max=%" PRIu64 " beyond the last tcache bin",
                   tmax);
        goto fail;
      }
      if (idx < TCACHE_SMALL_BINS)
        g->tcache_small_bins = idx + 1;
      g->tcache_max_bytes = g->version >= GV_243 ? tnb + 1 : tnb;
    }
  }
  /* sizeof (tcache_perthread_struct): 64 counts + 64 pointers (malloc.c:
   * 3132-3136) = 640; 76 of each from 2.42 (g242:3127-3131) = 760. */
  g->tcache_struct_bytes = g->version >= GV_242 ? 760 : 640;
  g->malloc_state_sz =
      g->version >= GV_243 ? MALLOC_STATE_SZ_MASTER : MALLOC_STATE_SZ_236;

  if (as_reserve_init(&g->ch_res, sizeof(gchunk_t), MAX_RECORDS) != AS_OK ||
      sim_idtable_init(&g->obj_tab, sizeof *g->obj) != AS_OK ||
      as_reserve_need(&g->ch_res, 1) == NULL) {
    as_err_set(err, AS_ENOMEM,
               "glibc: out of memory (address space for "
               "its record pool and object table)");
    goto fail;
  }
  g->ch = (gchunk_t *)g->ch_res.base;
  g->obj = sim_idtable_base(&g->obj_tab);
  g->ch_cap = (uint32_t)(g->ch_res.committed / sizeof(gchunk_t));
  g->nch = 1; /* record 0 is NIL */
  g->free_list = -1;
  if (arena_alloc(g) != 0) /* main_arena */
    goto fail_model;
  g->arenas[0].attached_threads = 1; /* the main thread */
  g->next_to_use = 0;                /* arena.c:868-869 */
  gthread_t *main_thread = thread_get(g, 0);
  if (main_thread == NULL)
    goto fail_model;
  main_thread->arena = 0; /* ptmalloc_init: thread_arena = &main_arena */
  main_thread->seen = true;
  *out = &g->base;
  return AS_OK;

fail_model:
  report(g, err);
fail : {
  as_status_t code = err != NULL ? err->code : AS_EINVAL;
  glibc_destroy(&g->base);
  return code != AS_OK ? code : AS_EINVAL;
}
}

/* What glibc reads and the model does not: a perturb byte makes malloc
 * and free write every block (2.36 malloc/malloc.c:1994-2008
 * alloc_perturb, free_perturb), so pages the program never writes become
 * resident. */
static const char *const glibc_unmodelled_env[] = {
    "MALLOC_PERTURB_=0", "GLIBC_TUNABLES:glibc.malloc.perturb=0", NULL};

const model_methods_t model_glibc_methods = {
    .name = "glibc",
    .summary = "glibc malloc (ptmalloc2) 2.36, with 2.35-2.43 switches",
    .unmodelled_env = glibc_unmodelled_env,
    .options = glibc_options,
    .create = glibc_create,
    .destroy = glibc_destroy,
    .alloc = glibc_alloc,
    .realloc = glibc_realloc,
    .free = glibc_free,
    .thread = glibc_thread,
    .trim = glibc_trim,
    .stats = glibc_stats,
    .locate = glibc_locate,
    .set_option = glibc_set_option,
    .counters = glibc_counters,
    .usable_size = glibc_usable_size,
    .walk = glibc_walk,
    .mechanisms = glibc_mechanisms,
    .check = glibc_check_invariants,
    .prefetch = glibc_prefetch,
};

/* ---- Introspection (models/glibc.h) ------------------------------------- */

static const glibc_model_t *as_glibc(const model_t *m) {
  return (const glibc_model_t *)m;
}

bool glibc_inspect_object(const model_t *m, uint64_t id,
                          glibc_chunk_info_t *out) {
  const glibc_model_t *g = as_glibc(m);
  if (id >= g->obj_tab.len || g->obj[id] == NIL)
    return false;
  const gchunk_t *c = &g->ch[g->obj[id]];
  out->addr = ch_addr(c);
  out->size = ch_size(c);
  out->arena = c->arena;
  out->mmapped = c->state == CS_MMAP;
  return true;
}

uint64_t glibc_inspect_top_size(const model_t *m, uint32_t arena) {
  const glibc_model_t *g = as_glibc(m);
  if (arena >= g->narenas || g->arenas[arena].top == NIL)
    return 0;
  return ch_size(&g->ch[g->arenas[arena].top]);
}

uint64_t glibc_inspect_top_addr(const model_t *m, uint32_t arena) {
  const glibc_model_t *g = as_glibc(m);
  if (arena >= g->narenas || g->arenas[arena].top == NIL)
    return 0;
  return ch_addr(&g->ch[g->arenas[arena].top]);
}

uint32_t glibc_inspect_narenas(const model_t *m) {
  return as_glibc(m)->narenas;
}

int32_t glibc_inspect_thread_arena(const model_t *m, uint32_t tid) {
  const glibc_model_t *g = as_glibc(m);
  return tid < g->nthreads ? g->threads[tid].arena : -1;
}

uint32_t glibc_inspect_tcache_count(const model_t *m, uint32_t tid,
                                    uint64_t csize) {
  const glibc_model_t *g = as_glibc(m);
  if (tid >= g->nthreads)
    return 0;
  uint32_t n = 0;
  for (int i = 0; i < TCACHE_ALL_BINS; i++)
    for (uint32_t p = g->threads[tid].tc_head[i]; p != NIL; p = g->ch[p].fd)
      n += ch_size(&g->ch[p]) == csize;
  return n;
}

uint32_t glibc_inspect_fastbin_count(const model_t *m, uint32_t arena,
                                     uint64_t csize) {
  const glibc_model_t *g = as_glibc(m);
  if (arena >= g->narenas || csize < MINSIZE || csize > MAX_FAST_SIZE)
    return 0;
  uint32_t n = 0;
  for (uint32_t p = g->arenas[arena].fast[fastbin_index(csize)]; p != NIL;
       p = g->ch[p].fd)
    n++;
  return n;
}

uint32_t glibc_inspect_binned_count(const model_t *m, uint32_t arena) {
  const glibc_model_t *g = as_glibc(m);
  if (arena >= g->narenas)
    return 0;
  uint32_t n = 0;
  for (unsigned i = 1; i < NBINS; i++) {
    uint32_t bin = g->arenas[arena].bins + i;
    for (uint32_t p = g->ch[bin].fd; p != bin; p = g->ch[p].fd)
      n++;
  }
  return n;
}

uint64_t glibc_inspect_mmap_threshold(const model_t *m) {
  return as_glibc(m)->mmap_threshold;
}

uint64_t glibc_inspect_trim_threshold(const model_t *m) {
  return as_glibc(m)->trim_threshold;
}

uint64_t glibc_inspect_heap_size(const model_t *m, uint32_t arena) {
  const glibc_model_t *g = as_glibc(m);
  if (arena >= g->narenas || g->arenas[arena].heap < 0)
    return 0;
  return g->heaps[g->arenas[arena].heap].size;
}

uint64_t glibc_inspect_heap_mprotect_size(const model_t *m, uint32_t arena) {
  const glibc_model_t *g = as_glibc(m);
  if (arena >= g->narenas || g->arenas[arena].heap < 0)
    return 0;
  return g->heaps[g->arenas[arena].heap].mprotect_size;
}

uint32_t glibc_inspect_heap_count(const model_t *m, uint32_t arena) {
  const glibc_model_t *g = as_glibc(m);
  if (arena >= g->narenas)
    return 0;
  uint32_t n = 0;
  for (int32_t h = g->arenas[arena].heap; h >= 0; h = g->heaps[h].prev)
    n++;
  return n;
}

/* Checks one region, walking down from its last record. */
static as_status_t check_region(const glibc_model_t *g, uint32_t last,
                                uint32_t arena, uint64_t *binned,
                                as_err_t *err) {
  if (g->ch[last].next != NIL)
    return as_err_set(err, AS_EINVAL, "glibc: region end %u has a next", last);
  for (uint32_t p = last; p != NIL; p = g->ch[p].prev) {
    const gchunk_t *c = &g->ch[p];
    if (c->arena != arena)
      return as_err_set(err, AS_EINVAL,
                        "glibc: chunk %#" PRIx64 " in arena %u claims arena %u",
                        ch_addr(c), arena, (unsigned)c->arena);
    if (ch_size(c) < (c->state == CS_FENCE ? 2 * SIZE_SZ : MINSIZE) ||
        (ch_size(c) & MALLOC_ALIGN_MASK) != 0 ||
        ((ch_addr(c) + CHUNK_HDR_SZ) & MALLOC_ALIGN_MASK) != 0)
      return as_err_set(err, AS_EINVAL,
                        "glibc: chunk %#" PRIx64 " has bad size %" PRIu64,
                        ch_addr(c), ch_size(c));
    if (c->prev != NIL) {
      const gchunk_t *b = &g->ch[c->prev];
      if (b->next != p || ch_addr(b) + ch_size(b) != ch_addr(c))
        return as_err_set(err, AS_EINVAL,
                          "glibc: chunks %#" PRIx64 " and %#" PRIx64
                          " do not tile",
                          ch_addr(b), ch_addr(c));
      if (c->state == CS_BINNED && (b->state == CS_BINNED))
        return as_err_set(err, AS_EINVAL,
                          "glibc: free chunks %#" PRIx64 " and %#" PRIx64
                          " not coalesced",
                          ch_addr(b), ch_addr(c));
      if (c->state == CS_TOP && b->state == CS_BINNED)
        return as_err_set(err, AS_EINVAL,
                          "glibc: free chunk %#" PRIx64 " borders top",
                          ch_addr(b));
    }
    if (c->state == CS_TOP && p != g->arenas[arena].top)
      return as_err_set(err, AS_EINVAL, "glibc: stray top %#" PRIx64,
                        ch_addr(c));
    if (c->state == CS_DEAD || c->state == CS_BINHEAD || c->state == CS_MMAP)
      return as_err_set(err, AS_EINVAL,
                        "glibc: record %u (state %d) in a "
                        "region",
                        p, (int)c->state);
    if (c->state == CS_BINNED)
      (*binned)++;
  }
  return AS_OK;
}

/* The lists hold every free chunk (tcache, fastbin, bin, top) once. */
static as_status_t check_listed(const glibc_model_t *g, as_err_t *err) {
  uint64_t listed[CS_BINHEAD + 1], pooled[CS_BINHEAD + 1];
  free_bytes_listed(g, listed);
  free_bytes_pooled(g, pooled);
  for (int st = CS_TCACHE; st <= CS_TOP; st++)
    if (listed[st] != pooled[st])
      return as_err_set(err, AS_EINVAL,
                        "glibc: chunks of state %d hold %" PRIu64
                        " bytes, their lists %" PRIu64,
                        st, pooled[st], listed[st]);
  return AS_OK;
}

as_status_t glibc_check_invariants(const model_t *m, as_err_t *err) {
  const glibc_model_t *g = as_glibc(m);
  if (g->fail != AS_OK)
    return as_err_set(err, AS_EINVAL, "glibc: model failed: %s", g->ferr.msg);
  as_status_t lists_rc = check_listed(g, err);
  if (lists_rc != AS_OK)
    return lists_rc;
  for (uint32_t a = 0; a < g->narenas; a++) {
    const garena_t *av = &g->arenas[a];
    uint64_t        binned = 0, listed = 0;
    as_status_t     rc;
    if (av->top != NIL) {
      if (g->ch[av->top].state != CS_TOP)
        return as_err_set(err, AS_EINVAL, "glibc: arena %u top not TOP", a);
      rc = check_region(g, av->top, a, &binned, err);
      if (rc != AS_OK)
        return rc;
    }
    for (int32_t h = av->heap; h >= 0; h = g->heaps[h].prev) {
      const gheap_t *H = &g->heaps[h];
      if (!H->live || H->arena != a)
        return as_err_set(err, AS_EINVAL, "glibc: heap %d of arena %u", h, a);
      if (h == av->heap) {
        const gchunk_t *t = &g->ch[av->top];
        if (ch_addr(t) + ch_size(t) != H->addr + H->size)
          return as_err_set(err, AS_EINVAL,
                            "glibc: arena %u top does not "
                            "end its heap",
                            a);
      }
      if (H->prev >= 0) {
        rc = check_region(g, H->prev_fence, a, &binned, err);
        if (rc != AS_OK)
          return rc;
        const gchunk_t *f = &g->ch[H->prev_fence];
        const gheap_t  *P = &g->heaps[H->prev];
        if (f->state != CS_FENCE ||
            ch_addr(f) + ch_size(f) != P->addr + P->size)
          return as_err_set(err, AS_EINVAL, "glibc: heap %d fence", h);
      }
    }
    for (unsigned i = NSMALLBINS; i < NBINS; i++) {
      const glindex_t *li = &av->lidx[i - NSMALLBINS];
      uint32_t         bin = av->bins + i, k = 0;
      if (g->ch[bin].ns_head)
        return as_err_set(err, AS_EINVAL,
                          "glibc: bin %u header in the "
                          "skip list",
                          i);
      /* The skip list is the heads in list order: the index's groups. */
      for (uint32_t p = g->ch[bin].fd; p != bin; p = g->ch[p].fd) {
        if (!g->ch[p].ns_head)
          continue;
        if (k >= li->n || li->v[k].head != p ||
            li->v[k].size != ch_size(&g->ch[p]))
          return as_err_set(err, AS_EINVAL, "glibc: bin %u index entry %u", i,
                            k);
        k++;
      }
      if (k != li->n)
        return as_err_set(err, AS_EINVAL,
                          "glibc: bin %u index has %u "
                          "groups, list %u",
                          i, li->n, k);
    }
    for (unsigned i = 1; i < NBINS; i++) {
      uint32_t bin = av->bins + i;
      uint64_t last_size = UINT64_MAX;
      for (uint32_t p = g->ch[bin].fd; p != bin; p = g->ch[p].fd) {
        const gchunk_t *c = &g->ch[p];
        if (g->ch[c->fd].bk != p || c->state != CS_BINNED)
          return as_err_set(err, AS_EINVAL, "glibc: bin %u list broken", i);
        if (i > 1 && bin_index(ch_size(c)) != i)
          return as_err_set(err, AS_EINVAL, "glibc: size %" PRIu64 " in bin %u",
                            ch_size(c), i);
        if (i > 1 && !(av->binmap[i >> 5] & (1u << (i & 31))))
          return as_err_set(err, AS_EINVAL, "glibc: bin %u not in binmap", i);
        if (i >= NSMALLBINS) {
          if (ch_size(c) > last_size)
            return as_err_set(err, AS_EINVAL, "glibc: large bin %u unsorted",
                              i);
          bool first = ch_size(c) != last_size;
          if (first != c->ns_head)
            return as_err_set(err, AS_EINVAL, "glibc: bin %u skip list", i);
          last_size = ch_size(c);
        } else if (c->ns_head) {
          return as_err_set(err, AS_EINVAL,
                            "glibc: bin %u: a group head outside a large bin",
                            i);
        }
        if (++listed > binned)
          return as_err_set(err, AS_EINVAL,
                            "glibc: arena %u lists more "
                            "free chunks than its regions hold",
                            a);
      }
    }
    if (listed != binned)
      return as_err_set(err, AS_EINVAL,
                        "glibc: arena %u: %" PRIu64
                        " free chunks in regions, %" PRIu64 " in bins",
                        a, binned, listed);
    for (unsigned i = 0; i < NFASTBINS; i++)
      for (uint32_t p = av->fast[i]; p != NIL; p = g->ch[p].fd)
        if (g->ch[p].state != CS_FAST || fastbin_index(ch_size(&g->ch[p])) != i)
          return as_err_set(err, AS_EINVAL, "glibc: fastbin %u broken", i);
  }
  for (uint32_t t = 0; t < g->nthreads; t++)
    for (int i = 0; i < TCACHE_ALL_BINS; i++) {
      uint32_t n = 0;
      for (uint32_t p = g->threads[t].tc_head[i]; p != NIL; p = g->ch[p].fd) {
        if (g->ch[p].state != CS_TCACHE)
          return as_err_set(err, AS_EINVAL, "glibc: tcache %u/%d", t, i);
        n++;
      }
      if (n != g->threads[t].tc_count[i])
        return as_err_set(err, AS_EINVAL, "glibc: tcache %u/%d count", t, i);
    }
  for (uint64_t id = 0; id < g->obj_tab.len; id++) {
    uint32_t p = g->obj[id];
    if (p != NIL && (!g->ch[p].user ||
                     (g->ch[p].state != CS_INUSE && g->ch[p].state != CS_MMAP)))
      return as_err_set(err, AS_EINVAL,
                        "glibc: object %" PRIu64 " maps to a chunk not in use",
                        id);
  }
  return AS_OK;
}
