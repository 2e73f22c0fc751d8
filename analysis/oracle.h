/* analysis/oracle.h -- the oracle: a trace replayed on a real allocator,
 * measured, and written as a measured run.
 *
 * `allocsim oracle` runs traces/oracle/replayer.c in a child process
 * (glibc as the system's, jemalloc, mimalloc or tcmalloc through LD_PRELOAD
 * of Debian's libraries or --lib, musl through the replayer built with
 * musl-gcc), feeds it the trace's calls, has it read its RSS (its own
 * /proc/self/smaps_rollup) at every mark and every sample_every_ns between
 * two calls, and writes the trace again with those
 * measurements as rss events, every event stamped with the time the real
 * allocator saw it (the oracle's clock, oracle_run_t op_ns), so that `allocsim
 * record` stores it and `compare` predicts it like any captured run.
 *
 * Baseline.  The child reads its RSS once it has mapped and touched all it
 * needs (its code and libraries, the object table of ids x 8 bytes, its
 * buffers) and before the trace's first call; every figure here is net of
 * that baseline, so it reads like a replay of the matching model, which
 * starts from nothing.  What the baseline cannot take out: an allocator's
 * own start-up before main (a preloaded library's constructor, such as
 * gperftools' TCMallocGuard) lands in the baseline, and allocator code
 * pages first run after it land in the figures.
 *
 * Threads.  Each trace thread is a thread the replayer creates, and
 * glibc's pthread_create callocs a new stack's DTV, a call the trace does
 * not hold: with glibc the measured trace gains it, a calloc on thread 0
 * before the thread's first op, freed where glibc's stack cache lets the
 * stack go (oracle.c, the replayer's thread DTVs);
 * other allocators' measured traces and workload runs lack it (provenance
 * oracle_thread_dtvs says which).
 *
 * Type map
 *   oracle_opts_t    which allocator, how to run, where to write
 *   oracle_mark_t    RSS at one mark
 *   oracle_sample_t  one periodic sample
 *   oracle_thread_t  one thread the replayer created
 *   oracle_run_t     what a run measured
 */
#ifndef ALLOCSIM_ORACLE_H
#define ALLOCSIM_ORACLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../sim/status.h"
#include "../traces/event.h"
#include "../traces/oracle/protocol.h"

#define ORACLE_MAX_ENV 8

typedef struct oracle_opts_s oracle_opts_t;
struct oracle_opts_s {
  oracle_allocator_t allocator;
  const char        *lib;      /* library to preload; NULL: Debian's */
  const char        *replayer; /* NULL: oracle_find_replayer */
  const char        *env[ORACLE_MAX_ENV]; /* NAME=VALUE for the child */
  size_t             nenv;
  double             idle_scale;      /* real sleep = idle x this (>= 0) */
  uint64_t           sample_every_ns; /* 0: marks only */
  bool               lenient; /* skip frees/reallocs of dead ids, allocs of
                                 live ones, options with no counterpart */
  const char *out_path;       /* the measured trace to write, or NULL */
  bool        marks_only;     /* write marks and samples, not the calls
                                 (a workload: compare regenerates them on
                                 the workload's own clock) */
  const char *command;        /* the command line, for provenance */
};

typedef struct oracle_mark_s oracle_mark_t;
struct oracle_mark_s {
  char     label[64];
  uint64_t t_ns;        /* the mark's time on the oracle's clock */
  uint64_t rss_bytes;   /* net of the baseline (0 if below it) */
  uint64_t gross_bytes; /* as measured */
};

typedef struct oracle_sample_s oracle_sample_t;
struct oracle_sample_s {
  uint64_t ops_done;    /* ops the child had finished */
  uint64_t t_ns;        /* the oracle's clock then */
  uint64_t rss_bytes;   /* net */
  uint64_t gross_bytes; /* as measured */
};

/* A thread the replayer created (protocol.h ORACLE_R_THREAD). */
typedef struct oracle_thread_s oracle_thread_t;
struct oracle_thread_s {
  uint64_t op;         /* the op index of the thread's first op */
  uint32_t thread;     /* its trace thread */
  uint64_t heap_bytes; /* what pthread_create took from glibc's heap, or
                          ORACLE_THREAD_UNMEASURED */
  uint64_t je_tsd;     /* jemalloc: its tsd address (ORACLE_R_JE_THREAD),
                          0 unknown */
};

/* jemalloc: an arena's decay_dirty address (ORACLE_R_JE_ARENA). */
typedef struct oracle_je_arena_s oracle_je_arena_t;
struct oracle_je_arena_s {
  uint32_t arena;
  uint64_t decay;
};

/* A DTV glibc's stack cache freed (protocol.h ORACLE_R_DTV_FREE). */
typedef struct oracle_dtv_free_s oracle_dtv_free_t;
struct oracle_dtv_free_s {
  uint64_t op;       /* the op index the join ran before */
  uint32_t thread;   /* the trace thread that joined */
  uint64_t creation; /* index into created */
};

typedef struct oracle_run_s oracle_run_t;
struct oracle_run_s {
  char     library[232];      /* where the child's malloc came from */
  uint64_t allocator_version; /* protocol.h ORACLE_R_READY's b */
  char     replayer[512];
  char     preload[512]; /* LD_PRELOAD given, "" for none */
  uint64_t baseline_rss_bytes;
  uint64_t start_brk;       /* the replayer's initial break, 0 unknown */
  uint64_t clock_origin_ns; /* CLOCK_MONOTONIC at the replay's start */
  uint64_t hint_area_start; /* protocol.h ORACLE_R_HINT_AREA, 0 none */

  trace_je_state_t   je; /* protocol.h ORACLE_R_JE_SEEDS, ORACLE_R_JE_CLOCK */
  oracle_je_arena_t *je_arenas; /* ORACLE_R_JE_ARENA: arenas but 0 */
  size_t             nje_arenas;

  uint64_t final_rss_bytes; /* net */
  uint64_t final_gross_bytes;
  uint64_t peak_rss_bytes; /* net: largest mark, sample or final */
  uint64_t peak_t_ns;
  uint64_t final_t_ns;
  uint64_t events;      /* trace events read */
  uint64_t ops;         /* calls sent to the child */
  uint64_t skipped;     /* lenient: events left out */
  uint64_t unsupported; /* purges/trims with no counterpart here */
  uint64_t threads;     /* trace threads seen */
  double   wall_s;
  uint64_t calls_cpu_ns; /* the child's CPU time in the calls (not
                            reading ops or RSS): the real
                            allocator's cost, with the writes */
  oracle_mark_t   *marks;
  size_t           nmarks;
  oracle_sample_t *samples;
  size_t           nsamples;
  /* The oracle's clock (protocol.h ORACLE_FD_TIMES): op i began op_ns[i]
   * ns after the replay's start.  The measured trace carries these times
   * (provenance clock=oracle), marks' and samples' t_ns too, so that a
   * model replays it on the clock the real allocator ran on. */
  uint64_t *op_ns; /* nop_ns, mapped read-only */
  uint64_t  nop_ns;
  uint64_t  replay_ns; /* when the last op began */
  /* The replayer's pthread_creates, in op order, and the DTV callocs the
   * measured trace gains for them (glibc: one `calloc` of dtv_chunk_bytes
   * - 16 on thread 0 before the first op of each thread whose creation
   * took from the heap; protocol.h ORACLE_R_THREAD). */
  oracle_thread_t   *created;
  size_t             ncreated;
  uint64_t           dtv_chunk_bytes; /* 0: none measured */
  uint64_t           dtvs;            /* callocs written for them */
  oracle_dtv_free_t *dtv_frees;       /* in op order */
  size_t             ndtv_frees;
  uint64_t           dtvs_freed; /* frees written for them */
  uint64_t          *dtv_ids;    /* [creation]: the calloc's id, or
                                    UINT64_MAX for none */
  uint64_t ids;                  /* the trace's ids (highest + 1) */
};

/* Parses "glibc", "jemalloc", ...; false if unknown. */
bool oracle_allocator_parse(const char *s, oracle_allocator_t *out);

/* The library LD_PRELOAD loads for allocator a when --lib is not given
 * (Debian 12's package files), written to buf; "" for glibc and musl. */
void oracle_default_lib(oracle_allocator_t a, char *buf, size_t len);

/* Finds the replayer for allocator a (allocsim-replayer, or
 * allocsim-replayer-musl): $ALLOCSIM_REPLAYER (or _MUSL), beside the
 * running binary, in lib/allocsim below its prefix, in the build tree.
 * AS_EINVAL naming what was looked for (for musl: that musl-gcc was not
 * found when the build ran, if so). */
as_status_t oracle_find_replayer(oracle_allocator_t a, char *buf, size_t len,
                                 as_err_t *err);

/* Where the replayer writes each call's time (8 bytes a call): memory (a
 * memfd) while that takes at most half of mem_available, else a file in
 * $TMPDIR, whose pages the kernel can write out, if disk_free holds it
 * with a sixteenth to spare; else nowhere, and the oracle refuses the
 * trace before it starts.  0 for either figure: unknown (memory is then
 * used, as it always was). */
typedef enum oracle_times_place_e {
  ORACLE_TIMES_MEMORY,
  ORACLE_TIMES_DISK,
  ORACLE_TIMES_NOWHERE
} oracle_times_place_t;
oracle_times_place_t oracle_times_place(uint64_t need, uint64_t mem_available,
                                        uint64_t disk_free);

/* Replays the trace at trace_path (or, when workload is not NULL, the
 * workload that line opens) on the real allocator and fills *r; with
 * o->out_path writes the measured trace there.  Bad events fail before the
 * child starts (AS_EFORMAT naming the event) unless o->lenient; an
 * allocator that cannot be loaded is AS_EINVAL naming the path tried; a
 * failure in the child is AS_EIO with its message. */
as_status_t oracle_run(const char *trace_path, const char *workload,
                       const oracle_opts_t *o, oracle_run_t *r, as_err_t *err);
void        oracle_run_free(oracle_run_t *r);

#endif
