/* tests/bench/bench_spike.c -- events per second for the `spike` workload:
 * the generator alone, and the generator replayed under cpython + glibc.
 *
 * Times are process CPU time, so a busy machine skews them less.  Each
 * figure is the best of REPEATS runs (default 3) of the load-spike study's
 * spike
 * (160,000 tuples, about 950,000 events).  Not a test: run it from a
 * Release build,
 *   build/tests/bench_spike [threads [repeats]]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "engine/engine.h"
#include "traces/wl_spike.h"
#include "traces/workload.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static trace_source_t *open_spike(const char *threads) {
  char           *argv[] = {"--threads", (char *)threads};
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  if (workload_open_argv(&workload_spike, 2, argv, &src, &err) != AS_OK) {
    fprintf(stderr, "bench_spike: %s\n", err.msg);
    exit(1);
  }
  return src;
}

int main(int argc, char **argv) {
  const char *threads = argc > 1 ? argv[1] : "1";
  int         repeats = argc > 2 ? atoi(argv[2]) : 3;
  double      best_gen = 1e30, best_sim = 1e30;
  uint64_t    events = 0, peak = 0;
  for (int r = 0; r < repeats; r++) {
    /* Generator only. */
    trace_source_t *src = open_spike(threads);
    trace_event_t   ev;
    as_err_t        err = {0};
    uint64_t        n = 0;
    double          t0 = now_s();
    while (trace_source_next(src, &ev, &err) == AS_OK)
      n++;
    double dt = now_s() - t0;
    trace_source_close(src);
    if (dt < best_gen)
      best_gen = dt;
    events = n;

    /* Generator + engine + cpython:version=3.11 + glibc. */
    sim_session_t session;
    if (sim_session_open("cpython:version=3.11", "glibc:ncpus=2", NULL,
                         &session, &err) != AS_OK) {
      fprintf(stderr, "bench_spike: %s\n", err.msg);
      return 1;
    }
    src = open_spike(threads);
    sim_engine_config_t cfg = {0};
    sim_run_result_t    res;
    t0 = now_s();
    if (sim_engine_run(&cfg, &session, src, &res, &err) != AS_OK) {
      fprintf(stderr, "bench_spike: %s\n", err.msg);
      return 1;
    }
    dt = now_s() - t0;
    trace_source_close(src);
    sim_session_close(&session);
    if (dt < best_sim)
      best_sim = dt;
    peak = res.peak_rss_bytes;
  }
  printf("spike --threads %s: %" PRIu64 " events, peak %.1f MiB\n", threads,
         events, (double)peak / 1048576.0);
  printf("  generator only            %8.2f M events/s (%.3f s)\n",
         (double)events / best_gen / 1e6, best_gen);
  printf("  cpython:version=3.11+glibc %7.2f M events/s (%.3f s)\n",
         (double)events / best_sim / 1e6, best_sim);
  return 0;
}
