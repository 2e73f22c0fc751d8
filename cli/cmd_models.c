/* cli/cmd_models.c -- `allocsim models`: every model with its options,
 * defaults and the source each default comes from, generated from the
 * models' own option tables. */
#include "cli.h"

#include <string.h>

static void print_model(const model_methods_t *m) {
  printf("%s\n  %s\n", m->name, m->summary);
  for (const model_option_t *o = m->options; o->name != NULL; o++) {
    printf("  %-16s default %-10s %s%s%s\n", o->name, o->default_value, o->help,
           o->kind == OPT_ENUM ? " one of " : "",
           o->kind == OPT_ENUM ? o->choices : "");
    printf("  %-16s source: %s\n", "", o->source);
  }
  printf("\n");
}

static int models_main(int argc, char **argv) {
  size_t                        n;
  const model_methods_t *const *all = model_registry(&n);
  if (argc > 2)
    return cli_usage_error("models", "at most one model name");
  if (argc == 2 && argv[1][0] == '-') /* --json is no model name */
    return cli_usage_error("models", "unknown option '%s'", argv[1]);
  for (size_t i = 0; i < n; i++)
    if (argc < 2 || strcmp(argv[1], all[i]->name) == 0)
      print_model(all[i]);
  if (argc == 2 && model_find(argv[1]) == NULL)
    return cli_usage_error("models", "unknown model '%s'", argv[1]);
  return CLI_EXIT_OK;
}

const cli_command_t cli_cmd_models = {
    .name = "models",
    .summary = "list models, their options, defaults and sources",
    .usage = "usage: allocsim models [NAME]\n\n"
             "Lists every model (or NAME) with its options: default value,\n"
             "meaning, and the source the default comes from.  Options are\n"
             "given as --model NAME:key=value,key=value.\n",
    .run = models_main,
};
