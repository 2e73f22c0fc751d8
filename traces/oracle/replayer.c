/* traces/oracle/replayer.c -- allocsim-replayer, the child of `allocsim
 * oracle`: replays a trace's calls on the real allocator of this process
 * (glibc, or one LD_PRELOAD put in its place, or musl when built with
 * musl-gcc) and reports RSS at every mark.  Protocol: protocol.h.
 *
 * What it does to be measured and not measure itself:
 *  - It never allocates with malloc outside the trace's calls: no stdio,
 *    its tables are mmap'd, messages are formatted by hand, and only the
 *    preloaded allocator's own functions are looked up with dlsym (a failed
 *    lookup would malloc its error text).
 *  - Everything it needs is touched before the baseline is read: the
 *    object table (ids x 8 bytes), the input buffer, the thread slots.
 *    Net RSS = RSS - that baseline.
 *  - Each trace thread is a real thread (default attributes: the stack
 *    glibc's nptl gives any thread), created at its first op, joined when
 *    the next op runs after its exit.  One baton orders everything: the
 *    thread holding it reads the next op, runs it if it is its own, else
 *    wakes the op's thread and sleeps.  So the calls run exactly in trace
 *    order, cross-thread frees included, each on its recorded thread.
 *  - The program writes what it allocates (memset of the whole block, of
 *    realloc's growth, of touch ranges), except allocations the trace marks
 *    unwritten and calloc's: a calloc'd block reads as zero and the models
 *    take it that the program relies on that, so only what calloc itself
 *    zeroes is written (models/glibc.c glibc_alloc, and every model).
 *  - Marks read RSS (protocol.h: smaps_rollup's resident anonymous bytes)
 *    at the mark, with every earlier
 *    call done.  Idle ops sleep for real (the parent scales them).  At the
 *    end the final RSS is reported and the process leaves with _exit, so no
 *    allocator destructor runs.
 *  - With glibc, each pthread_create it makes is measured: the heap bytes
 *    the call took (mallinfo2 uordblks before and after, heap_in_use),
 *    that is the new thread's DTV when it got a new stack, reported so
 *    that the measured trace carries that calloc (protocol.h
 *    ORACLE_R_THREAD), and so is each join after which glibc's stack
 *    cache unmapped a stack it made, freeing its DTV (ORACLE_R_DTV_FREE).
 *  - Each op's start is read on CLOCK_MONOTONIC (the vDSO's: no system
 *    call) and written to the parent's shared file (protocol.h
 *    ORACLE_FD_TIMES): the clock the allocator ran on.  That file's pages
 *    are shared memory, not in the Anonymous figure measured.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#ifndef ORACLE_STATIC
#include <dlfcn.h>
#include <link.h>

#include "../je_seeds.h"
#endif

#include "protocol.h"
#include "../allocator_version.h"
#include "../mi_hint_area.h"
#include "../touch_span.h"

/* ---- Output, errors ----------------------------------------------------- */

static void write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      _exit(3); /* the parent is gone */
    c += w;
    n -= (size_t)w;
  }
}

static void send_result(uint32_t kind, uint64_t a, uint64_t b, uint64_t c,
                        const char *text) {
  oracle_result_t r;
  memset(&r, 0, sizeof r);
  r.kind = kind;
  r.a = a;
  r.b = b;
  r.c = c;
  if (text != NULL) {
    size_t n = strlen(text);
    memcpy(r.text, text, n < sizeof r.text - 1 ? n : sizeof r.text - 1);
  }
  write_all(ORACLE_FD_RESULTS, &r, sizeof r);
}

/* Appends the decimal v to buf at *n (no snprintf: it may allocate). */
static void put_u64(char *buf, size_t cap, size_t *n, uint64_t v) {
  char   d[24];
  size_t k = 0;
  do
    d[k++] = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  while (k > 0 && *n + 1 < cap)
    buf[(*n)++] = d[--k];
  buf[*n] = '\0';
}

static void put_str(char *buf, size_t cap, size_t *n, const char *s) {
  while (*s && *n + 1 < cap)
    buf[(*n)++] = *s++;
  buf[*n] = '\0';
}

static uint64_t ops_done;

/* Reports "op N: WHAT VALUE" and leaves. */
static void fail(const char *what, uint64_t value) {
  char   msg[200];
  size_t n = 0;
  msg[0] = '\0';
  put_str(msg, sizeof msg, &n, what);
  put_u64(msg, sizeof msg, &n, value);
  send_result(ORACLE_R_ERROR, ops_done, 0, 0, msg);
  _exit(2);
}

/* ---- CPU time of the calls ------------------------------------------------
 * What the trace's calls cost the real allocator (scripts/bench.sh sets it
 * beside the simulation's time): the process's CPU time from the first call
 * to the end, less what the replayer spends aside from the calls (reading
 * ops, reading RSS, reporting), so a slow feed or a mark costs nothing.
 * The CPU clock is a system call, so the replayer looks at it only around
 * those (a refill takes in up to 1 MiB of ops, some 26,000). */

static uint64_t calls_start_ns, aside_ns;

static uint64_t timespec_ns(struct timespec ts) {
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Clock id now, in ns; CLOCK_MONOTONIC_COARSE is the clock jemalloc reads
 * (5.3.0 src/nstime.c:186-194). */
static uint64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return timespec_ns(ts);
}

static uint64_t cpu_ns(void) {
  return clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

/* ---- RSS ---------------------------------------------------------------- */

static char rss_buf[4096]; /* only the baton holder reads RSS */

/* Resident anonymous bytes (protocol.h ORACLE_RSS_FIELD). */
static uint64_t rss_now(void) {
  int fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail("cannot open /proc/self/smaps_rollup, errno ", (uint64_t)errno);
  size_t  n = 0;
  ssize_t r;
  while (n < sizeof rss_buf - 1 &&
         (r = read(fd, rss_buf + n, sizeof rss_buf - 1 - n)) != 0) {
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      fail("cannot read /proc/self/smaps_rollup, errno ", (uint64_t)errno);
    n += (size_t)r;
  }
  close(fd);
  rss_buf[n] = '\0';
  uint64_t rss = oracle_rss_parse(rss_buf);
  if (rss == UINT64_MAX)
    fail("no Anonymous line in /proc/self/smaps_rollup, bytes read ", n);
  return rss;
}

/* Reports RSS now (kind, a, the RSS, c), its CPU time set aside. */
static void send_rss(uint32_t kind, uint64_t a, uint64_t c) {
  uint64_t t0 = cpu_ns();
  send_result(kind, a, rss_now(), c, NULL);
  aside_ns += cpu_ns() - t0;
}

/* ---- Input -------------------------------------------------------------- */

static unsigned char inbuf[1 << 20];
static size_t        in_len, in_pos;

/* Reads ops until inbuf is full or the stream ends (the feed closes it
 * after the end op); false at the end with nothing read. */
static bool refill(void) {
  uint64_t t0 = cpu_ns();
  in_len = in_pos = 0;
  while (in_len < sizeof inbuf) {
    ssize_t r = read(ORACLE_FD_OPS, inbuf + in_len, sizeof inbuf - in_len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      break;
    in_len += (size_t)r;
  }
  aside_ns += cpu_ns() - t0;
  return in_len > 0;
}

static bool read_exact(void *dst, size_t n) {
  unsigned char *d = dst;
  while (n > 0) {
    if (in_pos == in_len && !refill())
      return false;
    size_t k = in_len - in_pos < n ? in_len - in_pos : n;
    memcpy(d, inbuf + in_pos, k);
    in_pos += k;
    d += k;
    n -= k;
  }
  return true;
}

/* ---- The allocator's extra calls ---------------------------------------- */

typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef void (*mi_collect_fn)(bool);
typedef void (*mi_option_set_fn)(int, long);
typedef int (*mi_version_fn)(void);
typedef void (*void_fn)(void);
typedef int (*tc_setprop_fn)(const char *, size_t);
typedef const char *(*tc_version_fn)(int *, int *, const char **);

static oracle_hello_t hello;
static mallctl_fn     je_mallctl;
static uint64_t       je_prng_seed, je_jitter_seed;     /* traces/je_seeds.h */
static uint64_t je_coarse_init_ns, je_coarse_origin_ns; /* ORACLE_R_JE_CLOCK */
static uint64_t ncreated; /* ORACLE_R_THREAD reports sent */
static mi_collect_fn    mi_collect_p;
static mi_option_set_fn mi_option_set_p;
static int              mi_version_v;
static uint64_t         allocator_version; /* protocol.h ORACLE_R_READY's b */
static void_fn          tc_release;
static tc_setprop_fn    tc_setprop;
static uint64_t         unsupported; /* ops without a counterpart here */
static char             library[200] = "musl (static)";

#ifndef ORACLE_STATIC
/* dlsym's object pointer into a function pointer: copied, since ISO C has
 * no conversion between the two (POSIX guarantees the representation). */
#define LOOKUP(fp, name)                                                       \
  do {                                                                         \
    void *sym_ = dlsym(RTLD_DEFAULT, name);                                    \
    memcpy(&(fp), &sym_, sizeof(fp));                                          \
  } while (0)

/* gperftools' tc_version() (src/gperftools/tcmalloc.h.in) as major * 100
 * + minor, 0 without it. */
static uint64_t tcmalloc_version(void) {
  tc_version_fn version = NULL;
  int           major = 0, minor = 0;
  LOOKUP(version, "tc_version");
  if (version != NULL)
    version(&major, &minor, NULL);
  return major > 0 && minor >= 0 ? (uint64_t)major * 100 + (uint64_t)minor : 0;
}

/* jemalloc's mallctl("version") as major * 10000 + minor * 100 + patch, 0
 * when it cannot be read. */
static uint64_t jemalloc_version(void) {
  const char *v = NULL;
  size_t      len = sizeof v;
  if (je_mallctl == NULL || je_mallctl("version", &v, &len, NULL, 0) != 0)
    return 0;
  return allocator_version_code(v);
}

/* Only the chosen allocator's symbols: they exist, so no lookup fails. */
static void resolve(void) {
  void   *m = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info info;
  if (m != NULL && dladdr(m, &info) != 0 && info.dli_fname != NULL) {
    size_t n = 0;
    put_str(library, sizeof library, &n, info.dli_fname);
  }
  mi_version_fn version = NULL;
  switch (hello.allocator) {
  case ORACLE_JEMALLOC:
    LOOKUP(je_mallctl, "mallctl");
    allocator_version = jemalloc_version(); /* initialises jemalloc,
                                               if nothing has yet */
    je_coarse_init_ns = clock_ns(CLOCK_MONOTONIC_COARSE);
    je_prng_seed = je_seeds_tsd();
    static char seeds_buf[4096]; /* /proc/self/maps, a piece at a time */
    je_jitter_seed = je_seeds_decay(je_mallctl, seeds_buf, sizeof seeds_buf);
    break;
  case ORACLE_MIMALLOC:
    LOOKUP(mi_collect_p, "mi_collect");
    LOOKUP(mi_option_set_p, "mi_option_set");
    LOOKUP(version, "mi_version");
    mi_version_v = version != NULL ? version() : 0;
    allocator_version = mi_version_v > 0 ? (uint64_t)mi_version_v : 0;
    break;
  case ORACLE_TCMALLOC:
    LOOKUP(tc_release, "MallocExtension_ReleaseFreeMemory");
    LOOKUP(tc_setprop, "MallocExtension_SetNumericProperty");
    allocator_version = tcmalloc_version();
    break;
  default:
    break;
  }
}

/* ORACLE_R_JE_THREAD for the thread just created (report ncreated - 1). */
static void send_thread_seed(pthread_t th) {
  if (je_prng_seed != 0)
    send_result(ORACLE_R_JE_THREAD, ncreated - 1,
                je_seeds_thread_tsd(je_prng_seed, (uintptr_t)pthread_self(),
                                    (uintptr_t)th),
                0, NULL);
}

/* ORACLE_R_JE_ARENA for each arena but 0 that jemalloc made.  mallctl
 * sees an arena made after its last "epoch" refresh as not initialised
 * (5.3.0 src/ctl.c:3824-3831), so this refreshes first; the refresh can
 * allocate jemalloc's own metadata, so it comes after the last RSS
 * reading. */
static void send_arena_seeds(void) {
  unsigned narenas = 0;
  size_t   len = sizeof narenas;
  uint64_t epoch = 1;
  if (je_mallctl == NULL || je_jitter_seed == 0 ||
      je_mallctl("epoch", NULL, NULL, &epoch, sizeof epoch) != 0 ||
      je_mallctl("arenas.narenas", &narenas, &len, NULL, 0) != 0)
    return;
  for (unsigned a = 1; a < narenas; a++) {
    uint64_t seed = je_seeds_arena_decay(je_mallctl, a, je_jitter_seed);
    if (seed != 0)
      send_result(ORACLE_R_JE_ARENA, a, seed, 0, NULL);
  }
}

#else
static void resolve(void) {}
static void send_thread_seed(pthread_t th) {
  (void)th;
}
static void send_arena_seeds(void) {}
#endif

/* "arena.<i>.<what>" for jemalloc's mallctl. */
static void arena_ctl(char *buf, size_t cap, uint64_t arena, const char *what) {
  size_t n = 0;
  buf[0] = '\0';
  put_str(buf, cap, &n, "arena.");
  put_u64(buf, cap, &n, arena == ORACLE_ALL_ARENAS ? 4096 : arena);
  put_str(buf, cap, &n, ".");
  put_str(buf, cap, &n, what);
}

/* MALLCTL_ARENAS_ALL is 4096: jemalloc 5.3.0
 * include/jemalloc/jemalloc_macros.h.in:47. */
static void apply_purge(uint64_t kind, uint64_t arena) {
  char name[64];
  if (!oracle_purge_supported((oracle_allocator_t)hello.allocator,
                              (unsigned)kind)) {
    unsupported++;
    return;
  }
  switch (hello.allocator) {
  case ORACLE_JEMALLOC:
    if (je_mallctl == NULL)
      fail("jemalloc without mallctl: purge at op ", ops_done);
    if (kind == ORACLE_PURGE_TCACHE) {
      je_mallctl("thread.tcache.flush", NULL, NULL, NULL, 0);
      return;
    }
    arena_ctl(name, sizeof name, arena,
              kind == ORACLE_PURGE_ALL ? "purge" : "decay");
    if (je_mallctl(name, NULL, NULL, NULL, 0) != 0)
      fail("mallctl arena.<i>.purge/decay failed for arena ", arena);
    return;
  case ORACLE_MIMALLOC:
    if (mi_collect_p == NULL)
      fail("mimalloc without mi_collect: purge at op ", ops_done);
    mi_collect_p(kind == ORACLE_PURGE_ALL);
    return;
  case ORACLE_TCMALLOC:
    if (tc_release == NULL)
      fail("tcmalloc without MallocExtension_ReleaseFreeMemory: op ", ops_done);
    tc_release();
    return;
  default:
    unsupported++;
  }
}

static void je_decay(const char *knob, int64_t value) {
  ssize_t v = (ssize_t)value;
  char    name[80];
  size_t  n = 0;
  name[0] = '\0';
  put_str(name, sizeof name, &n, "arenas.");
  put_str(name, sizeof name, &n, knob);
  if (je_mallctl(name, NULL, NULL, &v, sizeof v) != 0)
    fail("mallctl arenas.<decay> refused the value (as unsigned) ",
         (uint64_t)value);
  unsigned narenas = 0;
  size_t   len = sizeof narenas;
  if (je_mallctl("arenas.narenas", &narenas, &len, NULL, 0) != 0)
    fail("mallctl arenas.narenas failed at op ", ops_done);
  for (unsigned i = 0; i < narenas; i++) {
    arena_ctl(name, sizeof name, i, knob);
    je_mallctl(name, NULL, NULL, &v, sizeof v); /* EFAULT: not created */
  }
}

static void apply_option(const char *name, int64_t value) {
  const oracle_option_t *o =
      oracle_option_find((oracle_allocator_t)hello.allocator, name);
  if (o == NULL) {
    unsupported++;
    return;
  }
  switch (o->call) {
  case ORACLE_CALL_MALLOPT:
#ifndef ORACLE_STATIC
    if (mallopt(o->param, (int)value) != 1)
      fail("mallopt refused the value (as unsigned) ", (uint64_t)value);
#endif
    return;
  case ORACLE_CALL_JE_DECAY:
    if (je_mallctl == NULL)
      fail("jemalloc without mallctl: option at op ", ops_done);
    je_decay(o->target, value);
    return;
  case ORACLE_CALL_JE_BOOL: {
    bool b = value != 0;
    if (je_mallctl == NULL ||
        je_mallctl(o->target, NULL, NULL, &b, sizeof b) != 0)
      fail("mallctl background_thread failed at op ", ops_done);
    return;
  }
  case ORACLE_CALL_MI_OPTION:
    if (mi_option_set_p == NULL || mi_version_v / 100 != 2 ||
        mi_version_v / 10 % 10 != 0)
      fail("mimalloc option events are mapped for 2.0.x (mi_option_t of "
           "v2.0.9); this library's mi_version() is ",
           (uint64_t)mi_version_v);
    mi_option_set_p(o->param, (long)value);
    return;
  case ORACLE_CALL_TC_PROPERTY:
    if (tc_setprop == NULL || !tc_setprop(o->target, (size_t)value))
      fail("MallocExtension_SetNumericProperty refused op ", ops_done);
    return;
  default:
    unsupported++;
  }
}

/* ---- Calls -------------------------------------------------------------- */

static void **objs; /* id -> the block the allocator returned */

static void fill(void *p, uint64_t n) {
  if (n > 0)
    memset(p, 0xa5, (size_t)n);
}

static void check_id(const oracle_op_t *op) {
  if (op->id >= hello.ids)
    fail("object id beyond the table: ", op->id);
}

/* Writes the bytes a touch names: as they are, or the pages of this
 * block's span that hold the captured process's pages. */
static void touch(const oracle_op_t *op) {
  uint64_t at = (uintptr_t)objs[op->id], lo = at + op->aux, hi = lo + op->size;
  uint64_t first, end, page = (uint64_t)1 << op->lg_page;
  if ((op->flags & ORACLE_F_SPAN) &&
      touch_span_pages(op->object_size, op->aux, op->size, page, &first, &end))
    touch_span_bytes(at, op->object_size, page, first, end, &lo, &hi);
  fill((void *)(uintptr_t)lo, hi - lo);
}

static void do_alloc(const oracle_op_t *op) {
  check_id(op);
  void *p = NULL;
  switch (op->code) {
  case ORACLE_OP_CALLOC:
    p = calloc(1, (size_t)op->size);
    break;
  case ORACLE_OP_MEMALIGN:
    /* Alignments below a pointer's are plain mallocs in every allocator
     * here (glibc _mid_memalign: alignment <= MALLOC_ALIGNMENT). */
    if (op->aux < sizeof(void *) ||
        posix_memalign(&p, (size_t)op->aux, (size_t)op->size) != 0)
      p = op->aux < sizeof(void *) ? malloc((size_t)op->size) : NULL;
    break;
  default:
    p = malloc((size_t)op->size);
  }
  if (p == NULL && op->size > 0)
    fail("the allocator returned NULL for bytes ", op->size);
  objs[op->id] = p;
  if (!(op->flags & ORACLE_F_UNWRITTEN) && op->code != ORACLE_OP_CALLOC)
    fill(p, op->size);
}

static void do_realloc(const oracle_op_t *op) {
  check_id(op);
  void *p = realloc(objs[op->id], (size_t)op->size);
  if (p == NULL && op->size > 0)
    fail("realloc returned NULL for bytes ", op->size);
  objs[op->id] = p;
  if (!(op->flags & ORACLE_F_UNWRITTEN) && op->size > op->aux)
    fill((char *)p + op->aux, op->size - op->aux);
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
    ;
}

/* ---- Periodic samples -----------------------------------------------------
 */

static uint64_t  next_sample_ns;  /* monotonic time of the next sample */
static uint64_t  replay_start_ns; /* monotonic time of the first op */
static uint64_t *op_times;        /* ORACLE_FD_TIMES: [op] ns since then */

static uint64_t mono_ns(void) {
  return clock_ns(CLOCK_MONOTONIC);
}

/* A sample now, after `done` calls, stamped with the replay's time, if
 * one is due.  Reading smaps_rollup walks the page tables, which takes
 * milliseconds for hundreds of MiB (and longer on a loaded machine), so the
 * next sample waits at least four reads' time: sampling takes at most a
 * fifth of the replay. */
static void sample_if_due(uint64_t now, uint64_t done) {
  if (hello.sample_every_ns == 0 || now < next_sample_ns)
    return;
  send_rss(ORACLE_R_SAMPLE, done, now - replay_start_ns);
  uint64_t after = mono_ns(), gap = 4 * (after - now);
  next_sample_ns += hello.sample_every_ns;
  if (next_sample_ns < after + gap)
    next_sample_ns =
        after + (gap > hello.sample_every_ns ? gap : hello.sample_every_ns);
}

/* An idle: slept in slices up to the next sample, each sample counted
 * after the idle (so that it follows the idle event in the trace). */
static void idle(const oracle_op_t *op) {
  uint64_t start = mono_ns(), end = start + op->size;
  for (uint64_t now = start; now < end; now = mono_ns()) {
    uint64_t until = end;
    if (hello.sample_every_ns != 0 && next_sample_ns < until)
      until = next_sample_ns > now ? next_sample_ns : now;
    sleep_ns(until - now);
    now = mono_ns();
    sample_if_due(now, ops_done + 1);
  }
}

static char cur_name[ORACLE_NAME_MAX];

static void execute(const oracle_op_t *op) {
  switch (op->code) {
  case ORACLE_OP_MALLOC:
  case ORACLE_OP_CALLOC:
  case ORACLE_OP_MEMALIGN:
    do_alloc(op);
    break;
  case ORACLE_OP_REALLOC:
    do_realloc(op);
    break;
  case ORACLE_OP_FREE:
    check_id(op);
    free(objs[op->id]);
    objs[op->id] = NULL;
    break;
  case ORACLE_OP_TOUCH:
    check_id(op);
    touch(op);
    break;
  case ORACLE_OP_MARK:
    send_rss(ORACLE_R_MARK, op->id, 0);
    break;
  case ORACLE_OP_IDLE:
    idle(op);
    break;
  case ORACLE_OP_TRIM:
#ifndef ORACLE_STATIC
    malloc_trim((size_t)op->size); /* glibc's, as the program would call */
#else
    unsupported++;
#endif
    break;
  case ORACLE_OP_PURGE:
    apply_purge(op->size, op->aux);
    break;
  case ORACLE_OP_OPTION:
    apply_option(cur_name, (int64_t)op->size);
    break;
  default: /* thread start and exit: the thread itself */
    break;
  }
}

/* ---- Threads and the baton ---------------------------------------------- */

typedef enum slot_state_e { SLOT_FREE, SLOT_LIVE, SLOT_EXITED } slot_state_t;

typedef struct slot_s slot_t;
struct slot_s {
  uint32_t     tid;
  slot_state_t state;
  pthread_t    th;
  sem_t        go;
  uint64_t     dtv; /* the creation (ORACLE_R_THREAD, from 0) whose report
                       carried its stack's DTV, or UINT64_MAX */
};

static slot_t      slots[ORACLE_MAX_THREADS];
static size_t      nslots = 1; /* slot 0: the main thread, trace 0 */
static oracle_op_t cur;
static bool        have_cur;

static void run(slot_t *me);

static void *thread_main(void *arg) {
  slot_t *me = arg;
  while (sem_wait(&me->go) != 0)
    ;
  run(me);
  return NULL;
}

/* The live slot of trace thread tid, or NULL. */
static slot_t *slot_find(uint32_t tid) {
  for (size_t i = 0; i < nslots; i++)
    if (slots[i].state == SLOT_LIVE && slots[i].tid == tid)
      return &slots[i];
  return NULL;
}

/* glibc's heap bytes in use (mallinfo2 uordblks: every arena's chunks
 * not free in a bin or top, glibc 2.36 malloc/malloc.c:5197), or
 * ORACLE_THREAD_UNMEASURED when another allocator serves malloc.  Read
 * around pthread_create, the difference is the DTV calloc (protocol.h):
 * the stack is mmapped, not malloced (nptl/allocatestack.c:366), the new
 * thread waits on its semaphore without allocating, and every other thread
 * waits for the baton.  mallinfo2 only reads the arenas (malloc.c:5211-
 * 5230, each under its lock), so the heap the trace builds is untouched.
 * Its CPU time is set aside, like an RSS read's. */
static uint64_t heap_in_use(void) {
#if !defined(ORACLE_STATIC) && defined(__GLIBC__) &&                           \
    (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  if (hello.allocator != ORACLE_GLIBC)
    return ORACLE_THREAD_UNMEASURED;
  uint64_t         t0 = cpu_ns();
  struct mallinfo2 mi = mallinfo2();
  aside_ns += cpu_ns() - t0;
  return (uint64_t)mi.uordblks;
#else
  return ORACLE_THREAD_UNMEASURED;
#endif
}

/* ---- glibc's stack cache ---------------------------------------------------
 * A joined thread's stack, DTV and all, goes to nptl's cache, which frees
 * the oldest once it holds more than 40 MiB: _dl_deallocate_tls frees the
 * DTV, in the joining thread, and the stack is unmapped (glibc 2.36
 * nptl/nptl-stack.c:23, :96-106 queue_stack, :56-84 __nptl_free_stacks).
 * With glibc, the replayer keeps the joined stacks it created, keyed by
 * pthread_t (glibc's is the struct pthread, nptl/pthread_create.c:750,
 * placed at the end of the stack's mapping, nptl/allocatestack.c:376-386),
 * and after each join asks the kernel
 * which are gone (msync of an unmapped page fails with ENOMEM): each one's
 * DTV was freed by that join (ORACLE_R_DTV_FREE).  A stack pthread_create
 * takes back (no heap bytes) brings its DTV with it. */

typedef struct cached_s cached_t;
struct cached_s {
  uintptr_t key; /* the pthread_t that ran on it */
  uint64_t  dtv; /* as slot_t dtv */
};

static cached_t cached[ORACLE_MAX_THREADS];
static size_t   ncached;

static uintptr_t page_size = 4096; /* sysconf's, in main */

static bool page_mapped(uintptr_t addr) {
  uintptr_t page = addr & ~(page_size - 1);
  return msync((void *)page, 1, MS_ASYNC) == 0 || errno != ENOMEM;
}

#if !defined(ORACLE_STATIC) && defined(__GLIBC__)
/* Whether th runs on a stack the replayer saw cached (a joined thread's). */
static bool stack_was_cached(pthread_t th) {
  for (size_t i = 0; i < ncached; i++)
    if (cached[i].key == (uintptr_t)th)
      return true;
  return false;
}

/* glibc's DTV chunk for a new stack where mallinfo2 cannot see it (another
 * allocator serves ld.so's calloc, glibc 2.36 elf/dl-minimal.c:91-99):
 * calloc (dtv_length + 2, sizeof (dtv_t)) with dtv_length =
 * GL(dl_tls_max_dtv_idx) + DTV_SURPLUS (14) (elf/dl-tls.c:374-375), the
 * largest TLS module id standing for dl_tls_max_dtv_idx (the replayer
 * loads and unloads nothing once it runs), reported as the glibc chunk
 * that request would be, request + 16 (protocol.h ORACLE_R_THREAD).
 * Checked against mallinfo2 where glibc serves it: 288 bytes, module 1. */
static int note_tls_modid(struct dl_phdr_info *info, size_t size, void *max) {
  (void)size;
  if (info->dlpi_tls_modid > *(size_t *)max)
    *(size_t *)max = info->dlpi_tls_modid;
  return 0;
}

static uint64_t computed_dtv_chunk(void) {
  static uint64_t chunk;
  if (chunk == 0) {
    size_t max = 0;
    dl_iterate_phdr(note_tls_modid, &max);
    chunk = (uint64_t)(max + 14 + 2) * 16 + 16;
  }
  return chunk;
}
#endif

/* What ORACLE_R_THREAD reports of thread th's creation: the heap bytes
 * glibc's pthread_create took (before and after, heap_in_use), or for
 * another allocator the DTV chunk when th got a new stack (0 on a cached
 * one); ORACLE_THREAD_UNMEASURED where pthread_create mallocs nothing
 * (musl) or cannot be read. */
static uint64_t creation_bytes(pthread_t th, uint64_t before, uint64_t after) {
  if (before != ORACLE_THREAD_UNMEASURED)
    return after > before ? after - before : 0;
#if !defined(ORACLE_STATIC) && defined(__GLIBC__)
  if (hello.allocator != ORACLE_MUSL)
    return stack_was_cached(th) ? 0 : computed_dtv_chunk();
#else
  (void)th;
#endif
  return ORACLE_THREAD_UNMEASURED;
}

/* The DTV of the stack pthread_create gave thread th: a new one (creation
 * idx) when the call took heap bytes, else the cached stack's. */
static uint64_t stack_dtv(pthread_t th, uint64_t heap, uint64_t idx) {
  if (heap == ORACLE_THREAD_UNMEASURED)
    return UINT64_MAX;
  if (heap > 0)
    return idx;
  for (size_t i = 0; i < ncached; i++)
    if (cached[i].key == (uintptr_t)th) {
      uint64_t dtv = cached[i].dtv;
      cached[i] = cached[--ncached];
      return dtv;
    }
  return UINT64_MAX;
}

/* After joined's join by trace thread tid: its stack cached, and the
 * DTVs of the stacks the cache let go reported. */
static void stack_cached(const slot_t *joined, uint32_t tid) {
  if (joined->dtv == UINT64_MAX)
    return;
  if (ncached == ORACLE_MAX_THREADS)
    fail("more cached thread stacks than the replayer tracks: ",
         ORACLE_MAX_THREADS);
  cached[ncached++] = (cached_t){(uintptr_t)joined->th, joined->dtv};
  for (size_t i = 0; i < ncached;)
    if (!page_mapped(cached[i].key)) {
      send_result(ORACLE_R_DTV_FREE, ops_done, tid, cached[i].dtv, NULL);
      cached[i] = cached[--ncached];
    } else
      i++;
}

/* A new thread for trace thread tid.  Only the main thread creates
 * threads, as a program's main thread would: pthread_create's frames then
 * land on the main stack, not on the stacks the trace's threads measure. */
static slot_t *slot_create(uint32_t tid) {
  slot_t *spare = NULL;
  for (size_t i = 1; i < nslots && spare == NULL; i++)
    if (slots[i].state == SLOT_FREE)
      spare = &slots[i];
  if (spare == NULL) {
    if (nslots == ORACLE_MAX_THREADS)
      fail("more trace threads alive at once than the replayer holds: ",
           ORACLE_MAX_THREADS);
    spare = &slots[nslots++];
  }
  spare->tid = tid;
  spare->state = SLOT_LIVE;
  if (sem_init(&spare->go, 0, 0) != 0)
    fail("sem_init failed, errno ", (uint64_t)errno);
  uint64_t before = heap_in_use();
  int      e = pthread_create(&spare->th, NULL, thread_main, spare);
  if (e != 0)
    fail("pthread_create failed, error ", (uint64_t)e);
  uint64_t after = heap_in_use();
  uint64_t heap = creation_bytes(spare->th, before, after);
  spare->dtv = stack_dtv(spare->th, heap, ncreated++);
  send_result(ORACLE_R_THREAD, ops_done, tid, heap, NULL);
  send_thread_seed(spare->th);
  return spare;
}

/* Joins the threads that have exited (the next op runs after them), on
 * trace thread tid. */
static void reap(uint32_t tid) {
  for (size_t i = 1; i < nslots; i++)
    if (slots[i].state == SLOT_EXITED) {
      pthread_join(slots[i].th, NULL);
      stack_cached(&slots[i], tid);
      sem_destroy(&slots[i].go);
      slots[i].state = SLOT_FREE;
    }
}

static void next_op(void) {
  if (!read_exact(&cur, sizeof cur))
    fail("the op stream ended early, ops done ", ops_done);
  if (cur.code == ORACLE_OP_OPTION && (!read_exact(cur_name, sizeof cur_name) ||
                                       cur_name[sizeof cur_name - 1] != '\0'))
    fail("a malformed option name at op ", ops_done);
  have_cur = true;
}

/* Wakes the owner of the current op; an owner yet to be created is the
 * main thread's to create, so another thread wakes the main one. */
static void pass_baton(const slot_t *me) {
  slot_t *owner = slot_find(cur.thread);
  if (owner == NULL)
    owner = me == &slots[0] ? slot_create(cur.thread) : &slots[0];
  sem_post(&owner->go);
}

static void finish(void) {
  uint64_t    calls_ns = cpu_ns() - calls_start_ns - aside_ns;
  uint64_t    final_rss = rss_now();
  static char maps_buf[1 << 16];
  if (hello.allocator == ORACLE_JEMALLOC) {
    struct timespec res = {0, 0};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    send_result(ORACLE_R_JE_SEEDS, je_prng_seed, je_jitter_seed, 0, NULL);
    send_result(ORACLE_R_JE_CLOCK, je_coarse_init_ns, je_coarse_origin_ns,
                timespec_ns(res), NULL);
    send_arena_seeds();
  }
  send_result(ORACLE_R_HINT_AREA, mi_hint_area_start(maps_buf, sizeof maps_buf),
              0, 0, NULL);
  send_result(ORACLE_R_DONE, final_rss, unsupported, calls_ns, NULL);
  _exit(0);
}

/* Runs ops while they are this thread's; passes the baton otherwise. */
static void run(slot_t *me) {
  for (;;) {
    if (!have_cur)
      next_op();
    if (cur.thread != me->tid || me->state != SLOT_LIVE) {
      pass_baton(me);
      while (sem_wait(&me->go) != 0)
        ;
      continue;
    }
    reap(me->tid);
    have_cur = false;
    if (cur.code == ORACLE_OP_END)
      finish();
    if (ops_done >= hello.ops)
      fail("more ops than the hello announced: ", hello.ops);
    op_times[ops_done] = mono_ns() - replay_start_ns;
    execute(&cur);
    ++ops_done;
    if (hello.sample_every_ns != 0 && ops_done % ORACLE_CLOCK_EVERY == 0)
      sample_if_due(mono_ns(), ops_done);
    if (cur.code == ORACLE_OP_THREAD_EXIT && me != &slots[0]) {
      me->state = SLOT_EXITED; /* the next op's thread joins it */
      next_op();
      pass_baton(me);
      return;
    }
  }
}

/* ---- Start -------------------------------------------------------------- */

int main(void) {
  if (!read_exact(&hello, sizeof hello) || hello.magic != ORACLE_MAGIC ||
      hello.allocator >= ORACLE_ALLOCATOR_COUNT)
    fail("expected the oracle's hello on fd 3; allocator ", hello.allocator);
  size_t table = (size_t)(hello.ids ? hello.ids : 1) * sizeof *objs;
  objs = mmap(NULL, table, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
              -1, 0);
  if (objs == MAP_FAILED)
    fail("cannot map the object table, bytes ", table);
#ifdef MADV_NOHUGEPAGE
  madvise(objs, table, MADV_NOHUGEPAGE); /* its size must not vary */
#endif
  memset(objs, 0, table); /* resident now, so in the baseline */
  if (hello.ops > 0) {
    op_times = mmap(NULL, (size_t)hello.ops * sizeof *op_times,
                    PROT_READ | PROT_WRITE, MAP_SHARED, ORACLE_FD_TIMES, 0);
    if (op_times == MAP_FAILED)
      fail("cannot map the op times (fd 5), errno ", (uint64_t)errno);
  }
  memset(slots, 0, sizeof slots);
  memset(cached, 0, sizeof cached);
  long ps = sysconf(_SC_PAGESIZE);
  if (ps > 0)
    page_size = (uintptr_t)ps;
  memset(rss_buf, 0, sizeof rss_buf);
  /* inbuf: written by the read of the hello, and holding the first ops */
  for (size_t i = in_len; i < sizeof inbuf; i += 4096)
    inbuf[i] = 0;
  resolve();
  slots[0].state = SLOT_LIVE;
  slots[0].tid = 0;
  if (sem_init(&slots[0].go, 0, 0) != 0)
    fail("sem_init failed, errno ", (uint64_t)errno);
  (void)rss_now(); /* open/read paths warm */
  if (hello.allocator == ORACLE_JEMALLOC)
    je_coarse_origin_ns =
        clock_ns(CLOCK_MONOTONIC_COARSE); /* before: never after the origin */
  replay_start_ns = mono_ns();
  send_result(ORACLE_R_READY, rss_now(), allocator_version, replay_start_ns,
              library);
  next_sample_ns = replay_start_ns + hello.sample_every_ns;
  calls_start_ns = cpu_ns();
  run(&slots[0]);
  finish();
  return 0;
}
