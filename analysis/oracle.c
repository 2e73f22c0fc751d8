/* analysis/oracle.c -- replaying a trace on a real allocator in a child
 * process and writing what it measured as a measured run (oracle.h).
 *
 * The trace is read three times, each through walk_event so that every
 * pass makes the same decisions: a plan (ids, threads, marks, and every bad
 * event refused before anything runs), the feed (a thread writing ops to
 * the child's pipe while this thread samples RSS), and the output (the
 * trace again, on the clock the child timed its calls by, with the
 * measurements as rss events).
 *
 * Sections: allocators and paths, sources, walking, the child, the output,
 * entry point.
 */
#include "oracle.h"

#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../models/model.h"
#include "../sim/grow.h"
#include "../sim/host.h"
#include "../sim/idtable.h"
#include "../sim/units.h"
#include "../traces/addr_ids.h"
#include "../traces/capture_stream.h"
#include "../traces/helper_path.h"
#include "../traces/import_util.h"
#include "../traces/machine.h"
#include "../traces/trace_io.h"
#include "../traces/workload.h"

extern char **environ;

/* ---- Allocators and paths ----------------------------------------------- */

bool oracle_allocator_parse(const char *s, oracle_allocator_t *out) {
  for (unsigned a = 0; a < ORACLE_ALLOCATOR_COUNT; a++)
    if (strcmp(s, oracle_allocator_name((oracle_allocator_t)a)) == 0) {
      *out = (oracle_allocator_t)a;
      return true;
    }
  return false;
}

/* Debian 12's files: libjemalloc2 5.3.0, libmimalloc2.0 2.0.9,
 * libtcmalloc-minimal4 2.10 (gperftools). */
void oracle_default_lib(oracle_allocator_t a, char *buf, size_t len) {
  static const char *const file[ORACLE_ALLOCATOR_COUNT] = {
      NULL, "libjemalloc.so.2", "libmimalloc.so.2", "libtcmalloc_minimal.so.4",
      NULL};
  if ((unsigned)a >= ORACLE_ALLOCATOR_COUNT || file[a] == NULL) {
    buf[0] = '\0';
    return;
  }
#ifdef ALLOCSIM_MULTIARCH
  as_format_fits(buf, len, "/usr/lib/%s/%s", ALLOCSIM_MULTIARCH, file[a]);
  if (access(buf, R_OK) == 0)
    return;
#endif
  as_format_fits(buf, len, "/usr/lib/%s", file[a]);
  if (access(buf, R_OK) == 0)
    return;
#ifdef ALLOCSIM_MULTIARCH
  /* Report the Debian path, the one a package would install. */
  as_format_fits(buf, len, "/usr/lib/%s/%s", ALLOCSIM_MULTIARCH, file[a]);
#endif
}

as_status_t oracle_find_replayer(oracle_allocator_t a, char *buf, size_t len,
                                 as_err_t *err) {
  static const char *const rel[] = {
      "", "/../lib/allocsim", "/../lib64/allocsim", "/../traces/oracle", NULL};
  bool        musl = a == ORACLE_MUSL;
  const char *file = musl ? "allocsim-replayer-musl" : "allocsim-replayer";
  char        built[PATH_MAX] = "";
#ifdef ALLOCSIM_REPLAYER_BUILD_DIR
  as_format_fits(built, sizeof built, "%s/%s", ALLOCSIM_REPLAYER_BUILD_DIR,
                 file);
#endif
  as_status_t rc =
      helper_path_find(musl ? "ALLOCSIM_REPLAYER_MUSL" : "ALLOCSIM_REPLAYER",
                       file, rel, built[0] ? built : NULL, X_OK, buf, len, err);
#ifndef ALLOCSIM_HAVE_MUSL_GCC
  if (rc != AS_OK && musl && getenv("ALLOCSIM_REPLAYER_MUSL") == NULL)
    return as_err_set(err, AS_EINVAL,
                      "musl: no %s (musl-gcc was not found when allocsim was "
                      "built; install musl-tools and rebuild, or set "
                      "ALLOCSIM_REPLAYER_MUSL)",
                      file);
#endif
  return rc;
}

/* ---- Sources ------------------------------------------------------------ */

/* The trace is read three times (plan, feed, output): a pipe's is a copy
 * (trace_input_open). */
static as_status_t open_source(const trace_input_t *trace, const char *workload,
                               trace_source_t **src, as_err_t *err) {
  if (workload != NULL)
    return workload_open_line(workload, src, err);
  return trace_input_source(trace, src, err);
}

/* ---- Walking ---------------------------------------------------------------
 * One pass over the trace: what each event becomes for the child.  Every
 * pass walks with a fresh walk_t and so decides alike. */

typedef struct walk_s walk_t;
struct walk_s {
  const char           *name;
  const trace_source_t *src; /* where the events come from, for messages */
  oracle_allocator_t    allocator;
  bool                  lenient;
  double                idle_scale;
  uint64_t              touch_threshold; /* 0: every allocation written */
  unsigned              touch_lg_page;   /* a capture's page size, log2:
                                            its touches name pages of the
                                            span; 0: bytes */
  sim_idtable_t tab;                     /* of live */
  uint64_t     *live;                    /* [id]: size + 1, 0 = dead */
  uint64_t      table_budget;            /* bytes; 0: unbounded */
  uint64_t      events, ops, skipped, marks;
  uint64_t      ids; /* highest id used + 1 */
};

/* An event the replay cannot run: an error in replay's words (its line or
 * byte offset, its 0-based event number, the object), or skipped with
 * lenient. */
static as_status_t walk_bad(walk_t *w, const trace_event_t *ev,
                            const char *what, bool *send, as_err_t *err) {
  if (w->lenient) {
    w->skipped++;
    *send = false;
    return AS_OK;
  }
  char at[48] = "";
  trace_source_where(w->src, at + 2, sizeof at - 2);
  if (at[2] != '\0')
    at[0] = ':', at[1] = ' ';
  else
    at[0] = '\0';
  return as_err_set(err, AS_EFORMAT,
                    "%s%s: event %" PRIu64 " (t=%" PRIu64 " ns): %s of "
                    "object %" PRIu64 " %s (--lenient skips such events)",
                    w->name, at, w->events - 1, ev->t_ns, trace_op_name(ev->op),
                    ev->id, what);
}

/* Makes ev's id addressable.  The replayer's object table is 8 bytes per
 * id up to the largest, made resident before the first call (to be in the
 * baseline): an id far past the others is refused while that table would
 * take more than half the memory available, not found out by the child
 * (an id of 4e8 took 3.2 GB and 95 s). */
static as_status_t live_slot(walk_t *w, const trace_event_t *ev,
                             as_err_t *err) {
  if (ev->id < w->tab.len)
    return AS_OK;
  uint64_t table = (ev->id + 1) * sizeof(void *);
  if (ev->id < SIM_IDTABLE_MAX_IDS && w->table_budget != 0 &&
      table > w->table_budget) {
    char        a[32], b[32];
    as_status_t rc =
        as_err_set(err, AS_ENOMEM,
                   "object id %" PRIu64 " needs an object table of %s in the "
                   "replayer (8 bytes per id), more than half the memory "
                   "available (%s); ids should be dense and recycled",
                   ev->id, sim_host_format_bytes(table, a, sizeof a),
                   sim_host_format_bytes(2 * w->table_budget, b, sizeof b));
    return trace_error_at(w->src, ev, w->events - 1, rc, err);
  }
  as_status_t rc = sim_idtable_reach_ids(&w->tab, ev->id, err);
  if (rc != AS_OK)
    return trace_error_at(w->src, ev, w->events - 1, rc, err);
  w->live = sim_idtable_base(&w->tab);
  return AS_OK;
}

static void set_op(oracle_op_t *op, oracle_op_code_t code,
                   const trace_event_t *ev, uint64_t size, uint64_t aux) {
  memset(op, 0, sizeof *op);
  op->code = (uint8_t)code;
  op->thread = ev->thread;
  op->id = ev->id;
  op->size = size;
  op->aux = aux;
  op->t_ns = ev->t_ns;
}

/* An allocation, realloc, free or touch: checked against the live ids. */
static as_status_t walk_object(walk_t *w, const trace_event_t *ev,
                               oracle_op_t *op, bool *send, as_err_t *err) {
  as_status_t rc = live_slot(w, ev, err);
  if (rc != AS_OK)
    return rc;
  uint64_t *slot = &w->live[ev->id];
  bool      live = *slot != 0;
  uint64_t  size = live ? *slot - 1 : 0;
  bool unwritten = w->touch_threshold != 0 && ev->size >= w->touch_threshold;
  switch ((trace_op_t)ev->op) {
  case TRACE_FREE:
    if (!live)
      return walk_bad(w, ev, "that is not live", send, err);
    set_op(op, ORACLE_OP_FREE, ev, 0, 0);
    *slot = 0;
    break;
  case TRACE_REALLOC:
    if (!live)
      return walk_bad(w, ev, "that is not live", send, err);
    if (ev->size > PTRDIFF_MAX)
      return walk_bad(w, ev,
                      "to more than PTRDIFF_MAX bytes, which no "
                      "allocator returns",
                      send, err);
    set_op(op, ORACLE_OP_REALLOC, ev, ev->size, size);
    *slot = ev->size + 1;
    break;
  case TRACE_TOUCH:
    if (!live || ev->offset > size || ev->size > size - ev->offset)
      return walk_bad(w, ev, "outside a live object's bytes", send, err);
    set_op(op, ORACLE_OP_TOUCH, ev, ev->size, ev->offset);
    if (w->touch_lg_page != 0) {
      op->flags |= ORACLE_F_SPAN;
      op->lg_page = (uint16_t)w->touch_lg_page;
      op->object_size = size;
    }
    unwritten = false;
    break;
  default:
    if (live)
      return walk_bad(w, ev, "that is already live", send, err);
    /* The allocators fail such requests (glibc 2.36 malloc/malloc.c
     * checked_request2size: req > PTRDIFF_MAX fails); the size + 1 kept per
     * live id would also wrap for SIZE_MAX. */
    if (ev->size > PTRDIFF_MAX)
      return walk_bad(w, ev,
                      "of more than PTRDIFF_MAX bytes, which no "
                      "allocator returns",
                      send, err);
    set_op(op,
           ev->op == TRACE_CALLOC     ? ORACLE_OP_CALLOC
           : ev->op == TRACE_MEMALIGN ? ORACLE_OP_MEMALIGN
                                      : ORACLE_OP_MALLOC,
           ev, ev->size, ev->op == TRACE_MEMALIGN ? ev->align : 0);
    *slot = ev->size + 1;
  }
  if (unwritten && ev->op != TRACE_FREE)
    op->flags |= ORACLE_F_UNWRITTEN;
  if (ev->id + 1 > w->ids)
    w->ids = ev->id + 1;
  return AS_OK;
}

/* What ev becomes: *send true and *op filled, or *send false (an rss
 * event, which the oracle measures anew, or one skipped by lenient). */
static as_status_t walk_event(walk_t *w, const trace_event_t *ev,
                              oracle_op_t *op, bool *send, as_err_t *err) {
  w->events++;
  *send = true;
  as_status_t rc = AS_OK;
  switch ((trace_op_t)ev->op) {
  case TRACE_RSS:
  case TRACE_MODULE: /* call-site definitions: nothing to replay */
  case TRACE_SITE:
    *send = false;
    return AS_OK;
  case TRACE_MARK:
    set_op(op, ORACLE_OP_MARK, ev, 0, 0);
    op->id = w->marks++;
    break;
  case TRACE_IDLE: {
    /* A sleep of 2^64 ns or more (an idle near the clock's end times
     * --idle-scale) has no uint64_t; converting it would be undefined. */
    double sleep_ns = (double)ev->size * w->idle_scale;
    if (sleep_ns >= 18446744073709551616.0) {
      rc = as_err_set(err, AS_EFORMAT,
                      "an idle of %" PRIu64
                      " ns times --idle-scale %g does not fit a 64-bit clock",
                      ev->size, w->idle_scale);
      return trace_error_at(w->src, ev, w->events - 1, rc, err);
    }
    set_op(op, ORACLE_OP_IDLE, ev, (uint64_t)sleep_ns, ev->size);
    break;
  }
  case TRACE_TRIM:
    set_op(op, ORACLE_OP_TRIM, ev, ev->size, 0);
    break;
  case TRACE_PURGE:
    set_op(op, ORACLE_OP_PURGE, ev, ev->size,
           ev->id == TRACE_ALL_ARENAS ? ORACLE_ALL_ARENAS : ev->id);
    op->id = 0;
    break;
  case TRACE_OPTION:
    if (trace_option_is_placement(ev->label) ||
        trace_option_is_seed(ev->label)) {
      *send = false; /* where a mapping went, what a seed was: the real
                        allocator decides */
      return AS_OK;
    }
    if (oracle_option_find(w->allocator, ev->label) == NULL) {
      char what[160];
      as_format_fits(what, sizeof what, "'%s': %s has no call for it",
                     ev->label, oracle_allocator_name(w->allocator));
      return walk_bad(w, ev, what, send, err);
    }
    set_op(op, ORACLE_OP_OPTION, ev, ev->size, 0);
    break;
  case TRACE_THREAD_START:
  case TRACE_THREAD_EXIT:
    set_op(op,
           ev->op == TRACE_THREAD_START ? ORACLE_OP_THREAD_START
                                        : ORACLE_OP_THREAD_EXIT,
           ev, 0, 0);
    op->id = 0;
    break;
  default:
    rc = walk_object(w, ev, op, send, err);
  }
  if (rc == AS_OK && *send)
    w->ops++;
  return rc;
}

static as_status_t walk_init(walk_t *w, const trace_source_t *src,
                             const oracle_opts_t *o, as_err_t *err) {
  memset(w, 0, sizeof *w);
  w->name = src->name;
  w->src = src;
  w->allocator = o->allocator;
  w->lenient = o->lenient;
  w->idle_scale = o->idle_scale;
  const char *tt = trace_meta_get(&src->meta, "touch_threshold");
  if (tt != NULL && !as_parse_bytes(tt, &w->touch_threshold))
    return as_err_set(err, AS_EFORMAT,
                      "%s: provenance touch_threshold: expected bytes, got "
                      "'%s'",
                      src->name, tt);
  uint64_t    page;
  as_status_t rc = trace_meta_touch_page(&src->meta, src->name, &page, err);
  w->touch_lg_page = page != 0 ? (unsigned)__builtin_ctzll(page) : 0;
  w->table_budget = sim_host_available_bytes() / 2;
  if (rc == AS_OK && sim_idtable_init(&w->tab, sizeof *w->live) != AS_OK)
    rc = as_err_set(err, AS_ENOMEM, "%s: no address space for its object ids",
                    src->name);
  return rc;
}

/* ---- The plan: pass 1 ---------------------------------------------------
 * Everything the child needs to know first (ids for its table), every bad
 * event refused, the marks' labels, and the threads alive at once. */

typedef struct plan_s plan_t;
struct plan_s {
  uint64_t       ids, ops, events;
  size_t         marks_cap;
  addr_ids_map_t alive;   /* trace thread + 1 -> 1 while it runs */
  uint64_t       threads; /* distinct trace threads seen */
  addr_ids_map_t seen;
};

static as_status_t plan_mark(plan_t *p, oracle_run_t *r,
                             const trace_event_t *ev, as_err_t *err) {
  oracle_mark_t *v =
      as_grow(r->marks, &p->marks_cap, r->nmarks + 1, sizeof *v, 16);
  if (v == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory for marks");
  r->marks = v;
  oracle_mark_t *m = &v[r->nmarks++];
  memset(m, 0, sizeof *m);
  as_format_fits(m->label, sizeof m->label, "%s", ev->label ? ev->label : "");
  m->t_ns = ev->t_ns;
  return AS_OK;
}

static as_status_t plan_thread(plan_t *p, const trace_source_t *src,
                               const trace_event_t *ev, as_err_t *err) {
  uint64_t key = (uint64_t)ev->thread + 1, v;
  if (!addr_ids_map_get(&p->seen, key, &v)) {
    if (!addr_ids_map_put(&p->seen, key, 1))
      return as_err_set(err, AS_ENOMEM, "out of memory for threads");
    p->threads++;
  }
  if (ev->op == TRACE_THREAD_EXIT && ev->thread != 0) {
    addr_ids_map_del(&p->alive, key, NULL);
    return AS_OK;
  }
  if (addr_ids_map_get(&p->alive, key, &v))
    return AS_OK;
  if (!addr_ids_map_put(&p->alive, key, 1))
    return as_err_set(err, AS_ENOMEM, "out of memory for threads");
  if (addr_ids_map_count(&p->alive) > ORACLE_MAX_THREADS)
    return as_err_set(err, AS_EFORMAT,
                      "%s: event %" PRIu64 ": more than %d threads alive at "
                      "once, the most the replayer runs",
                      src->name, p->events - 1, ORACLE_MAX_THREADS);
  return AS_OK;
}

static as_status_t plan_trace(const trace_input_t *trace, const char *workload,
                              const oracle_opts_t *o, plan_t *p,
                              oracle_run_t *r, as_err_t *err) {
  trace_source_t *src;
  as_status_t     rc = open_source(trace, workload, &src, err);
  if (rc != AS_OK)
    return rc;
  walk_t w;
  if ((rc = walk_init(&w, src, o, err)) != AS_OK) {
    trace_source_close(src);
    return rc;
  }
  trace_event_t ev;
  oracle_op_t   op;
  bool          send;
  while ((rc = trace_source_next(src, &ev, err)) == AS_OK) {
    if ((rc = walk_event(&w, &ev, &op, &send, err)) != AS_OK)
      break;
    p->events = w.events;
    if (!send)
      continue;
    if (ev.op == TRACE_MARK && (rc = plan_mark(p, r, &ev, err)) != AS_OK)
      break;
    if ((rc = plan_thread(p, src, &ev, err)) != AS_OK)
      break;
    r->final_t_ns = ev.t_ns;
  }
  if (rc == AS_DONE)
    rc = AS_OK;
  p->ids = w.ids;
  p->ops = w.ops;
  r->events = w.events;
  r->ops = w.ops;
  r->skipped = w.skipped;
  r->threads = p->threads;
  sim_idtable_free(&w.tab);
  trace_source_close(src);
  return rc;
}

/* ---- The child ----------------------------------------------------------- */

typedef struct child_s child_t;
struct child_s {
  pid_t pid;
  int   ops_fd;     /* we write ops here */
  int   results_fd; /* and read results here */
  int   times_fd;   /* the op times it writes (protocol.h ORACLE_FD_TIMES) */
};

/* fd moved above the fds the child gets (1, 3, 4), so that none of
 * the spawn's dup2s overwrites another's source; -1 stays -1. */
static int high_fd(int fd) {
  if (fd < 0)
    return -1;
  int h = fcntl(fd, F_DUPFD_CLOEXEC, 10);
  close(fd);
  return h;
}

static int high_pipe(int fds[2]) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0)
    return -1;
  fds[0] = high_fd(p[0]);
  fds[1] = high_fd(p[1]);
  return fds[0] >= 0 && fds[1] >= 0 ? 0 : -1;
}

/* The child's environment: ours without LD_PRELOAD, then the preload and
 * the user's NAME=VALUE (which win over ours). */
static char **child_env(const char *preload, const oracle_opts_t *o,
                        char *preload_var, size_t preload_len) {
  size_t n = 0;
  while (environ[n] != NULL)
    n++;
  char **env = calloc(n + o->nenv + 2, sizeof *env);
  if (env == NULL)
    return NULL;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (strncmp(environ[i], "LD_PRELOAD=", 11) == 0)
      continue;
    bool overridden = false;
    for (size_t j = 0; j < o->nenv && !overridden; j++) {
      size_t len = strcspn(o->env[j], "=");
      overridden = strncmp(environ[i], o->env[j], len + 1) == 0;
    }
    if (!overridden)
      env[k++] = environ[i];
  }
  if (preload[0] != '\0') {
    as_format_fits(preload_var, preload_len, "LD_PRELOAD=%s", preload);
    env[k++] = preload_var;
  }
  for (size_t j = 0; j < o->nenv; j++)
    env[k++] = (char *)o->env[j];
  env[k] = NULL;
  return env;
}

static void child_close(child_t *c) {
  if (c->ops_fd >= 0)
    close(c->ops_fd);
  if (c->results_fd >= 0)
    close(c->results_fd);
  if (c->times_fd >= 0)
    close(c->times_fd);
  c->ops_fd = c->results_fd = c->times_fd = -1;
}

oracle_times_place_t oracle_times_place(uint64_t need, uint64_t mem_available,
                                        uint64_t disk_free) {
  if (mem_available == 0 || need <= mem_available / 2)
    return ORACLE_TIMES_MEMORY;
  if (disk_free == 0 || need + need / 16 <= disk_free)
    return ORACLE_TIMES_DISK;
  return ORACLE_TIMES_NOWHERE;
}

/* The shared file the child writes each op's time into (ops slots), placed
 * by oracle_times_place; input names the trace or workload for a refusal. */
static as_status_t times_file(const char *input, uint64_t ops, int *out,
                              as_err_t *err) {
  *out = -1;
  const char *dir = getenv("TMPDIR");
  if (dir == NULL || dir[0] == '\0')
    dir = "/tmp";
  struct statvfs v;
  uint64_t       need = ops > (uint64_t)INT64_MAX / sizeof(uint64_t)
                            ? UINT64_MAX
                            : ops * sizeof(uint64_t);
  uint64_t       avail = sim_host_available_bytes();
  uint64_t disk = statvfs(dir, &v) == 0 ? (uint64_t)v.f_bavail * v.f_frsize : 0;
  oracle_times_place_t place = oracle_times_place(need, avail, disk);
  if (place == ORACLE_TIMES_NOWHERE) {
    char a[32], b[32], c[32];
    return as_err_set(err, AS_ENOMEM,
                      "%s: its %" PRIu64 " calls need %s for the oracle's "
                      "op times, more than half the memory available (%s) "
                      "and the free space of %s (%s); free space there or "
                      "set TMPDIR to a larger file system",
                      input, ops, sim_host_format_bytes(need, a, sizeof a),
                      sim_host_format_bytes(avail, b, sizeof b), dir,
                      sim_host_format_bytes(disk, c, sizeof c));
  }
  int fd = place == ORACLE_TIMES_MEMORY
               ? memfd_create("allocsim-oracle-times", MFD_CLOEXEC)
               : open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd >= 0 && ftruncate(fd, (off_t)need) != 0) {
    close(fd);
    fd = -1;
  }
  if (fd < 0)
    return as_err_set(err, AS_EIO, "oracle: op times (%s%s): %s",
                      place == ORACLE_TIMES_MEMORY ? "a memfd" : "a file in ",
                      place == ORACLE_TIMES_MEMORY ? "" : dir, strerror(errno));
  *out = high_fd(fd);
  return AS_OK;
}

static as_status_t child_start(const char *replayer, const char *preload,
                               const oracle_opts_t *o, const char *input,
                               uint64_t ops_count, child_t *c, as_err_t *err) {
  memset(c, 0, sizeof *c);
  c->ops_fd = c->results_fd = -1;
  as_status_t trc = times_file(input, ops_count, &c->times_fd, err);
  if (trc != AS_OK)
    return trc;
  int ops[2] = {-1, -1}, res[2] = {-1, -1};
  int devnull = high_fd(open("/dev/null", O_WRONLY | O_CLOEXEC));
  if (high_pipe(ops) != 0 || high_pipe(res) != 0 || devnull < 0) {
    as_status_t rc =
        as_err_set(err, AS_EIO, "oracle: pipes: %s", strerror(errno));
    for (int i = 0; i < 2; i++) {
      if (ops[i] >= 0)
        close(ops[i]);
      if (res[i] >= 0)
        close(res[i]);
    }
    if (devnull >= 0)
      close(devnull);
    child_close(c);
    return rc;
  }
  char   preload_var[PATH_MAX + 16];
  char **env = child_env(preload, o, preload_var, sizeof preload_var);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, ops[0], ORACLE_FD_OPS);
  posix_spawn_file_actions_adddup2(&fa, res[1], ORACLE_FD_RESULTS);
  posix_spawn_file_actions_adddup2(&fa, c->times_fd, ORACLE_FD_TIMES);
  posix_spawn_file_actions_adddup2(&fa, devnull, STDOUT_FILENO);
  char *argv[] = {(char *)replayer, NULL};
  int   e = env == NULL ? ENOMEM
                        : posix_spawn(&c->pid, replayer, &fa, NULL, argv, env);
  posix_spawn_file_actions_destroy(&fa);
  free(env);
  close(ops[0]);
  close(res[1]);
  close(devnull);
  c->ops_fd = ops[1];
  c->results_fd = res[0];
  if (e != 0) {
    child_close(c);
    return as_err_set(err, AS_EINVAL, "%s: cannot start: %s", replayer,
                      strerror(e));
  }
  return AS_OK;
}

/* ---- The feed: pass 2, in its own thread --------------------------------- */

typedef struct feed_s feed_t;
struct feed_s {
  const trace_input_t *trace;
  const char          *workload;
  const oracle_opts_t *o;
  int                  fd;
  oracle_hello_t       hello;
  as_status_t          rc;
  as_err_t             err;
  unsigned char        buf[1 << 16];
  size_t               used;
};

static bool feed_flush(feed_t *f) {
  size_t off = 0;
  while (off < f->used) {
    ssize_t n = write(f->fd, f->buf + off, f->used - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false; /* the child is gone; its result says why */
    off += (size_t)n;
  }
  f->used = 0;
  return true;
}

static bool feed_put(feed_t *f, const void *p, size_t n) {
  if (f->used + n > sizeof f->buf && !feed_flush(f))
    return false;
  memcpy(f->buf + f->used, p, n);
  f->used += n;
  return true;
}

static void *feed_main(void *arg) {
  feed_t  *f = arg;
  sigset_t pipe_set;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE); /* a dead child: EPIPE, not a signal */
  pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
  trace_source_t *src = NULL;
  walk_t          w = {0};
  f->rc = open_source(f->trace, f->workload, &src, &f->err);
  if (f->rc == AS_OK)
    f->rc = walk_init(&w, src, f->o, &f->err);
  bool alive = f->rc == AS_OK && feed_put(f, &f->hello, sizeof f->hello);
  trace_event_t ev;
  oracle_op_t   op;
  bool          send;
  while (alive && (f->rc = trace_source_next(src, &ev, &f->err)) == AS_OK) {
    if ((f->rc = walk_event(&w, &ev, &op, &send, &f->err)) != AS_OK)
      break;
    if (!send)
      continue;
    alive = feed_put(f, &op, sizeof op);
    if (alive && op.code == ORACLE_OP_OPTION) {
      char name[ORACLE_NAME_MAX] = {0};
      as_format_fits(name, sizeof name, "%s", ev.label);
      alive = feed_put(f, name, sizeof name);
    }
  }
  if (f->rc == AS_DONE) {
    f->rc = AS_OK;
    memset(&op, 0, sizeof op);
    op.code = ORACLE_OP_END; /* thread 0: the main thread finishes */
    op.t_ns = UINT64_MAX;
    if (alive && feed_put(f, &op, sizeof op))
      feed_flush(f);
  }
  sim_idtable_free(&w.tab);
  trace_source_close(src);
  close(f->fd); /* end of the stream */
  f->fd = -1;
  return NULL;
}

/* ---- Collecting: RSS and results ----------------------------------------- */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

typedef struct collect_s collect_t;
struct collect_s {
  oracle_run_t *r;
  size_t        samples_cap, created_cap, frees_cap, arenas_cap;
  bool          ready, done;
  char          error[232];
  uint64_t      error_op;
};

static uint64_t net(const collect_t *k, uint64_t rss) {
  return rss > k->r->baseline_rss_bytes ? rss - k->r->baseline_rss_bytes : 0;
}

/* Without a thread's report the measured trace would lack or keep a DTV
 * wrongly: the run stops. */
static void threads_oom(collect_t *k, const oracle_result_t *res) {
  as_format_fits(k->error, sizeof k->error,
                 "oracle: out of memory for the replayer's threads");
  k->error_op = res->a;
  k->done = true;
}

static void on_result(collect_t *k, const oracle_result_t *res) {
  oracle_run_t *r = k->r;
  switch (res->kind) {
  case ORACLE_R_READY:
    r->baseline_rss_bytes = res->a;
    as_format_fits(r->library, sizeof r->library, "%.231s", res->text);
    r->allocator_version = res->b;
    r->clock_origin_ns = res->c;
    k->ready = true;
    break;
  case ORACLE_R_MARK:
    if (res->a < r->nmarks) {
      r->marks[res->a].rss_bytes = net(k, res->b);
      r->marks[res->a].gross_bytes = res->b;
    }
    break;
  case ORACLE_R_SAMPLE: {
    oracle_sample_t *v =
        as_grow(r->samples, &k->samples_cap, r->nsamples + 1, sizeof *v, 256);
    if (v == NULL)
      break; /* fewer samples; the marks still tell */
    r->samples = v;
    v[r->nsamples++] =
        (oracle_sample_t){res->a, res->c, net(k, res->b), res->b};
    break;
  }
  case ORACLE_R_THREAD: {
    oracle_thread_t *v =
        as_grow(r->created, &k->created_cap, r->ncreated + 1, sizeof *v, 16);
    if (v == NULL) {
      threads_oom(k, res);
      break;
    }
    r->created = v;
    v[r->ncreated++] = (oracle_thread_t){res->a, (uint32_t)res->b, res->c, 0};
    break;
  }
  case ORACLE_R_JE_THREAD:
    if (res->a < r->ncreated)
      r->created[res->a].je_tsd = res->b;
    break;
  case ORACLE_R_JE_ARENA: {
    oracle_je_arena_t *v =
        as_grow(r->je_arenas, &k->arenas_cap, r->nje_arenas + 1, sizeof *v, 8);
    if (v == NULL)
      break; /* that arena keeps the model's default seed */
    r->je_arenas = v;
    v[r->nje_arenas++] = (oracle_je_arena_t){(uint32_t)res->a, res->b};
    break;
  }
  case ORACLE_R_DTV_FREE: {
    oracle_dtv_free_t *v =
        as_grow(r->dtv_frees, &k->frees_cap, r->ndtv_frees + 1, sizeof *v, 16);
    if (v == NULL) {
      threads_oom(k, res);
      break;
    }
    r->dtv_frees = v;
    v[r->ndtv_frees++] = (oracle_dtv_free_t){res->a, (uint32_t)res->b, res->c};
    break;
  }
  case ORACLE_R_HINT_AREA:
    r->hint_area_start = res->a;
    break;
  case ORACLE_R_JE_SEEDS:
    r->je.prng_seed = res->a;
    r->je.jitter_seed = res->b;
    break;
  case ORACLE_R_JE_CLOCK:
    r->je.coarse_init_ns = res->a;
    r->je.coarse_origin_ns = res->b;
    r->je.res_ns = res->c;
    break;
  case ORACLE_R_DONE:
    r->final_rss_bytes = net(k, res->a);
    r->final_gross_bytes = res->a;
    r->unsupported = res->b;
    r->calls_cpu_ns = res->c;
    k->done = true;
    break;
  default:
    as_format_fits(k->error, sizeof k->error, "%.231s", res->text);
    k->error_op = res->a;
    k->done = true;
  }
}

/* Reads results until the child is done or gone. */
static void collect(collect_t *k, const child_t *c) {
  unsigned char buf[sizeof(oracle_result_t) * 16];
  size_t        have = 0;
  while (!k->done) {
    ssize_t n = read(c->results_fd, buf + have, sizeof buf - have);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break; /* the child closed its end */
    have += (size_t)n;
    size_t off = 0;
    for (; have - off >= sizeof(oracle_result_t);
         off += sizeof(oracle_result_t)) {
      oracle_result_t res;
      memcpy(&res, buf + off, sizeof res);
      on_result(k, &res);
      /* The break ELF loading set (posix_spawn may return before exec has
       * set it); read while the replayer waits for its first op. */
      if (res.kind == ORACLE_R_READY)
        k->r->start_brk = machine_start_brk(c->pid);
    }
    memmove(buf, buf + off, have - off);
    have -= off;
  }
}

/* ---- The replayer's thread DTVs --------------------------------------------
 * Every thread glibc's pthread_create gives a new stack gets a DTV calloc'd
 * by the creating thread (protocol.h ORACLE_R_THREAD), all of one size in a
 * process: calloc (dtv_length + 2, sizeof (dtv_t)) with dtv_length =
 * GL(dl_tls_max_dtv_idx) + DTV_SURPLUS (glibc 2.36 elf/dl-tls.c:374-375),
 * and the replayer loads no module once it runs.  So the smallest figure
 * the replayer measured is that chunk; a larger one is the chunk and
 * same-size free chunks calloc's _int_malloc moved from a bin into the main
 * thread's tcache (malloc/malloc.c:3916-3935 the small bin, :4052-4068
 * exact fits from the unsorted bin; a tcache chunk is not free to
 * int_mallinfo, :5147-5197), which the model's calloc moves too.  0: a cached
 * stack, no DTV.  The measured trace gains, on thread 0 right before the
 * thread's first op, a calloc of chunk - 16 bytes: request2size
 * (malloc.c:1326-1329) gives (chunk - 16 + SIZE_SZ + MALLOC_ALIGN_MASK) &
 * ~MALLOC_ALIGN_MASK = (chunk + 7) & ~15 = the chunk back.  glibc frees a
 * DTV only when it unmaps a stack its cache (40 MiB, nptl/nptl-stack.c:23)
 * no longer holds (nptl-stack.c:78), in the thread that joins: the
 * replayer sees the stack go (ORACLE_R_DTV_FREE) and the measured trace
 * frees the calloc there, on that thread, before the op it joined at (after
 * it when that op is the thread's start).  Otherwise it is never freed. */

static bool dtv_measured(const oracle_run_t *r, const oracle_thread_t *t);

/* The DTV chunk, and the id of each creation's calloc. */
static as_status_t dtv_plan(oracle_run_t *r, bool written, as_err_t *err) {
  r->dtv_chunk_bytes = 0;
  for (size_t i = 0; i < r->ncreated; i++) {
    uint64_t b = r->created[i].heap_bytes;
    if (b != ORACLE_THREAD_UNMEASURED && b > 0 &&
        (r->dtv_chunk_bytes == 0 || b < r->dtv_chunk_bytes))
      r->dtv_chunk_bytes = b;
  }
  /* A chunk glibc cannot make (not a multiple of MALLOC_ALIGNMENT, or
   * below MINSIZE): something else was allocated; none is written. */
  if (r->dtv_chunk_bytes % 16 != 0 || r->dtv_chunk_bytes < 32)
    r->dtv_chunk_bytes = 0;
  if (r->ncreated == 0)
    return AS_OK;
  r->dtv_ids = malloc(r->ncreated * sizeof *r->dtv_ids);
  if (r->dtv_ids == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory for the threads' DTVs");
  uint64_t next = r->ids;
  for (size_t i = 0; i < r->ncreated; i++)
    r->dtv_ids[i] =
        written && dtv_measured(r, &r->created[i]) ? next++ : UINT64_MAX;
  return AS_OK;
}

/* Whether free f has a calloc to free. */
static bool dtv_free_written(const oracle_run_t      *r,
                             const oracle_dtv_free_t *f) {
  return r->dtv_ids != NULL && f->creation < r->ncreated &&
         r->dtv_ids[f->creation] != UINT64_MAX;
}

static bool dtv_measured(const oracle_run_t *r, const oracle_thread_t *t) {
  return r->dtv_chunk_bytes != 0 && t->heap_bytes != ORACLE_THREAD_UNMEASURED &&
         t->heap_bytes > 0;
}

/* ---- The output: pass 3 --------------------------------------------------
 * The trace again, rss events dropped, the measurements written as rss
 * events of the RSS as measured: the baseline before the first call, each
 * mark's right after it, each periodic sample after the op the child had
 * finished when it was taken, the final RSS after the last event.  The
 * peak is worked out on the net figures as they go by. */

static as_status_t meta_put(trace_meta_t *m, const char *key, const char *v,
                            as_err_t *err) {
  return import_meta_put(m, key, v, err); /* cut and cleaned to fit */
}

static as_status_t meta_u64(trace_meta_t *m, const char *key, uint64_t v,
                            as_err_t *err) {
  char buf[32];
  as_format_fits(buf, sizeof buf, "%" PRIu64, v);
  return trace_meta_set(m, key, buf, err);
}

/* The release the replayer found, under the key the model's version
 * option reads (models/mimalloc.c, models/tcmalloc.c), so that compare
 * replays the release the oracle ran. */
static as_status_t meta_version(trace_meta_t *m, const oracle_opts_t *o,
                                const oracle_run_t *r, as_err_t *err) {
  char     v[32];
  uint64_t n = r->allocator_version;
  if (n == 0 || n > UINT32_MAX)
    return AS_OK;
  if (o->allocator == ORACLE_MIMALLOC) {
    capture_mimalloc_version((uint32_t)n, v, sizeof v);
    return meta_put(m, "mimalloc_version", v, err);
  }
  if (o->allocator == ORACLE_JEMALLOC) {
    capture_jemalloc_version((uint32_t)n, v, sizeof v);
    return meta_put(m, "jemalloc_version", v, err);
  }
  if (o->allocator != ORACLE_TCMALLOC)
    return AS_OK;
  capture_tcmalloc_version((uint32_t)n, v, sizeof v);
  return meta_put(m, "tcmalloc_version", v, err);
}

/* The allocator the oracle ran, for record and compare: LD_PRELOAD picks
 * the model of a preloaded allocator (models/env.h), --env knobs its
 * options, "model"/"libc" name musl's when that model is registered. */
static as_status_t meta_allocator(trace_meta_t *m, const oracle_opts_t *o,
                                  const oracle_run_t *r, as_err_t *err) {
  as_status_t rc;
  if ((rc = meta_put(m, "allocator", oracle_allocator_name(o->allocator),
                     err)) != AS_OK ||
      (rc = meta_put(m, "allocator_library", r->library, err)) != AS_OK)
    return rc;
  /* the child's settings, --env's and those it inherited from ours alike
   * (MALLOC_CONF set in the shell tunes the replay as much) */
  char   preload_var[PATH_MAX + 16];
  char **env = child_env(r->preload, o, preload_var, sizeof preload_var);
  if (env == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory (environment)");
  rc = import_meta_put_env_knobs(m, env, err);
  free(env);
  if (rc != AS_OK)
    return rc;
  if ((rc = meta_version(m, o, r, err)) != AS_OK)
    return rc;
  char libc[64];
  as_format_fits(libc, sizeof libc, "glibc %s", gnu_get_libc_version());
  /* The glibc model's version knob reads it (models/glibc.c); the musl
   * replayer has no glibc. */
  if (o->allocator != ORACLE_MUSL &&
      (rc = meta_put(m, "glibc_version", gnu_get_libc_version(), err)) != AS_OK)
    return rc;
  if (o->allocator == ORACLE_MUSL) {
    bool modelled = model_find("musl") != NULL;
    as_format_fits(libc, sizeof libc, "musl");
    if (modelled && (rc = meta_put(m, "model", "musl", err)) != AS_OK)
      return rc;
  }
  return meta_put(m, "libc", libc, err);
}

/* What the measured trace holds of the replayer's own thread creation
 * (the replayer's thread DTVs, above), when it created any. */
static as_status_t meta_dtvs(trace_meta_t *m, const oracle_opts_t *o,
                             const oracle_run_t *r, as_err_t *err) {
  char     buf[300];
  uint64_t n = 0, freed = 0;
  for (size_t i = 0; i < r->ncreated; i++)
    n += dtv_measured(r, &r->created[i]);
  for (size_t i = 0; i < r->ndtv_frees; i++)
    freed += dtv_free_written(r, &r->dtv_frees[i]);
  if (r->ncreated == 0)
    return AS_OK;
  if (o->allocator == ORACLE_MUSL)
    as_format_fits(buf, sizeof buf,
                   "none: musl's pthread_create puts the DTV in the thread's "
                   "mapping (musl 1.2.3 src/thread/pthread_create.c:291-309, "
                   "src/env/__init_tls.c:47), no malloc");
  else if (o->marks_only)
    as_format_fits(buf, sizeof buf,
                   "not in the trace: it holds marks only, and compare "
                   "regenerates the workload's calls without the %" PRIu64
                   " DTVs of the replayer's pthread_create calls",
                   n);
  else
    as_format_fits(buf, sizeof buf,
                   "%" PRIu64 " calloc of %" PRIu64 " bytes on thread 0, ids "
                   "from %" PRIu64 ", %" PRIu64 " freed by a join when "
                   "glibc's stack cache let the stack go: the DTVs of the "
                   "replayer's %zu pthread_create calls (%s)",
                   n, n ? r->dtv_chunk_bytes - 16 : 0, r->ids, freed,
                   r->ncreated,
                   o->allocator == ORACLE_GLIBC
                       ? "mallinfo2"
                       : "ld.so's calloc, sized from the TLS modules "
                         "loaded");
  return meta_put(m, "oracle_thread_dtvs", buf, err);
}

static as_status_t output_meta(const trace_source_t *src, const char *input,
                               const char *workload, const oracle_opts_t *o,
                               const oracle_run_t *r, trace_meta_t *m,
                               as_err_t *err) {
  memset(m, 0, sizeof *m);
  struct utsname u;
  char           buf[512];
  as_status_t    rc;
  const char    *tt = trace_meta_get(&src->meta, "touch_threshold");
  const char    *was = trace_meta_get(&src->meta, "source");
  if ((rc = meta_put(m, "kind", "measured", err)) != AS_OK ||
      (rc = meta_put(m, "source", "allocsim oracle", err)) != AS_OK ||
      (rc = meta_put(m, "oracle_input", input, err)) != AS_OK ||
      (was && (rc = meta_put(m, "input_source", was, err)) != AS_OK) ||
      (workload && (rc = meta_put(m, "workload", workload, err)) != AS_OK) ||
      (tt && (rc = meta_put(m, "touch_threshold", tt, err)) != AS_OK) ||
      (o->command && (rc = meta_put(m, "command", o->command, err)) != AS_OK))
    return rc;
  if (uname(&u) == 0) {
    as_format_fits(buf, sizeof buf, "%s %s", u.nodename, u.machine);
    if ((rc = meta_put(m, "machine", buf, err)) != AS_OK ||
        (rc = meta_put(m, "kernel", u.release, err)) != AS_OK)
      return rc;
  }
  int zero_page = machine_reads_map_zero_page();
  if (zero_page >= 0 &&
      (rc = meta_put(m, "zero_page", zero_page ? "true" : "false", err)) !=
          AS_OK)
    return rc;
  const char *thp = machine_thp_enabled();
  if (thp != NULL && (rc = meta_put(m, "thp", thp, err)) != AS_OK)
    return rc;
  if ((rc = meta_u64(m, "page_size", (uint64_t)sysconf(_SC_PAGESIZE), err)) !=
          AS_OK ||
      (rc = meta_u64(m, "ncpus", (uint64_t)sysconf(_SC_NPROCESSORS_ONLN),
                     err)) != AS_OK ||
      (rc = meta_allocator(m, o, r, err)) != AS_OK ||
      (rc = meta_put(m, "replayer", r->replayer, err)) != AS_OK ||
      (r->start_brk != 0 &&
       (rc = meta_u64(m, "start_brk", r->start_brk, err)) != AS_OK) ||
      (rc = meta_u64(m, "clock_origin_ns", r->clock_origin_ns, err)) != AS_OK ||
      (r->hint_area_start != 0 &&
       (rc = meta_u64(m, "mimalloc_hint_start", r->hint_area_start, err)) !=
           AS_OK) ||
      (rc = trace_meta_put_jemalloc(m, r->clock_origin_ns, &r->je, err)) !=
          AS_OK ||
      (rc = meta_u64(m, "baseline_rss_bytes", r->baseline_rss_bytes, err)) !=
          AS_OK ||
      (rc = meta_put(m, "rss_source",
                     "/proc/PID/smaps_rollup Anonymous of the replayer minus "
                     "its baseline (before the first call)",
                     err)) != AS_OK ||
      /* Models that count file pages (program text paged in) read this. */
      (rc = meta_put(m, "rss_file_pages", "false", err)) != AS_OK ||
      (rc = meta_u64(m, "sample_every_ns", o->sample_every_ns, err)) != AS_OK ||
      (rc = meta_put(m, "clock", "oracle", err)) != AS_OK ||
      (rc = meta_u64(m, "oracle_unsupported", r->unsupported, err)) != AS_OK)
    return rc;
  as_format_fits(buf, sizeof buf, "%g", o->idle_scale);
  if ((rc = meta_put(m, "idle_scale", buf, err)) != AS_OK)
    return rc;
  return meta_dtvs(m, o, r, err);
}

typedef struct out_s out_t;
struct out_s {
  trace_writer_t *w; /* NULL: only the peak is worked out */
  oracle_run_t   *r;
  size_t          next_sample;
  bool            marks_only;   /* a workload: compare regenerates its calls */
  uint64_t        t_floor;      /* no later event is stamped before this */
  size_t          next_created; /* r->created not yet passed */
  size_t          next_free;    /* r->dtv_frees not yet passed */
};

static uint64_t add_sat(uint64_t a, uint64_t b) {
  return b > UINT64_MAX - a ? UINT64_MAX : a + b;
}

/* ev on the oracle's clock: op number i (from 0) stamped with the time the
 * child began it (protocol.h ORACLE_FD_TIMES), never before what was
 * written already (the clock is monotonic and the calls run one at a time,
 * so that only evens out a sample read while the next op began); an idle
 * lasts its sleep (the trace's times --idle-scale), which the child slept
 * before it read the time of the next op (out_idle moves the floor past
 * it). */
static void out_restamp(out_t *x, trace_event_t *ev, const oracle_op_t *op,
                        uint64_t i) {
  const oracle_run_t *r = x->r;
  uint64_t            t =
      i < r->nop_ns && r->op_ns[i] > x->t_floor ? r->op_ns[i] : x->t_floor;
  ev->t_ns = t;
  if (ev->op == TRACE_IDLE)
    ev->size = op->size;
  x->t_floor = t;
}

static as_status_t out_rss(out_t *x, uint64_t t_ns, uint64_t net,
                           uint64_t gross, as_err_t *err) {
  if (t_ns > x->t_floor)
    x->t_floor = t_ns;
  if (net > x->r->peak_rss_bytes) {
    x->r->peak_rss_bytes = net;
    x->r->peak_t_ns = t_ns;
  }
  if (x->w == NULL)
    return AS_OK;
  trace_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.t_ns = t_ns;
  ev.op = TRACE_RSS;
  ev.size = gross;
  return trace_writer_write(x->w, &ev, err);
}

/* An idle and the samples the child read while it slept it: the idle cut
 * at each sample, so that every rss event lands when it was read and none
 * inside an idle (the engine's clock is at an idle's end once it has run
 * it, and refuses an earlier event). */
static as_status_t out_idle(out_t *x, const trace_event_t *ev,
                            uint64_t ops_done, as_err_t *err) {
  uint64_t      end = add_sat(ev->t_ns, ev->size), at = ev->t_ns;
  bool          write = x->w != NULL && !x->marks_only, written = false;
  trace_event_t piece = *ev;
  as_status_t   rc = AS_OK;
  while (rc == AS_OK && x->next_sample < x->r->nsamples &&
         x->r->samples[x->next_sample].ops_done <= ops_done) {
    const oracle_sample_t *smp = &x->r->samples[x->next_sample++];
    uint64_t st = smp->t_ns < at ? at : smp->t_ns > end ? end : smp->t_ns;
    if (write && st > at) {
      piece.t_ns = at;
      piece.size = st - at;
      rc = trace_writer_write(x->w, &piece, err);
      written = true;
    }
    if (rc == AS_OK)
      rc = out_rss(x, st, smp->rss_bytes, smp->gross_bytes, err);
    at = st;
  }
  if (rc == AS_OK && write && (at < end || !written)) {
    piece.t_ns = at;
    piece.size = end - at;
    rc = trace_writer_write(x->w, &piece, err);
  }
  if (end > x->t_floor)
    x->t_floor = end;
  return rc;
}

static as_status_t out_dtv_event(out_t *x, trace_op_t op, uint32_t thread,
                                 uint64_t id, uint64_t t, as_err_t *err) {
  trace_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.t_ns = t;
  ev.op = (uint8_t)op;
  ev.thread = thread;
  ev.id = id;
  ev.size = op == TRACE_CALLOC ? x->r->dtv_chunk_bytes - 16 : 0;
  return trace_writer_write(x->w, &ev, err);
}

/* Option "seed.KIND.INDEX" = value on thread 0 at t (traces/event.h). */
static as_status_t out_seed(out_t *x, const char *kind, uint64_t index,
                            uint64_t value, uint64_t t, as_err_t *err) {
  char          name[TRACE_LABEL_MAX + 1];
  trace_event_t ev;
  memset(&ev, 0, sizeof ev);
  as_format_fits(name, sizeof name, "%s%s.%" PRIu64, TRACE_SEED_PREFIX, kind,
                 index);
  ev.t_ns = t;
  ev.op = TRACE_OPTION;
  ev.label = name;
  ev.size = value;
  return trace_writer_write(x->w, &ev, err);
}

/* jemalloc: each arena's jitter seed, before any arena but 0 exists. */
static as_status_t out_arena_seeds(out_t *x, uint64_t t, as_err_t *err) {
  as_status_t rc = AS_OK;
  for (size_t i = 0; i < x->r->nje_arenas && rc == AS_OK; i++)
    rc = out_seed(x, "jitter", x->r->je_arenas[i].arena,
                  x->r->je_arenas[i].decay, t, err);
  return rc;
}

/* The replayer's DTV events before op i (stamped t; ev_op its event): the
 * callocs of the threads created for it (thread 0, the replayer's thread
 * DTVs above), then the frees of those whose stacks glibc's cache let go
 * when the thread running op i joined, on that thread; after op i
 * instead when op i is that thread's start (so that it runs first). */
static as_status_t out_dtvs(out_t *x, uint64_t i, uint64_t t, trace_op_t ev_op,
                            bool after, as_err_t *err) {
  oracle_run_t *r = x->r;
  as_status_t   rc = AS_OK;
  bool          write = x->w != NULL && !x->marks_only;
  for (; !after && rc == AS_OK && x->next_created < r->ncreated &&
         r->created[x->next_created].op <= i;
       x->next_created++) {
    const oracle_thread_t *c = &r->created[x->next_created];
    uint64_t id = r->dtv_ids ? r->dtv_ids[x->next_created] : UINT64_MAX;
    if (write && c->je_tsd != 0) /* before the thread's first call */
      rc = out_seed(x, "prng", c->thread, c->je_tsd, t, err);
    if (rc == AS_OK && write && id != UINT64_MAX &&
        (rc = out_dtv_event(x, TRACE_CALLOC, 0, id, t, err)) == AS_OK)
      r->dtvs++;
  }
  if (after != (ev_op == TRACE_THREAD_START))
    return rc;
  for (; rc == AS_OK && x->next_free < r->ndtv_frees &&
         r->dtv_frees[x->next_free].op <= i;
       x->next_free++) {
    const oracle_dtv_free_t *f = &r->dtv_frees[x->next_free];
    if (write && dtv_free_written(r, f) &&
        (rc = out_dtv_event(x, TRACE_FREE, f->thread, r->dtv_ids[f->creation],
                            t, err)) == AS_OK)
      r->dtvs_freed++;
  }
  return rc;
}

/* Writes ev and the measurements that follow it (ops_done: ops finished
 * with it). */
static as_status_t out_event(out_t *x, const trace_event_t *ev,
                             uint64_t ops_done, uint64_t mark, as_err_t *err) {
  if (ev->op == TRACE_IDLE)
    return out_idle(x, ev, ops_done, err);
  as_status_t rc = x->w && (!x->marks_only || ev->op == TRACE_MARK)
                       ? trace_writer_write(x->w, ev, err)
                       : AS_OK;
  if (rc == AS_OK && ev->op == TRACE_MARK && mark < x->r->nmarks) {
    x->r->marks[mark].t_ns = ev->t_ns;
    rc = out_rss(x, ev->t_ns, x->r->marks[mark].rss_bytes,
                 x->r->marks[mark].gross_bytes, err);
  }
  while (rc == AS_OK && x->next_sample < x->r->nsamples &&
         x->r->samples[x->next_sample].ops_done <= ops_done) {
    const oracle_sample_t *smp = &x->r->samples[x->next_sample++];
    rc = out_rss(x, smp->t_ns > x->t_floor ? smp->t_ns : x->t_floor,
                 smp->rss_bytes, smp->gross_bytes, err);
  }
  return rc;
}

static as_status_t write_output(const trace_input_t *trace,
                                const char *workload, const oracle_opts_t *o,
                                oracle_run_t *r, as_err_t *err) {
  trace_source_t *src;
  as_status_t     rc = open_source(trace, workload, &src, err);
  if (rc != AS_OK)
    return rc;
  walk_t       w;
  out_t        x = {NULL, r, 0, o->marks_only, 0, 0, 0};
  trace_meta_t meta;
  char         input[300];
  as_format_fits(input, sizeof input, "%s%s", workload ? "workload: " : "",
                 workload ? workload : trace->path);
  if ((rc = walk_init(&w, src, o, err)) == AS_OK && o->out_path != NULL &&
      (rc = output_meta(src, input, workload, o, r, &meta, err)) == AS_OK)
    rc = trace_writer_open(o->out_path, trace_format_from_path(o->out_path),
                           &meta, &x.w, err);
  trace_event_t ev;
  oracle_op_t   op;
  bool          send, first = true;
  uint64_t      t = 0;
  while (rc == AS_OK && (rc = trace_source_next(src, &ev, err)) == AS_OK) {
    if ((rc = walk_event(&w, &ev, &op, &send, err)) != AS_OK || !send)
      continue;
    out_restamp(&x, &ev, &op, w.ops - 1);
    if (first &&
        ((rc = out_rss(&x, ev.t_ns, 0, r->baseline_rss_bytes, err)) != AS_OK ||
         (x.w != NULL && !x.marks_only &&
          (rc = out_arena_seeds(&x, ev.t_ns, err)) != AS_OK)))
      break;
    first = false;
    t = ev.t_ns;
    if ((rc = out_dtvs(&x, w.ops - 1, ev.t_ns, ev.op, false, err)) != AS_OK)
      break;
    rc = out_event(&x, &ev, w.ops, w.marks - (ev.op == TRACE_MARK), err);
    if (rc == AS_OK)
      rc = out_dtvs(&x, w.ops - 1, ev.t_ns, ev.op, true, err);
  }
  if (rc == AS_DONE) {
    r->final_t_ns = t > x.t_floor ? t : x.t_floor;
    rc = out_rss(&x, r->final_t_ns, r->final_rss_bytes, r->final_gross_bytes,
                 err);
  }
  /* A failure keeps what out_path held before (trace_writer_discard). */
  if (x.w != NULL && rc == AS_OK)
    rc = trace_writer_close(x.w, err);
  else if (x.w != NULL)
    trace_writer_discard(x.w);
  sim_idtable_free(&w.tab);
  trace_source_close(src);
  return rc;
}

/* ---- Entry point --------------------------------------------------------- */

void oracle_run_free(oracle_run_t *r) {
  free(r->created);
  free(r->je_arenas);
  free(r->dtv_frees);
  free(r->dtv_ids);
  free(r->marks);
  free(r->samples);
  if (r->op_ns != NULL)
    munmap(r->op_ns, (size_t)r->nop_ns * sizeof *r->op_ns);
  memset(r, 0, sizeof *r);
}

/* The library LD_PRELOAD will load, checked readable; "" for none. */
static as_status_t choose_preload(const oracle_opts_t *o, oracle_run_t *r,
                                  as_err_t *err) {
  if (o->allocator == ORACLE_MUSL) {
    if (o->lib != NULL)
      return as_err_set(err, AS_EUSAGE,
                        "--lib: musl is the replayer's own libc (built with "
                        "musl-gcc), nothing to preload");
    r->preload[0] = '\0';
    return AS_OK;
  }
  if (o->lib != NULL)
    as_format_fits(r->preload, sizeof r->preload, "%s", o->lib);
  else
    oracle_default_lib(o->allocator, r->preload, sizeof r->preload);
  if (r->preload[0] == '\0')
    return AS_OK;
  if (access(r->preload, R_OK) == 0) {
    /* ld.so would print its own line for a file it cannot preload (a
     * directory, a trace) and run on with glibc's malloc: refused here, in
     * one line, before the replayer starts. */
    char  magic[4] = {0};
    FILE *f = fopen(r->preload, "rb");
    bool  elf = f != NULL && fread(magic, 1, 4, f) == 4 &&
               memcmp(magic, "\177ELF", 4) == 0;
    if (f != NULL)
      fclose(f);
    if (!elf)
      return as_err_set(err, AS_EINVAL,
                        "cannot load %s: %s: not a shared library (no ELF "
                        "header)",
                        oracle_allocator_name(o->allocator), r->preload);
    return AS_OK;
  }
  static const char *const pkg[ORACLE_ALLOCATOR_COUNT] = {
      "", "libjemalloc2", "libmimalloc2.0", "libtcmalloc-minimal4", ""};
  return as_err_set(
      err, AS_EINVAL, "cannot load %s: %s: %s (install %s, or give --lib PATH)",
      oracle_allocator_name(o->allocator), r->preload, strerror(errno),
      pkg[o->allocator][0] ? pkg[o->allocator] : "it");
}

/* The replayer's malloc must come from the preloaded library (ld.so only
 * warns when a preload fails, and runs on with glibc's). */
static bool preload_took(const oracle_run_t *r) {
  if (r->preload[0] == '\0')
    return true;
  char want[PATH_MAX], got[PATH_MAX];
  if (realpath(r->preload, want) == NULL || realpath(r->library, got) == NULL)
    return strcmp(r->preload, r->library) == 0;
  return strcmp(want, got) == 0;
}

/* Waits for the child; its failure as an error unless it finished. */
static as_status_t child_wait(child_t *c, const collect_t *k,
                              const oracle_run_t *r, oracle_allocator_t a,
                              as_err_t *err) {
  if (!k->done || k->error[0] != '\0' || (k->ready && !preload_took(r)))
    kill(c->pid, SIGKILL);
  int status = 0;
  while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
    ;
  if (k->ready && !preload_took(r))
    return as_err_set(err, AS_EINVAL,
                      "cannot load %s: LD_PRELOAD=%s did not replace malloc "
                      "(the replayer's malloc comes from %s)",
                      oracle_allocator_name(a), r->preload, r->library);
  if (k->error[0] != '\0')
    return as_err_set(err, AS_EIO,
                      "%s: the replayer failed at op %" PRIu64 ": %s",
                      r->replayer, k->error_op, k->error);
  if (!k->done) {
    if (WIFSIGNALED(status))
      return as_err_set(err, AS_EIO,
                        "%s: the replayer died of signal %d "
                        "(%s)",
                        r->replayer, WTERMSIG(status),
                        strsignal(WTERMSIG(status)));
    return as_err_set(err, AS_EIO,
                      "%s: the replayer exited with status %d "
                      "before finishing",
                      r->replayer,
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  }
  return AS_OK;
}

static as_status_t run_input(const trace_input_t *trace, const char *workload,
                             const oracle_opts_t *o, oracle_run_t *r,
                             as_err_t *err) {
  as_status_t rc = choose_preload(o, r, err);
  if (rc != AS_OK)
    return rc;
  if (o->replayer != NULL)
    as_format_fits(r->replayer, sizeof r->replayer, "%s", o->replayer);
  else if ((rc = oracle_find_replayer(o->allocator, r->replayer,
                                      sizeof r->replayer, err)) != AS_OK)
    return rc;
  plan_t plan;
  memset(&plan, 0, sizeof plan);
  rc = plan_trace(trace, workload, o, &plan, r, err);
  addr_ids_map_free(&plan.alive);
  addr_ids_map_free(&plan.seen);
  if (rc != AS_OK)
    return rc;

  child_t c;
  if ((rc = child_start(r->replayer, r->preload, o,
                        workload ? workload : trace->path, plan.ops, &c,
                        err)) != AS_OK)
    return rc;
  feed_t *f = calloc(1, sizeof *f);
  if (f == NULL) {
    kill(c.pid, SIGKILL);
    waitpid(c.pid, NULL, 0);
    child_close(&c);
    return as_err_set(err, AS_ENOMEM, "out of memory");
  }
  f->trace = trace;
  f->workload = workload;
  f->o = o;
  f->fd = c.ops_fd;
  c.ops_fd = -1; /* the feeder closes it */
  f->hello = (oracle_hello_t){ORACLE_MAGIC, (uint32_t)o->allocator, 0, plan.ids,
                              plan.ops,     o->sample_every_ns};
  uint64_t  t0 = now_ns();
  pthread_t feeder;
  if (pthread_create(&feeder, NULL, feed_main, f) != 0) {
    close(f->fd);
    free(f);
    kill(c.pid, SIGKILL);
    waitpid(c.pid, NULL, 0);
    child_close(&c);
    return as_err_set(err, AS_ENOMEM, "cannot start the feeding thread");
  }
  collect_t k = {.r = r};
  collect(&k, &c);
  rc = child_wait(&c, &k, r, o->allocator, err);
  pthread_join(feeder, NULL);
  r->wall_s = (double)(now_ns() - t0) / 1e9;
  if (rc == AS_OK && f->rc != AS_OK) {
    rc = f->rc;
    *err = f->err;
  }
  free(f);
  if (rc == AS_OK && plan.ops > 0) {
    void *m = mmap(NULL, (size_t)plan.ops * sizeof *r->op_ns, PROT_READ,
                   MAP_SHARED, c.times_fd, 0);
    if (m == MAP_FAILED)
      rc = as_err_set(err, AS_EIO, "oracle: cannot map the op times: %s",
                      strerror(errno));
    else {
      r->op_ns = m;
      r->nop_ns = plan.ops;
      r->replay_ns = r->op_ns[plan.ops - 1];
    }
  }
  child_close(&c);
  r->ids = plan.ids;
  if (rc == AS_OK)
    rc = dtv_plan(r, o->out_path != NULL && !o->marks_only, err);
  if (rc == AS_OK)
    rc = write_output(trace, workload, o, r, err);
  return rc;
}

as_status_t oracle_run(const char *trace_path, const char *workload,
                       const oracle_opts_t *o, oracle_run_t *r, as_err_t *err) {
  memset(r, 0, sizeof *r);
  trace_input_t trace = {0};
  as_status_t   rc =
      workload != NULL ? AS_OK : trace_input_open(&trace, trace_path, err);
  if (rc == AS_OK)
    rc = run_input(&trace, workload, o, r, err);
  trace_input_close(&trace);
  return rc;
}
