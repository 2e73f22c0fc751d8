/* traces/capture_run.h -- running a command under liballocsim_capture.so
 * (LD_PRELOAD; for CPython also the PyMem_SetAllocator hook) and writing
 * the traces it streams, with provenance.
 *
 * Type map
 *   capture_opts_t    what to run and the limits
 *   capture_end_t     how a capture ended
 *   capture_result_t  exit status, traces written, statistics
 */
#ifndef ALLOCSIM_CAPTURE_RUN_H
#define ALLOCSIM_CAPTURE_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture_stream.h"

/* Free space the disk guard keeps on the trace's file system by default. */
#define CAPTURE_MIN_FREE_DEFAULT ((uint64_t)1 << 30)

typedef struct capture_opts_s capture_opts_t;
struct capture_opts_s {
  char *const *argv;            /* the command, NULL-terminated */
  const char  *out_path;        /* trace to write (the command's process) */
  uint64_t     sample_every_ns; /* RSS sampling period; 0 = marks only */
  uint64_t     touch_threshold; /* bytes (>= the OS page); 0 = no touch
                                   records (every allocation written) */
  uint32_t stacks;              /* return addresses per allocation (call
                                   sites), 0 = off, at most 32 */
  uint64_t    max_trace_bytes;  /* all traces together; 0 = no limit */
  uint64_t    min_free_bytes;   /* the disk guard; 0 = the default */
  const char *lib_path;         /* NULL: capture_find_lib() */
  bool        quiet_signals;    /* tests: do not install signal handling */
};

/* Why the recording stopped. */
typedef enum capture_end_e {
  CAPTURE_END_COMPLETE, /* every process said goodbye */
  CAPTURE_END_DIED,     /* a process ended without flushing (a fatal
                           signal, or exit_group): its last buffers lost */
  CAPTURE_END_SIGNAL,   /* allocsim capture was interrupted (SIGINT,
                           SIGTERM, SIGHUP): forwarded to the command */
  CAPTURE_END_DISK,     /* the free-space guard */
  CAPTURE_END_LIMIT,    /* --max-trace-bytes */
  CAPTURE_END_OUTLIVED, /* processes still running after the command
                           exited were detached */
  CAPTURE_END_ERROR     /* a malformed stream (a recorder bug) */
} capture_end_t;

/* "complete", "died", "signal", "disk-guard", "max-trace-bytes",
 * "outlived", "error". */
const char *capture_end_name(capture_end_t e);

#define CAPTURE_MAX_EXTRA 16

typedef struct capture_result_s capture_result_t;
struct capture_result_s {
  int             exit_code;   /* the command's, 128+N if signalled */
  int             exit_signal; /* the signal that killed it, or 0 */
  double          wall_s;      /* the command's wall time */
  capture_end_t   end;         /* the worst of the processes' ends */
  int             signal;      /* CAPTURE_END_SIGNAL: which */
  bool            truncated;   /* the command's trace misses events */
  uint64_t        trace_bytes; /* written, all traces */
  bool            have_main;   /* the command's process connected */
  capture_stats_t main;        /* the command's own process */
  size_t          nextra;      /* forked / exec'd processes */
  size_t          nskipped;    /* more of them, not written */
  char            extra_path[CAPTURE_MAX_EXTRA][512];
  capture_stats_t extra[CAPTURE_MAX_EXTRA];
  trace_meta_t    meta;         /* provenance written to the trace */
  char            message[256]; /* what stopped it, for the summary */
};

/* Finds liballocsim_capture.so: $ALLOCSIM_CAPTURE_LIB, then next to the
 * running binary, then its build-tree place relative to it, then the path
 * it was built to.  AS_EINVAL listing the places tried. */
as_status_t capture_find_lib(char *buf, size_t len, as_err_t *err);

/* Runs o->argv with LD_PRELOAD'd capture (and, for CPython, PYTHONPATH
 * pointing at sitecustomize.py and the allocsim module), and writes what
 * the processes stream: the command's process (the last image its pid
 * exec'd) to o->out_path, other processes and earlier images (fork, exec)
 * to OUT.PID[.N].EXT, the first CAPTURE_MAX_EXTRA of them.
 *
 * Provenance: command, machine, kernel, page_size, libc, python, env knobs
 * (env.NAME), capture settings, touch_threshold, and truncated=1 until the
 * trace is known complete (then truncated=0, patched in place).
 *
 * Stopping: SIGINT, SIGTERM and SIGHUP sent to this process are forwarded
 * to the command after the recorder flushed its buffers; the traces keep
 * what was flushed.  The disk guard (o->min_free_bytes free on the trace's
 * file system) and o->max_trace_bytes stop recording cleanly: the processes
 * are detached and run on untraced.  If this process is killed, the
 * command dies with it (PR_SET_PDEATHSIG; its children when they notice
 * the closed connection) and the traces stay readable, truncated=1.
 *
 * A command that cannot be started is AS_EINVAL; its non-zero exit is not
 * an error (see exit_code). */
as_status_t capture_run(const capture_opts_t *o, capture_result_t *res,
                        as_err_t *err);

/* Removes the temporary directories of captures and reports
 * ($TMPDIR/allocsim-capture-* and allocsim-report-*, or under /tmp) whose
 * process is no longer running, as its owner file says; *removed counts
 * them.  One without an owner file is judged after a minute (a process
 * killed before it wrote one). */
as_status_t capture_cleanup(unsigned *removed, as_err_t *err);

/* Writes dir's owner file ("PID STARTTIME" of this process), by which
 * capture_cleanup tells a live directory from a dead one's (pids are
 * reused); dir is one of the names capture_cleanup looks at.  Best
 * effort: without the file the directory is judged by its age. */
void capture_tmpdir_claim(const char *dir);

/* The environment variables recorded as env.NAME provenance: MALLOC_*,
 * GLIBC_TUNABLES, LD_PRELOAD (without the capture library), MALLOC_CONF,
 * MIMALLOC_*, PYTHONMALLOC, PYTHONHASHSEED. */
bool capture_env_knob(const char *name);

#endif
