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

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#define MI_HINT_AREA_LOW  ((uint64_t)2 << 40)
#define MI_HINT_AREA_HIGH ((uint64_t)30 << 40)

/* The start address of the /proc/self/maps line at p: hex up to '-'. */
static inline uint64_t mi_maps_line_start(const char *p) {
  uint64_t v = 0;
  for (; *p != '-' && *p != '\n'; p++)
    v = v * 16 + (uint64_t)(*p <= '9' ? *p - '0' : (*p | 0x20) - 'a' + 10);
  return v;
}

/* The start of the lowest mapping in [MI_HINT_AREA_LOW, MI_HINT_AREA_HIGH),
 * 0 for none or when the maps cannot be read.  buf (len bytes, at least a
 * line's worth) is scratch: /proc/self/maps lists mappings in address
 * order, so the first line in the area is the answer. */
static inline uint64_t mi_hint_area_start(char *buf, size_t len) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  uint64_t found = 0;
  size_t   have = 0;
  ssize_t  r;
  while (found == 0 && have < len &&
         (r = read(fd, buf + have, len - have)) != 0) {
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      break;
    have += (size_t)r;
    char *line = buf, *nl;
    while (found == 0 &&
           (nl = memchr(line, '\n', (size_t)(buf + have - line))) != NULL) {
      uint64_t v = mi_maps_line_start(line);
      if (v >= MI_HINT_AREA_LOW && v < MI_HINT_AREA_HIGH)
        found = v;
      line = nl + 1;
    }
    have -= (size_t)(line - buf);
    memmove(buf, line, have); /* the unfinished line */
  }
  close(fd);
  return found;
}

#endif
