/* cli/cmd_explain.c -- `allocsim explain TRACE|RUN`: what holds memory at a
 * mark and why (analysis/explain.h). */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/explain.h"
#include "../analysis/record.h"
#include "../analysis/runsrc.h"
#include "../traces/trace_io.h"

#define MIB (1024.0 * 1024.0)

/* Where the events come from: a trace file or a recorded run. */
typedef struct explain_src_s explain_src_t;
struct explain_src_s {
  const char        *path;   /* trace file, or NULL */
  store_t           *store;  /* recorded run's store, or NULL */
  store_run_record_t rec;
  run_meta_t         meta;
  char               desc[512];
};

static as_status_t open_src(void *user, trace_source_t **src, as_err_t *err) {
  explain_src_t *e = user;
  if (e->path != NULL)
    return trace_open(e->path, src, err);
  bool is_trace;
  return run_open_source(e->store, &e->rec, &e->meta, src, e->desc,
                         sizeof e->desc, &is_trace, err);
}

static const char *trace_meta_lookup(void *user, const char *key) {
  return trace_meta_get(user, key);
}

/* The model and libc specs the source implies (the run's or the trace's
 * provenance), unless given. */
static as_status_t default_specs(explain_src_t *e, char *model, size_t mlen,
                                 char *libc, size_t llen, as_err_t *err) {
  if (e->store != NULL)
    return record_run_specs(run_meta_get, &e->meta, model, mlen, libc, llen,
                            err);
  trace_source_t *src;
  as_status_t     rc = trace_open(e->path, &src, err);
  if (rc != AS_OK)
    return rc;
  rc = record_run_specs(trace_meta_lookup, &src->meta, model, mlen, libc,
                        llen, err);
  trace_source_close(src);
  return rc;
}

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
             r[i].rss_bytes ? 100.0 * (double)it->bytes /
                                  (double)r[i].rss_bytes
                            : 0.0,
             it->sentence);
    }
  }
}

static int explain_main(int argc, char **argv) {
  explain_opts_t o = {0};
  explain_src_t  e = {0};
  const char    *db = NULL, *what = NULL, *v;
  bool           json = false;
  sim_kernel_config_default(&o.kernel);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int         took;
    if ((took = cli_opt_value("explain", argc, argv, &i, "--db", &db)) ||
        (took = cli_opt_value("explain", argc, argv, &i, "--model",
                              &o.model)) ||
        (took = cli_opt_value("explain", argc, argv, &i, "--libc", &o.libc)) ||
        (took = cli_opt_value("explain", argc, argv, &i, "--at", &o.at))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
    } else if ((took = cli_opt_value("explain", argc, argv, &i, "--page-size",
                                     &v)) != 0) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (!as_parse_page_size(v, &o.kernel.page_size))
        return cli_usage_error("explain", "--page-size expects 4096, 16384 "
                                          "or 65536, got '%s'", v);
    } else if (strcmp(a, "--json") == 0) {
      json = true;
    } else if (strcmp(a, "--lenient") == 0) {
      o.lenient = true;
    } else if (a[0] == '-' && strcmp(a, "-") != 0) {
      return cli_usage_error("explain", "unknown option '%s'", a);
    } else if (what == NULL) {
      what = a;
    } else {
      return cli_usage_error("explain", "one trace or run at a time, got "
                                        "'%s' too", a);
    }
  }
  if (what == NULL)
    return cli_usage_error("explain", "which trace or run? give a file, or "
                                      "a run id with --db");
  as_err_t err = {0};
  char     *end;
  long long run_id = strtoll(what, &end, 10);
  if (db != NULL && *end == '\0' && run_id > 0) {
    as_status_t rc = access(db, F_OK) == 0
                         ? store_open(db, &e.store, &err)
                         : as_err_set(&err, AS_EINVAL, "%s: no such store", db);
    if (rc == AS_OK)
      rc = store_read_run(e.store, run_id, &e.rec, &err);
    if (rc == AS_OK)
      rc = run_meta_read(e.store, run_id, &e.meta, &err);
    if (rc != AS_OK) {
      int code = cli_fail("explain", &err);
      run_meta_free(&e.meta);
      store_close(e.store);
      return code;
    }
  } else {
    e.path = what;
  }
  char        model[512], libc[256], desc[512];
  as_status_t rc = default_specs(&e, model, sizeof model, libc, sizeof libc,
                                 &err);
  explain_result_t *r = calloc(2, sizeof *r);
  size_t            n = 0;
  if (r == NULL)
    rc = as_err_set(&err, AS_ENOMEM, "out of memory");
  if (rc == AS_OK) {
    if (o.model == NULL)
      o.model = model;
    if (o.libc == NULL)
      o.libc = libc;
    rc = explain_trace(&o, open_src, &e, r, &n, desc, sizeof desc, &err);
  }
  if (rc == AS_OK) {
    const char *source = e.path ? e.path : e.desc;
    if (json)
      print_json(source, desc, r, n);
    else
      print_text(source, desc, r, n);
  }
  free(r);
  run_meta_free(&e.meta);
  if (e.store != NULL)
    store_close(e.store);
  return rc == AS_OK ? CLI_EXIT_OK : cli_fail("explain", &err);
}

const cli_command_t cli_cmd_explain = {
    .name    = "explain",
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
        "objects pinning it and what would release it.  The items add up to\n"
        "RSS.  Without --at: the end, and the mark where RSS exceeds live\n"
        "bytes the most.\n\n"
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
        "                  \"sentence\", ...}]}]}; items' bytes add up to "
        "rss_bytes\n",
    .run = explain_main,
};
