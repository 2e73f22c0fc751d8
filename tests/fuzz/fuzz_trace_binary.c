/* tests/fuzz/fuzz_trace_binary.c -- libFuzzer target for the binary trace
 * reader (build line in tests/fuzz/README.md).
 *
 * Besides "no crash, no sanitizer report", every event the reader returns
 * must be accepted by the binary writer, and the file written from them must
 * read back as the same events: the fast and the checked decoders, and the
 * writer, must all agree.  Inputs of version 1 or 2 are written as version
 * 3 and read back by blocks, so both layouts meet.  Bad bytes may only give
 * AS_EFORMAT.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "traces/trace_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX_EVENTS 4096

typedef struct saved_s {
  trace_event_t ev;
  char          label[TRACE_PATH_MAX + 1]; /* a module path is the longest */
  trace_frame_t frames[TRACE_FRAMES_MAX];
} saved_t;

static saved_t saved[FUZZ_MAX_EVENTS];

static FILE *reader(const void *data, size_t size) {
  return size > 0 ? fmemopen((void *)data, size, "r") : fopen("/dev/null", "r");
}

static bool same_event(const trace_event_t *a, const trace_event_t *b) {
  if (a->t_ns != b->t_ns || a->id != b->id || a->size != b->size ||
      a->align != b->align || a->thread != b->thread || a->op != b->op ||
      a->domain != b->domain || (a->label == NULL) != (b->label == NULL) ||
      a->site != b->site || a->nframes != b->nframes ||
      (a->nframes != 0 &&
       memcmp(a->frames, b->frames, a->nframes * sizeof *a->frames) != 0))
    return false;
  return a->label == NULL || strcmp(a->label, b->label) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  FILE *f = reader(data, size);
  if (f == NULL)
    return 0;
  trace_source_t *src;
  as_err_t        err = {0};
  as_status_t     rc =
      trace_binary_open_stream(f, "fuzz.astrace", NULL, 0, &src, &err);
  if (rc != AS_OK) {
    if (rc != AS_EFORMAT)
      abort();
    return 0;
  }
  char           *out = NULL;
  size_t          out_len = 0;
  FILE           *mem = open_memstream(&out, &out_len);
  trace_writer_t *w;
  if (mem == NULL || trace_writer_open_stream(mem, "out", TRACE_FORMAT_BINARY,
                                              &src->meta, &w, &err) != AS_OK)
    abort();
  size_t        n = 0;
  trace_event_t ev;
  while (n < FUZZ_MAX_EVENTS &&
         (rc = trace_source_next(src, &ev, &err)) == AS_OK) {
    if (trace_writer_write(w, &ev, &err) != AS_OK)
      abort(); /* an event the reader returned must be writable */
    saved[n].ev = ev;
    if (ev.label != NULL) {
      snprintf(saved[n].label, sizeof saved[n].label, "%s", ev.label);
      saved[n].ev.label = saved[n].label;
    }
    if (ev.nframes != 0) {
      memcpy(saved[n].frames, ev.frames, ev.nframes * sizeof *ev.frames);
      saved[n].ev.frames = saved[n].frames;
    }
    n++;
  }
  if (n < FUZZ_MAX_EVENTS && rc != AS_DONE && rc != AS_EFORMAT)
    abort();
  trace_source_close(src);
  if (trace_writer_close(w, &err) != AS_OK)
    abort();

  /* What was written (version 3) reads back, a block at a time, as the
   * same events, then ends. */
  f = reader(out, out_len);
  if (trace_binary_open_stream(f, "again", NULL, 0, &src, &err) != AS_OK)
    abort();
  trace_event_t *evs;
  size_t         got, i = 0;
  while ((rc = trace_source_batch(src, &ev, &evs, &got, &err)) == AS_OK)
    for (size_t k = 0; k < got; k++, i++)
      if (i >= n || !same_event(&evs[k], &saved[i].ev))
        abort();
  if (rc != AS_DONE || i != n)
    abort();
  trace_source_close(src);
  free(out);
  return 0;
}
