/* traces/capture_run.c -- runs a command under liballocsim_capture.so and
 * writes the traces its processes stream (capture_run.h).
 *
 * One process, one loop: poll() over a signalfd (SIGCHLD, and the signals
 * to forward), the listening socket, and one SOCK_SEQPACKET connection per
 * process image.  The first message of a connection (HELLO) says which
 * process it is; its trace file is opened then (the command's own image
 * writes to -o; when that pid execs, the file moves to OUT.PID.N.EXT and
 * the new image takes -o), and every later message goes to its converter
 * (capture_stream.c).  Temporary files are a socket and an owner file in
 * $TMPDIR/allocsim-capture-XXXXXX; a capture killed before removing them
 * leaves them for the next one (capture_cleanup).
 *
 * Sections: environment and provenance, traces, connections, signals and
 * stopping, the loop, entry points.
 */
#include "capture_run.h"

#include "helper_path.h"
#include "import_util.h"
#include "machine.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capture_out.h"

extern char **environ;

/* After the command exits, processes it left running get this long to end
 * before they are detached and run on untraced. */
#define LINGER_NS ((uint64_t)2000000000)
/* How long a forwarded signal waits for the recorders to flush. */
#define FLUSH_WAIT_NS ((uint64_t)1000000000)
/* Messages read from one connection per pass, so none starves the rest. */
/* Decimal digits of the mimalloc_hint_start provenance: any address below
 * 2^47 (x86-64 user space), zero-padded so the header is patched in place. */
#define HINT_DIGITS    15
#define READS_PER_PASS 64
#define MAX_TRACES     (1 + CAPTURE_MAX_EXTRA)

/* ---- Environment and provenance ------------------------------------------ */

bool capture_env_knob(const char *name) {
  return capture_wire_env_knob(name, strlen(name));
}

static bool readable(const char *p) {
  return access(p, R_OK) == 0;
}

as_status_t capture_find_lib(char *buf, size_t len, as_err_t *err) {
  static const char *const rel[] = {
      "",        "/../lib/allocsim",      "/../lib64/allocsim",
      "/../lib", "/../../traces/capture", NULL};
#ifdef ALLOCSIM_CAPTURE_BUILD_LIB
  const char *built = ALLOCSIM_CAPTURE_BUILD_LIB;
#else
  const char *built = NULL;
#endif
  return helper_path_find("ALLOCSIM_CAPTURE_LIB", "liballocsim_capture.so", rel,
                          built, R_OK, buf, len, err);
}

/* The directory holding sitecustomize.py: next to the library (the build
 * copies it to LIBDIR/python), else the source tree. */
static void python_dir(const char *lib, char *buf, size_t len) {
  as_format_fits(buf, len, "%s", lib);
  char *slash = strrchr(buf, '/');
  if (slash != NULL) {
    as_format_fits(slash, len - (size_t)(slash - buf), "/python");
    char probe[PATH_MAX];
    as_format_fits(probe, sizeof probe, "%s/sitecustomize.py", buf);
    if (readable(probe))
      return;
  }
#ifdef ALLOCSIM_CAPTURE_PY_DIR
  as_format_fits(buf, len, "%s", ALLOCSIM_CAPTURE_PY_DIR);
#else
  buf[0] = '\0';
#endif
}

/* OUT.PID[.N].EXT for a secondary process's trace. */
static void secondary_path(const char *out, uint64_t pid, unsigned gen,
                           char *buf, size_t len) {
  const char *slash = strrchr(out, '/');
  const char *dot = strrchr(out, '.');
  if (dot == NULL || (slash != NULL && dot < slash) || dot == out)
    dot = out + strlen(out);
  char tail[32];
  if (gen == 0)
    as_format_fits(tail, sizeof tail, ".%" PRIu64, pid);
  else
    as_format_fits(tail, sizeof tail, ".%" PRIu64 ".%u", pid, gen);
  as_format_fits(buf, len, "%.*s%s%s", (int)(dot - out), out, tail, dot);
}

/* Removes dir and the files in it (a capture's socket and owner file). */
static void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  char           p[PATH_MAX];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    as_format_fits(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

/* Sets provenance k=v, made writable in the text format: control bytes
 * (a `python -c` script's newlines) become spaces, surrounding spaces go,
 * and the value is cut at 255 bytes. */
static void meta_put(trace_meta_t *m, const char *k, const char *v) {
  char key[32];
  char val[256];
  as_format_fits(key, sizeof key, "%s", k);
  as_format_fits(val, sizeof val, "%s", v);
  for (char *p = val; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      *p = ' ';
  size_t n = strlen(val);
  while (n > 0 && val[n - 1] == ' ')
    val[--n] = '\0';
  size_t lead = strspn(val, " ");
  (void)trace_meta_set(m, key, val + lead, NULL);
}

/* Joins argv with spaces, quoting arguments that need it. */
static void join_argv(char *const *argv, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; argv[i] != NULL && used < len; i++) {
    bool quote = argv[i][0] == '\0' || strpbrk(argv[i], " \t\"'\\$") != NULL;
    used += (size_t)snprintf(buf + used, len - used, "%s%s%s%s", i ? " " : "",
                             quote ? "'" : "", argv[i], quote ? "'" : "");
  }
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The environment the command runs in: ours, minus earlier capture
 * settings (ALLOCSIM_CAPTURE_PAGEMAP_SCAN, the user's, passes: see
 * traces/capture/capture.c), plus LD_PRELOAD (the recorder first, so that
 * RTLD_NEXT finds a preloaded allocator rather than bypassing it), PYTHONPATH
 * and the ALLOCSIM_CAPTURE_* settings.  Strings live in *store. */
typedef struct env_s env_t;
struct env_s {
  char **envp;
  char   pre[PATH_MAX * 2], sock[160], ns[64], touch[64], stacks[64];
  char   py[PATH_MAX * 2], pydir[PATH_MAX + 32];
};

static as_status_t build_env(env_t *e, const char *lib, const char *pydir,
                             const char *sock, const capture_opts_t *o,
                             as_err_t *err) {
  size_t nenv = 0;
  while (environ[nenv] != NULL)
    nenv++;
  e->envp = calloc(nenv + 8, sizeof *e->envp);
  if (e->envp == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory");
  const char *old_pre = getenv("LD_PRELOAD");
  const char *old_py = getenv("PYTHONPATH");
  as_format_fits(e->pre, sizeof e->pre, "LD_PRELOAD=%s%s%s", lib,
                 old_pre && *old_pre ? " " : "", old_pre ? old_pre : "");
  as_format_fits(e->sock, sizeof e->sock, "ALLOCSIM_CAPTURE_SOCK=%s", sock);
  as_format_fits(e->ns, sizeof e->ns, "ALLOCSIM_CAPTURE_SAMPLE_NS=%" PRIu64,
                 o->sample_every_ns);
  as_format_fits(e->touch, sizeof e->touch, "ALLOCSIM_CAPTURE_TOUCH=%" PRIu64,
                 o->touch_threshold);
  as_format_fits(e->stacks, sizeof e->stacks,
                 "ALLOCSIM_CAPTURE_STACKS=%" PRIu32, o->stacks);
  /* The recorder puts it back into PYTHONPATH of an exec'd image whose
   * environment lost it (traces/capture/execenv.c). */
  as_format_fits(e->pydir, sizeof e->pydir, "ALLOCSIM_CAPTURE_PYTHON=%s",
                 pydir);
  as_format_fits(e->py, sizeof e->py, "PYTHONPATH=%s%s%s", pydir,
                 old_py && *old_py ? ":" : "", old_py ? old_py : "");
  size_t k = 0;
  for (size_t i = 0; i < nenv; i++)
    if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0 &&
        strncmp(environ[i], "PYTHONPATH=", 11) != 0 &&
        (strncmp(environ[i], "ALLOCSIM_CAPTURE_", 17) != 0 ||
         strncmp(environ[i], "ALLOCSIM_CAPTURE_PAGEMAP_SCAN=", 30) == 0))
      e->envp[k++] = environ[i];
  e->envp[k++] = e->pre;
  e->envp[k++] = e->sock;
  e->envp[k++] = e->ns;
  e->envp[k++] = e->touch;
  e->envp[k++] = e->stacks;
  if (pydir[0] != '\0') {
    e->envp[k++] = e->py;
    e->envp[k++] = e->pydir;
  }
  e->envp[k] = NULL;
  return AS_OK;
}

static void provenance(const capture_opts_t *o, const char *abs_lib,
                       trace_meta_t *m) {
  struct utsname u;
  char           buf[1024];
  join_argv(o->argv, buf, sizeof buf);
  meta_put(m, "kind", "measured");
  meta_put(m, "source", "allocsim capture");
  meta_put(m, "command", buf);
  if (uname(&u) == 0) {
    as_format_fits(buf, sizeof buf, "%s %s", u.nodename, u.machine);
    meta_put(m, "machine", buf);
    meta_put(m, "kernel", u.release);
  }
  as_format_fits(buf, sizeof buf, "%ld", sysconf(_SC_PAGESIZE));
  meta_put(m, "page_size", buf);
  int zero_page = machine_reads_map_zero_page();
  if (zero_page >= 0)
    meta_put(m, "zero_page", zero_page ? "true" : "false");
  const char *thp = machine_thp_enabled();
  if (thp != NULL)
    meta_put(m, "thp", thp);
  as_format_fits(buf, sizeof buf, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
  meta_put(m, "ncpus", buf);
  as_format_fits(buf, sizeof buf, "glibc %s", gnu_get_libc_version());
  meta_put(m, "libc", buf);
  /* The glibc model's version knob reads it (models/glibc.c). */
  meta_put(m, "glibc_version", gnu_get_libc_version());
  as_format_fits(buf, sizeof buf, "%" PRIu64, o->sample_every_ns);
  meta_put(m, "sample_every_ns", buf);
  meta_put(m, "capture_lib", abs_lib);
  meta_put(m, "rss_source",
           "/proc/thread-self/smaps_rollup Rss minus capture "
           "library's own resident bytes");
  /* like every meta_put here, best effort: a key that does not fit is
   * left out */
  as_err_t ignored = {0};
  (void)import_meta_put_env_knobs(m, environ, &ignored);
}

/* ---- Traces ----------------------------------------------------------------
 */

/* One trace file: a process image's. */
typedef struct trace_rec_s trace_rec_t;
struct trace_rec_s {
  char     path[512];
  uint64_t pid;
  unsigned gen;           /* exec generation of the pid */
  bool     is_main;       /* the command's pid */
  bool     open;          /* its connection still streams */
  bool     stopped;       /* detached, interrupted or cut: truncated */
  bool     failed;        /* its stream was malformed */
  bool     next_untraced; /* its exec'd image said hello past the
                             trace limit: traced no further */
  capture_stats_t st;
  char            exec_image[240]; /* after EXEC: what /proc/PID/exe named
                                      when the connection closed, or "" */
};

typedef struct conn_s conn_t;
struct conn_s {
  int               fd;
  bool              hello;   /* HELLO seen */
  bool              flushed; /* FLUSHED after our CTL_FLUSH */
  capture_stream_t *s;       /* NULL: not traced (too many, or stopped) */
  int               trace;   /* index into run_t.traces, -1 if none */
};

typedef struct run_s run_t;
struct run_s {
  const capture_opts_t *o;
  capture_result_t     *res;
  capture_guard_t       guard;
  pid_t                 child;
  bool                  child_done;
  uint64_t              child_end_ns;
  int                   status;
  int                   lfd, sfd;
  conn_t               *conns;
  size_t                nconns, conn_cap;
  trace_rec_t           traces[MAX_TRACES];
  size_t                ntraces;
  int                   main_trace;  /* the command's latest image, or -1 */
  bool                  stopping;    /* recording stopped: detach all */
  int                   forward_sig; /* to send once flushed */
  uint64_t              forward_by_ns;
  as_err_t              stream_err; /* the first malformed stream */
};

static trace_format_t out_format(const run_t *r) {
  return trace_format_from_path(r->o->out_path);
}

/* Images of pid seen before this one. */
static unsigned generation(const run_t *r, uint64_t pid) {
  unsigned g = 0;
  for (size_t i = 0; i < r->ntraces; i++)
    g += r->traces[i].pid == pid;
  return g;
}

/* An image of pid said hello and is not traced: the image before it (the
 * latest trace of that pid) did exec, but into one that ran under the
 * recorder, not into a static or setuid binary as its missing stream
 * would otherwise say (collect). */
static void mark_successor_untraced(run_t *r, uint64_t pid) {
  for (size_t i = r->ntraces; i-- > 0;)
    if (r->traces[i].pid == pid) {
      r->traces[i].next_untraced = true;
      return;
    }
}

/* The new image of the command's pid takes -o; the one before moves to its
 * OUT.PID.N.EXT name (an open file keeps its descriptor). */
static void shift_main(run_t *r, trace_rec_t *t) {
  if (r->main_trace >= 0) {
    trace_rec_t *old = &r->traces[r->main_trace];
    char         moved[512];
    secondary_path(r->o->out_path, old->pid, old->gen, moved, sizeof moved);
    if (rename(old->path, moved) == 0)
      as_format_fits(old->path, sizeof old->path, "%s", moved);
    old->is_main = false;
  }
  as_format_fits(t->path, sizeof t->path, "%s", r->o->out_path);
  t->is_main = true;
  r->main_trace = (int)(t - r->traces);
}

/* The provenance of the image that said h: the capture's, but with the
 * allocator settings the image itself started with.  An exec'd image may
 * run another allocator than the command did (`env
 * LD_PRELOAD=libjemalloc.so.2 CMD`), and compare picks the model from
 * env.LD_PRELOAD. */
static void image_meta(const trace_meta_t *run, const capture_hello_t *h,
                       trace_meta_t *m) {
  memset(m, 0, sizeof *m);
  for (size_t i = 0; i < run->count; i++)
    if (strncmp(run->key[i], "env.", 4) != 0 &&
        strcmp(run->key[i], "malloc_env") != 0)
      (void)trace_meta_set(m, run->key[i], run->value[i], NULL);
  char   long_env[256] = "";
  size_t long_len = 0;
  for (const char *kv = h->env;
       kv < h->env + sizeof h->env && *kv != '\0' &&
       memchr(kv, '\0', sizeof h->env - (size_t)(kv - h->env)) != NULL;
       kv += strlen(kv) + 1) {
    const char *eq = strchr(kv, '=');
    if (eq == NULL)
      continue;
    /* As provenance() does: a name too long for a key goes to malloc_env. */
    if (eq - kv <= 24) {
      char key[40];
      as_format_fits(key, sizeof key, "env.%.*s", (int)(eq - kv), kv);
      meta_put(m, key, eq + 1);
    } else if (long_len + strlen(kv) + 1 < sizeof long_env) {
      long_len +=
          (size_t)snprintf(long_env + long_len, sizeof long_env - long_len,
                           "%s%s", long_len ? " " : "", kv);
    }
  }
  if (long_len > 0)
    meta_put(m, "malloc_env", long_env);
}

/* Opens the trace of the process that said h on c. */
static as_status_t open_trace(run_t *r, conn_t *c, const capture_hello_t *h,
                              as_err_t *err) {
  bool is_main = h->pid == (uint32_t)r->child;
  if (r->stopping || (!is_main && r->ntraces >= MAX_TRACES - 1) ||
      r->ntraces >= MAX_TRACES) {
    r->res->nskipped++;
    mark_successor_untraced(r, h->pid);
    return AS_OK; /* not traced: detached below */
  }
  trace_rec_t *t = &r->traces[r->ntraces++];
  memset(t, 0, sizeof *t);
  t->pid = h->pid;
  t->gen = generation(r, h->pid) - 1;
  t->open = true;
  if (is_main)
    shift_main(r, t);
  else
    secondary_path(r->o->out_path, t->pid, t->gen, t->path, sizeof t->path);

  trace_meta_t m;
  image_meta(&r->res->meta, h, &m);
  char v[64];
  as_format_fits(v, sizeof v, "%" PRIu32, h->pid);
  meta_put(&m, "pid", v);
  /* Its initial break, set at exec (the library says hello from its
   * constructor): compare starts the model's brk heap there (machine.h). */
  uint64_t brk = machine_start_brk((pid_t)h->pid);
  if (brk != 0) {
    as_format_fits(v, sizeof v, "%" PRIu64, brk);
    meta_put(&m, "start_brk", v);
  }
  /* Its clock's origin: where the allocator's millisecond ticks fell
   * (sim_kernel_clock_origin_ns). */
  as_format_fits(v, sizeof v, "%" PRIu64, h->monotonic_ns);
  meta_put(&m, "clock_origin_ns", v);
  if (h->mmap_top != 0) {
    as_format_fits(v, sizeof v, "%" PRIu64, h->mmap_top);
    meta_put(&m, "mmap_top", v);
  }
  if (h->python_hex != 0) {
    capture_python_version(h->python_hex, v, sizeof v);
    meta_put(&m, "python", v);
    /* "1" once the hook saw CPython's debug hooks (close_trace) */
    meta_put(&m, "python_debug_hooks", "0");
  }
  if (h->touch_threshold != 0) {
    as_format_fits(v, sizeof v, "%" PRIu64, h->touch_threshold);
    meta_put(&m, "touch_threshold", v);
  }
  if (h->stacks != 0) {
    as_format_fits(v, sizeof v, "%" PRIu32, h->stacks);
    meta_put(&m, "stacks", v);
  }
  if (h->mimalloc_version != 0) {
    capture_mimalloc_version(h->mimalloc_version, v, sizeof v);
    meta_put(&m, "mimalloc_version", v);
    /* Known at the end (the recorder reads it at exit): a placeholder of
     * the width close_trace patches in place; all zeros = unknown. */
    as_format_fits(v, sizeof v, "%0*d", HINT_DIGITS, 0);
    meta_put(&m, "mimalloc_hint_start", v);
  }
  if (h->tcmalloc_version != 0) {
    capture_tcmalloc_version(h->tcmalloc_version, v, sizeof v);
    meta_put(&m, "tcmalloc_version", v);
    /* The recorder saw the program's calls before main: the tcmalloc model
     * adds only the library's own (models/tcmalloc.c premain_traced). */
    if (h->before_main)
      meta_put(&m, "tcmalloc_premain", "traced");
  }
  if (h->jemalloc_version != 0) {
    capture_jemalloc_version(h->jemalloc_version, v, sizeof v);
    meta_put(&m, "jemalloc_version", v);
    trace_je_state_t je = {h->je_prng_seed, h->je_jitter_seed, h->je_res_ns,
                           h->je_coarse_origin_ns, h->je_coarse_init_ns};
    (void)trace_meta_put_jemalloc(&m, h->monotonic_ns, &je, NULL);
    /* The trace has libstdc++'s pool, which the model would add again. */
    if (h->before_main)
      meta_put(&m, "jemalloc_startup_malloc", "0");
  }
  if (h->exe[0] != '\0')
    meta_put(&m, "exe", h->exe);
  if (h->own_malloc[0] != '\0')
    meta_put(&m, "own_malloc", h->own_malloc);
  if (!is_main)
    meta_put(&m, "parent_trace", r->o->out_path);
  meta_put(&m, "truncated", "1"); /* "0" once the stream ends cleanly */

  FILE       *f;
  char        name[600];
  as_status_t rc = capture_out_open(&r->guard, t->path, out_format(r), &f, err);
  if (rc != AS_OK)
    return rc;
  as_format_fits(name, sizeof name, "%s", t->path);
  rc = capture_stream_open(h, f, name, out_format(r), &m, &c->s, err);
  if (rc == AS_OK)
    c->trace = (int)(t - r->traces);
  return rc;
}

/* The image process pid runs, as /proc names it; "" if it has exited. */
static void read_exe(uint64_t pid, char *buf, size_t len) {
  char    link[64];
  ssize_t n = -1;
  snprintf(link, sizeof link, "/proc/%" PRIu64 "/exe", pid);
  if (len > 0)
    n = readlink(link, buf, len - 1);
  if (len > 0)
    buf[n > 0 ? (size_t)n : 0] = '\0';
}

/* Ends c's stream: everything held is written, the trace closed, and its
 * header says whether it is complete. */
static void close_trace(run_t *r, conn_t *c) {
  if (c->s == NULL)
    return;
  trace_rec_t *t = &r->traces[c->trace];
  as_err_t     err = {0};
  if (capture_stream_close(c->s, &t->st, &err) != AS_OK && !t->stopped &&
      r->guard.tripped == CAPTURE_GUARD_OK)
    t->failed = true;
  c->s = NULL;
  t->open = false;
  if (t->st.said_exec) /* the close came with the exec: the new image */
    read_exe(t->pid, t->exec_image, sizeof t->exec_image);
  bool complete = t->st.said_bye && !t->stopped && !t->failed &&
                  r->guard.tripped == CAPTURE_GUARD_OK;
  if (complete)
    trace_patch_meta(t->path, "truncated", "0", NULL);
  if (t->st.python_debug_hooks)
    trace_patch_meta(t->path, "python_debug_hooks", "1", NULL);
  if (t->st.mimalloc_hint_start != 0 &&
      t->st.mimalloc_hint_start < UINT64_C(1) << 47) { /* fits the digits */
    char v[HINT_DIGITS + 1];
    snprintf(v, sizeof v, "%0*" PRIu64, HINT_DIGITS, t->st.mimalloc_hint_start);
    trace_patch_meta(t->path, "mimalloc_hint_start", v, NULL);
  }
}

/* ---- Connections
 * ------------------------------------------------------------- */

static void send_ctl(int fd, uint8_t type) {
  capture_msg_hdr_t h = {.type = type, .version = CAPTURE_WIRE_VERSION};
  (void)send(fd, &h, sizeof h, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Connections stay in accept order: the images of one pid say HELLO in
 * exec order, and the command's trace must be the last of them. */
static void conn_close(run_t *r, size_t i) {
  conn_t *c = &r->conns[i];
  close_trace(r, c);
  close(c->fd);
  memmove(&r->conns[i], &r->conns[i + 1],
          (r->nconns - i - 1) * sizeof r->conns[0]);
  r->nconns--;
}

/* Detaches connection i: the process runs on untraced. */
static void conn_detach(run_t *r, size_t i) {
  conn_t *c = &r->conns[i];
  send_ctl(c->fd, CAPTURE_CTL_DETACH);
  if (c->s != NULL)
    r->traces[c->trace].stopped = true;
  conn_close(r, i);
}

static void accept_all(run_t *r) {
  for (;;) {
    int fd = accept4(r->lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
      return;
    if (r->nconns == r->conn_cap) {
      size_t  cap = r->conn_cap ? 2 * r->conn_cap : 16;
      conn_t *v = realloc(r->conns, cap * sizeof *v);
      if (v == NULL) {
        close(fd);
        return;
      }
      r->conns = v;
      r->conn_cap = cap;
    }
    r->conns[r->nconns++] = (conn_t){.fd = fd, .trace = -1};
  }
}

/* Handles one message of connection c; false if c must be dropped. */
static bool on_message(run_t *r, conn_t *c, const uint8_t *msg, size_t len) {
  as_err_t err = {0};
  if (!c->hello) {
    capture_hello_t h;
    c->hello = true;
    if (capture_hello_decode(msg, len, "capture stream", &h, &err) != AS_OK ||
        open_trace(r, c, &h, &err) != AS_OK) {
      if (r->stream_err.code == AS_OK)
        r->stream_err = err;
      return false;
    }
    return c->s != NULL;
  }
  if (len >= 1 && msg[0] == CAPTURE_MSG_FLUSHED)
    c->flushed = true;
  if (c->s == NULL)
    return true;
  if (capture_stream_feed(c->s, msg, len, &err) != AS_OK) {
    r->traces[c->trace].failed = true;
    if (r->stream_err.code == AS_OK)
      r->stream_err = err;
    return false;
  }
  return true;
}

static unsigned open_traces(const run_t *r) {
  unsigned n = 0;
  for (size_t i = 0; i < r->nconns; i++)
    n += r->conns[i].s != NULL;
  return n;
}

/* Reads what connection i has; false if it closed (and was removed).  The
 * guard is asked after every message, so it stops with room to spare. */
static bool conn_read(run_t *r, size_t i, uint8_t *buf) {
  for (int k = 0; k < READS_PER_PASS; k++) {
    if (r->stopping ||
        capture_guard_poll(&r->guard, open_traces(r)) != CAPTURE_GUARD_OK)
      return true;
    conn_t *c = &r->conns[i];
    ssize_t n = recv(c->fd, buf, CAPTURE_MSG_MAX + 64, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
      return true;
    if (n <= 0) {
      conn_close(r, i);
      return false;
    }
    if (!on_message(r, c, buf, (size_t)n)) {
      conn_detach(r, i);
      return false;
    }
  }
  return true;
}

/* ---- Signals and stopping
 * ---------------------------------------------------- */

/* Recording stops (the guard): every process is detached and runs on. */
static void stop_all(run_t *r) {
  r->stopping = true;
  while (r->nconns > 0)
    conn_detach(r, r->nconns - 1);
}

static void on_signal(run_t *r, const struct signalfd_siginfo *si) {
  if (si->ssi_signo == SIGCHLD) {
    int   status;
    pid_t p;
    /* The command, or a process it left behind (orphans_alive). */
    while ((p = waitpid(-1, &status, WNOHANG)) > 0)
      if (p == r->child) {
        r->status = status;
        r->child_done = true;
        r->child_end_ns = now_ns();
      }
    return;
  }
  if (r->res->end != CAPTURE_END_SIGNAL) {
    r->res->end = CAPTURE_END_SIGNAL;
    r->res->signal = (int)si->ssi_signo;
  }
  /* A terminal's ^C reaches the command's process group itself (si_code
   * SI_KERNEL); a kill(1) of allocsim capture must be passed on, after the
   * recorders flushed what they hold. */
  if (si->ssi_code == SI_KERNEL || r->child_done)
    return;
  if (r->forward_sig != 0) {
    kill(r->child, (int)si->ssi_signo); /* asked twice: no more waiting */
    return;
  }
  for (size_t i = 0; i < r->nconns; i++) {
    r->conns[i].flushed = false;
    send_ctl(r->conns[i].fd, CAPTURE_CTL_FLUSH);
  }
  r->forward_sig = (int)si->ssi_signo;
  r->forward_by_ns = now_ns() + FLUSH_WAIT_NS;
}

/* Forwards a pending signal once every recorder flushed, or time is up. */
static void forward_when_flushed(run_t *r) {
  if (r->forward_sig <= 0)
    return;
  bool all = true;
  for (size_t i = 0; i < r->nconns; i++)
    all = all && (r->conns[i].flushed || !r->conns[i].hello);
  if (all || now_ns() >= r->forward_by_ns) {
    kill(r->child, r->forward_sig);
    r->forward_sig = -1; /* forwarded */
  }
}

/* ---- The loop
 * ----------------------------------------------------------------- */

static int poll_timeout_ms(const run_t *r) {
  uint64_t now = now_ns(), due = UINT64_MAX;
  if (r->forward_sig > 0)
    due = r->forward_by_ns;
  if (r->child_done && r->child_end_ns + LINGER_NS < due)
    due = r->child_end_ns + LINGER_NS;
  if (due == UINT64_MAX)
    return 1000;
  return due > now ? (int)((due - now + 999999) / 1000000) : 0;
}

/* Whether a process the command left behind still runs.  allocsim
 * capture is their subreaper (spawn), so an orphaned descendant becomes
 * its child.  A child forked just before the command exited may not have
 * connected yet: the loop then ended at once and the child ran untraced
 * without a word (1 run in 6 of sh -c '(sleep 2; ...) & echo p'). */
static bool orphans_alive(void) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  return waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0;
}

static as_status_t loop(run_t *r, as_err_t *err) {
  uint8_t       *buf = malloc(CAPTURE_MSG_MAX + 64);
  struct pollfd *p = NULL;
  size_t         pcap = 0;
  if (buf == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory");
  for (;;) {
    if (r->child_done && r->nconns == 0 && !orphans_alive())
      break;
    if (r->child_done && now_ns() >= r->child_end_ns + LINGER_NS) {
      if (r->res->end == CAPTURE_END_COMPLETE && r->nconns > 0) {
        r->res->end = CAPTURE_END_OUTLIVED;
        as_format_fits(r->res->message, sizeof r->res->message,
                       "%zu processes still running %.0f s after the command "
                       "exited run on untraced from here",
                       r->nconns, (double)LINGER_NS / 1e9);
      } else if (r->res->end == CAPTURE_END_COMPLETE) {
        r->res->end = CAPTURE_END_OUTLIVED;
        as_format_fits(r->res->message, sizeof r->res->message,
                       "processes the command left running %.0f s after it "
                       "exited never connected to the recorder (a static "
                       "binary, or one that closed its descriptors): they "
                       "ran untraced",
                       (double)LINGER_NS / 1e9);
      }
      stop_all(r);
      break;
    }
    if (pcap < r->nconns + 2) {
      pcap = r->nconns + 18;
      struct pollfd *np = realloc(p, pcap * sizeof *np);
      if (np == NULL) {
        free(p);
        free(buf);
        return as_err_set(err, AS_ENOMEM, "out of memory");
      }
      p = np;
    }
    p[0] = (struct pollfd){.fd = r->sfd, .events = POLLIN};
    p[1] = (struct pollfd){.fd = r->lfd, .events = POLLIN};
    size_t n = r->nconns;
    for (size_t i = 0; i < n; i++)
      p[2 + i] = (struct pollfd){.fd = r->conns[i].fd, .events = POLLIN};
    if (poll(p, 2 + n, poll_timeout_ms(r)) < 0 && errno != EINTR)
      break;
    struct signalfd_siginfo si;
    if ((p[0].revents & POLLIN) &&
        read(r->sfd, &si, sizeof si) == (ssize_t)sizeof si)
      on_signal(r, &si);
    if (p[1].revents & POLLIN)
      accept_all(r);
    /* In accept order; a closed connection shifts the rest down, and the
     * poll entries with them. */
    for (size_t i = 0, j = 0; j < n && i < r->nconns; j++) {
      if (r->conns[i].fd != p[2 + j].fd)
        continue; /* removed by stop_all */
      if (!(p[2 + j].revents & (POLLIN | POLLHUP | POLLERR)) ||
          conn_read(r, i, buf))
        i++;
    }
    if (!r->stopping &&
        capture_guard_poll(&r->guard, open_traces(r)) != CAPTURE_GUARD_OK)
      stop_all(r);
    forward_when_flushed(r);
  }
  free(p);
  free(buf);
  return AS_OK;
}

/* ---- Entry points
 * ------------------------------------------------------------- */

const char *capture_end_name(capture_end_t e) {
  static const char *const names[] = {
      "complete",        "died",     "signal", "disk-guard",
      "max-trace-bytes", "outlived", "error"};
  return (unsigned)e < sizeof names / sizeof names[0] ? names[e] : "?";
}

/* When process pid started: with the pid, an owner file names one process
 * (pids are reused). */
static uint64_t start_time_of(pid_t pid) {
  return machine_proc_stat_field(pid, 22); /* starttime */
}

void capture_tmpdir_claim(const char *dir) {
  /* Written aside and renamed: an owner file is never seen empty (another
   * capture's cleanup took an empty one for a dead capture's, and removed
   * this directory under its socket). */
  char owner[PATH_MAX], part[PATH_MAX];
  as_format_fits(owner, sizeof owner, "%s/owner", dir);
  as_format_fits(part, sizeof part, "%s/owner.part", dir);
  FILE *f = fopen(part, "w");
  if (f != NULL) {
    fprintf(f, "%d %" PRIu64 "\n", (int)getpid(), start_time_of(getpid()));
    if (fclose(f) == 0)
      rename(part, owner);
    else
      unlink(part);
  }
}

static as_status_t make_dir(char *dir, size_t len, as_err_t *err) {
  const char *tmp = getenv("TMPDIR");
  as_format_fits(dir, len, "%s/allocsim-capture-XXXXXX",
                 tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(dir) == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot create: %s", dir,
                      strerror(errno));
  capture_tmpdir_claim(dir);
  return AS_OK;
}

/* Whether name is a directory capture_tmpdir_claim marks: a capture's or
 * a report's plot workspace. */
static bool claimed_name(const char *name) {
  return strncmp(name, "allocsim-capture-", 17) == 0 ||
         strncmp(name, "allocsim-report-", 16) == 0;
}

as_status_t capture_cleanup(unsigned *removed, as_err_t *err) {
  const char *tmp = getenv("TMPDIR");
  const char *base = tmp && *tmp ? tmp : "/tmp";
  *removed = 0;
  DIR *d = opendir(base);
  if (d == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot read: %s", base,
                      strerror(errno));
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!claimed_name(e->d_name))
      continue;
    char dir[PATH_MAX], owner[PATH_MAX];
    as_format_fits(dir, sizeof dir, "%s/%s", base, e->d_name);
    as_format_fits(owner, sizeof owner, "%s/owner", dir);
    FILE       *f = fopen(owner, "r");
    int         pid = 0;
    uint64_t    start = 0;
    struct stat sb;
    if (f != NULL) {
      if (fscanf(f, "%d %" SCNu64, &pid, &start) != 2)
        pid = 0;
      fclose(f);
    }
    if (pid == 0 && (stat(dir, &sb) != 0 || time(NULL) - sb.st_mtime < 60))
      continue; /* being created, or not ours to judge yet */
    if (pid > 0 && start_time_of(pid) == start && start != 0)
      continue; /* its capture is still running */
    rm_tree(dir);
    (*removed)++;
  }
  closedir(d);
  return AS_OK;
}

static as_status_t listen_on(const char *dir, char *path, size_t len, int *fd,
                             as_err_t *err) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (!as_format_fits(path, len, "%s/sock", dir) ||
      strlen(path) >= sizeof a.sun_path)
    return as_err_set(err, AS_EINVAL,
                      "%s: socket path too long (set TMPDIR to a shorter "
                      "directory)",
                      path);
  memcpy(a.sun_path, path, strlen(path) + 1);
  *fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (*fd < 0 || bind(*fd, (struct sockaddr *)&a, sizeof a) != 0 ||
      listen(*fd, 128) != 0)
    return as_err_set(err, AS_EIO, "%s: cannot listen: %s", path,
                      strerror(errno));
  return AS_OK;
}

/* The command's file: cmd itself if it names a path, else the first
 * executable of that name on PATH; false if none. */
static bool command_path(const char *cmd, char *buf, size_t len) {
  if (strchr(cmd, '/') != NULL)
    return as_format_fits(buf, len, "%s", cmd);
  const char *path = getenv("PATH");
  for (const char *p = path ? path : "/usr/bin:/bin"; *p != '\0';) {
    size_t n = strcspn(p, ":");
    if (as_format_fits(buf, len, "%.*s/%s", (int)n, n ? p : ".", cmd) &&
        access(buf, X_OK) == 0)
      return true;
    p += n + (p[n] == ':');
  }
  return false;
}

/* Why a command sent no capture stream, from its file: no ELF (a script,
 * whose interpreter must be dynamic), no PT_INTERP (static), a musl
 * loader (which cannot load the recorder: it is built against glibc), or
 * setuid; "" when nothing in the file explains it. */
static void why_no_stream(const char *cmd, char *why, size_t len) {
  char        path[PATH_MAX];
  struct stat sb;
  Elf64_Ehdr  eh;
  why[0] = '\0';
  int fd = command_path(cmd, path, sizeof path) ? open(path, O_RDONLY) : -1;
  if (fd < 0)
    return;
  if (fstat(fd, &sb) == 0 && (sb.st_mode & (S_ISUID | S_ISGID)))
    as_format_fits(why, len,
                   "it is setuid or setgid, and the loader "
                   "ignores LD_PRELOAD for it");
  else if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh ||
           memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    as_format_fits(why, len,
                   "it is not an ELF binary: a script's "
                   "interpreter must be a dynamic glibc program");
  else if (eh.e_ident[EI_CLASS] == ELFCLASS64) {
    char interp[PATH_MAX] = "";
    for (unsigned i = 0; i < eh.e_phnum && i < 256; i++) {
      Elf64_Phdr ph;
      if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * eh.e_phentsize)) !=
              (ssize_t)sizeof ph ||
          ph.p_type != PT_INTERP)
        continue;
      size_t n =
          ph.p_filesz < sizeof interp - 1 ? ph.p_filesz : sizeof interp - 1;
      ssize_t got = pread(fd, interp, n, (off_t)ph.p_offset);
      interp[got > 0 ? (size_t)got : 0] = '\0';
    }
    if (interp[0] == '\0')
      as_format_fits(why, len,
                     "it is statically linked, and a static "
                     "binary ignores LD_PRELOAD");
    else if (strstr(interp, "musl") != NULL)
      as_format_fits(why, len,
                     "it is linked against musl (loader %s), which cannot "
                     "load the recorder, a glibc library: capture a glibc "
                     "build of it and compare that with --model musl",
                     interp);
  }
  close(fd);
}

/* Starts the command: it dies with this process (PR_SET_PDEATHSIG), and a
 * failed exec comes back as errno through a close-on-exec pipe. */
static as_status_t spawn(run_t *r, char *const *envp, const sigset_t *mask,
                         as_err_t *err) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0)
    return as_err_set(err, AS_EIO, "pipe: %s", strerror(errno));
  pid_t parent = getpid();
  /* Processes the command leaves behind become ours (orphans_alive); a
   * kernel without it (before 3.4) leaves them to init, as before. */
  (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
  pid_t pid = fork();
  if (pid < 0)
    return as_err_set(err, AS_EIO, "fork: %s", strerror(errno));
  if (pid == 0) {
    close(pipefd[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
      _exit(127); /* the parent died before prctl */
    sigprocmask(SIG_SETMASK, mask, NULL);
    execvpe(r->o->argv[0], r->o->argv, envp);
    int e = errno;
    (void)write(pipefd[1], &e, sizeof e);
    _exit(127);
  }
  close(pipefd[1]);
  int     e = 0;
  ssize_t n;
  while ((n = read(pipefd[0], &e, sizeof e)) < 0 && errno == EINTR) {
  }
  close(pipefd[0]);
  r->child = pid;
  if (n == (ssize_t)sizeof e) {
    waitpid(pid, NULL, 0);
    return as_err_set(err, AS_EINVAL, "%s: cannot run: %s", r->o->argv[0],
                      strerror(e));
  }
  return AS_OK;
}

/* Whether the image trace t exec'd said hello: a static or setuid binary
 * ignores LD_PRELOAD, so it runs untraced, and without this the summary
 * said nothing of it. */
static bool exec_was_traced(const run_t *r, const trace_rec_t *t) {
  for (size_t i = 0; i < r->ntraces; i++)
    if (r->traces[i].pid == t->pid && r->traces[i].gen == t->gen + 1)
      return true;
  return false;
}

/* Fills res from the traces once the loop is over. */
static void collect(run_t *r) {
  capture_result_t *res = r->res;
  for (size_t i = 0; i < r->ntraces; i++) {
    trace_rec_t *t = &r->traces[i];
    if (t->st.said_exec && !t->stopped && !t->next_untraced &&
        !exec_was_traced(r, t))
      as_format_fits(t->st.exec_untraced, sizeof t->st.exec_untraced, "%s",
                     t->exec_image[0] ? t->exec_image
                                      : "an image (gone before its name was "
                                        "read)");
    bool trunc = !t->st.said_bye || t->stopped || t->failed ||
                 r->guard.tripped != CAPTURE_GUARD_OK ||
                 res->end == CAPTURE_END_SIGNAL;
    if (t->failed && res->end == CAPTURE_END_COMPLETE)
      res->end = CAPTURE_END_ERROR;
    else if (!t->st.said_bye && res->end == CAPTURE_END_COMPLETE) {
      res->end = CAPTURE_END_DIED;
      as_format_fits(res->message, sizeof res->message,
                     "pid %d's connection closed without its goodbye (killed "
                     "by a signal, or it closed the recorder's descriptor "
                     "by a raw system call)",
                     (int)t->pid);
    }
    if ((int)i == r->main_trace) {
      res->have_main = true;
      res->main = t->st;
      res->truncated = trunc;
    } else if (res->nextra < CAPTURE_MAX_EXTRA) {
      as_format_fits(res->extra_path[res->nextra], sizeof res->extra_path[0],
                     "%s", t->path);
      res->extra[res->nextra++] = t->st;
    }
  }
  if (r->guard.tripped == CAPTURE_GUARD_DISK)
    res->end = CAPTURE_END_DISK;
  else if (r->guard.tripped == CAPTURE_GUARD_LIMIT)
    res->end = CAPTURE_END_LIMIT;
  else if (r->guard.tripped == CAPTURE_GUARD_IO)
    res->end = CAPTURE_END_ERROR;
  if (r->guard.tripped != CAPTURE_GUARD_OK)
    as_format_fits(res->message, sizeof res->message, "recording stopped: %s",
                   r->guard.detail);
  else if (r->stream_err.code != AS_OK)
    as_format_fits(res->message, sizeof res->message, "%s", r->stream_err.msg);
  res->trace_bytes = r->guard.written;
  res->exit_code = WIFEXITED(r->status)     ? WEXITSTATUS(r->status)
                   : WIFSIGNALED(r->status) ? 128 + WTERMSIG(r->status)
                                            : 1;
  res->exit_signal = WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0;
}

as_status_t capture_run(const capture_opts_t *o, capture_result_t *res,
                        as_err_t *err) {
  memset(res, 0, sizeof *res);
  if (o->argv == NULL || o->argv[0] == NULL)
    return as_err_set(err, AS_EUSAGE, "no command to capture");
  if (strcmp(o->out_path, "-") == 0)
    return as_err_set(err, AS_EUSAGE,
                      "-o -: a capture's trace must go to a file (the "
                      "command's own output goes to stdout)");
  char        lib[PATH_MAX], abs_lib[PATH_MAX], pydir[PATH_MAX];
  as_status_t rc;
  if (o->lib_path != NULL)
    as_format_fits(lib, sizeof lib, "%s", o->lib_path);
  else if ((rc = capture_find_lib(lib, sizeof lib, err)) != AS_OK)
    return rc;
  if (!readable(lib))
    return as_err_set(err, AS_EINVAL, "%s: capture library not readable", lib);
  if (realpath(lib, abs_lib) == NULL)
    as_format_fits(abs_lib, sizeof abs_lib, "%s", lib);
  python_dir(abs_lib, pydir, sizeof pydir);

  unsigned stale;
  (void)capture_cleanup(&stale, NULL);
  run_t *r = calloc(1, sizeof *r);
  if (r == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory");
  r->o = o;
  r->res = res;
  r->lfd = r->sfd = -1;
  r->main_trace = -1;
  capture_guard_init(&r->guard, o->out_path, o->max_trace_bytes,
                     o->min_free_bytes ? o->min_free_bytes
                                       : CAPTURE_MIN_FREE_DEFAULT);
  char     dir[256], sock[300];
  env_t    env = {0};
  sigset_t mask, old;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigprocmask(SIG_BLOCK, &mask, &old);
  provenance(o, abs_lib, &res->meta);
  if ((rc = make_dir(dir, sizeof dir, err)) != AS_OK)
    goto restore;
  uint64_t start_ns;
  if ((rc = listen_on(dir, sock, sizeof sock, &r->lfd, err)) != AS_OK ||
      (rc = build_env(&env, abs_lib, pydir, sock, o, err)) != AS_OK)
    goto out;
  if ((rc = capture_guard_check_start(&r->guard, err)) != AS_OK)
    goto out;
  r->sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (r->sfd < 0) {
    rc = as_err_set(err, AS_EIO, "signalfd: %s", strerror(errno));
    goto out;
  }
  start_ns = now_ns();
  if ((rc = spawn(r, env.envp, &old, err)) != AS_OK)
    goto out;
  rc = loop(r, err);
  if (!r->child_done) {
    /* The loop failed: the command must not outlive the capture. */
    kill(r->child, SIGKILL);
    waitpid(r->child, &r->status, 0);
  }
  /* The command's time ends when it exited, not when the processes it
   * left running ended or were detached (up to LINGER_NS later). */
  uint64_t end_ns = r->child_done ? r->child_end_ns : now_ns();
  res->wall_s = (double)(end_ns - start_ns) / 1e9;
  stop_all(r);
  collect(r);
  if (rc == AS_OK && !res->have_main) {
    char why[PATH_MAX + 160], status[48] = "";
    why_no_stream(o->argv[0], why, sizeof why);
    if (WIFEXITED(r->status))
      snprintf(status, sizeof status, "; it exited with status %d",
               WEXITSTATUS(r->status));
    else if (WIFSIGNALED(r->status))
      snprintf(status, sizeof status, "; it was killed by signal %d",
               WTERMSIG(r->status));
    rc = as_err_set(err, AS_EINVAL,
                    "%s: the command sent no capture stream: %s%s", o->argv[0],
                    why[0] ? why
                           : "a static or setuid binary ignores LD_PRELOAD, "
                             "and a script's interpreter must be dynamic",
                    status);
  }
out:
  if (r->lfd >= 0)
    close(r->lfd);
  if (r->sfd >= 0)
    close(r->sfd);
  rm_tree(dir);
restore : {
  /* Signals that arrived while blocked are not to be replayed on us. */
  struct timespec zero = {0, 0};
  while (sigtimedwait(&mask, NULL, &zero) > 0) {
  }
}
  sigprocmask(SIG_SETMASK, &old, NULL);
  free(env.envp);
  free(r->conns);
  free(r);
  return rc;
}
