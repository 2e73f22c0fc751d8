/* cli/cmd_import.c -- `allocsim import FORMAT FILE -o OUT`: logs other
 * tools wrote, translated into allocsim traces.
 *
 * FORMAT names the tool: mtrace (glibc's mtrace(3) log), heaptrack (its raw
 * or interpreted data file, zstd, gzip or plain) and malloclab (a CS:APP
 * malloc lab trace), each with its own importer in traces/.  The output
 * format comes from OUT's name as for convert (.astrace is binary, anything
 * else text).  A summary of what was imported, skipped and left live goes
 * to stderr, with a warning for what the tool does not record.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../traces/import_heaptrack.h"
#include "../traces/import_malloclab.h"
#include "../traces/import_mtrace.h"

typedef struct import_args_s import_args_t;
struct import_args_s {
  const char      *in, *out;
  const char      *marks; /* --marks FILE, or NULL */
  bool             lenient;
  import_inserts_t inserts;
};

/* Parses FILE, -o OUT and the shared options; lenient_ok: the format takes
 * --lenient.  Returns CLI_EXIT_OK or an exit code after a message. */
static int parse_args(const char *fmt, bool lenient_ok, int argc, char **argv,
                      import_args_t *a) {
  memset(a, 0, sizeof *a);
  for (int i = 2; i < argc; i++) {
    const char *arg = argv[i], *v = NULL;
    int         took;
    as_err_t    err = {0};
    if ((took = cli_opt_value("import", argc, argv, &i, "-o", &a->out)) ||
        (took = cli_opt_value("import", argc, argv, &i, "--output", &a->out))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
    } else if ((took = cli_opt_value("import", argc, argv, &i,
                                     "--assume-trim-at", &v))) {
      uint64_t line;
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (!import_parse_at(v, &line))
        return cli_usage_error("import",
                               "--assume-trim-at: expected an input "
                               "line number or 'end', got '%s'",
                               v);
      if (import_inserts_add_trim(&a->inserts, line, &err) != AS_OK)
        return cli_fail("import", &err);
    } else if ((took =
                    cli_opt_value("import", argc, argv, &i, "--marks", &v))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (import_inserts_read(&a->inserts, v, &err) != AS_OK)
        return cli_fail("import", &err);
      a->marks = v;
    } else if (lenient_ok &&
               (took = cli_opt_flag("import", argv, i, "--lenient"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      a->lenient = true;
    } else if (arg[0] == '-' && strcmp(arg, "-") != 0) {
      return cli_usage_error("import", "unknown option '%s' for %s", arg, fmt);
    } else if (a->in == NULL) {
      a->in = arg;
    } else {
      return cli_usage_error("import", "expected one FILE, got '%s' too", arg);
    }
  }
  if (a->in == NULL)
    return cli_usage_error("import", "expected a %s FILE", fmt);
  if (a->out == NULL)
    return cli_usage_error("import", "expected -o OUT");
  if (cli_same_file(a->marks, a->out))
    return cli_usage_error("import", "--marks and OUT are the same file '%s'",
                           a->marks);
  if (cli_same_file(a->in, a->out))
    return cli_usage_error("import", "FILE and OUT are the same file '%s'",
                           a->in);
  import_inserts_sort(&a->inserts);
  return CLI_EXIT_OK;
}

static const char *fmt_name(const char *out) {
  return trace_format_from_path(out) == TRACE_FORMAT_BINARY ? "binary" : "text";
}

static void report_inserted(uint64_t inserted) {
  if (inserted > 0)
    fprintf(stderr,
            "  %" PRIu64 " events inserted (--assume-trim-at, "
            "--marks)\n",
            inserted);
}

static int import_mtrace(int argc, char **argv) {
  import_args_t a;
  int           rc = parse_args("mtrace log", true, argc, argv, &a);
  if (rc != CLI_EXIT_OK) {
    import_inserts_free(&a.inserts);
    return rc;
  }
  import_mtrace_opts_t opts = {
      .lenient = a.lenient, .tick_ns = 0, .inserts = &a.inserts};
  import_mtrace_stats_t st;
  as_err_t              err = {0};
  as_status_t s = import_mtrace_file(a.in, a.out, trace_format_from_path(a.out),
                                     &opts, &st, &err);
  import_inserts_free(&a.inserts);
  if (s != AS_OK)
    return cli_fail("import", &err);
  fprintf(stderr,
          "allocsim import: %" PRIu64 " events from %" PRIu64
          " lines, %s -> %s (%s)\n"
          "  %" PRIu64 " mallocs, %" PRIu64 " reallocs, %" PRIu64
          " frees, %" PRIu64 " failed calls, %" PRIu64 " live at end, %" PRIu64
          " ids%s\n",
          st.events, st.lines, a.in, a.out, fmt_name(a.out), st.mallocs,
          st.reallocs, st.frees, st.failed, st.live_at_end, st.max_live_ids,
          st.saw_end ? "" : "; no '= End' line (log cut short?)");
  if (a.lenient)
    fprintf(stderr,
            "  lenient: skipped %" PRIu64 " unmatched frees, %" PRIu64
            " reallocs of unknown addresses imported as mallocs, %" PRIu64
            " live addresses allocated again\n",
            st.unmatched_frees, st.unmatched_reallocs, st.reused_live);
  report_inserted(st.inserted);
  fprintf(stderr,
          "  warning: mtrace records neither malloc_trim nor threads: a trim "
          "the program made is missing (restore it with --assume-trim-at "
          "LINE or --marks FILE), and every call is put on thread 0\n");
  if (st.other_arena_blocks > 0)
    fprintf(stderr,
            "  warning: %" PRIu64 " blocks under 128 KiB lie more than 1 GiB "
            "from the main heap (the first at line %" PRIu64 "): other "
            "threads allocated them from their own arenas, which a replay on "
            "thread 0 does not reproduce\n",
            st.other_arena_blocks, st.first_other_arena_line);
  return CLI_EXIT_OK;
}

static int import_heaptrack(int argc, char **argv) {
  import_args_t a;
  int           rc = parse_args("heaptrack data", false, argc, argv, &a);
  if (rc != CLI_EXIT_OK) {
    import_inserts_free(&a.inserts);
    return rc;
  }
  import_heaptrack_opts_t  opts = {.inserts = &a.inserts};
  import_heaptrack_stats_t st;
  as_err_t                 err = {0};
  as_status_t              s = import_heaptrack_file(
                   a.in, a.out, trace_format_from_path(a.out), &opts, &st, &err);
  import_inserts_free(&a.inserts);
  if (s != AS_OK)
    return cli_fail("import", &err);
  fprintf(stderr,
          "allocsim import: %" PRIu64 " events from %" PRIu64 " lines of "
          "%s heaptrack %u.%u.%u file (format %u), %s -> %s (%s)\n"
          "  %" PRIu64 " mallocs, %" PRIu64 " frees, %" PRIu64 " RSS samples "
          "(peak %.2f MiB), %" PRIu64 " live at end, %" PRIu64 " ids\n",
          st.events, st.lines, st.raw ? "a raw" : "an interpreted",
          st.heaptrack_version >> 16 & 0xff, st.heaptrack_version >> 8 & 0xff,
          st.heaptrack_version & 0xff, st.file_version, a.in, a.out,
          fmt_name(a.out), st.mallocs, st.frees, st.rss_samples,
          (double)st.peak_rss_bytes / 1048576.0, st.live_at_end,
          st.max_live_ids);
  if (st.unmatched_frees || st.missed_frees)
    fprintf(stderr,
            "  %" PRIu64 " frees of blocks allocated before heaptrack "
            "started (skipped), %" PRIu64 " addresses allocated again while "
            "live (freed first)\n",
            st.unmatched_frees, st.missed_frees);
  if (st.ambiguous_frees)
    fprintf(stderr,
            "  %" PRIu64 " frees named a size and stack shared by "
            "several live blocks; the newest was freed (a raw file, "
            "heaptrack --raw, has the addresses)\n",
            st.ambiguous_frees);
  report_inserted(st.inserted);
  if (!st.raw && !st.complete)
    fprintf(stderr,
            "  warning: no closing '# strings' line: heaptrack_interpret "
            "did not finish (the program was killed?)\n");
  fprintf(stderr,
          "  warning: heaptrack records neither mmap nor malloc_trim nor "
          "threads; restore a trim with --assume-trim-at LINE or --marks "
          "FILE\n");
  if (st.rss_drops > 0)
    fprintf(stderr,
            "  warning: RSS fell %" PRIu64 " times by 64 KiB or more with no "
            "free in between (the largest, %.2f MiB, at %.3f s, between the "
            "samples on lines %" PRIu64 " and %" PRIu64 "): memory returned "
            "by a call heaptrack does not see (malloc_trim, munmap); if it "
            "was a trim, --assume-trim-at %" PRIu64 " restores it\n",
            st.rss_drops, (double)st.largest_drop_bytes / 1048576.0,
            (double)st.largest_drop_t_ns / 1e9, st.largest_drop_from_line,
            st.largest_drop_line, st.largest_drop_from_line);
  if (st.python)
    fprintf(stderr,
            "  warning: a CPython process: %s; its small objects lived in "
            "pymalloc arenas (mmap) that the trace does not hold unless it "
            "ran with PYTHONMALLOC=malloc\n",
            st.pymalloc_frames ? "the stacks show pymalloc at work"
                               : "heaptrack cannot tell which allocator ran");
  return CLI_EXIT_OK;
}

static int import_malloclab(int argc, char **argv) {
  import_args_t a;
  int           rc = parse_args("malloc lab trace", false, argc, argv, &a);
  if (rc != CLI_EXIT_OK) {
    import_inserts_free(&a.inserts);
    return rc;
  }
  if (a.inserts.n > 0) {
    import_inserts_free(&a.inserts);
    return cli_usage_error("import",
                           "a malloc lab trace is a complete "
                           "program: --assume-trim-at and --marks are for "
                           "logs that miss calls");
  }
  import_malloclab_opts_t  opts = {.tick_ns = 0};
  import_malloclab_stats_t st;
  as_err_t                 err = {0};
  if (import_malloclab_file(a.in, a.out, trace_format_from_path(a.out), &opts,
                            &st, &err) != AS_OK)
    return cli_fail("import", &err);
  fprintf(stderr,
          "allocsim import: %" PRIu64 " events from %" PRIu64 " requests, "
          "%s -> %s (%s)\n"
          "  %" PRIu64 " mallocs, %" PRIu64 " reallocs, %" PRIu64 " frees, "
          "%" PRIu64 " frees of NULL, %" PRIu64 " blocks leaked by 'a' over a "
          "live block, %" PRIu64 " live at end, %" PRIu64 " ids\n",
          st.events, st.requests, a.in, a.out, fmt_name(a.out), st.mallocs,
          st.reallocs, st.frees, st.null_frees, st.leaked, st.live_at_end,
          st.max_live_ids);
  return CLI_EXIT_OK;
}

static int import_main(int argc, char **argv) {
  static const char known[] = "mtrace, heaptrack or malloclab";
  if (argc < 2)
    return cli_usage_error("import", "expected a FORMAT: %s", known);
  if (strcmp(argv[1], "mtrace") == 0)
    return import_mtrace(argc, argv);
  if (strcmp(argv[1], "heaptrack") == 0)
    return import_heaptrack(argc, argv);
  if (strcmp(argv[1], "malloclab") == 0)
    return import_malloclab(argc, argv);
  return cli_usage_error("import", "expected a FORMAT: %s, got '%s'", known,
                         argv[1]);
}

const cli_command_t cli_cmd_import = {
    .name = "import",
    .summary = "translate another tool's log (mtrace, heaptrack, malloc lab) "
               "into a trace",
    .usage =
        "usage: allocsim import mtrace FILE -o OUT [--lenient]\n"
        "                       [--assume-trim-at LINE|end] [--marks FILE]\n"
        "       allocsim import heaptrack FILE -o OUT [--assume-trim-at "
        "LINE|end]\n"
        "                       [--marks FILE]\n"
        "       allocsim import malloclab FILE -o OUT\n\n"
        "Reads FILE (- for stdin; zstd or gzip compressed or plain) and\n"
        "writes the trace OUT (- for stdout): binary if OUT ends in\n"
        ".astrace, text otherwise.\n\n"
        "mtrace     a glibc mtrace(3) log (what MALLOC_TRACE names; since\n"
        "           glibc 2.34 mtrace() needs\n"
        "           LD_PRELOAD=libc_malloc_debug.so.0).  No times and no\n"
        "           threads: events get the cost model's clock on thread 0;\n"
        "           calloc and the memalign family import as malloc.  A free\n"
        "           or realloc of an address allocated before mtrace()\n"
        "           started is an error naming FILE:LINE.\n"
        "heaptrack  a heaptrack data file, interpreted "
        "(heaptrack.NAME.PID.zst)\n"
        "           or raw (heaptrack --raw: .raw.zst), file format 2 or 3\n"
        "           (heaptrack 1.1 to 1.5).  Its timestamps are the clock and\n"
        "           its RSS samples become rss events, so `allocsim record`\n"
        "           and `compare` measure a model against heaptrack's RSS.\n"
        "malloclab  a CS:APP malloc lab trace (.rep: four header numbers,\n"
        "           then 'a ID SIZE', 'r ID SIZE', 'f ID'), as mdriver "
        "replays\n"
        "           it; the cost model's clock.\n\n"
        "Neither mtrace nor heaptrack records malloc_trim (nor threads, nor,\n"
        "for heaptrack, mmap); the import warns about it and about the signs\n"
        "in the log, and these restore what the program did:\n\n"
        "options:\n"
        "  -o, --output OUT        the trace to write\n"
        "  --assume-trim-at AT     a malloc_trim(0) after input line AT (of\n"
        "                          the decompressed file), or at the end;\n"
        "                          repeatable\n"
        "  --marks FILE            events to insert, one a line:\n"
        "                          'AT mark LABEL', 'AT trim [PAD]',\n"
        "                          'AT idle DURATION' ('#' comments)\n"
        "  --lenient               (mtrace) skip and count frees of unknown\n"
        "                          addresses, import reallocs of them as\n"
        "                          mallocs\n",
    .run = import_main,
};
