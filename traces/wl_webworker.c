/* traces/wl_webworker.c -- the `webworker` workload: the webworker study's
 * threaded fake web worker (docs/studies.md), as the allocation requests
 * CPython 3.11 (or, with --python 3.14, 3.14) makes for it.
 *
 * The Python program (scripts/measure/webworker.py runs exactly this; the
 * study publishes only a description, so the program is ours):
 *
 *     KEYS = ["field%03d" % j for j in range(200)]
 *     cache = collections.OrderedDict(); cache_bytes = 0     # shared LRU
 *     def handle(i):
 *         body = b"x" * body_len(i)              # shared splitmix64 rule
 *         d = {k: j for j, k in enumerate(KEYS)}
 *         s = json.dumps(d)
 *         d2 = json.loads(s)
 *         if is_cached(i):
 *             with lock:
 *                 cache[i] = body; cache_bytes += len(body)
 *                 while cache_bytes > cap:
 *                     cache_bytes -= len(cache.popitem(last=False)[1])
 *         del d, s, d2, body
 *     gc.collect()                                          # mark start
 *     T threads serve requests 0 .. N-1 from a shared counter;
 *     gc.collect()                                          # mark under_load
 *     main thread: cap = shrink cap; evict oldest until cache_bytes <= cap
 *     the same T threads serve requests N .. N + N/2 - 1, then exit;
 *     gc.collect()                                          # mark after_shrink
 *     time.sleep(12)                                        # mark after_idle
 *     malloc_trim(0)                                        # mark after_trim
 *
 * Caps are in MiB (--cache-mb 100 = 100 * 2^20 bytes of len(body)); the study
 * reads /proc/self/status, whose "kB" are KiB, so its MB are taken as MiB.
 * Threads: T worker threads (ids 1..T) even when T = 1, so a single worker
 * allocates from a thread arena as in the study's thread pool; the main
 * thread (id 0) only shrinks the cache.  All T start before the first
 * request (webworker.py parks them at a barrier).  The GIL hands the
 * interpreter to another thread after sys.getswitchinterval() = 5 ms; the
 * trace renders that as round-robin turns of --slice requests (default 25 =
 * 5 ms / 200 us per request, the study's 18-20 s for 96,000).  The interval
 * does not end on a request boundary: a waiting thread's timed wait runs
 * out (3.11 Python/ceval_gil.h:229-254) and the running one drops the GIL
 * at its next bytecode boundary (Python/ceval.c:1741-1748, :1196-1201),
 * inside a request.  So a turn's last request is cut after its allocations
 * (body, dict, dumps, loads, cache insert and evictions) and before its
 * frees: its thread keeps those temporaries until its next turn, when it
 * frees them before its next request.  With more threads than arenas
 * (64 threads, 8 * ncpus arenas) the threads sharing an arena allocate
 * around each other's held temporaries; with one arena per thread the cut
 * changes nothing.  The real cut falls anywhere in the request; this one,
 * the latest, holds the most.
 * webworker.py measures its own request time and records the slice that
 * corresponds to it.  --turn-seed N > 0 is a what-if for the scheduling the
 * rotation leaves out (random next thread, random turn length with the
 * same mean; docs/webworker.md); measured runs never set it.
 *
 * Requests, with CPython 3.11 sources (shane-mf/cpython-3.11@05e222c) and,
 * where 3.14 differs, 3.14.7 (tcchen2026/cpython-3.14@b494531):
 *   - body: b"x" * n is bytes_repeat (3.11 Objects/bytesobject.c:1466-1502;
 *     3.14 :1503-1522): PyObject_Malloc(PyBytesObject_SIZE + n), with
 *     PyBytesObject_SIZE = offsetof(ob_sval) + 1 = 33 (:33; ob_shash is
 *     still there in 3.14).  Over 479 bytes of body it is a libc request.
 *   - dicts: an empty dict grows on insert through insert_to_emptydict
 *     (size 8) and insertion_resize (3.11 dictobject.c:1181-1184): at
 *     dk_usable <= 0 (:1246) dictresize to calculate_log2_keysize(
 *     GROWTH_RATE = used * 3) (:405-410, :448), which allocates the new keys
 *     and then frees the old (:1405-1556).  new_keys_object (:594-645)
 *     requests sizeof(PyDictKeysObject) 32 + index bytes (1 per slot below
 *     256 slots, 2 below 65536, :603-617) + 16 (PyDictUnicodeEntry, all
 *     keys str) or 24 (PyDictKeyEntry) * USABLE_FRACTION(size) = 2/3
 *     (:401): 120, 208, 400, 768, 1520, 3264, 6512 bytes for 8..512 slots
 *     (sys.getsizeof agrees on 3.11.2: 184..6576 with the 64-byte dict).
 *     3.11 uses PyObject_Malloc (:632), 3.14 PyMem_Malloc (:785); both keep
 *     8-slot str-keyed tables on a free list (3.11 :624-627, :678-686; 3.14
 *     :782, :821).  Deletion leaves a dummy entry: used drops, usable does
 *     not, so a churning cache rebuilds its table every so often.
 *   - json.dumps(d) (Lib/json/encoder.py encode → c_make_encoder):
 *     3.11 accumulates fragments in a _PyAccu (Objects/accu.c): "{", then
 *     per item [", "], the quoted key, ": ", the value's repr, then "}" --
 *     801 PyList_Append calls whose ob_item grows by list_resize
 *     (PyMem_Realloc, listobject.c:44-96); in between, PyMapping_Items(d)
 *     (_json.c:1549) makes a 200-slot list (PyList_New: PyMem_Calloc of
 *     1,600 bytes), freed after the loop (:1557, the iterator's ref).  At
 *     the end _PyAccu_FinishAsList joins the fragments into one str
 *     (PyUnicode_Join: PyUnicode_New(3290) = 48 + 3290 + 1 bytes) and
 *     clears the list (_list_clear: PyMem_Free of ob_item, :605-620).
 *     3.14 writes into one PyUnicodeWriter (_json.c:1361-1401): its buffer
 *     is PyUnicode_New(n + n/4) at the first write and resize_compact
 *     (PyObject_Realloc) to need + need/4 when a write does not fit
 *     (Objects/unicodeobject.c:13814-13887, OVERALLOCATE_FACTOR 4), and
 *     _PyUnicodeWriter_Finish shrinks it to the exact 40 + 3290 + 1 bytes
 *     (:14210-14237).  Exact dicts are walked with PyDict_Next, no items
 *     list (:1698-1729).
 *   - json.loads(s): _parse_object_unicode (3.11 _json.c:686-790) builds
 *     the result dict and, per key, PyDict_SetDefault(memo, key, key)
 *     before PyDict_SetItem(rval, key, value), so the memo and the result
 *     grow in step, memo first; after the scan the memo's table is freed
 *     (3.11 PyDict_Clear, :1159; 3.14 a per-call dict, Py_DECREF).
 *     Around the scan, JSONDecoder.decode matches WHITESPACE twice, at 0
 *     and after the value (3.11 Lib/json/decoder.py:337-338; 3.14
 *     :345-346).  Each match is an SRE state: state_init's mark array,
 *     PyMem_New of groups * 2 = 0 pointers (3.11 Modules/_sre/sre.c:422;
 *     3.14 :550), then data_stack_grow's PyMem_Realloc(NULL, minsize +
 *     minsize/4 + 1024) for the first match context (3.11 :208-223; 3.14
 *     :251-261), minsize = sizeof(SRE(match_context)) = 56 on 64-bit
 *     (sre_lib.h:512-525): 1094 bytes, a libc request; state_fini frees the
 *     stack, then the marks (3.11 :485-494).  A 1104-byte chunk is beyond
 *     glibc's tcache, so each match takes and returns heap memory.
 *   - cache[i] = body on the C OrderedDict (Objects/odictobject.c):
 *     the dict insert (int keys: general entries, 24 bytes), then
 *     _odict_add_new_node (:665-700), whose _odict_get_index rebuilds the
 *     fast-nodes table (PyMem_NEW of 8 bytes per slot, old one freed,
 *     :550-581) whenever the dict's table changed, then a 32-byte node
 *     (PyMem_Malloc, :686).  popitem(last=False) frees the node
 *     (_odict_clear_node), deletes the dict entry and returns (key, body);
 *     the tuple's dealloc frees the key, then len() drops the body.  The
 *     key is the request's int (28 bytes, PyObject_Malloc; ints up to 256
 *     are the small-int singletons and allocate nothing).
 * Left out, deliberately: small objects that are freed within the request
 * and recycle the same pymalloc blocks (the dict objects and their free
 * list, the 200 key strs of d2 and the json fragments, ints and floats of
 * the size rule, the writer struct, tuples, the iterator), the 8-slot
 * str-keyed tables (always served by their free list after the first),
 * the int of a request that is not cached, threading's own objects, and
 * thread stacks.  gc.collect() frees nothing this trace allocated.
 *
 * Virtual time: --request-ns per request (default 200 us, see above); the
 * idle stretch is 12 s; trim takes no virtual time.
 *
 * Sections: size rules, generator state, CPython containers, request, phases,
 * options.
 */
#include "wl_webworker.h"
#include "wl_emit.h"
#include "wl_spike.h" /* spike_str_request, spike_list_capacity, py version */
#include "wl_survivors.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WW_TWO_PI     6.283185307179586          /* 2 * math.pi, exactly */
#define WW_INV53      (1.0 / 9007199254740992.0) /* 2^-53 */
#define WW_BYTES_HDR  UINT64_C(33)  /* PyBytesObject_SIZE, bytesobject.c:33 */
#define WW_INT_SIZE   UINT64_C(28)  /* _PyLong_New(1): 24 + one 4-byte digit */
#define WW_SMALL_INT  UINT64_C(256) /* _PY_NSMALLPOSINTS - 1: singletons */
#define WW_NODE_SIZE  UINT64_C(32)  /* _ODictNode: key, hash, next, prev */
#define WW_PTR_SIZE   UINT64_C(8)   /* sizeof(PyObject *) */
#define WW_KEYS_HDR   UINT64_C(32)  /* sizeof(PyDictKeysObject), 64-bit */
#define WW_IDLE_NS    UINT64_C(12000000000) /* the study: 12 s idle */
#define WW_MIB        (UINT64_C(1) << 20)
#define WW_MAX_REQ    UINT64_C(50000000) /* ids fit in uint32_t */
#define WW_NONE       UINT32_MAX
#define WW_ACCU_ITEMS (4 * WEBWORKER_DICT_ITEMS + 1) /* 3.11 fragments */
#define WW_SRE_CTX    UINT64_C(56) /* sizeof(SRE(match_context)), 64-bit */
#define WW_SRE_STACK  (WW_SRE_CTX + WW_SRE_CTX / 4 + 1024) /* sre.c:215 */

/* ---- Size rules --------------------------------------------------------- */

uint64_t webworker_body_len(uint64_t seed, uint64_t i) {
  uint64_t z0 = survivors_splitmix64_at(seed, 3 * i);
  uint64_t z1 = survivors_splitmix64_at(seed, 3 * i + 1);
  double   u1 = (double)((z0 >> 11) + 1) * WW_INV53;
  double   u2 = (double)(z1 >> 11) * WW_INV53;
  double   g = sqrt(-2.0 * log(u1)) * cos(WW_TWO_PI * u2);
  double   x = WEBWORKER_BODY_MEDIAN * exp(WEBWORKER_BODY_SIGMA * g) + 0.5;
  if (x >= (double)WEBWORKER_BODY_MAX)
    return WEBWORKER_BODY_MAX;
  if (x < (double)WEBWORKER_BODY_MIN)
    return WEBWORKER_BODY_MIN;
  return (uint64_t)x;
}

bool webworker_is_cached(uint64_t seed, uint64_t i) {
  uint64_t z2 = survivors_splitmix64_at(seed, 3 * i + 2);
  return (double)(z2 >> 11) * WW_INV53 < WEBWORKER_CACHE_PROB;
}

uint64_t webworker_dict_keys_bytes(unsigned log2_size, bool unicode) {
  unsigned log2_bytes = log2_size < 8    ? log2_size      /* dictobject.c:604 */
                        : log2_size < 16 ? log2_size + 1  /* :607 */
                        : log2_size < 32 ? log2_size + 2  /* :615 */
                                         : log2_size + 3; /* :611 */
  uint64_t usable = ((UINT64_C(1) << log2_size) << 1) / 3; /* :401 */
  return WW_KEYS_HDR + (UINT64_C(1) << log2_bytes) +
         (unicode ? 16 : 24) * usable;
}

unsigned webworker_dict_log2_size(uint64_t minsize) {
  /* dictobject.c:408-409: bit_length(((minsize | 8) - 1) | 7). */
  uint64_t v = ((minsize | 8) - 1) | 7;
  unsigned n = 0;
  while (v != 0) {
    n++;
    v >>= 1;
  }
  return n;
}

/* Digits of the repr of j >= 0. */
static uint64_t digits(uint64_t j) {
  uint64_t n = 1;
  while (j >= 10) {
    j /= 10;
    n++;
  }
  return n;
}

/* "{" + items '"field%03d": j' joined by ", " + "}". */
uint64_t webworker_json_len(void) {
  uint64_t n = 2;
  for (uint64_t j = 0; j < WEBWORKER_DICT_ITEMS; j++)
    n += (j ? 2u : 0u) + 10 + 2 + digits(j);
  return n;
}

/* ---- Generator state ---------------------------------------------------- */

typedef enum ww_phase_e {
  PH_START,        /* mark start */
  PH_THREADS,      /* thread_start for each worker */
  PH_SERVE,        /* requests of the running phase, one stage per step */
  PH_UNDER_LOAD,   /* mark under_load */
  PH_SHRINK,       /* main thread evicts down to --shrink-mb */
  PH_EXIT,         /* thread_exit for each worker */
  PH_AFTER_SHRINK, /* mark after_shrink */
  PH_IDLE,         /* 12 s with no activity */
  PH_AFTER_IDLE,   /* mark after_idle */
  PH_TRIM,         /* trim 0 */
  PH_AFTER_TRIM,   /* mark after_trim */
  PH_DONE
} ww_phase_t;

/* Stages of one request: up to the cache insert, evictions, the end. */
typedef enum ww_stage_e { ST_BEGIN, ST_EVICT, ST_END } ww_stage_t;

/* A request whose thread lost the GIL before its end: what request_end
 * frees (see the turns above). */
typedef struct ww_held_s {
  bool     held;
  uint64_t body_len;
  uint32_t body, d_keys, json, d2_keys;
  bool     cached;
} ww_held_t;

/* A dict's keys table as insertdict/dictresize see it.  log2 == 0: the
 * shared empty table (Py_EMPTY_KEYS), nothing allocated. */
typedef struct pydict_s {
  unsigned log2;    /* table of 2^log2 slots, 0 = empty keys */
  int64_t  usable;  /* dk_usable: inserts left before a resize */
  int64_t  used;    /* ma_used: live items */
  uint32_t keys;    /* id of the table, WW_NONE if not allocated by us */
  bool     unicode; /* str keys only: 16-byte entries, 8-slot free list */
} pydict_t;

typedef struct ww_src_s ww_src_t;
struct ww_src_s {
  trace_source_t base; /* must be first */

  uint64_t       threads, requests, cache_bytes_max, shrink_bytes, seed;
  uint64_t       slice, request_ns;
  spike_python_t python;
  trace_domain_t keys_dom; /* 3.11 obj (PyObject_Malloc), 3.14 mem */

  ww_phase_t phase;
  wl_emit_t  em;     /* clock, id stack, pending events */
  uint64_t   cursor; /* PH_THREADS/PH_EXIT: threads done */

  /* Serving: next request index, end of the running phase, which phase
   * (1 or 2), the running thread (0-based) and its requests this turn. */
  uint64_t next_req, phase_end, cur_thread, slice_done;
  uint64_t turn_seed; /* 0: fixed turns in rotation; else random turns */
  uint64_t turn_len;  /* requests in the running turn */
  uint64_t nturns;    /* turns begun, the index of the turn draws */
  int      serve_phase;

  /* The request in progress (between stages). */
  ww_stage_t stage;
  uint64_t   req, body_len;
  uint32_t   body, d_keys, json, d2_keys;
  bool       cached;
  ww_held_t *held;           /* per worker thread (0-based) */
  uint64_t   release_cursor; /* phase end: threads whose held request ended */

  /* The cache: a FIFO ring over request slots (each request is cached at
   * most once), its dict table and the OrderedDict's fast-nodes table. */
  uint32_t *c_body, *c_int, *c_node;
  uint64_t *c_len;
  uint64_t  c_head, c_tail, c_bytes;
  uint64_t  cap_bytes; /* the cache's cap now: --cache-mb, then --shrink-mb */
  pydict_t  cdict;
  uint32_t  fast_nodes;      /* id, WW_NONE before the first insert */
  unsigned  fast_log2;       /* od_fast_nodes_size = 2^fast_log2 */
  uint64_t  cdict_resizes;   /* table rebuilds (od_resize_sentinel) */
  uint64_t  fast_resizes_at; /* cdict_resizes when fast nodes were built */
};

/* ---- CPython containers ------------------------------------------------- */

/* dictresize to 2^log2new slots: the new table, then the old one freed;
 * 8-slot str-keyed tables come from and go to their free list. */
static void dict_resize(ww_src_t *s, uint32_t th, pydict_t *d, unsigned log2new,
                        bool *resized) {
  bool     freelisted_new = log2new == 3 && d->unicode;
  uint32_t keys = WW_NONE;
  if (!freelisted_new)
    keys = wl_emit_malloc(&s->em, th, s->keys_dom,
                          webworker_dict_keys_bytes(log2new, d->unicode));
  if (d->keys != WW_NONE)
    wl_emit_free(&s->em, th, s->keys_dom, d->keys);
  d->keys = keys;
  d->log2 = log2new;
  d->usable = (int64_t)(((UINT64_C(1) << log2new) << 1) / 3) - d->used;
  if (resized != NULL)
    *resized = true;
}

/* insertdict of a new key (insert_to_emptydict when the table is empty). */
static void dict_insert(ww_src_t *s, uint32_t th, pydict_t *d, bool *resized) {
  if (d->log2 == 0)
    dict_resize(s, th, d, 3, resized);
  else if (d->usable <= 0)
    dict_resize(s, th, d, webworker_dict_log2_size((uint64_t)d->used * 3),
                resized);
  d->usable--;
  d->used++;
}

/* dict_dealloc / PyDict_Clear: the table is freed (or free-listed). */
static void dict_release(ww_src_t *s, uint32_t th, pydict_t *d) {
  if (d->keys != WW_NONE)
    wl_emit_free(&s->em, th, s->keys_dom, d->keys);
  memset(d, 0, sizeof *d);
  d->keys = WW_NONE;
}

/* A fresh str-keyed dict grown to the 200 request items; returns the id of
 * its table. */
static uint32_t dict_build(ww_src_t *s, uint32_t th) {
  pydict_t d = {.keys = WW_NONE, .unicode = true};
  for (int j = 0; j < WEBWORKER_DICT_ITEMS; j++)
    dict_insert(s, th, &d, NULL);
  return d.keys;
}

/* _odict_get_index: rebuild the fast-nodes table if the dict's table
 * changed since the last build. */
static void odict_sync(ww_src_t *s, uint32_t th) {
  if (s->fast_nodes != WW_NONE && s->fast_resizes_at == s->cdict_resizes &&
      s->fast_log2 == s->cdict.log2)
    return;
  uint32_t fresh = wl_emit_malloc(&s->em, th, TRACE_DOMAIN_MEM,
                                  WW_PTR_SIZE << s->cdict.log2);
  if (s->fast_nodes != WW_NONE)
    wl_emit_free(&s->em, th, TRACE_DOMAIN_MEM, s->fast_nodes);
  s->fast_nodes = fresh;
  s->fast_log2 = s->cdict.log2;
  s->fast_resizes_at = s->cdict_resizes;
}

/* popitem(last=False) and dropping the returned (key, body). */
static void cache_evict_oldest(ww_src_t *s, uint32_t th) {
  uint64_t k = s->c_head++;
  odict_sync(s, th);
  wl_emit_free(&s->em, th, TRACE_DOMAIN_MEM, s->c_node[k]);
  s->cdict.used--; /* the entry becomes a dummy; usable is unchanged */
  if (s->c_int[k] != WW_NONE)
    wl_emit_free(&s->em, th, TRACE_DOMAIN_OBJ, s->c_int[k]);
  wl_emit_free(&s->em, th, TRACE_DOMAIN_OBJ, s->c_body[k]);
  s->c_bytes -= s->c_len[k];
}

/* ---- Request ------------------------------------------------------------ */

/* json.dumps(d) under 3.11: the _PyAccu list, the items list, the join. */
static uint32_t dumps_311(ww_src_t *s, uint32_t th, uint64_t json_len) {
  uint32_t items = WW_NONE, list = WW_NONE;
  uint64_t alloc = 0, len = 0;
  for (uint64_t n = 0; n < WW_ACCU_ITEMS; n++) {
    if (n == 1) /* PyMapping_Items after "{" */
      list = wl_emit_calloc(&s->em, th, TRACE_DOMAIN_MEM,
                            WEBWORKER_DICT_ITEMS * WW_PTR_SIZE);
    if (n == WW_ACCU_ITEMS - 1) /* the loop is over: the items list goes */
      wl_emit_free(&s->em, th, TRACE_DOMAIN_MEM, list);
    uint64_t cap = spike_list_capacity(alloc, len, len + 1);
    if (cap != alloc) {
      if (items == WW_NONE)
        items = wl_emit_malloc(&s->em, th, TRACE_DOMAIN_MEM, cap * WW_PTR_SIZE);
      else
        wl_emit_realloc(&s->em, th, TRACE_DOMAIN_MEM, items, cap * WW_PTR_SIZE);
      alloc = cap;
    }
    len++;
  }
  uint32_t str = wl_emit_malloc(&s->em, th, TRACE_DOMAIN_OBJ,
                                spike_str_request(s->python, json_len));
  wl_emit_free(&s->em, th, TRACE_DOMAIN_MEM, items);
  return str;
}

/* One _PyUnicodeWriter write of n characters (3.14). */
static void writer_write(ww_src_t *s, uint32_t th, uint32_t *buf,
                         uint64_t *size, uint64_t *pos, uint64_t n) {
  uint64_t need = *pos + n;
  if (*buf == WW_NONE || need > *size) {
    uint64_t newlen = need + need / 4; /* OVERALLOCATE_FACTOR 4 */
    uint64_t bytes = spike_str_request(s->python, newlen);
    if (*buf == WW_NONE)
      *buf = wl_emit_malloc(&s->em, th, TRACE_DOMAIN_OBJ, bytes);
    else
      wl_emit_realloc(&s->em, th, TRACE_DOMAIN_OBJ, *buf, bytes);
    *size = newlen;
  }
  *pos = need;
}

/* json.dumps(d) under 3.14: one PyUnicodeWriter. */
static uint32_t dumps_314(ww_src_t *s, uint32_t th) {
  uint32_t buf = WW_NONE;
  uint64_t size = 0, pos = 0;
  writer_write(s, th, &buf, &size, &pos, 1);
  for (uint64_t j = 0; j < WEBWORKER_DICT_ITEMS; j++) {
    if (j > 0)
      writer_write(s, th, &buf, &size, &pos, 2);
    writer_write(s, th, &buf, &size, &pos, 10);
    writer_write(s, th, &buf, &size, &pos, 2);
    writer_write(s, th, &buf, &size, &pos, digits(j));
  }
  writer_write(s, th, &buf, &size, &pos, 1);
  if (size != pos)
    wl_emit_realloc(&s->em, th, TRACE_DOMAIN_OBJ, buf,
                    spike_str_request(s->python, pos));
  return buf;
}

/* One WHITESPACE.match: the SRE state's marks and data stack. */
static void whitespace_match(ww_src_t *s, uint32_t th) {
  uint32_t marks = wl_emit_malloc(&s->em, th, TRACE_DOMAIN_MEM, 0);
  uint32_t stack = wl_emit_malloc(&s->em, th, TRACE_DOMAIN_MEM, WW_SRE_STACK);
  wl_emit_free(&s->em, th, TRACE_DOMAIN_MEM, stack);
  wl_emit_free(&s->em, th, TRACE_DOMAIN_MEM, marks);
}

/* json.loads(s): a whitespace match, memo and result grow in step, the
 * memo's table goes, another whitespace match. */
static uint32_t loads(ww_src_t *s, uint32_t th) {
  pydict_t memo = {.keys = WW_NONE, .unicode = true};
  pydict_t rval = {.keys = WW_NONE, .unicode = true};
  whitespace_match(s, th);
  for (int j = 0; j < WEBWORKER_DICT_ITEMS; j++) {
    dict_insert(s, th, &memo, NULL);
    dict_insert(s, th, &rval, NULL);
  }
  dict_release(s, th, &memo);
  whitespace_match(s, th);
  return rval.keys;
}

/* The request's first stage: body, dict, dumps, loads, cache insert. */
static void request_begin(ww_src_t *s, uint32_t th) {
  uint64_t i = s->req;
  s->body_len = webworker_body_len(s->seed, i);
  s->body =
      wl_emit_malloc(&s->em, th, TRACE_DOMAIN_OBJ, WW_BYTES_HDR + s->body_len);
  s->d_keys = dict_build(s, th);
  s->json = s->python == SPIKE_PY314 ? dumps_314(s, th)
                                     : dumps_311(s, th, webworker_json_len());
  s->d2_keys = loads(s, th);
  s->cached = webworker_is_cached(s->seed, i);
  if (!s->cached)
    return;
  uint64_t k = s->c_tail++;
  s->c_int[k] = i > WW_SMALL_INT
                    ? wl_emit_malloc(&s->em, th, TRACE_DOMAIN_OBJ, WW_INT_SIZE)
                    : WW_NONE;
  bool resized = false;
  dict_insert(s, th, &s->cdict, &resized);
  if (resized)
    s->cdict_resizes++;
  odict_sync(s, th);
  s->c_node[k] = wl_emit_malloc(&s->em, th, TRACE_DOMAIN_MEM, WW_NODE_SIZE);
  s->c_body[k] = s->body;
  s->c_len[k] = s->body_len;
  s->c_bytes += s->body_len;
}

/* The last stage: del d, s, d2, body. */
static void request_end(ww_src_t *s, uint32_t th) {
  wl_emit_free(&s->em, th, s->keys_dom, s->d_keys);
  wl_emit_free(&s->em, th, TRACE_DOMAIN_OBJ, s->json);
  wl_emit_free(&s->em, th, s->keys_dom, s->d2_keys);
  if (!s->cached)
    wl_emit_free(&s->em, th, TRACE_DOMAIN_OBJ, s->body);
  s->em.t_ns += s->request_ns;
}

/* The GIL goes to the next thread.  --turn-seed 0: the next thread in
 * rotation for --slice requests.  Otherwise a what-if for the scheduling
 * the rotation leaves out (the OS picks which waiter wakes; a request's
 * time varies with its body; a thread blocked on the cache lock yields
 * early): splitmix64(turn_seed, turn) picks another thread uniformly and a
 * length uniform in [1, 2 * slice - 1], the same mean. */
static void next_turn(ww_src_t *s) {
  s->slice_done = 0;
  s->nturns++;
  if (s->turn_seed == 0) {
    s->cur_thread = (s->cur_thread + 1) % s->threads;
    s->turn_len = s->slice;
    return;
  }
  uint64_t z = survivors_splitmix64_at(s->turn_seed, s->nturns);
  if (s->threads > 1)
    s->cur_thread =
        (s->cur_thread + 1 + (z >> 32) % (s->threads - 1)) % s->threads;
  s->turn_len = 1 + (z & UINT32_MAX) % (2 * s->slice - 1);
}

/* The running request's thread loses the GIL before its end. */
static void hold_request(ww_src_t *s) {
  s->held[s->cur_thread] = (ww_held_t){
      true, s->body_len, s->body, s->d_keys, s->json, s->d2_keys, s->cached};
}

/* Thread t (0-based) ends the request it held, if any. */
static void end_held_request(ww_src_t *s, uint64_t t) {
  ww_held_t *h = &s->held[t];
  if (!h->held)
    return;
  s->body_len = h->body_len;
  s->body = h->body;
  s->d_keys = h->d_keys;
  s->json = h->json;
  s->d2_keys = h->d2_keys;
  s->cached = h->cached;
  request_end(s, (uint32_t)(t + 1));
  h->held = false;
}

/* One stage of the running request (or the start of the next). */
static void serve_step(ww_src_t *s) {
  uint32_t th = (uint32_t)(s->cur_thread + 1);
  switch (s->stage) {
  case ST_BEGIN:
    end_held_request(s, s->cur_thread);
    s->req = s->next_req++;
    request_begin(s, th);
    s->stage = ST_EVICT;
    break;
  case ST_EVICT:
    /* At most a few events per eviction; leave room for them. */
    while (s->c_bytes > s->cap_bytes &&
           s->em.npending + 8 < WL_EMIT_PENDING_MAX)
      cache_evict_oldest(s, th);
    if (s->c_bytes > s->cap_bytes)
      break;
    s->stage = ST_END;
    if (s->threads > 1 && s->slice_done + 1 >= s->turn_len) {
      hold_request(s); /* the interval ran out inside the request */
      s->stage = ST_BEGIN;
      next_turn(s);
    }
    break;
  case ST_END:
    request_end(s, th);
    s->stage = ST_BEGIN;
    if (++s->slice_done >= s->turn_len) /* the GIL changes hands */
      next_turn(s);
    break;
  }
}

/* ---- Phases ------------------------------------------------------------- */

static void begin_serving(ww_src_t *s, int which, uint64_t n) {
  s->serve_phase = which;
  s->release_cursor = 0;
  s->phase_end = s->next_req + n;
  s->cur_thread = 0;
  s->slice_done = 0;
  s->turn_len = s->slice;
  s->stage = ST_BEGIN;
  s->phase = PH_SERVE;
}

/* Runs the state machine until at least one event is pending or done. */
static void step(ww_src_t *s) {
  while (s->em.npending == 0 && s->phase != PH_DONE) {
    switch (s->phase) {
    case PH_START:
      wl_emit_mark(&s->em, "start");
      s->cursor = 0;
      s->phase = PH_THREADS;
      break;
    case PH_THREADS:
      while (s->cursor < s->threads && s->em.npending < 64)
        wl_emit_push(&s->em, TRACE_THREAD_START, (uint32_t)(++s->cursor));
      if (s->cursor == s->threads)
        begin_serving(s, 1, s->requests);
      break;
    case PH_SERVE:
      if (s->stage == ST_BEGIN && s->next_req == s->phase_end) {
        /* Every thread ends its held request before the barrier. */
        while (s->release_cursor < s->threads &&
               s->em.npending + 8 < WL_EMIT_PENDING_MAX)
          end_held_request(s, s->release_cursor++);
        if (s->release_cursor == s->threads)
          s->phase = s->serve_phase == 1 ? PH_UNDER_LOAD : PH_EXIT;
      } else {
        serve_step(s);
      }
      if (s->phase == PH_EXIT)
        s->cursor = 0;
      break;
    case PH_UNDER_LOAD:
      wl_emit_mark(&s->em, "under_load");
      s->phase = PH_SHRINK;
      break;
    case PH_SHRINK:
      while (s->c_bytes > s->shrink_bytes &&
             s->em.npending + 8 < WL_EMIT_PENDING_MAX)
        cache_evict_oldest(s, 0);
      if (s->c_bytes <= s->shrink_bytes) {
        s->cap_bytes = s->shrink_bytes; /* the cache keeps its new cap */
        begin_serving(s, 2, s->requests / 2);
      }
      break;
    case PH_EXIT:
      while (s->cursor < s->threads && s->em.npending < 64)
        wl_emit_push(&s->em, TRACE_THREAD_EXIT, (uint32_t)(++s->cursor));
      if (s->cursor == s->threads)
        s->phase = PH_AFTER_SHRINK;
      break;
    case PH_AFTER_SHRINK:
      wl_emit_mark(&s->em, "after_shrink");
      s->phase = PH_IDLE;
      break;
    case PH_IDLE:
      wl_emit_push(&s->em, TRACE_IDLE, 0)->size = WW_IDLE_NS;
      s->em.t_ns += WW_IDLE_NS;
      s->phase = PH_AFTER_IDLE;
      break;
    case PH_AFTER_IDLE:
      wl_emit_mark(&s->em, "after_idle");
      s->phase = PH_TRIM;
      break;
    case PH_TRIM:
      wl_emit_push(&s->em, TRACE_TRIM, 0)->size = 0;
      s->phase = PH_AFTER_TRIM;
      break;
    case PH_AFTER_TRIM:
      wl_emit_mark(&s->em, "after_trim");
      s->phase = PH_DONE;
      break;
    case PH_DONE:
      break;
    }
  }
}

static as_status_t ww_next(trace_source_t *src, trace_event_t *ev,
                           as_err_t *err) {
  (void)err;
  ww_src_t *s = (ww_src_t *)src;
  if (wl_emit_next(&s->em, ev))
    return AS_OK;
  step(s);
  return wl_emit_next(&s->em, ev) ? AS_OK : AS_DONE;
}

static void ww_close(trace_source_t *src) {
  ww_src_t *s = (ww_src_t *)src;
  if (s == NULL)
    return;
  free(s->em.free_ids);
  free(s->c_body);
  free(s->c_int);
  free(s->c_node);
  free(s->c_len);
  free(s->held);
  free(s);
}

static const trace_source_methods_t ww_methods = {
    .next = ww_next,
    .close = ww_close,
};

/* ---- Options ------------------------------------------------------------ */

static const workload_option_t ww_options[] = {
    {"threads", "1", "worker threads serving requests (the study: 1-64)"},
    {"requests", "96000", "phase-1 requests; phase 2 serves half as many"},
    {"cache-mb", "100", "cache cap in phase 1, MiB of body bytes"},
    {"shrink-mb", "10", "cache cap after the shrink, MiB"},
    {"seed", "1", "splitmix64 seed for body sizes and cache choices"},
    {"slice", "25",
     "requests per GIL turn (5 ms switch interval / 200 us per request)"},
    {"request-ns", "200000", "virtual ns per request (study: ~19 s/96k)"},
    {"python", "3.11", "CPython whose requests to emit: 3.11 or 3.14"},
    {"turn-seed", "0",
     "0: fixed GIL turns in rotation; else seed of random turns (what-if)"},
    {NULL, NULL, NULL},
};

static as_status_t ww_open(const char *const *values, trace_source_t **out,
                           as_err_t *err) {
  *out = NULL;
  uint64_t              v[7];
  static const uint64_t lo[7] = {1, 2, 0, 0, 0, 1, 0};
  static const uint64_t hi[7] = {
      1024,       WW_MAX_REQ, UINT64_C(1) << 20,   UINT64_C(1) << 20,
      UINT64_MAX, WW_MAX_REQ, UINT64_C(1000000000)};
  for (int i = 0; i < 7; i++) {
    as_status_t rc = wl_parse_u64("webworker", values[i], ww_options[i].name,
                                  lo[i], hi[i], &v[i], err);
    if (rc != AS_OK)
      return rc;
  }
  spike_python_t py;
  if (strcmp(values[7], "3.11") == 0)
    py = SPIKE_PY311;
  else if (strcmp(values[7], "3.14") == 0)
    py = SPIKE_PY314;
  else
    return as_err_set(err, AS_EUSAGE,
                      "webworker: --python must be 3.11 or 3.14, got '%s'",
                      values[7]);
  uint64_t    turn_seed = 0;
  as_status_t trc = wl_parse_u64("webworker", values[8], "turn-seed", 0,
                                 UINT64_MAX, &turn_seed, err);
  if (trc != AS_OK)
    return trc;
  if (v[3] > v[2])
    return as_err_set(err, AS_EUSAGE,
                      "webworker: --shrink-mb (%" PRIu64
                      ") exceeds --cache-mb (%" PRIu64 ")",
                      v[3], v[2]);

  ww_src_t *s = calloc(1, sizeof *s);
  if (s == NULL)
    return as_err_set(err, AS_ENOMEM, "webworker: out of memory");
  s->base.methods = &ww_methods;
  s->threads = v[0];
  s->requests = v[1];
  s->cache_bytes_max = v[2] * WW_MIB;
  s->shrink_bytes = v[3] * WW_MIB;
  s->turn_seed = turn_seed;
  s->cap_bytes = s->cache_bytes_max;
  s->seed = v[4];
  s->slice = v[5];
  s->request_ns = v[6];
  s->python = py;
  s->keys_dom = py == SPIKE_PY314 ? TRACE_DOMAIN_MEM : TRACE_DOMAIN_OBJ;
  s->phase = PH_START;
  s->cdict.keys = WW_NONE;
  s->fast_nodes = WW_NONE;
  /* Live objects: three per cached request at most, plus the requests in
   * progress (a handful per thread) and the cache's two tables. */
  size_t total = (size_t)(s->requests + s->requests / 2);
  s->em.free_ids = malloc((3 * total + 8 * (size_t)s->threads + 64) *
                          sizeof *s->em.free_ids);
  s->held = calloc((size_t)s->threads, sizeof *s->held);
  s->c_body = malloc(total * sizeof *s->c_body);
  s->c_int = malloc(total * sizeof *s->c_int);
  s->c_node = malloc(total * sizeof *s->c_node);
  s->c_len = malloc(total * sizeof *s->c_len);
  if (!s->em.free_ids || !s->c_body || !s->c_int || !s->c_node || !s->c_len ||
      !s->held) {
    ww_close(&s->base);
    return as_err_set(err, AS_ENOMEM,
                      "webworker: out of memory for %" PRIu64 " requests",
                      v[1]);
  }

  char args[256];
  snprintf(args, sizeof args,
           "webworker --threads %" PRIu64 " --requests %" PRIu64
           " --cache-mb %" PRIu64 " --shrink-mb %" PRIu64 " --seed %" PRIu64
           " --slice %" PRIu64 " --python %s",
           v[0], v[1], v[2], v[3], v[4], v[5],
           py == SPIKE_PY314 ? "3.14" : "3.11");
  if (turn_seed != 0) /* the default stays out, as measured runs record */
    snprintf(args + strlen(args), sizeof args - strlen(args),
             " --turn-seed %" PRIu64, turn_seed);
  snprintf(s->base.name, sizeof s->base.name, "%s", args);
  as_status_t rc = trace_meta_set(&s->base.meta, "kind", "workload", err);
  if (rc == AS_OK)
    rc = trace_meta_set(&s->base.meta, "workload", args, err);
  if (rc == AS_OK)
    rc = trace_meta_set(&s->base.meta, "generator", "traces/wl_webworker.c",
                        err);
  if (rc != AS_OK) {
    ww_close(&s->base);
    return rc;
  }
  *out = &s->base;
  return AS_OK;
}

const workload_def_t workload_webworker = {
    .name = "webworker",
    .summary = "the webworker study: bodies, json round trips, "
               "a 100 MiB LRU cache shrunk to 10, idle, malloc_trim(0)",
    .options = ww_options,
    .open = ww_open,
};
