/* traces/capture/capture.c -- liballocsim_capture.so, the LD_PRELOAD
 * library that records every malloc-family call of an unmodified program,
 * its measured RSS and named marks, and streams them to `allocsim capture`
 * (capture_wire.h), which writes the trace.
 *
 * `allocsim capture` sets ALLOCSIM_CAPTURE_SOCK (its socket),
 * ALLOCSIM_CAPTURE_SAMPLE_NS, ALLOCSIM_CAPTURE_TOUCH (the touch threshold in
 * bytes), ALLOCSIM_CAPTURE_STACKS (return addresses per allocation, 0 =
 * none; sites.c) and LD_PRELOAD; ALLOCSIM_CAPTURE_PAGEMAP_SCAN=0 in the
 * environment makes it tell held pages as on kernels before 6.7 (memmap.c;
 * for tests).  Without ALLOCSIM_CAPTURE_SOCK the library
 * only forwards calls, so allocsim_mark() and allocsim_hook_python() are
 * harmless no-ops.
 *
 * Process life cycle:
 *   - start: the first call once environ is set (the constructor at the
 *     latest) connects and says hello; the constructor starts the flusher.
 *   - main: __libc_start_main is wrapped so that entry to main() records
 *     the mark "main", the anchor of a C program's comparison.
 *   - fork: a prepare handler sends the forking thread's buffer; the child
 *     connects anew (its own trace), forgets the parent's threads and starts
 *     its own flusher.  Objects inherited from the parent are unknown to the
 *     child's trace: their frees are counted as unmatched.
 *   - exec: LD_PRELOAD and the settings stay in the environment, so the new
 *     image loads the library again and connects anew.  The exec family
 *     (execve, execv, execvp, execvpe, execl, execlp, execle, fexecve)
 *     sends every buffer first and says EXEC.  An environment that dropped
 *     the recorder or the settings (`env LD_PRELOAD=x CMD`, `env -i`) is
 *     passed corrected, by these and by posix_spawn/posix_spawnp
 *     (execenv.c).
 *   - exit: the destructor, _exit and _Exit send every buffer and say BYE.
 *     A fatal signal or a raw exit_group loses what the buffers hold (at
 *     most one flush period, 50 ms); the connection then closes without
 *     BYE and the trace is marked truncated.
 *
 * What it leaves out: malloc_usable_size and the deprecated cfree are not
 * recorded; mmap calls made by the program itself are not allocations:
 * their resident pages are measured as memory no allocator holds
 * (progmap.c).
 *
 * Sections: state, start-up and fork, exec and exit, main, the malloc
 * family, CPython domains, marks.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#define ALLOCSIM_MARK_DEFINE
#include "allocsim_mark.h"
#include "capture_int.h"
#include "../mi_hint_area.h"

/* ---- State ------------------------------------------------------------------
 */

TLS tls_t              t_self;
atomic_int             g_init_state;
atomic_int             g_recording;
int                    g_pid;
uint64_t               g_sample_ns;
uint64_t               g_touch_threshold;
size_t                 g_page = 4096;
char                   g_sock_path[108];
static struct timespec g_t0; /* CLOCK_MONOTONIC at start-up */
/* CLOCK_MONOTONIC_COARSE just before g_t0 */
static uint64_t g_coarse_t0;

/* Releases at or above this size may unmap memory at once (glibc 2.36
 * malloc/malloc.c:869 DEFAULT_MMAP_THRESHOLD_MIN, 128 KiB): the sampler does
 * not read RSS while one is in flight. */
#define GATE_MIN_BYTES ((uint64_t)128 * 1024)

int capture_tid(void) {
  if (UNLIKELY(t_self.tid == 0))
    t_self.tid = (int)syscall(SYS_gettid);
  return t_self.tid;
}

/* ---- Clock ------------------------------------------------------------------
 *
 * Every record carries a time.  clock_gettime(CLOCK_MONOTONIC) took 25 ns a
 * call here, a quarter of the recorder's own work per event; where the
 * kernel itself keeps time with the TSC (clocksource "tsc", which it uses
 * only when the TSC is invariant and synchronised across CPUs) the recorder
 * reads the TSC instead (12 ns) and scales it,
 *     ns = (tsc - g_tsc0) * g_tsc_mult >> 32,
 * with g_tsc_mult measured against CLOCK_MONOTONIC from start-up: by the
 * flusher after 50 ms, and again at 1 s, 10 s and 100 s (the longer the
 * baseline, the smaller the error; a new scale moves later times by well
 * under a microsecond).  Until the first measurement, and without a TSC
 * clocksource, times come from clock_gettime. */

static bool          g_tsc_ok;   /* the kernel's clocksource is the TSC */
static uint64_t      g_tsc0;     /* at g_t0 */
static atomic_ullong g_tsc_mult; /* ns per tick << 32; 0 = not yet */

static inline uint64_t read_tsc(void) {
  return __builtin_ia32_rdtsc();
}

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  int64_t v = ((int64_t)ts.tv_sec - (int64_t)g_t0.tv_sec) * 1000000000 +
              ((int64_t)ts.tv_nsec - (int64_t)g_t0.tv_nsec);
  return v < 0 ? 0 : (uint64_t)v;
}

uint64_t capture_now_ns(void) {
  uint64_t mult = atomic_load_explicit(&g_tsc_mult, memory_order_relaxed);
  if (LIKELY(mult != 0))
    return (uint64_t)(((unsigned __int128)(read_tsc() - g_tsc0) * mult) >> 32);
  return monotonic_ns();
}

static uint64_t timespec_ns(struct timespec ts) {
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t capture_clock_origin_ns(void) {
  return timespec_ns(g_t0);
}

/* The flusher's calibration, at 50 ms, 1 s, 10 s and 100 s after start. */
void capture_clock_calibrate(void) {
  static const uint64_t at[] = {50000000, 1000000000, 10000000000,
                                100000000000};
  static unsigned       done;
  if (!g_tsc_ok || done == sizeof at / sizeof at[0])
    return;
  uint64_t tsc = read_tsc(), ns = monotonic_ns();
  if (ns < at[done] || tsc <= g_tsc0)
    return;
  atomic_store(&g_tsc_mult,
               (uint64_t)(((unsigned __int128)ns << 32) / (tsc - g_tsc0)));
  while (done < sizeof at / sizeof at[0] && ns >= at[done])
    done++;
}

uint64_t capture_coarse_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return timespec_ns(ts);
}

uint64_t capture_coarse_res_ns(void) {
  struct timespec ts = {0, 0};
  clock_getres(CLOCK_MONOTONIC_COARSE, &ts);
  return timespec_ns(ts);
}

uint64_t capture_clock_coarse_origin_ns(void) {
  return g_coarse_t0;
}

/* Starts the clock at 0 (start-up, and in a forked child); the coarse
 * clock first, so that it reads no later than the origin. */
static void clock_start(void) {
  g_coarse_t0 = capture_coarse_now_ns();
  clock_gettime(CLOCK_MONOTONIC, &g_t0);
  g_tsc0 = read_tsc();
}

static bool tsc_clocksource(void) {
  char buf[16] = {0};
  int  fd = open("/sys/devices/system/clocksource/clocksource0/"
                  "current_clocksource",
                 O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n >= 3 && strncmp(buf, "tsc", 3) == 0 && (buf[3] == '\n' || !buf[3]);
}

/* A "Name:   N kB" field of smaps_rollup text, in bytes (0 if absent). */
static uint64_t rollup_field(const char *buf, const char *name) {
  const char *p = strstr(buf, name);
  if (p == NULL)
    return 0;
  p += strlen(name);
  while (*p == ' ' || *p == '\t')
    p++;
  uint64_t kb = 0;
  while (*p >= '0' && *p <= '9')
    kb = kb * 10 + (uint64_t)(*p++ - '0');
  return kb * 1024;
}

/* Rss and Anonymous of smaps_rollup: it walks the page tables (Linux
 * 6.1.170 fs/proc/task_mmu.c:768 smap_gather_stats), so it is exact where
 * VmRSS lags by up to 64 page faults per thread (mm/memory.c:198).  The
 * calling thread's, not /proc/self's: /proc/self is the main thread, and
 * once that has called pthread_exit it is a zombie without memory, whose
 * smaps_rollup read 0 for every later sample. */
void capture_read_rss(uint64_t *rss, uint64_t *anon) {
  char buf[2048];
  *rss = *anon = 0;
  int fd = open("/proc/thread-self/smaps_rollup", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return;
  buf[n] = '\0';
  *rss = rollup_field(buf, "\nRss:");
  *anon = rollup_field(buf, "\nAnonymous:");
}

uint64_t capture_resident(const void *base, size_t len) {
  unsigned char vec[256];
  uint64_t      total = 0;
  for (size_t off = 0; off < len; off += sizeof vec * g_page) {
    size_t n = (len - off + g_page - 1) / g_page;
    if (n > sizeof vec)
      n = sizeof vec;
    if (mincore((char *)base + off, n * g_page, vec) != 0)
      return total;
    for (size_t k = 0; k < n; k++)
      total += (vec[k] & 1) ? g_page : 0;
  }
  return total;
}

static uint64_t parse_u64(const char *s) {
  uint64_t v = 0;
  for (; s != NULL && *s >= '0' && *s <= '9'; s++)
    v = v * 10 + (uint64_t)(*s - '0');
  return v;
}

/* ---- Start-up and fork ------------------------------------------------------
 */

static void sample_now(void) {
  capture_touch_probe_all();
  capture_emit_sample(CAPTURE_OP_RSS, NULL, 0);
}

static void atfork_prepare(void) {
  capture_stream_atfork_prepare();
  capture_touch_atfork_prepare();
  capture_dl_walk_atfork_prepare();
  capture_progmap_atfork_prepare(); /* last: the others may unmap */
}

static void atfork_parent(void) {
  capture_memmap_atfork();
  capture_progmap_atfork_release();
  capture_dl_walk_atfork_parent();
  capture_touch_atfork_parent();
}

static void atfork_child(void) {
  capture_memmap_atfork();
  capture_progmap_atfork_release();
  capture_dl_walk_atfork_child();
  capture_touch_atfork_child();
  capture_sites_atfork_child();
  t_self.tid = 0;
  g_pid = (int)getpid();
  clock_start(); /* the parent's scale holds: the TSC is the machine's */
  capture_memmap_open(); /* the parent's pagemap describes the parent */
  capture_stream_atfork_child();
}

/* A forked child's connection, its flusher and its first sample;
 * in_call: from inside a recorded call (capture_stream_start_flusher). */
static void child_start(bool in_call) {
  if (capture_stream_child_start(!in_call))
    sample_now();
}

/* Resolves the real functions and, once the environment is readable, reads
 * the settings and connects.  ld.so calls malloc before libc's initialiser
 * sets environ; such early calls are forwarded unrecorded and the decision
 * waits for a later call (the constructor at the latest). */
void capture_ensure_init(void) {
  if (LIKELY(atomic_load_explicit(&g_init_state, memory_order_acquire) == 2))
    return;
  capture_resolve();
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
  clock_start();
  g_tsc_ok = tsc_clocksource();
  g_page = (size_t)getauxval(AT_PAGESZ);
  g_pid = (int)getpid();
  const char *sock = NULL, *every = NULL, *touch = NULL, *stacks = NULL;
  bool        no_scan = false;
  for (char **e = environ; *e != NULL; e++) {
    if (strncmp(*e, "ALLOCSIM_CAPTURE_SOCK=", 22) == 0)
      sock = *e + 22;
    else if (strncmp(*e, "ALLOCSIM_CAPTURE_SAMPLE_NS=", 27) == 0)
      every = *e + 27;
    else if (strncmp(*e, "ALLOCSIM_CAPTURE_TOUCH=", 23) == 0)
      touch = *e + 23;
    else if (strncmp(*e, "ALLOCSIM_CAPTURE_STACKS=", 24) == 0)
      stacks = *e + 24;
    else if (strcmp(*e, "ALLOCSIM_CAPTURE_PAGEMAP_SCAN=0") == 0)
      no_scan = true;
  }
  if (sock != NULL && *sock != '\0' && strlen(sock) < sizeof g_sock_path) {
    memcpy(g_sock_path, sock, strlen(sock) + 1);
    capture_execenv_init(environ);
    g_sample_ns = every != NULL ? parse_u64(every) : 10000000;
    g_touch_threshold = parse_u64(touch);
    t_self.internal++;
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    t_self.internal--;
    capture_memmap_open();
    if (no_scan)
      capture_memmap_no_scan();
    capture_progmap_init();
    uint64_t n = parse_u64(stacks);
    capture_sites_init(n > CAPTURE_FRAMES_MAX ? CAPTURE_FRAMES_MAX
                                              : (uint32_t)n);
    capture_stream_open();
  }
  t_self.initializing = 0;
  atomic_store_explicit(&g_init_state, 2, memory_order_release);
}

/* A symbol of the process's global scope (CPython's, mimalloc's), or NULL. */
static void *global_sym(const char *name) {
  return capture_dlsym_quiet(RTLD_DEFAULT, name);
}

/* Provenance known only at the end: key=value as a META record. */
static void emit_meta_u64(const char *key, uint64_t value) {
  char      kv[CAPTURE_LABEL_MAX + 1];
  size_t    n = (size_t)snprintf(kv, sizeof kv, "%s=%llu", key,
                                 (unsigned long long)value);
  cap_rec_t r = {.op = CAPTURE_OP_META, .text = kv, .text_len = n};
  capture_emit(&r);
}

/* The last sample and every buffer, then BYE. */
static void finish(void) {
  if (!atomic_load(&g_recording) || getpid() != g_pid)
    return;
  sample_now();
  uint64_t dropped = capture_progmap_dropped();
  if (dropped != 0)
    emit_meta_u64("untracked_mmaps", dropped);
  /* Where mimalloc's aligned hints started, which the 2.1 model needs
   * (mi_hint_area.h); read now, once mimalloc has mapped what it will. */
  static char maps_buf[8192];
  uint64_t    hint = global_sym("mi_version") != NULL
                         ? mi_hint_area_start(maps_buf, sizeof maps_buf)
                         : 0;
  if (hint != 0)
    emit_meta_u64("mimalloc_hint_start", hint);
  capture_stream_flush_all(CAPTURE_MSG_BYE);
}

/* ---- Fatal signals ------------------------------------------------------
 * A program that crashes or aborts would lose every record since the last
 * flush (up to 50 ms: all of a short program).  So where such a signal
 * still has its default action when the library starts, a handler sends
 * everything first, then dies of the same signal: SA_RESETHAND restores
 * the default, and the raised signal, blocked during the handler, is
 * delivered as it returns (a fault would also recur on the same
 * instruction).  A program that installs its own handler later replaces
 * this one.  Asynchronous signals (SIGINT, SIGTERM, SIGPIPE, ...) are left
 * alone: programs look at their disposition to decide whether to install
 * their own (CPython installs its KeyboardInterrupt handler only where
 * SIGINT is SIG_DFL), and `allocsim capture` flushes before it forwards
 * one. */
static const int k_fatal_signals[] = {SIGSEGV, SIGBUS,  SIGFPE, SIGILL,
                                      SIGABRT, SIGTRAP, SIGSYS};

static void flush_then_die(int sig) {
  int saved = errno;
  finish();
  errno = saved;
  raise(sig);
}

static void install_fatal_flush(void) {
  struct sigaction sa = {.sa_handler = flush_then_die,
                         .sa_flags = SA_RESETHAND | SA_ONSTACK};
  sigfillset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof k_fatal_signals / sizeof *k_fatal_signals;
       i++) {
    struct sigaction old;
    if (sigaction(k_fatal_signals[i], NULL, &old) == 0 &&
        !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
      sigaction(k_fatal_signals[i], &sa, NULL);
  }
}

__attribute__((constructor)) static void capture_ctor(void) {
  capture_ensure_init();
  if (atomic_load(&g_recording)) {
    capture_stream_start_flusher(true);
    install_fatal_flush();
    sample_now();
    /* Sent at once: a command killed before the first flush period ends
     * (kill -9 at start) still has its baseline, so its run is stored. */
    capture_stream_flush_all(0);
  }
}

__attribute__((destructor)) static void capture_dtor(void) {
  finish();
}

/* ---- Exec and exit ----------------------------------------------------------
 */

/* Before the image is replaced: a last sample and every buffer sent.  If
 * the exec fails, recording simply goes on. */
static void before_exec(void) {
  capture_ensure_init();
  if (!atomic_load(&g_recording) || getpid() != g_pid)
    return;
  sample_now();
  capture_stream_flush_all(CAPTURE_MSG_EXEC);
}

/* envp as the new image must get it to be recorded too (execenv.c): a
 * corrected copy when it dropped the recorder or the settings, built in
 * the wrapper's own frame (a vfork child must not allocate). */
#define CAPTURE_ENV(envp, out)                                                 \
  capture_execenv_t plan_;                                                     \
  bool              fix_ = capture_execenv_plan((envp), &plan_);               \
  char             *v_[fix_ ? plan_.entries + CAPTURE_EXECENV_EXTRA : 1];      \
  char              pre_[fix_ ? plan_.pre_len : 1];                            \
  char              py_[fix_ && plan_.py_len ? plan_.py_len : 1];              \
  char *const      *out =                                                      \
      fix_ ? capture_execenv_fill((envp), &plan_, v_, pre_, py_) : (envp)

#define NEED_REAL(fn)                                                          \
  do {                                                                         \
    if (g_real.fn == NULL) {                                                   \
      errno = ENOSYS;                                                          \
      return -1;                                                               \
    }                                                                          \
  } while (0)

extern char **environ;

EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  before_exec();
  NEED_REAL(execve);
  CAPTURE_ENV(envp, env);
  return g_real.execve(path, argv, env);
}

/* glibc's execv/execvp/execvpe call execve internally, past the wrapper
 * above, so they are wrapped too.  execv and execvp pass environ, which
 * the program may have changed with setenv or putenv; when that dropped
 * the recorder, the corrected copy goes to execve/execvpe, which is what
 * glibc's execv and execvp do with environ (posix/execv.c, execvp.c). */
EXPORT int execv(const char *path, char *const argv[]) {
  before_exec();
  NEED_REAL(execve);
  CAPTURE_ENV(environ, env);
  return g_real.execve(path, argv, env);
}

EXPORT int execvp(const char *file, char *const argv[]) {
  before_exec();
  NEED_REAL(execvpe);
  CAPTURE_ENV(environ, env);
  return g_real.execvpe(file, argv, env);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  before_exec();
  NEED_REAL(execvpe);
  CAPTURE_ENV(envp, env);
  return g_real.execvpe(file, argv, env);
}

/* glibc's fexecve execs through the execveat system call (or
 * /proc/self/fd), not through execve. */
EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
  before_exec();
  NEED_REAL(fexecve);
  CAPTURE_ENV(envp, env);
  return g_real.fexecve(fd, argv, env);
}

/* posix_spawn and posix_spawnp (CPython's subprocess uses them where it
 * can) exec in a child of glibc's own (posix/spawni.c), past every
 * wrapper above; the caller goes on, so nothing is flushed. */
EXPORT int posix_spawn(pid_t *pid, const char *path,
                       const posix_spawn_file_actions_t *actions,
                       const posix_spawnattr_t *attr, char *const argv[],
                       char *const envp[]) {
  capture_ensure_init();
  if (g_real.posix_spawn == NULL)
    return ENOSYS;
  CAPTURE_ENV(envp, env);
  return g_real.posix_spawn(pid, path, actions, attr, argv, env);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file,
                        const posix_spawn_file_actions_t *actions,
                        const posix_spawnattr_t *attr, char *const argv[],
                        char *const envp[]) {
  capture_ensure_init();
  if (g_real.posix_spawnp == NULL)
    return ENOSYS;
  CAPTURE_ENV(envp, env);
  return g_real.posix_spawnp(pid, file, actions, attr, argv, env);
}

/* The variadic family: argv is built on the stack (no allocation), as
 * glibc's posix/execl.c does, and handed to the wrappers above. */
#define EXECL_ARGV(first, ap, argv, after)                                     \
  size_t n_ = 1;                                                               \
  va_start(ap, first);                                                         \
  while (va_arg(ap, const char *) != NULL)                                     \
    n_++;                                                                      \
  va_end(ap);                                                                  \
  char *argv[n_ + 1];                                                          \
  argv[0] = (char *)(first);                                                   \
  va_start(ap, first);                                                         \
  for (size_t i_ = 1; i_ <= n_; i_++)                                          \
    argv[i_] = va_arg(ap, char *);                                             \
  after;                                                                       \
  va_end(ap)

EXPORT int execl(const char *path, const char *arg, ...) {
  va_list ap;
  EXECL_ARGV(arg, ap, argv, (void)0);
  return execv(path, argv);
}

EXPORT int execlp(const char *file, const char *arg, ...) {
  va_list ap;
  EXECL_ARGV(arg, ap, argv, (void)0);
  return execvp(file, argv);
}

EXPORT int execle(const char *path, const char *arg, ...) {
  va_list ap;
  char  **envp;
  EXECL_ARGV(arg, ap, argv, envp = va_arg(ap, char **));
  return execve(path, argv, envp);
}

/* fork: the child connects here, after every fork handler ran
 * (stream.c capture_stream_atfork_child says why not in ours). */
EXPORT pid_t fork(void) {
  capture_resolve();
  pid_t pid = g_real.fork();
  if (pid == 0)
    child_start(false);
  return pid;
}

/* daemon: glibc's forks and leaves the parent by its internal _exit
 * (glibc 2.36 misc/daemon.c:47-57), which no wrapper sees, so the parent's
 * stream ended without BYE and its trace read as cut short.  This one does
 * what daemon(3) says through the wrappers here: fork (the child connects
 * at once), the parent leaves by _exit(0) (BYE), the child starts a new
 * session, goes to / unless nochdir, and unless noclose points its standard
 * streams at /dev/null, which must be the character device it should be
 * (ENODEV otherwise, as glibc checks, misc/daemon.c:65-97). */
EXPORT int daemon(int nochdir, int noclose) {
  pid_t pid = fork();
  if (pid < 0)
    return -1;
  if (pid > 0)
    _exit(0);
  if (setsid() == -1)
    return -1;
  if (!nochdir)
    (void)chdir("/");
  if (noclose)
    return 0;
  int         fd = open("/dev/null", O_RDWR);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  /* /dev/null is 1:3 (glibc 2.36 sysdeps/unix/sysv/linux/device-nrs.h
   * DEV_NULL_MAJOR, DEV_NULL_MINOR) */
  if (!S_ISCHR(st.st_mode) || st.st_rdev != makedev(1, 3)) {
    close(fd);
    errno = ENODEV;
    return -1;
  }
  for (int std = STDIN_FILENO; std <= STDERR_FILENO; std++)
    (void)dup2(fd, std);
  if (fd > STDERR_FILENO)
    close(fd);
  return 0;
}

/* _exit skips the destructor: without this the buffers would be lost. */
EXPORT void _exit(int status) {
  capture_resolve();
  finish();
  if (g_real.exit_now != NULL)
    g_real.exit_now(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

EXPORT void _Exit(int status) {
  capture_resolve();
  finish();
  if (g_real.exit_now2 != NULL)
    g_real.exit_now2(status);
  syscall(SYS_exit_group, status);
  __builtin_unreachable();
}

/* ---- main -------------------------------------------------------------------
 */

typedef int (*main_fn)(int, char **, char **);
static main_fn g_main;
atomic_int     g_main_entered;

static void py_hook_at_main(void);

/* The mark "main": a C program's comparison is anchored here, after ld.so
 * mapped the libraries and the C runtime ran its constructors.  A CPython
 * interpreter gets its domains hooked here, before it allocates. */
static int main_wrapper(int argc, char **argv, char **envp) {
  atomic_store(&g_main_entered, 1);
  allocsim_mark("main");
  py_hook_at_main();
  return g_main(argc, argv, envp);
}

/* glibc 2.36 csu/libc-start.c: the executable's _start calls this with its
 * main; it is resolved through the global scope, so the preloaded
 * definition comes first. */
int __libc_start_main(main_fn main, int argc, char **argv, void (*init)(void),
                      void (*fini)(void), void (*rtld_fini)(void),
                      void *stack_end);
EXPORT int __libc_start_main(main_fn main, int argc, char **argv,
                             void (*init)(void), void (*fini)(void),
                             void (*rtld_fini)(void), void *stack_end) {
  capture_resolve();
  g_main = main;
  return g_real.libc_start_main(main_wrapper, argc, argv, init, fini, rtld_fini,
                                stack_end);
}

/* ---- The malloc family ------------------------------------------------------
 */

#define BOOTSTRAP_OR_INIT(expr_when_resolving)                                 \
  do {                                                                         \
    if (UNLIKELY(atomic_load_explicit(&g_init_state, memory_order_acquire) !=  \
                 2)) {                                                         \
      if (t_self.resolving)                                                    \
        return expr_when_resolving;                                            \
      capture_ensure_init();                                                   \
      if (g_real.malloc == NULL)                                               \
        return expr_when_resolving;                                            \
    }                                                                          \
  } while (0)

bool capture_ready(void) {
  if (LIKELY(atomic_load_explicit(&g_init_state, memory_order_acquire) == 2))
    return true;
  if (t_self.resolving)
    return false;
  capture_ensure_init();
  return g_real.malloc != NULL;
}

/* A forked child connects at its first recorded call when its fork did
 * not come through the wrapper below (a fork libc makes by its internal
 * name). */
static inline void child_flusher(void) {
  if (UNLIKELY(atomic_load_explicit(&g_child_pending, memory_order_relaxed)))
    child_start(true);
}

void capture_record_alloc(uint8_t op, uint8_t domain, void *p, uint64_t size,
                          uint64_t align) {
  child_flusher();
  cap_rec_t r = {.op = op,
                 .domain = domain,
                 .addr = (uintptr_t)p,
                 .x = size,
                 .y = align,
                 .site = capture_site_here()};
  capture_emit(&r);
  if (capture_touch_wants(size))
    capture_touch_track((uintptr_t)p, size, 0);
}

/* Reports a block's last touches and forgets it; enters the gate when its
 * release may unmap memory.  Returns the tracked size (0 if untracked). */
uint64_t capture_release_begin(void *p) {
  uint64_t size = capture_touch_release((uintptr_t)p);
  if (size >= GATE_MIN_BYTES)
    capture_gate_enter();
  return size;
}

void capture_release_end(uint64_t size) {
  if (size >= GATE_MIN_BYTES)
    capture_gate_leave();
}

void capture_record_free(uint8_t domain, void *p) {
  child_flusher();
  cap_rec_t r = {.op = CAPTURE_OP_FREE, .domain = domain, .addr = (uintptr_t)p};
  capture_emit(&r);
}

void *capture_record_realloc(uint8_t domain, void *old, size_t n,
                             void *(*call)(void *ctx, void *old, size_t n),
                             void *ctx) {
  child_flusher();
  uint64_t  old_size = capture_release_begin(old);
  cap_rec_t b = {
      .op = CAPTURE_OP_REALLOC_BEGIN, .domain = domain, .addr = (uintptr_t)old};
  capture_emit(&b);
  void     *p = call(ctx, old, n);
  cap_rec_t r = {.op = CAPTURE_OP_REALLOC,
                 .domain = domain,
                 .addr = (uintptr_t)(p != NULL ? p : old),
                 .x = n,
                 .failed = p == NULL,
                 .site = p != NULL ? capture_site_here() : 0};
  capture_emit(&r);
  if (p == NULL && old_size != 0)
    capture_touch_track((uintptr_t)old, old_size, 0); /* still the program's */
  else if (p != NULL && capture_touch_wants(n))
    capture_touch_track((uintptr_t)p, n, old_size < n ? old_size : n);
  capture_release_end(old_size);
  return p;
}

EXPORT void *malloc(size_t n) {
  BOOTSTRAP_OR_INIT(capture_boot_alloc(n));
  void *p = g_real.malloc(n);
  if (LIKELY(!capture_passthrough()) && p != NULL)
    capture_record_alloc(CAPTURE_OP_MALLOC, CAPTURE_DOMAIN_RAW, p, n, 0);
  return p;
}

EXPORT void *calloc(size_t nmemb, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(nmemb, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  BOOTSTRAP_OR_INIT(capture_boot_alloc(total));
  void *p = g_real.calloc(nmemb, size);
  if (LIKELY(!capture_passthrough()) && p != NULL)
    capture_record_alloc(CAPTURE_OP_CALLOC, CAPTURE_DOMAIN_RAW, p, total, 0);
  return p;
}

EXPORT void free(void *p) {
  if (p == NULL || capture_is_boot(p))
    return;
  if (UNLIKELY(atomic_load_explicit(&g_init_state, memory_order_acquire) !=
               2)) {
    capture_ensure_init();
    if (g_real.free == NULL)
      return; /* cannot happen: only boot blocks exist before dlsym */
  }
  if (UNLIKELY(capture_passthrough())) {
    g_real.free(p);
    return;
  }
  uint64_t size = capture_release_begin(p);
  capture_record_free(CAPTURE_DOMAIN_RAW, p);
  g_real.free(p);
  capture_release_end(size);
}

static void *call_real_realloc(void *ctx, void *old, size_t n) {
  (void)ctx;
  return g_real.realloc(old, n);
}

EXPORT void *realloc(void *old, size_t n) {
  if (old != NULL && capture_is_boot(old)) {
    /* A bootstrap block moves to the real heap; it was never recorded, so
     * the new block is recorded as a malloc. */
    void *p = malloc(n);
    if (p != NULL) {
      size_t keep = capture_boot_size(old);
      memcpy(p, old, keep < n ? keep : n);
    }
    return p;
  }
  BOOTSTRAP_OR_INIT(capture_boot_alloc(n));
  if (UNLIKELY(capture_passthrough()))
    return g_real.realloc(old, n);
  if (old == NULL) {
    void *p = g_real.realloc(NULL, n);
    if (p != NULL)
      capture_record_alloc(CAPTURE_OP_MALLOC, CAPTURE_DOMAIN_RAW, p, n, 0);
    return p;
  }
  if (n == 0) {
    /* glibc 2.36 malloc/malloc.c __libc_realloc: REALLOC_ZERO_BYTES_FREES
     * makes realloc(p, 0) a free that returns NULL. */
    uint64_t size = capture_release_begin(old);
    capture_record_free(CAPTURE_DOMAIN_RAW, old);
    void *p = g_real.realloc(old, 0);
    capture_release_end(size);
    return p;
  }
  return capture_record_realloc(CAPTURE_DOMAIN_RAW, old, n, call_real_realloc,
                                NULL);
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
  return align <= 16 ? capture_boot_alloc(n) : NULL;
}

EXPORT void *memalign(size_t align, size_t n) {
  BOOTSTRAP_OR_INIT(aligned_boot(align, n));
  void *p = g_real.memalign(align, n);
  if (LIKELY(!capture_passthrough()) && p != NULL)
    capture_record_alloc(CAPTURE_OP_MEMALIGN, CAPTURE_DOMAIN_RAW, p, n, align);
  return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  BOOTSTRAP_OR_INIT((*out = aligned_boot(align, n)) ? 0 : ENOMEM);
  int rc = g_real.posix_memalign(out, align, n);
  if (LIKELY(!capture_passthrough()) && rc == 0 && *out != NULL)
    capture_record_alloc(CAPTURE_OP_MEMALIGN, CAPTURE_DOMAIN_RAW, *out, n,
                         align);
  return rc;
}

EXPORT void *aligned_alloc(size_t align, size_t n) {
  BOOTSTRAP_OR_INIT(aligned_boot(align, n));
  void *p = g_real.aligned_alloc(align, n);
  if (LIKELY(!capture_passthrough()) && p != NULL)
    capture_record_alloc(CAPTURE_OP_MEMALIGN, CAPTURE_DOMAIN_RAW, p, n, align);
  return p;
}

EXPORT void *valloc(size_t n) {
  BOOTSTRAP_OR_INIT(aligned_boot(4096, n));
  void *p = g_real.valloc(n);
  if (LIKELY(!capture_passthrough()) && p != NULL)
    capture_record_alloc(CAPTURE_OP_MEMALIGN, CAPTURE_DOMAIN_RAW, p, n, g_page);
  return p;
}

EXPORT void *pvalloc(size_t n) {
  BOOTSTRAP_OR_INIT(aligned_boot(4096, n));
  void *p = g_real.pvalloc(n);
  /* glibc 2.36 malloc/malloc.c __libc_pvalloc: size rounded up to a page. */
  uint64_t rounded = ((uint64_t)n + g_page - 1) / g_page * g_page;
  if (rounded == 0)
    rounded = g_page;
  if (LIKELY(!capture_passthrough()) && p != NULL)
    capture_record_alloc(CAPTURE_OP_MEMALIGN, CAPTURE_DOMAIN_RAW, p, rounded,
                         g_page);
  return p;
}

/* A trim moves RSS for as long as it runs (madvise of every free page): the
 * sampler waits for it, and the record follows the call. */
EXPORT int malloc_trim(size_t pad) {
  BOOTSTRAP_OR_INIT(0);
  if (capture_passthrough())
    return g_real.malloc_trim(pad);
  capture_gate_enter();
  int       rc = g_real.malloc_trim(pad);
  cap_rec_t r = {.op = CAPTURE_OP_TRIM, .x = pad, .y = (uint64_t)rc};
  capture_emit(&r);
  capture_gate_leave();
  return rc;
}

/* mallopt parameters (glibc 2.36 malloc/malloc.h:121-141) and the glibc
 * model's knob each one sets; M_PERTURB and M_CHECK_ACTION have none. */
static const char *mallopt_knob(int param) {
  switch (param) {
  case 1: /* M_MXFAST */
    return "mxfast";
  case -1: /* M_TRIM_THRESHOLD */
    return "trim_threshold";
  case -2: /* M_TOP_PAD */
    return "top_pad";
  case -3: /* M_MMAP_THRESHOLD */
    return "mmap_threshold";
  case -4: /* M_MMAP_MAX */
    return "mmap_max";
  case -7: /* M_ARENA_TEST */
    return "arena_test";
  case -8: /* M_ARENA_MAX */
    return "arena_max";
  default:
    return NULL;
  }
}

EXPORT int mallopt(int param, int value) {
  BOOTSTRAP_OR_INIT(0);
  if (g_real.mallopt == NULL)
    return 0;
  int         rc = g_real.mallopt(param, value);
  const char *knob = mallopt_knob(param);
  if (!capture_passthrough() && rc == 1 && knob != NULL) {
    cap_rec_t r = {.op = CAPTURE_OP_OPTION,
                   .y = (uint64_t)(int64_t)value,
                   .text = knob,
                   .text_len = strlen(knob)};
    capture_emit(&r);
  }
  return rc;
}

/* ---- CPython domains --------------------------------------------------------
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

static bool py_records(void) {
  return t_self.in_domain == 0 && t_self.internal == 0 && t_self.py_probe == 0;
}

static void *py_malloc(void *ctx, size_t n) {
  pymem_alloc_t *o = ctx;
  if (UNLIKELY(t_self.py_probe != 0))
    t_self.py_probe = 2; /* py_wrapped_below: the probe got here */
  t_self.in_domain++;
  void *p = o->malloc(o->ctx, n);
  t_self.in_domain--;
  if (p != NULL && py_records())
    capture_record_alloc(CAPTURE_OP_MALLOC, py_domain(ctx), p, n, 0);
  return p;
}

static void *py_calloc(void *ctx, size_t nelem, size_t elsize) {
  pymem_alloc_t *o = ctx;
  t_self.in_domain++;
  void *p = o->calloc(o->ctx, nelem, elsize);
  t_self.in_domain--;
  if (p != NULL && py_records())
    capture_record_alloc(CAPTURE_OP_CALLOC, py_domain(ctx), p, nelem * elsize,
                         0);
  return p;
}

static void *call_py_realloc(void *ctx, void *old, size_t n) {
  pymem_alloc_t *o = ctx;
  t_self.in_domain++;
  void *p = o->realloc(o->ctx, old, n);
  t_self.in_domain--;
  return p;
}

static void *py_realloc(void *ctx, void *old, size_t n) {
  if (!py_records())
    return call_py_realloc(ctx, old, n);
  if (old == NULL) {
    void *p = call_py_realloc(ctx, NULL, n);
    if (p != NULL)
      capture_record_alloc(CAPTURE_OP_MALLOC, py_domain(ctx), p, n, 0);
    return p;
  }
  /* pymalloc's realloc(p, 0) returns a live block, unlike glibc's. */
  return capture_record_realloc(py_domain(ctx), old, n, call_py_realloc, ctx);
}

static void py_free(void *ctx, void *p) {
  pymem_alloc_t *o = ctx;
  uint64_t       size = 0;
  bool           rec = p != NULL && py_records();
  if (rec) {
    size = capture_release_begin(p);
    capture_record_free(py_domain(ctx), p);
  }
  t_self.in_domain++;
  o->free(o->ctx, p);
  t_self.in_domain--;
  if (rec)
    capture_release_end(size);
}

/* The mark "__main__" when the interpreter starts the program (the end of
 * its start-up): CPython 3.11 Modules/main.c raises these audit events just
 * before running a file, a -c command, a -m module or stdin. */
static int py_audit(const char *event, void *args, void *user) {
  (void)args;
  atomic_int *fired = user;
  if (strncmp(event, "cpython.run_", 12) == 0 &&
      strcmp(event, "cpython.run_startup") != 0) {
    int expect = 0;
    if (atomic_compare_exchange_strong(fired, &expect, 1))
      allocsim_mark("__main__");
  }
  return 0;
}

/* The raw domain when the audit hook was added, and the block
 * PySys_AddAuditHook took from it for its list entry (3.11
 * Python/sysmodule.c PySys_AddAuditHook: PyMem_RawMalloc), which the
 * interpreter frees with PyMem_RawFree when it finalizes
 * (_PySys_ClearAuditHooks).  Added at main, before pre-initialization,
 * the entry comes from plain malloc; if the interpreter then installs its
 * debug hooks (-X dev), their raw free would find no debug header on it
 * and abort the process at exit ("bad ID", exit 134).  py_keep_audit_entry
 * routes that one free back to the allocator that made the block. */
static pymem_alloc_t g_py_raw_at_add;
static void         *g_py_audit_entry;
static pymem_alloc_t g_py_raw_debug; /* the debug hooks' raw domain */

/* Pass-through calls to the allocator ctx points to (a pymem_alloc_t). */
static void *py_raw_pass_malloc(void *ctx, size_t n) {
  pymem_alloc_t *o = ctx;
  return o->malloc(o->ctx, n);
}
static void *py_raw_pass_calloc(void *ctx, size_t nelem, size_t elsize) {
  pymem_alloc_t *o = ctx;
  return o->calloc(o->ctx, nelem, elsize);
}
static void *py_raw_pass_realloc(void *ctx, void *p, size_t n) {
  pymem_alloc_t *o = ctx;
  return o->realloc(o->ctx, p, n);
}
static void py_raw_pass_free(void *ctx, void *p) {
  pymem_alloc_t *o = ctx;
  o->free(o->ctx, p);
}

/* While the audit hook is added: notes the block its entry takes. */
static void *py_raw_noting_malloc(void *ctx, size_t n) {
  void *p = py_raw_pass_malloc(ctx, n);
  if (g_py_audit_entry == NULL)
    g_py_audit_entry = p;
  return p;
}

static void py_add_audit_hook(void) {
  static atomic_int fired;
  int (*add)(int (*)(const char *, void *, void *), void *) =
      (int (*)(int (*)(const char *, void *, void *), void *))global_sym(
          "PySys_AddAuditHook");
  void (*get)(int, pymem_alloc_t *) =
      (void (*)(int, pymem_alloc_t *))global_sym("PyMem_GetAllocator");
  void (*set)(int, pymem_alloc_t *) =
      (void (*)(int, pymem_alloc_t *))global_sym("PyMem_SetAllocator");
  if (add == NULL || get == NULL || set == NULL)
    return;
  get(0, &g_py_raw_at_add); /* PYMEM_DOMAIN_RAW */
  set(0, &(pymem_alloc_t){.ctx = &g_py_raw_at_add,
                          .malloc = py_raw_noting_malloc,
                          .calloc = py_raw_pass_calloc,
                          .realloc = py_raw_pass_realloc,
                          .free = py_raw_pass_free});
  add(py_audit, &fired);
  set(0, &g_py_raw_at_add);
}

/* Over the debug hooks: frees the audit entry where it came from. */
static void py_raw_debug_free(void *ctx, void *p) {
  if (p != NULL && p == g_py_audit_entry) {
    g_py_audit_entry = NULL;
    py_raw_pass_free(&g_py_raw_at_add, p);
    return;
  }
  py_raw_pass_free(ctx, p);
}

/* Puts a raw domain over the debug hooks' that frees the audit entry
 * where it came from (see g_py_audit_entry); once. */
static void py_keep_audit_entry(void) {
  void (*get)(int, pymem_alloc_t *) =
      (void (*)(int, pymem_alloc_t *))global_sym("PyMem_GetAllocator");
  void (*set)(int, pymem_alloc_t *) =
      (void (*)(int, pymem_alloc_t *))global_sym("PyMem_SetAllocator");
  if (g_py_audit_entry == NULL || g_py_raw_debug.free != NULL || get == NULL ||
      set == NULL)
    return;
  get(0, &g_py_raw_debug);
  set(0, &(pymem_alloc_t){.ctx = &g_py_raw_debug,
                          .malloc = py_raw_pass_malloc,
                          .calloc = py_raw_pass_calloc,
                          .realloc = py_raw_pass_realloc,
                          .free = py_raw_debug_free});
}

/* CPython 3.11 Include/cpython/objimpl.h: PyObjectArenaAllocator, the
 * mmap and munmap behind pymalloc's arenas (public since 3.4, PEP 445). */
typedef struct py_arena_alloc_s py_arena_alloc_t;
struct py_arena_alloc_s {
  void *ctx;
  void *(*alloc)(void *ctx, size_t size);
  void (*free)(void *ctx, void *ptr, size_t size);
};
static py_arena_alloc_t g_py_arena_orig;

/* Where pymalloc's arena went decides whether it is 16 KiB aligned, so
 * whether it holds 64 pools or 63 (3.11 Objects/obmalloc.c:1668-1675),
 * and with that when arenas fill and which empty one is kept: replayed at
 * its own addresses, the model kept 6 arenas where the interpreter kept 7.
 * So each arena mapped inside a recorded domain call is written as the
 * option placed.pymalloc with its address, just before that call's record
 * (whose seq is taken after the call returns).  Outside a wrapped call
 * (the domains unhooked, or a frame stack chunk, which 3.11 maps through
 * the same allocator) nothing is written. */
static void *py_arena_alloc(void *ctx, size_t size) {
  (void)ctx;
  void *p = g_py_arena_orig.alloc(g_py_arena_orig.ctx, size);
  if (p != NULL && t_self.in_domain > 0 && t_self.internal == 0) {
    static const char name[] = "placed.pymalloc"; /* event.h's prefix */
    cap_rec_t         r = {.op = CAPTURE_OP_OPTION,
                           .y = (uint64_t)(uintptr_t)p,
                           .text = name,
                           .text_len = sizeof name - 1};
    capture_emit(&r);
  }
  return p;
}

static void py_arena_free(void *ctx, void *p, size_t size) {
  (void)ctx;
  g_py_arena_orig.free(g_py_arena_orig.ctx, p, size);
}

/* Wraps the arena allocator once: PYTHONMALLOC replaces the domains'
 * allocators, not this one, so a second hook finds the wrapper. */
static void py_wrap_arenas(void) {
  void (*get)(py_arena_alloc_t *) =
      (void (*)(py_arena_alloc_t *))global_sym("PyObject_GetArenaAllocator");
  void (*set)(py_arena_alloc_t *) =
      (void (*)(py_arena_alloc_t *))global_sym("PyObject_SetArenaAllocator");
  py_arena_alloc_t now;
  if (get == NULL || set == NULL)
    return;
  get(&now);
  if (now.alloc == py_arena_alloc)
    return;
  g_py_arena_orig = now;
  set(&(py_arena_alloc_t){
      .ctx = NULL, .alloc = py_arena_alloc, .free = py_arena_free});
}

static void py_set(int hooked) {
  void (*get)(int, pymem_alloc_t *) =
      (void (*)(int, pymem_alloc_t *))global_sym("PyMem_GetAllocator");
  void (*set)(int, pymem_alloc_t *) =
      (void (*)(int, pymem_alloc_t *))global_sym("PyMem_SetAllocator");
  if (get == NULL || set == NULL)
    return;
  for (int d = 1; d <= 2; d++) {
    if (hooked) {
      get(d, &g_py_orig[d]);
      pymem_alloc_t w = {.ctx = &g_py_orig[d],
                         .malloc = py_malloc,
                         .calloc = py_calloc,
                         .realloc = py_realloc,
                         .free = py_free};
      set(d, &w);
    } else {
      set(d, &g_py_orig[d]);
    }
  }
  g_py_hooked = hooked;
}

int allocsim_hook_python(void);
int allocsim_unhook_python(void);

/* The obj domain's allocator now into *now; false without CPython. */
static bool py_obj_allocator(pymem_alloc_t *now) {
  void (*get)(int, pymem_alloc_t *) =
      (void (*)(int, pymem_alloc_t *))global_sym("PyMem_GetAllocator");
  if (get == NULL)
    return false;
  get(2, now); /* PYMEM_DOMAIN_OBJ */
  return true;
}

/* Whether the obj domain is still wrapped: PYTHONMALLOC (malloc, debug,
 * ...) and -X dev make the interpreter set its allocators during
 * pre-initialization, which it does only then (bpo-32030, CPython commit
 * 31e99080), replacing the wrappers installed at main; sitecustomize.py
 * then wraps them again (test_capture checks both paths). */
static bool py_still_hooked(void) {
  pymem_alloc_t now;
  return py_obj_allocator(&now) && now.malloc == py_malloc;
}

/* Whether the obj domain's allocator, though not ours, still calls ours
 * beneath it: -X tracemalloc (or PYTHONTRACEMALLOC) starts tracemalloc
 * after the hook at main, and it wraps the allocator it finds, ours.
 * Wrapping again would save tracemalloc's allocator where ours keeps the
 * one it calls, and each would call the other until the stack ran out.
 * One allocation through the current allocator, unrecorded, tells. */
static bool py_wrapped_below(void) {
  pymem_alloc_t now;
  if (!py_obj_allocator(&now))
    return false;
  t_self.py_probe = 1;
  void *p = now.malloc(now.ctx, 1);
  bool  below = t_self.py_probe == 2;
  if (p != NULL)
    now.free(now.ctx, p);
  t_self.py_probe = 0;
  return below;
}

/* -X dev, PYTHONDEVMODE=1 and PYTHONMALLOC=debug or *_debug put CPython's
 * debug hooks under the domains: 3 words around every block (3.11
 * Objects/obmalloc.c PYMEM_DEBUG_EXTRA_BYTES, 3 * SST), which the recorder,
 * wrapping them, does not see.  The allocator's name says so (3.11
 * Objects/obmalloc.c _PyMem_GetCurrentAllocatorName: "pymalloc_debug",
 * "malloc_debug"; NULL once another hook wraps it), and the trace's header
 * says python_debug_hooks=1 (capture_run.c), which compare refuses. */
static void py_note_debug_hooks(void) {
  const char *(*name)(void) =
      (const char *(*)(void))global_sym("_PyMem_GetCurrentAllocatorName");
  const char *n = name != NULL ? name() : NULL;
  if (n != NULL && strstr(n, "debug") != NULL) {
    py_keep_audit_entry();
    static const char kv[] = "python_debug_hooks=1";
    cap_rec_t         r = {
                .op = CAPTURE_OP_META, .text = kv, .text_len = sizeof kv - 1};
    capture_emit(&r);
  }
}

/* Whether the allocator's name cannot be read yet: in CPython 3.12,
 * _PyMem_GetCurrentAllocatorName takes the runtime's allocators lock
 * without checking it exists (3.12 Objects/obmalloc.c
 * _PyMem_GetCurrentAllocatorName, PyThread_acquire_lock(ALLOCATORS_MUTEX)),
 * and the lock is a PyThread lock that _PyRuntime_Initialize creates
 * (3.12 Python/pystate.c _PyRuntimeState_Init, alloc_for_runtime): at
 * main it is NULL, and the call crashed the interpreter (3.12.1: SIGSEGV
 * in sem_wait).  PyMem_GetAllocator and PyMem_SetAllocator check for
 * NULL; 3.11 takes no lock, 3.13 a static PyMutex. */
static bool py_allocator_name_needs_runtime(void) {
  const char *(*version)(void) =
      (const char *(*)(void))global_sym("Py_GetVersion");
  return version != NULL && strncmp(version(), "3.12.", 5) == 0;
}

/* Reads the allocator's name beneath the wrappers, which the name
 * function does not see through (it returns NULL over any hook): with the
 * GIL held (from sitecustomize.py), no call reaches the mem and obj
 * domains while they are unwrapped. */
static void py_note_debug_hooks_beneath(void) {
  py_set(0);
  py_note_debug_hooks();
  py_set(1);
}

/* Wraps CPython's mem and obj domains (at_main: at entry to main; else
 * from sitecustomize.py through ctypes, with the GIL held, where the
 * interpreter replaced the wrappers or came without them).  Returns 1 if
 * hooked now or before, 0 if the process has no CPython or is not
 * captured.  The first time it records meta python=VERSION, the mark
 * "hooked" and adds the audit hook that marks "__main__"; allocations
 * before "hooked" are part of the baseline, and so are pymalloc's arenas
 * mapped while the domains were not wrapped (dropped from the program's
 * own mappings: they are not "other"). */
static int py_hook(bool at_main) {
  static int  first = 1;
  static bool name_pending; /* debug hooks not looked for at main */
  capture_ensure_init();
  if (!atomic_load(&g_recording))
    return 0;
  if (g_py_hooked && py_still_hooked()) {
    if (name_pending && !at_main)
      py_note_debug_hooks_beneath();
    name_pending = false;
    return 1;
  }
  if (g_py_hooked && py_wrapped_below())
    return 1;
  if (global_sym("PyMem_SetAllocator") == NULL)
    return 0;
  bool replaced = g_py_hooked; /* by the interpreter, not by unhook */
  if (first) {
    const char *(*version)(void) =
        (const char *(*)(void))global_sym("Py_GetVersion");
    if (version != NULL) {
      char        kv[48] = "python=";
      const char *v = version();
      size_t      n = 7;
      while (*v != '\0' && *v != ' ' && n < sizeof kv - 1)
        kv[n++] = *v++;
      cap_rec_t r = {.op = CAPTURE_OP_META, .text = kv, .text_len = n};
      capture_emit(&r);
    }
  }
  name_pending = at_main && py_allocator_name_needs_runtime();
  if (!name_pending)
    py_note_debug_hooks();
  py_set(1);
  py_wrap_arenas();
  if ((first && !at_main) || replaced)
    capture_progmap_clear(); /* pymalloc's arenas so far: start-up */
  if (first) {
    first = 0;
    allocsim_mark("hooked");
    py_add_audit_hook();
  }
  return 1;
}

EXPORT int allocsim_hook_python(void) {
  return py_hook(false);
}

/* At entry to main, before the interpreter's first allocation: pymalloc's
 * arenas then hold only what the trace shows, so a model replaying it
 * builds the same arenas.  Hooked later, at site import, the interpreter's
 * start-up objects sat in arenas the model never saw, and the program's
 * first objects filled those arenas' free pools instead of new ones (a
 * threaded script: 12 arenas allocated against 11 modelled, up to 6.7%
 * of the peak low after its threads freed their objects).  The
 * domains' allocators are initialised statically, "from the first
 * instruction of the process" (bpo-32124), and a hook that wraps the
 * current allocator may be set at any point (gh-96997, the contract in
 * 3.11's Doc/c-api/memory.rst); native audit hooks are meant to be added
 * before the runtime initialises (Doc/library/sys.rst, gh-87604). */
static void py_hook_at_main(void) {
  if (global_sym("PyMem_SetAllocator") != NULL)
    (void)py_hook(true);
}

/* Puts pymalloc's own allocators back, for sys._debugmallocstats (which
 * prints nothing unless the obj domain is pymalloc's); sitecustomize.py
 * hooks again right after.  Allocations in between are not recorded. */
EXPORT int allocsim_unhook_python(void) {
  if (!g_py_hooked || !py_still_hooked()) /* another hook wraps ours */
    return 0;
  py_set(0);
  return 1;
}

/* ---- Marks ------------------------------------------------------------------
 */

/* Records a mark carrying the measured RSS read just after its seq was
 * taken, after reporting newly written pages of large allocations. */
EXPORT void allocsim_mark(const char *label) {
  capture_ensure_init();
  child_flusher();
  if (label == NULL || !atomic_load(&g_recording))
    return;
  capture_touch_probe_all();
  capture_emit_sample(CAPTURE_OP_MARK, label,
                      strnlen(label, CAPTURE_LABEL_MAX));
}
