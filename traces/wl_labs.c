/* traces/wl_labs.c -- labs 1 to 5 of the allocator course notes
 * ("Allocators: brk, mmap, and the four programs between you and the
 * kernel", section 20; docs/studies.md) as workloads, each the exact
 * allocation sequence of its program under scripts/measure/labs/ (C
 * programs: requests in the raw domain; lab-cliff is a Python program,
 * PyObject_Malloc requests in the object domain).
 *
 *   lab-brk (lab 3, "Make the brk heap refuse to shrink"): "malloc 1000
 *     chunks of 1 KiB, free all but the last, call malloc_trim(0), and watch
 *     RSS.  Then free the last one and trim again."  Marks: start, allocated,
 *     freed_but_last, trimmed_but_last, freed_last, trimmed_all.
 *   lab-mmap-threshold (lab 4, "Trigger the dynamic mmap threshold"):
 *     "Allocate and free a 4 MiB buffer once, then allocate and free 100 more
 *     and watch RSS."  Marks: start, first_alloc, first_free, second_alloc,
 *     second_free (the first of the 100), repeat_done.
 *   lab-arenas (lab 5, "Multiply your arenas"): "Run 64 threads each doing
 *     malloc(1024)/free in a loop ... Compare RSS at MALLOC_ARENA_MAX unset,
 *     8, and 1."  All threads start before any allocates (the C program
 *     parks them at a barrier), then iterate round-robin, one malloc/free
 *     pair per thread per round, as concurrent threads would interleave.
 *     Marks: start, running (every thread done, all still alive), joined.
 *     --iterations 0 is the lab program's control run: threads, no malloc.
 *     --hold N adds what the lab's loop lacks, a working set per thread:
 *     after the loop the threads take turns (as handlers of a pool serve
 *     requests one after another), each mallocing N blocks and freeing all
 *     but the last, which the program keeps to the end (a cache entry).
 *
 *   lab-cliff (lab 2, "Find your 512-byte cliff"): for each size from
 *     --min to --max in steps of --step, --count Python objects of that
 *     size (PyObject_Malloc requests) held, marked "<size>B", then freed.
 *
 *   lab-sizes (lab 1, "Enumerate your allocator's size classes"): one
 *     object of every size from --min to --max, held at once, then freed
 *     in the same order: RSS counts what the size classes round up.
 *     Marks: start, held, freed.
 *
 * The programs write every byte they allocate (memset), which is what the
 * simulator assumes of every allocation.  Object ids: lab-brk uses id i for
 * chunk i; the other labs reuse id 0 (lab 4) or the thread's id (lab 5),
 * since each holds at most one buffer at a time.
 *
 * Virtual time: the cost model's C malloc with the program writing the
 * block, and its free (sim/cost.h sim_cost_c_alloc_ns, free_ns).  No glibc
 * behaviour depends on time; the cost only spaces the marks.
 */
#include "wl_labs.h"

#include "../sim/cost.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum lab_kind_e {
  LAB_BRK,
  LAB_MMAP,
  LAB_ARENAS,
  LAB_SIZES,
  LAB_CLIFF
} lab_kind_t;

typedef struct lab_src_s lab_src_t;
struct lab_src_s {
  trace_source_t base; /* must be first */
  lab_kind_t     kind;
  uint64_t       count;      /* lab-brk: chunks */
  uint64_t       size;       /* bytes per malloc */
  uint64_t       repeat;     /* lab-mmap-threshold: allocations after first */
  uint64_t       threads;    /* lab-arenas */
  uint64_t       iterations; /* lab-arenas: malloc/free pairs per thread */
  uint64_t       hold;       /* lab-arenas: blocks of each thread's burst */
  uint64_t       min;        /* lab-sizes, lab-cliff: the smallest request */
  uint64_t       step;       /* lab-cliff: bytes between two sizes */
  uint8_t        domain;     /* lab-sizes: the requests' domain */
  char           mark[32];   /* lab-cliff: the current mark's label */
  uint64_t       pc;         /* which step of the program comes next */
  uint64_t       i;          /* loop counter of the current step */
  uint64_t       t_ns;
};

/* Fills *ev as an event of op at the current time; advances the clock for
 * mallocs and frees. */
static void lab_event(lab_src_t *s, trace_event_t *ev, trace_op_t op,
                      uint32_t thread, uint64_t id, uint64_t size,
                      const char *label) {
  memset(ev, 0, sizeof *ev);
  ev->t_ns = s->t_ns;
  ev->op = (uint8_t)op;
  ev->thread = thread;
  ev->id = id;
  ev->size = size;
  ev->label = label;
  ev->domain = s->domain;
  if (op == TRACE_MALLOC)
    s->t_ns += sim_cost_c_alloc_ns(&sim_cost_measured, size);
  else if (op == TRACE_FREE)
    s->t_ns += sim_cost_measured.free_ns;
}

/* ---- lab-brk ------------------------------------------------------------ */

static as_status_t lab_brk_next(lab_src_t *s, trace_event_t *ev) {
  switch (s->pc) {
  case 0:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "start");
    s->pc++, s->i = 0;
    return AS_OK;
  case 1: /* malloc count chunks */
    lab_event(s, ev, TRACE_MALLOC, 0, s->i, s->size, NULL);
    if (++s->i == s->count)
      s->pc++;
    return AS_OK;
  case 2:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "allocated");
    s->pc++, s->i = 0;
    return AS_OK;
  case 3: /* free all but the last */
    if (s->i + 1 < s->count) {
      lab_event(s, ev, TRACE_FREE, 0, s->i++, 0, NULL);
      return AS_OK;
    }
    s->pc++;
    /* fall through */
  case 4:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "freed_but_last");
    s->pc = 5;
    return AS_OK;
  case 5:
    lab_event(s, ev, TRACE_TRIM, 0, 0, 0, NULL);
    s->pc++;
    return AS_OK;
  case 6:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "trimmed_but_last");
    s->pc++;
    return AS_OK;
  case 7:
    lab_event(s, ev, TRACE_FREE, 0, s->count - 1, 0, NULL);
    s->pc++;
    return AS_OK;
  case 8:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "freed_last");
    s->pc++;
    return AS_OK;
  case 9:
    lab_event(s, ev, TRACE_TRIM, 0, 0, 0, NULL);
    s->pc++;
    return AS_OK;
  case 10:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "trimmed_all");
    s->pc++;
    return AS_OK;
  default:
    return AS_DONE;
  }
}

/* ---- lab-mmap-threshold ------------------------------------------------- */

static as_status_t lab_mmap_next(lab_src_t *s, trace_event_t *ev) {
  switch (s->pc) {
  case 0:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "start");
    break;
  case 1:
    lab_event(s, ev, TRACE_MALLOC, 0, 0, s->size, NULL);
    break;
  case 2:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "first_alloc");
    break;
  case 3:
    lab_event(s, ev, TRACE_FREE, 0, 0, 0, NULL);
    break;
  case 4:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "first_free");
    break;
  case 5: /* the first of the repeats, with marks around it */
    lab_event(s, ev, TRACE_MALLOC, 0, 0, s->size, NULL);
    break;
  case 6:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "second_alloc");
    break;
  case 7:
    lab_event(s, ev, TRACE_FREE, 0, 0, 0, NULL);
    break;
  case 8:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "second_free");
    s->i = 1;
    break;
  case 9: /* the other repeat - 1 pairs: malloc here, free in step 10 */
    if (s->i < s->repeat) {
      lab_event(s, ev, TRACE_MALLOC, 0, 0, s->size, NULL);
      s->pc = 10;
      return AS_OK;
    }
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "repeat_done");
    s->pc = 11;
    return AS_OK;
  case 10:
    lab_event(s, ev, TRACE_FREE, 0, 0, 0, NULL);
    s->i++;
    s->pc = 9;
    return AS_OK;
  default:
    return AS_DONE;
  }
  s->pc++;
  return AS_OK;
}

/* ---- lab-arenas --------------------------------------------------------- */

/* Steps: start; thread_start 1..T; rounds of (malloc, free) per thread;
 * the bursts, thread by thread; running; thread_exit 1..T; joined.  i
 * counts within a step; in the loop step, i = (round * T + thread index) *
 * 2 + (0 malloc | 1 free); in the burst step, i = (thread index) * 2 *
 * hold + j, the first hold being mallocs and the next hold - 1 frees. */
static as_status_t lab_arenas_next(lab_src_t *s, trace_event_t *ev) {
  switch (s->pc) {
  case 0:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "start");
    s->pc++, s->i = 0;
    return AS_OK;
  case 1:
    lab_event(s, ev, TRACE_THREAD_START, (uint32_t)(s->i + 1), 0, 0, NULL);
    if (++s->i == s->threads)
      s->pc = s->iterations > 0 ? 2 : 3, s->i = 0;
    return AS_OK;
  case 2: {
    uint64_t pair = s->i / 2;
    uint32_t thread = (uint32_t)(pair % s->threads + 1);
    if (s->i % 2 == 0)
      lab_event(s, ev, TRACE_MALLOC, thread, thread, s->size, NULL);
    else
      lab_event(s, ev, TRACE_FREE, thread, thread, 0, NULL);
    if (++s->i == 2 * s->threads * s->iterations)
      s->pc++, s->i = 0;
    return AS_OK;
  }
  case 3: /* the bursts: thread t mallocs hold blocks, frees all but the
             last, which lives to the end; ids above the loop's */
    if (s->hold > 0) {
      uint64_t per = 2 * s->hold - 1, t = s->i / per, j = s->i % per;
      uint64_t base = s->threads + 1 + t * s->hold;
      uint32_t thread = (uint32_t)(t + 1);
      if (j < s->hold)
        lab_event(s, ev, TRACE_MALLOC, thread, base + j, s->size, NULL);
      else
        lab_event(s, ev, TRACE_FREE, thread, base + j - s->hold, 0, NULL);
      if (++s->i == s->threads * per)
        s->pc++, s->i = 0;
      return AS_OK;
    }
    s->pc++, s->i = 0;
    /* fall through */
  case 4:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "running");
    s->pc++, s->i = 0;
    return AS_OK;
  case 5:
    lab_event(s, ev, TRACE_THREAD_EXIT, (uint32_t)(s->i + 1), 0, 0, NULL);
    if (++s->i == s->threads)
      s->pc++;
    return AS_OK;
  case 6:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "joined");
    s->pc++;
    return AS_OK;
  default:
    return AS_DONE;
  }
}

/* ---- lab-sizes ---------------------------------------------------------- */

/* start; one malloc of every size min..size (id = size), each written;
 * held; the frees in the same order; freed. */
static as_status_t lab_sizes_next(lab_src_t *s, trace_event_t *ev) {
  switch (s->pc) {
  case 0:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "start");
    s->pc++, s->i = s->min;
    return AS_OK;
  case 1:
    lab_event(s, ev, TRACE_MALLOC, 0, s->i, s->i, NULL);
    if (s->i++ == s->size)
      s->pc++;
    return AS_OK;
  case 2:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "held");
    s->pc++, s->i = s->min;
    return AS_OK;
  case 3:
    lab_event(s, ev, TRACE_FREE, 0, s->i, 0, NULL);
    if (s->i++ == s->size)
      s->pc++;
    return AS_OK;
  case 4:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "freed");
    s->pc++;
    return AS_OK;
  default:
    return AS_DONE;
  }
}

/* ---- lab-cliff ---------------------------------------------------------- */

/* For each size: count mallocs (ids 0..count-1), the mark "<size>B", the
 * frees; then the next size. */
static as_status_t lab_cliff_next(lab_src_t *s, trace_event_t *ev) {
  switch (s->pc) {
  case 0:
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, "start");
    s->pc++, s->i = 0;
    return AS_OK;
  case 1:
    lab_event(s, ev, TRACE_MALLOC, 0, s->i, s->min, NULL);
    if (++s->i == s->count)
      s->pc++;
    return AS_OK;
  case 2:
    snprintf(s->mark, sizeof s->mark, "%" PRIu64 "B", s->min);
    lab_event(s, ev, TRACE_MARK, 0, 0, 0, s->mark);
    s->pc++, s->i = 0;
    return AS_OK;
  case 3:
    lab_event(s, ev, TRACE_FREE, 0, s->i, 0, NULL);
    if (++s->i < s->count)
      return AS_OK;
    s->i = 0;
    s->min += s->step;
    s->pc = s->min <= s->size ? 1 : 4;
    return AS_OK;
  default:
    return AS_DONE;
  }
}

/* ---- Sources and options ------------------------------------------------ */

static as_status_t lab_next(trace_source_t *src, trace_event_t *ev,
                            as_err_t *err) {
  (void)err;
  lab_src_t *s = (lab_src_t *)src;
  switch (s->kind) {
  case LAB_BRK:
    return lab_brk_next(s, ev);
  case LAB_MMAP:
    return lab_mmap_next(s, ev);
  case LAB_ARENAS:
    return lab_arenas_next(s, ev);
  case LAB_SIZES:
    return lab_sizes_next(s, ev);
  case LAB_CLIFF:
    return lab_cliff_next(s, ev);
  }
  return AS_DONE;
}

static void lab_close(trace_source_t *src) {
  free(src);
}

static const trace_source_methods_t lab_methods = {
    .next = lab_next,
    .close = lab_close,
};

/* Parses a decimal u64 in [lo, hi], naming workload and option on error. */
static as_status_t lab_parse(const char *wl, const char *name, const char *text,
                             uint64_t lo, uint64_t hi, uint64_t *out,
                             as_err_t *err) {
  char *end = NULL;
  errno = 0;
  if (text != NULL && text[0] >= '0' && text[0] <= '9') {
    unsigned long long v = strtoull(text, &end, 10);
    if (errno == 0 && *end == '\0' && v >= lo && v <= hi) {
      *out = (uint64_t)v;
      return AS_OK;
    }
  }
  return as_err_set(err, AS_EUSAGE,
                    "%s: --%s must be an integer in [%" PRIu64 ", %" PRIu64
                    "], got '%s'",
                    wl, name, lo, hi, text ? text : "(null)");
}

/* Allocates the source, sets its name and provenance from args. */
static as_status_t lab_new(lab_kind_t kind, const char *args, lab_src_t **out,
                           as_err_t *err) {
  *out = NULL;
  lab_src_t *s = calloc(1, sizeof *s);
  if (s == NULL)
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", args);
  s->base.methods = &lab_methods;
  s->kind = kind;
  snprintf(s->base.name, sizeof s->base.name, "%s", args);
  as_status_t rc = trace_meta_set(&s->base.meta, "kind", "workload", err);
  if (rc == AS_OK)
    rc = trace_meta_set(&s->base.meta, "workload", args, err);
  if (rc == AS_OK)
    rc = trace_meta_set(&s->base.meta, "generator", "traces/wl_labs.c", err);
  if (rc != AS_OK) {
    free(s);
    return rc;
  }
  *out = s;
  return AS_OK;
}

#define LAB_MAX_COUNT UINT64_C(100000000)
#define LAB_MAX_SIZE  (UINT64_C(1) << 40)

static const workload_option_t lab_brk_options[] = {
    {"count", "1000", "chunks allocated (course notes lab 3: 1000)"},
    {"size", "1024", "bytes per chunk (course notes lab 3: 1 KiB)"},
    {NULL, NULL, NULL},
};

static as_status_t lab_brk_open(const char *const *values, trace_source_t **out,
                                as_err_t *err) {
  uint64_t    count = 0, size = 0;
  as_status_t rc;
  *out = NULL;
  if ((rc = lab_parse("lab-brk", "count", values[0], 1, LAB_MAX_COUNT, &count,
                      err)) != AS_OK ||
      (rc = lab_parse("lab-brk", "size", values[1], 1, LAB_MAX_SIZE, &size,
                      err)) != AS_OK)
    return rc;
  char args[128];
  snprintf(args, sizeof args, "lab-brk --count %" PRIu64 " --size %" PRIu64,
           count, size);
  lab_src_t *s;
  if ((rc = lab_new(LAB_BRK, args, &s, err)) != AS_OK)
    return rc;
  s->count = count, s->size = size;
  *out = &s->base;
  return AS_OK;
}

static const workload_option_t lab_mmap_options[] = {
    {"size", "4194304", "bytes per buffer (course notes lab 4: 4 MiB)"},
    {"repeat", "100", "allocate/free pairs after the first (lab 4: 100)"},
    {NULL, NULL, NULL},
};

static as_status_t lab_mmap_open(const char *const *values,
                                 trace_source_t **out, as_err_t *err) {
  uint64_t    size = 0, repeat = 0;
  as_status_t rc;
  *out = NULL;
  if ((rc = lab_parse("lab-mmap-threshold", "size", values[0], 1, LAB_MAX_SIZE,
                      &size, err)) != AS_OK ||
      (rc = lab_parse("lab-mmap-threshold", "repeat", values[1], 1,
                      LAB_MAX_COUNT, &repeat, err)) != AS_OK)
    return rc;
  char args[128];
  snprintf(args, sizeof args,
           "lab-mmap-threshold --size %" PRIu64 " --repeat %" PRIu64, size,
           repeat);
  lab_src_t *s;
  if ((rc = lab_new(LAB_MMAP, args, &s, err)) != AS_OK)
    return rc;
  s->size = size, s->repeat = repeat;
  *out = &s->base;
  return AS_OK;
}

static const workload_option_t lab_arenas_options[] = {
    {"threads", "64", "threads, all alive at once (course notes lab 5: 64)"},
    {"iterations", "1000",
     "malloc/free pairs per thread (0: the threads-only control)"},
    {"size", "1024", "bytes per malloc (course notes lab 5: 1024)"},
    {"hold", "0",
     "then each thread in turn mallocs this many blocks and frees all but "
     "the last, which lives to the end (0: none)"},
    {NULL, NULL, NULL},
};

static as_status_t lab_arenas_open(const char *const *values,
                                   trace_source_t **out, as_err_t *err) {
  uint64_t    threads = 0, iterations = 0, size = 0, hold = 0;
  as_status_t rc;
  *out = NULL;
  if ((rc = lab_parse("lab-arenas", "threads", values[0], 1, 1024, &threads,
                      err)) != AS_OK ||
      (rc = lab_parse("lab-arenas", "iterations", values[1], 0, LAB_MAX_COUNT,
                      &iterations, err)) != AS_OK ||
      (rc = lab_parse("lab-arenas", "size", values[2], 1, LAB_MAX_SIZE, &size,
                      err)) != AS_OK ||
      (rc = lab_parse("lab-arenas", "hold", values[3], 0,
                      LAB_MAX_COUNT / threads, &hold, err)) != AS_OK)
    return rc;
  char args[192];
  int  n = snprintf(args, sizeof args,
                    "lab-arenas --threads %" PRIu64 " --iterations %" PRIu64
                    " --size %" PRIu64,
                    threads, iterations, size);
  /* Spelled only when set, so runs recorded before it existed keep their
   * workload line. */
  if (hold > 0)
    snprintf(args + n, sizeof args - (size_t)n, " --hold %" PRIu64, hold);
  lab_src_t *s;
  if ((rc = lab_new(LAB_ARENAS, args, &s, err)) != AS_OK)
    return rc;
  s->threads = threads, s->iterations = iterations, s->size = size;
  s->hold = hold;
  *out = &s->base;
  return AS_OK;
}

static const workload_option_t lab_sizes_options[] = {
    {"min", "1", "the smallest request, bytes"},
    {"max", "4096", "the largest request, bytes (one of every size)"},
    {"domain", "raw",
     "raw (C malloc) or obj (PyObject_Malloc, for the cpython model)"},
    {NULL, NULL, NULL},
};

static as_status_t lab_sizes_open(const char *const *values,
                                  trace_source_t **out, as_err_t *err) {
  uint64_t    min = 0, max = 0;
  as_status_t rc;
  *out = NULL;
  if ((rc = lab_parse("lab-sizes", "min", values[0], 1, LAB_MAX_COUNT, &min,
                      err)) != AS_OK ||
      (rc = lab_parse("lab-sizes", "max", values[1], min, LAB_MAX_COUNT, &max,
                      err)) != AS_OK)
    return rc;
  uint8_t domain;
  if (strcmp(values[2], "raw") == 0)
    domain = TRACE_DOMAIN_RAW;
  else if (strcmp(values[2], "obj") == 0)
    domain = TRACE_DOMAIN_OBJ;
  else
    return as_err_set(err, AS_EUSAGE,
                      "lab-sizes: --domain must be raw or obj, got '%s'",
                      values[2]);
  char args[128];
  snprintf(args, sizeof args,
           "lab-sizes --min %" PRIu64 " --max %" PRIu64 " --domain %s", min,
           max, values[2]);
  lab_src_t *s;
  if ((rc = lab_new(LAB_SIZES, args, &s, err)) != AS_OK)
    return rc;
  s->min = min, s->size = max, s->domain = domain;
  *out = &s->base;
  return AS_OK;
}

const workload_def_t workload_lab_sizes = {
    .name = "lab-sizes",
    .summary = "course notes lab 1: one object of every size, held",
    .options = lab_sizes_options,
    .open = lab_sizes_open,
};

static const workload_option_t lab_cliff_options[] = {
    {"min", "456", "the smallest object, bytes (sys.getsizeof)"},
    {"max", "544", "the largest object, bytes"},
    {"step", "8", "bytes between two sizes"},
    {"count", "1000", "objects of each size held at its mark"},
    {NULL, NULL, NULL},
};

static as_status_t lab_cliff_open(const char *const *values,
                                  trace_source_t **out, as_err_t *err) {
  uint64_t    min = 0, max = 0, step = 0, count = 0;
  as_status_t rc;
  *out = NULL;
  if ((rc = lab_parse("lab-cliff", "min", values[0], 1, LAB_MAX_SIZE, &min,
                      err)) != AS_OK ||
      (rc = lab_parse("lab-cliff", "max", values[1], min, LAB_MAX_SIZE, &max,
                      err)) != AS_OK ||
      (rc = lab_parse("lab-cliff", "step", values[2], 1, LAB_MAX_SIZE, &step,
                      err)) != AS_OK ||
      (rc = lab_parse("lab-cliff", "count", values[3], 1, LAB_MAX_COUNT, &count,
                      err)) != AS_OK)
    return rc;
  char args[128];
  snprintf(args, sizeof args,
           "lab-cliff --min %" PRIu64 " --max %" PRIu64 " --step %" PRIu64
           " --count %" PRIu64,
           min, max, step, count);
  lab_src_t *s;
  if ((rc = lab_new(LAB_CLIFF, args, &s, err)) != AS_OK)
    return rc;
  s->min = min, s->size = max, s->step = step, s->count = count;
  s->domain = TRACE_DOMAIN_OBJ;
  *out = &s->base;
  return AS_OK;
}

const workload_def_t workload_lab_cliff = {
    .name = "lab-cliff",
    .summary = "course notes lab 2: Python objects either side of 512 bytes",
    .options = lab_cliff_options,
    .open = lab_cliff_open,
};

const workload_def_t workload_lab_brk = {
    .name = "lab-brk",
    .summary = "course notes lab 3: the brk heap that refuses to shrink",
    .options = lab_brk_options,
    .open = lab_brk_open,
};

const workload_def_t workload_lab_mmap_threshold = {
    .name = "lab-mmap-threshold",
    .summary = "course notes lab 4: the dynamic mmap threshold learns 4 MiB",
    .options = lab_mmap_options,
    .open = lab_mmap_open,
};

const workload_def_t workload_lab_arenas = {
    .name = "lab-arenas",
    .summary = "course notes lab 5: arena multiplication with 64 threads",
    .options = lab_arenas_options,
    .open = lab_arenas_open,
};
