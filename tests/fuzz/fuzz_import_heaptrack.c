/* tests/fuzz/fuzz_import_heaptrack.c -- libFuzzer target for the heaptrack
 * importer (traces/import_heaptrack.c) behind the decompressing reader
 * (traces/compressed.c), so that zstd and gzip input is fuzzed too.  Built
 * as tests/fuzz/README.md says.  Seed the corpus with
 * the files of tests/data/heaptrack/ and their decompressed text.
 *
 * Beyond "no crash, no sanitizer report" it checks: the only failure for
 * bad bytes is AS_EFORMAT (a decompression error included; the writer
 * must accept every event the importer makes), and what imports reads back
 * as a valid trace with as many events as the importer counted and ids
 * below the peak live count.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/compressed.h"
#include "traces/import_heaptrack.h"
#include "traces/trace_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FILE *raw =
      size > 0 ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
  char  *out = NULL;
  size_t out_len = 0;
  FILE  *mem = open_memstream(&out, &out_len);
  if (raw == NULL || mem == NULL)
    abort();
  cfile_t *in;
  as_err_t err = {0};
  if (cfile_open_stream(raw, "fuzz", &in, &err) != AS_OK)
    abort();
  trace_meta_t meta;
  memset(&meta, 0, sizeof meta);
  trace_writer_t *w;
  if (import_writer_open_stream(mem, "out", TRACE_FORMAT_TEXT, &meta, &w,
                                &err) != AS_OK)
    abort();
  import_heaptrack_stats_t st;
  as_status_t rc = import_heaptrack_stream(cfile_stream(in), "fuzz", w, &meta,
                                           NULL, &st, &err);
  if (rc != AS_OK && cfile_status(in, NULL) != AS_OK)
    rc = cfile_status(in, &err);
  if (rc != AS_OK && rc != AS_EFORMAT)
    abort();
  if (rc != AS_OK && (err.code != rc || err.msg[0] == '\0'))
    abort();
  if (trace_writer_close(w, &err) != AS_OK)
    abort();
  cfile_close(in);
  if (rc == AS_OK) {
    FILE           *back = fmemopen(out, out_len, "r");
    trace_source_t *src;
    if (back == NULL || trace_open_stream(back, "back", &src, &err) != AS_OK)
      abort();
    trace_event_t ev;
    uint64_t      n = 0;
    while ((rc = trace_source_next(src, &ev, &err)) == AS_OK) {
      if (trace_op_is_alloc(ev.op) && ev.id >= st.max_live_ids)
        abort();
      n++;
    }
    if (rc != AS_DONE || n != st.events)
      abort();
    trace_source_close(src);
  }
  free(out);
  return 0;
}
