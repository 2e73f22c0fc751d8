/* tests/fuzz/fuzz_trace_text.c -- libFuzzer target for the text trace
 * reader (build line in tests/fuzz/README.md).
 *
 * Beyond "no crash, no sanitizer report", it checks the writer's promise:
 * whatever the reader accepts, the canonical writer can write, and reading
 * that canonical text back and writing it again gives the same bytes.  The
 * only failures the reader may report for bad bytes are AS_EFORMAT (and
 * AS_ENOMEM / AS_EIO, which fmemopen input cannot cause).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/trace_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static FILE *reader(const void *data, size_t size) {
  /* fmemopen rejects a zero-length buffer. */
  return size > 0 ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
}

/* Reads text fully and writes it canonically; returns the status that ended
 * reading and the canonical bytes in *out (malloc'd). */
static as_status_t canonicalise(const void *data, size_t size, char **out,
                                size_t *out_len) {
  *out = NULL;
  *out_len = 0;
  FILE *f = reader(data, size);
  if (f == NULL)
    return AS_EIO;
  trace_source_t *src;
  as_err_t        err = {0};
  as_status_t rc = trace_text_open_stream(f, "fuzz.trace", NULL, 0, &src, &err);
  if (rc != AS_OK)
    return rc;
  FILE           *mem = open_memstream(out, out_len);
  trace_writer_t *w;
  if (mem == NULL || trace_writer_open_stream(mem, "out", TRACE_FORMAT_TEXT,
                                              &src->meta, &w, &err) != AS_OK)
    abort(); /* provenance the reader accepted must be writable */
  trace_event_t ev;
  while ((rc = trace_source_next(src, &ev, &err)) == AS_OK) {
    if (trace_writer_write(w, &ev, &err) != AS_OK)
      abort(); /* an event the reader accepted must be writable */
  }
  if (trace_writer_close(w, &err) != AS_OK)
    abort();
  trace_source_close(src);
  return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char       *first, *second;
  size_t      first_len, second_len;
  as_status_t rc = canonicalise(data, size, &first, &first_len);
  if (rc != AS_DONE && rc != AS_EFORMAT && rc != AS_EIO && rc != AS_ENOMEM)
    abort();
  if (rc == AS_DONE) {
    /* Canonical text must read back cleanly and reproduce itself. */
    if (canonicalise(first, first_len, &second, &second_len) != AS_DONE ||
        second_len != first_len || memcmp(first, second, first_len) != 0)
      abort();
    free(second);
  }
  free(first);
  return 0;
}
