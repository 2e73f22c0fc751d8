/* cli/cmd_sweep.c -- `allocsim sweep WORKLOAD --vary NAME=V,...`: run a
 * workload over a grid of parameters and seeds, in parallel, print kept
 * memory beside the formula, and store every point (analysis/sweep.h). */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <sqlite3.h>
#include <time.h>
#include <unistd.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "../analysis/store.h"
#include "../traces/import_util.h"
#include "../analysis/sweep.h"

#define MIB 1048576.0

typedef struct sweep_cli_s {
  const sweep_config_t *c;
  store_t              *store;
  int64_t               sweep_id;
  size_t                failed;
  double                t0;       /* when the sweep started */
  bool                  progress; /* a progress line on stderr */
} sweep_cli_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void progress(sweep_cli_t *sc, size_t ndone, size_t total);

/* Only a sweep of several traces needs a column saying which each row is. */
static bool many_traces(const sweep_config_t *c) {
  return c->workload == NULL && c->ntraces > 1;
}

static void describe_point(const sweep_config_t *c, const sweep_point_t *p,
                           char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  if (many_traces(c))
    used = (size_t)snprintf(buf, len, "trace=%s", p->trace);
  for (size_t a = 0; a < c->naxes && used < len; a++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s=%s", used ? " " : "",
                             c->axes[a].name, p->values[a]);
  if (p->seed && used < len)
    snprintf(buf + used, len - used, "%sseed=%" PRIu64, used ? " " : "",
             p->seed);
}

static as_status_t on_done(void *user, sweep_point_t *p, size_t ndone,
                           size_t total, as_err_t *err) {
  sweep_cli_t *sc = user;
  char         what[256];
  describe_point(sc->c, p, what, sizeof what);
  if (p->status != AS_OK) {
    sc->failed++;
    fprintf(stderr, "%s[%zu/%zu] %s: failed: %s\n", sc->progress ? "\n" : "",
            ndone, total, what, p->error);
  }
  progress(sc, ndone, total);
  if (sc->store != NULL)
    return sweep_store_point(sc->store, sc->sweep_id, sc->c, p, err);
  return AS_OK;
}

static int cmp_points(const void *a, const void *b) {
  const sweep_point_t *x = a, *y = b;
  if (x->point != y->point)
    return x->point < y->point ? -1 : 1;
  return x->seed < y->seed ? -1 : x->seed > y->seed;
}

/* MiB with 2 decimals, or "-" when absent. */
/* Always writes buf: callers print the buffer as well as the result. */
static const char *mib(char *buf, bool have, double bytes) {
  if (!have)
    snprintf(buf, 32, "-");
  else
    snprintf(buf, 32, "%.2f", bytes / MIB);
  return buf;
}

/* RSS at the end of the point's run (its final sample). */
static bool point_final_rss(const sweep_point_t *p, uint64_t *rss) {
  for (size_t i = p->nsamples; i-- > 0;)
    if (p->samples[i].kind == SIM_SAMPLE_FINAL) {
      *rss = p->samples[i].rss_bytes;
      return true;
    }
  return false;
}

/* The text table's trace column: as wide as the longest path. */
static int trace_width(const sweep_config_t *c) {
  size_t w = strlen("trace");
  for (size_t t = 0; t < c->ntraces; t++)
    w = strlen(c->traces[t]) > w ? strlen(c->traces[t]) : w;
  return (int)w;
}

/* Prints the points that ran (after a stop, the others are not results). */
static void print_results(const sweep_config_t *c, sweep_point_t *pts,
                          size_t npts, bool csv, bool json, int64_t sweep_id) {
  size_t n = 0;
  for (size_t i = 0; i < npts; i++)
    if (pts[i].ran)
      pts[n++] = pts[i];
  qsort(pts, n, sizeof *pts, cmp_points);
  if (json) {
    printf("{\"sweep_id\":%" PRId64 ",\"workload\":", sweep_id);
    if (c->workload)
      cli_json_string(stdout, c->workload->name);
    else
      printf("null");
    printf(",\"points\":[");
    for (size_t i = 0; i < n; i++) {
      const sweep_point_t *p = &pts[i];
      char                 params[2048];
      sweep_point_json(c, p, params, sizeof params);
      uint64_t peak = 0, after = 0, reuse = 0, final = 0;
      bool     hp = sweep_point_mark(p, "peak", &peak);
      bool     hf = point_final_rss(p, &final);
      bool     ha = sweep_point_mark(p, "after", &after);
      bool     hr = sweep_point_mark(p, "after_reuse", &reuse);
      printf("%s{\"point\":%" PRIu64, i ? "," : "", p->point);
      if (many_traces(c)) {
        printf(",\"trace\":");
        cli_json_string(stdout, p->trace);
      }
      printf(",\"seed\":%" PRIu64 ",\"ok\":%s,\"params\":%s", p->seed,
             p->status == AS_OK ? "true" : "false", params);
      if (p->have_kept)
        printf(",\"kept_bytes\":%" PRId64, p->kept_bytes);
      if (p->have_kept && p->layouts > 1)
        printf(",\"layouts\":%u,\"kept_min_bytes\":%" PRId64
               ",\"kept_max_bytes\":%" PRId64,
               p->layouts, p->kept_min_bytes, p->kept_max_bytes);
      if (p->have_formula)
        printf(",\"formula_kept_bytes\":%.17g,\"formula_sd_bytes\":%.17g",
               p->formula_kept_bytes, p->formula_sd_bytes);
      if (p->arenas_pinned >= 0)
        printf(",\"arenas_pinned\":%" PRId64, p->arenas_pinned);
      if (hp)
        printf(",\"rss_peak_bytes\":%" PRIu64, peak);
      if (hf)
        printf(",\"final_rss_bytes\":%" PRIu64, final);
      printf(",\"peak_rss_bytes\":%" PRIu64, p->peak_rss_bytes);
      if (p->arenas_peak >= 0)
        printf(",\"arenas_peak\":%" PRId64 ",\"unaligned_peak\":%" PRId64,
               p->arenas_peak, p->unaligned_peak);
      if (ha && hr)
        printf(",\"reuse_growth_bytes\":%" PRId64,
               (int64_t)reuse - (int64_t)after);
      printf(",\"events\":%" PRIu64 ",\"seconds\":%.3f}", p->events,
             p->seconds);
    }
    printf("]}\n");
    return;
  }
  const char *sep = csv ? "," : " ";
  if (csv) {
    printf("point%s", many_traces(c) ? ",trace" : "");
    for (size_t a = 0; a < c->naxes; a++) {
      putchar(',');
      cli_csv_field(stdout, c->axes[a].name);
    }
    printf(",seed,kept_mib,kept_min_mib,kept_max_mib,formula_mib,"
           "formula_sd_mib,arenas_pinned,peak_mib,final_mib,"
           "reuse_growth_mib,events,seconds\n");
  } else {
    printf("%5s", "point");
    if (many_traces(c))
      printf(" %-*s", trace_width(c), "trace");
    for (size_t a = 0; a < c->naxes; a++)
      printf(" %10s", c->axes[a].name);
    printf(" %4s %10s %15s %10s %8s %7s %10s %10s %10s\n", "seed", "kept_MiB",
           "kept_range", "formula", "sd", "pinned", "peak_MiB", "final_MiB",
           "reuse+MiB");
  }
  for (size_t i = 0; i < n; i++) {
    const sweep_point_t *p = &pts[i];
    char     b1[32], b2[32], b3[32], b4[32], b5[32], b6[32], pin[32];
    char     lo[32], hi[32], range[80];
    uint64_t peak = 0, after = 0, reuse = 0, final = 0;
    /* The workload's "peak" mark where it has one, else the run's peak. */
    bool hp = sweep_point_mark(p, "peak", &peak);
    bool hf = point_final_rss(p, &final);
    peak = hp ? peak : p->peak_rss_bytes;
    bool ha = sweep_point_mark(p, "after", &after);
    bool hr = sweep_point_mark(p, "after_reuse", &reuse);
    bool ok = p->status == AS_OK;
    snprintf(pin, sizeof pin, "%" PRId64, p->arenas_pinned);
    printf(csv ? "%" PRIu64 : "%5" PRIu64, p->point);
    if (many_traces(c) && csv) {
      putchar(',');
      cli_csv_field(stdout, p->trace);
    } else if (many_traces(c))
      printf(" %-*s", trace_width(c), p->trace);
    for (size_t a = 0; a < c->naxes; a++) {
      if (csv) {
        putchar(',');
        cli_csv_field(stdout, p->values[a]);
      } else
        printf(" %10s", p->values[a]);
    }
    printf(csv ? ",%" PRIu64 : " %4" PRIu64, p->seed);
    bool ranged = ok && p->have_kept;
    mib(lo, ranged, (double)p->kept_min_bytes);
    mib(hi, ranged, (double)p->kept_max_bytes);
    snprintf(range, sizeof range, "%s-%s", lo, hi);
    mib(b1, ranged, (double)p->kept_bytes);
    if (csv)
      printf(",%s,%s,%s", b1, lo, hi);
    else
      printf(" %10s %15s", b1, ranged ? range : "-");
    printf(csv ? ",%s,%s,%s,%s,%s,%s" : " %10s %8s %7s %10s %10s %10s",
           mib(b2, p->have_formula, p->formula_kept_bytes),
           mib(b3, p->have_formula, p->formula_sd_bytes),
           ok && p->arenas_pinned >= 0 ? pin : "-", mib(b4, ok, (double)peak),
           mib(b6, ok && hf, (double) final),
           mib(b5, ok && ha && hr, (double)reuse - (double)after));
    if (csv)
      printf("%s%" PRIu64 "%s%.3f", sep, p->events, sep, p->seconds);
    if (!ok && !csv)
      printf("  failed: %s", p->error);
    printf("\n");
  }
}

/* The len digits at s, from lo to hi. */
static bool parse_uint_n(const char *s, size_t len, unsigned lo, unsigned hi,
                         unsigned *out) {
  uint64_t v;
  if (as_parse_number(s, len, NULL, &v) != AS_NUM_OK || v < lo || v > hi)
    return false;
  *out = (unsigned)v;
  return true;
}

static bool parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out) {
  return parse_uint_n(s, strlen(s), lo, hi, out);
}

/* ---- Interruption -------------------------------------------------------- */

static volatile sig_atomic_t g_stop;

static void on_signal(int sig) {
  (void)sig;
  g_stop = 1;
}

/* SIGINT and SIGTERM stop the sweep between points: running points finish
 * and are stored, the sweep is recorded as interrupted. */
static void catch_stop_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

/* ---- Spec files ---------------------------------------------------------- */

/* A spec line's bytes, newline included: the longest a setting's words
 * are copied whole. */
#define SPEC_LINE_MAX 1024

/* A spec file's settings as argv words (word[0] is "sweep"), each with its
 * line, so that a setting the sweep refuses is named by its line too. */
typedef struct spec_words_s spec_words_t;
struct spec_words_s {
  const char *path;
  char       *word[512];
  unsigned    line[512];
  int         n; /* words after word[0] */
};

/* Appends word w of line lineno: false when the file has too many. */
static bool add_word(spec_words_t *s, unsigned lineno, const char *w) {
  if (s->n + 1 >= (int)(sizeof s->word / sizeof s->word[0]))
    return false;
  s->n++;
  s->word[s->n] = strdup(w);
  s->line[s->n] = lineno;
  return true;
}

/* Reads a sweep spec file into argv words, as if typed before the command
 * line's own options (file comment of cli_cmd_sweep's usage).  The words
 * are strdup'd into s->word[1..s->n]. */
static as_status_t read_spec(spec_words_t *s, as_err_t *err) {
  const char *path = s->path;
  FILE       *f = fopen(path, "r");
  if (f == NULL)
    return as_err_set(err, AS_EINVAL, "%s: cannot open: %s", path,
                      strerror(errno));
  char       *line = NULL;
  size_t      line_cap = 0;
  ssize_t     got;
  unsigned    lineno = 0;
  as_status_t rc = AS_OK;
  while (rc == AS_OK &&
         (got = import_getline(&line, &line_cap, f, SPEC_LINE_MAX)) != -1) {
    lineno++;
    if (got == -2) { /* an endless line (/dev/zero) is not read to its end */
      rc = as_err_set(err, AS_EUSAGE,
                      "%s:%u: expected a line of at most %d bytes", path,
                      lineno, SPEC_LINE_MAX);
      break;
    }
    /* Whole lines of text: a NUL or a line cut in two would drop or
     * misread what follows it. */
    if (strlen(line) != (size_t)got) {
      rc = as_err_set(err, AS_EUSAGE, "%s:%u: expected text, got a NUL byte",
                      path, lineno);
      break;
    }
    line[strcspn(line, "\r\n")] = '\0';
    char *hash = strchr(line, '#');
    if (hash != NULL)
      *hash = '\0';
    char *k = line + strspn(line, " \t");
    char *eq = strchr(k, '=');
    if (k[strspn(k, " \t\r\n")] == '\0')
      continue;
    if (eq == NULL) {
      rc = as_err_set(err, AS_EUSAGE, "%s:%u: expected KEY = VALUE", path,
                      lineno);
      break;
    }
    char *v = eq + 1;
    *eq = '\0';
    v += strspn(v, " \t");
    size_t vlen = strcspn(v, " \t\r\n");
    char  *rest = v + vlen + strspn(v + vlen, " \t\r\n");
    if (*rest != '\0') {
      rc = as_err_set(err, AS_EUSAGE,
                      "%s:%u: expected one value (no spaces), got '%.*s' "
                      "and '%.40s'",
                      path, lineno, (int)vlen, v, rest);
      break;
    }
    v[vlen] = '\0';
    for (char *e = eq - 1; e >= k && (*e == ' ' || *e == '\t'); e--)
      *e = '\0';
    char key[64], name[64], extra[2];
    int  nwords = sscanf(k, "%63s %63s %1s", key, name, extra);
    if (nwords >= 2 && (strcmp(key, "vary") == 0 || strcmp(key, "set") == 0)) {
      if (nwords == 3) {
        rc = as_err_set(err, AS_EUSAGE,
                        "%s:%u: expected '%s NAME = VALUE', "
                        "got '%s'",
                        path, lineno, key, k);
        break;
      }
      bool vary = strcmp(key, "vary") == 0;
      char opt[80], buf[1200];
      snprintf(opt, sizeof opt, "--%s", vary ? "vary" : name);
      snprintf(buf, sizeof buf, "%s%s%s", vary ? name : "", vary ? "=" : "", v);
      if (!add_word(s, lineno, opt) || !add_word(s, lineno, buf)) {
        rc = as_err_set(err, AS_EUSAGE, "%s:%u: too many settings", path,
                        lineno);
        break;
      }
      continue;
    }
    static const char *const keys[] = {"workload",  "trace",    "model",
                                       "libc",      "seeds",    "jobs",
                                       "page_size", "page-size"};
    bool                     known = false;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
      known |= strcmp(k, keys[i]) == 0;
    if (!known || *v == '\0') {
      rc = as_err_set(err, AS_EUSAGE,
                      "%s:%u: expected workload, trace, model, libc, seeds, "
                      "jobs, page_size, 'vary NAME' or 'set NAME' with a "
                      "value, got '%s'",
                      path, lineno, k);
      break;
    }
    char opt[80];
    bool positional = strcmp(k, "workload") == 0 || strcmp(k, "trace") == 0;
    snprintf(opt, sizeof opt, "--%s", strcmp(k, "page_size") ? k : "page-size");
    if ((!positional && !add_word(s, lineno, opt)) || !add_word(s, lineno, v)) {
      rc = as_err_set(err, AS_EUSAGE, "%s:%u: too many settings", path, lineno);
      break;
    }
  }
  if (rc == AS_OK && ferror(f))
    rc = as_err_set(err, AS_EIO, "%s: read error: %s", path, strerror(errno));
  free(line);
  fclose(f);
  return rc;
}

/* The spec line that set the workload option a message about it names
 * ("survivors: --fraction expects ..."): a 'set NAME' or a 'vary NAME'
 * line.  0 when the message names none or the option came from the
 * command line. */
static unsigned spec_line_of_option(const spec_words_t *s, const char *wl,
                                    const char *msg) {
  size_t wn = strlen(wl);
  if (s->path == NULL || strncmp(msg, wl, wn) != 0 ||
      strncmp(msg + wn, ": --", 4) != 0)
    return 0;
  const char *name = msg + wn + 4;
  size_t      len = strcspn(name, " =,:'");
  for (int i = 1; i <= s->n; i++) {
    const char *w = s->word[i];
    if (strncmp(w, "--", 2) == 0 && strlen(w + 2) == len &&
        strncmp(w + 2, name, len) == 0)
      return s->line[i];
    if (strcmp(w, "--vary") == 0 && i < s->n &&
        strncmp(s->word[i + 1], name, len) == 0 && s->word[i + 1][len] == '=')
      return s->line[i + 1];
  }
  return 0;
}

/* The spec line of the second 'vary NAME' a "--vary NAME is given twice"
 * message names; 0 when the message is another or one of the two came
 * from the command line. */
static unsigned spec_line_of_repeated_axis(const spec_words_t *s,
                                           const char         *msg) {
  if (s->path == NULL || strncmp(msg, "--vary ", 7) != 0 ||
      strstr(msg, " is given twice") == NULL)
    return 0;
  const char *name = msg + 7;
  size_t      len = strcspn(name, " ");
  unsigned    seen = 0;
  for (int i = 1; i < s->n; i++)
    if (strcmp(s->word[i], "--vary") == 0 &&
        strncmp(s->word[i + 1], name, len) == 0 && s->word[i + 1][len] == '=' &&
        ++seen == 2)
      return s->line[i + 1];
  return 0;
}

/* ---- Status -------------------------------------------------------------- */

/* Whether process pid is alive on this host. */
static bool alive_here(const char *host, int64_t pid) {
  char me[256] = "";
  gethostname(me, sizeof me - 1);
  return host != NULL && strcmp(host, me) == 0 && pid > 0 &&
         kill((pid_t)pid, 0) == 0;
}

static int sweep_status(const char *db) {
  as_err_t err = {0};
  store_t *s;
  if (access(db, F_OK) != 0) {
    as_err_set(&err, AS_EINVAL, "%s: no such store", db);
    return cli_fail("sweep", &err);
  }
  if (store_open_existing(db, &s, &err) != AS_OK)
    return cli_fail("sweep", &err);
  sqlite3_stmt *st = NULL;
  int           rc = sqlite3_prepare_v2(
                store_db(s),
                "SELECT w.id, w.workload, w.state, w.total_points, w.shard, w.host, "
                          "w.pid, w.created_at, coalesce(w.finished_at, ''), "
                          "substr(coalesce(w.spec_key, ''), 1, 12), "
                          "(SELECT count(*) FROM sweep_points p WHERE p.sweep_id = w.id AND "
                          " p.run_id IS NOT NULL), "
                          "(SELECT count(*) FROM sweep_points p WHERE p.sweep_id = w.id AND "
                          " p.run_id IS NULL) FROM sweeps w ORDER BY w.id",
                -1, &st, NULL);
  if (rc != SQLITE_OK) {
    as_err_set(&err, AS_ESTORE, "%s: %s", db, sqlite3_errmsg(store_db(s)));
    store_close(s);
    return cli_fail("sweep", &err);
  }
  printf("%5s  %-10s %-28s %7s %7s %6s  %-7s %-12s %s\n", "sweep", "workload",
         "state", "done", "failed", "total", "shard", "spec", "started");
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *state = (const char *)sqlite3_column_text(st, 2);
    const char *host = (const char *)sqlite3_column_text(st, 5);
    char        shown[64];
    snprintf(shown, sizeof shown, "%s", state ? state : "?");
    if (state != NULL && strcmp(state, "running") == 0 &&
        !alive_here(host, sqlite3_column_int64(st, 6)))
      snprintf(shown, sizeof shown, "interrupted (no process)");
    const char *shard = (const char *)sqlite3_column_text(st, 4);
    printf("%5lld  %-10s %-28s %7lld %7lld %6lld  %-7s %-12s %s\n",
           (long long)sqlite3_column_int64(st, 0),
           (const char *)sqlite3_column_text(st, 1), shown,
           (long long)sqlite3_column_int64(st, 10),
           (long long)sqlite3_column_int64(st, 11),
           (long long)sqlite3_column_int64(st, 3), shard ? shard : "-",
           (const char *)sqlite3_column_text(st, 9),
           (const char *)sqlite3_column_text(st, 7));
  }
  sqlite3_finalize(st);
  store_close(s);
  return CLI_EXIT_OK;
}

/* The argument of argv that is neither --status nor --db and its value, or
 * NULL: --status lists the store and takes nothing else, so an option that
 * would change nothing (--json, a workload, --vary) is refused, not
 * ignored. */
static const char *beside_status(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--db") == 0)
      i++;
    else if (strcmp(argv[i], "--status") != 0 &&
             strncmp(argv[i], "--db=", 5) != 0)
      return argv[i];
  }
  return NULL;
}

/* ---- The sweep ----------------------------------------------------------- */

typedef struct sweep_args_s sweep_args_t;
struct sweep_args_s {
  cli_sim_opts_t o;
  sweep_config_t c;
  unsigned       shard_index, shard_count;
  bool           resume, quiet, status;
  spec_words_t   spec;
  /* "FILE:LINE" of the spec's model and libc, or "": they are checked only
   * once all is read, and a message about one names its line. */
  char model_where[PATH_MAX + 16], libc_where[PATH_MAX + 16];
};

/* One option or source of the sweep command line; *i past it.  Returns an
 * exit code, or -1 to go on. */
static int take_arg(sweep_args_t *x, int argc, char **argv, int *i,
                    as_err_t *err) {
  const char *a = argv[*i], *v;
  int         took = cli_sim_opts_take(&x->o, "sweep", argc, argv, i);
  if (took < 0)
    return CLI_EXIT_USAGE;
  if (took)
    return -1;
  static const char *const flags[] = {"--resume", "--quiet", "--status"};
  for (size_t k = 0; k < sizeof flags / sizeof flags[0]; k++) {
    if ((took = cli_opt_flag("sweep", argv, *i, flags[k])) < 0)
      return CLI_EXIT_USAGE;
    if (took) {
      *(k == 0 ? &x->resume : k == 1 ? &x->quiet : &x->status) = true;
      return -1;
    }
  }
  if (a[0] != '-') { /* a source: a workload name or trace files */
    if (x->c.workload == NULL && x->c.ntraces == 0 && workload_find(a)) {
      x->c.workload = workload_find(a);
      return -1;
    }
    bool is_file = access(a, R_OK) == 0;
    if (!is_file && !workload_find(a))
      return cli_usage_error("sweep",
                             "'%s' is neither a workload nor a "
                             "readable trace file",
                             a);
    /* A second workload, or a workload after traces: one source only. */
    if (x->c.workload != NULL || x->c.ntraces == SWEEP_MAX_TRACES || !is_file)
      return cli_usage_error("sweep",
                             "a sweep takes one workload or up to "
                             "%d trace files, got '%s' too",
                             SWEEP_MAX_TRACES, a);
    x->c.traces[x->c.ntraces++] = a;
    return -1;
  }
  if ((took = cli_opt_value("sweep", argc, argv, i, "--shard", &v)) != 0) {
    if (took < 0)
      return CLI_EXIT_USAGE;
    /* Digits only, each below 2^32: sscanf's %u took '4294967296/4294967297'
     * for 0/1 (the whole sweep) and ' 0/ 2' for 0/2. */
    unsigned    idx = 0, cnt = 0;
    const char *slash = strchr(v, '/');
    if (slash == NULL || !parse_uint(slash + 1, 1, UINT32_MAX, &cnt) ||
        !parse_uint_n(v, (size_t)(slash - v), 0, cnt - 1, &idx))
      return cli_usage_error("sweep",
                             "--shard expects I/N with 0 <= I < N, "
                             "got '%s'",
                             v);
    x->shard_index = idx;
    x->shard_count = cnt;
    return -1;
  }
  if ((took = cli_opt_value("sweep", argc, argv, i, "--vary", &v)) != 0) {
    if (took < 0)
      return CLI_EXIT_USAGE;
    if (x->c.naxes == SWEEP_MAX_AXES)
      return cli_usage_error("sweep", "at most %d --vary axes", SWEEP_MAX_AXES);
    if (sweep_axis_parse(x->c.workload, v, &x->c.axes[x->c.naxes], err) !=
        AS_OK)
      return cli_fail("sweep", err);
    x->c.naxes++;
    return -1;
  }
  if ((took = cli_opt_value("sweep", argc, argv, i, "--seeds", &v)) != 0) {
    if (took < 0) /* cli_opt_value said why */
      return CLI_EXIT_USAGE;
    if (!parse_uint(v, 1, 1000, &x->c.seeds))
      return cli_usage_error("sweep", "--seeds expects 1 to 1000");
    return -1;
  }
  if ((took = cli_opt_value("sweep", argc, argv, i, "--jobs", &v)) != 0) {
    if (took < 0) /* cli_opt_value said why */
      return CLI_EXIT_USAGE;
    if (!parse_uint(v, 1, 1024, &x->c.jobs))
      return cli_usage_error("sweep", "--jobs expects 1 to 1024");
    return -1;
  }
  if (strncmp(a, "--", 2) != 0 || x->c.workload == NULL)
    return cli_usage_error("sweep", "unknown option '%s'", a);
  /* A workload option held fixed: --name=value or --name value. */
  const char *eq = strchr(a, '=');
  if (eq != NULL)
    v = eq + 1;
  else if (*i + 1 < argc)
    v = argv[++*i];
  else
    return cli_usage_error("sweep", "%s needs a value", a);
  if (x->c.nfixed == SWEEP_MAX_FIXED)
    return cli_usage_error("sweep", "too many fixed options");
  size_t nlen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
  for (size_t f = 0; f < x->c.nfixed; f++)
    if (strlen(x->c.fixed_name[f]) == nlen &&
        strncmp(x->c.fixed_name[f], a + 2, nlen) == 0)
      return cli_usage_error("sweep", "--%.*s is given twice", (int)nlen,
                             a + 2);
  if ((x->c.fixed_name[x->c.nfixed] = strndup(a + 2, nlen)) == NULL)
    return CLI_EXIT_INPUT;
  x->c.fixed_value[x->c.nfixed++] = v;
  return -1;
}

/* Parses the spec file (--spec, first) and the command line into x. */
static int parse_sweep_args(sweep_args_t *x, int argc, char **argv,
                            as_err_t *err) {
  for (int i = 1; i < argc; i++) {
    const char *v;
    int         took = cli_opt_value("sweep", argc, argv, &i, "--spec", &v);
    if (took < 0)
      return CLI_EXIT_USAGE;
    x->spec.path = took ? v : x->spec.path;
    if (took && read_spec(&x->spec, err) != AS_OK)
      return cli_fail("sweep", err);
  }
  x->spec.word[0] = "sweep";
  for (int i = 1; i <= x->spec.n; i++) {
    char where[PATH_MAX + 16];
    snprintf(where, sizeof where, "%s:%u", x->spec.path, x->spec.line[i]);
    cli_error_where(where);
    const char *model = x->o.model, *libc = x->o.libc;
    int         code = take_arg(x, x->spec.n + 1, x->spec.word, &i, err);
    cli_error_where(NULL);
    if (code >= 0)
      return code;
    /* A second --model or --libc is refused: these lines stay true. */
    if (x->o.model != model)
      snprintf(x->model_where, sizeof x->model_where, "%s", where);
    if (x->o.libc != libc)
      snprintf(x->libc_where, sizeof x->libc_where, "%s", where);
  }
  for (int i = 1; i < argc; i++) {
    const char *v;
    int         took = cli_opt_value("sweep", argc, argv, &i, "--spec", &v);
    if (took)
      continue;
    int code = take_arg(x, argc, argv, &i, err);
    if (code >= 0)
      return code;
  }
  return -1;
}

/* Checks x's model spec, then with its libc spec, once before any point;
 * an error names the spec file's line of the one at fault, if it came from
 * there.  Returns an exit code, or -1 to go on. */
static int probe_specs(const sweep_args_t *x, as_err_t *err) {
  const char *libc[] = {NULL, x->o.libc};
  const char *where[] = {x->model_where, x->libc_where};
  for (size_t k = 0; k < 2; k++) {
    sim_session_t probe;
    if (sim_session_open(x->c.model, libc[k], &x->o.kernel, &probe, err) ==
        AS_OK) {
      sim_session_close(&probe);
      continue;
    }
    cli_error_where(where[k][0] ? where[k] : NULL);
    int code = cli_fail("sweep", err);
    cli_error_where(NULL);
    return code;
  }
  return -1;
}

/* Progress on stderr when it is a terminal: points, rate and ETA. */
static void progress(sweep_cli_t *sc, size_t ndone, size_t total) {
  if (!sc->progress)
    return;
  double el = now_s() - sc->t0;
  double rate = el > 0 ? (double)ndone / el : 0;
  fprintf(stderr, "\r[%zu/%zu] %.1f points/s, ETA %.0f s   ", ndone, total,
          rate, rate > 0 ? (double)(total - ndone) / rate : 0);
  if (ndone == total)
    fputc('\n', stderr);
}

static int sweep_main(int argc, char **argv) {
  sweep_args_t x;
  memset(&x, 0, sizeof x);
  /* No default model yet: a workload sweep gets cpython, a trace sweep
   * what each trace's provenance implies (as replay targets do). */
  cli_sim_opts_default(&x.o, NULL);
  x.c.seeds = 1;
  as_err_t    err = {0};
  int         code = parse_sweep_args(&x, argc, argv, &err);
  const char *other = x.status ? beside_status(argc, argv) : NULL;
  if (code < 0 && other != NULL)
    code = cli_usage_error("sweep", "--status takes only --db FILE, got '%s'",
                           other);
  if (code < 0 && x.status)
    code = x.o.db ? sweep_status(x.o.db)
                  : cli_usage_error("sweep", "--status needs --db FILE");
  if (code < 0 && x.c.workload == NULL && x.c.ntraces == 0)
    code = cli_usage_error("sweep", "which workload or traces? (e.g. "
                                    "survivors, or trace files)");
  for (size_t f = 0; code < 0 && f < x.c.nfixed; f++)
    for (size_t a = 0; a < x.c.naxes && code < 0; a++)
      if (strcmp(x.c.fixed_name[f], x.c.axes[a].name) == 0)
        code = cli_usage_error("sweep", "--%s is both fixed and varied",
                               x.c.fixed_name[f]);
  if (code < 0 && x.c.naxes == 0 && x.c.ntraces == 0)
    code = cli_usage_error("sweep", "nothing to vary: give --vary NAME=V,...");
  if (code < 0 && x.resume && x.o.db == NULL)
    code = cli_usage_error("sweep", "--resume needs --db FILE");
  /* Options replay and run take that a sweep has no use for: refused, not
   * silently ignored (a sweep records marks only). */
  if (code < 0 && (x.o.sample_every_ns != 0 || x.o.lenient))
    code =
        cli_usage_error("sweep",
                        "%s is not a sweep option (sweeps record "
                        "marks only)",
                        x.o.sample_every_ns ? "--sample-every" : "--lenient");
  x.c.model = x.o.model || x.c.workload ? x.o.model : NULL;
  if (x.c.workload && !x.c.model)
    x.c.model = "cpython";
  /* A model spec is checked once, before any point: a bad one used to
   * fail every point, and exit 1.  (Trace sweeps without --model take each
   * trace's own model.) */
  if (code < 0 && x.c.model != NULL)
    code = probe_specs(&x, &err);
  x.c.libc = x.o.libc;
  x.c.kernel = x.o.kernel;
  x.c.layouts = x.o.layouts;
  x.c.command = cli_command_line(argc, argv);

  sweep_point_t *pts = NULL;
  size_t         total = 0, npts = 0;
  char           spec_key[65] = "", shard[32] = "";
  sweep_cli_t    sc = {
         .c = &x.c, .t0 = now_s(), .progress = !x.quiet && isatty(STDERR_FILENO)};
  if (code < 0 && sweep_expand(&x.c, &pts, &total, spec_key, &err) != AS_OK) {
    unsigned line =
        x.c.workload ? spec_line_of_option(&x.spec, x.c.workload->name, err.msg)
                     : 0;
    if (line == 0)
      line = spec_line_of_repeated_axis(&x.spec, err.msg);
    char where[PATH_MAX + 16];
    snprintf(where, sizeof where, "%s:%u", x.spec.path ? x.spec.path : "",
             line);
    cli_error_where(line ? where : NULL);
    code = cli_fail("sweep", &err);
    cli_error_where(NULL);
  }
  npts = sweep_shard(pts, total, x.shard_index, x.shard_count);
  if (x.shard_count > 1)
    snprintf(shard, sizeof shard, "%u/%u", x.shard_index, x.shard_count);
  if (code < 0 && x.o.db != NULL) {
    sweep_store_info_t info = {.spec_key = spec_key,
                               .total_points = total,
                               .shard = shard[0] ? shard : NULL,
                               .resume = x.resume};
    if (store_open(x.o.db, &sc.store, &err) != AS_OK ||
        (x.resume &&
         sweep_skip_done(sc.store, spec_key, pts, &npts, &err) != AS_OK) ||
        sweep_store_begin(sc.store, &x.c, &info, &sc.sweep_id, &err) != AS_OK)
      code = cli_fail("sweep", &err);
  }
  if (code < 0) {
    /* Caught before the line that announces the points: whoever waits
     * for it may stop the sweep from then on. */
    catch_stop_signals();
    if (!x.quiet)
      fprintf(stderr, "sweep: %zu points%s%s (spec %.12s)\n", npts,
              shard[0] ? " in shard " : "", shard, spec_key);
    x.c.stop = &g_stop;
    if (sweep_run(&x.c, pts, npts, on_done, &sc, &err) != AS_OK)
      code = cli_fail("sweep", &err);
    else {
      print_results(&x.c, pts, npts, x.o.csv, x.o.json, sc.sweep_id);
      code = g_stop ? 130 : sc.failed ? CLI_EXIT_INPUT : CLI_EXIT_OK;
      if (g_stop)
        fprintf(stderr, "sweep: interrupted; --resume continues it\n");
    }
    if (sc.store != NULL &&
        sweep_store_finish(sc.store, sc.sweep_id,
                           g_stop || code == CLI_EXIT_USAGE ? "interrupted"
                                                            : "complete",
                           &err) != AS_OK)
      code = cli_fail("sweep", &err);
    if (sc.store != NULL && !x.quiet)
      fprintf(stderr, "sweep: stored as sweep %" PRId64 " in %s\n", sc.sweep_id,
              x.o.db);
  }
  store_close(sc.store);
  free(pts);
  for (size_t a = 0; a < x.c.naxes; a++)
    sweep_axis_free(&x.c.axes[a]);
  for (size_t f = 0; f < x.c.nfixed; f++)
    free((char *)x.c.fixed_name[f]);
  for (int i = 1; i <= x.spec.n; i++)
    free(x.spec.word[i]);
  return code;
}

const cli_command_t cli_cmd_sweep = {
    .name = "sweep",
    .summary = "run a workload or traces over a grid of parameters and seeds",
    .usage =
        "usage: allocsim sweep WORKLOAD|TRACE... --vary NAME=V1,V2,...\n"
        "                      [--vary ...] [--seeds N] [--jobs N]\n"
        "                      [--layouts N]\n"
        "                      [--db FILE] [--shard I/N] [--resume]\n"
        "                      [--spec FILE] [--quiet] [--csv | --json]\n"
        "                      [--model M] [--libc L] [--page-size N]\n"
        "                      [--OPTION VALUE ...]\n"
        "       allocsim sweep --status --db FILE\n\n"
        "Runs WORKLOAD (or each TRACE file) at every combination of the\n"
        "--vary values, with seeds 1..N (--seeds, default 1) where the\n"
        "workload is seeded (survivors: random pattern only).  NAME is:\n"
        "  a workload option       fraction, size, pattern, every, total ...\n"
        "  page_size               the simulated OS page (4K, 16K, 64K)\n"
        "  mmap_offset             bytes by which mmap_top is lowered: "
        "another\n"
        "                          address layout, as ASLR gives each run\n"
        "  model, libc             model specs (glibc, jemalloc:narenas=2)\n"
        "  MODEL.OPTION            an option of a model (glibc.arena_max); it\n"
        "                          applies only where that model is simulated\n"
        "                          (an error if no point simulates it)\n"
        "--model defaults to cpython for a workload; a trace file is\n"
        "replayed against the model its provenance implies (as compare\n"
        "picks: cpython for Python captures, else glibc with the run's\n"
        "knobs).  A trace with no allocation (a measured-run file) is an\n"
        "error.  With several TRACE files, a trace column (CSV, JSON: trace)\n"
        "names each point's file (a copy of another file too).  Other\n"
        "--OPTION VALUE pairs are workload options held fixed (--total 64).\n"
        "Each point has a key (SHA-256 of what decides its result); points\n"
        "with equal keys run once.  For each\n"
        "point: kept = RSS(after) - RSS(start), the (1 - p)^k formula,\n"
        "pymalloc arenas still pinned, peak and final RSS.  --jobs N runs\n"
        "N points at once (default: online cores).\n"
        "Each point is the mean over address layouts (--layouts N, default\n"
        "all that differ: 4 with 4 KiB pages; kept_range is their min-max;\n"
        "1 for the default layout only, as with --vary mmap_offset).\n"
        "--db stores a sweeps row, then each point (its simulated run and its\n"
        "sweep_points row) in one transaction; SIGINT or SIGTERM stops after\n"
        "the running points and records the sweep as interrupted (exit "
        "130).\n\n"
        "  --shard I/N    run every N-th point from the I-th (0 <= I < N), "
        "for\n"
        "                 GNU parallel or a Slurm array; merge the stores "
        "with\n"
        "                 allocsim db merge\n"
        "  --resume       skip the points a sweep with the same spec key\n"
        "                 already stored in --db, continuing that sweep\n"
        "  --status       list the store's sweeps: state, points done/failed\n"
        "  --spec FILE    read settings from FILE first, one per line:\n"
        "                 workload = NAME | trace = PATH | model = SPEC |\n"
        "                 libc = SPEC | seeds = N | jobs = N | page_size = N "
        "|\n"
        "                 vary NAME = V1,V2 | set OPTION = VALUE   (# "
        "comments)\n"
        "  --quiet        no progress line (none when stderr is not a "
        "terminal)\n"
        "The table (or CSV, JSON) goes to stdout.  Exit 1 if a point "
        "failed.\n\n"
        "example: allocsim sweep survivors --vary fraction=1e-5,1e-4 \\\n"
        "           --vary size=64,512 --seeds 3 --db sweeps.db\n",
    .run = sweep_main,
};
