/* traces/wl_spike.h -- the `spike` workload (the load-spike study) and the
 * rules it shares with scripts/measure/spike.py and the tests.
 *
 * String lengths use the splitmix64 rule of traces/wl_survivors.h: tuple i
 * (0-based) draws z = survivors_splitmix64_at(seed, i) and its string has
 * min + z % (max - min + 1) characters.  Python does the same, so the
 * simulated and the measured run allocate identical sizes.
 */
#ifndef ALLOCSIM_WL_SPIKE_H
#define ALLOCSIM_WL_SPIKE_H

#include <stdint.h>

#include "workload.h"

/* CPython request sizes, 64-bit (sources in traces/wl_spike.c). */
#define SPIKE_ASCII_HEADER     48 /* 3.11 sizeof(PyASCIIObject) */
#define SPIKE_ASCII_HEADER_314 40 /* 3.14: wstr removed in 3.12 */
#define SPIKE_FLOAT_SIZE       24 /* sizeof(PyFloatObject) */
#define SPIKE_TUPLE2_SIZE      56 /* PyGC_Head 16 + tuple 24 + 2 items * 8 */
#define SPIKE_LIST_SIZE        56 /* PyGC_Head 16 + sizeof(PyListObject) 40 */

/* Length of tuple i's string under the shared rule. */
uint64_t spike_str_len(uint64_t seed, uint64_t i, uint64_t min, uint64_t max);

/* The CPython version whose requests the workload emits (--python). */
typedef enum spike_python_e { SPIKE_PY311, SPIKE_PY314 } spike_python_t;

/* Bytes PyUnicode_New requests for an ASCII string of len characters under
 * py: sizeof(PyASCIIObject) + len + 1. */
uint64_t spike_str_request(spike_python_t py, uint64_t len);

/* Capacity (in items) list_resize chooses when a list of old_size items
 * with capacity allocated must hold new_size; returns allocated itself when
 * no realloc happens (CPython 3.11 Objects/listobject.c:44-96). */
uint64_t spike_list_capacity(uint64_t allocated, uint64_t old_size,
                             uint64_t new_size);

/* The workload itself, registered in traces/workload.c. */
extern const workload_def_t workload_spike;

#endif
