/* sim/kernel.c -- the simulated kernel: mappings, free gaps, page residency.
 *
 * Why it exists: RSS is a count of written OS pages, so models need an
 * address space that knows which pages have been written, which are mapped
 * and with what protection, and where the next mmap lands.  It holds
 * bookkeeping only: no page has any bytes behind it.
 *
 * Three structures, each proportional to what is used, never to address
 * space (a 1 TiB PROT_NONE reservation is one tree node):
 *   - the VMA tree: mapped ranges [start, end) with prot and owner, a treap
 *     keyed by start.  Adjacent ranges with equal prot and owner are always
 *     merged, as Linux merges anonymous VMAs (mm/mmap.c vma_merge); ranges of
 *     different owners stay separate nodes because the owner is our tag.
 *   - the gap tree: the complement of the VMA tree inside [low, top), the
 *     same treap type augmented with the largest gap length in each subtree,
 *     so the top-down first-fit search of Linux's unmapped_area_topdown is
 *     one O(log n) descent.  Linux keeps one tree and augments it with the gap
 *     *before* each VMA (rb_subtree_gap, later the maple tree's gaps); a
 *     separate gap tree was chosen because it reuses the same code and makes
 *     the boundary clipping at low/top trivial.
 *   - residency chunks: a hash table keyed by addr >> 21 whose entries hold,
 *     for one 2 MiB block, bitmaps of resident, lazyfree and "fast" pages
 *     and an owner byte per page.  A chunk exists only while it holds a
 *     resident page.
 *
 * The touch fast path: a page is "fast" when it is resident, not lazyfree
 * and its VMA is RW, i.e. when a write to it changes nothing.  mprotect and
 * madvise keep the fast bits exact, so a touch whose pages are all fast
 * (the common case: a model writing into memory it wrote before) is one
 * probe of a direct-mapped chunk cache and one mask test, with no VMA
 * lookup at all.  Any other touch takes the slow path, which validates the
 * whole range against the VMA tree first (so a failed AS_EINVAL touch
 * changes nothing; only an AS_ENOMEM from the host can leave a prefix of the
 * range resident, with every counter still exact) and then applies.
 *
 * Decisions the header leaves open:
 *   - mmap with an alignment behaves like the over-map-and-trim allocators
 *     do (jemalloc pages_map, mimalloc): the gap must hold length + align -
 *     page, and the mapping is the highest aligned range in it.  glibc's
 *     new_heap over-maps 2 * HEAP_MAX_SIZE and keeps the lowest aligned
 *     part; the two agree unless the gap's end is itself aligned.
 *   - A hole in the range of mprotect or madvise is AS_EINVAL (a model bug)
 *     and changes nothing; Linux returns ENOMEM.  munmap accepts holes.
 *   - mmap_top is rounded down and brk_start up to the page size.
 *   - mremap (Linux 6.1 mm/mremap.c SYSCALL_DEFINE5(mremap)) asks the old
 *     range to lie in one node even when shrinking; Linux shrinks by
 *     munmapping the tail without a VMA lookup (do_mas_munmap), and so would
 *     accept a range over holes.  Linux's EFAULT for a range outside one VMA
 *     (vma_to_resize) is AS_EINVAL here, like every other model bug.  Two
 *     adjacent RW nodes of different owners are one Linux VMA; a range over
 *     both is refused here, and a grow of the lower one moves where Linux
 *     would also move it (the range does not end at vm_end).
 *   - A mremap move places the new range as mmap(length) without alignment
 *     would, then moves residency page by page: O(resident pages moved).
 *     The chunks and table slots the move may need are reserved first, so
 *     a host AS_ENOMEM happens before anything changes.
 *
 * Left out: file mappings, stack guard gaps, khugepaged collapse (Linux
 * 6.1.170 mm/khugepaged.c hpage_collapse_scan_pmd:1133), and
 * the PMD size of 16/64 KiB-page kernels (32 MiB / 512 MiB on arm64): the
 * header's contract is 2 MiB at every page size.
 *
 * Sections: constants and types; node pool; interval treap; residency
 * chunks; chunk operations; address-space operations; public API;
 * invariant checker.
 */
#include "kernel.h"

#include "grow.h"

#include <assert.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---- Constants and types ------------------------------------------------ */

#define CHUNK_SHIFT     SIM_KERNEL_CHUNK_SHIFT /* a chunk covers 2 MiB */
#define CHUNK_BYTES     ((sim_addr_t)1 << CHUNK_SHIFT)
#define CHUNK_WORDS     8 /* 512 bits: enough for 4 KiB pages */
#define CHUNK_MAX_PAGES (CHUNK_WORDS * 64)
/* Linux 6.1 x86-64 arch/x86/include/asm/pgtable_types.h: PMD_SIZE = 2 MiB */
#define THP_BYTES CHUNK_BYTES
/* Measured CPython 3.11 / Debian 12 layout: pymalloc's first arena was not
 * 16 KiB aligned, so it lost a pool (CPython 3.11.2 Objects/obmalloc.c:
 * 1670-1674); not 16 KiB aligned on purpose. */
#define DEFAULT_MMAP_TOP  ((sim_addr_t)0x7ffff7ff9000)
#define DEFAULT_BRK_START ((sim_addr_t)0x555555559000)
/* Linux 6.1 mm/mmap.c generic_get_unmapped_area_topdown: low_limit =
 * max(PAGE_SIZE, mmap_min_addr); mm/Kconfig DEFAULT_MMAP_MIN_ADDR 65536
 * (the x86 default; not checked against Debian's config). */
#define MMAP_MIN_ADDR ((sim_addr_t)65536)
#define NODE_SLAB     1024 /* tree nodes per pool allocation */
#define NODE_RESERVE  8    /* nodes any single operation may need */
#define SLOT_EMPTY    SIM_KERNEL_NO_BLOCK    /* UINT64_MAX: no block number */
#define CACHE_SLOTS   SIM_KERNEL_CACHE_SLOTS /* chunk cache (kernel.h) */
#define CHUNK_KEEP    256 /* released chunks kept for reuse */

typedef struct inode_s inode_t;
/* One interval [start, end) of a treap.  Invariants: start < end, both
 * page-aligned; intervals in a tree are disjoint; prio is a max-heap;
 * max_len is the largest end - start in the subtree rooted here. */
struct inode_s {
  sim_addr_t start;   /* first byte */
  sim_addr_t end;     /* one past the last byte */
  uint64_t   max_len; /* bytes: largest interval in this subtree */
  inode_t   *left;    /* intervals below start; next free node in the pool */
  inode_t   *right;   /* intervals at or above end */
  uint32_t   prio;    /* treap priority (deterministic PRNG) */
  uint8_t    prot;    /* sim_prot_t; 0 in the gap tree */
  uint8_t    owner;   /* sim_owner_t; 0 in the gap tree */
};

/* Huge-page advice on [start, end): the VMAs' VM_HUGEPAGE (huge) or
 * VM_NOHUGEPAGE (!huge) flag.  Ranges are disjoint. */
typedef struct advice_s advice_t;
struct advice_s {
  sim_addr_t start, end;
  bool       huge;
};

typedef struct itree_s itree_t;
struct itree_s {
  inode_t *root;  /* NULL when empty */
  size_t   count; /* nodes in the tree */
  inode_t *hint;  /* last node found by address; NULL after any change */
};

typedef struct slab_s slab_t;
struct slab_s {
  slab_t *next; /* all slabs, for destroy */
  inode_t nodes[NODE_SLAB];
};

typedef struct chunk_s chunk_t;
/* Residency of one 2 MiB block.  Invariants: lazy and fast are subsets of
 * resident; fast == resident & ~lazy & (pages whose VMA is RW); owner[p] is
 * the owner of page p's VMA while p is resident; nresident > 0.  fast comes
 * first, so the cache's pointer to it (sim_kernel_cache_entry_t, read by the
 * inline touch in kernel.h) converts back to the chunk (C17 6.7.2.1p15). */
struct chunk_s {
  uint64_t fast[CHUNK_WORDS];      /* a write here changes nothing */
  uint64_t resident[CHUNK_WORDS];  /* page written, counted in RSS */
  uint64_t lazy[CHUNK_WORDS];      /* resident but MADV_FREE'd */
  uint64_t key;                    /* block number: address >> 21 */
  uint32_t nresident;              /* popcount of resident */
  bool     huge;                   /* mapped by one huge PMD, never split */
  uint8_t  owner[CHUNK_MAX_PAGES]; /* sim_owner_t of each resident page */
};

/* kernel.h's inline touch reads the cache entry's fast pointer as the
 * bitmap of CHUNK_MAX_PAGES bits; chunk_find converts it back. */
_Static_assert(offsetof(chunk_t, fast) == 0, "fast must open chunk_t");

typedef struct slot_s slot_t;
struct slot_s {
  uint64_t key;   /* block number, or SLOT_EMPTY */
  chunk_t *chunk; /* its residency */
};

/* Counters are in OS pages and always equal a recount of the structures
 * (sim_kernel_check_invariants verifies it).  h, which kernel.h's inline
 * functions read, must stay the first member; its invariants are listed at
 * sim_kernel_head_t. */
struct sim_kernel_s {
  sim_kernel_head_t   h;           /* RSS, page size, chunk cache */
  sim_kernel_config_t cfg;         /* as given, with defaults filled in */
  unsigned            chunk_pages; /* pages per 2 MiB block */
  sim_addr_t          low;         /* lowest address mmap hands out */
  sim_addr_t          top;         /* mmap_top rounded down to a page */
  sim_addr_t          limit;       /* end of the user address space */
  sim_addr_t          brk_start;   /* page-aligned start of the heap */
  sim_addr_t          brk_cur;     /* current break (any byte value) */

  itree_t vmas; /* mapped ranges */
  itree_t gaps; /* free ranges inside [low, top) */

  slot_t   *slots;       /* chunk hash table, open addressing */
  uint64_t *scan_keys;   /* scratch for table scans, slot_cap entries */
  size_t    slot_cap;    /* power of two */
  size_t    slot_count;  /* chunks in the table */
  unsigned  slot_bits;   /* log2(slot_cap) */
  chunk_t  *chunk_free;  /* recycled chunks (linked through key field) */
  size_t    chunk_nfree; /* chunks on chunk_free, at most CHUNK_KEEP */

  slab_t  *slabs;      /* node pool storage */
  inode_t *node_free;  /* free nodes, linked through left */
  size_t   node_nfree; /* nodes on node_free */
  uint64_t prng;       /* xorshift64 state for treap priorities */

  advice_t *advised; /* MADV_HUGEPAGE and MADV_NOHUGEPAGE ranges */
  size_t    nadvised, advised_cap;
  bool thp_disabled; /* prctl(PR_SET_THP_DISABLE) (sim_kernel_disable_thp) */
  /* Blocks with no resident page whose page table stays: zapped while
   * mapped by PTEs (zap_pte_range frees pages, not the table; Linux 6.1
   * mm/memory.c unmap_page_range), so a fault there maps a small page.
   * Open addressing, SLOT_EMPTY free, backward-shift deletion. */
  uint64_t *tables;
  size_t    tables_cap, tables_count; /* cap: 0 or a power of two */

  uint64_t           mapped_bytes;                 /* VmSize */
  uint64_t           lazy_pages;                   /* resident lazyfree pages */
  uint64_t           owner_pages[SIM_OWNER_COUNT]; /* resident pages by owner */
  sim_kernel_calls_t calls;                        /* system calls and faults */
  sim_addr_t place_next[SIM_OWNER_COUNT]; /* sim_kernel_place_next; 0: none */
  uint64_t   budget_blocks;               /* chunks cfg.max_memory_bytes allows
                                             (SIM_KERNEL_BYTES_PER_BLOCK each);
                                             UINT64_MAX: no bound */
};

/* kernel.h's inline functions read h through a converted sim_kernel_t *. */
_Static_assert(offsetof(sim_kernel_t, h) == 0, "h must open sim_kernel_t");

static const char *prot_name(unsigned prot) {
  return prot == SIM_PROT_RW ? "RW" : "PROT_NONE";
}

/* ---- Node pool ---------------------------------------------------------- */

/* Makes sure NODE_RESERVE nodes are free, so that an operation can never
 * fail half-way through rewiring a tree. */
static as_status_t pool_reserve(sim_kernel_t *k, as_err_t *err) {
  while (k->node_nfree < NODE_RESERVE) {
    slab_t *s = malloc(sizeof *s);
    if (s == NULL) {
      return as_err_set(err, AS_ENOMEM,
                        "kernel: cannot allocate %zu bytes of VMA nodes",
                        sizeof *s);
    }
    s->next = k->slabs;
    k->slabs = s;
    for (size_t i = 0; i < NODE_SLAB; i++) {
      s->nodes[i].left = k->node_free;
      k->node_free = &s->nodes[i];
    }
    k->node_nfree += NODE_SLAB;
  }
  return AS_OK;
}

static inode_t *node_get(sim_kernel_t *k, sim_addr_t start, sim_addr_t end,
                         unsigned prot, unsigned owner) {
  inode_t *n = k->node_free;
  assert(n != NULL && "pool_reserve was not called");
  k->node_free = n->left;
  k->node_nfree--;
  /* xorshift64 (Marsaglia 2003): deterministic runs, balanced treaps. */
  k->prng ^= k->prng << 13;
  k->prng ^= k->prng >> 7;
  k->prng ^= k->prng << 17;
  n->start = start;
  n->end = end;
  n->max_len = end - start;
  n->left = NULL;
  n->right = NULL;
  n->prio = (uint32_t)(k->prng >> 32);
  n->prot = (uint8_t)prot;
  n->owner = (uint8_t)owner;
  return n;
}

static void node_put(sim_kernel_t *k, inode_t *n) {
  n->left = k->node_free;
  k->node_free = n;
  k->node_nfree++;
}

/* ---- Interval treap ----------------------------------------------------- */

static void pull(inode_t *n) {
  uint64_t m = n->end - n->start;
  if (n->left != NULL && n->left->max_len > m) {
    m = n->left->max_len;
  }
  if (n->right != NULL && n->right->max_len > m) {
    m = n->right->max_len;
  }
  n->max_len = m;
}

/* Splits t into *l (start < key) and *r (start >= key). */
static void split(inode_t *t, sim_addr_t key, inode_t **l, inode_t **r) {
  if (t == NULL) {
    *l = NULL;
    *r = NULL;
  } else if (t->start < key) {
    split(t->right, key, &t->right, r);
    pull(t);
    *l = t;
  } else {
    split(t->left, key, l, &t->left);
    pull(t);
    *r = t;
  }
}

/* Joins two treaps where every interval of a lies below every one of b. */
static inode_t *merge(inode_t *a, inode_t *b) {
  if (a == NULL) {
    return b;
  }
  if (b == NULL) {
    return a;
  }
  if (a->prio > b->prio) {
    a->right = merge(a->right, b);
    pull(a);
    return a;
  }
  b->left = merge(a, b->left);
  pull(b);
  return b;
}

static size_t subtree_size(const inode_t *t) {
  return t == NULL ? 0 : 1 + subtree_size(t->left) + subtree_size(t->right);
}

/* The interval containing addr, or NULL. */
static inode_t *itree_find(itree_t *tr, sim_addr_t addr) {
  inode_t *h = tr->hint;
  if (h != NULL && addr >= h->start && addr < h->end) {
    return h;
  }
  inode_t *t = tr->root;
  while (t != NULL) {
    if (addr < t->start) {
      t = t->left;
    } else if (addr >= t->end) {
      t = t->right;
    } else {
      tr->hint = t;
      return t;
    }
  }
  return NULL;
}

/* The lowest interval ending above addr (containing it or after it). */
static inode_t *itree_first_end_after(const itree_t *tr, sim_addr_t addr) {
  inode_t *best = NULL;
  for (inode_t *t = tr->root; t != NULL;) {
    if (t->end > addr) {
      best = t;
      t = t->left;
    } else {
      t = t->right;
    }
  }
  return best;
}

/* Classic treap insertion: descend while the priorities allow, then split
 * the subtree below -- one descent, not a split of the whole tree. */
static inode_t *insert_rec(inode_t *t, inode_t *n) {
  if (t == NULL) {
    return n;
  }
  if (n->prio > t->prio) {
    split(t, n->start, &n->left, &n->right);
    pull(n);
    return n;
  }
  if (n->start < t->start) {
    t->left = insert_rec(t->left, n);
  } else {
    t->right = insert_rec(t->right, n);
  }
  pull(t);
  return t;
}

static void itree_insert_raw(itree_t *tr, inode_t *n) {
  n->left = NULL;
  n->right = NULL;
  pull(n);
  tr->root = insert_rec(tr->root, n);
  tr->count++;
  tr->hint = NULL;
}

/* Unlinks the node starting at key from t; *out gets it. */
static inode_t *erase_rec(inode_t *t, sim_addr_t key, inode_t **out) {
  assert(t != NULL);
  if (key < t->start) {
    t->left = erase_rec(t->left, key, out);
  } else if (key > t->start) {
    t->right = erase_rec(t->right, key, out);
  } else {
    *out = t;
    return merge(t->left, t->right);
  }
  pull(t);
  return t;
}

/* Detaches and returns the interval starting exactly at start. */
static inode_t *itree_erase(itree_t *tr, sim_addr_t start) {
  inode_t *m = NULL;
  tr->root = erase_rec(tr->root, start, &m);
  m->left = NULL;
  m->right = NULL;
  pull(m);
  tr->count--;
  tr->hint = NULL;
  return m;
}

/* Recomputes max_len on the path to the node starting at key, after that
 * node was resized in place.  Resizing in place is allowed when it keeps
 * the order of starts: one descent instead of an erase and an insert. */
static void fix_path(inode_t *t, sim_addr_t key) {
  if (t == NULL) {
    return;
  }
  if (key < t->start) {
    fix_path(t->left, key);
  } else if (key > t->start) {
    fix_path(t->right, key);
  }
  pull(t);
}

/* Inserts n, absorbing neighbours that touch it and carry the same prot
 * and owner (always the case in the gap tree).  An absorbed neighbour is
 * grown in place and n goes back to the pool. */
static void itree_insert(sim_kernel_t *k, itree_t *tr, inode_t *n) {
  /* One descent finds both neighbours: the last interval starting below n
   * and the first starting above it. */
  inode_t *p = NULL, *s = NULL;
  for (inode_t *t = tr->root; t != NULL;) {
    assert(t->start != n->start);
    if (t->start < n->start) {
      p = t;
      t = t->right;
    } else {
      s = t;
      t = t->left;
    }
  }
  assert(p == NULL || p->end <= n->start);
  assert(s == NULL || s->start >= n->end);
  if (p != NULL &&
      (p->end != n->start || p->prot != n->prot || p->owner != n->owner)) {
    p = NULL;
  }
  if (s != NULL &&
      (s->start != n->end || s->prot != n->prot || s->owner != n->owner)) {
    s = NULL;
  }
  if (p != NULL) {
    sim_addr_t end = n->end;
    if (s != NULL) {
      end = s->end;
      node_put(k, itree_erase(tr, s->start));
    }
    p->end = end;
    fix_path(tr->root, p->start);
    node_put(k, n);
  } else if (s != NULL) {
    /* Lowering s's start keeps the order: [n->start, s->start) was free. */
    s->start = n->start;
    fix_path(tr->root, s->start);
    node_put(k, n);
  } else {
    itree_insert_raw(tr, n);
  }
}

/* Makes x a boundary: an interval straddling x becomes two.  Uses one
 * reserved node. */
static void itree_cut(sim_kernel_t *k, itree_t *tr, sim_addr_t x) {
  inode_t *n = itree_find(tr, x);
  if (n == NULL || n->start == x) {
    return;
  }
  sim_addr_t end = n->end;
  n->end = x;
  fix_path(tr->root, n->start);
  itree_insert_raw(tr, node_get(k, x, end, n->prot, n->owner));
}

/* Removes every part of the tree inside [a, b) and returns it as a detached
 * treap; what lies outside stays.  Uses up to two reserved nodes. */
static inode_t *itree_extract(sim_kernel_t *k, itree_t *tr, sim_addr_t a,
                              sim_addr_t b) {
  inode_t *l, *m, *r;
  inode_t *n = itree_find(tr, a);
  if (n != NULL && b <= n->end) {
    /* Within one interval (munmap of one object, mprotect of part of a
     * reservation): resize it in place, hand back a one-node treap. */
    if (a == n->start && b == n->end) {
      return itree_erase(tr, a);
    }
    sim_addr_t end = n->end;
    inode_t   *cut = node_get(k, a, b, n->prot, n->owner);
    if (a == n->start) {
      n->start = b; /* keeps the order: nothing else starts in [a, b) */
      fix_path(tr->root, b);
    } else {
      n->end = a;
      fix_path(tr->root, n->start);
      if (b < end) {
        itree_insert_raw(tr, node_get(k, b, end, n->prot, n->owner));
      }
    }
    tr->hint = NULL;
    return cut;
  }
  itree_cut(k, tr, a);
  itree_cut(k, tr, b);
  split(tr->root, a, &l, &r);
  split(r, b, &m, &r);
  tr->root = merge(l, r);
  tr->count -= subtree_size(m);
  tr->hint = NULL;
  return m;
}

/* The highest interval at least need bytes long, or NULL. */
static inode_t *itree_highest_fit(const itree_t *tr, uint64_t need) {
  inode_t *t = tr->root;
  if (t == NULL || t->max_len < need) {
    return NULL;
  }
  for (;;) {
    if (t->right != NULL && t->right->max_len >= need) {
      t = t->right;
    } else if (t->end - t->start >= need) {
      return t;
    } else {
      assert(t->left != NULL && t->left->max_len >= need);
      t = t->left;
    }
  }
}

static void free_subtree(sim_kernel_t *k, inode_t *t) {
  while (t != NULL) {
    inode_t *l = t->left, *r = t->right;
    free_subtree(k, l);
    node_put(k, t);
    t = r;
  }
}

/* ---- Residency chunks --------------------------------------------------- */

static size_t slot_hash(const sim_kernel_t *k, uint64_t key) {
  /* Fibonacci hashing: consecutive blocks spread over the table. */
  return (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - k->slot_bits));
}

static chunk_t *chunk_lookup(const sim_kernel_t *k, uint64_t key) {
  size_t mask = k->slot_cap - 1;
  for (size_t i = slot_hash(k, key);; i = (i + 1) & mask) {
    if (k->slots[i].key == key) {
      return k->slots[i].chunk;
    }
    if (k->slots[i].key == SLOT_EMPTY) {
      return NULL;
    }
  }
}

/* chunk_lookup through the direct-mapped cache of the touch path: a
 * working set of up to CACHE_SLOTS blocks (512 MiB) costs no hashing.
 * Chunks never move, so only chunk_release invalidates an entry. */
static inline chunk_t *chunk_find(sim_kernel_t *k, uint64_t key) {
  sim_kernel_cache_entry_t *e = &k->h.cache[key & (CACHE_SLOTS - 1)];
  if (e->key == key) {
    return (chunk_t *)(void *)e->fast;
  }
  chunk_t *c = chunk_lookup(k, key);
  if (c != NULL) {
    e->key = key;
    e->fast = c->fast;
  }
  return c;
}

static void slot_place(sim_kernel_t *k, uint64_t key, chunk_t *c) {
  size_t mask = k->slot_cap - 1;
  size_t i = slot_hash(k, key);
  while (k->slots[i].key != SLOT_EMPTY) {
    i = (i + 1) & mask;
  }
  k->slots[i].key = key;
  k->slots[i].chunk = c;
}

/* Rebuilds the table with 2^bits slots (load stays in [1/8, 1/2]). */
static as_status_t table_resize(sim_kernel_t *k, unsigned bits, as_err_t *err) {
  size_t    cap = (size_t)1 << bits;
  slot_t   *slots = malloc(cap * sizeof *slots);
  uint64_t *keys = malloc(cap * sizeof *keys);
  if (slots == NULL || keys == NULL) {
    free(slots);
    free(keys);
    return as_err_set(err, AS_ENOMEM,
                      "kernel: cannot grow the residency table to %zu slots",
                      cap);
  }
  for (size_t i = 0; i < cap; i++) {
    slots[i].key = SLOT_EMPTY;
    slots[i].chunk = NULL;
  }
  slot_t *old = k->slots;
  size_t  old_cap = k->slot_cap;
  k->slots = slots;
  k->slot_cap = cap;
  k->slot_bits = bits;
  free(k->scan_keys);
  k->scan_keys = keys;
  for (size_t i = 0; i < old_cap; i++) {
    if (old[i].key != SLOT_EMPTY) {
      slot_place(k, old[i].key, old[i].chunk);
    }
  }
  free(old);
  return AS_OK;
}

/* ---- Page tables left by zaps (k->tables) ------------------------------ */

static size_t table_home(const sim_kernel_t *k, uint64_t key) {
  return (size_t)(key * UINT64_C(0x9E3779B97F4A7C15)) & (k->tables_cap - 1);
}

static size_t tables_find(const sim_kernel_t *k, uint64_t key) {
  if (k->tables_cap == 0) {
    return SIZE_MAX;
  }
  for (size_t i = table_home(k, key);; i = (i + 1) & (k->tables_cap - 1)) {
    if (k->tables[i] == key) {
      return i;
    }
    if (k->tables[i] == SLOT_EMPTY) {
      return SIZE_MAX;
    }
  }
}

static void tables_place(sim_kernel_t *k, uint64_t key) {
  size_t i = table_home(k, key);
  while (k->tables[i] != SLOT_EMPTY) {
    i = (i + 1) & (k->tables_cap - 1);
  }
  k->tables[i] = key;
}

/* Records block key's page table.  Without memory for the set it is not
 * recorded, and a later fault there may map a huge page. */
static void tables_add(sim_kernel_t *k, uint64_t key) {
  if (tables_find(k, key) != SIZE_MAX) {
    return;
  }
  if ((k->tables_count + 1) * 2 > k->tables_cap) {
    size_t    cap = k->tables_cap ? 2 * k->tables_cap : 64;
    uint64_t *old = k->tables, *grown = malloc(cap * sizeof *grown);
    if (grown == NULL) {
      return;
    }
    size_t old_cap = k->tables_cap;
    for (size_t i = 0; i < cap; i++) {
      grown[i] = SLOT_EMPTY;
    }
    k->tables = grown;
    k->tables_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
      if (old[i] != SLOT_EMPTY) {
        tables_place(k, old[i]);
      }
    }
    free(old);
  }
  tables_place(k, key);
  k->tables_count++;
}

/* Forgets block key's page table (a chunk holds the block again, or its
 * mapping went); backward-shift deletion, as chunk_release does. */
static void tables_del(sim_kernel_t *k, uint64_t key) {
  size_t i = tables_find(k, key);
  if (i == SIZE_MAX) {
    return;
  }
  size_t mask = k->tables_cap - 1;
  for (size_t j = i;;) {
    j = (j + 1) & mask;
    if (k->tables[j] == SLOT_EMPTY) {
      break;
    }
    size_t h = table_home(k, k->tables[j]);
    int    stays = (i <= j) ? (h > i && h <= j) : (h > i || h <= j);
    if (!stays) {
      k->tables[i] = k->tables[j];
      i = j;
    }
  }
  k->tables[i] = SLOT_EMPTY;
  k->tables_count--;
}

/* Whether any mapping overlaps block key. */
static bool block_mapped(const sim_kernel_t *k, uint64_t key) {
  sim_addr_t     lo = key << CHUNK_SHIFT;
  const inode_t *v = itree_first_end_after(&k->vmas, lo);
  return v != NULL && v->start < lo + CHUNK_BYTES;
}

/* After [a, b) was unmapped: the page tables of its blocks that no
 * mapping overlaps any more are freed (Linux 6.1 mm/mmap.c unmap_region ->
 * free_pgtables between the neighbouring mappings). */
static void tables_unmap(sim_kernel_t *k, sim_addr_t a, sim_addr_t b) {
  if (k->tables_count == 0 || a >= b) {
    return;
  }
  uint64_t first = a >> CHUNK_SHIFT, last = (b - 1) >> CHUNK_SHIFT;
  if (last - first < k->tables_count) {
    for (uint64_t key = first; key <= last; key++) {
      if (!block_mapped(k, key)) {
        tables_del(k, key);
      }
    }
    return;
  }
  for (size_t i = 0; i < k->tables_cap;) {
    uint64_t key = k->tables[i];
    if (key != SLOT_EMPTY && key >= first && key <= last &&
        !block_mapped(k, key)) {
      tables_del(k, key); /* may shift a later key into slot i */
    } else {
      i++;
    }
  }
}

/* A new, empty chunk for block key, entered in the table. */
static as_status_t chunk_create(sim_kernel_t *k, uint64_t key, chunk_t **out,
                                as_err_t *err) {
  *out = NULL;
  if ((k->slot_count + 1) * 2 > k->slot_cap) {
    as_status_t st = table_resize(k, k->slot_bits + 1, err);
    if (st != AS_OK) {
      return st;
    }
  }
  chunk_t *c = k->chunk_free;
  if (c != NULL) {
    k->chunk_free = (chunk_t *)(uintptr_t)c->key;
    k->chunk_nfree--;
  } else if ((c = malloc(sizeof *c)) == NULL) {
    return as_err_set(err, AS_ENOMEM,
                      "kernel: cannot allocate residency for block 0x%" PRIx64,
                      key << CHUNK_SHIFT);
  }
  memset(c->resident, 0, sizeof c->resident);
  memset(c->lazy, 0, sizeof c->lazy);
  memset(c->fast, 0, sizeof c->fast);
  c->key = key;
  c->nresident = 0;
  c->huge = false;
  if (k->tables_count != 0) {
    tables_del(k, key); /* the chunk holds the block's state now */
  }
  slot_place(k, key, c);
  k->slot_count++;
  k->h.cache[key & (CACHE_SLOTS - 1)].key = key;
  k->h.cache[key & (CACHE_SLOTS - 1)].fast = c->fast;
  *out = c;
  return AS_OK;
}

/* Removes an empty chunk from the table (backward-shift deletion, so no
 * tombstones) and recycles it. */
static void chunk_release(sim_kernel_t *k, chunk_t *c) {
  assert(c->nresident == 0);
  size_t mask = k->slot_cap - 1;
  size_t i = slot_hash(k, c->key);
  while (k->slots[i].key != c->key) {
    i = (i + 1) & mask;
  }
  for (size_t j = i;;) {
    j = (j + 1) & mask;
    if (k->slots[j].key == SLOT_EMPTY) {
      break;
    }
    size_t h = slot_hash(k, k->slots[j].key);
    /* The entry at j may move to the hole at i unless its home slot h lies
     * cyclically in (i, j]. */
    int stays = (i <= j) ? (h > i && h <= j) : (h > i || h <= j);
    if (!stays) {
      k->slots[i] = k->slots[j];
      i = j;
    }
  }
  k->slots[i].key = SLOT_EMPTY;
  k->slots[i].chunk = NULL;
  k->slot_count--;
  sim_kernel_cache_entry_t *e = &k->h.cache[c->key & (CACHE_SLOTS - 1)];
  if (e->fast == c->fast) {
    e->key = SLOT_EMPTY;
    e->fast = NULL;
  }
  /* Keep a few for the next faults; memory follows the touched pages. */
  if (k->chunk_nfree < CHUNK_KEEP) {
    c->key = (uint64_t)(uintptr_t)k->chunk_free;
    k->chunk_free = c;
    k->chunk_nfree++;
  } else {
    free(c);
  }
}

/* Shrinks a table that fell below 1/8 load, after a bulk release (never
 * during one: a table scan holds scan_keys).  Best effort: a failed
 * allocation keeps the larger table. */
static void table_maybe_shrink(sim_kernel_t *k) {
  while (k->slot_bits > 6 && k->slot_count * 8 < k->slot_cap) {
    if (table_resize(k, k->slot_bits - 1, NULL) != AS_OK) {
      break;
    }
  }
}

/* ---- Chunk operations --------------------------------------------------- */

/* The number of set bits.  Without -mpopcnt (the build targets every
 * x86-64) __builtin_popcountll is a call to libgcc's __popcountdi2; this is
 * the same bit-parallel sum inline (Hacker's Delight 5-1).  A target
 * attribute with a CPU check was not taken: the callers already skip zero
 * words, so what is left is too little to pay for a dispatch. */
static inline uint64_t popcount64(uint64_t x) {
#if defined(__POPCNT__)
  return (uint64_t)__builtin_popcountll(x);
#else
  /* No bit or one: a fault or zap of a single page, most of them. */
  if ((x & (x - 1)) == 0) {
    return x != 0;
  }
  x = x - ((x >> 1) & UINT64_C(0x5555555555555555));
  x = (x & UINT64_C(0x3333333333333333)) +
      ((x >> 2) & UINT64_C(0x3333333333333333));
  x = (x + (x >> 4)) & UINT64_C(0x0f0f0f0f0f0f0f0f);
  return (x * UINT64_C(0x0101010101010101)) >> 56;
#endif
}

/* Sets mask to pages p0..p1 (inclusive) of a chunk. */
static void mask_range(uint64_t mask[CHUNK_WORDS], unsigned p0, unsigned p1) {
  for (unsigned w = 0; w < CHUNK_WORDS; w++) {
    unsigned lo = w * 64, hi = lo + 63;
    if (p1 < lo || p0 > hi) {
      mask[w] = 0;
      continue;
    }
    unsigned a = p0 > lo ? p0 - lo : 0, b = p1 < hi ? p1 - lo : 63;
    mask[w] = (~UINT64_C(0) >> (63 - (b - a))) << a;
  }
}

/* Whether pages p0..p1 of bm are all set: the touch fast path. */
static inline int bits_all(const uint64_t *bm, unsigned p0, unsigned p1) {
  unsigned w0 = p0 >> 6, w1 = p1 >> 6;
  if (w0 == w1) {
    uint64_t m = (~UINT64_C(0) >> (63 - (p1 - p0))) << (p0 & 63);
    return (bm[w0] & m) == m;
  }
  uint64_t m0 = ~UINT64_C(0) << (p0 & 63);
  if ((bm[w0] & m0) != m0) {
    return 0;
  }
  for (unsigned w = w0 + 1; w < w1; w++) {
    if (bm[w] != ~UINT64_C(0)) {
      return 0;
    }
  }
  uint64_t m = ~UINT64_C(0) >> (63 - (p1 & 63));
  return (bm[w1] & m) == m;
}

/* The length of the run of set bits of m starting at its lowest set bit
 * (m != 0): 1..64. */
static inline unsigned run_length(uint64_t m) {
  uint64_t rest = ~(m >> __builtin_ctzll(m));
  return rest == 0 ? 64 - (unsigned)__builtin_ctzll(m)
                   : (unsigned)__builtin_ctzll(rest);
}

/* Bits lo..lo+n-1 of a word (n >= 1). */
static inline uint64_t bit_run(unsigned lo, unsigned n) {
  return (~UINT64_C(0) >> (64 - n)) << lo;
}

/* Whether pages p..p+n-1 of c all have the owner of page p, compared 8
 * bytes at a time: a zap of a whole block then costs 8 compares per 64
 * pages instead of a counter update per page. */
static inline bool owners_uniform(const chunk_t *c, unsigned p, unsigned n) {
  uint8_t  o = c->owner[p];
  uint64_t pat = o * UINT64_C(0x0101010101010101);
  unsigned i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    memcpy(&x, &c->owner[p + i], sizeof x);
    if (x != pat) {
      return false;
    }
  }
  for (; i < n; i++) {
    if (c->owner[p + i] != o) {
      return false;
    }
  }
  return true;
}

/* Whether mask holds every page of a block. */
static bool mask_whole(const sim_kernel_t *k,
                       const uint64_t      mask[CHUNK_WORDS]) {
  uint64_t n = 0;
  for (unsigned w = 0; w < CHUNK_WORDS; w++) {
    n += popcount64(mask[w]);
  }
  return n == k->chunk_pages;
}

/* An operation on part of a huge PMD splits it into PTEs (Linux 6.1
 * mm/huge_memory.c __split_huge_pmd, from zap_pmd_range, madvise_free_
 * huge_pmd and change_pmd_range when the range does not cover the PMD). */
static void chunk_maybe_split(const sim_kernel_t *k, chunk_t *c,
                              const uint64_t mask[CHUNK_WORDS]) {
  if (c->huge && !mask_whole(k, mask)) {
    c->huge = false;
  }
}

/* Whether the first page of huge chunk c outside mask is mapped RW. */
static bool huge_page_outside_rw(sim_kernel_t *k, const chunk_t *c,
                                 const uint64_t mask[CHUNK_WORDS]) {
  unsigned p = 0;
  while (p < k->chunk_pages && (mask[p >> 6] >> (p & 63) & 1)) {
    p++;
  }
  sim_addr_t a = (c->key << CHUNK_SHIFT) + ((sim_addr_t)p << k->h.page_shift);
  const inode_t *v = itree_find(&k->vmas, a);
  return v != NULL && v->prot == SIM_PROT_RW;
}

/* Takes the pages of m, word w of c, off their owners' page counts, per
 * run of pages of one owner, so that zapping huge ranges costs per 64
 * pages, not per page. */
static inline void owners_drop(sim_kernel_t *k, const chunk_t *c, unsigned w,
                               uint64_t m) {
  while (m != 0) {
    unsigned bit = (unsigned)__builtin_ctzll(m), n = run_length(m);
    unsigned p = w * 64 + bit;
    if (owners_uniform(c, p, n)) {
      k->owner_pages[c->owner[p]] -= n;
    } else {
      for (unsigned i = 0; i < n; i++) {
        k->owner_pages[c->owner[p + i]]--;
      }
    }
    m &= ~bit_run(bit, n);
  }
}

/* Drops residency of the pages in mask (Linux 6.1 mm/memory.c
 * zap_pte_range: rss[mm_counter(page)]-- per zapped page, 6.1.170 :1450).
 * Owner counters are updated per run of pages of one owner, so the cost of
 * zapping huge ranges is per 64 pages, not per page.  May release c; a
 * block mapped by PTEs keeps its page table (k->tables). */
static void chunk_drop(sim_kernel_t *k, chunk_t *c,
                       const uint64_t mask[CHUNK_WORDS], bool reclaims_tables) {
  chunk_maybe_split(k, c, mask);
  uint64_t dropped = 0, lazy_dropped = 0;
  for (unsigned w = 0; w < CHUNK_WORDS; w++) {
    uint64_t m = c->resident[w] & mask[w];
    if (m == 0) {
      continue;
    }
    lazy_dropped += popcount64(m & c->lazy[w]);
    dropped += popcount64(m);
    c->resident[w] &= ~m;
    c->lazy[w] &= ~m;
    c->fast[w] &= ~m;
    owners_drop(k, c, w, m);
  }
  k->h.rss_pages -= dropped;
  k->lazy_pages -= lazy_dropped;
  c->nresident -= (uint32_t)dropped;
  if (c->nresident == 0) {
    /* An unmap over the whole block takes the table along, over part of
     * it leaves it to tables_unmap; a DONTNEED over the whole block frees
     * it on Linux 6.14+ (CONFIG_PT_RECLAIM: measured on 6.18, a zap of a
     * smaller range leaves the empty table). */
    if (!c->huge && !(reclaims_tables && mask_whole(k, mask))) {
      tables_add(k, c->key);
    }
    chunk_release(k, c);
  }
}

/* MADV_FREE: resident pages in mask become lazyfree and keep counting in
 * RSS (Linux 6.1 mm/madvise.c madvise_free_pte_range leaves MM_ANONPAGES
 * alone; 6.1.170 mm/madvise.c:595-716). */
static void chunk_mark_lazy(sim_kernel_t *k, chunk_t *c,
                            const uint64_t mask[CHUNK_WORDS]) {
  chunk_maybe_split(k, c, mask);
  for (unsigned w = 0; w < CHUNK_WORDS; w++) {
    uint64_t m = c->resident[w] & mask[w] & ~c->lazy[w];
    if (m == 0) {
      continue;
    }
    k->lazy_pages += popcount64(m);
    c->lazy[w] |= m;
    c->fast[w] &= ~m;
  }
}

typedef enum chunk_op_e {
  CHUNK_UNMAP,    /* munmap, MAP_FIXED, brk shrink */
  CHUNK_DROP,     /* reclaim of lazyfree pages (MADV_FREE under pressure) */
  CHUNK_ZAP,      /* MADV_DONTNEED */
  CHUNK_LAZY,     /* MADV_FREE */
  CHUNK_PROT_RW,  /* mprotect RW: resident non-lazy pages become fast */
  CHUNK_PROT_NONE /* mprotect PROT_NONE: no page is fast */
} chunk_op_t;

static void chunk_apply(sim_kernel_t *k, chunk_t *c, chunk_op_t op,
                        const uint64_t mask[CHUNK_WORDS]) {
  switch (op) {
  case CHUNK_UNMAP: /* a block unmapped whole loses its table with it */
  case CHUNK_DROP:
  case CHUNK_ZAP:
    chunk_drop(k, c, mask,
               op == CHUNK_UNMAP || (op == CHUNK_ZAP && k->cfg.pt_reclaim));
    break;
  case CHUNK_LAZY:
    chunk_mark_lazy(k, c, mask);
    break;
  case CHUNK_PROT_RW:
    /* A huge page lies in one mapping: RW over part of it splits it only
     * if that mapping was not RW (mprotect_fixup skips an unchanged one);
     * the pages outside the range still show the old protection. */
    if (c->huge && !mask_whole(k, mask) && !huge_page_outside_rw(k, c, mask)) {
      c->huge = false;
    }
    for (unsigned w = 0; w < CHUNK_WORDS; w++) {
      c->fast[w] |= mask[w] & c->resident[w] & ~c->lazy[w];
    }
    break;
  case CHUNK_PROT_NONE:
    chunk_maybe_split(k, c, mask);
    for (unsigned w = 0; w < CHUNK_WORDS; w++) {
      c->fast[w] &= ~mask[w];
    }
    break;
  }
}

/* How many chunk keys a walk over blocks [first, last] visits.  With fewer
 * blocks than chunks (*scan = 0) it visits every block, key first + i;
 * otherwise (*scan = 1) the chunks in range, whose keys are collected into
 * k->scan_keys first, because releasing a chunk reorders the table. */
static uint64_t keys_to_visit(sim_kernel_t *k, uint64_t first, uint64_t last,
                              int *scan) {
  *scan = last - first >= k->slot_count;
  if (!*scan) {
    return last - first + 1;
  }
  size_t nkeys = 0;
  for (size_t i = 0; i < k->slot_cap; i++) {
    uint64_t key = k->slots[i].key;
    if (key != SLOT_EMPTY && key >= first && key <= last) {
      k->scan_keys[nkeys++] = key;
    }
  }
  return nkeys;
}

/* chunk_drop (without table reclaim) of the pages of [a, b) when they lie
 * in one word of a chunk's bitmaps that keeps a resident page after it and
 * is no huge page: the zap of a page or a few that allocators returning
 * memory make nearly every time, without a mask of every word, a hash
 * lookup or a split test.  False, changing nothing, in any other case. */
static bool drop_in_word(sim_kernel_t *k, sim_addr_t a, sim_addr_t b) {
  uint64_t key = a >> CHUNK_SHIFT;
  unsigned p0 = (unsigned)((a & (CHUNK_BYTES - 1)) >> k->h.page_shift);
  unsigned p1 = (unsigned)(((b - 1) & (CHUNK_BYTES - 1)) >> k->h.page_shift);
  if (((b - 1) >> CHUNK_SHIFT) != key || (p0 >> 6) != (p1 >> 6)) {
    return false;
  }
  chunk_t *c = chunk_find(k, key);
  if (c == NULL) {
    return true; /* no page of the block is resident */
  }
  unsigned w = p0 >> 6;
  uint64_t m = c->resident[w] & bit_run(p0 & 63, p1 - p0 + 1);
  uint64_t dropped = popcount64(m);
  if (c->huge || dropped == c->nresident) {
    return false; /* a split, or a release of the chunk */
  }
  k->lazy_pages -= popcount64(m & c->lazy[w]);
  c->resident[w] &= ~m;
  c->lazy[w] &= ~m;
  c->fast[w] &= ~m;
  owners_drop(k, c, w, m);
  k->h.rss_pages -= dropped;
  c->nresident -= (uint32_t)dropped;
  return true;
}

/* Applies op to the pages of [a, b) (page-aligned) in every existing chunk.
 * Visits min(blocks in range, chunks) entries, so a terabyte-wide range
 * costs a scan of the table, not 2^19 lookups per TiB. */
static void chunks_in_range(sim_kernel_t *k, sim_addr_t a, sim_addr_t b,
                            chunk_op_t op) {
  if (a >= b || k->slot_count == 0) {
    return;
  }
  if ((op == CHUNK_ZAP || op == CHUNK_DROP) && drop_in_word(k, a, b)) {
    table_maybe_shrink(k);
    return;
  }
  uint64_t first = a >> CHUNK_SHIFT, last = (b - 1) >> CHUNK_SHIFT;
  uint64_t mask[CHUNK_WORDS];
  int      scan;
  uint64_t n = keys_to_visit(k, first, last, &scan);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t key = scan ? k->scan_keys[i] : first + i;
    chunk_t *c = chunk_lookup(k, key);
    if (c == NULL) {
      continue;
    }
    sim_addr_t lo = key << CHUNK_SHIFT, hi = lo + CHUNK_BYTES;
    lo = lo > a ? lo : a;
    hi = hi < b ? hi : b;
    mask_range(mask, (unsigned)((lo & (CHUNK_BYTES - 1)) >> k->h.page_shift),
               (unsigned)(((hi - 1) & (CHUNK_BYTES - 1)) >> k->h.page_shift));
    chunk_apply(k, c, op, mask);
  }
  table_maybe_shrink(k);
}

/* Makes room for n new chunks: table slots (so chunk_create cannot resize
 * the table, which would also replace scan_keys) and recycled chunks (so it
 * cannot fail).  Nothing observable changes. */
static as_status_t chunks_reserve(sim_kernel_t *k, size_t n, as_err_t *err) {
  unsigned bits = k->slot_bits;
  while ((k->slot_count + n) * 2 > ((size_t)1 << bits)) {
    bits++;
  }
  if (bits != k->slot_bits) {
    as_status_t st = table_resize(k, bits, err);
    if (st != AS_OK) {
      return st;
    }
  }
  while (k->chunk_nfree < n) {
    chunk_t *c = malloc(sizeof *c);
    if (c == NULL) {
      return as_err_set(err, AS_ENOMEM,
                        "kernel: cannot allocate residency for %zu blocks", n);
    }
    c->key = (uint64_t)(uintptr_t)k->chunk_free;
    k->chunk_free = c;
    k->chunk_nfree++;
  }
  return AS_OK;
}

/* Gives back what chunks_reserve took beyond the usual bounds. */
static void chunks_unreserve(sim_kernel_t *k) {
  while (k->chunk_nfree > CHUNK_KEEP) {
    chunk_t *c = k->chunk_free;
    k->chunk_free = (chunk_t *)(uintptr_t)c->key;
    k->chunk_nfree--;
    free(c);
  }
  table_maybe_shrink(k);
}

/* The most chunks chunks_move can create for a source of len bytes at a:
 * each source chunk's pages land in at most two destination blocks. */
static size_t chunks_move_need(const sim_kernel_t *k, sim_addr_t a,
                               uint64_t len) {
  uint64_t blocks = ((a + len - 1) >> CHUNK_SHIFT) - (a >> CHUNK_SHIFT) + 1;
  return 2 * (size_t)(blocks < k->slot_count ? blocks : k->slot_count);
}

/* Moves the residency of [a, a + len) to [d, d + len): both page-aligned,
 * disjoint, the destination mapped with no resident page (it was a gap).
 * Linux 6.1 mm/mremap.c move_page_tables -> move_ptes (or move_huge_pmd /
 * move_normal_pmd) moves the page-table entries: the pages are not copied
 * or faulted, keep their dirty state (so a lazyfree page stays lazyfree:
 * MADV_FREE's state is the clean PTE and the page's LRU, 6.1.170
 * mm/madvise.c:595-716),
 * and MM_ANONPAGES does not change.  A THP moves as its 4 KiB-granular
 * residency bits.  rw: the destination is RW, so non-lazy pages are fast.
 * Needs chunks_reserve(k, chunks_move_need(k, a, len)) first. */
static void chunks_move(sim_kernel_t *k, sim_addr_t a, sim_addr_t d,
                        uint64_t len, int rw) {
  if (len == 0 || k->slot_count == 0) {
    return;
  }
  uint64_t first = a >> CHUNK_SHIFT, last = (a + len - 1) >> CHUNK_SHIFT;
  int      scan;
  /* The reserve guarantees no resize replaces scan_keys while we create
   * chunks. */
  uint64_t n = keys_to_visit(k, first, last, &scan);
  for (uint64_t i = 0; i < n; i++) {
    uint64_t key = scan ? k->scan_keys[i] : first + i;
    chunk_t *c = chunk_lookup(k, key);
    if (c == NULL) {
      continue;
    }
    sim_addr_t base = key << CHUNK_SHIFT;
    sim_addr_t lo = base > a ? base : a, hi = base + CHUNK_BYTES;
    hi = hi < a + len ? hi : a + len;
    uint64_t mask[CHUNK_WORDS];
    mask_range(mask, (unsigned)((lo & (CHUNK_BYTES - 1)) >> k->h.page_shift),
               (unsigned)(((hi - 1) & (CHUNK_BYTES - 1)) >> k->h.page_shift));
    chunk_t *t = NULL; /* destination chunk of the last page */
    uint32_t moved = 0;
    /* move_huge_pmd moves a whole huge PMD to an aligned place; anything
     * else splits it (Linux 6.1 mm/mremap.c move_page_tables) */
    bool huge =
        c->huge && mask_whole(k, mask) && ((d - a) & (CHUNK_BYTES - 1)) == 0;
    c->huge = false;
    for (unsigned w = 0; w < CHUNK_WORDS; w++) {
      uint64_t sel = c->resident[w] & mask[w];
      for (uint64_t m = sel; m != 0; m &= m - 1) {
        unsigned   p = w * 64 + (unsigned)__builtin_ctzll(m);
        sim_addr_t to = d + (base + ((sim_addr_t)p << k->h.page_shift) - a);
        uint64_t   tk = to >> CHUNK_SHIFT;
        if (t == NULL || t->key != tk) {
          t = chunk_lookup(k, tk);
          if (t == NULL) {
            as_status_t st = chunk_create(k, tk, &t, NULL);
            assert(st == AS_OK && "chunks_reserve was not called");
            (void)st;
          }
        }
        unsigned q = (unsigned)((to & (CHUNK_BYTES - 1)) >> k->h.page_shift);
        unsigned qw = q >> 6;
        uint64_t qb = UINT64_C(1) << (q & 63);
        assert(!(t->resident[qw] & qb));
        t->resident[qw] |= qb;
        if ((c->lazy[w] >> (p & 63)) & 1) {
          t->lazy[qw] |= qb;
        } else if (rw) {
          t->fast[qw] |= qb;
        }
        t->owner[q] = c->owner[p];
        t->nresident++;
        moved++;
      }
      /* Destination pages never fall in the source range, so clearing
       * after the word's walk loses nothing even when t == c. */
      c->resident[w] &= ~sel;
      c->lazy[w] &= ~sel;
      c->fast[w] &= ~sel;
    }
    c->nresident -= moved;
    if (t != NULL && huge) {
      t->huge = true;
    }
    if (c->nresident == 0) {
      if (!huge) { /* the source's table stays until its mapping goes */
        tables_add(k, c->key);
      }
      chunk_release(k, c);
    }
  }
}

/* ---- Address-space operations ------------------------------------------- */

static sim_addr_t page_down(const sim_kernel_t *k, sim_addr_t x) {
  return x & ~(k->h.page_size - 1);
}

/* Rounds a length up to whole pages; 0 if that overflows. */
static uint64_t page_round_len(const sim_kernel_t *k, uint64_t len) {
  uint64_t r = (len + k->h.page_size - 1) & ~(k->h.page_size - 1);
  return r < len ? 0 : r;
}

/* Checks addr is page-aligned and [addr, addr+len rounded) lies inside the
 * user address space; sets *end.  len 0 is allowed here. */
static as_status_t check_range(const sim_kernel_t *k, const char *what,
                               sim_addr_t addr, uint64_t len, sim_addr_t *end,
                               as_err_t *err) {
  uint64_t rlen = page_round_len(k, len);
  if (addr & (k->h.page_size - 1)) {
    return as_err_set(err, AS_EINVAL,
                      "%s at 0x%" PRIx64 ": address is not a multiple of the "
                      "%" PRIu64 "-byte page",
                      what, addr, k->h.page_size);
  }
  if ((len > 0 && rlen == 0) || addr > k->limit || rlen > k->limit - addr) {
    return as_err_set(err, AS_EINVAL,
                      "%s [0x%" PRIx64 ", +%" PRIu64 "): beyond the end of the "
                      "address space 0x%" PRIx64,
                      what, addr, len, k->limit);
  }
  *end = addr + rlen;
  return AS_OK;
}

/* The VMA tree covers [a, b) without holes; *hole is the first unmapped
 * address otherwise.  With need_rw, a PROT_NONE page also fails. */
static int range_mapped(sim_kernel_t *k, sim_addr_t a, sim_addr_t b,
                        int need_rw, sim_addr_t *hole) {
  for (sim_addr_t pos = a; pos < b;) {
    inode_t *v = itree_find(&k->vmas, pos);
    if (v == NULL || (need_rw && v->prot != SIM_PROT_RW)) {
      *hole = pos;
      return 0;
    }
    pos = v->end;
  }
  return 1;
}

/* AS_OK if [a, b) is mapped throughout, else AS_EINVAL naming the first
 * hole (Linux returns ENOMEM, checked before anything changes). */
static as_status_t check_mapped(sim_kernel_t *k, const char *what, sim_addr_t a,
                                sim_addr_t b, as_err_t *err) {
  sim_addr_t hole;
  if (range_mapped(k, a, b, 0, &hole)) {
    return AS_OK;
  }
  return as_err_set(err, AS_EINVAL,
                    "%s [0x%" PRIx64 ", 0x%" PRIx64 "): 0x%" PRIx64
                    " is not mapped",
                    what, a, b, hole);
}

/* Takes [a, b) out of the gap tree (it may span several gaps). */
static void gaps_take(sim_kernel_t *k, sim_addr_t a, sim_addr_t b) {
  a = a > k->low ? a : k->low;
  b = b < k->top ? b : k->top;
  if (a >= b) {
    return;
  }
  inode_t *g = itree_find(&k->gaps, a);
  if (g == NULL || b > g->end) {
    /* Several gaps (MAP_FIXED, brk over holes): the general path. */
    free_subtree(k, itree_extract(k, &k->gaps, a, b));
  } else if (a == g->start && b == g->end) {
    node_put(k, itree_erase(&k->gaps, a));
  } else if (a == g->start) {
    g->start = b; /* keeps the order: nothing else starts in [a, b) */
    fix_path(k->gaps.root, b);
  } else {
    /* The usual top-down mmap: the top of the gap, g shrinks in place. */
    sim_addr_t end = g->end;
    g->end = a;
    fix_path(k->gaps.root, g->start);
    if (b < end) {
      itree_insert_raw(&k->gaps, node_get(k, b, end, 0, 0));
    }
  }
}

/* Maps the free range [a, b).  Uses up to three reserved nodes. */
static void map_range(sim_kernel_t *k, sim_addr_t a, sim_addr_t b,
                      sim_prot_t prot, sim_owner_t owner) {
  gaps_take(k, a, b);
  itree_insert(k, &k->vmas, node_get(k, a, b, prot, owner));
  k->mapped_bytes += b - a;
}

/* Returns each unmapped piece of the detached treap t to the gap tree,
 * reusing its node, in address order. */
static void gaps_give(sim_kernel_t *k, inode_t *t) {
  while (t != NULL) {
    inode_t *l = t->left, *r = t->right;
    gaps_give(k, l);
    k->mapped_bytes -= t->end - t->start;
    sim_addr_t a = t->start > k->low ? t->start : k->low;
    sim_addr_t b = t->end < k->top ? t->end : k->top;
    if (a < b) {
      t->start = a;
      t->end = b;
      t->prot = 0;
      t->owner = 0;
      itree_insert(k, &k->gaps, t);
    } else {
      node_put(k, t);
    }
    t = r;
  }
}

/* ---- Huge-page advice (MADV_HUGEPAGE, MADV_NOHUGEPAGE ranges) -------- */

/* Whether THP applies to the 2 MiB block at base: THP=always, or
 * THP=madvise and one MADV_HUGEPAGE range holds the block (Linux 6.1
 * mm/huge_memory.c hugepage_vma_check: VM_HUGEPAGE under madvise); never
 * where a VM_NOHUGEPAGE range reaches into the block (hugepage_vma_check
 * refuses such a VMA in every mode; a block it only partly covers lies
 * across two VMAs, which a huge page cannot). */
static int block_wants_thp(const sim_kernel_t *k, sim_addr_t base) {
  if (k->thp_disabled || (!k->cfg.thp && !k->cfg.thp_madvise)) {
    return 0;
  }
  int wants = k->cfg.thp;
  for (size_t i = 0; i < k->nadvised; i++) {
    const advice_t *r = &k->advised[i];
    if (!r->huge && r->start < base + THP_BYTES && base < r->end) {
      return 0;
    }
    if (r->huge && k->cfg.thp_madvise && r->start <= base &&
        base + THP_BYTES <= r->end) {
      wants = 1;
    }
  }
  return wants;
}

/* Forgets the advice on [a, b) (munmap, or before new advice): the
 * ranges stay disjoint, so at most one is split, into the spare slot
 * advised_add keeps. */
static void unadvise(sim_kernel_t *k, sim_addr_t a, sim_addr_t b) {
  for (size_t i = 0; i < k->nadvised;) {
    advice_t *r = &k->advised[i];
    if (r->end <= a || r->start >= b) {
      i++;
    } else if (r->start < a && r->end > b) { /* the hole splits it in two */
      k->advised[k->nadvised++] = (advice_t){b, r->end, r->huge};
      r->end = a;
      i++;
    } else if (r->start < a) {
      r->end = a;
      i++;
    } else if (r->end > b) {
      r->start = b;
      i++;
    } else {
      *r = k->advised[--k->nadvised];
    }
  }
}

/* Room for `more` further ranges beside the spare slot unadvise needs. */
static as_status_t advised_reserve(sim_kernel_t *k, size_t more,
                                   as_err_t *err) {
  advice_t *v = as_grow(k->advised, &k->advised_cap, k->nadvised + more + 1,
                        sizeof k->advised[0], 8);
  if (v == NULL) {
    return as_err_set(err, AS_ENOMEM, "madvise: out of memory");
  }
  k->advised = v;
  return AS_OK;
}

/* Gives [a, b) the advice huge (MADV_HUGEPAGE) or !huge (MADV_NOHUGEPAGE),
 * replacing any it had, as each clears the other's flag (Linux 6.1
 * mm/khugepaged.c hugepage_madvise); joined with ranges of the same advice
 * it touches, as Linux merges neighbouring VMAs whose flags now agree (6.1
 * mm/madvise.c madvise_update_vma -> vma_merge): a brk heap advised piece
 * by piece as it grows stays one range, and block_wants_thp scans few. */
static as_status_t advise_huge(sim_kernel_t *k, sim_addr_t a, sim_addr_t b,
                               bool huge, as_err_t *err) {
  as_status_t st = advised_reserve(k, 1, err);
  if (st != AS_OK) {
    return st;
  }
  unadvise(k, a, b);
  for (size_t i = 0; i < k->nadvised;) {
    advice_t *r = &k->advised[i];
    if (r->huge == huge && (r->end == a || r->start == b)) {
      a = r->start < a ? r->start : a;
      b = r->end > b ? r->end : b;
      *r = k->advised[--k->nadvised];
    } else {
      i++;
    }
  }
  k->advised[k->nadvised++] = (advice_t){a, b, huge};
  return AS_OK;
}

/* mremap took [a, b) to [to, to + (b - a)) and the mapping now ends at
 * to_end (to == a when it grew in place): the advice goes along, and a
 * mapping whose last page was advised is advised to its new end, as
 * Linux's VM_HUGEPAGE is a flag of the VMA that move_vma copies
 * (6.1 mm/mremap.c move_vma -> copy_vma) and vma_expand keeps.  The caller
 * reserved advised_reserve(k, nadvised + 1) before changing anything: the
 * copies wait one slot past nadvised, out of reach of unadvise's split. */
static void advice_follow(sim_kernel_t *k, sim_addr_t a, sim_addr_t b,
                          sim_addr_t to, sim_addr_t to_end) {
  size_t     n0 = k->nadvised, moved = 0;
  sim_addr_t delta = to - a; /* wraps for a move down: sums still right */
  for (size_t i = 0; i < n0; i++) {
    const advice_t *r = &k->advised[i];
    if (r->end > a && r->start < b) {
      sim_addr_t ns = (r->start > a ? r->start : a) + delta;
      sim_addr_t ne = (r->end < b ? r->end : b) + delta;
      k->advised[n0 + 1 + moved++] =
          (advice_t){ns, ne == b + delta ? to_end : ne, r->huge};
    }
  }
  unadvise(k, a, b);
  for (size_t j = 0; j < moved; j++) {
    k->advised[k->nadvised++] = k->advised[n0 + 1 + j];
  }
}

/* Unmaps every page of [a, b): residency first, then the VMAs (Linux 6.1
 * mm/mmap.c do_mas_align_munmap: unmap_region zaps, then the VMAs go).
 * Uses up to two reserved nodes. */
static void unmap_range(sim_kernel_t *k, sim_addr_t a, sim_addr_t b) {
  unadvise(k, a, b);
  chunks_in_range(k, a, b, CHUNK_UNMAP);
  gaps_give(k, itree_extract(k, &k->vmas, a, b));
  tables_unmap(k, a, b);
}

/* Re-inserts the detached pieces with a new protection. */
static void reprotect(sim_kernel_t *k, inode_t *t, sim_prot_t prot) {
  while (t != NULL) {
    inode_t *l = t->left, *r = t->right;
    reprotect(k, l, prot);
    t->prot = (uint8_t)prot;
    itree_insert(k, &k->vmas, t);
    t = r;
  }
}

/* Whether the 2 MiB block at base lies wholly in RW mappings.  Linux 6.1
 * include/linux/huge_mm.h transhuge_vma_suitable asks for one VMA; adjacent
 * anonymous RW mappings are one VMA there (mm/mmap.c vma_merge), and only
 * our owner tags keep them apart here. */
static int block_is_rw(sim_kernel_t *k, sim_addr_t base) {
  sim_addr_t hole;
  return range_mapped(k, base, base + THP_BYTES, 1, &hole);
}

/* A write to pages p0..p1 of block key, all validated as mapped RW. */
static as_status_t touch_block(sim_kernel_t *k, uint64_t key, unsigned p0,
                               unsigned p1, as_err_t *err) {
  uint64_t mask[CHUNK_WORDS];
  chunk_t *c = chunk_find(k, key);
  if (c != NULL && bits_all(c->fast, p0, p1)) {
    return AS_OK;
  }
  sim_addr_t base = key << CHUNK_SHIFT;
  if (c == NULL) {
    /* Linux 6.1 mm/memory.c __handle_mm_fault: on pmd_none, create_huge_pmd
     * first; mm/huge_memory.c do_huge_pmd_anonymous_page then adds
     * HPAGE_PMD_NR pages at once (6.1.170 mm/memory.c:5141,
     * mm/huge_memory.c:715). */
    /* ... unless the block has a page table already (a zap or a read
     * left it): then do_anonymous_page maps a small page. */
    bool table = tables_find(k, key) != SIZE_MAX;
    int  thp = !table && block_wants_thp(k, base) && block_is_rw(k, base);
    as_status_t st = chunk_create(k, key, &c, err);
    if (st != AS_OK) {
      return st;
    }
    c->huge = thp;
    if (thp) {
      p0 = 0;
      p1 = k->chunk_pages - 1;
    }
  } else if (c->huge && c->lazy[p0 >> 6] != 0) {
    /* a huge page is dirtied as one: the PMD's dirty bit (MADV_FREE of
     * part of it split it, so it is lazyfree whole or not at all) */
    p0 = 0;
    p1 = k->chunk_pages - 1;
  }
  mask_range(mask, p0, p1);
  inode_t *v = NULL;
  uint64_t gained = 0;
  /* Only words p0 / 64 .. p1 / 64 of mask are non-zero. */
  for (unsigned w = p0 >> 6; w <= p1 >> 6; w++) {
    /* A write makes a lazyfree page dirty again: it stays (Linux 6.1.170
     * mm/rmap.c:1692-1708 try_to_unmap_one keeps dirty lazyfree pages). */
    uint64_t relazy = c->lazy[w] & mask[w];
    k->lazy_pages -= popcount64(relazy);
    c->lazy[w] &= ~relazy;
    /* Linux 6.1 mm/memory.c do_anonymous_page: one MM_ANONPAGES per
     * written page (6.1.170 mm/memory.c:4227). */
    uint64_t fresh = mask[w] & ~c->resident[w];
    gained += popcount64(fresh);
    c->resident[w] |= fresh;
    c->fast[w] |= mask[w];
    /* Owners by runs of fresh pages within one VMA: per 64 pages, not
     * per page, for a fault over a huge range. */
    while (fresh != 0) {
      unsigned   bit = (unsigned)__builtin_ctzll(fresh), n = run_length(fresh);
      unsigned   p = w * 64 + bit;
      sim_addr_t addr = base + ((sim_addr_t)p << k->h.page_shift);
      if (v == NULL || addr < v->start || addr >= v->end) {
        v = itree_find(&k->vmas, addr);
        assert(v != NULL && v->prot == SIM_PROT_RW);
      }
      uint64_t in_vma = (v->end - addr) >> k->h.page_shift;
      if (n > in_vma) {
        n = (unsigned)in_vma;
      }
      memset(&c->owner[p], v->owner, n);
      k->owner_pages[v->owner] += n;
      fresh &= ~bit_run(bit, n);
    }
  }
  c->nresident += (uint32_t)gained;
  k->h.rss_pages += gained;
  k->calls.faults += gained;
  return AS_OK;
}

/* Blocks first..last that hold no resident page yet: a lookup per block,
 * or a scan of the table when there are fewer chunks than blocks. */
static uint64_t blocks_without_chunk(const sim_kernel_t *k, uint64_t first,
                                     uint64_t last) {
  uint64_t blocks = last - first + 1, with = 0;
  if (blocks <= k->slot_count) {
    for (uint64_t key = first; key <= last; key++) {
      with += chunk_lookup(k, key) != NULL;
    }
  } else {
    for (size_t i = 0; i < k->slot_cap; i++) {
      uint64_t key = k->slots[i].key;
      with += key != SLOT_EMPTY && key >= first && key <= last;
    }
  }
  return blocks - with;
}

/* AS_ENOMEM if making [a, b) resident would take the residency
 * bookkeeping over cfg.max_memory_bytes: checked before anything changes,
 * so that one huge write is refused at once instead of growing the
 * simulator until the machine runs out. */
static as_status_t check_budget(const sim_kernel_t *k, sim_addr_t a,
                                sim_addr_t b, as_err_t *err) {
  uint64_t max = k->cfg.max_memory_bytes;
  uint64_t first = a >> CHUNK_SHIFT, last = (b - 1) >> CHUNK_SHIFT;
  uint64_t cap = k->budget_blocks;
  if (max == 0 || k->slot_count + (last - first + 1) <= cap) {
    return AS_OK;
  }
  uint64_t fresh = blocks_without_chunk(k, first, last);
  if (k->slot_count + fresh <= cap) {
    return AS_OK;
  }
  return as_err_set(err, AS_ENOMEM,
                    "writing [0x%" PRIx64 ", 0x%" PRIx64 ") makes %" PRIu64
                    " more 2 MiB blocks resident; with the %zu resident now "
                    "they need %" PRIu64 " MiB of simulator memory (%d "
                    "bytes each), over the limit of %" PRIu64
                    " MiB (--max-memory)",
                    a, b, fresh, k->slot_count,
                    (k->slot_count + fresh) * SIM_KERNEL_BYTES_PER_BLOCK >> 20,
                    SIM_KERNEL_BYTES_PER_BLOCK, max >> 20);
}

/* Out of line, so sim_kernel_touch_checked's fast test stays a leaf with no
 * stack frame. */
__attribute__((noinline)) static as_status_t
touch_slow(sim_kernel_t *k, sim_addr_t addr, uint64_t length, as_err_t *err) {
  sim_addr_t last = addr + length - 1;
  if (last < addr || last >= k->limit) {
    return as_err_set(err, AS_EINVAL,
                      "touch [0x%" PRIx64 ", +%" PRIu64 "): beyond the end of "
                      "the address space 0x%" PRIx64,
                      addr, length, k->limit);
  }
  sim_addr_t a = page_down(k, addr), b = page_down(k, last) + k->h.page_size;
  sim_addr_t bad;
  if (!range_mapped(k, a, b, 1, &bad)) {
    inode_t *v = itree_find(&k->vmas, bad);
    return as_err_set(err, AS_EINVAL,
                      "touch [0x%" PRIx64 ", +%" PRIu64 "): page 0x%" PRIx64
                      " is %s",
                      addr, length, bad, v ? "PROT_NONE" : "not mapped");
  }
  as_status_t budget = check_budget(k, a, b, err);
  if (budget != AS_OK) {
    return budget;
  }
  for (uint64_t key = a >> CHUNK_SHIFT; key <= (b - 1) >> CHUNK_SHIFT; key++) {
    sim_addr_t lo = key << CHUNK_SHIFT, hi = lo + CHUNK_BYTES;
    lo = lo > a ? lo : a;
    hi = hi < b ? hi : b;
    as_status_t st = touch_block(
        k, key, (unsigned)((lo & (CHUNK_BYTES - 1)) >> k->h.page_shift),
        (unsigned)(((hi - 1) & (CHUNK_BYTES - 1)) >> k->h.page_shift), err);
    if (st != AS_OK) {
      return st;
    }
  }
  return AS_OK;
}

/* touch_block's work for pages p0..p1 of existing chunk c (block key),
 * when they lie in one word of its bitmaps and in one RW mapping and no
 * huge page is dirtied whole: the fault of a page next to written ones
 * that nearly every growing heap makes, without touch_slow's range walk
 * and masks.  The mapping is the one owner of every fresh page; the
 * budget holds, as the block has its chunk already.  False, changing
 * nothing, in any other case. */
static bool touch_in_word(sim_kernel_t *k, chunk_t *c, uint64_t key,
                          unsigned p0, unsigned p1) {
  unsigned w = p0 >> 6;
  if ((p1 >> 6) != w || (c->huge && c->lazy[w] != 0) ||
      k->slot_count > k->budget_blocks) {
    return false;
  }
  sim_addr_t     a = (key << CHUNK_SHIFT) + ((sim_addr_t)p0 << k->h.page_shift);
  sim_addr_t     b = (key << CHUNK_SHIFT) + ((sim_addr_t)p1 << k->h.page_shift);
  const inode_t *v = itree_find(&k->vmas, a);
  if (v == NULL || v->prot != SIM_PROT_RW || b >= v->end) {
    return false;
  }
  uint64_t m = bit_run(p0 & 63, p1 - p0 + 1);
  uint64_t relazy = c->lazy[w] & m, fresh = m & ~c->resident[w];
  uint64_t gained = popcount64(fresh);
  k->lazy_pages -= popcount64(relazy);
  c->lazy[w] &= ~relazy;
  c->resident[w] |= fresh;
  c->fast[w] |= m;
  while (fresh != 0) {
    unsigned bit = (unsigned)__builtin_ctzll(fresh), n = run_length(fresh);
    if (n == 1) {
      c->owner[w * 64 + bit] = v->owner; /* one page: no memset call */
    } else {
      memset(&c->owner[w * 64 + bit], v->owner, n);
    }
    fresh &= ~bit_run(bit, n);
  }
  k->owner_pages[v->owner] += gained;
  c->nresident += (uint32_t)gained;
  k->h.rss_pages += gained;
  k->calls.faults += gained;
  return true;
}

/* ---- Public API --------------------------------------------------------- */

const char *sim_owner_name(sim_owner_t owner) {
  static const char *const names[] = {
#define SIM_OWNER_STR(name, str) str,
      SIM_OWNER_MAP(SIM_OWNER_STR)
#undef SIM_OWNER_STR
  };
  return (unsigned)owner < SIM_OWNER_COUNT ? names[owner] : "?";
}

void sim_kernel_config_default(sim_kernel_config_t *cfg) {
  cfg->page_size = 4096;
  cfg->thp = false;
  cfg->thp_madvise = true;
  cfg->memory_pressure = false;
  cfg->thp_align = SIM_THP_ALIGN_NONE;
  cfg->pt_reclaim = false;
  cfg->stack_nohugepage = false;
  cfg->zero_page = true;
  cfg->mmap_top = DEFAULT_MMAP_TOP;
  cfg->brk_start = DEFAULT_BRK_START;
  cfg->max_memory_bytes = 0;
  cfg->clock_origin_ns = 0;
}

as_status_t sim_kernel_config_offset_layout(sim_kernel_config_t *cfg,
                                            uint64_t             offset_bytes,
                                            as_err_t            *err) {
  if (offset_bytes == 0)
    return AS_OK;
  sim_addr_t top = cfg->mmap_top ? cfg->mmap_top : DEFAULT_MMAP_TOP;
  /* 4096, the smallest OS page: with larger pages sim_kernel_create rounds
   * the lowered top down to its page, as the kernel's mmap_base is. */
  if (offset_bytes % 4096 != 0 || offset_bytes >= top)
    return as_err_set(err, AS_EINVAL,
                      "kernel: layout offset %" PRIu64
                      " is not a multiple of 4096 below mmap_top 0x%" PRIx64,
                      offset_bytes, top);
  cfg->mmap_top = top - offset_bytes;
  return AS_OK;
}

as_status_t sim_kernel_create(const sim_kernel_config_t *cfg,
                              sim_kernel_t **out, as_err_t *err) {
  *out = NULL;
  unsigned shift;
  switch (cfg->page_size) {
  case 4096:
    shift = 12;
    break;
  case 16384:
    shift = 14;
    break;
  case 65536:
    shift = 16;
    break;
  default:
    return as_err_set(err, AS_EINVAL,
                      "kernel: page size %" PRIu64
                      " is not 4096, 16384 or 65536",
                      cfg->page_size);
  }
  uint64_t   page = cfg->page_size;
  sim_addr_t limit = ((sim_addr_t)1 << SIM_KERNEL_TASK_SIZE_BITS) - page;
  sim_addr_t top = cfg->mmap_top ? cfg->mmap_top : DEFAULT_MMAP_TOP;
  sim_addr_t brk = cfg->brk_start ? cfg->brk_start : DEFAULT_BRK_START;
  sim_addr_t low = MMAP_MIN_ADDR > page ? MMAP_MIN_ADDR : page;
  /* The kernel's mmap_base and start_brk are page-aligned by construction
   * (mm/util.c mmap_base: PAGE_ALIGN; arch/x86/kernel/process.c
   * arch_randomize_brk), so round the layout to the page size. */
  top = top & ~(page - 1);
  brk = (brk + page - 1) & ~(page - 1);
  if (top > limit || top <= low || brk < low || brk >= top) {
    return as_err_set(err, AS_EINVAL,
                      "kernel: layout needs 0x%" PRIx64
                      " <= brk_start 0x%" PRIx64 " < mmap_top 0x%" PRIx64
                      " <= 0x%" PRIx64,
                      low, brk, top, limit);
  }
  sim_kernel_t *k = calloc(1, sizeof *k);
  if (k == NULL) {
    return as_err_set(err, AS_ENOMEM, "kernel: cannot allocate %zu bytes",
                      sizeof *k);
  }
  k->cfg = *cfg;
  k->budget_blocks = cfg->max_memory_bytes
                         ? cfg->max_memory_bytes / SIM_KERNEL_BYTES_PER_BLOCK
                         : UINT64_MAX;
  k->cfg.mmap_top = top;
  k->cfg.brk_start = brk;
  k->h.page_size = page;
  k->h.page_shift = shift;
  k->chunk_pages = (unsigned)(CHUNK_BYTES >> shift);
  k->low = low;
  k->top = top;
  k->limit = limit;
  k->brk_start = brk;
  k->brk_cur = brk;
  for (size_t i = 0; i < CACHE_SLOTS; i++) {
    k->h.cache[i].key = SLOT_EMPTY;
    k->h.cache[i].fast = NULL;
  }
  k->prng = UINT64_C(0x2545F4914F6CDD1D);
  as_status_t st = table_resize(k, 6, err);
  if (st == AS_OK) {
    st = pool_reserve(k, err);
  }
  if (st != AS_OK) {
    sim_kernel_destroy(k);
    return st;
  }
  itree_insert_raw(&k->gaps, node_get(k, low, top, 0, 0));
  *out = k;
  return AS_OK;
}

void sim_kernel_destroy(sim_kernel_t *k) {
  if (k == NULL) {
    return;
  }
  for (size_t i = 0; i < k->slot_cap; i++) {
    if (k->slots[i].key != SLOT_EMPTY) {
      free(k->slots[i].chunk);
    }
  }
  while (k->chunk_free != NULL) {
    chunk_t *c = k->chunk_free;
    k->chunk_free = (chunk_t *)(uintptr_t)c->key;
    free(c);
  }
  while (k->slabs != NULL) {
    slab_t *s = k->slabs;
    k->slabs = s->next;
    free(s);
  }
  free(k->slots);
  free(k->scan_keys);
  free(k->advised);
  free(k->tables);
  free(k);
}

uint64_t sim_kernel_address_space_bytes(const sim_kernel_t *k) {
  return k->limit;
}

uint64_t sim_kernel_max_memory_bytes(const sim_kernel_t *k) {
  return k->cfg.max_memory_bytes;
}

uint64_t sim_kernel_clock_origin_ns(const sim_kernel_t *k) {
  return k->cfg.clock_origin_ns;
}

uint64_t sim_kernel_page_size(const sim_kernel_t *k) {
  return k->h.page_size;
}

static const char *const thp_mode_names[] = {"never", "madvise", "always"};

const char *sim_thp_mode_name(sim_thp_mode_t mode) {
  return (unsigned)mode <= SIM_THP_ALWAYS ? thp_mode_names[mode] : "?";
}

bool sim_kernel_config_set_thp(sim_kernel_config_t *cfg, const char *name) {
  for (int m = SIM_THP_NEVER; name != NULL && m <= SIM_THP_ALWAYS; m++)
    if (strcmp(name, thp_mode_names[m]) == 0) {
      cfg->thp = m == SIM_THP_ALWAYS;
      cfg->thp_madvise = m != SIM_THP_NEVER;
      return true;
    }
  return false;
}

sim_thp_mode_t sim_kernel_config_thp_mode(const sim_kernel_config_t *cfg) {
  return cfg->thp           ? SIM_THP_ALWAYS
         : cfg->thp_madvise ? SIM_THP_MADVISE
                            : SIM_THP_NEVER;
}

sim_thp_mode_t sim_kernel_thp_mode(const sim_kernel_t *k) {
  return sim_kernel_config_thp_mode(&k->cfg);
}

void sim_kernel_disable_thp(sim_kernel_t *k) {
  k->thp_disabled = true;
}

static as_status_t check_prot_owner(const char *what, sim_prot_t prot,
                                    sim_owner_t owner, as_err_t *err) {
  if ((unsigned)prot > SIM_PROT_RW || (unsigned)owner >= SIM_OWNER_COUNT) {
    return as_err_set(err, AS_EINVAL, "%s: bad prot %d or owner %d", what,
                      (int)prot, (int)owner);
  }
  return AS_OK;
}

sim_thp_align_t sim_kernel_thp_align_of_release(const char *release) {
  if (release == NULL || *release < '0' || *release > '9')
    return SIM_THP_ALIGN_NONE;
  char         *end;
  unsigned long major = strtoul(release, &end, 10);
  if (*end != '.' || end[1] < '0' || end[1] > '9')
    return SIM_THP_ALIGN_NONE;
  unsigned long minor = strtoul(end + 1, NULL, 10);
  if (major < 6 || (major == 6 && minor < 7))
    return SIM_THP_ALIGN_NONE;
  return major == 6 && minor < 12 ? SIM_THP_ALIGN_ANY : SIM_THP_ALIGN_MULTIPLE;
}

bool sim_kernel_pt_reclaim_of_release(const char *release) {
  char         *end;
  unsigned long major = 0, minor = 0;
  if (release != NULL && *release >= '0' && *release <= '9') {
    major = strtoul(release, &end, 10);
    if (*end == '.' && end[1] >= '0' && end[1] <= '9')
      minor = strtoul(end + 1, NULL, 10);
  }
  return major > 6 || (major == 6 && minor >= 14);
}

bool sim_kernel_stack_nohugepage_of_release(const char *release) {
  /* The same release as the THP alignment: c4608d1bf7c6 fixed the
   * regressions efa7df3e3bb5 caused for thread stacks. */
  return sim_kernel_thp_align_of_release(release) != SIM_THP_ALIGN_NONE;
}

void sim_kernel_config_set_release(sim_kernel_config_t *cfg,
                                   const char          *release) {
  cfg->thp_align = sim_kernel_thp_align_of_release(release);
  cfg->pt_reclaim = sim_kernel_pt_reclaim_of_release(release);
  cfg->stack_nohugepage = sim_kernel_stack_nohugepage_of_release(release);
}

const char *sim_kernel_thp_align_name(sim_thp_align_t policy) {
  switch (policy) {
  case SIM_THP_ALIGN_ANY:
    return "anonymous mappings of 2 MiB or more placed 2 MiB-aligned "
           "(Linux 6.7-6.11)";
  case SIM_THP_ALIGN_MULTIPLE:
    return "anonymous mappings of a multiple of 2 MiB placed 2 MiB-aligned "
           "(Linux 6.12+)";
  default:
    return "mappings placed top-down without alignment (Linux before 6.7)";
  }
}

/* Linux 6.7+ __thp_get_unmapped_area (6.18 mm/huge_memory.c; the
 * conditions in mm/mmap.c __get_unmapped_area): the THP-aligned placement
 * of an anonymous mapping of len bytes, or 0 when the plain placement
 * applies (sim_thp_align_t).  6.18 treats the page offset of anonymous
 * memory as zero ("Always treat pgoff as zero for anonymous memory"), so a
 * mapping mremap moves is aligned as a new one is (measured here:
 * tests/validation/test_kernel_placement.c). */
static sim_addr_t thp_placement(const sim_kernel_t *k, uint64_t len) {
  const uint64_t B = THP_BYTES;
  if (k->cfg.thp_align == SIM_THP_ALIGN_NONE || len < B || len + B < len ||
      (k->cfg.thp_align == SIM_THP_ALIGN_MULTIPLE && len % B != 0))
    return 0;
  inode_t *g = itree_highest_fit(&k->gaps, len + B);
  if (g == NULL)
    return 0; /* "The caller will retry without the padding." */
  /* ret = g->end - len - B, the padded fit; ret + off_sub, or ret + B when
   * ret is already aligned (topdown): the highest aligned address at or
   * below g->end - len. */
  return (g->end - len) & ~(B - 1);
}

void sim_kernel_place_next(sim_kernel_t *k, sim_owner_t owner,
                           sim_addr_t addr) {
  if ((unsigned)owner < SIM_OWNER_COUNT)
    k->place_next[owner] = addr;
}

/* Where a mapping of len bytes aligned to align goes when the real one
 * went to want (sim_kernel_place_next): want itself when that range is
 * free, else the highest free address that sits where want does within a
 * 2 MiB block (or an align block, if larger), so that what depends on the
 * low bits (pymalloc's pool alignment, THP blocks) is as it was.  0 when
 * want does not fit the alignment or no gap holds the request. */
static sim_addr_t placed_address(sim_kernel_t *k, sim_addr_t want, uint64_t len,
                                 uint64_t align) {
  if ((want & (align - 1)) != 0 || want + len < want)
    return 0;
  const inode_t *g = itree_find(&k->gaps, want);
  if (g != NULL && want + len <= g->end)
    return want;
  uint64_t block = align > THP_BYTES ? align : THP_BYTES;
  uint64_t need = len + (block - k->h.page_size);
  if (need < len || (g = itree_highest_fit(&k->gaps, need)) == NULL)
    return 0;
  sim_addr_t highest = g->end - len;
  sim_addr_t a = (highest & ~(block - 1)) + (want & (block - 1));
  return a <= highest ? a : a - block; /* >= g->start: the gap holds need */
}

as_status_t sim_kernel_mmap(sim_kernel_t *k, uint64_t length, uint64_t align,
                            sim_prot_t prot, sim_owner_t owner,
                            sim_addr_t *addr_out, as_err_t *err) {
  k->calls.mmap++;
  *addr_out = 0;
  as_status_t st = check_prot_owner("mmap", prot, owner, err);
  if (st != AS_OK) {
    return st;
  }
  uint64_t len = page_round_len(k, length);
  if (length == 0 || len == 0) {
    return as_err_set(err, AS_EINVAL, "mmap of %" PRIu64 " bytes", length);
  }
  if (align & (align - 1)) {
    return as_err_set(err, AS_EINVAL,
                      "mmap of %" PRIu64 " bytes: alignment %" PRIu64
                      " is not a power of two",
                      length, align);
  }
  if (align < k->h.page_size) {
    align = k->h.page_size;
  }
  /* Alignment is served as allocators get it from Linux: map length +
   * align - page top-down (mm/mmap.c unmapped_area_topdown), keep the
   * aligned part (jemalloc 5.3 src/pages.c os_pages_map / pages_trim).
   * The gap must hold the over-sized request; the result is the highest
   * aligned address in it. */
  uint64_t need = len + (align - k->h.page_size);
  if (need < len) {
    return as_err_set(err, AS_ENOMEM,
                      "mmap of %" PRIu64 " bytes aligned to %" PRIu64
                      ": too large",
                      length, align);
  }
  if ((st = pool_reserve(k, err)) != AS_OK) {
    return st;
  }
  sim_addr_t want = k->place_next[owner];
  k->place_next[owner] = 0;
  sim_addr_t t = want != 0 ? placed_address(k, want, len, align) : 0;
  if (t == 0 && align == k->h.page_size)
    t = thp_placement(k, len);
  if (t != 0) {
    map_range(k, t, t + len, prot, owner);
    *addr_out = t;
    return AS_OK;
  }
  inode_t *g = itree_highest_fit(&k->gaps, need);
  if (g == NULL) {
    return as_err_set(err, AS_ENOMEM,
                      "mmap of %" PRIu64 " bytes aligned to %" PRIu64
                      ": no gap of %" PRIu64 " bytes below 0x%" PRIx64,
                      length, align, need, k->top);
  }
  sim_addr_t a = (g->end - len) & ~(align - 1);
  assert(a >= g->start);
  map_range(k, a, a + len, prot, owner);
  *addr_out = a;
  return AS_OK;
}

as_status_t sim_kernel_mmap_hint(sim_kernel_t *k, sim_addr_t hint,
                                 uint64_t length, sim_prot_t prot,
                                 sim_owner_t owner, sim_addr_t *addr_out,
                                 as_err_t *err) {
  uint64_t len = page_round_len(k, length);
  if ((hint & (k->h.page_size - 1)) == 0 && len != 0 && hint + len > hint) {
    const inode_t *g = itree_find(&k->gaps, hint);
    if (g != NULL && hint + len <= g->end) {
      as_status_t st = sim_kernel_mmap_fixed(k, hint, len, prot, owner, err);
      if (st == AS_OK)
        *addr_out = hint;
      return st;
    }
  }
  return sim_kernel_mmap(k, length, 0, prot, owner, addr_out, err);
}

as_status_t sim_kernel_mmap_fixed(sim_kernel_t *k, sim_addr_t addr,
                                  uint64_t length, sim_prot_t prot,
                                  sim_owner_t owner, as_err_t *err) {
  k->calls.mmap++;
  sim_addr_t  end;
  as_status_t st = check_prot_owner("mmap_fixed", prot, owner, err);
  if (st == AS_OK) {
    st = check_range(k, "mmap_fixed", addr, length, &end, err);
  }
  if (st != AS_OK) {
    return st;
  }
  if (length == 0) {
    return as_err_set(err, AS_EINVAL, "mmap_fixed at 0x%" PRIx64 ": 0 bytes",
                      addr);
  }
  if ((st = pool_reserve(k, err)) != AS_OK) {
    return st;
  }
  /* Linux 6.1 mm/mmap.c mmap_region: MAP_FIXED first unmaps the range
   * (do_mas_munmap), so its pages lose residency. */
  unmap_range(k, addr, end);
  map_range(k, addr, end, prot, owner);
  return AS_OK;
}

as_status_t sim_kernel_munmap(sim_kernel_t *k, sim_addr_t addr, uint64_t length,
                              as_err_t *err) {
  k->calls.munmap++;
  sim_addr_t  end;
  as_status_t st = check_range(k, "munmap", addr, length, &end, err);
  if (st != AS_OK) {
    return st;
  }
  /* Linux 6.1 mm/mmap.c __vm_munmap -> do_mas_munmap: len 0 is EINVAL. */
  if (length == 0) {
    return as_err_set(err, AS_EINVAL, "munmap at 0x%" PRIx64 ": 0 bytes", addr);
  }
  if ((st = pool_reserve(k, err)) != AS_OK) {
    return st;
  }
  unmap_range(k, addr, end);
  return AS_OK;
}

as_status_t sim_kernel_mremap(sim_kernel_t *k, sim_addr_t addr,
                              uint64_t old_length, uint64_t new_length,
                              sim_addr_t *new_addr_out, as_err_t *err) {
  k->calls.mremap++;
  *new_addr_out = 0;
  sim_addr_t  end;
  as_status_t st = check_range(k, "mremap", addr, old_length, &end, err);
  if (st != AS_OK) {
    return st;
  }
  /* Linux 6.1 mm/mremap.c SYSCALL_DEFINE5(mremap): new_len = PAGE_ALIGN;
   * 0 is EINVAL.  vma_to_resize: old_len 0 on a private mapping is EINVAL
   * (it would "duplicate" the mapping). */
  uint64_t new_len = page_round_len(k, new_length);
  if (old_length == 0 || new_length == 0 || new_len == 0) {
    return as_err_set(err, AS_EINVAL,
                      "mremap [0x%" PRIx64 ", +%" PRIu64 ") to %" PRIu64
                      " bytes: a length is zero or too large",
                      addr, old_length, new_length);
  }
  /* vma_to_resize: vma_lookup(addr) (EFAULT if none) and "We can't remap
   * across vm area boundaries" (old_len > vm_end - addr is EFAULT). */
  inode_t *v = itree_find(&k->vmas, addr);
  if (v == NULL || end > v->end) {
    return as_err_set(
        err, AS_EINVAL, "mremap [0x%" PRIx64 ", 0x%" PRIx64 "): %s", addr, end,
        v == NULL ? "the start is not mapped" : "not inside one mapping");
  }
  sim_prot_t  prot = (sim_prot_t)v->prot;
  sim_owner_t owner = (sim_owner_t)v->owner;
  sim_addr_t  v_end = v->end;
  uint64_t    old_len = end - addr;
  if ((st = pool_reserve(k, err)) != AS_OK ||
      (st = advised_reserve(k, k->nadvised + 1, err)) != AS_OK) {
    return st;
  }
  if (new_len <= old_len) {
    /* SYSCALL_DEFINE5(mremap): "Always allow a shrinking remap: that just
     * unmaps the unnecessary pages" (do_mas_munmap of the tail). */
    if (new_len < old_len) {
      unmap_range(k, addr + new_len, end);
    }
    *new_addr_out = addr;
    return AS_OK;
  }
  /* SYSCALL_DEFINE5(mremap): "old_len exactly to the end of the area" and
   * vma_expandable: no VMA in [vm_end, vm_end + delta) (find_vma_intersection)
   * and get_unmapped_area(MAP_FIXED) accepts the end, i.e. it is within
   * TASK_SIZE.  mmap_base plays no part in Linux, but what lies above
   * mmap_top here does: the program's libraries, which the top-down area
   * starts below (a mapping made first ends where ld.so or libc begins,
   * as measured: a glibc 8 MiB chunk made first and grown to 16 MiB moved),
   * and the stack.  So a mapping below the top grows only up to it. */
  sim_addr_t grow_limit = addr < k->top ? k->top : k->limit;
  if (end == v_end && new_len <= grow_limit - addr) {
    sim_addr_t new_end = addr + new_len;
    inode_t   *next = itree_first_end_after(&k->vmas, end);
    if (next == NULL || next->start >= new_end) {
      /* The extension merges with the mapping (vma_merge / vma_adjust). */
      map_range(k, end, new_end, prot, owner);
      advice_follow(k, addr, end, addr, new_end);
      *new_addr_out = addr;
      return AS_OK;
    }
  }
  /* MREMAP_MAYMOVE: new_addr = get_unmapped_area(NULL-file, 0, new_len, ...)
   * with the old VMA still mapped -- anonymous, so no alignment beyond the
   * page (Linux 6.1 arch/x86/kernel/sys_x86_64.c
   * arch_get_unmapped_area_topdown sets align_mask only for a file). */
  /* get_unmapped_area(NULL, 0, new_len, ...): the same THP placement as
   * mmap's (6.18 mm/mremap.c vrm_set_new_addr). */
  sim_addr_t t = thp_placement(k, new_len);
  inode_t   *g = t != 0 ? NULL : itree_highest_fit(&k->gaps, new_len);
  if (t == 0 && g == NULL) {
    return as_err_set(err, AS_ENOMEM,
                      "mremap [0x%" PRIx64 ", 0x%" PRIx64 ") to %" PRIu64
                      " bytes: no gap of %" PRIu64 " bytes below 0x%" PRIx64,
                      addr, end, new_length, new_len, k->top);
  }
  /* The reserve changes no tree, so g stays valid. */
  if ((st = chunks_reserve(k, chunks_move_need(k, addr, old_len), err)) !=
      AS_OK) {
    chunks_unreserve(k);
    return st;
  }
  sim_addr_t d = t != 0 ? t : g->end - new_len;
  /* move_vma: copy_vma makes the new_len VMA at new_addr, move_page_tables
   * carries old_len of page tables over, then do_munmap(old_addr, old_len)
   * unmaps the old range, whose pages have already left. */
  map_range(k, d, d + new_len, prot, owner);
  chunks_move(k, addr, d, old_len, prot == SIM_PROT_RW);
  advice_follow(k, addr, end, d, d + new_len);
  gaps_give(k, itree_extract(k, &k->vmas, addr, end));
  tables_unmap(k, addr, end);
  chunks_unreserve(k);
  *new_addr_out = d;
  return AS_OK;
}

as_status_t sim_kernel_mprotect(sim_kernel_t *k, sim_addr_t addr,
                                uint64_t length, sim_prot_t prot,
                                as_err_t *err) {
  k->calls.mprotect++;
  sim_addr_t  end, hole;
  as_status_t st = check_prot_owner("mprotect", prot, SIM_OWNER_BASELINE, err);
  if (st == AS_OK) {
    st = check_range(k, "mprotect", addr, length, &end, err);
  }
  if (st != AS_OK || addr == end) {
    return st;
  }
  /* Linux 6.1 mm/mprotect.c do_mprotect_pkey: a hole in the range is
   * ENOMEM, checked before anything changes. */
  if (!range_mapped(k, addr, end, 0, &hole)) {
    return as_err_set(err, AS_EINVAL,
                      "mprotect [0x%" PRIx64 ", 0x%" PRIx64
                      ") to %s: 0x%" PRIx64 " is not mapped",
                      addr, end, prot_name(prot), hole);
  }
  if ((st = pool_reserve(k, err)) != AS_OK) {
    return st;
  }
  reprotect(k, itree_extract(k, &k->vmas, addr, end), prot);
  /* Residency is untouched either way (Linux 6.1 mm/mprotect.c
   * mprotect_fixup changes protections only: it frees nothing and faults
   * nothing in); only the fast bits follow prot. */
  chunks_in_range(k, addr, end,
                  prot == SIM_PROT_RW ? CHUNK_PROT_RW : CHUNK_PROT_NONE);
  return AS_OK;
}

sim_addr_t sim_kernel_brk_current(const sim_kernel_t *k) {
  return k->brk_cur;
}

as_status_t sim_kernel_brk(sim_kernel_t *k, sim_addr_t new_break,
                           as_err_t *err) {
  k->calls.brk++;
  if (new_break < k->brk_start || new_break > k->limit) {
    return as_err_set(err, AS_EINVAL,
                      "brk to 0x%" PRIx64 ": outside [0x%" PRIx64 ", 0x%" PRIx64
                      "]",
                      new_break, k->brk_start, k->limit);
  }
  sim_addr_t  old_end = page_down(k, k->brk_cur + k->h.page_size - 1);
  sim_addr_t  new_end = page_down(k, new_break + k->h.page_size - 1);
  as_status_t st = pool_reserve(k, err);
  if (st != AS_OK) {
    return st;
  }
  if (new_end > old_end) {
    /* Linux 6.1 mm/mmap.c brk: fails if newbrk + PAGE_SIZE >
     * vm_start_gap(next), i.e. one page must stay free below the next
     * mapping. */
    inode_t *next = itree_first_end_after(&k->vmas, old_end);
    if (new_end > k->limit - k->h.page_size ||
        (next != NULL && new_end + k->h.page_size > next->start)) {
      return as_err_set(err, AS_ENOMEM,
                        "brk to 0x%" PRIx64 ": collides with the mapping at "
                        "0x%" PRIx64,
                        new_break, next ? next->start : k->limit);
    }
    map_range(k, old_end, new_end, SIM_PROT_RW, SIM_OWNER_LIBC_HEAP);
  } else if (new_end < old_end) {
    /* Linux 6.1.170 mm/mmap.c:237 brk -> do_brk_munmap (:3064): shrinking
     * unmaps. */
    unmap_range(k, new_end, old_end);
  }
  k->brk_cur = new_break;
  return AS_OK;
}

/* The touch path after a miss in kernel.h's inline fast test: zero length,
 * a block not in the cache, several bitmap words or several blocks.  A
 * range in one block that is all fast still costs no VMA lookup. */
as_status_t sim_kernel_touch_checked(sim_kernel_t *k, sim_addr_t addr,
                                     uint64_t length, as_err_t *err) {
  if (length == 0) {
    return AS_OK;
  }
  sim_addr_t last = addr + length - 1;
  uint64_t   key = addr >> CHUNK_SHIFT;
  if ((last >> CHUNK_SHIFT) == key && last >= addr) {
    chunk_t *c = chunk_find(k, key);
    unsigned p0 = (unsigned)((addr & (CHUNK_BYTES - 1)) >> k->h.page_shift);
    unsigned p1 = (unsigned)((last & (CHUNK_BYTES - 1)) >> k->h.page_shift);
    if (c != NULL &&
        (bits_all(c->fast, p0, p1) || touch_in_word(k, c, key, p0, p1))) {
      return AS_OK;
    }
  }
  return touch_slow(k, addr, length, err);
}

as_status_t sim_kernel_read(sim_kernel_t *k, sim_addr_t addr, uint64_t length,
                            as_err_t *err) {
  if (length == 0) {
    return AS_OK;
  }
  sim_addr_t last = addr + length - 1, bad;
  if (last < addr || last >= k->limit ||
      !range_mapped(k, page_down(k, addr), page_down(k, last) + k->h.page_size,
                    1, &bad)) {
    return touch_slow(k, addr, length, err); /* names what is wrong */
  }
  for (sim_addr_t a = page_down(k, addr); !k->cfg.zero_page && a <= last;
       a += k->h.page_size) {
    if (!sim_kernel_is_resident(k, a)) {
      as_status_t st = touch_slow(k, a, 1, err);
      if (st != AS_OK) {
        return st;
      }
    }
  }
  return AS_OK;
}

as_status_t sim_kernel_madvise(sim_kernel_t *k, sim_addr_t addr,
                               uint64_t length, sim_madv_t advice,
                               as_err_t *err) {
  k->calls.madvise++;
  sim_addr_t  end;
  as_status_t st = check_range(k, "madvise", addr, length, &end, err);
  if (st != AS_OK || addr == end) {
    return st;
  }
  if (advice != SIM_MADV_DONTNEED && advice != SIM_MADV_FREE &&
      advice != SIM_MADV_HUGEPAGE && advice != SIM_MADV_NOHUGEPAGE) {
    return as_err_set(err, AS_EINVAL, "madvise at 0x%" PRIx64 ": advice %d",
                      addr, (int)advice);
  }
  if ((st = check_mapped(k, "madvise", addr, end, err)) != AS_OK) {
    return st;
  }
  if (advice == SIM_MADV_HUGEPAGE || advice == SIM_MADV_NOHUGEPAGE) {
    /* Linux 6.1 mm/madvise.c madvise_behavior -> hugepage_madvise: the
     * VMAs get VM_HUGEPAGE or VM_NOHUGEPAGE; nothing becomes resident, and
     * a huge page already there stays (khugepaged alone would split or
     * collapse, and it is not modelled). */
    return advise_huge(k, addr, end, advice == SIM_MADV_HUGEPAGE, err);
  }
  if (advice == SIM_MADV_DONTNEED || k->cfg.memory_pressure) {
    /* DONTNEED: Linux 6.1 mm/madvise.c madvise_dontneed_single_vma ->
     * zap_page_range (6.1.170 mm/madvise.c:793).  FREE under pressure:
     * reclaim discards the clean lazyfree pages at once (6.1.170
     * mm/rmap.c:1668-1698). */
    chunks_in_range(k, addr, end,
                    advice == SIM_MADV_DONTNEED ? CHUNK_ZAP : CHUNK_DROP);
  } else {
    chunks_in_range(k, addr, end, CHUNK_LAZY);
  }
  return AS_OK;
}

as_status_t sim_kernel_mark_stack(sim_kernel_t *k, sim_addr_t addr,
                                  uint64_t length, as_err_t *err) {
  sim_addr_t  end;
  as_status_t st = check_range(k, "MAP_STACK", addr, length, &end, err);
  if (st != AS_OK || addr == end || !k->cfg.stack_nohugepage) {
    return st;
  }
  if ((st = check_mapped(k, "MAP_STACK", addr, end, err)) != AS_OK) {
    return st;
  }
  return advise_huge(k, addr, end, false, err);
}

void sim_kernel_reclaim_lazyfree(sim_kernel_t *k) {
  /* Linux 6.1 mm/rmap.c try_to_unmap_one: a clean lazyfree page is
   * discarded and MM_ANONPAGES drops (6.1.170 mm/rmap.c:1692-1697). */
  if (k->lazy_pages == 0) {
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < k->slot_cap; i++) {
    if (k->slots[i].key != SLOT_EMPTY) {
      k->scan_keys[n++] = k->slots[i].key;
    }
  }
  for (size_t i = 0; i < n; i++) {
    chunk_t *c = chunk_lookup(k, k->scan_keys[i]);
    uint64_t mask[CHUNK_WORDS];
    memcpy(mask, c->lazy, sizeof mask);
    chunk_drop(k, c, mask, false);
  }
  table_maybe_shrink(k);
}

uint64_t sim_kernel_rss_owner_bytes(const sim_kernel_t *k, sim_owner_t owner) {
  return (unsigned)owner < SIM_OWNER_COUNT
             ? k->owner_pages[owner] * k->h.page_size
             : 0;
}

void sim_kernel_calls(const sim_kernel_t *k, sim_kernel_calls_t *out) {
  *out = k->calls;
}

uint64_t sim_kernel_lazyfree_bytes(const sim_kernel_t *k) {
  return k->lazy_pages * k->h.page_size;
}

uint64_t sim_kernel_mapped_bytes(const sim_kernel_t *k) {
  return k->mapped_bytes;
}

bool sim_kernel_is_resident(const sim_kernel_t *k, sim_addr_t addr) {
  const chunk_t *c = chunk_lookup(k, addr >> CHUNK_SHIFT);
  if (c == NULL) {
    return false;
  }
  unsigned p = (unsigned)((addr & (CHUNK_BYTES - 1)) >> k->h.page_shift);
  return (c->resident[p >> 6] >> (p & 63)) & 1;
}

bool sim_kernel_resident_owner(const sim_kernel_t *k, sim_addr_t addr,
                               sim_owner_t *owner) {
  const chunk_t *c = chunk_lookup(k, addr >> CHUNK_SHIFT);
  if (c == NULL) {
    return false;
  }
  unsigned p = (unsigned)((addr & (CHUNK_BYTES - 1)) >> k->h.page_shift);
  if (!((c->resident[p >> 6] >> (p & 63)) & 1)) {
    return false;
  }
  *owner = (sim_owner_t)c->owner[p];
  return true;
}

/* ---- Invariant checker -------------------------------------------------- */

typedef struct walk_s walk_t;
struct walk_s {
  const sim_kernel_t *k;
  sim_addr_t          prev_end;   /* end of the previous interval */
  unsigned            prev_prot;  /* its prot */
  unsigned            prev_owner; /* its owner */
  size_t              count;      /* intervals seen */
  uint64_t            bytes;      /* their total length */
  inode_t           **order;      /* the intervals in address order */
};

/* Checks one treap's shape and order; fills w in address order. */
static as_status_t walk_tree(const inode_t *t, walk_t *w, int gaps,
                             as_err_t *err) {
  if (t == NULL) {
    return AS_OK;
  }
  const char *tree = gaps ? "gap tree" : "VMA tree";
  if ((t->left && t->left->prio > t->prio) ||
      (t->right && t->right->prio > t->prio)) {
    return as_err_set(err, AS_EINVAL, "%s: heap order broken at 0x%" PRIx64,
                      tree, t->start);
  }
  uint64_t m = t->end - t->start;
  if (t->left && t->left->max_len > m) {
    m = t->left->max_len;
  }
  if (t->right && t->right->max_len > m) {
    m = t->right->max_len;
  }
  if (m != t->max_len) {
    return as_err_set(err, AS_EINVAL, "%s: max_len wrong at 0x%" PRIx64, tree,
                      t->start);
  }
  as_status_t st = walk_tree(t->left, w, gaps, err);
  if (st != AS_OK) {
    return st;
  }
  const sim_kernel_t *k = w->k;
  if (t->start >= t->end || (t->start | t->end) & (k->h.page_size - 1) ||
      (w->count > 0 && t->start < w->prev_end)) {
    return as_err_set(err, AS_EINVAL,
                      "%s: interval [0x%" PRIx64 ", 0x%" PRIx64
                      ") empty, unaligned or overlapping",
                      tree, t->start, t->end);
  }
  if (w->count > 0 && t->start == w->prev_end && t->prot == w->prev_prot &&
      t->owner == w->prev_owner) {
    return as_err_set(err, AS_EINVAL,
                      "%s: [0x%" PRIx64 ", ...) not merged with its equal "
                      "neighbour",
                      tree, t->start);
  }
  if (gaps ? (t->start < k->low || t->end > k->top || t->prot || t->owner)
           : (t->prot > SIM_PROT_RW || t->owner >= SIM_OWNER_COUNT)) {
    return as_err_set(err, AS_EINVAL, "%s: bad bounds or payload at 0x%" PRIx64,
                      tree, t->start);
  }
  w->order[w->count++] = (inode_t *)t;
  w->prev_end = t->end;
  w->prev_prot = t->prot;
  w->prev_owner = t->owner;
  w->bytes += t->end - t->start;
  return walk_tree(t->right, w, gaps, err);
}

/* The gaps must be exactly [low, top) minus the VMAs. */
static as_status_t check_complement(const sim_kernel_t *k, inode_t **vmas,
                                    size_t nv, inode_t **gaps, size_t ng,
                                    as_err_t *err) {
  size_t     gi = 0;
  sim_addr_t pos = k->low;
  for (size_t vi = 0; vi <= nv && pos < k->top; vi++) {
    sim_addr_t next = vi < nv ? vmas[vi]->start : k->top;
    sim_addr_t vend = vi < nv ? vmas[vi]->end : k->top;
    if (next > k->top) {
      next = k->top;
    }
    if (next > pos) {
      if (gi >= ng || gaps[gi]->start != pos || gaps[gi]->end != next) {
        return as_err_set(err, AS_EINVAL,
                          "gap tree: free range [0x%" PRIx64 ", 0x%" PRIx64
                          ") missing or different",
                          pos, next);
      }
      gi++;
    }
    if (vend > pos) {
      pos = vend;
    }
  }
  if (gi != ng) {
    return as_err_set(err, AS_EINVAL, "gap tree: %zu extra gaps", ng - gi);
  }
  return AS_OK;
}

static as_status_t check_chunks(const sim_kernel_t *k, as_err_t *err) {
  uint64_t rss = 0, lazy = 0, owners[SIM_OWNER_COUNT] = {0};
  size_t   count = 0;
  itree_t  vmas = k->vmas; /* a copy: itree_find may update its hint */
  for (size_t i = 0; i < k->slot_cap; i++) {
    const chunk_t *c = k->slots[i].chunk;
    if (k->slots[i].key == SLOT_EMPTY) {
      continue;
    }
    count++;
    if (c->key != k->slots[i].key || chunk_lookup(k, c->key) != c) {
      return as_err_set(err, AS_EINVAL,
                        "residency table: block 0x%" PRIx64 " misplaced",
                        k->slots[i].key << CHUNK_SHIFT);
    }
    uint32_t n = 0;
    for (unsigned p = 0; p < CHUNK_MAX_PAGES; p++) {
      sim_addr_t addr =
          (c->key << CHUNK_SHIFT) + ((sim_addr_t)p << k->h.page_shift);
      unsigned w = p >> 6;
      uint64_t bit = UINT64_C(1) << (p & 63);
      int      res = (c->resident[w] & bit) != 0, lz = (c->lazy[w] & bit) != 0;
      int      fast = (c->fast[w] & bit) != 0;
      if (p >= k->chunk_pages) {
        if (res || lz || fast) {
          return as_err_set(err, AS_EINVAL,
                            "block 0x%" PRIx64 ": bit %u beyond the pages",
                            c->key << CHUNK_SHIFT, p);
        }
        continue;
      }
      if (!res) {
        if (lz || fast) {
          return as_err_set(err, AS_EINVAL,
                            "page 0x%" PRIx64 ": lazy or fast but not resident",
                            addr);
        }
        continue;
      }
      const inode_t *v = itree_find(&vmas, addr);
      if (v == NULL || v->owner != c->owner[p] ||
          fast != (v->prot == SIM_PROT_RW && !lz)) {
        return as_err_set(err, AS_EINVAL, "page 0x%" PRIx64 ": resident but %s",
                          addr,
                          v == NULL                 ? "not mapped"
                          : v->owner != c->owner[p] ? "of another owner"
                                                    : "with a wrong fast bit");
      }
      n++;
      lazy += (uint64_t)lz;
      owners[c->owner[p]]++;
    }
    if (n == 0 || n != c->nresident) {
      return as_err_set(err, AS_EINVAL,
                        "block 0x%" PRIx64 ": %u resident pages, counted %u",
                        c->key << CHUNK_SHIFT, n, c->nresident);
    }
    rss += n;
  }
  if (count != k->slot_count) {
    return as_err_set(err, AS_EINVAL,
                      "residency table: %zu chunks, counted %zu", count,
                      k->slot_count);
  }
  if (rss != k->h.rss_pages || lazy != k->lazy_pages) {
    return as_err_set(err, AS_EINVAL,
                      "rss %" PRIu64 " / lazyfree %" PRIu64
                      " pages, counters say %" PRIu64 " / %" PRIu64,
                      rss, lazy, k->h.rss_pages, k->lazy_pages);
  }
  for (unsigned o = 0; o < SIM_OWNER_COUNT; o++) {
    if (owners[o] != k->owner_pages[o]) {
      return as_err_set(
          err, AS_EINVAL, "owner %s: %" PRIu64 " pages, counter says %" PRIu64,
          sim_owner_name((sim_owner_t)o), owners[o], k->owner_pages[o]);
    }
  }
  return AS_OK;
}

as_status_t sim_kernel_check_invariants(const sim_kernel_t *k, as_err_t *err) {
  as_status_t st = AS_OK;
  walk_t      wv = {.k = k}, wg = {.k = k};
  wv.order = malloc((k->vmas.count + 1) * sizeof *wv.order);
  wg.order = malloc((k->gaps.count + 1) * sizeof *wg.order);
  if (wv.order == NULL || wg.order == NULL) {
    st = as_err_set(err, AS_ENOMEM, "check_invariants: out of memory");
    goto done;
  }
  if ((st = walk_tree(k->vmas.root, &wv, 0, err)) != AS_OK ||
      (st = walk_tree(k->gaps.root, &wg, 1, err)) != AS_OK) {
    goto done;
  }
  if (wv.count != k->vmas.count || wg.count != k->gaps.count) {
    st = as_err_set(err, AS_EINVAL, "tree sizes %zu/%zu, counted %zu/%zu",
                    wv.count, wg.count, k->vmas.count, k->gaps.count);
    goto done;
  }
  if (wv.bytes != k->mapped_bytes) {
    st = as_err_set(err, AS_EINVAL,
                    "mapped %" PRIu64 " bytes, counter says %" PRIu64, wv.bytes,
                    k->mapped_bytes);
    goto done;
  }
  if ((st = check_complement(k, wv.order, wv.count, wg.order, wg.count, err)) !=
      AS_OK) {
    goto done;
  }
  if (k->brk_cur < k->brk_start) {
    st = as_err_set(err, AS_EINVAL, "brk 0x%" PRIx64 " below its start",
                    k->brk_cur);
    goto done;
  }
  st = check_chunks(k, err);
done:
  free(wv.order);
  free(wg.order);
  return st;
}
