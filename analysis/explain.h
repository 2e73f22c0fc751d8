/* analysis/explain.h -- what holds memory at an instant and why.
 *
 * Every resident OS page is attributed, byte by byte, to the model region
 * covering it (models walk their heaps: chunks, pools, pages), and regions
 * are grouped by the mechanism that holds them (model_mechanism_t: "free
 * chunks inside the heap", "empty pools in arenas that still hold
 * objects").  Bytes of resident pages that no region covers are attributed
 * to the page's owner (the program's baseline, thread stacks, allocator
 * metadata outside any region).  So the items add up to RSS exactly.
 *
 * For a mechanism that holds the program's objects, the item is split into
 * the live bytes and the allocator's overhead on them (headers, size-class
 * rounding, free blocks in a pool).  For one that holds free memory, the
 * objects counted are those pinning it: the live objects in the same
 * top-level unit (the arena, heap or segment that cannot be returned while
 * they live).
 */
#ifndef ALLOCSIM_EXPLAIN_H
#define ALLOCSIM_EXPLAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../engine/engine.h"

#define EXPLAIN_MAX_ITEMS 48

typedef struct explain_item_s explain_item_t;
struct explain_item_s {
  char mechanism[48];     /* mechanism key, "<key>.live", "<key>.overhead"
                             or "owner.<owner>" for uncovered pages */
  uint64_t bytes;         /* resident bytes attributed */
  uint64_t objects;       /* live objects in (live) or pinning (free) */
  uint64_t units;         /* top-level units (arenas, heaps) involved */
  bool     live;          /* the program's own bytes */
  bool     releasable;    /* a policy or call could give it back */
  char     sentence[768]; /* one plain sentence (and where known, when
                             its objects were allocated) */
  char allocated_in[192]; /* when its objects were allocated, by
                             phase, largest first: "after mark build
                             (4078), before any mark (12)"; "" if
                             unknown */
};

/* Memory by call site (explain --by-site; docs/capture.md "Call sites").
 * A site's live bytes are the sizes of its live objects; its retained bytes
 * its share of what the allocator keeps resident in the top-level units
 * (arena, heap, segment) holding them: a unit's resident bytes that are not
 * live bytes (free chunks, empty pools, headers, rounding) are split among
 * the sites of the live objects in it, in proportion to their live bytes. */
#define EXPLAIN_FRAME_TEXT 256
typedef struct explain_site_s explain_site_t;
struct explain_site_s {
  uint64_t site;           /* the trace's site id; 0: no site recorded */
  uint64_t live_bytes;     /* of its live objects */
  uint64_t live_objects;   /* its live objects */
  uint64_t retained_bytes; /* its share of the free memory they pin */
  uint32_t nframes;
  char     function[128]; /* the innermost frame's function, or "" */
  char     frame[TRACE_FRAMES_MAX][EXPLAIN_FRAME_TEXT]; /* symbolised */
};

typedef struct explain_result_s explain_result_t;
struct explain_result_s {
  char     label[64]; /* the mark explained, or "end" */
  uint64_t t_ns;
  uint64_t rss_bytes;
  uint64_t live_bytes;
  /* A recorded run's RSS measured at the mark (a capture writes it as an
   * rss event at the mark's time), beside the simulated rss_bytes. */
  bool           has_measured;
  uint64_t       measured_rss_bytes;
  size_t         nitems;
  explain_item_t items[EXPLAIN_MAX_ITEMS]; /* largest first */
  /* With explain_opts_t.by_site: the top sites, most retained first
   * (heap; explain_result_release frees it), how many sites had live
   * objects, and the retained bytes of units holding no live object (no
   * site pins them). */
  explain_site_t *sites;
  size_t          nsites, sites_total;
  uint64_t        unpinned_bytes;
  bool            by_site;   /* sites were asked for */
  bool            has_sites; /* the trace defines call sites */
};

/* Frees what a result holds beyond itself (its sites). */
void explain_result_release(explain_result_t *r);

/* Groups the memory of session s by call site into out->sites (the top
 * `top`), from sites, the replayed source wrapped by trace_sites_wrap.
 * Models that cannot locate objects give every site its live bytes and no
 * retained bytes. */
as_status_t explain_by_site(const sim_session_t *s, const trace_source_t *sites,
                            size_t top, explain_result_t *out, as_err_t *err);

/* Attributes the current RSS of session s (live_bytes: the program's, as
 * the engine counts them) into *out.  tracker, the replayed source wrapped
 * by trace_phases_wrap (or NULL), tells each item the phases its objects
 * were allocated in, for models that can locate objects. */
as_status_t explain_now(const sim_session_t *s, uint64_t live_bytes,
                        const trace_source_t *tracker, explain_result_t *out,
                        as_err_t *err);

/* What explain_trace explains. */
typedef struct explain_opts_s explain_opts_t;
struct explain_opts_s {
  const char *at;            /* a mark label, or NULL: the end and the mark
                                with the largest RSS - live gap */
  const char         *model; /* model spec */
  const char         *libc;  /* libc spec or NULL */
  sim_kernel_config_t kernel;
  uint64_t            settle_ns; /* run the clock on after the trace */
  bool                lenient;
  bool                by_site; /* also group by call site */
  size_t              top;     /* sites kept (by_site); 0 = 10 */
};

/* Opens (again) the source to explain: explain may replay it twice. */
typedef as_status_t (*explain_open_fn)(void *user, trace_source_t **src,
                                       as_err_t *err);

/* Marks a replay saw: their labels (each once), and the mark with the
 * widest gap between RSS and live bytes. */
#define EXPLAIN_MAX_MARKS 32
typedef struct explain_marks_s explain_marks_t;
struct explain_marks_s {
  size_t   n;
  char     label[EXPLAIN_MAX_MARKS][64];
  char     best[64];
  uint64_t best_gap;
  uint64_t best_t_ns;
  bool     found; /* the mark asked for was reached */
  uint64_t found_t_ns;
  bool     has_measured; /* an rss sample at the found mark's time */
  uint64_t measured_rss_bytes;
};

/* A recorded run's RSS at a mark: capture writes it as an rss sample at the
 * mark's time, which the engine passes on after the mark.  When the mark
 * was found (found) at t_ns and smp is that sample, takes its RSS into
 * *rss, once (*has). */
void explain_take_measured(const sim_sample_t *smp, bool found, uint64_t t_ns,
                           bool *has, uint64_t *rss);

/* Called with the session as it is at the chosen instant (a mark sample,
 * or the end with label "end"). */
typedef as_status_t (*explain_at_fn)(void *user, const sim_session_t *s,
                                     const sim_sample_t *at, as_err_t *err);

/* Replays the source once and calls fn at the first mark called mark, or
 * at the end when mark is NULL; *marks receives what the replay saw.  A
 * mark the trace lacks is AS_EINVAL listing the marks.  model_desc (may be
 * NULL) receives the model's description.  explain, map and report build
 * on it. */
as_status_t explain_replay_at(const explain_opts_t *o, explain_open_fn open,
                              void *user, const char *mark, explain_at_fn fn,
                              void *fn_user, explain_marks_t *marks,
                              char *model_desc, size_t desc_len, as_err_t *err);

/* Replays the source and explains the chosen instants: with --at, that
 * mark (its first occurrence); else the end and, when it is not the end,
 * the mark with the largest gap between RSS and live bytes (found by a
 * first replay, explained by a second).  *n receives how many (1 or 2).
 * A --at naming no mark of the trace is AS_EINVAL listing the marks. */
as_status_t explain_trace(const explain_opts_t *o, explain_open_fn open,
                          void *user, explain_result_t out[2], size_t *n,
                          char *model_desc, size_t desc_len, as_err_t *err);

#endif
