/* tests/bench/bench_kernel.c -- touches per second on the kernel hot path.
 *
 * Times are process CPU time, so a busy machine skews them less.
 * Maps a 256 MiB RW region, writes every page once (the slow path: page
 * faults), then times 10^8 small touches (8 to 64 bytes) at pseudo-random
 * offsets, the shape of a model writing the objects it hands out.  Prints
 * both rates.  Not a test: run it from a Release build,
 *   build/tests/bench_kernel [touches]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sim/kernel.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  uint64_t            n = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000000u;
  uint64_t            region = (uint64_t)256 << 20;
  sim_kernel_config_t cfg;
  sim_kernel_config_default(&cfg);
  sim_kernel_t *k = NULL;
  as_err_t      err = {0};
  sim_addr_t    base;
  if (sim_kernel_create(&cfg, &k, &err) != AS_OK ||
      sim_kernel_mmap(k, region, 0, SIM_PROT_RW, SIM_OWNER_IDEAL, &base,
                      &err) != AS_OK) {
    fprintf(stderr, "bench_kernel: %s\n", err.msg);
    return 1;
  }

  /* First touch of every page: the fault path. */
  uint64_t pages = region / cfg.page_size;
  double   t0 = now_s();
  for (uint64_t p = 0; p < pages; p++) {
    if (sim_kernel_touch(k, base + p * cfg.page_size, 16, &err) != AS_OK) {
      fprintf(stderr, "bench_kernel: %s\n", err.msg);
      return 1;
    }
  }
  double fault_s = now_s() - t0;

  /* Steady state: small writes to resident memory.  xorshift64 keeps the
   * offsets cheap and deterministic. */
  uint64_t x = 0x9E3779B97F4A7C15u, bad = 0;
  t0 = now_s();
  for (uint64_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    uint64_t off = (x >> 8) & (region - 64); /* 64-byte slots */
    bad += sim_kernel_touch(k, base + off, 8 + (x & 56), &err) != AS_OK;
  }
  double touch_s = now_s() - t0;
  if (bad != 0 || sim_kernel_rss_bytes(k) != region) {
    fprintf(stderr,
            "bench_kernel: %" PRIu64 " failed touches, rss %" PRIu64 "\n", bad,
            sim_kernel_rss_bytes(k));
    return 1;
  }
  printf("first touches: %" PRIu64 " pages in %.3f s = %.3g faults/s\n", pages,
         fault_s, (double)pages / fault_s);
  printf("small touches: %" PRIu64 " in %.3f s = %.3g touches/s\n", n, touch_s,
         (double)n / touch_s);
  sim_kernel_destroy(k);
  return 0;
}
