/* tests/bench/bench_glibc.c -- events per second through the glibc model.
 *
 * A churn of mixed sizes: a working set of `live` objects (default 100000)
 * is filled, then each step frees a random live object or allocates a new
 * one (60% 16-256 B, 30% 256 B-4 KiB, 9% 4-64 KiB, 1% 64-512 KiB, so some
 * are mmapped), with a realloc every 16th step, spread over `threads`
 * threads (default 1; more threads means more arenas).  Events go straight
 * to the model (no trace decoding), so the rate is the model plus the
 * simulated kernel.  Both wall and CPU time are reported: on a shared
 * machine the CPU rate is the comparable one.  Not a test: run it from a
 * Release build, build/tests/bench_glibc [events] [live] [threads] [options]
 * [small] With a fifth argument "small" sizes are 16 B-4 KiB only (60/40).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/glibc.h"
#include "sim/kernel.h"

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state = 88172645463325252ULL;
static uint64_t rnd(void) { /* xorshift64 */
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Uniform in [0, n) without a division (Lemire's multiply-shift). */
static uint64_t below(uint64_t n) {
  return ((rnd() >> 32) * n) >> 32;
}

static int small_only;

static uint64_t pick_size(void) {
  uint64_t r = below(small_only ? 90 : 100);
  if (r < 60)
    return 16 + below(241);
  if (r < 90)
    return 256 + below(3841);
  if (r < 99)
    return 4096 + below(61441);
  return 65536 + below(458753);
}

int main(int argc, char **argv) {
  uint64_t    n = argc > 1 ? strtoull(argv[1], NULL, 10) : 20000000u;
  uint64_t    live = argc > 2 ? strtoull(argv[2], NULL, 10) : 100000u;
  uint32_t    threads = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 1;
  const char *opts = argc > 4 && argv[4][0] ? argv[4] : NULL;
  small_only = argc > 5 && strcmp(argv[5], "small") == 0;
  if (live == 0 || threads == 0) {
    fprintf(stderr, "bench_glibc: live and threads must be positive\n");
    return 2;
  }
  sim_kernel_config_t cfg;
  sim_kernel_config_default(&cfg);
  sim_kernel_t *k = NULL;
  model_t      *m = NULL;
  as_err_t      err = {0};
  model_opts_t  o;
  if (sim_kernel_create(&cfg, &k, &err) != AS_OK ||
      model_opts_parse("glibc", model_glibc_methods.options, opts, &o, &err) !=
          AS_OK) {
    fprintf(stderr, "bench_glibc: %s\n", err.msg);
    return 1;
  }
  model_ctx_t ctx = {.kernel = k};
  if (model_glibc_methods.create(&o, &ctx, &m, &err) != AS_OK) {
    fprintf(stderr, "bench_glibc: %s\n", err.msg);
    return 1;
  }
  m->methods = &model_glibc_methods;
  m->opts = o;

  /* Occupancy of each slot (ids are the slots themselves), one bit per
   * slot: the bench needs only whether a slot is live, and a bitmap (12.5
   * KB for 100000 slots) stays in L1/L2 where an array of sizes (800 KB)
   * missed the cache on most steps and charged the bench's own misses to
   * the model's rate. */
  uint64_t *used = calloc((live + 63) / 64, sizeof *used);
  if (used == NULL)
    return 1;
  for (uint32_t t = 1; t < threads; t++) {
    trace_event_t e = {.op = TRACE_THREAD_START, .thread = t};
    model_thread(m, &e, &err);
  }
  uint64_t events = 0, peak_rss = 0;
  double   t0 = clock_s(CLOCK_MONOTONIC);
  double   c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  for (uint64_t step = 0; step < n; step++) {
    uint64_t      slot = below(live);
    trace_event_t e = {.id = slot, .thread = (uint32_t)below(threads)};
    as_status_t   rc;
    uint64_t     *word = &used[slot >> 6];
    uint64_t      bit = UINT64_C(1) << (slot & 63);
    if ((*word & bit) == 0) {
      e.op = TRACE_MALLOC;
      e.size = pick_size();
      *word |= bit;
      rc = model_alloc(m, &e, &err);
    } else if (step % 16 == 0) {
      e.op = TRACE_REALLOC;
      e.size = pick_size();
      rc = model_realloc(m, &e, &err);
    } else {
      e.op = TRACE_FREE;
      *word &= ~bit;
      rc = model_free(m, &e, &err);
    }
    if (rc != AS_OK) {
      fprintf(stderr, "bench_glibc: step %" PRIu64 ": %s\n", step, err.msg);
      return 1;
    }
    events++;
    if ((step & 0xffff) == 0) {
      uint64_t r = sim_kernel_rss_bytes(k);
      if (r > peak_rss)
        peak_rss = r;
    }
  }
  double        dt = clock_s(CLOCK_MONOTONIC) - t0;
  double        dc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  model_stats_t st;
  model_stats(m, &st);
  printf("bench_glibc: %" PRIu64 " events in %.3f s wall = %.2f M events/s, "
         "%.3f s CPU = %.2f M events/s (live %" PRIu64 " objects, %" PRIu64
         " B; RSS %" PRIu64 " B, peak %" PRIu64 " B; %u threads, arenas %u)\n",
         events, dt, (double)events / dt / 1e6, dc, (double)events / dc / 1e6,
         st.live_objects, st.live_bytes, sim_kernel_rss_bytes(k), peak_rss,
         threads, glibc_inspect_narenas(m));
  free(used);
  model_destroy(m);
  sim_kernel_destroy(k);
  return 0;
}
