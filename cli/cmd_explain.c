/* cli/cmd_explain.c -- `allocsim explain TRACE|RUN`: what holds memory at a
 * mark and why (analysis/explain.h). */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../analysis/explain.h"

#define MIB (1024.0 * 1024.0)

static void print_sites_json(const explain_result_t *r) {
  printf(", \"sites_total\": %zu, \"unpinned_bytes\": %" PRIu64
         ", \"sites\": [",
         r->sites_total, r->unpinned_bytes);
  for (size_t k = 0; k < r->nsites; k++) {
    const explain_site_t *e = &r->sites[k];
    printf("%s{\"site\": %" PRIu64 ", \"function\": ", k ? ", " : "", e->site);
    cli_json_string(stdout, e->function);
    printf(", \"frames\": [");
    for (uint32_t f = 0; f < e->nframes; f++) {
      printf("%s", f ? ", " : "");
      cli_json_string(stdout, e->frame[f]);
    }
    printf("], \"live_bytes\": %" PRIu64 ", \"live_objects\": %" PRIu64
           ", \"retained_bytes\": %" PRIu64 "}",
           e->live_bytes, e->live_objects, e->retained_bytes);
  }
  printf("]");
}

static void print_sites_text(const explain_result_t *r) {
  printf("\nby call site: %zu of %zu sites with live objects, most retained "
         "first\n",
         r->nsites, r->sites_total);
  if (!r->has_sites)
    printf("(no call site recorded up to here: capture with --stacks N)\n");
  printf("%9s %9s %9s  %s\n", "kept MiB", "live MiB", "objects",
         "call site (innermost frame first)");
  for (size_t k = 0; k < r->nsites; k++) {
    const explain_site_t *e = &r->sites[k];
    printf("%9.2f %9.2f %9" PRIu64 "  ", (double)e->retained_bytes / MIB,
           (double)e->live_bytes / MIB, e->live_objects);
    if (e->nframes == 0)
      printf("(no call site recorded)\n");
    for (uint32_t f = 0; f < e->nframes; f++)
      printf("%s%s\n", f ? "                                 " : "",
             e->frame[f]);
  }
  if (r->unpinned_bytes != 0)
    printf("%9.2f %9s %9s  (in units with no live object: no site pins "
           "it)\n",
           (double)r->unpinned_bytes / MIB, "-", "-");
}

static void print_json(const char *source, const char *model, const char *libc,
                       const explain_result_t *r, size_t n) {
  printf("{\"source\": ");
  cli_json_string(stdout, source);
  printf(", \"model\": ");
  cli_json_string(stdout, model);
  if (model_spec_composes(model) && libc != NULL && libc[0]) {
    printf(", \"libc\": ");
    cli_json_string(stdout, libc);
  }
  printf(", \"layouts\": 1, \"instants\": [");
  for (size_t i = 0; i < n; i++) {
    printf("%s{\"mark\": ", i ? ", " : "");
    cli_json_string(stdout, r[i].label);
    printf(", \"t_ns\": %" PRIu64 ", \"rss_bytes\": %" PRIu64
           ", \"live_bytes\": %" PRIu64,
           r[i].t_ns, r[i].rss_bytes, r[i].live_bytes);
    if (r[i].has_measured)
      printf(", \"measured_rss_bytes\": %" PRIu64, r[i].measured_rss_bytes);
    printf(", \"items\": [");
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
    printf("]");
    if (r[i].by_site)
      print_sites_json(&r[i]);
    printf("}");
  }
  printf("]}\n");
}

static void print_text(const char *source, const char *model, const char *libc,
                       uint64_t page_size, const explain_result_t *r,
                       size_t n) {
  cli_print_model_header(source, model, libc);
  cli_print_one_layout(page_size);
  for (size_t i = 0; i < n; i++) {
    printf("\n%s (t=%.3f ms): rss %.2f MiB, live %.2f MiB\n\n",
           strcmp(r[i].label, "end") == 0 ? "at the end" : "at mark",
           (double)r[i].t_ns / 1e6, (double)r[i].rss_bytes / MIB,
           (double)r[i].live_bytes / MIB);
    if (strcmp(r[i].label, "end") != 0)
      printf("mark       %s\n", r[i].label);
    if (r[i].has_measured)
      cli_print_measured(r[i].measured_rss_bytes, r[i].rss_bytes, "");
    printf("%9s %7s  %s\n", "MiB", "of RSS", "what holds it");
    for (size_t k = 0; k < r[i].nitems; k++) {
      const explain_item_t *it = &r[i].items[k];
      printf("%9.2f %6.1f%%  %s\n", (double)it->bytes / MIB,
             r[i].rss_bytes ? 100.0 * (double)it->bytes / (double)r[i].rss_bytes
                            : 0.0,
             it->sentence);
    }
    if (r[i].by_site)
      print_sites_text(&r[i]);
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
    } else if ((took = cli_opt_value("explain", argc, argv, &i, "--top", &v)) !=
               0) {
      char         *end = NULL;
      unsigned long k = took > 0 ? strtoul(v, &end, 10) : 0;
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (end == v || *end != '\0' || v[0] == '-' || k == 0 || k > 1000)
        return cli_usage_error("explain",
                               "--top expects a number of sites from 1 to "
                               "1000, got '%s'",
                               v);
      o.top = (size_t)k;
    } else if ((took = cli_opt_flag("explain", argv, i, "--by-site"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.by_site = true;
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
  if (o.top != 0 && !o.by_site)
    return cli_usage_error("explain", "--top counts call sites: it needs "
                                      "--by-site");
  as_err_t err = {0};
  if (replay_target_open(&e, what, db, &err) != AS_OK)
    return cli_fail("explain", &err);
  char        model[512], libc[256], desc[512];
  as_status_t rc = replay_target_specs(&e, o.model, o.libc, model, sizeof model,
                                       libc, sizeof libc, &err);
  explain_result_t *r = calloc(2, sizeof *r);
  size_t            n = 0;
  if (r == NULL)
    rc = as_err_set(&err, AS_ENOMEM, "out of memory");
  if (rc == AS_OK) {
    rc = cli_target_specs(&e, &o, model, sizeof model, libc, sizeof libc, &err);
    if (rc == AS_OK)
      rc = explain_trace(&o, replay_target_source, &e, r, &n, desc, sizeof desc,
                         &err);
  }
  if (rc == AS_OK) {
    const char *source = replay_target_name(&e);
    if (json)
      print_json(source, desc, o.libc, r, n);
    else
      print_text(source, desc, o.libc, o.kernel.page_size, r, n);
  }
  for (size_t i = 0; r != NULL && i < 2; i++)
    explain_result_release(&r[i]);
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
        "                        [--by-site [--top K]] [--lenient] "
        "[--json]\n\n"
        "Replays a trace file (or the recorded run RUN of the store --db)\n"
        "and attributes every resident byte to what holds it: the program's\n"
        "live objects, the allocator's overhead on them, and free memory by\n"
        "the mechanism that keeps it (a free chunk below a live one, a\n"
        "pymalloc arena pinned by a few objects, a tcache, ...), with the\n"
        "objects pinning it, the phases they were allocated in (after which\n"
        "mark), and what would release it.  The items add up to RSS.\n"
        "Without --at: the end, and the mark where RSS exceeds live bytes\n"
        "the most.  One address layout, the default: replay, run and sweep\n"
        "average the layouts ASLR gives (4 with 4 KiB pages), so their RSS\n"
        "can differ by the layout; replay --layouts 1 gives this one.\n\n"
        "options:\n"
        "  --db FILE       the store holding run RUN\n"
        "  --model SPEC    model (default: what the trace's or run's\n"
        "                  provenance implies, as compare picks it)\n"
        "  --libc SPEC     the libc model of a composition\n"
        "  --at MARK       explain at this mark (its first occurrence)\n"
        "  --page-size N   OS page size: 4096, 16384 or 65536\n"
        "  --by-site       also group memory by call site (a capture with\n"
        "                  --stacks N): per site its live bytes and the\n"
        "                  free memory the allocator keeps in the units\n"
        "                  holding them, split by live bytes; symbolised\n"
        "  --top K         sites listed (default 10)\n"
        "  --lenient       count and skip frees of dead objects\n"
        "  --json          {\"instants\": [{\"mark\", \"rss_bytes\", "
        "\"live_bytes\",\n"
        "                  \"items\": [{\"mechanism\", \"bytes\", "
        "\"objects\",\n"
        "                  \"sentence\", \"allocated_in\", ...}]}]}; items'\n"
        "                  bytes add up to rss_bytes (simulated); a run's\n"
        "                  measured RSS at the mark is measured_rss_bytes;\n"
        "                  a composition names its \"libc\"; --by-site adds\n"
        "                  \"sites\": [{\"site\", \"function\", \"frames\",\n"
        "                  \"live_bytes\", \"retained_bytes\", ...}]\n",
    .run = explain_main,
};
