/* scripts/measure/mimalloc/mi_measure.h -- measured-run output for the C
 * programs that measure mimalloc (burst.c, churn.c).
 *
 * A run writes an allocsim measured-run file: "allocsim-trace 1", "#@ key=
 * value" provenance, then "T 0 mark LABEL" / "T 0 rss BYTES" lines, and
 * optionally every malloc/free/mi_collect the program made as trace events
 * merged in (--events), so the run replays call for call at its own times.
 * Nothing allocates while the program measures: marks, samples and events
 * go to static buffers, written out (with stdio) only after the last
 * sample.  The buffers are written in full before the first mark, so their
 * pages do not appear as heap growth; of the event buffer only the entries
 * the program says it needs (mm_events_cap), so it does not inflate the
 * measured peak.  RSS is the "Rss:" line of /proc/self/smaps_rollup, which
 * walks the page tables and is exact (VmRSS lags by up to 64 pages per
 * thread); "AnonHugePages:" and "LazyFree:" are recorded in comments, since
 * mimalloc 3.x madvises its arenas MADV_HUGEPAGE and MADV_FREE pages stay in
 * Rss.
 *
 * The allocator is whatever the process runs on (LD_PRELOAD): mimalloc's
 * entry points (mi_version, mi_collect, mi_option_get) are found with dlsym
 * so one binary measures every mimalloc version and also runs without it.
 */
#ifndef MI_MEASURE_H
#define MI_MEASURE_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static char      mm_meta[1 << 14]; /* "#@ key=value" lines */
static size_t    mm_meta_len;
static char      mm_body[1 << 20]; /* marks, rss samples, comments */
static size_t    mm_body_len;
static long long mm_t0_ns;

/* Events recorded with --events: op 'm' malloc, 'f' free, 'c' mi_collect
 * (id 1 = force), written as purge all / purge decay. */
typedef struct mm_event_s {
  long long t_ns;
  uint64_t  id;
  uint64_t  size;
  char      op;
} mm_event_t;
#define MM_EVENTS_MAX 1200000
static mm_event_t mm_events[MM_EVENTS_MAX];
static size_t     mm_nevents;
static size_t     mm_events_cap;    /* entries made resident by mm_begin */
static bool       mm_record_events; /* set mm_events_cap with it */

static void mm_die(const char *msg) {
  (void)!write(2, msg, strlen(msg));
  _exit(3);
}

static void mm_appendv(char *buf, size_t cap, size_t *len, const char *fmt,
                       va_list ap) {
  int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
  if (n < 0 || (size_t)n >= cap - *len)
    mm_die("mi_measure: output buffer full\n");
  *len += (size_t)n;
}

static void mm_bodyf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void mm_bodyf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mm_appendv(mm_body, sizeof mm_body, &mm_body_len, fmt, ap);
  va_end(ap);
}

static void mm_meta_set(const char *key, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void mm_meta_set(const char *key, const char *fmt, ...) {
  char    value[512];
  size_t  n = 0;
  va_list ap;
  va_start(ap, fmt);
  mm_appendv(value, sizeof value, &n, fmt, ap);
  va_end(ap);
  for (char *c = value; *c; c++)
    if ((unsigned char)*c < 0x20)
      *c = ' ';
  int h = snprintf(mm_meta + mm_meta_len, sizeof mm_meta - mm_meta_len,
                   "#@ %s=%s\n", key, value);
  if (h < 0 || (size_t)h >= sizeof mm_meta - mm_meta_len)
    mm_die("mi_measure: provenance buffer full\n");
  mm_meta_len += (size_t)h;
}

/* Keeps the compiler from dropping a memset before a free. */
static inline void mm_escape(void *p) {
  __asm__ volatile("" : : "r"(p) : "memory");
}

static long long mm_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long mm_elapsed_ns(void) {
  return mm_now_ns() - mm_t0_ns;
}

/* Sleeps until mm_t0_ns + t_ns (absolute, so samples do not drift). */
static void mm_sleep_until(long long t_ns) {
  long long       abs_ns = mm_t0_ns + t_ns;
  struct timespec ts = {.tv_sec = abs_ns / 1000000000LL,
                        .tv_nsec = abs_ns % 1000000000LL};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
  }
}

typedef struct mm_rss_s {
  long long rss, anon_huge, lazyfree; /* bytes */
} mm_rss_t;

static long long mm_field_kb(const char *buf, const char *name) {
  const char *p = strstr(buf, name);
  if (p == NULL)
    mm_die("mi_measure: field missing in smaps_rollup\n");
  return strtoll(p + strlen(name), NULL, 10);
}

static mm_rss_t mm_read_rss(void) {
  static char buf[8192];
  int         fd = open("/proc/self/smaps_rollup", O_RDONLY);
  if (fd < 0)
    mm_die("mi_measure: cannot open /proc/self/smaps_rollup\n");
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    mm_die("mi_measure: cannot read /proc/self/smaps_rollup\n");
  buf[n] = '\0';
  mm_rss_t r;
  r.rss = mm_field_kb(buf, "\nRss:") * 1024;
  r.anon_huge = mm_field_kb(buf, "\nAnonHugePages:") * 1024;
  r.lazyfree = mm_field_kb(buf, "\nLazyFree:") * 1024;
  return r;
}

/* An rss sample, with huge/lazyfree bytes in a comment when non-zero. */
static void mm_sample_at(long long t) {
  mm_rss_t r = mm_read_rss();
  mm_bodyf("%lld 0 rss %lld\n", t, r.rss);
  if (r.anon_huge != 0 || r.lazyfree != 0)
    mm_bodyf("# anon_huge=%lld lazyfree=%lld\n", r.anon_huge, r.lazyfree);
}

static inline void mm_sample(void) {
  mm_sample_at(mm_elapsed_ns());
}

static void mm_mark(const char *label) {
  long long t = mm_elapsed_ns();
  mm_bodyf("%lld 0 mark %s\n", t, label);
  mm_sample_at(t);
}

static void mm_event(char op, uint64_t id, uint64_t size) {
  if (!mm_record_events)
    return;
  if (mm_nevents == mm_events_cap)
    mm_die("mi_measure: event buffer full\n");
  mm_events[mm_nevents++] =
      (mm_event_t){.t_ns = mm_elapsed_ns(), .id = id, .size = size, .op = op};
}

/* ---- mimalloc entry points, if the process runs on mimalloc ------------- */

typedef int (*mm_version_fn)(void);
typedef void (*mm_collect_fn)(bool);
typedef long (*mm_option_get_fn)(int);

static int mm_mi_version(void) {
  mm_version_fn f = (mm_version_fn)dlsym(RTLD_DEFAULT, "mi_version");
  return f ? f() : 0;
}

/* mi_collect(force); false if the process does not run on mimalloc. */
static bool mm_mi_collect(bool force) {
  mm_collect_fn f = (mm_collect_fn)dlsym(RTLD_DEFAULT, "mi_collect");
  if (f == NULL)
    return false;
  f(force);
  return true;
}

/* Provenance shared by every program: machine, kernel, page size, libc,
 * mimalloc version (mi_version() 209 written as 2.0.9, 30403 as 3.4.3: the
 * model's version spelling), LD_PRELOAD and MIMALLOC_*. */
static void mm_begin(int argc, char **argv, const char *workload) {
  memset(mm_body, 0, sizeof mm_body);
  memset(mm_meta, 0, sizeof mm_meta);
  if (mm_record_events)
    memset(mm_events, 0, mm_events_cap * sizeof mm_events[0]);
  (void)mm_read_rss();
  mm_t0_ns = mm_now_ns();
  struct utsname u;
  uname(&u);
  mm_meta_set("kind", "measured");
  if (workload != NULL) /* NULL: the program sets it when it knows it */
    mm_meta_set("workload", "%s", workload);
  char   cmd[512];
  size_t n = 0;
  cmd[0] = '\0';
  for (int i = 0; i < argc && n + 2 < sizeof cmd; i++)
    n += (size_t)snprintf(cmd + n, sizeof cmd - n, "%s%s", i ? " " : "",
                          argv[i]);
  mm_meta_set("command", "%s", cmd);
  mm_meta_set("machine", "%s %s, %ld cpus", u.nodename, u.machine,
              sysconf(_SC_NPROCESSORS_ONLN));
  mm_meta_set("kernel", "%s", u.release);
  mm_meta_set("page_size", "%ld", sysconf(_SC_PAGESIZE));
  mm_meta_set("glibc", "glibc-%s", gnu_get_libc_version());
  /* MI_MALLOC_VERSION, include/mimalloc.h:11 at each tag: 209 = 2.0.9,
   * 301 = 3.0.1; 3010 = 3.0.10, 3206 = 3.2.6; from 2.3.0 and 3.3.0 two
   * digits each, 30403 = 3.4.3 */
  int v = mm_mi_version();
  if (v >= 10000)
    mm_meta_set("mimalloc_version", "%d.%d.%d", v / 10000, v / 100 % 100,
                v % 100);
  else if (v >= 1000)
    mm_meta_set("mimalloc_version", "%d.%d.%d", v / 1000, v / 100 % 10,
                v % 100);
  else if (v != 0)
    mm_meta_set("mimalloc_version", "%d.%d.%d", v / 100, v / 10 % 10, v % 10);
  const char *pre = getenv("LD_PRELOAD");
  mm_meta_set("env.LD_PRELOAD", "%s", pre ? pre : "");
  extern char **environ;
  for (char **e = environ; *e != NULL; e++)
    if (strncmp(*e, "MIMALLOC_", 9) == 0) {
      const char *eq = strchr(*e, '=');
      char        key[64];
      snprintf(key, sizeof key, "env.%.*s", (int)(eq - *e), *e);
      mm_meta_set(key, "%s", eq + 1);
    }
  mm_meta_set("rss_source", "/proc/self/smaps_rollup Rss");
}

/* Writes one recorded event as a trace line. */
static int mm_event_line(char *buf, size_t len, const mm_event_t *e) {
  if (e->op == 'm')
    return snprintf(buf, len, "%lld 0 malloc %llu %llu\n", e->t_ns,
                    (unsigned long long)e->id, (unsigned long long)e->size);
  if (e->op == 'f')
    return snprintf(buf, len, "%lld 0 free %llu\n", e->t_ns,
                    (unsigned long long)e->id);
  return snprintf(buf, len, "%lld 0 purge %s\n", e->t_ns,
                  e->id ? "all" : "decay"); /* mi_collect(force) */
}

/* Writes the body, and with --events every recorded call merged into it in
 * time order (a call before a mark or sample of the same time), so the file
 * is a trace that replays call for call against the measured samples. */
static void mm_write_body(FILE *f) {
  size_t      ev = 0;
  const char *line = mm_body, *end = mm_body + mm_body_len;
  char        buf[128];
  while (line < end) {
    const char *nl = memchr(line, '\n', (size_t)(end - line));
    size_t      n = nl ? (size_t)(nl - line) + 1 : (size_t)(end - line);
    if (line[0] != '#') {
      long long t = strtoll(line, NULL, 10);
      for (; ev < mm_nevents && mm_events[ev].t_ns <= t; ev++)
        if (mm_event_line(buf, sizeof buf, &mm_events[ev]) > 0)
          fputs(buf, f);
    }
    fwrite(line, 1, n, f);
    line += n;
  }
  for (; ev < mm_nevents; ev++)
    if (mm_event_line(buf, sizeof buf, &mm_events[ev]) > 0)
      fputs(buf, f);
}

/* Writes the measured-run file and exits.  The output is written after the
 * last sample, so stdio's buffers no longer matter. */
static void mm_finish(const char *path) {
  FILE *f = fopen(path, "w");
  if (f == NULL)
    mm_die("mi_measure: cannot create the output file\n");
  fputs("allocsim-trace 1\n", f);
  fwrite(mm_meta, 1, mm_meta_len, f);
  if (mm_record_events)
    fputs("#@ events=every malloc, free and mi_collect of the program\n", f);
  mm_write_body(f);
  if (fclose(f) != 0)
    mm_die("mi_measure: write failed\n");
  (void)!write(1, mm_body, mm_body_len);
  exit(0);
}

#endif
