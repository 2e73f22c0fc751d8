/* cli/cmd_replay.c -- `allocsim replay TRACE`: a trace file against a
 * model. */
#include "cli.h"

#include <string.h>

#define SIM_OPTIONS_HELP                                                       \
  "  --model SPEC        model and options, e.g. glibc:arena_max=2 (see\n"     \
  "                      `allocsim models`)\n"                                 \
  "  --libc SPEC         the libc model a composition (cpython) forwards to\n" \
  "  --page-size N       OS page size: 4096, 16384 or 65536 (default 4096)\n"  \
  "  --thp               2 MiB transparent huge pages on first write\n"        \
  "                      everywhere (THP=always; without it only where the\n"  \
  "                      allocator madvises MADV_HUGEPAGE, THP=madvise)\n"     \
  "  --memory-pressure   reclaim MADV_FREE pages at once\n"                    \
  "  --kernel RELEASE    follow that Linux release (6.1, 6.8, 6.12, 6.18;\n"   \
  "                      default 6.1): since 6.7 large anonymous mappings\n"   \
  "                      are 2 MiB-aligned and thread stacks (MAP_STACK)\n"    \
  "                      get no huge pages, since 6.14 a whole-block\n"        \
  "                      MADV_DONTNEED frees the emptied page table\n"         \
  "  --no-zero-page      a read of a page never written makes it resident\n"   \
  "                      (kernels that do not map the shared zero page)\n"     \
  "  --sample-every T    also sample RSS every T of virtual time (10ms, 1s)\n" \
  "  --settle T          run the clock on for T after the last event, so\n"    \
  "                      pending timers (decay, purge) fire (10s)\n"           \
  "  --max-memory SIZE   the simulator's own memory bound (default: half of\n" \
  "                      physical memory); larger runs are refused\n"          \
  "  --lenient           count and skip frees/reallocs of dead objects, and\n" \
  "                      read a binary trace cut short to its last whole\n"    \
  "                      record (with a warning)\n"                            \
  "  --insert EVENT@WHEN add trim[:PAD] or purge[:KIND] before every mark\n"   \
  "                      WHEN, or at every:DURATION (trim@after_free)\n"       \
  "  --strict            purge/option/touch events the model has no notion\n"  \
  "                      of are errors (default: counted and skipped)\n"       \
  "  --layouts N         address layouts to replay and average (default:\n"    \
  "                      all that differ, 4 with 4 KiB pages: where ASLR\n"    \
  "                      puts mmaps decides which pymalloc arenas are\n"       \
  "                      pool-aligned); 1 = the default layout only\n"         \
  "  --db FILE           store the simulated run (the mean) in a store\n"      \
  "  --json              print one JSON object instead of the table\n"         \
  "  --csv               print every sample as CSV instead of the table\n"

static int replay_main(int argc, char **argv) {
  cli_sim_opts_t o;
  const char    *path = NULL;
  cli_sim_opts_default(&o, "ideal");
  for (int i = 1; i < argc; i++) {
    int took = cli_sim_opts_take(&o, "replay", argc, argv, &i);
    if (took < 0)
      return CLI_EXIT_USAGE;
    if (took)
      continue;
    if (argv[i][0] == '-' && strcmp(argv[i], "-") != 0)
      return cli_usage_error("replay", "unknown option '%s'", argv[i]);
    if (path != NULL)
      return cli_usage_error("replay", "one trace at a time, got '%s' too",
                             argv[i]);
    path = argv[i];
  }
  if (path == NULL)
    return cli_usage_error("replay", "which trace? give a file name");
  /* Every layout reads the trace again: a replay target copies a pipe's. */
  replay_target_t t;
  as_err_t        err = {0};
  char            model[512], libc[256];
  if (replay_target_open(&t, path, NULL, &err) != AS_OK ||
      replay_target_with_facts(&t, &o.model, model, sizeof model, &o.libc, libc,
                               sizeof libc, &err) != AS_OK) {
    replay_target_close(&t);
    return cli_fail("replay", &err);
  }
  int code = cli_simulate_and_report("replay", &o, replay_target_source, &t,
                                     cli_command_line(argc, argv));
  replay_target_close(&t);
  return code;
}

const cli_command_t cli_cmd_replay = {
    .name = "replay",
    .summary = "replay a trace file against a model and report RSS",
    .usage = "usage: allocsim replay TRACE [options]\n\n"
             "Replays TRACE (text .trace or binary .astrace; - for stdin)\n"
             "against a model and prints RSS at every mark, the peak and\n"
             "the final state, broken down by owner.  Without --model the\n"
             "model is ideal, the lower bound (live bytes packed into whole\n"
             "pages), not an allocator: name one (glibc, cpython, jemalloc,\n"
             "...) for a prediction.\n\noptions:\n" SIM_OPTIONS_HELP,
    .run = replay_main,
};
