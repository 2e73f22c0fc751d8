/* traces/wl_lab_purge.h -- `lab-purge`: a burst, idle with or without
 * activity, then explicit collects (traces/wl_lab_purge.c); the program
 * scripts/measure/mimalloc/burst.c records the same marks on a real
 * machine.
 */
#ifndef ALLOCSIM_WL_LAB_PURGE_H
#define ALLOCSIM_WL_LAB_PURGE_H

#include "workload.h"

/* Registered in traces/workload.c. */
extern const workload_def_t workload_lab_purge;

#endif
