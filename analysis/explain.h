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

typedef struct explain_result_s explain_result_t;
struct explain_result_s {
  char           label[64]; /* the mark explained, or "end" */
  uint64_t       t_ns;
  uint64_t       rss_bytes;
  uint64_t       live_bytes;
  size_t         nitems;
  explain_item_t items[EXPLAIN_MAX_ITEMS]; /* largest first */
};

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
};

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
