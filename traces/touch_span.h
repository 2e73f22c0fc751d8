/* traces/touch_span.h -- a capture's touch ranges as pages of the object's
 * span, so that a replay whose object starts elsewhere in its page faults
 * as many pages as the captured process did.
 *
 * The recorder reports the resident pages of an allocation's span (from
 * the page holding its first byte to the page holding its last), each
 * range clipped to the allocation (traces/capture/touch.c emit_touch).  So
 * a range either starts at the object's first byte or on a page boundary
 * of the captured process, and ends at its last byte or on such a
 * boundary.  Where the object starts in its page differs between runs:
 * jemalloc 5.3.0 puts a large allocation at a random cache-line multiple
 * of its first page (include/jemalloc/internal/arena_inlines_b.h:427,
 * called from src/arena.c:351), and a model or another process draws
 * another offset.  Replayed as bytes, a
 * range of k whole pages then straddles k + 1 pages (an xz -T2 capture
 * under jemalloc: 3.5 MiB, 1.6% of its peak, too many).  Replayed as pages,
 * page j of the captured span is page j of the replay's.
 */
#ifndef ALLOCSIM_TRACES_TOUCH_SPAN_H
#define ALLOCSIM_TRACES_TOUCH_SPAN_H

#include <stdbool.h>
#include <stdint.h>

/* The page size a trace's touches are measured in, into *page: its
 * page_size provenance where it also declares touch_threshold, as a
 * capture does; else 0 (its touches are bytes).  False when that
 * page_size is not a power of two from 2 to 1 GiB in decimal (the caller
 * names the file and the key). */
static inline bool touch_span_page(const char *touch_threshold,
                                   const char *page_size, uint64_t *page) {
  *page = 0;
  if (touch_threshold == NULL || page_size == NULL)
    return true;
  uint64_t    n = 0;
  const char *p = page_size;
  for (; *p >= '0' && *p <= '9' && n <= ((uint64_t)1 << 30); p++)
    n = n * 10 + (uint64_t)(*p - '0');
  if (p == page_size || *p != '\0' || n > ((uint64_t)1 << 30) || n < 2 ||
      (n & (n - 1)) != 0)
    return false;
  *page = n;
  return true;
}

/* The pages [*first, *end) of the captured span that a touch of [off, off
 * + len) of an object of size bytes names, with page the captured
 * process's page size (a power of two); false when the range is the whole
 * object or empty, which says nothing of the page grid (then its bytes
 * are its bytes). */
static inline bool touch_span_pages(uint64_t size, uint64_t off, uint64_t len,
                                    uint64_t page, uint64_t *first,
                                    uint64_t *end) {
  if (len == 0 || (off == 0 && len == size))
    return false;
  /* Where the object started in its page: a range starting inside the
   * object starts on a page boundary, else it ends on one. */
  uint64_t start_in_page =
      off != 0 ? (page - off % page) % page : (page - len % page) % page;
  *first = (start_in_page + off) / page;
  *end = (start_in_page + off + len + page - 1) / page;
  return true;
}

/* The bytes [*lo, *hi) of the object at addr (size bytes) that hold pages
 * [first, end) of its span in this layout; *lo == *hi when none do. */
static inline void touch_span_bytes(uint64_t addr, uint64_t size, uint64_t page,
                                    uint64_t first, uint64_t end, uint64_t *lo,
                                    uint64_t *hi) {
  uint64_t base = addr & ~(page - 1);
  uint64_t a = base + first * page, b = base + end * page;
  *lo = a > addr ? a : addr;
  *hi = b < addr + size ? b : addr + size;
  if (*hi < *lo)
    *hi = *lo;
}

#endif
