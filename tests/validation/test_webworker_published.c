/* tests/validation/test_webworker_published.c -- the `webworker` workload
 * under cpython + glibc against the webworker study's published glibc rows
 * (tolerance 15%, misses asserted as recorded) and against the runs measured
 * on this machine (data/measured/webworker-*.trace,
 * scripts/measure/webworker.py; tolerance 5% of the measured peak with one
 * thread and at 64 threads, 10% at 16 threads, whose two repeats differ
 * by 6% of the peak after the shrink).
 *
 * Baseline.  As in test_spike_published.c: the trace starts with nothing
 * allocated, so a predicted absolute figure is the start RSS plus the
 * simulated RSS.  The study's start is "14 MB" (the interpreter alone); a
 * measured run's start is its own `start` sample.
 *
 * Units.  The study reads /proc/self/status, whose "kB" are KiB; we take its
 * MB as MiB (the usual kB / 1024) and its cache caps likewise (100 MB =
 * 100 MiB of body bytes, webworker --cache-mb).  docs/webworker.md shows
 * what reading them as 10^6 bytes would change.
 *
 * Model.  The study ran CPython 3.14.8 on glibc 2.41 with 4 vCPUs: its rows
 * replay `webworker --python 3.14` on cpython:version=3.14 with
 * glibc:version=2.41,ncpus=4.  The runs here used CPython 3.11.2 on glibc
 * 2.36 with 2 CPUs and replay what their provenance says.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../engine/engine.h"
#include "../../traces/trace_io.h"
#include "../../traces/workload.h"

#define MIB (UINT64_C(1024) * 1024)

/* ---- Running a workload and collecting its marks ------------------------ */

#define NMARKS 5

typedef struct marks_s {
  size_t   n;
  char     label[8][64];
  uint64_t rss[8];
} marks_t;

static const char *const mark_names[NMARKS] = {
    "start", "under_load", "after_shrink", "after_idle", "after_trim"};

static as_status_t on_sample(void *user, const sim_sample_t *s, as_err_t *err) {
  (void)err;
  marks_t *m = user;
  if (s->kind == SIM_SAMPLE_MARK && m->n < 8) {
    snprintf(m->label[m->n], sizeof m->label[0], "%s", s->label);
    m->rss[m->n++] = s->rss_bytes;
  }
  return AS_OK;
}

/* Replays workload `args` (space-separated, first word the name) against
 * model_spec with libc_spec and fills *m with its five marks. */
static void simulate(const char *args, const char *model_spec,
                     const char *libc_spec, marks_t *m) {
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  if (workload_open_line(args, &src, &err) != AS_OK)
    fail_msg("%s: %s", args, err.msg);
  sim_session_t session;
  if (sim_session_open(model_spec, libc_spec, NULL, &session, &err) != AS_OK)
    fail_msg("%s --libc %s: %s", model_spec, libc_spec, err.msg);
  memset(m, 0, sizeof *m);
  sim_engine_config_t cfg = {.on_sample = on_sample, .user = m};
  sim_run_result_t    res;
  if (sim_engine_run(&cfg, &session, src, &res, &err) != AS_OK)
    fail_msg("%s: %s", args, err.msg);
  trace_source_close(src);
  sim_session_close(&session);
  assert_int_equal(m->n, NMARKS);
  for (int i = 0; i < NMARKS; i++)
    assert_string_equal(m->label[i], mark_names[i]);
}

/* ---- Published figures (the webworker study) ----------------------------- */

#define PUB_START 14.0 /* "The interpreter alone starts at 14 MB" */
#define PUB_WL    "webworker --python 3.14"
#define PUB_MODEL "cpython:version=3.14"
#define PUB_LIBC  "glibc:version=2.41,ncpus=4"
#define PUB_TOL   0.15

/* Published MiB: under load, after shrink + 12 s idle, + malloc_trim(0). */
typedef struct pub_row_s {
  const char *what, *args, *libc;
  double      pub[3];
} pub_row_t;

static const pub_row_t rows[3] = {
    {"glibc, 1 thread", PUB_WL " --threads 1", PUB_LIBC, {125, 118, 25}},
    {"glibc, 64 threads", PUB_WL " --threads 64", PUB_LIBC, {211, 149, 71}},
    {"glibc, 64 threads, MALLOC_ARENA_MAX=2",
     PUB_WL " --threads 64",
     PUB_LIBC ",arena_max=2",
     {153, 140, 32}},
};

/* The three published marks map to under_load, after_idle, after_trim. */
static const int pub_mark[3] = {1, 3, 4};

/* Predicted MiB for row r's published column c. */
static double predicted(const marks_t *m, int c) {
  return PUB_START + (double)m->rss[pub_mark[c]] / (double)MIB;
}

static double rel_err(const marks_t *m, const pub_row_t *r, int c) {
  return (predicted(m, c) - r->pub[c]) / r->pub[c];
}

/* Asserts column c of row r within PUB_TOL. */
static void assert_within(const marks_t *m, const pub_row_t *r, int c) {
  double e = rel_err(m, r, c);
  if (e > PUB_TOL || e < -PUB_TOL)
    fail_msg("%s, %s: predicted %.1f MiB, published %.0f (%+.1f%%)", r->what,
             mark_names[pub_mark[c]], predicted(m, c), r->pub[c], 100.0 * e);
}

/* Asserts a recorded miss: the error stays in [lo, hi], so a change in the
 * model or workload that moves it shows up (and docs/webworker.md needs
 * updating). */
static void assert_miss(const marks_t *m, const pub_row_t *r, int c, double lo,
                        double hi) {
  double e = rel_err(m, r, c);
  if (e < lo || e > hi)
    fail_msg("%s, %s: predicted %.1f MiB, published %.0f (%+.1f%%), outside "
             "the recorded miss [%+.0f%%, %+.0f%%]; update docs/webworker.md",
             r->what, mark_names[pub_mark[c]], predicted(m, c), r->pub[c],
             100.0 * e, 100.0 * lo, 100.0 * hi);
}

/* One thread: all three figures within 15% (-5%, +1%, +12% when
 * recorded). */
static void one_thread_matches_published_within_15_percent(void **state) {
  (void)state;
  marks_t m;
  simulate(rows[0].args, PUB_MODEL, rows[0].libc, &m);
  assert_int_equal(m.rss[0], 0);
  for (int c = 0; c < 3; c++)
    assert_within(&m, &rows[0], c);
}

/* 64 threads: after shrink + idle within 15% (-7%); under load and after
 * trim are recorded misses (-34%, -30% when recorded): the model holds
 * 21 MiB more than one thread under load and 22 MiB more after the trim,
 * the published runs 86 and 46.  See docs/webworker.md for the analysis;
 * the same model tracks 64 threads on this machine within 2%. */
static void sixty_four_threads_miss_under_load_and_after_trim(void **state) {
  (void)state;
  marks_t m;
  simulate(rows[1].args, PUB_MODEL, rows[1].libc, &m);
  assert_within(&m, &rows[1], 1);
  assert_miss(&m, &rows[1], 0, -0.45, -0.28);
  assert_miss(&m, &rows[1], 2, -0.45, -0.25);
}

/* MALLOC_ARENA_MAX=2 at 64 threads: after idle (-12%) and after trim (+2%)
 * within 15%; under load a recorded miss (-18%). */
static void arena_max_2_matches_after_idle_and_trim(void **state) {
  (void)state;
  marks_t m;
  simulate(rows[2].args, PUB_MODEL, rows[2].libc, &m);
  assert_within(&m, &rows[2], 1);
  assert_within(&m, &rows[2], 2);
  assert_miss(&m, &rows[2], 0, -0.25, -0.15);
}

/* The study's qualitative findings, which the model reproduces:
 *  - glibc gives nothing back on its own: after_idle equals after_shrink
 *    ("within 4 KB ... in every glibc run"; here exactly);
 *  - malloc_trim(0) releases most of what is held after the shrink (93 of
 *    118 MB at one thread);
 *  - more threads hold more at every mark;
 *  - MALLOC_ARENA_MAX=2 holds less than the default at 64 threads at every
 *    mark. */
static void qualitative_findings_hold(void **state) {
  (void)state;
  marks_t one, many, capped;
  simulate(rows[0].args, PUB_MODEL, rows[0].libc, &one);
  simulate(rows[1].args, PUB_MODEL, rows[1].libc, &many);
  simulate(rows[2].args, PUB_MODEL, rows[2].libc, &capped);
  const marks_t *all[3] = {&one, &many, &capped};
  for (int k = 0; k < 3; k++) {
    assert_int_equal(all[k]->rss[3], all[k]->rss[2]);
    assert_true(all[k]->rss[4] < all[k]->rss[3] / 2);
  }
  assert_true(predicted(&one, 1) - predicted(&one, 2) > 80.0);
  for (int i = 1; i < NMARKS; i++) {
    assert_true(many.rss[i] > one.rss[i]);
    assert_true(capped.rss[i] < many.rss[i]);
  }
}

/* ---- Measured on this machine ------------------------------------------- */

typedef struct measured_s {
  marks_t m;
  char    workload[256], model[64], libc[256];
} measured_t;

/* Reads a measured-run file: its marks (each label with the rss that
 * follows it) and the provenance that says how to simulate it. */
static void read_measured(const char *file, measured_t *out) {
  char path[512];
  snprintf(path, sizeof path, "%s/data/measured/%s", ALLOCSIM_SOURCE_DIR, file);
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  if (trace_open(path, &src, &err) != AS_OK)
    fail_msg("%s", err.msg);
  memset(out, 0, sizeof *out);
  const char *keys[3] = {"workload", "model", "libc"};
  char       *dst[3] = {out->workload, out->model, out->libc};
  size_t len[3] = {sizeof out->workload, sizeof out->model, sizeof out->libc};
  for (int i = 0; i < 3; i++) {
    const char *v = trace_meta_get(&src->meta, keys[i]);
    if (v == NULL)
      fail_msg("%s: no provenance key '%s'", file, keys[i]);
    snprintf(dst[i], len[i], "%s", v != NULL ? v : "");
  }
  /* the glibc the run used, as compare reads it (models/options.h meta:) */
  const char *gv = trace_meta_get(&src->meta, "glibc_version");
  if (gv != NULL && strncmp(out->libc, "glibc:", 6) == 0) {
    size_t n = strlen(out->libc);
    snprintf(out->libc + n, sizeof out->libc - n, ",version=%s", gv);
  }
  trace_event_t ev;
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    if (ev.op == TRACE_MARK && out->m.n < 8)
      snprintf(out->m.label[out->m.n++], sizeof out->m.label[0], "%s",
               ev.label);
    else if (ev.op == TRACE_RSS && out->m.n > 0)
      out->m.rss[out->m.n - 1] = ev.size;
  }
  trace_source_close(src);
}

/* Errors of a measured run's marks against its simulation, as fractions
 * of the measured peak (under_load): err[i] = (measured start + simulated
 * - measured) / peak. */
static void measured_errors(const char *file, double err[NMARKS]) {
  measured_t meas;
  marks_t    sim;
  read_measured(file, &meas);
  simulate(meas.workload, meas.model, meas.libc, &sim);
  assert_int_equal(meas.m.n, sim.n);
  double peak = (double)meas.m.rss[1];
  for (size_t i = 0; i < sim.n; i++) {
    assert_string_equal(meas.m.label[i], sim.label[i]);
    double pred = (double)(meas.m.rss[0] + sim.rss[i]);
    err[i] = (pred - (double)meas.m.rss[i]) / peak;
  }
}

/* Every mark of file within pct% of its measured peak. */
static void assert_measured(const char *file, int pct) {
  double err[NMARKS];
  measured_errors(file, err);
  for (int i = 0; i < NMARKS; i++)
    if (err[i] > pct / 100.0 || err[i] < -pct / 100.0)
      fail_msg("%s %s: error %+.2f%% of the measured peak > %d%%", file,
               mark_names[i], 100.0 * err[i], pct);
}

static void one_thread_tracks_this_machine_within_5_percent(void **state) {
  (void)state;
  assert_measured("webworker-threads1-r1.trace", 5);
  assert_measured("webworker-threads1-r2.trace", 5);
}

/* 16 threads, both repeats.  The after-shrink figure depends on how the
 * GIL interleaved the threads: the two measured repeats differ by 7.6 MiB
 * there, the simulation by 3 MiB between --slice 34 and 39. */
static void sixteen_threads_track_this_machine_within_10_percent(void **state) {
  (void)state;
  assert_measured("webworker-threads16-r1.trace", 10);
  assert_measured("webworker-threads16-r2.trace", 10);
  assert_measured("webworker-threads16-arenamax2-r1.trace", 10);
  assert_measured("webworker-threads16-arenamax2-r2.trace", 10);
}

/* 64 threads on the default 16 arenas here, 4 threads to an arena: every
 * mark within 5% of the peak (-1.4% under load, -0.5% after the shrink
 * when recorded).  Before the workload cut a turn inside its last request
 * and made json.loads's two whitespace matches, the after-shrink error was
 * -10.0% (docs/webworker.md). */
static void
sixty_four_threads_track_this_machine_within_5_percent(void **state) {
  (void)state;
  assert_measured("webworker-threads64-r1.trace", 5);
  assert_measured("webworker-threads64-arenamax2-r1.trace", 5);
}

/* The study's software here (docs/webworker.md): CPython 3.14.7 on
 * Debian 13's glibc 2.41, 32 arenas as on the study's 4 vCPUs, one thread
 * and 64 with MALLOC_ARENA_MAX=2.  Every mark within 5% of the peak (the
 * worst, -4.4%, after the shrink with two arenas).  They measured 144-148
 * MiB under load at 64 threads where the study published 211. */
static void the_studys_software_here_within_5_percent(void **state) {
  (void)state;
  assert_measured("webworker-probe-py3.14-glibc2.41-t1-r1.trace", 5);
  assert_measured("webworker-probe-py3.14-glibc2.41-t64-am2-r1.trace", 5);
  for (int run = 1; run <= 3; run++) {
    char file[96];
    snprintf(file, sizeof file,
             "webworker-probe-py3.14-glibc2.41-t64-am32-r%d.trace", run);
    assert_measured(file, 5);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_thread_matches_published_within_15_percent),
      cmocka_unit_test(sixty_four_threads_miss_under_load_and_after_trim),
      cmocka_unit_test(arena_max_2_matches_after_idle_and_trim),
      cmocka_unit_test(qualitative_findings_hold),
      cmocka_unit_test(one_thread_tracks_this_machine_within_5_percent),
      cmocka_unit_test(sixteen_threads_track_this_machine_within_10_percent),
      cmocka_unit_test(sixty_four_threads_track_this_machine_within_5_percent),
      cmocka_unit_test(the_studys_software_here_within_5_percent),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
