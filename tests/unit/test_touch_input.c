/* tests/unit/test_touch_input.c -- touch events that cannot be true are
 * refused, naming the file and the line (text) or byte offset (binary):
 * a touch of an object that is not live, and one past the object's end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "traces/trace_io.h"

static char g_dir[64];

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/allocsim-test-touch-XXXXXX");
  return mkdtemp(g_dir) == NULL ? -1 : 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Replays path with the glibc model; returns the status, message in err. */
static as_status_t replay(const char *path, as_err_t *err) {
  trace_source_t *src = NULL;
  sim_session_t   s;
  assert_int_equal(trace_open(path, &src, err), AS_OK);
  assert_int_equal(sim_session_open("glibc", NULL, NULL, &s, err), AS_OK);
  sim_engine_config_t cfg = {.lenient = true}; /* touches are not lenient */
  sim_run_result_t    r;
  as_status_t         rc = sim_engine_run(&cfg, &s, src, &r, err);
  sim_session_close(&s);
  trace_source_close(src);
  return rc;
}

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static const char dead[] = "allocsim-trace 1\n"
                           "#@ touch_threshold=4096\n"
                           "0 0 malloc 0 8192\n"
                           "1 0 touch 0 0 4096\n"
                           "2 0 free 0\n"
                           "3 0 touch 0 0 4096\n";

static const char past[] = "allocsim-trace 1\n"
                           "#@ touch_threshold=4096\n"
                           "0 0 malloc 0 8192\n"
                           "1 0 touch 0 4096 4097\n";

static void text_touch_errors_name_the_line(void **state) {
  (void)state;
  char     path[128];
  as_err_t err = {0};
  snprintf(path, sizeof path, "%s/dead.trace", g_dir);
  write_text(path, dead);
  assert_int_equal(replay(path, &err), AS_EFORMAT);
  assert_non_null(strstr(err.msg, "dead.trace: line 6: event 3"));
  assert_non_null(strstr(err.msg, "touch of object 0 that is not live"));
  snprintf(path, sizeof path, "%s/past.trace", g_dir);
  write_text(path, past);
  assert_int_equal(replay(path, &err), AS_EFORMAT);
  assert_non_null(strstr(err.msg, "past.trace: line 4: event 1"));
  assert_non_null(strstr(err.msg, "bytes 4096..8193 of object 0, which has "
                                  "8192 bytes"));
}

/* The same traces in the binary format: the offset is the touch record's. */
/* Writes dead as a binary trace of format fmt and replays it: the error
 * names the byte offset where the second touch starts. */
static void expect_dead_touch_at(trace_format_t fmt, const char *offset) {
  char     text[128], bin[128];
  as_err_t err = {0};
  snprintf(text, sizeof text, "%s/dead2.trace", g_dir);
  snprintf(bin, sizeof bin, "%s/dead.astrace", g_dir);
  write_text(text, dead);
  trace_source_t *src = NULL;
  trace_writer_t *w = NULL;
  assert_int_equal(trace_open(text, &src, &err), AS_OK);
  assert_int_equal(trace_writer_open(bin, fmt, &src->meta, &w, &err), AS_OK);
  trace_event_t ev;
  while (trace_source_next(src, &ev, &err) == AS_OK)
    assert_int_equal(trace_writer_write(w, &ev, &err), AS_OK);
  trace_source_close(src);
  assert_int_equal(trace_writer_close(w, &err), AS_OK);
  assert_int_equal(replay(bin, &err), AS_EFORMAT);
  char want[64];
  snprintf(want, sizeof want, "dead.astrace: byte offset %s: event 3", offset);
  if (strstr(err.msg, want) == NULL)
    fail_msg("%s", err.msg);
}

/* The header is 32 bytes (magic 8, version 2, "touch_threshold" 1 + 15,
 * "4096" 1 + 4, end 1).  Version 2: malloc 4 bytes (B, id, 2-byte size),
 * touch 6 (B, dt, id, offset, 2-byte length), free 3: the second touch
 * starts at byte 45.  Version 3: a block header of 4 bytes, 3 shapes of 2,
 * 4 ops bytes, 3 data bytes (malloc's 2-byte size; free's dt and id), then
 * the rare column, the first touch's 6 bytes: the second at byte 55. */
static void binary_touch_errors_name_the_byte_offset(void **state) {
  (void)state;
  expect_dead_touch_at(TRACE_FORMAT_BINARY_V2, "45");
  expect_dead_touch_at(TRACE_FORMAT_BINARY, "55");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(text_touch_errors_name_the_line),
      cmocka_unit_test(binary_touch_errors_name_the_byte_offset),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
