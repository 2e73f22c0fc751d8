/* cli/main.c -- `allocsim <subcommand>`: the table of subcommands. */
#include "cli.h"

#include <errno.h>
#include <gsl/gsl_errno.h>
#include <stdio_ext.h>
#include <string.h>

#include "cli_version.h"

static const cli_command_t *const commands[] = {
    &cli_cmd_replay, &cli_cmd_run,     &cli_cmd_convert, &cli_cmd_import,
    &cli_cmd_models, &cli_cmd_formula, &cli_cmd_sweep,   &cli_cmd_capture,
    &cli_cmd_record, &cli_cmd_compare, &cli_cmd_explain, &cli_cmd_advise,
    &cli_cmd_map,    &cli_cmd_report,  &cli_cmd_lab,     &cli_cmd_oracle,
    &cli_cmd_runs,   &cli_cmd_db,
};

static void print_help(FILE *out) {
  fprintf(out, "usage: allocsim <command> [options]\n\n"
               "Predicts a process's resident memory by replaying allocation "
               "traces\nagainst models of real allocators.\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
  fprintf(out, "\n`allocsim <command> --help` describes each command.\n%s",
          CLI_EXIT_HELP);
}

/* Every byte a command printed must reach stdout: a full disk or a closed
 * stdout turns a 0 into 1 with a one-line message, never a silent loss.  As
 * gnulib's close_stream does, a closed stdout that was never written to
 * (EBADF with nothing pending) is not an error. */
static int close_stdout(const char *cmd, int code) {
  bool pending = __fpending(stdout) > 0;
  bool failed = ferror(stdout) != 0;
  errno = 0;
  int e = 0;
  if (fclose(stdout) != 0)
    e = errno;
  /* A command that failed has said why in its one line already (for
   * convert and import to stdout, that very write error). */
  if (code == CLI_EXIT_OK && (failed || (e != 0 && (pending || e != EBADF)))) {
    fprintf(stderr, "allocsim%s%s: write error on stdout: %s\n", cmd ? " " : "",
            cmd ? cmd : "", strerror(e ? e : EIO));
    return CLI_EXIT_INPUT;
  }
  return code;
}

static int dispatch(int argc, char **argv, const char **cmd) {
  if (argc < 2) {
    print_help(stderr);
    return CLI_EXIT_USAGE;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    print_help(stdout);
    return CLI_EXIT_OK;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("allocsim %s (commit %s)\n", ALLOCSIM_VERSION, ALLOCSIM_COMMIT);
    return CLI_EXIT_OK;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i]->name) == 0) {
      *cmd = commands[i]->name;
      if (cli_wants_help(commands[i], argc - 1, argv + 1))
        return CLI_EXIT_OK;
      return commands[i]->run(argc - 1, argv + 1);
    }
  fprintf(stderr, "allocsim: unknown command '%s' (try allocsim --help)\n",
          argv[1]);
  return CLI_EXIT_USAGE;
}

int main(int argc, char **argv) {
  /* GSL's default handler aborts; every GSL return value is checked. */
  gsl_set_error_handler_off();
  const char *cmd = NULL;
  int         code = dispatch(argc, argv, &cmd);
  return close_stdout(cmd, code);
}
