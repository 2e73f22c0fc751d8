/* cli/cmd_runs.c -- `allocsim runs`: the runs in a store, one line each
 * (or one JSON object), so a run id can be picked for compare and report.
 *
 * It only reads: a path that does not exist is an error rather than a new
 * empty store, since a typo should not leave a file behind.  The table puts
 * the fixed-width columns first and model and source (free text of any
 * length) last, so the columns stay aligned.
 */
#include "cli.h"

#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#include "../analysis/store.h"
#include "../models/model.h"

typedef struct runs_out_s {
  store_t *s;
  bool     json;
  size_t   count; /* runs printed so far */
} runs_out_t;

/* The peak a person means: measured RSS for a measured run, predicted RSS
 * for a simulated one. */
static uint64_t shown_peak(const store_run_record_t *r) {
  return strcmp(r->kind, "measured") == 0 ? r->peak_measured_rss_bytes
                                          : r->peak_rss_bytes;
}

/* The model as compare replays the run: a composition of a measured run
 * names the libc model under it when that is not the default (cpython over
 * jemalloc for a Python run that preloaded libjemalloc). */
static void shown_model(const store_run_record_t *r, char *buf, size_t len) {
  const char *libc = r->options;
  size_t      n = libc ? strcspn(libc, ":") : 0;
  const char *def = model_default_libc();
  if (strcmp(r->kind, "measured") == 0 && model_spec_composes(r->model) &&
      libc != NULL && n > 0 && (strlen(def) != n || strncmp(libc, def, n)))
    snprintf(buf, len, "%s over %s", r->model, libc);
  else
    snprintf(buf, len, "%s", r->model);
}

/* What tells a captured process from its siblings, and a run cut short
 * from a whole one, after the source: " (python3.11, pid 812, child of
 * run 3) [truncated: max-trace-bytes]"; "" for other runs. */
static void process_note(store_t *s, int64_t id, char *buf, size_t len) {
  char        exe[160], pid[32], parent[32], cut[8], end[48];
  const char *keys[] = {"exe", "pid", "capture_parent_run", "truncated",
                        "capture_end"};
  char       *vals[] = {exe, pid, parent, cut, end};
  size_t      sizes[] = {sizeof exe, sizeof pid, sizeof parent, sizeof cut,
                         sizeof end};
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
    if (store_read_meta(s, id, keys[k], vals[k], sizes[k], NULL) != AS_OK)
      vals[k][0] = '\0';
  const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
  size_t      n = 0;
  buf[0] = '\0';
  if (exe[0] != '\0')
    n += (size_t)snprintf(buf, len, " (%s%s%s%s%s)", base,
                          pid[0] ? ", pid " : "", pid,
                          parent[0] ? ", child of run " : "", parent);
  if (strcmp(cut, "1") == 0 && n < len)
    snprintf(buf + n, len - n, " [truncated%s%s]", end[0] ? ": " : "", end);
}

/* Every meta pair of the run, as JSON members. */
static as_status_t print_meta_pair(void *user, const char *key,
                                   const char *value, as_err_t *err) {
  (void)err;
  size_t *n = user;
  fputs((*n)++ ? ", " : "", stdout);
  cli_json_string(stdout, key);
  fputs(": ", stdout);
  cli_json_string(stdout, value);
  return AS_OK;
}

static as_status_t print_run(void *user, const store_run_record_t *r,
                             as_err_t *err) {
  runs_out_t *o = user;
  if (!o->json) {
    char model[512], note[300];
    shown_model(r, model, sizeof model);
    process_note(o->s, r->id, note, sizeof note);
    printf("%6" PRId64 "  %-9s  %-24s  %8" PRIu64 "  %12.2f  %s  %s%s\n", r->id,
           r->kind, r->created_at, r->nsamples,
           (double)shown_peak(r) / (1024.0 * 1024.0), model, r->source, note);
    o->count++;
    return AS_OK;
  }
  fputs(o->count++ ? ",\n  " : "\n  ", stdout);
  printf("{\"id\": %" PRId64 ", \"kind\": ", r->id);
  cli_json_string(stdout, r->kind);
  fputs(", \"model\": ", stdout);
  cli_json_string(stdout, r->model);
  fputs(", \"options\": ", stdout);
  cli_json_string(stdout, r->options);
  printf(", \"page_size\": %" PRIu64 ", \"source\": ", r->page_size);
  cli_json_string(stdout, r->source);
  fputs(", \"command\": ", stdout);
  cli_json_string(stdout, r->command);
  fputs(", \"allocsim_version\": ", stdout);
  cli_json_string(stdout, r->allocsim_version);
  fputs(", \"created_at\": ", stdout);
  cli_json_string(stdout, r->created_at);
  fputs(", \"trace_path\": ", stdout);
  cli_json_string(stdout, r->trace_path);
  fputs(", \"trace_sha256\": ", stdout);
  cli_json_string(stdout, r->trace_sha256);
  printf(", \"samples\": %" PRIu64 ", \"peak_rss_bytes\": %" PRIu64
         ", \"peak_measured_rss_bytes\": %" PRIu64 ", \"meta\": {",
         r->nsamples, r->peak_rss_bytes, r->peak_measured_rss_bytes);
  size_t      npairs = 0;
  as_status_t rc = store_list_meta(o->s, r->id, print_meta_pair, &npairs, err);
  fputs("}}", stdout);
  return rc;
}

static int runs_main(int argc, char **argv) {
  const char *db = NULL;
  bool        json = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int         took = cli_opt_value("runs", argc, argv, &i, "--db", &db);
    if (took < 0)
      return CLI_EXIT_USAGE;
    if (took)
      continue;
    if ((took = cli_opt_flag("runs", argv, i, "--json")) != 0) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      json = true;
    } else {
      return cli_usage_error("runs", "unexpected argument '%s'", a);
    }
  }
  if (db == NULL || db[0] == '\0')
    return cli_usage_error("runs", "--db FILE is required");

  as_err_t err = {0};
  store_t *s = NULL;
  if (store_open_existing(db, &s, &err) != AS_OK)
    return cli_fail("runs", &err);

  runs_out_t out = {.s = s, .json = json};
  if (json) {
    fputs("{\"db\": ", stdout);
    cli_json_string(stdout, db);
    fputs(", \"runs\": [", stdout);
  } else {
    printf("%6s  %-9s  %-24s  %8s  %12s  %s  %s\n", "id", "kind", "created_at",
           "samples", "peak rss MiB", "model", "source");
  }
  as_status_t rc = store_list_runs(s, print_run, &out, &err);
  store_close(s);
  if (json)
    fputs(out.count ? "\n]}\n" : "]}\n", stdout);
  else if (rc == AS_OK && out.count == 0)
    printf("(no runs in %s)\n", db);
  return rc == AS_OK ? CLI_EXIT_OK : cli_fail("runs", &err);
}

const cli_command_t cli_cmd_runs = {
    .name = "runs",
    .summary = "list the runs in a store",
    .usage = "usage: allocsim runs --db FILE [--json]\n\n"
             "Lists every run stored in FILE, one line each: id, kind\n"
             "(measured or simulated), when it was stored (UTC), number of\n"
             "samples, peak RSS (measured RSS for measured runs, predicted\n"
             "RSS for simulated ones), model and source.  A captured\n"
             "process's source is followed by its image, pid and parent\n"
             "run, \"(cc1, pid 812, child of run 1)\", and a run whose\n"
             "recording stopped early by \"[truncated: REASON]\".  --json\n"
             "prints one object {\"db\", \"runs\": [...]} with every stored\n"
             "field, the run's meta pairs under \"meta\", and exact byte\n"
             "counts.  FILE must exist.\n",
    .run = runs_main,
};
