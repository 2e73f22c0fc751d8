/* engine/engine.c -- replays a trace source against a model on a virtual clock.
 *
 * Ordering rule (tested in tests/unit/test_engine.c): before a trace event
 * stamped t is dispatched, every timer due at or before t fires, in (due,
 * seq) order, each at its own due time; a timer that re-arms itself for a
 * time <= the current instant fires again in the same instant, and more than
 * SIM_ENGINE_MAX_SAME_INSTANT firings in one instant is an error (a model
 * that reschedules itself without advancing time would otherwise hang).
 * Periodic RSS sampling is one such timer, owned by the engine.
 *
 * The live-object table holds a code per id (ids are dense and recycled by
 * trace writers, so it grows with peak live objects, not with trace
 * length): 0 means not live, SIZE_BIG means live with the size in a small
 * open-addressing table keyed by id, and any other code c means live with
 * size c - 1.  Real programs' objects are almost all under 64 KiB, so the
 * side table holds the few big ones; a code of 2 bytes per id keeps the
 * table in cache where a bitmap plus a uint64 per id would miss on every
 * free, and validating an event and reading its size is one load.
 *
 * A trace of few distinct sizes (a generated workload, many C programs)
 * needs less: the table starts narrow, 1 byte per id, whose codes name
 * sizes in a dictionary of up to NARROW_SIZES sizes (a translation table
 * in cache turns a narrow code into the wide one), and is rewritten wide
 * in place, once, when a size the dictionary has no room for comes.  For
 * the survivors study's heap of 4.2 M objects of 64 B that is 4 MiB less
 * simulator memory.  Entries are initialised lazily up to the highest id
 * seen, so the table's resident memory follows the ids in use, not its
 * capacity.
 */
#include "engine.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/grow.h"
#include "../sim/host.h"
#include "../sim/idtable.h"
#include "../sim/reserve.h"
#include "../traces/touch_span.h"
#include "../traces/workload.h"

/* Live-table codes (see the file comment). */
#define SIZE_DEAD 0
#define SIZE_BIG  UINT16_MAX
/* Largest size kept in the code itself: c - 1 for c up to SIZE_BIG - 1. */
#define SIZE_INLINE_MAX ((uint64_t)SIZE_BIG - 2)
/* Narrow codes: 0 dead, 1..NARROW_SIZES a dictionary size, NARROW_BIG. */
#define NARROW_BIG   UINT8_MAX
#define NARROW_SIZES (NARROW_BIG - 1)
/* Slots of the dictionary's size-to-code hash: a power of two, at most
 * half full. */
#define NARROW_HASH_SLOTS 512
/* An empty slot of the big-size table; ids are below SIM_IDTABLE_MAX_IDS. */
#define BIG_EMPTY UINT64_MAX

/* Sizes above SIZE_INLINE_MAX, by id: linear probing in a power-of-two
 * table at most half full, deletion by backward shift (no tombstones). */
typedef struct big_entry_s big_entry_t;
struct big_entry_s {
  uint64_t id;   /* BIG_EMPTY: free slot */
  uint64_t size; /* bytes */
};

typedef struct engine_state_s engine_state_t;
struct engine_state_s {
  const sim_engine_config_t *cfg;
  sim_session_t             *s;
  sim_run_result_t          *res;
  model_t                   *model;  /* s->model, s->kernel, s->timers: */
  sim_kernel_t              *kernel; /* one load, not two, per event */
  sim_event_queue_t         *timers;
  uint64_t                   now_ns;
  uint8_t                   *live;       /* by id: a narrow or a wide code
                                            (file comment); the base of
                                            live_tab */
  uint64_t live_len;                     /* ids [0, live_len) usable (zero:
                                            dead) at the table's width; beyond:
                                            dead */
  sim_idtable_t live_tab;                /* live's memory, in wide entries */
  bool          narrow;                  /* 1 byte per id, else a uint16 */
  uint16_t      wide_of[NARROW_BIG + 1]; /* narrow code -> wide code */
  uint8_t       narrow_of[NARROW_HASH_SLOTS]; /* hash(size) -> narrow
                                                  code, 0: empty */
  unsigned narrow_sizes;                      /* dictionary codes used */
  uint8_t  narrow_last;   /* the code narrow_code gave last: a run of
                             one size costs no hash lookup */
  big_entry_t *big;       /* sizes of SIZE_BIG ids */
  size_t       big_cap;   /* slots in big: 0 or a power of 2 */
  size_t       big_count; /* slots in use */
  uint64_t     live_bytes;
  uint64_t     touch_threshold; /* 0: everything written */
  uint64_t     touch_page;      /* a capture's page size: its touches
                                   name pages of the object's span
                                   (traces/touch_span.h); 0: bytes */
  sim_timer_t sampler;          /* periodic RSS samples */
  uint64_t    samples;          /* emitted so far */
  uint32_t   *running;          /* threads started and not exited,
                                   ascending */
  size_t   nrunning;
  size_t   running_cap;
  uint64_t same_instant_fired;
  uint64_t same_instant_ns;
  uint64_t peak_rss_pages; /* res->peak_rss_bytes in the kernel's pages */
  uint64_t events;         /* trace events consumed: res->events once the
                              run ends, kept here so that the count on
                              every event needs no load through res */
};

/* ---- Sessions ----------------------------------------------------------- */

as_status_t sim_session_open(const char *model_spec, const char *libc_spec,
                             const sim_kernel_config_t *kcfg,
                             sim_session_t *out, as_err_t *err) {
  sim_kernel_config_t defaults;
  memset(out, 0, sizeof *out);
  if (kcfg == NULL) {
    sim_kernel_config_default(&defaults);
    kcfg = &defaults;
  }
  as_status_t rc = sim_kernel_create(kcfg, &out->kernel, err);
  if (rc == AS_OK)
    rc = sim_event_queue_create(&out->timers, err);
  if (rc == AS_OK) {
    model_ctx_t ctx = {out->kernel, out->timers, libc_spec};
    rc = model_create_from_spec(model_spec, &ctx, &out->model, err);
  }
  if (rc != AS_OK) {
    sim_session_close(out);
    return rc;
  }
  model_describe(out->model, out->model_desc, sizeof out->model_desc);
  return AS_OK;
}

void sim_session_close(sim_session_t *s) {
  model_destroy(s->model);
  sim_event_queue_destroy(s->timers);
  sim_kernel_destroy(s->kernel);
  memset(s, 0, sizeof *s);
}

/* ---- Samples ------------------------------------------------------------ */

static as_status_t emit_sample(engine_state_t *st, sim_sample_kind_t kind,
                               const char *label, uint64_t measured,
                               as_err_t *err) {
  if (st->cfg->on_sample == NULL)
    return AS_OK;
  if (st->cfg->max_samples != 0 && st->samples >= st->cfg->max_samples)
    return as_err_set(err, AS_ENOMEM,
                      "more than %" PRIu64 " samples, the most --max-memory "
                      "leaves room for; raise --max-memory or sample less "
                      "often (--sample-every)",
                      st->cfg->max_samples);
  st->samples++;
  sim_sample_t smp = {
      .t_ns = st->now_ns,
      .kind = kind,
      .label = label,
      .rss_bytes = sim_kernel_rss_bytes(st->kernel),
      .live_bytes = st->live_bytes,
      .measured_rss_bytes = measured,
  };
  for (int o = 0; o < SIM_OWNER_COUNT; o++)
    smp.owner_bytes[o] = sim_kernel_rss_owner_bytes(st->kernel, (sim_owner_t)o);
  return st->cfg->on_sample(st->cfg->user, &smp, err);
}

static as_status_t sampler_fire(sim_timer_t *self, uint64_t now_ns,
                                as_err_t *err) {
  engine_state_t *st = SIM_CONTAINER_OF(self, engine_state_t, sampler);
  as_status_t     rc = emit_sample(st, SIM_SAMPLE_PERIODIC, NULL, 0, err);
  if (rc != AS_OK || now_ns > UINT64_MAX - st->cfg->sample_every_ns)
    return rc; /* the clock ends at 2^64 - 1 ns: no sample after it */
  return sim_event_queue_push(st->timers, self,
                              now_ns + st->cfg->sample_every_ns, err);
}

/* After every event and timer.  The peak of live bytes is noted where they
 * grow (dispatch_alloc, dispatch_realloc). */
static inline void note_peak(engine_state_t *st) {
  /* In pages, as the kernel counts them: no multiply, no load through
   * res, on every event. */
  uint64_t pages =
      ((const sim_kernel_head_t *)(const void *)st->kernel)->rss_pages;
  if (pages > st->peak_rss_pages) {
    st->peak_rss_pages = pages;
    st->res->peak_rss_bytes = sim_kernel_rss_bytes(st->kernel);
    st->res->peak_t_ns = st->now_ns;
  }
}

static inline void note_live_bytes(engine_state_t *st) {
  if (st->live_bytes > st->res->peak_live_bytes)
    st->res->peak_live_bytes = st->live_bytes;
}

/* ---- Timers ------------------------------------------------------------- */

/* Fires every timer due at or before until_ns, advancing the clock. */
static as_status_t fire_timers_until(engine_state_t *st, uint64_t until_ns,
                                     as_err_t *err) {
  sim_timer_t *t;
  while ((t = sim_event_queue_peek(st->timers)) != NULL &&
         t->due_ns <= until_ns) {
    sim_event_queue_pop(st->timers);
    if (t->due_ns > st->now_ns)
      st->now_ns = t->due_ns;
    if (st->now_ns != st->same_instant_ns) {
      st->same_instant_ns = st->now_ns;
      st->same_instant_fired = 0;
    }
    if (++st->same_instant_fired > SIM_ENGINE_MAX_SAME_INSTANT)
      return as_err_set(err, AS_EINVAL,
                        "more than %d timers fired at t=%llu ns: a model "
                        "reschedules itself without advancing time",
                        SIM_ENGINE_MAX_SAME_INSTANT,
                        (unsigned long long)st->now_ns);
    as_status_t rc = t->fire(t, st->now_ns, err);
    if (rc != AS_OK)
      return rc;
    st->res->timers_fired++;
    note_peak(st);
  }
  return AS_OK;
}

/* ---- Live objects ------------------------------------------------------- */

static inline size_t big_home(const engine_state_t *st, uint64_t id) {
  /* Fibonacci hashing: dense ids spread over the table. */
  return (size_t)((id * UINT64_C(0x9E3779B97F4A7C15)) >> 32) &
         (st->big_cap - 1);
}

/* The slot holding id, or the empty slot where it would go. */
static size_t big_find(const engine_state_t *st, uint64_t id) {
  size_t i = big_home(st, id);
  while (st->big[i].id != id && st->big[i].id != BIG_EMPTY)
    i = (i + 1) & (st->big_cap - 1);
  return i;
}

static uint64_t big_get(const engine_state_t *st, uint64_t id) {
  size_t i = big_find(st, id);
  assert(st->big[i].id == id);
  return st->big[i].size;
}

/* Records size for id (inserting or replacing). */
static as_status_t big_put(engine_state_t *st, uint64_t id, uint64_t size,
                           as_err_t *err) {
  if (2 * (st->big_count + 1) > st->big_cap) {
    size_t       cap = st->big_cap ? 2 * st->big_cap : 64;
    big_entry_t *old = st->big, *nb = malloc(cap * sizeof *nb);
    if (nb == NULL)
      return as_err_set(err, AS_ENOMEM, "out of memory for %zu big objects",
                        st->big_count + 1);
    for (size_t i = 0; i < cap; i++)
      nb[i].id = BIG_EMPTY;
    size_t old_cap = st->big_cap;
    st->big = nb;
    st->big_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
      if (old[i].id != BIG_EMPTY)
        st->big[big_find(st, old[i].id)] = old[i];
    free(old);
  }
  size_t i = big_find(st, id);
  if (st->big[i].id == BIG_EMPTY)
    st->big_count++;
  st->big[i] = (big_entry_t){.id = id, .size = size};
  return AS_OK;
}

/* Removes id, shifting later members of its probe run back into the hole
 * (Knuth 6.4 Algorithm R), so lookups never need tombstones. */
static void big_del(engine_state_t *st, uint64_t id) {
  size_t mask = st->big_cap - 1, hole = big_find(st, id);
  assert(st->big[hole].id == id);
  for (size_t j = (hole + 1) & mask; st->big[j].id != BIG_EMPTY;
       j = (j + 1) & mask) {
    /* Entry j may fill the hole unless its home lies cyclically in
     * (hole, j]: then moving it would put it before its home. */
    size_t home = big_home(st, st->big[j].id);
    if (((j - home) & mask) >= ((j - hole) & mask)) {
      st->big[hole] = st->big[j];
      hole = j;
    }
  }
  st->big[hole].id = BIG_EMPTY;
  st->big_count--;
}

/* Makes id addressable in the live table.  The table is reserved address
 * space (sim/idtable.h): it grows without copying, fresh entries read as
 * SIZE_DEAD without being written, and a sweep worker reuses it resident
 * from point to point. */
static as_status_t ensure_id(engine_state_t *st, uint64_t id, as_err_t *err) {
  uint64_t max = st->cfg->max_memory_bytes;
  uint64_t need = (id + 1) * (st->narrow ? 1 : sizeof(uint16_t));
  if (id < SIM_IDTABLE_MAX_IDS && max != 0 && need > max)
    return as_err_set(err, AS_ENOMEM,
                      "object id %" PRIu64 " needs a table of %" PRIu64
                      " ids (%" PRIu64 " MiB), over the simulator memory "
                      "limit of %" PRIu64 " MiB (--max-memory); ids should "
                      "be dense and recycled",
                      id, id + 1, need >> 20, max >> 20);
  if (id >= SIM_IDTABLE_MAX_IDS) /* the error every id table gives */
    return sim_idtable_reach_ids(&st->live_tab, id, err);
  /* live_tab counts wide entries: a narrow table is reached by bytes */
  if (sim_idtable_reach_packed(&st->live_tab, id + 1, st->narrow ? 1 : 2,
                               &st->live_len))
    return AS_OK;
  return as_err_set(err, AS_ENOMEM, "out of memory for %" PRIu64 " object ids",
                    id + 1);
}

/* The code of id (id < live_len) in a wide table. */
static inline uint16_t load_wide(const engine_state_t *st, uint64_t id) {
  uint16_t c;
  memcpy(&c, st->live + id * sizeof c, sizeof c);
  return c;
}

/* The wide code of id: SIZE_DEAD for an id never seen. */
static inline uint16_t live_code(const engine_state_t *st, uint64_t id) {
  if (id >= st->live_len)
    return SIZE_DEAD;
  return st->narrow ? st->wide_of[st->live[id]] : load_wide(st, id);
}

/* The size of a live id whose code is c. */
static inline uint64_t live_size(const engine_state_t *st, uint64_t id,
                                 uint16_t c) {
  return c == SIZE_BIG ? big_get(st, id) : (uint64_t)c - 1;
}

static inline void store_wide(engine_state_t *st, uint64_t id, uint16_t c) {
  memcpy(st->live + id * sizeof c, &c, sizeof c);
}

/* Rewrites the table from 1 to 2 bytes per id, in place and last first
 * (wide entry i's two bytes are narrow entries 2i and 2i + 1, read
 * already). */
static as_status_t widen_live(engine_state_t *st, as_err_t *err) {
  uint64_t n = st->live_len;
  if (n > 0 && !sim_idtable_reach(&st->live_tab, n - 1))
    return as_err_set(err, AS_ENOMEM,
                      "out of memory for %" PRIu64 " object ids", n);
  for (uint64_t i = n; i-- > 0;)
    store_wide(st, i, st->wide_of[st->live[i]]);
  st->narrow = false;
  st->live_len = st->live_tab.len;
  return AS_OK;
}

/* The dictionary's code for wide code c (a size + 1), given one if there
 * is room; 0 when the dictionary is full. */
static uint8_t narrow_code(engine_state_t *st, uint16_t c) {
  size_t i = ((uint32_t)c * UINT32_C(0x9E3779B1)) >> 23; /* 9 bits */
  for (;; i = (i + 1) % NARROW_HASH_SLOTS) {
    uint8_t n = st->narrow_of[i];
    if (n != 0 && st->wide_of[n] == c)
      return st->narrow_last = n;
    if (n == 0)
      break;
  }
  if (st->narrow_sizes == NARROW_SIZES)
    return 0;
  uint8_t n = (uint8_t)++st->narrow_sizes;
  st->narrow_of[i] = n;
  st->wide_of[n] = c;
  return st->narrow_last = n;
}

/* store_code for a code other than the last one stored narrow: the
 * dictionary's lookup, and the widening when it has no room. */
__attribute__((noinline)) static as_status_t
store_code_slow(engine_state_t *st, uint64_t id, uint16_t c, as_err_t *err) {
  uint8_t n = c == SIZE_BIG ? NARROW_BIG : narrow_code(st, c);
  if (n != 0) {
    st->live[id] = n;
    return AS_OK;
  }
  as_status_t rc = widen_live(st, err);
  if (rc == AS_OK)
    store_wide(st, id, c);
  return rc;
}

/* Stores code c, a size + 1 or SIZE_BIG, for id (id < live_len),
 * widening the table when its dictionary has no room for c. */
static inline as_status_t store_code(engine_state_t *st, uint64_t id,
                                     uint16_t c, as_err_t *err) {
  if (!st->narrow) {
    store_wide(st, id, c);
    return AS_OK;
  }
  if (st->wide_of[st->narrow_last] != c)
    return store_code_slow(st, id, c, err);
  st->live[id] = st->narrow_last;
  return AS_OK;
}

/* Marks id (id < live_len) dead. */
static inline void store_dead(engine_state_t *st, uint64_t id) {
  if (st->narrow)
    st->live[id] = 0;
  else
    store_wide(st, id, SIZE_DEAD);
}

/* Whether id (id < live_len) is live: its code, narrow or wide, is not
 * 0. */
static inline bool live_at(const engine_state_t *st, uint64_t id) {
  return st->narrow ? st->live[id] != 0 : load_wide(st, id) != SIZE_DEAD;
}

/* Records that live id (code old_c, SIZE_DEAD if it was not live) now has
 * size.  Only a size needing a new big-table slot, or the table's
 * widening, can fail. */
static inline as_status_t set_size(engine_state_t *st, uint64_t id,
                                   uint16_t old_c, uint64_t size,
                                   as_err_t *err) {
  if (size <= SIZE_INLINE_MAX) {
    if (old_c == SIZE_BIG)
      big_del(st, id);
    return store_code(st, id, (uint16_t)(size + 1), err);
  }
  as_status_t rc = big_put(st, id, size, err);
  return rc == AS_OK ? store_code(st, id, SIZE_BIG, err) : rc;
}

/* ": line 12" / ": byte offset 345" for ev, the event src gave last (or
 * one of its last batch), or "". */
static void event_where(const trace_source_t *src, const trace_event_t *ev,
                        char *buf, size_t len) {
  char at[40];
  trace_source_where_event(src, ev, at, sizeof at);
  snprintf(buf, len, "%s%s", at[0] ? ": " : "", at);
}

/* A free or realloc of a dead id, or an alloc of a live one: an error, or
 * counted and skipped under --lenient.  Returns AS_DONE when skipped. */
static as_status_t bad_object(engine_state_t *st, const trace_source_t *src,
                              const trace_event_t *ev, uint64_t *counter,
                              const char *what, as_err_t *err) {
  if (st->cfg->lenient) {
    (*counter)++;
    return AS_DONE;
  }
  char where[48];
  event_where(src, ev, where, sizeof where);
  return as_err_set(err, AS_EFORMAT,
                    "%s%s: event %llu (t=%llu ns): %s of object %llu %s "
                    "(use --lenient to count and skip such events)",
                    src->name, where, (unsigned long long)st->events,
                    (unsigned long long)ev->t_ns, trace_op_name(ev->op),
                    (unsigned long long)ev->id, what);
}

/* Refuses, before any of them is taken, the periodic samples that moving
 * the clock to until_ns would take once they pass cfg->max_samples. */
static as_status_t check_samples(const engine_state_t *st, uint64_t until_ns,
                                 as_err_t *err) {
  uint64_t every = st->cfg->sample_every_ns, max = st->cfg->max_samples;
  if (every == 0 || max == 0 || st->cfg->on_sample == NULL ||
      st->sampler.heap_idx == SIM_TIMER_IDLE || st->sampler.due_ns > until_ns)
    return AS_OK;
  uint64_t due = (until_ns - st->sampler.due_ns) / every + 1;
  if (due <= max - (st->samples < max ? st->samples : max))
    return AS_OK;
  return as_err_set(err, AS_ENOMEM,
                    "--sample-every %" PRIu64 " ns up to t=%" PRIu64 " ns "
                    "makes %" PRIu64 " more samples after %" PRIu64 ", over "
                    "the %" PRIu64 " that --max-memory leaves room for; "
                    "raise --max-memory or sample less often",
                    every, until_ns, due, st->samples, max);
}

/* ---- Threads ------------------------------------------------------------ */

/* Index of thread t in st->running, or where it would go. */
static size_t running_find(const engine_state_t *st, uint32_t t) {
  size_t lo = 0, hi = st->nrunning;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (st->running[mid] < t)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* thread_start of a thread not running, thread_exit of one that is: a
 * thread started twice, or ending without having started (thread 0, the
 * main thread, never does), is a malformed trace.  Only these two events
 * look at the set, so other events pay nothing for it. */
static as_status_t dispatch_thread(engine_state_t       *st,
                                   const trace_source_t *src, trace_event_t *ev,
                                   as_err_t *err) {
  size_t i = running_find(st, ev->thread);
  bool   running = i < st->nrunning && st->running[i] == ev->thread;
  bool   start = ev->op == TRACE_THREAD_START;
  if (start == running || (start && ev->thread == 0)) {
    char where[48];
    event_where(src, ev, where, sizeof where);
    return as_err_set(err, AS_EFORMAT,
                      "%s%s: event %" PRIu64 " (t=%" PRIu64 " ns): %s of "
                      "thread %" PRIu32 ", which is %s",
                      src->name, where, st->events, ev->t_ns,
                      trace_op_name(ev->op), ev->thread,
                      start ? "already running"
                            : "not running (no thread_start before it)");
  }
  if (start) {
    uint32_t *v =
        as_grow(st->running, &st->running_cap, st->nrunning + 1, sizeof *v, 16);
    if (v == NULL)
      return as_err_set(err, AS_ENOMEM, "out of memory for threads");
    st->running = v;
    memmove(v + i + 1, v + i, (st->nrunning - i) * sizeof *v);
    v[i] = ev->thread;
    st->nrunning++;
    if (st->nrunning + 1 > st->res->max_threads)
      st->res->max_threads = (uint32_t)(st->nrunning + 1);
  } else {
    memmove(st->running + i, st->running + i + 1,
            (st->nrunning - i - 1) * sizeof *st->running);
    st->nrunning--;
  }
  return model_thread(st->model, ev, err);
}

/* ---- Dispatch ----------------------------------------------------------- */

/* An allocation the trace's touch events cover (see engine.h). */
static inline void flag_unwritten(engine_state_t *st, trace_event_t *ev) {
  if (st->touch_threshold != 0 && ev->size >= st->touch_threshold) {
    ev->flags |= TRACE_FLAG_UNWRITTEN;
    st->res->unwritten_allocs++;
  }
}

/* No allocation can be larger than the address space it lives in. */
static as_status_t check_size(engine_state_t *st, const trace_event_t *ev,
                              as_err_t *err) {
  uint64_t space = sim_kernel_address_space_bytes(st->kernel);
  if (ev->size <= space)
    return AS_OK;
  char a[32], b[32];
  return as_err_set(err, AS_EFORMAT,
                    "%s of %" PRIu64 " bytes (%s) is larger than the "
                    "simulated address space (%s)",
                    trace_op_name(ev->op), ev->size,
                    sim_host_format_bytes(ev->size, a, sizeof a),
                    sim_host_format_bytes(space, b, sizeof b));
}

static as_status_t dispatch_alloc(engine_state_t *st, const trace_source_t *src,
                                  trace_event_t *ev, as_err_t *err) {
  if (ev->size > SIZE_INLINE_MAX && check_size(st, ev, err) != AS_OK)
    return AS_EFORMAT;
  if (ev->id >= st->live_len) {
    as_status_t rc = ensure_id(st, ev->id, err);
    if (rc != AS_OK)
      return rc;
  }
  if (live_at(st, ev->id))
    return bad_object(st, src, ev, &st->res->skipped_double_alloc,
                      "that is already live", err);
  flag_unwritten(st, ev);
  as_status_t rc = model_alloc(st->model, ev, err);
  if (rc != AS_OK)
    return rc;
  st->live_bytes += ev->size;
  note_live_bytes(st);
  return set_size(st, ev->id, SIZE_DEAD, ev->size, err);
}

static as_status_t dispatch_realloc(engine_state_t       *st,
                                    const trace_source_t *src,
                                    trace_event_t *ev, as_err_t *err) {
  uint16_t c = live_code(st, ev->id);
  if (c == SIZE_DEAD)
    return bad_object(st, src, ev, &st->res->skipped_bad_realloc,
                      "that is not live", err);
  if (ev->size > SIZE_INLINE_MAX && check_size(st, ev, err) != AS_OK)
    return AS_EFORMAT;
  ev->prev_size = live_size(st, ev->id, c);
  flag_unwritten(st, ev);
  as_status_t rc = model_realloc(st->model, ev, err);
  if (rc != AS_OK)
    return rc;
  st->live_bytes = st->live_bytes - ev->prev_size + ev->size;
  note_live_bytes(st);
  return set_size(st, ev->id, c, ev->size, err);
}

static as_status_t dispatch_free(engine_state_t *st, const trace_source_t *src,
                                 trace_event_t *ev, as_err_t *err) {
  uint16_t c = live_code(st, ev->id);
  if (c == SIZE_DEAD)
    return bad_object(st, src, ev, &st->res->skipped_bad_free,
                      "that is not live", err);
  ev->prev_size = live_size(st, ev->id, c);
  as_status_t rc = model_free(st->model, ev, err);
  if (rc != AS_OK)
    return rc;
  st->live_bytes -= ev->prev_size;
  if (c == SIZE_BIG)
    big_del(st, ev->id);
  store_dead(st, ev->id);
  return AS_OK;
}

/* A purge, option or touch event the model has no notion of: an error
 * under strict, else counted. */
static as_status_t no_notion(engine_state_t *st, const trace_source_t *src,
                             const trace_event_t *ev, as_err_t *err) {
  if (!st->cfg->strict) {
    st->res->ignored_events++;
    return AS_OK;
  }
  return as_err_set(err, AS_EINVAL,
                    "%s: event %llu (t=%llu ns): model %s has no notion of "
                    "%s events (without --strict they are counted and "
                    "skipped)",
                    src->name, (unsigned long long)st->events,
                    (unsigned long long)ev->t_ns, st->model->methods->name,
                    trace_op_name(ev->op));
}

/* The program wrote [offset, offset + size) of a live object. */
static as_status_t dispatch_touch(engine_state_t *st, const trace_source_t *src,
                                  const trace_event_t *ev, as_err_t *err) {
  uint16_t c = live_code(st, ev->id);
  char     where[48];
  event_where(src, ev, where, sizeof where);
  if (c == SIZE_DEAD)
    return as_err_set(err, AS_EFORMAT,
                      "%s%s: event %llu (t=%llu ns): touch of object %llu "
                      "that is not live",
                      src->name, where, (unsigned long long)st->events,
                      (unsigned long long)ev->t_ns, (unsigned long long)ev->id);
  uint64_t size = live_size(st, ev->id, c);
  if (ev->offset > size || ev->size > size - ev->offset)
    return as_err_set(err, AS_EFORMAT,
                      "%s%s: event %llu (t=%llu ns): touch of bytes %llu..%llu "
                      "of object %llu, which has %llu bytes",
                      src->name, where, (unsigned long long)st->events,
                      (unsigned long long)ev->t_ns,
                      (unsigned long long)ev->offset,
                      (unsigned long long)(ev->offset + ev->size),
                      (unsigned long long)ev->id, (unsigned long long)size);
  if (!model_has_locate(st->model))
    return no_notion(st, src, ev, err);
  sim_addr_t addr;
  if (!model_locate(st->model, ev->id, &addr))
    return as_err_set(err, AS_EINVAL,
                      "%s: event %llu: model %s does not place live object "
                      "%llu (a model bug)",
                      src->name, (unsigned long long)st->events,
                      st->model->methods->name, (unsigned long long)ev->id);
  uint64_t first, end, lo = addr + ev->offset, hi = lo + ev->size;
  if (st->touch_page != 0 && touch_span_pages(size, ev->offset, ev->size,
                                              st->touch_page, &first, &end))
    touch_span_bytes(addr, size, st->touch_page, first, end, &lo, &hi);
  return hi > lo ? sim_kernel_touch(st->kernel, lo, hi - lo, err) : AS_OK;
}

/* "placed.OWNER ADDRESS": where the real allocator mapped its next
 * mapping of that owner (a capture records pymalloc's arenas); for the
 * kernel, whatever the model (docs/trace-format.md).  A multiple of the
 * smallest page the kernel models: replayed with larger pages, an address
 * that is not one of them is left unused (sim_kernel_place_next). */
#define PLACED_ALIGN 4096
/* An option event that is no knob and not as expected. */
static as_status_t bad_option(const engine_state_t *st,
                              const trace_source_t *src,
                              const trace_event_t *ev, const char *expected,
                              as_err_t *err) {
  char where[48];
  event_where(src, ev, where, sizeof where);
  return as_err_set(err, AS_EFORMAT, "%s%s: event %llu: option %.40s %llu: %s",
                    src->name, where, (unsigned long long)st->events, ev->label,
                    (unsigned long long)ev->size, expected);
}

static as_status_t dispatch_placement(engine_state_t       *st,
                                      const trace_source_t *src,
                                      const trace_event_t *ev, as_err_t *err) {
  const char *owner = ev->label + TRACE_PLACED_PREFIX_LEN;
  for (unsigned o = 0; o < SIM_OWNER_COUNT; o++)
    if (strcmp(owner, sim_owner_name((sim_owner_t)o)) == 0) {
      if (ev->size == 0 || ev->size % PLACED_ALIGN != 0)
        break; /* no real mmap returns that */
      sim_kernel_place_next(st->kernel, (sim_owner_t)o, ev->size);
      return AS_OK;
    }
  return bad_option(st, src, ev,
                    "expected placed.OWNER (an owner such as pymalloc) and "
                    "an address that is a multiple of 4096",
                    err);
}

/* "seed.KIND.INDEX" (traces/event.h): KIND is 1-15 of [a-z_], INDEX a
 * decimal below 2^32. */
static as_status_t dispatch_seed(engine_state_t *st, const trace_source_t *src,
                                 const trace_event_t *ev, as_err_t *err) {
  const char *kind = ev->label + TRACE_SEED_PREFIX_LEN;
  size_t      klen = strspn(kind, "abcdefghijklmnopqrstuvwxyz_");
  const char *digits = kind[klen] == '.' ? kind + klen + 1 : "";
  size_t      dlen = strspn(digits, "0123456789");
  if (klen >= 1 && klen <= 15 && dlen >= 1 && dlen <= 10 &&
      digits[dlen] == '\0') {
    uint64_t index = strtoull(digits, NULL, 10);
    char     name[16];
    memcpy(name, kind, klen);
    name[klen] = '\0';
    if (index <= UINT32_MAX)
      return model_seed(st->model, name, index, ev->size, err);
  }
  return bad_option(st, src, ev,
                    "expected seed.KIND.INDEX (KIND 1-15 of [a-z_], INDEX a "
                    "thread or arena below 2^32)",
                    err);
}

static as_status_t dispatch_option(engine_state_t       *st,
                                   const trace_source_t *src,
                                   const trace_event_t *ev, as_err_t *err) {
  if (trace_option_is_placement(ev->label))
    return dispatch_placement(st, src, ev, err);
  if (trace_option_is_seed(ev->label))
    return dispatch_seed(st, src, ev, err);
  if (!model_has_set_option(st->model))
    return no_notion(st, src, ev, err);
  as_status_t rc =
      model_set_option(st->model, ev->label, (int64_t)ev->size, ev->t_ns, err);
  if (rc != AS_OK) {
    char msg[sizeof err->msg];
    snprintf(msg, sizeof msg, "%.100s: event %llu: %.300s", src->name,
             (unsigned long long)st->events, err->msg);
    return as_err_set(err, rc, "%s", msg);
  }
  return AS_OK;
}

static as_status_t dispatch(engine_state_t *st, const trace_source_t *src,
                            trace_event_t *ev, as_err_t *err) {
  /* malloc and free are nearly every event: tested first, as two branches
   * a run of them predicts, instead of a table jump. */
  if (ev->op == TRACE_FREE)
    return dispatch_free(st, src, ev, err);
  switch ((trace_op_t)ev->op) {
  case TRACE_MALLOC:
  case TRACE_CALLOC:
  case TRACE_MEMALIGN:
    return dispatch_alloc(st, src, ev, err);
  case TRACE_REALLOC:
    return dispatch_realloc(st, src, ev, err);
  case TRACE_THREAD_START:
  case TRACE_THREAD_EXIT:
    return dispatch_thread(st, src, ev, err);
  case TRACE_MARK:
    return emit_sample(st, SIM_SAMPLE_MARK, ev->label, 0, err);
  case TRACE_IDLE: {
    /* The clock moves past the idle stretch: later events must not be
     * stamped inside it. */
    if (ev->size > UINT64_MAX - ev->t_ns) {
      char where[48];
      event_where(src, ev, where, sizeof where);
      return as_err_set(err, AS_EFORMAT,
                        "%s%s: event %" PRIu64 " (t=%" PRIu64 " ns): idle of "
                        "%" PRIu64 " ns runs the clock past its end "
                        "(2^64 - 1 ns)",
                        src->name, where, st->events, ev->t_ns, ev->size);
    }
    as_status_t rc = check_samples(st, ev->t_ns + ev->size, err);
    if (rc == AS_OK)
      rc = fire_timers_until(st, ev->t_ns + ev->size, err);
    st->now_ns = ev->t_ns + ev->size;
    return rc;
  }
  case TRACE_TRIM:
    return model_trim(st->model, ev->size, ev->t_ns, err);
  case TRACE_RSS:
    return emit_sample(st, SIM_SAMPLE_MEASURED, NULL, ev->size, err);
  case TRACE_PURGE: {
    as_status_t rc =
        model_has_purge(st->model) ? model_purge(st->model, ev, err) : AS_DONE;
    return rc == AS_DONE ? no_notion(st, src, ev, err) : rc;
  }
  case TRACE_OPTION:
    return dispatch_option(st, src, ev, err);
  case TRACE_TOUCH:
    return dispatch_touch(st, src, ev, err);
  case TRACE_MODULE:
  case TRACE_SITE:
    return AS_OK;  /* call-site definitions: for reports, not for models */
  case TRACE_FREE: /* handled above */
  case TRACE_OP_COUNT:
    break;
  }
  return as_err_set(err, AS_EFORMAT, "%s: event %llu: unknown op %u", src->name,
                    (unsigned long long)st->events, (unsigned)ev->op);
}

/* Prefixes an error raised while dispatching event ev (by the model, or by
 * the engine without a position) with the source and the event, so that
 * every failure says where it happened. */
static as_status_t locate_error(const engine_state_t *st,
                                const trace_source_t *src,
                                const trace_event_t *ev, as_status_t rc,
                                as_err_t *err) {
  return trace_error_at(src, ev, st->events, rc, err);
}

/* AS_ENOMEM if the simulator's own memory is over the bound.  Tables kept
 * for the next points of a sweep (sim/reserve.h) are not this run's. */
static as_status_t check_memory(const engine_state_t *st,
                                const trace_source_t *src, as_err_t *err) {
  uint64_t max = st->cfg->max_memory_bytes, rss = sim_host_rss_bytes();
  uint64_t kept = as_reserve_kept_bytes();
  rss = rss > kept ? rss - kept : 0;
  if (max == 0 || rss <= max)
    return AS_OK;
  char a[32], b[32];
  return as_err_set(err, AS_ENOMEM,
                    "%s: event %" PRIu64 " (t=%" PRIu64 " ns): the simulator "
                    "uses %s, over --max-memory %s; raise --max-memory or "
                    "simulate less",
                    src->name, st->events, st->now_ns,
                    sim_host_format_bytes(rss, a, sizeof a),
                    sim_host_format_bytes(max, b, sizeof b));
}

/* One event of the trace: timers due before it, then the event. */
static as_status_t replay_event(engine_state_t *st, trace_source_t *src,
                                trace_event_t *ev, as_err_t *err) {
  as_status_t rc;
  if (ev->t_ns < st->now_ns) {
    char where[48];
    event_where(src, ev, where, sizeof where);
    return as_err_set(err, AS_EFORMAT,
                      "%s%s: event %llu: time %llu ns is before the clock "
                      "(%llu ns)",
                      src->name, where, (unsigned long long)st->events,
                      (unsigned long long)ev->t_ns,
                      (unsigned long long)st->now_ns);
  }
  if (sim_event_queue_next_due(st->timers) <= ev->t_ns &&
      ((rc = check_samples(st, ev->t_ns, err)) != AS_OK ||
       (rc = fire_timers_until(st, ev->t_ns, err)) != AS_OK)) {
    return locate_error(st, src, ev, rc, err); /* a timer due before it */
  }
  st->now_ns = ev->t_ns;
  rc = dispatch(st, src, ev, err);
  if (rc != AS_OK && rc != AS_DONE)
    return locate_error(st, src, ev, rc, err);
  st->events++;
  note_peak(st);
  if (st->events % SIM_ENGINE_MEMORY_CHECK_EVERY == 0)
    return check_memory(st, src, err);
  return AS_OK;
}

/* How many events ahead of the one served the model's prefetch looks, so
 * that a free's record is in cache when the free is served.  On the churn
 * benchmark trace with the glibc model, 4, 8, 16 and 32 ahead took the
 * same time within this machine's noise (0.64-0.77 s CPU). */
#define PREFETCH_AHEAD 8

typedef void (*prefetch_fn)(const model_t *, const trace_event_t *);

/* For a model that prefetches (model.h): starts loading what serving a
 * free or realloc will read, the model's records of the object (the only
 * events whose records a model's prefetch looks up) and the object's
 * live-table entry, so that the cache misses of a trace that frees in
 * random order overlap the events in between.  A model without prefetch
 * keeps no per-object records and pays nothing. */
static inline void prefetch_event(const engine_state_t *st, prefetch_fn fn,
                                  const trace_event_t *ev) {
  if (ev->op != TRACE_FREE && ev->op != TRACE_REALLOC)
    return;
  fn(st->model, ev);
  if (ev->id < st->live_len)
    __builtin_prefetch(st->live + (st->narrow ? ev->id : 2 * ev->id));
}

/* The trace's events a batch at a time (a version 3 binary trace hands
 * out a block of them without a call per event). */
static as_status_t replay(engine_state_t *st, trace_source_t *src,
                          as_err_t *err) {
  trace_event_t one = {0}, *evs;
  size_t        n;
  as_status_t   rc;
  prefetch_fn   prefetch = st->model->methods->prefetch;
  while ((rc = trace_source_batch(src, &one, &evs, &n, err)) == AS_OK) {
    /* The events with one PREFETCH_AHEAD after them in the batch: one
     * test per event, not two. */
    size_t ahead =
        prefetch != NULL && n > PREFETCH_AHEAD ? n - PREFETCH_AHEAD : 0;
    for (size_t i = 0; i < n; i++) {
      if (i < ahead)
        prefetch_event(st, prefetch, &evs[i + PREFETCH_AHEAD]);
      if ((rc = replay_event(st, src, &evs[i], err)) != AS_OK)
        return rc;
    }
  }
  return rc == AS_DONE ? AS_OK : rc;
}

/* touch_threshold provenance of src into st (0 when absent), and with it
 * the page size the touches were measured in (a capture's page_size). */
static as_status_t read_touch_threshold(engine_state_t       *st,
                                        const trace_source_t *src,
                                        as_err_t             *err) {
  const char *v = trace_meta_get(&src->meta, "touch_threshold");
  if (v == NULL)
    return AS_OK;
  uint64_t page = sim_kernel_page_size(st->kernel);
  char    *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n < page)
    return as_err_set(err, AS_EFORMAT,
                      "%s: provenance touch_threshold: expected bytes, at "
                      "least the OS page size %llu, got '%s'",
                      src->name, (unsigned long long)page, v);
  st->touch_threshold = n;
  return trace_meta_touch_page(&src->meta, src->name, &st->touch_page, err);
}

/* Runs the clock on for cfg->settle_ns after the last event. */
static as_status_t settle(engine_state_t *st, as_err_t *err) {
  uint64_t until = st->now_ns + st->cfg->settle_ns;
  if (until < st->now_ns)
    return as_err_set(err, AS_EINVAL,
                      "--settle %" PRIu64 " ns after the last event (t=%" PRIu64
                      " ns) runs the clock past its end (2^64 - 1 ns)",
                      st->cfg->settle_ns, st->now_ns);
  as_status_t rc = check_samples(st, until, err);
  if (rc == AS_OK)
    rc = fire_timers_until(st, until, err);
  st->now_ns = until;
  return rc;
}

/* A floor the source declares (traces/workload.h), or 0. */
static uint64_t declared_floor(const trace_source_t *src, const char *key) {
  const char *v = trace_meta_get(&src->meta, key);
  return v ? strtoull(v, NULL, 10) : 0;
}

/* Refuses, before the first event, a source whose declared peak needs more
 * than the memory bound for the engine's and the kernel's share alone:
 * a byte per object id in the live table (its narrow form: more when the
 * trace has many sizes), SIM_KERNEL_BYTES_PER_BLOCK
 * per 2 MiB the program writes.  The model's own share comes on top. */
static as_status_t check_plan(const sim_engine_config_t *cfg,
                              const trace_source_t *src, as_err_t *err) {
  uint64_t objects = declared_floor(src, WORKLOAD_META_PEAK_OBJECTS);
  uint64_t bytes = declared_floor(src, WORKLOAD_META_PEAK_BYTES);
  uint64_t max = cfg->max_memory_bytes;
  if (max == 0 || (objects == 0 && bytes == 0))
    return AS_OK;
  double need =
      (double)objects * sizeof(uint8_t) +
      (double)(bytes >> SIM_KERNEL_CHUNK_SHIFT) * SIM_KERNEL_BYTES_PER_BLOCK;
  if (need <= (double)max)
    return AS_OK;
  char a[32], b[32], c[32];
  return as_err_set(
      err, AS_ENOMEM,
      "%s: its peak of %" PRIu64 " live objects and %s needs "
      "at least %s of simulator memory (%zu bytes per object, "
      "%d per 2 MiB written), over --max-memory %s; raise "
      "--max-memory or simulate less",
      src->name, objects, sim_host_format_bytes(bytes, a, sizeof a),
      sim_host_format_bytes((uint64_t)need, b, sizeof b), sizeof(uint8_t),
      SIM_KERNEL_BYTES_PER_BLOCK, sim_host_format_bytes(max, c, sizeof c));
}

as_status_t sim_engine_run(const sim_engine_config_t *cfg, sim_session_t *s,
                           trace_source_t *src, sim_run_result_t *result,
                           as_err_t *err) {
  engine_state_t st = {.cfg = cfg,
                       .s = s,
                       .res = result,
                       .model = s->model,
                       .kernel = s->kernel,
                       .timers = s->timers};
  memset(result, 0, sizeof *result);
  result->max_threads = 1;
  sim_timer_init(&st.sampler, sampler_fire);
  if (sim_idtable_init(&st.live_tab, sizeof(uint16_t)) != AS_OK)
    return as_err_set(err, AS_ENOMEM,
                      "out of address space for the object-id table");
  st.live = sim_idtable_base(&st.live_tab);
  st.narrow = true;
  st.wide_of[NARROW_BIG] = SIZE_BIG;
  as_reserve_reuse_trim(); /* the session's and this run's tables are made */
  as_status_t rc = check_plan(cfg, src, err);
  if (rc == AS_OK && cfg->sample_every_ns > 0)
    rc =
        sim_event_queue_push(s->timers, &st.sampler, cfg->sample_every_ns, err);
  if (rc == AS_OK)
    rc = read_touch_threshold(&st, src, err);
  if (rc == AS_OK)
    rc = replay(&st, src, err);
  if (rc == AS_OK && cfg->settle_ns > 0)
    rc = settle(&st, err);
  sim_event_queue_cancel(s->timers, &st.sampler);
  result->events = st.events;
  result->final_rss_bytes = sim_kernel_rss_bytes(s->kernel);
  result->final_live_bytes = st.live_bytes;
  result->final_t_ns = st.now_ns;
  if (rc == AS_OK)
    rc = emit_sample(&st, SIM_SAMPLE_FINAL, NULL, 0, err);
  sim_idtable_free(&st.live_tab);
  free(st.big);
  free(st.running);
  return rc;
}
