/* traces/capture_run.h -- running a command under liballocsim_capture.so
 * (LD_PRELOAD; for CPython also the PyMem_SetAllocator hook) and turning
 * what it recorded into traces with provenance.
 */
#ifndef ALLOCSIM_CAPTURE_RUN_H
#define ALLOCSIM_CAPTURE_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture_convert.h"

typedef struct capture_opts_s capture_opts_t;
struct capture_opts_s {
  char *const *argv;            /* the command, NULL-terminated */
  const char  *out_path;        /* trace to write (the command's process) */
  uint64_t     sample_every_ns; /* RSS sampling period; 0 = marks only */
  const char  *lib_path;        /* NULL: capture_find_lib() */
  bool         keep_raw;        /* keep the raw logs' directory */
};

#define CAPTURE_MAX_EXTRA 16

typedef struct capture_result_s capture_result_t;
struct capture_result_s {
  int                    exit_code; /* the command's, 128+N if signalled */
  double                 wall_s;    /* the command's wall time */
  capture_convert_stats_t main;      /* the command's own process */
  size_t                 nextra;    /* forked / exec'd processes */
  size_t                 nskipped;  /* more of them, not converted */
  char                   extra_path[CAPTURE_MAX_EXTRA][512];
  capture_convert_stats_t extra[CAPTURE_MAX_EXTRA];
  trace_meta_t           meta;         /* provenance written to the trace */
  char                   raw_dir[256]; /* kept raw logs, if keep_raw */
};

/* Finds liballocsim_capture.so: $ALLOCSIM_CAPTURE_LIB, then next to the
 * running binary, then its build-tree place relative to it, then the path
 * it was built to.  AS_EINVAL listing the places tried. */
as_status_t capture_find_lib(char *buf, size_t len, as_err_t *err);

/* Runs o->argv with LD_PRELOAD'd capture (and, for CPython, PYTHONPATH
 * pointing at sitecustomize.py), waits for it, and converts its raw logs:
 * the command's process (the last image its pid exec'd) to o->out_path,
 * other processes and earlier images (fork, exec) to OUT.PID[.N].EXT, the
 * first CAPTURE_MAX_EXTRA of them (the rest are counted in
 * nskipped).
 * Provenance: command, machine, kernel, page_size, libc, python, env knobs
 * (env.NAME), capture settings.  A command that cannot be started is AS_EINVAL;
 * its non-zero exit is not an error (see exit_code). */
as_status_t capture_run(const capture_opts_t *o,
                               capture_result_t *res, as_err_t *err);

/* The environment variables recorded as env.NAME provenance: MALLOC_*,
 * GLIBC_TUNABLES, LD_PRELOAD (without the capture library), MALLOC_CONF,
 * MIMALLOC_*, PYTHONMALLOC, PYTHONHASHSEED. */
bool capture_env_knob(const char *name);

#endif
