/* scripts/measure/alloc_phases.c -- a C program that records its own
 * allocation trace and measured RSS, for any libc and any preloaded
 * allocator: glibc, gperftools tcmalloc (LD_PRELOAD), musl (built with
 * musl-gcc, where liballocsim_capture.so cannot be preloaded).
 *
 *   alloc_phases burst --out FILE [--count N] [--keep-every K] [--seed S]
 *                      [--idle-ms T] [--rounds R] [COMMON]
 *   alloc_phases churn --out FILE [--count N] [COMMON]
 *   alloc_phases bounce --out FILE [--count N] [--size B] [COMMON]
 *   COMMON: [--sample-ms P] [--props FILE] [--note KEY=VALUE]...
 *
 * burst: COUNT objects whose sizes come from splitmix64 (90% 16-1024 bytes,
 *   9% 1025-16384, 1% 16385-524288; every byte written), then all but every
 *   KEEP-th freed in allocation order, then IDLE milliseconds of sleep, then
 *   the allocator's release call, then the survivors freed.  Marks: start,
 *   peak, after_free, after_idle, after_release, end.  With --rounds R the
 *   burst and free repeat R times with the next COUNT sizes of the sequence,
 *   each round freeing the previous round's survivors after its own free
 *   (mark after_rounds): R * (peak - survivors) bytes pass through free,
 *   enough to reach tcmalloc's first incremental scavenge (2 GiB of pages).
 * churn: the capture test program's sequence (tests/integration/
 *   capture_progs/churn.c): COUNT blocks of 16 + (i*37 mod 2049) bytes,
 *   every 100th kept, the rest freed, the release call, survivors freed.
 *   Marks: start, peak, after_free, after_release, end.
 * bounce: one block of SIZE bytes allocated, written and freed COUNT times
 *   (musl mallocng's bounce counter: a class whose groups are mmapped and
 *   unmapped back to back).  Marks: start, end.
 *
 * The release call: MallocExtension_ReleaseFreeMemory() when the process
 * runs tcmalloc (trace op `purge all`), else malloc_trim(0) when the libc
 * has it (glibc; trace op `trim 0`), else nothing (musl has no trim).
 * Both are looked up with dlsym, so one source builds for every libc; a
 * musl build never calls dlsym, whose failed lookups malloc their error
 * message there.
 *
 * Measured RSS is Rss from /proc/self/smaps_rollup (exact: it walks the page
 * tables), read at every mark and every SAMPLE milliseconds (checked every
 * 256 operations while allocating or freeing, after every sleep step while
 * idle), minus the resident bytes of this program's own mmapped buffers
 * (event records and the object table, counted with mincore), as
 * liballocsim_capture.so subtracts its own.  Nothing here calls malloc but
 * the workload: RSS is read with open/read into a static buffer, events go
 * to an mmapped array, and the trace is formatted by hand and written with
 * write(2) at the end.
 *
 * Output: an allocsim text trace (docs/trace-format.md) with `#@`
 * provenance (kind=measured, the command, machine, kernel, page size, libc,
 * allocator, env.LD_PRELOAD, the TCMALLOC_* and MALLOC_* variables as
 * malloc_env, each --note as
 * a key of its own: the runner records what the program cannot know, such
 * as musl's version), every event the
 * workload made (thread 0, object id = index in its table), idle stretches,
 * marks and rss samples.  With --props, under tcmalloc, a tab-separated file
 * of MallocExtension numeric properties at every mark.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <gnu/libc-version.h>
#else
#include <link.h>
#endif

extern char **environ;

/* ---- Output without malloc -------------------------------------------- */

typedef struct outbuf_s {
  char  *p;
  size_t len, cap;
} outbuf_t;

static void die(const char *msg) {
  (void)!write(2, "alloc_phases: ", 14);
  (void)!write(2, msg, strlen(msg));
  (void)!write(2, "\n", 1);
  _exit(1);
}

static void *map_bytes(size_t n) {
  void *p =
      mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    die("mmap failed");
  return p;
}

static void out_str(outbuf_t *o, const char *s) {
  size_t n = strlen(s);
  if (o->len + n > o->cap)
    die("output buffer full");
  memcpy(o->p + o->len, s, n);
  o->len += n;
}

static void out_u64(outbuf_t *o, uint64_t v) {
  char  tmp[24];
  char *e = tmp + sizeof tmp, *q = e;
  *--q = '\0';
  do
    *--q = (char)('0' + v % 10);
  while ((v /= 10) != 0);
  out_str(o, q);
}

static void out_write(const outbuf_t *o, const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    die("cannot create the output file");
  for (size_t off = 0; off < o->len;) {
    ssize_t n = write(fd, o->p + off, o->len - off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      die("write failed");
    off += (size_t)n;
  }
  close(fd);
}

/* ---- Clock and RSS ---------------------------------------------------- */

static uint64_t t0_ns;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec - t0_ns;
}

static uint64_t smaps_rss_bytes(void) {
  static char buf[4096];
  int         fd = open("/proc/self/smaps_rollup", O_RDONLY);
  if (fd < 0)
    die("cannot open /proc/self/smaps_rollup");
  ssize_t n, len = 0;
  while ((n = read(fd, buf + len, sizeof buf - 1 - (size_t)len)) > 0)
    len += n;
  close(fd);
  buf[len] = '\0';
  const char *p = strstr(buf, "\nRss:");
  if (p == NULL)
    die("no Rss: line in /proc/self/smaps_rollup");
  uint64_t kb = 0;
  for (p += 5; *p == ' ' || *p == '\t'; p++)
    ;
  for (; *p >= '0' && *p <= '9'; p++)
    kb = kb * 10 + (uint64_t)(*p - '0');
  return kb * 1024;
}

/* Resident bytes of [p, p+len): this program's own buffers. */
static uint64_t resident_bytes(void *p, size_t len) {
  static unsigned char vec[1 << 16];
  size_t   pg = (size_t)sysconf(_SC_PAGESIZE), pages = (len + pg - 1) / pg;
  uint64_t total = 0;
  for (size_t first = 0; first < pages; first += sizeof vec) {
    size_t n = pages - first < sizeof vec ? pages - first : sizeof vec;
    if (mincore((char *)p + first * pg, n * pg, vec) != 0)
      die("mincore failed");
    for (size_t i = 0; i < n; i++)
      total += (vec[i] & 1) ? pg : 0;
  }
  return total;
}

/* The initial program break, field 47 of /proc/self/stat (proc(5)): ASLR
 * places it, and where a heap starts decides, for tcmalloc, how many 2 GiB
 * stretches of address space (each a 2 MiB pagemap leaf) it touches. */
static uint64_t start_brk(void) {
  static char buf[4096];
  int         fd = open("/proc/self/stat", O_RDONLY);
  ssize_t     n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
  if (fd >= 0)
    close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  for (int field = 2; p != NULL && field < 47; field++)
    p = strchr(p + 1, ' ');
  return p != NULL ? strtoull(p + 1, NULL, 10) : 0;
}

/* ---- Event records ---------------------------------------------------- */

enum op_e {
  OP_MALLOC,
  OP_CALLOC,
  OP_FREE,
  OP_MARK,
  OP_RSS,
  OP_IDLE,
  OP_TRIM,
  OP_PURGE
};

typedef struct rec_s {
  uint64_t t_ns;
  uint64_t id;   /* object id; mark: index into labels */
  uint64_t size; /* bytes; rss: bytes; idle: ns */
  uint32_t op;
  uint32_t pad;
} rec_t;

#define MAX_RECS  (UINT64_C(8) << 20)
#define MAX_MARKS 16
#define MAX_NOTES 8
static const char *notes[MAX_NOTES];
static int         nnotes;
static rec_t      *recs;
static uint64_t    nrecs;
static const char *labels[MAX_MARKS];
static int         nlabels;
static void      **objs; /* object table, mmapped */
static size_t      objs_bytes;
static uint64_t    overhead_max;
static uint64_t    sample_every_ns = 100000000u;
static uint64_t    last_sample_ns;

static rec_t *push(uint32_t op, uint64_t id, uint64_t size) {
  if (nrecs == MAX_RECS)
    die("too many events");
  rec_t *r = &recs[nrecs++];
  r->t_ns = now_ns();
  r->op = op;
  r->id = id;
  r->size = size;
  return r;
}

/* Measured RSS minus this program's buffers, as an rss record at time t. */
static void sample_at(uint64_t t) {
  uint64_t own = resident_bytes(recs, MAX_RECS * sizeof *recs) +
                 resident_bytes(objs, objs_bytes);
  if (own > overhead_max)
    overhead_max = own;
  rec_t *r = push(OP_RSS, 0, smaps_rss_bytes() - own);
  r->t_ns = t;
  last_sample_ns = t;
}

static void mark(const char *label) {
  if (nlabels == MAX_MARKS)
    die("too many marks");
  labels[nlabels] = label;
  rec_t *r = push(OP_MARK, (uint64_t)nlabels++, 0);
  sample_at(r->t_ns);
}

/* Called every operation: a series sample every sample_every_ns. */
static void maybe_sample(uint64_t op_count) {
  if ((op_count & 255) == 0) {
    uint64_t t = now_ns();
    if (t - last_sample_ns >= sample_every_ns)
      sample_at(t);
  }
}

static void *do_malloc(uint64_t id, size_t size) {
  void *p = malloc(size);
  if (p == NULL)
    die("malloc failed");
  push(OP_MALLOC, id, size);
  memset(p, (int)(id & 0xff) | 1, size);
  return p;
}

static void do_free(uint64_t id, void *p) {
  push(OP_FREE, id, 0);
  free(p);
}

static void idle_ms(uint64_t ms) {
  uint64_t end = now_ns() + ms * 1000000u;
  for (;;) {
    uint64_t t = now_ns();
    if (t >= end)
      break;
    uint64_t step = end - t < sample_every_ns ? end - t : sample_every_ns;
    struct timespec ts = {(time_t)(step / 1000000000u),
                          (long)(step % 1000000000u)};
    nanosleep(&ts, NULL);
    uint64_t after = now_ns();
    push(OP_IDLE, 0, after - t)->t_ns = t;
    sample_at(after);
  }
}

/* ---- The allocator's own interfaces (dlsym: any libc) ------------------ */

typedef int (*getprop_fn)(const char *, size_t *);
static getprop_fn        tc_getprop;
static const char *const tc_props[] = {"generic.current_allocated_bytes",
                                       "generic.heap_size",
                                       "generic.total_physical_bytes",
                                       "tcmalloc.pageheap_free_bytes",
                                       "tcmalloc.pageheap_unmapped_bytes",
                                       "tcmalloc.thread_cache_free_bytes",
                                       "tcmalloc.central_cache_free_bytes",
                                       "tcmalloc.transfer_cache_free_bytes",
                                       "tcmalloc.pageheap_scavenge_count",
                                       "tcmalloc.pageheap_total_decommit_bytes",
                                       NULL};
static outbuf_t          props_out;

static void props_row(const char *label) {
  if (tc_getprop == NULL || props_out.p == NULL)
    return;
  out_str(&props_out, label);
  for (int i = 0; tc_props[i] != NULL; i++) {
    size_t v = 0;
    tc_getprop(tc_props[i], &v);
    out_str(&props_out, "\t");
    out_u64(&props_out, v);
  }
  out_str(&props_out, "\n");
}

static void phase(const char *label) {
  mark(label);
  props_row(label);
}

/* The allocator's release call, recorded as the trace op it is. */
static void release(void) {
#ifdef __GLIBC__
  void (*tc_release)(void) =
      (void (*)(void))dlsym(RTLD_DEFAULT, "MallocExtension_ReleaseFreeMemory");
  int (*trim)(size_t) = (int (*)(size_t))dlsym(RTLD_DEFAULT, "malloc_trim");
  if (tc_release != NULL) {
    push(OP_PURGE, 0, 0);
    tc_release();
  } else if (trim != NULL) {
    push(OP_TRIM, 0, 0);
    trim(0);
  }
#endif
  /* musl: no malloc_trim, and no dlsym either: a failed lookup mallocs its
   * error message (musl 1.2.3 src/ldso/dlerror.c:42-67). */
}

/* ---- Workloads ---------------------------------------------------------- */

static uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
  z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
  return z ^ (z >> 31);
}

/* Object i's size in the burst: splitmix64 output i of the seed. */
static size_t burst_size(uint64_t seed, uint64_t i) {
  uint64_t z = mix64(seed + (i + 1) * UINT64_C(0x9E3779B97F4A7C15));
  uint64_t r = z % 100, v = z >> 8;
  if (r < 90)
    return 16 + (size_t)(v % 1009);
  if (r < 99)
    return 1025 + (size_t)(v % 15360);
  return 16385 + (size_t)(v % (524288 - 16384));
}

typedef struct args_s {
  const char *mode, *out, *props;
  uint64_t    count, keep_every, seed, idle_ms, size, rounds;
} args_t;

static void run_burst(const args_t *a) {
  uint64_t ops = 0, n = a->count;
  phase("start");
  for (uint64_t r = 0; r < a->rounds; r++) {
    uint64_t base = (r % 2) * n; /* two halves of the table: this round's
                                    burst and the last round's survivors */
    for (uint64_t i = 0; i < n; i++, ops++) {
      objs[base + i] = do_malloc(base + i, burst_size(a->seed, r * n + i));
      maybe_sample(ops);
    }
    if (r == 0)
      phase("peak");
    for (uint64_t i = 0; i < n; i++, ops++)
      if (i % a->keep_every != 0) {
        do_free(base + i, objs[base + i]);
        maybe_sample(ops);
      }
    if (r > 0) /* the previous round's survivors */
      for (uint64_t i = 0; i < n; i += a->keep_every)
        do_free((n - base) + i, objs[(n - base) + i]);
    if (r == 0)
      phase("after_free");
  }
  if (a->rounds > 1)
    phase("after_rounds");
  idle_ms(a->idle_ms);
  phase("after_idle");
  release();
  phase("after_release");
  uint64_t base = ((a->rounds - 1) % 2) * n;
  for (uint64_t i = 0; i < n; i += a->keep_every)
    do_free(base + i, objs[base + i]);
  phase("end");
}

static void run_churn(const args_t *a) {
  uint64_t ops = 0;
  phase("start");
  for (uint64_t i = 0; i < a->count; i++, ops++) {
    objs[i] = do_malloc(i, 16 + (size_t)(i * 37 % 2049));
    maybe_sample(ops);
  }
  phase("peak");
  for (uint64_t i = 0; i < a->count; i++, ops++)
    if (i % 100 != 0) {
      do_free(i, objs[i]);
      maybe_sample(ops);
    }
  phase("after_free");
  release();
  phase("after_release");
  for (uint64_t i = 0; i < a->count; i += 100)
    do_free(i, objs[i]);
  phase("end");
}

static void run_bounce(const args_t *a) {
  phase("start");
  for (uint64_t i = 0; i < a->count; i++) {
    do_free(0, do_malloc(0, a->size));
    maybe_sample(i);
  }
  phase("end");
}

/* ---- Trace output ---------------------------------------------------- */

static void meta(outbuf_t *o, const char *key, const char *value) {
  out_str(o, "#@ ");
  out_str(o, key);
  out_str(o, "=");
  out_str(o, value);
  out_str(o, "\n");
}

static void meta_u64(outbuf_t *o, const char *key, uint64_t v) {
  out_str(o, "#@ ");
  out_str(o, key);
  out_str(o, "=");
  out_u64(o, v);
  out_str(o, "\n");
}

#ifndef __GLIBC__
/* musl's dynamic linker donates the partial pages before and after every
 * RW PT_LOAD (minus RELRO) of the program and of libc.so to mallocng (musl
 * 1.2.3 ldso/dynlink.c:541-562, 1886-1887; src/malloc/mallocng/donate.c):
 * the heap then starts with single-slot groups there.  Static programs
 * donate nothing.  This records each gap's bytes after the 16-byte
 * alignment donate() applies, as musl_gap_{program,libc}_{head,tail}, so a
 * replay can start from the same heap (the musl model's options). */
typedef struct gaps_s {
  uint64_t bytes[2][2]; /* [object][head, tail] */
  int      obj, dynamic;
} gaps_t;

static uint64_t gap(uintptr_t a, uintptr_t b, uintptr_t rs, uintptr_t re) {
  if (a >= rs && a < re)
    a = re;
  if (b >= rs && b < re)
    b = rs;
  a += -a & 15;
  b -= b & 15;
  return a < b ? b - a : 0;
}

static int gaps_of(struct dl_phdr_info *info, size_t size, void *arg) {
  gaps_t   *g = arg;
  uintptr_t rs = 0, re = 0;
  int       rw = 0;
  (void)size;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_INTERP)
      g->dynamic = 1;
    if (ph->p_type == PT_GNU_RELRO) {
      rs = ph->p_vaddr & -(uintptr_t)4096;
      re = (ph->p_vaddr + ph->p_memsz) & -(uintptr_t)4096;
    }
  }
  if (!g->dynamic)
    return 1; /* a static program: nothing is donated */
  for (int i = 0; i < info->dlpi_phnum && g->obj < 2; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || (ph->p_flags & (PF_R | PF_W)) != (PF_R | PF_W))
      continue;
    uintptr_t end = ph->p_vaddr + ph->p_memsz;
    g->bytes[g->obj][0] +=
        gap(ph->p_vaddr & -(uintptr_t)4096, ph->p_vaddr, rs, re);
    g->bytes[g->obj][1] += gap(end, (end + 4095) & -(uintptr_t)4096, rs, re);
    rw = 1;
  }
  g->obj += rw; /* the program, then libc.so (the vdso has no RW load) */
  return 0;
}

static void meta_u64(outbuf_t *o, const char *key, uint64_t v);

/* The gaps, and the model spec that starts from them (a spec in `model`
 * is taken as it is, so the gaps are spelled out in it too). */
static void meta_donated_gaps(outbuf_t *o) {
  static const char *const names[2][2] = {
      {"gap_program_head", "gap_program_tail"},
      {"gap_libc_head", "gap_libc_tail"}};
  gaps_t g = {{{0}}, 0, 0};
  dl_iterate_phdr(gaps_of, &g);
  out_str(o, "#@ model=musl");
  for (int k = 0; k < 4; k++) {
    out_str(o, k ? "," : ":");
    out_str(o, names[k / 2][k % 2]);
    out_str(o, "=");
    out_u64(o, g.bytes[k / 2][k % 2]);
  }
  out_str(o, "\n");
  for (int k = 0; k < 4; k++) {
    char key[40] = "musl_";
    strcat(key, names[k / 2][k % 2]);
    meta_u64(o, key, g.bytes[k / 2][k % 2]);
  }
}
#endif

static const char *libc_name(void) {
#ifdef __GLIBC__
  static char buf[64];
  strcpy(buf, "glibc-");
  strncat(buf, gnu_get_libc_version(), sizeof buf - 8);
  return buf;
#else
  return "musl"; /* musl has no version API; the runner records it */
#endif
}

static void write_trace(const args_t *a, int argc, char **argv) {
  outbuf_t       o = {map_bytes(512u << 20), 0, 512u << 20};
  struct utsname u;
  uname(&u);
  out_str(&o, "allocsim-trace 1\n");
  meta(&o, "kind", "measured");
  /* The command as a rerun needs it, within the 255 bytes a provenance
   * value may have: the program's base name, and neither the notes (keys
   * of their own) nor the props file. */
  char   cmd[256];
  size_t used = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (i == 0 && strrchr(a, '/') != NULL)
      a = strrchr(a, '/') + 1;
    if (i > 0 && (strcmp(a, "--note") == 0 || strcmp(a, "--props") == 0)) {
      i++;
      continue;
    }
    size_t n = strlen(a);
    if (used + n + 2 > sizeof cmd)
      die("command line longer than a provenance value (255 bytes)");
    if (used > 0)
      cmd[used++] = ' ';
    memcpy(cmd + used, a, n);
    used += n;
  }
  cmd[used] = '\0';
  meta(&o, "command", cmd);
  meta(&o, "program", a->mode);
  out_str(&o, "#@ machine=");
  out_str(&o, u.nodename);
  out_str(&o, " ");
  out_str(&o, u.machine);
  out_str(&o, ", ");
  out_u64(&o, (uint64_t)sysconf(_SC_NPROCESSORS_ONLN));
  out_str(&o, " cpus\n");
  meta(&o, "kernel", u.release);
  meta_u64(&o, "page_size", (uint64_t)sysconf(_SC_PAGESIZE));
  meta_u64(&o, "start_brk", start_brk());
  meta(&o, "libc", libc_name());
  meta(&o, "allocator",
       tc_getprop != NULL ? "tcmalloc"
#ifdef __GLIBC__
                          : "glibc");
#else
                          : "musl");
#endif
#ifndef __GLIBC__
  meta_donated_gaps(&o);
#endif
  /* LD_PRELOAD as env.LD_PRELOAD; the allocator's variables together in
   * malloc_env ("NAME=V NAME=V", as spike.py writes it): provenance keys
   * stop at 31 bytes, and TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES is longer. */
  out_str(&o, "#@ malloc_env=");
  int nenv = 0;
  for (char **e = environ; *e != NULL; e++)
    if (strncmp(*e, "TCMALLOC_", 9) == 0 || strncmp(*e, "MALLOC_", 7) == 0) {
      out_str(&o, nenv++ ? " " : "");
      out_str(&o, *e);
    }
  out_str(&o, nenv ? "\n" : "(none)\n");
  for (char **e = environ; *e != NULL; e++)
    if (strncmp(*e, "LD_PRELOAD=", 11) == 0) {
      out_str(&o, "#@ env.");
      out_str(&o, *e);
      out_str(&o, "\n");
    }
  for (int i = 0; i < nnotes; i++) {
    out_str(&o, "#@ ");
    out_str(&o, notes[i]);
    out_str(&o, "\n");
  }
  meta(&o, "rss_source", "/proc/self/smaps_rollup Rss minus own buffers");
  meta_u64(&o, "sample_every_ns", sample_every_ns);
  meta_u64(&o, "own_buffers_max_bytes", overhead_max);
  for (uint64_t i = 0; i < nrecs; i++) {
    const rec_t *r = &recs[i];
    out_u64(&o, r->t_ns);
    out_str(&o, " 0 ");
    switch (r->op) {
    case OP_MALLOC:
    case OP_CALLOC:
      out_str(&o, r->op == OP_MALLOC ? "malloc " : "calloc ");
      out_u64(&o, r->id);
      out_str(&o, " ");
      out_u64(&o, r->size);
      break;
    case OP_FREE:
      out_str(&o, "free ");
      out_u64(&o, r->id);
      break;
    case OP_MARK:
      out_str(&o, "mark ");
      out_str(&o, labels[r->id]);
      break;
    case OP_RSS:
      out_str(&o, "rss ");
      out_u64(&o, r->size);
      break;
    case OP_IDLE:
      out_str(&o, "idle ");
      out_u64(&o, r->size);
      break;
    case OP_TRIM:
      out_str(&o, "trim 0");
      break;
    case OP_PURGE:
      out_str(&o, "purge all");
      break;
    }
    out_str(&o, "\n");
  }
  out_write(&o, a->out);
}

/* ---- Main --------------------------------------------------------------- */

static uint64_t num_arg(const char *s) {
  char    *end;
  uint64_t v = strtoull(s, &end, 10);
  if (*s == '\0' || *end != '\0')
    die("expected a number");
  return v;
}

static void usage(void) {
  static const char msg[] =
      "usage: alloc_phases burst|churn|bounce --out FILE [--count N] "
      "[--keep-every K] [--seed S] [--idle-ms T] [--sample-ms P] "
      "[--size B] [--rounds R] [--props FILE] [--note KEY=VALUE]\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(2);
}

int main(int argc, char **argv) {
  args_t a = {NULL, NULL, NULL, 0, 10, 1, 2000, 5000, 1};
  if (argc < 2)
    usage();
  a.mode = argv[1];
  for (int i = 2; i < argc; i++) {
    if (i + 1 >= argc)
      usage();
    const char *k = argv[i], *v = argv[++i];
    if (strcmp(k, "--out") == 0)
      a.out = v;
    else if (strcmp(k, "--props") == 0)
      a.props = v;
    else if (strcmp(k, "--count") == 0)
      a.count = num_arg(v);
    else if (strcmp(k, "--keep-every") == 0)
      a.keep_every = num_arg(v);
    else if (strcmp(k, "--seed") == 0)
      a.seed = num_arg(v);
    else if (strcmp(k, "--idle-ms") == 0)
      a.idle_ms = num_arg(v);
    else if (strcmp(k, "--sample-ms") == 0)
      sample_every_ns = num_arg(v) * 1000000u;
    else if (strcmp(k, "--size") == 0)
      a.size = num_arg(v);
    else if (strcmp(k, "--rounds") == 0)
      a.rounds = num_arg(v);
    else if (strcmp(k, "--note") == 0 && nnotes < MAX_NOTES &&
             strchr(v, '=') != NULL && strchr(v, '=') != v)
      notes[nnotes++] = v;
    else
      usage();
  }
  int burst = strcmp(a.mode, "burst") == 0,
      churn = strcmp(a.mode, "churn") == 0;
  if ((!burst && !churn && strcmp(a.mode, "bounce") != 0) || a.out == NULL ||
      a.keep_every == 0 || a.rounds == 0 || sample_every_ns == 0)
    usage();
  if (a.count == 0)
    a.count = burst ? 40000 : churn ? 200000 : 100000;
  if (a.count > (UINT64_C(1) << 24))
    die("--count is at most 16777216");

  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  t0_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  recs = map_bytes(MAX_RECS * sizeof *recs);
  objs_bytes = (size_t)a.count * (a.rounds > 1 ? 2 : 1) * sizeof *objs;
  objs = map_bytes(objs_bytes);
#ifdef __GLIBC__
  tc_getprop =
      (getprop_fn)dlsym(RTLD_DEFAULT, "MallocExtension_GetNumericProperty");
#endif
  if (a.props != NULL && tc_getprop != NULL) {
    props_out = (outbuf_t){map_bytes(1u << 20), 0, 1u << 20};
    out_str(&props_out, "mark");
    for (int i = 0; tc_props[i] != NULL; i++) {
      out_str(&props_out, "\t");
      out_str(&props_out, tc_props[i]);
    }
    out_str(&props_out, "\n");
  }

  if (burst)
    run_burst(&a);
  else if (churn)
    run_churn(&a);
  else
    run_bounce(&a);
  write_trace(&a, argc, argv);
  if (props_out.p != NULL)
    out_write(&props_out, a.props);
  return 0;
}
