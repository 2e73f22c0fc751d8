/* tests/fuzz/fuzz_models.c -- libFuzzer target for the models: the input
 * bytes drive a generator of *valid* traces, which every model in the
 * registry replays with fuzzed options, checking invariants as it goes.
 *
 * The traces are valid by construction: non-decreasing times, dense ids
 * recycled lowest first, frees and reallocs of live objects only, each
 * object freed in the domain it was allocated in, memalign with power-of-two
 * alignments, events only on started threads, and threads 1..7 started and
 * exited in turn.  Sizes run from 0 to 48 MiB, with idles, trims, marks,
 * measured-RSS events, purges (all arenas or arena 0), run-time option
 * changes and touches of live objects' bytes between; half the traces
 * declare a touch_threshold, so their large allocations are written only
 * by touches.  An option event names a knob the replaying model changes at
 * run time (probed once per model: every knob name any registered model
 * declares, tried on a fresh instance), or becomes a mark for a model that
 * has none.  So any failure is a bug: a model or the engine refusing a
 * valid trace, a broken invariant, a crash or a sanitizer report.
 *
 * Every model the registry lists is run (new models are covered the day
 * they are registered), each with an option set drawn from its own option
 * table (each knob kept at its default or set to a value from its kind's
 * candidates), on a kernel with a fuzzed page size, THP and memory
 * pressure.  A drawn option set the model refuses (a value out of range)
 * is replaced by the defaults, so every model runs on every input.  At
 * every mark -- one is inserted every MARK_EVERY (32) events -- the target
 * checks:
 *   - sim_kernel_check_invariants (counters against a recount);
 *   - model_check, the model's own invariant checker when it has one;
 *   - RSS is the sum of its owners' parts and at most the mapped bytes;
 *   - the model's live bytes and objects equal the trace's.
 * Each model runs the trace twice and must give the same peak and final
 * RSS: the models are deterministic.  The one error a valid trace may end
 * in is AS_ENOMEM, an allocator out of memory under the drawn options
 * (tcmalloc's heap_limit_mb, where the real one returns NULL); then both
 * runs must stop at the same event.  A model whose defaults this kernel
 * refuses (tcmalloc's 8 KiB page under 64 KiB OS pages) sits it out.
 *
 * To turn a failing input into a trace file and a command line:
 *   FUZZ_MODELS_DUMP=DIR build-fuzz/tests/fuzz/fuzz_models INPUT
 * writes DIR/MODEL.trace (the trace as that model replays it) and
 * DIR/specs.txt (one `allocsim replay` line per model, with the drawn
 * kernel options).
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "tests/helpers/array_source.h"
#include "traces/trace_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_EVENTS  512
#define MAX_LIVE    128 /* ids 0..MAX_LIVE-1 */
#define MAX_THREADS 8   /* thread 0 always runs */
#define MARK_EVERY  32
#define MIB         (UINT64_C(1) << 20)

/* ---- Bytes to choices --------------------------------------------------- */

typedef struct bytes_s bytes_t;
struct bytes_s {
  const uint8_t *p;
  size_t         n;
};

/* The next byte, 0 once the input is used up (so every input is a whole
 * trace: a short input is a trace of mostly mallocs of small sizes). */
static unsigned byte(bytes_t *b) {
  if (b->n == 0)
    return 0;
  b->n--;
  return *b->p++;
}

static uint64_t below(bytes_t *b, uint64_t n) {
  uint64_t v = 0;
  for (uint64_t range = 1; range < n && range != 0; range <<= 8)
    v = (v << 8) | byte(b);
  return n ? v % n : 0;
}

/* Sizes from 0 to 48 MiB, most of them small as in real programs. */
static uint64_t fuzz_size(bytes_t *b) {
  switch (byte(b) % 16) {
  case 0:
    return below(b, 17);
  case 1:
  case 2:
  case 3:
  case 4:
  case 5:
  case 6:
  case 7:
    return 17 + below(b, 512 - 16);
  case 8:
  case 9:
  case 10:
  case 11:
    return 513 + below(b, 128 * 1024);
  case 12:
  case 13:
    return 128 * 1024 + below(b, 2 * MIB);
  case 14:
    return below(b, 48 * MIB + 1);
  default: /* near glibc's and pymalloc's thresholds */
    return (byte(b) & 1 ? 512 : 131072) - 16 + below(b, 33);
  }
}

/* ---- The trace ---------------------------------------------------------- */

typedef struct gen_s gen_t;
struct gen_s {
  trace_event_t ev[MAX_EVENTS];
  size_t        n;
  uint64_t      t;
  bool          live[MAX_LIVE];
  uint8_t       domain[MAX_LIVE];
  uint64_t      size[MAX_LIVE];
  size_t        nlive;
  bool          running[MAX_THREADS];
  uint64_t      touch_threshold; /* provenance; 0: none */
};

/* An option event's knob is chosen per model (scoped): the generator
 * leaves this label and the choice in id. */
static const char option_placeholder[] = "?";

static const char *const mark_labels[] = {"m0", "m1", "m2", "m3"};

/* Appends e at the current time; an idle moves the clock past itself
 * before the next event (the engine's rule). */
static void emit(gen_t *g, trace_event_t e) {
  e.t_ns = g->t;
  g->ev[g->n++] = e;
  if (e.op == TRACE_IDLE)
    g->t += e.size;
  /* the last slot is the closing mark's */
  if (g->n % MARK_EVERY == MARK_EVERY - 1 && g->n < MAX_EVENTS - 1)
    g->ev[g->n++] = (trace_event_t){
        .t_ns = g->t, .op = TRACE_MARK, .label = mark_labels[g->n % 4]};
}

/* A running thread: thread 0 or one started and not exited. */
static uint32_t some_thread(gen_t *g, bytes_t *b) {
  uint32_t t = (uint32_t)below(b, MAX_THREADS);
  return g->running[t] ? t : 0;
}

/* The live id the byte picks (the live ones in id order), or -1. */
static int some_live(gen_t *g, bytes_t *b) {
  if (g->nlive == 0)
    return -1;
  size_t k = below(b, g->nlive);
  for (int id = 0; id < MAX_LIVE; id++)
    if (g->live[id] && k-- == 0)
      return id;
  return -1;
}

static void gen_alloc(gen_t *g, bytes_t *b) {
  int id = 0;
  while (id < MAX_LIVE && g->live[id])
    id++; /* lowest free id first, as trace writers recycle them */
  if (id == MAX_LIVE)
    return;
  trace_event_t e = {.id = (uint64_t)id, .thread = some_thread(g, b)};
  unsigned      k = byte(b) % 8;
  e.op = k < 5 ? TRACE_MALLOC : k < 7 ? TRACE_CALLOC : TRACE_MEMALIGN;
  e.size = fuzz_size(b);
  e.domain = e.op == TRACE_MEMALIGN ? TRACE_DOMAIN_RAW
                                    : (uint8_t)(byte(b) % TRACE_DOMAIN_COUNT);
  if (e.op == TRACE_MEMALIGN)
    e.align = UINT64_C(1) << (3 + below(b, 19)); /* 8 B .. 2 MiB */
  g->live[id] = true;
  g->domain[id] = e.domain;
  g->size[id] = e.size;
  g->nlive++;
  emit(g, e);
}

/* Bytes [offset, offset + length) of a live object, written by the
 * program (a touch event): length at least 1 (the formats' rule), so only
 * objects of at least one byte are touched. */
static void gen_touch(gen_t *g, bytes_t *b, int id) {
  uint64_t size = g->size[id];
  if (size == 0)
    return;
  uint64_t off = below(b, size);
  emit(g, (trace_event_t){.op = TRACE_TOUCH,
                          .id = (uint64_t)id,
                          .offset = off,
                          .size = 1 + below(b, size - off),
                          .thread = some_thread(g, b)});
}

static uint64_t option_value(bytes_t *b) {
  static const int64_t values[] = {0,    1,     2,      16,      64,       128,
                                   4096, 65536, 131072, 1 << 20, 32 << 20, -1};
  return (uint64_t)values[below(b, sizeof values / sizeof values[0])];
}

static void generate(gen_t *g, bytes_t *b) {
  static const uint64_t thresholds[] = {65536, 1 << 20, 4 << 20};
  memset(g, 0, sizeof *g);
  g->running[0] = true;
  unsigned th = byte(b);
  if (th & 1) /* at least a page (the engine's rule): 64 KiB is any page */
    g->touch_threshold = thresholds[(th >> 1) % 3];
  while (g->n < MAX_EVENTS - 1 && (b->n > 0 || g->n < 8)) {
    unsigned dt = byte(b);
    g->t += dt < 200 ? dt % 4 : (uint64_t)dt << (dt % 24);
    unsigned k = byte(b) % 32;
    int      id;
    if (k < 14) {
      gen_alloc(g, b);
    } else if (k < 22 && (id = some_live(g, b)) >= 0) {
      g->live[id] = false;
      g->nlive--;
      emit(g, (trace_event_t){.op = TRACE_FREE,
                              .id = (uint64_t)id,
                              .thread = some_thread(g, b),
                              .domain = g->domain[id]});
    } else if (k < 25 && (id = some_live(g, b)) >= 0) {
      g->size[id] = fuzz_size(b);
      emit(g, (trace_event_t){.op = TRACE_REALLOC,
                              .id = (uint64_t)id,
                              .size = g->size[id],
                              .thread = some_thread(g, b),
                              .domain = g->domain[id]});
    } else if (k < 27 && (id = some_live(g, b)) >= 0) {
      gen_touch(g, b, id);
    } else if (k == 27) {
      unsigned x = byte(b);
      if (x & 1)
        emit(g, (trace_event_t){.op = TRACE_PURGE,
                                .size = (x >> 1) % TRACE_PURGE_COUNT,
                                .id = x & 8 ? 0 : TRACE_ALL_ARENAS,
                                .thread = some_thread(g, b)});
      else
        emit(g, (trace_event_t){.op = TRACE_OPTION,
                                .label = option_placeholder,
                                .id = byte(b),
                                .size = option_value(b),
                                .thread = some_thread(g, b)});
    } else if (k < 29) {
      uint32_t t = 1 + (uint32_t)below(b, MAX_THREADS - 1);
      g->running[t] = !g->running[t];
      emit(g, (trace_event_t){.op = g->running[t] ? TRACE_THREAD_START
                                                  : TRACE_THREAD_EXIT,
                              .thread = t});
    } else if (k == 29 && (byte(b) & 1)) {
      emit(g, (trace_event_t){.op = TRACE_TRIM,
                              .size = below(b, 1 << 20),
                              .thread = some_thread(g, b)});
    } else if (k == 29) {
      uint64_t d = below(b, UINT64_C(1) << 32); /* up to 4.3 s */
      emit(g, (trace_event_t){
                  .op = TRACE_IDLE, .size = d, .thread = some_thread(g, b)});
    } else if (k == 30) {
      emit(g, (trace_event_t){.op = TRACE_RSS, .size = below(b, 1 << 30)});
    } else {
      emit(g, (trace_event_t){.op = TRACE_MARK, .label = "mark"});
    }
  }
  g->ev[g->n++] =
      (trace_event_t){.t_ns = g->t, .op = TRACE_MARK, .label = "end"};
}

/* The knob names a model changes at run time: its own options and, for a
 * composition, its libc's, each tried with its default value on a session
 * of the spec (the version decides which spellings exist).  A refusal may
 * leave a model failed, so the session is opened again after one.
 * Computed once per model and version (its own and its libc's), the last
 * few kept. */
typedef struct knobs_s knobs_t;
struct knobs_s {
  char        key[1216]; /* spec, a newline, libc */
  const char *name[64];
  size_t      n;
};

static void open_or_abort(const char *spec, const char *libc,
                          const sim_kernel_config_t *kcfg, sim_session_t *s) {
  as_err_t err = {0};
  if (sim_session_open(spec, libc, kcfg, s, &err) != AS_OK)
    abort(); /* only called with specs that opened before */
}

/* Adds the rows of opts that s's model changes at run time to k. */
static void try_knobs(knobs_t *k, const model_option_t *opts, const char *spec,
                      const char *libc, const sim_kernel_config_t *kcfg,
                      sim_session_t *s) {
  for (const model_option_t *o = opts; o->name != NULL; o++) {
    char   *end;
    int64_t v = strtoll(o->default_value, &end, 10);
    if (*end != '\0' || k->n == sizeof k->name / sizeof k->name[0])
      continue;
    as_err_t err = {0};
    if (model_set_option(s->model, o->name, v, 0, &err) == AS_OK) {
      k->name[k->n++] = o->name;
    } else {
      sim_session_close(s);
      open_or_abort(spec, libc, kcfg, s);
    }
  }
}

/* The version=V option of spec ("" if none): which spellings a model
 * changes at run time depends on it alone, so the knobs are kept by it. */
static const char *version_of(const char *spec, char *buf, size_t len) {
  const char *v = strstr(spec, "version=");
  size_t      n = v == NULL ? 0 : strcspn(v, ",");
  snprintf(buf, len, "%.*s", (int)n, v == NULL ? "" : v);
  return buf;
}

static const knobs_t *runtime_knobs(const model_methods_t *m, const char *spec,
                                    const char                *libc,
                                    const sim_kernel_config_t *kcfg) {
  static knobs_t cache[32];
  static size_t  next;
  char           key[sizeof cache[0].key];
  char           mine[64], theirs[64];
  snprintf(key, sizeof key, "%s %s\n%s", m->name,
           version_of(spec, mine, sizeof mine),
           version_of(libc ? libc : "", theirs, sizeof theirs));
  for (size_t i = 0; i < sizeof cache / sizeof cache[0]; i++)
    if (strcmp(cache[i].key, key) == 0)
      return &cache[i];
  knobs_t *k = &cache[next++ % (sizeof cache / sizeof cache[0])];
  memcpy(k->key, key, sizeof key);
  k->n = 0;
  sim_session_t s;
  open_or_abort(spec, libc, kcfg, &s);
  try_knobs(k, m->options, spec, libc, kcfg, &s);
  if (m->composition) {
    char name[64];
    snprintf(name, sizeof name, "%s", libc ? libc : model_default_libc());
    name[strcspn(name, ":")] = '\0';
    try_knobs(k, model_find(name)->options, spec, libc, kcfg, &s);
  }
  sim_session_close(&s);
  return k;
}

/* The trace as model m replays it.  Option events get a knob m changes at
 * run time (or become marks when it has none).  The standalone pymalloc
 * model, a building block of the cpython composition, serves only requests
 * of 1..512 bytes and no memalign (its header: "use the cpython model to
 * route the rest to libc"), so its copy has sizes folded into that range,
 * memaligns as mallocs and touches clipped to the folded sizes.  Every
 * full allocator model must take every valid trace. */
static const trace_event_t *scoped(const gen_t *g, const model_methods_t *m,
                                   const char *spec, const char *libc,
                                   const sim_kernel_config_t *kcfg) {
  static trace_event_t copy[MAX_EVENTS];
  uint64_t             size[MAX_LIVE] = {0};
  bool                 small = strcmp(m->name, "pymalloc") == 0;
  const knobs_t       *knobs = runtime_knobs(m, spec, libc, kcfg);
  for (size_t i = 0; i < g->n; i++) {
    copy[i] = g->ev[i];
    trace_event_t *e = &copy[i];
    if (e->op == TRACE_OPTION) {
      if (knobs->n == 0)
        *e = (trace_event_t){
            .t_ns = e->t_ns, .op = TRACE_MARK, .label = "option"};
      else
        e->label = knobs->name[e->id % knobs->n], e->id = 0;
      continue;
    }
    if (!small)
      continue;
    if (e->op == TRACE_MEMALIGN) {
      e->op = TRACE_MALLOC;
      e->align = 0;
    }
    if (e->op == TRACE_MALLOC || e->op == TRACE_CALLOC ||
        e->op == TRACE_REALLOC)
      e->size = size[e->id] = 1 + e->size % 512;
    if (e->op == TRACE_TOUCH) {
      uint64_t max = size[e->id]; /* >= 1 */
      e->offset = e->offset >= max ? max - 1 : e->offset;
      e->size = e->size > max - e->offset ? max - e->offset : e->size;
    }
  }
  return copy;
}

/* ---- Option sets -------------------------------------------------------- */

/* Appends "name=value" for each knob of table the input chooses to set. */
static void fuzz_options(bytes_t *b, const model_option_t *table, char *buf,
                         size_t len) {
  static const char *const numbers[] = {"0",      "1",       "2",       "7",
                                        "16",     "100",     "4096",    "65536",
                                        "131072", "1048576", "33554432"};
  size_t                   used = 0;
  buf[0] = '\0';
  for (const model_option_t *o = table; o->name != NULL; o++) {
    if (byte(b) % 4 != 0)
      continue;
    char value[64];
    switch (o->kind) {
    case OPT_ENUM: {
      size_t      nchoices = 1;
      const char *c = o->choices;
      for (const char *q = c; *q; q++)
        nchoices += *q == '|';
      size_t k = below(b, nchoices);
      while (k-- > 0)
        c = strchr(c, '|') + 1;
      size_t l = strcspn(c, "|");
      snprintf(value, sizeof value, "%.*s", (int)l, c);
      break;
    }
    case OPT_BOOL:
      snprintf(value, sizeof value, "%s", byte(b) & 1 ? "true" : "false");
      break;
    case OPT_I64:
      if (byte(b) & 1) {
        snprintf(value, sizeof value, "-1");
        break;
      }
      /* fall through */
    default:
      snprintf(value, sizeof value, "%s",
               numbers[below(b, sizeof numbers / sizeof numbers[0])]);
    }
    used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s=%s",
                             used ? "," : "", o->name, value);
  }
}

/* ---- Running and checking ----------------------------------------------- */

typedef struct check_s check_t;
struct check_s {
  sim_session_t *s;
  const char    *spec;
};

static void fail(const check_t *c, const char *what, const char *msg) {
  fprintf(stderr, "fuzz_models: %s (%s): %s\n", c->spec, what, msg);
  abort();
}

static as_status_t check_at_mark(void *user, const sim_sample_t *smp,
                                 as_err_t *err) {
  (void)err;
  const check_t *c = user;
  if (smp->kind != SIM_SAMPLE_MARK)
    return AS_OK;
  as_err_t e = {0};
  if (sim_kernel_check_invariants(c->s->kernel, &e) != AS_OK)
    fail(c, "kernel invariants", e.msg);
  if (model_check(c->s->model, &e) != AS_OK)
    fail(c, "model invariants", e.msg);
  uint64_t sum = 0;
  for (int o = 0; o < SIM_OWNER_COUNT; o++)
    sum += smp->owner_bytes[o];
  if (sum != smp->rss_bytes)
    fail(c, "owners", "RSS is not the sum of its owners' parts");
  if (smp->rss_bytes > sim_kernel_mapped_bytes(c->s->kernel))
    fail(c, "mapped", "more bytes resident than mapped");
  model_stats_t st;
  model_stats(c->s->model, &st);
  if (st.live_bytes != smp->live_bytes) {
    char msg[128];
    snprintf(msg, sizeof msg,
             "model says %" PRIu64 " live bytes, trace %" PRIu64, st.live_bytes,
             smp->live_bytes);
    fail(c, "live bytes", msg);
  }
  return AS_OK;
}

/* Replays the trace against spec; returns the result. */
static sim_run_result_t run_once(const gen_t *g, const model_methods_t *m,
                                 const char *spec, const char *libc,
                                 const sim_kernel_config_t *kcfg) {
  sim_session_t s;
  as_err_t      err = {0};
  if (sim_session_open(spec, libc, kcfg, &s, &err) != AS_OK) {
    fprintf(stderr, "fuzz_models: %s: %s\n", spec, err.msg);
    abort(); /* only called with specs that opened before */
  }
  check_t             c = {.s = &s, .spec = spec};
  sim_engine_config_t cfg = {.on_sample = check_at_mark, .user = &c};
  array_source_t      src;
  array_source_init(&src, scoped(g, m, spec, libc, kcfg), g->n);
  if (g->touch_threshold != 0) {
    char v[32];
    snprintf(v, sizeof v, "%" PRIu64, g->touch_threshold);
    if (trace_meta_set(&src.base.meta, "touch_threshold", v, &err) != AS_OK)
      abort();
  }
  sim_run_result_t res;
  as_status_t      rc = sim_engine_run(&cfg, &s, &src.base, &res, &err);
  if (rc != AS_OK && rc != AS_ENOMEM)
    fail(&c, "run", err.msg);
  sim_session_close(&s);
  return res;
}

/* True if spec opens on kcfg; false if it is refused as a bad option or
 * value (anything else is a failure). */
static bool spec_opens(const char *spec, const char *libc,
                       const sim_kernel_config_t *kcfg) {
  sim_session_t s;
  as_err_t      err = {0};
  if (sim_session_open(spec, libc, kcfg, &s, &err) == AS_OK) {
    sim_session_close(&s);
    return true;
  }
  if (err.code != AS_EUSAGE && err.code != AS_EINVAL) {
    fprintf(stderr, "fuzz_models: %s: %s\n", spec, err.msg);
    abort();
  }
  return false;
}

/* spec with the drawn options if the model takes them, else its defaults;
 * empty if the model takes neither on this kernel (tcmalloc's 8 KiB page
 * under a 64 KiB OS page), so it sits this input out. */
static void choose_spec(const model_methods_t *m, bytes_t *b, const char *libc,
                        const sim_kernel_config_t *kcfg, char *spec,
                        size_t len) {
  char opts[512];
  fuzz_options(b, m->options, opts, sizeof opts);
  snprintf(spec, len, "%s%s%s", m->name, opts[0] ? ":" : "", opts);
  if (spec_opens(spec, libc, kcfg))
    return;
  snprintf(spec, len, "%s", m->name);
  if (!spec_opens(spec, libc, kcfg))
    spec[0] = '\0';
}

/* FUZZ_MODELS_DUMP: each model's trace as text and its replay line. */
static void dump(const char *dir, const gen_t *g, const char *libc,
                 const sim_kernel_config_t    *kcfg,
                 const model_methods_t *const *models, char specs[][600],
                 size_t nmodels) {
  char path[4200];
  snprintf(path, sizeof path, "%s/specs.txt", dir);
  FILE *f = fopen(path, "w");
  if (f == NULL)
    abort();
  trace_meta_t meta = {0};
  char         v[32];
  snprintf(v, sizeof v, "%" PRIu64, g->touch_threshold);
  if (g->touch_threshold != 0 &&
      trace_meta_set(&meta, "touch_threshold", v, NULL) != AS_OK)
    abort();
  for (size_t i = 0; i < nmodels; i++) {
    if (specs[i][0] == '\0')
      continue;
    snprintf(path, sizeof path, "%s/%s.trace", dir, models[i]->name);
    trace_writer_t *w;
    as_err_t        err = {0};
    if (trace_writer_open(path, TRACE_FORMAT_TEXT, &meta, &w, &err) != AS_OK)
      abort();
    const trace_event_t *ev = scoped(g, models[i], specs[i], libc, kcfg);
    for (size_t e = 0; e < g->n; e++)
      if (trace_writer_write(w, &ev[e], &err) != AS_OK)
        abort();
    if (trace_writer_close(w, &err) != AS_OK)
      abort();
    fprintf(
        f,
        "allocsim replay %s.trace --model '%s'%s%s%s --page-size "
        "%" PRIu64 "%s%s%s\n",
        models[i]->name, specs[i], models[i]->composition ? " --libc '" : "",
        models[i]->composition ? libc : "", models[i]->composition ? "'" : "",
        kcfg->page_size, kcfg->thp ? " --thp" : "",
        kcfg->memory_pressure ? " --memory-pressure" : "",
        kcfg->zero_page ? "" : " --no-zero-page");
  }
  fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static gen_t          g; /* 40 KB: off the stack */
  bytes_t               b = {data, size};
  static const uint64_t pages[] = {4096, 16384, 65536};
  sim_kernel_config_t   kcfg;
  sim_kernel_config_default(&kcfg);
  unsigned k = byte(&b);
  kcfg.page_size = pages[k % 3];
  kcfg.thp = (k >> 2) & 1;
  kcfg.memory_pressure = (k >> 3) & 1;
  kcfg.zero_page = !((k >> 4) & 1);
  /* The libc that compositions use, with its own fuzzed options. */
  char                   libc[600];
  const model_methods_t *libc_m = model_find(model_default_libc());
  choose_spec(libc_m, &b, NULL, &kcfg, libc, sizeof libc);

  size_t                        nmodels;
  const model_methods_t *const *models = model_registry(&nmodels);
  char                          specs[16][600];
  if (nmodels > 16)
    nmodels = 16;
  for (size_t i = 0; i < nmodels; i++)
    choose_spec(models[i], &b, libc, &kcfg, specs[i], sizeof specs[i]);
  generate(&g, &b);
  const char *dump_dir = getenv("FUZZ_MODELS_DUMP");
  if (dump_dir != NULL)
    dump(dump_dir, &g, libc, &kcfg, models, specs, nmodels);

  for (size_t i = 0; i < nmodels; i++) {
    if (specs[i][0] == '\0')
      continue;
    sim_run_result_t a = run_once(&g, models[i], specs[i], libc, &kcfg);
    sim_run_result_t r = run_once(&g, models[i], specs[i], libc, &kcfg);
    if (a.peak_rss_bytes != r.peak_rss_bytes ||
        a.final_rss_bytes != r.final_rss_bytes || a.events != r.events) {
      fprintf(stderr, "fuzz_models: %s: two runs differ\n", specs[i]);
      abort();
    }
  }
  return 0;
}
