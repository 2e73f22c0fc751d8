/* tests/integration/test_oracle.c -- `allocsim oracle` (analysis/oracle.c
 * and traces/oracle/replayer.c) on this machine's real allocators.
 *
 * The glibc tests are exact: the replay of a lab whose RSS is known (the
 * brk lab: 1000 KiB chunks, every page written, trimmed in two steps) must
 * give the same bytes at every mark as the measurements docs/glibc-
 * validation.md records for glibc 2.36 and as the glibc model, which is
 * checked call for call against it.  The tests also check what the oracle
 * promises: a measured trace that record and compare accept (error 0 at
 * every mark), threads replayed as threads (the 64-thread lab, within the
 * DTVs pthread_create callocs, which the workload does not emit), the
 * replayer's own DTVs written into a trace run's stored trace (and freed
 * where glibc's stack cache frees them), option,
 * purge, touch and idle events applied, bad events refused before anything
 * runs, and an allocator that cannot be loaded refused naming the path.
 * jemalloc, mimalloc, tcmalloc and musl run when installed (skipped
 * otherwise).
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../helpers/asan.h"

#include "analysis/compare.h"
#include "analysis/oracle.h"
#include "analysis/record.h"
#include "analysis/store.h"
#include "engine/engine.h"
#include "traces/trace_io.h"
#include "traces/workload.h"

/* ---- Helpers ------------------------------------------------------------ */

static void default_opts(oracle_opts_t *o, oracle_allocator_t a) {
  memset(o, 0, sizeof *o);
  o->allocator = a;
  o->idle_scale = 1.0;
  o->sample_every_ns = 10000000;
}

/* A text trace in a new temporary file; returns its path (static). */
static const char *write_trace(const char *text) {
  static char path[64];
  strcpy(path, "/tmp/allocsim-oracle-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  size_t n = strlen(text);
  assert_int_equal(write(fd, text, n), (ssize_t)n);
  close(fd);
  return path;
}

static as_status_t on_sample(void *user, const sim_sample_t *s, as_err_t *err) {
  (void)err;
  uint64_t *marks = user;
  if (s->kind == SIM_SAMPLE_MARK)
    marks[++marks[0]] = s->rss_bytes;
  return AS_OK;
}

/* The glibc model's RSS at each mark of the trace or workload, in
 * marks[1..marks[0]]. */
static void model_marks(const char *path, const char *workload,
                        uint64_t *marks) {
  trace_source_t *src;
  as_err_t        err = {0};
  assert_int_equal(workload ? workload_open_line(workload, &src, &err)
                            : trace_open(path, &src, &err),
                   AS_OK);
  sim_session_t s;
  assert_int_equal(sim_session_open("glibc", NULL, NULL, &s, &err), AS_OK);
  marks[0] = 0;
  sim_engine_config_t cfg = {.on_sample = on_sample, .user = marks};
  sim_run_result_t    r;
  assert_int_equal(sim_engine_run(&cfg, &s, src, &r, &err), AS_OK);
  sim_session_close(&s);
  trace_source_close(src);
}

static bool have_lib(oracle_allocator_t a) {
  char lib[512];
  oracle_default_lib(a, lib, sizeof lib);
  return lib[0] != '\0' && access(lib, R_OK) == 0;
}

/* The 200,000-byte block, four 64 KiB ones and 1000 bytes live at 'peak'
 * (data/example.trace). */
#define EXAMPLE_PEAK_LIVE (200000 + 4 * 65536 + 1000)

/* ---- glibc: exact ---------------------------------------------------------*/

/* The brk lab: what glibc 2.36 does here, byte for byte, and what the
 * model says. */
static void brk_lab_replays_to_the_known_rss(void **state) {
  (void)state;
  static const uint64_t known[] = {0, 1044480, 1044480, 16384, 8192, 8192};
  oracle_opts_t         o;
  default_opts(&o, ORACLE_GLIBC);
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(NULL, "lab-brk", &o, &r, &err), AS_OK);
  assert_int_equal(r.nmarks, 6);
  uint64_t model[16];
  model_marks(NULL, "lab-brk", model);
  assert_int_equal(model[0], 6);
  for (size_t i = 0; i < 6; i++) {
    assert_int_equal(r.marks[i].rss_bytes, known[i]);
    assert_int_equal(r.marks[i].rss_bytes, model[i + 1]);
  }
  assert_string_equal(r.marks[3].label, "trimmed_but_last");
  assert_int_equal(r.peak_rss_bytes, 1044480);
  assert_int_equal(r.threads, 1);
  assert_true(r.baseline_rss_bytes > 0);
  assert_true(strstr(r.library, "libc.so") != NULL);
  oracle_run_free(&r);
}

/* The measured trace records as a measured run, and compare predicts it
 * with no error at any mark. */
static void measured_trace_records_and_compares(void **state) {
  (void)state;
  char dir[] = "/tmp/allocsim-oracle-db-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[128], db[128], in[512];
  snprintf(out, sizeof out, "%s/run.astrace", dir);
  snprintf(db, sizeof db, "%s/runs.db", dir);
  snprintf(in, sizeof in, "%s/data/example.trace", ALLOCSIM_SOURCE_DIR);
  oracle_opts_t o;
  default_opts(&o, ORACLE_GLIBC);
  o.out_path = out;
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(in, NULL, &o, &r, &err), AS_OK);
  trace_source_t *src;
  assert_int_equal(trace_open(out, &src, &err), AS_OK);
  assert_string_equal(trace_meta_get(&src->meta, "source"), "allocsim oracle");
  assert_string_equal(trace_meta_get(&src->meta, "allocator"), "glibc");
  assert_non_null(trace_meta_get(&src->meta, "baseline_rss_bytes"));
  trace_source_close(src);
  store_t      *s;
  record_info_t info;
  assert_int_equal(store_open(db, &s, &err), AS_OK);
  assert_int_equal(record_trace_file(s, out, "test", NULL, 0, &info, &err),
                   AS_OK);
  assert_int_equal(info.marks, 5);
  assert_int_equal(info.marks_without_rss, 0);
  compare_opts_t   co = {.model = "glibc", .layouts = 1};
  compare_result_t cr;
  assert_int_equal(compare_run(s, info.run_id, &co, &cr, &err), AS_OK);
  assert_int_equal(cr.nmarks, 5);
  for (size_t i = 0; i < cr.nmarks; i++)
    assert_int_equal(cr.marks[i].error_bytes, 0);
  /* The stored run holds RSS as measured; compare's anchor takes the
   * baseline off again. */
  assert_int_equal(cr.peak_measured_rss_bytes,
                   r.peak_rss_bytes + r.baseline_rss_bytes);
  assert_int_equal(cr.offset_bytes, (int64_t)r.baseline_rss_bytes);
  compare_result_free(&cr);
  store_close(s);
  oracle_run_free(&r);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* The child's allocator settings are the run's provenance whether --env
 * gave them or the shell did, and a name too long for a key (env.NAME is
 * at most 31 bytes) is kept in malloc_env: compare once predicted the
 * defaults for TCMALLOC_AGGRESSIVE_DECOMMIT=true set in the shell (14% of
 * the peak off) and --env refused names over 24 bytes. */
static void every_setting_the_child_had_is_recorded(void **state) {
  (void)state;
  char out[64], in[512];
  strcpy(out, "/tmp/allocsim-oracle-env-XXXXXX");
  int fd = mkstemp(out);
  assert_true(fd >= 0);
  close(fd);
  snprintf(in, sizeof in, "%s/data/example.trace", ALLOCSIM_SOURCE_DIR);
  oracle_opts_t o;
  default_opts(&o, ORACLE_GLIBC);
  o.out_path = out;
  o.env[o.nenv++] = "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES=1048576";
  assert_int_equal(setenv("MALLOC_TOP_PAD_", "65536", 1), 0);
  oracle_run_t r;
  as_err_t     err = {0};
  as_status_t  rc = oracle_run(in, NULL, &o, &r, &err);
  unsetenv("MALLOC_TOP_PAD_");
  assert_int_equal(rc, AS_OK);
  trace_source_t *src;
  assert_int_equal(trace_open(out, &src, &err), AS_OK);
  assert_string_equal(trace_meta_get(&src->meta, "env.MALLOC_TOP_PAD_"),
                      "65536");
  assert_string_equal(trace_meta_get(&src->meta, "malloc_env"),
                      "TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES=1048576");
  trace_source_close(src);
  oracle_run_free(&r);
  unlink(out);
}

/* Each trace thread on a thread of its own: the 64-thread lab leaves the
 * model's thread stacks and arenas, plus the DTV pthread_create callocs in
 * the main arena for each thread (272 bytes, glibc 2.36 elf/dl-tls.c
 * allocate_dtv), which the workload does not emit: at most five pages. */
static void threads_replay_on_threads(void **state) {
  (void)state;
  oracle_opts_t o;
  default_opts(&o, ORACLE_GLIBC);
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(NULL, "lab-arenas", &o, &r, &err), AS_OK);
  assert_int_equal(r.threads, 65);
  uint64_t model[8];
  model_marks(NULL, "lab-arenas", model);
  assert_int_equal(model[0], r.nmarks);
  for (size_t i = 1; i < r.nmarks; i++) {
    assert_true(r.marks[i].rss_bytes >= model[i + 1]);
    assert_true(r.marks[i].rss_bytes - model[i + 1] <= 5 * 4096);
  }
  oracle_run_free(&r);
}

/* The measured trace out, recorded in store db, compares with the glibc
 * model within 8 pages at each of its nmarks marks. */
static void glibc_agrees_at_every_mark(const char *db, const char *out,
                                       size_t nmarks) {
  store_t      *s;
  record_info_t info;
  as_err_t      err = {0};
  assert_int_equal(store_open(db, &s, &err), AS_OK);
  assert_int_equal(record_trace_file(s, out, "test", NULL, 0, &info, &err),
                   AS_OK);
  compare_opts_t   co = {.model = "glibc", .layouts = 1};
  compare_result_t cr;
  assert_int_equal(compare_run(s, info.run_id, &co, &cr, &err), AS_OK);
  assert_int_equal(cr.nmarks, nmarks);
  for (size_t i = 0; i < cr.nmarks; i++) {
    if (llabs(cr.marks[i].error_bytes) > 8 * 4096)
      print_error("mark %s: error %lld bytes\n", cr.marks[i].label,
                  (long long)cr.marks[i].error_bytes);
    assert_true(llabs(cr.marks[i].error_bytes) <= 8 * 4096);
  }
  compare_result_free(&cr);
  store_close(s);
}

/* The replayer's own pthread_create callocs each new thread's DTV in the
 * main arena (glibc 2.36 elf/dl-tls.c:375; protocol.h ORACLE_R_THREAD),
 * which the trace does not carry: the stored trace gains one calloc per
 * new thread, on thread 0 before the thread's first op.  Here threads 1 and
 * 2 overlap (so each maps a new stack) and start with 1 MB of thread 0's
 * blocks below the top: their DTVs land above the blocks, and once those
 * are freed glibc cannot trim below the DTVs.  Without them the model
 * trims the 1 MB the real heap holds; with them the model agrees within 8
 * pages at every mark (measured 2026-12-02: 0 bytes apart). */
static void thread_dtvs_are_in_the_stored_trace(void **state) {
  (void)state;
  char  text[4096], *p = text;
  char *end = text + sizeof text;
  p += snprintf(p, (size_t)(end - p), "allocsim-trace 1\n0 0 mark start\n");
  int t = 1;
  for (int i = 0; i < 10; i++, t++)
    p += snprintf(p, (size_t)(end - p), "%d 0 malloc %d 100000\n", t, i);
  p += snprintf(p, (size_t)(end - p),
                "%d 0 mark held\n%d 1 thread_start\n%d 1 malloc 10 1000\n"
                "%d 2 thread_start\n%d 2 malloc 11 1000\n%d 0 mark threads\n",
                t, t + 1, t + 2, t + 3, t + 4, t + 5);
  t += 6;
  for (int i = 0; i < 10; i++, t++)
    p += snprintf(p, (size_t)(end - p), "%d 0 free %d\n", t, i);
  p += snprintf(p, (size_t)(end - p),
                "%d 0 mark freed\n%d 1 free 10\n%d 1 thread_exit\n"
                "%d 2 free 11\n%d 2 thread_exit\n%d 0 mark end\n",
                t, t + 1, t + 2, t + 3, t + 4, t + 5);
  assert_true(p < end);
  const char *path = write_trace(text);
  char        dir[] = "/tmp/allocsim-oracle-db-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[128], db[128];
  snprintf(out, sizeof out, "%s/run.astrace", dir);
  snprintf(db, sizeof db, "%s/runs.db", dir);
  oracle_opts_t o;
  default_opts(&o, ORACLE_GLIBC);
  o.out_path = out;
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(path, NULL, &o, &r, &err), AS_OK);
  assert_int_equal(r.threads, 3);
  assert_int_equal(r.ncreated, 2);
  assert_int_equal(r.dtvs, 2);
  assert_true(r.dtv_chunk_bytes >= 32 && r.dtv_chunk_bytes % 16 == 0);
  /* The stored trace: each calloc right before its thread's first op, a
   * fresh id, never freed. */
  trace_source_t *src;
  assert_int_equal(trace_open(out, &src, &err), AS_OK);
  assert_non_null(trace_meta_get(&src->meta, "oracle_thread_dtvs"));
  trace_event_t ev;
  uint64_t      callocs = 0, prev_calloc_id = UINT64_MAX;
  uint32_t      seen_thread = 0;
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    if (ev.op == TRACE_FREE)
      assert_true(ev.id < 12);
    if (prev_calloc_id != UINT64_MAX && ev.op != TRACE_RSS) {
      /* the event after a DTV: the new thread's first */
      assert_int_equal(ev.thread, ++seen_thread);
      prev_calloc_id = UINT64_MAX;
    }
    if (ev.op == TRACE_CALLOC) {
      assert_int_equal(ev.thread, 0);
      assert_int_equal(ev.id, 12 + callocs);
      assert_int_equal(ev.size, r.dtv_chunk_bytes - 16);
      prev_calloc_id = ev.id;
      callocs++;
    }
  }
  assert_int_equal(callocs, 2);
  assert_int_equal(seen_thread, 2);
  trace_source_close(src);
  oracle_run_free(&r);
  glibc_agrees_at_every_mark(db, out, 5);
  unlink(path);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* A DTV calloc can move more than its chunk out of the bins: calloc's
 * _int_malloc, taking the DTV's 288-byte chunk from a small bin holding
 * three, moves the other two into the main thread's (emptied) tcache
 * (glibc 2.36 malloc/malloc.c:3916-3935), which mallinfo2 counts as in
 * use.  The first creation then reads three chunks, the second (from the
 * top) one: the stored trace has one calloc of one chunk for each, and
 * the model, which stashes alike, agrees within 8 pages (measured
 * 2026-12-02: 0 bytes). */
static void thread_dtv_stash_counts_one_chunk(void **state) {
  (void)state;
  char  text[8192], *p = text;
  char *end = text + sizeof text;
  int   t = 1, id = 0;
  p += snprintf(p, (size_t)(end - p), "allocsim-trace 1\n0 0 mark start\n");
  for (int i = 0; i < 10; i++) { /* 288-byte chunks between guards */
    p += snprintf(p, (size_t)(end - p), "%d 0 malloc %d 272\n", t++, id++);
    p += snprintf(p, (size_t)(end - p), "%d 0 malloc %d 16\n", t++, id++);
  }
  for (int i = 0; i < 10; i++) /* 7 to the tcache, 3 to the unsorted bin */
    p += snprintf(p, (size_t)(end - p), "%d 0 free %d\n", t++, 2 * i);
  /* sorts the three into their small bin; then the tcache is emptied */
  p += snprintf(p, (size_t)(end - p), "%d 0 malloc %d 1000\n", t++, id++);
  for (int i = 0; i < 7; i++)
    p += snprintf(p, (size_t)(end - p), "%d 0 malloc %d 272\n", t++, id++);
  p += snprintf(p, (size_t)(end - p),
                "%d 0 mark ready\n%d 1 thread_start\n%d 1 malloc %d 1000\n"
                "%d 2 thread_start\n%d 2 malloc %d 1000\n%d 0 mark threads\n"
                "%d 1 free %d\n%d 1 thread_exit\n%d 2 free %d\n"
                "%d 2 thread_exit\n%d 0 mark end\n",
                t, t + 1, t + 2, id, t + 3, t + 4, id + 1, t + 5, t + 6, id,
                t + 7, t + 8, id + 1, t + 9, t + 10);
  id += 2;
  assert_true(p < end);
  const char *path = write_trace(text);
  char        dir[] = "/tmp/allocsim-oracle-db-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[128], db[128];
  snprintf(out, sizeof out, "%s/run.astrace", dir);
  snprintf(db, sizeof db, "%s/runs.db", dir);
  oracle_opts_t o;
  default_opts(&o, ORACLE_GLIBC);
  o.out_path = out;
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(path, NULL, &o, &r, &err), AS_OK);
  assert_int_equal(r.ncreated, 2);
  assert_int_equal(r.created[0].heap_bytes, 3 * r.dtv_chunk_bytes);
  assert_int_equal(r.created[1].heap_bytes, r.dtv_chunk_bytes);
  assert_int_equal(r.dtvs, 2);
  trace_source_t *src;
  assert_int_equal(trace_open(out, &src, &err), AS_OK);
  trace_event_t ev;
  uint64_t      callocs = 0;
  while (trace_source_next(src, &ev, &err) == AS_OK)
    if (ev.op == TRACE_CALLOC) {
      assert_int_equal(ev.id, (uint64_t)id + callocs++);
      assert_int_equal(ev.size, r.dtv_chunk_bytes - 16);
    }
  assert_int_equal(callocs, 2);
  trace_source_close(src);
  oracle_run_free(&r);
  glibc_agrees_at_every_mark(db, out, 4);
  unlink(path);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* Counts out's allocation events and DTV-sized callocs on thread 0. */
static void count_calls(const char *out, uint64_t dtv_size, uint64_t *allocs,
                        uint64_t *dtvs) {
  trace_source_t *src;
  trace_event_t   ev;
  as_err_t        err = {0};
  *allocs = *dtvs = 0;
  assert_int_equal(trace_open(out, &src, &err), AS_OK);
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    *allocs += ev.op <= TRACE_MEMALIGN;
    *dtvs += ev.op == TRACE_CALLOC && ev.thread == 0 && ev.size == dtv_size;
  }
  trace_source_close(src);
}

/* A workload's run stores its calls, as a trace's does: on the oracle's
 * clock, with the replayer's DTVs, so that compare replays what the real
 * allocator ran.  --marks-only stores the marks and samples alone (compare
 * then regenerates the calls on the workload's clock, without the DTVs,
 * and the provenance says so). */
static void workload_runs_store_their_calls(void **state) {
  (void)state;
  char dir[] = "/tmp/allocsim-oracle-db-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[128], db[128];
  snprintf(out, sizeof out, "%s/run.astrace", dir);
  snprintf(db, sizeof db, "%s/runs.db", dir);
  for (int marks_only = 0; marks_only < 2; marks_only++) {
    oracle_opts_t o;
    default_opts(&o, ORACLE_GLIBC);
    o.out_path = out;
    o.marks_only = marks_only;
    oracle_run_t r;
    as_err_t     err = {0};
    assert_int_equal(oracle_run(NULL, "lab-arenas --threads 8", &o, &r, &err),
                     AS_OK);
    assert_int_equal(r.ncreated, 8);
    uint64_t allocs, dtvs;
    count_calls(out, r.dtv_chunk_bytes - 16, &allocs, &dtvs);
    assert_int_equal(dtvs, marks_only ? 0 : 8);
    assert_true(marks_only ? allocs == 0 : allocs > 8);
    trace_source_t *src;
    assert_int_equal(trace_open(out, &src, &err), AS_OK);
    assert_string_equal(trace_meta_get(&src->meta, "clock"), "oracle");
    const char *note = trace_meta_get(&src->meta, "oracle_thread_dtvs");
    assert_non_null(
        strstr(note, marks_only ? "it holds marks only" : "8 calloc of "));
    trace_source_close(src);
    oracle_run_free(&r);
    if (!marks_only)
      glibc_agrees_at_every_mark(db, out, 3);
  }
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* A DTV glibc frees: nptl's cache keeps 40 MiB of joined stacks (with
 * 8 MiB stacks, four) and frees the oldest beyond that, DTV first, in the
 * joining thread (glibc 2.36 nptl/nptl-stack.c:56-106).  Six threads
 * alive at once; threads 5 and 6, whose DTVs lie above thread 0's 1 MB,
 * are joined first, so the fifth and sixth joins (by thread 0, whose
 * tcache bin for them is full) free their DTVs into the top, and freeing
 * the 1 MB then trims it.  The stored trace frees those two callocs on
 * thread 0 and the model agrees within 8 pages at every mark (measured
 * 2026-12-02: 0 bytes; without the frees it is 852 KiB high at 'freed'). */
static void thread_dtvs_freed_with_their_stacks(void **state) {
  (void)state;
  struct rlimit saved, eight;
  assert_int_equal(getrlimit(RLIMIT_STACK, &saved), 0);
  eight = saved;
  eight.rlim_cur = 8 << 20; /* the replayer's default thread stacks */
  if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < eight.rlim_cur)
    skip();
  assert_int_equal(setrlimit(RLIMIT_STACK, &eight), 0);
  char  text[8192], *p = text;
  char *end = text + sizeof text;
  int   t = 1;
#define EV(...)                                                                \
  do {                                                                         \
    p += snprintf(p, (size_t)(end - p), "%d ", t++);                           \
    p += snprintf(p, (size_t)(end - p), __VA_ARGS__);                          \
  } while (0)
  p += snprintf(p, (size_t)(end - p), "allocsim-trace 1\n0 0 mark start\n");
  for (int k = 0; k < 7; k++) /* thread 0's tcache bin for 288 bytes full */
    EV("0 malloc %d 272\n", k);
  for (int k = 0; k < 7; k++)
    EV("0 free %d\n", k);
  for (int th = 1; th <= 6; th++) {
    if (th == 5)
      for (int k = 0; k < 10; k++)
        EV("0 malloc %d 100000\n", 7 + k);
    EV("%d thread_start\n", th);
    EV("%d malloc %d 1000\n", th, 20 + th);
  }
  EV("0 mark threads\n");
  static const int order[] = {5, 6, 1, 2, 3, 4};
  for (int i = 0; i < 6; i++) {
    EV("%d free %d\n", order[i], 20 + order[i]);
    EV("%d thread_exit\n", order[i]);
    EV("0 mark joined_%d\n", order[i]);
  }
  for (int k = 0; k < 10; k++)
    EV("0 free %d\n", 7 + k);
  EV("0 mark freed\n");
#undef EV
  assert_true(p < end);
  const char *path = write_trace(text);
  char        dir[] = "/tmp/allocsim-oracle-db-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[128], db[128];
  snprintf(out, sizeof out, "%s/run.astrace", dir);
  snprintf(db, sizeof db, "%s/runs.db", dir);
  oracle_opts_t o;
  default_opts(&o, ORACLE_GLIBC);
  o.out_path = out;
  oracle_run_t r;
  as_err_t     err = {0};
  as_status_t  rc = oracle_run(path, NULL, &o, &r, &err);
  assert_int_equal(setrlimit(RLIMIT_STACK, &saved), 0);
  assert_int_equal(rc, AS_OK);
  assert_int_equal(r.dtvs, 6);
  assert_int_equal(r.dtvs_freed, 2);
  trace_source_t *src;
  assert_int_equal(trace_open(out, &src, &err), AS_OK);
  trace_event_t ev;
  uint64_t      frees = 0;
  while (trace_source_next(src, &ev, &err) == AS_OK)
    if (ev.op == TRACE_FREE && ev.id >= 27) { /* threads 5 and 6's DTVs */
      assert_int_equal(ev.thread, 0);
      assert_int_equal(ev.id, 27 + 4 + frees++);
    }
  assert_int_equal(frees, 2);
  trace_source_close(src);
  oracle_run_free(&r);
  glibc_agrees_at_every_mark(db, out, 9);
  unlink(path);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

/* ld.so callocs a new stack's DTV from whichever allocator is preloaded
 * on glibc: the trace gets that calloc, sized from the TLS modules (a
 * module more with jemalloc's TLS than glibc's 288-byte chunk); musl puts
 * the DTV in the thread's mapping. */
static void thread_dtvs_for_every_allocator_on_glibc(void **state) {
  (void)state;
  static const struct {
    oracle_allocator_t a;
    uint64_t           dtvs;
    const char        *says;
  } cases[] = {{ORACLE_JEMALLOC, 1, "1 calloc of "},
               {ORACLE_MUSL, 0, "none: musl's pthread_create"}};
  const char *path = write_trace("allocsim-trace 1\n0 0 mark start\n"
                                 "1 1 thread_start\n2 1 malloc 0 1000\n"
                                 "3 1 free 0\n4 1 thread_exit\n"
                                 "5 0 mark end\n");
  char        out[64];
  snprintf(out, sizeof out, "%s.out", path);
  size_t ran = 0;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char     buf[512];
    as_err_t err = {0};
    if (cases[i].a == ORACLE_MUSL
            ? oracle_find_replayer(ORACLE_MUSL, buf, sizeof buf, &err) != AS_OK
            : !have_lib(cases[i].a))
      continue;
    oracle_opts_t o;
    default_opts(&o, cases[i].a);
    o.out_path = out;
    oracle_run_t r;
    assert_int_equal(oracle_run(path, NULL, &o, &r, &err), AS_OK);
    assert_int_equal(r.ncreated, 1);
    assert_int_equal(r.dtvs, cases[i].dtvs);
    trace_source_t *src;
    assert_int_equal(trace_open(out, &src, &err), AS_OK);
    const char *says = trace_meta_get(&src->meta, "oracle_thread_dtvs");
    assert_non_null(says);
    assert_true(strncmp(says, cases[i].says, strlen(cases[i].says)) == 0);
    trace_event_t ev;
    uint64_t      callocs = 0;
    while (trace_source_next(src, &ev, &err) == AS_OK)
      if (ev.op == TRACE_CALLOC) {
        /* (modules + 14 + 2) 16-byte entries: 272 bytes with libc's TLS
         * alone, more with the preloaded library's (jemalloc's). */
        assert_int_equal(ev.thread, 0);
        assert_true(ev.size > 272 && ev.size % 16 == 0);
        callocs++;
      }
    assert_int_equal(callocs, cases[i].dtvs);
    trace_source_close(src);
    oracle_run_free(&r);
    unlink(out);
    ran++;
  }
  unlink(path);
  if (ran == 0)
    skip();
}

/* mallopt through an option event, touch events for unwritten blocks, and
 * an idle slept for real (scaled): the model agrees byte for byte. */
static void option_touch_and_idle_events_apply(void **state) {
  (void)state;
  const char   *path = write_trace("allocsim-trace 1\n"
                                     "#@ touch_threshold=65536\n"
                                     "0 0 mark start\n"
                                     "1 0 option mmap_threshold 1048576\n"
                                     "2 0 malloc 0 524288\n"
                                     "3 0 malloc 1 2097152\n"
                                     "4 0 touch 1 0 65536\n"
                                     "5 0 mark held\n"
                                     "6 0 idle 200ms\n"
                                     "200000007 0 free 0\n"
                                     "200000008 0 mark freed\n");
  oracle_opts_t o;
  default_opts(&o, ORACLE_GLIBC);
  o.idle_scale = 0.5;
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(path, NULL, &o, &r, &err), AS_OK);
  uint64_t model[8];
  model_marks(path, NULL, model);
  assert_int_equal(model[0], 3);
  for (size_t i = 0; i < 3; i++)
    assert_int_equal(r.marks[i].rss_bytes, model[i + 1]);
  /* The 512 KiB block went to the heap (threshold raised), unwritten like
   * the 2 MiB one of which 64 KiB were touched: little is resident. */
  assert_true(r.marks[1].rss_bytes < 160 * 1024);
  assert_true(r.wall_s >= 0.1);
  oracle_run_free(&r);
  unlink(path);
}

/* The calls' CPU time (what scripts/bench.sh sets beside a simulation's):
 * a 32 MiB block written whole costs its 8192 page faults, an idle costs
 * nothing, and neither do the marks' RSS reads. */
static void calls_cpu_time_counts_the_calls_not_the_idles(void **state) {
  (void)state;
  const char   *path = write_trace("allocsim-trace 1\n"
                                     "0 0 malloc 0 33554432\n"
                                     "1 0 mark held\n"
                                     "2 0 idle 2s\n"
                                     "2000000003 0 free 0\n"
                                     "2000000004 0 mark freed\n");
  oracle_opts_t o;
  default_opts(&o, ORACLE_GLIBC);
  o.sample_every_ns = 0;
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(path, NULL, &o, &r, &err), AS_OK);
  assert_true(r.wall_s >= 2);
  assert_true(r.calls_cpu_ns >= 1000000); /* 8192 faults: >= 1 ms */
  /* the 2 s idle is not in: the calls alone are far below it (a CI run
   * of this machine took over 200 ms for them under load, so the bound is
   * half the idle, not a speed target; unchecked under AddressSanitizer) */
  assert_true(DIFF_ASAN || r.calls_cpu_ns <= 1000000000);
  oracle_run_free(&r);
  unlink(path);
}

/* The measured trace is on the oracle's clock: every event stamped with
 * the time the real allocator saw it (provenance clock=oracle), monotone,
 * the trace's own 5 s gap (no idle: the replay runs straight on) gone, the
 * idle lasting its scaled sleep, and samples taken while it slept stamped
 * inside it.  The span covers the replay the child timed (its last op's
 * start) and no more than the parent's wall clock around it. */
static void measured_trace_is_on_the_oracle_clock(void **state) {
  (void)state;
  const char *path = write_trace("allocsim-trace 1\n"
                                 "0 0 mark start\n"
                                 "1 0 malloc 0 1000\n"
                                 "5000000000 0 malloc 1 1000\n"
                                 "5000000001 0 mark mid\n"
                                 "5000000002 0 idle 200ms\n"
                                 "5200000003 0 free 0\n"
                                 "5200000004 0 free 1\n"
                                 "5200000005 0 mark end\n");
  char        out[64];
  snprintf(out, sizeof out, "%s.astrace", path);
  oracle_opts_t o;
  default_opts(&o, ORACLE_GLIBC);
  o.idle_scale = 0.5; /* 100 ms of sleep */
  o.out_path = out;
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(path, NULL, &o, &r, &err), AS_OK);
  assert_int_equal(r.nop_ns, 8);
  trace_source_t *src;
  assert_int_equal(trace_open(out, &src, &err), AS_OK);
  assert_string_equal(trace_meta_get(&src->meta, "clock"), "oracle");
  /* The replayer's initial break, read from /proc while it ran: the
   * layout compare gives the tcmalloc model (a 2 MiB pagemap leaf per
   * 2 GiB stretch the heap reaches). */
  const char *brk = trace_meta_get(&src->meta, "start_brk");
  assert_non_null(brk);
  assert_true(r.start_brk > 0 && strtoull(brk, NULL, 10) == r.start_brk);
  /* CLOCK_MONOTONIC at the replay's t = 0: before the run ended, and
   * within its seconds (mimalloc's model reads its ms ticks from it). */
  const char *origin = trace_meta_get(&src->meta, "clock_origin_ns");
  assert_non_null(origin);
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
  assert_true(strtoull(origin, NULL, 10) == r.clock_origin_ns);
  assert_true(r.clock_origin_ns < now_ns &&
              r.clock_origin_ns > now_ns - UINT64_C(60000000000));
  trace_event_t ev;
  uint64_t      first = UINT64_MAX, last = 0, idle_t = 0, idle_ns = 0;
  uint64_t      idle_end = 0, after_idle = 0, in_idle = 0, marks = 0;
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    if (first == UINT64_MAX)
      first = ev.t_ns;
    assert_true(ev.t_ns >= last); /* monotone */
    last = ev.t_ns;
    if (ev.op == TRACE_IDLE) {
      /* cut at each sample read while it slept: the pieces abut */
      assert_true(idle_end == 0 || ev.t_ns == idle_end);
      if (idle_end == 0)
        idle_t = ev.t_ns;
      idle_ns += ev.size;
      idle_end = ev.t_ns + ev.size;
    } else if (idle_end != 0 && after_idle == 0 && ev.op == TRACE_RSS)
      in_idle++;
    else if (idle_end != 0 && after_idle == 0 && ev.op == TRACE_FREE)
      after_idle = ev.t_ns;
    if (ev.op == TRACE_MARK)
      assert_int_equal(r.marks[marks++].t_ns, ev.t_ns);
  }
  trace_source_close(src);
  assert_int_equal(marks, 3);
  assert_int_equal(idle_ns, 100000000);
  assert_true(after_idle >= idle_t + idle_ns);
  assert_true(in_idle >= 2); /* 10 ms samples over 100 ms */
  assert_true(last - first >= idle_ns);
  assert_true(last >= r.replay_ns);
  assert_true((double)(last - first) <= r.wall_s * 1e9);
  assert_true(last - first < 5000000000u); /* not the trace's clock */
  assert_int_equal(r.final_t_ns, last);
  oracle_run_free(&r);
  unlink(out);
  unlink(path);
}

/* mimalloc decides on the clock (2.0.9 decommits a freed page's slices
 * decommit_delay, 25 ms, after the free, at a later free or page
 * allocation in its segment): a trace that says 2 s pass without an idle
 * is replayed in far less, and a 100 ms idle is slept for real.  Compared
 * on the oracle's clock, the model agrees at every mark (within 64 KiB);
 * on the trace's, it purged 11.5 MiB the real one still held (measured
 * 2026-12-02, mimalloc 2.0.9). */
static void mimalloc_compares_on_the_oracle_clock(void **state) {
  (void)state;
  if (!have_lib(ORACLE_MIMALLOC))
    skip();
  char  text[8192], *p = text;
  char *end = text + sizeof text;
  p += snprintf(p, (size_t)(end - p), "allocsim-trace 1\n0 0 mark start\n");
  uint64_t t = 1000;
  for (int i = 0; i < 48; i++, t += 1000)
    p += snprintf(p, (size_t)(end - p), "%" PRIu64 " 0 malloc %d 262144\n", t,
                  i);
  p += snprintf(p, (size_t)(end - p), "%" PRIu64 " 0 mark held\n", t);
  for (int i = 1; i < 47; i++, t += 1000)
    p += snprintf(p, (size_t)(end - p), "%" PRIu64 " 0 free %d\n", t, i);
  p += snprintf(p, (size_t)(end - p),
                "%" PRIu64 " 0 mark freed\n"
                "2000000000 0 free 47\n"
                "2000000001 0 malloc 48 262144\n"
                "2000000002 0 mark later\n"
                "2000000003 0 idle 100ms\n"
                "2100000003 0 free 48\n"
                "2100000004 0 malloc 49 262144\n"
                "2100000005 0 mark after_idle\n",
                t);
  assert_true(p < end);
  const char *path = write_trace(text);
  char        dir[] = "/tmp/allocsim-oracle-db-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char out[128], db[128];
  snprintf(out, sizeof out, "%s/run.astrace", dir);
  snprintf(db, sizeof db, "%s/runs.db", dir);
  oracle_opts_t o;
  default_opts(&o, ORACLE_MIMALLOC);
  o.out_path = out;
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(path, NULL, &o, &r, &err), AS_OK);
  /* Where mimalloc's aligned hints started (its first arena or segment):
   * a multiple of 32 MiB in [2, 6) TiB (v2.0.9 src/os.c:322-345), stored
   * for the 2.1 model (hint_start). */
  assert_true(r.hint_area_start >= UINT64_C(2) << 40 &&
              r.hint_area_start < UINT64_C(6) << 40);
  assert_int_equal(r.hint_area_start % (UINT64_C(32) << 20), 0);
  store_t      *s;
  record_info_t info;
  assert_int_equal(store_open(db, &s, &err), AS_OK);
  assert_int_equal(record_trace_file(s, out, "test", NULL, 0, &info, &err),
                   AS_OK);
  compare_opts_t   co = {.layouts = 1}; /* the model: LD_PRELOAD's */
  compare_result_t cr;
  assert_int_equal(compare_run(s, info.run_id, &co, &cr, &err), AS_OK);
  assert_non_null(strstr(cr.model, "mimalloc"));
  assert_int_equal(cr.nmarks, 5);
  for (size_t i = 0; i < cr.nmarks; i++) {
    if (llabs(cr.marks[i].error_bytes) > 65536)
      print_error("mark %s: error %lld bytes\n", cr.marks[i].label,
                  (long long)cr.marks[i].error_bytes);
    assert_true(llabs(cr.marks[i].error_bytes) <= 65536);
  }
  compare_result_free(&cr);
  store_close(s);
  oracle_run_free(&r);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
  unlink(path);
}

/* Bad events are refused before anything runs, naming the event; with
 * lenient they are skipped and counted. */
static void bad_events_are_refused_or_skipped(void **state) {
  (void)state;
  const char   *path = write_trace("allocsim-trace 1\n"
                                     "0 0 malloc 0 100\n"
                                     "1 0 free 0\n"
                                     "2 0 free 0\n"
                                     "3 0 option no_such_knob 1\n"
                                     "4 0 mark end\n");
  oracle_opts_t o;
  default_opts(&o, ORACLE_GLIBC);
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(path, NULL, &o, &r, &err), AS_EFORMAT);
  char want[256];
  /* as replay says it: the line, the 0-based event, the object */
  snprintf(want, sizeof want,
           "%s: line 4: event 2 (t=2 ns): free of object 0 that is not live "
           "(--lenient skips such events)",
           path);
  assert_string_equal(err.msg, want);
  oracle_run_free(&r);
  o.lenient = true;
  assert_int_equal(oracle_run(path, NULL, &o, &r, &err), AS_OK);
  assert_int_equal(r.skipped, 2);
  assert_int_equal(r.ops, 3);
  oracle_run_free(&r);
  unlink(path);
  /* SIZE_MAX bytes: refused (it read as a dead object before) */
  path = write_trace("allocsim-trace 1\n"
                     "0 0 malloc 0 18446744073709551615\n"
                     "30 0 free 0\n");
  o.lenient = false;
  assert_int_equal(oracle_run(path, NULL, &o, &r, &err), AS_EFORMAT);
  assert_non_null(strstr(err.msg, "event 0 (t=0 ns): malloc of object 0 of "
                                  "more than PTRDIFF_MAX bytes"));
  oracle_run_free(&r);
  unlink(path);
}

/* An allocator that cannot be loaded is refused naming the path tried; a
 * library that loads but does not replace malloc too. */
static void unloadable_allocators_are_refused(void **state) {
  (void)state;
  char in[512];
  snprintf(in, sizeof in, "%s/data/example.trace", ALLOCSIM_SOURCE_DIR);
  oracle_opts_t o;
  default_opts(&o, ORACLE_JEMALLOC);
  o.lib = "/nonexistent/libjemalloc.so.2";
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(in, NULL, &o, &r, &err), AS_EINVAL);
  assert_string_equal(err.msg, "cannot load jemalloc: /nonexistent/"
                               "libjemalloc.so.2: No such file or directory "
                               "(install libjemalloc2, or give --lib PATH)");
  oracle_run_free(&r);
  char libm[256];
  snprintf(libm, sizeof libm, "/lib/%s/libm.so.6",
#ifdef __x86_64__
           "x86_64-linux-gnu"
#else
           "aarch64-linux-gnu"
#endif
  );
  if (access(libm, R_OK) == 0) {
    o.lib = libm;
    assert_int_equal(oracle_run(in, NULL, &o, &r, &err), AS_EINVAL);
    assert_non_null(strstr(err.msg, "did not replace malloc"));
    oracle_run_free(&r);
  }
  o.lib = NULL;
  o.allocator = ORACLE_GLIBC;
  o.replayer = "/nonexistent/allocsim-replayer";
  assert_int_equal(oracle_run(in, NULL, &o, &r, &err), AS_EINVAL);
  assert_string_equal(err.msg, "/nonexistent/allocsim-replayer: cannot "
                               "start: No such file or directory");
  oracle_run_free(&r);
}

/* The op times stay in memory while they take at most half of what is
 * available, go to $TMPDIR while it holds them and a sixteenth more, and
 * are refused beyond both. */
static void op_times_go_where_they_fit(void **state) {
  (void)state;
  const uint64_t gib = UINT64_C(1) << 30;
  assert_int_equal(oracle_times_place(gib, 2 * gib, 0), ORACLE_TIMES_MEMORY);
  assert_int_equal(oracle_times_place(gib + 1, 2 * gib, 2 * gib),
                   ORACLE_TIMES_DISK);
  assert_int_equal(oracle_times_place(16 * gib, 2 * gib, 17 * gib),
                   ORACLE_TIMES_DISK);
  assert_int_equal(oracle_times_place(16 * gib, 2 * gib, 17 * gib - 1),
                   ORACLE_TIMES_NOWHERE);
  /* Unknown figures: memory as before, or the disk if memory is known. */
  assert_int_equal(oracle_times_place(16 * gib, 0, 0), ORACLE_TIMES_MEMORY);
  assert_int_equal(oracle_times_place(16 * gib, 2 * gib, 0), ORACLE_TIMES_DISK);
}

/* ---- The other allocators, when installed --------------------------------*/

static void run_example(oracle_allocator_t a) {
  char in[512];
  snprintf(in, sizeof in, "%s/data/example.trace", ALLOCSIM_SOURCE_DIR);
  oracle_opts_t o;
  default_opts(&o, a);
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(in, NULL, &o, &r, &err), AS_OK);
  assert_int_equal(r.nmarks, 5);
  assert_string_equal(r.marks[1].label, "peak");
  /* Every byte live at the peak was written; no allocator here keeps more
   * than a few MiB on top for 450 KiB. */
  assert_true(r.marks[1].rss_bytes >= EXAMPLE_PEAK_LIVE);
  assert_true(r.marks[1].rss_bytes < EXAMPLE_PEAK_LIVE + (4u << 20));
  /* The release the replayer found (Debian 12's mimalloc 2.0.9, gperftools
   * 2.10, jemalloc 5.3.0), which the stored run's provenance carries to
   * compare. */
  uint64_t release = a == ORACLE_MIMALLOC   ? 209
                     : a == ORACLE_TCMALLOC ? 210
                     : a == ORACLE_JEMALLOC ? 50300
                                            : 0;
  assert_int_equal(r.allocator_version, release);
  oracle_run_free(&r);
}

static void preloaded_allocators_replay(void **state) {
  (void)state;
  static const oracle_allocator_t preloaded[] = {
      ORACLE_JEMALLOC, ORACLE_MIMALLOC, ORACLE_TCMALLOC};
  int ran = 0;
  for (size_t i = 0; i < 3; i++)
    if (have_lib(preloaded[i])) {
      run_example(preloaded[i]);
      ran++;
    }
  if (ran == 0)
    skip();
}

/* jemalloc's purge and decay option events go through mallctl: with decay
 * off the freed 4 MiB leaves at once; with it at 10 s, purge all does it. */
static void jemalloc_purge_and_decay_options_apply(void **state) {
  (void)state;
  if (!have_lib(ORACLE_JEMALLOC))
    skip();
  const char   *path = write_trace("allocsim-trace 1\n"
                                     "0 0 option dirty_decay_ms 10000\n"
                                     "0 0 option muzzy_decay_ms 0\n"
                                     "1 0 malloc 0 4194304\n"
                                     "2 0 free 0\n"
                                     "3 0 mark freed\n"
                                     "4 0 purge all\n"
                                     "5 0 mark purged\n");
  oracle_opts_t o;
  default_opts(&o, ORACLE_JEMALLOC);
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(path, NULL, &o, &r, &err), AS_OK);
  assert_true(r.marks[0].rss_bytes >= 4194304);
  assert_true(r.marks[1].rss_bytes < 1048576);
  assert_int_equal(r.unsupported, 0);
  oracle_run_free(&r);
  unlink(path);
}

/* Replays text's trace on the real jemalloc into *r, the measured trace
 * written to out (cap bytes): the input's path. */
static const char *jemalloc_oracle(const char *text, char *out, size_t cap,
                                   oracle_run_t *r) {
  const char *path = write_trace(text);
  snprintf(out, cap, "%s.astrace", path);
  oracle_opts_t o;
  default_opts(&o, ORACLE_JEMALLOC);
  o.out_path = out;
  as_err_t err = {0};
  assert_int_equal(oracle_run(path, NULL, &o, r, &err), AS_OK);
  return path;
}

/* jemalloc seeds its randomness with addresses (its tsd's: decay ticks and
 * large objects' offsets; arena 0's decay_t's: epoch deadlines) and keeps
 * decay on CLOCK_MONOTONIC_COARSE.  The replayer reads them before the
 * first call and the stored run carries them, so that compare replays the
 * model with the real seeds and clock (traces/je_seeds.h). */
static void jemalloc_seeds_and_clock_are_recorded(void **state) {
  (void)state;
  if (!have_lib(ORACLE_JEMALLOC))
    skip();
  char         out[80];
  oracle_run_t r;
  as_err_t     err = {0};
  const char  *path = jemalloc_oracle("allocsim-trace 1\n"
                                       "1 0 malloc 0 100\n"
                                       "2 0 free 0\n"
                                       "3 0 mark end\n",
                                      out, sizeof out, &r);
  assert_true(r.je.prng_seed != 0 && r.je.prng_seed % 8 == 0);
  assert_true(r.je.jitter_seed != 0 && r.je.jitter_seed % 8 == 0);
  struct timespec res;
  assert_int_equal(clock_getres(CLOCK_MONOTONIC_COARSE, &res), 0);
  uint64_t tick = (uint64_t)res.tv_sec * 1000000000u + (uint64_t)res.tv_nsec;
  assert_int_equal(r.je.res_ns, tick);
  assert_true(r.je.coarse_init_ns <= r.je.coarse_origin_ns);
  assert_true(r.je.coarse_origin_ns <= r.clock_origin_ns &&
              r.clock_origin_ns - r.je.coarse_origin_ns < 4 * tick);
  trace_source_t *src;
  assert_int_equal(trace_open(out, &src, &err), AS_OK);
  const char *keys[] = {"jemalloc_prng_seed", "jemalloc_jitter_seed",
                        "jemalloc_clock_res_ns", "jemalloc_clock_lag_ns",
                        "jemalloc_clock_init_ns"};
  uint64_t    want[] = {r.je.prng_seed, r.je.jitter_seed, tick,
                        r.clock_origin_ns - r.je.coarse_origin_ns,
                        r.je.coarse_origin_ns - r.je.coarse_init_ns};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    const char *v = trace_meta_get(&src->meta, keys[i]);
    assert_non_null(v);
    assert_true(strtoull(v, NULL, 10) == want[i]);
  }
  trace_source_close(src);
  oracle_run_free(&r);
  unlink(out);
  unlink(path);
}

/* Each thread the replayer creates has its own tsd, and each arena its own
 * decay_t: the run records them (ORACLE_R_JE_THREAD, ORACLE_R_JE_ARENA)
 * and the stored trace carries them as seed.prng.T before each thread's
 * first call and seed.jitter.A at its start. */
static void jemalloc_thread_and_arena_seeds_are_recorded(void **state) {
  (void)state;
  if (!have_lib(ORACLE_JEMALLOC))
    skip();
  char         out[80];
  oracle_run_t r;
  as_err_t     err = {0};
  const char  *path = jemalloc_oracle("allocsim-trace 1\n"
                                       "1 1 malloc 1 100\n"
                                       "2 2 malloc 2 100\n"
                                       "3 3 malloc 3 100\n"
                                       "4 1 free 1\n"
                                       "5 2 free 2\n"
                                       "6 3 free 3\n"
                                       "7 0 mark end\n",
                                      out, sizeof out, &r);
  assert_int_equal(r.ncreated, 3);
  for (size_t i = 0; i < 3; i++) {
    assert_true(r.created[i].je_tsd % 8 == 0);
    assert_true(r.created[i].je_tsd != r.je.prng_seed);
    for (size_t j = 0; j < i; j++)
      assert_true(r.created[i].je_tsd != r.created[j].je_tsd);
  }
  /* three threads alive at once take arenas 1-3 (arena_choose_hard) */
  assert_int_equal(r.nje_arenas, 3);
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(r.je_arenas[i].arena, i + 1);
    assert_true(r.je_arenas[i].decay % 8 == 0 &&
                r.je_arenas[i].decay != r.je.jitter_seed);
  }
  trace_source_t *src;
  assert_int_equal(trace_open(out, &src, &err), AS_OK);
  trace_event_t ev;
  unsigned      prng = 0, jitter = 0;
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    if (ev.op != TRACE_OPTION || !trace_option_is_seed(ev.label))
      continue;
    unsigned idx = (unsigned)atoi(strrchr(ev.label, '.') + 1);
    if (strncmp(ev.label, "seed.prng.", 10) == 0) {
      assert_true(idx >= 1 && idx <= 3 && idx == r.created[prng].thread);
      assert_true(ev.size == r.created[prng++].je_tsd);
    } else {
      assert_true(strncmp(ev.label, "seed.jitter.", 12) == 0);
      assert_true(ev.size == r.je_arenas[jitter++].decay && idx == jitter);
    }
  }
  assert_int_equal(prng, 3);
  assert_int_equal(jitter, 3);
  trace_source_close(src);
  oracle_run_free(&r);
  unlink(out);
  unlink(path);
}

/* A capture's touches are pages of the object's span: 16 blocks of 64 KiB
 * captured 100 bytes into their pages, page 1 of each touched.  jemalloc
 * starts each at a random cache line of its first page; written as bytes,
 * most ranges would straddle two pages (up to 32 in all), as pages they
 * fault 16 (the marks' difference, with a page's slack for the reads). */
static void a_capture_touch_writes_the_pages_it_names(void **state) {
  (void)state;
  if (!have_lib(ORACLE_JEMALLOC))
    skip();
  char  text[4096];
  FILE *f = fmemopen(text, sizeof text, "w");
  assert_non_null(f);
  fputs("allocsim-trace 1\n#@ touch_threshold=4096\n#@ page_size=4096\n"
        "0 0 option dirty_decay_ms -1\n",
        f);
  for (unsigned i = 0; i < 16; i++)
    fprintf(f, "%u 0 malloc %u 65536\n", 2 * i + 1, i);
  fputs("40 0 mark allocated\n", f);
  for (unsigned i = 0; i < 16; i++)
    fprintf(f, "%u 0 touch %u 3996 4096\n", 41 + i, i);
  fputs("60 0 mark touched\n", f);
  fclose(f);
  const char   *path = write_trace(text);
  oracle_opts_t o;
  default_opts(&o, ORACLE_JEMALLOC);
  o.sample_every_ns = 0;
  oracle_run_t r;
  as_err_t     err = {0};
  assert_int_equal(oracle_run(path, NULL, &o, &r, &err), AS_OK);
  uint64_t grown = r.marks[1].rss_bytes - r.marks[0].rss_bytes;
  assert_in_range(grown, 16 * 4096, 17 * 4096);
  oracle_run_free(&r);
  unlink(path);
}

static void musl_replays_when_built(void **state) {
  (void)state;
  char     buf[512];
  as_err_t err = {0};
  if (oracle_find_replayer(ORACLE_MUSL, buf, sizeof buf, &err) != AS_OK) {
    print_message("%s: skipped\n", err.msg);
    skip();
  }
  run_example(ORACLE_MUSL);
}

/* ---- The command line ----------------------------------------------------*/

#define ALLOCSIM ALLOCSIM_BINARY_DIR "/cli/allocsim"

/* Runs "allocsim ARGS"; stdout and stderr (2>&1) into out; the exit code. */
static int allocsim(char *out, size_t len, const char *args) {
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "%s %s 2>&1", ALLOCSIM, args);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t n = fread(out, 1, len - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Usage errors exit 2 naming the option; --json keeps its contract. */
static void command_line_contract(void **state) {
  (void)state;
  char out[8192];
  assert_int_equal(allocsim(out, sizeof out,
                            "oracle x.trace --allocator "
                            "hoard"),
                   2);
  assert_non_null(strstr(out, "--allocator expects glibc, jemalloc, "
                              "mimalloc, tcmalloc or musl, got 'hoard'"));
  assert_int_equal(allocsim(out, sizeof out, "oracle x.trace --db r.db"), 2);
  assert_non_null(strstr(out, "--db needs -o OUT"));
  assert_int_equal(
      allocsim(out, sizeof out, "oracle --workload lab-brk --marks-only"), 2);
  assert_non_null(strstr(out, "--marks-only needs -o OUT"));
  assert_int_equal(
      allocsim(out, sizeof out, "oracle x.trace --marks-only -o y.astrace"), 2);
  assert_non_null(strstr(out, "--marks-only is for --workload"));
  assert_int_equal(allocsim(out, sizeof out, "oracle"), 2);
  assert_int_equal(allocsim(out, sizeof out, "oracle --env NOEQUALS x"), 2);
  assert_int_equal(allocsim(out, sizeof out, "oracle /nonexistent.trace"), 1);
  assert_int_equal(allocsim(out, sizeof out,
                            "oracle --workload=lab-brk "
                            "--sample-every=0 --json"),
                   0);
  assert_non_null(strstr(out, "{\"allocator\": \"glibc\", "));
  assert_non_null(strstr(out, "\"peak_rss_bytes\": 1044480, "));
  assert_non_null(strstr(out, "{\"label\": \"trimmed_but_last\", "
                              "\"t_ns\": "));
  assert_non_null(strstr(out, "\"rss_bytes\": 16384}"));
}

/* The oracle reads its trace three times (plan, feed, output): one on a
 * pipe is copied once and replays like the file. */
static void a_trace_on_stdin_replays(void **state) {
  (void)state;
  char out[1 << 16], cmd[1024];
  snprintf(cmd, sizeof cmd,
           "cat %s/data/example.trace | timeout 60 %s oracle - --json 2>&1",
           ALLOCSIM_SOURCE_DIR, ALLOCSIM);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t n = fread(out, 1, sizeof out - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
    fail_msg("oracle - exited %d: %s", WEXITSTATUS(st), out);
  assert_non_null(strstr(out, "{\"label\": \"after_trim\", "));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(command_line_contract),
      cmocka_unit_test(a_trace_on_stdin_replays),
      cmocka_unit_test(brk_lab_replays_to_the_known_rss),
      cmocka_unit_test(measured_trace_records_and_compares),
      cmocka_unit_test(every_setting_the_child_had_is_recorded),
      cmocka_unit_test(threads_replay_on_threads),
      cmocka_unit_test(thread_dtvs_are_in_the_stored_trace),
      cmocka_unit_test(thread_dtv_stash_counts_one_chunk),
      cmocka_unit_test(thread_dtvs_freed_with_their_stacks),
      cmocka_unit_test(thread_dtvs_for_every_allocator_on_glibc),
      cmocka_unit_test(workload_runs_store_their_calls),
      cmocka_unit_test(option_touch_and_idle_events_apply),
      cmocka_unit_test(calls_cpu_time_counts_the_calls_not_the_idles),
      cmocka_unit_test(measured_trace_is_on_the_oracle_clock),
      cmocka_unit_test(mimalloc_compares_on_the_oracle_clock),
      cmocka_unit_test(bad_events_are_refused_or_skipped),
      cmocka_unit_test(unloadable_allocators_are_refused),
      cmocka_unit_test(op_times_go_where_they_fit),
      cmocka_unit_test(preloaded_allocators_replay),
      cmocka_unit_test(jemalloc_purge_and_decay_options_apply),
      cmocka_unit_test(jemalloc_seeds_and_clock_are_recorded),
      cmocka_unit_test(jemalloc_thread_and_arena_seeds_are_recorded),
      cmocka_unit_test(a_capture_touch_writes_the_pages_it_names),
      cmocka_unit_test(musl_replays_when_built),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
