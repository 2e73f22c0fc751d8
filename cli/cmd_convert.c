/* cli/cmd_convert.c -- `allocsim convert IN OUT`: a trace from one
 * format to the other (or the same one, which canonicalises text); with
 * --workload LINE, a synthetic workload's events written out as a trace
 * file (the benchmark's fixed traces, scripts/bench.sh).
 *
 * The input format is detected from its first bytes; the output format comes
 * from --format or else from OUT's name (.astrace is binary).  Events stream
 * through one at a time, so traces of any length convert in constant memory.
 * On failure a partly written OUT is removed, so no half trace is left that
 * looks complete (a binary trace cut at a record boundary reads cleanly).
 */
#include "cli.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "../traces/trace_io.h"
#include "../traces/workload.h"

static int convert_main(int argc, char **argv) {
  const char    *in = NULL, *out = NULL, *format = NULL, *workload = NULL;
  for (int i = 1; i < argc; i++) {
    const char *a    = argv[i];
    int         took = cli_opt_value("convert", argc, argv, &i, "--format",
                                     &format);
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
      return cli_usage_error("convert", "expected IN and OUT, got '%s' too",
                             a);
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
    else
      return cli_usage_error("convert",
                             "expected --format text or binary, got '%s'",
                             format);
  }
  if (in != NULL && strcmp(in, out) == 0 && strcmp(in, "-") != 0)
    return cli_usage_error("convert", "IN and OUT are the same file '%s'",
                           in);

  as_err_t        err = {0};
  trace_source_t *src;
  if ((workload != NULL ? workload_open_line(workload, &src, &err)
                        : trace_open(in, &src, &err)) != AS_OK)
    return cli_fail("convert", &err);
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
  trace_source_close(src);
  as_err_t close_err = {0};
  as_status_t crc = trace_writer_close(w, &close_err);
  if (rc == AS_DONE && crc != AS_OK) {
    rc = crc;
    err = close_err;
  }
  if (rc != AS_DONE) {
    if (strcmp(out, "-") != 0)
      remove(out);
    return cli_fail("convert", &err);
  }
  fprintf(stderr, "allocsim convert: %" PRIu64 " events, %s -> %s (%s)\n",
          count, in != NULL ? in : src_name, out, fmt == TRACE_FORMAT_BINARY ? "binary" : "text");
  return CLI_EXIT_OK;
}

const cli_command_t cli_cmd_convert = {
    .name    = "convert",
    .summary = "convert a trace between the text and binary formats",
    .usage   = "usage: allocsim convert IN OUT [--format text|binary]\n"
               "       allocsim convert --workload LINE OUT [--format ...]\n\n"
               "Reads IN (text or binary, detected from its first bytes; -\n"
               "for stdin) and writes OUT (- for stdout) in the format\n"
               "--format names, or else the one OUT's name implies: .astrace\n"
               "is binary, anything else text.  Text is written in canonical\n"
               "form (integer ns and bytes, single spaces), so converting\n"
               "text to binary and back reproduces canonical text exactly.\n"
               "A count of events goes to stderr.\n\n"
               "options:\n"
               "  --format F        text or binary (default: from OUT's name)\n"
               "  --workload LINE   write a workload's events instead of IN's\n"
               "                    ('churn --live 50000'; see allocsim run)\n"
               "\nexit codes: 0 converted, 1 bad input, 2 usage error\n",
    .run     = convert_main,
};
