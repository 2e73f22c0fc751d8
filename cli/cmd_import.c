/* cli/cmd_import.c -- `allocsim import FORMAT FILE -o OUT`: logs other
 * tools wrote, translated into allocsim traces.
 *
 * FORMAT names the tool (only "mtrace" so far; heaptrack's data file is the
 * next one, and gets its own word and importer).  The output format comes
 * from OUT's name as for convert (.astrace is binary, anything else text).
 * A summary of what was imported, skipped and left live goes to stderr.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../traces/import_mtrace.h"

static int import_mtrace(int argc, char **argv) {
  const char          *in = NULL, *out = NULL;
  import_mtrace_opts_t opts = {.lenient = false, .tick_ns = 0};
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i];
    int         took;
    if ((took = cli_opt_value("import", argc, argv, &i, "-o", &out)) ||
        (took = cli_opt_value("import", argc, argv, &i, "--output", &out))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
    } else if (strcmp(a, "--lenient") == 0) {
      opts.lenient = true;
    } else if (a[0] == '-' && strcmp(a, "-") != 0) {
      return cli_usage_error("import", "unknown option '%s'", a);
    } else if (in == NULL) {
      in = a;
    } else {
      return cli_usage_error("import", "expected one FILE, got '%s' too", a);
    }
  }
  if (in == NULL)
    return cli_usage_error("import", "expected an mtrace log FILE");
  if (out == NULL)
    return cli_usage_error("import", "expected -o OUT");
  if (strcmp(in, out) == 0 && strcmp(in, "-") != 0)
    return cli_usage_error("import", "FILE and OUT are the same file '%s'", in);

  trace_format_t        fmt = trace_format_from_path(out);
  import_mtrace_stats_t st;
  as_err_t              err = {0};
  if (import_mtrace_file(in, out, fmt, &opts, &st, &err) != AS_OK)
    return cli_fail("import", &err);
  fprintf(stderr,
          "allocsim import: %" PRIu64 " events from %" PRIu64
          " lines, %s -> %s (%s)\n"
          "  %" PRIu64 " mallocs, %" PRIu64 " reallocs, %" PRIu64
          " frees, %" PRIu64 " failed calls, %" PRIu64 " live at end, %" PRIu64
          " ids%s\n",
          st.events, st.lines, in, out,
          fmt == TRACE_FORMAT_BINARY ? "binary" : "text", st.mallocs,
          st.reallocs, st.frees, st.failed, st.live_at_end, st.max_live_ids,
          st.saw_end ? "" : "; no '= End' line (log cut short?)");
  if (opts.lenient)
    fprintf(stderr,
            "  lenient: skipped %" PRIu64 " unmatched frees, %" PRIu64
            " reallocs of unknown addresses imported as mallocs, %" PRIu64
            " live addresses allocated again\n",
            st.unmatched_frees, st.unmatched_reallocs, st.reused_live);
  return CLI_EXIT_OK;
}

static int import_main(int argc, char **argv) {
  if (argc < 2)
    return cli_usage_error("import", "expected a FORMAT: mtrace");
  if (strcmp(argv[1], "mtrace") == 0)
    return import_mtrace(argc, argv);
  return cli_usage_error("import", "expected a FORMAT: mtrace, got '%s'",
                         argv[1]);
}

const cli_command_t cli_cmd_import = {
    .name = "import",
    .summary = "translate another tool's log (glibc mtrace) into a trace",
    .usage =
        "usage: allocsim import mtrace FILE -o OUT [--lenient]\n\n"
        "Reads FILE, a glibc mtrace(3) log (what MALLOC_TRACE names; -\n"
        "for stdin), and writes the trace OUT (- for stdout): binary if\n"
        "OUT ends in .astrace, text otherwise.  The log has no times and\n"
        "no threads, so events get a synthetic clock (100 ns apart) on\n"
        "thread 0; calloc and the memalign family appear in the log as\n"
        "'+' and import as malloc.  A free or realloc of an address\n"
        "allocated before mtrace() started is an error naming FILE:LINE.\n"
        "Since glibc 2.34, mtrace() needs\n"
        "LD_PRELOAD=libc_malloc_debug.so.0 to write anything.\n\n"
        "options:\n"
        "  -o, --output OUT  the trace to write\n"
        "  --lenient         skip (and count) frees of unknown addresses,\n"
        "                    import reallocs of them as mallocs\n",
    .run = import_main,
};
