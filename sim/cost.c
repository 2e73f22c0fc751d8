/* sim/cost.c -- the measured cost model (see cost.h).
 *
 * Measured with scripts/measure/cost/cost_model.sh on 2026-12-01: "vm
 * x86_64 2 cpus, kernel 6.18.44, glibc 2.36, CPython 3.11.2 (Debian's
 * /usr/bin/python3)"; medians of 9 repetitions, rounded to the ns.  Two
 * runs that day differed by up to 2.8x on the per-call kernel costs and
 * 1.8x on the CPython ones (other jobs shared the 2 vCPUs); the C rows hold
 * the quieter run, the CPython rows the first run under Debian's python3. Rerun
 * the script and update a row, not the code that uses it.
 */
#include "cost.h"

const sim_cost_t sim_cost_measured = {
    .malloc_ns = 17,         /* cost_model.c malloc_free(64) */
    .free_ns = 8,            /* idem */
    .realloc_ns = 14,        /* realloc_step: +16 bytes in place */
    .write_ns_per_kib = 117, /* write_per_kib: memset of 64 MiB */
    .fault_ns = 1473,        /* fault_per_page: 4 KiB, no THP */
    .madvise_call_ns = 1075, /* release_costs(madvise) */
    .madvise_page_ns = 175,
    .munmap_call_ns = 2238, /* release_costs(munmap) */
    .munmap_page_ns = 187,
    .trim_ns_per_mib = 25164, /* trim_per_mib: 117 MiB below one block */
    .python_alloc_ns = 144,   /* cost_model_py.py: bytes(64) into a list */
    .python_free_ns = 27,     /* idem: del of the list, per object */
};

uint64_t sim_cost_c_alloc_ns(const sim_cost_t *c, uint64_t size) {
  return c->malloc_ns + size * c->write_ns_per_kib / 1024;
}

uint64_t sim_cost_kernel_ns(const sim_cost_t         *c,
                            const sim_kernel_calls_t *calls) {
  return calls->faults * c->fault_ns + calls->madvise * c->madvise_call_ns +
         calls->munmap * c->munmap_call_ns;
}
