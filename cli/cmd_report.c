/* cli/cmd_report.c -- `allocsim report TRACE|RUN|sweep:ID -o report.html`:
 * one self-contained HTML page with gnuplot plots (analysis/report.h). */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../analysis/report.h"

/* The directory of path exists (checked before any work). */
static bool dir_exists(const char *path) {
  char        dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  if (slash == NULL)
    return true;
  snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  struct stat st;
  return dir[0] == '\0' || (stat(dir, &st) == 0 && S_ISDIR(st.st_mode));
}

/* Why --png dir cannot take the PNGs, or NULL if it can. */
static const char *png_dir_problem(const char *dir) {
  struct stat st;
  if (stat(dir, &st) != 0)
    return errno == ENOENT || errno == ENOTDIR ? "no such directory"
                                               : strerror(errno);
  return S_ISDIR(st.st_mode) ? NULL : "not a directory";
}

static int report_sweep_main(const report_opts_t *ro, const char *db,
                             const char *id_text) {
  as_err_t err = {0};
  char    *end;
  errno = 0;
  long long id = strtoll(id_text, &end, 10);
  if (*end != '\0' || end == id_text || id <= 0 || errno == ERANGE)
    return cli_usage_error("report",
                           "sweep:ID expects a positive sweep id, "
                           "got '%s'",
                           id_text);
  if (db == NULL)
    return cli_usage_error("report", "a sweep report needs --db FILE");
  if (access(db, F_OK) != 0) {
    as_err_set(&err, AS_EINVAL, "%s: no such store", db);
    return cli_fail("report", &err);
  }
  store_t    *s;
  as_status_t rc = store_open_existing(db, &s, &err);
  if (rc == AS_OK) {
    rc = report_sweep(ro, s, id, &err);
    store_close(s);
  }
  return rc == AS_OK ? CLI_EXIT_OK : cli_fail("report", &err);
}

static int report_main(int argc, char **argv) {
  explain_opts_t  o = {0};
  report_opts_t   ro = {0};
  replay_target_t t = {0};
  const char     *db = NULL, *what = NULL, *v;
  sim_kernel_config_default(&o.kernel);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int         took;
    if ((took = cli_opt_value("report", argc, argv, &i, "--db", &db)) ||
        (took = cli_opt_value("report", argc, argv, &i, "-o", &ro.out_html)) ||
        (took =
             cli_opt_value("report", argc, argv, &i, "--png", &ro.png_dir)) ||
        (took =
             cli_opt_value("report", argc, argv, &i, "--title", &ro.title)) ||
        (took = cli_opt_value("report", argc, argv, &i, "--model", &o.model)) ||
        (took = cli_opt_value("report", argc, argv, &i, "--libc", &o.libc)) ||
        (took = cli_opt_value("report", argc, argv, &i, "--at", &o.at))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
    } else if ((took =
                    cli_opt_value("report", argc, argv, &i, "--settle", &v))) {
      if (took < 0) /* cli_opt_value said why */
        return CLI_EXIT_USAGE;
      if (!as_parse_duration_ns(v, &o.settle_ns))
        return cli_usage_error("report", "--settle expects a duration");
    } else if ((took = cli_opt_value("report", argc, argv, &i, "--page-size",
                                     &v))) {
      if (took < 0) /* cli_opt_value said why */
        return CLI_EXIT_USAGE;
      if (!as_parse_page_size(v, &o.kernel.page_size))
        return cli_usage_error("report", "--page-size expects 4096, 16384 "
                                         "or 65536");
    } else if ((took = cli_opt_flag("report", argv, i, "--lenient"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.lenient = true;
    } else if (a[0] == '-' && strcmp(a, "-") != 0) {
      return cli_usage_error("report", "unknown option '%s'", a);
    } else if (what == NULL) {
      what = a;
    } else {
      return cli_usage_error("report",
                             "one trace, run or sweep at a time, "
                             "got '%s' too",
                             a);
    }
  }
  if (what == NULL)
    return cli_usage_error("report", "which trace, run or sweep? give a file, "
                                     "a run id or sweep:ID with --db");
  if (ro.out_html == NULL)
    return cli_usage_error("report", "-o FILE.html is required");
  /* The page replaces -o: never the trace or the store it is made of. */
  if (cli_same_file(ro.out_html, what) || cli_same_file(ro.out_html, db))
    return cli_usage_error("report", "-o %s is the %s the report reads",
                           ro.out_html,
                           cli_same_file(ro.out_html, db) ? "store" : "trace");
  as_err_t    err = {0};
  const char *bad = ro.out_html;
  const char *why = dir_exists(ro.out_html) ? NULL : "no such directory";
  if (why == NULL && ro.png_dir != NULL &&
      (why = png_dir_problem(ro.png_dir)) != NULL)
    bad = ro.png_dir;
  if (why != NULL) {
    as_err_set(&err, AS_EINVAL, "%s: %s", bad, why);
    return cli_fail("report", &err);
  }
  if (strncmp(what, "sweep:", 6) == 0)
    return report_sweep_main(&ro, db, what + 6);

  char            model[512], libc[256];
  store_sample_t *measured = NULL;
  size_t          nm = 0;
  as_status_t     rc = replay_target_open(&t, what, db, &err);
  if (rc == AS_OK)
    rc = replay_target_specs(&t, o.model, o.libc, model, sizeof model, libc,
                             sizeof libc, &err);
  if (rc == AS_OK && t.store != NULL)
    rc = store_read_samples(t.store, t.rec.id, &measured, &nm, &err);
  if (rc == AS_OK) {
    rc = cli_target_specs(&t, &o, model, sizeof model, libc, sizeof libc, &err);
    trace_source_t *probe;
    if (rc == AS_OK && (rc = replay_target_source(&t, &probe, &err)) == AS_OK)
      trace_source_close(probe); /* fills the run's description */
  }
  if (rc == AS_OK)
    rc = report_replay(&ro, &o, replay_target_source, &t, measured, nm,
                       t.is_trace, replay_target_name(&t), &err);
  free(measured);
  replay_target_close(&t);
  if (rc != AS_OK)
    return cli_fail("report", &err);
  if (strcmp(ro.out_html, "-") != 0)
    fprintf(stderr, "allocsim report: wrote %s\n", ro.out_html);
  return CLI_EXIT_OK;
}

const cli_command_t cli_cmd_report = {
    .name = "report",
    .summary = "one HTML page: RSS plots, explain, remedies, heap maps",
    .usage =
        "usage: allocsim report TRACE|RUN|sweep:ID -o FILE.html [--db FILE]\n"
        "                       [--png DIR] [--title T] [--model SPEC]\n"
        "                       [--libc SPEC] [--at MARK] [--settle T]\n"
        "                       [--page-size N] [--lenient]\n\n"
        "Writes one self-contained HTML file (it loads nothing from the\n"
        "network) about a trace file, a recorded run RUN of the store --db,\n"
        "or a sweep (sweep:ID with --db): for a trace or run, RSS over time\n"
        "predicted against measured with the marks (the start-up offset\n"
        "taken at compare's anchor mark), RSS by owner stacked over time,\n"
        "what holds memory (explain), the remedies ranked (advise) and heap\n"
        "maps at up to six marks: those explained, then marks from the\n"
        "anchor on; for a sweep, kept memory against survivor fraction on a\n"
        "log axis with the simulation, the formula and the measured runs in\n"
        "the store.  A trace or run is replayed on one address layout, the\n"
        "default, as explain and advise.  Plots are drawn by gnuplot\n"
        "(apt-get install gnuplot-nox).\n\n"
        "options:\n"
        "  -o FILE.html   the page (written whole or not at all; - for\n"
        "                 stdout)\n"
        "  --png DIR      also write every plot as DIR/<name>.png (put in\n"
        "                 place with the page: a failed report, such as\n"
        "                 one on a full disk, writes none of them)\n"
        "  --title T      the page's title\n"
        "  --at MARK      explain and advise at this mark\n",
    .run = report_main,
};
