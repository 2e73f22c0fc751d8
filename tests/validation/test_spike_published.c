/* tests/validation/test_spike_published.c -- the `spike` workload under
 * cpython + glibc against the load-spike study's published figures (tolerance
 * 10%) and against the runs measured on this machine
 * (data/measured/spike-*.trace, recorded by scripts/measure/run_spike.sh;
 * tolerance 5% of the measured peak single-threaded, 10% threaded).
 *
 * Baseline.  The simulation's RSS counts only what the trace allocates; the
 * interpreter and its imports (21 MiB in the study, about 11.5 MiB for
 * python3.11 here) are not in the trace.  The engine has no baseline option
 * yet, so these tests do not invent one: a predicted absolute figure is the
 * *measured* RSS at `start` plus the simulated RSS, and the published start
 * (21 MiB) is used the same way.  Equivalently, simulated deltas from start
 * are compared with measured deltas from start.  The study publishes only the
 * default run's start; its MALLOC_MMAP_THRESHOLD_=512 run started higher
 * (startup allocations over 512 bytes take a page each), which the tests
 * take from a measurement on this machine (scripts/measure/baseline.py),
 * and also show the miss that a 21 MiB start gives.
 *
 * Model.  The study measured Python 3.14, so the published rows replay
 * `spike --python 3.14` (3.14's 40-byte str header and free-list clearing
 * order) on cpython:version=3.14; the runs measured here used CPython 3.11.2
 * and replay --python 3.11 on cpython:version=3.11, as their provenance
 * says.  The published machine's CPU count is unknown; ncpus=2 (this
 * machine) only matters for the 16-thread arena cap.
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

#define MAX_MARKS 8

typedef struct marks_s {
  size_t   n;
  char     label[MAX_MARKS][64];
  uint64_t rss[MAX_MARKS];
} marks_t;

static as_status_t on_sample(void *user, const sim_sample_t *s, as_err_t *err) {
  (void)err;
  marks_t *m = user;
  if (s->kind == SIM_SAMPLE_MARK && m->n < MAX_MARKS) {
    snprintf(m->label[m->n], sizeof m->label[0], "%s", s->label);
    m->rss[m->n++] = s->rss_bytes;
  }
  return AS_OK;
}

/* Replays workload `args` (space-separated, first word the name) against
 * model_spec with libc_spec and fills *m. */
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
  assert_int_equal(m->n, 4);
  assert_string_equal(m->label[0], "start");
  assert_string_equal(m->label[1], "peak");
  assert_string_equal(m->label[2], "after_free");
  assert_string_equal(m->label[3], "after_trim");
}

/* ---- Published figures (the load-spike study) ---------------------------- */

/* The study's table, MiB: start, peak, after free, after malloc_trim(0).
 * The study ran Python 3.14, so its rows replay 3.14's requests. */
#define PUB_START 21.0
#define PUB_SPIKE "spike --python 3.14"
#define PUB_MODEL "cpython:version=3.14"

/* Checks the first n of peak, after_free, after_trim against pub[0..n). */
static void assert_published(const marks_t *sim, const double *pub, int n,
                             const char *what) {
  /* The trace starts with nothing allocated. */
  assert_int_equal(sim->rss[0], 0);
  for (int i = 0; i < n; i++) {
    double predicted = PUB_START + (double)sim->rss[i + 1] / (double)MIB;
    double err = predicted - pub[i];
    if (err > 0.10 * pub[i] || err < -0.10 * pub[i])
      fail_msg("%s %s: predicted %.1f MiB, published %.0f MiB (%+.1f%%)", what,
               sim->label[i + 1], predicted, pub[i], 100.0 * err / pub[i]);
  }
}

static void defaults_match_published_within_ten_percent(void **state) {
  (void)state;
  static const double pub[3] = {396, 395, 57};
  marks_t             m;
  simulate(PUB_SPIKE, PUB_MODEL, "glibc:ncpus=2", &m);
  assert_published(&m, pub, 3, "defaults");
}

static void
mmap_threshold_512_matches_published_peak_and_after_free(void **state) {
  (void)state;
  /* after_trim is checked separately below: the model misses it. */
  static const double pub[2] = {508, 265};
  marks_t             m;
  simulate(PUB_SPIKE, PUB_MODEL, "glibc:ncpus=2,mmap_threshold=512", &m);
  assert_published(&m, pub, 2, "MALLOC_MMAP_THRESHOLD_=512");
}

/* Median over r1..r3 of the RSS recorded by scripts/measure/baseline.py in
 * data/measured/baseline-<variant>-r<k>.trace (one mark, `start`). */
static double baseline_mib(const char *variant);

/* A recorded miss with a 21 MiB start: with MALLOC_MMAP_THRESHOLD_=512 the
 * model predicts 21 + 32.3 = 53.3 MiB after malloc_trim(0) where the study
 * published 61 (-12.7%), while on this machine it predicts the measured
 * after_trim within 0.3 MiB (test below).  The cause is the baseline: with
 * the threshold at 512 the interpreter's own allocations over 512 bytes each
 * take a page, so that run did not start at 21 MiB (the study does not
 * publish its start).  This test fails if the error leaves [-15%, -10%],
 * i.e. when the model or the workload changes and the docs need updating. */
static void
mmap_threshold_512_with_a_21_mib_start_misses_after_trim(void **state) {
  (void)state;
  marks_t m;
  simulate(PUB_SPIKE, PUB_MODEL, "glibc:ncpus=2,mmap_threshold=512", &m);
  double predicted = PUB_START + (double)m.rss[3] / (double)MIB;
  double err = (predicted - 61.0) / 61.0;
  if (err < -0.15 || err > -0.10)
    fail_msg("after_trim: predicted %.1f MiB against published 61: %+.1f%%; "
             "update docs/glibc-validation.md",
             predicted, 100.0 * err);
}

/* The same row with the start shift measured here: an interpreter that
 * imported what the study's guide imports sits at 20.4 MiB by default and
 * 26.3 MiB with the threshold at 512 (scripts/measure/baseline.py), so the
 * 512 row starts at 21 + 6.0 MiB.  Every figure is then within 10%.  The
 * shift was measured on CPython 3.11.2, the published run was 3.14. */
static void
mmap_threshold_512_matches_published_with_measured_start_shift(void **state) {
  (void)state;
  static const double pub[3] = {508, 265, 61};
  double              shift = baseline_mib("mmap512") - baseline_mib("default");
  assert_true(shift > 5.0 && shift < 7.0); /* 5.9-6.0 MiB when recorded */
  marks_t m;
  simulate(PUB_SPIKE, PUB_MODEL, "glibc:ncpus=2,mmap_threshold=512", &m);
  for (int i = 0; i < 3; i++) {
    double predicted = PUB_START + shift + (double)m.rss[i + 1] / (double)MIB;
    double err = (predicted - pub[i]) / pub[i];
    if (err > 0.10 || err < -0.10)
      fail_msg("%s: predicted %.1f MiB, published %.0f (%+.1f%%)",
               m.label[i + 1], predicted, pub[i], 100.0 * err);
  }
}

static void sixteen_threads_match_published_within_ten_percent(void **state) {
  (void)state;
  static const double pub[3] = {396, 396, 58};
  marks_t             m;
  simulate(PUB_SPIKE " --threads 16", PUB_MODEL, "glibc:ncpus=2", &m);
  assert_published(&m, pub, 3, "16 threads");
}

static void arena_max_2_with_sixteen_threads_matches_published(void **state) {
  (void)state;
  static const double pub[3] = {396, 396, 57};
  marks_t             m;
  simulate(PUB_SPIKE " --threads 16", PUB_MODEL, "glibc:ncpus=2,arena_max=2",
           &m);
  assert_published(&m, pub, 3, "16 threads, MALLOC_ARENA_MAX=2");
}

static void trim_threshold_131072_matches_published(void **state) {
  (void)state;
  static const double pub[3] = {396, 395, 57};
  marks_t             m;
  simulate(PUB_SPIKE, PUB_MODEL, "glibc:ncpus=2,trim_threshold=131072", &m);
  assert_published(&m, pub, 3, "MALLOC_TRIM_THRESHOLD_=131072");
}

static void arena_max_and_trim_threshold_change_nothing(void **state) {
  (void)state;
  /* The study: "made no measurable difference here".  Within 1% of the
   * default peak at every mark. */
  marks_t base, arenas, trim;
  simulate(PUB_SPIKE, PUB_MODEL, "glibc:ncpus=2", &base);
  simulate(PUB_SPIKE " --threads 16", PUB_MODEL, "glibc:ncpus=2,arena_max=2",
           &arenas);
  simulate(PUB_SPIKE, PUB_MODEL, "glibc:ncpus=2,trim_threshold=131072", &trim);
  int64_t tol = (int64_t)base.rss[1] / 100;
  for (int i = 1; i < 4; i++) {
    int64_t da = (int64_t)arenas.rss[i] - (int64_t)base.rss[i];
    int64_t dt = (int64_t)trim.rss[i] - (int64_t)base.rss[i];
    assert_true(da <= tol && da >= -tol);
    assert_true(dt <= tol && dt >= -tol);
  }
}

/* ---- Measured on this machine ------------------------------------------- */

/* Reads a measured-run file: its marks and the provenance that says how to
 * simulate it (workload, model, libc). */
typedef struct measured_s {
  marks_t m;
  char    workload[256], model[64], libc[256];
} measured_t;

static trace_source_t *open_measured(const char *file) {
  char path[512];
  snprintf(path, sizeof path, "%s/data/measured/%s", ALLOCSIM_SOURCE_DIR, file);
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  if (trace_open(path, &src, &err) != AS_OK)
    fail_msg("%s", err.msg);
  return src;
}

/* Reads the marks (label and the rss that follows each) to the end. */
static void read_marks(trace_source_t *src, marks_t *m) {
  trace_event_t ev;
  as_err_t      err = {0};
  memset(m, 0, sizeof *m);
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    if (ev.op == TRACE_MARK && m->n < MAX_MARKS)
      snprintf(m->label[m->n++], sizeof m->label[0], "%s", ev.label);
    else if (ev.op == TRACE_RSS && m->n > 0)
      m->rss[m->n - 1] = ev.size;
  }
}

static void read_measured_marks(const char *file, marks_t *m) {
  trace_source_t *src = open_measured(file);
  read_marks(src, m);
  trace_source_close(src);
}

static void read_measured(const char *file, measured_t *out) {
  trace_source_t *src = open_measured(file);
  memset(out, 0, sizeof *out);
  const char *keys[3] = {"workload", "model", "libc"};
  char       *dst[3] = {out->workload, out->model, out->libc};
  size_t len[3] = {sizeof out->workload, sizeof out->model, sizeof out->libc};
  for (int i = 0; i < 3; i++) {
    const char *v = trace_meta_get(&src->meta, keys[i]);
    if (v == NULL)
      fail_msg("%s: no provenance key '%s'", file, keys[i]);
    /* cmocka 1.1.5 does not mark fail_msg noreturn, hence the "". */
    snprintf(dst[i], len[i], "%s", v != NULL ? v : "");
  }
  read_marks(src, &out->m);
  trace_source_close(src);
}

static double baseline_mib(const char *variant) {
  double v[3];
  for (int k = 0; k < 3; k++) {
    char    file[128];
    marks_t m;
    snprintf(file, sizeof file, "baseline-%s-r%d.trace", variant, k + 1);
    read_measured_marks(file, &m);
    v[k] = (double)m.rss[0] / (double)MIB;
  }
  double lo = v[0] < v[1] ? v[0] : v[1], hi = v[0] < v[1] ? v[1] : v[0];
  return v[2] < lo ? lo : v[2] > hi ? hi : v[2]; /* median of three */
}

/* Simulates a measured run from its own provenance and checks every mark:
 * |measured start + simulated - measured| <= pct% of the measured peak. */
static void assert_measured(const char *file, int pct) {
  measured_t meas;
  marks_t    sim;
  read_measured(file, &meas);
  simulate(meas.workload, meas.model, meas.libc, &sim);
  assert_int_equal(meas.m.n, sim.n);
  uint64_t peak = meas.m.rss[1];
  for (size_t i = 0; i < sim.n; i++) {
    assert_string_equal(meas.m.label[i], sim.label[i]);
    double predicted = (double)(meas.m.rss[0] + sim.rss[i]);
    double err = predicted - (double)meas.m.rss[i];
    if (err > (double)pct / 100 * (double)peak ||
        err < -(double)pct / 100 * (double)peak)
      fail_msg("%s %s: predicted %.1f MiB, measured %.1f MiB, error %+.1f "
               "MiB > %d%% of peak",
               file, sim.label[i], predicted / (double)MIB,
               (double)meas.m.rss[i] / (double)MIB, err / (double)MIB, pct);
  }
}

static void defaults_track_this_machine_within_five_percent(void **state) {
  (void)state;
  assert_measured("spike-default-r1.trace", 5);
}

static void mmap_threshold_512_tracks_this_machine(void **state) {
  (void)state;
  assert_measured("spike-mmap512-r1.trace", 5);
}

static void trim_threshold_tracks_this_machine(void **state) {
  (void)state;
  assert_measured("spike-trim131072-r1.trace", 5);
}

static void
sixteen_threads_track_this_machine_within_ten_percent(void **state) {
  (void)state;
  assert_measured("spike-threads16-r1.trace", 10);
  assert_measured("spike-threads16-arenamax2-r1.trace", 10);
}

/* The one gap above 1 MiB on this machine, explained.  Under
 * MALLOC_MMAP_THRESHOLD_=512 the interpreter already holds mmapped chunks at
 * `start` (spike.py records mallinfo2().hblks as mmapped_chunks_at_start,
 * 605 in repeat 1), and they count against M_MMAP_MAX = 65536 (malloc.c:
 * sysmalloc, n_mmaps < n_mmaps_max) exactly as the workload's do, so 605
 * more strings than simulated land in the heap: less at the peak (a heap
 * chunk is smaller than a page), more after the free (heap chunks between
 * survivors stay).  The simulation starts with no mmapped chunk; lowering
 * its mmap_max by the recorded count stands in for them here (only here:
 * the run did not set M_MMAP_MAX).  The after_free error then falls from
 * about -1.6 MiB to about -0.3 MiB, the size of the residual at every other
 * mark and variant. */
static void interpreter_mmaps_explain_the_mmap512_after_free_gap(void **state) {
  (void)state;
  measured_t meas;
  marks_t    plain, adjusted;
  read_measured("spike-mmap512-r1.trace", &meas);
  char path[512];
  snprintf(path, sizeof path, "%s/data/measured/spike-mmap512-r1.trace",
           ALLOCSIM_SOURCE_DIR);
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  assert_int_equal(trace_open(path, &src, &err), AS_OK);
  const char *n = trace_meta_get(&src->meta, "mmapped_chunks_at_start");
  assert_non_null(n);
  unsigned long chunks = strtoul(n, NULL, 10);
  trace_source_close(src);
  assert_true(chunks > 0 && chunks < 65536);
  char libc[320];
  snprintf(libc, sizeof libc, "%s,mmap_max=%lu", meas.libc, 65536 - chunks);
  simulate(meas.workload, meas.model, meas.libc, &plain);
  simulate(meas.workload, meas.model, libc, &adjusted);
  double base = (double)meas.m.rss[0];
  double e_plain =
      (base + (double)plain.rss[2] - (double)meas.m.rss[2]) / (double)MIB;
  double e_adj =
      (base + (double)adjusted.rss[2] - (double)meas.m.rss[2]) / (double)MIB;
  if (!(e_plain < -1.0 && e_adj > -0.5 && e_adj < 0.5))
    fail_msg("after_free error %+.2f MiB plain, %+.2f MiB with %lu "
             "pre-existing mmapped chunks",
             e_plain, e_adj, chunks);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(defaults_match_published_within_ten_percent),
      cmocka_unit_test(
          mmap_threshold_512_matches_published_peak_and_after_free),
      cmocka_unit_test(
          mmap_threshold_512_with_a_21_mib_start_misses_after_trim),
      cmocka_unit_test(
          mmap_threshold_512_matches_published_with_measured_start_shift),
      cmocka_unit_test(sixteen_threads_match_published_within_ten_percent),
      cmocka_unit_test(arena_max_2_with_sixteen_threads_matches_published),
      cmocka_unit_test(trim_threshold_131072_matches_published),
      cmocka_unit_test(arena_max_and_trim_threshold_change_nothing),
      cmocka_unit_test(defaults_track_this_machine_within_five_percent),
      cmocka_unit_test(mmap_threshold_512_tracks_this_machine),
      cmocka_unit_test(trim_threshold_tracks_this_machine),
      cmocka_unit_test(sixteen_threads_track_this_machine_within_ten_percent),
      cmocka_unit_test(interpreter_mmaps_explain_the_mmap512_after_free_gap),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
