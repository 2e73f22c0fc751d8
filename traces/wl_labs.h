/* traces/wl_labs.h -- the labs of the allocator course notes (section 20;
 * docs/studies.md) as workloads:
 * `lab-sizes` (lab 1), `lab-cliff` (lab 2), `lab-brk` (lab 3),
 * `lab-mmap-threshold` (lab 4), `lab-arenas` (lab 5).
 *
 * Each replays the malloc/free/trim sequence of the matching C program under
 * scripts/measure/labs/, which records the same marks on a real machine.
 */
#ifndef ALLOCSIM_WL_LABS_H
#define ALLOCSIM_WL_LABS_H

#include "workload.h"

/* The workloads, registered in traces/workload.c. */
extern const workload_def_t workload_lab_sizes;
extern const workload_def_t workload_lab_cliff;
extern const workload_def_t workload_lab_brk;
extern const workload_def_t workload_lab_mmap_threshold;
extern const workload_def_t workload_lab_arenas;

#endif
