/* tests/unit/test_wl_webworker.c -- the `webworker` workload
 * (traces/wl_webworker.c): the shared size rule, CPython's dict table
 * sizes, exact request event sequences for 3.11 and 3.14, GIL turns, the
 * cache's eviction, id discipline and option errors.
 *
 * Expected numbers come from outside the generator: the size-rule totals
 * from scripts/measure/webworker.py (an independent Python implementation),
 * the dict and json sizes from sys.getsizeof / len on CPython 3.11.2, and
 * the event counts are derived by hand in the comments next to them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../traces/wl_webworker.h"
#include "../../traces/workload.h"

/* ---- Helpers ------------------------------------------------------------ */

#define MAX_IDS 200000
#define MAX_LOG 512

/* What one pass over a source saw. */
typedef struct tally_s {
  uint64_t      events, mallocs, callocs, reallocs, frees, idles, trims;
  uint64_t      thread_starts, thread_exits, live, last_t_ns;
  uint64_t      keys6512_by_thread[8]; /* 6,512-byte mallocs per thread id */
  char          marks[256];            /* labels joined by ',' */
  bool          time_ok, ids_ok;
  size_t        nlog; /* first MAX_LOG events, verbatim */
  trace_event_t log[MAX_LOG];
} tally_t;

static unsigned char live_map[MAX_IDS];

/* Opens webworker with the space-separated options and consumes it,
 * checking that times never decrease, mallocs name dead ids and frees and
 * reallocs name live ones. */
static void run_tally(const char *opts, tally_t *t) {
  char  buf[256];
  char *argv[32];
  int   argc = 0;
  snprintf(buf, sizeof buf, "%s", opts);
  for (char *tok = strtok(buf, " "); tok && argc < 32; tok = strtok(NULL, " "))
    argv[argc++] = tok;
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  if (workload_open_argv(&workload_webworker, argc, argv, &src, &err) != AS_OK)
    fail_msg("%s: %s", opts, err.msg);
  memset(t, 0, sizeof *t);
  memset(live_map, 0, sizeof live_map);
  t->time_ok = t->ids_ok = true;
  trace_event_t ev;
  while (trace_source_next(src, &ev, &err) == AS_OK) {
    if (t->nlog < MAX_LOG)
      t->log[t->nlog++] = ev;
    t->events++;
    if (ev.t_ns < t->last_t_ns)
      t->time_ok = false;
    t->last_t_ns = ev.t_ns;
    switch ((trace_op_t)ev.op) {
    case TRACE_MALLOC:
    case TRACE_CALLOC:
      if (ev.id >= MAX_IDS || live_map[ev.id]) {
        t->ids_ok = false;
        break;
      }
      live_map[ev.id] = 1;
      t->live++;
      if (ev.op == TRACE_MALLOC)
        t->mallocs++;
      else
        t->callocs++;
      if (ev.size == 6512 && ev.thread < 8)
        t->keys6512_by_thread[ev.thread]++;
      break;
    case TRACE_REALLOC:
      if (ev.id >= MAX_IDS || !live_map[ev.id])
        t->ids_ok = false;
      t->reallocs++;
      break;
    case TRACE_FREE:
      if (ev.id >= MAX_IDS || !live_map[ev.id]) {
        t->ids_ok = false;
        break;
      }
      live_map[ev.id] = 0;
      t->live--;
      t->frees++;
      break;
    case TRACE_THREAD_START:
      t->thread_starts++;
      break;
    case TRACE_THREAD_EXIT:
      t->thread_exits++;
      break;
    case TRACE_MARK:
      if (t->marks[0] != '\0')
        strcat(t->marks, ",");
      strcat(t->marks, ev.label);
      break;
    case TRACE_IDLE:
      t->idles++;
      assert_int_equal(ev.size, UINT64_C(12000000000));
      break;
    case TRACE_TRIM:
      t->trims++;
      break;
    default:
      break;
    }
  }
  trace_source_close(src);
}

/* ---- Size rules --------------------------------------------------------- */

static void size_rule_matches_the_python_script(void **state) {
  (void)state;
  /* webworker.py's body_len/is_cached over requests 0..143,999, seed 1:
   * 973,427,637 body bytes; 43,286 cached requests holding 293,266,183. */
  uint64_t sum = 0, ncached = 0, cached_bytes = 0;
  for (uint64_t i = 0; i < 144000; i++) {
    uint64_t n = webworker_body_len(1, i);
    assert_true(n >= WEBWORKER_BODY_MIN && n <= WEBWORKER_BODY_MAX);
    sum += n;
    if (webworker_is_cached(1, i)) {
      ncached++;
      cached_bytes += n;
    }
  }
  assert_int_equal(sum, UINT64_C(973427637));
  assert_int_equal(ncached, 43286);
  assert_int_equal(cached_bytes, UINT64_C(293266183));
  /* The first requests, as webworker.py prints them. */
  assert_int_equal(webworker_body_len(1, 0), 3982);
  assert_int_equal(webworker_body_len(1, 1), 1238);
  assert_int_equal(webworker_body_len(1, 2), 2469);
  assert_false(webworker_is_cached(1, 0));
  assert_false(webworker_is_cached(1, 1));
  assert_true(webworker_is_cached(1, 2));
}

static void dict_tables_have_cpython_sizes(void **state) {
  (void)state;
  /* sys.getsizeof of a str-keyed dict on 3.11.2 minus the 64-byte dict:
   * 184, 272, 464, 832, 1584, 3328, 6576 - 64. */
  static const uint64_t unicode[7] = {120, 208, 400, 768, 1520, 3264, 6512};
  for (unsigned k = 0; k < 7; k++)
    assert_int_equal(webworker_dict_keys_bytes(3 + k, true), unicode[k]);
  /* General entries (int keys): 32 + 8 + 5 * 24; 65,536 slots take 4-byte
   * indices: 32 + 262,144 + 43,690 * 24. */
  assert_int_equal(webworker_dict_keys_bytes(3, false), 160);
  assert_int_equal(webworker_dict_keys_bytes(16, false),
                   32 + 262144 + 43690 * 24);
  /* GROWTH_RATE = used * 3: 5 items -> 16 slots, 10 -> 32, 170 -> 512. */
  assert_int_equal(webworker_dict_log2_size(0), 3);
  assert_int_equal(webworker_dict_log2_size(15), 4);
  /* dictobject.c:408-409 maps 16 to ((16 | 8) - 1) | 7 = 23: 32 slots (a
   * quirk; used * 3 never equals 16). */
  assert_int_equal(webworker_dict_log2_size(16), 5);
  assert_int_equal(webworker_dict_log2_size(30), 5);
  assert_int_equal(webworker_dict_log2_size(510), 9);
  /* len(json.dumps(d)) on 3.11.2. */
  assert_int_equal(webworker_json_len(), 3290);
}

/* ---- Event sequences ---------------------------------------------------- */

/* --requests 2 serves requests 0 and 1 (not cached) in phase 1 and request
 * 2 (cached, 2,469 bytes) in phase 2.
 *   uncached request, 3.11: body 1 + d's table chain 11 (6 mallocs 208 ..
 *   6512, 5 frees; the 8-slot table is free-listed) + dumps 30 (accu list:
 *   1 malloc + 25 reallocs to 860 slots, the items calloc and its free, the
 *   joined str, the list's free) + loads 31 (a whitespace match: marks
 *   0 B, data stack 1094 B, both freed; two chains of 11, the memo's table
 *   freed; another match) + end 4 (d, s, d2, body) = 77;
 *   the cached request: 77 - 1 (body stays) + 3 (cache table 160 B, fast
 *   nodes 64 B, node 32 B; request 2 is a small-int key) = 79;
 *   plus 5 marks, thread start and exit, idle, trim = 9.  Total 242. */
static void a_request_emits_cpython_311_requests_in_order(void **state) {
  (void)state;
  tally_t *t = malloc(sizeof *t);
  run_tally("--requests 2", t);
  assert_true(t->time_ok);
  assert_true(t->ids_ok);
  assert_int_equal(t->events, 242);
  assert_string_equal(t->marks,
                      "start,under_load,after_shrink,after_idle,after_trim");
  assert_int_equal(t->thread_starts, 1);
  assert_int_equal(t->thread_exits, 1);
  assert_int_equal(t->idles, 1);
  assert_int_equal(t->trims, 1);
  /* Still live: the cached body, its node, the cache's two tables. */
  assert_int_equal(t->live, 4);
  /* Request 0 starts at event 2 on thread 1: body 33 + 3982 bytes, then
   * d's tables 208, 400 (208 freed), 768 ... */
  const trace_event_t *ev = &t->log[2];
  assert_int_equal(ev[0].op, TRACE_MALLOC);
  assert_int_equal(ev[0].thread, 1);
  assert_int_equal(ev[0].domain, TRACE_DOMAIN_OBJ);
  assert_int_equal(ev[0].size, 33 + 3982);
  assert_int_equal(ev[1].size, 208);
  assert_int_equal(ev[2].size, 400);
  assert_int_equal(ev[3].op, TRACE_FREE);
  assert_int_equal(ev[3].id, ev[1].id);
  assert_int_equal(ev[10].size, 6512);
  assert_int_equal(ev[11].op, TRACE_FREE);
  assert_int_equal(ev[11].id, ev[8].id); /* the 3264-byte table */
  /* dumps: the accu list's first ob_item (4 slots), the items list
   * (PyMem_Calloc of 200 pointers), then realloc to 8 slots. */
  assert_int_equal(ev[12].op, TRACE_MALLOC);
  assert_int_equal(ev[12].domain, TRACE_DOMAIN_MEM);
  assert_int_equal(ev[12].size, 32);
  assert_int_equal(ev[13].op, TRACE_CALLOC);
  assert_int_equal(ev[13].size, 1600);
  assert_int_equal(ev[14].op, TRACE_REALLOC);
  assert_int_equal(ev[14].size, 64);
  /* ... 860 slots last, the items list freed, the joined str (3.11 header
   * 48 + 3290 + 1), the accu list freed. */
  assert_int_equal(ev[38].size, 860 * 8);
  assert_int_equal(ev[39].op, TRACE_FREE);
  assert_int_equal(ev[39].id, ev[13].id);
  assert_int_equal(ev[40].size, 3339);
  assert_int_equal(ev[41].op, TRACE_FREE);
  assert_int_equal(ev[41].id, ev[12].id);
  /* loads: WHITESPACE.match (the SRE marks, PyMem_Malloc(0), and its data
   * stack, 56 + 14 + 1024 bytes, freed in that order's reverse) ... */
  assert_int_equal(ev[42].op, TRACE_MALLOC);
  assert_int_equal(ev[42].domain, TRACE_DOMAIN_MEM);
  assert_int_equal(ev[42].size, 0);
  assert_int_equal(ev[43].size, 1094);
  assert_int_equal(ev[44].op, TRACE_FREE);
  assert_int_equal(ev[44].id, ev[43].id);
  assert_int_equal(ev[45].id, ev[42].id);
  /* ... memo then result, both 208 first; the memo's 6512 freed; the
   * second match. */
  assert_int_equal(ev[46].size, 208);
  assert_int_equal(ev[47].size, 208);
  assert_int_equal(ev[68].op, TRACE_FREE);
  assert_int_equal(ev[70].size, 1094);
  /* The request ends with d, s, d2 and the body freed. */
  assert_int_equal(ev[73].id, ev[10].id);
  assert_int_equal(ev[74].id, ev[40].id);
  assert_int_equal(ev[76].id, ev[0].id);
  free(t);
}

/* 3.14: the json string grows in one PyUnicodeWriter: 23 allocations
 * (1 + n/4 over-allocation each time; 42 bytes first = 40 + 1 + 1) and a
 * final shrink to 40 + 3290 + 1 = 3331, so dumps is 24 events and an
 * uncached request 71; d's tables are PyMem (mem domain).  Total 242 - 3 *
 * (30 - 24) = 224. */
static void python_314_grows_json_in_one_writer(void **state) {
  (void)state;
  tally_t *t = malloc(sizeof *t);
  run_tally("--requests 2 --python 3.14", t);
  assert_true(t->ids_ok);
  assert_int_equal(t->events, 224);
  const trace_event_t *ev = &t->log[2];
  assert_int_equal(ev[1].domain, TRACE_DOMAIN_MEM);
  assert_int_equal(ev[12].op, TRACE_MALLOC);
  assert_int_equal(ev[12].size, 42);
  assert_int_equal(ev[13].op, TRACE_REALLOC);
  assert_int_equal(ev[13].size, 40 + 13 + 1);
  assert_int_equal(ev[35].op, TRACE_REALLOC);
  assert_int_equal(ev[35].size, 3331);
  assert_int_equal(ev[35].id, ev[12].id);
  free(t);
}

/* Turns of --slice requests rotate over the threads.  --requests 40, 4
 * threads, 3 per turn: phase 1 turns 0..13 (thread t % 4 + 1; turn 13 has
 * one request) give threads 1-4 12, 10, 9, 9 requests; phase 2 (20,
 * restarting at thread 1) 6, 6, 5, 3.  Each request makes three 6,512-byte
 * tables (d, the memo, the result). */
static void gil_turns_rotate_over_the_threads(void **state) {
  (void)state;
  tally_t *t = malloc(sizeof *t);
  run_tally("--requests 40 --threads 4 --slice 3", t);
  assert_true(t->ids_ok);
  assert_int_equal(t->thread_starts, 4);
  assert_int_equal(t->thread_exits, 4);
  assert_int_equal(t->keys6512_by_thread[0], 0);
  assert_int_equal(t->keys6512_by_thread[1], 3 * 18);
  assert_int_equal(t->keys6512_by_thread[2], 3 * 16);
  assert_int_equal(t->keys6512_by_thread[3], 3 * 14);
  assert_int_equal(t->keys6512_by_thread[4], 3 * 12);
  free(t);
}

/* The switch interval runs out inside a turn's last request: thread 1 serves
 * requests 0, 1 and 2 and loses the GIL after request 2's allocations, so
 * when thread 2 first allocates, request 2's d and d2 tables (6,512 bytes
 * each) are still live; thread 1 frees them before its next request, and
 * at the end of the phase nothing of a request is held. */
static void a_turn_ends_inside_its_last_request(void **state) {
  (void)state;
  tally_t *t = malloc(sizeof *t);
  run_tally("--requests 40 --threads 4 --slice 3", t);
  assert_true(t->ids_ok);
  uint64_t      live6512[8] = {0};
  int           at_switch = -1;
  unsigned char big[MAX_IDS] = {0};
  for (size_t i = 0; i < t->nlog && at_switch < 0; i++) {
    const trace_event_t *ev = &t->log[i];
    if (ev->thread == 2 && ev->op == TRACE_MALLOC)
      at_switch = (int)live6512[1];
    else if (ev->op == TRACE_MALLOC && ev->size == 6512) {
      big[ev->id] = 1;
      live6512[ev->thread]++;
    } else if (ev->op == TRACE_FREE && big[ev->id]) {
      big[ev->id] = 0;
      live6512[ev->thread]--;
    }
  }
  assert_int_equal(at_switch, 2);
  /* Only the cache's body, int, node and two tables outlive the phase. */
  assert_int_equal(t->keys6512_by_thread[1], 3 * 18);
  free(t);
}

/* --turn-seed (a what-if): random turns still serve every request once,
 * on every thread, and are reproducible; the default stays out of the
 * provenance and --turn-seed 0 is the rotation. */
static void random_turns_serve_every_request_reproducibly(void **state) {
  (void)state;
  tally_t *a = malloc(sizeof *a), *b = malloc(sizeof *b);
  run_tally("--requests 400 --threads 4 --slice 3 --turn-seed 7", a);
  run_tally("--requests 400 --threads 4 --slice 3 --turn-seed 7", b);
  assert_true(a->ids_ok);
  uint64_t total = 0;
  for (int th = 1; th <= 4; th++) {
    assert_true(a->keys6512_by_thread[th] > 0);
    assert_int_equal(a->keys6512_by_thread[th], b->keys6512_by_thread[th]);
    total += a->keys6512_by_thread[th];
  }
  assert_int_equal(total, 3 * 600);
  run_tally("--requests 40 --threads 4 --slice 3 --turn-seed 0", a);
  assert_int_equal(a->keys6512_by_thread[1], 3 * 18);
  assert_int_equal(a->keys6512_by_thread[4], 3 * 12);
  free(a);
  free(b);
}

/* With the shrink cap at 0 the main thread empties the cache and phase 2
 * evicts every body it caches at once: only the cache's table and its
 * fast-nodes table stay live. */
static void shrinking_to_zero_leaves_only_the_cache_tables(void **state) {
  (void)state;
  tally_t *t = malloc(sizeof *t);
  run_tally("--requests 3000 --threads 3 --cache-mb 1 --shrink-mb 0", t);
  assert_true(t->time_ok);
  assert_true(t->ids_ok);
  assert_int_equal(t->live, 2);
  free(t);
}

/* The cache holds at most --cache-mb of bodies: simulated live bytes at
 * under_load are below the cap plus the tables (checked on the sizes). */
static void cache_never_exceeds_its_cap(void **state) {
  (void)state;
  /* Replays the rule: requests are served in order, so the cache is the
   * newest cached bodies whose total fits 1 MiB. */
  uint64_t cap = UINT64_C(1) << 20, bytes = 0;
  uint64_t lens[4000], head = 0, tail = 0;
  for (uint64_t i = 0; i < 3000; i++) {
    if (!webworker_is_cached(1, i))
      continue;
    lens[tail++] = webworker_body_len(1, i);
    bytes += lens[tail - 1];
    while (bytes > cap)
      bytes -= lens[head++];
    assert_true(bytes <= cap);
  }
  assert_true(tail - head > 50); /* it filled and churned */
}

/* ---- Options ------------------------------------------------------------ */

static void bad_options_are_usage_errors_that_name_them(void **state) {
  (void)state;
  static const char *bad[][2] = {
      {"--python 3.12", "--python must be 3.11 or 3.14"},
      {"--threads 0", "--threads must be an integer in [1, 1024]"},
      {"--shrink-mb 20 --cache-mb 10", "--shrink-mb (20) exceeds"},
      {"--requests x", "--requests must be an integer"},
      {"--bogus 1", "unknown option '--bogus'"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    char  buf[128];
    char *argv[8];
    int   argc = 0;
    snprintf(buf, sizeof buf, "%s", bad[k][0]);
    for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " "))
      argv[argc++] = tok;
    trace_source_t *src = NULL;
    as_err_t        err = {0};
    assert_int_equal(
        workload_open_argv(&workload_webworker, argc, argv, &src, &err),
        AS_EUSAGE);
    assert_null(src);
    if (strstr(err.msg, bad[k][1]) == NULL)
      fail_msg("'%s': message '%s' lacks '%s'", bad[k][0], err.msg, bad[k][1]);
  }
}

static void provenance_names_the_exact_arguments(void **state) {
  (void)state;
  char           *argv[] = {"--threads", "16", "--python", "3.14"};
  trace_source_t *src = NULL;
  as_err_t        err = {0};
  assert_int_equal(workload_open_argv(&workload_webworker, 4, argv, &src, &err),
                   AS_OK);
  assert_string_equal(trace_meta_get(&src->meta, "workload"),
                      "webworker --threads 16 --requests 96000 --cache-mb "
                      "100 --shrink-mb 10 --seed 1 --slice 25 --python 3.14");
  assert_ptr_equal(workload_find("webworker"), &workload_webworker);
  trace_source_close(src);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(size_rule_matches_the_python_script),
      cmocka_unit_test(dict_tables_have_cpython_sizes),
      cmocka_unit_test(a_request_emits_cpython_311_requests_in_order),
      cmocka_unit_test(python_314_grows_json_in_one_writer),
      cmocka_unit_test(gil_turns_rotate_over_the_threads),
      cmocka_unit_test(a_turn_ends_inside_its_last_request),
      cmocka_unit_test(random_turns_serve_every_request_reproducibly),
      cmocka_unit_test(shrinking_to_zero_leaves_only_the_cache_tables),
      cmocka_unit_test(cache_never_exceeds_its_cap),
      cmocka_unit_test(bad_options_are_usage_errors_that_name_them),
      cmocka_unit_test(provenance_names_the_exact_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
