/* traces/capture/allocx.c -- jemalloc's own allocation API (mallocx,
 * rallocx, xallocx, sdallocx, dallocx), recorded as the malloc family.
 *
 * Why: programs written for jemalloc call this API directly when jemalloc
 * is loaded (folly's usingJEMalloc() looks for mallocx and the rest, and
 * its strings, vectors and sized deallocation then use them), and those
 * calls reach jemalloc past malloc and free: unrecorded, like C++'s new
 * with jemalloc preloaded before cxx.c.  So the recorder defines them too,
 * records each call, and forwards it to jemalloc (g_real, RTLD_NEXT).
 *
 * flags (jemalloc 5.3.0 include/jemalloc/jemalloc_macros.h.in:15-33,
 * include/jemalloc/internal/jemalloc_internal_types.h:44-61): the low 6
 * bits are lg(alignment), 0 for none (MALLOCX_LG_ALIGN); 0x40 is
 * MALLOCX_ZERO; above them the tcache and arena choices, which the trace
 * does not carry (the models pick as jemalloc does without them).  An
 * aligned request is recorded as memalign, a zeroed one as calloc.
 * xallocx resizes in place or not at all (src/jemalloc.c:3753): it is
 * recorded as a realloc to the requested size at the same address when
 * the resulting usable size reaches it, and as a failed realloc when not.
 *
 * Where jemalloc is not loaded (a program that found these names through
 * the recorder's own definitions), the malloc family serves them as
 * jemalloc's manual defines them, through the recording wrappers.  A limit:
 * a program that decides whether jemalloc is loaded by a weak reference to
 * mallocx alone now finds one and takes its jemalloc path under capture
 * (folly checks nine names, among them sallocx, nallocx and mallctlbymib,
 * which the recorder does not define, and probes mallctl, which answers
 * ENOENT here). */
#include <malloc.h>
#include <stdlib.h>

#include "capture_int.h"

#define MALLOCX_LG_ALIGN_MASK 0x3f
#define MALLOCX_ZERO          0x40

static size_t flags_align(int flags) {
  return (size_t)1 << (flags & MALLOCX_LG_ALIGN_MASK) & ~(size_t)1;
}

EXPORT void *mallocx(size_t size, int flags) {
  size_t align = flags_align(flags);
  bool   zero = flags & MALLOCX_ZERO;
  if (!capture_ready() || g_real.mallocx == NULL)
    return align  ? aligned_alloc(align, size)
           : zero ? calloc(1, size)
                  : malloc(size);
  void *p = g_real.mallocx(size, flags);
  if (LIKELY(!capture_passthrough()) && p != NULL)
    capture_record_alloc(align  ? CAPTURE_OP_MEMALIGN
                         : zero ? CAPTURE_OP_CALLOC
                                : CAPTURE_OP_MALLOC,
                         CAPTURE_DOMAIN_RAW, p, size, align);
  return p;
}

static void *call_rallocx(void *ctx, void *old, size_t n) {
  return g_real.rallocx(old, n, *(const int *)ctx);
}

EXPORT void *rallocx(void *ptr, size_t size, int flags) {
  if (!capture_ready() || g_real.rallocx == NULL)
    return realloc(ptr, size);
  if (capture_passthrough())
    return g_real.rallocx(ptr, size, flags);
  return capture_record_realloc(CAPTURE_DOMAIN_RAW, ptr, size, call_rallocx,
                                &flags);
}

typedef struct xallocx_call_s xallocx_call_t;
struct xallocx_call_s {
  size_t extra;
  int    flags;
  size_t usable; /* what xallocx returned */
};

/* ptr when the block now holds n bytes, NULL (a failed resize) when not. */
static void *call_xallocx(void *ctx, void *old, size_t n) {
  xallocx_call_t *c = ctx;
  c->usable = g_real.xallocx(old, n, c->extra, c->flags);
  return c->usable >= n ? old : NULL;
}

EXPORT size_t xallocx(void *ptr, size_t size, size_t extra, int flags) {
  if (!capture_ready() || g_real.xallocx == NULL)
    return malloc_usable_size(ptr); /* no resize in place */
  if (capture_passthrough())
    return g_real.xallocx(ptr, size, extra, flags);
  xallocx_call_t c = {.extra = extra, .flags = flags};
  capture_record_realloc(CAPTURE_DOMAIN_RAW, ptr, size, call_xallocx, &c);
  return c.usable;
}

/* A release of ptr through jemalloc's call release (sdallocx, dallocx). */
#define RECORD_RELEASE(ptr, release)                                           \
  do {                                                                         \
    if (!capture_ready() || g_real.dallocx == NULL ||                          \
        g_real.sdallocx == NULL) {                                             \
      free(ptr);                                                               \
      return;                                                                  \
    }                                                                          \
    if (capture_passthrough()) {                                               \
      release;                                                                 \
      return;                                                                  \
    }                                                                          \
    uint64_t held = capture_release_begin(ptr);                                \
    capture_record_free(CAPTURE_DOMAIN_RAW, ptr);                              \
    release;                                                                   \
    capture_release_end(held);                                                 \
  } while (0)

EXPORT void sdallocx(void *ptr, size_t size, int flags) {
  RECORD_RELEASE(ptr, g_real.sdallocx(ptr, size, flags));
}

EXPORT void dallocx(void *ptr, int flags) {
  RECORD_RELEASE(ptr, g_real.dallocx(ptr, flags));
}
