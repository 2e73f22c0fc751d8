/* traces/wl_webworker.h -- the `webworker` workload (the webworker study's
 * threaded fake web worker) and the rules it shares with
 * scripts/measure/webworker.py and the tests.
 *
 * Random draws use the splitmix64 rule of traces/wl_survivors.h, three
 * outputs per request: request i (0-based, counted over both phases) draws
 * z_k = survivors_splitmix64_at(seed, 3 * i + k) for k = 0, 1, 2, and
 *   u1 = ((z0 >> 11) + 1) * 2^-53,  u2 = (z1 >> 11) * 2^-53,
 *   g  = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2)   (Box-Muller),
 *   body length = clamp((uint64)(4096 * exp(1.0 * g) + 0.5), 2, 1 MiB),
 *   cached iff (z2 >> 11) * 2^-53 < 0.3.
 * webworker.py evaluates the same IEEE expressions in the same order, and
 * both call the C library's log, cos and exp, so on one machine both sides
 * draw identical lengths.
 */
#ifndef ALLOCSIM_WL_WEBWORKER_H
#define ALLOCSIM_WL_WEBWORKER_H

#include <stdbool.h>
#include <stdint.h>

#include "workload.h"

/* Body sizes: lognormal, median 4 KiB, sigma 1.0, capped at 1 MiB (the
 * study: "lognormal sizes, median about 4 KB, capped at 1 MB"; it gives
 * no spread, sigma = 1 is our choice).  At least 2 bytes: b"x" * 1 is b"x"
 * itself (bytes_repeat returns its operand), b"x" * 0 the empty singleton. */
#define WEBWORKER_BODY_MEDIAN 4096.0
#define WEBWORKER_BODY_SIGMA  1.0
#define WEBWORKER_BODY_MIN    UINT64_C(2)
#define WEBWORKER_BODY_MAX    (UINT64_C(1) << 20)
#define WEBWORKER_CACHE_PROB  0.3 /* the study: "with probability 0.3" */

/* The dict each request round-trips through json: 200 items. */
#define WEBWORKER_DICT_ITEMS 200

/* Length in bytes of request i's body under the shared rule. */
uint64_t webworker_body_len(uint64_t seed, uint64_t i);

/* Whether request i stores its body in the cache. */
bool webworker_is_cached(uint64_t seed, uint64_t i);

/* Bytes new_keys_object requests for a dict keys table of 2^log2_size slots
 * (CPython 3.11/3.14 Objects/dictobject.c): 32 + index bytes + entry size
 * (16 unicode, 24 general) * USABLE_FRACTION(2^log2_size). */
uint64_t webworker_dict_keys_bytes(unsigned log2_size, bool unicode);

/* calculate_log2_keysize(minsize): the smallest log2 table size >= minsize,
 * at least 3 (PyDict_MINSIZE 8). */
unsigned webworker_dict_log2_size(uint64_t minsize);

/* Length of json.dumps of the request dict: {"field000": 0, ...}. */
uint64_t webworker_json_len(void);

/* The workload itself, registered in traces/workload.c. */
extern const workload_def_t workload_webworker;

#endif
