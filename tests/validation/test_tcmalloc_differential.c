/* tests/validation/test_tcmalloc_differential.c -- the tcmalloc model
 * against Debian 12's libtcmalloc_minimal.so.4 (gperftools 2.10), number
 * for number.
 *
 * One seeded sequence (tests/validation/seq_gen.h: malloc, calloc,
 * aligned allocation up to 64 KiB alignment, realloc, free, and every
 * purge_every calls MallocExtension_ReleaseFreeMemory) runs twice:
 *   real   this executable re-executes itself (/proc/self/exe) with
 *          LD_PRELOAD=libtcmalloc_minimal.so.4 and CHILD_ENV set, so main()
 *          runs the sequence through tcmalloc before cmocka or stdio has
 *          allocated, with the TCMALLOC_* setting of the configuration, and
 *          reads MallocExtension's numeric properties (through its C API,
 *          gperftools/malloc_extension_c.h, looked up with dlsym) before the
 *          first call and after every check_every calls;
 *   model  in this process, as trace events on a fresh simulated kernel.
 * Every property must be equal at every checkpoint: heap size, allocated
 * bytes, page-heap free and unmapped bytes, the thread, central and
 * transfer caches' bytes, the scavenge and decommit counts and the bytes
 * decommitted.  Checkpoint 0 is the process at main(): it checks the
 * pre-main calls the model makes (premain=true).
 * Configurations: defaults; TCMALLOC_AGGRESSIVE_DECOMMIT=1;
 * TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES=1 MiB; TCMALLOC_TRANSFER_NUM_OBJ=8;
 * and runs of 256 KiB - 3 MiB objects that free far more than the 2^18
 * pages of the start-up countdown, at release rate 1, 10 and 0.
 * A second test compares nallocx with the model's usable size for every
 * request from 0 to 300,000 bytes.
 *
 * Requirements: the library (apt-get install libtcmalloc-minimal4; the test
 * skips without it), Linux, no AddressSanitizer (it replaces malloc: the
 * test skips).  Not here: RSS (the real side does not write its objects,
 * for speed; the measured runs check RSS), threads (glibc's pthread_create
 * allocates its thread vector through malloc: an allocation the sequence
 * cannot see).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../helpers/spawn_child.h"
#include "models/model.h"
#include "seq_gen.h"
#include "sim/kernel.h"

#include "../helpers/asan.h"

#define CHILD_ENV    "ALLOCSIM_TCMALLOC_DIFF_CHILD"
#define TCMALLOC_LIB "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
#define MAX_SNAPS    64
#define NSIZES       300001 /* nallocx of 0 .. 300000 */

/* The properties (tcmalloc.cc:700-800) and the model's counters. */
static const char *const props[][2] = {
    {"generic.heap_size", "tcmalloc.heap_bytes"},
    {"generic.current_allocated_bytes", "tcmalloc.current_allocated_bytes"},
    {"tcmalloc.pageheap_free_bytes", "tcmalloc.pageheap_free_bytes"},
    {"tcmalloc.pageheap_unmapped_bytes", "tcmalloc.pageheap_unmapped_bytes"},
    {"tcmalloc.thread_cache_free_bytes", "tcmalloc.thread_cache_bytes"},
    {"tcmalloc.central_cache_free_bytes", "tcmalloc.central_cache_bytes"},
    {"tcmalloc.transfer_cache_free_bytes", "tcmalloc.transfer_cache_bytes"},
    {"tcmalloc.pageheap_scavenge_count", "tcmalloc.scavenge_count"},
    {"tcmalloc.pageheap_decommit_count", "tcmalloc.decommit_count"},
    {"tcmalloc.pageheap_total_decommit_bytes", "tcmalloc.total_decommit_bytes"},
};
#define NPROPS (sizeof props / sizeof props[0])

/* A real library to compare with: Debian 12's by default, another release
 * where its variable names a build of the upstream tag
 * (docs/models/tcmalloc.md says how to build one). */
typedef struct tclib_s {
  const char *version;      /* the model's version option, "2.10" */
  const char *env;          /* variable naming the library */
  const char *default_lib;  /* NULL: only where env names one */
  int         major, minor; /* what its tc_version() says */
} tclib_t;

static const tclib_t lib_210 = {"2.10", "ALLOCSIM_TCMALLOC_LIB", TCMALLOC_LIB,
                                2, 10};
static const tclib_t lib_29 = {"2.9", "ALLOCSIM_TCMALLOC_29_LIB", NULL, 2, 9};
static const tclib_t lib_215 = {"2.15", "ALLOCSIM_TCMALLOC_215_LIB", NULL, 2,
                                15};
static const tclib_t lib_216 = {"2.16", "ALLOCSIM_TCMALLOC_216_LIB", NULL, 2,
                                16};

typedef struct tcfg_s {
  const char    *name;
  const char    *model_opts; /* tcmalloc model options, NULL = defaults */
  const char    *env;        /* the real run's setting, NULL = none */
  uint64_t       seed;
  seq_mix_t      mix;
  uint32_t       nids, steps, check_every, purge_every;
  const tclib_t *lib;
} tcfg_t;

typedef struct tsnap_s {
  uint64_t v[NPROPS];
} tsnap_t;

/* What the child writes: where its program break started (so the model
 * gets the same addresses: alignments above a page, as posix_memalign's,
 * split spans by address), then the snapshots. */
typedef struct treal_s {
  uint64_t start_brk;
  tsnap_t  snap[MAX_SNAPS];
} treal_t;

/* ---- Real side (the child) ---------------------------------------------- */

typedef int (*getprop_fn)(const char *, size_t *);

static void child_snap(getprop_fn get, tsnap_t *s) {
  for (size_t i = 0; i < NPROPS; i++) {
    size_t v = 0;
    get(props[i][0], &v);
    s->v[i] = v;
  }
}

static int write_all(const void *p, size_t n) {
  for (size_t off = 0; off < n;) {
    ssize_t w = write(1, (const char *)p + off, n - off);
    if (w <= 0)
      return 6;
    off += (size_t)w;
  }
  return 0;
}

/* The initial program break: field 47 of /proc/self/stat (proc(5)). */
static uint64_t start_brk(void) {
  static char buf[4096];
  int         fd = open("/proc/self/stat", O_RDONLY);
  ssize_t     n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
  if (fd >= 0)
    close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  for (int field = 2; p != NULL && field < 47; field++)
    p = strchr(p + 1, ' ');
  return p != NULL ? strtoull(p + 1, NULL, 10) : 0;
}

/* "nallocx": nallocx of every size to stdout; else "seed:mix:nids:steps:
 * every:purge": the sequence, a snapshot before it and every `every`
 * calls, to stdout.  Nothing here allocates but the sequence. */
static int diff_child(const char *spec) {
  static void     *ptr[SEQ_MAX_IDS];
  static treal_t   out;
  tsnap_t         *snaps = out.snap;
  static uint64_t  sizes[NSIZES];
  static seq_gen_t g;
  /* dlsym's object pointers become function pointers by memcpy (POSIX
   * guarantees the representation; ISO C has no cast for it). */
  getprop_fn get;
  void (*release)(void);
  size_t (*nallocx)(size_t, int);
  void *sym = dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty");
  memcpy(&get, &sym, sizeof get);
  sym = dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory");
  memcpy(&release, &sym, sizeof release);
  sym = dlsym(RTLD_DEFAULT, "nallocx");
  memcpy(&nallocx, &sym, sizeof nallocx);
  if (get == NULL || release == NULL || nallocx == NULL)
    return 5;
  if (strcmp(spec, "version") == 0) {
    void (*version)(int *, int *, const char **);
    sym = dlsym(RTLD_DEFAULT, "tc_version");
    memcpy(&version, &sym, sizeof version);
    int v[2] = {0, 0};
    if (sym != NULL)
      version(&v[0], &v[1], NULL);
    return write_all(v, sizeof v);
  }
  if (strcmp(spec, "nallocx") == 0) {
    for (size_t s = 0; s < NSIZES; s++)
      sizes[s] = nallocx(s, 0);
    return write_all(sizes, sizeof sizes);
  }
  unsigned long long seed;
  unsigned           mix, nids, steps, every, purge;
  if (sscanf(spec, "%llu:%u:%u:%u:%u:%u", &seed, &mix, &nids, &steps, &every,
             &purge) != 6 ||
      every == 0 || steps / every + 1 > MAX_SNAPS)
    return 2;
  seq_init(&g, seed, (seq_mix_t)mix, nids, purge, 16);
  out.start_brk = start_brk();
  size_t n = 0;
  child_snap(get, &snaps[n++]);
  for (uint64_t step = 0; step < steps; step++) {
    seq_call_t c;
    seq_next(&g, step, &c);
    switch (c.op) {
    case SEQ_MALLOC:
      ptr[c.id] = malloc(c.size);
      break;
    case SEQ_CALLOC:
      ptr[c.id] = calloc(1, c.size);
      break;
    case SEQ_MEMALIGN:
      if (posix_memalign(&ptr[c.id], c.align, c.size) != 0)
        ptr[c.id] = NULL;
      break;
    case SEQ_REALLOC:
      ptr[c.id] = realloc(ptr[c.id], c.size);
      break;
    case SEQ_FREE:
      free(ptr[c.id]);
      ptr[c.id] = NULL;
      break;
    case SEQ_PURGE:
      release();
      break;
    }
    if (c.op != SEQ_FREE && c.op != SEQ_PURGE && ptr[c.id] == NULL)
      return 3;
    if ((step + 1) % every == 0)
      child_snap(get, &snaps[n++]);
  }
  return write_all(&out, offsetof(treal_t, snap) + n * sizeof *snaps);
}

/* ---- Parent ------------------------------------------------------------- */

static const char *library_path(const tclib_t *lib) {
  const char *p = getenv(lib->env);
  return p != NULL && *p != '\0' ? p : lib->default_lib;
}

/* Runs the child on lib with spec and the configuration's environment. */
static void run_real(const tclib_t *lib, const char *name, const char *spec,
                     const char *env, void *buf, size_t want) {
  static const char *const drop[] = {
      "TCMALLOC_",       "LD_PRELOAD=", "MALLOC_",
      "GLIBC_TUNABLES=", CHILD_ENV "=", NULL};
  char child[160];
  snprintf(child, sizeof child, CHILD_ENV "=%s", spec);
  char preload[4200];
  snprintf(preload, sizeof preload, "LD_PRELOAD=%s", library_path(lib));
  const char    *extra[] = {preload, child, env, NULL};
  char           arg0[] = "test_tcmalloc_differential";
  char          *argv[] = {arg0, NULL};
  child_result_t r =
      spawn_child("/proc/self/exe", argv, drop, extra, buf, want);
  if (r.spawn_err != 0)
    fail_msg("%s: posix_spawn(/proc/self/exe): %s", name,
             strerror(r.spawn_err));
  if (r.status != 0)
    fail_msg("%s: the tcmalloc child %s %d (2 bad spec, 3 allocation failed, "
             "5 no MallocExtension C API, 6 write failed)",
             name, r.signal ? "was killed by signal" : "exited",
             r.signal ? r.signal : r.status);
  if (r.got != want || r.extra)
    fail_msg("%s: child wrote %s%zu bytes, expected %zu", name,
             r.extra ? "more than " : "", r.got, want);
}

static void model_snap(const model_t *m, tsnap_t *s) {
  for (size_t i = 0; i < NPROPS; i++)
    assert_true(model_counter_get(m, props[i][1], &s->v[i]));
}

/* Replays cfg's sequence on the model, the program break starting where
 * the child's did; fills snaps as the child does. */
static size_t run_model(const tcfg_t *cfg, uint64_t brk, tsnap_t *snaps) {
  static seq_gen_t    g;
  sim_kernel_config_t kc;
  sim_kernel_t       *k = NULL;
  model_t            *m = NULL;
  as_err_t            err;
  char                spec[256];
  snprintf(spec, sizeof spec, "tcmalloc:version=%s%s%s", cfg->lib->version,
           cfg->model_opts ? "," : "", cfg->model_opts ? cfg->model_opts : "");
  sim_kernel_config_default(&kc);
  kc.brk_start = brk;
  if (sim_kernel_create(&kc, &k, &err) != AS_OK)
    fail_msg("%s: the child's break 0x%" PRIx64 ": %s", cfg->name, brk,
             err.msg);
  model_ctx_t ctx = {.kernel = k};
  if (model_create_from_spec(spec, &ctx, &m, &err) != AS_OK)
    fail_msg("%s: %s", spec, err.msg);
  seq_init(&g, cfg->seed, cfg->mix, cfg->nids, cfg->purge_every, 16);
  size_t n = 0;
  model_snap(m, &snaps[n++]);
  for (uint64_t step = 0; step < cfg->steps; step++) {
    seq_call_t    c;
    trace_event_t ev = {0};
    seq_next(&g, step, &c);
    ev.t_ns = step;
    ev.id = c.id;
    ev.size = c.size;
    ev.align = c.align;
    ev.prev_size = c.prev_size;
    ev.flags = TRACE_FLAG_UNWRITTEN; /* the child writes nothing */
    as_status_t rc;
    switch (c.op) {
    case SEQ_MALLOC:
    case SEQ_CALLOC:
    case SEQ_MEMALIGN:
      ev.op = c.op == SEQ_MALLOC   ? TRACE_MALLOC
              : c.op == SEQ_CALLOC ? TRACE_CALLOC
                                   : TRACE_MEMALIGN;
      rc = model_alloc(m, &ev, &err);
      break;
    case SEQ_REALLOC:
      ev.op = TRACE_REALLOC;
      rc = model_realloc(m, &ev, &err);
      break;
    case SEQ_FREE:
      ev.op = TRACE_FREE;
      rc = model_free(m, &ev, &err);
      break;
    default:
      ev.op = TRACE_PURGE;
      ev.size = TRACE_PURGE_ALL;
      ev.id = TRACE_ALL_ARENAS;
      rc = model_purge(m, &ev, &err);
      break;
    }
    if (rc != AS_OK)
      fail_msg("%s: step %" PRIu64 ": %s", cfg->name, step, err.msg);
    if ((step + 1) % cfg->check_every == 0)
      model_snap(m, &snaps[n++]);
  }
  model_destroy(m);
  sim_kernel_destroy(k);
  return n;
}

/* Skips unless lib is there and is the release it says. */
static void require_library(const tclib_t *lib) {
  if (DIFF_ASAN)
    skip(); /* ASan's malloc cannot be replaced by LD_PRELOAD */
  const char *path = library_path(lib);
  if (path == NULL) {
    print_message("skipped: set %s to a libtcmalloc_minimal.so of upstream "
                  "tag gperftools-%s built as docs/models/tcmalloc.md says\n",
                  lib->env, lib->version);
    skip();
  }
  if (access(path, R_OK) != 0) {
    print_message("skipped: %s missing (%s; Debian 12: apt-get install "
                  "libtcmalloc-minimal4)\n",
                  path, lib->env);
    skip();
  }
  int v[2];
  run_real(lib, "version", "version", NULL, v, sizeof v);
  if (v[0] != lib->major || v[1] != lib->minor) {
    print_message("skipped: %s is gperftools %d.%d, not %s\n", path, v[0], v[1],
                  lib->version);
    skip();
  }
}

static void check(const tcfg_t *cfg) {
  require_library(cfg->lib);
  static treal_t real;
  static tsnap_t model[MAX_SNAPS];
  size_t         n = cfg->steps / cfg->check_every + 1;
  assert_true(n <= MAX_SNAPS);
  char spec[128];
  snprintf(spec, sizeof spec, "%" PRIu64 ":%d:%u:%u:%u:%u", cfg->seed,
           (int)cfg->mix, cfg->nids, cfg->steps, cfg->check_every,
           cfg->purge_every);
  run_real(cfg->lib, cfg->name, spec, cfg->env, &real,
           offsetof(treal_t, snap) + n * sizeof *real.snap);
  assert_int_equal(run_model(cfg, real.start_brk, model), n);
  for (size_t s = 0; s < n; s++)
    for (size_t i = 0; i < NPROPS; i++)
      if (real.snap[s].v[i] != model[s].v[i])
        fail_msg("%s %s: checkpoint %zu (after %zu calls): %s is %" PRIu64
                 " for tcmalloc, %" PRIu64 " for the model",
                 cfg->lib->version, cfg->name, s, s * cfg->check_every,
                 props[i][0], real.snap[s].v[i], model[s].v[i]);
}

/* ---- Tests -------------------------------------------------------------- */

/* Each test runs against the library its state points at (main). */
#define MIXED(name, opts, env, seed, lib)                                      \
  { name, opts, env, seed, SEQ_MIX_MIXED, 3000, 200000, 10000, 50000, lib }
#define LARGE(name, opts, env, seed, lib)                                      \
  { name, opts, env, seed, SEQ_MIX_LARGE, 32, 8000, 400, 0, lib }

static void defaults(void **state) {
  const tcfg_t c = MIXED("defaults", NULL, NULL, 1, *state);
  check(&c);
}

static void aggressive_decommit(void **state) {
  const tcfg_t c = MIXED("aggressive_decommit", "aggressive_decommit=true",
                         "TCMALLOC_AGGRESSIVE_DECOMMIT=1", 2, *state);
  check(&c);
}

static void thread_cache_1mib(void **state) {
  const tcfg_t c =
      MIXED("thread_cache_1mib", "max_total_thread_cache_bytes=1048576",
            "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES=1048576", 3, *state);
  check(&c);
}

static void transfer_num_obj_8(void **state) {
  const tcfg_t c = MIXED("transfer_num_obj_8", "transfer_num_obj=8",
                         "TCMALLOC_TRANSFER_NUM_OBJ=8", 4, *state);
  check(&c);
}

static void scavenge_rate_1(void **state) {
  const tcfg_t c = LARGE("scavenge_rate_1", NULL, NULL, 5, *state);
  check(&c);
}

static void scavenge_rate_10(void **state) {
  const tcfg_t c = LARGE("scavenge_rate_10", "release_rate=10",
                         "TCMALLOC_RELEASE_RATE=10", 6, *state);
  check(&c);
}

static void scavenge_rate_0(void **state) {
  const tcfg_t c = LARGE("scavenge_rate_0", "release_rate=0",
                         "TCMALLOC_RELEASE_RATE=0", 7, *state);
  check(&c);
}

static void usable_sizes_are_nallocx(void **state) {
  const tclib_t *lib = *state;
  require_library(lib);
  static uint64_t real[NSIZES];
  run_real(lib, "nallocx", "nallocx", NULL, real, sizeof real);
  sim_kernel_config_t kc;
  sim_kernel_t       *k = NULL;
  model_t            *m = NULL;
  as_err_t            err;
  char                spec[64];
  snprintf(spec, sizeof spec, "tcmalloc:version=%s", lib->version);
  sim_kernel_config_default(&kc);
  assert_int_equal(sim_kernel_create(&kc, &k, &err), AS_OK);
  model_ctx_t ctx = {.kernel = k};
  assert_int_equal(model_create_from_spec(spec, &ctx, &m, &err), AS_OK);
  for (uint64_t s = 0; s < NSIZES; s++)
    if (m->methods->usable_size(m, s, TRACE_DOMAIN_RAW) != real[s])
      fail_msg("%s: nallocx(%" PRIu64 ") = %" PRIu64 ", model %" PRIu64,
               lib->version, s, real[s],
               m->methods->usable_size(m, s, TRACE_DOMAIN_RAW));
  model_destroy(m);
  sim_kernel_destroy(k);
}

/* Every test once per library, named "test version". */
#define FOR_LIBS(fn)                                                           \
  {#fn " 2.9", fn, NULL, NULL, (void *)&lib_29},                               \
      {#fn " 2.10", fn, NULL, NULL, (void *)&lib_210},                         \
      {#fn " 2.15", fn, NULL, NULL, (void *)&lib_215}, {                       \
#fn " 2.16", fn, NULL, NULL, (void *)&lib_216                              \
  }

int main(void) {
  const char *child = getenv(CHILD_ENV);
  if (child != NULL)
    return diff_child(child);
  const struct CMUnitTest tests[] = {
      FOR_LIBS(usable_sizes_are_nallocx), FOR_LIBS(defaults),
      FOR_LIBS(aggressive_decommit),      FOR_LIBS(thread_cache_1mib),
      FOR_LIBS(transfer_num_obj_8),       FOR_LIBS(scavenge_rate_1),
      FOR_LIBS(scavenge_rate_10),         FOR_LIBS(scavenge_rate_0),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
