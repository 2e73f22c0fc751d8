/* traces/machine.h -- facts about the kernel and the process a trace is
 * measured on that the traced calls do not show but the models need.
 */
#ifndef ALLOCSIM_MACHINE_H
#define ALLOCSIM_MACHINE_H

#include <stdint.h>
#include <sys/types.h>

/* Whether a read fault on fresh anonymous memory maps the shared zero page
 * (1: the page stays out of RSS, as mainline Linux does in
 * do_anonymous_page), or a page of its own that RSS counts (0: seen on
 * some virtual-machine kernels), measured on this process now; -1 if it
 * cannot tell (no /proc/self/smaps).  Costs one 256 KiB mapping. */
int machine_reads_map_zero_page(void);

/* Numeric field `field` (1-based, proc(5)) of /proc/PID/stat; 0 when it
 * cannot be read. */
uint64_t machine_proc_stat_field(pid_t pid, int field);

/* Process pid's initial program break, field 47 of /proc/PID/stat
 * (proc(5)), which ASLR places; 0 when it cannot be read.  Where the heap
 * starts decides, for tcmalloc, how many 2 GiB stretches of address space
 * (each a 2 MiB pagemap leaf) it touches; compare honours it as the
 * provenance key start_brk. */
uint64_t machine_start_brk(pid_t pid);

/* The bracketed word of /sys/kernel/mm/transparent_hugepage/enabled
 * ("always", "madvise" or "never"), or NULL without THP support.  It
 * decides which 2 MiB blocks fault in whole, and whether glibc's
 * glibc.malloc.hugetlb=1 acts (it does only under madvise); compare
 * honours it as the provenance key thp. */
const char *machine_thp_enabled(void);

#endif
