/* cli/cmd_run.c -- `allocsim run WORKLOAD`: a synthetic workload
 * against a model, reported exactly like replay. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

#include "../traces/workload.h"

static void list_workloads(FILE *out) {
  size_t                       n;
  const workload_def_t *const *defs = workload_registry(&n);
  fprintf(out, "workloads:\n");
  for (size_t i = 0; i < n; i++) {
    fprintf(out, "  %-20s %s\n", defs[i]->name, defs[i]->summary);
    for (const workload_option_t *w = defs[i]->options; w->name; w++)
      fprintf(out, "      --%-16s %s (default %s)\n", w->name, w->help,
              w->default_value ? w->default_value : "required");
  }
}

/* What a workload is opened from, once per layout. */
typedef struct workload_args_s workload_args_t;
struct workload_args_s {
  const workload_def_t *def;
  int                   nrest;
  char                **rest;
};

static as_status_t open_workload(void *user, trace_source_t **src,
                                 as_err_t *err) {
  workload_args_t *w = user;
  return workload_open_argv(w->def, w->nrest, w->rest, src, err);
}

static int run_main(int argc, char **argv) {
  if (argc < 2) { /* `allocsim run` alone lists them, as README says */
    list_workloads(stderr);
    return cli_usage_error("run", "which workload?");
  }
  const workload_def_t *def = argv[1][0] == '-' ? NULL : workload_find(argv[1]);
  if (def == NULL) {
    /* One line, as every error: the names, not the whole table (which
     * --help prints). */
    size_t                       n;
    const workload_def_t *const *defs = workload_registry(&n);
    char                         known[512] = "";
    size_t                       used = 0;
    for (size_t k = 0; k < n && used < sizeof known; k++)
      used += (size_t)snprintf(known + used, sizeof known - used, "%s%s",
                               k ? ", " : "", defs[k]->name);
    if (argv[1][0] == '-')
      return cli_usage_error("run", "expected a WORKLOAD before '%s' (%s)",
                             argv[1], known);
    return cli_usage_error("run", "unknown workload '%s' (known: %s)", argv[1],
                           known);
  }
  cli_sim_opts_t o;
  cli_sim_opts_default(&o, "cpython");
  char **rest = calloc((size_t)argc, sizeof *rest);
  int    nrest = 0;
  if (rest == NULL)
    return CLI_EXIT_INPUT;
  for (int i = 2; i < argc; i++) {
    int took = cli_sim_opts_take(&o, "run", argc, argv, &i);
    if (took < 0) {
      free(rest);
      return CLI_EXIT_USAGE;
    }
    if (!took)
      rest[nrest++] = argv[i];
  }
  workload_args_t wa = {def, nrest, rest};
  int             code = cli_simulate_and_report("run", &o, open_workload, &wa,
                                                 cli_command_line(argc, argv));
  free(rest);
  return code;
}

const cli_command_t cli_cmd_run = {
    .name = "run",
    .summary = "run a synthetic workload (survivors, spike, labs) on a model",
    .usage = "usage: allocsim run WORKLOAD [workload options] [options]\n\n"
             "Generates WORKLOAD's events (deterministic for a seed) and\n"
             "replays them like `allocsim replay`.  The model defaults to\n"
             "cpython (pymalloc + the libc model).  `allocsim run` alone\n"
             "lists the workloads and their options.\n\noptions: as for\n"
             "`allocsim replay` (--model, --libc, --page-size, --thp,\n"
             "--memory-pressure, --no-zero-page, --sample-every,\n"
             "--max-memory, --db, --json, --csv).\n",
    .run = run_main,
};
