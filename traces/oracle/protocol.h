/* traces/oracle/protocol.h -- what `allocsim oracle` and its replayer
 * (traces/oracle/replayer.c) say to each other, and the allocator-specific
 * meaning of option and purge events, shared so that the parent refuses an
 * event the replayer could not apply before anything runs.
 *
 * Self-contained (C17, libc headers only): the replayer is built apart from
 * the project's libraries, by gcc and, for musl, by musl-gcc.
 *
 * Channels (file descriptors the replayer inherits):
 *   ORACLE_FD_OPS       parent -> replayer: an oracle_hello_t, then
 *                       oracle_op_t records; an option op is followed by
 *                       ORACLE_NAME_MAX bytes holding its name
 *   ORACLE_FD_RESULTS   replayer -> parent: oracle_result_t records
 *   ORACLE_FD_TIMES     a shared file (memfd) of hello.ops uint64_t, the
 *                       oracle's clock: the replayer writes at [i] the
 *                       CLOCK_MONOTONIC ns, since the replay's start, at
 *                       which op i began (an idle: when its sleep began)
 * Both ends run on one machine: records are native-endian structs.
 *
 * The clock.  The replayer runs the calls as fast as it can (only idles
 * sleep), so the trace's times are not those the real allocator saw:
 * clock-driven allocators (mimalloc's delayed decommit, jemalloc's decay)
 * decide on the time that passed in the replay.  Every time the replayer
 * reports (the op times, a sample's) is on that clock, and the measured
 * trace carries it (analysis/oracle.c), so that a model replays on it.
 *
 * Samples.  The replayer reads its own RSS every sample_every_ns between
 * two calls (it looks at the clock every ORACLE_CLOCK_EVERY calls), so a
 * sample is the state after a known call, never one caught half-done, and
 * it sleeps idles in slices, sampling between them, so what an allocator's
 * background thread returns while the program idles is seen.
 */
#ifndef ALLOCSIM_ORACLE_PROTOCOL_H
#define ALLOCSIM_ORACLE_PROTOCOL_H

#include <stdint.h>
#include <string.h>

#define ORACLE_FD_OPS     3
#define ORACLE_FD_RESULTS 4
#define ORACLE_FD_TIMES   5

/* Calls between two looks at the clock for a periodic sample. */
#define ORACLE_CLOCK_EVERY 32

#define ORACLE_MAGIC UINT64_C(0x335243524f534c41) /* "ALSORCR3" */

/* Trace threads alive at once; each is a real thread. */
#define ORACLE_MAX_THREADS 1024

typedef enum oracle_allocator_e {
  ORACLE_GLIBC,
  ORACLE_JEMALLOC,
  ORACLE_MIMALLOC,
  ORACLE_TCMALLOC,
  ORACLE_MUSL,
  ORACLE_ALLOCATOR_COUNT
} oracle_allocator_t;

static inline const char *oracle_allocator_name(oracle_allocator_t a) {
  static const char *const names[ORACLE_ALLOCATOR_COUNT] = {
      "glibc", "jemalloc", "mimalloc", "tcmalloc", "musl"};
  return (unsigned)a < ORACLE_ALLOCATOR_COUNT ? names[a] : "?";
}

typedef struct oracle_hello_s oracle_hello_t;
struct oracle_hello_s {
  uint64_t magic;
  uint32_t allocator; /* oracle_allocator_t */
  uint32_t pad;
  uint64_t ids;             /* object ids the trace uses (its peak id + 1) */
  uint64_t ops;             /* ops that follow, ORACLE_OP_END excluded */
  uint64_t sample_every_ns; /* 0: marks only */
};

typedef enum oracle_op_code_e {
  ORACLE_OP_MALLOC,
  ORACLE_OP_CALLOC,
  ORACLE_OP_REALLOC,  /* aux = the object's size before */
  ORACLE_OP_MEMALIGN, /* aux = alignment */
  ORACLE_OP_FREE,
  ORACLE_OP_THREAD_START,
  ORACLE_OP_THREAD_EXIT,
  ORACLE_OP_MARK,   /* id = the mark's number, from 0 */
  ORACLE_OP_IDLE,   /* size = ns to sleep (already scaled), aux = the
                       idle's duration in the trace */
  ORACLE_OP_TRIM,   /* size = pad */
  ORACLE_OP_PURGE,  /* size = oracle_purge_t, aux = arena or
                       ORACLE_ALL_ARENAS */
  ORACLE_OP_OPTION, /* size = (uint64_t)(int64_t) value; the name follows */
  ORACLE_OP_TOUCH,  /* write [aux, aux + size) of id; with
                       ORACLE_F_SPAN, the pages of id's span those bytes
                       held in the captured process */
  ORACLE_OP_END
} oracle_op_code_t;

/* An allocation the program does not write now (touch events do). */
#define ORACLE_F_UNWRITTEN 0x01
/* A touch measured in pages of lg_page bytes (a capture's): replay it as
 * pages of the object's span (traces/touch_span.h). */
#define ORACLE_F_SPAN 0x02

typedef struct oracle_op_s oracle_op_t;
struct oracle_op_s {
  uint8_t  code;    /* oracle_op_code_t */
  uint8_t  flags;   /* ORACLE_F_* */
  uint16_t lg_page; /* ORACLE_F_SPAN: log2 of the captured page size */
  uint32_t thread;  /* the trace's thread */
  uint64_t id;
  uint64_t size;
  uint64_t aux;
  uint64_t t_ns;        /* the trace's time of the event */
  uint64_t object_size; /* ORACLE_F_SPAN: the object's bytes */
};

#define ORACLE_NAME_MAX 64 /* an option name with its NUL */

typedef enum oracle_result_kind_e {
  ORACLE_R_READY,     /* a = baseline RSS bytes; b = the allocator's
                         version: mimalloc's mi_version(), tcmalloc's
                         tc_version() as major * 100 + minor, jemalloc's
                         mallctl("version") as major * 10000 + minor *
                         100 + patch, else 0;
                         c = CLOCK_MONOTONIC (ns) at the replay's start, the
                         origin of every time below (ORACLE_FD_TIMES);
                         text = the library that provides malloc */
  ORACLE_R_MARK,      /* a = mark number, b = RSS bytes */
  ORACLE_R_SAMPLE,    /* a = calls done, b = RSS bytes, c = the replay's
                         time (ns since its start, as ORACLE_FD_TIMES) */
  ORACLE_R_DONE,      /* a = final RSS bytes, b = ops without a counterpart
                         in this allocator (counted, as the engine does),
                         c = the calls' CPU ns (the process's CPU time from
                         the first op, less reading ops and RSS) */
  ORACLE_R_ERROR,     /* text = the message, a = op index */
  ORACLE_R_THREAD,    /* the replayer created a thread: a = the op index of
                         the thread's first op, b = its trace thread, c = the
                         bytes the creating thread's pthread_create allocated
                         from glibc's heap, for another allocator the glibc
                         chunk its DTV calloc would be (0 on a cached stack),
                         or ORACLE_THREAD_UNMEASURED (musl) */
  ORACLE_R_DTV_FREE,  /* glibc's stack cache let go of a stack the replayer
                        created, freeing its DTV: a = the op index before
                        which the join ran, b = the trace thread that joined
                        (and freed it), c = the ORACLE_R_THREAD report (from
                        0) whose heap bytes were that DTV */
  ORACLE_R_HINT_AREA, /* right before ORACLE_R_DONE: a = the start of the
                        lowest mapping in mimalloc's aligned-hint area
                        (traces/mi_hint_area.h), 0 for none */
  ORACLE_R_JE_SEEDS,  /* jemalloc, before ORACLE_R_HINT_AREA: a = the main
                        thread's tsd address, b = arena 0's decay_dirty
                        address, as read before the first op
                        (traces/je_seeds.h), 0 where unknown */
  ORACLE_R_JE_CLOCK,  /* jemalloc, after ORACLE_R_JE_SEEDS: the clock its
                        decay reads, CLOCK_MONOTONIC_COARSE: a = at
                        jemalloc's initialisation, b = right before the
                        replay's start (ORACLE_R_READY's c), c = its
                        resolution (clock_getres), all ns */
  ORACLE_R_JE_THREAD, /* jemalloc, right after an ORACLE_R_THREAD: a = that
                        report's number (from 0), b = the new thread's tsd
                        address (traces/je_seeds.h) */
  ORACLE_R_JE_ARENA   /* jemalloc, after ORACLE_R_JE_CLOCK, for each arena
                        but 0 that exists at the end: a = its index, b = its
                        decay_dirty address (traces/je_seeds.h) */
} oracle_result_kind_t;

/* ---- The replayer's own thread creation -----------------------------------
 * Each trace thread is a thread the replayer's main thread creates at the
 * thread's first op, and glibc's pthread_create, when it maps a new stack
 * (not when it reuses a cached one), callocs the new thread's DTV from the
 * creating thread: glibc 2.36 nptl/pthread_create.c:650 allocate_stack ->
 * nptl/allocatestack.c:366 __mmap of the stack, :423 _dl_allocate_tls ->
 * elf/dl-tls.c:471 allocate_dtv, :375 calloc (dtv_length + 2,
 * sizeof (dtv_t)) (a reused stack, allocatestack.c:360 get_cached_stack,
 * keeps its DTV: :140 _dl_allocate_tls_init).  The trace does not carry
 * that call (a captured program's own pthread_create is traced, the
 * replayer's is another), so the replayer measures it for glibc (mallinfo2
 * uordblks around pthread_create, in the main thread while every other
 * thread waits) and the parent writes it into the stored trace
 * (analysis/oracle.c), and with it where glibc frees that DTV, when its
 * stack cache unmaps the stack (ORACLE_R_DTV_FREE; replayer.c, glibc's
 * stack cache).  Another allocator preloaded on glibc gets the same
 * calloc from ld.so (glibc 2.36 elf/dl-minimal.c:91-99), which mallinfo2
 * cannot see: the replayer works out its size from the TLS modules loaded
 * (replayer.c computed_dtv_chunk) and whether the stack is new from the
 * stacks it saw cached.  musl's pthread_create puts the DTV in the
 * thread's own mapping: nothing. */
#define ORACLE_THREAD_UNMEASURED UINT64_MAX

typedef struct oracle_result_s oracle_result_t;
struct oracle_result_s {
  uint32_t kind; /* oracle_result_kind_t */
  uint32_t pad;
  uint64_t a, b, c;
  char     text[224];
};

/* ---- RSS ------------------------------------------------------------------
 * What the oracle measures: smaps_rollup's "Anonymous:" line, the resident
 * anonymous pages (the allocator's heaps, arenas and mappings, thread
 * stacks, the replayer's own tables), not "Rss:", which also counts the file
 * pages of code first run during the replay (measured: 0.9 MiB of libc and
 * ld.so text while 64 threads start and stop), which no model holds. */
#define ORACLE_RSS_FIELD "\nAnonymous:"

/* The bytes of smaps_rollup text buf's ORACLE_RSS_FIELD line (kB), or
 * UINT64_MAX if it has none. */
static inline uint64_t oracle_rss_parse(const char *buf) {
  const char *p = strstr(buf, ORACLE_RSS_FIELD);
  if (p == NULL)
    return UINT64_MAX;
  p += sizeof ORACLE_RSS_FIELD - 1;
  while (*p == ' ')
    p++;
  uint64_t kb = 0;
  while (*p >= '0' && *p <= '9')
    kb = kb * 10 + (uint64_t)(*p++ - '0');
  return kb * 1024;
}

/* ---- Purge events --------------------------------------------------------
 * The kinds of traces/event.h trace_purge_kind_t, and the arena id for "all
 * arenas". */
typedef enum oracle_purge_e {
  ORACLE_PURGE_ALL,
  ORACLE_PURGE_DECAY,
  ORACLE_PURGE_TCACHE
} oracle_purge_t;
#define ORACLE_ALL_ARENAS UINT64_MAX

/* Whether allocator a has a call for purge kind k (the replayer's
 * apply_purge): jemalloc all three (mallctl arena.<i>.purge, .decay,
 * thread.tcache.flush), mimalloc all and decay (mi_collect(true/false)),
 * gperftools all (MallocExtension_ReleaseFreeMemory); glibc and musl none.
 * A purge without one is counted, as the engine counts events a model has
 * no notion of. */
static inline int oracle_purge_supported(oracle_allocator_t a, unsigned k) {
  switch (a) {
  case ORACLE_JEMALLOC:
    return k <= ORACLE_PURGE_TCACHE;
  case ORACLE_MIMALLOC:
    return k <= ORACLE_PURGE_DECAY;
  case ORACLE_TCMALLOC:
    return k == ORACLE_PURGE_ALL;
  default:
    return 0;
  }
}

/* ---- Option events -------------------------------------------------------
 * An option event names a model knob; on the real allocator it is one of
 * these calls.  The names are the models' (traces/event.h: mallopt's
 * M_MMAP_THRESHOLD is `option mmap_threshold`). */
typedef enum oracle_option_call_e {
  ORACLE_CALL_MALLOPT,    /* mallopt(param, value) */
  ORACLE_CALL_JE_DECAY,   /* mallctl arenas.NAME and arena.<i>.NAME for
                             every arena, ssize_t */
  ORACLE_CALL_JE_BOOL,    /* mallctl NAME, bool */
  ORACLE_CALL_MI_OPTION,  /* mi_option_set(param, value) */
  ORACLE_CALL_TC_PROPERTY /* MallocExtension_SetNumericProperty(NAME) */
} oracle_option_call_t;

typedef struct oracle_option_s oracle_option_t;
struct oracle_option_s {
  uint8_t     allocator; /* oracle_allocator_t */
  uint8_t     call;      /* oracle_option_call_t */
  int32_t     param;
  const char *name;   /* the knob, as option events spell it */
  const char *target; /* the allocator's own name for it */
};

/* Every option event the replayer can apply.
 *   glibc 2.36 malloc/malloc.h:121-141 (M_MXFAST .. M_ARENA_MAX), applied
 *     by __libc_mallopt, malloc/malloc.c:5446;
 *   jemalloc 5.3.0 src/ctl.c:543 arenas.dirty_decay_ms, :503
 *     arena.<i>.dirty_decay_ms (MALLCTL_ARENAS_ALL is refused there, ctl.c:
 *     2826-2830, so each arena is set), :842 background_thread;
 *   mimalloc v2.0.9 include/mimalloc.h:319-350, the mi_option_t values
 *     (the replayer checks mi_version() is 2.0.x before using them);
 *   gperftools 2.10 src/tcmalloc.cc:848-868 SetNumericProperty. */
static const oracle_option_t oracle_options[] = {
    {ORACLE_GLIBC, ORACLE_CALL_MALLOPT, 1, "mxfast", "M_MXFAST"},
    {ORACLE_GLIBC, ORACLE_CALL_MALLOPT, -1, "trim_threshold",
     "M_TRIM_THRESHOLD"},
    {ORACLE_GLIBC, ORACLE_CALL_MALLOPT, -2, "top_pad", "M_TOP_PAD"},
    {ORACLE_GLIBC, ORACLE_CALL_MALLOPT, -3, "mmap_threshold",
     "M_MMAP_THRESHOLD"},
    {ORACLE_GLIBC, ORACLE_CALL_MALLOPT, -4, "mmap_max", "M_MMAP_MAX"},
    {ORACLE_GLIBC, ORACLE_CALL_MALLOPT, -7, "arena_test", "M_ARENA_TEST"},
    {ORACLE_GLIBC, ORACLE_CALL_MALLOPT, -8, "arena_max", "M_ARENA_MAX"},
    {ORACLE_JEMALLOC, ORACLE_CALL_JE_DECAY, 0, "dirty_decay_ms",
     "dirty_decay_ms"},
    {ORACLE_JEMALLOC, ORACLE_CALL_JE_DECAY, 0, "muzzy_decay_ms",
     "muzzy_decay_ms"},
    {ORACLE_JEMALLOC, ORACLE_CALL_JE_BOOL, 0, "background_thread",
     "background_thread"},
    {ORACLE_MIMALLOC, ORACLE_CALL_MI_OPTION, 3, "eager_commit",
     "mi_option_eager_commit"},
    {ORACLE_MIMALLOC, ORACLE_CALL_MI_OPTION, 11, "page_reset",
     "mi_option_page_reset"},
    {ORACLE_MIMALLOC, ORACLE_CALL_MI_OPTION, 12, "abandoned_page_decommit",
     "mi_option_abandoned_page_decommit"},
    {ORACLE_MIMALLOC, ORACLE_CALL_MI_OPTION, 14, "eager_commit_delay",
     "mi_option_eager_commit_delay"},
    {ORACLE_MIMALLOC, ORACLE_CALL_MI_OPTION, 15, "decommit_delay",
     "mi_option_decommit_delay"},
    {ORACLE_MIMALLOC, ORACLE_CALL_MI_OPTION, 20, "max_segment_reclaim",
     "mi_option_max_segment_reclaim"},
    {ORACLE_MIMALLOC, ORACLE_CALL_MI_OPTION, 21, "allow_decommit",
     "mi_option_allow_decommit"},
    {ORACLE_MIMALLOC, ORACLE_CALL_MI_OPTION, 22, "segment_decommit_delay",
     "mi_option_segment_decommit_delay"},
    {ORACLE_MIMALLOC, ORACLE_CALL_MI_OPTION, 23, "decommit_extend_delay",
     "mi_option_decommit_extend_delay"},
    {ORACLE_TCMALLOC, ORACLE_CALL_TC_PROPERTY, 0,
     "max_total_thread_cache_bytes", "tcmalloc.max_total_thread_cache_bytes"},
    {ORACLE_TCMALLOC, ORACLE_CALL_TC_PROPERTY, 0, "aggressive_decommit",
     "tcmalloc.aggressive_memory_decommit"},
    {ORACLE_TCMALLOC, ORACLE_CALL_TC_PROPERTY, 0, "heap_limit_mb",
     "tcmalloc.heap_limit_mb"},
};

/* The call for knob name on allocator a, or NULL. */
static inline const oracle_option_t *oracle_option_find(oracle_allocator_t a,
                                                        const char *name) {
  for (size_t i = 0; i < sizeof oracle_options / sizeof oracle_options[0]; i++)
    if (oracle_options[i].allocator == a &&
        strcmp(oracle_options[i].name, name) == 0)
      return &oracle_options[i];
  return NULL;
}

#endif
