/* cli/cmd_capture.c -- `allocsim capture [options] -- COMMAND [ARGS...]`:
 * runs COMMAND under liballocsim_capture.so, writes its trace and
 * optionally stores it as a measured run; `allocsim capture --cleanup`
 * removes what killed captures left in $TMPDIR.
 *
 * The work is in traces/capture_run.c (capture_run, which the integration
 * test calls directly); this file parses options and reports.  The summary
 * goes to stderr (or --summary FILE): the command's own stdout and stderr
 * are its alone.
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../analysis/record.h"
#include "../analysis/store.h"
#include "../sim/atomic_file.h"
#include "../sim/units.h"
#include "../traces/capture_run.h"

static double mib(uint64_t b) {
  return (double)b / 1048576.0;
}

static void report_stats(FILE *f, const char *path, const capture_stats_t *st) {
  fprintf(f,
          "%s: pid %" PRIu64 ", %" PRIu64 " events (%" PRIu64
          " allocation, %" PRIu64 " touch), %" PRIu64 " threads, peak %" PRIu64
          " live objects\n",
          path, st->pid, st->events, st->alloc_events, st->touch_events,
          st->threads + 1, st->max_live_ids);
  fprintf(f,
          "  measured RSS: baseline %.2f MiB, peak %.2f MiB, final %.2f MiB "
          "(the recorder's own resident bytes, up to %.2f MiB, subtracted)\n",
          mib(st->baseline_rss_bytes), mib(st->peak_rss_bytes),
          mib(st->final_rss_bytes), mib(st->overhead_max_bytes));
  if (st->stacks != 0)
    fprintf(f,
            "  call sites: %" PRIu64 " sites (up to %" PRIu64
            " return addresses each) in %" PRIu64 " modules\n",
            st->sites, st->stacks, st->modules);
  if (st->trims || st->purge_events || st->option_events)
    fprintf(f,
            "  %" PRIu64 " malloc_trim, %" PRIu64 " purge, %" PRIu64
            " option (mallopt, mallctl) events\n",
            st->trims, st->purge_events, st->option_events);
  if (st->placements)
    fprintf(f,
            "  %" PRIu64 " pymalloc arenas, each modelled where the "
            "interpreter mapped it\n",
            st->placements);
  if (st->unmatched_frees || st->unmatched_reallocs || st->missed_frees ||
      st->dropped_touches || st->late_records || st->untracked_mmaps)
    fprintf(f,
            "  anomalies: %" PRIu64 " frees and %" PRIu64
            " reallocs of unknown addresses (allocated before capture or in "
            "the parent), %" PRIu64 " missed frees, %" PRIu64
            " touches of dead objects dropped, %" PRIu64
            " records out of the merge window, %" PRIu64
            " own mappings of the program not counted (table full)\n",
            st->unmatched_frees, st->unmatched_reallocs, st->missed_frees,
            st->dropped_touches, st->late_records, st->untracked_mmaps);
  if (st->own_malloc[0])
    fprintf(f,
            "  warning: %s defines malloc itself and the program's calls "
            "bind to it, so the recorder saw none of them (a statically "
            "linked allocator); compare cannot predict this process\n",
            st->own_malloc);
  if (st->exec_untraced[0])
    fprintf(f,
            "  then exec'd %s, which sent no stream (a static or setuid "
            "binary ignores LD_PRELOAD): what it allocated is in no trace\n",
            st->exec_untraced);
  if (st->python[0])
    fprintf(f,
            "  CPython %s: obj/mem domains recorded after the mark 'hooked'; "
            "earlier allocations are baseline\n",
            st->python);
}

static void report(FILE *f, const char *out, const capture_result_t *res) {
  /* A death by signal is not an exit with status 128+N, though the run
   * stores it so (the shell's convention). */
  if (res->exit_signal != 0)
    fprintf(f,
            "allocsim capture: command killed by signal %d (%s) after %.3f "
            "s\n",
            res->exit_signal, strsignal(res->exit_signal), res->wall_s);
  else
    fprintf(f, "allocsim capture: command exited with %d after %.3f s\n",
            res->exit_code, res->wall_s);
  if (res->end == CAPTURE_END_SIGNAL)
    fprintf(f,
            "allocsim capture: interrupted by signal %d, forwarded to the "
            "command after the recorder flushed\n",
            res->signal);
  else if (res->end != CAPTURE_END_COMPLETE)
    fprintf(f, "allocsim capture: recording ended: %s%s%s\n",
            capture_end_name(res->end), res->message[0] ? ": " : "",
            res->message);
  if (res->truncated)
    fprintf(f, "allocsim capture: the trace misses events at its end and is "
               "marked truncated=1\n");
  report_stats(f, out, &res->main);
  for (size_t k = 0; k < res->nextra; k++)
    report_stats(f, res->extra_path[k], &res->extra[k]);
  if (res->nskipped > 0)
    fprintf(f,
            "%zu more processes ran under capture but were not traced "
            "(limit %d)\n",
            res->nskipped, CAPTURE_MAX_EXTRA);
  uint64_t events = res->main.events; /* trace_bytes counts every trace */
  for (size_t k = 0; k < res->nextra; k++)
    events += res->extra[k].events;
  double per_event = events ? (double)res->trace_bytes / (double)events : 0.0;
  if (res->nextra == 0)
    fprintf(f, "trace bytes written: %" PRIu64 " (%.2f per event)\n",
            res->trace_bytes, per_event);
  else
    fprintf(f,
            "trace bytes written: %" PRIu64 " (%.2f per event, over %zu "
            "traces)\n",
            res->trace_bytes, per_event, res->nextra + 1);
}

/* Stores one process's trace as a measured run, its counters as run meta.
 * parent_run is the command's own run for a forked or exec'd process
 * (capture_parent_run), 0 for the command's. */
static as_status_t store_process(store_t *s, const char *path,
                                 const capture_stats_t  *m,
                                 const capture_result_t *res,
                                 int64_t parent_run, const char *command,
                                 record_info_t *info, as_err_t *err) {
  char v[14][40];
  snprintf(v[0], sizeof v[0], "%d", res->exit_code);
  snprintf(v[1], sizeof v[1], "%s", capture_end_name(res->end));
  snprintf(v[2], sizeof v[2], "%" PRIu64, m->unmatched_frees);
  snprintf(v[3], sizeof v[3], "%" PRIu64, m->missed_frees);
  snprintf(v[4], sizeof v[4], "%" PRIu64, m->overhead_max_bytes);
  snprintf(v[5], sizeof v[5], "%.6f", res->wall_s);
  snprintf(v[6], sizeof v[6], "%zu", res->nextra + res->nskipped);
  snprintf(v[7], sizeof v[7], "%" PRIu64, res->trace_bytes);
  snprintf(v[8], sizeof v[8], "%" PRIu64, m->baseline_rss_bytes);
  snprintf(v[9], sizeof v[9], "%" PRIu64, m->dropped_touches);
  snprintf(v[10], sizeof v[10], "%" PRIu64, m->late_records);
  snprintf(v[11], sizeof v[11], "%d", res->signal);
  snprintf(v[12], sizeof v[12], "%" PRIu64, m->unmatched_reallocs);
  snprintf(v[13], sizeof v[13], "%" PRId64, parent_run);
  store_kv_t extra[16] = {
      {"capture_end", v[1]},
      {"capture_unmatched_frees", v[2]},
      {"capture_unmatched_reallocs", v[12]},
      {"capture_missed_frees", v[3]},
      {"capture_overhead_bytes", v[4]},
      {"capture_wall_s", v[5]},
      {"capture_other_processes", v[6]},
      {"capture_trace_bytes", v[7]},
      {"baseline_rss_bytes", v[8]},
      {"capture_dropped_touches", v[9]},
      {"capture_late_records", v[10]},
      {"capture_signal", v[11]},
  };
  size_t nextra = 12;
  if (parent_run == 0) /* the command's exit code is its own process's */
    extra[nextra++] = (store_kv_t){"exit_code", v[0]};
  else
    extra[nextra++] = (store_kv_t){"capture_parent_run", v[13]};
  if (m->python[0] != '\0') /* only when the hook saw it */
    extra[nextra++] = (store_kv_t){"python", m->python};
  return record_trace_file(s, path, command, extra, nextra, info, err);
}

/* Stores every traced process: the command's own, then each forked or
 * exec'd one as a run of its own, so that a compiler driver's cc1 or a
 * shell's children can be compared without `allocsim record` (which would
 * lose the per-sample memory no allocator holds, sent only live). */
static int store_runs(FILE *f, const char *db, bool db_existed, const char *out,
                      const capture_result_t *res, int argc, char **argv) {
  store_t      *s = NULL;
  record_info_t info;
  as_err_t      err = {0};
  const char   *cmd = cli_command_line(argc, argv);
  if (store_open(db, &s, &err) != AS_OK ||
      store_process(s, out, &res->main, res, 0, cmd, &info, &err) != AS_OK) {
    store_close(s);
    store_discard_new(db, !db_existed);
    return cli_fail("capture", &err);
  }
  int64_t parent = info.run_id, first = 0, last = 0;
  size_t  stored = 0;
  fprintf(f,
          "stored as measured run %" PRId64 " in %s (%" PRIu64
          " mark samples, %" PRIu64 " periodic samples)\n",
          info.run_id, db, info.marks, info.measured);
  if (info.spec_warning[0] != '\0')
    fprintf(f, "warning: %s\n", info.spec_warning);
  for (size_t k = 0; k < res->nextra; k++) {
    const char *path = res->extra_path[k];
    if (store_process(s, path, &res->extra[k], res, parent, cmd, &info, &err) !=
        AS_OK) {
      /* The capture worked; this process's trace cannot be a run (one
       * killed before its first sample has no measured RSS). */
      fprintf(f, "not stored: %s\n", err.msg);
      continue;
    }
    if (stored++ == 0)
      first = info.run_id;
    last = info.run_id;
    if (res->nextra <= 4)
      fprintf(f, "stored %s (pid %" PRIu64 ") as measured run %" PRId64 "\n",
              path, res->extra[k].pid, info.run_id);
    if (info.spec_warning[0] != '\0' && res->nextra <= 4)
      fprintf(f, "warning: %s\n", info.spec_warning);
  }
  if (res->nextra > 4 && stored > 0)
    fprintf(f,
            "stored the other %zu processes as measured runs %" PRId64
            "-%" PRId64 " (allocsim runs --db %s lists them)\n",
            stored, first, last, db);
  store_close(s);
  return CLI_EXIT_OK;
}

static int size_opt(const char *name, const char *v, uint64_t *out) {
  if (!as_parse_bytes(v, out))
    return cli_usage_error("capture",
                           "%s expects a size such as 4096, 64K "
                           "or 2GiB, got '%s'",
                           name, v);
  return 0;
}

static int cleanup(void) {
  unsigned removed;
  as_err_t err = {0};
  if (capture_cleanup(&removed, &err) != AS_OK)
    return cli_fail("capture", &err);
  fprintf(stderr,
          "allocsim capture: removed %u leftover capture or report "
          "directories\n",
          removed);
  return CLI_EXIT_OK;
}

/* The trace (and TRACE.PID.EXT beside it) can be created: out is not a
 * directory, and its directory exists and may be written. */
static as_status_t check_out(const char *out, as_err_t *err) {
  struct stat sb;
  if (stat(out, &sb) == 0 && S_ISDIR(sb.st_mode))
    return as_err_set(err, AS_EIO, "%s: cannot create the trace: a directory",
                      out);
  char        dir[PATH_MAX];
  const char *slash = strrchr(out, '/');
  if (slash == NULL)
    snprintf(dir, sizeof dir, ".");
  else
    snprintf(dir, sizeof dir, "%.*s", slash == out ? 1 : (int)(slash - out),
             out);
  if (access(dir, W_OK | X_OK) != 0)
    return as_err_set(err, AS_EIO, "%s: cannot create the trace: %s: %s", out,
                      dir, strerror(errno));
  return AS_OK;
}

static int cmd_capture_main(int argc, char **argv) {
  const char    *out = NULL, *db = NULL, *summary = NULL, *v;
  capture_opts_t o = {.sample_every_ns = 10000000, /* 10 ms */
                      .touch_threshold = (uint64_t)sysconf(_SC_PAGESIZE)};
  int            i = 1, t;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (strcmp(a, "--cleanup") == 0) /* alone: it runs nothing */
      return argc == 2 ? cleanup()
                       : cli_usage_error("capture", "--cleanup takes no other "
                                                    "argument");
    if ((t = cli_opt_value("capture", argc, argv, &i, "-o", &out)) ||
        (t = cli_opt_value("capture", argc, argv, &i, "--db", &db)) ||
        (t = cli_opt_value("capture", argc, argv, &i, "--summary", &summary))) {
      if (t < 0)
        return CLI_EXIT_USAGE;
    } else if ((t = cli_opt_value("capture", argc, argv, &i, "--sample-every",
                                  &v))) {
      if (t < 0)
        return CLI_EXIT_USAGE;
      if (strcmp(v, "0") == 0)
        o.sample_every_ns = 0;
      else if (!as_parse_duration_ns(v, &o.sample_every_ns) ||
               o.sample_every_ns == 0)
        return cli_usage_error("capture",
                               "--sample-every expects a duration "
                               "such as 10ms, or 0, got '%s'",
                               v);
    } else if ((t = cli_opt_value("capture", argc, argv, &i,
                                  "--touch-threshold", &v))) {
      if (t < 0 || size_opt("--touch-threshold", v, &o.touch_threshold))
        return CLI_EXIT_USAGE;
      uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
      if (o.touch_threshold != 0 && o.touch_threshold < page)
        return cli_usage_error("capture",
                               "--touch-threshold expects 0 (off) or at "
                               "least the page size %" PRIu64 ", got '%s'",
                               page, v);
    } else if ((t = cli_opt_value("capture", argc, argv, &i, "--stacks", &v))) {
      char         *end = NULL;
      unsigned long n = t > 0 ? strtoul(v, &end, 10) : 0;
      if (t < 0)
        return CLI_EXIT_USAGE;
      if (end == v || *end != '\0' || v[0] == '-' || n > CAPTURE_FRAMES_MAX)
        return cli_usage_error("capture",
                               "--stacks expects a number of return "
                               "addresses from 0 (off) to %d, got '%s'",
                               CAPTURE_FRAMES_MAX, v);
      o.stacks = (uint32_t)n;
    } else if ((t = cli_opt_value("capture", argc, argv, &i,
                                  "--max-trace-bytes", &v))) {
      if (t < 0 || size_opt("--max-trace-bytes", v, &o.max_trace_bytes))
        return CLI_EXIT_USAGE;
    } else if ((t = cli_opt_value("capture", argc, argv, &i, "--min-free",
                                  &v))) {
      if (t < 0 || size_opt("--min-free", v, &o.min_free_bytes))
        return CLI_EXIT_USAGE;
      if (o.min_free_bytes == 0)
        return cli_usage_error("capture", "--min-free expects more than 0");
    } else if (a[0] == '-') {
      return cli_usage_error("capture", "unknown option '%s'", a);
    } else {
      break; /* the command starts here */
    }
  }
  if (i >= argc)
    return cli_usage_error("capture", "expected -- COMMAND [ARGS...]");
  /* Three outputs, three files, all written at the end. */
  if (cli_same_file(out, db) || cli_same_file(out, summary) ||
      cli_same_file(db, summary))
    return cli_usage_error("capture", "-o, --db and --summary must be "
                                      "different files");
  /* A --db that is not a store, or cannot be created, is refused before
   * the program runs, not after it (a missing one is created when the
   * capture is stored). */
  as_err_t db_err = {0};
  bool     db_existed = db != NULL && access(db, F_OK) == 0;
  if (db != NULL && store_check_writable(db, &db_err) != AS_OK)
    return cli_fail("capture", &db_err);

  char default_out[64];
  if (out == NULL) {
    snprintf(default_out, sizeof default_out, "capture-%d.astrace",
             (int)getpid());
    out = default_out;
  }
  /* So is a trace that could not be written: the recorder would find out
   * only once the program ran, and end as if it had died. */
  as_err_t out_err = {0};
  if (check_out(out, &out_err) != AS_OK)
    return cli_fail("capture", &out_err);
  /* The summary file is written whole at the end or not at all, and a
   * write error (a full device) fails the capture as one of -o would. */
  FILE         *sf = stderr;
  atomic_file_t summary_file;
  if (summary != NULL) {
    as_err_t sum_err = {0};
    if (atomic_file_open(&summary_file, summary, &sum_err) != AS_OK)
      return cli_fail("capture", &sum_err);
    sf = summary_file.f;
  }
  o.argv = argv + i;
  o.out_path = out;
  capture_result_t *res = malloc(sizeof *res);
  as_err_t          err = {0};
  int               rc = CLI_EXIT_OK;
  if (res == NULL) {
    as_err_set(&err, AS_ENOMEM, "out of memory");
    rc = cli_fail("capture", &err);
  } else if (capture_run(&o, res, &err) != AS_OK) {
    rc = cli_fail("capture", &err);
  } else if (res->end == CAPTURE_END_ERROR) {
    /* The trace could not be written (a write error, a device that is
     * full) or the stream was malformed: the capture failed, whatever
     * the command did; it is not stored.  One line, the summary only to
     * --summary. */
    if (sf != stderr)
      report(sf, out, res);
    as_err_set(&err, AS_EIO,
               "%s: recording failed: %s (the command exited with %d)", out,
               res->message, res->exit_code);
    rc = cli_fail("capture", &err);
  } else {
    /* The command has ended: a summary nobody reads any more (stderr a
     * pipe to `head`, closed) must not cost the store its runs. */
    signal(SIGPIPE, SIG_IGN);
    report(sf, out, res);
    if (db != NULL)
      rc = store_runs(sf, db, db_existed, out, res, argc, argv);
    /* An interrupted capture exits the way an interrupted command does. */
    if (rc == CLI_EXIT_OK && res->end == CAPTURE_END_SIGNAL)
      rc = 128 + res->signal;
  }
  if (summary != NULL) {
    as_err_t sum_err = {0};
    if (atomic_file_commit(&summary_file, &sum_err) != AS_OK &&
        rc == CLI_EXIT_OK)
      rc = cli_fail("capture", &sum_err);
  }
  free(res);
  return rc;
}

const cli_command_t cli_cmd_capture = {
    .name = "capture",
    .summary = "run a program under the malloc recorder; write its trace",
    .usage =
        "usage: allocsim capture [-o TRACE] [--db DB] [--sample-every 10ms]\n"
        "                        [--touch-threshold 4K] [--stacks N]\n"
        "                        [--max-trace-bytes N]\n"
        "                        [--min-free 1G] [--summary FILE]\n"
        "                        -- COMMAND [ARGS...]\n"
        "       allocsim capture --cleanup\n"
        "\n"
        "Runs COMMAND with LD_PRELOAD=liballocsim_capture.so, which records\n"
        "malloc, calloc, realloc, free, the memalign family, C++'s new and\n"
        "delete, malloc_trim, mallopt and (with jemalloc, mimalloc or\n"
        "tcmalloc preloaded) their purge calls, however reached (dlsym too),\n"
        "of every thread in one happens-before-consistent order; which pages\n"
        "of large allocations the program wrote (touch events); measured RSS\n"
        "(/proc/self/smaps_rollup) every --sample-every and at each mark:\n"
        "allocsim_mark(\"label\") from C via allocsim_mark.h, or\n"
        "`from allocsim import mark; mark(\"label\")` from Python.  For\n"
        "CPython the obj and mem domains are recorded too.  The recorder\n"
        "streams to this process, which writes the trace: no raw log.\n"
        "\n"
        "options:\n"
        "  -o TRACE             output (default capture-PID.astrace, PID\n"
        "                       being allocsim capture's own, known before\n"
        "                       COMMAND starts; .astrace is binary,\n"
        "                       anything else text).  Forked\n"
        "                       children and exec'd images go to\n"
        "                       TRACE.PID[.N].EXT\n"
        "  --db DB              also store the capture as measured runs, one\n"
        "                       per traced process\n"
        "  --sample-every D     RSS sampling period (10ms; 0 = marks only)\n"
        "  --touch-threshold N  record written pages of allocations of N\n"
        "                       bytes or more (default one page; 0 = off:\n"
        "                       every allocation counts as written)\n"
        "  --stacks N           record up to N return addresses (0-32;\n"
        "                       default 0, off) of every allocation, as\n"
        "                       call sites for explain --by-site\n"
        "  --max-trace-bytes N  stop recording before the traces exceed N\n"
        "  --min-free N         stop recording before the trace's file\n"
        "                       system has less than N free (default 1G)\n"
        "  --summary FILE       write the summary there, not to stderr\n"
        "  --cleanup            remove leftovers of killed captures and\n"
        "                       reports\n"
        "\n"
        "SIGINT, SIGTERM and SIGHUP are forwarded to COMMAND after the\n"
        "recorder flushed; the trace keeps everything flushed and says\n"
        "truncated=1.  If allocsim capture is killed, COMMAND dies with it.\n"
        "The library is found via $ALLOCSIM_CAPTURE_LIB, next to allocsim, or\n"
        "where the build put it.  See docs/capture.md.\n"
        "\n"
        "The exit code is 0 when the capture worked, whatever COMMAND\n"
        "returned (its code is in the summary and the run), 1 when the\n"
        "trace (or the --summary file) could not be written, and 128+N\n"
        "when allocsim capture was interrupted by signal N.\n",
    .run = cmd_capture_main,
};
