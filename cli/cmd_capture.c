/* cli/cmd_capture.c -- `allocsim capture [-o TRACE] [--db DB]
 * [--sample-every 10ms] -- COMMAND [ARGS...]`: runs COMMAND under
 * liballocsim_capture.so, converts what it recorded into a trace and
 * optionally stores it as a measured run.
 *
 * The work is in traces/capture_run.c (capture_run, which the
 * integration test calls directly); this file parses options and reports.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/record.h"
#include "../traces/capture_run.h"
#include "../analysis/store.h"

static void report_stats(const char *path, const capture_convert_stats_t *st) {
  printf("%s: pid %" PRIu64 ", %" PRIu64 " events (%" PRIu64
         " allocation events), %" PRIu64 " threads, peak %" PRIu64
         " live objects\n",
         path, st->pid, st->events, st->alloc_events, st->threads + 1,
         st->max_live_ids);
  printf("  measured RSS: baseline %.2f MiB, peak %.2f MiB (capture's own "
         "resident bytes, up to %.2f MiB, subtracted)\n",
         (double)st->baseline_rss_bytes / 1048576.0,
         (double)st->peak_rss_bytes / 1048576.0,
         (double)st->overhead_max_bytes / 1048576.0);
  if (st->unmatched_frees || st->unmatched_reallocs || st->missed_frees ||
      st->truncated_records)
    printf("  anomalies: %" PRIu64 " frees and %" PRIu64
           " reallocs of unknown addresses (allocated before capture or in "
           "the parent), %" PRIu64 " missed frees, %" PRIu64
           " records lost at a cut-off log end\n",
           st->unmatched_frees, st->unmatched_reallocs, st->missed_frees,
           st->truncated_records);
  if (st->python[0])
    printf("  CPython %s: obj/mem domains recorded after the mark 'hooked'; "
           "earlier allocations are baseline\n",
           st->python);
}

static int cmd_capture_main(int argc, char **argv) {
  const char *out = NULL, *db = NULL;
  uint64_t    every_ns = 10000000; /* 10 ms */
  bool        keep_raw = false;
  int         i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if ((strcmp(a, "-o") == 0 || strcmp(a, "--db") == 0 ||
         strcmp(a, "--sample-every") == 0) &&
        i + 1 >= argc)
      return cli_usage_error("capture", "%s needs a value", a);
    if (strcmp(a, "-o") == 0) {
      out = argv[++i];
    } else if (strcmp(a, "--db") == 0) {
      db = argv[++i];
    } else if (strcmp(a, "--sample-every") == 0) {
      const char *v = argv[++i];
      if (strcmp(v, "0") == 0)
        every_ns = 0;
      else if (!as_parse_duration_ns(v, &every_ns) || every_ns == 0)
        return cli_usage_error("capture",
                               "--sample-every expects a duration "
                               "such as 10ms, or 0, got '%s'",
                               v);
    } else if (strcmp(a, "--keep-raw") == 0) {
      keep_raw = true;
    } else if (a[0] == '-') {
      return cli_usage_error("capture", "unknown option '%s'", a);
    } else {
      break; /* the command starts here */
    }
  }
  if (i >= argc)
    return cli_usage_error("capture", "expected -- COMMAND [ARGS...]");
  /* A --db that is not a store is refused before the program runs, not
   * after it (a missing one is created when the capture is stored). */
  if (db != NULL && access(db, F_OK) == 0) {
    store_t *s = NULL;
    as_err_t e = {0};
    if (store_open_existing(db, &s, &e) != AS_OK)
      return cli_fail("capture", &e);
    store_close(s);
  }

  char default_out[64];
  if (out == NULL) {
    snprintf(default_out, sizeof default_out, "capture-%d.astrace",
             (int)getpid());
    out = default_out;
  }
  capture_opts_t    o = {.argv = argv + i,
                                .out_path = out,
                                .sample_every_ns = every_ns,
                                .keep_raw = keep_raw};
  capture_result_t *res = malloc(sizeof *res);
  as_err_t                 err = {0};
  if (res == NULL) {
    as_err_set(&err, AS_ENOMEM, "out of memory");
    return cli_fail("capture", &err);
  }
  if (capture_run(&o, res, &err) != AS_OK) {
    free(res);
    return cli_fail("capture", &err);
  }
  fprintf(stderr, "allocsim capture: command exited with %d after %.3f s\n",
          res->exit_code, res->wall_s);
  report_stats(out, &res->main);
  for (size_t k = 0; k < res->nextra; k++)
    report_stats(res->extra_path[k], &res->extra[k]);
  if (res->nskipped > 0)
    printf("%zu more processes were captured but not converted (limit %d; "
           "use --keep-raw to keep their raw logs)\n",
           res->nskipped, CAPTURE_MAX_EXTRA);
  if (keep_raw)
    printf("raw logs kept in %s\n", res->raw_dir);

  int rc = CLI_EXIT_OK;
  if (db != NULL) {
    store_t      *s = NULL;
    record_info_t info;
    char          v[6][32];
    snprintf(v[0], sizeof v[0], "%" PRIu64, res->main.unmatched_frees);
    snprintf(v[1], sizeof v[1], "%" PRIu64, res->main.unmatched_reallocs);
    snprintf(v[2], sizeof v[2], "%" PRIu64, res->main.missed_frees);
    snprintf(v[3], sizeof v[3], "%" PRIu64, res->main.overhead_max_bytes);
    snprintf(v[4], sizeof v[4], "%.6f", res->wall_s);
    snprintf(v[5], sizeof v[5], "%zu", res->nextra);
    store_kv_t extra[] = {
        {"capture_unmatched_frees", v[0]}, {"capture_unmatched_reallocs", v[1]},
        {"capture_missed_frees", v[2]},    {"capture_overhead_bytes", v[3]},
        {"capture_wall_s", v[4]},          {"capture_other_processes", v[5]},
    };
    if (store_open(db, &s, &err) != AS_OK ||
        record_trace_file(s, out, cli_command_line(argc, argv), extra,
                          sizeof extra / sizeof extra[0], &info,
                          &err) != AS_OK) {
      rc = cli_fail("capture", &err);
    } else {
      printf("stored as measured run %" PRId64 " in %s (%" PRIu64
             " mark samples, %" PRIu64 " periodic samples)\n",
             info.run_id, db, info.marks, info.measured);
    }
    store_close(s);
  }
  free(res);
  return rc;
}

const cli_command_t cli_cmd_capture = {
    .name = "capture",
    .summary = "run a program under the malloc recorder; write its trace",
    .usage =
        "usage: allocsim capture [-o TRACE] [--db DB] [--sample-every 10ms]\n"
        "                        [--keep-raw] -- COMMAND [ARGS...]\n"
        "\n"
        "Runs COMMAND with LD_PRELOAD=liballocsim_capture.so, which records\n"
        "malloc, calloc, realloc, free, the memalign family and malloc_trim\n"
        "of every thread in one happens-before-consistent order, measured RSS\n"
        "(/proc/self/smaps_rollup) every --sample-every and at each mark\n"
        "(allocsim_mark(\"label\") from C via allocsim_mark.h, or\n"
        "ctypes.CDLL(None).allocsim_mark(b\"label\") from Python).  For\n"
        "CPython the obj and mem domains are recorded too (sitecustomize.py).\n"
        "\n"
        "options:\n"
        "  -o TRACE            output (default capture-PID.astrace; .astrace "
        "is\n"
        "                      binary, anything else text).  Forked children\n"
        "                      and exec'd images go to TRACE.PID[.N].EXT\n"
        "  --db DB             also store the capture as a measured run\n"
        "  --sample-every D    RSS sampling period (10ms; 0 = marks only)\n"
        "  --keep-raw          keep the raw logs (their directory is printed)\n"
        "\n"
        "The library is found via $ALLOCSIM_CAPTURE_LIB, next to allocsim, or\n"
        "where the build put it.  Measured RSS has the library's own resident\n"
        "bytes subtracted.  See docs/capture.md.\n"
        "\n"
        "The exit code is 0 when the capture worked, whatever COMMAND\n"
        "returned (its code is printed).\n",
    .run = cmd_capture_main,
};
