/* cli/cmd_db.c -- `allocsim db merge OUT IN...`: store maintenance. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "../analysis/merge.h"
#include "../analysis/sweep_rows.h"

static int db_merge(int argc, char **argv) {
  if (argc < 4)
    return cli_usage_error("db", "merge needs OUT and at least one IN");
  const char *out = argv[2];
  as_err_t    err = {0};
  for (int i = 3; i < argc; i++) {
    /* The same file under two names (./s.db, a link) too: attached to
     * itself it would wait for its own write lock, then fail. */
    if (strcmp(argv[i], out) == 0)
      return cli_usage_error("db", "merge: %s is both OUT and an IN", out);
    if (cli_same_file(out, argv[i]))
      return cli_usage_error("db", "merge: %s and %s are the same file", out,
                             argv[i]);
    if (access(argv[i], R_OK) != 0) {
      as_err_set(&err, AS_EINVAL, "%s: no such store", argv[i]);
      return cli_fail("db", &err);
    }
  }
  store_t *s;
  bool     existed = access(out, F_OK) == 0;
  if (store_open(out, &s, &err) != AS_OK) {
    store_discard_new(out, !existed);
    return cli_fail("db", &err);
  }
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
  /* A new OUT is kept only whole: each IN merges in its own transaction,
   * so a failed IN leaves an existing OUT with the INs before it (merging
   * them again adds nothing), and a new one not at all. */
  if (code != CLI_EXIT_OK)
    store_discard_new(out, !existed);
  return code;
}

typedef enum { ROWS_TEXT, ROWS_CSV, ROWS_JSON } rows_format_t;

/* Text columns are as wide as their widest value (a first pass). */
#define ROWS_MAX_COLS 64
static void column_widths(sqlite3_stmt *st, int ncol, int *width) {
  for (int c = 0; c < ncol; c++)
    width[c] = (int)strlen(sqlite3_column_name(st, c));
  while (sqlite3_step(st) == SQLITE_ROW)
    for (int c = 0; c < ncol; c++) {
      const char *v = (const char *)sqlite3_column_text(st, c);
      int         n = v ? (int)strlen(v) : 1;
      width[c] = n > width[c] ? n : width[c];
    }
  sqlite3_reset(st);
}

static void print_value(sqlite3_stmt *st, int c, rows_format_t f, int width) {
  const char *v = (const char *)sqlite3_column_text(st, c);
  int         type = sqlite3_column_type(st, c);
  if (f == ROWS_JSON) {
    if (type == SQLITE_NULL)
      fputs("null", stdout);
    else if (type == SQLITE_TEXT)
      cli_json_string(stdout, v);
    else
      fputs(v, stdout);
  } else if (f == ROWS_CSV)
    cli_csv_field(stdout, v ? v : "");
  else
    printf("%*s", width, v ? v : "-");
}

/* Prints every row of st: a table, CSV with a header, or a JSON array of
 * objects keyed by column name. */
static void print_rows(sqlite3_stmt *st, rows_format_t f) {
  int ncol = sqlite3_column_count(st), width[ROWS_MAX_COLS] = {0};
  ncol = ncol < ROWS_MAX_COLS ? ncol : ROWS_MAX_COLS;
  if (f == ROWS_TEXT)
    column_widths(st, ncol, width);
  for (int c = 0; f != ROWS_JSON && c < ncol; c++) {
    if (f == ROWS_CSV) {
      fputs(c ? "," : "", stdout);
      cli_csv_field(stdout, sqlite3_column_name(st, c));
    } else
      printf(c ? " %*s" : "%*s", width[c], sqlite3_column_name(st, c));
  }
  printf(f == ROWS_JSON ? "[" : "\n");
  for (size_t row = 0; sqlite3_step(st) == SQLITE_ROW; row++) {
    if (f == ROWS_JSON)
      printf(row ? ",{" : "{");
    for (int c = 0; c < ncol; c++) {
      if (f == ROWS_JSON) {
        printf(c ? "," : "");
        cli_json_string(stdout, sqlite3_column_name(st, c));
        putchar(':');
      } else if (c)
        putchar(f == ROWS_CSV ? ',' : ' ');
      print_value(st, c, f, width[c]);
    }
    printf(f == ROWS_JSON ? "}" : "\n");
  }
  if (f == ROWS_JSON)
    printf("]\n");
}

static int db_points(int argc, char **argv) {
  if (argc < 3)
    return cli_usage_error("db", "points needs a STORE");
  const char   *db = argv[2], *v;
  int64_t       sweep_id = 0;
  rows_format_t format = ROWS_TEXT;
  for (int i = 3; i < argc; i++) {
    int took;
    if ((took = cli_opt_flag("db", argv, i, "--csv")) ||
        (took = cli_opt_flag("db", argv, i, "--json"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (format != ROWS_TEXT)
        return cli_usage_error("db", "--json and --csv exclude each other");
      format = strcmp(argv[i], "--csv") == 0 ? ROWS_CSV : ROWS_JSON;
    } else if ((took = cli_opt_value("db", argc, argv, &i, "--sweep", &v))) {
      char *end;
      if (took < 0)
        return CLI_EXIT_USAGE;
      errno = 0;
      sweep_id = strtoll(v, &end, 10);
      if (*end || end == v || sweep_id < 1 || errno == ERANGE)
        return cli_usage_error("db", "--sweep expects a sweep id, got '%s'", v);
    } else
      return cli_usage_error("db", "points: unknown option '%s'", argv[i]);
  }
  as_err_t err = {0};
  if (access(db, R_OK) != 0) {
    as_err_set(&err, AS_EINVAL, "%s: no such store", db);
    return cli_fail("db", &err);
  }
  store_t      *s;
  sqlite3_stmt *st = NULL;
  as_status_t   rc = store_open_existing(db, &s, &err);
  if (rc != AS_OK)
    return cli_fail("db", &err);
  rc = sweep_rows_prepare(s, sweep_id, &st, &err);
  if (rc == AS_OK)
    print_rows(st, format);
  sqlite3_finalize(st);
  store_close(s);
  return rc == AS_OK ? CLI_EXIT_OK : cli_fail("db", &err);
}

static int db_main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "merge") == 0)
    return db_merge(argc, argv);
  if (argc >= 2 && strcmp(argv[1], "points") == 0)
    return db_points(argc, argv);
  return cli_usage_error("db", "expected a subcommand: merge or points");
}

const cli_command_t cli_cmd_db = {
    .name = "db",
    .summary = "stores: merge them, list a sweep's points",
    .usage =
        "usage: allocsim db merge OUT IN [IN...]\n"
        "       allocsim db points STORE [--sweep ID] [--csv | --json]\n\n"
        "Copies every run, sweep and sweep point of each IN store into OUT\n"
        "(created if missing), each IN in one transaction: the stores of\n"
        "sweep shards become one.  Idempotent: runs and sweeps already in\n"
        "OUT (same uid) and sweep points with the same key and results are\n"
        "not copied again.  A point whose key OUT holds with other results,\n"
        "or an IN of another schema version, is refused and nothing of that\n"
        "IN is written.\n\n"
        "points prints one row per point of a sweep (default: the latest)\n"
        "and of every sweep of the same spec (its shards, its resumed parts),\n"
        "the trace file it replayed (a sweep of traces), its varied\n"
        "parameters as columns, then seed, page size, model,\n"
        "kept and formula bytes, pinned arenas, its run and key\n"
        "(page_size_bytes and model_spec where page_size or model\n"
        "is a varied parameter's column).\n",
    .run = db_main,
};
