/* cli/common.c -- what the subcommands share: errors and exit codes,
 * value parsing, the simulation options every simulating command takes, and
 * running a source against a model and reporting it as a table, JSON or CSV,
 * optionally stored as a simulated run.
 *
 * Sections: errors / parsing / shared options / simulate and report
 */
#include "cli.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../analysis/compare.h"
#include "../analysis/store.h"
#include "../models/options.h"
#include "../sim/host.h"
#include "../sim/json.h"
#include "../sim/reserve.h"
#include "../traces/trace_io.h"

/* ---- Errors ------------------------------------------------------------- */

/* Where the arguments being taken were read, or NULL (the command line). */
static const char *error_where;

void cli_error_where(const char *where) {
  error_where = where;
}

static void print_prefix(const char *cmd) {
  fprintf(stderr, "allocsim %s: ", cmd);
  if (error_where != NULL)
    fprintf(stderr, "%s: ", error_where);
}

int cli_fail(const char *cmd, const as_err_t *err) {
  print_prefix(cmd);
  fprintf(stderr, "%s\n",
          err->msg[0] ? err->msg : as_status_message(err->code));
  return err->code == AS_EUSAGE ? CLI_EXIT_USAGE : CLI_EXIT_INPUT;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  print_prefix(cmd);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see allocsim %s --help)\n", cmd);
  va_end(ap);
  return CLI_EXIT_USAGE;
}

bool cli_wants_help(const cli_command_t *cmd, int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--") == 0)
      break;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      fputs(cmd->usage, stdout);
      fputs(CLI_EXIT_HELP, stdout);
      return true;
    }
  }
  return false;
}

/* ---- Parsing ------------------------------------------------------------ */

const char *cli_command_line(int argc, char **argv) {
  static char line[2048];
  size_t      used = (size_t)snprintf(line, sizeof line, "allocsim");
  for (int i = 0; i < argc && used < sizeof line; i++)
    used += (size_t)snprintf(line + used, sizeof line - used, " %s", argv[i]);
  return line;
}

/* ---- Shared options ----------------------------------------------------- */

void cli_sim_opts_default(cli_sim_opts_t *o, const char *default_model) {
  memset(o, 0, sizeof *o);
  o->model = default_model;
  sim_kernel_config_default(&o->kernel);
  o->kernel.max_memory_bytes = sim_host_default_max_memory();
}

/* Options that name a file or directory: an empty value (an unset shell
 * variable) is refused here, where the option is known, instead of
 * failing later with a message about a file called ''. */
static const char *const path_options[] = {
    "--db",   "-o",    "--output", "--png",     "--marks",
    "--spec", "--lib", "--save",   "--summary", "--python"};

static bool is_path_option(const char *arg) {
  size_t n = strcspn(arg, "=");
  for (size_t k = 0; k < sizeof path_options / sizeof path_options[0]; k++)
    if (strlen(path_options[k]) == n && strncmp(arg, path_options[k], n) == 0)
      return true;
  return false;
}

static const char *value_of(const char *cmd, int argc, char **argv, int *i) {
  const char *arg = argv[*i];
  const char *eq = strchr(arg, '=');
  const char *v;
  if (eq != NULL && strncmp(arg, "--", 2) == 0)
    v = eq + 1;
  else if (*i + 1 < argc)
    v = argv[++*i];
  else {
    cli_usage_error(cmd, "%s needs a value", arg);
    return NULL;
  }
  if (*v == '\0' && is_path_option(arg)) {
    cli_usage_error(cmd, "%.*s expects a file name, got ''",
                    (int)strcspn(arg, "="), arg);
    return NULL;
  }
  return v;
}

static bool opt_is(const char *arg, const char *name) {
  size_t n = strlen(name);
  return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

/* Valued options that add one more item each time (a sweep axis, an
 * inserted event, a trim, an environment variable); every other valued
 * option may be given once. */
static const char *const repeatable_options[] = {"--vary", "--insert",
                                                 "--assume-trim-at", "--env"};

static bool opt_repeatable(const char *name) {
  for (size_t k = 0;
       k < sizeof repeatable_options / sizeof repeatable_options[0]; k++)
    if (strcmp(name, repeatable_options[k]) == 0)
      return true;
  return false;
}

/* True if arg is the option name in any of its spellings: -o and --output
 * are one option (import, oracle). */
static bool opt_same(const char *arg, const char *name) {
  if (opt_is(arg, name))
    return true;
  if (strcmp(name, "-o") == 0)
    return opt_is(arg, "--output");
  if (strcmp(name, "--output") == 0)
    return opt_is(arg, "-o");
  return false;
}

/* -1 after a usage error if the value of --model or --libc is not a
 * well-formed spec ("glibc:" with no option after the colon, an empty
 * item), else 0; the model code itself skips empty items. */
static int check_model_spec(const char *cmd, const char *name,
                            const char *spec) {
  as_err_t err = {0};
  if ((strcmp(name, "--model") != 0 && strcmp(name, "--libc") != 0) ||
      model_spec_check_syntax(spec, &err) == AS_OK)
    return 0;
  return cli_usage_error(cmd, "%s '%s': %s", name, spec, err.msg), -1;
}

int cli_opt_value(const char *cmd, int argc, char **argv, int *i,
                  const char *name, const char **value) {
  if (!opt_is(argv[*i], name))
    return 0;
  for (int j = 1; j < *i && !opt_repeatable(name); j++)
    if (opt_same(argv[j], name))
      return cli_usage_error(cmd, "%s given twice", name), -1;
  *value = value_of(cmd, argc, argv, i);
  if (*value == NULL || check_model_spec(cmd, name, *value) < 0)
    return -1;
  return 1;
}

/* path made absolute, its links resolved (realpath); for a file that does
 * not exist yet, its directory's realpath and its name.  False if neither
 * resolves. */
static bool canonical_path(const char *path, char *out) {
  if (realpath(path, out) != NULL)
    return true;
  const char *slash = strrchr(path, '/');
  char        dir[PATH_MAX], rdir[PATH_MAX];
  if (slash == NULL)
    snprintf(dir, sizeof dir, ".");
  else
    snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path),
             path);
  return realpath(dir, rdir) != NULL &&
         as_format_fits(out, PATH_MAX, "%s/%s", rdir,
                        slash != NULL ? slash + 1 : path);
}

bool cli_same_file(const char *a, const char *b) {
  struct stat sa, sb;
  char        ca[PATH_MAX], cb[PATH_MAX];
  if (a == NULL || b == NULL || strcmp(a, "-") == 0 || strcmp(b, "-") == 0)
    return false;
  if (strcmp(a, b) == 0)
    return true;
  if (stat(a, &sa) == 0 && stat(b, &sb) == 0)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  return canonical_path(a, ca) && canonical_path(b, cb) && strcmp(ca, cb) == 0;
}

/* Skips a run of decimal digits at *p; false if there is none. */
static bool skip_digits(const char **p) {
  const char *start = *p;
  while (**p >= '0' && **p <= '9')
    (*p)++;
  return *p > start && *p - start <= 9; /* fits an unsigned */
}

/* A release as uname -r prints it: MAJOR.MINOR[.PATCH], then optionally
 * '-' or '+' and a suffix of letters, digits, '.', '-', '+' and '_'
 * (6.1, 6.12.3, 6.18.44-fc-v1272). */
static bool is_kernel_release(const char *v) {
  const char *p = v;
  if (!skip_digits(&p) || *p++ != '.' || !skip_digits(&p))
    return false;
  if (*p == '.' && (p++, !skip_digits(&p)))
    return false;
  if (*p == '\0')
    return true;
  if ((*p != '-' && *p != '+') || p[1] == '\0')
    return false;
  for (p++; *p != '\0'; p++)
    if (!isalnum((unsigned char)*p) && strchr(".-+_", *p) == NULL)
      return false;
  return true;
}

int cli_kernel_release_check(const char *cmd, const char *v) {
  if (is_kernel_release(v))
    return 0;
  return cli_usage_error(cmd,
                         "--kernel expects a Linux release such as 6.1 or "
                         "6.12, got '%s'",
                         v),
         -1;
}

int cli_opt_flag(const char *cmd, char **argv, int i, const char *name) {
  if (strcmp(argv[i], name) != 0)
    return 0;
  for (int j = 1; j < i; j++)
    if (strcmp(argv[j], name) == 0)
      return cli_usage_error(cmd, "%s given twice", name), -1;
  return 1;
}

/* Shared options that may be given once; bit k of o->given is
 * once_options[k] (--json and --csv first: bits 0 and 1). */
static const char *const once_options[] = {
    "--json",         "--csv",     "--lenient",
    "--strict",       "--thp",     "--memory-pressure",
    "--model",        "--libc",    "--db",
    "--page-size",    "--settle",  "--max-memory",
    "--sample-every", "--layouts", "--no-zero-page",
    "--kernel"};

/* -1 after a usage error if a is a once-only option already given (or
 * --json with --csv), else 0 (marking it given). */
static int take_once(cli_sim_opts_t *o, const char *cmd, const char *a) {
  for (unsigned k = 0; k < sizeof once_options / sizeof once_options[0]; k++) {
    if (!opt_is(a, once_options[k]))
      continue;
    if (o->given & (1u << k))
      return cli_usage_error(cmd, "%s given twice", once_options[k]), -1;
    o->given |= 1u << k;
    break;
  }
  if ((o->given & 3u) == 3u)
    return cli_usage_error(cmd, "--json and --csv exclude each other"), -1;
  return 0;
}

int cli_sim_opts_take(cli_sim_opts_t *o, const char *cmd, int argc, char **argv,
                      int *i) {
  const char *a = argv[*i];
  const char *v;
  if (take_once(o, cmd, a) < 0)
    return -1;
  if (strcmp(a, "--json") == 0)
    return o->json = true, 1;
  if (strcmp(a, "--csv") == 0)
    return o->csv = true, 1;
  if (strcmp(a, "--lenient") == 0)
    return o->lenient = true, 1;
  if (strcmp(a, "--strict") == 0)
    return o->strict = true, 1;
  if (strcmp(a, "--thp") == 0)
    return o->kernel.thp = true, 1;
  if (strcmp(a, "--memory-pressure") == 0)
    return o->kernel.memory_pressure = true, 1;
  if (strcmp(a, "--no-zero-page") == 0)
    return o->kernel.zero_page = false, 1;
  if (opt_is(a, "--model") || opt_is(a, "--libc") || opt_is(a, "--db")) {
    if ((v = value_of(cmd, argc, argv, i)) == NULL ||
        check_model_spec(cmd,
                         opt_is(a, "--model")  ? "--model"
                         : opt_is(a, "--libc") ? "--libc"
                                               : "--db",
                         v) < 0)
      return -1;
    *(opt_is(a, "--model")  ? &o->model
      : opt_is(a, "--libc") ? &o->libc
                            : &o->db) = v;
    return 1;
  }
  if (opt_is(a, "--kernel")) {
    if ((v = value_of(cmd, argc, argv, i)) == NULL)
      return -1;
    if (cli_kernel_release_check(cmd, v) < 0)
      return -1;
    sim_kernel_config_set_release(&o->kernel, v);
    return 1;
  }
  if (opt_is(a, "--page-size")) {
    if ((v = value_of(cmd, argc, argv, i)) == NULL)
      return -1;
    if (!as_parse_page_size(v, &o->kernel.page_size))
      return cli_usage_error(cmd,
                             "--page-size expects 4096, 16384 or 65536, "
                             "got '%s'",
                             v),
             -1;
    return 1;
  }
  if (opt_is(a, "--insert")) {
    if ((v = value_of(cmd, argc, argv, i)) == NULL)
      return -1;
    as_err_t e = {0};
    if (o->ninserts == TRACE_INSERT_MAX)
      return cli_usage_error(cmd, "at most %d --insert options",
                             TRACE_INSERT_MAX),
             -1;
    if (trace_insert_parse(v, &o->inserts[o->ninserts], &e) != AS_OK)
      return cli_fail(cmd, &e), -1;
    o->ninserts++;
    return 1;
  }
  if (opt_is(a, "--settle")) {
    if ((v = value_of(cmd, argc, argv, i)) == NULL)
      return -1;
    if (!as_parse_duration_ns(v, &o->settle_ns))
      return cli_usage_error(cmd,
                             "--settle expects a duration such as 10s "
                             "or 500ms, got '%s'",
                             v),
             -1;
    return 1;
  }
  if (opt_is(a, "--layouts")) {
    uint64_t n;
    if ((v = value_of(cmd, argc, argv, i)) == NULL)
      return -1;
    if (as_parse_number(v, strlen(v), NULL, &n) != AS_NUM_OK || n < 1 ||
        n > COMPARE_MAX_LAYOUTS)
      return cli_usage_error(cmd, "--layouts expects 1 to %d, got '%s'",
                             COMPARE_MAX_LAYOUTS, v),
             -1;
    o->layouts = (unsigned)n;
    return 1;
  }
  if (opt_is(a, "--max-memory")) {
    if ((v = value_of(cmd, argc, argv, i)) == NULL)
      return -1;
    if (!as_parse_bytes(v, &o->kernel.max_memory_bytes) ||
        o->kernel.max_memory_bytes < (UINT64_C(1) << 20))
      return cli_usage_error(cmd,
                             "--max-memory expects a size of at least "
                             "1MiB such as 512MiB or 8GiB, got '%s'",
                             v),
             -1;
    return 1;
  }
  if (opt_is(a, "--sample-every")) {
    if ((v = value_of(cmd, argc, argv, i)) == NULL)
      return -1;
    if (!as_parse_duration_ns(v, &o->sample_every_ns) ||
        o->sample_every_ns == 0)
      return cli_usage_error(cmd,
                             "--sample-every expects a duration such as "
                             "10ms or 1s, got '%s'",
                             v),
             -1;
    return 1;
  }
  return 0;
}

/* ---- Simulate and report ------------------------------------------------ */

/* The samples a run may keep: a quarter of --max-memory, the rest being
 * the simulation's; 0 (no bound) without one. */
static uint64_t max_samples(uint64_t max_memory) {
  return max_memory / 4 / sizeof(store_sample_t);
}

static as_status_t log_sample(void *user, const sim_sample_t *s,
                              as_err_t *err) {
  return store_samples_push_sim(user, s, err);
}

static double mib(uint64_t bytes) {
  return (double)bytes / (1024.0 * 1024.0);
}

static const char *kind_name(sim_sample_kind_t k) {
  static const char *const names[] = {"mark", "periodic", "measured", "final"};
  return names[k];
}

void cli_json_string(FILE *out, const char *s) {
  if (s == NULL) {
    fputs("null", out);
    return;
  }
  fputc('"', out);
  char piece[AS_JSON_PIECE_MAX];
  while (*s) {
    s += as_json_piece(s, piece);
    fputs(piece, out);
  }
  fputc('"', out);
}

void cli_csv_field(FILE *out, const char *s) {
  if (strpbrk(s, ",\"\r\n") == NULL) {
    fputs(s, out);
    return;
  }
  fputc('"', out);
  for (; *s; s++) {
    if (*s == '"')
      fputc('"', out);
    fputc(*s, out);
  }
  fputc('"', out);
}

/* What several layouts add to a report: each sample's rss range, and the
 * peak's and final's.  n == 1: a single replay, reported as before. */
typedef struct layout_range_s layout_range_t;
struct layout_range_s {
  unsigned  n;
  uint64_t *lo, *hi; /* per sample */
  uint64_t  peak_lo, peak_hi, final_lo, final_hi;
};

static void print_json_sample(FILE *out, const store_sample_t *s,
                              const layout_range_t *lr, size_t i) {
  fprintf(out, "{\"label\": ");
  cli_json_string(out, s->label);
  fprintf(out,
          ", \"kind\": \"%s\", \"t_ns\": %" PRIu64 ", \"rss_bytes\": %" PRIu64
          ", \"live_bytes\": %" PRIu64,
          kind_name(s->kind), s->t_ns, s->rss_bytes, s->live_bytes);
  if (lr->n > 1)
    fprintf(out,
            ", \"rss_min_bytes\": %" PRIu64 ", \"rss_max_bytes\": %" PRIu64,
            lr->lo[i], lr->hi[i]);
  if (s->kind == SIM_SAMPLE_MEASURED || s->measured_rss_bytes)
    fprintf(out, ", \"measured_rss_bytes\": %" PRIu64, s->measured_rss_bytes);
  fprintf(out, ", \"owners\": {");
  for (int o = 0, first = 1; o < SIM_OWNER_COUNT; o++)
    if (s->owner_bytes[o]) {
      fprintf(out, "%s\"%s\": %" PRIu64, first ? "" : ", ",
              sim_owner_name((sim_owner_t)o), s->owner_bytes[o]);
      first = 0;
    }
  fprintf(out, "}}");
}

static void print_json(const sim_session_t *s, const cli_sim_opts_t *o,
                       const trace_source_t *src, const sim_run_result_t *r,
                       const store_samples_t *log, const layout_range_t *lr,
                       int64_t run_id) {
  fprintf(stdout, "{\"model\": ");
  cli_json_string(stdout, s->model->methods->name);
  fprintf(stdout, ", \"options\": ");
  cli_json_string(stdout, s->model_desc);
  fprintf(stdout, ", \"source\": ");
  cli_json_string(stdout, src->name);
  fprintf(stdout,
          ", \"page_size\": %" PRIu64 ", \"layouts\": %u, \"events\": %" PRIu64
          ", \"peak_rss_bytes\": %" PRIu64 ", \"peak_t_ns\": %" PRIu64
          ", \"peak_live_bytes\": %" PRIu64 ", \"final_rss_bytes\": %" PRIu64
          ", \"final_live_bytes\": %" PRIu64 ", \"final_t_ns\": %" PRIu64,
          o->kernel.page_size, lr->n, r->events, r->peak_rss_bytes,
          r->peak_t_ns, r->peak_live_bytes, r->final_rss_bytes,
          r->final_live_bytes, r->final_t_ns);
  if (lr->n > 1)
    fprintf(stdout,
            ", \"peak_rss_min_bytes\": %" PRIu64
            ", \"peak_rss_max_bytes\": %" PRIu64
            ", \"final_rss_min_bytes\": %" PRIu64
            ", \"final_rss_max_bytes\": %" PRIu64,
            lr->peak_lo, lr->peak_hi, lr->final_lo, lr->final_hi);
  fprintf(stdout,
          ", \"skipped\": {\"bad_free\": %" PRIu64 ", \"bad_realloc\": %" PRIu64
          ", \"double_alloc\": %" PRIu64 "}",
          r->skipped_bad_free, r->skipped_bad_realloc, r->skipped_double_alloc);
  fprintf(stdout,
          ", \"ignored_events\": %" PRIu64 ", \"unwritten_allocs\": %" PRIu64,
          r->ignored_events, r->unwritten_allocs);
  model_counter_t c[128];
  size_t          nc = model_counters(s->model, c, 128);
  fprintf(stdout, ", \"counters\": {");
  for (size_t k = 0; k < nc && k < 128; k++)
    fprintf(stdout, "%s\"%s\": %" PRIu64, k ? ", " : "", c[k].name, c[k].value);
  fputc('}', stdout);
  if (run_id > 0)
    fprintf(stdout, ", \"run_id\": %" PRId64, run_id);
  for (int pass = 0; pass < 2; pass++) {
    fprintf(stdout, ", \"%s\": [", pass == 0 ? "marks" : "samples");
    for (size_t i = 0, n = 0; i < log->n; i++) {
      bool is_mark = log->v[i].kind == SIM_SAMPLE_MARK;
      if (is_mark != (pass == 0))
        continue;
      fputs(n++ ? ", " : "", stdout);
      print_json_sample(stdout, &log->v[i], lr, i);
    }
    fputc(']', stdout);
  }
  fputs("}\n", stdout);
}

static void print_csv(const store_samples_t *log, const layout_range_t *lr) {
  printf("kind,label,t_ns,rss_bytes,live_bytes,measured_rss_bytes");
  if (lr->n > 1)
    printf(",rss_min_bytes,rss_max_bytes");
  for (int o = 0; o < SIM_OWNER_COUNT; o++)
    printf(",%s_bytes", sim_owner_name((sim_owner_t)o));
  putchar('\n');
  for (size_t i = 0; i < log->n; i++) {
    const store_sample_t *s = &log->v[i];
    printf("%s,", kind_name(s->kind));
    cli_csv_field(stdout, s->label);
    printf(",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64, s->t_ns,
           s->rss_bytes, s->live_bytes, s->measured_rss_bytes);
    if (lr->n > 1)
      printf(",%" PRIu64 ",%" PRIu64, lr->lo[i], lr->hi[i]);
    for (int o = 0; o < SIM_OWNER_COUNT; o++)
      printf(",%" PRIu64, s->owner_bytes[o]);
    putchar('\n');
  }
}

/* The owners with any RSS at any sample: the table shows only those. */
static void used_owners(const store_samples_t *log,
                        bool                   used[SIM_OWNER_COUNT]) {
  memset(used, 0, SIM_OWNER_COUNT * sizeof used[0]);
  for (size_t i = 0; i < log->n; i++)
    for (int o = 0; o < SIM_OWNER_COUNT; o++)
      used[o] = used[o] || log->v[i].owner_bytes[o] != 0;
}

static void print_range(uint64_t lo, uint64_t hi) {
  if (lo != hi)
    printf(" (%.2f-%.2f over layouts)", mib(lo), mib(hi));
}

static void print_table(const sim_session_t *s, const cli_sim_opts_t *o,
                        const trace_source_t *src, const sim_run_result_t *r,
                        const store_samples_t *log, const layout_range_t *lr,
                        int64_t run_id) {
  bool used[SIM_OWNER_COUNT];
  used_owners(log, used);
  printf("source     %s\nmodel      %s\npage size  %" PRIu64
         " bytes\nevents     %" PRIu64 "\n",
         src->name, s->model_desc, o->kernel.page_size, r->events);
  if (lr->n > 1)
    printf("layouts    %u (mmap_top lowered by 0..%u pages, as ASLR varies "
           "it): mean, and min-max where they differ\n",
           lr->n, lr->n - 1);
  printf("\n%-8s %-16s %12s %10s %10s", "kind", "label", "t (ms)", "rss MiB",
         "live MiB");
  for (int k = 0; k < SIM_OWNER_COUNT; k++)
    if (used[k])
      printf(" %10.10s", sim_owner_name((sim_owner_t)k));
  bool ranged = false;
  for (size_t i = 0; lr->n > 1 && i < log->n; i++)
    ranged = ranged || lr->lo[i] != lr->hi[i];
  if (ranged)
    printf(" %15s", "rss min-max");
  printf("\n");
  for (size_t i = 0; i < log->n; i++) {
    const store_sample_t *x = &log->v[i];
    printf("%-8s %-16.16s %12.3f %10.2f %10.2f", kind_name(x->kind),
           x->kind == SIM_SAMPLE_MEASURED ? "(measured)" : x->label,
           (double)x->t_ns / 1e6,
           mib(x->kind == SIM_SAMPLE_MEASURED ? x->measured_rss_bytes
                                              : x->rss_bytes),
           mib(x->live_bytes));
    for (int k = 0; k < SIM_OWNER_COUNT; k++)
      if (used[k])
        printf(" %10.2f", mib(x->owner_bytes[k]));
    if (ranged) {
      char range[32];
      snprintf(range, sizeof range, "%.2f-%.2f", mib(lr->lo[i]),
               mib(lr->hi[i]));
      printf(" %15s", range);
    }
    printf("\n");
  }
  printf("\npeak rss   %.2f MiB at t=%.3f ms (peak live %.2f MiB)",
         mib(r->peak_rss_bytes), (double)r->peak_t_ns / 1e6,
         mib(r->peak_live_bytes));
  print_range(lr->peak_lo, lr->peak_hi);
  printf("\nfinal rss  %.2f MiB (live %.2f MiB)", mib(r->final_rss_bytes),
         mib(r->final_live_bytes));
  print_range(lr->final_lo, lr->final_hi);
  printf("\n");
  if (r->skipped_bad_free || r->skipped_bad_realloc || r->skipped_double_alloc)
    printf("skipped    %" PRIu64 " bad frees, %" PRIu64
           " bad reallocs, %" PRIu64 " allocs of live ids (--lenient)\n",
           r->skipped_bad_free, r->skipped_bad_realloc,
           r->skipped_double_alloc);
  if (r->ignored_events)
    printf("ignored    %" PRIu64 " purge/option/touch events model %s has no "
           "notion of (--strict makes them errors)\n",
           r->ignored_events, s->model->methods->name);
  if (r->unwritten_allocs)
    printf("unwritten  %" PRIu64 " allocations written only where the trace's "
           "touch events say\n",
           r->unwritten_allocs);
  if (run_id > 0)
    printf("stored     run %" PRId64 " in %s\n", run_id, o->db);
}

static as_status_t store_simulated(const cli_sim_opts_t  *o,
                                   const sim_session_t   *s,
                                   const trace_source_t  *src,
                                   const store_samples_t *log, unsigned layouts,
                                   const char *command, int64_t *run_id,
                                   as_err_t *err) {
  store_t    *st;
  as_status_t rc = store_open(o->db, &st, err);
  if (rc != AS_OK)
    return rc;
  store_kv_t meta[TRACE_META_MAX + 1];
  char       nl[16];
  size_t     nmeta = 0;
  for (size_t i = 0; i < src->meta.count; i++)
    if (strcmp(src->meta.key[i], "layouts") != 0)
      meta[nmeta++] = (store_kv_t){src->meta.key[i], src->meta.value[i]};
  snprintf(nl, sizeof nl, "%u", layouts);
  meta[nmeta++] = (store_kv_t){"layouts", nl}; /* rss: their mean */
  store_run_t run = {
      .kind = "simulated",
      .model = s->model_desc,
      .options = o->libc,
      .page_size = o->kernel.page_size,
      .source = src->name,
      .command = command,
      .meta = meta,
      .meta_count = nmeta,
  };
  rc = store_write_run(st, &run, log->v, log->n, run_id, err);
  store_close(st);
  return rc;
}

/* An insert the model cannot take: a trim for a model without malloc_trim
 * or a purge for one without purges. */
static as_status_t check_inserts(const cli_sim_opts_t *o, const model_t *m,
                                 as_err_t *err) {
  for (size_t i = 0; i < o->ninserts; i++) {
    bool trim = o->inserts[i].op == TRACE_TRIM;
    if (trim ? m->methods->trim == NULL : !model_has_purge(m))
      return as_err_set(err, AS_EUSAGE, "--insert %s: model %s has no %s",
                        trim ? "trim" : "purge", m->methods->name,
                        trim ? "malloc_trim" : "purge");
  }
  return AS_OK;
}

/* Layout k's replay: its samples into *log and its results into *r.  The
 * session and source stay open for the caller (layout 0's report). */
static as_status_t replay_layout(const char *cmd, const cli_sim_opts_t *o,
                                 unsigned k, cli_source_open_fn open,
                                 void *user, sim_session_t *session,
                                 trace_source_t **src, store_samples_t *log,
                                 sim_run_result_t *r, as_err_t *err) {
  sim_kernel_config_t kc = o->kernel;
  *src = NULL;
  as_status_t rc =
      sim_kernel_config_offset_layout(&kc, (uint64_t)k * kc.page_size, err);
  if (rc != AS_OK)
    return rc;
  if (k > 0 && kc.max_memory_bytes != 0) {
    /* Layout 0's replay stays for the report while this one runs: the
     * kernel's budget is what --max-memory leaves beside it.  The tables
     * the previous layout left for reuse are this one's, not held. */
    uint64_t rss = sim_host_rss_bytes(), kept = as_reserve_kept_bytes();
    uint64_t held = rss > kept ? rss - kept : 0;
    if (held >= kc.max_memory_bytes)
      return as_err_set(err, AS_ENOMEM,
                        "layout %u: layout 0's replay already holds %" PRIu64
                        " MiB, all of --max-memory (%" PRIu64 " MiB); raise "
                        "it or pass --layouts 1",
                        k, held >> 20, kc.max_memory_bytes >> 20);
    kc.max_memory_bytes -= held;
  }
  if ((rc = sim_session_open(o->model, o->libc, &kc, session, err)) != AS_OK)
    return rc;
  if ((rc = check_inserts(o, session->model, err)) == AS_OK &&
      (rc = open(user, src, err)) == AS_OK && o->ninserts)
    rc = trace_insert_wrap(*src, o->inserts, o->ninserts, src, err);
  if (rc == AS_OK)
    trace_set_lenient(*src, o->lenient); /* a cut binary trace: to its end */
  sim_engine_config_t cfg = {.sample_every_ns = o->sample_every_ns,
                             .settle_ns = o->settle_ns,
                             .lenient = o->lenient,
                             .strict = o->strict,
                             .on_sample = log_sample,
                             .user = log,
                             .max_memory_bytes = o->kernel.max_memory_bytes,
                             .max_samples =
                                 max_samples(o->kernel.max_memory_bytes)};
  if (rc == AS_OK)
    rc = sim_engine_run(&cfg, session, *src, r, err);
  if (rc == AS_ENOMEM && k > 0) {
    char msg[sizeof err->msg];
    as_format_fits(msg, sizeof msg,
                   "layout %u: %.400s (the part of it layout 0's replay "
                   "leaves; --layouts 1 replays one layout)",
                   k, err->msg);
    as_err_set(err, AS_ENOMEM, "%s", msg);
  }
  if (rc == AS_OK && k == 0 && trace_truncated(*src) != NULL)
    fprintf(stderr,
            "allocsim %s: warning: %s: %s; replayed the events before it "
            "(--lenient)\n",
            cmd, (*src)->name, trace_truncated(*src));
  const char *missing;
  if (rc == AS_OK && o->ninserts && !trace_insert_all_fired(*src, &missing))
    rc = as_err_set(err, AS_EINVAL, "--insert ...@%s: %s has no mark '%s'",
                    missing, (*src)->name, missing);
  if (rc != AS_OK) {
    trace_source_close(*src); /* NULL when a failed wrap closed it */
    *src = NULL;
    sim_session_close(session);
  }
  return rc;
}

static void range_note(uint64_t v, uint64_t *lo, uint64_t *hi, bool first) {
  *lo = first || v < *lo ? v : *lo;
  *hi = first || v > *hi ? v : *hi;
}

/* Adds layout k's samples and results into the running sums (acc holds
 * sums of rss and owner bytes; the mean is taken at the end). */
static as_status_t accumulate(unsigned k, const store_samples_t *one,
                              const sim_run_result_t *r1, store_samples_t *acc,
                              sim_run_result_t *racc, layout_range_t *lr,
                              as_err_t *err) {
  if (one->n != acc->n)
    return as_err_set(err, AS_EINVAL,
                      "layout %u produced %zu samples, layout 0 %zu (an "
                      "engine bug)",
                      k, one->n, acc->n);
  for (size_t i = 0; i < one->n; i++) {
    store_sample_t *a = &acc->v[i];
    range_note(one->v[i].rss_bytes, &lr->lo[i], &lr->hi[i], false);
    a->rss_bytes += one->v[i].rss_bytes;
    for (int o = 0; o < SIM_OWNER_COUNT; o++)
      a->owner_bytes[o] += one->v[i].owner_bytes[o];
  }
  range_note(r1->peak_rss_bytes, &lr->peak_lo, &lr->peak_hi, false);
  range_note(r1->final_rss_bytes, &lr->final_lo, &lr->final_hi, false);
  racc->peak_rss_bytes += r1->peak_rss_bytes;
  racc->final_rss_bytes += r1->final_rss_bytes;
  return AS_OK;
}

static void take_means(unsigned n, store_samples_t *acc, sim_run_result_t *r) {
  for (size_t i = 0; i < acc->n; i++) {
    store_sample_t *a = &acc->v[i];
    a->rss_bytes = (a->rss_bytes + n / 2) / n;
    for (int o = 0; o < SIM_OWNER_COUNT; o++)
      a->owner_bytes[o] = (a->owner_bytes[o] + n / 2) / n;
  }
  r->peak_rss_bytes = (r->peak_rss_bytes + n / 2) / n;
  r->final_rss_bytes = (r->final_rss_bytes + n / 2) / n;
}

/* The layouts a command replays: o->layouts, else every one that differs
 * modulo the pymalloc pool for the page size. */
static unsigned layouts_of(const cli_sim_opts_t *o) {
  if (o->layouts != 0)
    return o->layouts;
  uint64_t n = COMPARE_LAYOUT_SPAN_BYTES / o->kernel.page_size;
  return n < 1 ? 1 : (unsigned)n;
}

void cli_print_model_header(const char *source, const char *model_desc,
                            const char *libc_spec) {
  printf("source     %s\nmodel      %s\n", source, model_desc);
  if (model_spec_composes(model_desc) && libc_spec != NULL && libc_spec[0])
    printf("libc       %s\n", libc_spec);
}

void cli_print_measured(uint64_t measured, uint64_t simulated,
                        const char *tail) {
  double diff = mib(measured) - mib(simulated);
  printf("measured   %.2f MiB there in the recorded run, %.2f MiB %s than "
         "simulated: what the trace does not hold (memory from before the "
         "recording began, code, data and stacks mapped; `compare` separates "
         "it from model error)%s\n",
         mib(measured), diff < 0 ? -diff : diff, diff < 0 ? "less" : "more",
         tail);
}

void cli_print_one_layout(uint64_t page_size) {
  char note[192];
  printf("layout     %s\n",
         compare_one_layout_note(page_size, note, sizeof note));
}

as_status_t cli_libc_check(const char *model, const char *libc, as_err_t *err) {
  char name[64];
  model_spec_name(model, name, sizeof name);
  const model_methods_t *mm = model_find(name);
  if (libc == NULL || mm == NULL || mm->composition)
    return AS_OK;
  return as_err_set(err, AS_EUSAGE,
                    "--libc %s: %s serves malloc itself; --libc names the "
                    "libc a composition (cpython) forwards to",
                    libc, name);
}

as_status_t cli_target_specs(replay_target_t *t, explain_opts_t *o, char *model,
                             size_t model_len, char *libc, size_t libc_len,
                             as_err_t *err) {
  bool from_provenance = o->model == NULL && o->libc == NULL;
  char model_name[64], libc_name[64];
  model_spec_name(model, model_name, sizeof model_name);
  model_spec_name(libc, libc_name, sizeof libc_name);
  /* A C run's model is its libc: --libc alone names the model, as compare
   * takes it (analysis/compare.c). */
  if (o->model == NULL)
    o->model =
        o->libc != NULL && strcmp(model_name, libc_name) == 0 ? o->libc : model;
  if (o->model != o->libc && cli_libc_check(o->model, o->libc, err) != AS_OK)
    return AS_EUSAGE;
  if (o->libc == NULL)
    o->libc = libc;
  if (from_provenance)
    return replay_target_check_specs(t, model, libc, &o->kernel, err);
  return replay_target_with_facts(t, &o->model, model, model_len, &o->libc,
                                  libc, libc_len, err);
}

int cli_simulate_and_report(const char *cmd, const cli_sim_opts_t *o,
                            cli_source_open_fn open, void *user,
                            const char *command) {
  as_err_t         err = {0};
  sim_session_t    session;
  sim_run_result_t result, r1;
  store_samples_t  log = {0}, one = {0};
  trace_source_t  *src = NULL, *src1 = NULL;
  int64_t          run_id = 0;
  unsigned         n = layouts_of(o);
  if (cli_libc_check(o->model, o->libc, &err) != AS_OK)
    return cli_usage_error(cmd, "%s", err.msg);
  if (n > 1 && (uint64_t)n * o->kernel.page_size > COMPARE_LAYOUT_SPAN_BYTES) {
    as_err_set(&err, AS_EUSAGE,
               "--layouts %u: with %" PRIu64 "-byte pages at most %" PRIu64
               " layouts differ",
               n, o->kernel.page_size,
               COMPARE_LAYOUT_SPAN_BYTES / o->kernel.page_size);
    return cli_fail(cmd, &err);
  }
  layout_range_t lr = {.n = n};
  as_status_t    rc =
      replay_layout(cmd, o, 0, open, user, &session, &src, &log, &result, &err);
  if (rc == AS_OK && n > 1) {
    lr.lo = malloc((log.n ? log.n : 1) * sizeof *lr.lo);
    lr.hi = malloc((log.n ? log.n : 1) * sizeof *lr.hi);
    if (lr.lo == NULL || lr.hi == NULL)
      rc = as_err_set(&err, AS_ENOMEM, "out of memory for samples");
    for (size_t i = 0; rc == AS_OK && i < log.n; i++)
      lr.lo[i] = lr.hi[i] = log.v[i].rss_bytes;
  }
  if (rc == AS_OK) {
    range_note(result.peak_rss_bytes, &lr.peak_lo, &lr.peak_hi, true);
    range_note(result.final_rss_bytes, &lr.final_lo, &lr.final_hi, true);
  }
  /* Layouts 2.. reuse the tables layout 1 leaves (sim/reserve.h); layout
   * 0's stay for the report. */
  as_reserve_reuse_begin();
  for (unsigned k = 1; rc == AS_OK && k < n; k++) {
    sim_session_t s1;
    one.n = 0;
    rc = replay_layout(cmd, o, k, open, user, &s1, &src1, &one, &r1, &err);
    if (rc != AS_OK)
      break;
    rc = accumulate(k, &one, &r1, &log, &result, &lr, &err);
    trace_source_close(src1);
    sim_session_close(&s1);
  }
  as_reserve_reuse_end();
  if (rc == AS_OK && n > 1)
    take_means(n, &log, &result);
  if (rc == AS_OK && o->db != NULL)
    rc = store_simulated(o, &session, src, &log, n, command, &run_id, &err);
  if (rc == AS_OK) {
    if (o->json)
      print_json(&session, o, src, &result, &log, &lr, run_id);
    else if (o->csv)
      print_csv(&log, &lr);
    else
      print_table(&session, o, src, &result, &log, &lr, run_id);
  }
  if (src != NULL) {
    trace_source_close(src);
    sim_session_close(&session);
  }
  store_samples_free(&log);
  store_samples_free(&one);
  free(lr.lo);
  free(lr.hi);
  return rc == AS_OK ? CLI_EXIT_OK : cli_fail(cmd, &err);
}
