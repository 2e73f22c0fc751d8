/* tests/bench/bench_trace_decode.c -- how fast the binary (and text) trace
 * readers decode, in events per second.
 *
 * Writes N events (default 10 M) of a realistic malloc/free mix to a
 * temporary .astrace, then reads the file back through trace_open /
 * trace_source_next three times and reports the best run; the file is in the
 * page cache by then, so the figure is decoding plus the copy out of the
 * cache, which is what replay pays.  Times are process CPU time (best of
 * 5), which a busy shared machine distorts far less than the wall clock.  The
 * project's target is replaying
 * >= 50 M events/s end to end, so decoding should cost well under 10 ns per
 * event.  A text copy of the first 1 M events is timed too, for scale, and
 * a source that decodes nothing, for the interface's own cost.
 *
 *   bench_trace_decode [N] [DIR]      (build Release for meaningful numbers)
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "traces/trace_io.h"

/* ---- Workload ----------------------------------------------------------- */

/* A malloc-heavy program: mostly small objects with a few threads, frees
 * biased to recent objects, occasional realloc/calloc/memalign, RSS samples
 * and marks.  Ids of freed objects are reused (a stack of free ids). */
typedef struct gen_s {
  uint64_t  state;
  uint64_t  t_ns;
  uint64_t *live; /* ids of live objects */
  size_t    nlive;
  uint64_t *free_ids; /* recycled ids */
  size_t    nfree;
  uint64_t  next_id;
} gen_t;

#define GEN_MAX_LIVE 100000

static uint64_t rnd(gen_t *g) {
  g->state ^= g->state << 13;
  g->state ^= g->state >> 7;
  g->state ^= g->state << 17;
  return g->state;
}

static void gen_event(gen_t *g, uint64_t i, trace_event_t *ev) {
  memset(ev, 0, sizeof *ev);
  uint64_t r = rnd(g);
  g->t_ns += 20 + (r & 511);
  ev->t_ns = g->t_ns;
  ev->thread = (r >> 9) % 16 < 12 ? 0 : (uint32_t)((r >> 13) & 3);
  unsigned pick = (unsigned)((r >> 16) % 1000);
  if (i % 1000000 == 0) {
    ev->op = TRACE_MARK;
    ev->label = "checkpoint";
  } else if (pick < 2) {
    ev->op = TRACE_RSS;
    ev->size = (uint64_t)(100 + (r >> 32) % 1000) << 20;
  } else if (g->nlive > 0 && (pick < 470 || g->nlive == GEN_MAX_LIVE)) {
    /* Free, biased to the most recent objects. */
    size_t k = (r >> 32) % 4 == 0
                   ? (size_t)((r >> 34) % g->nlive)
                   : g->nlive - 1 -
                         (size_t)((r >> 34) % (g->nlive < 64 ? g->nlive : 64));
    ev->op = TRACE_FREE;
    ev->id = g->live[k];
    g->live[k] = g->live[--g->nlive];
    g->free_ids[g->nfree++] = ev->id;
  } else if (g->nlive > 0 && pick < 500) {
    ev->op = TRACE_REALLOC;
    ev->id = g->live[(r >> 32) % g->nlive];
    ev->size = 16 + (r >> 40) % 4096;
  } else {
    ev->op = pick < 505   ? TRACE_MEMALIGN
             : pick < 530 ? TRACE_CALLOC
                          : TRACE_MALLOC;
    ev->id = g->nfree > 0 ? g->free_ids[--g->nfree] : g->next_id++;
    unsigned s = (unsigned)((r >> 32) % 100);
    ev->size = s < 80   ? 8 + (r >> 40) % 248
               : s < 98 ? 256 + (r >> 40) % 8192
                        : 65536 + (r >> 40) % (4u << 20);
    if (ev->op == TRACE_MEMALIGN)
      ev->align = (uint64_t)64 << ((r >> 50) % 7);
    g->live[g->nlive++] = ev->id;
  }
}

/* ---- Timing ------------------------------------------------------------- */

/* Process CPU time, not wall time: on a shared machine the wall clock
 * mostly measures the neighbours.  Both are printed for the decode. */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double wall_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const as_err_t *err) {
  fprintf(stderr, "bench_trace_decode: %s\n", err->msg);
  exit(1);
}

/* Reads path to the end; returns seconds taken, *count events.  batched:
 * through trace_source_batch, as the engine reads (a version 3 binary
 * trace hands out a block at a time); else one trace_source_next per
 * event. */
static double decode(const char *path, bool batched, uint64_t *count,
                     uint64_t *check) {
  trace_source_t *src;
  as_err_t        err = {0};
  trace_event_t   one, *evs;
  size_t          got;
  double          t0 = now_s();
  if (trace_open(path, &src, &err) != AS_OK)
    die(&err);
  uint64_t    n = 0, sum = 0;
  as_status_t rc;
  if (batched) {
    while ((rc = trace_source_batch(src, &one, &evs, &got, &err)) == AS_OK)
      for (size_t i = 0; i < got; i++, n++)
        sum += evs[i].size ^ evs[i].id ^ evs[i].t_ns;
  } else {
    while ((rc = trace_source_next(src, &one, &err)) == AS_OK) {
      n++;
      sum += one.size ^ one.id ^ one.t_ns;
    }
  }
  if (rc != AS_DONE)
    die(&err);
  trace_source_close(src);
  *count = n;
  *check = sum;
  return now_s() - t0;
}

/* ---- The interface's own cost ------------------------------------------ */

/* A source that decodes nothing: each next() fills every field of the
 * event, as the binary reader does, from two counters.  Its rate is what
 * the per-event interface (an indirect call and one trace_event_t filled
 * per event) costs before any byte is read: the floor of any decoder
 * behind it. */
typedef struct null_src_s {
  trace_source_t base;
  uint64_t       left, t_ns, id;
} null_src_t;

__attribute__((noinline)) static as_status_t
null_next(trace_source_t *src, trace_event_t *ev, as_err_t *err) {
  (void)err;
  null_src_t *s = (null_src_t *)src;
  if (s->left == 0)
    return AS_DONE;
  s->left--;
  s->t_ns += 37;
  s->id += 3;
  trace_event_set(ev, s->t_ns,
                  (uint8_t)(s->id & 3) == 3 ? TRACE_FREE : TRACE_MALLOC,
                  TRACE_DOMAIN_RAW, s->id & 0xffff, s->id & 0xfff);
  return AS_OK;
}

static void null_close(trace_source_t *src) {
  (void)src;
}

static const trace_source_methods_t null_methods = {.next = null_next,
                                                    .close = null_close};

/* CPU seconds to read n events from the null source. */
static double interface_floor(uint64_t n, uint64_t *check) {
  null_src_t    s = {.base = {.methods = &null_methods}, .left = n};
  trace_event_t ev;
  as_err_t      err = {0};
  uint64_t      sum = 0;
  double        t0 = now_s();
  while (trace_source_next(&s.base, &ev, &err) == AS_OK)
    sum += ev.size ^ ev.id ^ ev.t_ns;
  *check = sum;
  return now_s() - t0;
}

/* Writes n events to path: text, or binary of the given version. */
static void write_trace(const char *path, trace_format_t fmt, unsigned version,
                        uint64_t n) {
  gen_t g = {.state = 0x9E3779B97F4A7C15u};
  g.live = malloc(GEN_MAX_LIVE * sizeof *g.live);
  g.free_ids = malloc(GEN_MAX_LIVE * sizeof *g.free_ids);
  if (g.live == NULL || g.free_ids == NULL) {
    fprintf(stderr, "bench_trace_decode: out of memory\n");
    exit(1);
  }
  trace_meta_t meta = {0};
  as_err_t     err = {0};
  trace_meta_set(&meta, "generator", "bench_trace_decode", NULL);
  trace_writer_t *w;
  FILE           *f = fopen(path, "wb");
  if (f == NULL) {
    fprintf(stderr, "bench_trace_decode: cannot create %s\n", path);
    exit(1);
  }
  if ((fmt == TRACE_FORMAT_BINARY
           ? trace_binary_writer_open_version(f, path, &meta, version, &w, &err)
           : trace_writer_open_stream(f, path, fmt, &meta, &w, &err)) != AS_OK)
    die(&err);
  trace_event_t ev;
  for (uint64_t i = 0; i < n; i++) {
    gen_event(&g, i, &ev);
    if (trace_writer_write(w, &ev, &err) != AS_OK)
      die(&err);
  }
  if (trace_writer_close(w, &err) != AS_OK)
    die(&err);
  free(g.live);
  free(g.free_ids);
}

static uint64_t file_size(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Writes a binary trace of n events of the given version and reports its
 * size and its decoding rate, best of 5 by CPU time. */
static void bench_binary(const char *path, unsigned version, uint64_t n) {
  double t0 = now_s();
  write_trace(path, TRACE_FORMAT_BINARY, version, n);
  double      wsec = now_s() - t0;
  uint64_t    bytes = file_size(path);
  const char *tag = version == 2 ? "binary v2" : "binary";
  printf("%s: wrote %" PRIu64 " events, %" PRIu64
         " bytes (%.2f bytes/event) in %.2f s (%.1f M events/s)\n",
         tag, n, bytes, (double)bytes / (double)n, wsec,
         (double)n / wsec / 1e6);
  for (int batched = 1; batched >= 0; batched--) {
    double   best = 1e30, best_wall = 1e30;
    uint64_t count = 0, check = 0;
    for (int run = 0; run < 5; run++) {
      double w0 = wall_s();
      double s = decode(path, batched, &count, &check);
      double w = wall_s() - w0;
      best = s < best ? s : best;
      best_wall = w < best_wall ? w : best_wall;
    }
    if (count != n) {
      fprintf(stderr,
              "bench_trace_decode: read %" PRIu64 " of %" PRIu64 " events\n",
              count, n);
      exit(1);
    }
    printf("%s: decoded %" PRIu64 " events %s in %.3f s CPU: %.1f M "
           "events/s, %.2f ns/event (best of 5; wall %.3f s; checksum "
           "%016" PRIx64 ")\n",
           tag, count, batched ? "in batches" : "one at a time", best,
           (double)count / best / 1e6, best * 1e9 / (double)count, best_wall,
           check);
  }
  unlink(path);
}

int main(int argc, char **argv) {
  uint64_t    n = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000000;
  const char *dir = argc > 2 ? argv[2] : "/tmp";
  char        bin[4096], txt[4096];
  snprintf(bin, sizeof bin, "%s/bench_trace_decode.%ld.astrace", dir,
           (long)getpid());
  snprintf(txt, sizeof txt, "%s/bench_trace_decode.%ld.trace", dir,
           (long)getpid());
  bench_binary(bin, 3, n);
  bench_binary(bin, 2, n);
  uint64_t count = 0, check = 0;
  double   floor_s = 1e30;
  for (int run = 0; run < 5; run++) {
    double f = interface_floor(n, &check);
    if (f < floor_s)
      floor_s = f;
  }
  printf("interface: %" PRIu64 " events from a source that decodes nothing "
         "in %.3f s CPU: %.2f ns/event (best of 5; checksum %016" PRIx64 ")\n",
         n, floor_s, floor_s * 1e9 / (double)n, check);

  uint64_t tn = n < 1000000 ? n : 1000000;
  write_trace(txt, TRACE_FORMAT_TEXT, 0, tn);
  double ts = decode(txt, false, &count, &check);
  printf("text:   decoded %" PRIu64 " events (%.1f bytes/event) in %.3f s: "
         "%.1f M events/s\n",
         count, (double)file_size(txt) / (double)tn, ts,
         (double)count / ts / 1e6);
  unlink(txt);
  return 0;
}
