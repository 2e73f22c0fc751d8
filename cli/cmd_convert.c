/* cli/cmd_convert.c -- `allocsim convert IN OUT`: a trace from one
 * format to the other (or the same one, which canonicalises text); with
 * --workload LINE, a synthetic workload's events written out as a trace
 * file (the benchmark's fixed traces, scripts/bench.sh).
 *
 * The input format is detected from its first bytes; the output format comes
 * from --format or else from OUT's name (.astrace is binary).  Events stream
 * through one at a time, so traces of any length convert in constant memory.
 * OUT is written whole or not at all: on failure it keeps what it held
 * before (trace_writer_discard), so no half trace is left that looks
 * complete, and a device such as /dev/null is written in place, never
 * removed.
 */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../traces/trace_io.h"
#include "../traces/workload.h"

static int convert_main(int argc, char **argv) {
  const char *in = NULL, *out = NULL, *format = NULL, *workload = NULL;
  bool        lenient = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int         took = cli_opt_flag("convert", argv, i, "--lenient");
    if (took > 0) {
      lenient = true;
      continue;
    }
    if (took == 0)
      took = cli_opt_value("convert", argc, argv, &i, "--format", &format);
    if (took == 0)
      took = cli_opt_value("convert", argc, argv, &i, "--workload", &workload);
    if (took < 0)
      return CLI_EXIT_USAGE;
    if (took)
      continue;
    if (a[0] == '-' && strcmp(a, "-") != 0) {
      return cli_usage_error("convert", "unknown option '%s'", a);
    } else if (in == NULL && workload == NULL) {
      in = a;
    } else if (out == NULL) {
      out = a;
    } else {
      return cli_usage_error("convert", "expected IN and OUT, got '%s' too", a);
    }
  }
  if (workload != NULL && in != NULL && out == NULL)
    out = in, in = NULL; /* OUT came before --workload */
  if (workload != NULL && in != NULL)
    return cli_usage_error("convert", "expected IN or --workload, not both");
  if (workload != NULL && out == NULL)
    return cli_usage_error("convert", "expected OUT, the trace to write");
  if ((in == NULL && workload == NULL) || out == NULL)
    return cli_usage_error("convert", "expected IN and OUT file names");
  trace_format_t fmt = trace_format_from_path(out);
  if (format != NULL) {
    if (strcmp(format, "text") == 0)
      fmt = TRACE_FORMAT_TEXT;
    else if (strcmp(format, "binary") == 0)
      fmt = TRACE_FORMAT_BINARY;
    else if (strcmp(format, "binary-v2") == 0)
      fmt = TRACE_FORMAT_BINARY_V2;
    else
      return cli_usage_error(
          "convert", "expected --format text, binary or binary-v2, got '%s'",
          format);
  }
  if (in != NULL && cli_same_file(in, out))
    return cli_usage_error("convert", "IN and OUT are the same file '%s'", in);

  as_err_t        err = {0};
  trace_source_t *src;
  if ((workload != NULL ? workload_open_line(workload, &src, &err)
                        : trace_open(in, &src, &err)) != AS_OK)
    return cli_fail("convert", &err);
  trace_set_lenient(src, lenient);
  trace_writer_t *w;
  if (trace_writer_open(out, fmt, &src->meta, &w, &err) != AS_OK) {
    trace_source_close(src);
    return cli_fail("convert", &err);
  }
  char src_name[sizeof src->name];
  snprintf(src_name, sizeof src_name, "%s", src->name);
  trace_event_t ev;
  as_status_t   rc;
  uint64_t      count = 0;
  while ((rc = trace_source_next(src, &ev, &err)) == AS_OK) {
    if ((rc = trace_writer_write(w, &ev, &err)) != AS_OK)
      break;
    count++;
  }
  char cut[256] = "";
  if (trace_truncated(src) != NULL)
    snprintf(cut, sizeof cut, "%s", trace_truncated(src));
  trace_source_close(src);
  if (rc != AS_DONE) {
    trace_writer_discard(w);
    return cli_fail("convert", &err);
  }
  if (trace_writer_close(w, &err) != AS_OK)
    return cli_fail("convert", &err);
  if (cut[0] != '\0')
    fprintf(stderr,
            "allocsim convert: warning: %s: %s; converted the events before "
            "it (--lenient)\n",
            in, cut);
  fprintf(stderr, "allocsim convert: %" PRIu64 " events, %s -> %s (%s)\n",
          count, in != NULL ? in : src_name, out,
          fmt == TRACE_FORMAT_TEXT        ? "text"
          : fmt == TRACE_FORMAT_BINARY_V2 ? "binary version 2"
                                          : "binary");
  return CLI_EXIT_OK;
}

const cli_command_t cli_cmd_convert = {
    .name = "convert",
    .summary = "convert a trace between the text and binary formats",
    .usage = "usage: allocsim convert IN OUT [--format text|binary|binary-v2] "
             "[--lenient]\n"
             "       allocsim convert --workload LINE OUT [--format ...]\n\n"
             "Reads IN (text or binary, detected from its first bytes; -\n"
             "for stdin) and writes OUT (- for stdout) in the format\n"
             "--format names, or else the one OUT's name implies: .astrace\n"
             "is binary, anything else text.  Text is written in canonical\n"
             "form (integer ns and bytes, single spaces), so converting\n"
             "text to binary and back reproduces canonical text exactly.\n"
             "A count of events goes to stderr.\n\n"
             "options:\n"
             "  --format F        text, binary (version 3, blocks) or\n"
             "                    binary-v2 (record after record, for\n"
             "                    allocsim releases before version 3);\n"
             "                    default: from OUT's name\n"
             "  --lenient         read a binary trace cut short (no end\n"
             "                    record or trailer) to its last whole\n"
             "                    record, with a warning, instead of failing\n"
             "  --workload LINE   write a workload's events instead of IN's\n"
             "                    ('churn --live 50000'; see allocsim run)\n",
    .run = convert_main,
};
