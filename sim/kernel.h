/* sim/kernel.h -- the simulated kernel: a sparse address space with per-page
 * residency, so that RSS is a count of written pages, not a guess.
 *
 * Type map
 *   sim_addr_t           a virtual address (64-bit, never dereferenced)
 *   sim_owner_t          who a mapping belongs to; RSS is broken down by it
 *   sim_kernel_config_t  page size, THP, memory pressure, address layout
 *   sim_kernel_t         the address space (opaque but for its head)
 *   sim_kernel_head_t    the first member of sim_kernel_t: what the inline
 *                        touch and RSS functions at the end of this file read
 *
 * Rules this file implements (Linux 6.1, mm/memory.c, mm/mmap.c,
 * mm/madvise.c, mm/mremap.c, mm/mprotect.c):
 *   - A page becomes resident on its first *write* (sim_kernel_touch); read
 *     faults map the shared zero page and are not counted
 *     (do_anonymous_page, "Use the zero-page for reads").  With zero_page
 *     off, as on kernels seen not to map it (reading 100 MiB of fresh
 *     anonymous memory on Linux 6.18 in a Firecracker guest added 100 MiB
 *     of RSS), a read (sim_kernel_read) faults in a page of its own.
 *   - munmap, brk shrink, MADV_DONTNEED and mmap(MAP_FIXED) over a range drop
 *     residency at once; MADV_FREE keeps pages resident (counted as lazyfree)
 *     until memory pressure reclaims them or a write makes them dirty again.
 *   - PROT_NONE reservations cost address space, never RSS; mprotect back to
 *     RW faults nothing in.
 *   - mmap places mappings top-down, first fit below mmap_top, as Linux's
 *     unmapped_area_topdown does, so freed holes are reused by later maps.
 *   - With thp set, a write fault in a 2 MiB-aligned range lying wholly in one
 *     RW mapping makes all of that range resident (do_huge_pmd_anonymous_page).
 *     With thp_madvise, the same inside one range given MADV_HUGEPAGE
 *     (Linux 6.1 mm/khugepaged.c hugepage_madvise sets VM_HUGEPAGE, which
 *     hugepage_vma_check accepts under THP=madvise); munmap drops the
 *     advice, mremap carries it along and to a grown mapping's new end.
 *     A later DONTNEED of part of such a block drops those pages only, as
 *     Linux splits the huge page (zap_huge_pmd -> __split_huge_pmd).  A
 *     block that small pages faulted keeps its page table after they go,
 *     so it faults small pages again, until no mapping overlaps it or (with
 *     pt_reclaim, Linux 6.14+) one DONTNEED over the whole block empties it.
 *   - mremap shrinks by unmapping the tail, grows in place when the range
 *     after the mapping is free, and otherwise moves the mapping: the pages
 *     go along with their residency (Linux 6.1 mm/mremap.c move_page_tables),
 *     so a move changes no counter.
 * Memory use is proportional to mappings plus touched pages: reserving
 * terabytes of address space costs nothing.
 */
#ifndef ALLOCSIM_KERNEL_H
#define ALLOCSIM_KERNEL_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"

typedef uint64_t sim_addr_t;

/* Owner tags.  Order is the order of columns in reports and the store. */
#define SIM_OWNER_MAP(X)                                                       \
  X(BASELINE, "baseline")   /* the program itself before the trace */          \
  X(PYMALLOC, "pymalloc")   /* pymalloc arenas */                              \
  X(LIBC_HEAP, "libc_heap") /* brk heap and glibc thread-arena heaps */        \
  X(LIBC_MMAP, "libc_mmap") /* glibc mmapped chunks */                         \
  X(JEMALLOC, "jemalloc")                                                      \
  X(MIMALLOC, "mimalloc")                                                      \
  X(IDEAL, "ideal")       /* the ideal model's packed heap */                  \
  X(METADATA, "metadata") /* allocator bookkeeping outside the above */        \
  X(THREAD_STACK, "thread_stack") /* nptl thread stacks (glibc model) */       \
  X(TCMALLOC, "tcmalloc")         /* gperftools page heap mapped with mmap */  \
  X(MUSL, "musl")                 /* musl mallocng groups and mapped chunks */

typedef enum sim_owner_e {
#define SIM_OWNER_ENUM(name, str) SIM_OWNER_##name,
  SIM_OWNER_MAP(SIM_OWNER_ENUM)
#undef SIM_OWNER_ENUM
      SIM_OWNER_COUNT
} sim_owner_t;

/* "baseline", "pymalloc", ...; "?" for an out-of-range value. */
const char *sim_owner_name(sim_owner_t owner);

typedef enum sim_prot_e {
  SIM_PROT_NONE, /* reserved: address space only, touching it is an error */
  SIM_PROT_RW    /* readable and writable */
} sim_prot_t;

typedef enum sim_madv_e {
  SIM_MADV_DONTNEED,  /* drop residency now (mm/madvise.c zap) */
  SIM_MADV_FREE,      /* lazyfree: stays resident until pressure or rewrite */
  SIM_MADV_HUGEPAGE,  /* THP wanted in the range (thp_madvise below) */
  SIM_MADV_NOHUGEPAGE /* no THP in the range, whatever the mode */
} sim_madv_t;

/* Where mmap puts an anonymous mapping of 2 MiB or more with no address
 * hint.  Linux 6.7 began to align such mappings to a THP boundary
 * (efa7df3e3bb5: mm/mmap.c __get_unmapped_area -> mm/huge_memory.c
 * __thp_get_unmapped_area), and 6.12 limited it to lengths that are
 * multiples of 2 MiB (d4148aeab412).  The aligned placement searches for
 * length + 2 MiB top-down and takes the highest 2 MiB-aligned address in
 * that gap; a mapping mremap moves is placed the same way (6.18 treats an
 * anonymous mapping's page offset as zero).  No gap for the padded length:
 * the usual placement.  Stable backports may differ from the release
 * numbers. */
typedef enum sim_thp_align_e {
  SIM_THP_ALIGN_NONE,    /* Linux up to 6.6 (Debian 12's 6.1) */
  SIM_THP_ALIGN_ANY,     /* 6.7-6.11: any length of 2 MiB or more (6.7
                            placed the mapping at the padded gap's bottom
                            when that was aligned; 96204e1531 in 6.8 made
                            it the top, as here) */
  SIM_THP_ALIGN_MULTIPLE /* 6.12 and later: lengths that are multiples of
                            2 MiB */
} sim_thp_align_t;

/* The policy of a kernel release string ("6.18.44-fc-v1147", uname -r);
 * NONE for one that does not parse. */
sim_thp_align_t sim_kernel_thp_align_of_release(const char *release);
/* Whether a kernel release ("6.18.44-...") frees page tables that
 * MADV_DONTNEED empties (6.14+; x86-64 selects CONFIG_PT_RECLAIM, default
 * y).  Before it a block once mapped by small pages keeps them until its
 * mapping goes. */
bool sim_kernel_pt_reclaim_of_release(const char *release);
/* Whether a kernel release gives mappings made with MAP_STACK (glibc's
 * thread stacks) VM_NOHUGEPAGE, as MADV_NOHUGEPAGE would: Linux 6.7+
 * (c4608d1bf7c6, mm/mmap.c calc_vm_flag_bits; measured on 6.18: a
 * MAP_STACK mapping shows "nh" in smaps and faults in small pages under
 * THP always).  Callers that map stacks with MAP_STACK say so
 * (sim_kernel_mark_stack). */
bool sim_kernel_stack_nohugepage_of_release(const char *release);

/* What the policy does, in words, for reports. */
const char *sim_kernel_thp_align_name(sim_thp_align_t policy);

typedef struct sim_kernel_config_s sim_kernel_config_t;
struct sim_kernel_config_s {
  uint64_t page_size;        /* bytes: 4096, 16384 or 65536 */
  bool     thp;              /* 2 MiB THP on write fault, like THP=always */
  bool     thp_madvise;      /* ... only inside MADV_HUGEPAGE ranges, like
                                THP=madvise (Debian's default); on by
                                default: no model asks for it but where the
                                real allocator does */
  bool memory_pressure;      /* MADV_FREE pages are reclaimed at once */
  bool pt_reclaim;           /* MADV_DONTNEED over a whole 2 MiB block frees its
                                emptied page table, so a later fault may map a huge
                                page again (Linux 6.14+, CONFIG_PT_RECLAIM) */
  sim_thp_align_t thp_align; /* placement of large anonymous mappings;
                                NONE by default (Linux 6.1) */
  bool stack_nohugepage;     /* MAP_STACK mappings get VM_NOHUGEPAGE (Linux
                                6.7+); off by default (6.1) */
  bool zero_page;            /* read faults map the shared zero page (on
                                by default, as Linux does); off: a read
                                makes the page resident */
  sim_addr_t mmap_top;       /* highest address mmap hands out; 0: default */
  sim_addr_t brk_start;      /* initial program break; 0: default */
  uint64_t   max_memory_bytes; /* simulator memory the residency
                                  bookkeeping may take (--max-memory);
                                  0: no bound */
  uint64_t clock_origin_ns;    /* CLOCK_MONOTONIC (ns) at the trace's t = 0,
                                  when the recorder knew it (provenance
                                  clock_origin_ns); 0: unknown */
};

/* Simulator memory per 2 MiB block holding a resident page, as measured
 * (RSS of a process touching 2^34..2^40 bytes at once, 4 KiB and 64 KiB
 * pages: 800 bytes; the block's bitmaps and owner bytes, its allocation
 * header and its share of the hash table). */
#define SIM_KERNEL_BYTES_PER_BLOCK 800

typedef struct sim_kernel_s sim_kernel_t;

/* The part of sim_kernel_t that this header's inline functions read, so that
 * the common touch (pages already resident, RW and not lazyfree) and the RSS
 * read after every event cost no function call.  It is the first member of
 * struct sim_kernel_s, so a sim_kernel_t * converts to a sim_kernel_head_t *.
 * Only sim/kernel.c writes it; everything else in sim_kernel_t stays opaque.
 * Invariants, true whenever no kernel function is running:
 *   - rss_pages * page_size is RSS in bytes (sim_kernel_rss_bytes), and
 *     page_size == 1 << page_shift.
 *   - cache is a direct-mapped cache of the 2 MiB blocks holding a resident
 *     page: cache[key % SIM_KERNEL_CACHE_SLOTS] is either empty (key
 *     SIM_KERNEL_NO_BLOCK, which no block number equals) or block key's
 *     entry, whose fast bitmap has bit p set exactly when OS page p of the
 *     block is resident, not lazyfree and in an RW mapping -- when a write to
 *     it changes nothing.  A block may be missing from the cache, but an
 *     entry is never stale: releasing a block's residency empties its entry,
 *     and faults, munmap, madvise and mprotect keep fast exact.
 * The alternative not taken, an exported touch with a cheaper body, still
 * pays a call per touch: several per event in the glibc model. */
#define SIM_KERNEL_CHUNK_SHIFT 21         /* one cache entry covers 2 MiB */
#define SIM_KERNEL_CACHE_SLOTS 256        /* 512 MiB of blocks, 4 KiB pages */
#define SIM_KERNEL_NO_BLOCK    UINT64_MAX /* key of an empty cache entry */

typedef struct sim_kernel_cache_entry_s sim_kernel_cache_entry_t;
struct sim_kernel_cache_entry_s {
  uint64_t  key;  /* block number (address >> 21) or SIM_KERNEL_NO_BLOCK */
  uint64_t *fast; /* the block's fast bitmap (bit per OS page), or NULL */
};

typedef struct sim_kernel_head_s sim_kernel_head_t;
struct sim_kernel_head_s {
  uint64_t                 rss_pages;  /* resident OS pages */
  uint64_t                 page_size;  /* bytes: 4096, 16384 or 65536 */
  unsigned                 page_shift; /* log2(page_size) */
  sim_kernel_cache_entry_t cache[SIM_KERNEL_CACHE_SLOTS]; /* by key % slots */
};

/* What /sys/kernel/mm/transparent_hugepage/enabled would read: [always]
 * (cfg.thp), [madvise] (cfg.thp_madvise only) or [never].  Allocators that
 * read that file decide by it (glibc's glibc.malloc.hugetlb=1). */
typedef enum sim_thp_mode_e {
  SIM_THP_NEVER,
  SIM_THP_MADVISE,
  SIM_THP_ALWAYS
} sim_thp_mode_t;

/* "always", "madvise" or "never": the word sysfs brackets. */
const char *sim_thp_mode_name(sim_thp_mode_t mode);

/* Sets cfg's THP fields from that word (a run's provenance thp, or
 * machine_thp_enabled()); false, changing nothing, for another word. */
bool sim_kernel_config_set_thp(sim_kernel_config_t *cfg, const char *name);

/* The mode cfg's thp and thp_madvise stand for. */
sim_thp_mode_t sim_kernel_config_thp_mode(const sim_kernel_config_t *cfg);

/* The size of a transparent huge page (HPAGE_PMD_SIZE, what
 * /sys/kernel/mm/transparent_hugepage/hpage_pmd_size reads): 2 MiB at
 * every page size here (see sim/kernel.c "Left out"). */
#define SIM_KERNEL_THP_BYTES (UINT64_C(1) << SIM_KERNEL_CHUNK_SHIFT)

/* The top of user address space, past which nothing is mapped (Linux 6.1
 * arch/x86/include/asm/page_64_types.h: TASK_SIZE_MAX = (1 << 47) -
 * PAGE_SIZE, 4-level paging). */
#define SIM_KERNEL_TASK_SIZE_BITS 47

/* Fills *cfg with 4 KiB pages, THP only where advised (thp_madvise), no
 * pressure and the default layout.
 * The default mmap_top is not 16 KiB-aligned, as measured for CPython 3.11 on
 * Debian 12 (every pymalloc arena unaligned, read from id() of objects). */
void sim_kernel_config_default(sim_kernel_config_t *cfg);
/* Sets what depends on the release: thp_align and pt_reclaim. */
void sim_kernel_config_set_release(sim_kernel_config_t *cfg,
                                   const char          *release);

/* Another address-space layout, as ASLR gives each real run: lowers
 * cfg->mmap_top by offset_bytes (a zero mmap_top, meaning the default, is
 * first replaced by the default's value; offset 0 changes nothing).  Where
 * mmap_top sits modulo an allocator's alignment decides, e.g., which
 * pymalloc arenas are 16 KiB aligned.  Shared by `sweep --vary mmap_offset`
 * and `compare --layouts` so both mean the same layout by one offset.
 * AS_EINVAL (cfg unchanged) if offset_bytes is not a multiple of 4096 or
 * is not below mmap_top; sim_kernel_create checks the rest of the layout. */
as_status_t sim_kernel_config_offset_layout(sim_kernel_config_t *cfg,
                                            uint64_t             offset_bytes,
                                            as_err_t            *err);

/* Creates an empty address space.  Fails with AS_EINVAL for a page size
 * that is not 4096, 16384 or 65536. */
as_status_t sim_kernel_create(const sim_kernel_config_t *cfg,
                              sim_kernel_t **out, as_err_t *err);
void        sim_kernel_destroy(sim_kernel_t *k);

uint64_t sim_kernel_page_size(const sim_kernel_t *k);

sim_thp_mode_t sim_kernel_thp_mode(const sim_kernel_t *k);
/* The mapping [addr, addr + length) was made with MAP_STACK: with
 * cfg.stack_nohugepage it gets VM_NOHUGEPAGE, as SIM_MADV_NOHUGEPAGE
 * gives (no madvise call is counted: it is the mmap's flag).  AS_EINVAL
 * for a range not wholly mapped. */
as_status_t sim_kernel_mark_stack(sim_kernel_t *k, sim_addr_t addr,
                                  uint64_t length, as_err_t *err);
/* prctl(PR_SET_THP_DISABLE, 1): no THP for any mapping of the process from
 * now on, MADV_HUGEPAGE ones included (MMF_DISABLE_THP, which Linux 4.13
 * commit 1860033237d4 made apply to existing mappings at once).  The
 * mode above still reads the system's setting, as /sys does. */
void sim_kernel_disable_thp(sim_kernel_t *k);
/* Bytes of user address space (x86-64 4-level paging: 2^47 - one page):
 * no mapping, and so no allocation, can be larger. */
uint64_t sim_kernel_address_space_bytes(const sim_kernel_t *k);
/* The simulator memory --max-memory leaves this kernel (cfg.max_memory_
 * bytes; 0: no bound), which the models' own tables are held to too. */
uint64_t sim_kernel_max_memory_bytes(const sim_kernel_t *k);
/* The machine's CLOCK_MONOTONIC at the trace's t = 0 (cfg.clock_origin_ns;
 * 0: unknown): a model whose allocator reads a coarse clock (mimalloc's
 * milliseconds) sees its ticks where the real allocator did. */
uint64_t sim_kernel_clock_origin_ns(const sim_kernel_t *k);

/* Maps length bytes (rounded up to whole OS pages) at an address that is a
 * multiple of align (0 or any power of two; below a page means a page),
 * top-down first fit.  Nothing becomes resident.  AS_ENOMEM if no gap. */
as_status_t sim_kernel_mmap(sim_kernel_t *k, uint64_t length, uint64_t align,
                            sim_prot_t prot, sim_owner_t owner,
                            sim_addr_t *addr_out, as_err_t *err);

/* Where the real allocator put its next mapping, as a capture recorded
 * it: the next sim_kernel_mmap by owner goes at addr when that range is
 * free, else at the highest free address congruent to addr modulo 2 MiB
 * (or the alignment asked for, if larger), so that the low bits decide as
 * they did, e.g. whether a pymalloc arena is 16 KiB aligned and so has 64
 * pools or 63.  An addr that is not a multiple of the page size (or of
 * the alignment asked for) is not used.  One pending address per owner: a
 * later call replaces it, and the mmap takes it whether or not it is used. */
void sim_kernel_place_next(sim_kernel_t *k, sim_owner_t owner, sim_addr_t addr);

/* mmap(hint, length) without MAP_FIXED: the hint is taken when the
 * page-aligned range [hint, hint + length) is unmapped and below mmap_top
 * (Linux 6.1 mm/mmap.c generic_get_unmapped_area_topdown tries the hint
 * first), else placement is sim_kernel_mmap's (no alignment).  jemalloc
 * grows an extent in place this way under retain:false (src/extent.c
 * :127-131, src/pages.c:112-163).  *addr_out receives the address. */
as_status_t sim_kernel_mmap_hint(sim_kernel_t *k, sim_addr_t hint,
                                 uint64_t length, sim_prot_t prot,
                                 sim_owner_t owner, sim_addr_t *addr_out,
                                 as_err_t *err);

/* mmap(MAP_FIXED): replaces whatever was mapped in [addr, addr+length);
 * pages there lose residency. addr must be page-aligned. */
as_status_t sim_kernel_mmap_fixed(sim_kernel_t *k, sim_addr_t addr,
                                  uint64_t length, sim_prot_t prot,
                                  sim_owner_t owner, as_err_t *err);

/* Unmaps every page in the range (holes are fine, as in Linux). */
as_status_t sim_kernel_munmap(sim_kernel_t *k, sim_addr_t addr, uint64_t length,
                              as_err_t *err);

/* mremap(addr, old_length, new_length, MREMAP_MAYMOVE) of one whole mapping
 * (or its prefix), as glibc 2.36 malloc/malloc.c mremap_chunk calls it for
 * the realloc of an mmapped chunk.  Lengths round up to whole OS pages, and
 * [addr, addr + old_length) must lie within one mapping (one prot and owner;
 * any part of one is accepted, as Linux accepts any part of one VMA).
 *   - Shrinking unmaps the tail, whose residency drops.
 *   - Growing extends the mapping in place when the old range ends where the
 *     mapping ends and the range after it is unmapped (up to the end of the
 *     address space, not only up to mmap_top).
 *   - Otherwise the mapping moves to the range mmap would pick for
 *     new_length (top-down first fit, chosen while the old range is still
 *     mapped): resident and lazyfree pages keep their state and owner, RSS
 *     does not change, and the old range becomes free.
 * The grown part is not resident until written.  Same prot and owner as the
 * old mapping.  AS_EINVAL (naming the range) for an unaligned addr, a zero
 * length or a range that is not inside one mapping; AS_ENOMEM if a move finds
 * no gap.  A failure changes nothing and sets *new_addr_out to 0.
 * *new_addr_out receives the (possibly new) address. */
as_status_t sim_kernel_mremap(sim_kernel_t *k, sim_addr_t addr,
                              uint64_t old_length, uint64_t new_length,
                              sim_addr_t *new_addr_out, as_err_t *err);

/* Changes protection; every page of the range must be mapped.  Going to
 * PROT_NONE keeps residency (mprotect frees nothing: Linux 6.1
 * mm/mprotect.c changes protection bits only). */
as_status_t sim_kernel_mprotect(sim_kernel_t *k, sim_addr_t addr,
                                uint64_t length, sim_prot_t prot,
                                as_err_t *err);

/* The program break.  It starts at brk_start with an empty heap; brk moves
 * it (page-granular mapping, owner SIM_OWNER_LIBC_HEAP); shrinking unmaps. */
sim_addr_t  sim_kernel_brk_current(const sim_kernel_t *k);
as_status_t sim_kernel_brk(sim_kernel_t *k, sim_addr_t new_break,
                           as_err_t *err);

/* A write to [addr, addr+length): each page becomes resident (and stops
 * being lazyfree).  The hot path of every model, inline at the end of this
 * file.  AS_EINVAL (naming the address) if a page is unmapped or PROT_NONE:
 * that is a model bug.  AS_ENOMEM, changing nothing, if the blocks it would
 * make resident need more than cfg.max_memory_bytes of bookkeeping in all
 * (SIM_KERNEL_BYTES_PER_BLOCK each). */
static inline as_status_t sim_kernel_touch(sim_kernel_t *k, sim_addr_t addr,
                                           uint64_t length, as_err_t *err);

/* sim_kernel_touch without its inline fast test, which calls this when the
 * test fails: same contract.  Models call sim_kernel_touch. */
as_status_t sim_kernel_touch_checked(sim_kernel_t *k, sim_addr_t addr,
                                     uint64_t length, as_err_t *err);

/* The program or the allocator reads [addr, addr + length): with the zero
 * page (the default) nothing changes; without it, every page of the range
 * not resident becomes resident, as a read fault then allocates one.  A
 * lazyfree page stays lazyfree (only a write redirties it).  Errors as
 * sim_kernel_touch's. */
as_status_t sim_kernel_read(sim_kernel_t *k, sim_addr_t addr, uint64_t length,
                            as_err_t *err);

/* madvise over whole pages of the range; the range must be mapped. */
as_status_t sim_kernel_madvise(sim_kernel_t *k, sim_addr_t addr,
                               uint64_t length, sim_madv_t advice,
                               as_err_t *err);

/* Memory pressure now: every lazyfree page is reclaimed. */
void sim_kernel_reclaim_lazyfree(sim_kernel_t *k);

/* System calls the models made, and page faults, since creation: the cost
 * side of a retention policy (a purge that returns memory pays madvise
 * calls now and faults when the memory is used again). */
typedef struct sim_kernel_calls_s sim_kernel_calls_t;
struct sim_kernel_calls_s {
  uint64_t mmap; /* sim_kernel_mmap and mmap_fixed calls */
  uint64_t munmap;
  uint64_t mremap;
  uint64_t mprotect;
  uint64_t brk;
  uint64_t madvise; /* MADV_DONTNEED and MADV_FREE */
  uint64_t faults;  /* OS pages made resident by a write (with THP, the
                       pages a huge-page fault fills count one each) */
};
void sim_kernel_calls(const sim_kernel_t *k, sim_kernel_calls_t *out);

/* Counters, exact at every instant.  sim_kernel_rss_bytes is inline (the
 * engine reads it after every event). */
static inline uint64_t sim_kernel_rss_bytes(const sim_kernel_t *k);
uint64_t sim_kernel_rss_owner_bytes(const sim_kernel_t *k, sim_owner_t owner);
uint64_t sim_kernel_lazyfree_bytes(const sim_kernel_t *k);
uint64_t sim_kernel_mapped_bytes(const sim_kernel_t *k); /* VmSize */

/* Whether the page holding addr is resident (for tests and heap maps). */
bool sim_kernel_is_resident(const sim_kernel_t *k, sim_addr_t addr);
/* Whether it is, and then its owner (*owner untouched otherwise): how
 * explain attributes each resident page. */
bool sim_kernel_resident_owner(const sim_kernel_t *k, sim_addr_t addr,
                               sim_owner_t *owner);

/* Walks every internal structure and checks the counters; AS_OK or
 * AS_EINVAL with the first inconsistency.  Expensive: tests only. */
as_status_t sim_kernel_check_invariants(const sim_kernel_t *k, as_err_t *err);

/* ---- Inline functions --------------------------------------------------- */

static inline uint64_t sim_kernel_rss_bytes(const sim_kernel_t *k) {
  const sim_kernel_head_t *h = (const sim_kernel_head_t *)(const void *)k;
  return h->rss_pages * h->page_size;
}

static inline as_status_t sim_kernel_touch(sim_kernel_t *k, sim_addr_t addr,
                                           uint64_t length, as_err_t *err) {
  /* The common touch: a cached block, pages within one 64-page word of its
   * fast bitmap, all fast -- nothing to do.  The range must end inside the
   * block: the unsigned test length - 1 < blk - off also fails for a zero
   * length (length - 1 wraps to UINT64_MAX), and such touches, like every
   * other miss, go the checked way. */
  const sim_kernel_head_t        *h = (const sim_kernel_head_t *)(void *)k;
  const uint64_t                  blk = (uint64_t)1 << SIM_KERNEL_CHUNK_SHIFT;
  uint64_t                        key = addr >> SIM_KERNEL_CHUNK_SHIFT;
  uint64_t                        off = addr & (blk - 1);
  const sim_kernel_cache_entry_t *e =
      &h->cache[key & (SIM_KERNEL_CACHE_SLOTS - 1)];
  if (e->key == key && length - 1 < blk - off) {
    unsigned p0 = (unsigned)(off >> h->page_shift);
    unsigned p1 = (unsigned)((off + length - 1) >> h->page_shift);
    if ((p0 >> 6) == (p1 >> 6)) {
      uint64_t m = (~UINT64_C(0) >> (63 - (p1 - p0))) << (p0 & 63);
      if ((e->fast[p0 >> 6] & m) == m) {
        return AS_OK;
      }
    }
  }
  return sim_kernel_touch_checked(k, addr, length, err);
}

#endif
