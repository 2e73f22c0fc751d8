/* scripts/measure/jemalloc/je_decay_seeds.c -- how far arena 0's muzzy
 * decay lies past its dirty one in a jemalloc that is running, which is
 * sizeof (decay_t) in 5.3.0 (pac.h:114-115) and sizeof (arena_decay_t) in
 * 5.2.1 (arena_structs_b.h:174-175): each decay seeds its jitter with its
 * own address, so a muzzy decay's seed is the dirty one's plus this
 * (models/jemalloc_internal.h JE_SIZEOF_DECAY).
 *
 * It finds both with the search the oracle and the capture use
 * (traces/je_seeds.h): arena 0's decay_dirty past its nactive, then the
 * next decay_t past that.  A decay with decay_ms <= 0 draws no jitter, and
 * muzzy decay is off by default in both releases, so run it with
 * MALLOC_CONF=muzzy_decay_ms:10000.  From the project's root:
 *
 *   cc -I. -Itraces scripts/measure/jemalloc/je_decay_seeds.c \
 *      -o /tmp/je_decay_seeds -ldl
 *   MALLOC_CONF=muzzy_decay_ms:10000 \
 *     LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /tmp/je_decay_seeds
 *
 * prints the library's version and the distance in bytes; exits 1 when no
 * jemalloc is loaded or a decay is not found.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "traces/je_seeds.h"

int main(void) {
  free(malloc(100)); /* jemalloc initialised, arena 0 made */
  je_seeds_mallctl_fn mallctl =
      (je_seeds_mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl");
  const char *version = NULL;
  size_t      len = sizeof version;
  if (mallctl == NULL || mallctl("version", &version, &len, NULL, 0) != 0) {
    fprintf(stderr, "je_decay_seeds: no jemalloc loaded (LD_PRELOAD)\n");
    return 1;
  }
  static char buf[1 << 16]; /* /proc/self/maps scratch */
  uint64_t    dirty = je_seeds_decay(mallctl, buf, sizeof buf);
  uintptr_t end = dirty == 0 ? 0 : je_seeds_mapping_end(dirty, buf, sizeof buf);
  if (end > dirty + JE_SEEDS_WINDOW)
    end = dirty + JE_SEEDS_WINDOW;
  uint64_t muzzy = dirty == 0 ? 0 : je_seeds_search(dirty + 8, end);
  if (muzzy == 0) {
    fprintf(stderr,
            "je_decay_seeds: jemalloc %s: %s decay not found "
            "(MALLOC_CONF=muzzy_decay_ms:10000?)\n",
            version, dirty == 0 ? "dirty" : "muzzy");
    return 1;
  }
  printf("jemalloc %s: muzzy decay %" PRIu64 " bytes past the dirty one\n",
         version, muzzy - dirty);
  return 0;
}
