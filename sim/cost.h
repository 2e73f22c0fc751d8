/* sim/cost.h -- the one cost model for virtual time: how long the
 * operations a program and its allocator perform take, measured on a real
 * machine (scripts/measure/cost/cost_model.sh), so that synthetic
 * workloads and traces without timestamps advance the clock at realistic
 * rates, and so that a policy's cost (madvise calls now, page faults when
 * the memory is used again) can be priced.
 *
 * Why it matters: glibc and pymalloc do not look at the clock, but
 * jemalloc's decay and mimalloc's purge delays do; a workload whose clock
 * ran ten times too fast would purge ten times too little.  The figures are
 * medians on an otherwise busy 2-vCPU VM and vary by up to 2x between runs
 * there; they set rates, not predictions of any one program's speed.
 */
#ifndef ALLOCSIM_COST_H
#define ALLOCSIM_COST_H

#include <stdint.h>

#include "kernel.h"

typedef struct sim_cost_s sim_cost_t;
struct sim_cost_s {
  uint64_t malloc_ns;        /* glibc malloc of a small block, warm */
  uint64_t free_ns;          /* glibc free of a small block */
  uint64_t realloc_ns;       /* glibc realloc growing in place */
  uint64_t write_ns_per_kib; /* the program writing resident memory */
  uint64_t fault_ns;         /* first write to an anonymous OS page */
  uint64_t madvise_call_ns;  /* madvise(MADV_DONTNEED): per call ... */
  uint64_t madvise_page_ns;  /* ... and per resident page released */
  uint64_t munmap_call_ns;   /* munmap: per call ... */
  uint64_t munmap_page_ns;   /* ... and per resident page */
  uint64_t trim_ns_per_mib;  /* malloc_trim(0) per MiB it gives back */
  uint64_t python_alloc_ns;  /* CPython: create a small object and keep it */
  uint64_t python_free_ns;   /* CPython: drop it (list teardown) */
};

/* The figures measured on the validation machine (sim/cost.c). */
extern const sim_cost_t sim_cost_measured;

/* A C program's malloc of size bytes that it then writes: the call and the
 * writes (page faults are the allocator's and the kernel's to price). */
uint64_t sim_cost_c_alloc_ns(const sim_cost_t *c, uint64_t size);

/* What the kernel calls and faults in *calls cost (per-call prices; pages
 * released are priced by the faults that bring them back). */
uint64_t sim_cost_kernel_ns(const sim_cost_t         *c,
                            const sim_kernel_calls_t *calls);

#endif
