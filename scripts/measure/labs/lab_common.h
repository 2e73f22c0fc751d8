/* scripts/measure/labs/lab_common.h -- measured-run output for the C labs.
 *
 * Each lab program (section 20 of the allocator course notes) marks its phases
 * and writes an allocsim measured-run file: "allocsim-trace 1", "#@ key=value"
 * provenance, then "T 0 mark LABEL" / "T 0 rss BYTES" pairs.  Nothing here
 * calls malloc: the RSS reader uses open/read into a static buffer and the
 * output is formatted into a static buffer written with write(2) at the end,
 * so the heap the lab observes holds only the lab's own allocations.  RSS
 * comes from /proc/self/smaps_rollup, which walks the page tables and is exact
 * (Linux 6.1.170 fs/proc/task_mmu.c:768 smap_gather_stats); VmRSS would lag by
 * up to 64 page faults per thread (mm/memory.c:198 TASK_RSS_EVENTS_THRESH).
 */
#ifndef LAB_COMMON_H
#define LAB_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

static char      lab_out[1 << 16]; /* the body: marks, rss lines, comments */
static size_t    lab_out_len;
static char      lab_meta[1 << 14]; /* "#@ key=value" lines */
static size_t    lab_meta_len;
static long long lab_t0_ns;

static void lab_appendv(char *buf, size_t cap, size_t *len, const char *fmt,
                        va_list ap) {
  int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
  if (n < 0 || (size_t)n >= cap - *len) {
    static const char msg[] = "lab: output buffer full\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(3);
  }
  *len += (size_t)n;
}

static void lab_body(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));
static void lab_body(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  lab_appendv(lab_out, sizeof lab_out, &lab_out_len, fmt, ap);
  va_end(ap);
}

static void lab_meta_set(const char *key, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void lab_meta_set(const char *key, const char *fmt, ...) {
  va_list ap;
  char    value[512];
  size_t  n = 0;
  va_start(ap, fmt);
  lab_appendv(value, sizeof value, &n, fmt, ap);
  va_end(ap);
  int h = snprintf(lab_meta + lab_meta_len, sizeof lab_meta - lab_meta_len,
                   "#@ %s=%s\n", key, value);
  if (h < 0 || (size_t)h >= sizeof lab_meta - lab_meta_len)
    _exit(3);
  lab_meta_len += (size_t)h;
}

/* Makes the bytes at p observable, so the compiler cannot drop a memset
 * that is followed by free (dead-store elimination would otherwise leave
 * the buffer unwritten and its pages never resident). */
static inline void lab_escape(void *p) {
  __asm__ volatile("" : : "r"(p) : "memory");
}

static long long lab_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Exact RSS in bytes from the "Rss:" line of smaps_rollup (kB). */
static long long lab_rss_bytes(void) {
  static char buf[8192];
  int         fd = open("/proc/self/smaps_rollup", O_RDONLY);
  if (fd < 0)
    _exit(4);
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    _exit(4);
  buf[n] = '\0';
  char *p = strstr(buf, "\nRss:");
  if (p == NULL)
    _exit(4);
  return strtoll(p + 5, NULL, 10) * 1024;
}

static void lab_mark(const char *label) {
  long long t = lab_now_ns() - lab_t0_ns;
  long long rss = lab_rss_bytes();
  lab_body("%lld 0 mark %s\n%lld 0 rss %lld\n", t, label, t, rss);
}

/* The current program break, as a comment the docs can quote. */
static __attribute__((unused)) void lab_note_brk(const char *what,
                                                 const void *brk0) {
  lab_body("# %s: brk - brk0 = %ld\n", what,
           (long)((char *)sbrk(0) - (const char *)brk0));
}

/* Common provenance: machine, kernel, page size, glibc, MALLOC_* env and the
 * libc spec the simulation should use. */
static void lab_begin(int argc, char **argv, const char *workload) {
  struct utsname u;
  /* Write every page of the static buffers now, so that the first marks do
   * not fault them in between two RSS readings: without this the body
   * buffer's first page and the smaps buffer's pages (4 pages) appeared as
   * heap growth after `start`. */
  memset(lab_out, 0, sizeof lab_out);
  memset(lab_meta, 0, sizeof lab_meta);
  (void)lab_rss_bytes();
  lab_t0_ns = lab_now_ns();
  uname(&u);
  lab_meta_set("kind", "measured");
  lab_meta_set("workload", "%s", workload);
  char   cmd[256];
  size_t n = 0;
  cmd[0] = '\0';
  for (int i = 0; i < argc && n + 2 < sizeof cmd; i++)
    n += (size_t)snprintf(cmd + n, sizeof cmd - n, "%s%s", i ? " " : "",
                          argv[i]);
  lab_meta_set("command", "%s", cmd);
  /* Under LD_PRELOAD the run is the preloaded allocator's: its provenance
   * says so (allocsim picks the model from the library's name) and claims
   * no glibc spec, whose knobs would not apply. */
  const char *preload = getenv("LD_PRELOAD");
  if (preload != NULL && *preload != '\0')
    lab_meta_set("LD_PRELOAD", "%s", preload);
  else
    lab_meta_set("model", "glibc");
  char   spec[256];
  size_t s = (size_t)snprintf(spec, sizeof spec, "glibc:ncpus=%ld",
                              sysconf(_SC_NPROCESSORS_ONLN));
  static const char *const env[][2] = {
      {"MALLOC_ARENA_MAX", "arena_max"},
      {"MALLOC_ARENA_TEST", "arena_test"},
      {"MALLOC_MMAP_THRESHOLD_", "mmap_threshold"},
      {"MALLOC_TRIM_THRESHOLD_", "trim_threshold"},
      {"MALLOC_TOP_PAD_", "top_pad"},
  };
  char   envs[256];
  size_t e = 0;
  envs[0] = '\0';
  for (size_t i = 0; i < sizeof env / sizeof env[0]; i++) {
    const char *v = getenv(env[i][0]);
    if (v == NULL)
      continue;
    s += (size_t)snprintf(spec + s, sizeof spec - s, ",%s=%s", env[i][1], v);
    e += (size_t)snprintf(envs + e, sizeof envs - e, "%s%s=%s", e ? " " : "",
                          env[i][0], v);
  }
  if (preload == NULL || *preload == '\0')
    lab_meta_set("libc", "%s", spec);
  lab_meta_set("machine", "%s %s, %ld cpus", u.nodename, u.machine,
               sysconf(_SC_NPROCESSORS_ONLN));
  lab_meta_set("kernel", "%s", u.release);
  lab_meta_set("page_size", "%ld", sysconf(_SC_PAGESIZE));
  lab_meta_set("glibc", "glibc-%s", gnu_get_libc_version());
  lab_meta_set("malloc_env", "%s", e ? envs : "(none)");
  lab_meta_set("rss_source", "/proc/self/smaps_rollup Rss");
}

/* Writes the measured-run file to path and exits 0. */
static void lab_finish(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    _exit(5);
  static const char head[] = "allocsim-trace 1\n";
  if (write(fd, head, sizeof head - 1) < 0 ||
      write(fd, lab_meta, lab_meta_len) < 0 ||
      write(fd, lab_out, lab_out_len) < 0)
    _exit(5);
  close(fd);
  (void)!write(1, lab_out, lab_out_len);
  exit(0);
}

#endif
