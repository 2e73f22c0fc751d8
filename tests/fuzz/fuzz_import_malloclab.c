/* tests/fuzz/fuzz_import_malloclab.c -- libFuzzer target for the CS:APP
 * malloc lab importer (traces/import_malloclab.c).  Built as
 * tests/fuzz/README.md says.  Beyond "no crash, no sanitizer report": the
 * only failure for bad bytes is AS_EFORMAT, and what imports reads back as
 * a valid trace with as many events as the importer counted and ids below
 * the peak live count.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/import_malloclab.h"
#include "traces/import_util.h"
#include "traces/trace_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FILE *in =
      size > 0 ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
  char  *out = NULL;
  size_t out_len = 0;
  FILE  *mem = open_memstream(&out, &out_len);
  if (in == NULL || mem == NULL)
    abort();
  trace_meta_t meta;
  memset(&meta, 0, sizeof meta);
  trace_writer_t *w;
  as_err_t        err = {0};
  if (import_writer_open_stream(mem, "out", TRACE_FORMAT_TEXT, &meta, &w,
                                &err) != AS_OK)
    abort();
  import_malloclab_stats_t st;
  as_status_t              rc =
      import_malloclab_stream(in, "fuzz", w, &meta, NULL, &st, &err);
  if (rc != AS_OK && rc != AS_EFORMAT)
    abort();
  if (rc != AS_OK && (err.code != rc || err.msg[0] == '\0'))
    abort();
  if (trace_writer_close(w, &err) != AS_OK)
    abort();
  fclose(in);
  if (rc == AS_OK) {
    FILE           *back = fmemopen(out, out_len, "r");
    trace_source_t *src;
    if (back == NULL || trace_open_stream(back, "back", &src, &err) != AS_OK)
      abort();
    trace_event_t ev;
    uint64_t      n = 0;
    while ((rc = trace_source_next(src, &ev, &err)) == AS_OK) {
      if (ev.id >= st.max_live_ids)
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
