/* cli/cli.h -- the allocsim command line: one file per subcommand
 * (cmd_<name>.c defining cli_cmd_<name>), registered in main.c's table.
 *
 * Exit codes are stable and the same for every subcommand (CLI_EXIT_HELP,
 * printed after every --help): 0 success; 1 bad input or a failed run (a
 * file, trace, log or store that is wrong, unreadable or unwritable, a
 * model error, a limit such as --max-memory); 2 usage (an unknown
 * subcommand or option, a missing argument or value, a value malformed or
 * out of range for its option -- model and workload options included --,
 * options given twice or that exclude each other).  Errors go through
 * cli_fail (by status: AS_EUSAGE is 2) or cli_usage_error (2).  Every
 * subcommand answers --help on stdout with exit 0.  Human tables go to
 * stdout, --json prints one JSON object to stdout, progress goes to stderr.
 */
#ifndef ALLOCSIM_CLI_H
#define ALLOCSIM_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../analysis/runsrc.h"
#include "../analysis/store.h"
#include "../engine/engine.h"
#include "../sim/status.h"
#include "../sim/units.h"
#include "../traces/insert.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_INPUT = 1, CLI_EXIT_USAGE = 2 };

/* The exit-code rule, as every --help ends. */
#define CLI_EXIT_HELP                                                          \
  "\nexit codes: 0 success; 1 bad input or failed run (a file, trace, log\n" \
  "or store that is wrong or unreadable, a model error, a limit such as\n"    \
  "--max-memory); 2 usage error (an unknown or malformed option, a value\n"   \
  "out of range, an option given twice, options that exclude each other)\n"

typedef struct cli_command_s cli_command_t;
struct cli_command_s {
  const char *name;    /* "replay" */
  const char *summary; /* one line for `allocsim --help` */
  const char *usage;   /* full --help text */
  int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
};

/* Prints "allocsim <cmd>: <message>" to stderr and returns the exit code
 * for the status (AS_EUSAGE -> 2, anything else -> 1). */
int cli_fail(const char *cmd, const as_err_t *err);
/* Prints "allocsim <cmd>: <formatted message>" and returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* True if argv has -h or --help; prints cmd's usage then. */
bool cli_wants_help(const cli_command_t *cmd, int argc, char **argv);


/* If argv[*i] is the option name, as "--name VALUE" or "--name=VALUE",
 * sets *value, advances *i past it and returns 1; returns 0 for any other
 * argument, and -1 after printing a usage error when the value is
 * missing.  Every subcommand parses its valued options through this, so
 * both spellings work everywhere. */
int cli_opt_value(const char *cmd, int argc, char **argv, int *i,
                  const char *name, const char **value);

/* ---- Running a source against a model and reporting it ----------------- */

/* Options shared by replay, run and compare. */
typedef struct cli_sim_opts_s cli_sim_opts_t;
struct cli_sim_opts_s {
  const char         *model;           /* spec; default "ideal" or cpython */
  const char         *libc;            /* spec or NULL */
  sim_kernel_config_t kernel;          /* page size, thp, pressure; its
                                          max_memory_bytes is --max-memory */
  uint64_t            sample_every_ns; /* 0 = marks only */
  uint64_t            settle_ns;       /* clock runs on after the trace */
  bool                lenient;
  bool                strict;          /* unknown-notion events are errors */
  trace_insert_t      inserts[TRACE_INSERT_MAX]; /* --insert EVENT@WHEN */
  size_t              ninserts;
  bool                json;
  bool                csv;             /* time series as CSV */
  const char         *db;              /* store path or NULL */
  unsigned            given;           /* options taken, a bit each (common.c
                                          once_options) */
};

/* Consumes a shared option at argv[*i] (advancing *i past its value) and
 * returns 1, returns 0 if argv[*i] is not one, or -1 after printing a usage
 * error for a bad value, an option given twice (all but --insert) or
 * --json with --csv. */
int cli_sim_opts_take(cli_sim_opts_t *o, const char *cmd, int argc,
                      char **argv, int *i);
void cli_sim_opts_default(cli_sim_opts_t *o, const char *default_model);

/* Runs src against o->model (with o's --insert events), prints the table
 * (or JSON / CSV), stores a simulated run when o->db is set, and closes
 * src.  command is the command line for the store.  Returns an exit
 * code. */
int cli_simulate_and_report(const char *cmd, const cli_sim_opts_t *o,
                            trace_source_t *src, const char *command);

/* Prints s as a JSON string literal (escaped), or null for NULL. */
void cli_json_string(FILE *out, const char *s);

/* The command line argv joined with spaces (static buffer). */
const char *cli_command_line(int argc, char **argv);

/* Subcommands, each defined in its cmd_<name>.c. */
extern const cli_command_t cli_cmd_replay;
extern const cli_command_t cli_cmd_run;
extern const cli_command_t cli_cmd_convert;
extern const cli_command_t cli_cmd_models;
extern const cli_command_t cli_cmd_runs;
extern const cli_command_t cli_cmd_formula;
/* `formula --validate` (cmd_formula_validate.c). */
int formula_validate_main(int argc, char **argv);
extern const cli_command_t cli_cmd_sweep;
extern const cli_command_t cli_cmd_capture;
extern const cli_command_t cli_cmd_record;
extern const cli_command_t cli_cmd_compare;
extern const cli_command_t cli_cmd_import;
extern const cli_command_t cli_cmd_explain;
extern const cli_command_t cli_cmd_advise;
extern const cli_command_t cli_cmd_map;
extern const cli_command_t cli_cmd_report;
extern const cli_command_t cli_cmd_db;
extern const cli_command_t cli_cmd_oracle;

#endif
