/* cli/cmd_advise.c -- `allocsim advise TRACE|RUN`: every remedy that applies,
 * simulated and ranked by the memory it saves (analysis/advise.h). */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../analysis/advise.h"

#define MIB (1024.0 * 1024.0)

static void print_json(const char *source, const advise_result_t *r) {
  printf("{\"source\": ");
  cli_json_string(stdout, source);
  printf(", \"model\": ");
  cli_json_string(stdout, r->model);
  printf(", \"libc\": ");
  cli_json_string(stdout, r->libc);
  printf(", \"layouts\": 1, \"max_threads\": %" PRIu32 ", \"mark\": ",
         r->max_threads);
  cli_json_string(stdout, r->mark);
  printf(", \"at_end\": %s", r->at_end ? "true" : "false");
  printf(", \"baseline\": {\"rss_bytes_at_mark\": %" PRIu64
         ", \"rss_bytes_at_end\": %" PRIu64 ", \"peak_rss_bytes\": %" PRIu64,
         r->baseline.rss_at_mark, r->baseline.rss_at_end, r->baseline.peak_rss);
  if (r->has_measured)
    printf(", \"measured_rss_bytes_at_mark\": %" PRIu64, r->measured_at_mark);
  printf("}, \"remedies\": [");
  for (size_t i = 0; i < r->n; i++) {
    const advise_remedy_t *x = &r->remedies[i];
    printf("%s{\"name\": ", i ? ", " : "");
    cli_json_string(stdout, x->name);
    printf(", \"env_or_call\": ");
    cli_json_string(stdout, x->env_or_call);
    printf(", \"model\": ");
    cli_json_string(stdout, x->model);
    printf(", \"libc\": ");
    cli_json_string(stdout, x->libc);
    if (!x->ok) {
      printf(", \"ok\": false, \"error\": ");
      cli_json_string(stdout, x->error);
      printf("}");
      continue;
    }
    printf(", \"ok\": true, \"saving_bytes_at_mark\": %" PRId64
           ", \"saving_bytes_at_end\": %" PRId64
           ", \"saving_bytes_at_peak\": %" PRId64
           ", \"extra_syscalls\": %" PRId64 ", \"extra_faults\": %" PRId64
           ", \"extra_cost_ns\": %" PRId64,
           x->saving_at_mark, x->saving_at_end, x->saving_at_peak,
           x->extra_syscalls, x->extra_faults, x->extra_cost_ns);
    if (x->timing.decides) {
      printf(", \"timing\": {\"previous_mark\": ");
      cli_json_string(stdout, x->timing.prev_mark);
      printf(", \"previous_mark_before_mark_ns\": %" PRIu64
             ", \"last_call_before_mark_ns\": %" PRIu64
             ", \"saving_bytes_at_mark_no_call_between\": %" PRId64 "}",
             x->timing.prev_before_ns, x->timing.call_before_ns,
             x->timing.saving_at_mark);
    }
    printf("}");
  }
  printf("]}\n");
}

/* The remedy column's width: the longest name, whole ("PYTHONMALLOC=malloc
 * + malloc_trim(0) at after_dict" was cut at 44 characters). */
static int remedy_name_width(const advise_result_t *r) {
  size_t w = strlen("remedy");
  for (size_t i = 0; i < r->n; i++)
    if (strlen(r->remedies[i].name) > w)
      w = strlen(r->remedies[i].name);
  return (int)w;
}

static void print_text(const char *source, uint64_t page_size,
                       const advise_result_t *r) {
  const advise_outcome_t *b = &r->baseline;
  cli_print_model_header(source, r->model, r->libc);
  cli_print_one_layout(page_size);
  if (r->at_end)
    printf("judged at  the end: RSS %.2f MiB (peak %.2f MiB)\n",
           (double)b->rss_at_end / MIB, (double)b->peak_rss / MIB);
  else
    printf("judged at  mark '%s': RSS %.2f MiB (end %.2f MiB, peak %.2f "
           "MiB)\n",
           r->mark, (double)b->rss_at_mark / MIB, (double)b->rss_at_end / MIB,
           (double)b->peak_rss / MIB);
  if (r->has_measured) /* the remedies are not simulated on the rest */
    cli_print_measured(r->measured_at_mark, b->rss_at_mark,
                       "; savings are of the simulated RSS");
  printf("\n");
  int w = remedy_name_width(r);
  printf("%4s  %-*s %10s %7s %10s %10s %9s %9s %9s\n", "rank", w, "remedy",
         "saving MiB", "of RSS", "at end", "at peak", "+syscalls", "+faults",
         "+cost ms");
  for (size_t i = 0; i < r->n; i++) {
    const advise_remedy_t *x = &r->remedies[i];
    /* Combinations come after every single change, whatever they save: a
     * saving ranked last is not a small one. */
    if (x->changes > 1 && (i == 0 || r->remedies[i - 1].changes == 1))
      printf("%4s  two changes at once, ranked after the single ones:\n", "");
    if (!x->ok) {
      printf("%4s  %-*s failed: %s\n", "-", w, x->name, x->error);
      continue;
    }
    printf("%4zu  %-*s %10.2f %6.1f%% %10.2f %10.2f %9" PRId64 " %9" PRId64
           " %9.2f\n",
           i + 1, w, x->name, (double)x->saving_at_mark / MIB,
           b->rss_at_mark
               ? 100.0 * (double)x->saving_at_mark / (double)b->rss_at_mark
               : 0.0,
           (double)x->saving_at_end / MIB, (double)x->saving_at_peak / MIB,
           x->extra_syscalls, x->extra_faults, (double)x->extra_cost_ns / 1e6);
  }
  printf("\nhow:\n");
  for (size_t i = 0; i < r->n; i++)
    if (r->remedies[i].ok)
      printf("  %-*s %s\n", w, r->remedies[i].name, r->remedies[i].env_or_call);
  for (size_t i = 0; i < r->n; i++) {
    const advise_remedy_t *x = &r->remedies[i];
    if (x->ok && x->timing.decides)
      printf("\ntiming     %s: its call %.1f ms before '%s' fell after '%s' "
             "(%.1f ms before it); with the calls shifted so that none falls "
             "between the two marks it saves %.2f MiB there, not %.2f: when a "
             "real program's calls fall (its timer thread's start, a "
             "capture's slowdown) decides\n",
             x->name, (double)x->timing.call_before_ns / 1e6, r->mark,
             x->timing.prev_mark, (double)x->timing.prev_before_ns / 1e6,
             (double)x->timing.saving_at_mark / MIB,
             (double)x->saving_at_mark / MIB);
  }
  if (r->max_threads > 1)
    printf("\nthreads    up to %" PRIu32 " at once: a remedy that changes how "
           "they contend (arena counts, another allocator) is simulated with "
           "the order their calls had when the trace was recorded, which it "
           "changes in the real program; confirm it by capturing the program "
           "under it (docs/validation.md)\n",
           r->max_threads);
}

static int advise_main(int argc, char **argv) {
  explain_opts_t  o = {0};
  replay_target_t t = {0};
  const char     *db = NULL, *what = NULL, *v;
  bool            json = false;
  sim_kernel_config_default(&o.kernel);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int         took;
    if ((took = cli_opt_value("advise", argc, argv, &i, "--db", &db)) ||
        (took = cli_opt_value("advise", argc, argv, &i, "--model", &o.model)) ||
        (took = cli_opt_value("advise", argc, argv, &i, "--libc", &o.libc)) ||
        (took = cli_opt_value("advise", argc, argv, &i, "--at", &o.at))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
    } else if ((took = cli_opt_value("advise", argc, argv, &i, "--page-size",
                                     &v)) != 0) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (!as_parse_page_size(v, &o.kernel.page_size))
        return cli_usage_error("advise",
                               "--page-size expects 4096, 16384 "
                               "or 65536, got '%s'",
                               v);
    } else if ((took = cli_opt_value("advise", argc, argv, &i, "--settle",
                                     &v)) != 0) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (!as_parse_duration_ns(v, &o.settle_ns))
        return cli_usage_error("advise",
                               "--settle expects a duration such "
                               "as 10s, got '%s'",
                               v);
    } else if ((took = cli_opt_flag("advise", argv, i, "--json"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      json = true;
    } else if ((took = cli_opt_flag("advise", argv, i, "--lenient"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.lenient = true;
    } else if (a[0] == '-' && strcmp(a, "-") != 0) {
      return cli_usage_error("advise", "unknown option '%s'", a);
    } else if (what == NULL) {
      what = a;
    } else {
      return cli_usage_error("advise",
                             "one trace or run at a time, got "
                             "'%s' too",
                             a);
    }
  }
  if (what == NULL)
    return cli_usage_error("advise", "which trace or run? give a file, or a "
                                     "run id with --db");
  as_err_t         err = {0};
  advise_result_t *r = calloc(1, sizeof *r);
  char             model[512], libc[256];
  as_status_t      rc = r == NULL ? as_err_set(&err, AS_ENOMEM, "out of memory")
                                  : replay_target_open(&t, what, db, &err);
  if (rc == AS_OK)
    rc = replay_target_specs(&t, o.model, o.libc, model, sizeof model, libc,
                             sizeof libc, &err);
  if (rc == AS_OK) {
    rc = cli_target_specs(&t, &o, model, sizeof model, libc, sizeof libc, &err);
    if (rc == AS_OK)
      rc = advise_trace(&o, replay_target_source, &t, r, &err);
  }
  if (rc == AS_OK) {
    if (json)
      print_json(replay_target_name(&t), r);
    else
      print_text(replay_target_name(&t), o.kernel.page_size, r);
  }
  free(r);
  replay_target_close(&t);
  return rc == AS_OK ? CLI_EXIT_OK : cli_fail("advise", &err);
}

const cli_command_t cli_cmd_advise = {
    .name = "advise",
    .summary = "simulate every remedy that applies and rank them",
    .usage =
        "usage: allocsim advise TRACE|RUN [--db FILE] [--model SPEC]\n"
        "                       [--libc SPEC] [--at MARK] [--settle T]\n"
        "                       [--page-size N] [--lenient] [--json]\n\n"
        "Replays a trace (or the recorded run RUN of the store --db) as it\n"
        "is, then once per remedy that applies to its allocator: calling\n"
        "malloc_trim(0) at the mark or every second, MALLOC_ARENA_MAX=1/2,\n"
        "the mmap and trim thresholds, PYTHONMALLOC=malloc, preloading\n"
        "jemalloc, mimalloc or tcmalloc with default and aggressive settings,\n"
        "their purges and decay knobs.  Ranks single changes, then\n"
        "combinations, each by the RSS they save at the mark, and reports\n"
        "the saving at the end and at the peak and the cost: extra system\n"
        "calls, page faults and their time in the cost model.  Without\n"
        "--at, the mark or the trace's end where RSS exceeds live bytes\n"
        "the most.  One address layout, the default: replay, run and sweep\n"
        "average the layouts ASLR gives (4 with 4 KiB pages), so their RSS\n"
        "can differ by the layout; replay --layouts 1 gives this one.\n\n"
        "options:\n"
        "  --db FILE       the store holding run RUN\n"
        "  --model SPEC    model (default: what the provenance implies)\n"
        "  --libc SPEC     the libc model of a composition\n"
        "  --at MARK       judge the remedies at this mark\n"
        "  --settle T      run the clock on after the trace (decay policies)\n"
        "  --page-size N   OS page size: 4096, 16384 or 65536\n"
        "  --lenient       count and skip frees of dead objects\n"
        "  --json          {\"mark\", \"at_end\", \"remedies\": [{\"name\",\n"
        "                  \"env_or_call\", \"saving_bytes_at_mark\",\n"
        "                  \"saving_bytes_at_end\", \"saving_bytes_at_peak\",\n"
        "                  \"extra_syscalls\", \"extra_faults\", ...}]}, best\n"
        "                  first\n",
    .run = advise_main,
};
