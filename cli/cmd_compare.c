/* cli/cmd_compare.c -- `allocsim compare RUN --db DB [--model M]
 * [--libc L] [--page-size N] [--layouts N] [--no-zero-page] [--no-store]
 * [--json]`: replays
 * a measured run and prints predicted against measured RSS per mark and over
 * the series.  The work is compare_run() in analysis/compare.c; the baseline
 * rule is printed with every table because it changes what the numbers mean.
 * By default every layout that differs is replayed (4 with 4 KiB pages);
 * with --layouts 1 the output is a single replay's, without the range
 * columns and JSON keys.
 */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../analysis/compare.h"
#include "../analysis/store.h"
#include "../models/model.h"

static void json_num(double v) {
  if (isfinite(v))
    printf("%.17g", v);
  else
    printf("null");
}

static double mib(double b) {
  return b / 1048576.0;
}

/* The measured value lies within the layouts' predictions. */
static bool inside(const compare_mark_t *m) {
  int64_t v = (int64_t)m->measured_rss_bytes;
  return m->predicted_min_rss_bytes <= v && v <= m->predicted_max_rss_bytes;
}

/* What makes this comparison say less than it seems to: the calls the
 * trace lacks, and growth no allocator model predicts.  At most
 * MAX_WARNINGS, each one line. */
#define MAX_WARNINGS 4
typedef char warning_t[400];

/* Whether r's model composes a libc model under it (cpython), so that
 * the libc spec says something. */
static bool composed(const compare_result_t *r) {
  char name[64];
  model_spec_name(r->model, name, sizeof name);
  return model_find(name) == NULL || model_spec_composes(r->model);
}

static size_t compare_warnings(const compare_result_t *r, warning_t *out) {
  size_t n = 0;
  if (r->own_malloc[0])
    snprintf(out[n++], sizeof *out,
             "%s defines malloc itself and the program's calls bound to it, "
             "past the recorder: the trace lacks them, so the prediction is "
             "not this program's",
             r->own_malloc);
  char name[64];
  model_spec_name(r->model, name, sizeof name);
  if (r->python && !composed(r))
    snprintf(out[n++], sizeof *out,
             "a CPython run replayed on %.24s alone: every request, the obj "
             "and mem domains' too, goes to %.24s, as under "
             "PYTHONMALLOC=malloc; for pymalloc over %.24s give --model "
             "cpython --libc %.24s",
             name, name, name, name);
  if (r->truncated[0])
    snprintf(out[n++], sizeof *out,
             "the recording stopped before the program ended (%s; the run "
             "is marked truncated=1): measured and predicted cover only the "
             "recorded part, whose peak may not be the program's",
             r->truncated);
  int64_t growth = (int64_t)r->peak_measured_rss_bytes -
                   (int64_t)r->anchor_measured_rss_bytes;
  /* Half the growth, and at least 1 MiB: a runtime or allocator of the
   * program's own (the JVM's heap, Go's, a prefixed jemalloc) or mapped
   * files, which a trace of malloc does not hold. */
  if (r->has_other && growth > 0 && r->peak_other_growth_bytes >= (1 << 20) &&
      2 * r->peak_other_growth_bytes >= growth)
    snprintf(out[n++], sizeof *out,
             "%+.2f MiB of the %+.2f MiB the process grew from the anchor to "
             "its peak is memory no allocator holds (the program's own "
             "mmaps, mapped files, static data): no allocator model "
             "predicts it",
             mib((double)r->peak_other_growth_bytes), mib((double)growth));
  return n;
}

static void print_json(const compare_result_t *r) {
  printf("{\"run\": %" PRId64 ", \"model\": ", r->measured_run_id);
  cli_json_string(stdout, r->model);
  printf(", \"libc\": ");
  cli_json_string(stdout, r->libc_spec);
  printf(", \"source\": ");
  cli_json_string(stdout, r->source);
  warning_t warn[MAX_WARNINGS];
  size_t    nwarn = compare_warnings(r, warn);
  printf(", \"warnings\": [");
  for (size_t i = 0; i < nwarn; i++) {
    printf("%s", i ? ", " : "");
    cli_json_string(stdout, warn[i]);
  }
  printf("]");
  printf(", \"page_size\": %" PRIu64 ", \"zero_page\": %s, \"thp\": \"%s\"",
         r->page_size, r->zero_page ? "true" : "false", r->thp);
  printf(", \"simulated_run\": %" PRId64 ", \"comparison\": %" PRId64,
         r->simulated_run_id, r->comparison_id);
  printf(", \"baseline\": {\"rule\": \"predicted = simulated + measured(anchor)"
         " - simulated(anchor)\", \"anchor_label\": ");
  cli_json_string(stdout, r->anchor_label);
  printf(", \"anchor_t_ns\": %" PRIu64 ", \"offset_bytes\": %" PRId64
         ", \"startup_offset_bytes\": %" PRId64 "}",
         r->anchor_t_ns, r->offset_bytes, r->offset_bytes);
  printf(", \"peak_measured_rss_bytes\": %" PRIu64
         ", \"peak_predicted_rss_bytes\": %" PRId64
         ", \"final_measured_rss_bytes\": %" PRIu64
         ", \"final_predicted_rss_bytes\": %" PRId64 ", \"marks\": [",
         r->peak_measured_rss_bytes, r->peak_predicted_rss_bytes,
         r->final_measured_rss_bytes, r->final_predicted_rss_bytes);
  for (size_t i = 0; i < r->nmarks; i++) {
    const compare_mark_t *m = &r->marks[i];
    printf("%s{\"label\": ", i ? ", " : "");
    cli_json_string(stdout, m->label);
    printf(", \"t_ns\": %" PRIu64 ", \"measured_rss_bytes\": %" PRIu64, m->t_ns,
           m->measured_rss_bytes);
    if (isfinite(m->error_pct_of_peak))
      printf(", \"predicted_rss_bytes\": %" PRId64 ", \"error_bytes\": %" PRId64
             ", \"error_pct_of_peak\": ",
             m->predicted_rss_bytes, m->error_bytes);
    else
      printf(", \"predicted_rss_bytes\": null, \"error_bytes\": null, "
             "\"error_pct_of_peak\": ");
    json_num(m->error_pct_of_peak);
    if (r->has_other && isfinite(m->error_pct_of_peak)) {
      printf(", \"other_growth_bytes\": %" PRId64
             ", \"allocator_error_bytes\": %" PRId64
             ", \"allocator_error_pct_of_peak\": ",
             m->other_growth_bytes, m->allocator_error_bytes);
      json_num(m->allocator_error_pct_of_peak);
    }
    if (r->nlayouts > 1) {
      if (m->layouts > 0)
        printf(", \"predicted_min_rss_bytes\": %" PRId64
               ", \"predicted_max_rss_bytes\": %" PRId64
               ", \"layouts\": %u, \"measured_in_range\": %s",
               m->predicted_min_rss_bytes, m->predicted_max_rss_bytes,
               m->layouts, inside(m) ? "true" : "false");
      else
        printf(", \"predicted_min_rss_bytes\": null, "
               "\"predicted_max_rss_bytes\": null, \"layouts\": 0, "
               "\"measured_in_range\": null");
    }
    putchar('}');
  }
  if (r->nlayouts > 1) {
    printf("], \"by_layout\": [");
    for (unsigned k = 0; k < r->nlayouts; k++) {
      const compare_layout_t *l = &r->layouts[k];
      printf("%s{\"mmap_offset_bytes\": %" PRIu64 ", \"offset_bytes\": %" PRId64
             ", \"simulated_run\": %" PRId64 ", \"comparison\": %" PRId64
             ", \"mean_abs_error_bytes\": ",
             k ? ", " : "", l->mmap_offset_bytes, l->offset_bytes,
             l->simulated_run_id, l->comparison_id);
      json_num(l->series.mean_abs_error_bytes);
      printf(", \"max_abs_error_bytes\": ");
      json_num(l->series.max_abs_error_bytes);
      putchar('}');
    }
  }
  printf("], \"series\": {\"alignment\": ");
  cli_json_string(stdout, r->alignment);
  printf(", \"points\": %zu, \"mean_abs_error_bytes\": ", r->series.points);
  json_num(r->series.mean_abs_error_bytes);
  printf(", \"median_abs_error_bytes\": ");
  json_num(r->series.median_abs_error_bytes);
  printf(", \"p95_abs_error_bytes\": ");
  json_num(r->series.p95_abs_error_bytes);
  printf(", \"max_abs_error_bytes\": ");
  json_num(r->series.max_abs_error_bytes);
  printf(", \"max_error_t_ns\": %" PRIu64 ", \"max_error_note\": ",
         r->series.max_error_t_ns);
  cli_json_string(stdout, compare_max_note_text(r->series.max_note));
  printf(", \"slope\": ");
  json_num(r->series.slope);
  printf(", \"intercept_bytes\": ");
  json_num(r->series.intercept_bytes);
  printf(", \"r2\": ");
  json_num(r->series.r2);
  printf(", \"samples\": [");
  for (size_t i = 0; i < r->npoints; i++)
    printf("%s[%" PRIu64 ", %" PRIu64 ", %" PRId64 "]", i ? ", " : "",
           r->points[i].t_ns, r->points[i].measured_rss_bytes,
           r->points[i].predicted_rss_bytes);
  printf("]}");
  if (r->has_other) {
    const compare_series_t *a = &r->allocator_series;
    printf(", \"allocator_series\": {\"points\": %zu, "
           "\"median_abs_error_bytes\": ",
           a->points);
    json_num(a->median_abs_error_bytes);
    printf(", \"p95_abs_error_bytes\": ");
    json_num(a->p95_abs_error_bytes);
    printf(", \"mean_abs_error_bytes\": ");
    json_num(a->mean_abs_error_bytes);
    printf(", \"max_abs_error_bytes\": ");
    json_num(a->max_abs_error_bytes);
    printf(", \"max_error_t_ns\": %" PRIu64
           ", \"final_other_growth_bytes\": %" PRId64
           ", \"peak_other_growth_bytes\": %" PRId64 "}",
           a->max_error_t_ns, r->final_other_growth_bytes,
           r->peak_other_growth_bytes);
  }
  printf("}\n");
}

/* The allocator-error columns of a capture (compare.h), or nothing. */
static void other_cols(const compare_result_t *r, const compare_mark_t *m,
                       bool header) {
  if (!r->has_other)
    return;
  if (header)
    printf(" %11s %11s", "other+ MiB", "alloc err %");
  else if (isfinite(m->error_pct_of_peak))
    printf(" %+11.2f %+10.2f%%", mib((double)m->other_growth_bytes),
           m->allocator_error_pct_of_peak);
  else
    printf(" %11s %11s", "-", "-");
}

/* Whether every layout predicted every mark alike (a model whose
 * prediction does not depend on the layout). */
static bool layouts_agree(const compare_result_t *r) {
  for (size_t i = 0; i < r->nmarks; i++)
    if (r->marks[i].predicted_min_rss_bytes !=
        r->marks[i].predicted_max_rss_bytes)
      return false;
  return true;
}

/* Marks before the anchor measure start-up, which no trace explains: their
 * error is shown but is not the model's (compare.h, baseline rule). */
static void before_anchor_note(const compare_result_t *r,
                               const compare_mark_t   *m) {
  if (r->anchor_label[0] != '\0' && m->t_ns < r->anchor_t_ns)
    printf("  before the anchor: start-up, not model error");
}

/* The marks table of a single replay. */
static void print_marks(const compare_result_t *r) {
  printf("\n%-24s %12s %12s %12s %10s", "mark", "measured MiB", "predicted MiB",
         "error MiB", "% of peak");
  other_cols(r, NULL, true);
  putchar('\n');
  for (size_t i = 0; i < r->nmarks; i++) {
    const compare_mark_t *m = &r->marks[i];
    if (isfinite(m->error_pct_of_peak))
      printf("%-24.24s %12.2f %12.2f %+12.2f %+9.2f%%", m->label,
             mib((double)m->measured_rss_bytes),
             mib((double)m->predicted_rss_bytes), mib((double)m->error_bytes),
             m->error_pct_of_peak);
    else
      printf("%-24.24s %12.2f %12s %12s %10s", m->label,
             mib((double)m->measured_rss_bytes), "-", "-", "-");
    other_cols(r, m, false);
    before_anchor_note(r, m);
    putchar('\n');
  }
}

/* The marks table with layouts: the mean, the range over layouts, and
 * whether the measurement falls in it. */
static void print_layout_marks(const compare_result_t *r) {
  printf("\n%-24s %12s %12s %19s %10s %10s %7s", "mark", "measured MiB",
         "mean MiB", "min-max MiB", "error MiB", "% of peak", "inside");
  other_cols(r, NULL, true);
  putchar('\n');
  for (size_t i = 0; i < r->nmarks; i++) {
    const compare_mark_t *m = &r->marks[i];
    if (m->layouts > 0) {
      char range[48];
      snprintf(range, sizeof range, "%.2f-%.2f",
               mib((double)m->predicted_min_rss_bytes),
               mib((double)m->predicted_max_rss_bytes));
      printf("%-24.24s %12.2f %12.2f %19s %+10.2f %+9.2f%% %7s", m->label,
             mib((double)m->measured_rss_bytes),
             mib((double)m->predicted_rss_bytes), range,
             mib((double)m->error_bytes), m->error_pct_of_peak,
             inside(m) ? "yes" : "no");
    } else
      printf("%-24.24s %12.2f %12s %19s %10s %10s %7s", m->label,
             mib((double)m->measured_rss_bytes), "-", "-", "-", "-", "-");
    other_cols(r, m, false);
    before_anchor_note(r, m);
    putchar('\n');
  }
}

static void print_table(const compare_result_t *r, const char *db) {
  printf("measured run  %" PRId64 "\nreplayed      %s\nmodel         %s\n"
         "libc          %s\npage size     %" PRIu64 " bytes\n",
         r->measured_run_id, r->source, r->model,
         composed(r) ? r->libc_spec : "(the model: no composition)",
         r->page_size);
  warning_t warn[MAX_WARNINGS];
  size_t    nwarn = compare_warnings(r, warn);
  for (size_t i = 0; i < nwarn; i++)
    printf("warning       %s\n", warn[i]);
  printf("read faults   %s\n", r->zero_page
                                   ? "the shared zero page (not in RSS)"
                                   : "a page each (no shared zero page)");
  printf("THP           %s\n", r->thp);
  printf("kernel        %s: %s\n", r->kernel[0] ? r->kernel : "unknown",
         sim_kernel_thp_align_name(r->thp_align));
  if (r->mmap_top != 0)
    printf("mmap top      0x%" PRIx64 " (the measured process's next "
           "mapping, probed)\n",
           r->mmap_top);
  bool agree = r->nlayouts > 1 && layouts_agree(r);
  if (r->nlayouts > 1 && !agree) {
    printf("layouts       %u, mmap_top lowered by", r->nlayouts);
    for (unsigned k = 0; k < r->nlayouts; k++)
      printf("%s %" PRIu64, k ? "," : "", r->layouts[k].mmap_offset_bytes);
    printf(" bytes (distinct modulo the %d-byte pymalloc pool)\n",
           COMPARE_LAYOUT_SPAN_BYTES);
  }
  printf("baseline      predicted = simulated + (measured - simulated) at the "
         "anchor\n              anchor %s%s%s at t=%.3f ms\n"
         "start-up      offset %+.2f MiB (what the program holds outside the "
         "trace at the anchor; not model error)",
         r->anchor_label[0] ? "mark '" : "first measured sample",
         r->anchor_label, r->anchor_label[0] ? "'" : "",
         (double)r->anchor_t_ns / 1e6, mib((double)r->offset_bytes));
  if (r->nlayouts > 1) {
    int64_t lo = r->layouts[0].offset_bytes, hi = lo;
    for (unsigned k = 1; k < r->nlayouts; k++) {
      lo = r->layouts[k].offset_bytes < lo ? r->layouts[k].offset_bytes : lo;
      hi = r->layouts[k].offset_bytes > hi ? r->layouts[k].offset_bytes : hi;
    }
    if (lo != hi)
      printf(" (mean; %+.2f to %+.2f MiB by layout)", mib((double)lo),
             mib((double)hi));
  }
  putchar('\n');
  if (r->skipped_events)
    printf("skipped       %" PRIu64 " frees/reallocs of unknown objects "
           "(baseline objects)\n",
           r->skipped_events);
  if (agree)
    printf("layouts       all %u (mmap_top lowered by 0..%u pages) predict "
           "every mark alike\n",
           r->nlayouts, r->nlayouts - 1);
  if (r->nlayouts > 1 && !agree)
    print_layout_marks(r);
  else
    print_marks(r);
  printf("\nseries (%s, %zu points, peak measured %.2f MiB", r->alignment,
         r->series.points, mib((double)r->peak_measured_rss_bytes));
  if (r->nlayouts > 1)
    printf(", mean of %u layouts", r->nlayouts);
  printf(")\n");
  printf("  |error|       median %.3f MiB, p95 %.3f MiB, mean %.3f MiB\n",
         mib(r->series.median_abs_error_bytes),
         mib(r->series.p95_abs_error_bytes),
         mib(r->series.mean_abs_error_bytes));
  printf("  max |error|   %.3f MiB at t=%.3f ms%s%s\n",
         mib(r->series.max_abs_error_bytes),
         (double)r->series.max_error_t_ns / 1e6,
         r->series.max_note != COMPARE_MAX_PLAIN ? ": " : "",
         compare_max_note_text(r->series.max_note));
  printf("  peak          measured %.2f MiB, predicted %.2f MiB\n"
         "  final         measured %.2f MiB, predicted %.2f MiB\n",
         mib((double)r->peak_measured_rss_bytes),
         mib((double)r->peak_predicted_rss_bytes),
         mib((double)r->final_measured_rss_bytes),
         mib((double)r->final_predicted_rss_bytes));
  if (isfinite(r->series.slope) && isfinite(r->series.r2))
    printf("  fit           predicted = %.4f * measured %+.3f MiB, R^2 %.4f\n",
           r->series.slope, mib(r->series.intercept_bytes), r->series.r2);
  else if (isfinite(r->series.slope))
    printf("  fit           undefined: the prediction does not change\n");
  else
    printf("  fit           undefined (fewer than 3 points or no variance)\n");
  if (r->has_other)
    printf("  other         memory no allocator holds (code and files mapped, "
           "static data, the main stack, the program's own mmaps) grew "
           "%+.2f MiB from the anchor to the end, measured\n"
           "  allocator     |error| median %.3f MiB, p95 %.3f MiB, max %.3f "
           "MiB, that growth added to the prediction\n",
           mib((double)r->final_other_growth_bytes),
           mib(r->allocator_series.median_abs_error_bytes),
           mib(r->allocator_series.p95_abs_error_bytes),
           mib(r->allocator_series.max_abs_error_bytes));
  if (r->nlayouts > 1 && !agree) {
    printf("\nby layout (each with its own offset)\n");
    for (unsigned k = 0; k < r->nlayouts; k++) {
      const compare_layout_t *l = &r->layouts[k];
      printf("  mmap_top -%-6" PRIu64 " offset %+.2f MiB, mean |error| %.3f "
             "MiB, max |error| %.3f MiB",
             l->mmap_offset_bytes, mib((double)l->offset_bytes),
             mib(l->series.mean_abs_error_bytes),
             mib(l->series.max_abs_error_bytes));
      if (l->simulated_run_id > 0)
        printf("; stored run %" PRId64 ", comparison %" PRId64,
               l->simulated_run_id, l->comparison_id);
      putchar('\n');
    }
    if (r->simulated_run_id > 0)
      printf("\nstored %u simulated runs and comparisons in %s\n", r->nlayouts,
             db);
  } else if (r->simulated_run_id > 0)
    printf("\nstored %u simulated run(s), first %" PRId64 ", and "
           "comparison(s), first %" PRId64 ", in %s\n",
           r->nlayouts, r->simulated_run_id, r->comparison_id, db);
}

static int compare_main(int argc, char **argv) {
  const char    *db = NULL, *run_s = NULL;
  compare_opts_t o = {.store = true};
  bool           json = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    int         took;
    if ((took = cli_opt_value("compare", argc, argv, &i, "--db", &db)) ||
        (took =
             cli_opt_value("compare", argc, argv, &i, "--model", &o.model)) ||
        (took = cli_opt_value("compare", argc, argv, &i, "--libc", &o.libc))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
    } else if ((took = cli_opt_value("compare", argc, argv, &i, "--page-size",
                                     &v)) != 0) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (!as_parse_page_size(v, &o.page_size))
        return cli_usage_error("compare",
                               "--page-size expects 4096, 16384 "
                               "or 65536 (4K, 16K, 64K), got '%s'",
                               v);
    } else if ((took = cli_opt_value("compare", argc, argv, &i, "--layouts",
                                     &v)) != 0) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      uint64_t n;
      if (as_parse_number(v, strlen(v), NULL, &n) != AS_NUM_OK || n < 1 ||
          n > COMPARE_MAX_LAYOUTS)
        return cli_usage_error("compare",
                               "--layouts expects 1 to %d (the 16 KiB "
                               "pymalloc pool over the OS page), got '%s'",
                               COMPARE_MAX_LAYOUTS, v);
      o.layouts = (unsigned)n;
    } else if ((took = cli_opt_flag("compare", argv, i, "--json"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      json = true;
    } else if ((took = cli_opt_value("compare", argc, argv, &i, "--kernel",
                                     &v)) != 0) {
      if (took < 0 || cli_kernel_release_check("compare", v) < 0)
        return CLI_EXIT_USAGE;
      o.kernel = v;
    } else if ((took = cli_opt_flag("compare", argv, i, "--no-zero-page"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.no_zero_page = true;
    } else if ((took = cli_opt_flag("compare", argv, i, "--no-store"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.store = false;
    } else if (a[0] == '-')
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
  char *end;
  errno = 0;
  long long id = strtoll(run_s, &end, 10);
  if (*end != '\0' || end == run_s || id <= 0 || errno == ERANGE)
    return cli_usage_error("compare", "expected a positive run id, got '%s'",
                           run_s);
  /* Without --model a C run's --libc names its model (analysis/compare.c);
   * beside a --model that serves malloc itself it would be ignored. */
  as_err_t why = {0};
  if (o.model != NULL && cli_libc_check(o.model, o.libc, &why) != AS_OK)
    return cli_usage_error("compare", "%s", why.msg);
  if (o.page_size != 0 && o.layouts > 1 &&
      o.layouts > COMPARE_LAYOUT_SPAN_BYTES / o.page_size)
    return cli_usage_error("compare",
                           "--layouts %u: with %" PRIu64 "-byte pages at "
                           "most %" PRIu64 " layouts differ modulo the "
                           "16 KiB pymalloc pool",
                           o.layouts, o.page_size,
                           o.page_size >= COMPARE_LAYOUT_SPAN_BYTES
                               ? (uint64_t)1
                               : COMPARE_LAYOUT_SPAN_BYTES / o.page_size);
  o.command = cli_command_line(argc, argv);

  as_err_t         err = {0};
  store_t         *s = NULL;
  compare_result_t res;
  if (store_open_existing(db, &s, &err) != AS_OK)
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
        "                        [--page-size N] [--layouts N] "
        "[--no-zero-page]\n"
        "                        [--kernel RELEASE] [--no-store] [--json]\n"
        "\n"
        "Replays measured run RUN (its trace, or the workload named by its\n"
        "'workload' provenance) and compares predicted with measured RSS at\n"
        "every mark and over the time series (a trace's rss events in order\n"
        "for a trace, marks by label for a workload).\n"
        "The baseline is anchored at the mark '__main__' (CPython: end of\n"
        "start-up), 'main' (C: entry to main), 'hooked', or the first\n"
        "sample; the start-up offset is reported apart from the error.\n"
        "The series gives median, p95 and max |error|, the time of the max\n"
        "and whether it sits on a steep change one sample apart or next to\n"
        "a trim or purge.\n"
        "\n"
        "Model: --model, else cpython for Python runs, else the LD_PRELOAD'd\n"
        "allocator if modelled, else glibc.  libc: --libc, else glibc with "
        "the\n"
        "run's MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_, "
        "MALLOC_TRIM_THRESHOLD_,\n"
        "MALLOC_TOP_PAD_ (or GLIBC_TUNABLES) as arena_max, mmap_threshold,\n"
        "trim_threshold, top_pad.\n"
        "\n"
        "Kernel: the run's page size (--page-size to change it), and reads\n"
        "of memory never written map the shared zero page (not in RSS)\n"
        "unless the run's provenance says the measured kernel gave each\n"
        "read fault a page of its own (zero_page=false, which capture and\n"
        "oracle record) or --no-zero-page is given.  The run's THP mode\n"
        "(thp) decides which 2 MiB blocks fault in whole, its mmap_top\n"
        "where mappings start, and its kernel release (--kernel RELEASE\n"
        "to change it, e.g. 6.1, 6.8, 6.12) whether large anonymous\n"
        "mappings are placed 2 MiB-aligned, as Linux does since 6.7, and\n"
        "whether a whole-block MADV_DONTNEED frees the emptied page\n"
        "table, so that the block can fault in a huge page again (6.14+).\n"
        "\n"
        "Baseline: measured RSS includes the program's baseline (interpreter,\n"
        "libraries), which no trace explains.  predicted = simulated +\n"
        "measured(anchor) - simulated(anchor), the start-up offset, printed\n"
        "apart from the error.\n"
        "\n"
        "Statistics: median, p95, mean and max |error|, and the fit of\n"
        "predicted on measured (slope, intercept, R^2; GSL).  The simulated "
        "run\n"
        "and a comparisons row are stored in DB unless --no-store.\n"
        "\n"
        "Layouts: ASLR decides where mmap puts things, and so which pymalloc\n"
        "arenas are 16 KiB aligned (64 pools, not 63).  --layouts N (default\n"
        "all: 4) replays the run N times with the simulated mmap_top lowered "
        "by\n"
        "0, 1, ..., N-1 OS pages (as sweep --vary mmap_offset); offsets\n"
        "repeat modulo the 16 KiB pool, so N is at most 16384 / page size\n"
        "(4 with 4 KiB pages).  Each layout has its own baseline offset;\n"
        "marks show the mean prediction, its min-max over layouts and\n"
        "whether the measurement lies inside; the series statistics use the\n"
        "mean.  Unless --no-store, each layout's simulated run and\n"
        "comparisons row (its own statistics) are stored.  A capture of\n"
        "CPython records where each pymalloc arena went (option\n"
        "placed.pymalloc): its arenas keep the interpreter's alignment in\n"
        "every layout, and only the other mappings move.\n"
        "\n"
        "--json prints {run, model, marks:[{label, measured_rss_bytes,\n"
        "predicted_rss_bytes, error_bytes, error_pct_of_peak}], series:\n"
        "{mean_abs_error_bytes, max_abs_error_bytes, slope, r2, ...}, ...}\n"
        "With --layouts N > 1, each mark adds predicted_min_rss_bytes,\n"
        "predicted_max_rss_bytes, layouts and measured_in_range, and\n"
        "by_layout lists each layout's mmap_offset_bytes, offset_bytes,\n"
        "simulated_run, comparison and errors.\n",
    .run = compare_main,
};
