/* models/musl.c -- musl 1.2.3's mallocng (Debian 12's musl, musl-gcc):
 * groups of equal slots per size class, nested groups, individually mapped
 * chunks, meta areas on the program break, and the bounce counters.
 *
 * Why: mallocng gives memory back eagerly -- a group whose slots are all
 * free is unmapped at once, a large chunk is its own mapping -- except in
 * a size class that keeps mapping and unmapping its last group
 * ("bouncing"), where it keeps that group.  Group sizes grow with how many
 * slots the class already has, and small groups live inside slots of
 * larger classes, so which memory goes back depends on the exact slot every
 * object took.  This file keeps every group's masks and every object's
 * slot, and replays alloc_group, try_avail, free and nontrivial_free as
 * written.  Citations are to musl tag v1.2.3 (github:bminor/musl), whose
 * src/ is identical to Debian's 1.2.3-1 source; Debian configures the
 * default malloc (configure:145, debian/rules:73).
 *
 * Page touches: the program writes what it requests unless the event is
 * TRACE_FLAG_UNWRITTEN.  mallocng itself writes each slot's 4 header bytes
 * and its end marker (enframe and set_size, meta.h:184-227), a group's
 * header, a byte at the end of every slot of a nested group
 * (malloc.c:270-271), its meta records, and for calloc the first and last
 * partial 4 KiB pages plus every page that is not zero (calloc.c:7-25:
 * pages that were never written read as zero and stay untouched).  free
 * releases the whole pages inside a freed slot of a multi-slot group with
 * MADV_FREE (free.c:117-127), which keeps them in RSS until memory
 * pressure; musl 1.2.4 and later do not (option version).  Where an object
 * starts in its slot depends on the header bytes an earlier occupant of that
 * memory left (enframe, meta.h:204): the model keeps the bytes the allocator
 * wrote; bytes the program wrote are unknown and read as zero (Header bytes,
 * below).
 *
 * Threads: mallocng has no per-thread state (one lock; a replay has no
 * contention), but pthread_create maps each thread's stack and TLS
 * (Threads, below).
 *
 * Left out (deliberately): malloc replaced by the program
 * (__malloc_replaced); the secret and the consistency checks; brk failing
 * (the simulated break grows until it meets a mapping: then, as in musl,
 * meta areas come from mmap).  PAGESIZE is 4096 on x86-64
 * (arch/x86_64/bits/limits.h:1); other simulated page sizes are refused.
 *
 * Sections
 *   Constants and options        Records
 *   Kernel helpers               Header bytes
 *   The object table             Meta records and areas
 *   Slots (enframe)              Groups and slots (allocation)
 *   Freeing                      Entry points
 *   Threads                      Model interface
 */
#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/idtable.h"
#include "../sim/threadtab.h"
#include "model.h"
#include "musl.h"

/* ---- Constants and options --------------------------------------------- */

#define MMAP_THRESHOLD 131052 /* meta.h:12 */
#define UNIT           16     /* meta.h:14 */
#define IB             4      /* meta.h:15 */
#define PGSZ           4096   /* arch/x86_64/bits/limits.h:1 PAGESIZE */
#define NCLASSES       48
#define SC_MAPPED      63 /* sizeclass of individually mapped chunks */
#define META_BYTES     40 /* struct meta, meta.h:24-32 */
#define AREA_HDR_BYTES 24 /* struct meta_area, meta.h:34-39 */
/* malloc.c:104-105: avail_meta_count = (4096 - sizeof(struct meta_area)) /
 * sizeof(struct meta) records per area page */
#define METAS_PER_AREA ((PGSZ - AREA_HDR_BYTES) / META_BYTES)
#define NONE           0u

/* malloc.c:12-24, in units of 16 bytes */
static const uint16_t size_classes[NCLASSES] = {
    1,    2,    3,    4,    5,    6,    7,    8,    9,    10,   12,   15,
    18,   20,   25,   31,   36,   42,   50,   63,   72,   84,   102,  127,
    146,  170,  204,  255,  292,  340,  409,  511,  584,  682,  818,  1023,
    1169, 1364, 1637, 2047, 2340, 2730, 3276, 4095, 4680, 5460, 6552, 8191,
};

/* malloc.c:26-36, 38 */
static const uint8_t small_cnt_tab[][3] = {
    {30, 30, 30}, {31, 15, 15}, {20, 10, 10}, {31, 15, 7}, {25, 12, 6},
    {21, 10, 5},  {18, 8, 4},   {31, 15, 7},  {28, 14, 6},
};
static const uint8_t med_cnt_tab[4] = {28, 24, 20, 32};

#define MUSL_OPTIONS(X)                                                        \
  X(MO_GAP_PROGRAM_HEAD, "gap_program_head", OPT_BYTES, "0", "bytes", NULL,    \
    "meta:musl_gap_program_head",                                              \
    "musl 1.2.3 ldso/dynlink.c:541-562 reclaim_gaps; 0 = a static program",    \
    "bytes the dynamic linker donates before the program's RW segment")        \
  X(MO_GAP_PROGRAM_TAIL, "gap_program_tail", OPT_BYTES, "0", "bytes", NULL,    \
    "meta:musl_gap_program_tail",                                              \
    "musl 1.2.3 ldso/dynlink.c:559-560 (the page tail after .bss)",            \
    "bytes donated after the program's RW segment")                            \
  X(MO_GAP_LIBC_HEAD, "gap_libc_head", OPT_BYTES, "0", "bytes", NULL,          \
    "meta:musl_gap_libc_head",                                                 \
    "musl 1.2.3 ldso/dynlink.c:1887 (Debian 12 libc.so: 0, RELRO)",            \
    "bytes donated before libc.so's RW segment")                               \
  X(MO_GAP_LIBC_TAIL, "gap_libc_tail", OPT_BYTES, "0", "bytes", NULL,          \
    "meta:musl_gap_libc_tail",                                                 \
    "musl 1.2.3 ldso/dynlink.c:1887 (Debian 12 libc.so 1.2.3-1: 160, "         \
    "readelf -l: RW segment ends at 0xaef60)",                                 \
    "bytes donated after libc.so's RW segment (0 for a static program)")       \
  X(MO_STACK_SIZE, "stack_size", OPT_BYTES, "131072", "bytes", NULL, NULL,     \
    "musl 1.2.3 src/internal/pthread_impl.h:197 DEFAULT_STACK_SIZE, "          \
    "src/thread/default_attr.c:3 __default_stacksize",                         \
    "thread stack size (pthread_attr_setstacksize); the mapping adds the "     \
    "TLS and an 8 KiB guard")                                                  \
  X(MO_THREAD_STACK_PAGES, "thread_stack_pages", OPT_U64, "1", "", NULL, NULL, \
    "measured: each of 64 threads of the musl oracle's replayer leaves one "   \
    "resident page (lab-arenas at 'running': 0.25 MiB over the start)",        \
    "OS pages of the program's own stack frames per thread, from the page "    \
    "holding the stack top (which also holds the TLS) down; a trace does "     \
    "not record this")                                                         \
  X(MO_VERSION, "version", OPT_ENUM, "1.2.3", "", "1.2.2|1.2.3|1.2.4|1.2.5",   \
    "meta:musl_version",                                                       \
    "musl v1.2.3..v1.2.5 src/malloc: one change, e6e82132 (in 1.2.4): "        \
    "mallocng/glue.h:27 USE_MADV_FREE 0 turns off free.c:122's MADV_FREE; "    \
    "v1.2.2..v1.2.3: errno kept across free's madvise and munmap, "            \
    "aligned_alloc's NULL check (no change to what is mapped or resident)",    \
    "musl release whose behaviour to model (1.2.4 and 1.2.5: freed slots' "    \
    "pages are not given MADV_FREE)")

enum musl_option_e { MUSL_OPTIONS(MODEL_OPTION_KEY) MO_COUNT };
_Static_assert(MO_COUNT <= MODEL_OPTS_MAX, "model_opts_t holds the rows");

static const model_option_t musl_options[] = {
    MUSL_OPTIONS(MODEL_OPTION_ROW){0}};

/* ---- Records ------------------------------------------------------------ */

/* struct meta (meta.h:24-32) plus what the group header holds
 * (active_idx, meta.h:17-22), the host of a nested group, and the mapping
 * it lives in (top) with that mapping's header-byte records.  One per
 * group, 40 bytes: on a heap of small objects the records are a fifth of
 * the simulator's memory (6.9 of 36 MB on the survivors benchmark, 64 B
 * objects), so a field only one kind of group uses shares its room with
 * another kind's (mapped says which), each slot's 16-bit header field is
 * kept only as far as it is read, most often as one bit (hdr_nat, see
 * hdr_off_get), the address is kept in units, and a record's place in its
 * meta area is computed from its number (meta_addr). */
typedef struct mmeta_s {
  uint32_t prev, next; /* active list; next == NONE: not queued */
  uint32_t avail_mask, freed_mask;
  uint32_t hdr_seen; /* bit i: slot i's header byte p[-3] is nonzero */
  union {
    uint32_t hdr_nat; /* !has_ext: bit i: slot i's 16-bit field holds the
                         slot's own offset (hdr_natural), else 0 */
    uint32_t hdr_ext; /* has_ext: the slots' fields (ms->hext), when some
                         field holds another value */
  };
  union {
    uint32_t map_pages; /* mapped: pages of its mapping (maplen_of) */
    uint32_t host;      /* nested: the group whose slot holds it */
  };
  union {
    uint32_t hdr_set; /* mapped: its header records (ms->hset), 0 = none */
    uint32_t top;     /* else: the mapped group holding it; NONE for
                         donated memory (never unmapped); top_of */
  };
  uint32_t mem_lo;      /* the group (struct group), in units: group_mem */
  uint32_t mem_hi : 11; /* user space lies below 2^47 (sim/kernel.h) */
  uint32_t last_idx : 5, active_idx : 5; /* at most 32 slots (meta.h:28) */
  uint32_t sizeclass : 6;                /* meta.h:30 */
  uint32_t freeable : 1, in_use : 1;
  uint32_t has_ext : 1; /* which of hdr_nat and hdr_ext holds */
  uint32_t mapped : 1;  /* a mapping of its own (maplen != 0): its own top */
} mmeta_t;
_Static_assert(sizeof(mmeta_t) == 40, "a group record stays 40 bytes");
_Static_assert(SIM_KERNEL_TASK_SIZE_BITS <= 32 + 11 + 4,
               "a group's address in units fits mem_lo and mem_hi");

static inline sim_addr_t group_mem(const mmeta_t *g) {
  return ((sim_addr_t)g->mem_hi << 32 | g->mem_lo) * UNIT;
}

/* a is UNIT-aligned: a mapping, a slot start plus whole units (enframe), or
 * a donated gap rounded up to a unit (donate). */
static inline void set_group_mem(mmeta_t *g, sim_addr_t a) {
  assert(a % UNIT == 0);
  g->mem_lo = (uint32_t)(a / UNIT);
  g->mem_hi = (uint32_t)(a / UNIT >> 32) & 0x7ffu;
}

/* meta->maplen: pages of its own mapping, 0 for a group in a slot or in
 * donated memory. */
static inline uint32_t maplen_of(const mmeta_t *g) {
  return g->mapped ? g->map_pages : 0;
}

static inline void set_maplen(mmeta_t *g, uint32_t pages) {
  assert(pages != 0);
  g->mapped = 1;
  g->map_pages = pages;
}

/* A group's 16-bit slot fields, each as far as it is read: of the field at
 * p-2 only the low byte is read (enframe's offset cycling, meta.h:204:
 * & 255) and whether it is zero (whether a dead group's header bytes are
 * kept, leave_headers).  On the free list, hi is the next free index. */
typedef struct hext_s {
  uint8_t  lo[32]; /* slot i's field, low byte */
  uint32_t hi;     /* bit i: slot i's field's high byte != 0 */
} hext_t;

/* Header bytes.  enframe decides where an object starts in its slot from
 * the three bytes before the slot (meta.h:204: p[-3] and the 16-bit field
 * at p-2), which hold whatever was last written there.  A group keeps its
 * slots' header bytes in its record (hdr_seen, and hdr_nat or hdr_ext); when
 * a nested group dies, they stay in its host's memory, so they go into a record
 * per address, which the next group with a slot there takes back.
 * Bytes the program wrote, and the allocator's other writes into the
 * middle of a slot (an offset object's own header, end markers), are not
 * kept: they read as zero, as memory fresh from mmap does (the stated
 * approximation).  A mapping's records go when it is unmapped.
 *
 * Each mapping keeps its records in a set of its own (the donated memory,
 * never unmapped, in one more), so unmapping drops them at once and a
 * lookup searches that mapping's only.  A record is one 4-byte entry: the
 * address's distance from the mapping's start in units in the low
 * HDR_REL_BITS bits (slot starts are UNIT-aligned and lie past the group's
 * header, so 0 means empty), the field as far as it is read (its low byte,
 * and one bit for a nonzero high byte), and whether the byte is nonzero.
 * The distance fits: a mapping with records is a group's (only a slot of a
 * group holds a nested group, v1.2.3 malloc.c:260-261), whose storage stays
 * below 65536 units (malloc.c:200), and the donated pages are four.  (Only
 * a chunk's mapping is ever moved, by mremap, and chunks hold no records.)
 * Open addressing with linear probing, at most 7/8 full, deletion by
 * backward shift.  On the survivors benchmark (64-byte objects, 256 MiB:
 * 294,200 records at the peak, some 800 in each of 365 sets) the entries
 * peak at 1.56 MB (heaptrack), where 8-byte entries at most 3/4 full took
 * 5.9 MiB. */
typedef struct hdr_set_s {
  uint32_t *e;
  uint32_t  cap; /* entries: 0 or a power of two */
  uint32_t  n;   /* records; a free set: the next free set's index */
} hdr_set_t;
#define HDR_REL_BITS 22
#define HDR_REL_MASK ((UINT32_C(1) << HDR_REL_BITS) - 1)
#define HDR_HI_BIT   (UINT32_C(1) << 30)
#define HDR_B_BIT    (UINT32_C(1) << 31)
_Static_assert(HDR_REL_BITS + 8 <= 30, "distance and low byte below the bits");

/* A live object: its group, slot and start within the slot (one per live
 * id: on a heap of small objects this table is most of the simulator's
 * memory).  Objects start UNIT-aligned in a slot (enframe, meta.h:196-218;
 * aligned_alloc.c:33-39), so the offset is kept in units, beside the slot
 * index (a group has at most 32 slots, meta.h:27-28).  An offset of 2 GiB
 * or more, which only an alignment above 2 GiB makes (musl takes up to
 * 32 GiB, aligned_alloc.c:12), is refused.  The table packs an object in
 * 4 bytes (The object table, below) while it fits. */
typedef struct mobj_s {
  uint32_t meta;  /* NONE: not live (never happens while the id is live) */
  uint32_t place; /* slot | offset / UNIT << MOBJ_SLOT_BITS */
} mobj_t;
#define MOBJ_SLOT_BITS 5
/* The largest offset a record holds: 2^27 units, 2 GiB. */
#define MOBJ_OFF_MAX ((UINT64_C(1) << (32 - MOBJ_SLOT_BITS)) * UNIT - UNIT)

static inline unsigned mobj_slot(const mobj_t *o) {
  return o->place & ((1u << MOBJ_SLOT_BITS) - 1);
}

static inline uint64_t mobj_off(const mobj_t *o) {
  return (uint64_t)(o->place >> MOBJ_SLOT_BITS) * UNIT;
}

typedef struct musl_model_s {
  model_t       base; /* must be first */
  sim_kernel_t *kernel;
  as_status_t   fail;
  as_err_t      ferr;
  as_err_t      touch_err; /* a failed touch's, before kcheck keeps it */

  sim_idtable_t mt_tab; /* group records, indexed by number: never moved */
  mmeta_t      *mt;     /* mt_tab's base */
  uint32_t      nmt;
  uint32_t      free_meta_head; /* FIFO of zeroed metas (meta.h:109-113) */

  /* struct malloc_context (meta.h:41-58) */
  unsigned      mmap_counter;
  uint32_t      active[NCLASSES];
  uint64_t      usage_by_class[NCLASSES];
  uint8_t       unmap_seq[32], bounces[32];
  uint8_t       seq;
  sim_addr_t    brk; /* 0 = not yet; UINT64_MAX = brk failed */
  bool          brk_failed;
  sim_addr_t    avail_meta_areas;
  uint64_t      avail_meta_area_count, meta_alloc_shift;
  uint64_t      avail_meta_count;
  sim_addr_t    meta_area_tail; /* its `next` field is written when linked */
  uint64_t      meta_areas;
  sim_idtable_t area_tab; /* meta areas' addresses, in the order made */

  /* program objects: id -> mobj_t in obj_bytes bytes (obj_get, obj_put) */
  uint8_t      *obj;          /* obj_tab's base */
  sim_idtable_t obj_tab;      /* in mobj_t units */
  uint64_t      obj_len;      /* ids usable at obj_bytes */
  uint32_t      obj_bytes;    /* 4, or sizeof(mobj_t) once widened */
  uint32_t      narrow_metas; /* group numbers a 4-byte entry holds */
  uint64_t      live_bytes, live_objects;
  uint64_t      mapped_groups, mapped_chunks, mapped_bytes;

  sim_idtable_t hext_tab; /* groups' slot fields (hext_t), by
                            mmeta_t.hdr_ext; 0 unused; never moved */
  hext_t       *hext;     /* hext_tab's base */
  uint32_t      nhext, free_hext;
  sim_idtable_t hset_tab; /* mappings' header record sets (hdr_set_t),
                            by mmeta_t.hdr_set; 0 unused; never moved */
  hdr_set_t *hset;        /* hset_tab's base */
  uint32_t   nhset, free_hset;
  hdr_set_t  donated_hdr;  /* the records in donated memory */
  sim_addr_t donated_base; /* its mapping's start */
  uint64_t   live_hdr;     /* records in all sets */

  bool madv_free; /* free gives a slot's whole pages MADV_FREE (1.2.3) */

  /* threads' stack+TLS mappings by trace thread (addr 0 = none) */
  uint64_t    stack_size, thread_stack_pages;
  sim_addr_t *stack;
  size_t      stack_cap;
} musl_model_t;

#define MT(ms, i) (&(ms)->mt[i])

/* The mapped group or chunk holding group m (itself if mapped), NONE for
 * donated memory. */
static inline uint32_t top_of(const musl_model_t *ms, uint32_t m) {
  return ms->mt[m].mapped ? m : ms->mt[m].top;
}

static void set_fail(musl_model_t *ms, as_status_t rc, const char *what) {
  if (ms->fail == AS_OK) {
    ms->fail = rc;
    as_err_set(&ms->ferr, rc, "musl: %s", what);
  }
}

static bool kcheck(musl_model_t *ms, as_status_t rc, const as_err_t *e) {
  if (rc == AS_OK)
    return true;
  if (ms->fail == AS_OK) {
    ms->fail = rc;
    ms->ferr = *e;
  }
  return false;
}

static as_status_t report(musl_model_t *ms, as_err_t *err) {
  if (err != NULL)
    *err = ms->ferr;
  return ms->fail;
}

/* size_to_class (meta.h:229-238). */
static int size_to_class(uint64_t n) {
  n = (n + IB - 1) >> 4;
  if (n < 10)
    return (int)n;
  n++;
  int i = (28 - __builtin_clz((uint32_t)n)) * 4 + 8;
  if (n > size_classes[i + 1])
    i += 2;
  if (n > size_classes[i])
    i++;
  return i;
}

/* ---- Kernel helpers ----------------------------------------------------- */

/* Inline, with the error in the model (no 516-byte message on the
 * stack): the kernel's fast test is most of a touch, and about two run per
 * event (as a call, touch was 15 % of a churn replay's instructions). */
__attribute__((always_inline)) static inline void
touch(musl_model_t *ms, sim_addr_t addr, uint64_t len) {
  if (len != 0) {
    as_status_t rc = sim_kernel_touch(ms->kernel, addr, len, &ms->touch_err);
    if (rc != AS_OK)
      kcheck(ms, rc, &ms->touch_err);
  }
}

static sim_addr_t map(musl_model_t *ms, uint64_t len, sim_prot_t prot) {
  as_err_t   e;
  sim_addr_t a = 0;
  if (!kcheck(ms,
              sim_kernel_mmap(ms->kernel, len, 0, prot, SIM_OWNER_MUSL, &a, &e),
              &e))
    return 0;
  return a;
}

static void unmap(musl_model_t *ms, sim_addr_t a, uint64_t len) {
  as_err_t e;
  kcheck(ms, sim_kernel_munmap(ms->kernel, a, len, &e), &e);
}

/* ---- Header bytes ---------------------------------------------------------
 */

/* The set of top's records (top NONE: donated memory); NULL if it has
 * none and create is false, or no memory. */
static hdr_set_t *hdr_set_of(musl_model_t *ms, uint32_t top, bool create) {
  if (top == NONE)
    return &ms->donated_hdr;
  uint32_t i = ms->mt[top].hdr_set;
  if (i != 0 || !create)
    return i != 0 ? &ms->hset[i] : NULL;
  if (ms->free_hset != 0) {
    i = ms->free_hset;
    ms->free_hset = ms->hset[i].n;
  } else {
    if (ms->nhset == 0)
      ms->nhset = 1;
    if (ms->nhset == UINT32_MAX ||
        !sim_idtable_reach(&ms->hset_tab, ms->nhset)) {
      set_fail(ms, AS_ENOMEM, "out of memory for header records");
      return NULL;
    }
    i = ms->nhset++;
  }
  ms->hset[i] = (hdr_set_t){NULL, 0, 0};
  ms->mt[top].hdr_set = i;
  return &ms->hset[i];
}

/* The key of the record at a in top's set: its distance from the
 * mapping's start in units. */
static uint32_t hdr_key(const musl_model_t *ms, uint32_t top, sim_addr_t a) {
  sim_addr_t base = top == NONE ? ms->donated_base : group_mem(&ms->mt[top]);
  assert(a > base && (a - base) / UNIT <= HDR_REL_MASK);
  return (uint32_t)((a - base) / UNIT);
}

/* Fibonacci hashing of a key: the top bits of the product. */
static uint32_t hdr_home(const hdr_set_t *hs, uint32_t key) {
  return (key * UINT32_C(0x9E3779B9)) >> (32 - __builtin_ctz(hs->cap));
}

/* The entry of the record with key in hs, or -1. */
static int64_t hdr_find(const hdr_set_t *hs, uint32_t key) {
  if (hs == NULL || hs->n == 0)
    return -1;
  for (uint32_t i = hdr_home(hs, key);; i = (i + 1) & (hs->cap - 1)) {
    if (hs->e[i] == 0)
      return -1;
    if ((hs->e[i] & HDR_REL_MASK) == key)
      return i;
  }
}

/* Puts entry w (its key in no entry of hs) into a slot of hs. */
static void hdr_place(hdr_set_t *hs, uint32_t w) {
  uint32_t i = hdr_home(hs, w & HDR_REL_MASK);
  while (hs->e[i] != 0)
    i = (i + 1) & (hs->cap - 1);
  hs->e[i] = w;
}

/* Doubles hs (from 8 entries), placing its entries again. */
static bool hdr_grow(hdr_set_t *hs) {
  uint32_t  cap = hs->cap ? 2 * hs->cap : 8;
  uint32_t *old = hs->e, *e = calloc(cap, sizeof *e);
  if (e == NULL || cap == 0)
    return free(e), false;
  uint32_t old_cap = hs->cap;
  hs->e = e;
  hs->cap = cap;
  for (uint32_t i = 0; i < old_cap; i++)
    if (old[i] != 0)
      hdr_place(hs, old[i]);
  free(old);
  return true;
}

/* Records bytes A-3..A-1 of the mapping top (NONE: never unmapped), for
 * an address no record holds: leave_headers' slots are a dying group's, and
 * no record lies at a live group's slot (adopt_headers took them at its
 * birth; only a group dying there makes one, and no other group's slot
 * starts where this one's do).  So there is no lookup first: on the
 * survivors trace the lookup was 13 % of the replay's time. */
static void hdr_add(musl_model_t *ms, uint32_t top, sim_addr_t a, uint8_t b,
                    uint16_t u16) {
  hdr_set_t *hs = hdr_set_of(ms, top, true);
  if (hs != NULL && 8 * ((uint64_t)hs->n + 1) > 7 * (uint64_t)hs->cap &&
      !hdr_grow(hs))
    hs = NULL;
  if (hs == NULL) {
    set_fail(ms, AS_ENOMEM, "out of memory for header records");
    return;
  }
  hdr_place(hs, hdr_key(ms, top, a) | (uint32_t)(u16 & 255) << HDR_REL_BITS |
                    (u16 >> 8 ? HDR_HI_BIT : 0) | (b ? HDR_B_BIT : 0));
  hs->n++;
  ms->live_hdr++;
}

/* The field an entry holds, as far as it is read (hdr_off_get). */
static uint16_t hdr_u16(uint32_t w) {
  return (uint16_t)((w >> HDR_REL_BITS & 255) | (w & HDR_HI_BIT ? 256 : 0));
}

/* Removes entry i of hs, shifting back the entries after it that would be
 * out of their probe sequence's reach. */
static void hdr_remove(musl_model_t *ms, hdr_set_t *hs, uint32_t i) {
  uint32_t mask = hs->cap - 1, hole = i;
  for (uint32_t j = (i + 1) & mask; hs->e[j] != 0; j = (j + 1) & mask) {
    uint32_t home = hdr_home(hs, hs->e[j] & HDR_REL_MASK);
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      hs->e[hole] = hs->e[j];
      hole = j;
    }
  }
  hs->e[hole] = 0;
  hs->n--;
  ms->live_hdr--;
}

/* calloc's memset of [p, p + n) in top's memory: the records inside read
 * zero now. */
static void hdr_zero_range(musl_model_t *ms, uint32_t top, sim_addr_t p,
                           uint64_t n) {
  hdr_set_t *hs = hdr_set_of(ms, top, false);
  if (hs == NULL || hs->n == 0)
    return;
  for (sim_addr_t a = (p + 3 + 15) & ~(sim_addr_t)15; a <= p + n; a += 16) {
    int64_t i = hdr_find(hs, hdr_key(ms, top, a));
    if (i >= 0)
      hs->e[i] &= HDR_REL_MASK;
  }
}

/* munmap of top's mapping: its records go (a new mapping reads zero). */
static void hdr_drop(musl_model_t *ms, uint32_t top) {
  uint32_t i = ms->mt[top].hdr_set;
  if (i == 0)
    return;
  ms->live_hdr -= ms->hset[i].n;
  free(ms->hset[i].e);
  ms->hset[i] = (hdr_set_t){NULL, 0, ms->free_hset};
  ms->free_hset = i;
  ms->mt[top].hdr_set = 0;
}

/* ---- The object table ---------------------------------------------------
 * An object's place by id: 4 bytes, meta << MOBJ_NARROW_PLACE_BITS |
 * place, while its group number is below narrow_metas and its offset below
 * 256 units, else a whole mobj_t.  enframe's offsets cycle within 255
 * units (meta.h:204: & 255); only aligned_alloc moves an object further,
 * by up to the alignment less a unit (aligned_alloc.c:33-39).  That leaves
 * 2^19 group numbers: some 12 M live objects of 64 bytes (the survivors
 * benchmark's 4.2 M made 173 K groups).  alloc_meta, before it makes a
 * group number that does not fit, and mobj_set, before an offset that does
 * not, have the table rewritten to whole entries once (widen_objs). */
#define MOBJ_NARROW_OFF_BITS   8
#define MOBJ_NARROW_PLACE_BITS (MOBJ_SLOT_BITS + MOBJ_NARROW_OFF_BITS)
#define MOBJ_NARROW_METAS      (UINT32_C(1) << (32 - MOBJ_NARROW_PLACE_BITS))

/* The place in an entry of bytes bytes at p. */
static inline mobj_t obj_read(const uint8_t *p, uint32_t bytes) {
  mobj_t o;
  if (bytes == sizeof o) {
    memcpy(&o, p, sizeof o);
    return o;
  }
  uint32_t w;
  memcpy(&w, p, sizeof w);
  return (mobj_t){.meta = w >> MOBJ_NARROW_PLACE_BITS,
                  .place = w & ((UINT32_C(1) << MOBJ_NARROW_PLACE_BITS) - 1)};
}

static inline void obj_write(uint8_t *p, uint32_t bytes, mobj_t o) {
  if (bytes == sizeof o) {
    memcpy(p, &o, sizeof o);
    return;
  }
  uint32_t w = o.meta << MOBJ_NARROW_PLACE_BITS | o.place;
  memcpy(p, &w, sizeof w);
}

/* Id's place; meta NONE when it is not live. */
static mobj_t obj_get(const musl_model_t *ms, uint64_t id) {
  if (id >= ms->obj_len)
    return (mobj_t){.meta = NONE};
  return obj_read(ms->obj + id * ms->obj_bytes, ms->obj_bytes);
}

/* id < ms->obj_len (ensure_obj); o fits the width (alloc_meta, mobj_set). */
static void obj_put(musl_model_t *ms, uint64_t id, mobj_t o) {
  obj_write(ms->obj + id * ms->obj_bytes, ms->obj_bytes, o);
}

/* Makes ids [0, n) usable at the table's width (obj_tab counts whole
 * entries). */
static bool reach_objs(musl_model_t *ms, uint64_t n) {
  return sim_idtable_reach_packed(&ms->obj_tab, n, ms->obj_bytes, &ms->obj_len);
}

/* Rewrites the table from 4-byte to whole entries, in place and last first
 * (entry i's eight bytes overlap only 4-byte entries i and above, already
 * moved); false, the model failed, when out of memory. */
static bool widen_objs(musl_model_t *ms) {
  uint64_t n = ms->obj_len;
  if (n > 0 && !sim_idtable_reach(&ms->obj_tab, n - 1)) {
    set_fail(ms, AS_ENOMEM, "out of memory for objects");
    return false;
  }
  for (uint64_t i = n; i-- > 0;)
    obj_write(ms->obj + i * sizeof(mobj_t), sizeof(mobj_t),
              obj_read(ms->obj + i * sizeof(uint32_t), sizeof(uint32_t)));
  ms->obj_bytes = sizeof(mobj_t);
  ms->obj_len = ms->obj_tab.len;
  return true;
}

/* ---- Meta records and areas --------------------------------------------- */

/* The active lists and the free-meta queue: circular, a record's next and
 * prev point to itself when it is alone (meta.h:75-107). */
static void queue(musl_model_t *ms, uint32_t *head, uint32_t m) {
  if (*head != NONE) {
    uint32_t h = *head;
    MT(ms, m)->next = h;
    MT(ms, m)->prev = MT(ms, h)->prev;
    MT(ms, MT(ms, m)->prev)->next = m;
    MT(ms, h)->prev = m;
  } else {
    MT(ms, m)->prev = MT(ms, m)->next = m;
    *head = m;
  }
}

static void dequeue(musl_model_t *ms, uint32_t *head, uint32_t m) {
  mmeta_t *g = MT(ms, m);
  if (g->next != m) {
    MT(ms, g->prev)->next = g->next;
    MT(ms, g->next)->prev = g->prev;
    if (*head == m)
      *head = g->next;
  } else {
    *head = NONE;
  }
  g->prev = g->next = NONE;
}

/* A fresh meta area page (malloc.c:56-106): on the break while brk works
 * (the first time with a PROT_NONE guard page below it), else from a
 * PROT_NONE mapping of 2 << shift pages, one page made writable at a
 * time. */
static bool new_meta_area(musl_model_t *ms) {
  as_err_t e;
  bool     need_unprotect = true;
  if (ms->avail_meta_area_count == 0 && !ms->brk_failed) {
    sim_addr_t nb = ms->brk + PGSZ;
    bool       guard = false;
    if (ms->brk == 0) {
      guard = true;
      ms->brk = sim_kernel_brk_current(ms->kernel);
      ms->brk += -ms->brk & (PGSZ - 1);
      nb = ms->brk + 2 * PGSZ;
    }
    if (sim_kernel_brk(ms->kernel, nb, &e) != AS_OK) {
      ms->brk_failed = true;
    } else {
      if (guard &&
          !kcheck(ms,
                  sim_kernel_mmap_fixed(ms->kernel, ms->brk, PGSZ,
                                        SIM_PROT_NONE, SIM_OWNER_MUSL, &e),
                  &e))
        return false;
      ms->brk = nb;
      ms->avail_meta_areas = nb - PGSZ;
      ms->avail_meta_area_count = 1;
      need_unprotect = false;
    }
  }
  if (ms->avail_meta_area_count == 0) {
    uint64_t   n = UINT64_C(2) << ms->meta_alloc_shift;
    sim_addr_t p = map(ms, n * PGSZ, SIM_PROT_NONE);
    if (p == 0)
      return false;
    ms->avail_meta_areas = p + PGSZ;
    ms->avail_meta_area_count = n - 1;
    ms->meta_alloc_shift++;
  }
  sim_addr_t p = ms->avail_meta_areas;
  if (need_unprotect &&
      !kcheck(ms, sim_kernel_mprotect(ms->kernel, p, PGSZ, SIM_PROT_RW, &e),
              &e))
    return false;
  ms->avail_meta_area_count--;
  ms->avail_meta_areas = p + PGSZ;
  if (ms->meta_area_tail != 0)
    touch(ms, ms->meta_area_tail + 8, 8); /* the old tail's next */
  ms->meta_area_tail = p;
  touch(ms, p, AREA_HDR_BYTES); /* check, next, nslots */
  if (!sim_idtable_reach(&ms->area_tab, ms->meta_areas)) {
    set_fail(ms, AS_ENOMEM, "out of memory for meta areas");
    return false;
  }
  ((sim_addr_t *)sim_idtable_base(&ms->area_tab))[ms->meta_areas++] = p;
  ms->avail_meta_count = METAS_PER_AREA;
  return true;
}

/* Where record m lives: alloc_meta takes records 1, 2, ... in order from
 * the areas, each area's METAS_PER_AREA in turn (malloc.c:104-109). */
static sim_addr_t meta_addr(const musl_model_t *ms, uint32_t m) {
  const sim_addr_t *area = sim_idtable_base(&ms->area_tab);
  return area[(m - 1) / METAS_PER_AREA] + AREA_HDR_BYTES +
         (sim_addr_t)((m - 1) % METAS_PER_AREA) * META_BYTES;
}

/* alloc_meta (malloc.c:42-112): a queued free record first, else the next
 * one of the current area. */
static uint32_t alloc_meta(musl_model_t *ms) {
  uint32_t m = ms->free_meta_head;
  if (m != NONE) {
    dequeue(ms, &ms->free_meta_head, m);
  } else {
    if (ms->avail_meta_count == 0 && !new_meta_area(ms))
      return NONE;
    if (ms->nmt == UINT32_MAX) {
      set_fail(ms, AS_ENOMEM, "too many groups");
      return NONE;
    }
    if (!sim_idtable_reach(&ms->mt_tab, ms->nmt)) {
      set_fail(ms, AS_ENOMEM, "out of memory for groups");
      return NONE;
    }
    if (ms->nmt >= ms->narrow_metas && ms->obj_bytes < sizeof(mobj_t) &&
        !widen_objs(ms))
      return NONE;
    m = ms->nmt++;
    ms->avail_meta_count--;
  }
  mmeta_t *g = MT(ms, m);
  memset(g, 0, sizeof *g);
  g->in_use = true;
  touch(ms, meta_addr(ms, m), META_BYTES);
  return m;
}

/* free_meta (meta.h:109-113): zeroed, queued at the tail. */
static void free_meta(musl_model_t *ms, uint32_t m) {
  if (MT(ms, m)->has_ext) {
    uint32_t e = MT(ms, m)->hdr_ext;
    ms->hext[e].hi = ms->free_hext;
    ms->free_hext = e;
  }
  memset(MT(ms, m), 0, sizeof *MT(ms, m));
  queue(ms, &ms->free_meta_head, m);
}

/* ---- Slots (enframe) ---------------------------------------------------- */

/* get_stride (meta.h:175-182). */
static uint64_t get_stride(const mmeta_t *g) {
  if (!g->last_idx && g->mapped)
    return (uint64_t)g->map_pages * 4096 - UNIT;
  return (uint64_t)UNIT * size_classes[g->sizeclass];
}

static sim_addr_t slot_start(const mmeta_t *g, unsigned idx) {
  return group_mem(g) + UNIT + get_stride(g) * idx;
}

/* What enframe writes in slot i's 16-bit field when the object starts at
 * the slot's start: the slot's offset from the group's first slot in
 * units (meta.h:213, as uint16_t).  Most fields hold this or 0 (memory
 * fresh from mmap), which hdr_nat tells apart in a bit. */
static uint16_t hdr_natural(const mmeta_t *g, unsigned i) {
  return (uint16_t)(get_stride(g) * i / UNIT);
}

/* Slot i's field, with the same low byte and zero-ness as was set. */
static uint16_t hdr_off_get(const musl_model_t *ms, const mmeta_t *g,
                            unsigned i) {
  if (g->has_ext) {
    const hext_t *x = &ms->hext[g->hdr_ext];
    return (uint16_t)(x->lo[i] | ((x->hi >> i) & 1u) << 8);
  }
  return (g->hdr_nat >> i) & 1 ? hdr_natural(g, i) : 0;
}

/* Gives g its own hext_t, holding what hdr_nat says; false without
 * memory. */
static bool hdr_extend(musl_model_t *ms, mmeta_t *g) {
  uint32_t e = ms->free_hext;
  if (e != 0) {
    ms->free_hext = ms->hext[e].hi;
  } else {
    if (ms->nhext == 0)
      ms->nhext = 1;
    if (ms->nhext == UINT32_MAX || !sim_idtable_reach(&ms->hext_tab, ms->nhext))
      return false;
    e = ms->nhext++;
  }
  hext_t *x = &ms->hext[e];
  *x = (hext_t){.hi = 0};
  for (uint32_t nat = g->hdr_nat; nat != 0; nat &= nat - 1) {
    unsigned i = (unsigned)__builtin_ctz(nat);
    uint16_t v = hdr_natural(g, i);
    x->lo[i] = (uint8_t)v;
    x->hi |= (uint32_t)(v >> 8 != 0) << i;
  }
  g->hdr_ext = e;
  g->has_ext = 1;
  return true;
}

/* Sets slot i's field to v in g's hext_t, giving g one first. */
static void hdr_ext_set(musl_model_t *ms, mmeta_t *g, unsigned i, uint16_t v) {
  if (!g->has_ext && !hdr_extend(ms, g)) {
    set_fail(ms, AS_ENOMEM, "out of memory for slot headers");
    return;
  }
  hext_t *x = &ms->hext[g->hdr_ext];
  x->lo[i] = (uint8_t)v;
  x->hi = v >> 8 ? x->hi | 1u << i : x->hi & ~(1u << i);
}

/* A field as far as it is read: its low byte and whether it is zero. */
static uint16_t hdr_as_read(uint16_t v) {
  return (uint16_t)((v & 255) | (v >> 8 ? 256 : 0));
}

/* Sets slot i's field to a value read as v is (hdr_as_read). */
static inline void hdr_off_set(musl_model_t *ms, mmeta_t *g, unsigned i,
                               uint16_t v) {
  if (!g->has_ext &&
      (v == 0 || hdr_as_read(v) == hdr_as_read(hdr_natural(g, i))))
    g->hdr_nat = v ? g->hdr_nat | 1u << i : g->hdr_nat & ~(1u << i);
  else
    hdr_ext_set(ms, g, i, v);
}

/* hdr_off_set of the slot's own offset, which the caller knows v is: no
 * hdr_natural to compare with. */
static inline void hdr_off_set_natural(musl_model_t *ms, mmeta_t *g, unsigned i,
                                       uint16_t v) {
  if (!g->has_ext)
    g->hdr_nat |= 1u << i;
  else
    hdr_ext_set(ms, g, i, v);
}

/* set_size (meta.h:184-194): a zero byte after the object, and a 32-bit
 * count at the slot's end when 5 or more bytes are left over; p[-3] keeps
 * the slot index and gets the reserved count (at most 5) above it. */
/* (enframe writes the same bytes its own way, merging them with the
 * header and the program's writes.) */
static void set_size(musl_model_t *ms, sim_addr_t p, sim_addr_t end,
                     uint64_t n) {
  uint64_t reserved = end - p - n;
  if (reserved)
    touch(ms, end - reserved, 1);
  if (reserved >= 5)
    touch(ms, end - 5, 5);
  touch(ms, p - 3, 1);
}

/* enframe (meta.h:196-227): where the object starts in the slot cycles on
 * reuse -- one unit past the last start the slot's header records, or the
 * mmap counter for a header that reads zero -- within the slack. */
static uint32_t enframe(musl_model_t *ms, uint32_t m, unsigned idx, uint64_t n,
                        unsigned ctr, bool written) {
  mmeta_t   *g = MT(ms, m);
  uint64_t   stride = get_stride(g);
  uint64_t   slack = (stride - IB - n) / UNIT;
  sim_addr_t p = slot_start(g, idx);
  sim_addr_t end = p + stride - IB;
  uint32_t   bit = 1u << idx;
  uint64_t   off =
      ((g->hdr_seen & bit) ? (uint8_t)hdr_off_get(ms, g, idx) + 1u : ctr) & 255;
  if (off > slack) {
    uint64_t mk = slack;
    mk |= mk >> 1;
    mk |= mk >> 2;
    mk |= mk >> 4;
    off &= mk;
    if (off > slack)
      off -= slack + 1;
  }
  uint64_t reserved = end - p - UNIT * off - n;
  if (off) { /* the offset kept in the slot's own header */
    touch(ms, p - 4, 4);
    g->hdr_seen |= bit;
    hdr_off_set(ms, g, idx, (uint16_t)off);
    p += UNIT * off;
  } else { /* p[-3] = idx + (reserved, at most 5) << 5 */
    g->hdr_seen = idx || reserved ? g->hdr_seen | bit : g->hdr_seen & ~bit;
    hdr_off_set_natural(ms, g, idx,
                        (uint16_t)((p - (group_mem(g) + UNIT)) / UNIT));
  }
  /* The header before the object, the program's bytes if it writes them,
   * and set_size's zero byte after them, as one write where they meet. */
  if (written) {
    sim_addr_t last = p + n + (reserved ? 1 : 0); /* past the zero byte */
    /* the count at the slot's end: one touch with the rest when no page
     * lies between them (the same pages, in the same order) */
    if (reserved >= 5 && ((end - 5) >> 12) <= ((last - 1) >> 12) + 1) {
      touch(ms, p - 4, end - (p - 4));
      return (uint32_t)(UNIT * off);
    }
    touch(ms, p - 4, last - (p - 4));
  } else {
    touch(ms, p - 4, 4);
    if (reserved)
      touch(ms, p + n, 1);
  }
  if (reserved >= 5)
    touch(ms, end - 5, 5);
  return (uint32_t)(UNIT * off);
}

/* A nested group is born in a slot of its host: its slots' header bytes
 * are whatever a group that died there left (hdr_t records, taken back). */
static void adopt_headers(musl_model_t *ms, uint32_t m) {
  mmeta_t   *g = MT(ms, m);
  uint32_t   top = top_of(ms, m);
  hdr_set_t *hs = hdr_set_of(ms, top, false);
  for (unsigned i = 0; hs != NULL && hs->n != 0 && i <= g->last_idx; i++) {
    int64_t r = hdr_find(hs, hdr_key(ms, top, slot_start(g, i)));
    if (r < 0)
      continue;
    if (hs->e[r] & HDR_B_BIT)
      g->hdr_seen |= 1u << i;
    hdr_off_set(ms, g, i, hdr_u16(hs->e[r]));
    hdr_remove(ms, hs, (uint32_t)r);
  }
}

/* A nested group dies: its slots' header bytes stay in the host's memory. */
static void leave_headers(musl_model_t *ms, uint32_t m) {
  const mmeta_t *g = MT(ms, m);
  for (unsigned i = 0; i <= g->last_idx; i++)
    if ((g->hdr_seen >> i) & 1 || hdr_off_get(ms, g, i))
      hdr_add(ms, top_of(ms, m), slot_start(g, i),
              (g->hdr_seen >> i) & 1 ? 255 : 0, hdr_off_get(ms, g, i));
}

/* ---- Groups and slots (allocation) -------------------------------------- */

/* Bounce counters (meta.h:249-286): a class that unmaps a group and maps
 * one again within 10 steps of seq bounces. */
static void step_seq(musl_model_t *ms) {
  if (ms->seq == 255) {
    memset(ms->unmap_seq, 0, sizeof ms->unmap_seq);
    ms->seq = 1;
  } else {
    ms->seq++;
  }
}

static void record_seq(musl_model_t *ms, int sc) {
  if ((unsigned)sc - 7u < 32)
    ms->unmap_seq[sc - 7] = ms->seq;
}

static void account_bounce(musl_model_t *ms, int sc) {
  if ((unsigned)sc - 7u < 32) {
    int seq = ms->unmap_seq[sc - 7];
    if (seq && ms->seq - seq < 10) {
      if (ms->bounces[sc - 7] + 1 < 100)
        ms->bounces[sc - 7]++;
      else
        ms->bounces[sc - 7] = 150;
    }
  }
}

static void decay_bounces(musl_model_t *ms, int sc) {
  if ((unsigned)sc - 7u < 32 && ms->bounces[sc - 7])
    ms->bounces[sc - 7]--;
}

static bool is_bouncing(const musl_model_t *ms, int sc) {
  return (unsigned)sc - 7u < 32 && ms->bounces[sc - 7] >= 100;
}

/* activate_group (meta.h:115-122). */
static uint32_t activate_group(musl_model_t *ms, uint32_t m) {
  mmeta_t *g = MT(ms, m);
  uint32_t act = (2u << g->active_idx) - 1;
  uint32_t mask = g->freed_mask;
  g->freed_mask = mask & ~act;
  return g->avail_mask = mask & act;
}

/* try_avail (malloc.c:114-170). */
static uint32_t try_avail(musl_model_t *ms, int sc) {
  uint32_t *pm = &ms->active[sc];
  uint32_t  m = *pm;
  if (m == NONE)
    return 0;
  uint32_t mask = MT(ms, m)->avail_mask;
  if (!mask) {
    if (!MT(ms, m)->freed_mask) {
      dequeue(ms, pm, m);
      m = *pm;
      if (m == NONE)
        return 0;
    } else {
      m = MT(ms, m)->next;
      *pm = m;
    }
    mask = MT(ms, m)->freed_mask;
    /* skip a fully-free group unless it is the only one */
    if (mask == (2u << MT(ms, m)->last_idx) - 1 && MT(ms, m)->freeable) {
      m = MT(ms, m)->next;
      *pm = m;
      mask = MT(ms, m)->freed_mask;
    }
    /* activate more slots only as a last resort: it dirties pages */
    if (!(mask & ((2u << MT(ms, m)->active_idx) - 1))) {
      if (MT(ms, m)->next != m) {
        m = MT(ms, m)->next;
        *pm = m;
      } else {
        mmeta_t *g = MT(ms, m);
        int      cnt = g->active_idx + 2;
        int      size = size_classes[g->sizeclass] * UNIT;
        int      span = UNIT + size * cnt;
        while ((span ^ (span + size - 1)) < 4096) {
          cnt++;
          span += size;
        }
        if (cnt > g->last_idx + 1)
          cnt = g->last_idx + 1;
        g->active_idx = (uint32_t)(cnt - 1) & 31u;
        touch(ms, group_mem(g) + 8, 1);
      }
    }
    mask = activate_group(ms, m);
    decay_bounces(ms, MT(ms, m)->sizeclass);
  }
  uint32_t first = mask & -mask;
  MT(ms, m)->avail_mask = mask - first;
  return first;
}

static int alloc_slot(musl_model_t *ms, int sc, uint64_t req);

/* alloc_group (malloc.c:174-284). */
static uint32_t alloc_group(musl_model_t *ms, int sc, uint64_t req) {
  uint64_t size = (uint64_t)UNIT * size_classes[sc];
  int      i = 0;
  uint64_t cnt;
  int64_t  active_idx;
  uint32_t m = alloc_meta(ms);
  if (m == NONE)
    return NONE;
  uint64_t   usage = ms->usage_by_class[sc];
  sim_addr_t p;
  uint32_t   maplen = 0, host = NONE;
  if (sc < 9) {
    while (i < 2 && 4u * small_cnt_tab[sc][i] > usage)
      i++;
    cnt = small_cnt_tab[sc][i];
  } else {
    /* the largest count that fits a power of two, halved while the class
     * has few slots yet */
    cnt = med_cnt_tab[sc & 3];
    while (!(cnt & 1) && 4 * cnt > usage)
      cnt >>= 1;
    while (size * cnt >= 65536 * UNIT)
      cnt >>= 1;
  }
  if (cnt == 1 && size * cnt + UNIT <= PGSZ / 2)
    cnt = 2;
  if (size * cnt + UNIT > PGSZ / 2) {
    /* whole pages: the bounce counters decide how eagerly */
    bool nosmall = is_bouncing(ms, sc);
    account_bounce(ms, sc);
    step_seq(ms);
    if (!(sc & 1) && sc < 32)
      usage += ms->usage_by_class[sc + 1];
    if (4 * cnt > usage && !nosmall) {
      if ((sc & 3) == 1 && size * cnt > 8 * PGSZ)
        cnt = 2;
      else if ((sc & 3) == 2 && size * cnt > 4 * PGSZ)
        cnt = 3;
      else if ((sc & 3) == 0 && size * cnt > 8 * PGSZ)
        cnt = 3;
      else if ((sc & 3) == 0 && size * cnt > 2 * PGSZ)
        cnt = 5;
    }
    uint64_t needed = size * cnt + UNIT;
    needed += -needed & (PGSZ - 1);
    /* an individually mapped chunk of the request's size when usage is
     * low and it saves memory or avoids eager slots (240-247) */
    if (!nosmall && cnt <= 7) {
      req += IB + UNIT;
      req += -req & (PGSZ - 1);
      if (req < size + UNIT || (req >= 4 * PGSZ && 2 * cnt > usage)) {
        cnt = 1;
        needed = req;
      }
    }
    p = map(ms, needed, SIM_PROT_RW);
    if (p == 0) {
      free_meta(ms, m);
      return NONE;
    }
    maplen = (uint32_t)(needed >> 12);
    ms->mmap_counter++;
    ms->mapped_groups++;
    ms->mapped_bytes += needed;
    active_idx = (int64_t)((4096 - UNIT) / size) - 1;
    if (active_idx > (int64_t)cnt - 1)
      active_idx = (int64_t)cnt - 1;
    if (active_idx < 0)
      active_idx = 0;
  } else {
    /* nested: the group is one slot of a larger class (259-273) */
    int j = size_to_class(UNIT + cnt * size - IB);
    int idx = alloc_slot(ms, j, UNIT + cnt * size - IB);
    if (idx < 0) {
      free_meta(ms, m);
      return NONE;
    }
    host = ms->active[j];
    uint32_t off =
        enframe(ms, host, (unsigned)idx, (uint64_t)UNIT * size_classes[j] - IB,
                ms->mmap_counter, false);
    p = slot_start(MT(ms, host), (unsigned)idx) + off;
    /* p[-3] |= 6 << 5: a group lives here (the header reads nonzero) */
    MT(ms, host)->hdr_seen |= 1u << idx;
    /* p[UNIT+i*size-4] = 0 for i = 0..cnt: a byte in every slot */
    touch(ms, p + UNIT - 4, cnt * size + 1);
    active_idx = (int64_t)cnt - 1;
  }
  ms->usage_by_class[sc] += cnt;
  mmeta_t *g = MT(ms, m);
  g->avail_mask = (2u << active_idx) - 1;
  g->freed_mask = (uint32_t)((2u << (cnt - 1)) - 1) - g->avail_mask;
  set_group_mem(g, p);
  g->active_idx = (uint32_t)active_idx & 31u;
  g->last_idx = (uint32_t)(cnt - 1) & 31u;
  g->freeable = 1;
  g->sizeclass = (uint32_t)sc & 63u;
  if (maplen) {
    set_maplen(g, maplen);
  } else {
    g->host = host;
    g->top = top_of(ms, host);
  }
  touch(ms, p, 9); /* the group header: meta pointer, active_idx */
  if (!maplen)
    adopt_headers(ms, m);
  return m;
}

/* alloc_slot (malloc.c:286-297). */
static int alloc_slot(musl_model_t *ms, int sc, uint64_t req) {
  uint32_t first = try_avail(ms, sc);
  if (first)
    return __builtin_ctz(first);
  uint32_t m = alloc_group(ms, sc, req);
  if (m == NONE)
    return -1;
  MT(ms, m)->avail_mask--;
  queue(ms, &ms->active[sc], m);
  return 0;
}

/* ---- Freeing ------------------------------------------------------------ */

typedef struct mapinfo_s {
  sim_addr_t base;
  uint64_t   len;
  bool       chunk; /* an individually mapped chunk, not a group */
} mapinfo_t;

static mapinfo_t nontrivial_free(musl_model_t *ms, uint32_t m, unsigned i);

/* okay_to_free (free.c:38-70). */
static bool okay_to_free(const musl_model_t *ms, uint32_t m) {
  const mmeta_t *g = &ms->mt[m];
  int            sc = g->sizeclass;
  if (!g->freeable)
    return false;
  if (sc >= NCLASSES || get_stride(g) < (uint64_t)UNIT * size_classes[sc])
    return true; /* individual maps */
  if (!g->mapped)
    return true; /* nested groups */
  if (g->next != m)
    return true; /* another non-full group in the class */
  if (!is_bouncing(ms, sc))
    return true;
  uint64_t cnt = (uint64_t)g->last_idx + 1;
  return 9 * cnt <= ms->usage_by_class[sc] && cnt < 20;
}

/* free_group (free.c:14-36): a mapped group is unmapped (by the caller,
 * after the lock); a nested one frees its slot in the host group. */
static mapinfo_t free_group(musl_model_t *ms, uint32_t m) {
  mapinfo_t mi = {0, 0, false};
  mmeta_t  *g = MT(ms, m);
  int       sc = g->sizeclass;
  if (sc < NCLASSES)
    ms->usage_by_class[sc] -= (uint64_t)g->last_idx + 1;
  if (g->mapped) {
    step_seq(ms);
    record_seq(ms, sc);
    hdr_drop(ms, m); /* the mapping goes: its header bytes with it */
    mi.base = group_mem(g);
    mi.len = (uint64_t)g->map_pages * 4096;
    mi.chunk = sc == SC_MAPPED;
  } else {
    uint32_t host = g->host;
    /* the host slot: the group starts in it, at most its slack along */
    unsigned idx = (unsigned)((group_mem(g) - slot_start(MT(ms, host), 0)) /
                              get_stride(MT(ms, host)));
    touch(ms, group_mem(g), 8); /* g->mem->meta = 0; the host slot's header
                                   stays */
    leave_headers(ms, m);
    mi = nontrivial_free(ms, host, idx);
  }
  free_meta(ms, m);
  return mi;
}

/* nontrivial_free (free.c:72-99). */
static mapinfo_t nontrivial_free(musl_model_t *ms, uint32_t m, unsigned i) {
  uint32_t self = 1u << i;
  int      sc = MT(ms, m)->sizeclass;
  uint32_t mask = MT(ms, m)->freed_mask | MT(ms, m)->avail_mask;
  if (mask + self == (2u << MT(ms, m)->last_idx) - 1 && okay_to_free(ms, m)) {
    if (MT(ms, m)->next != NONE) {
      bool activate_new = ms->active[sc] == m;
      dequeue(ms, &ms->active[sc], m);
      if (activate_new && ms->active[sc] != NONE)
        activate_group(ms, ms->active[sc]);
    }
    return free_group(ms, m);
  }
  if (!mask && ms->active[sc] != m) /* was full: back on the list */
    queue(ms, &ms->active[sc], m);
  MT(ms, m)->freed_mask |= self;
  return (mapinfo_t){0, 0, false};
}

/* free (free.c:101-151). */
static void musl_free_obj(musl_model_t *ms, const mobj_t *o) {
  uint32_t   m = o->meta;
  mmeta_t   *g = MT(ms, m);
  unsigned   idx = mobj_slot(o);
  uint64_t   stride = get_stride(g);
  sim_addr_t start = slot_start(g, idx);
  sim_addr_t end = start + stride - IB;
  sim_addr_t p = start + mobj_off(o);
  uint32_t   self = 1u << idx, all = (2u << g->last_idx) - 1;
  touch(ms, p - 3, 3); /* p[-3] = 255, offset field = 0 */
  if (mobj_off(o) == 0) {
    g->hdr_seen |= self;
    hdr_off_set(ms, g, idx, 0);
  }
  /* whole pages inside the slot go back lazily, unless the group is a
   * single slot about to be unmapped (1.2.3; 1.2.4 turned it off) */
  if (ms->madv_free && (((start - 1) ^ end) >= 2 * PGSZ) && g->last_idx) {
    sim_addr_t base = start + (-start & (PGSZ - 1));
    uint64_t   len = (end - base) & -(uint64_t)PGSZ;
    as_err_t   e;
    if (len &&
        !kcheck(ms,
                sim_kernel_madvise(ms->kernel, base, len, SIM_MADV_FREE, &e),
                &e))
      return;
  }
  uint32_t freed = g->freed_mask, mask = freed | g->avail_mask;
  if (freed && mask + self != all) { /* the lock-free path */
    g->freed_mask = freed + self;
    return;
  }
  mapinfo_t mi = nontrivial_free(ms, m, idx);
  if (mi.len) {
    unmap(ms, mi.base, mi.len);
    ms->mapped_bytes -= mi.len;
    if (mi.chunk)
      ms->mapped_chunks--;
    else
      ms->mapped_groups--;
  }
}

/* ---- Entry points ------------------------------------------------------- */

/* malloc (malloc.c:299-380); returns the meta, *idx and the object's
 * offset in its slot. */
static uint32_t musl_malloc(musl_model_t *ms, uint64_t n, bool written,
                            unsigned *idx, uint32_t *off) {
  uint32_t m;
  int      sc;
  if (n >= SIZE_MAX / 2 - 4096) {
    set_fail(ms, AS_ENOMEM, "request too large");
    return NONE;
  }
  if (n >= MMAP_THRESHOLD) {
    uint64_t   needed = n + IB + UNIT;
    sim_addr_t p = map(ms, needed, SIM_PROT_RW);
    if (p == 0)
      return NONE;
    step_seq(ms);
    m = alloc_meta(ms);
    if (m == NONE)
      return NONE;
    mmeta_t *g = MT(ms, m);
    set_group_mem(g, p);
    g->last_idx = 0;
    g->freeable = 1;
    g->sizeclass = SC_MAPPED;
    set_maplen(g, (uint32_t)((needed + 4095) / 4096));
    touch(ms, p, 8);
    ms->mmap_counter++;
    ms->mapped_chunks++;
    ms->mapped_bytes += (uint64_t)g->map_pages * 4096;
    *idx = 0;
    *off = enframe(ms, m, 0, n, ms->mmap_counter, written);
    return m;
  }
  sc = size_to_class(n);
  m = ms->active[sc];
  /* coarse classes while a class has no groups yet (344-354) */
  if (m == NONE && sc >= 4 && sc < 32 && sc != 6 && !(sc & 1) &&
      !ms->usage_by_class[sc]) {
    uint64_t usage = ms->usage_by_class[sc | 1];
    uint32_t odd = ms->active[sc | 1];
    if (odd == NONE || (!MT(ms, odd)->avail_mask && !MT(ms, odd)->freed_mask))
      usage += 3;
    if (usage <= 12)
      sc |= 1;
    m = ms->active[sc];
  }
  uint32_t mask = m != NONE ? MT(ms, m)->avail_mask : 0;
  uint32_t first = mask & -mask;
  if (first) {
    MT(ms, m)->avail_mask = mask - first;
    *idx = (unsigned)__builtin_ctz(first);
  } else {
    int i = alloc_slot(ms, sc, n);
    if (i < 0)
      return NONE;
    m = ms->active[sc];
    *idx = (unsigned)i;
  }
  *off = enframe(ms, m, *idx, n, ms->mmap_counter, written);
  return m;
}

/* is_allzero (malloc.c:382-387): memory fresh from mmap. */
static bool is_allzero(const mmeta_t *g) {
  return g->sizeclass >= NCLASSES ||
         get_stride(g) < (uint64_t)UNIT * size_classes[g->sizeclass];
}

/* calloc's mal0_clear (calloc.c:7-25, 33-45): the partial last page is
 * cleared, then whole pages from the end are read and cleared only if not
 * zero, until less than a page is left, which is cleared.  A page the
 * simulated kernel has resident may hold data (it is cleared: rewriting it
 * ends MADV_FREE); one never written reads as zero, every word of it read
 * (nothing written, but resident where read faults get pages of their own:
 * the kernel's zero_page off). */
static void calloc_clear(musl_model_t *ms, sim_addr_t p, uint64_t n) {
  if (n < 4096) {
    touch(ms, p, n);
    return;
  }
  sim_addr_t pp = p + n, tail = pp & 4095;
  touch(ms, pp - tail, tail);
  for (pp -= tail; pp - p >= 4096; pp -= 4096) {
    as_err_t e;
    if (sim_kernel_is_resident(ms->kernel, pp - 4096))
      touch(ms, pp - 4096, 4096);
    else
      kcheck(ms, sim_kernel_read(ms->kernel, pp - 4096, 4096, &e), &e);
  }
  touch(ms, p, pp - p);
}

/* aligned_alloc (aligned_alloc.c:5-60): malloc(len + align - 16), the
 * object moved up to the alignment inside its slot. */
static uint32_t musl_aligned(musl_model_t *ms, uint64_t align, uint64_t len,
                             unsigned *idx, uint32_t *off) {
  if (align <= UNIT)
    align = UNIT;
  uint32_t m = musl_malloc(ms, len + align - UNIT, false, idx, off);
  if (m == NONE)
    return NONE;
  mmeta_t   *g = MT(ms, m);
  sim_addr_t start = slot_start(g, *idx);
  sim_addr_t p = start + *off;
  uint64_t   adj = -p & (align - 1);
  sim_addr_t end = start + get_stride(g) - IB;
  if (adj) {
    p += adj;
    touch(ms, p - 8, 8); /* the new header (or its 32-bit offset) */
    set_size(ms, p, end, len);
    touch(ms, start - 3, 3); /* the slot's header: where the object is */
    g->hdr_seen |= 1u << *idx;
    hdr_off_set(ms, g, *idx, (uint16_t)((p - start) / UNIT));
    *off = (uint32_t)(p - start);
  } else {
    set_size(ms, p, end, len);
  }
  return m;
}

/* Records an object at offset off of slot idx of group meta, and has the
 * table widened if its 4-byte entries cannot hold the offset; false (the
 * model failed) for an offset a record cannot hold, or no memory. */
static inline bool mobj_set(musl_model_t *ms, mobj_t *o, uint32_t meta,
                            unsigned idx, uint64_t off) {
  if (off > MOBJ_OFF_MAX) {
    set_fail(ms, AS_EINVAL,
             "an object 2 GiB or more into its slot (an alignment above "
             "2 GiB) is not modelled");
    return false;
  }
  if (off % UNIT != 0 || idx >> MOBJ_SLOT_BITS) {
    set_fail(ms, AS_EINVAL, "internal: an object off its slot's units");
    return false;
  }
  o->meta = meta;
  o->place = (uint32_t)(idx | (off / UNIT) << MOBJ_SLOT_BITS);
  return o->place >> MOBJ_NARROW_PLACE_BITS == 0 ||
         ms->obj_bytes == sizeof(mobj_t) || widen_objs(ms);
}

/* realloc (realloc.c:6-51): in place when the slot has room and the new
 * size is at most one class smaller; mremap between large chunks; else
 * malloc, copy, free. */
static bool musl_realloc_obj(musl_model_t *ms, mobj_t *o, uint64_t n,
                             uint64_t prev, bool written) {
  mmeta_t   *g = MT(ms, o->meta);
  uint64_t   stride = get_stride(g);
  sim_addr_t start = slot_start(g, mobj_slot(o));
  sim_addr_t end = start + stride - IB;
  sim_addr_t p = start + mobj_off(o);
  if (n <= end - p && n < MMAP_THRESHOLD &&
      size_to_class(n) + 1 >= g->sizeclass) {
    set_size(ms, p, end, n);
    if (written && n > prev)
      touch(ms, p + prev, n - prev);
    return true;
  }
  if (g->sizeclass >= NCLASSES && n >= MMAP_THRESHOLD) {
    uint64_t   base = mobj_off(o);
    uint64_t   needed = (n + base + UNIT + IB + 4095) & -(uint64_t)4096;
    as_err_t   e;
    sim_addr_t mem = group_mem(g);
    uint64_t   had = (uint64_t)g->map_pages * 4096;
    if (had != needed &&
        !kcheck(ms, sim_kernel_mremap(ms->kernel, mem, had, needed, &mem, &e),
                &e))
      return false;
    ms->mapped_bytes = ms->mapped_bytes - had + needed;
    g = MT(ms, o->meta);
    set_group_mem(g, mem);
    set_maplen(g, (uint32_t)(needed / 4096));
    p = mem + UNIT + base;
    end = mem + UNIT + (needed - UNIT) - IB;
    touch(ms, end, 1);
    set_size(ms, p, end, n);
    if (written && n > prev)
      touch(ms, p + prev, n - prev);
    return true;
  }
  mobj_t   fresh;
  unsigned idx;
  uint32_t off;
  /* memcpy of the old bytes, then the program's growth */
  uint32_t meta = musl_malloc(ms, n, written || n <= prev, &idx, &off);
  if (meta == NONE || !mobj_set(ms, &fresh, meta, idx, off))
    return false;
  if (!written && n > prev)
    touch(ms, slot_start(MT(ms, meta), idx) + off, prev);
  musl_free_obj(ms, o);
  *o = fresh;
  return true;
}

/* __malloc_donate (donate.c:6-34): single-slot groups that are never
 * freed, largest class first, in each gap the dynamic linker found. */
static void donate(musl_model_t *ms, sim_addr_t a, uint64_t len) {
  sim_addr_t b = a + len;
  a += -a & (UNIT - 1);
  b -= b & (UNIT - 1);
  touch(ms, a, b > a ? b - a : 0); /* memset(base, 0, len) */
  for (int sc = 47; sc > 0 && b > a; sc -= 4) {
    uint64_t need = ((uint64_t)size_classes[sc] + 1) * UNIT;
    if (b - a < need)
      continue;
    uint32_t m = alloc_meta(ms);
    if (m == NONE)
      return;
    mmeta_t *g = MT(ms, m);
    g->avail_mask = 0;
    g->freed_mask = 1;
    set_group_mem(g, a);
    g->last_idx = 0;
    g->freeable = 0;
    g->sizeclass = (uint32_t)sc & 63u;
    g->top = NONE;   /* the program's own data: never unmapped */
    g->hdr_seen = 1; /* mem[UNIT-3] = 255, offset field 0 */
    queue(ms, &ms->active[sc], m);
    a += need;
  }
}

/* ---- Model interface ---------------------------------------------------- */

static bool ensure_obj(musl_model_t *ms, uint64_t id) {
  if (id < ms->obj_len || (id < SIM_IDTABLE_MAX_IDS && reach_objs(ms, id + 1)))
    return true; /* fresh entries read as meta NONE (0): not live */
  if (id >= SIM_IDTABLE_MAX_IDS)
    set_fail(ms, AS_EINVAL, "object id above 2^32");
  else
    set_fail(ms, AS_ENOMEM, "out of memory for objects");
  return false;
}

static sim_addr_t obj_addr(const musl_model_t *ms, const mobj_t *o) {
  return slot_start(&ms->mt[o->meta], mobj_slot(o)) + mobj_off(o);
}

static as_status_t ms_alloc(model_t *m, const trace_event_t *ev,
                            as_err_t *err) {
  musl_model_t *ms = (musl_model_t *)m;
  if (ms->fail != AS_OK || !ensure_obj(ms, ev->id))
    return report(ms, err);
  unsigned idx;
  uint32_t off;
  /* a malloc's payload is written with its header (enframe) */
  bool written = ev->op == TRACE_MALLOC && !(ev->flags & TRACE_FLAG_UNWRITTEN);
  uint32_t g = ev->op == TRACE_MEMALIGN
                   ? musl_aligned(ms, ev->align, ev->size, &idx, &off)
                   : musl_malloc(ms, ev->size, written, &idx, &off);
  if (g == NONE) {
    if (ms->fail == AS_OK)
      set_fail(ms, AS_ENOMEM, "out of memory");
    return report(ms, err);
  }
  mobj_t o;
  if (!mobj_set(ms, &o, g, idx, off))
    return report(ms, err);
  obj_put(ms, ev->id, o);
  ms->live_bytes += ev->size;
  ms->live_objects++;
  if (ev->op == TRACE_CALLOC) {
    if (!is_allzero(MT(ms, g))) {
      calloc_clear(ms, obj_addr(ms, &o), ev->size);
      hdr_zero_range(ms, top_of(ms, g), obj_addr(ms, &o), ev->size);
    }
  } else if (ev->op == TRACE_MEMALIGN && !(ev->flags & TRACE_FLAG_UNWRITTEN)) {
    touch(ms, obj_addr(ms, &o), ev->size);
  }
  return ms->fail != AS_OK ? report(ms, err) : AS_OK;
}

static as_status_t ms_free(model_t *m, const trace_event_t *ev, as_err_t *err) {
  musl_model_t *ms = (musl_model_t *)m;
  if (ms->fail != AS_OK)
    return report(ms, err);
  mobj_t o = obj_get(ms, ev->id);
  if (o.meta == NONE)
    return as_err_set(err, AS_EINVAL,
                      "musl: free of object %" PRIu64 " that is not live",
                      ev->id);
  obj_put(ms, ev->id, (mobj_t){.meta = NONE});
  ms->live_bytes -= ev->prev_size;
  ms->live_objects--;
  musl_free_obj(ms, &o);
  return ms->fail != AS_OK ? report(ms, err) : AS_OK;
}

static as_status_t ms_realloc(model_t *m, const trace_event_t *ev,
                              as_err_t *err) {
  musl_model_t *ms = (musl_model_t *)m;
  if (ms->fail != AS_OK || !ensure_obj(ms, ev->id))
    return report(ms, err);
  mobj_t o = obj_get(ms, ev->id);
  if (o.meta == NONE)
    return as_err_set(err, AS_EINVAL,
                      "musl: realloc of object %" PRIu64 " that is not live",
                      ev->id);
  if (!musl_realloc_obj(ms, &o, ev->size, ev->prev_size,
                        !(ev->flags & TRACE_FLAG_UNWRITTEN)))
    return report(ms, err);
  obj_put(ms, ev->id, o);
  ms->live_bytes = ms->live_bytes - ev->prev_size + ev->size;
  return ms->fail != AS_OK ? report(ms, err) : AS_OK;
}

static bool ms_locate(const model_t *m, uint64_t id, sim_addr_t *addr) {
  const musl_model_t *ms = (const musl_model_t *)m;
  mobj_t              o = obj_get(ms, id);
  if (o.meta == NONE)
    return false;
  *addr = obj_addr(ms, &o);
  return true;
}

/* malloc_usable_size of a fresh request: the slot less its 4 header bytes
 * (meta.h:159-173 returns the nominal size, but the slot is what the
 * request occupies); an individual map, the pages less the header. */
static uint64_t ms_usable_size(const model_t *m, uint64_t size,
                               uint8_t domain) {
  (void)m;
  (void)domain;
  if (size >= MMAP_THRESHOLD)
    return ((size + IB + UNIT + 4095) & -(uint64_t)4096) - UNIT - IB;
  return (uint64_t)UNIT * size_classes[size_to_class(size)] - IB;
}

static size_t ms_counters(const model_t *m, model_counter_t *out, size_t cap) {
  const musl_model_t *ms = (const musl_model_t *)m;
  uint64_t            groups = 0, nested = 0, slots = 0, bouncing = 0;
  for (uint32_t i = 1; i < ms->nmt; i++) {
    const mmeta_t *g = &ms->mt[i];
    if (!g->in_use || group_mem(g) == 0 || g->sizeclass >= NCLASSES)
      continue;
    groups++;
    nested += !g->mapped;
    slots += (uint64_t)g->last_idx + 1;
  }
  for (int sc = 7; sc < 39; sc++)
    bouncing += is_bouncing(ms, sc);
  size_t n = 0;
#define PUT(name, v, unit, help)                                               \
  n = model_counter_put(out, n, cap, "musl", name, v, unit, help)
  PUT("groups", groups, "count", "groups of slots (meta records in use)");
  PUT("nested_groups", nested, "count", "groups that live in a larger slot");
  PUT("slots", slots, "count", "slots in all groups (usage_by_class summed)");
  PUT("mapped_groups", ms->mapped_groups, "count",
      "groups with their own mapping");
  PUT("mapped_chunks", ms->mapped_chunks, "count",
      "allocations of 131052 bytes or more, each its own mapping");
  PUT("mapped_bytes", ms->mapped_bytes, "bytes", "bytes of all those mappings");
  PUT("meta_areas", ms->meta_areas, "count", "4 KiB pages of meta records");
  PUT("bouncing_classes", bouncing, "count",
      "size classes keeping their last group (bounce counter >= 100)");
  PUT("mmap_counter", ms->mmap_counter, "count",
      "mappings made so far (ctx.mmap_counter)");
  PUT("header_records", ms->live_hdr, "count",
      "slot header bytes the model remembers (enframe's offset cycling)");
#undef PUT
  return n;
}

static void ms_stats(const model_t *m, model_stats_t *out) {
  const musl_model_t *ms = (const musl_model_t *)m;
  uint64_t            slot_bytes = 0;
  for (uint32_t i = 1; i < ms->nmt; i++) {
    const mmeta_t *g = &ms->mt[i];
    if (g->in_use && group_mem(g) != 0 && g->mapped)
      slot_bytes += (uint64_t)g->map_pages * 4096;
  }
  memset(out, 0, sizeof *out);
  out->live_bytes = ms->live_bytes;
  out->live_objects = ms->live_objects;
  out->mapped_bytes = ms->mapped_bytes + ms->meta_areas * PGSZ;
  out->arenas = ms->mapped_groups + ms->mapped_chunks;
  out->free_bytes =
      slot_bytes > ms->live_bytes ? slot_bytes - ms->live_bytes : 0;
}

/* ---- Threads ------------------------------------------------------------ */

/* musl's pthread_create maps each thread's stack itself (musl 1.2.3
 * src/thread/pthread_create.c): guard = DEFAULT_GUARD_SIZE 8192
 * (pthread_impl.h:198, default_attr.c:4), size = guard + ROUND(stack size +
 * libc.tls_size + __pthread_tsd_size) (:284-286), mmapped PROT_NONE and all
 * but the guard made writable (:290-297); the TLS and struct pthread go at
 * the top (:302-309, __copy_tls, src/env/__init_tls.c:43-66) and the stack
 * starts below them (:304).  MUSL_TLS_BYTES = libc.tls_size of a static
 * program with no TLS of its own (__init_tls.c:126-131: 2 * 8 + sizeof
 * (struct pthread) 200 (measured as mapping top - pthread_self () in a
 * musl-gcc thread) + align 8); __pthread_tsd_size is 0 in a program that
 * never calls pthread_key_create (pthread_create.c:218-219, the weak
 * dummy).  The thread's frames start at the stack top, in the TLS's page.
 * The mapping goes at pthread_join (pthread_join.c:24) or, detached, at
 * exit (pthread_create.c:142-155): a trace has no join, so exit stands for
 * both. */
#define MUSL_GUARD_BYTES 8192
#define MUSL_TLS_BYTES   224
#define ROUND_PG(n)      (((n) + PGSZ - 1) & ~(uint64_t)(PGSZ - 1))

static uint64_t stack_map_bytes(uint64_t stack_size) {
  return MUSL_GUARD_BYTES + ROUND_PG(stack_size + MUSL_TLS_BYTES);
}

static void stack_unmap(musl_model_t *ms, uint32_t thread) {
  if (thread >= ms->stack_cap || ms->stack[thread] == 0)
    return;
  unmap(ms, ms->stack[thread], stack_map_bytes(ms->stack_size));
  ms->stack[thread] = 0;
}

static as_status_t ms_thread(model_t *m, const trace_event_t *ev,
                             as_err_t *err) {
  musl_model_t *ms = (musl_model_t *)m;
  if (ms->fail != AS_OK || ev->thread == 0) /* main: the process stack */
    return report(ms, err);
  stack_unmap(ms, ev->thread); /* exit, or an id started again */
  if (ev->op != TRACE_THREAD_START || ms->fail != AS_OK)
    return report(ms, err);
  as_err_t e;
  if (!kcheck(ms,
              sim_threadtab_reach((void **)&ms->stack, &ms->stack_cap,
                                  ev->thread, sizeof *ms->stack, NULL,
                                  sim_kernel_max_memory_bytes(ms->kernel), &e),
              &e))
    return report(ms, err);
  uint64_t   size = stack_map_bytes(ms->stack_size);
  sim_addr_t a = 0;
  if (!kcheck(ms,
              sim_kernel_mmap(ms->kernel, size, 0, SIM_PROT_NONE,
                              SIM_OWNER_THREAD_STACK, &a, &e),
              &e) ||
      !kcheck(ms,
              sim_kernel_mprotect(ms->kernel, a + MUSL_GUARD_BYTES,
                                  size - MUSL_GUARD_BYTES, SIM_PROT_RW, &e),
              &e))
    return report(ms, err);
  ms->stack[ev->thread] = a;
  sim_addr_t top = a + size, stacktop = top - MUSL_TLS_BYTES;
  touch(ms, stacktop, MUSL_TLS_BYTES); /* __copy_tls */
  if (ms->thread_stack_pages > 0) {
    sim_addr_t lo = ((stacktop - 1) & ~(uint64_t)(PGSZ - 1)) -
                    (ms->thread_stack_pages - 1) * PGSZ;
    touch(ms, lo, stacktop - lo); /* the thread's frames */
  }
  return report(ms, err);
}

/* The heap map: every group with its own mapping, and every chunk. */
static as_status_t ms_walk(const model_t *m, model_region_fn fn, void *user,
                           as_err_t *err) {
  const musl_model_t *ms = (const musl_model_t *)m;
  for (uint32_t i = 1; i < ms->nmt; i++) {
    const mmeta_t *g = &ms->mt[i];
    if (!g->in_use || group_mem(g) == 0)
      continue;
    uint32_t used =
        ~(g->avail_mask | g->freed_mask) & ((2u << g->last_idx) - 1);
    uint64_t       stride = get_stride(g);
    model_region_t r = {
        .addr = group_mem(g),
        .bytes = g->mapped ? (uint64_t)g->map_pages * 4096
                           : UNIT + stride * ((uint64_t)g->last_idx + 1),
        .live_objects = (uint64_t)__builtin_popcount(used),
        .live_bytes = (uint64_t)__builtin_popcount(used) * stride,
        .kind = g->sizeclass >= NCLASSES ? "chunk"
                : g->mapped              ? "group"
                                         : "nested group",
        .level = g->mapped ? 0 : 1,
        .state = used ? MODEL_REGION_LIVE : MODEL_REGION_FREE,
    };
    as_status_t rc = fn(user, &r, err);
    if (rc != AS_OK)
      return rc;
  }
  for (uint32_t t = 0; t < ms->stack_cap; t++) {
    if (ms->stack[t] == 0)
      continue;
    model_region_t r = {.addr = ms->stack[t],
                        .bytes = stack_map_bytes(ms->stack_size),
                        .kind = "thread stack",
                        .state = MODEL_REGION_LIVE};
    as_status_t    rc = fn(user, &r, err);
    if (rc != AS_OK)
      return rc;
  }
  return AS_OK;
}

static void ms_destroy(model_t *m) {
  musl_model_t *ms = (musl_model_t *)m;
  if (ms == NULL)
    return;
  for (uint32_t i = 1; i < ms->nhset && i < ms->hset_tab.len; i++)
    free(ms->hset[i].e);
  free(ms->donated_hdr.e);
  sim_idtable_free(&ms->hset_tab);
  sim_idtable_free(&ms->hext_tab);
  sim_idtable_free(&ms->mt_tab);
  sim_idtable_free(&ms->obj_tab);
  sim_idtable_free(&ms->area_tab);
  free(ms->stack);
  free(ms);
}

static as_status_t ms_create(const model_opts_t *opts, const model_ctx_t *ctx,
                             model_t **out, as_err_t *err) {
  *out = NULL;
  if (sim_kernel_page_size(ctx->kernel) != PGSZ)
    return as_err_set(err, AS_EUSAGE,
                      "musl: mallocng on x86-64 is built for 4096-byte pages "
                      "(PAGESIZE, arch/x86_64/bits/limits.h:1); use "
                      "--page-size 4096");
  uint64_t gaps[4];
  for (int k = 0; k < 4; k++) {
    gaps[k] = model_opt_u64(opts, MO_GAP_PROGRAM_HEAD + k);
    if (gaps[k] >= PGSZ)
      return as_err_set(err, AS_EUSAGE,
                        "musl: option %s must be below 4096 (a partial page)",
                        musl_options[MO_GAP_PROGRAM_HEAD + k].name);
  }
  /* the frame pages run down from the stack top's page and must stay above
   * the guard */
  uint64_t stack_size = model_opt_u64(opts, MO_STACK_SIZE);
  uint64_t frame_pages = model_opt_u64(opts, MO_THREAD_STACK_PAGES);
  if (stack_size > (UINT64_C(1) << 40) ||
      frame_pages > (stack_map_bytes(stack_size) - MUSL_GUARD_BYTES) / PGSZ)
    return as_err_set(err, AS_EUSAGE,
                      "musl: stack_size=%" PRIu64
                      " with thread_stack_pages=%" PRIu64
                      ": the stack must hold the frame pages",
                      stack_size, frame_pages);
  musl_model_t *ms = calloc(1, sizeof *ms);
  if (ms == NULL)
    return as_err_set(err, AS_ENOMEM, "musl: out of memory");
  if (sim_idtable_init(&ms->obj_tab, sizeof(mobj_t)) != AS_OK ||
      sim_idtable_init(&ms->mt_tab, sizeof *ms->mt) != AS_OK ||
      sim_idtable_init(&ms->hset_tab, sizeof *ms->hset) != AS_OK ||
      sim_idtable_init(&ms->hext_tab, sizeof *ms->hext) != AS_OK ||
      sim_idtable_init(&ms->area_tab, sizeof(sim_addr_t)) != AS_OK) {
    sim_idtable_free(&ms->obj_tab);
    sim_idtable_free(&ms->mt_tab);
    sim_idtable_free(&ms->hset_tab);
    sim_idtable_free(&ms->hext_tab);
    free(ms);
    return as_err_set(err, AS_ENOMEM, "musl: no address space for tables");
  }
  ms->obj = sim_idtable_base(&ms->obj_tab);
  ms->obj_bytes = sizeof(uint32_t);
  ms->narrow_metas = MOBJ_NARROW_METAS;
  ms->mt = sim_idtable_base(&ms->mt_tab);
  ms->hset = sim_idtable_base(&ms->hset_tab);
  ms->hext = sim_idtable_base(&ms->hext_tab);
  ms->kernel = ctx->kernel;
  ms->stack_size = stack_size;
  ms->thread_stack_pages = frame_pages;
  ms->madv_free = model_opt_i64(opts, MO_VERSION) <= 1; /* 1.2.2, 1.2.3 */
  ms->nmt = 1;                                          /* record 0 is NULL */
  /* ldso/dynlink.c:1886-1887: the program's gaps, then libc.so's.  The
   * gaps lie in data pages the program already has (owner baseline). */
  uint64_t total = gaps[0] + gaps[1] + gaps[2] + gaps[3];
  if (total > 0) {
    sim_addr_t data;
    as_err_t   e;
    if (kcheck(ms,
               sim_kernel_mmap(ms->kernel, 4 * PGSZ, 0, SIM_PROT_RW,
                               SIM_OWNER_BASELINE, &data, &e),
               &e)) {
      ms->donated_base = data;
      for (int k = 0; k < 4 && ms->fail == AS_OK; k++)
        if (gaps[k] > 0) /* a head gap ends at its page's end */
          donate(ms, data + (uint64_t)k * PGSZ + (k % 2 ? 0 : PGSZ - gaps[k]),
                 gaps[k]);
    }
  }
  if (ms->fail != AS_OK) {
    as_status_t rc = report(ms, err);
    ms_destroy(&ms->base);
    return rc;
  }
  *out = &ms->base;
  return AS_OK;
}

/* A free or realloc reads the object's group meta (its masks, stride and
 * slot headers): in a trace that frees in random order, a miss beside the
 * object table's. */
static void ms_prefetch(const model_t *m, const trace_event_t *ev) {
  const musl_model_t *ms = (const musl_model_t *)m;
  if (ev->op != TRACE_FREE && ev->op != TRACE_REALLOC)
    return;
  mobj_t o = obj_get(ms, ev->id);
  if (o.meta != NONE)
    __builtin_prefetch(MT(ms, o.meta));
}

const model_methods_t model_musl_methods = {
    .name = "musl",
    .summary = "musl 1.2.3 mallocng (Debian 12 musl-gcc): groups, nested "
               "groups, mapped chunks, bounce counters",
    .options = musl_options,
    .preload = NULL,
    .create = ms_create,
    .destroy = ms_destroy,
    .alloc = ms_alloc,
    .realloc = ms_realloc,
    .free = ms_free,
    .thread = ms_thread,
    .trim = NULL, /* musl has no malloc_trim */
    .stats = ms_stats,
    .locate = ms_locate,
    .counters = ms_counters,
    .walk = ms_walk,
    .usable_size = ms_usable_size,
    .prefetch = ms_prefetch,
};

/* ---- Introspection (models/musl.h) -------------------------------------- */

size_t musl_inspect(const model_t *m, musl_class_state_t *out, size_t cap) {
  const musl_model_t *ms = (const musl_model_t *)m;
  size_t              n = 0;
  for (int sc = 0; sc < NCLASSES && n < cap; sc++) {
    musl_class_state_t *c = &out[n];
    memset(c, 0, sizeof *c);
    c->sizeclass = sc;
    c->usage = ms->usage_by_class[sc];
    c->bounces = sc >= 7 && sc < 39 ? ms->bounces[sc - 7] : 0;
    uint32_t h = ms->active[sc], g = h;
    if (h != NONE)
      do {
        if (c->ngroups < MUSL_INSPECT_GROUPS) {
          const mmeta_t *mm = &ms->mt[g];
          c->group[c->ngroups] = (musl_group_state_t){
              mm->last_idx + 1u, mm->avail_mask, mm->freed_mask, maplen_of(mm),
              mm->active_idx};
        }
        c->ngroups++;
        g = ms->mt[g].next;
      } while (g != h);
    if (c->usage || c->ngroups || c->bounces)
      n++;
  }
  return n;
}

void musl_context(const model_t *m, musl_context_t *out) {
  const musl_model_t *ms = (const musl_model_t *)m;
  out->mmap_counter = ms->mmap_counter;
  out->seq = ms->seq;
  out->meta_areas = (uint32_t)ms->meta_areas;
  out->free_metas = 0;
  uint32_t h = ms->free_meta_head, g = h;
  if (h != NONE)
    do {
      out->free_metas++;
      g = ms->mt[g].next;
    } while (g != h);
}

bool musl_object_place(const model_t *m, uint64_t id, uint32_t *slot,
                       uint64_t *offset) {
  mobj_t o = obj_get((const musl_model_t *)m, id);
  if (o.meta == NONE)
    return false;
  *slot = mobj_slot(&o);
  *offset = mobj_off(&o);
  return true;
}

size_t musl_object_entry_bytes(const model_t *m) {
  return ((const musl_model_t *)m)->obj_bytes;
}

void musl_narrow_metas_for_tests(model_t *m, uint32_t n) {
  musl_model_t *ms = (musl_model_t *)m;
  if (n < ms->narrow_metas)
    ms->narrow_metas = n;
}
