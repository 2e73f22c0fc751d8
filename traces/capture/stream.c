/* traces/capture/stream.c -- per-thread record buffers, their wire
 * encoding (capture_wire.h), the connection to `allocsim capture` and the
 * flusher thread.
 *
 * Memory is bounded: a thread's buffer is CAPTURE_MSG_MAX bytes and goes
 * out as one message when full; the flusher sends every buffer and a
 * watermark each FLUSH_NS, so `allocsim capture` never holds more than
 * about FLUSH_NS of events to merge.  A full socket blocks the sending
 * thread: a capture that cannot keep up slows the program down rather than
 * growing.  All of it (buffers, the flusher's stack) is mmap'd, counted by
 * capture_own_rss() and subtracted from every measured sample.
 *
 * The flusher thread also samples RSS every sample period (at most a tenth
 * of one CPU: a slow read of smaps_rollup stretches the period), reads the
 * control messages (CTL_FLUSH before `allocsim capture` forwards a signal,
 * CTL_DETACH to stop), and kills the process when `allocsim capture` went
 * away without detaching (it was killed: the program must not outlive it).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "capture_int.h"
#include "../allocator_version.h"
#include "../je_seeds.h"

#define BUF_BYTES CAPTURE_MSG_MAX
#define HDR_BYTES sizeof(capture_msg_hdr_t)
/* Buffers are pooled and never unmapped, so the flusher and the exit path
 * can visit them without racing munmap. */
#define POOL_MAX    1024
#define STACK_BYTES ((size_t)256 * 1024)
#define FLUSH_NS    ((uint64_t)50 * 1000000)
/* Longest wait for a buffer's owner to finish one record, and for a
 * release (trim, large free) to finish before an RSS read. */
#define BUSY_WAIT_NS ((uint64_t)100 * 1000000)
#define GATE_WAIT_NS ((uint64_t)200 * 1000000)
/* A slow smaps_rollup read (7 ms for a 40 MiB CPython process here) makes
 * the next sample wait this many times its duration. */
#define SAMPLER_DUTY_DIV 10
/* The socket's send buffer: bursts wait here rather than in the program. */
#define SNDBUF_BYTES (4 << 20)

/* A slot is published by storing data (release) after owned = 1, so a
 * thread that sees data != NULL (acquire) also sees the slot owned. */
struct tbuf_s {
  _Atomic(uint8_t *) data; /* BUF_BYTES: message header, then records */
  size_t             len;  /* bytes used, header included */
  capture_enc_t      enc;
  uint32_t           tid;  /* the owner's kernel tid */
  atomic_int         busy; /* 1 while a record is appended or sent */
  atomic_int         owned;
};

static tbuf_t               g_pool[POOL_MAX];
static atomic_size_t        g_pool_count;
static atomic_uint_fast64_t g_seq = 1;
static atomic_int           g_direct_inflight; /* records sent unbuffered */
static atomic_int           g_final;           /* exit: send directly */
static int                  g_fd = -1;
static ino_t                g_sock_ino;
static atomic_int           g_detached;
static void                *g_stack;
static atomic_int           g_flusher_stop;
static pthread_key_t        g_key;
static atomic_int           g_gate_count; /* RSS-moving calls in flight */
static atomic_uint          g_gate_gen;   /* started so far */
/* jemalloc: the tsd address less the thread pointer, the same in every
 * thread (je_seeds_thread_tsd); 0 without jemalloc's tsd. */
static uintptr_t g_je_tsd_offset;

/* ---- Sending ----------------------------------------------------------------
 */

static void stop_recording(void) {
  atomic_store(&g_recording, 0);
}

/* True if g_fd is still our socket: a program that closed it (closefrom
 * after fork) may have reused the number for a file of its own. */
static bool fd_is_ours(void) {
  struct stat st;
  return g_fd >= 0 && fstat(g_fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
         st.st_ino == g_sock_ino;
}

/* A child made by clone or _Fork, past fork()'s handlers, has our socket
 * but never said hello: what it sent went into the parent's trace, its
 * blocks mixed with the parent's (a raw clone's 3,114 mallocs of a size
 * only the child asked for were there).  Its messages are dropped: it runs
 * untraced.  A vfork child (CLONE_VM) is another pid too, but it shares our
 * memory: the buffer it sends holds our records, and its own allocations
 * were made in our heap and stay there, so it sends them as ours (dropped,
 * a vfork child's 20,000 mallocs lost the parent's own before them). */
static bool foreign_child(void) {
  return getpid() != g_pid &&
         syscall(SYS_kcmp, getpid(), g_pid, KCMP_VM, 0, 0) != 0;
}

static void send_msg(const void *p, size_t len) {
  int saved = errno;
  if (foreign_child()) {
    /* dropped: see above */
  } else if (!fd_is_ours()) {
    stop_recording();
  } else {
    for (;;) {
      ssize_t n = send(g_fd, p, len, MSG_NOSIGNAL);
      if (n >= 0)
        break;
      if (errno == EINTR)
        continue;
      stop_recording(); /* `allocsim capture` is gone or detached us */
      break;
    }
  }
  errno = saved;
}

static void put_hdr(uint8_t *p, uint8_t type, uint32_t aux) {
  capture_msg_hdr_t h = {
      .type = type, .version = CAPTURE_WIRE_VERSION, .aux = aux};
  memcpy(p, &h, sizeof h);
}

static void send_simple(uint8_t type) {
  uint8_t m[HDR_BYTES];
  put_hdr(m, type, 0);
  send_msg(m, sizeof m);
}

static void send_watermark(uint64_t w) {
  uint8_t m[HDR_BYTES + 8];
  put_hdr(m, CAPTURE_MSG_WATERMARK, 0);
  memcpy(m + HDR_BYTES, &w, 8);
  send_msg(m, sizeof m);
}

/* Sends b's records as one chunk and empties it (caller holds busy). */
static void buf_send(tbuf_t *b) {
  if (b->len <= HDR_BYTES)
    return;
  uint8_t *d = atomic_load_explicit(&b->data, memory_order_relaxed);
  put_hdr(d, CAPTURE_MSG_CHUNK, b->tid);
  if (atomic_load(&g_recording))
    send_msg(d, b->len);
  b->len = HDR_BYTES;
  memset(&b->enc, 0, sizeof b->enc);
}

/* ---- Buffers ----------------------------------------------------------------
 */

static tbuf_t *buf_acquire(void) {
  size_t  count = atomic_load(&g_pool_count);
  tbuf_t *b = NULL;
  for (size_t i = 0; i < count && b == NULL; i++) {
    int expect = 0;
    if (atomic_load_explicit(&g_pool[i].data, memory_order_acquire) != NULL &&
        atomic_compare_exchange_strong(&g_pool[i].owned, &expect, 1))
      b = &g_pool[i];
  }
  if (b == NULL) {
    size_t i = atomic_fetch_add(&g_pool_count, 1);
    if (i >= POOL_MAX) {
      atomic_fetch_sub(&g_pool_count, 1);
      return NULL;
    }
    void *m = capture_own_map(BUF_BYTES);
    if (m == NULL)
      return NULL; /* the slot stays empty (data NULL) and is skipped */
    b = &g_pool[i];
    b->len = HDR_BYTES;
    atomic_store(&b->owned, 1);
    atomic_store_explicit(&b->data, m, memory_order_release);
  }
  b->tid = (uint32_t)capture_tid();
  return b;
}

/* Takes b's busy flag, waiting out a flusher that is sending it or an
 * owner appending to it.  Once the exit path has taken every buffer for
 * good (g_final), only that path itself (final) still waits: anyone else
 * would wait for a buffer that is never given back. */
static bool busy_take(tbuf_t *b, uint64_t wait_ns, bool final) {
  uint64_t start = 0;
  for (unsigned spins = 0;; spins++) {
    int expect = 0;
    if (atomic_compare_exchange_strong(&b->busy, &expect, 1))
      return true;
    if (!final && atomic_load(&g_final))
      return false; /* the exit path keeps it: write directly */
    if (spins < 64)
      continue;
    uint64_t now = capture_now_ns();
    if (start == 0)
      start = now;
    else if (now - start > wait_ns)
      return false;
    sched_yield();
  }
}

/* The calling thread's buffer with busy taken, or NULL.  outer is
 * t_self.in_record as it was before the caller set it: a record that
 * interrupted another one of its own thread (a signal handler) must not
 * wait for that one's buffer. */
static tbuf_t *own_buffer(int outer) {
  if (outer || t_self.exited || atomic_load(&g_final))
    return NULL;
  tbuf_t *b = t_self.buf;
  if (b == NULL) {
    b = buf_acquire();
    if (b == NULL)
      return NULL;
    t_self.buf = b;
    t_self.internal++; /* pthread_setspecific may allocate (key >= 32) */
    pthread_setspecific(g_key, b);
    t_self.internal--;
  }
  return busy_take(b, BUSY_WAIT_NS, false) ? b : NULL;
}

static void append(tbuf_t *b, const cap_rec_t *r, uint64_t seq, uint64_t t) {
  if (b->len + CAPTURE_REC_MAX > BUF_BYTES)
    buf_send(b);
  uint8_t *d = atomic_load_explicit(&b->data, memory_order_relaxed);
  b->len = (size_t)(capture_encode(d + b->len, &b->enc, r, seq, t) - d);
}

/* A record on its own message: from a signal handler in the middle of a
 * record, after the thread's exit hook or the destructor, or without a
 * buffer.  In flight it holds off the watermark (capture_wire.h). */
static void send_direct(const cap_rec_t *r, uint64_t seq, uint64_t t) {
  uint8_t       m[HDR_BYTES + CAPTURE_REC_MAX];
  capture_enc_t e = {0};
  put_hdr(m, CAPTURE_MSG_CHUNK, (uint32_t)capture_tid());
  uint8_t *end = capture_encode(m + HDR_BYTES, &e, r, seq, t);
  send_msg(m, (size_t)(end - m));
}

static uint64_t take_seq(void) {
  return atomic_fetch_add(&g_seq, 1); /* seq_cst: see capture_wire.h */
}

/* jemalloc: a thread's first call is preceded by its tsd address, the
 * seed of its prng (option seed.prng, to which the converter adds the
 * thread), so that the model draws what this thread draws.  Only before a
 * call: the recorder's own threads (the flusher's samples) are no trace
 * threads. */
static void append_thread_seed(tbuf_t *b, uint8_t op) {
  static const char name[] = "seed.prng"; /* event.h's prefix */
  if (g_je_tsd_offset == 0 || t_self.seeded || op < CAPTURE_OP_MALLOC ||
      op > CAPTURE_OP_FREE)
    return;
  t_self.seeded = 1;
  cap_rec_t r = {
      .op = CAPTURE_OP_OPTION,
      .y = je_seeds_thread_tsd(g_je_tsd_offset, 0, (uintptr_t)pthread_self()),
      .text = name,
      .text_len = sizeof name - 1};
  append(b, &r, take_seq(), capture_now_ns());
}

void capture_emit(const cap_rec_t *r) {
  if (!atomic_load_explicit(&g_recording, memory_order_relaxed))
    return;
  int outer = t_self.in_record;
  t_self.in_record = 1;
  atomic_signal_fence(memory_order_seq_cst);
  tbuf_t *b = own_buffer(outer);
  if (b != NULL) {
    append_thread_seed(b, r->op);
    uint64_t seq = take_seq();
    append(b, r, seq, capture_now_ns());
    atomic_store(&b->busy, 0);
  } else {
    atomic_fetch_add(&g_direct_inflight, 1);
    uint64_t seq = take_seq();
    send_direct(r, seq, capture_now_ns());
    atomic_fetch_sub(&g_direct_inflight, 1);
  }
  atomic_signal_fence(memory_order_seq_cst);
  t_self.in_record = outer;
}

/* ---- RSS samples and the gate -------------------------------------------- */

void capture_gate_enter(void) {
  atomic_fetch_add(&g_gate_gen, 1);
  atomic_fetch_add(&g_gate_count, 1);
}

void capture_gate_leave(void) {
  atomic_fetch_sub(&g_gate_count, 1);
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                        .tv_nsec = (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* One attempt: true if the sample was emitted.  The seq is taken before
 * RSS is read; if a release started meanwhile (gate generation moved), the
 * reading is dropped (the seq is simply unused) unless forced. */
static bool sample_once(uint8_t op, const char *label, size_t len, bool force) {
  unsigned gen0 = atomic_load(&g_gate_gen);
  if (!force && atomic_load(&g_gate_count) != 0)
    return false;
  int outer = t_self.in_record;
  t_self.in_record = 1;
  atomic_signal_fence(memory_order_seq_cst);
  tbuf_t *b = own_buffer(outer);
  if (b == NULL)
    atomic_fetch_add(&g_direct_inflight, 1);
  uint64_t seq = take_seq();
  uint64_t t = capture_now_ns();
  uint64_t rss, anon, static_anon, own_static;
  capture_read_rss(&rss, &anon);
  capture_memmap_static(&static_anon, &own_static);
  uint64_t own = capture_own_rss() + own_static;
  uint64_t file = rss > anon ? rss - anon : 0;
  bool     ok = force || (atomic_load(&g_gate_count) == 0 &&
                      atomic_load(&g_gate_gen) == gen0);
  if (ok) {
    cap_rec_t r = {.op = op,
                   .x = rss,
                   .y = own,
                   .addr = file + static_anon,
                   .text = label,
                   .text_len = len};
    if (b != NULL)
      append(b, &r, seq, t);
    else
      send_direct(&r, seq, t);
  }
  if (b != NULL)
    atomic_store(&b->busy, 0);
  else
    atomic_fetch_sub(&g_direct_inflight, 1);
  atomic_signal_fence(memory_order_seq_cst);
  t_self.in_record = outer;
  return ok;
}

void capture_emit_sample(uint8_t op, const char *label, size_t len) {
  if (!atomic_load(&g_recording))
    return;
  uint64_t start = capture_now_ns();
  while (!sample_once(op, label, len, capture_now_ns() - start > GATE_WAIT_NS))
    sleep_ns(100000);
}

/* ---- Flushing ---------------------------------------------------------------
 */

/* Sends every buffer, then the watermark taken before; then `then` (BYE,
 * EXEC) if not 0.  keep_busy leaves every buffer taken (the process is
 * ending: later records go out directly).
 *
 * The exit's sweep (keep_busy) waits for a buffer's owner like any other
 * sweep: a buffer skipped there is never sent.  It used to skip every busy
 * buffer at once, and the flusher holds its own busy for a whole RSS read
 * (sample_once), so a program exiting during one lost everything the
 * flusher had recorded since its last flush, up to 50 ms of RSS samples and
 * the TOUCH records of its probes, whose pages no later probe reports again
 * (exit_mid_sample.c lost them in 10 of 30 captures).  Only the calling
 * thread's own buffer, held by the record this exit interrupted (a signal
 * handler), cannot be waited for.  exiting is set for the first exit
 * sweep only: a second (an _exit from a destructor) finds every buffer kept
 * by the first and must not wait for them. */
static void sweep(uint8_t then, bool keep_busy, bool exiting) {
  uint64_t w = atomic_load(&g_seq);
  bool     complete = true;
  size_t   count = atomic_load(&g_pool_count);
  for (size_t i = 0; i < count && i < POOL_MAX; i++) {
    tbuf_t *b = &g_pool[i];
    if (atomic_load_explicit(&b->data, memory_order_acquire) == NULL)
      continue;
    bool interrupted = b == t_self.buf && t_self.in_record;
    if (interrupted ? !busy_take(b, 0, false)
                    : !busy_take(b, BUSY_WAIT_NS, exiting)) {
      complete = false; /* its owner is stuck mid-record: no watermark */
      continue;
    }
    buf_send(b);
    if (!keep_busy)
      atomic_store(&b->busy, 0);
  }
  uint64_t start = capture_now_ns();
  while (atomic_load(&g_direct_inflight) != 0) {
    if (capture_now_ns() - start > BUSY_WAIT_NS) {
      complete = false;
      break;
    }
    sched_yield();
  }
  if (complete)
    send_watermark(w);
  if (then != 0)
    send_simple(then);
}

void capture_stream_flush_all(uint8_t then_msg) {
  if (!atomic_load(&g_recording) || getpid() != g_pid)
    return; /* a vfork child shares our memory but not our stream */
  bool final = then_msg == CAPTURE_MSG_BYE, first = false;
  if (final) {
    atomic_store(&g_flusher_stop, 1);
    first = atomic_exchange(&g_final, 1) == 0;
  }
  sweep(then_msg, final, first);
}

/* pthread key destructor: the thread is exiting. */
void capture_stream_thread_exit(void *arg) {
  tbuf_t   *b = arg;
  cap_rec_t r = {.op = CAPTURE_OP_THREAD_EXIT};
  if (t_self.internal == 0) /* the flusher is not one of the program's */
    capture_emit(&r);
  if (b != NULL && busy_take(b, BUSY_WAIT_NS, false)) {
    buf_send(b);
    atomic_store(&b->busy, 0);
    atomic_store(&b->owned, 0);
  }
  t_self.buf = NULL;
  t_self.exited = 1;
}

/* ---- Connection -------------------------------------------------------------
 */

static uint64_t python_version_hex(void) {
  /* CPython 3.11+ exports Py_Version (Include/pylifecycle.h); reading it
   * is safe before the interpreter starts. */
  const unsigned long *v = capture_dlsym_quiet(RTLD_DEFAULT, "Py_Version");
  return v != NULL ? *v : 0;
}

/* mimalloc's mi_version() when the preloaded allocator is mimalloc
 * (mimalloc 2.0 include/mimalloc.h: int mi_version(void)), else 0; the
 * mimalloc model takes its version from the trace. */
static uint32_t mimalloc_version(void) {
  void *sym = capture_dlsym_quiet(RTLD_DEFAULT, "mi_version");
  if (sym == NULL)
    return 0;
  int (*version)(void);
  memcpy(&version, &sym, sizeof version); /* object to function pointer */
  int v = version();
  return v > 0 ? (uint32_t)v : 0;
}

/* gperftools' tc_version() (src/gperftools/tcmalloc.h.in:87) as major *
 * 100 + minor when the preloaded allocator is tcmalloc, else 0; the tcmalloc
 * model takes its version from the trace. */
static uint32_t tcmalloc_version(void) {
  void *sym = capture_dlsym_quiet(RTLD_DEFAULT, "tc_version");
  if (sym == NULL)
    return 0;
  const char *(*version)(int *, int *, const char **);
  memcpy(&version, &sym, sizeof version); /* object to function pointer */
  int major = 0, minor = 0;
  version(&major, &minor, NULL);
  return major > 0 && minor >= 0 ? (uint32_t)(major * 100 + minor) : 0;
}

/* jemalloc's mallctl("version") ("5.3.0-0-g54eaed1d8b56...") as major *
 * 10000 + minor * 100 + patch when the preloaded allocator is jemalloc,
 * else 0; the jemalloc model takes its version from the trace. */
static uint32_t jemalloc_version(void) {
  const char *v = NULL;
  size_t      len = sizeof v;
  if (g_real.mallctl == NULL ||
      g_real.mallctl("version", &v, &len, NULL, 0) != 0)
    return 0;
  return allocator_version_code(v);
}

/* jemalloc's seeds and clock into the hello (traces/je_seeds.h), read
 * right after jemalloc_version initialised it.  In a forked child the
 * decay's jitter has been drawn many times since: not found, left 0. */
static void jemalloc_state(capture_hello_t *h) {
  static char maps_buf[4096];
  h->je_coarse_init_ns = capture_coarse_now_ns();
  h->je_prng_seed = je_seeds_tsd();
  if (h->je_prng_seed != 0)
    g_je_tsd_offset =
        je_seeds_thread_tsd(h->je_prng_seed, (uintptr_t)pthread_self(), 0);
  h->je_jitter_seed = je_seeds_decay(g_real.mallctl, maps_buf, sizeof maps_buf);
  h->je_res_ns = capture_coarse_res_ns();
  h->je_coarse_origin_ns = capture_clock_coarse_origin_ns();
}

int capture_stream_fd(void) {
  return g_fd;
}

/* Where the program's next anonymous mapping would end: a PROT_NONE probe,
 * by system call so that progmap.c does not see it, lands as Linux's
 * top-down first fit places one (mm/mmap.c unmapped_area_topdown) below
 * the libraries and the recorder's own mappings; its end is the top the
 * simulated mmap area starts from.  A page short of 2 MiB: large enough to
 * skip the small holes between libraries that a model's large mappings
 * skip too, and below PMD_SIZE, so that no kernel aligns it to a THP
 * boundary (Linux 6.7+ mm/mmap.c __get_unmapped_area aligns anonymous
 * mappings of 2 MiB: any length >= 2 MiB in 6.7-6.11, multiples of 2 MiB
 * since 6.12). */
static uint64_t probe_mmap_top(void) {
  const size_t len = ((size_t)2 << 20) - (size_t)g_page;
  void        *p = (void *)syscall(SYS_mmap, NULL, len, PROT_NONE,
                                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return 0;
  syscall(SYS_munmap, p, len);
  return (uint64_t)(uintptr_t)p + len;
}

bool capture_stream_open(void) {
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return false;
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  memcpy(a.sun_path, g_sock_path, sizeof a.sun_path);
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    close(fd);
    return false;
  }
  /* A high descriptor: a program that reuses low ones will not hit it. */
  int hi = fcntl(fd, F_DUPFD_CLOEXEC, 900);
  if (hi >= 0) {
    close(fd);
    fd = hi;
  }
  int sz = SNDBUF_BYTES;
  setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return false;
  }
  g_sock_ino = st.st_ino;
  g_fd = fd;
  atomic_store(&g_detached, 0);

  uint8_t         m[HDR_BYTES + sizeof(capture_hello_t)];
  capture_hello_t h;
  memset(&h, 0, sizeof h);
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  h.realtime_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
  h.monotonic_ns = capture_clock_origin_ns();
  h.python_hex = python_version_hex();
  h.touch_threshold = g_touch_threshold;
  h.sample_ns = g_sample_ns;
  h.pid = (uint32_t)getpid();
  h.ppid = (uint32_t)getppid();
  h.main_tid = (uint32_t)capture_tid();
  h.page_size = (uint32_t)g_page;
  h.stacks = g_stacks;
  h.mimalloc_version = mimalloc_version();
  h.tcmalloc_version = tcmalloc_version();
  h.jemalloc_version = jemalloc_version();
  if (h.jemalloc_version != 0)
    jemalloc_state(&h);
  h.before_main = atomic_load(&g_main_entered) ? 0 : 1;
  h.mmap_top = probe_mmap_top();
  ssize_t n = readlink("/proc/self/exe", h.exe, sizeof h.exe - 1);
  if (n < 0)
    n = 0;
  h.exe[n] = '\0';
  capture_own_malloc(h.own_malloc, sizeof h.own_malloc);
  memcpy(h.env, capture_execenv_hello(), sizeof h.env);
  put_hdr(m, CAPTURE_MSG_HELLO, 0);
  memcpy(m + HDR_BYTES, &h, sizeof h);
  atomic_store(&g_recording, 1);
  send_msg(m, sizeof m);
  return atomic_load(&g_recording) != 0;
}

void capture_stream_atfork_prepare(void) {
  tbuf_t *b = t_self.buf;
  if (b != NULL && atomic_load(&g_recording) &&
      busy_take(b, BUSY_WAIT_NS, false)) {
    buf_send(b);
    atomic_store(&b->busy, 0);
  }
}

atomic_int g_child_pending; /* a forked child has not connected yet */

void capture_stream_atfork_child(void) {
  /* Only the forking thread survives: every other buffer belonged to a
   * parent thread whose records the parent sends. */
  size_t count = atomic_load(&g_pool_count);
  for (size_t i = 0; i < count && i < POOL_MAX; i++) {
    g_pool[i].len = HDR_BYTES;
    memset(&g_pool[i].enc, 0, sizeof g_pool[i].enc);
    atomic_store(&g_pool[i].busy, 0);
    atomic_store(&g_pool[i].owned, &g_pool[i] == t_self.buf ? 1 : 0);
  }
  atomic_store(&g_direct_inflight, 0);
  if (t_self.buf != NULL)
    t_self.buf->tid = (uint32_t)capture_tid();
  if (g_fd >= 0)
    capture_close_own(g_fd);
  g_fd = -1;
  atomic_store(&g_recording, 0);
  /* Not connected here: the hello looks symbols up (dlsym frees its error
   * state) and the flusher's pthread_create callocs its DTV, while a
   * preloaded allocator's own child handler, which releases the locks its
   * prepare handler took, may not have run yet (tcmalloc's had not: the
   * child of a threaded bash waited on a central free list for ever).  The
   * fork wrapper connects once fork returns, a recorded call otherwise. */
  atomic_store(&g_child_pending, 1);
}

bool capture_stream_child_start(bool record_dtv) {
  if (!atomic_exchange(&g_child_pending, 0) || !capture_stream_open())
    return false;
  capture_stream_start_flusher(record_dtv);
  return true;
}

/* ---- Own memory -------------------------------------------------------------
 */

uint64_t capture_own_rss(void) {
  uint64_t total = 0;
  size_t   count = atomic_load(&g_pool_count);
  for (size_t i = 0; i < count && i < POOL_MAX; i++) {
    void *d = atomic_load_explicit(&g_pool[i].data, memory_order_acquire);
    if (d != NULL)
      total += capture_resident(d, BUF_BYTES);
  }
  if (g_stack != NULL)
    total += capture_resident(g_stack, STACK_BYTES);
  return total + capture_touch_own_rss() +
         capture_sites_own_rss(); /* static data: memmap.c */
}

/* ---- The flusher thread -----------------------------------------------------
 */

static uint64_t ts_ns(const struct timespec *ts) {
  return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

/* Control messages from `allocsim capture`, or its going away.  A peer
 * that closes with our chunks unread leaves ECONNRESET pending, which recv
 * reports before the messages still queued (a DETACH among them), so
 * reading goes on past it until the queue is empty. */
static void control(void) {
  for (int resets = 0; resets < 4;) {
    capture_msg_hdr_t h;
    ssize_t           n = recv(g_fd, &h, sizeof h, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return;
    if (n < 0 && errno == ECONNRESET) {
      resets++;
      continue;
    }
    if (n == (ssize_t)sizeof h && h.type == CAPTURE_CTL_FLUSH) {
      sweep(CAPTURE_MSG_FLUSHED, false, false);
      continue;
    }
    if (n == (ssize_t)sizeof h && h.type == CAPTURE_CTL_DETACH) {
      atomic_store(&g_detached, 1);
      stop_recording();
      atomic_store(&g_flusher_stop, 1);
      return;
    }
    break; /* closed (0), or an error */
  }
  if (!fd_is_ours()) { /* the program closed or replaced it (fds.c) */
    stop_recording();
    atomic_store(&g_flusher_stop, 1);
    return;
  }
  if (!atomic_load(&g_detached))
    kill(getpid(), SIGKILL); /* `allocsim capture` was killed */
  atomic_store(&g_flusher_stop, 1);
}

static void *flusher_main(void *arg) {
  (void)arg;
  t_self.internal = 1; /* nothing this thread allocates is the program's */
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = ts_ns(&ts);
  uint64_t next_flush = now + FLUSH_NS;
  uint64_t next_sample = g_sample_ns ? now + g_sample_ns : UINT64_MAX;
  while (!atomic_load(&g_flusher_stop)) {
    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = ts_ns(&ts);
    uint64_t due = next_flush < next_sample ? next_flush : next_sample;
    int      wait_ms = due > now ? (int)((due - now + 999999) / 1000000) : 0;
    struct pollfd p = {.fd = g_fd, .events = POLLIN};
    if (poll(&p, 1, wait_ms) > 0)
      control();
    if (atomic_load(&g_flusher_stop) || !atomic_load(&g_recording))
      break;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = ts_ns(&ts);
    if (now >= next_sample) {
      capture_touch_probe_all();
      capture_emit_sample(CAPTURE_OP_RSS, NULL, 0);
      clock_gettime(CLOCK_MONOTONIC, &ts);
      uint64_t took = ts_ns(&ts) - now;
      next_sample = now + g_sample_ns;
      if (took * SAMPLER_DUTY_DIV > g_sample_ns)
        next_sample = now + took * SAMPLER_DUTY_DIV;
    }
    if (now >= next_flush) {
      sweep(0, false, false);
      capture_clock_calibrate();
      next_flush = now + FLUSH_NS;
      if (capture_only_flusher_left()) {
        t_self.internal = 0; /* the exit handlers are the program's */
        exit(0);             /* as its last thread would have */
      }
    }
  }
  return NULL;
}

void capture_stream_start_flusher(bool record_dtv) {
  static atomic_int key_made;
  int               expect = 0;
  if (atomic_compare_exchange_strong(&key_made, &expect, 1)) {
    t_self.internal++;
    pthread_key_create(&g_key, capture_stream_thread_exit);
    t_self.internal--;
  }
  if (g_stack == NULL) {
    void *m = capture_own_map(STACK_BYTES);
    if (m == NULL)
      return;
    g_stack = m;
  }
  atomic_store(&g_flusher_stop, 0);
  pthread_attr_t attr;
  pthread_t      th;
  /* pthread_create callocs the thread's DTV from the program's allocator,
   * for a user-supplied stack too (glibc 2.36 nptl/allocatestack.c:238-305
   * _dl_allocate_tls, elf/dl-tls.c:374-375), and it stays in that heap for
   * the whole run.  Recorded, the model holds it where the allocator does;
   * left out, every later block of the heap it shares sat elsewhere in the
   * model (glibc: a 320-byte chunk at the start of the main heap, 304
   * bytes asked with the recorder's and libc's TLS; mimalloc 2.1.7, which
   * lays a page's blocks out by address, missed captured programs by up to
   * 8% of their peak with it and the failed lookups of resolve.c left
   * out). */
  if (!record_dtv)
    t_self.internal++;
  if (pthread_attr_init(&attr) == 0) {
    pthread_attr_setstack(&attr, g_stack, STACK_BYTES);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_create(&th, &attr, flusher_main, NULL);
    pthread_attr_destroy(&attr);
  }
  if (!record_dtv)
    t_self.internal--;
}
