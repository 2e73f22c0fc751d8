/* cli/cmd_formula_validate.c -- `allocsim formula --validate --db STORE`:
 * the formula and the simulation against a store's measured survivors runs
 * (analysis/formula_validate.h). */
#include "cli.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/formula_validate.h"

#define MIB 1048576.0

/* A JSON number, or null for NAN. */
static void json_num(const char *name, double v, const char *sep) {
  if (isfinite(v))
    printf("\"%s\":%.17g%s", name, v, sep);
  else
    printf("\"%s\":null%s", name, sep);
}

static void print_json(const fv_result_t *r) {
  printf("{\"groups\":[");
  for (size_t g = 0; g < r->ngroups; g++) {
    const fv_group_t *q = &r->groups[g];
    printf("%s{\"model\":", g ? "," : "");
    cli_json_string(stdout, q->model);
    printf(",\"page_size\":%" PRIu64 ",\"size_bytes\":%" PRIu64
           ",\"unit_bytes\":%" PRIu64 ",\"points\":%zu,\"k_geometry\":%" PRIu64
           ",\"k_geometry_alt\":%" PRIu64 ",",
           q->page_size, q->size_bytes, q->unit_bytes, q->npoints,
           q->k_geometry, q->k_geometry_alt);
    json_num("k_fit", q->fitted ? q->k_fit : NAN, ",");
    json_num("k_lo", q->fitted ? q->k_lo : NAN, ",");
    json_num("k_hi", q->fitted ? q->k_hi : NAN, ",");
    json_num("rms_formula_bytes", q->rms_formula_bytes, ",");
    json_num("rms_fitted_bytes", q->rms_fitted_bytes, ",");
    json_num("rms_simulated_bytes", q->rms_simulated_bytes, "}");
  }
  printf("],\"points\":[");
  for (size_t i = 0; i < r->npoints; i++) {
    const fv_point_t *p = &r->points[i];
    printf("%s{\"run_id\":%" PRId64 ",\"source\":", i ? "," : "", p->run_id);
    cli_json_string(stdout, p->source);
    printf(",\"model\":");
    cli_json_string(stdout, p->model);
    printf(",\"page_size\":%" PRIu64 ",\"size_bytes\":%" PRIu64
           ",\"pattern\":\"%s\",\"fraction\":%.17g,\"every\":%" PRIu64
           ",\"k_geometry\":%" PRIu64 ",",
           p->page_size, p->size_bytes, survivors_pattern_name(p->pattern),
           p->fraction, p->every, p->k_geometry);
    json_num("measured_kept_bytes", p->measured_kept_bytes, ",");
    json_num("simulated_kept_bytes", p->simulated_kept_bytes, ",");
    json_num("formula_kept_bytes", p->formula_kept_bytes, ",");
    json_num("formula_sd_bytes", p->formula_sd_bytes, ",");
    json_num("fitted_kept_bytes", p->fitted_kept_bytes, "}");
  }
  printf("],\"skipped\":[");
  for (size_t i = 0; i < r->nskipped; i++) {
    printf("%s{\"run_id\":%" PRId64 ",\"why\":", i ? "," : "",
           r->skipped[i].run_id);
    cli_json_string(stdout, r->skipped[i].why);
    printf("}");
  }
  printf("]}\n");
}

/* Bytes as MiB in width columns, or "-" where there is no value (NAN):
 * there is no fitted k for stride and oldest runs, nor in a group of one
 * point. */
static void print_mib(int width, double bytes) {
  if (isfinite(bytes))
    printf("%*.2f", width, bytes / MIB);
  else
    printf("%*s", width, "-");
}

static void print_group(const fv_group_t *g) {
  printf("%s, %" PRIu64 "-byte objects, %" PRIu64
         "-byte pages: %zu random point%s\n",
         g->model, g->size_bytes, g->page_size, g->npoints,
         g->npoints == 1 ? "" : "s");
  printf("  k from geometry  %" PRIu64, g->k_geometry);
  if (g->k_geometry_alt)
    printf(" (%" PRIu64 " in an arena of the other alignment)",
           g->k_geometry_alt);
  printf("\n");
  if (g->fitted)
    printf("  k fitted         %.0f, 95%% CI %.0f .. %.0f (least squares, "
           "%zu dof)\n",
           g->k_fit, g->k_lo, g->k_hi, g->npoints - 1);
  else
    printf("  k fitted         - (needs two or more points)\n");
  printf("  rms error        formula %.2f MiB, formula at fitted k ",
         g->rms_formula_bytes / MIB);
  if (g->fitted)
    printf("%.2f MiB", g->rms_fitted_bytes / MIB);
  else
    printf("-");
  printf(", simulation %.2f MiB\n", g->rms_simulated_bytes / MIB);
}

static void print_point(const fv_point_t *p) {
  char what[64];
  if (p->pattern == SURVIVORS_STRIDE)
    snprintf(what, sizeof what, "stride %" PRIu64, p->every);
  else
    snprintf(what, sizeof what, "%s %g", survivors_pattern_name(p->pattern),
             p->fraction);
  printf("%5" PRId64 " %5" PRIu64 " %-16s %10.2f %10.2f %10.2f %7.2f ",
         p->run_id, p->size_bytes, what, p->measured_kept_bytes / MIB,
         p->simulated_kept_bytes / MIB, p->formula_kept_bytes / MIB,
         p->formula_sd_bytes / MIB);
  print_mib(10, p->fitted_kept_bytes);
  printf(" %+9.2f %+9.2f\n",
         (p->measured_kept_bytes - p->formula_kept_bytes) / MIB,
         (p->measured_kept_bytes - p->simulated_kept_bytes) / MIB);
}

static void print_text(const char *db, const fv_result_t *r) {
  printf("the (1 - p)^k formula against %zu measured survivors runs in %s\n"
         "(kept = RSS at 'after' - RSS at 'start')\n\n",
         r->npoints, db);
  for (size_t g = 0; g < r->ngroups; g++) {
    print_group(&r->groups[g]);
    printf("\n");
  }
  printf("%5s %5s %-16s %10s %10s %10s %7s %10s %9s %9s\n", "run", "size",
         "survivors", "measured", "simulated", "formula", "sd", "at fit k",
         "meas-form", "meas-sim");
  printf("%5s %5s %-16s %10s %10s %10s %7s %10s %9s %9s\n", "", "", "", "MiB",
         "MiB", "MiB", "MiB", "MiB", "MiB", "MiB");
  for (size_t i = 0; i < r->npoints; i++)
    print_point(&r->points[i]);
  for (size_t i = 0; i < r->nskipped; i++)
    printf("skipped run %" PRId64 ": %s\n", r->skipped[i].run_id,
           r->skipped[i].why);
}

int formula_validate_main(int argc, char **argv) {
  const char *db = NULL, *v;
  unsigned    layouts = 1;
  bool        json = false;
  for (int i = 1; i < argc; i++) {
    int took;
    if ((took = cli_opt_flag("formula", argv, i, "--validate")) != 0) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      continue;
    }
    if ((took = cli_opt_flag("formula", argv, i, "--json")) != 0) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      json = true;
      continue;
    }
    if ((took = cli_opt_value("formula", argc, argv, &i, "--db", &v)) != 0) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      db = v;
    } else if ((took = cli_opt_value("formula", argc, argv, &i, "--layouts",
                                     &v)) != 0) {
      char         *end;
      unsigned long n = took < 0 ? 0 : strtoul(v, &end, 10);
      if (took < 0) /* cli_opt_value said why */
        return CLI_EXIT_USAGE;
      if (*v == '-' || *end || n < 1 || n > 4)
        return cli_usage_error("formula", "--layouts expects 1 to 4");
      layouts = (unsigned)n;
    } else
      return cli_usage_error("formula", "--validate: unknown option '%s'",
                             argv[i]);
  }
  if (!db)
    return cli_usage_error("formula", "--validate needs --db STORE");
  as_err_t err = {0};
  if (access(db, R_OK) != 0) {
    as_err_set(&err, AS_EINVAL, "%s: no such store", db);
    return cli_fail("formula", &err);
  }
  store_t    *s;
  fv_result_t r = {0};
  as_status_t rc = store_open_existing(db, &s, &err);
  if (rc == AS_OK) {
    rc = formula_validate(s, layouts, &r, &err);
    store_close(s);
  }
  if (rc == AS_OK && r.npoints == 0)
    rc = as_err_set(&err, AS_EINVAL,
                    "%s: no measured survivors runs (record some with "
                    "allocsim record)",
                    db);
  if (rc == AS_OK)
    json ? print_json(&r) : print_text(db, &r);
  fv_result_free(&r);
  return rc == AS_OK ? CLI_EXIT_OK : cli_fail("formula", &err);
}
