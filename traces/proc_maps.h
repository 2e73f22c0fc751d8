/* traces/proc_maps.h -- a walk over /proc/self/maps that allocates
 * nothing, for code that runs inside a process whose malloc it interposes
 * or replays (the capture recorder, the oracle's replayer): where
 * mimalloc's hints went (mi_hint_area.h), which mapping holds jemalloc's
 * arena (je_seeds.h).
 */
#ifndef ALLOCSIM_PROC_MAPS_H
#define ALLOCSIM_PROC_MAPS_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* The hex number at p, up to the first character that is not a hex digit
 * (a maps line's start before '-', its end before ' '). */
static inline uint64_t proc_maps_hex(const char *p) {
  uint64_t v = 0;
  for (;; p++) {
    char lower = (char)(*p | 0x20);
    if (*p >= '0' && *p <= '9')
      v = v * 16 + (uint64_t)(*p - '0');
    else if (lower >= 'a' && lower <= 'f')
      v = v * 16 + (uint64_t)(lower - 'a' + 10);
    else
      return v;
  }
}

/* A line of the maps ("lo-hi perms ..."), ending in '\n'; true stops the
 * walk. */
typedef bool (*proc_maps_fn)(const char *line, void *ctx);

/* Calls match on each line of /proc/self/maps, in address order, until it
 * returns true: then true; false when no line matched or the maps cannot
 * be read.  buf (len bytes, at least a line's worth) is scratch. */
static inline bool proc_maps_find(char *buf, size_t len, proc_maps_fn match,
                                  void *ctx) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  bool    found = false;
  size_t  have = 0;
  ssize_t r;
  while (!found && have < len && (r = read(fd, buf + have, len - have)) != 0) {
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      break;
    have += (size_t)r;
    char *line = buf, *nl;
    while (!found &&
           (nl = memchr(line, '\n', (size_t)(buf + have - line))) != NULL) {
      found = match(line, ctx);
      line = nl + 1;
    }
    have -= (size_t)(line - buf);
    memmove(buf, line, have); /* the unfinished line */
  }
  close(fd);
  return found;
}

#endif
