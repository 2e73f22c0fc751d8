/* tests/integration/test_replay_example.c -- replays the bundled example
 * trace and checks RSS at every mark against values worked out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "engine/engine.h"
#include "traces/trace_io.h"

#define EXAMPLE ALLOCSIM_SOURCE_DIR "/data/example.trace"

typedef struct marks_s marks_t;
struct marks_s {
  int      n;
  char     label[8][32];
  uint64_t rss[8];
  uint64_t live[8];
};

static as_status_t on_sample(void *user, const sim_sample_t *s, as_err_t *err) {
  marks_t *m = user;
  (void)err;
  if (s->kind == SIM_SAMPLE_MARK && m->n < 8) {
    snprintf(m->label[m->n], 32, "%s", s->label);
    m->rss[m->n] = s->rss_bytes;
    m->live[m->n] = s->live_bytes;
    m->n++;
  }
  return AS_OK;
}

static void replay_example(const char *model, uint64_t page_size,
                           marks_t *marks, sim_run_result_t *res) {
  sim_session_t       s;
  sim_kernel_config_t k;
  trace_source_t     *src;
  as_err_t            err = {0};
  sim_kernel_config_default(&k);
  k.page_size = page_size;
  assert_int_equal(sim_session_open(model, NULL, &k, &s, &err), AS_OK);
  if (trace_open(EXAMPLE, &src, &err) != AS_OK)
    fail_msg("%s", err.msg);
  sim_engine_config_t cfg = {.on_sample = on_sample, .user = marks};
  if (sim_engine_run(&cfg, &s, src, res, &err) != AS_OK)
    fail_msg("%s", err.msg);
  trace_source_close(src);
  sim_session_close(&s);
}

/* Live bytes at the marks: 200000 + 4 * 65536 + 1000 = 463144 at the peak,
 * 65536 + 1000 = 66536 after the burst, 0 at the end. */
static void ideal_rounds_live_bytes_up_to_whole_pages(void **state) {
  (void)state;
  static const uint64_t    pages_4k[] = {0, 114, 17, 17, 0}; /* ceil(/4096) */
  static const uint64_t    pages_64k[] = {0, 8, 2, 2, 0};    /* ceil(/65536) */
  static const uint64_t    live[] = {0, 463144, 66536, 66536, 0};
  static const char *const labels[] = {"start", "peak", "after_free",
                                       "after_trim", "end"};
  marks_t                  m4 = {0}, m64 = {0};
  sim_run_result_t         r;
  replay_example("ideal", 4096, &m4, &r);
  assert_int_equal(r.events, 18);
  assert_int_equal(r.peak_rss_bytes, 114 * 4096);
  replay_example("ideal", 65536, &m64, &r);
  assert_int_equal(m4.n, 5);
  for (int i = 0; i < 5; i++) {
    assert_string_equal(m4.label[i], labels[i]);
    assert_int_equal(m4.live[i], live[i]);
    assert_int_equal(m4.rss[i], pages_4k[i] * 4096);
    assert_int_equal(m64.rss[i], pages_64k[i] * 65536);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ideal_rounds_live_bytes_up_to_whole_pages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
