/* sim/cli/cmd_compare.c -- `allocsim compare RUN --db DB [--model M]
 * [--libc L] [--page-size N] [--no-store] [--json]`: replays a measured run
 * and prints predicted against measured RSS per mark and over the series.
 * The work is compare_run() in analysis/compare.c; the baseline rule is
 * printed with every table because it changes what the numbers mean.
 */
#include "cli.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../analysis/compare.h"
#include "../../analysis/store.h"

static void json_num(double v) {
  if (isfinite(v))
    printf("%.17g", v);
  else
    printf("null");
}

static double mib(double b) {
  return b / 1048576.0;
}

static void print_json(const compare_result_t *r) {
  printf("{\"run\": %" PRId64 ", \"model\": ", r->measured_run_id);
  cli_json_string(stdout, r->model);
  printf(", \"libc\": ");
  cli_json_string(stdout, r->libc_spec);
  printf(", \"source\": ");
  cli_json_string(stdout, r->source);
  printf(", \"simulated_run\": %" PRId64 ", \"comparison\": %" PRId64,
         r->simulated_run_id, r->comparison_id);
  printf(", \"baseline\": {\"rule\": \"predicted = simulated + measured(anchor)"
         " - simulated(anchor)\", \"anchor_label\": ");
  cli_json_string(stdout, r->anchor_label);
  printf(", \"anchor_t_ns\": %" PRIu64 ", \"offset_bytes\": %" PRId64 "}",
         r->anchor_t_ns, r->offset_bytes);
  printf(", \"peak_measured_rss_bytes\": %" PRIu64 ", \"marks\": [",
         r->peak_measured_rss_bytes);
  for (size_t i = 0; i < r->nmarks; i++) {
    const compare_mark_t *m = &r->marks[i];
    printf("%s{\"label\": ", i ? ", " : "");
    cli_json_string(stdout, m->label);
    printf(", \"measured_rss_bytes\": %" PRIu64, m->measured_rss_bytes);
    if (isfinite(m->error_pct_of_peak))
      printf(", \"predicted_rss_bytes\": %" PRId64 ", \"error_bytes\": %" PRId64
             ", \"error_pct_of_peak\": ",
             m->predicted_rss_bytes, m->error_bytes);
    else
      printf(", \"predicted_rss_bytes\": null, \"error_bytes\": null, "
             "\"error_pct_of_peak\": ");
    json_num(m->error_pct_of_peak);
    putchar('}');
  }
  printf("], \"series\": {\"alignment\": ");
  cli_json_string(stdout, r->alignment);
  printf(", \"points\": %zu, \"mean_abs_error_bytes\": ", r->series.points);
  json_num(r->series.mean_abs_error_bytes);
  printf(", \"max_abs_error_bytes\": ");
  json_num(r->series.max_abs_error_bytes);
  printf(", \"slope\": ");
  json_num(r->series.slope);
  printf(", \"intercept_bytes\": ");
  json_num(r->series.intercept_bytes);
  printf(", \"r2\": ");
  json_num(r->series.r2);
  printf("}}\n");
}

static void print_table(const compare_result_t *r, const char *db) {
  printf("measured run  %" PRId64 "\nreplayed      %s\nmodel         %s\n"
         "libc          %s\npage size     %" PRIu64 " bytes\n",
         r->measured_run_id, r->source, r->model, r->libc_spec, r->page_size);
  printf("baseline      predicted = simulated + (measured - simulated) at the "
         "anchor\n              anchor %s%s%s at t=%.3f ms, offset %+.2f MiB\n",
         r->anchor_label[0] ? "mark '" : "first measured sample",
         r->anchor_label, r->anchor_label[0] ? "'" : "",
         (double)r->anchor_t_ns / 1e6, mib((double)r->offset_bytes));
  if (r->skipped_events)
    printf("skipped       %" PRIu64 " frees/reallocs of unknown objects "
           "(baseline objects)\n",
           r->skipped_events);
  printf("\n%-24s %12s %12s %12s %10s\n", "mark", "measured MiB",
         "predicted MiB", "error MiB", "% of peak");
  for (size_t i = 0; i < r->nmarks; i++) {
    const compare_mark_t *m = &r->marks[i];
    if (isfinite(m->error_pct_of_peak))
      printf("%-24.24s %12.2f %12.2f %+12.2f %+9.2f%%\n", m->label,
             mib((double)m->measured_rss_bytes),
             mib((double)m->predicted_rss_bytes), mib((double)m->error_bytes),
             m->error_pct_of_peak);
    else
      printf("%-24.24s %12.2f %12s %12s %10s\n", m->label,
             mib((double)m->measured_rss_bytes), "-", "-", "-");
  }
  printf("\nseries (%s, %zu points, peak measured %.2f MiB)\n", r->alignment,
         r->series.points, mib((double)r->peak_measured_rss_bytes));
  printf("  mean |error|  %.3f MiB\n  max |error|   %.3f MiB\n",
         mib(r->series.mean_abs_error_bytes),
         mib(r->series.max_abs_error_bytes));
  if (isfinite(r->series.slope))
    printf("  fit           predicted = %.4f * measured %+.3f MiB, R^2 %.4f\n",
           r->series.slope, mib(r->series.intercept_bytes), r->series.r2);
  else
    printf("  fit           undefined (fewer than 3 points or no variance)\n");
  if (r->simulated_run_id > 0)
    printf("\nstored simulated run %" PRId64 " and comparison %" PRId64
           " in %s\n",
           r->simulated_run_id, r->comparison_id, db);
}

static int compare_main(int argc, char **argv) {
  const char    *db = NULL, *run_s = NULL;
  compare_opts_t o = {.store = true};
  bool           json = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool        takes = strcmp(a, "--db") == 0 || strcmp(a, "--model") == 0 ||
                 strcmp(a, "--libc") == 0 || strcmp(a, "--page-size") == 0;
    if (takes && i + 1 >= argc)
      return cli_usage_error("compare", "%s needs a value", a);
    if (strcmp(a, "--db") == 0)
      db = argv[++i];
    else if (strcmp(a, "--model") == 0)
      o.model = argv[++i];
    else if (strcmp(a, "--libc") == 0)
      o.libc = argv[++i];
    else if (strcmp(a, "--page-size") == 0) {
      const char *v = argv[++i];
      if (!cli_parse_bytes(v, &o.page_size) ||
          (o.page_size != 4096 && o.page_size != 16384 && o.page_size != 65536))
        return cli_usage_error("compare",
                               "--page-size expects 4096, 16384 "
                               "or 65536, got '%s'",
                               v);
    } else if (strcmp(a, "--json") == 0)
      json = true;
    else if (strcmp(a, "--no-store") == 0)
      o.store = false;
    else if (a[0] == '-')
      return cli_usage_error("compare", "unknown option '%s'", a);
    else if (run_s == NULL)
      run_s = a;
    else
      return cli_usage_error("compare", "one run at a time, got '%s' too", a);
  }
  if (run_s == NULL)
    return cli_usage_error("compare", "expected a run id");
  if (db == NULL)
    return cli_usage_error("compare", "--db FILE is required");
  char     *end;
  long long id = strtoll(run_s, &end, 10);
  if (*end != '\0' || id <= 0)
    return cli_usage_error("compare", "expected a positive run id, got '%s'",
                           run_s);
  o.command = cli_command_line(argc, argv);

  as_err_t         err = {0};
  store_t         *s = NULL;
  compare_result_t res;
  if (store_open(db, &s, &err) != AS_OK)
    return cli_fail("compare", &err);
  as_status_t rc = compare_run(s, id, &o, &res, &err);
  store_close(s);
  if (rc != AS_OK) {
    compare_result_free(&res);
    return cli_fail("compare", &err);
  }
  if (json)
    print_json(&res);
  else
    print_table(&res, db);
  compare_result_free(&res);
  return CLI_EXIT_OK;
}

const cli_command_t cli_cmd_compare = {
    .name = "compare",
    .summary = "replay a measured run; predicted vs measured RSS",
    .usage =
        "usage: allocsim compare RUN --db DB [--model M] [--libc L]\n"
        "                        [--page-size N] [--no-store] [--json]\n"
        "\n"
        "Replays measured run RUN (its trace, or the workload named by its\n"
        "'workload' provenance) and compares predicted with measured RSS at\n"
        "every mark and over the time series (aligned by nearest time for a\n"
        "trace, by mark label for a workload).\n"
        "\n"
        "Model: --model, else cpython for Python runs, else the LD_PRELOAD'd\n"
        "allocator if modelled, else glibc.  libc: --libc, else glibc with "
        "the\n"
        "run's MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_, "
        "MALLOC_TRIM_THRESHOLD_,\n"
        "MALLOC_TOP_PAD_ (or GLIBC_TUNABLES) as arena_max, mmap_threshold,\n"
        "trim_threshold, top_pad.\n"
        "\n"
        "Baseline: measured RSS includes the program's baseline (interpreter,\n"
        "libraries), which no trace explains.  predicted = simulated +\n"
        "measured(anchor) - simulated(anchor), the anchor being the mark\n"
        "'hooked' of a CPython capture, else the run's first measured sample;\n"
        "the offset is printed.\n"
        "\n"
        "Statistics: mean and max |error|, and the least-squares fit of\n"
        "predicted on measured (slope, intercept, R^2; GSL).  The simulated "
        "run\n"
        "and a comparisons row are stored in DB unless --no-store.\n"
        "\n"
        "--json prints {run, model, marks:[{label, measured_rss_bytes,\n"
        "predicted_rss_bytes, error_bytes, error_pct_of_peak}], series:\n"
        "{mean_abs_error_bytes, max_abs_error_bytes, slope, r2, ...}, ...}\n"
        "\n"
        "exit codes: 0 compared, 1 bad run/trace/database, 2 usage error\n",
    .run = compare_main,
};
