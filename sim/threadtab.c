/* sim/threadtab.c -- per-thread record tables (see threadtab.h). */
#include "threadtab.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define THREADTAB_MIN_CAP 16

/* The capacity to grow to: doubled until it holds tid, then cut to what
 * max_bytes allows (never below tid + 1, which the caller checked). */
static uint64_t new_cap(size_t cap, uint32_t tid, size_t elem,
                        uint64_t max_bytes) {
  uint64_t n = cap > THREADTAB_MIN_CAP ? cap : THREADTAB_MIN_CAP;
  while (n <= tid) /* at most 2^32: tid is below it */
    n *= 2;
  if (max_bytes != 0 && n * elem > max_bytes)
    n = max_bytes / elem;
  return n;
}

as_status_t sim_threadtab_reach(void **tab, size_t *cap, uint32_t tid,
                                size_t elem, const void *blank,
                                uint64_t max_bytes, as_err_t *err) {
  if (tid < *cap)
    return AS_OK;
  uint64_t need = ((uint64_t)tid + 1) * elem;
  if (max_bytes != 0 && need > max_bytes)
    return as_err_set(err, AS_ENOMEM,
                      "thread id %" PRIu32 " needs a table of %" PRIu64
                      " threads (%" PRIu64 " MiB), over the simulator memory "
                      "limit of %" PRIu64 " MiB (--max-memory); thread ids "
                      "should be dense from 0",
                      tid, (uint64_t)tid + 1, need >> 20, max_bytes >> 20);
  uint64_t n = new_cap(*cap, tid, elem, max_bytes);
  char    *v = realloc(*tab, (size_t)(n * elem));
  if (v == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory for %" PRIu64 " threads",
                      n);
  for (uint64_t i = *cap; i < n; i++) {
    if (blank != NULL)
      memcpy(v + i * elem, blank, elem);
    else
      memset(v + i * elem, 0, elem);
  }
  *tab = v;
  *cap = (size_t)n;
  return AS_OK;
}
