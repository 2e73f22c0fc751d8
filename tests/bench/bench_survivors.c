/* tests/bench/bench_survivors.c -- how fast the survivors point of the
 * published study replays, and how much memory the simulator needs for it.
 *
 * Replays `survivors --size 64 --total 256 --fraction 1e-4` (8.4 M events)
 * against the CPython model (pymalloc + the default libc model) and prints
 * events per second for the whole replay and for the generator alone, and
 * the simulator's own peak RSS (getrusage ru_maxrss) against the simulated
 * peak RSS.  Targets: >= 30 M events/s; simulator memory <= 15% of the
 * simulated peak.  Build Release; run: build/tests/bench_survivors [args]
 * (args replace the workload options, e.g. --size 512).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/engine.h"
#include "traces/workload.h"

#define MIB 1048576.0

/* CPU time of this process: on a shared machine wall time mostly measures
 * the neighbours. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int open_wl(int argc, char **argv, trace_source_t **src) {
  static char *defaults[] = {"--size", "64",         "--total",
                             "256",    "--fraction", "1e-4"};
  as_err_t     err = {0};
  if (argc <= 1) {
    argc = 7;
    argv = defaults - 1;
  }
  if (workload_open_argv(workload_find("survivors"), argc - 1, argv + 1, src,
                         &err) != AS_OK) {
    fprintf(stderr, "bench_survivors: %s\n", err.msg);
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  /* ALLOCSIM_BENCH_MODEL / ALLOCSIM_BENCH_LIBC pick the model and the
   * composition's libc (e.g. ideal, to see what the glibc model costs). */
  const char *model = getenv("ALLOCSIM_BENCH_MODEL");
  const char *libc = getenv("ALLOCSIM_BENCH_LIBC");
  if (model == NULL)
    model = "cpython:version=3.11";
  trace_source_t *src;
  as_err_t        err = {0};

  /* 1. The generator alone. */
  if (open_wl(argc, argv, &src))
    return 1;
  trace_event_t ev;
  uint64_t      gen_events = 0;
  double        t0 = now_s();
  while (trace_source_next(src, &ev, &err) == AS_OK)
    gen_events++;
  double gen_s = now_s() - t0;
  trace_source_close(src);

  /* 2. The replay against the model. */
  if (open_wl(argc, argv, &src))
    return 1;
  sim_session_t sess;
  if (sim_session_open(model, libc, NULL, &sess, &err) != AS_OK) {
    fprintf(stderr, "bench_survivors: %s\n", err.msg);
    return 1;
  }
  sim_engine_config_t cfg = {0};
  sim_run_result_t    res;
  t0 = now_s();
  as_status_t rc = sim_engine_run(&cfg, &sess, src, &res, &err);
  double      s = now_s() - t0;
  if (rc != AS_OK) {
    fprintf(stderr, "bench_survivors: %s\n", err.msg);
    return 1;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double self_mib = (double)ru.ru_maxrss / 1024.0;
  double sim_mib = (double)res.peak_rss_bytes / MIB;
  printf("workload      %s\n", src->name);
  printf("model         %s\n", sess.model_desc);
  printf("generator     %" PRIu64 " events in %.3f CPU s = %.1f M events/s\n",
         gen_events, gen_s, (double)gen_events / gen_s / 1e6);
  printf("replay        %" PRIu64 " events in %.3f CPU s = %.1f M events/s "
         "(target >= 30)\n",
         res.events, s, (double)res.events / s / 1e6);
  printf("simulated     peak RSS %.1f MiB\n", sim_mib);
  printf("simulator     peak RSS (ru_maxrss) %.1f MiB = %.1f%% of the "
         "simulated peak (target <= 15%%)\n",
         self_mib, 100.0 * self_mib / sim_mib);
  sim_session_close(&sess);
  trace_source_close(src);
  return 0;
}
