/* tests/fuzz/fuzz_import_mtrace.c -- libFuzzer target for the glibc mtrace
 * importer (traces/import_mtrace.c).  Built like the targets in
 * tests/fuzz/README.md, with the importer's sources added:
 *
 *   clang -std=c17 -D_GNU_SOURCE -g -O1 -I. \
 *     -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
 *     tests/fuzz/fuzz_import_mtrace.c traces/import_mtrace.c \
 *     traces/addr_ids.c traces/event.c traces/text.c traces/binary.c \
 *     traces/trace_io.c sim/status.c -o build-fuzz-fuzz_import_mtrace
 *   ./build-fuzz-fuzz_import_mtrace -max_total_time=300 /tmp/corpus-mtrace
 *
 * Seed the corpus with tests/data/mtrace_*.log.  Beyond "no crash, no
 * sanitizer report" it checks: the only failure for bad bytes is AS_EFORMAT
 * (the writer must accept every event the importer makes); what imports
 * reads back as a valid trace with as many events as the importer counted,
 * ids below the peak live count and times a tick apart; and whatever
 * imports strictly imports identically with --lenient.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/import_mtrace.h"
#include "traces/trace_io.h"

/* A fixed synthetic clock step (the default follows the cost model), so
 * that check() knows every event's time. */
#define FUZZ_TICK_NS 100

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *reader(const void *data, size_t size) {
  /* fmemopen rejects a zero-length buffer. */
  return size > 0 ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
}

/* Imports data as text into *out (malloc'd). */
static as_status_t import(const void *data, size_t size, bool lenient,
                          import_mtrace_stats_t *st, char **out,
                          size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  FILE *in = reader(data, size);
  FILE *mem = open_memstream(out, out_len);
  if (in == NULL || mem == NULL)
    abort();
  trace_meta_t meta;
  memset(&meta, 0, sizeof meta);
  trace_writer_t *w;
  as_err_t        err = {0};
  if (trace_writer_open_stream(mem, "out", TRACE_FORMAT_TEXT, &meta, &w,
                               &err) != AS_OK)
    abort();
  import_mtrace_opts_t o = {.lenient = lenient, .tick_ns = FUZZ_TICK_NS};
  as_status_t rc = import_mtrace_stream(in, "fuzz.log", w, &o, st, &err);
  if (rc != AS_OK && rc != AS_EFORMAT)
    abort(); /* a writer refusal (AS_EINVAL) would be an importer bug */
  if (rc != AS_OK && (err.code != rc || err.msg[0] == '\0'))
    abort();
  if (trace_writer_close(w, &err) != AS_OK)
    abort();
  fclose(in);
  return rc;
}

/* The imported text must read back: events count, thread 0, times a tick
 * apart, ids below max_live_ids. */
static void check(const char *text, size_t len,
                  const import_mtrace_stats_t *st) {
  FILE           *f = reader(text, len);
  trace_source_t *src;
  as_err_t        err = {0};
  if (f == NULL || trace_open_stream(f, "back", &src, &err) != AS_OK)
    abort();
  trace_event_t ev;
  uint64_t      n = 0;
  as_status_t   rc;
  while ((rc = trace_source_next(src, &ev, &err)) == AS_OK) {
    if (ev.thread != 0 || ev.t_ns != n * FUZZ_TICK_NS ||
        ev.id >= st->max_live_ids)
      abort();
    n++;
  }
  if (rc != AS_DONE || n != st->events)
    abort();
  trace_source_close(src);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  import_mtrace_stats_t st, lst;
  char                 *strict, *lenient;
  size_t                strict_len, lenient_len;
  as_status_t rc = import(data, size, false, &st, &strict, &strict_len);
  as_status_t lrc = import(data, size, true, &lst, &lenient, &lenient_len);
  if (rc == AS_OK) {
    check(strict, strict_len, &st);
    if (lrc != AS_OK || lenient_len != strict_len ||
        memcmp(strict, lenient, strict_len) != 0)
      abort();
  }
  if (lrc == AS_OK)
    check(lenient, lenient_len, &lst);
  free(strict);
  free(lenient);
  return 0;
}
