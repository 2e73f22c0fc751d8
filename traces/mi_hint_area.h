/* traces/mi_hint_area.h -- where mimalloc's first aligned-hint mapping
 * went, read from /proc/self/maps by the process that ran mimalloc (the
 * oracle's replayer, the capture recorder at exit).
 *
 * mimalloc 2.x and 3.x place segments and arenas at address hints that
 * start at a random point in [2 TiB, 6 TiB) and wrap after 30 TiB (v2.1.7
 * src/os.c:91-93 MI_HINT_BASE, MI_HINT_AREA, MI_HINT_MAX); nothing else a
 * Linux process maps by default lands there (plain mmaps go top-down from
 * below the stack, 85 TiB and up on x86-64).  The hints only grow, so the
 * lowest mapping in the area is where the first hinted mapping went: the
 * mimalloc 2.1 model's `hint_start`, which 2.1.7 needs because it lays a
 * page's blocks out by their absolute address.
 *
 * Header-only, and with no allocation: the recorder calls it from inside
 * a process whose malloc it interposes.
 */
#ifndef ALLOCSIM_MI_HINT_AREA_H
#define ALLOCSIM_MI_HINT_AREA_H

#include <stdint.h>

#include "proc_maps.h"

#define MI_HINT_AREA_LOW  ((uint64_t)2 << 40)
#define MI_HINT_AREA_HIGH ((uint64_t)30 << 40)

static inline bool mi_hint_area_line(const char *line, void *found) {
  uint64_t v = proc_maps_hex(line);
  if (v < MI_HINT_AREA_LOW || v >= MI_HINT_AREA_HIGH)
    return false;
  *(uint64_t *)found = v;
  return true;
}

/* The start of the lowest mapping in [MI_HINT_AREA_LOW, MI_HINT_AREA_HIGH),
 * 0 for none or when the maps cannot be read.  buf (len bytes, at least a
 * line's worth) is scratch: /proc/self/maps lists mappings in address
 * order, so the first line in the area is the answer. */
static inline uint64_t mi_hint_area_start(char *buf, size_t len) {
  uint64_t found = 0;
  proc_maps_find(buf, len, mi_hint_area_line, &found);
  return found;
}

#endif
