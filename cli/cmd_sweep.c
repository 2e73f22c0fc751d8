/* cli/cmd_sweep.c -- `allocsim sweep WORKLOAD --vary NAME=V,...`: run a
 * workload over a grid of parameters and seeds, in parallel, print kept
 * memory beside the formula, and store every point (analysis/sweep.h). */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../analysis/store.h"
#include "../analysis/sweep.h"

#define MIB 1048576.0

typedef struct sweep_cli_s {
  const sweep_config_t *c;
  store_t              *store;
  int64_t               sweep_id;
  size_t                failed;
} sweep_cli_t;

static void describe_point(const sweep_config_t *c, const sweep_point_t *p,
                           char *buf, size_t len) {
  size_t used = 0;
  buf[0]      = '\0';
  for (size_t a = 0; a < c->naxes && used < len; a++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s=%s", a ? " " : "",
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
    fprintf(stderr, "[%zu/%zu] %s: failed: %s\n", ndone, total, what,
            p->error);
  } else {
    fprintf(stderr, "[%zu/%zu] %s: kept %.2f MiB", ndone, total, what,
            (double)p->kept_bytes / MIB);
    if (p->have_formula)
      fprintf(stderr, " (formula %.2f +- %.2f)",
              p->formula_kept_bytes / MIB, p->formula_sd_bytes / MIB);
    fprintf(stderr, ", %" PRIu64 " events in %.2f s\n", p->events,
            p->seconds);
  }
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
static const char *mib(char *buf, bool have, double bytes) {
  if (!have)
    return "-";
  snprintf(buf, 32, "%.2f", bytes / MIB);
  return buf;
}

static void print_results(const sweep_config_t *c, sweep_point_t *pts,
                          size_t n, bool csv, bool json, int64_t sweep_id) {
  qsort(pts, n, sizeof *pts, cmp_points);
  if (json) {
    printf("{\"sweep_id\":%" PRId64 ",\"workload\":\"%s\",\"points\":[",
           sweep_id, c->workload->name);
    for (size_t i = 0; i < n; i++) {
      const sweep_point_t *p = &pts[i];
      char                 params[2048];
      sweep_point_json(c, p, params, sizeof params);
      uint64_t peak = 0, after = 0, reuse = 0;
      bool     hp = sweep_point_mark(p, "peak", &peak);
      bool     ha = sweep_point_mark(p, "after", &after);
      bool     hr = sweep_point_mark(p, "after_reuse", &reuse);
      printf("%s{\"point\":%" PRIu64 ",\"seed\":%" PRIu64
             ",\"ok\":%s,\"params\":%s",
             i ? "," : "", p->point, p->seed,
             p->status == AS_OK ? "true" : "false", params);
      if (p->have_kept)
        printf(",\"kept_bytes\":%" PRId64, p->kept_bytes);
      if (p->have_formula)
        printf(",\"formula_kept_bytes\":%.17g,\"formula_sd_bytes\":%.17g",
               p->formula_kept_bytes, p->formula_sd_bytes);
      if (p->arenas_pinned >= 0)
        printf(",\"arenas_pinned\":%" PRId64, p->arenas_pinned);
      if (hp)
        printf(",\"rss_peak_bytes\":%" PRIu64, peak);
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
    printf("point");
    for (size_t a = 0; a < c->naxes; a++)
      printf(",%s", c->axes[a].name);
    printf(",seed,kept_mib,formula_mib,formula_sd_mib,arenas_pinned,"
           "peak_mib,reuse_growth_mib,events,seconds\n");
  } else {
    printf("%5s", "point");
    for (size_t a = 0; a < c->naxes; a++)
      printf(" %10s", c->axes[a].name);
    printf(" %4s %10s %10s %8s %7s %10s %10s\n", "seed", "kept_MiB",
           "formula", "sd", "pinned", "peak_MiB", "reuse+MiB");
  }
  for (size_t i = 0; i < n; i++) {
    const sweep_point_t *p = &pts[i];
    char                 b1[32], b2[32], b3[32], b4[32], b5[32], pin[32];
    uint64_t             peak = 0, after = 0, reuse = 0;
    bool                 hp = sweep_point_mark(p, "peak", &peak);
    bool                 ha = sweep_point_mark(p, "after", &after);
    bool                 hr = sweep_point_mark(p, "after_reuse", &reuse);
    bool                 ok = p->status == AS_OK;
    snprintf(pin, sizeof pin, "%" PRId64, p->arenas_pinned);
    printf(csv ? "%" PRIu64 : "%5" PRIu64, p->point);
    for (size_t a = 0; a < c->naxes; a++)
      printf(csv ? ",%s" : " %10s", p->values[a]);
    printf(csv ? ",%" PRIu64 : " %4" PRIu64, p->seed);
    printf(csv ? ",%s,%s,%s,%s,%s,%s" : " %10s %10s %8s %7s %10s %10s",
           mib(b1, ok && p->have_kept, (double)p->kept_bytes),
           mib(b2, p->have_formula, p->formula_kept_bytes),
           mib(b3, p->have_formula, p->formula_sd_bytes),
           ok && p->arenas_pinned >= 0 ? pin : "-",
           mib(b4, ok && hp, (double)peak),
           mib(b5, ok && ha && hr, (double)reuse - (double)after));
    if (csv)
      printf("%s%" PRIu64 "%s%.3f", sep, p->events, sep, p->seconds);
    if (!ok && !csv)
      printf("  failed: %s", p->error);
    printf("\n");
  }
}

static bool parse_uint(const char *s, unsigned lo, unsigned hi,
                       unsigned *out) {
  char *end;
  errno           = 0;
  unsigned long v = strtoul(s, &end, 10);
  if (end == s || *end || errno || s[0] == '-' || v < lo || v > hi)
    return false;
  *out = (unsigned)v;
  return true;
}

static int sweep_main(int argc, char **argv) {
  if (argc < 2 || argv[1][0] == '-')
    return cli_usage_error("sweep", "which workload? (e.g. survivors)");
  const workload_def_t *wl = workload_find(argv[1]);
  if (wl == NULL)
    return cli_usage_error("sweep", "unknown workload '%s'", argv[1]);

  cli_sim_opts_t o;
  cli_sim_opts_default(&o, "cpython");
  sweep_config_t c = {.workload = wl, .seeds = 1};
  int            code = CLI_EXIT_OK;
  as_err_t       err  = {0};
  for (int i = 2; i < argc && code == CLI_EXIT_OK; i++) {
    const char *a = argv[i], *v;
    int         took = cli_sim_opts_take(&o, "sweep", argc, argv, &i);
    if (took < 0) {
      code = CLI_EXIT_USAGE;
      break;
    }
    if (took)
      continue;
    if (strncmp(a, "--", 2) != 0) {
      code = cli_usage_error("sweep", "expected an option, got '%s'", a);
      break;
    }
    const char *name = NULL;
    static const char *const own[] = {"--vary", "--seeds", "--jobs"};
    for (size_t k = 0; k < sizeof own / sizeof own[0] && name == NULL; k++)
      if ((took = cli_opt_value("sweep", argc, argv, &i, own[k], &v)) != 0)
        name = own[k];
    if (took < 0) {
      code = CLI_EXIT_USAGE;
      break;
    }
    if (name == NULL) {
      /* A workload option held fixed: --name=value or --name value. */
      const char *eq = strchr(a, '=');
      if (eq != NULL)
        v = eq + 1;
      else if (i + 1 < argc)
        v = argv[++i];
      else {
        code = cli_usage_error("sweep", "%s needs a value", a);
        break;
      }
    }
    if (name != NULL && strcmp(name, "--vary") == 0) {
      if (c.naxes == SWEEP_MAX_AXES) {
        code = cli_usage_error("sweep", "at most %d --vary axes",
                               SWEEP_MAX_AXES);
        break;
      }
      if (sweep_axis_parse(wl, v, &c.axes[c.naxes], &err) != AS_OK) {
        code = cli_fail("sweep", &err);
        break;
      }
      c.naxes++;
    } else if (name != NULL && strcmp(name, "--seeds") == 0) {
      if (!parse_uint(v, 1, 1000, &c.seeds)) {
        fprintf(stderr, "allocsim sweep: --seeds expects an integer in "
                        "1..1000, got '%s'\n",
                v);
        code = CLI_EXIT_INPUT;
      }
    } else if (name != NULL && strcmp(name, "--jobs") == 0) {
      if (!parse_uint(v, 1, 1024, &c.jobs)) {
        fprintf(stderr, "allocsim sweep: --jobs expects an integer in "
                        "1..1024, got '%s'\n",
                v);
        code = CLI_EXIT_INPUT;
      }
    } else {
      /* A workload option held fixed; the workload checks name and value. */
      if (c.nfixed == SWEEP_MAX_FIXED) {
        code = cli_usage_error("sweep", "too many fixed options");
        break;
      }
      const char *eq   = strchr(a, '=');
      size_t      nlen = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
      c.fixed_name[c.nfixed]  = strndup(a + 2, nlen);
      c.fixed_value[c.nfixed] = v;
      if (c.fixed_name[c.nfixed] == NULL) {
        code = CLI_EXIT_INPUT;
        break;
      }
      c.nfixed++;
    }
  }
  for (size_t f = 0; code == CLI_EXIT_OK && f < c.nfixed; f++)
    for (size_t a = 0; a < c.naxes; a++)
      if (strcmp(c.fixed_name[f], c.axes[a].name) == 0) {
        code = cli_usage_error("sweep", "--%s is both fixed and varied",
                               c.fixed_name[f]);
        break;
      }
  if (code == CLI_EXIT_OK && c.naxes == 0)
    code = cli_usage_error("sweep", "nothing to vary: give --vary NAME=V,...");
  c.model   = o.model;
  c.libc    = o.libc;
  c.kernel  = o.kernel;
  c.command = cli_command_line(argc, argv);

  sweep_point_t *pts   = NULL;
  size_t         npts  = 0;
  sweep_cli_t    sc    = {.c = &c};
  if (code == CLI_EXIT_OK && sweep_expand(&c, &pts, &npts, &err) != AS_OK)
    code = cli_fail("sweep", &err);
  if (code == CLI_EXIT_OK && o.db != NULL &&
      (store_open(o.db, &sc.store, &err) != AS_OK ||
       sweep_store_begin(sc.store, &c, &sc.sweep_id, &err) != AS_OK))
    code = cli_fail("sweep", &err);
  if (code == CLI_EXIT_OK) {
    fprintf(stderr, "sweep: %zu points on %s%s%s\n", npts, c.model,
            c.libc ? " with " : "", c.libc ? c.libc : "");
    if (sweep_run(&c, pts, npts, on_done, &sc, &err) != AS_OK)
      code = cli_fail("sweep", &err);
    else {
      print_results(&c, pts, npts, o.csv, o.json, sc.sweep_id);
      if (sc.failed)
        code = CLI_EXIT_INPUT;
      if (sc.store)
        fprintf(stderr, "sweep: stored as sweep %" PRId64 " in %s\n",
                sc.sweep_id, o.db);
    }
  }
  store_close(sc.store);
  free(pts);
  for (size_t a = 0; a < c.naxes; a++)
    sweep_axis_free(&c.axes[a]);
  for (size_t f = 0; f < c.nfixed; f++)
    free((char *)c.fixed_name[f]);
  return code;
}

const cli_command_t cli_cmd_sweep = {
    .name    = "sweep",
    .summary = "run a workload over a grid of parameters and seeds",
    .usage =
        "usage: allocsim sweep WORKLOAD --vary NAME=V1,V2,... [--vary ...]\n"
        "                      [--seeds N] [--jobs N] [--db FILE]\n"
        "                      [--csv | --json] [--model M] [--libc L]\n"
        "                      [--page-size N] [--thp] [--OPTION VALUE ...]\n\n"
        "Runs WORKLOAD at every combination of the --vary values (NAME is a\n"
        "workload option such as fraction, size, pattern, every, total,\n"
        "reuse-size; page_size for the simulated OS page; mmap_offset, bytes\n"
        "by which the simulated mmap_top is lowered: another address-space\n"
        "layout, as ASLR gives each real run), with seeds\n"
        "1..N (--seeds, default 1) where the workload is seeded (survivors:\n"
        "random pattern only).  Other --OPTION VALUE pairs are workload\n"
        "options held fixed (e.g. --total 64).  For each point: kept =\n"
        "RSS(after) - RSS(start), the (1 - p)^k formula, pymalloc arenas\n"
        "still pinned, peak RSS and (with --reuse-size) growth after reuse.\n"
        "--jobs N runs N points at once on worker threads, each with its\n"
        "own session (default: the number of online cores).  --db stores a\n"
        "sweeps row, one simulated run per point and its sweep_points row.\n"
        "Progress goes to stderr; the table (or CSV, JSON) to stdout.\n"
        "Exit 1 if any point failed.\n\n"
        "example: allocsim sweep survivors --vary fraction=1e-5,1e-4 \\\n"
        "           --vary size=64,512 --seeds 3 --db sweeps.db\n",
    .run = sweep_main,
};
