/* tests/bench/bench_replay.c -- replay throughput and the simulator's own
 * memory: writes an N-event binary trace (a malloc/free churn over a bounded
 * live set, ids recycled as trace writers do), then replays it against a
 * model and prints events/s and peak RSS of this process.
 *
 * usage: bench_replay [EVENTS] [MODEL] [TRACE_PATH]
 *   defaults: 10000000 ideal /tmp/allocsim-bench-<EVENTS>.astrace
 * The trace is reused when it already exists, so runs compare replay only.
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

#define LIVE_SLOTS 65536 /* bounded live set: memory must not follow N */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint64_t next_random(void) {
  /* splitmix64: deterministic and public, same stream on every machine */
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

static double now_s(void) {
  return clock_s(CLOCK_MONOTONIC);
}

/* CPU time of this process: on a shared machine, wall time also counts the
 * neighbours; both are printed. */
static double cpu_s(void) {
  return clock_s(CLOCK_PROCESS_CPUTIME_ID);
}

/* Sizes like a C or Python program's: mostly small, a few large. */
static uint64_t random_size(void) {
  uint64_t r = next_random();
  if ((r & 1023) == 0)
    return 4096 + (r >> 20) % (1 << 20);
  return 16 + (r >> 12) % 496;
}

static int write_trace(const char *path, uint64_t nevents) {
  trace_meta_t    meta = {0};
  trace_writer_t *w;
  as_err_t        err = {0};
  uint8_t        *live = calloc(LIVE_SLOTS, 1);
  trace_meta_set(&meta, "description", "bench_replay churn", NULL);
  if (live == NULL ||
      trace_writer_open(path, TRACE_FORMAT_BINARY, &meta, &w, &err) != AS_OK) {
    fprintf(stderr, "bench_replay: %s\n", err.msg);
    free(live);
    return 1;
  }
  for (uint64_t i = 0; i < nevents; i++) {
    uint64_t      slot = next_random() % LIVE_SLOTS;
    trace_event_t ev = {.t_ns = i * 10, .id = slot};
    ev.op = live[slot] ? TRACE_FREE : TRACE_MALLOC;
    ev.size = live[slot] ? 0 : random_size();
    live[slot] = !live[slot];
    if (trace_writer_write(w, &ev, &err) != AS_OK)
      break;
  }
  free(live);
  if (err.code == AS_OK && trace_writer_close(w, &err) == AS_OK)
    return 0;
  fprintf(stderr, "bench_replay: %s\n", err.msg);
  return 1;
}

int main(int argc, char **argv) {
  uint64_t    nevents = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
  const char *model = argc > 2 ? argv[2] : "ideal";
  char        path[512];
  snprintf(path, sizeof path, "%s",
           argc > 3 ? argv[3] : "/tmp/allocsim-bench.astrace");
  if (argc <= 3)
    snprintf(path, sizeof path, "/tmp/allocsim-bench-%" PRIu64 ".astrace",
             nevents);
  if (access(path, R_OK) != 0) {
    double t0 = now_s();
    if (write_trace(path, nevents) != 0)
      return 1;
    fprintf(stderr, "wrote %s in %.1f s\n", path, now_s() - t0);
  }
  sim_session_t    s;
  trace_source_t  *src;
  sim_run_result_t res;
  as_err_t         err = {0};
  if (sim_session_open(model, NULL, NULL, &s, &err) != AS_OK ||
      trace_open(path, &src, &err) != AS_OK) {
    fprintf(stderr, "bench_replay: %s\n", err.msg);
    return 1;
  }
  sim_engine_config_t cfg = {0};
  double              t0 = now_s(), c0 = cpu_s();
  as_status_t         rc = sim_engine_run(&cfg, &s, src, &res, &err);
  double              dt = now_s() - t0, dc = cpu_s() - c0;
  if (rc != AS_OK) {
    fprintf(stderr, "bench_replay: %s\n", err.msg);
    return 1;
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("model %s: %" PRIu64 " events in %.3f s wall, %.3f s CPU = %.1f M "
         "events/s wall, %.1f M events/s CPU; simulated peak RSS %.1f MiB; "
         "simulator max RSS %.1f MiB\n",
         s.model_desc, res.events, dt, dc, (double)res.events / dt / 1e6,
         (double)res.events / dc / 1e6, (double)res.peak_rss_bytes / 1048576.0,
         (double)ru.ru_maxrss / 1024.0);
  trace_source_close(src);
  sim_session_close(&s);
  return 0;
}
