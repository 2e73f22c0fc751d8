/* cli/cmd_db.c -- `allocsim db merge OUT IN...`: store maintenance. */
#include "cli.h"

#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/merge.h"

static int db_merge(int argc, char **argv) {
  if (argc < 4)
    return cli_usage_error("db", "merge needs OUT and at least one IN");
  const char *out = argv[2];
  as_err_t    err = {0};
  for (int i = 3; i < argc; i++) {
    if (strcmp(argv[i], out) == 0)
      return cli_usage_error("db", "merge: %s is both OUT and an IN", out);
    if (access(argv[i], R_OK) != 0) {
      as_err_set(&err, AS_EINVAL, "%s: no such store", argv[i]);
      return cli_fail("db", &err);
    }
  }
  store_t *s;
  if (store_open(out, &s, &err) != AS_OK)
    return cli_fail("db", &err);
  int code = CLI_EXIT_OK;
  for (int i = 3; i < argc && code == CLI_EXIT_OK; i++) {
    store_merge_stats_t st;
    if (store_merge(s, argv[i], &st, &err) != AS_OK)
      code = cli_fail("db", &err);
    else
      printf("%s: %" PRIu64 " runs, %" PRIu64 " sweeps, %" PRIu64
             " sweep points merged\n",
             argv[i], st.runs, st.sweeps, st.points);
  }
  store_close(s);
  return code;
}

static int db_main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "merge") == 0)
    return db_merge(argc, argv);
  return cli_usage_error("db", "expected a subcommand: merge");
}

const cli_command_t cli_cmd_db = {
    .name    = "db",
    .summary = "store maintenance: merge stores",
    .usage =
        "usage: allocsim db merge OUT IN [IN...]\n\n"
        "Copies every run, sweep and sweep point of each IN store into OUT\n"
        "(created if missing), each IN in one transaction: the stores of\n"
        "sweep shards become one.  Idempotent: runs and sweeps already in\n"
        "OUT (same uid) and sweep points with the same key and results are\n"
        "not copied again.  A point whose key OUT holds with other results,\n"
        "or an IN of another schema version, is refused and nothing of that\n"
        "IN is written.\n",
    .run = db_main,
};
