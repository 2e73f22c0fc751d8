/* cli/cmd_explain.c -- `allocsim explain TRACE|RUN`: what holds memory at a
 * mark and why (analysis/explain.h). */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../analysis/explain.h"

#define MIB (1024.0 * 1024.0)

static void print_json(const char *source, const char *model,
                       const explain_result_t *r, size_t n) {
  printf("{\"source\": ");
  cli_json_string(stdout, source);
  printf(", \"model\": ");
  cli_json_string(stdout, model);
  printf(", \"instants\": [");
  for (size_t i = 0; i < n; i++) {
    printf("%s{\"mark\": ", i ? ", " : "");
    cli_json_string(stdout, r[i].label);
    printf(", \"t_ns\": %" PRIu64 ", \"rss_bytes\": %" PRIu64
           ", \"live_bytes\": %" PRIu64 ", \"items\": [",
           r[i].t_ns, r[i].rss_bytes, r[i].live_bytes);
    for (size_t k = 0; k < r[i].nitems; k++) {
      const explain_item_t *it = &r[i].items[k];
      printf("%s{\"mechanism\": ", k ? ", " : "");
      cli_json_string(stdout, it->mechanism);
      printf(", \"bytes\": %" PRIu64 ", \"objects\": %" PRIu64
             ", \"units\": %" PRIu64 ", \"live\": %s, \"releasable\": %s"
             ", \"sentence\": ",
             it->bytes, it->objects, it->units, it->live ? "true" : "false",
             it->releasable ? "true" : "false");
      cli_json_string(stdout, it->sentence);
      printf(", \"allocated_in\": ");
      cli_json_string(stdout, it->allocated_in);
      printf("}");
    }
    printf("]}");
  }
  printf("]}\n");
}

static void print_text(const char *source, const char *model,
                       const explain_result_t *r, size_t n) {
  printf("source     %s\nmodel      %s\n", source, model);
  for (size_t i = 0; i < n; i++) {
    printf("\n%s (t=%.3f ms): rss %.2f MiB, live %.2f MiB\n\n",
           strcmp(r[i].label, "end") == 0 ? "at the end" : "at mark",
           (double)r[i].t_ns / 1e6, (double)r[i].rss_bytes / MIB,
           (double)r[i].live_bytes / MIB);
    if (strcmp(r[i].label, "end") != 0)
      printf("mark       %s\n", r[i].label);
    printf("%9s %7s  %s\n", "MiB", "of RSS", "what holds it");
    for (size_t k = 0; k < r[i].nitems; k++) {
      const explain_item_t *it = &r[i].items[k];
      printf("%9.2f %6.1f%%  %s\n", (double)it->bytes / MIB,
             r[i].rss_bytes ? 100.0 * (double)it->bytes / (double)r[i].rss_bytes
                            : 0.0,
             it->sentence);
    }
  }
}

static int explain_main(int argc, char **argv) {
  explain_opts_t  o = {0};
  replay_target_t e = {0};
  const char     *db = NULL, *what = NULL, *v;
  bool            json = false;
  sim_kernel_config_default(&o.kernel);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int         took;
    if ((took = cli_opt_value("explain", argc, argv, &i, "--db", &db)) ||
        (took =
             cli_opt_value("explain", argc, argv, &i, "--model", &o.model)) ||
        (took = cli_opt_value("explain", argc, argv, &i, "--libc", &o.libc)) ||
        (took = cli_opt_value("explain", argc, argv, &i, "--at", &o.at))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
    } else if ((took = cli_opt_value("explain", argc, argv, &i, "--page-size",
                                     &v)) != 0) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (!as_parse_page_size(v, &o.kernel.page_size))
        return cli_usage_error("explain",
                               "--page-size expects 4096, 16384 "
                               "or 65536, got '%s'",
                               v);
    } else if ((took = cli_opt_flag("explain", argv, i, "--json"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      json = true;
    } else if ((took = cli_opt_flag("explain", argv, i, "--lenient"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.lenient = true;
    } else if (a[0] == '-' && strcmp(a, "-") != 0) {
      return cli_usage_error("explain", "unknown option '%s'", a);
    } else if (what == NULL) {
      what = a;
    } else {
      return cli_usage_error("explain",
                             "one trace or run at a time, got "
                             "'%s' too",
                             a);
    }
  }
  if (what == NULL)
    return cli_usage_error("explain", "which trace or run? give a file, or "
                                      "a run id with --db");
  as_err_t err = {0};
  if (replay_target_open(&e, what, db, &err) != AS_OK)
    return cli_fail("explain", &err);
  char        model[512], libc[256], desc[512];
  as_status_t rc =
      replay_target_specs(&e, model, sizeof model, libc, sizeof libc, &err);
  explain_result_t *r = calloc(2, sizeof *r);
  size_t            n = 0;
  if (r == NULL)
    rc = as_err_set(&err, AS_ENOMEM, "out of memory");
  if (rc == AS_OK) {
    if (o.model == NULL)
      o.model = model;
    if (o.libc == NULL)
      o.libc = libc;
    if (o.model == model && o.libc == libc)
      rc = replay_target_check_specs(&e, model, libc, &o.kernel, &err);
    if (rc == AS_OK)
      rc = explain_trace(&o, replay_target_source, &e, r, &n, desc, sizeof desc,
                         &err);
  }
  if (rc == AS_OK) {
    const char *source = replay_target_name(&e);
    if (json)
      print_json(source, desc, r, n);
    else
      print_text(source, desc, r, n);
  }
  free(r);
  replay_target_close(&e);
  return rc == AS_OK ? CLI_EXIT_OK : cli_fail("explain", &err);
}

const cli_command_t cli_cmd_explain = {
    .name = "explain",
    .summary = "what holds memory at a mark, and what would release it",
    .usage =
        "usage: allocsim explain TRACE|RUN [--db FILE] [--model SPEC]\n"
        "                        [--libc SPEC] [--at MARK] [--page-size N]\n"
        "                        [--lenient] [--json]\n\n"
        "Replays a trace file (or the recorded run RUN of the store --db)\n"
        "and attributes every resident byte to what holds it: the program's\n"
        "live objects, the allocator's overhead on them, and free memory by\n"
        "the mechanism that keeps it (a free chunk below a live one, a\n"
        "pymalloc arena pinned by a few objects, a tcache, ...), with the\n"
        "objects pinning it, the phases they were allocated in (after which\n"
        "mark), and what would release it.  The items add up to RSS.\n"
        "Without --at: the end, and the mark where RSS exceeds live bytes\n"
        "the most.\n\n"
        "options:\n"
        "  --db FILE       the store holding run RUN\n"
        "  --model SPEC    model (default: what the trace's or run's\n"
        "                  provenance implies, as compare picks it)\n"
        "  --libc SPEC     the libc model of a composition\n"
        "  --at MARK       explain at this mark (its first occurrence)\n"
        "  --page-size N   OS page size: 4096, 16384 or 65536\n"
        "  --lenient       count and skip frees of dead objects\n"
        "  --json          {\"instants\": [{\"mark\", \"rss_bytes\", "
        "\"live_bytes\",\n"
        "                  \"items\": [{\"mechanism\", \"bytes\", "
        "\"objects\",\n"
        "                  \"sentence\", \"allocated_in\", ...}]}]}; items'\n"
        "                  bytes add up to rss_bytes\n",
    .run = explain_main,
};
