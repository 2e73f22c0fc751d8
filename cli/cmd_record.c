/* cli/cmd_record.c -- `allocsim record FILE --db DB`: stores a trace
 * that carries measured RSS (a measured-run file, a capture) as a run of
 * kind measured.  The work is record_trace_file() in analysis/record.c,
 * which `allocsim capture --db` shares.
 */
#include "cli.h"

#include <inttypes.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/record.h"
#include "../analysis/store.h"

static int record_run(int argc, char **argv) {
  const char *db = NULL, *file = NULL;
  bool        json = false;
  for (int i = 1; i < argc; i++) {
    int took = cli_opt_value("record", argc, argv, &i, "--db", &db);
    if (took < 0)
      return CLI_EXIT_USAGE;
    if (took)
      continue;
    if ((took = cli_opt_flag("record", argv, i, "--json")) != 0) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      json = true;
    } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
      return cli_usage_error("record", "unknown option '%s'", argv[i]);
    } else if (file == NULL) {
      file = argv[i];
    } else {
      return cli_usage_error("record", "one trace at a time, got '%s' too",
                             argv[i]);
    }
  }
  if (file == NULL)
    return cli_usage_error("record", "expected a trace file");
  if (db == NULL)
    return cli_usage_error("record", "--db FILE is required");

  as_err_t      err = {0};
  store_t      *s = NULL;
  record_info_t info;
  bool          existed = access(db, F_OK) == 0;
  if (store_open(db, &s, &err) != AS_OK) {
    store_discard_new(db, !existed);
    return cli_fail("record", &err);
  }
  as_status_t rc = record_trace_file(s, file, cli_command_line(argc, argv),
                                     NULL, 0, &info, &err);
  store_close(s);
  if (rc != AS_OK) {
    store_discard_new(db, !existed); /* a failure leaves no new store */
    return cli_fail("record", &err);
  }
  if (info.spec_warning[0] != '\0')
    fprintf(stderr, "allocsim record: warning: %s\n", info.spec_warning);
  if (json) {
    printf("{\"run\": %" PRId64 ", \"events\": %" PRIu64
           ", \"alloc_events\": %" PRIu64 ", \"marks\": %" PRIu64
           ", \"measured\": %" PRIu64 ", \"marks_without_rss\": %" PRIu64
           ", \"peak_measured_rss_bytes\": %" PRIu64 ", \"sha256\": %s%s%s}\n",
           info.run_id, info.events, info.alloc_events, info.marks,
           info.measured, info.marks_without_rss, info.peak_measured_rss_bytes,
           info.sha256[0] ? "\"" : "", info.sha256[0] ? info.sha256 : "null",
           info.sha256[0] ? "\"" : "");
  } else {
    printf("recorded %s as measured run %" PRId64 " in %s\n", file, info.run_id,
           db);
    printf("  %" PRIu64 " events, %" PRIu64 " allocation events, %" PRIu64
           " marks, %" PRIu64 " other rss samples, peak %.2f MiB\n",
           info.events, info.alloc_events, info.marks, info.measured,
           (double)info.peak_measured_rss_bytes / 1048576.0);
    if (info.marks_without_rss > 0)
      printf("  note: %" PRIu64 " marks have no rss event at their time; "
             "stored with measured 0\n",
             info.marks_without_rss);
    if (info.sha256[0])
      printf("  trace sha256 %s\n", info.sha256);
  }
  return CLI_EXIT_OK;
}

const cli_command_t cli_cmd_record = {
    .name = "record",
    .summary = "store a trace with measured RSS as a measured run",
    .usage =
        "usage: allocsim record FILE --db DB [--json]\n"
        "\n"
        "Stores FILE (text or binary trace with rss events, e.g. a "
        "measured-run\n"
        "file: '#@ key=value' provenance, then 'mark' events each followed by\n"
        "an 'rss' event at the same time) as a run of kind measured in DB.\n"
        "\n"
        "  provenance     -> run_meta (kind=measured, workload, command, ...)\n"
        "  mark + rss     -> a 'mark' sample with measured_rss_bytes\n"
        "  other rss      -> 'measured' samples\n"
        "  allocations    -> the trace's path and sha256 are stored, so\n"
        "                    `allocsim compare` can replay it\n"
        "\n"
        "options:\n"
        "  --db DB        the store (created if missing)\n"
        "  --json         print the result as one JSON object\n",
    .run = record_run,
};
