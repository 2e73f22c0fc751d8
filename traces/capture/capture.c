/* traces/capture/capture.c -- liballocsim_capture.so, the LD_PRELOAD library
 * that records every malloc-family call of an unmodified program, measured
 * RSS samples and named marks into a raw log (capture_log.h).
 *
 * `allocsim capture` sets ALLOCSIM_CAPTURE_DIR and LD_PRELOAD, runs the
 * program and converts the raw logs into allocsim traces afterwards.  Without
 * ALLOCSIM_CAPTURE_DIR the library only forwards calls (so allocsim_mark()
 * and allocsim_hook_python() are harmless no-ops).
 *
 * Rules this file keeps, and why:
 *   - It never allocates through the allocator it traces.  Per-thread record
 *     buffers and the sampler thread's stack are mmap'd; the log is written
 *     with write(2); no stdio, no snprintf, no getenv after start-up.
 *   - dlsym(RTLD_NEXT) may itself call calloc before the real symbols are
 *     known; those calls are served from a static bootstrap buffer whose
 *     blocks are never passed to the real free.
 *   - Ordering (capture_log.h): seq is taken after the real call for calls
 *     that produce a pointer and before it for calls that release one.
 *   - Signals: the hot path calls only async-signal-safe functions
 *     (clock_gettime, write, atomics).  A handler that allocates while its
 *     thread is in the middle of recording gets its record written straight
 *     to the log as a chunk of its own, so nothing is torn or deadlocked.
 *   - fork: a prepare handler flushes the forking thread's buffer; the child
 *     opens its own log raw.CHILDPID.0, forgets the parent's threads and
 *     restarts its sampler.  Objects inherited from the parent are unknown to
 *     the child's trace: their frees are counted as unmatched by the
 *     converter.
 *   - exec: LD_PRELOAD and ALLOCSIM_CAPTURE_DIR stay in the environment, so
 *     the new image loads the library again and writes raw.PID.N with the
 *     next free N.  execve, execv, execvp and execvpe are wrapped to flush
 *     the calling thread's buffer first; other threads' unflushed records
 *     are lost with the old image (exec kills them anyway).  The execl
 *     family (variadic) is not wrapped: its last buffer is lost.
 *   - _exit() and fatal signals skip the destructor: unflushed records of
 *     such a process are lost.
 *
 * What it leaves out: reallocarray and the memalign family are recorded,
 * malloc_usable_size and the deprecated cfree are not; mmap calls made by
 * the program itself are not allocations and are not recorded (they show up
 * only in the measured RSS).
 *
 * Sections: state, bootstrap, raw log, recording, RSS and sampler,
 * initialisation and fork, the malloc family, CPython domains, marks.
 */

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ALLOCSIM_MARK_DEFINE
#include "allocsim_mark.h"
#include "capture_log.h"

#define EXPORT      __attribute__((visibility("default")))
#define TLS         __thread __attribute__((tls_model("initial-exec")))
#define LIKELY(x)   __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- State --------------------------------------------------------------- */

/* Bytes of one per-thread buffer (record 0 is the chunk header). */
#define BUF_BYTES ((size_t)128 * 1024)
#define BUF_RECS  (BUF_BYTES / sizeof(capture_rec_t))
/* Buffers are pooled and never unmapped, so the overhead walk (mincore) and
 * the exit flush can visit them without racing munmap. */
#define POOL_MAX    1024
#define STACK_BYTES ((size_t)256 * 1024)
#define BOOT_BYTES  ((size_t)64 * 1024)

typedef struct tbuf_s tbuf_t;
/* A slot is published by storing recs (release) after owned = 1, so a
 * thread that sees recs != NULL (acquire) also sees the slot owned and
 * cannot claim it twice. */
struct tbuf_s {
  _Atomic(capture_rec_t *) recs; /* BUF_RECS records; [0] = chunk header */
  size_t                   n;    /* records in use after the header */
  atomic_int busy;  /* 1 while the owner (or the exit flush) uses it */
  atomic_int owned; /* 1 while a live thread owns the buffer */
};

static tbuf_t               g_pool[POOL_MAX];
static atomic_size_t        g_pool_count; /* slots ever handed out */
static atomic_uint_fast64_t g_seq = 1;    /* next seq (0 marks headers) */
static int                  g_fd = -1;    /* the raw log, O_APPEND */
static atomic_int           g_init_state; /* 0 none, 1 running, 2 done */
static bool                 g_enabled;    /* ALLOCSIM_CAPTURE_DIR was set */
static atomic_int           g_final;      /* destructor ran: write direct */
static struct timespec      g_t0;         /* CLOCK_MONOTONIC at init */
static uint64_t             g_sample_ns;  /* sampler period, 0 = none */
static char                 g_dir[512];   /* ALLOCSIM_CAPTURE_DIR */
static pthread_key_t        g_key;        /* thread-exit hook */
static void                *g_stack;      /* sampler stack */
static atomic_int           g_sampler_stop;

typedef struct tls_s tls_t;
struct tls_s {
  tbuf_t *buf;          /* this thread's buffer, NULL until first record */
  int     tid;          /* cached gettid(), 0 = unknown */
  int     in_record;    /* set while this thread appends to its buffer */
  int     in_domain;    /* set inside a CPython domain wrapper */
  int     internal;     /* set while the library calls into libc itself */
  int     resolving;    /* set during dlsym: serve from the boot buffer */
  int     initializing; /* set while this thread runs ensure_init */
};
static TLS tls_t t_self;

/* Real functions, resolved with dlsym(RTLD_NEXT). */
static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static void *(*real_memalign)(size_t, size_t);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);
static void *(*real_valloc)(size_t);
static void *(*real_pvalloc)(size_t);
static int (*real_malloc_trim)(size_t);
static int (*real_execve)(const char *, char *const[], char *const[]);
static int (*real_execv)(const char *, char *const[]);
static int (*real_execvp)(const char *, char *const[]);
static int (*real_execvpe)(const char *, char *const[], char *const[]);

/* ---- Bootstrap ----------------------------------------------------------- */

/* Blocks handed out while dlsym runs: 16-byte header holding the size. */
static _Alignas(16) unsigned char g_boot[BOOT_BYTES];
static atomic_size_t g_boot_used;

static bool is_boot(const void *p) {
  return (const unsigned char *)p >= g_boot &&
         (const unsigned char *)p < g_boot + BOOT_BYTES;
}

static void *boot_alloc(size_t n) {
  size_t need = ((n + 15) & ~(size_t)15) + 16;
  size_t off = atomic_fetch_add(&g_boot_used, need);
  if (off + need > BOOT_BYTES)
    return NULL;
  memcpy(g_boot + off, &n, sizeof n);
  return g_boot + off + 16; /* static storage reads as zero */
}

static size_t boot_size(const void *p) {
  size_t n;
  memcpy(&n, (const unsigned char *)p - 16, sizeof n);
  return n;
}

static void resolve_symbols(void) {
  t_self.resolving = 1;
  real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
  real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  real_memalign = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "memalign");
  real_posix_memalign =
      (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
  real_aligned_alloc =
      (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
  real_valloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "valloc");
  real_pvalloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "pvalloc");
  real_malloc_trim = (int (*)(size_t))dlsym(RTLD_NEXT, "malloc_trim");
  real_execve = (int (*)(const char *, char *const[], char *const[]))dlsym(
      RTLD_NEXT, "execve");
  real_execv = (int (*)(const char *, char *const[]))dlsym(RTLD_NEXT, "execv");
  real_execvp =
      (int (*)(const char *, char *const[]))dlsym(RTLD_NEXT, "execvp");
  real_execvpe = (int (*)(const char *, char *const[], char *const[]))dlsym(
      RTLD_NEXT, "execvpe");
  t_self.resolving = 0;
}

/* ---- Raw log --------------------------------------------------------------
 */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t s = (int64_t)ts.tv_sec - (int64_t)g_t0.tv_sec;
  int64_t ns = (int64_t)ts.tv_nsec - (int64_t)g_t0.tv_nsec;
  int64_t v = s * 1000000000 + ns;
  return v < 0 ? 0 : (uint64_t)v;
}

static int my_tid(void) {
  if (UNLIKELY(t_self.tid == 0))
    t_self.tid = (int)syscall(SYS_gettid);
  return t_self.tid;
}

static void write_all(const void *p, size_t len) {
  const char *c = p;
  int         saved = errno;
  while (len > 0 && g_fd >= 0) {
    ssize_t w = write(g_fd, c, len);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      break; /* disk full or closed: the converter sees a short log */
    }
    c += w;
    len -= (size_t)w;
  }
  errno = saved;
}

static void chunk_header(capture_rec_t *h, size_t count) {
  memset(h, 0, sizeof *h);
  h->seq = CAPTURE_CHUNK_MAGIC;
  h->a = count;
  h->tid = (uint32_t)my_tid();
}

/* Writes recs[1..n] of b as one chunk and empties it. */
static void buf_flush(tbuf_t *b) {
  if (b->n == 0)
    return;
  capture_rec_t *recs = atomic_load_explicit(&b->recs, memory_order_relaxed);
  chunk_header(&recs[0], b->n);
  write_all(recs, (b->n + 1) * sizeof(capture_rec_t));
  b->n = 0;
}

/* A pooled buffer for the calling thread, or NULL (pool exhausted). */
static tbuf_t *buf_acquire(void) {
  size_t count = atomic_load(&g_pool_count);
  for (size_t i = 0; i < count; i++) {
    int expect = 0;
    if (atomic_load_explicit(&g_pool[i].recs, memory_order_acquire) != NULL &&
        atomic_compare_exchange_strong(&g_pool[i].owned, &expect, 1))
      return &g_pool[i];
  }
  size_t i = atomic_fetch_add(&g_pool_count, 1);
  if (i >= POOL_MAX) {
    atomic_fetch_sub(&g_pool_count, 1);
    return NULL;
  }
  void *m = mmap(NULL, BUF_BYTES, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return NULL; /* slot stays empty (recs NULL) and is skipped */
  g_pool[i].n = 0;
  atomic_store(&g_pool[i].owned, 1);
  atomic_store_explicit(&g_pool[i].recs, m, memory_order_release);
  return &g_pool[i];
}

/* ---- Recording ------------------------------------------------------------
 */

/* Appends op (plus label records for marks) to the thread's buffer.  Called
 * with all fields but seq, t_ns and tid filled in rec. */
static void emit(capture_rec_t *rec, const char *label, size_t label_len) {
  if (!g_enabled ||
      atomic_load_explicit(&g_init_state, memory_order_acquire) != 2)
    return;
  size_t        nlab = label ? (label_len + CAPTURE_LABEL_BYTES_PER_REC - 1) /
                            CAPTURE_LABEL_BYTES_PER_REC
                             : 0;
  capture_rec_t lab[2];
  if (nlab > 2)
    nlab = 2, label_len = 2 * CAPTURE_LABEL_BYTES_PER_REC;
  rec->extra = (uint8_t)nlab;
  rec->tid = (uint32_t)my_tid();

  bool reentrant = t_self.in_record != 0;
  t_self.in_record = 1;
  atomic_signal_fence(memory_order_seq_cst);
  rec->seq = atomic_fetch_add_explicit(&g_seq, 1, memory_order_relaxed);
  rec->t_ns = now_ns();
  for (size_t i = 0; i < nlab; i++) {
    memset(&lab[i], 0, sizeof lab[i]);
    size_t off = i * CAPTURE_LABEL_BYTES_PER_REC;
    size_t len = label_len - off < CAPTURE_LABEL_BYTES_PER_REC
                     ? label_len - off
                     : CAPTURE_LABEL_BYTES_PER_REC;
    memcpy(&lab[i], label + off, len);
    lab[i].op = CAPTURE_OP_LABEL;
    lab[i].tid = rec->tid;
  }

  tbuf_t *b = NULL;
  if (!reentrant && !atomic_load(&g_final)) {
    b = t_self.buf;
    if (b == NULL) {
      b = buf_acquire();
      if (b != NULL) {
        t_self.buf = b;
        t_self.internal++; /* pthread_setspecific may allocate (key >= 32) */
        pthread_setspecific(g_key, b);
        t_self.internal--;
      }
    }
    int expect = 0;
    if (b != NULL && !atomic_compare_exchange_strong(&b->busy, &expect, 1))
      b = NULL; /* the exit flush owns it now */
  }
  if (b == NULL) {
    /* Reentered from a signal handler, after the destructor, or without a
     * buffer: this record becomes a chunk of its own. */
    capture_rec_t one[4];
    chunk_header(&one[0], 1 + nlab);
    one[1] = *rec;
    for (size_t i = 0; i < nlab; i++)
      one[2 + i] = lab[i];
    write_all(one, (2 + nlab) * sizeof(capture_rec_t));
  } else {
    if (b->n + 1 + nlab > BUF_RECS - 1)
      buf_flush(b);
    capture_rec_t *recs = atomic_load_explicit(&b->recs, memory_order_relaxed);
    recs[1 + b->n++] = *rec;
    for (size_t i = 0; i < nlab; i++)
      recs[1 + b->n++] = lab[i];
    atomic_store(&b->busy, 0);
  }
  atomic_signal_fence(memory_order_seq_cst);
  if (!reentrant)
    t_self.in_record = 0;
}

static void record(uint8_t op, uint8_t domain, uint64_t a, uint64_t b,
                   uint64_t c, uint8_t flags) {
  capture_rec_t r = {
      .a = a, .b = b, .c = c, .op = op, .domain = domain, .flags = flags};
  emit(&r, NULL, 0);
}

/* pthread key destructor: the thread is exiting. */
static void on_thread_exit(void *arg) {
  tbuf_t *b = arg;
  record(CAPTURE_OP_THREAD_EXIT, 0, 0, 0, 0, 0);
  int expect = 0;
  if (b != NULL && atomic_compare_exchange_strong(&b->busy, &expect, 1)) {
    buf_flush(b);
    atomic_store(&b->busy, 0);
    atomic_store(&b->owned, 0);
  }
  t_self.buf = NULL;
}

/* ---- RSS and sampler ------------------------------------------------------
 */

/* Rss of /proc/self/smaps_rollup in bytes (exact: it walks the page tables;
 * Linux 6.1.170 fs/proc/task_mmu.c:768 smap_gather_stats; VmRSS lags by up
 * to 64 page faults per thread, mm/memory.c:198), 0 if unreadable. */
static uint64_t read_rss(void) {
  char buf[2048];
  int  fd = open("/proc/self/smaps_rollup", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  const char *p = strstr(buf, "\nRss:");
  if (p == NULL)
    return 0;
  p += 5;
  while (*p == ' ' || *p == '\t')
    p++;
  uint64_t kb = 0;
  while (*p >= '0' && *p <= '9')
    kb = kb * 10 + (uint64_t)(*p++ - '0');
  return kb * 1024;
}

/* Resident bytes of the library's own mappings (buffers, sampler stack and
 * the touched part of the bootstrap buffer), counted with mincore. */
static uint64_t own_rss(void) {
  size_t        page = (size_t)getauxval(AT_PAGESZ);
  unsigned char vec[STACK_BYTES / 4096];
  uint64_t      total = 0;
  size_t        count = atomic_load(&g_pool_count);
  for (size_t i = 0; i <= count && i <= POOL_MAX; i++) {
    void  *base = i < count ? (void *)atomic_load_explicit(&g_pool[i].recs,
                                                           memory_order_acquire)
                            : g_stack;
    size_t len = i < count ? BUF_BYTES : STACK_BYTES;
    if (base == NULL || len / page > sizeof vec)
      continue;
    if (mincore(base, len, vec) != 0)
      continue;
    for (size_t k = 0; k < len / page; k++)
      total += (vec[k] & 1) ? page : 0;
  }
  size_t boot = atomic_load(&g_boot_used);
  total += (boot + page - 1) / page * page;
  return total;
}

static void sample_rss(void) {
  uint64_t rss = read_rss();
  record(CAPTURE_OP_RSS, 0, rss, own_rss(), 0, 0);
}

/* Longest share of one CPU the sampler may use: reading smaps_rollup walks
 * the page tables (measured here: 7 ms for a 40 MiB CPython process), so a
 * fixed 10 ms period would keep a core busy and slow the program.  When a
 * read takes longer than period / SAMPLER_DUTY_DIV, the next sample waits
 * SAMPLER_DUTY_DIV times the read's duration instead; sample times are
 * recorded as taken, so the series stays correct, only sparser. */
#define SAMPLER_DUTY_DIV 10

static uint64_t ts_ns(const struct timespec *ts) {
  return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

static void *sampler_main(void *arg) {
  (void)arg;
  t_self.internal = 1; /* nothing this thread does is the program's */
  struct timespec next, a, b;
  clock_gettime(CLOCK_MONOTONIC, &next);
  while (!atomic_load(&g_sampler_stop)) {
    uint64_t ns = (uint64_t)next.tv_nsec + g_sample_ns;
    next.tv_sec += (time_t)(ns / 1000000000u);
    next.tv_nsec = (long)(ns % 1000000000u);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) ==
           EINTR) {
    }
    if (atomic_load(&g_sampler_stop))
      break;
    /* In the sampler t_self.in_record is forced so every sample goes
     * straight to the log: no buffer to lose at exit. */
    clock_gettime(CLOCK_MONOTONIC, &a);
    t_self.in_record = 1;
    sample_rss();
    t_self.in_record = 0;
    clock_gettime(CLOCK_MONOTONIC, &b);
    uint64_t took = ts_ns(&b) - ts_ns(&a);
    if (took * SAMPLER_DUTY_DIV > g_sample_ns) {
      uint64_t wake = ts_ns(&b) + took * (SAMPLER_DUTY_DIV - 1) - g_sample_ns;
      next.tv_sec = (time_t)(wake / 1000000000u);
      next.tv_nsec = (long)(wake % 1000000000u);
    }
  }
  return NULL;
}

static void start_sampler(void) {
  if (g_sample_ns == 0)
    return;
  if (g_stack == NULL) {
    void *m = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
      return;
    g_stack = m;
  }
  atomic_store(&g_sampler_stop, 0);
  pthread_attr_t attr;
  pthread_t      th;
  t_self.internal++; /* pthread_create allocates the DTV with calloc */
  if (pthread_attr_init(&attr) == 0) {
    pthread_attr_setstack(&attr, g_stack, STACK_BYTES);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_create(&th, &attr, sampler_main, NULL);
    pthread_attr_destroy(&attr);
  }
  t_self.internal--;
}

/* ---- Initialisation and fork ----------------------------------------------
 */

static size_t put_u64(char *p, uint64_t v) {
  char   tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0);
  for (size_t i = 0; i < n; i++)
    p[i] = tmp[n - 1 - i];
  return n;
}

/* Opens DIR/raw.PID.N with the first N not taken and writes the header. */
static void log_open(void) {
  char   path[600];
  size_t dl = strlen(g_dir);
  pid_t  pid = getpid();
  for (unsigned gen = 0; gen < 256; gen++) {
    size_t n = 0;
    memcpy(path, g_dir, dl);
    n = dl;
    memcpy(path + n, "/raw.", 5);
    n += 5;
    n += put_u64(path + n, (uint64_t)pid);
    path[n++] = '.';
    n += put_u64(path + n, gen);
    path[n] = '\0';
    int fd =
        open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST)
      continue;
    if (fd >= 0) {
      /* Move the log to a high descriptor so a program that closes or
       * reuses low descriptors is unlikely to hit it. */
      int hi = fcntl(fd, F_DUPFD_CLOEXEC, 900);
      if (hi >= 0) {
        close(fd);
        fd = hi;
      }
    }
    g_fd = fd;
    if (fd < 0)
      return;
    capture_rec_t   h[2];
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    chunk_header(&h[0], 1);
    memset(&h[1], 0, sizeof h[1]);
    h[1].seq = CAPTURE_LOG_MAGIC;
    h[1].op = CAPTURE_OP_FILE_HEADER;
    h[1].a = (uint64_t)pid;
    h[1].b = (uint64_t)getppid();
    h[1].c = (uint64_t)getauxval(AT_PAGESZ);
    h[1].t_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
    h[1].extra = (uint8_t)gen;
    h[1].tid = (uint32_t)my_tid();
    write_all(h, sizeof h);
    return;
  }
}

static void atfork_prepare(void) {
  tbuf_t *b = t_self.buf;
  int     expect = 0;
  if (b != NULL && atomic_compare_exchange_strong(&b->busy, &expect, 1)) {
    buf_flush(b);
    atomic_store(&b->busy, 0);
  }
}

static void atfork_child(void) {
  /* Only the forking thread survives: every other pooled buffer belonged
   * to a parent thread whose records the parent writes. */
  size_t count = atomic_load(&g_pool_count);
  for (size_t i = 0; i < count; i++) {
    g_pool[i].n = 0;
    atomic_store(&g_pool[i].busy, 0);
    atomic_store(&g_pool[i].owned, &g_pool[i] == t_self.buf ? 1 : 0);
  }
  t_self.tid = 0;
  if (g_fd >= 0)
    close(g_fd);
  g_fd = -1;
  clock_gettime(CLOCK_MONOTONIC, &g_t0);
  log_open();
  start_sampler();
  sample_rss();
}

static atomic_int g_resolve_state; /* 0 none, 1 running, 2 done */

static void ensure_resolved(void) {
  if (LIKELY(atomic_load_explicit(&g_resolve_state, memory_order_acquire) == 2))
    return;
  int expect = 0;
  if (atomic_compare_exchange_strong(&g_resolve_state, &expect, 1)) {
    resolve_symbols();
    atomic_store_explicit(&g_resolve_state, 2, memory_order_release);
  } else if (!t_self.resolving) {
    while (atomic_load_explicit(&g_resolve_state, memory_order_acquire) != 2) {
    }
  }
}

/* Resolves the real functions and, once the environment is readable, reads
 * ALLOCSIM_CAPTURE_DIR and opens the log.  ld.so calls malloc before libc's
 * initialiser sets environ; such early calls are forwarded unrecorded and
 * the decision waits for a later call (the constructor at the latest). */
static void ensure_init(void) {
  if (LIKELY(atomic_load_explicit(&g_init_state, memory_order_acquire) == 2))
    return;
  ensure_resolved();
  extern char **environ;
  if (environ == NULL || t_self.initializing)
    return;
  int expect = 0;
  if (!atomic_compare_exchange_strong(&g_init_state, &expect, 1)) {
    while (atomic_load_explicit(&g_init_state, memory_order_acquire) != 2) {
    }
    return;
  }
  t_self.initializing = 1;
  clock_gettime(CLOCK_MONOTONIC, &g_t0);
  const char *dir = NULL, *every = NULL;
  for (char **e = environ; *e != NULL; e++) {
    if (strncmp(*e, "ALLOCSIM_CAPTURE_DIR=", 21) == 0)
      dir = *e + 21;
    else if (strncmp(*e, "ALLOCSIM_CAPTURE_SAMPLE_NS=", 27) == 0)
      every = *e + 27;
  }
  if (dir != NULL && *dir != '\0' && strlen(dir) < sizeof g_dir) {
    memcpy(g_dir, dir, strlen(dir) + 1);
    g_sample_ns = 10000000; /* 10 ms */
    if (every != NULL) {
      g_sample_ns = 0;
      for (const char *p = every; *p >= '0' && *p <= '9'; p++)
        g_sample_ns = g_sample_ns * 10 + (uint64_t)(*p - '0');
    }
    t_self.internal++;
    pthread_key_create(&g_key, on_thread_exit);
    pthread_atfork(atfork_prepare, NULL, atfork_child);
    t_self.internal--;
    log_open();
    g_enabled = g_fd >= 0;
  }
  t_self.initializing = 0;
  atomic_store_explicit(&g_init_state, 2, memory_order_release);
}

__attribute__((constructor)) static void capture_ctor(void) {
  ensure_init();
  if (g_enabled) {
    sample_rss();
    start_sampler();
  }
}

__attribute__((destructor)) static void capture_dtor(void) {
  if (!g_enabled)
    return;
  atomic_store(&g_sampler_stop, 1);
  sample_rss();
  /* Flush every buffer whose owner is not in the middle of a record; an
   * owner that comes back afterwards finds busy set and writes direct. */
  atomic_store(&g_final, 1);
  size_t count = atomic_load(&g_pool_count);
  for (size_t i = 0; i < count; i++) {
    int expect = 0;
    if (atomic_load_explicit(&g_pool[i].recs, memory_order_acquire) != NULL &&
        atomic_compare_exchange_strong(&g_pool[i].busy, &expect, 1))
      buf_flush(&g_pool[i]); /* busy stays set: the process is ending */
  }
}

/* ---- The malloc family ----------------------------------------------------
 */

/* True when this call must only be forwarded: the library's own calls, and
 * libc calls made by pymalloc inside a domain wrapper (the wrapper records
 * them once, with their domain). */
static inline bool passthrough(void) {
  return t_self.internal != 0 || t_self.in_domain != 0;
}

#define BOOTSTRAP_OR_INIT(expr_when_resolving)                                 \
  do {                                                                         \
    if (UNLIKELY(atomic_load_explicit(&g_init_state, memory_order_acquire) !=  \
                 2)) {                                                         \
      if (t_self.resolving)                                                    \
        return expr_when_resolving;                                            \
      ensure_init();                                                           \
      if (real_malloc == NULL)                                                 \
        return expr_when_resolving;                                            \
    }                                                                          \
  } while (0)

EXPORT void *malloc(size_t n) {
  BOOTSTRAP_OR_INIT(boot_alloc(n));
  void *p = real_malloc(n);
  if (LIKELY(!passthrough()) && p != NULL)
    record(CAPTURE_OP_MALLOC, 0, (uintptr_t)p, n, 0, 0);
  return p;
}

EXPORT void *calloc(size_t nmemb, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(nmemb, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  BOOTSTRAP_OR_INIT(boot_alloc(total));
  void *p = real_calloc(nmemb, size);
  if (LIKELY(!passthrough()) && p != NULL)
    record(CAPTURE_OP_CALLOC, 0, (uintptr_t)p, total, 0, 0);
  return p;
}

EXPORT void free(void *p) {
  if (p == NULL || is_boot(p))
    return;
  if (UNLIKELY(atomic_load_explicit(&g_init_state, memory_order_acquire) !=
               2)) {
    ensure_init();
    if (real_free == NULL)
      return; /* cannot happen: only boot blocks exist before dlsym */
  }
  if (LIKELY(!passthrough()))
    record(CAPTURE_OP_FREE, 0, (uintptr_t)p, 0, 0, 0);
  real_free(p);
}

EXPORT void *realloc(void *old, size_t n) {
  if (old != NULL && is_boot(old)) {
    /* A bootstrap block moves to the real heap; it was never recorded, so
     * the new block is recorded as a malloc. */
    void *p = malloc(n);
    if (p != NULL) {
      size_t keep = boot_size(old);
      memcpy(p, old, keep < n ? keep : n);
    }
    return p;
  }
  BOOTSTRAP_OR_INIT(boot_alloc(n));
  if (UNLIKELY(passthrough()))
    return real_realloc(old, n);
  if (old == NULL) {
    void *p = real_realloc(NULL, n);
    if (p != NULL)
      record(CAPTURE_OP_MALLOC, 0, (uintptr_t)p, n, 0, 0);
    return p;
  }
  if (n == 0) {
    /* glibc 2.36 malloc/malloc.c __libc_realloc: REALLOC_ZERO_BYTES_FREES
     * makes realloc(p, 0) a free that returns NULL. */
    record(CAPTURE_OP_FREE, 0, (uintptr_t)old, 0, 0, 0);
    return real_realloc(old, 0);
  }
  record(CAPTURE_OP_REALLOC_BEGIN, 0, (uintptr_t)old, 0, 0, 0);
  void *p = real_realloc(old, n);
  record(CAPTURE_OP_REALLOC, 0, (uintptr_t)p, n, (uintptr_t)old,
         p == NULL ? CAPTURE_FLAG_FAILED : 0);
  return p;
}

EXPORT void *reallocarray(void *old, size_t nmemb, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(nmemb, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(old, total);
}

static void *aligned_boot(size_t align, size_t n) {
  /* Only dlsym's own requests reach here; 16-byte alignment is what the
   * bootstrap gives, larger requests fail. */
  return align <= 16 ? boot_alloc(n) : NULL;
}

EXPORT void *memalign(size_t align, size_t n) {
  BOOTSTRAP_OR_INIT(aligned_boot(align, n));
  void *p = real_memalign(align, n);
  if (LIKELY(!passthrough()) && p != NULL)
    record(CAPTURE_OP_MEMALIGN, 0, (uintptr_t)p, n, align, 0);
  return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  BOOTSTRAP_OR_INIT((*out = aligned_boot(align, n)) ? 0 : ENOMEM);
  int rc = real_posix_memalign(out, align, n);
  if (LIKELY(!passthrough()) && rc == 0 && *out != NULL)
    record(CAPTURE_OP_MEMALIGN, 0, (uintptr_t)*out, n, align, 0);
  return rc;
}

EXPORT void *aligned_alloc(size_t align, size_t n) {
  BOOTSTRAP_OR_INIT(aligned_boot(align, n));
  void *p = real_aligned_alloc(align, n);
  if (LIKELY(!passthrough()) && p != NULL)
    record(CAPTURE_OP_MEMALIGN, 0, (uintptr_t)p, n, align, 0);
  return p;
}

EXPORT void *valloc(size_t n) {
  BOOTSTRAP_OR_INIT(aligned_boot(4096, n));
  void *p = real_valloc(n);
  if (LIKELY(!passthrough()) && p != NULL)
    record(CAPTURE_OP_MEMALIGN, 0, (uintptr_t)p, n,
           (uint64_t)getauxval(AT_PAGESZ), 0);
  return p;
}

EXPORT void *pvalloc(size_t n) {
  BOOTSTRAP_OR_INIT(aligned_boot(4096, n));
  void    *p = real_pvalloc(n);
  uint64_t page = (uint64_t)getauxval(AT_PAGESZ);
  /* glibc 2.36 malloc/malloc.c __libc_pvalloc: size rounded up to a page. */
  uint64_t rounded = ((uint64_t)n + page - 1) / page * page;
  if (rounded == 0)
    rounded = page;
  if (LIKELY(!passthrough()) && p != NULL)
    record(CAPTURE_OP_MEMALIGN, 0, (uintptr_t)p, rounded, page, 0);
  return p;
}

EXPORT int malloc_trim(size_t pad) {
  BOOTSTRAP_OR_INIT(0);
  int rc = real_malloc_trim(pad);
  if (LIKELY(!passthrough()))
    record(CAPTURE_OP_TRIM, 0, 0, pad, (uint64_t)rc, 0);
  return rc;
}

/* Before the image is replaced: a last RSS sample and this thread's buffer
 * written out (other threads' unflushed records die with the image). */
static void before_exec(void) {
  ensure_init();
  if (g_enabled) {
    sample_rss();
    atfork_prepare(); /* flushes this thread's buffer */
  }
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  before_exec();
  if (real_execve == NULL) {
    errno = ENOSYS;
    return -1;
  }
  return real_execve(path, argv, envp);
}

/* glibc's execv/execvp/execvpe call execve internally, past the wrapper
 * above, so they are wrapped too; the execl family is not. */
EXPORT int execv(const char *path, char *const argv[]) {
  before_exec();
  if (real_execv == NULL) {
    errno = ENOSYS;
    return -1;
  }
  return real_execv(path, argv);
}

EXPORT int execvp(const char *file, char *const argv[]) {
  before_exec();
  if (real_execvp == NULL) {
    errno = ENOSYS;
    return -1;
  }
  return real_execvp(file, argv);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  before_exec();
  if (real_execvpe == NULL) {
    errno = ENOSYS;
    return -1;
  }
  return real_execvpe(file, argv, envp);
}

/* ---- CPython domains ------------------------------------------------------
 */

/* CPython 3.11 Include/cpython/pymem.h: PyMemAllocatorEx, and the domain
 * numbers PYMEM_DOMAIN_RAW 0, MEM 1, OBJ 2 (the same as trace_domain_t). */
typedef struct pymem_alloc_s pymem_alloc_t;
struct pymem_alloc_s {
  void *ctx;
  void *(*malloc)(void *ctx, size_t size);
  void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
  void *(*realloc)(void *ctx, void *ptr, size_t new_size);
  void (*free)(void *ctx, void *ptr);
};
static pymem_alloc_t g_py_orig[3];
static int           g_py_hooked;

static uint8_t py_domain(void *ctx) {
  return (uint8_t)((pymem_alloc_t *)ctx - g_py_orig);
}

static void *py_malloc(void *ctx, size_t n) {
  pymem_alloc_t *o = ctx;
  t_self.in_domain++;
  void *p = o->malloc(o->ctx, n);
  t_self.in_domain--;
  if (p != NULL && t_self.in_domain == 0 && t_self.internal == 0)
    record(CAPTURE_OP_MALLOC, py_domain(ctx), (uintptr_t)p, n, 0, 0);
  return p;
}

static void *py_calloc(void *ctx, size_t nelem, size_t elsize) {
  pymem_alloc_t *o = ctx;
  t_self.in_domain++;
  void *p = o->calloc(o->ctx, nelem, elsize);
  t_self.in_domain--;
  if (p != NULL && t_self.in_domain == 0 && t_self.internal == 0)
    record(CAPTURE_OP_CALLOC, py_domain(ctx), (uintptr_t)p, nelem * elsize, 0,
           0);
  return p;
}

static void *py_realloc(void *ctx, void *old, size_t n) {
  pymem_alloc_t *o = ctx;
  bool           rec = t_self.in_domain == 0 && t_self.internal == 0;
  uint8_t        d = py_domain(ctx);
  if (rec && old != NULL)
    record(CAPTURE_OP_REALLOC_BEGIN, d, (uintptr_t)old, 0, 0, 0);
  t_self.in_domain++;
  void *p = o->realloc(o->ctx, old, n);
  t_self.in_domain--;
  if (rec) {
    if (old == NULL) {
      if (p != NULL)
        record(CAPTURE_OP_MALLOC, d, (uintptr_t)p, n, 0, 0);
    } else {
      /* pymalloc's realloc(p, 0) returns a live block, unlike glibc's. */
      record(CAPTURE_OP_REALLOC, d, (uintptr_t)p, n, (uintptr_t)old,
             p == NULL ? CAPTURE_FLAG_FAILED : 0);
    }
  }
  return p;
}

static void py_free(void *ctx, void *p) {
  pymem_alloc_t *o = ctx;
  if (p != NULL && t_self.in_domain == 0 && t_self.internal == 0)
    record(CAPTURE_OP_FREE, py_domain(ctx), (uintptr_t)p, 0, 0, 0);
  t_self.in_domain++;
  o->free(o->ctx, p);
  t_self.in_domain--;
}

int allocsim_hook_python(void);

static void record_meta(const char *kv) {
  capture_rec_t r = {.op = CAPTURE_OP_MARK, .flags = CAPTURE_FLAG_META};
  emit(&r, kv, strlen(kv));
}

/* Wraps CPython's mem and obj domains (called by sitecustomize.py through
 * ctypes, with the GIL held).  Returns 1 if hooked now or before, 0 if the
 * process has no CPython or capture is off.  Records meta python=VERSION
 * and a mark "hooked"; allocations before it are the measured baseline. */
EXPORT int allocsim_hook_python(void) {
  ensure_init();
  if (!g_enabled)
    return 0;
  if (g_py_hooked)
    return 1;
  void (*get)(int, pymem_alloc_t *) =
      (void (*)(int, pymem_alloc_t *))dlsym(RTLD_DEFAULT, "PyMem_GetAllocator");
  void (*set)(int, pymem_alloc_t *) =
      (void (*)(int, pymem_alloc_t *))dlsym(RTLD_DEFAULT, "PyMem_SetAllocator");
  const char *(*version)(void) =
      (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
  if (get == NULL || set == NULL)
    return 0;
  if (version != NULL) {
    char        kv[64] = "python=";
    const char *v = version();
    size_t      n = 7;
    while (*v != '\0' && *v != ' ' && n < sizeof kv - 1)
      kv[n++] = *v++;
    kv[n] = '\0';
    record_meta(kv);
  }
  for (int d = 1; d <= 2; d++) {
    get(d, &g_py_orig[d]);
    pymem_alloc_t w = {.ctx = &g_py_orig[d],
                       .malloc = py_malloc,
                       .calloc = py_calloc,
                       .realloc = py_realloc,
                       .free = py_free};
    set(d, &w);
  }
  g_py_hooked = 1;
  allocsim_mark("hooked");
  return 1;
}

/* ---- Marks ----------------------------------------------------------------
 */

/* Records a mark carrying the measured RSS read just before it, so the
 * converter emits the mark and its rss event at the same time. */
EXPORT void allocsim_mark(const char *label) {
  ensure_init();
  if (!g_enabled || label == NULL ||
      atomic_load_explicit(&g_init_state, memory_order_acquire) != 2)
    return;
  size_t        len = strnlen(label, 2 * CAPTURE_LABEL_BYTES_PER_REC);
  uint64_t      rss = read_rss();
  capture_rec_t r = {.op = CAPTURE_OP_MARK, .a = rss, .b = own_rss()};
  emit(&r, label, len);
}
