/* cli/main.c -- `allocsim <subcommand>`: the table of subcommands. */
#include "cli.h"

#include <gsl/gsl_errno.h>
#include <string.h>

#include "cli_version.h"

static const cli_command_t *const commands[] = {
    &cli_cmd_replay,
    &cli_cmd_run,
    &cli_cmd_convert,
    &cli_cmd_import,
    &cli_cmd_models,
    &cli_cmd_formula,
    &cli_cmd_sweep,
    &cli_cmd_capture,
    &cli_cmd_record,
    &cli_cmd_compare,
    &cli_cmd_explain,
    &cli_cmd_advise,
    &cli_cmd_map,
    &cli_cmd_report,
    &cli_cmd_lab,
    &cli_cmd_oracle,
    &cli_cmd_runs,
    &cli_cmd_db,
};

static void print_help(FILE *out) {
  fprintf(out, "usage: allocsim <command> [options]\n\n"
               "Predicts a process's resident memory by replaying allocation "
               "traces\nagainst models of real allocators.\n\ncommands:\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(out, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
  fprintf(out, "\n`allocsim <command> --help` describes each command.\n"
               "exit codes: 0 success, 1 bad input, 2 usage error\n");
}

int main(int argc, char **argv) {
  /* GSL's default handler aborts; every GSL return value is checked. */
  gsl_set_error_handler_off();
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
      if (cli_wants_help(commands[i], argc - 1, argv + 1))
        return CLI_EXIT_OK;
      return commands[i]->run(argc - 1, argv + 1);
    }
  fprintf(stderr, "allocsim: unknown command '%s' (try allocsim --help)\n",
          argv[1]);
  return CLI_EXIT_USAGE;
}
