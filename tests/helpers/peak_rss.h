/* tests/helpers/peak_rss.h -- the test process's peak RSS, to check that an
 * input costs the memory it needs and not a table up to its largest id.
 * Include after <cmocka.h>. */
#ifndef ALLOCSIM_TEST_PEAK_RSS_H
#define ALLOCSIM_TEST_PEAK_RSS_H

#include <stdint.h>
#include <sys/resource.h>

static inline uint64_t peak_rss_bytes(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (uint64_t)u.ru_maxrss * 1024;
}

/* Fails the test if the peak RSS grew by more than limit bytes since
 * before (a peak_rss_bytes() reading); what says what was doing it. */
static inline void assert_peak_grew_at_most(uint64_t before, uint64_t limit,
                                            const char *what) {
  uint64_t grew = peak_rss_bytes() - before;
  if (grew > limit)
    fail_msg("%s grew the peak RSS by %llu MiB (at most %llu expected)", what,
             (unsigned long long)(grew >> 20),
             (unsigned long long)(limit >> 20));
}

#endif
