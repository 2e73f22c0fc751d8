/* cli/cmd_lab.c -- `allocsim lab [NAME]`: the labs of the allocator course
 * notes (analysis/lab.h).  Without a name, the list; with one, what the lab
 * shows and its question first, then the simulated steps with the counters
 * that explain them and a heap map, then what to notice; --measure runs the
 * real program on this machine and prints measured beside simulated. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB        (1024.0 * 1024.0)
#define TEXT_WIDTH 78

typedef struct lab_cli_s lab_cli_t;
struct lab_cli_s {
  bool          json, measure, recorded, results, map, color;
  uint64_t      repeat;   /* measured runs per variant */
  uint64_t      cells;    /* heap map cells per row */
  uint64_t      rows;     /* heap map rows printed */
  const char   *save_dir; /* keep measured-run files here */
  cli_lab_env_t env;
};

/* ---- Text --------------------------------------------------------------- */

/* text as a paragraph wrapped at TEXT_WIDTH with indent spaces. */
static void print_para(const char *text, int indent) {
  int col = 0;
  for (const char *p = text; *p != '\0';) {
    while (*p == ' ')
      p++;
    const char *end = p;
    while (*end != '\0' && *end != ' ')
      end++;
    int w = (int)(end - p);
    if (w == 0)
      break;
    if (col > 0 && col + 1 + w > TEXT_WIDTH) {
      putchar('\n');
      col = 0;
    }
    if (col == 0)
      col = printf("%*s%.*s", indent, "", w, p);
    else
      col += printf(" %.*s", w, p);
    p = end;
  }
  if (col > 0)
    putchar('\n');
}

/* Lines of text, each indented. */
static void print_lines(const char *text, int indent) {
  for (const char *p = text; *p != '\0';) {
    const char *nl = strchr(p, '\n');
    int         w = nl ? (int)(nl - p) : (int)strlen(p);
    printf("%*s%.*s\n", indent, "", w, p);
    p += w + (nl != NULL);
  }
}

static void print_models(FILE *out, const lab_def_t *def, const char *sep) {
  for (size_t i = 0; def->models[i] != NULL; i++)
    fprintf(out, "%s%s", i ? sep : "", def->models[i]);
}

/* def's models as a JSON array of strings. */
static void print_models_json(const lab_def_t *def) {
  printf("[");
  for (size_t k = 0; def->models[k] != NULL; k++) {
    printf("%s", k ? ", " : "");
    cli_json_string(stdout, def->models[k]);
  }
  printf("]");
}

/* ---- The list ----------------------------------------------------------- */

static int list_labs(bool json) {
  size_t                  n;
  const lab_def_t *const *labs = lab_registry(&n);
  if (json) {
    printf("[");
    for (size_t i = 0; i < n; i++) {
      char missing[256];
      lab_missing_models(labs[i], missing, sizeof missing);
      printf("%s{\"name\": ", i ? ", " : "");
      cli_json_string(stdout, labs[i]->name);
      printf(", \"title\": ");
      cli_json_string(stdout, labs[i]->title);
      printf(", \"models\": ");
      print_models_json(labs[i]);
      printf(", \"missing_models\": ");
      cli_json_string(stdout, missing);
      printf("}");
    }
    printf("]\n");
    return CLI_EXIT_OK;
  }
  for (size_t i = 0; i < n; i++) {
    char   missing[256];
    size_t nmissing = lab_missing_models(labs[i], missing, sizeof missing);
    printf("%-16s %s [", labs[i]->name, labs[i]->title);
    print_models(stdout, labs[i], ", ");
    printf("]%s%s%s\n", nmissing ? " (no model yet: " : "",
           nmissing ? missing : "", nmissing ? ")" : "");
  }
  printf("\n`allocsim lab NAME` runs one; docs/course/ has a page for each.\n");
  return CLI_EXIT_OK;
}

/* ---- Measuring ---------------------------------------------------------- */

/* Runs variant vi's program o->repeat times and attaches the runs. */
static as_status_t measure_variant(lab_result_t *r, size_t vi,
                                   const lab_cli_t *o, as_err_t *err) {
  const lab_def_t     *def = r->def;
  const lab_variant_t *v = &def->variants[vi];
  char                 paths[LAB_MAX_RUNS][PATH_MAX];
  const char          *list[LAB_MAX_RUNS];
  as_status_t          rc = AS_OK;
  size_t               made = 0;
  for (size_t k = 0; k < o->repeat && rc == AS_OK; k++) {
    if (o->save_dir != NULL) {
      if (!as_format_fits(paths[k], sizeof paths[k],
                          "%s/lab-%s-v%zu-r%zu.trace", o->save_dir, def->name,
                          vi + 1, k + 1)) {
        rc =
            as_err_set(err, AS_EINVAL, "--save %s: path too long", o->save_dir);
        break;
      }
    } else {
      const char *tmp = getenv("TMPDIR");
      as_format_fits(paths[k], sizeof paths[k], "%s/allocsim-lab-XXXXXX.trace",
                     tmp && *tmp ? tmp : "/tmp");
      int fd = mkstemps(paths[k], 6);
      if (fd < 0) {
        rc = as_err_set(err, AS_EINVAL, "%s: %s", paths[k], strerror(errno));
        break;
      }
      close(fd);
    }
    made++;
    list[k] = paths[k];
    if (!o->json)
      fprintf(stderr, "measuring %s%s%s (run %zu of %" PRIu64 ")\n", def->name,
              v->label[0] ? ": " : "", v->label, k + 1, o->repeat);
    rc = cli_lab_measure(v, &o->env, paths[k], err);
  }
  if (rc == AS_OK)
    rc = lab_attach_measured(r, vi, list, made, err);
  if (o->save_dir == NULL)
    for (size_t k = 0; k < made; k++)
      unlink(paths[k]);
  return rc;
}

/* ---- The report --------------------------------------------------------- */

/* "glibc.brk_bytes" -> "brk_bytes": the counter without its model. */
static const char *counter_short_name(const char *name) {
  const char *dot = strchr(name, '.');
  return dot ? dot + 1 : name;
}

/* Whether another of the lab's counters has the same short name (the decay
 * lab's "mimalloc.purges" and "jemalloc.purges"): then both headers keep
 * their model, or the table has two columns of one name. */
static bool short_name_shared(const char *const *counters, size_t n,
                              size_t which) {
  for (size_t c = 0; c < n; c++)
    if (c != which && strcmp(counter_short_name(counters[c]),
                             counter_short_name(counters[which])) == 0)
      return true;
  return false;
}

/* "brk_bytes" -> "brk KiB"; "arenas" -> "arenas"; with qualified,
 * "jemalloc.purges" stays whole. */
static void counter_header(const char *name, const char *unit, bool qualified,
                           char *buf, size_t len) {
  const char *shown = qualified ? name : counter_short_name(name);
  size_t      n = strlen(shown);
  bool        bytes = unit != NULL && strcmp(unit, "bytes") == 0;
  if (bytes && n > 6 && strcmp(shown + n - 6, "_bytes") == 0)
    n -= 6;
  snprintf(buf, len, "%.*s%s", (int)n, shown, bytes ? " KiB" : "");
}

/* A step's row label: the mark, under a heading per variant when the lab
 * has several. */
static const char *row_label(const lab_result_t *r, const lab_step_t *st) {
  return lab_variant_count(r->def) > 1 ? st->mark : st->label;
}

static void print_steps(const lab_result_t *r, bool measured) {
  const lab_def_t *def = r->def;
  int              w = 20;
  for (size_t i = 0; i < r->nsteps; i++)
    if ((int)strlen(row_label(r, &r->steps[i])) + 2 > w)
      w = (int)strlen(row_label(r, &r->steps[i])) + 2;
  char   head[LAB_MAX_COUNTERS][48];
  int    cw[LAB_MAX_COUNTERS];
  size_t nc = 0;
  while (def->counters != NULL && def->counters[nc] != NULL &&
         nc < LAB_MAX_COUNTERS)
    nc++;
  for (size_t c = 0; c < nc; c++) {
    counter_header(def->counters[c], r->counter_unit[c],
                   short_name_shared(def->counters, nc, c), head[c],
                   sizeof head[c]);
    cw[c] = (int)strlen(head[c]) > 10 ? (int)strlen(head[c]) : 10;
  }
  printf("%-*s %10s", w, "step", "sim MiB");
  if (measured)
    printf(" %10s %10s %10s", "meas MiB", "pred MiB", "error MiB");
  printf(" %10s", "live MiB");
  for (size_t c = 0; c < nc; c++)
    printf(" %*s", cw[c], head[c]);
  size_t nv = 0;
  char   vhead[LAB_MAX_MEASURED][48];
  int    vw[LAB_MAX_MEASURED];
  for (; measured && def->measured_columns != NULL &&
         def->measured_columns[nv] != NULL && nv < LAB_MAX_MEASURED;
       nv++) {
    snprintf(vhead[nv], sizeof vhead[nv], "meas %s", def->measured_columns[nv]);
    vw[nv] = (int)strlen(vhead[nv]) > 10 ? (int)strlen(vhead[nv]) : 10;
    printf(" %*s", vw[nv], vhead[nv]);
  }
  printf("\n");
  for (size_t i = 0; i < r->nsteps; i++) {
    const lab_step_t *st = &r->steps[i];
    if (lab_variant_count(def) > 1 &&
        (i == 0 || r->steps[i - 1].variant != st->variant))
      printf("%s\n", def->variants[st->variant].label);
    printf("%s%-*s %10.2f", lab_variant_count(def) > 1 ? "  " : "",
           lab_variant_count(def) > 1 ? w - 2 : w, row_label(r, st),
           (double)st->sim_rss / MIB);
    if (measured && st->measured)
      printf(" %10.2f %10.2f %+10.2f", (double)st->measured_rss / MIB,
             (double)st->predicted_rss / MIB,
             ((double)st->predicted_rss - (double)st->measured_rss) / MIB);
    else if (measured)
      printf(" %10s %10s %10s", "-", "-", "-");
    printf(" %10.2f", (double)st->sim_live / MIB);
    for (size_t c = 0; c < nc; c++) {
      if (!st->has_counter[c])
        printf(" %*s", cw[c], "-");
      else if (r->counter_unit[c] && strcmp(r->counter_unit[c], "bytes") == 0)
        printf(" %*.1f", cw[c], (double)st->counter[c] / 1024.0);
      else
        printf(" %*" PRIu64, cw[c], st->counter[c]);
    }
    for (size_t c = 0; c < nv; c++)
      if (st->has_measured_value[c])
        printf(" %*.1f", vw[c], st->measured_value[c]);
      else
        printf(" %*s", vw[c], "-");
    printf("\n");
  }
}

/* "version=2.36" out of a model description, or "". */
static void desc_version(const char *desc, char *buf, size_t len) {
  const char *p = strstr(desc, "version=");
  size_t      n = p ? strcspn(p, ",") : 0;
  snprintf(buf, len, "%.*s", (int)n, p ? p : "");
}

static void print_variant_lines(const lab_result_t *r) {
  const lab_def_t *def = r->def;
  for (size_t vi = 0; vi < lab_variant_count(def); vi++) {
    const lab_variant_t        *v = &def->variants[vi];
    const lab_variant_result_t *vr = &r->variants[vi];
    const char                 *what = v->workload ? v->workload : v->trace;
    if (!vr->ran) {
      printf("  %s%s(not run: this build has no %s model)\n", v->label,
             v->label[0] ? " " : "", vr->missing);
      continue;
    }
    char version[32];
    desc_version(vr->model_desc, version, sizeof version);
    if (strstr(v->model, version) != NULL) /* the spec says it already */
      version[0] = '\0';
    printf("  %s%s%s on %s%s%s%s%s\n", v->label, v->label[0] ? ": " : "", what,
           v->model, v->libc ? " over " : "", v->libc ? v->libc : "",
           version[0] ? " " : "", version);
    if (vr->measured)
      printf("    measured: %s, %zu run%s (median), %s; predicted = "
             "simulated %+.2f MiB, the difference at '%s'\n",
             v->program, vr->measured_runs, vr->measured_runs == 1 ? "" : "s",
             vr->measured_note, (double)vr->baseline / MIB, vr->anchor);
    if (vr->measured && vr->measured_meta[0] != '\0')
      print_lines(vr->measured_meta, 6);
  }
}

static void print_maps(const lab_result_t *r, const lab_cli_t *o) {
  const lab_def_t *def = r->def;
  for (size_t vi = 0; vi < lab_variant_count(def); vi++) {
    const lab_variant_t        *v = &def->variants[vi];
    const lab_variant_result_t *vr = &r->variants[vi];
    for (size_t k = 0; vr->ran && k < vr->nmaps; k++) {
      printf("\nheap map%s%s at %s\n", v->label[0] ? ", " : "", v->label,
             vr->map_label[k]);
      cli_heapmap_print(stdout, &vr->map[k], o->rows, o->color);
    }
  }
}

/* "1..131048" with K/M suffixes for whole KiB. */
static void print_ladder_table(const lab_result_t *r) {
  const lab_def_t *def = r->def;
  printf("\nsize classes: malloc_usable_size of every request from 1 B to "
         "%" PRIu64 " KiB\n",
         LAB_LADDER_MAX >> 10);
  printf("%-30s %8s %10s %13s %15s  %s\n", "allocator", "classes", "malloc(1)",
         "malloc(1025)", "waste 1..1024", "measured ladder");
  for (size_t vi = 0; vi < lab_variant_count(def); vi++) {
    const lab_variant_result_t *vr = &r->variants[vi];
    if (!vr->ran)
      continue;
    const lab_ladder_t *l = &vr->ladder;
    if (l->n == 0) {
      printf("%-30s (the model does not say: no usable_size)\n",
             def->variants[vi].label);
      continue;
    }
    char meas[96] = "-";
    if (vr->measured_ladder.n > 0 && vr->ladder_diff == 0)
      snprintf(meas, sizeof meas, "the same");
    else if (vr->measured_ladder.n > 0)
      snprintf(meas, sizeof meas,
               "differs from %" PRIu64 ": %" PRIu64 " measured, %" PRIu64
               " simulated",
               vr->ladder_diff,
               lab_ladder_usable(&vr->measured_ladder, vr->ladder_diff),
               lab_ladder_usable(l, vr->ladder_diff));
    printf("%-30s %8zu %10" PRIu64 " %13" PRIu64 " %13.1f B  %s\n",
           def->variants[vi].label, l->n, lab_ladder_usable(l, 1),
           lab_ladder_usable(l, 1025), l->mean_waste_1k, meas);
  }
  printf("\nladders: requests -> usable sizes, in runs a constant step "
         "apart\n");
  for (size_t vi = 0; vi < lab_variant_count(def); vi++) {
    const lab_variant_result_t *vr = &r->variants[vi];
    if (!vr->ran || vr->ladder.n == 0)
      continue;
    printf("%s\n", def->variants[vi].label);
    size_t        pos = 0;
    lab_segment_t g;
    while (lab_ladder_segment(&vr->ladder, &pos, &g)) {
      char req[40], use[40];
      snprintf(req, sizeof req, "%" PRIu64 "..%" PRIu64, g.request_first,
               g.request_last);
      if (g.classes == 1)
        snprintf(use, sizeof use, "%" PRIu64, g.usable_first);
      else
        snprintf(use, sizeof use, "%" PRIu64 "..%" PRIu64, g.usable_first,
                 g.usable_last);
      printf("  %-18s -> %-18s", req, use);
      if (g.classes > 1)
        printf(" step %" PRIu64 " (%" PRIu64 " classes)", g.step, g.classes);
      printf("\n");
    }
  }
}

static bool any_measured(const lab_result_t *r) {
  for (size_t i = 0; i < LAB_MAX_VARIANTS; i++)
    if (r->variants[i].measured)
      return true;
  return false;
}

static void print_intro(const lab_def_t *def) {
  printf("lab %s: %s\n", def->name, def->title);
  printf("the allocator course notes, %s; %s\n\n", def->notes, def->doc);
  printf("what it shows\n");
  print_para(def->shows, 2);
  printf("\nquestion (answer it before reading on)\n");
  print_para(def->question, 2);
  if (def->table != NULL) {
    printf("\n");
    print_lines(def->table, 2);
  }
}

/* The whole lab, or with --results only what ran and its figures. */
static void print_report(const lab_result_t *r, const lab_cli_t *o) {
  const lab_def_t *def = r->def;
  if (!o->results) {
    print_intro(def);
    printf("\n");
  }
  printf("simulated\n");
  print_variant_lines(r);
  printf("\n");
  if (r->nsteps > 0)
    print_steps(r, any_measured(r));
  if (def->kind == LAB_SIZES)
    print_ladder_table(r);
  if (o->map)
    print_maps(r, o);
  if (!o->results) {
    printf("\nwhat to notice\n");
    print_para(def->notice, 2);
  }
}

/* l as [[request, usable], ...]: the rungs. */
static void print_ladder_json(const lab_ladder_t *l) {
  printf("[");
  for (size_t i = 0; i < l->n; i++)
    printf("%s[%" PRIu64 ", %" PRIu64 "]", i ? ", " : "", l->rung[i].request,
           l->rung[i].usable);
  printf("]");
}

/* "ladders": one object per variant that has a model ladder. */
static void print_ladders_json(const lab_result_t *r) {
  const lab_def_t *def = r->def;
  printf(", \"ladders\": [");
  for (size_t vi = 0, k = 0; vi < lab_variant_count(def); vi++) {
    const lab_variant_result_t *vr = &r->variants[vi];
    if (!vr->ran || vr->ladder.n == 0)
      continue;
    printf("%s{\"variant\": ", k++ ? ", " : "");
    cli_json_string(stdout, def->variants[vi].label);
    printf(", \"mean_waste_1_1024\": %.3f, \"rungs\": ",
           vr->ladder.mean_waste_1k);
    print_ladder_json(&vr->ladder);
    if (vr->measured_ladder.n > 0) {
      printf(", \"measured_rungs\": ");
      print_ladder_json(&vr->measured_ladder);
      printf(", \"first_difference\": %" PRIu64, vr->ladder_diff);
    }
    printf("}");
  }
  printf("]");
}

/* "measured_provenance": {variant: {key: value}} for the measured variants
 * with any of the lab's measured_keys. */
static void print_measured_meta_json(const lab_result_t *r) {
  const lab_def_t *def = r->def;
  printf(", \"measured_provenance\": {");
  for (size_t vi = 0, k = 0; vi < lab_variant_count(def); vi++) {
    const char *p = r->variants[vi].measured_meta;
    if (!r->variants[vi].measured || *p == '\0')
      continue;
    printf("%s", k++ ? ", " : "");
    cli_json_string(stdout, def->variants[vi].label);
    printf(": {");
    for (size_t n = 0; *p != '\0'; n++) {
      size_t line = strcspn(p, "\n"), key = strcspn(p, "=");
      char   buf[512];
      snprintf(buf, sizeof buf, "%.*s", (int)key, p);
      printf("%s", n ? ", " : "");
      cli_json_string(stdout, buf);
      snprintf(buf, sizeof buf, "%.*s", (int)(line - key - 1), p + key + 1);
      printf(": ");
      cli_json_string(stdout, buf);
      p += line + (p[line] == '\n');
    }
    printf("}");
  }
  printf("}");
}

static void print_json(const lab_result_t *r) {
  const lab_def_t *def = r->def;
  char             missing[256];
  lab_missing_models(def, missing, sizeof missing);
  printf("{\"name\": ");
  cli_json_string(stdout, def->name);
  printf(", \"title\": ");
  cli_json_string(stdout, def->title);
  printf(", \"question\": ");
  cli_json_string(stdout, def->question);
  printf(", \"models\": ");
  print_models_json(def);
  printf(", \"missing_models\": ");
  cli_json_string(stdout, missing);
  printf(", \"steps\": [");
  for (size_t i = 0; i < r->nsteps; i++) {
    const lab_step_t *st = &r->steps[i];
    printf("%s{\"label\": ", i ? ", " : "");
    cli_json_string(stdout, st->label);
    printf(", \"variant\": ");
    cli_json_string(stdout, def->variants[st->variant].label);
    printf(", \"mark\": ");
    cli_json_string(stdout, st->mark);
    printf(", \"model\": ");
    cli_json_string(stdout, r->variants[st->variant].model_desc);
    printf(", \"simulated_rss_bytes\": %" PRIu64
           ", \"simulated_live_bytes\": %" PRIu64,
           st->sim_rss, st->sim_live);
    if (st->measured)
      printf(", \"measured_rss_bytes\": %" PRIu64
             ", \"predicted_rss_bytes\": %" PRIu64,
             st->measured_rss, st->predicted_rss);
    for (size_t c = 0; c < LAB_MAX_MEASURED; c++)
      if (st->has_measured_value[c]) {
        char key[64];
        snprintf(key, sizeof key, "measured_%s", def->measured_columns[c]);
        printf(", ");
        cli_json_string(stdout, key);
        printf(": %.3f", st->measured_value[c]);
      }
    printf(", \"counters\": {");
    for (size_t c = 0, k = 0; def->counters != NULL &&
                              def->counters[c] != NULL && c < LAB_MAX_COUNTERS;
         c++)
      if (st->has_counter[c]) {
        printf("%s", k++ ? ", " : "");
        cli_json_string(stdout, def->counters[c]);
        printf(": %" PRIu64, st->counter[c]);
      }
    printf("}}");
  }
  printf("]");
  print_measured_meta_json(r);
  if (def->kind == LAB_SIZES)
    print_ladders_json(r);
  printf(", \"notice\": ");
  cli_json_string(stdout, def->notice);
  printf("}\n");
}

/* ---- Main --------------------------------------------------------------- */

static int run_lab(const lab_def_t *def, const lab_cli_t *o) {
  lab_result_t *r = calloc(1, sizeof *r);
  if (r == NULL) {
    fprintf(stderr, "allocsim lab: out of memory\n");
    return CLI_EXIT_INPUT;
  }
  as_err_t    err = {0};
  lab_opts_t  opts = {.source_dir = ALLOCSIM_SOURCE_DIR,
                      .map_cells = (size_t)o->cells};
  as_status_t rc = lab_simulate(def, &opts, r, &err);
  for (size_t vi = 0; rc == AS_OK && o->measure && vi < lab_variant_count(def);
       vi++)
    if (r->variants[vi].ran && def->variants[vi].program != NULL)
      rc = measure_variant(r, vi, o, &err);
  for (size_t vi = 0; rc == AS_OK && o->recorded && vi < lab_variant_count(def);
       vi++)
    rc = lab_attach_recorded(r, vi, ALLOCSIM_SOURCE_DIR, &err);
  if (rc == AS_OK) {
    if (o->json)
      print_json(r);
    else
      print_report(r, o);
  }
  lab_result_free(r);
  free(r);
  return rc == AS_OK ? CLI_EXIT_OK : cli_fail("lab", &err);
}

/* What an option needs to do anything. */
typedef enum lab_need_e {
  NEEDS_MEASURE, /* a real run */
  NEEDS_LAB,     /* a lab NAME: without one, lab only lists the labs */
  NEEDS_TEXT,    /* the text output, not --json */
  NEEDS_MAP      /* heap maps printed, not --no-map */
} lab_need_t;

/* Whether argv[1..argc) has option opt ("--opt" or "--opt=V"). */
static bool has_option(int argc, char **argv, const char *opt) {
  size_t n = strlen(opt);
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], opt, n) == 0 &&
        (argv[i][n] == '\0' || argv[i][n] == '='))
      return true;
  return false;
}

/* Refuses an option that would do nothing with the others given, as
 * --repeat without --measure is, rather than ignoring it. */
static int check_relevant(int argc, char **argv, const lab_cli_t *o, bool lab) {
  static const struct {
    const char *opt;
    lab_need_t  need;
  } rules[] = {{"--repeat", NEEDS_MEASURE}, {"--save", NEEDS_MEASURE},
               {"--python", NEEDS_MEASURE}, {"--measure", NEEDS_LAB},
               {"--recorded", NEEDS_LAB},   {"--results", NEEDS_LAB},
               {"--no-map", NEEDS_LAB},     {"--cells", NEEDS_LAB},
               {"--rows", NEEDS_LAB},       {"--no-color", NEEDS_LAB},
               {"--results", NEEDS_TEXT},   {"--no-map", NEEDS_TEXT},
               {"--cells", NEEDS_TEXT},     {"--rows", NEEDS_TEXT},
               {"--no-color", NEEDS_TEXT},  {"--cells", NEEDS_MAP},
               {"--rows", NEEDS_MAP}};
  static const char *const why[] = {
      [NEEDS_MEASURE] = "needs --measure",
      [NEEDS_LAB] = "needs a lab NAME (without one, lab lists the labs)",
      [NEEDS_TEXT] = "applies to the text output, not to --json",
      [NEEDS_MAP] = "applies to heap maps, not with --no-map"};
  const bool met[] = {[NEEDS_MEASURE] = o->measure,
                      [NEEDS_LAB] = lab,
                      [NEEDS_TEXT] = !o->json,
                      [NEEDS_MAP] = o->map};
  for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++)
    if (!met[rules[k].need] && has_option(argc, argv, rules[k].opt))
      return cli_usage_error("lab", "%s %s", rules[k].opt, why[rules[k].need]);
  return CLI_EXIT_OK;
}

/* The count v of option opt into *out: 0, or -1 after a usage error
 * naming the range and the value. */
static int lab_count(const char *opt, const char *v, uint64_t lo, uint64_t hi,
                     uint64_t *out) {
  if (as_parse_number(v, strlen(v), NULL, out) == AS_NUM_OK && *out >= lo &&
      *out <= hi)
    return 0;
  if (hi == UINT64_MAX)
    return cli_usage_error("lab", "%s expects a number, got '%s'", opt, v), -1;
  return cli_usage_error("lab",
                         "%s expects %" PRIu64 " to %" PRIu64 ", got '%s'", opt,
                         lo, hi, v),
         -1;
}

static int lab_main(int argc, char **argv) {
  lab_cli_t   o = {.repeat = 1,
                   .cells = 48,
                   .rows = 12,
                   .map = true,
                   .color = isatty(STDOUT_FILENO) != 0,
                   .env = {.python = "python3"}};
  const char *name = NULL, *v;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int         took;
    if ((took = cli_opt_value("lab", argc, argv, &i, "--save", &o.save_dir)) ||
        (took =
             cli_opt_value("lab", argc, argv, &i, "--python", &o.env.python))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
    } else if ((took = cli_opt_value("lab", argc, argv, &i, "--repeat", &v))) {
      if (took < 0 || lab_count("--repeat", v, 1, LAB_MAX_RUNS, &o.repeat) < 0)
        return CLI_EXIT_USAGE;
    } else if ((took = cli_opt_value("lab", argc, argv, &i, "--cells", &v))) {
      if (took < 0 ||
          lab_count("--cells", v, 8, HEAPMAP_MAX_CELLS, &o.cells) < 0)
        return CLI_EXIT_USAGE;
    } else if ((took = cli_opt_value("lab", argc, argv, &i, "--rows", &v))) {
      if (took < 0 || lab_count("--rows", v, 0, UINT64_MAX, &o.rows) < 0)
        return CLI_EXIT_USAGE;
    } else if ((took = cli_opt_flag("lab", argv, i, "--json"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.json = true;
    } else if ((took = cli_opt_flag("lab", argv, i, "--measure"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.measure = true;
    } else if ((took = cli_opt_flag("lab", argv, i, "--recorded"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.recorded = true;
    } else if ((took = cli_opt_flag("lab", argv, i, "--results"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.results = true;
    } else if ((took = cli_opt_flag("lab", argv, i, "--no-map"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.map = false;
    } else if ((took = cli_opt_flag("lab", argv, i, "--no-color"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.color = false;
    } else if (a[0] == '-') {
      return cli_usage_error("lab", "unknown option '%s'", a);
    } else if (name == NULL) {
      name = a;
    } else {
      return cli_usage_error("lab", "one lab at a time, got '%s' too", a);
    }
  }
  if (o.measure && o.recorded)
    return cli_usage_error("lab", "--measure or --recorded, not both");
  int bad = check_relevant(argc, argv, &o, name != NULL);
  if (bad != CLI_EXIT_OK)
    return bad;
  if (o.save_dir != NULL) {
    struct stat st;
    if (stat(o.save_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
      fprintf(stderr, "allocsim lab: --save %s: not a directory\n", o.save_dir);
      return CLI_EXIT_INPUT;
    }
    if (access(o.save_dir, W_OK | X_OK) != 0) { /* before any run, not after */
      fprintf(stderr, "allocsim lab: --save %s: cannot write there: %s\n",
              o.save_dir, strerror(errno));
      return CLI_EXIT_INPUT;
    }
  }
  if (name == NULL)
    return list_labs(o.json);
  const lab_def_t *def = lab_find(name);
  if (def == NULL) {
    size_t                  n;
    const lab_def_t *const *labs = lab_registry(&n);
    fprintf(stderr, "allocsim lab: no lab '%s' (labs:", name);
    for (size_t i = 0; i < n; i++)
      fprintf(stderr, " %s", labs[i]->name);
    fprintf(stderr, ")\n");
    return CLI_EXIT_USAGE;
  }
  return run_lab(def, &o);
}

const cli_command_t cli_cmd_lab = {
    .name = "lab",
    .summary = "the course: each lab of the allocator notes, simulated",
    .usage =
        "usage: allocsim lab [NAME] [--measure [--repeat N] [--save DIR]\n"
        "                    [--python PATH] | --recorded] [--results]\n"
        "                    [--no-map] [--cells N]\n"
        "                    [--rows N] [--no-color] [--json]\n\n"
        "Without NAME, lists the labs of the allocator course notes\n"
        "(section 20) with the models each needs.  With NAME, prints what\n"
        "the lab shows and the question to answer before running, then the\n"
        "simulated result at each step with the counters that explain it\n"
        "and a heap map, then what to notice.  Variants whose model this\n"
        "build lacks are named and skipped.  docs/course/ has a page per\n"
        "lab.  An option that would change nothing (any but --json without\n"
        "NAME, a text-only one with --json, --cells or --rows with --no-map)\n"
        "is refused.\n\n"
        "options:\n"
        "  --measure     also run the real lab program on this machine\n"
        "                (built by CMake into the labs directory, or\n"
        "                $ALLOCSIM_LABS_DIR) and print measured RSS next to\n"
        "                simulated; predicted = simulated + the difference\n"
        "                at the run's first mark (the program itself)\n"
        "  --repeat N    measured runs per variant, median (default 1)\n"
        "  --recorded    print the repository's measurements of the lab\n"
        "                programs (data/measured/, made on Linux by\n"
        "                scripts/measure/labs/run.sh) next to simulated,\n"
        "                running nothing: for machines without Linux\n"
        "  --save DIR    keep the measured-run files in DIR (for\n"
        "                `allocsim record`)\n"
        "  --python PATH interpreter of the Python labs (default python3)\n"
        "  --results     only the runs and their figures: no question,\n"
        "                no notes (docs/course/ pages show these)\n"
        "  --no-map      no heap maps\n"
        "  --cells N     heap map cells per row, 8 to 128 (default 48)\n"
        "  --rows N      heap map rows printed (default 12)\n"
        "  --no-color    no ANSI colours (the default when not a terminal)\n"
        "  --json        without NAME: [{\"name\", \"title\", \"models\"}];\n"
        "                with NAME: {\"name\", \"question\", \"steps\":\n"
        "                [{\"label\", \"simulated_rss_bytes\",\n"
        "                \"measured_rss_bytes\" (with --measure), ...}]}\n",
    .run = lab_main,
};
