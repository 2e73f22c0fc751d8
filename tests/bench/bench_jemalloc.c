/* tests/bench/bench_jemalloc.c -- replay throughput of the jemalloc model
 * and the simulator's own memory, on a churn trace with a fixed live set.
 *
 * Writes a binary trace: LIVE objects (default 50,000) allocated, then
 * EVENTS events alternating a free of a random live object and a malloc in
 * its place, sizes as a C or Python program's (16-511 B, one in 1024 of
 * 4 KiB-1 MiB), 10 ns apart; replays it through the engine on jemalloc
 * (decay ticks, thread cache, slabs, extents) and prints events/s (process
 * CPU time: on a shared machine wall time counts the neighbours) and the
 * simulator's peak RSS (ru_maxrss, code and libc included) against the
 * simulated peak.  Targets (issue 9): >= 20 M events/s; simulator memory
 * <= 15% of the simulated heap.  Not a test: run it from a Release build,
 *   build/tests/bench_jemalloc [EVENTS] [LIVE] [MODEL] [TRACE_PATH]
 * defaults 20000000 50000 jemalloc /tmp/allocsim-bench-je-EVENTS-LIVE.astrace
 * The trace is reused when it exists, so repeated runs time the replay.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "traces/trace_io.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint64_t next_random(void) { /* splitmix64 */
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15u);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
  return z ^ (z >> 31);
}

static double clock_s(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t random_size(void) {
  uint64_t r = next_random();
  if ((r & 1023) == 0)
    return 4096 + (r >> 20) % (1 << 20);
  return 16 + (r >> 12) % 496;
}

static int write_trace(const char *path, uint64_t nevents, uint64_t live) {
  trace_meta_t    meta = {0};
  trace_writer_t *w;
  as_err_t        err = {0};
  trace_meta_set(&meta, "description", "bench_jemalloc churn", NULL);
  if (trace_writer_open(path, TRACE_FORMAT_BINARY, &meta, &w, &err) != AS_OK) {
    fprintf(stderr, "bench_jemalloc: %s\n", err.msg);
    return 1;
  }
  uint64_t t = 0;
  for (uint64_t id = 0; id < live && err.code == AS_OK; id++) {
    trace_event_t ev = {
        .t_ns = t += 10, .op = TRACE_MALLOC, .id = id, .size = random_size()};
    trace_writer_write(w, &ev, &err);
  }
  for (uint64_t i = 0; i + 1 < nevents && err.code == AS_OK; i += 2) {
    uint64_t      id = next_random() % live;
    trace_event_t ev = {.t_ns = t += 10, .op = TRACE_FREE, .id = id};
    if (trace_writer_write(w, &ev, &err) != AS_OK)
      break;
    ev = (trace_event_t){
        .t_ns = t += 10, .op = TRACE_MALLOC, .id = id, .size = random_size()};
    trace_writer_write(w, &ev, &err);
  }
  if (err.code == AS_OK && trace_writer_close(w, &err) == AS_OK)
    return 0;
  fprintf(stderr, "bench_jemalloc: %s\n", err.msg);
  return 1;
}

int main(int argc, char **argv) {
  uint64_t    nevents = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000000;
  uint64_t    live = argc > 2 ? strtoull(argv[2], NULL, 10) : 50000;
  const char *model = argc > 3 ? argv[3] : "jemalloc";
  char        path[512];
  if (live == 0) {
    fprintf(stderr, "bench_jemalloc: LIVE must be positive\n");
    return 2;
  }
  if (argc > 4)
    snprintf(path, sizeof path, "%s", argv[4]);
  else
    snprintf(path, sizeof path,
             "/tmp/allocsim-bench-je-%" PRIu64 "-%" PRIu64 ".astrace", nevents,
             live);
  if (access(path, R_OK) != 0 && write_trace(path, nevents, live) != 0)
    return 1;
  struct rusage ru0;
  getrusage(RUSAGE_SELF, &ru0);
  sim_session_t    s;
  trace_source_t  *src;
  sim_run_result_t res;
  as_err_t         err = {0};
  if (sim_session_open(model, NULL, NULL, &s, &err) != AS_OK ||
      trace_open(path, &src, &err) != AS_OK) {
    fprintf(stderr, "bench_jemalloc: %s\n", err.msg);
    return 1;
  }
  sim_engine_config_t cfg = {0};
  double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  as_status_t rc = sim_engine_run(&cfg, &s, src, &res, &err);
  double      dt = clock_s(CLOCK_MONOTONIC) - t0;
  double      dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  if (rc != AS_OK) {
    fprintf(stderr, "bench_jemalloc: %s\n", err.msg);
    return 1;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double self_mib = (double)ru.ru_maxrss / 1024.0;
  double sim_mib = (double)res.peak_rss_bytes / 1048576.0;
  printf("model      %s\n", s.model_desc);
  printf("replay     %" PRIu64 " events (%" PRIu64 " live) in %.3f s CPU = "
         "%.1f M events/s (target >= 20); %.3f s wall = %.1f M events/s\n",
         res.events, live, dc, (double)res.events / dc / 1e6, dt,
         (double)res.events / dt / 1e6);
  printf("simulated  peak RSS %.1f MiB\n", sim_mib);
  printf("simulator  peak RSS %.1f MiB = %.1f%% of the simulated peak "
         "(target <= 15%%); %.1f MiB before the session\n",
         self_mib, 100.0 * self_mib / sim_mib, (double)ru0.ru_maxrss / 1024.0);
  trace_source_close(src);
  sim_session_close(&s);
  return 0;
}
