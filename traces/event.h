/* traces/event.h -- the event record every trace source produces and every
 * model consumes, plus the stream interfaces (source, writer).
 *
 * Object ids are dense integers chosen by whoever writes the trace.  Writers
 * recycle the ids of freed objects (lowest free id first), so ids stay below
 * the peak number of live objects and replay indexes arrays by id with no
 * hash table; memory then grows with live objects, never with trace length.
 */
#ifndef ALLOCSIM_EVENT_H
#define ALLOCSIM_EVENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../sim/status.h"

/* Ops.  The text format spells them exactly as the second column says. */
#define TRACE_OP_MAP(X)                                                        \
  X(MALLOC, "malloc")                                                          \
  X(CALLOC, "calloc")   /* size = nmemb * size; memory reads as zero */        \
  X(REALLOC, "realloc") /* id keeps naming the object; size is the new one */  \
  X(MEMALIGN, "memalign") /* also aligned_alloc and posix_memalign */          \
  X(FREE, "free")                                                              \
  X(THREAD_START, "thread_start")                                              \
  X(THREAD_EXIT, "thread_exit")                                                \
  X(MARK, "mark")     /* named phase point: label */                           \
  X(IDLE, "idle")     /* size = duration in ns with no activity */             \
  X(TRIM, "trim")     /* malloc_trim(pad): size = pad */                       \
  X(RSS, "rss")       /* a measured RSS sample: size = bytes */                \
  X(PURGE, "purge")   /* size = trace_purge_kind_t, id = arena */              \
  X(OPTION, "option") /* label = knob name, size = (int64_t) value */          \
  X(TOUCH, "touch")   /* id's bytes [offset, offset+size) written */           \
  X(MODULE, "module") /* id = module id, label = its path */                   \
  X(SITE, "site")     /* id = call site id, frames = its return addresses */

/* An option whose name starts so is no knob: "placed.OWNER" with size =
 * the address where the real allocator mapped its next mapping of that
 * sim_owner_t (a capture records pymalloc's arenas so). */
#define TRACE_PLACED_PREFIX     "placed."
#define TRACE_PLACED_PREFIX_LEN (sizeof TRACE_PLACED_PREFIX - 1)
/* Nor is "seed.KIND.INDEX" with size = a seed of the real allocator's
 * randomness that the run recorded: KIND names what it seeds, INDEX which
 * thread or arena (the jemalloc model reads "prng" and "jitter"). */
#define TRACE_SEED_PREFIX     "seed."
#define TRACE_SEED_PREFIX_LEN (sizeof TRACE_SEED_PREFIX - 1)

typedef enum trace_op_e {
#define TRACE_OP_ENUM(name, str) TRACE_##name,
  TRACE_OP_MAP(TRACE_OP_ENUM)
#undef TRACE_OP_ENUM
      TRACE_OP_COUNT
} trace_op_t;

/* CPython's three allocator domains; C programs use raw. */
typedef enum trace_domain_e {
  TRACE_DOMAIN_RAW, /* PyMem_RawMalloc, or plain malloc */
  TRACE_DOMAIN_MEM, /* PyMem_Malloc */
  TRACE_DOMAIN_OBJ, /* PyObject_Malloc */
  TRACE_DOMAIN_COUNT
} trace_domain_t;

/* What a purge event asks of the allocator (docs/trace-format.md).
 *   all     return every free page now: jemalloc arena.<i>.purge,
 *           mimalloc mi_collect(true), gperftools ReleaseFreeMemory()
 *   decay   run the clock-driven policy now: jemalloc arena.<i>.decay,
 *           mimalloc mi_collect(false)
 *   tcache  flush the calling thread's cache: jemalloc thread.tcache.flush */
#define TRACE_PURGE_MAP(X)                                                     \
  X(ALL, "all")                                                                \
  X(DECAY, "decay")                                                            \
  X(TCACHE, "tcache")

typedef enum trace_purge_kind_e {
#define TRACE_PURGE_ENUM(name, str) TRACE_PURGE_##name,
  TRACE_PURGE_MAP(TRACE_PURGE_ENUM)
#undef TRACE_PURGE_ENUM
      TRACE_PURGE_COUNT
} trace_purge_kind_t;

/* A purge event's id when it names no single arena (jemalloc's
 * MALLCTL_ARENAS_ALL). */
#define TRACE_ALL_ARENAS UINT64_MAX

/* Event flags, set by the engine for models; never stored in trace files. */
#define TRACE_FLAG_UNWRITTEN                                                   \
  0x01 /* the program does not write this                                      \
          allocation's payload now: its writes                                 \
          arrive as touch events (a trace with                                 \
          touch_threshold provenance) */

/* Call sites (docs/trace-format.md, "Call sites"): a site is up to
 * TRACE_FRAMES_MAX return addresses, innermost first, each a module (defined
 * by a module event) and an offset from the module's load base, so a site
 * can be symbolised after the process is gone and whatever ASLR did. */
#define TRACE_FRAMES_MAX 32
/* Longest module path either format carries, in bytes. */
#define TRACE_PATH_MAX 255
typedef struct trace_frame_s trace_frame_t;
struct trace_frame_s {
  uint64_t module; /* a module event's id */
  uint64_t offset; /* from the module's load base (its ELF vaddr 0) */
};

typedef struct trace_event_s trace_event_t;
struct trace_event_s {
  uint64_t t_ns;      /* virtual time, non-decreasing along a trace */
  uint64_t id;        /* object id (alloc ops, free) */
  uint64_t size;      /* bytes; idle: ns; trim: pad; rss: bytes */
  uint64_t align;     /* memalign only: a power of two; else 0 */
  uint64_t offset;    /* touch: first byte written, from the object's
                         start; rss: of size, the bytes no allocator
                         holds (code, files, static data, stacks, the
                         program's own mmaps), as a capture measures
                         them; 0 = not measured */
  uint64_t prev_size; /* free, realloc: the object's size before the
                         event, set by the engine for models; never
                         stored in trace files */
  uint32_t    thread; /* thread id, 0 = main thread */
  uint8_t     op;     /* trace_op_t */
  uint8_t     domain; /* trace_domain_t */
  uint8_t     flags;  /* TRACE_FLAG_*, set by the engine */
  const char *label;  /* mark, option, module (its path); owned by the
                         source, valid until the next event */
  uint64_t site;      /* malloc, calloc, realloc, memalign: the call site
                         (a site event's id), 0 = not recorded */
  const trace_frame_t *frames; /* site: nframes frames, innermost first;
                                  owned like label */
  uint32_t nframes;
};

/* Sets *ev to an event of thread 0 with these fields and every other one
 * zero (NULL).  Field by field, for generators' hot paths: gcc 12 -O3
 * compiles a compound literal or memset of the whole struct to `rep stos`,
 * whose start-up cost was a fifth of a survivors sweep point. */
static inline void trace_event_set(trace_event_t *ev, uint64_t t_ns, uint8_t op,
                                   uint8_t domain, uint64_t id, uint64_t size) {
  ev->t_ns = t_ns;
  ev->id = id;
  ev->size = size;
  ev->align = ev->offset = ev->prev_size = 0;
  ev->thread = 0;
  ev->op = op;
  ev->domain = domain;
  ev->flags = 0;
  ev->label = NULL;
  ev->site = 0;
  ev->frames = NULL;
  ev->nframes = 0;
}

/* "malloc", "free", ...; NULL for an out-of-range op. */
const char *trace_op_name(trace_op_t op);
/* Parses an op name; false if unknown. */
bool trace_op_parse(const char *s, size_t len, trace_op_t *out);
/* "raw", "mem", "obj". */
const char *trace_domain_name(trace_domain_t d);
bool        trace_domain_parse(const char *s, size_t len, trace_domain_t *out);
/* "all", "decay", "tcache"; NULL for an out-of-range kind. */
const char *trace_purge_name(trace_purge_kind_t k);
bool trace_purge_parse(const char *s, size_t len, trace_purge_kind_t *out);
/* Whether s (len bytes) is a knob name an option event may carry: 1 to
 * TRACE_LABEL_MAX bytes of [a-z0-9_.]. */
bool trace_option_name_ok(const char *s, size_t len);
/* Whether an option event is a placement ("placed.OWNER"), not a knob. */
static inline bool trace_option_is_placement(const char *name) {
  return strncmp(name, TRACE_PLACED_PREFIX, TRACE_PLACED_PREFIX_LEN) == 0;
}
/* Whether an option event is a recorded seed ("seed.KIND.INDEX"). */
static inline bool trace_option_is_seed(const char *name) {
  return strncmp(name, TRACE_SEED_PREFIX, TRACE_SEED_PREFIX_LEN) == 0;
}

/* Provenance carried in a trace's header: ordered key/value strings, e.g.
 * machine, kernel, page_size, command, baseline_rss_bytes. */
#define TRACE_META_MAX 48
typedef struct trace_meta_s trace_meta_t;
struct trace_meta_s {
  size_t count;
  char   key[TRACE_META_MAX][32];
  char   value[TRACE_META_MAX][256];
};
/* The value for key, or NULL. */
const char *trace_meta_get(const trace_meta_t *m, const char *key);
/* The page size m's touches are measured in (traces/touch_span.h), into
 * *page: 0 when they are bytes.  AS_EFORMAT, naming source and the key,
 * for a page_size that is not a power of two. */
as_status_t trace_meta_touch_page(const trace_meta_t *m, const char *source,
                                  uint64_t *page, as_err_t *err);
/* A provenance key both formats carry: no spaces, '=' or control bytes
 * (the text format's "#@ key=value"). */
bool trace_meta_key_ok(const char *key);
/* A provenance value with no control bytes below 0x20 but tab (one text
 * line; the text reader takes DEL as it takes other bytes). */
bool trace_meta_value_ok(const char *value);
/* Adds or replaces key; AS_EINVAL if full or too long. */
as_status_t trace_meta_set(trace_meta_t *m, const char *key, const char *value,
                           as_err_t *err);

/* What a run measured of jemalloc's randomness and clock, as the jemalloc
 * model's options read it from the provenance (traces/je_seeds.h): the
 * main thread's tsd address and arena 0's dirty decay_t address (0:
 * unknown), and CLOCK_MONOTONIC_COARSE (res_ns per tick, 0: unmeasured)
 * read just before origin_ns, the run's CLOCK_MONOTONIC origin, and at
 * jemalloc's initialisation (taken as the origin's reading when it came
 * after it).  Puts jemalloc_prng_seed, jemalloc_jitter_seed and
 * jemalloc_clock_{res,lag,init}_ns, each only where measured. */
typedef struct trace_je_state_s trace_je_state_t;
struct trace_je_state_s {
  uint64_t prng_seed, jitter_seed;
  uint64_t res_ns, coarse_origin_ns, coarse_init_ns;
};
as_status_t trace_meta_put_jemalloc(trace_meta_t *m, uint64_t origin_ns,
                                    const trace_je_state_t *je, as_err_t *err);

/* Longest mark label, in bytes, that either format carries. */
#define TRACE_LABEL_MAX 63

/* Checks an event a writer is given, index being its 0-based position and
 * prev_t_ns the previous event's time (0 before the first): op and domain in
 * range, time non-decreasing, memalign align a power of two, a mark label at
 * most TRACE_LABEL_MAX bytes with no control bytes but tab.  Fields the op
 * does not use are ignored (not written; readers return 0 / NULL for them).
 * AS_EINVAL with "NAME: event N: ..." otherwise. */
as_status_t trace_event_validate(const trace_event_t *ev, uint64_t prev_t_ns,
                                 const char *name, uint64_t index,
                                 as_err_t *err);

/* Module and site ids are below this (both formats refuse larger ones, so
 * a reader's table of definitions stays small). */
#define TRACE_DEF_ID_MAX (1u << 24)

/* What a reader has seen defined: module and site ids.  Readers call
 * trace_defs_note on every event, so an allocation naming a site no site
 * event defined, a site naming an undefined module, or a second definition
 * of an id is a format error at that line or offset. */
typedef struct trace_defs_s trace_defs_t;
struct trace_defs_s {
  uint8_t *site, *module; /* by id: 1 once defined */
  size_t   site_cap, module_cap;
};
typedef enum trace_defs_rc_e {
  TRACE_DEFS_OK,
  TRACE_DEFS_BAD, /* why says what was expected and got */
  TRACE_DEFS_NOMEM
} trace_defs_rc_t;
trace_defs_rc_t trace_defs_note(trace_defs_t *d, const trace_event_t *ev,
                                char *why, size_t len);
void            trace_defs_free(trace_defs_t *d);

/* Whether op is a malloc-family call or free (an event on an object; touch
 * names an object but allocates nothing). */
bool trace_op_is_alloc(uint8_t op);

/* ---- Streams ------------------------------------------------------------ */

typedef struct trace_source_s         trace_source_t;
typedef struct trace_source_methods_s trace_source_methods_t;
struct trace_source_methods_s {
  /* Fills *ev with the next event: AS_OK, AS_DONE at the end, or an error
   * whose message names the file and line or byte offset. */
  as_status_t (*next)(trace_source_t *src, trace_event_t *ev, as_err_t *err);
  void (*close)(trace_source_t *src); /* frees src */
  /* Where the last event next() returned sits in the file: "line 12",
   * "byte offset 345".  NULL for sources that are not files. */
  void (*where)(const trace_source_t *src, char *buf, size_t len);
  /* Optional: the next events in place, *n >= 1 of them at *evs, which the
   * caller may change; valid until the next call on src.  AS_OK, AS_DONE
   * (*n = 0) or an error as for next().  where() then names the batch. */
  as_status_t (*batch)(trace_source_t *src, trace_event_t **evs, size_t *n,
                       as_err_t *err);
  /* Optional, with batch: where event ev of the last batch sits in the
   * file, as where() says it for the last event next() returned. */
  void (*where_event)(const trace_source_t *src, const trace_event_t *ev,
                      char *buf, size_t len);
};
struct trace_source_s {
  const trace_source_methods_t *methods;   /* must be first */
  trace_meta_t                  meta;      /* header provenance */
  char                          name[256]; /* path or workload description */
};

static inline as_status_t trace_source_next(trace_source_t *src,
                                            trace_event_t *ev, as_err_t *err) {
  return src->methods->next(src, ev, err);
}
/* The next events: the source's batch when it has one, else one event
 * read into *one.  Sets *evs and *n as batch() does. */
static inline as_status_t trace_source_batch(trace_source_t *src,
                                             trace_event_t  *one,
                                             trace_event_t **evs, size_t *n,
                                             as_err_t *err) {
  if (src->methods->batch != NULL)
    return src->methods->batch(src, evs, n, err);
  as_status_t rc = src->methods->next(src, one, err);
  *evs = one;
  *n = rc == AS_OK;
  return rc;
}
/* src's where() into buf, or "" when it has none. */
static inline void trace_source_where(const trace_source_t *src, char *buf,
                                      size_t len) {
  if (len > 0)
    buf[0] = '\0';
  if (src->methods->where != NULL)
    src->methods->where(src, buf, len);
}
/* Where ev, the last event next() gave or one of the last batch, sits in
 * the file: where_event() when src has it, else where(). */
static inline void trace_source_where_event(const trace_source_t *src,
                                            const trace_event_t *ev, char *buf,
                                            size_t len) {
  if (src->methods->where_event != NULL) {
    if (len > 0)
      buf[0] = '\0';
    src->methods->where_event(src, ev, buf, len);
  } else {
    trace_source_where(src, buf, len);
  }
}
/* "NAME: line 3: event 1 (t=0 ns, malloc)" into buf: where ev, the event
 * src gave last (or one of its last batch), the index-th (from 0), sits;
 * the start of an error message about it. */
void trace_event_position(const trace_source_t *src, const trace_event_t *ev,
                          uint64_t index, char *buf, size_t len);
/* Prefixes err's message (or rc's, when empty) with the position of ev;
 * one that already starts with src's name is left alone.  The position
 * comes first: a message too long for err is cut at its end.  Returns rc,
 * the failure being reported, with or without an err to fill. */
as_status_t trace_error_at(const trace_source_t *src, const trace_event_t *ev,
                           uint64_t index, as_status_t rc, as_err_t *err);
static inline void trace_source_close(trace_source_t *src) {
  if (src != NULL)
    src->methods->close(src);
}
/* A zeroed source of size bytes (a struct whose first member is its
 * trace_source_t) that wraps inner: methods set, inner's provenance and
 * name copied.  NULL, inner closed and AS_ENOMEM in *err, when out of
 * memory: a wrapper owns inner from the call on. */
void *trace_source_wrapper_new(trace_source_t               *inner,
                               const trace_source_methods_t *methods,
                               size_t size, as_err_t *err);

typedef struct trace_writer_s         trace_writer_t;
typedef struct trace_writer_methods_s trace_writer_methods_t;
struct trace_writer_methods_s {
  as_status_t (*write)(trace_writer_t *w, const trace_event_t *ev,
                       as_err_t *err);
  /* Flushes and frees w; reports a failed flush or close. */
  as_status_t (*close)(trace_writer_t *w, as_err_t *err);
};
struct trace_writer_s {
  const trace_writer_methods_t *methods; /* must be first */
};

static inline as_status_t
trace_writer_write(trace_writer_t *w, const trace_event_t *ev, as_err_t *err) {
  return w->methods->write(w, ev, err);
}
static inline as_status_t trace_writer_close(trace_writer_t *w, as_err_t *err) {
  return w->methods->close(w, err);
}

#endif
