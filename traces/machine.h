/* traces/machine.h -- facts about the kernel a trace is measured on that
 * the traced calls do not show but the kernel model needs.
 */
#ifndef ALLOCSIM_MACHINE_H
#define ALLOCSIM_MACHINE_H

/* Whether a read fault on fresh anonymous memory maps the shared zero page
 * (1: the page stays out of RSS, as mainline Linux does in
 * do_anonymous_page), or a page of its own that RSS counts (0: seen on
 * some virtual-machine kernels), measured on this process now; -1 if it
 * cannot tell (no /proc/self/smaps).  Costs one 256 KiB mapping. */
int machine_reads_map_zero_page(void);

#endif
