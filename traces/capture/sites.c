/* traces/capture/sites.c -- call sites: up to g_stacks return addresses per
 * allocation, deduplicated into a table of sites, each defined once on the
 * stream with its frames as module + offset (capture_wire.h MODULE and SITE
 * records), so `allocsim capture` never sees an address it would have to
 * resolve after the process is gone.
 *
 * Unwinding: libunwind's unw_backtrace (Debian libunwind-dev 1.6.2), local
 * unwinding from .eh_frame, which glibc's backtrace() also does but through
 * libgcc_s, which it dlopens -- and dlopen mallocs -- on its first call in
 * every process, and whose _Unwind_Find_FDE takes a lock that a signal
 * handler of the same thread can hold.  libunwind keeps its state in memory
 * it mmaps itself (its mempool), documents unw_backtrace as
 * async-signal-safe for the local address space, and is what heaptrack's
 * recorder uses in its malloc hook for the same reasons (heaptrack v1.4.0
 * src/track/trace_libunwind.cpp: unw_set_caching_policy(UNW_CACHE_PER_THREAD)
 * and one warm-up unw_backtrace at start-up).  So does capture_sites_init.
 *
 * The table: SITE_SLOTS slots in one mmap'd array, open addressing on a
 * 64-bit hash of the kept addresses, no lock.  A slot is claimed by a CAS of
 * its key from 0; the claimer takes the next site id, sends the site's
 * MODULE records (modules not sent before) and its SITE record, then
 * publishes the id.  A thread that finds the key with no id yet waits for it
 * (bounded; then it records no site), so a site's definition always has a
 * lower seq than every allocation that names it.  Modules are found with
 * dl_iterate_phdr, which takes ld.so's recursive lock and does not allocate;
 * the module table is guarded by a spinlock, and a signal handler that
 * allocates while its thread holds it gets no site (t_self.in_site).
 */
#include <link.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "capture_int.h"

#define SITE_SLOTS   ((size_t)1 << 16) /* 1 MiB of table */
#define SITE_PROBES  64
#define MODULES_MAX  1024
#define SKIP_MAX     8 /* frames of this library above the caller */
#define PUBLISH_SPIN 100000

typedef struct site_slot_s site_slot_t;
struct site_slot_s {
  _Atomic uint64_t key; /* hash of the frames, 0 = empty */
  atomic_uint      id;  /* 0 until the definition was sent */
  uint32_t         pad;
};

typedef struct module_s module_t;
struct module_s {
  uintptr_t base; /* dlpi_addr */
  uintptr_t lo;   /* first byte of its first PT_LOAD segment */
};

uint32_t            g_stacks;
static site_slot_t *g_table;
static atomic_uint  g_next_site = 1;
static atomic_flag  g_mod_lock = ATOMIC_FLAG_INIT;
static module_t     g_mod[MODULES_MAX];
static uint32_t     g_nmod;
static uintptr_t    g_self_lo, g_self_hi; /* this library's code */
static char         g_exe[256];           /* the main program's path */
static size_t       g_exe_len;

/* ---- Modules ------------------------------------------------------------ */

typedef struct find_s find_t;
struct find_s {
  uintptr_t   addr;
  uintptr_t   base, lo, hi;
  const char *name;
  bool        found;
};

static int find_cb(struct dl_phdr_info *info, size_t size, void *user) {
  (void)size;
  find_t   *f = user;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  bool      in = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD)
      continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    if (a < lo)
      lo = a;
    if (a + ph->p_memsz > hi)
      hi = a + ph->p_memsz;
    if (f->addr >= a && f->addr < a + ph->p_memsz)
      in = true;
  }
  if (!in)
    return 0;
  f->base = info->dlpi_addr;
  f->lo = lo;
  f->hi = hi;
  f->name = info->dlpi_name;
  f->found = true;
  return 1;
}

/* The module id of addr (sending its MODULE record the first time), and
 * addr's offset from the module's base; false if no object holds addr or
 * the table is full.  Called with g_mod_lock held. */
static bool module_of(uintptr_t addr, uint32_t *id, uint64_t *off) {
  find_t f = {.addr = addr};
  capture_dl_walk_enter();
  dl_iterate_phdr(find_cb, &f);
  capture_dl_walk_exit();
  if (!f.found)
    return false;
  *off = addr - f.base;
  for (uint32_t i = 0; i < g_nmod; i++)
    if (g_mod[i].base == f.base && g_mod[i].lo == f.lo) {
      *id = i + 1;
      return true;
    }
  if (g_nmod == MODULES_MAX)
    return false;
  g_mod[g_nmod] = (module_t){f.base, f.lo};
  *id = ++g_nmod;
  const char *path = f.name;
  size_t      n = path != NULL ? strlen(path) : 0;
  if (n == 0) { /* the main program: ld.so names it "" */
    path = g_exe;
    n = g_exe_len;
  }
  if (n > 255)
    n = 255;
  cap_rec_t r = {
      .op = CAPTURE_OP_MODULE, .x = *id, .text = path, .text_len = n};
  capture_emit(&r);
  return true;
}

/* ---- Sites -------------------------------------------------------------- */

static uint64_t hash_frames(void *const *pc, int n) {
  uint64_t h = 0x9E3779B97F4A7C15u ^ (uint64_t)n;
  for (int i = 0; i < n; i++) {
    h ^= (uint64_t)(uintptr_t)pc[i];
    h *= 0xff51afd7ed558ccdu; /* MurmurHash3's fmix64 constants */
    h ^= h >> 33;
  }
  h *= 0xc4ceb9fe1a85ec53u;
  h ^= h >> 33;
  return h != 0 ? h : 1;
}

/* Sends the definition of site id (its modules first).  A frame no loaded
 * object holds is left out; a site with none left is defined as module 0
 * (unknown) at offset 0. */
static void define_site(uint32_t id, void *const *pc, int n) {
  uint8_t  blob[CAPTURE_BLOB_MAX], *p = blob;
  unsigned kept = 0;
  while (atomic_flag_test_and_set_explicit(&g_mod_lock, memory_order_acquire))
    sched_yield();
  for (int i = 0; i < n; i++) {
    uint32_t mod;
    uint64_t off;
    if (!module_of((uintptr_t)pc[i], &mod, &off))
      continue;
    p = capture_put_varint(p, mod);
    p = capture_put_varint(p, off);
    kept++;
  }
  atomic_flag_clear_explicit(&g_mod_lock, memory_order_release);
  if (kept == 0) {
    /* Nothing to say where: the unknown module 0 at offset 0. */
    p = capture_put_varint(p, 0);
    p = capture_put_varint(p, 0);
  }
  cap_rec_t r = {.op = CAPTURE_OP_SITE,
                 .x = id,
                 .text = (const char *)blob,
                 .text_len = (size_t)(p - blob)};
  capture_emit(&r);
}

uint32_t capture_site_here(void) {
  if (g_stacks == 0 || g_table == NULL || t_self.in_site ||
      !atomic_load_explicit(&g_recording, memory_order_relaxed))
    return 0;
  t_self.in_site = 1;
  void *pc[CAPTURE_FRAMES_MAX + SKIP_MAX];
  int   got = unw_backtrace(pc, (int)g_stacks + SKIP_MAX);
  int   skip = 0;
  while (skip < got && skip < SKIP_MAX && (uintptr_t)pc[skip] >= g_self_lo &&
         (uintptr_t)pc[skip] < g_self_hi)
    skip++;
  int n = got - skip;
  if (n > (int)g_stacks)
    n = (int)g_stacks;
  uint32_t id = 0;
  if (n > 0) {
    uint64_t h = hash_frames(pc + skip, n);
    for (size_t k = 0; k < SITE_PROBES; k++) {
      site_slot_t *sl = &g_table[(h + k) & (SITE_SLOTS - 1)];
      uint64_t     key = atomic_load_explicit(&sl->key, memory_order_acquire);
      if (key == 0) {
        uint64_t expect = 0;
        if (atomic_compare_exchange_strong(&sl->key, &expect, h)) {
          uint32_t mine = atomic_fetch_add(&g_next_site, 1);
          define_site(mine, pc + skip, n);
          atomic_store_explicit(&sl->id, mine, memory_order_release);
          id = mine;
          break;
        }
        key = expect;
      }
      if (key != h)
        continue;
      for (unsigned spin = 0; spin < PUBLISH_SPIN; spin++) {
        id = atomic_load_explicit(&sl->id, memory_order_acquire);
        if (id != 0)
          break;
        sched_yield();
      }
      break;
    }
  }
  t_self.in_site = 0;
  return id;
}

/* ---- Start-up, fork, own memory ------------------------------------------ */

void capture_sites_init(uint32_t stacks) {
  g_stacks = stacks > CAPTURE_FRAMES_MAX ? CAPTURE_FRAMES_MAX : stacks;
  if (g_stacks == 0)
    return;
  void *m = capture_own_table(SITE_SLOTS * sizeof(site_slot_t));
  if (m == NULL) {
    g_stacks = 0;
    return;
  }
  g_table = m;
  ssize_t n = readlink("/proc/self/exe", g_exe, sizeof g_exe - 1);
  g_exe_len = n > 0 ? (size_t)n : 0;
  g_exe[g_exe_len] = '\0';
  find_t f = {.addr = (uintptr_t)&capture_site_here};
  dl_iterate_phdr(find_cb, &f);
  if (f.found) {
    g_self_lo = f.lo;
    g_self_hi = f.hi;
  }
  /* libunwind sets itself up on its first unwind (heaptrack does the
   * same); whatever it allocates then is the library's, not the
   * program's. */
  t_self.internal++;
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
  void *warm[4];
  unw_backtrace(warm, 4);
  t_self.internal--;
}

void capture_sites_atfork_child(void) {
  /* The child's trace is new: its sites and modules are defined again. */
  if (g_table == NULL)
    return;
  memset(g_table, 0, SITE_SLOTS * sizeof(site_slot_t));
  atomic_store(&g_next_site, 1);
  g_nmod = 0;
  atomic_flag_clear(&g_mod_lock);
}

uint64_t capture_sites_own_rss(void) {
  return g_table != NULL
             ? capture_resident(g_table, SITE_SLOTS * sizeof(site_slot_t))
             : 0;
}
