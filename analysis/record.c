/* analysis/record.c -- measured runs: storing traces with measured RSS,
 * converting raw capture logs into traces, and running a command under
 * liballocsim_capture.so.
 *
 * `allocsim record` and `allocsim capture` share record_trace_file(): a
 * capture is converted to a trace first and then recorded exactly like a
 * measured-run file somebody else wrote, so both kinds of run look the same
 * in the store.
 *
 * Trade-off: the converter maps the raw log read-only and merges its
 * per-thread chunks with a heap (memory grows with the number of chunks,
 * 48 bytes per 128 KiB of log, and with live objects), instead of sorting
 * the whole log in memory.  The alternative, one file per thread merged
 * k-way, would leave thousands of files behind for programs that start many
 * short threads.
 *
 * Sections: SHA-256, recording traces, libc spec from env knobs, raw log
 * conversion, running a capture.  Addresses become recycled object ids
 * through traces/addr_ids.h, which the trace importers share.
 */
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <stdarg.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../traces/addr_ids.h"
#include "../traces/capture/capture_log.h"
#include "../traces/trace_io.h"


extern char **environ;

/* ---- SHA-256 (FIPS 180-4) ----------------------------------------------- */

typedef struct sha256_s sha256_t;
struct sha256_s {
  uint32_t      h[8];    /* chaining state */
  uint64_t      total;   /* bytes hashed */
  unsigned char buf[64]; /* pending partial block */
  size_t        buf_len; /* bytes in buf */
};

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t ror32(uint32_t x, unsigned n) {
  return (x >> n) | (x << (32 - n));
}

static void sha256_block(sha256_t *c, const unsigned char *p) {
  uint32_t w[64];
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
           (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ror32(w[i - 15], 7) ^ ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ror32(w[i - 2], 17) ^ ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3], e = c->h[4],
           f = c->h[5], g = c->h[6], h = c->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t s1 = ror32(e, 6) ^ ror32(e, 11) ^ ror32(e, 25);
    uint32_t ch = (e & f) ^ (~e & g);
    uint32_t t1 = h + s1 + ch + sha_k[i] + w[i];
    uint32_t s0 = ror32(a, 2) ^ ror32(a, 13) ^ ror32(a, 22);
    uint32_t maj = (a & b) ^ (a & cc) ^ (b & cc);
    uint32_t t2 = s0 + maj;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = cc;
    cc = b;
    b = a;
    a = t1 + t2;
  }
  c->h[0] += a, c->h[1] += b, c->h[2] += cc, c->h[3] += d;
  c->h[4] += e, c->h[5] += f, c->h[6] += g, c->h[7] += h;
}

static void sha256_init(sha256_t *c) {
  static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                 0xa54ff53a, 0x510e527f, 0x9b05688c,
                                 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, iv, sizeof iv);
  c->total = 0;
  c->buf_len = 0;
}

static void sha256_update(sha256_t *c, const void *data, size_t len) {
  const unsigned char *p = data;
  c->total += len;
  while (len > 0) {
    if (c->buf_len == 0 && len >= 64) {
      sha256_block(c, p);
      p += 64;
      len -= 64;
      continue;
    }
    size_t take = 64 - c->buf_len < len ? 64 - c->buf_len : len;
    memcpy(c->buf + c->buf_len, p, take);
    c->buf_len += take;
    p += take;
    len -= take;
    if (c->buf_len == 64) {
      sha256_block(c, c->buf);
      c->buf_len = 0;
    }
  }
}

static void sha256_final(sha256_t *c, char out[65]) {
  uint64_t      bits = c->total * 8;
  unsigned char pad[72] = {0x80};
  size_t        padlen = (c->buf_len < 56 ? 56 : 120) - c->buf_len;
  sha256_update(c, pad, padlen);
  unsigned char len_be[8];
  for (int i = 0; i < 8; i++)
    len_be[i] = (unsigned char)(bits >> (56 - 8 * i));
  sha256_update(c, len_be, 8);
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 4; j++) {
      unsigned byte = (c->h[i] >> (24 - 8 * j)) & 0xff;
      out[8 * i + 2 * j] = hex[byte >> 4];
      out[8 * i + 2 * j + 1] = hex[byte & 15];
    }
  out[64] = '\0';
}

void record_sha256_hex(const void *data, size_t len, char out[65]) {
  sha256_t c;
  sha256_init(&c);
  sha256_update(&c, data, len);
  sha256_final(&c, out);
}

as_status_t record_sha256_file(const char *path, char out[65], as_err_t *err) {
  out[0] = '\0';
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot open: %s", path,
                      strerror(errno));
  sha256_t      c;
  unsigned char buf[65536];
  size_t        n;
  sha256_init(&c);
  while ((n = fread(buf, 1, sizeof buf, f)) > 0)
    sha256_update(&c, buf, n);
  int bad = ferror(f);
  fclose(f);
  if (bad)
    return as_err_set(err, AS_EIO, "%s: read error", path);
  sha256_final(&c, out);
  return AS_OK;
}

/* ---- Recording traces --------------------------------------------------- */

typedef struct samples_s samples_t;
struct samples_s {
  store_sample_t *v;
  size_t          n, cap;
};

static as_status_t samples_push(samples_t *s, const store_sample_t *x,
                                as_err_t *err) {
  if (s->n == s->cap) {
    size_t          cap = s->cap ? 2 * s->cap : 256;
    store_sample_t *v = realloc(s->v, cap * sizeof *v);
    if (v == NULL)
      return as_err_set(err, AS_ENOMEM, "out of memory for samples");
    s->v = v;
    s->cap = cap;
  }
  s->v[s->n++] = *x;
  return AS_OK;
}

static const char *meta_get_trace(void *user, const char *key) {
  return trace_meta_get(user, key);
}

static bool is_alloc_op(uint8_t op) {
  return op == TRACE_MALLOC || op == TRACE_CALLOC || op == TRACE_REALLOC ||
         op == TRACE_MEMALIGN || op == TRACE_FREE;
}

/* Live bytes by id: ids are dense, so an array indexed by id. */
typedef struct livetab_s livetab_t;
struct livetab_s {
  uint64_t *size; /* bytes + 1 for a live id, 0 for a dead one */
  uint64_t  cap;
  uint64_t  live_bytes;
};

static as_status_t live_apply(livetab_t *t, const trace_event_t *ev,
                              as_err_t *err) {
  if (ev->op == TRACE_FREE || ev->op == TRACE_REALLOC) {
    if (ev->id < t->cap && t->size[ev->id] != 0) {
      t->live_bytes -= t->size[ev->id] - 1;
      t->size[ev->id] = 0;
    }
    if (ev->op == TRACE_FREE)
      return AS_OK;
  }
  if (ev->id >= t->cap) {
    if (ev->id > (uint64_t)1 << 40)
      return as_err_set(
          err, AS_EFORMAT,
          "object id %" PRIu64 " is not dense (ids must be recycled)", ev->id);
    uint64_t cap = t->cap ? t->cap : 1024;
    while (cap <= ev->id)
      cap *= 2;
    uint64_t *v = realloc(t->size, cap * sizeof *v);
    if (v == NULL)
      return as_err_set(err, AS_ENOMEM, "out of memory for live objects");
    memset(v + t->cap, 0, (cap - t->cap) * sizeof *v);
    t->size = v;
    t->cap = cap;
  }
  if (t->size[ev->id] != 0)
    t->live_bytes -= t->size[ev->id] - 1;
  t->size[ev->id] = ev->size + 1;
  t->live_bytes += ev->size;
  return AS_OK;
}

/* The model a measured run is described by: an LD_PRELOAD'd allocator if
 * the provenance names one, else cpython for Python runs, else glibc. */
static const char *measured_model(const trace_meta_t *m) {
  const char *pre = trace_meta_get(m, "env.LD_PRELOAD");
  if (pre == NULL)
    pre = trace_meta_get(m, "LD_PRELOAD");
  if (pre != NULL && strstr(pre, "jemalloc") != NULL)
    return "jemalloc";
  if (pre != NULL && strstr(pre, "mimalloc") != NULL)
    return "mimalloc";
  if (trace_meta_get(m, "allocator") != NULL)
    return trace_meta_get(m, "allocator");
  if (trace_meta_get(m, "model") != NULL && *trace_meta_get(m, "model"))
    return trace_meta_get(m, "model");
  if (trace_meta_get(m, "python") != NULL &&
      trace_meta_get(m, "python")[0] != '\0')
    return "cpython";
  return "glibc";
}

as_status_t record_trace_file(store_t *s, const char *path, const char *command,
                              const store_kv_t *extra, size_t nextra,
                              record_info_t *info, as_err_t *err) {
  memset(info, 0, sizeof *info);
  trace_source_t *src = NULL;
  samples_t       smp = {0};
  livetab_t       live = {0};
  store_kv_t     *kv = NULL;
  as_status_t     rc = trace_open(path, &src, err);
  if (rc != AS_OK)
    return rc;

  trace_event_t  ev;
  store_sample_t pending;
  bool           have_pending = false;
  while ((rc = trace_source_next(src, &ev, err)) == AS_OK) {
    info->events++;
    if (is_alloc_op(ev.op)) {
      info->alloc_events++;
      if ((rc = live_apply(&live, &ev, err)) != AS_OK) {
        char msg[sizeof err->msg];
        as_format_fits(msg, sizeof msg, "%.200s: event %" PRIu64 ": %.280s", path,
                 info->events, err->msg);
        rc = as_err_set(err, rc, "%s", msg);
        goto done;
      }
    }
    if (have_pending && !(ev.op == TRACE_RSS && ev.t_ns == pending.t_ns)) {
      info->marks_without_rss++;
      info->marks++;
      if ((rc = samples_push(&smp, &pending, err)) != AS_OK)
        goto done;
      have_pending = false;
    }
    if (ev.op == TRACE_MARK) {
      memset(&pending, 0, sizeof pending);
      pending.t_ns = ev.t_ns;
      pending.kind = SIM_SAMPLE_MARK;
      as_format_fits(pending.label, sizeof pending.label, "%s",
               ev.label ? ev.label : "");
      pending.live_bytes = live.live_bytes;
      have_pending = true;
    } else if (ev.op == TRACE_RSS) {
      if (ev.size > info->peak_measured_rss_bytes)
        info->peak_measured_rss_bytes = ev.size;
      if (have_pending) {
        pending.measured_rss_bytes = ev.size;
        pending.live_bytes = live.live_bytes;
        info->marks++;
        if ((rc = samples_push(&smp, &pending, err)) != AS_OK)
          goto done;
        have_pending = false;
      } else {
        store_sample_t m;
        memset(&m, 0, sizeof m);
        m.t_ns = ev.t_ns;
        m.kind = SIM_SAMPLE_MEASURED;
        m.measured_rss_bytes = ev.size;
        m.live_bytes = live.live_bytes;
        info->measured++;
        if ((rc = samples_push(&smp, &m, err)) != AS_OK)
          goto done;
      }
    }
  }
  if (rc != AS_DONE)
    goto done;
  if (have_pending) {
    info->marks_without_rss++;
    info->marks++;
    if ((rc = samples_push(&smp, &pending, err)) != AS_OK)
      goto done;
  }
  if (info->marks == info->marks_without_rss && info->measured == 0) {
    rc = as_err_set(err, AS_EFORMAT,
                    "%s: no rss events: a measured run needs measured RSS "
                    "(rss lines, or a capture)",
                    path);
    goto done;
  }

  /* The trace is stored by absolute path, or relative to the store's
   * directory when it lies below it, so a store shipped with its traces
   * (data/reference.db, data/captures/) still finds them elsewhere. */
  char        abs_path[PATH_MAX];
  char        db_dir[PATH_MAX];
  const char *stored_path = abs_path;
  bool        has_trace = info->alloc_events > 0;
  if (has_trace) {
    if (realpath(path, abs_path) == NULL)
      as_format_fits(abs_path, sizeof abs_path, "%s", path);
    if (realpath(store_path(s), db_dir) != NULL) {
      char *slash = strrchr(db_dir, '/');
      if (slash != NULL)
        slash[slash == db_dir ? 1 : 0] = '\0';
      size_t dl = strlen(db_dir);
      if (dl > 1 && strncmp(abs_path, db_dir, dl) == 0 && abs_path[dl] == '/')
        stored_path = abs_path + dl + 1;
    }
    if ((rc = record_sha256_file(path, info->sha256, err)) != AS_OK)
      goto done;
  }

  const trace_meta_t *m = &src->meta;
  kv = calloc(m->count + nextra + 2, sizeof *kv);
  if (kv == NULL) {
    rc = as_err_set(err, AS_ENOMEM, "out of memory");
    goto done;
  }
  size_t nkv = 0;
  for (size_t i = 0; i < m->count; i++) {
    bool replaced = false;
    for (size_t j = 0; j < nextra; j++)
      replaced |= strcmp(extra[j].key, m->key[i]) == 0;
    if (!replaced)
      kv[nkv++] = (store_kv_t){m->key[i], m->value[i]};
  }
  for (size_t j = 0; j < nextra; j++)
    kv[nkv++] = extra[j];
  if (trace_meta_get(m, "kind") == NULL)
    kv[nkv++] = (store_kv_t){"kind", "measured"};

  char libc_spec[256];
  if ((rc = record_libc_spec(meta_get_trace, (void *)m, libc_spec,
                             sizeof libc_spec, err)) != AS_OK) {
    char msg[sizeof err->msg];
    as_format_fits(msg, sizeof msg, "%.200s: provenance: %.280s", path, err->msg);
    rc = as_err_set(err, rc, "%s", msg);
    goto done;
  }
  uint64_t    page_size = (uint64_t)sysconf(_SC_PAGESIZE);
  const char *ps = trace_meta_get(m, "page_size");
  if (ps != NULL) {
    char              *end;
    unsigned long long v = strtoull(ps, &end, 10);
    if (*end != '\0' || v == 0) {
      rc = as_err_set(err, AS_EFORMAT,
                      "%s: provenance page_size: expected bytes, got '%s'",
                      path, ps);
      goto done;
    }
    page_size = v;
  }
  const char *cmd = trace_meta_get(m, "command");
  store_run_t run = {
      .kind = "measured",
      .model = measured_model(m),
      .options = libc_spec,
      .page_size = page_size,
      .source = path,
      .command = cmd ? cmd : (command ? command : ""),
      .trace_path = has_trace ? stored_path : NULL,
      .trace_sha256 = has_trace ? info->sha256 : NULL,
      .meta = kv,
      .meta_count = nkv,
  };
  rc = store_write_run(s, &run, smp.v, smp.n, &info->run_id, err);

done:
  free(kv);
  free(smp.v);
  free(live.size);
  trace_source_close(src);
  return rc;
}

/* ---- libc spec from env knobs ------------------------------------------- */

static const char *knob_lookup(record_meta_get_fn get, void *user,
                               const char *name) {
  char        key[64];
  const char *v;
  as_format_fits(key, sizeof key, "env.%s", name);
  if ((v = get(user, key)) != NULL && *v != '\0')
    return v;
  as_format_fits(key, sizeof key, "env_%s", name);
  if ((v = get(user, key)) != NULL && *v != '\0')
    return v;
  if ((v = get(user, name)) != NULL && *v != '\0')
    return v;
  return NULL;
}

/* NAME's value in a "malloc_env" entry ("MALLOC_ARENA_MAX=1 MALLOC_...=2",
 * as the measurement scripts write it) into buf, or NULL. */
static const char *malloc_env_lookup(record_meta_get_fn get, void *user,
                                     const char *name, char *buf, size_t len) {
  const char *env = get(user, "malloc_env");
  size_t      nl = strlen(name);
  for (const char *p = env; p != NULL && *p != '\0';) {
    p += strspn(p, " ,;");
    size_t tok = strcspn(p, " ,;");
    if (tok > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
      size_t n = tok - nl - 1 < len - 1 ? tok - nl - 1 : len - 1;
      memcpy(buf, p + nl + 1, n);
      buf[n] = '\0';
      return buf;
    }
    p += tok;
  }
  return NULL;
}

as_status_t record_libc_spec(record_meta_get_fn get, void *user, char *buf,
                             size_t len, as_err_t *err) {
  static const struct {
    const char *env;     /* mallopt environment variable */
    const char *tunable; /* GLIBC_TUNABLES name */
    const char *knob;    /* glibc model option */
  } knobs[] = {
      /* glibc 2.36 malloc/arena.c and elf/dl-tunables.list: the env
       * variables and tunables that set these four mallopt parameters. */
      {"MALLOC_ARENA_MAX", "glibc.malloc.arena_max", "arena_max"},
      {"MALLOC_MMAP_THRESHOLD_", "glibc.malloc.mmap_threshold",
       "mmap_threshold"},
      {"MALLOC_TRIM_THRESHOLD_", "glibc.malloc.trim_threshold",
       "trim_threshold"},
      {"MALLOC_TOP_PAD_", "glibc.malloc.top_pad", "top_pad"},
  };
  const char *tun = knob_lookup(get, user, "GLIBC_TUNABLES");
  size_t      used = (size_t)snprintf(buf, len, "glibc");
  bool        first = true;
  const char *ncpus = get(user, "ncpus");
  if (ncpus != NULL && *ncpus != '\0') {
    /* The machine's CPU count sets glibc's default arena limit (8 * cores,
     * glibc 2.36 malloc/arena.c arena_get2 NARENAS_FROM_NCORES). */
    char *end;
    errno = 0;
    unsigned long long n = strtoull(ncpus, &end, 10);
    if (end == ncpus || *end != '\0' || errno != 0 || n == 0)
      return as_err_set(err, AS_EINVAL,
                        "ncpus: expected a positive number, got '%s'", ncpus);
    used += (size_t)snprintf(buf + used, len > used ? len - used : 0,
                             ":ncpus=%llu", n);
    first = false;
  }
  for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
    char        tv[64];
    const char *v = knob_lookup(get, user, knobs[i].env);
    if (v == NULL)
      v = malloc_env_lookup(get, user, knobs[i].env, tv, sizeof tv);
    if (v == NULL && tun != NULL) {
      /* GLIBC_TUNABLES=a=1:b=2; later settings win, as in glibc. */
      size_t      tl = strlen(knobs[i].tunable);
      const char *p = tun;
      while ((p = strstr(p, knobs[i].tunable)) != NULL) {
        if ((p == tun || p[-1] == ':') && p[tl] == '=') {
          size_t n = strcspn(p + tl + 1, ":");
          if (n >= sizeof tv)
            n = sizeof tv - 1;
          memcpy(tv, p + tl + 1, n);
          tv[n] = '\0';
          v = tv;
        }
        p += tl;
      }
    }
    if (v == NULL)
      continue;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 0);
    if (end == v || *end != '\0' || errno != 0 || v[0] == '-')
      return as_err_set(err, AS_EINVAL,
                        "%s: expected a non-negative number, got '%s'",
                        knobs[i].env, v);
    used += (size_t)snprintf(buf + (used < len ? used : len),
                             used < len ? len - used : 0, "%s%s=%llu",
                             first ? ":" : ",", knobs[i].knob, n);
    first = false;
  }
  if (used >= len)
    return as_err_set(err, AS_EINVAL, "libc spec longer than %zu bytes", len);
  return AS_OK;
}

/* ---- Raw log conversion ------------------------------------------------- */

typedef struct chunk_s chunk_t;
struct chunk_s {
  const capture_rec_t *rec; /* first record after the chunk header */
  size_t               n;   /* records in the chunk */
  size_t               pos; /* next record to merge */
};

typedef struct tidmap_s tidmap_t;
struct tidmap_s {
  addr_ids_map_t map;     /* kernel tid -> dense thread + 1 */
  bool          *used;    /* dense ids in use */
  size_t         cap;     /* entries in used */
  addr_ids_map_t pending; /* kernel tid -> object id in a realloc, + 1 */
};

/* Dense thread id for tid: 0 for the main thread; others lowest free from 1.
 * *fresh tells whether the thread was just seen. */
static bool thread_of(tidmap_t *t, uint64_t tid, uint64_t main_tid,
                      uint32_t *out, bool *fresh) {
  uint64_t v;
  *fresh = false;
  if (addr_ids_map_get(&t->map, tid, &v)) {
    *out = (uint32_t)(v - 1);
    return true;
  }
  size_t d = 0;
  if (tid != main_tid) {
    d = 1;
    while (d < t->cap && t->used[d])
      d++;
  }
  if (d >= t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 64;
    while (cap <= d)
      cap *= 2;
    bool *u = realloc(t->used, cap * sizeof *u);
    if (u == NULL)
      return false;
    memset(u + t->cap, 0, (cap - t->cap) * sizeof *u);
    t->used = u;
    t->cap = cap;
  }
  t->used[d] = true;
  if (!addr_ids_map_put(&t->map, tid, d + 1))
    return false;
  *out = (uint32_t)d;
  *fresh = tid != main_tid;
  return true;
}

typedef struct conv_s conv_t;
struct conv_s {
  const char             *raw_path;
  trace_writer_t         *w;
  record_convert_stats_t *st;
  addr_ids_t              ids; /* address -> object id */
  tidmap_t                th;
  uint64_t                main_tid;
  uint64_t                last_t;
  const capture_rec_t    *base; /* the mapped log, for byte offsets */
};

static as_status_t conv_emit(conv_t *c, trace_event_t *ev, as_err_t *err) {
  if (ev->t_ns < c->last_t)
    ev->t_ns = c->last_t; /* clocks read after seq: keep time monotone */
  c->last_t = ev->t_ns;
  c->st->events++;
  if (is_alloc_op(ev->op))
    c->st->alloc_events++;
  return trace_writer_write(c->w, ev, err);
}

static as_status_t conv_oom(conv_t *c, as_err_t *err) {
  return as_err_set(err, AS_ENOMEM, "%s: out of memory converting",
                    c->raw_path);
}

/* A new object at address a: a live address means a free was missed. */
static as_status_t conv_new_object(conv_t *c, trace_event_t *ev, uint64_t a,
                                   as_err_t *err) {
  uint64_t old;
  if (addr_ids_remove(&c->ids, a, &old)) {
    c->st->missed_frees++;
    trace_event_t fr = *ev;
    fr.op = TRACE_FREE;
    fr.id = old;
    fr.size = 0;
    fr.align = 0;
    as_status_t rc = conv_emit(c, &fr, err);
    if (rc != AS_OK)
      return rc;
  }
  if (!addr_ids_add(&c->ids, a, &ev->id))
    return conv_oom(c, err);
  return conv_emit(c, ev, err);
}

static void label_copy(char *out, const capture_rec_t *labs, size_t n) {
  size_t len = 0;
  for (size_t i = 0; i < n && len < TRACE_LABEL_MAX; i++) {
    const unsigned char *p = (const unsigned char *)&labs[i];
    for (size_t k = 0; k < CAPTURE_LABEL_BYTES_PER_REC && len < TRACE_LABEL_MAX;
         k++) {
      if (p[k] == 0) {
        i = n;
        break;
      }
      out[len++] =
          (p[k] < 0x20 && p[k] != '\t') || p[k] == 0x7f ? '?' : (char)p[k];
    }
  }
  out[len] = '\0';
}

/* Converts one merged record with its nlabs label records (nlabs is what
 * the chunk really holds, which a damaged log may make less than extra). */
static as_status_t conv_record(conv_t *c, const capture_rec_t *r,
                               const capture_rec_t *labs, size_t nlabs,
                               as_err_t *err) {
  trace_event_t ev;
  memset(&ev, 0, sizeof ev);
  ev.t_ns = r->t_ns;
  ev.domain = r->domain < TRACE_DOMAIN_COUNT ? r->domain : TRACE_DOMAIN_RAW;
  bool        fresh = false;
  as_status_t rc;
  if (r->op == CAPTURE_OP_RSS) {
    uint64_t rss = r->a > r->b ? r->a - r->b : 0;
    if (r->b > c->st->overhead_max_bytes)
      c->st->overhead_max_bytes = r->b;
    if (rss > c->st->peak_rss_bytes)
      c->st->peak_rss_bytes = rss;
    ev.op = TRACE_RSS;
    ev.size = rss;
    ev.domain = TRACE_DOMAIN_RAW;
    return conv_emit(c, &ev, err);
  }
  if (r->op == CAPTURE_OP_MARK && (r->flags & CAPTURE_FLAG_META))
    return AS_OK; /* provenance, gathered in the first pass */
  if (!thread_of(&c->th, r->tid, c->main_tid, &ev.thread, &fresh))
    return conv_oom(c, err);
  if (fresh) {
    trace_event_t ts = ev;
    ts.op = TRACE_THREAD_START;
    ts.domain = TRACE_DOMAIN_RAW;
    c->st->threads++;
    if ((rc = conv_emit(c, &ts, err)) != AS_OK)
      return rc;
  }
  uint64_t id;
  switch (r->op) {
  case CAPTURE_OP_MALLOC:
  case CAPTURE_OP_CALLOC:
  case CAPTURE_OP_MEMALIGN:
    ev.op = r->op == CAPTURE_OP_MALLOC   ? TRACE_MALLOC
            : r->op == CAPTURE_OP_CALLOC ? TRACE_CALLOC
                                         : TRACE_MEMALIGN;
    ev.size = r->b;
    ev.align = r->op == CAPTURE_OP_MEMALIGN ? r->c : 0;
    if (ev.op == TRACE_MEMALIGN &&
        (ev.align == 0 || (ev.align & (ev.align - 1))))
      ev.align = 16; /* invalid alignments fail the call in glibc */
    return conv_new_object(c, &ev, r->a, err);
  case CAPTURE_OP_FREE:
    if (!addr_ids_remove(&c->ids, r->a, &id)) {
      c->st->unmatched_frees++;
      return AS_OK;
    }
    ev.op = TRACE_FREE;
    ev.id = id;
    return conv_emit(c, &ev, err);
  case CAPTURE_OP_REALLOC_BEGIN:
    if (addr_ids_detach(&c->ids, r->a, &id)) {
      if (!addr_ids_map_put(&c->th.pending, r->tid, id + 1))
        return conv_oom(c, err);
    }
    return AS_OK;
  case CAPTURE_OP_REALLOC: {
    uint64_t pend = 0;
    bool     known = addr_ids_map_del(&c->th.pending, r->tid, &pend);
    if (r->flags & CAPTURE_FLAG_FAILED) {
      /* The old block is untouched and still the program's. */
      if (known && !addr_ids_attach(&c->ids, r->c, pend - 1))
        return conv_oom(c, err);
      return AS_OK;
    }
    ev.size = r->b;
    if (!known) {
      c->st->unmatched_reallocs++;
      ev.op = TRACE_MALLOC;
      return conv_new_object(c, &ev, r->a, err);
    }
    ev.op = TRACE_REALLOC;
    ev.id = pend - 1;
    if (addr_ids_remove(&c->ids, r->a, &id)) {
      /* The new address was still live: its free was missed. */
      c->st->missed_frees++;
      trace_event_t fr = ev;
      fr.op = TRACE_FREE;
      fr.id = id;
      fr.size = 0;
      if ((rc = conv_emit(c, &fr, err)) != AS_OK)
        return rc;
    }
    if (!addr_ids_attach(&c->ids, r->a, ev.id))
      return conv_oom(c, err);
    return conv_emit(c, &ev, err);
  }
  case CAPTURE_OP_TRIM:
    ev.op = TRACE_TRIM;
    ev.size = r->b;
    return conv_emit(c, &ev, err);
  case CAPTURE_OP_MARK: {
    char label[TRACE_LABEL_MAX + 1];
    label_copy(label, labs, nlabs);
    ev.op = TRACE_MARK;
    ev.label = label;
    if ((rc = conv_emit(c, &ev, err)) != AS_OK)
      return rc;
    capture_rec_t rss = *r;
    rss.op = CAPTURE_OP_RSS;
    return conv_record(c, &rss, NULL, 0, err);
  }
  case CAPTURE_OP_THREAD_EXIT: {
    uint64_t v;
    if (addr_ids_map_del(&c->th.map, r->tid, &v)) {
      c->th.used[v - 1] = false;
      if (r->tid != c->main_tid) {
        ev.op = TRACE_THREAD_EXIT;
        return conv_emit(c, &ev, err);
      }
    }
    return AS_OK;
  }
  default:
    return as_err_set(
        err, AS_EFORMAT, "%s: offset %zu: expected a record op 2..12, got %u",
        c->raw_path, (size_t)(r - c->base) * sizeof(capture_rec_t), r->op);
  }
}

/* Merge heap of chunk indexes ordered by their current record's seq. */
static bool chunk_less(const chunk_t *ch, size_t a, size_t b) {
  return ch[a].rec[ch[a].pos].seq < ch[b].rec[ch[b].pos].seq;
}

static void heap_down(const chunk_t *ch, size_t *h, size_t n, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < n && chunk_less(ch, h[l], h[m]))
      m = l;
    if (r < n && chunk_less(ch, h[r], h[m]))
      m = r;
    if (m == i)
      return;
    size_t t = h[i];
    h[i] = h[m];
    h[m] = t;
    i = m;
  }
}

as_status_t record_capture_convert(const char *raw_path, const char *out_path,
                                   const trace_meta_t     *meta,
                                   record_convert_stats_t *st, as_err_t *err) {
  memset(st, 0, sizeof *st);
  as_status_t rc = AS_OK;
  chunk_t    *ch = NULL;
  size_t     *heap = NULL, nch = 0, capch = 0;
  void       *map = MAP_FAILED;
  size_t      size = 0;
  conv_t      c;
  memset(&c, 0, sizeof c);
  c.raw_path = raw_path;
  c.st = st;

  int         fd = open(raw_path, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb) != 0) {
    rc = as_err_set(err, AS_EIO, "%s: cannot open: %s", raw_path,
                    strerror(errno));
    goto done;
  }
  size = (size_t)sb.st_size;
  if (size < 2 * sizeof(capture_rec_t)) {
    rc = as_err_set(err, AS_EFORMAT,
                    "%s: offset 0: expected a capture log "
                    "header, the file has %zu bytes",
                    raw_path, size);
    goto done;
  }
  map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (map == MAP_FAILED) {
    rc = as_err_set(err, AS_EIO, "%s: cannot map: %s", raw_path,
                    strerror(errno));
    goto done;
  }
  const capture_rec_t *recs = map;
  size_t               nrec = size / sizeof(capture_rec_t);
  if (recs[0].seq != CAPTURE_CHUNK_MAGIC || recs[0].a != 1 ||
      recs[1].seq != CAPTURE_LOG_MAGIC ||
      recs[1].op != CAPTURE_OP_FILE_HEADER) {
    rc = as_err_set(err, AS_EFORMAT,
                    "%s: offset 0: not an allocsim capture "
                    "log (bad magic)",
                    raw_path);
    goto done;
  }
  st->pid = recs[1].a;
  c.main_tid = recs[1].tid;
  c.base = recs;

  /* Pass 1: index chunks, gather provenance and the baseline sample. */
  trace_meta_t tm;
  if (meta != NULL)
    tm = *meta;
  else
    memset(&tm, 0, sizeof tm);
  uint64_t first_rss_seq = UINT64_MAX, first_rss = 0;
  for (size_t i = 2; i < nrec;) {
    if (recs[i].seq != CAPTURE_CHUNK_MAGIC) {
      rc = as_err_set(err, AS_EFORMAT,
                      "%s: offset %zu: expected a chunk "
                      "header",
                      raw_path, i * sizeof(capture_rec_t));
      goto done;
    }
    size_t n = (size_t)recs[i].a;
    if (n == 0 || n > nrec - i - 1) {
      st->truncated_records += nrec - i - 1; /* the writer died mid-chunk */
      break;
    }
    if (nch == capch) {
      capch = capch ? 2 * capch : 256;
      chunk_t *v = realloc(ch, capch * sizeof *v);
      if (v == NULL) {
        rc = conv_oom(&c, err);
        goto done;
      }
      ch = v;
    }
    ch[nch++] = (chunk_t){.rec = &recs[i + 1], .n = n, .pos = 0};
    for (size_t k = i + 1; k < i + 1 + n; k++) {
      const capture_rec_t *r = &recs[k];
      if (r->op == CAPTURE_OP_LABEL)
        continue;
      if (r->op == CAPTURE_OP_MARK && (r->flags & CAPTURE_FLAG_META)) {
        char kv[TRACE_LABEL_MAX + 1];
        label_copy(kv, r + 1, k + r->extra < i + 1 + n ? r->extra : 0);
        char *eq = strchr(kv, '=');
        if (eq != NULL) {
          *eq = '\0';
          if (strcmp(kv, "python") == 0)
            as_format_fits(st->python, sizeof st->python, "%s", eq + 1);
          (void)trace_meta_set(&tm, kv, eq + 1, NULL);
        }
      }
      if ((r->op == CAPTURE_OP_RSS ||
           (r->op == CAPTURE_OP_MARK && !(r->flags & CAPTURE_FLAG_META))) &&
          r->seq < first_rss_seq) {
        first_rss_seq = r->seq;
        first_rss = r->a > r->b ? r->a - r->b : 0;
      }
    }
    i += 1 + n;
  }
  st->baseline_rss_bytes = first_rss;
  char num[32];
  as_format_fits(num, sizeof num, "%" PRIu64, st->pid);
  (void)trace_meta_set(&tm, "pid", num, NULL);
  if (first_rss_seq != UINT64_MAX) {
    as_format_fits(num, sizeof num, "%" PRIu64, first_rss);
    (void)trace_meta_set(&tm, "baseline_rss_bytes", num, NULL);
  }
  if (recs[1].c != 0 && trace_meta_get(&tm, "page_size") == NULL) {
    as_format_fits(num, sizeof num, "%" PRIu64, recs[1].c);
    (void)trace_meta_set(&tm, "page_size", num, NULL);
  }

  if ((rc = trace_writer_open(out_path, trace_format_from_path(out_path), &tm,
                              &c.w, err)) != AS_OK)
    goto done;

  /* Pass 2: k-way merge of the chunks by seq. */
  heap = malloc((nch ? nch : 1) * sizeof *heap);
  if (heap == NULL) {
    rc = conv_oom(&c, err);
    goto done;
  }
  size_t nh = 0;
  for (size_t i = 0; i < nch; i++)
    heap[nh++] = i;
  for (size_t i = nh / 2; i-- > 0;)
    heap_down(ch, heap, nh, i);
  while (nh > 0) {
    chunk_t             *k = &ch[heap[0]];
    const capture_rec_t *r = &k->rec[k->pos];
    size_t               nl = r->op == CAPTURE_OP_MARK ? r->extra : 0;
    if (k->pos + 1 + nl > k->n)
      nl = k->n - k->pos - 1;
    if (r->op != CAPTURE_OP_LABEL &&
        (rc = conv_record(&c, r, r + 1, nl, err)) != AS_OK)
      goto done;
    k->pos += 1 + nl;
    if (k->pos >= k->n)
      heap[0] = heap[--nh];
    heap_down(ch, heap, nh, 0);
  }
  st->max_live_ids = c.ids.peak;
  rc = trace_writer_close(c.w, err);
  c.w = NULL;

done:
  if (c.w != NULL) {
    /* A half-written trace would look like a short capture: remove it. */
    as_err_t ignore;
    trace_writer_close(c.w, &ignore);
    if (strcmp(out_path, "-") != 0)
      unlink(out_path);
  }
  if (map != MAP_FAILED)
    munmap(map, size);
  if (fd >= 0)
    close(fd);
  free(ch);
  free(heap);
  addr_ids_free(&c.ids);
  addr_ids_map_free(&c.th.map);
  addr_ids_map_free(&c.th.pending);
  free(c.th.used);
  return rc;
}

/* ---- Running a capture -------------------------------------------------- */

bool record_env_knob(const char *name) {
  static const char *const prefixes[] = {"MALLOC_", "MIMALLOC_", NULL};
  static const char *const exact[] = {
      "GLIBC_TUNABLES", "LD_PRELOAD",     "MALLOC_CONF", "PYTHONMALLOC",
      "PYTHONHASHSEED", "JE_MALLOC_CONF", NULL};
  for (size_t i = 0; exact[i] != NULL; i++)
    if (strcmp(name, exact[i]) == 0)
      return true;
  for (size_t i = 0; prefixes[i] != NULL; i++)
    if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
      return true;
  return false;
}

static bool readable(const char *p) {
  return access(p, R_OK) == 0;
}

as_status_t record_capture_find_lib(char *buf, size_t len, as_err_t *err) {
  const char *env = getenv("ALLOCSIM_CAPTURE_LIB");
  if (env != NULL && *env != '\0') {
    if (!readable(env))
      return as_err_set(err, AS_EINVAL,
                        "ALLOCSIM_CAPTURE_LIB=%s: no such readable file", env);
    as_format_fits(buf, len, "%s", env);
    return AS_OK;
  }
  char    exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL) {
      *slash = '\0';
      static const char *const rel[] = {
          "/liballocsim_capture.so", "/../lib/liballocsim_capture.so",
          "/../../traces/capture/liballocsim_capture.so", NULL};
      for (size_t i = 0; rel[i] != NULL; i++) {
        as_format_fits(buf, len, "%s%s", exe, rel[i]);
        if (readable(buf))
          return AS_OK;
      }
    }
  }
#ifdef ALLOCSIM_CAPTURE_BUILD_LIB
  if (readable(ALLOCSIM_CAPTURE_BUILD_LIB)) {
    as_format_fits(buf, len, "%s", ALLOCSIM_CAPTURE_BUILD_LIB);
    return AS_OK;
  }
#endif
  buf[0] = '\0';
  return as_err_set(err, AS_EINVAL,
                    "cannot find liballocsim_capture.so: set "
                    "ALLOCSIM_CAPTURE_LIB, or install it next to allocsim");
}

/* The directory holding sitecustomize.py: next to the library (the build
 * copies it to LIBDIR/python), else the source tree. */
static void python_dir(const char *lib, char *buf, size_t len) {
  as_format_fits(buf, len, "%s", lib);
  char *slash = strrchr(buf, '/');
  if (slash != NULL) {
    as_format_fits(slash, len - (size_t)(slash - buf), "/python");
    char probe[PATH_MAX];
    as_format_fits(probe, sizeof probe, "%s/sitecustomize.py", buf);
    if (readable(probe))
      return;
  }
#ifdef ALLOCSIM_CAPTURE_PY_DIR
  as_format_fits(buf, len, "%s", ALLOCSIM_CAPTURE_PY_DIR);
#else
  buf[0] = '\0';
#endif
}

/* OUT.PID[.N].EXT for a secondary process's trace. */
static void secondary_path(const char *out, uint64_t pid, unsigned gen,
                           char *buf, size_t len) {
  const char *slash = strrchr(out, '/');
  const char *dot = strrchr(out, '.');
  if (dot == NULL || (slash != NULL && dot < slash) || dot == out)
    dot = out + strlen(out);
  char tail[32];
  if (gen == 0)
    as_format_fits(tail, sizeof tail, ".%" PRIu64, pid);
  else
    as_format_fits(tail, sizeof tail, ".%" PRIu64 ".%u", pid, gen);
  as_format_fits(buf, len, "%.*s%s%s", (int)(dot - out), out, tail, dot);
}

static void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  char           p[PATH_MAX];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    as_format_fits(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

/* Sets provenance k=v, made writable in the text format: control bytes
 * (a `python -c` script's newlines) become spaces, surrounding spaces go,
 * and the value is cut at 255 bytes. */
static void meta_put(trace_meta_t *m, const char *k, const char *v) {
  char key[32];
  char val[256];
  as_format_fits(key, sizeof key, "%s", k);
  as_format_fits(val, sizeof val, "%s", v);
  for (char *p = val; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      *p = ' ';
  size_t n = strlen(val);
  while (n > 0 && val[n - 1] == ' ')
    val[--n] = '\0';
  size_t lead = strspn(val, " ");
  (void)trace_meta_set(m, key, val + lead, NULL);
}

/* Joins argv with spaces, quoting arguments that need it. */
static void join_argv(char *const *argv, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; argv[i] != NULL && used < len; i++) {
    bool quote = argv[i][0] == '\0' || strpbrk(argv[i], " \t\"'\\$") != NULL;
    used += (size_t)snprintf(buf + used, len - used, "%s%s%s%s", i ? " " : "",
                             quote ? "'" : "", argv[i], quote ? "'" : "");
  }
}

as_status_t record_capture_run(const record_capture_opts_t *o,
                               record_capture_result_t *res, as_err_t *err) {
  memset(res, 0, sizeof *res);
  if (o->argv == NULL || o->argv[0] == NULL)
    return as_err_set(err, AS_EUSAGE, "no command to capture");
  char        lib[PATH_MAX];
  as_status_t rc;
  if (o->lib_path != NULL)
    as_format_fits(lib, sizeof lib, "%s", o->lib_path);
  else if ((rc = record_capture_find_lib(lib, sizeof lib, err)) != AS_OK)
    return rc;
  if (!readable(lib))
    return as_err_set(err, AS_EINVAL, "%s: capture library not readable", lib);
  char abs_lib[PATH_MAX];
  if (realpath(lib, abs_lib) == NULL)
    as_format_fits(abs_lib, sizeof abs_lib, "%s", lib);

  const char *tmp = getenv("TMPDIR");
  char        dir[256];
  as_format_fits(dir, sizeof dir, "%s/allocsim-capture-XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(dir) == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot create: %s", dir,
                      strerror(errno));

  /* Environment: ours plus the capture settings. */
  size_t nenv = 0;
  while (environ[nenv] != NULL)
    nenv++;
  char **envp = calloc(nenv + 8, sizeof *envp);
  char   e_pre[PATH_MAX * 2], e_dir[300], e_ns[64], e_py[PATH_MAX * 2];
  char   pydir[PATH_MAX];
  if (envp == NULL) {
    rm_tree(dir);
    return as_err_set(err, AS_ENOMEM, "out of memory");
  }
  const char *old_pre = getenv("LD_PRELOAD");
  const char *old_py = getenv("PYTHONPATH");
  python_dir(abs_lib, pydir, sizeof pydir);
  /* The capture library goes first so that RTLD_NEXT finds a preloaded
   * allocator (jemalloc, mimalloc) rather than bypassing it. */
  as_format_fits(e_pre, sizeof e_pre, "LD_PRELOAD=%s%s%s", abs_lib,
           old_pre && *old_pre ? " " : "", old_pre ? old_pre : "");
  as_format_fits(e_dir, sizeof e_dir, "ALLOCSIM_CAPTURE_DIR=%s", dir);
  as_format_fits(e_ns, sizeof e_ns, "ALLOCSIM_CAPTURE_SAMPLE_NS=%" PRIu64,
           o->sample_every_ns);
  as_format_fits(e_py, sizeof e_py, "PYTHONPATH=%s%s%s", pydir,
           old_py && *old_py ? ":" : "", old_py ? old_py : "");
  size_t k = 0;
  for (size_t i = 0; i < nenv; i++)
    if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0 &&
        strncmp(environ[i], "PYTHONPATH=", 11) != 0 &&
        strncmp(environ[i], "ALLOCSIM_CAPTURE_", 17) != 0)
      envp[k++] = environ[i];
  envp[k++] = e_pre;
  envp[k++] = e_dir;
  envp[k++] = e_ns;
  if (pydir[0] != '\0')
    envp[k++] = e_py;
  envp[k] = NULL;

  /* Provenance. */
  trace_meta_t  *m = &res->meta;
  struct utsname u;
  char           buf[1024];
  join_argv(o->argv, buf, sizeof buf);
  meta_put(m, "kind", "measured");
  meta_put(m, "source", "allocsim capture");
  meta_put(m, "command", buf);
  if (uname(&u) == 0) {
    as_format_fits(buf, sizeof buf, "%s %s", u.nodename, u.machine);
    meta_put(m, "machine", buf);
    meta_put(m, "kernel", u.release);
  }
  as_format_fits(buf, sizeof buf, "%ld", sysconf(_SC_PAGESIZE));
  meta_put(m, "page_size", buf);
  as_format_fits(buf, sizeof buf, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
  meta_put(m, "ncpus", buf);
  as_format_fits(buf, sizeof buf, "glibc %s", gnu_get_libc_version());
  meta_put(m, "libc", buf);
  as_format_fits(buf, sizeof buf, "%" PRIu64, o->sample_every_ns);
  meta_put(m, "sample_every_ns", buf);
  meta_put(m, "rss_source",
           "/proc/self/smaps_rollup Rss minus capture "
           "library's own resident bytes");
  for (size_t i = 0; i < nenv; i++) {
    const char *eq = strchr(environ[i], '=');
    if (eq == NULL || (size_t)(eq - environ[i]) > 24)
      continue;
    char name[32];
    as_format_fits(name, sizeof name, "%.*s", (int)(eq - environ[i]), environ[i]);
    if (!record_env_knob(name))
      continue;
    char key[40];
    as_format_fits(key, sizeof key, "env.%s", name);
    meta_put(m, key, eq + 1);
  }

  /* Run. */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid;
  int   serr = posix_spawnp(&pid, o->argv[0], NULL, NULL, o->argv, envp);
  free(envp);
  if (serr != 0) {
    rm_tree(dir);
    return as_err_set(err, AS_EINVAL, "%s: cannot run: %s", o->argv[0],
                      strerror(serr));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  res->wall_s =
      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  res->exit_code = WIFEXITED(status)     ? WEXITSTATUS(status)
                   : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                         : 1;
  as_format_fits(buf, sizeof buf, "%d", res->exit_code);
  meta_put(m, "exit_code", buf);

  /* Convert: the command's own log first, then the others.  The command's
   * process is its pid's last image: a wrapper (shell script, pyenv shim)
   * that execs the real program leaves raw.PID.0 .. raw.PID.N behind. */
  char     main_raw[PATH_MAX];
  unsigned main_gen = 0;
  for (unsigned g = 0; g < 256; g++) {
    as_format_fits(main_raw, sizeof main_raw, "%s/raw.%d.%u", dir, (int)pid, g);
    if (!readable(main_raw))
      break;
    main_gen = g;
  }
  as_format_fits(main_raw, sizeof main_raw, "%s/raw.%d.%u", dir, (int)pid, main_gen);
  if (!readable(main_raw)) {
    rc = as_err_set(err, AS_EINVAL,
                    "%s: the command wrote no capture log (a static or "
                    "setuid binary ignores LD_PRELOAD; a script's "
                    "interpreter must be dynamic)",
                    o->argv[0]);
    goto out;
  }
  if ((rc = record_capture_convert(main_raw, o->out_path, m, &res->main,
                                   err)) != AS_OK)
    goto out;
  if (res->main.python[0] != '\0')
    meta_put(m, "python", res->main.python);

  DIR *d = opendir(dir);
  if (d != NULL) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL && rc == AS_OK) {
      unsigned long long p = 0;
      unsigned           gen = 0;
      if (sscanf(e->d_name, "raw.%llu.%u", &p, &gen) != 2 ||
          (p == (unsigned long long)pid && gen == main_gen))
        continue;
      if (res->nextra == RECORD_CAPTURE_MAX_EXTRA) {
        res->nskipped++; /* counted and reported, not converted */
        continue;
      }
      char raw[PATH_MAX];
      as_format_fits(raw, sizeof raw, "%s/%s", dir, e->d_name);
      size_t x = res->nextra++;
      secondary_path(o->out_path, p, gen, res->extra_path[x],
                     sizeof res->extra_path[x]);
      trace_meta_t sm = *m;
      meta_put(&sm, "parent_trace", o->out_path);
      rc = record_capture_convert(raw, res->extra_path[x], &sm, &res->extra[x],
                                  err);
    }
    closedir(d);
  }

out:
  if (o->keep_raw)
    as_format_fits(res->raw_dir, sizeof res->raw_dir, "%s", dir);
  else
    rm_tree(dir);
  return rc;
}
