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

#include "../analysis/explain.h"
#include "../analysis/heapmap.h"
#include "../analysis/lab.h"
#include "../analysis/runsrc.h"
#include "../analysis/store.h"
#include "../engine/engine.h"
#include "../sim/status.h"
#include "../sim/units.h"
#include "../traces/insert.h"

enum { CLI_EXIT_OK = 0, CLI_EXIT_INPUT = 1, CLI_EXIT_USAGE = 2 };

/* The exit-code rule, as every --help ends. */
#define CLI_EXIT_HELP                                                          \
  "\nexit codes: 0 success; 1 bad input or failed run (a file, trace, log\n"   \
  "or store that is wrong or unreadable, a model error, a limit such as\n"     \
  "--max-memory); 2 usage error (an unknown or malformed option, a value\n"    \
  "out of range, an option given twice, options that exclude each other)\n"

typedef struct cli_command_s cli_command_t;
struct cli_command_s {
  const char *name;                  /* "replay" */
  const char *summary;               /* one line for `allocsim --help` */
  const char *usage;                 /* full --help text */
  int (*run)(int argc, char **argv); /* argv[0] is the subcommand name */
};

/* Prints "allocsim <cmd>: <message>" to stderr and returns the exit code
 * for the status (AS_EUSAGE -> 2, anything else -> 1). */
int cli_fail(const char *cmd, const as_err_t *err);
/* Prints "allocsim <cmd>: <formatted message>" and returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Names where the arguments now taken were read ("FILE:LINE", e.g. a
 * sweep spec's line) in the messages of cli_fail and cli_usage_error, until
 * called again with NULL. */
void cli_error_where(const char *where);
/* True if argv has -h or --help; prints cmd's usage then. */
bool cli_wants_help(const cli_command_t *cmd, int argc, char **argv);

/* 0 if v reads as a Linux release (MAJOR.MINOR...: "6.1", "6.12.48+deb13"),
 * else -1 after a usage error naming --kernel. */
int cli_kernel_release_check(const char *cmd, const char *v);

/* If argv[*i] is the option name, as "--name VALUE" or "--name=VALUE",
 * sets *value, advances *i past it and returns 1; returns 0 for any other
 * argument, and -1 after printing a usage error when the value is
 * missing or the option was given before, in either spelling of -o and
 * --output (all but --vary, --insert,
 * --assume-trim-at and --env, which add an item each time).  Every
 * subcommand parses its valued options through this, so both spellings
 * work everywhere. */
int cli_opt_value(const char *cmd, int argc, char **argv, int *i,
                  const char *name, const char **value);
/* If argv[i] is the flag name (an option without a value), returns 1;
 * returns 0 for any other argument, and -1 after printing a usage error
 * when the flag was given before: a flag, like a valued option, may be
 * given once. */
int cli_opt_flag(const char *cmd, char **argv, int i, const char *name);

/* True if a and b name the same file: the same name, or two names (./x,
 * a link, a hard link) of one existing file.  "-" (stdin or stdout) is no
 * file and the same as nothing.  An output that is an input of the same
 * command would replace it (every output is renamed over its target), so
 * commands refuse that as a usage error. */
bool cli_same_file(const char *a, const char *b);

/* ---- Running a source against a model and reporting it ----------------- */

/* Options shared by replay, run and compare. */
typedef struct cli_sim_opts_s cli_sim_opts_t;
struct cli_sim_opts_s {
  const char         *model;      /* spec; default "ideal" or cpython */
  const char         *libc;       /* spec or NULL */
  sim_kernel_config_t kernel;     /* page size, thp, pressure; its
                                     max_memory_bytes is --max-memory */
  uint64_t       sample_every_ns; /* 0 = marks only */
  uint64_t       settle_ns;       /* clock runs on after the trace */
  bool           lenient;
  bool           strict; /* unknown-notion events are errors */
  trace_insert_t inserts[TRACE_INSERT_MAX]; /* --insert EVENT@WHEN */
  size_t         ninserts;
  bool           json;
  bool           csv;     /* time series as CSV */
  const char    *db;      /* store path or NULL */
  unsigned       layouts; /* address layouts to replay (0: all
                             that differ for the page size;
                             1: the default layout only) */
  unsigned given;         /* options taken, a bit each (common.c
                             once_options) */
};

/* Consumes a shared option at argv[*i] (advancing *i past its value) and
 * returns 1, returns 0 if argv[*i] is not one, or -1 after printing a usage
 * error for a bad value, an option given twice (all but --insert) or
 * --json with --csv. */
int cli_sim_opts_take(cli_sim_opts_t *o, const char *cmd, int argc, char **argv,
                      int *i);
void cli_sim_opts_default(cli_sim_opts_t *o, const char *default_model);

/* Opens (again) the source a command simulates: once per layout. */
typedef as_status_t (*cli_source_open_fn)(void *user, trace_source_t **src,
                                          as_err_t *err);

/* Runs the source open() gives against o->model (with o's --insert
 * events) under o->layouts address layouts (analysis/compare.h: mmap_top
 * lowered by 0 .. N-1 OS pages, what ASLR varies), prints the table (or
 * JSON / CSV) of the mean over layouts with each sample's min-max, and
 * stores the mean as a simulated run when o->db is set.  command is the
 * command line for the store.  Returns an exit code. */
int cli_simulate_and_report(const char *cmd, const cli_sim_opts_t *o,
                            cli_source_open_fn open, void *user,
                            const char *command);

/* AS_EUSAGE if libc is given beside a model that serves malloc itself (not
 * a composition such as cpython): the libc would be ignored. */
as_status_t cli_libc_check(const char *model, const char *libc, as_err_t *err);

/* For the commands that replay a trace or a run (explain, advise, map,
 * report): o's model and libc become the given ones, else model and libc,
 * those t's provenance implies (replay_target_specs).  For a C run (model
 * and libc the same model) --libc alone names the model, as for compare;
 * otherwise a given libc is checked with cli_libc_check.  Specs both from
 * the provenance are checked with replay_target_check_specs; given ones
 * take the machine facts t recorded (replay_target_with_facts) and may be
 * rewritten into model and libc. */
as_status_t cli_target_specs(replay_target_t *t, explain_opts_t *o, char *model,
                             size_t model_len, char *libc, size_t libc_len,
                             as_err_t *err);

/* Prints the "source" and "model" header lines of explain, map and
 * advise, and a "libc" line with libc_spec when the model composes one
 * (cpython over jemalloc: the model's own description names no libc). */
void cli_print_model_header(const char *source, const char *model_desc,
                            const char *libc_spec);

/* The "measured" line of explain and advise: a recorded run's RSS at the
 * mark beside the simulated, the difference being mostly what the trace
 * does not hold; tail ends the line ("" or a clause starting with ';'). */
void cli_print_measured(uint64_t measured, uint64_t simulated,
                        const char *tail);

/* For commands that replay one address layout (explain, advise): prints
 * the "layout" header line saying it is the default one, and how many
 * layouts replay averages by default with page_size-byte pages. */
void cli_print_one_layout(uint64_t page_size);

/* Prints the heap map m: a legend with each class's bytes, then at most
 * max_rows rows of glyphs (ANSI colours when color). */
void cli_heapmap_print(FILE *out, const heapmap_t *m, size_t max_rows,
                       bool color);

/* ---- Lab programs (cli/lab_measure.c) ---------------------------------- */

typedef struct cli_lab_env_s cli_lab_env_t;
struct cli_lab_env_s {
  const char *python; /* interpreter of the Python labs */
};
/* The directory of the lab programs: $ALLOCSIM_LABS_DIR, else beside the
 * binary (build tree or installed), else where the build put them. */
as_status_t cli_lab_dir(char *buf, size_t len, as_err_t *err);
/* Runs variant v's real program so that it writes the measured-run file
 * out; an exit status other than 0 is an error naming the program. */
as_status_t cli_lab_measure(const lab_variant_t *v, const cli_lab_env_t *e,
                            const char *out, as_err_t *err);

/* Prints s as a JSON string literal, or null for NULL: escaped, and valid
 * UTF-8 whatever bytes s holds (sim/json.h). */
void cli_json_string(FILE *out, const char *s);
/* Prints s as one CSV field (RFC 4180): as it is, or in double quotes with
 * each quote doubled when it holds a comma, quote, CR or LF.  Every --csv
 * output writes its text fields through this. */
void cli_csv_field(FILE *out, const char *s);

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
int                        formula_validate_main(int argc, char **argv);
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
extern const cli_command_t cli_cmd_lab;
extern const cli_command_t cli_cmd_oracle;

#endif
