/* sim/host.h -- the machine the simulator itself runs on: its physical
 * memory and the simulator's own resident memory, for the bound every
 * simulating command puts on itself (--max-memory).
 *
 * The simulator's memory grows with what it simulates (live objects,
 * resident blocks, samples), so a tiny input can ask for more than the
 * machine has; the bound turns that into a one-line refusal naming the
 * limit instead of an out-of-memory kill.
 */
#ifndef ALLOCSIM_HOST_H
#define ALLOCSIM_HOST_H

#include <stdint.h>

/* Physical memory in bytes (sysconf), or 0 if unknown. */
uint64_t sim_host_physical_bytes(void);

/* MemAvailable of /proc/meminfo in bytes (what can be allocated without
 * swapping), or 0 if it cannot be read. */
uint64_t sim_host_available_bytes(void);

/* The default bound: half of physical memory, or 4 GiB if that is
 * unknown.  Half, because the simulator shares the machine. */
uint64_t sim_host_default_max_memory(void);

/* The simulator's own resident memory now (/proc/self/statm), or 0 if it
 * cannot be read. */
uint64_t sim_host_rss_bytes(void);

/* "1.50 GiB", "512.00 MiB", "4096 bytes": a size for messages. */
const char *sim_host_format_bytes(uint64_t bytes, char *buf, unsigned len);

#endif
