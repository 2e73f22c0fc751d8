/* tests/validation/test_glibc_differential.c -- the glibc model against the
 * real glibc of this machine, chunk by chunk.
 *
 * One seeded sequence of malloc / calloc / posix_memalign / realloc / free /
 * malloc_trim(0) calls (the generator of the scratch harness that first
 * matched them, /tmp/gdbg/real/gen.h) runs twice:
 *   real   in a fresh process: this executable re-executes itself
 *          (/proc/self/exe) with ALLOCSIM_GLIBC_DIFF_CHILD set, so main()
 *          runs the sequence through the real malloc before cmocka, stdio or
 *          anything else has allocated, with the MALLOC_* / GLIBC_TUNABLES
 *          settings of the configuration in its environment;
 *   model  in this process, as trace events on a fresh simulated kernel.
 * At every checkpoint both sides take a snapshot and the test asserts that
 * they are equal:
 *   - every live object: in the brk heap at the same offset from the initial
 *     break (pointer - sbrk(0) at start), or mmapped; and its chunksize();
 *   - brk growth (sbrk(0) - start);
 *   - keepcost (mallinfo2: chunksize of the main arena's top);
 *   - ordblks - 1 (free chunks in unsorted/small/large bins), smblks and
 *     fsmblks (fastbin chunks and bytes), hblkhd (mmapped bytes);
 *   - the main thread's 64 tcache counts (read from the real
 *     tcache_perthread_struct, found in the brk heap or, when
 *     mmap_threshold <= 656 mapped it, among one-page mappings).
 * Configurations (model option = the real run's environment): defaults,
 * mmap_threshold=512, top_pad=0, tcache_count=0 (the brief), and mxfast=0,
 * trim_threshold=0, mmap_max=0, tcache_max=100, a combination and
 * hugetlb=1 (under THP=madvise: the model's break then starts where the
 * real one did modulo 2 MiB, as it does in every configuration); each with
 * its own seed, 300,000 calls, a snapshot every 30,000.  About 0.6 s of CPU
 * per configuration in a Release build (2 CPUs).
 *
 * Not here: RSS (pages touched depend on the program's writes, which the
 * real side skips for speed), threads and arenas.
 *
 * Requirements: a glibc whose version the model offers (run as that
 * version; others skip: scripts/measure/glibc_differential.sh links this
 * test against another glibc), Linux (/proc/self/exe), no AddressSanitizer
 * (it replaces malloc: the test skips).
 *
 * Sections
 *   The sequence                 Snapshots
 *   Real side (the child)        Parent: running the child
 *   Parent: the model            Comparison
 *   Tests
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <malloc.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "models/glibc.h"
#include "sim/kernel.h"
#include "traces/machine.h"

#include "../helpers/asan.h"

#define CHILD_ENV "ALLOCSIM_GLIBC_DIFF_CHILD"

/* ---- The sequence -------------------------------------------------------- */

#define NIDS        4000   /* object ids 0..NIDS-1 */
#define STEPS       300000 /* calls per configuration */
#define CHECK_EVERY 30000  /* snapshot every this many calls */
#define NSNAP       (STEPS / CHECK_EVERY)
_Static_assert(STEPS % CHECK_EVERY == 0, "the last call ends a snapshot");
#define TRIM_EVERY 20000 /* malloc_trim(0) on the last call of each block */

typedef enum dop_e {
  DOP_MALLOC,
  DOP_FREE,
  DOP_REALLOC,
  DOP_CALLOC,
  DOP_MEMALIGN,
  DOP_TRIM
} dop_t;

typedef struct gen_s {
  uint64_t rng;
  int      big;        /* the 2% large: 60,000-459,999 B, not 60,000-119,999 */
  uint64_t size[NIDS]; /* current request size; 0 = not live */
} gen_t;

typedef struct gop_s {
  dop_t    op;
  uint64_t id, size, align;
  uint64_t prev_size; /* realloc/free: the size being replaced */
} gop_t;

/* A 64-bit LCG (Knuth's MMIX constants); the high half, modulo bound. */
static uint64_t gen_below(gen_t *g, uint64_t bound) {
  g->rng =
      g->rng * UINT64_C(6364136223846793005) + UINT64_C(1442695040888963407);
  return (g->rng >> 32) % bound;
}

/* Fills *o with call number step.  A dead id is allocated (55% 1-256 B, 33%
 * 256-4255 B, 10% 4-64 KB, 2% large; 10% calloc, 10% posix_memalign with
 * alignment 32 << 0..7), a live one realloc'ed (1 in 5, to 1-20000 or
 * 1-200000 B) or freed. */
static void gen_next(gen_t *g, int step, gop_t *o) {
  memset(o, 0, sizeof *o);
  if (step % TRIM_EVERY == TRIM_EVERY - 1) {
    o->op = DOP_TRIM;
    return;
  }
  uint64_t id = gen_below(g, NIDS);
  o->id = id;
  o->prev_size = g->size[id];
  if (g->size[id] == 0) {
    uint64_t kind = gen_below(g, 100), sz;
    if (kind < 55)
      sz = 1 + gen_below(g, 256);
    else if (kind < 88)
      sz = 256 + gen_below(g, 4000);
    else if (kind < 98)
      sz = 4096 + gen_below(g, 60000);
    else
      sz = g->big ? 60000 + gen_below(g, 400000) : 60000 + gen_below(g, 60000);
    uint64_t k = gen_below(g, 10);
    o->op = k == 0 ? DOP_CALLOC : k == 1 ? DOP_MEMALIGN : DOP_MALLOC;
    if (o->op == DOP_MEMALIGN)
      o->align = UINT64_C(32) << gen_below(g, 8);
    o->size = sz;
    g->size[id] = sz;
    return;
  }
  if (gen_below(g, 5) == 0) {
    uint64_t lim = gen_below(g, 2) ? 200000 : 20000;
    o->op = DOP_REALLOC;
    o->size = 1 + gen_below(g, lim);
    g->size[id] = o->size;
    return;
  }
  o->op = DOP_FREE;
  g->size[id] = 0;
}

/* ---- Snapshots ----------------------------------------------------------- */

#define TCACHE_BINS 64 /* glibc 2.36 malloc.c:309 TCACHE_MAX_BINS */
#define NFASTBINS   10 /* glibc 2.36 malloc.c:1748; chunk sizes 32..176 */

typedef enum kind_e { K_NONE, K_HEAP, K_MMAP, K_ELSEWHERE } kind_t;
typedef enum tc_where_e { TC_NONE, TC_HEAP, TC_MAPPED } tc_where_t;

typedef struct dobj_s {
  uint64_t off;  /* K_HEAP: user pointer - initial break */
  uint64_t size; /* chunksize() */
  uint32_t kind; /* kind_t */
  uint32_t pad;
} dobj_t;

typedef struct dsnap_s {
  uint64_t step;     /* calls made */
  uint64_t base_mod; /* initial break mod 2 MiB: the model's break starts
                        there too (with hugetlb=1 glibc rounds the break
                        to 2 MiB boundaries) */
  uint64_t brk;      /* break - initial break */
  uint64_t keepcost;
  uint64_t binned; /* mallinfo2 ordblks - 1 (the 1 is top) */
  uint64_t smblks, fsmblks;
  uint64_t hblks; /* real only: mallinfo2 also counts a mapped
                     tcache struct, which the model does not expose */
  uint64_t hblkhd;
  uint64_t tcache_found; /* real: where the struct was found (tc_where_t) */
  uint16_t tcache[TCACHE_BINS];
  dobj_t   obj[NIDS];
} dsnap_t;

/* ---- Real side (the child) -----------------------------------------------
 * Runs before anything else in main(); allocates nothing itself (no stdio:
 * snapshots go to a static buffer, then write(2) to fd 1). */

static dsnap_t child_snaps[NSNAP];
static void   *child_ptr[NIDS];
static gen_t   child_gen;

/* glibc 2.36 malloc.c, "malloc_chunk details": the size word sits 8 bytes
 * below the user pointer (chunk2mem adds CHUNK_HDR_SZ 16, malloc.c:1295);
 * bit 0 is PREV_INUSE, bit 1 IS_MMAPPED, bits 0-2 are SIZE_BITS. */
static uint64_t real_size_word(const void *p) {
  uint64_t w;
  memcpy(&w, (const char *)p - 8, sizeof w);
  return w;
}

/* Whether mem is the user pointer of a live object, or the start of an
 * mmapped object's mapping + 16: posix_memalign leaves the original header
 * there (4096 | IS_MMAPPED for a one-page mapping) and the lead size in the
 * object's prev_size (_int_memalign, malloc.c:4991-4996). */
static int child_is_object(const char *mem) {
  for (int i = 0; i < NIDS; i++) {
    const char *p = child_ptr[i];
    if (p == mem)
      return 1;
    if (p != NULL && (real_size_word(p) & 2) != 0) {
      uint64_t lead;
      memcpy(&lead, p - 16, sizeof lead);
      if (p - lead == mem)
        return 1;
    }
  }
  return 0;
}

/* Whether the 640 bytes at mem read as a tcache_perthread_struct (glibc 2.36
 * malloc.c:3132-3136: uint16_t counts[64], then tcache_entry *entries[64]):
 * each count is 0 exactly when its list head is NULL, and every head points
 * into the heap [lo, hi) at a 16-aligned user pointer.  A free chunk of the
 * same size fails: a tcache'd one starts with a mangled next pointer and the
 * random tcache_key (tcache_put, malloc.c), which make counts[0..7] non-zero
 * while its stale entries area is not such a list. */
static int looks_like_tcache(const char *mem, const char *lo, const char *hi) {
  uint16_t  counts[TCACHE_BINS];
  uintptr_t entries[TCACHE_BINS];
  memcpy(counts, mem, sizeof counts);
  memcpy(entries, mem + sizeof counts, sizeof entries);
  for (int i = 0; i < TCACHE_BINS; i++) {
    if ((counts[i] == 0) != (entries[i] == 0))
      return 0;
    if (entries[i] != 0 &&
        (entries[i] % 16 != 0 || entries[i] < (uintptr_t)lo ||
         entries[i] >= (uintptr_t)hi))
      return 0;
  }
  return 1;
}

/* The main thread's tcache_perthread_struct: the one in-use 656-byte chunk
 * of the brk heap [first, top) that is no object and reads as one (the first
 * chunk, unless calloc or posix_memalign came before the first malloc: in
 * 2.36 only __libc_malloc, malloc.c:3279-3341, runs tcache_init, 3228-3261).
 * NULL if not in the brk heap (mmap_threshold <= 656 maps it) or not unique. */
static const char *find_tcache(const char *first, const char *top) {
  const char *found = NULL;
  int         n = 0;
  for (const char *c = first; c < top;) {
    uint64_t sz = real_size_word(c + 16) & ~UINT64_C(7);
    if (sz < 32 || sz > (uint64_t)(top - c))
      return NULL; /* not a chunk boundary: give up */
    const char *next = c + sz;
    int         in_use = (int)(real_size_word(next + 16) & 1); /* PREV_INUSE */
    if (sz == 656 && in_use && !child_is_object(c + 16) &&
        looks_like_tcache(c + 16, first, top)) {
      found = c + 16;
      n++;
    }
    c = next;
  }
  return n == 1 ? found : NULL;
}

/* The tcache struct when mmap_threshold <= 656 made tcache_init map it
 * (sysmalloc_mmap): a one-page anonymous mapping (/proc/self/maps, read
 * without allocating) whose chunk header says 4096 | IS_MMAPPED and whose
 * body reads as the struct, and that is no object.  NULL unless unique. */
static char child_maps[1 << 20];

static const char *find_mapped_tcache(const char *first, const char *top) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return NULL;
  size_t len = 0;
  for (;;) {
    ssize_t n = read(fd, child_maps + len, sizeof child_maps - 1 - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  close(fd);
  child_maps[len] = '\0';
  const char *found = NULL;
  int         nfound = 0;
  for (char *line = child_maps; *line != '\0';) {
    char *eol = strchr(line, '\n');
    if (eol != NULL)
      *eol = '\0';
    /* "start-end perms offset dev inode [path]"; anonymous: no path. */
    char     *q;
    uintptr_t lo = (uintptr_t)strtoull(line, &q, 16);
    uintptr_t hi = *q == '-' ? (uintptr_t)strtoull(q + 1, &q, 16) : 0;
    int       fields = 0;
    for (; *q != '\0'; q++)
      if (q[0] == ' ' && q[1] != ' ' && q[1] != '\0')
        fields++;
    /* Adjacent anonymous mappings merge, so walk every page of each. */
    if (fields == 4 && strncmp(strchr(line, ' ') + 1, "rw", 2) == 0)
      for (uintptr_t pg = lo; pg + 4096 <= hi; pg += 4096) {
        const char *mem = (const char *)pg + 16;
        if (real_size_word(mem) == (4096 | 2) && !child_is_object(mem) &&
            looks_like_tcache(mem, first, top)) {
          found = mem;
          nfound++;
        }
      }
    if (eol == NULL)
      break;
    line = eol + 1;
  }
  return nfound == 1 ? found : NULL;
}

static void child_snapshot(dsnap_t *s, uint64_t step, const char *base) {
  const char *brk = sbrk(0);
  /* glibc 2.36 malloc.c int_mallinfo: ordblks counts top (nblocks = 1) and
   * every chunk in bins 1..NBINS-1; smblks/fsmblks the fastbins; keepcost is
   * chunksize(main_arena.top); hblks/hblkhd are mp_.n_mmaps/mmapped_mem. */
  struct mallinfo2 mi = mallinfo2();
  s->step = step;
  s->base_mod = (uintptr_t)base & (SIM_KERNEL_THP_BYTES - 1);
  s->brk = (uint64_t)(brk - base);
  s->keepcost = mi.keepcost;
  s->binned = mi.ordblks - 1;
  s->smblks = mi.smblks;
  s->fsmblks = mi.fsmblks;
  s->hblks = mi.hblks;
  s->hblkhd = mi.hblkhd;
  const char *first = (const char *)(((uintptr_t)base + 15) & ~(uintptr_t)15);
  const char *tc = find_tcache(first, brk - mi.keepcost);
  s->tcache_found = tc != NULL ? TC_HEAP : TC_NONE;
  if (tc == NULL && mi.hblks > 0) {
    tc = find_mapped_tcache(first, brk - mi.keepcost);
    s->tcache_found = tc != NULL ? TC_MAPPED : TC_NONE;
  }
  if (tc != NULL)
    memcpy(s->tcache, tc, sizeof s->tcache);
  for (int i = 0; i < NIDS; i++) {
    dobj_t     *r = &s->obj[i];
    const char *p = child_ptr[i];
    memset(r, 0, sizeof *r);
    if (p == NULL)
      continue;
    uint64_t w = real_size_word(p);
    r->size = w & ~UINT64_C(7);
    if (w & 2)
      r->kind = K_MMAP;
    else if (p >= base && p < brk) {
      r->kind = K_HEAP;
      r->off = (uint64_t)(p - base);
    } else
      r->kind = K_ELSEWHERE;
  }
}

static int diff_child(const char *spec) {
  char    *end;
  uint64_t seed = strtoull(spec, &end, 0);
  if (*end != ':')
    return 2;
  child_gen.rng = seed;
  child_gen.big = (int)strtol(end + 1, &end, 10);
  /* Nothing may have used the main arena yet: the offsets are from the
   * initial break and the first chunk must be the tcache. */
  struct mallinfo2 mi = mallinfo2();
  if (mi.arena != 0 || mi.hblks != 0)
    return 4;
  const char *base = sbrk(0);
  int         ns = 0;
  for (int s = 0; s < STEPS; s++) {
    gop_t o;
    gen_next(&child_gen, s, &o);
    void *p = NULL;
    switch (o.op) {
    case DOP_MALLOC:
      p = child_ptr[o.id] = malloc(o.size);
      break;
    case DOP_CALLOC:
      p = child_ptr[o.id] = calloc(1, o.size);
      break;
    case DOP_MEMALIGN:
      if (posix_memalign(&p, o.align, o.size) != 0)
        p = NULL;
      child_ptr[o.id] = p;
      break;
    case DOP_REALLOC:
      p = child_ptr[o.id] = realloc(child_ptr[o.id], o.size);
      break;
    case DOP_FREE:
      free(child_ptr[o.id]);
      child_ptr[o.id] = NULL;
      p = &child_ptr; /* not an allocation */
      break;
    case DOP_TRIM:
      malloc_trim(0);
      p = &child_ptr;
      break;
    }
    if (p == NULL)
      return 3;
    if ((s + 1) % CHECK_EVERY == 0)
      child_snapshot(&child_snaps[ns++], (uint64_t)s + 1, base);
  }
  const char *buf = (const char *)child_snaps;
  size_t      left = sizeof child_snaps;
  while (left > 0) {
    ssize_t n = write(1, buf, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return 6;
    buf += n;
    left -= (size_t)n;
  }
  return 0;
}

/* ---- Parent: running the child ------------------------------------------- */

extern char **environ;

typedef struct dcfg_s {
  const char *name;
  const char *model_opts; /* glibc model options, NULL = defaults */
  const char *env;        /* the real run's setting, NULL = none */
  uint64_t    seed;
  int         big;
} dcfg_t;

/* Whether environment entry e sets malloc behaviour (and must not leak from
 * the test's own environment into the child). */
static int env_is_malloc(const char *e) {
  return strncmp(e, "MALLOC_", 7) == 0 ||
         strncmp(e, "GLIBC_TUNABLES=", 15) == 0 ||
         strncmp(e, "LD_PRELOAD=", 11) == 0 ||
         strncmp(e, CHILD_ENV "=", sizeof CHILD_ENV) == 0;
}

static const char *child_error(int rc) {
  switch (rc) {
  case 2:
    return "bad " CHILD_ENV;
  case 3:
    return "an allocation failed";
  case 4:
    return "the main arena was in use before main()";
  case 6:
    return "write to the pipe failed";
  default:
    return "unexpected exit status";
  }
}

/* Runs cfg's sequence through the real glibc in a fresh process; fills
 * snaps[NSNAP]. */
static void run_real(const dcfg_t *cfg, dsnap_t *snaps) {
  size_t nenv = 0;
  while (environ[nenv] != NULL)
    nenv++;
  char **envp = calloc(nenv + 3, sizeof *envp);
  assert_non_null(envp);
  size_t k = 0;
  for (size_t i = 0; i < nenv; i++)
    if (!env_is_malloc(environ[i]))
      envp[k++] = environ[i];
  char spec[96];
  snprintf(spec, sizeof spec, CHILD_ENV "=%" PRIu64 ":%d", cfg->seed, cfg->big);
  envp[k++] = spec;
  if (cfg->env != NULL)
    envp[k++] = (char *)(uintptr_t)cfg->env;
  envp[k] = NULL;

  int fds[2];
  assert_int_equal(pipe(fds), 0);
  posix_spawn_file_actions_t fa;
  assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
  assert_int_equal(posix_spawn_file_actions_adddup2(&fa, fds[1], 1), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, fds[0]), 0);
  assert_int_equal(posix_spawn_file_actions_addclose(&fa, fds[1]), 0);
  char  arg0[] = "test_glibc_differential";
  char *argv[2] = {arg0, NULL};
  pid_t pid;
  int   rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  free(envp);
  if (rc != 0) {
    close(fds[0]);
    fail_msg("%s: posix_spawn(/proc/self/exe): %s", cfg->name, strerror(rc));
  }
  char  *buf = (char *)snaps;
  size_t want = NSNAP * sizeof *snaps, got = 0;
  char   extra; /* anything past want is an error, read to detect it */
  for (;;) {
    ssize_t n = got < want ? read(fds[0], buf + got, want - got)
                           : read(fds[0], &extra, 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  close(fds[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0)
    assert_int_equal(errno, EINTR);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail_msg("%s: real-glibc child %s %d: %s", cfg->name,
             WIFEXITED(st) ? "exited" : "killed by signal",
             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
             WIFEXITED(st) ? child_error(WEXITSTATUS(st)) : "crash");
  if (got != want)
    fail_msg("%s: child wrote %zu bytes, expected %zu", cfg->name, got, want);
}

/* ---- Parent: the model --------------------------------------------------- */

static void model_snapshot(dsnap_t *s, uint64_t step, const model_t *m,
                           const sim_kernel_t *k, uint64_t base) {
  memset(s, 0, sizeof *s);
  s->step = step;
  s->base_mod = base & (SIM_KERNEL_THP_BYTES - 1);
  s->brk = sim_kernel_brk_current(k) - base;
  s->keepcost = glibc_inspect_top_size(m, 0);
  s->binned = glibc_inspect_binned_count(m, 0);
  for (uint64_t i = 0; i < NFASTBINS; i++) {
    uint64_t csize = 32 + 16 * i; /* fastbin_index: (sz >> 4) - 2 */
    uint64_t n = glibc_inspect_fastbin_count(m, 0, csize);
    s->smblks += n;
    s->fsmblks += n * csize;
  }
  for (uint64_t i = 0; i < TCACHE_BINS; i++) /* tidx2usize, malloc.c:313 */
    s->tcache[i] = (uint16_t)glibc_inspect_tcache_count(m, 0, 32 + 16 * i);
  for (uint64_t i = 0; i < NIDS; i++) {
    glibc_chunk_info_t ci;
    dobj_t            *r = &s->obj[i];
    if (!glibc_inspect_object(m, i, &ci))
      continue;
    r->size = ci.size;
    if (ci.mmapped)
      r->kind = K_MMAP;
    else if (ci.arena == 0) {
      r->kind = K_HEAP;
      r->off = ci.addr + 16 - base; /* chunk2mem */
    } else
      r->kind = K_ELSEWHERE;
  }
  /* Mapped address space = main arena system_mem (the break's growth) +
   * mp_.mmapped_mem, as there are no thread heaps. */
  model_stats_t st;
  model_stats(m, &st);
  s->hblkhd = st.mapped_bytes - s->brk;
}

/* Replays cfg's sequence on the model, its break starting at base_mod
 * modulo 2 MiB as the real one did. */
static void run_model(const dcfg_t *cfg, dsnap_t *snaps, uint64_t base_mod) {
  as_err_t            err = {0};
  sim_kernel_config_t kc;
  sim_kernel_t       *k;
  model_t            *m;
  sim_kernel_config_default(&kc);
  kc.brk_start = UINT64_C(0x555555400000) + base_mod; /* 2 MiB-aligned + */
  /* This machine's THP mode decides whether glibc.malloc.hugetlb=1
   * acts; the model's kernel is given the same (no THP: never). */
  const char *thp = machine_thp_enabled();
  sim_kernel_config_set_thp(&kc, thp != NULL ? thp : "never");
  assert_int_equal(sim_kernel_create(&kc, &k, &err), AS_OK);
  model_opts_t o;
  char         opts[128];
  snprintf(opts, sizeof opts, "version=%s%s%s", gnu_get_libc_version(),
           cfg->model_opts ? "," : "", cfg->model_opts ? cfg->model_opts : "");
  if (model_opts_parse("glibc", model_glibc_methods.options, opts, &o, &err) !=
      AS_OK)
    fail_msg("%s: options: %s", cfg->name, err.msg);
  model_ctx_t ctx = {.kernel = k, .timers = NULL, .libc_spec = NULL};
  if (model_glibc_methods.create(&o, &ctx, &m, &err) != AS_OK)
    fail_msg("%s: create: %s", cfg->name, err.msg);
  m->methods = &model_glibc_methods;
  m->opts = o;

  static gen_t g;
  memset(&g, 0, sizeof g);
  g.rng = cfg->seed;
  g.big = cfg->big;
  uint64_t base = sim_kernel_brk_current(k);
  int      ns = 0;
  for (int s = 0; s < STEPS; s++) {
    gop_t o2;
    gen_next(&g, s, &o2);
    trace_event_t ev = {.thread = 0,
                        .id = o2.id,
                        .size = o2.size,
                        .align = o2.align,
                        .prev_size = o2.prev_size};
    as_status_t   rc = AS_OK;
    switch (o2.op) {
    case DOP_MALLOC:
      ev.op = TRACE_MALLOC;
      rc = model_alloc(m, &ev, &err);
      break;
    case DOP_CALLOC:
      ev.op = TRACE_CALLOC;
      rc = model_alloc(m, &ev, &err);
      break;
    case DOP_MEMALIGN:
      ev.op = TRACE_MEMALIGN;
      rc = model_alloc(m, &ev, &err);
      break;
    case DOP_REALLOC:
      ev.op = TRACE_REALLOC;
      rc = model_realloc(m, &ev, &err);
      break;
    case DOP_FREE:
      ev.op = TRACE_FREE;
      rc = model_free(m, &ev, &err);
      break;
    case DOP_TRIM:
      rc = model_trim(m, 0, 0, &err);
      break;
    }
    if (rc != AS_OK)
      fail_msg("%s: model, call %d: %s", cfg->name, s, err.msg);
    if ((s + 1) % CHECK_EVERY == 0) {
      model_snapshot(&snaps[ns++], (uint64_t)s + 1, m, k, base);
      if (glibc_check_invariants(m, &err) != AS_OK)
        fail_msg("%s: model invariants after %d calls: %s", cfg->name, s + 1,
                 err.msg);
    }
  }
  model_destroy(m);
  sim_kernel_destroy(k);
}

/* ---- Comparison ---------------------------------------------------------- */

static const char *kind_name(uint32_t k) {
  static const char *const names[] = {"not live", "heap", "mmapped",
                                      "elsewhere"};
  return k < 4 ? names[k] : "?";
}

/* Counts the differences of one snapshot; if verbose, prints the scalar
 * ones, up to 5 tcache bins and up to 5 objects. */
static int compare_snap(const dcfg_t *cfg, const dsnap_t *r, const dsnap_t *m,
                        bool verbose) {
  int bad = 0;
#define CMP(field)                                                             \
  do {                                                                         \
    if (r->field != m->field) {                                                \
      if (verbose)                                                             \
        print_error("%s after %" PRIu64 " calls: %s real %" PRIu64             \
                    " model %" PRIu64 "\n",                                    \
                    cfg->name, r->step, #field, (uint64_t)r->field,            \
                    (uint64_t)m->field);                                       \
      bad++;                                                                   \
    }                                                                          \
  } while (0)
  CMP(step);
  CMP(brk);
  CMP(keepcost);
  CMP(binned);
  CMP(smblks);
  CMP(fsmblks);
  CMP(hblkhd);
#undef CMP
  int tcbad = 0;
  for (int i = 0; i < TCACHE_BINS && r->tcache_found; i++)
    if (r->tcache[i] != m->tcache[i] && tcbad++ < 5 && verbose)
      print_error("%s after %" PRIu64 " calls: tcache[%d] (chunk %d B) real "
                  "%u model %u\n",
                  cfg->name, r->step, i, 32 + 16 * i, r->tcache[i],
                  m->tcache[i]);
  int objbad = 0;
  for (int i = 0; i < NIDS; i++) {
    const dobj_t *a = &r->obj[i], *b = &m->obj[i];
    if (a->kind == b->kind && a->size == b->size && a->off == b->off)
      continue;
    if (objbad++ < 5 && verbose)
      print_error("%s after %" PRIu64 " calls: object %d real %s off %" PRIu64
                  " size %" PRIu64 ", model %s off %" PRIu64 " size %" PRIu64
                  "\n",
                  cfg->name, r->step, i, kind_name(a->kind), a->off, a->size,
                  kind_name(b->kind), b->off, b->size);
  }
  if (verbose && (tcbad > 5 || objbad > 5))
    print_error("%s after %" PRIu64 " calls: %d tcache bins and %d objects "
                "differ in all\n",
                cfg->name, r->step, tcbad, objbad);
  return bad + tcbad + objbad;
}

static void differential(const dcfg_t *cfg) {
  dsnap_t *real = calloc(NSNAP, sizeof *real);
  dsnap_t *model = calloc(NSNAP, sizeof *model);
  assert_non_null(real);
  assert_non_null(model);
  run_real(cfg, real);
  run_model(cfg, model, real[0].base_mod);
  int      bad = 0, first = -1;
  size_t   live = 0, heap = 0, mmapped = 0, tcache = 0;
  uint64_t brk_max = 0;
  for (int i = 0; i < NSNAP; i++) {
    int b = compare_snap(cfg, &real[i], &model[i], first < 0);
    if (b != 0 && first < 0)
      first = i;
    bad += b;
    for (int j = 0; j < NIDS; j++) {
      live += real[i].obj[j].kind != K_NONE;
      heap += real[i].obj[j].kind == K_HEAP;
      mmapped += real[i].obj[j].kind == K_MMAP;
    }
    brk_max = real[i].brk > brk_max ? real[i].brk : brk_max;
    tcache += real[i].tcache_found != 0;
    /* Harness self-check: the tcache struct was found, and mallinfo2
     * counts the mmapped objects plus the struct when it is mapped. */
    size_t nmap = 0;
    for (int j = 0; j < NIDS; j++)
      nmap += real[i].obj[j].kind == K_MMAP;
    if (real[i].tcache_found == TC_NONE ||
        real[i].hblks != nmap + (real[i].tcache_found == TC_MAPPED))
      fail_msg("%s after %" PRIu64 " calls: real hblks %" PRIu64
               " but %zu mmapped objects (tcache struct %s)",
               cfg->name, real[i].step, real[i].hblks, nmap,
               real[i].tcache_found == TC_HEAP     ? "in the heap"
               : real[i].tcache_found == TC_MAPPED ? "mapped"
                                                   : "not found");
  }
  uint64_t rmod = real[0].base_mod, mmod = model[0].base_mod;
  free(real);
  free(model);
  if (bad != 0)
    fail_msg("%s: %d differences, first seen after %d calls (initial break mod "
             "2 MiB: real %" PRIu64 ", model %" PRIu64 ")",
             cfg->name, bad, (first + 1) * CHECK_EVERY, rmod, mmod);
  print_message("%s: %d snapshots equal (%zu live objects in all, %zu in "
                "the brk heap, %zu mmapped; brk up to %" PRIu64
                " B; tcache counts compared in %zu)\n",
                cfg->name, NSNAP, live, heap, mmapped, brk_max, tcache);
  /* The sequence must exercise what it claims to. */
  assert_true(heap > 1000);
}

/* ---- Tests --------------------------------------------------------------- */

#if !DIFF_ASAN
/* Whether the model's version option offers v ("2.41"): then the test
 * runs the model as that version against the running glibc
 * (scripts/measure/glibc_differential.sh runs it on another glibc). */
static bool glibc_model_offers(const char *v) {
  char         spec[64];
  model_opts_t o;
  as_err_t     err;
  snprintf(spec, sizeof spec, "version=%s", v);
  return model_opts_parse("glibc", model_glibc_methods.options, spec, &o,
                          &err) == AS_OK;
}
#endif

static void require_real_glibc(void) {
#if DIFF_ASAN
  print_message("skipped: AddressSanitizer replaces malloc, so the real "
                "glibc cannot be measured in this build\n");
  skip();
#else
  const char *v = gnu_get_libc_version();
  if (!glibc_model_offers(v)) {
    print_message("skipped: this machine's glibc is %s, a version the model "
                  "does not offer\n",
                  v);
    skip();
  }
#endif
}

/* Defaults: dynamic mmap threshold (raised by each free of an mmapped chunk,
 * malloc.c:3364-3373), top_pad 128 KiB, 7 chunks per tcache bin. */
static void defaults(void **state) {
  (void)state;
  require_real_glibc();
  const dcfg_t cfg = {"defaults", NULL, NULL, 1, 1};
  differential(&cfg);
}

/* MALLOC_MMAP_THRESHOLD_ is the env alias of glibc.malloc.mmap_threshold
 * (elf/dl-tunables.list); 512 B sends most requests to mmap. */
static void mmap_threshold_512(void **state) {
  (void)state;
  require_real_glibc();
  const dcfg_t cfg = {"mmap_threshold=512", "mmap_threshold=512",
                      "MALLOC_MMAP_THRESHOLD_=512", 2, 0};
  differential(&cfg);
}

/* MALLOC_TOP_PAD_ aliases glibc.malloc.top_pad (elf/dl-tunables.list);
 * setting it also freezes the dynamic thresholds (do_set_top_pad). */
static void top_pad_0(void **state) {
  (void)state;
  require_real_glibc();
  const dcfg_t cfg = {"top_pad=0", "top_pad=0", "MALLOC_TOP_PAD_=0", 3, 1};
  differential(&cfg);
}

/* glibc.malloc.tcache_count has no env alias (elf/dl-tunables.list). */
static void tcache_count_0(void **state) {
  (void)state;
  require_real_glibc();
  const dcfg_t cfg = {"tcache_count=0", "tcache_count=0",
                      "GLIBC_TUNABLES=glibc.malloc.tcache_count=0", 4, 1};
  differential(&cfg);
}

/* glibc.malloc.mxfast (no env alias, elf/dl-tunables.list) = 0: no
 * fastbins, so small frees go to the tcache, then the unsorted bin. */
static void mxfast_0(void **state) {
  (void)state;
  require_real_glibc();
  const dcfg_t cfg = {"mxfast=0", "mxfast=0",
                      "GLIBC_TUNABLES=glibc.malloc.mxfast=0", 5, 1};
  differential(&cfg);
}

/* MALLOC_TRIM_THRESHOLD_ = 0: every free that grows top trims the break
 * (systrim), and the thresholds are frozen. */
static void trim_threshold_0(void **state) {
  (void)state;
  require_real_glibc();
  const dcfg_t cfg = {"trim_threshold=0", "trim_threshold=0",
                      "MALLOC_TRIM_THRESHOLD_=0", 6, 1};
  differential(&cfg);
}

/* MALLOC_MMAP_MAX_ = 0: nothing is mmapped; big requests grow the break. */
static void mmap_max_0(void **state) {
  (void)state;
  require_real_glibc();
  const dcfg_t cfg = {"mmap_max=0", "mmap_max=0", "MALLOC_MMAP_MAX_=0", 7, 1};
  differential(&cfg);
}

/* glibc.malloc.tcache_max = 100: only requests up to 100 B are cached. */
static void tcache_max_100(void **state) {
  (void)state;
  require_real_glibc();
  const dcfg_t cfg = {"tcache_max=100", "tcache_max=100",
                      "GLIBC_TUNABLES=glibc.malloc.tcache_max=100", 8, 1};
  differential(&cfg);
}

/* glibc.malloc.hugetlb=1 (no env alias): under THP=madvise the break grows
 * to 2 MiB boundaries and trims in 2 MiB, so brk and keepcost follow the
 * initial break modulo 2 MiB, which the model is given.  Elsewhere glibc
 * ignores the tunable and so does the model. */
static void hugetlb_1(void **state) {
  (void)state;
  require_real_glibc();
  const dcfg_t cfg = {"hugetlb=1", "hugetlb=1",
                      "GLIBC_TUNABLES=glibc.malloc.hugetlb=1", 10, 1};
  differential(&cfg);
}

/* Four knobs at once, all through GLIBC_TUNABLES (':'-separated). */
static void combined(void **state) {
  (void)state;
  require_real_glibc();
  const dcfg_t cfg = {
      "combined", "tcache_count=3,mxfast=64,top_pad=4096,mmap_threshold=65536",
      "GLIBC_TUNABLES=glibc.malloc.tcache_count=3:glibc.malloc.mxfast=64:"
      "glibc.malloc.top_pad=4096:glibc.malloc.mmap_threshold=65536",
      9, 1};
  differential(&cfg);
}

int main(void) {
  const char *child = getenv(CHILD_ENV);
  if (child != NULL)
    return diff_child(child);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(defaults),   cmocka_unit_test(mmap_threshold_512),
      cmocka_unit_test(top_pad_0),  cmocka_unit_test(tcache_count_0),
      cmocka_unit_test(mxfast_0),   cmocka_unit_test(trim_threshold_0),
      cmocka_unit_test(mmap_max_0), cmocka_unit_test(tcache_max_100),
      cmocka_unit_test(combined),   cmocka_unit_test(hugetlb_1),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
