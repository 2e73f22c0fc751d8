/* traces/allocator_version.h -- an allocator's version string as one
 * number, for the recorder (traces/capture/stream.c) and the oracle's
 * replayer (traces/oracle/replayer.c), which both ask the loaded allocator
 * and need no stdio to read the answer. */
#ifndef ALLOCSIM_ALLOCATOR_VERSION_H
#define ALLOCSIM_ALLOCATOR_VERSION_H

#include <stdint.h>

/* "5.3.0-0-g54eaed1d8b56..." (jemalloc's mallctl("version")) as major *
 * 10000 + minor * 100 + patch, 50300; 0 unless it starts with three dotted
 * numbers, minor and patch below 100. */
static inline uint32_t allocator_version_code(const char *v) {
  uint32_t part[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++) {
    if (v == NULL || *v < '0' || *v > '9')
      return 0;
    while (*v >= '0' && *v <= '9' && part[i] < 100000)
      part[i] = part[i] * 10 + (uint32_t)(*v++ - '0');
    if (i < 2 && *v++ != '.')
      return 0;
  }
  return part[1] < 100 && part[2] < 100 && part[0] < 100000
             ? part[0] * 10000 + part[1] * 100 + part[2]
             : 0;
}

#endif
