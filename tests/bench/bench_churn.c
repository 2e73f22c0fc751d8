/* tests/bench/bench_churn.c -- events per second of any model on the churn
 * of the jemalloc and mimalloc issues, and the simulator's own memory
 * against the heap it simulates.
 *
 * 2 x `live` slots (live defaults to 50,000) hold objects of the
 * churn-purge workload's sizes (512 B, 1 KiB, 2 KiB in the ratio
 * 150,000 : 100,000 : 50,000); each step picks a random slot and frees its
 * object or allocates a new one, so about `live` objects stay live and
 * every size class keeps emptying and refilling pages.  Each
 * event is 100 ns after the previous (the cost model's pace for such calls,
 * sim/cost.h), so time-driven rules (mimalloc's purge expiry, jemalloc's
 * decay) act as in a real run.  Events go straight to the model (no trace
 * decoding), so the rate is the model plus the simulated kernel; both wall
 * and CPU time are printed, the CPU rate being the comparable one on a
 * shared machine.
 *
 * Simulator memory: this process's RSS (VmRSS) after the run minus before
 * the model was created, against the simulated peak RSS.
 *
 * Not a test: run it from a Release build,
 *   build/tests/bench_churn [events] [live] [model spec]
 * defaults 20000000 50000 mimalloc.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/model.h"
#include "sim/kernel.h"

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15u;
static uint64_t rnd(void) { /* xorshift64 */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Uniform in [0, n) (Lemire's multiply-shift on the top 32 bits). */
static uint64_t below(uint64_t n) {
  return ((rnd() >> 32) * n) >> 32;
}

/* 512 B : 1 KiB : 2 KiB as 3 : 2 : 1. */
static uint64_t churn_size(void) {
  uint64_t r = below(6);
  return r < 3 ? 512 : r < 5 ? 1024 : 2048;
}

/* This process's resident bytes (/proc/self/statm field 2). */
static uint64_t self_rss(void) {
  FILE              *f = fopen("/proc/self/statm", "r");
  unsigned long long size = 0, res = 0;
  if (f != NULL) {
    if (fscanf(f, "%llu %llu", &size, &res) != 2)
      res = 0;
    fclose(f);
  }
  return (uint64_t)res * 4096u;
}

int main(int argc, char **argv) {
  uint64_t    n = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000000u;
  uint64_t    live = argc > 2 ? strtoull(argv[2], NULL, 10) : 50000u;
  const char *spec = argc > 3 ? argv[3] : "mimalloc";
  if (live == 0 || n == 0) {
    fprintf(stderr, "bench_churn: events and live must be positive\n");
    return 2;
  }
  /* A live slot's size (0: empty): 2 bytes a slot keeps the bench's own
   * state small next to the model's. */
  uint64_t  slots = 2 * live;
  uint16_t *sizes = calloc(slots, sizeof *sizes);
  if (sizes == NULL)
    return 1;
  uint64_t            rss0 = self_rss();
  sim_kernel_config_t cfg;
  sim_kernel_config_default(&cfg);
  sim_kernel_t *k = NULL;
  model_t      *m = NULL;
  as_err_t      err = {0};
  if (sim_kernel_create(&cfg, &k, &err) != AS_OK) {
    fprintf(stderr, "bench_churn: %s\n", err.msg);
    return 1;
  }
  model_ctx_t ctx = {.kernel = k};
  if (model_create_from_spec(spec, &ctx, &m, &err) != AS_OK) {
    fprintf(stderr, "bench_churn: %s: %s\n", spec, err.msg);
    return 1;
  }
  uint64_t peak_rss = 0;
  double   t0 = clock_s(CLOCK_MONOTONIC);
  double   c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  for (uint64_t step = 0; step < n; step++) {
    uint64_t      slot = below(slots);
    trace_event_t e = {.id = slot, .t_ns = step * 100};
    as_status_t   rc;
    if (sizes[slot] == 0) {
      e.op = TRACE_MALLOC;
      e.size = churn_size();
      sizes[slot] = (uint16_t)e.size;
      rc = model_alloc(m, &e, &err);
    } else {
      e.op = TRACE_FREE;
      e.prev_size = sizes[slot];
      sizes[slot] = 0;
      rc = model_free(m, &e, &err);
    }
    if (rc != AS_OK) {
      fprintf(stderr, "bench_churn: step %" PRIu64 ": %s\n", step, err.msg);
      return 1;
    }
    if ((step & 0xffff) == 0) {
      uint64_t r = sim_kernel_rss_bytes(k);
      if (r > peak_rss)
        peak_rss = r;
    }
  }
  double        dt = clock_s(CLOCK_MONOTONIC) - t0;
  double        dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  uint64_t      own = self_rss() - rss0;
  model_stats_t st;
  model_stats(m, &st);
  printf("bench_churn %s: %" PRIu64 " events in %.3f s wall = %.2f M "
         "events/s, %.3f s CPU = %.2f M events/s; live %" PRIu64
         " objects, %.1f MiB; simulated peak RSS %.1f MiB; simulator memory "
         "%.1f MiB = %.1f%% of it\n",
         m->methods->name, n, dt, (double)n / dt / 1e6, dc,
         (double)n / dc / 1e6, st.live_objects,
         (double)st.live_bytes / 1048576.0, (double)peak_rss / 1048576.0,
         (double)own / 1048576.0,
         peak_rss ? 100.0 * (double)own / (double)peak_rss : 0.0);
  model_destroy(m);
  sim_kernel_destroy(k);
  free(sizes);
  return 0;
}
