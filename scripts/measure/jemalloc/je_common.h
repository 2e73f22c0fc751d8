/* scripts/measure/jemalloc/je_common.h -- measured-run output for the
 * jemalloc programs (run with LD_PRELOAD=libjemalloc.so.2).
 *
 * Builds on ../labs/lab_common.h (static output buffers, RSS from
 * /proc/self/smaps_rollup, marks) but records jemalloc's provenance: the
 * environment that selected it (env.LD_PRELOAD, env.MALLOC_CONF: the keys
 * models/env.c reads to pick the model), jemalloc's version and effective
 * options (read through mallctl), and after each sample a comment line with
 * jemalloc's own statistics:
 *
 *   # je t=NS active=B resident=B mapped=B retained=B metadata=B
 *        pdirty=P pmuzzy=P npurge=N nmadvise=N purged=P bg_runs=N
 *
 * (one line; pdirty .. purged summed over all arenas, MALLCTL_ARENAS_ALL;
 * bg_runs from stats.background_thread.num_runs, 0 without background
 * threads).  mallctl is looked up with dlsym, so the programs also run (and
 * record RSS only) without jemalloc.  Nothing here allocates through malloc:
 * mallctl reads into caller storage, and its first call (which allocates
 * jemalloc's ctl metadata) happens in je_begin, before `start`.
 */
#ifndef JE_COMMON_H
#define JE_COMMON_H

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "../labs/lab_common.h"
#pragma GCC diagnostic pop

#include <dlfcn.h>
#include <stdbool.h>
#include <stdint.h>

typedef int (*je_mallctl_fn)(const char *, void *, size_t *, void *, size_t);
static je_mallctl_fn je_mallctl;

/* Reads a size_t (or uint64_t) statistic; 0 when jemalloc is absent or the
 * name is unknown. */
static uint64_t je_read_u64(const char *name) {
  uint64_t v = 0;
  size_t   sz = sizeof v;
  if (je_mallctl == NULL || je_mallctl(name, &v, &sz, NULL, 0) != 0)
    return 0;
  return v;
}

static long long je_read_ssize(const char *name) {
  ssize_t v = 0;
  size_t  sz = sizeof v;
  if (je_mallctl == NULL || je_mallctl(name, &v, &sz, NULL, 0) != 0)
    return 0;
  return (long long)v;
}

static unsigned je_read_unsigned(const char *name) {
  unsigned v = 0;
  size_t   sz = sizeof v;
  if (je_mallctl == NULL || je_mallctl(name, &v, &sz, NULL, 0) != 0)
    return 0;
  return v;
}

static bool je_read_bool(const char *name) {
  bool   v = false;
  size_t sz = sizeof v;
  if (je_mallctl == NULL || je_mallctl(name, &v, &sz, NULL, 0) != 0)
    return false;
  return v;
}

/* Refreshes jemalloc's statistics (they are snapshots taken at "epoch"). */
static void je_epoch(void) {
  uint64_t e = 1;
  size_t   sz = sizeof e;
  if (je_mallctl != NULL)
    (void)je_mallctl("epoch", &e, &sz, &e, sz);
}

/* Calls a mallctl that takes no argument ("arena.4096.purge",
 * "thread.tcache.flush"); returns its status (-1 without jemalloc). */
static __attribute__((unused)) int je_ctl_void(const char *name) {
  return je_mallctl == NULL ? -1 : je_mallctl(name, NULL, NULL, NULL, 0);
}

/* Appends the "# je ..." statistics comment for time t (ns since start). */
static void je_note_stats(long long t) {
  if (je_mallctl == NULL)
    return;
  je_epoch();
  lab_body("# je t=%lld active=%llu resident=%llu mapped=%llu retained=%llu "
           "metadata=%llu pdirty=%llu pmuzzy=%llu npurge=%llu nmadvise=%llu "
           "purged=%llu bg_runs=%llu\n",
           t, (unsigned long long)je_read_u64("stats.active"),
           (unsigned long long)je_read_u64("stats.resident"),
           (unsigned long long)je_read_u64("stats.mapped"),
           (unsigned long long)je_read_u64("stats.retained"),
           (unsigned long long)je_read_u64("stats.metadata"),
           (unsigned long long)je_read_u64("stats.arenas.4096.pdirty"),
           (unsigned long long)je_read_u64("stats.arenas.4096.pmuzzy"),
           (unsigned long long)je_read_u64("stats.arenas.4096.dirty_npurge"),
           (unsigned long long)je_read_u64("stats.arenas.4096.dirty_nmadvise"),
           (unsigned long long)je_read_u64("stats.arenas.4096.dirty_purged"),
           (unsigned long long)je_read_u64("stats.background_thread.num_runs"));
}

/* A mark (label, RSS) followed by jemalloc's statistics. */
static __attribute__((unused)) void je_mark(const char *label) {
  long long t = lab_now_ns() - lab_t0_ns;
  lab_body("%lld 0 mark %s\n%lld 0 rss %lld\n", t, label, t, lab_rss_bytes());
  je_note_stats(t);
}

/* Sample k of the 100 ms series: the mark "sK", RSS and the statistics
 * (the workloads emit the same marks, so runs compare sample by sample). */
static __attribute__((unused)) void je_sample(long k) {
  char label[24];
  snprintf(label, sizeof label, "s%ld", k);
  je_mark(label);
}

/* Provenance for a jemalloc run: as lab_begin, but no model or libc spec
 * (the environment decides), and jemalloc's own view of its options. */
static void je_begin(int argc, char **argv, const char *workload) {
  struct utsname u;
  memset(lab_out, 0, sizeof lab_out);
  memset(lab_meta, 0, sizeof lab_meta);
  (void)lab_rss_bytes();
  je_mallctl = (je_mallctl_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "mallctl");
  je_epoch(); /* first mallctl: jemalloc allocates its ctl metadata here */
  lab_t0_ns = lab_now_ns();
  uname(&u);
  lab_meta_set("kind", "measured");
  if (workload != NULL) /* NULL: the caller records it at the end */
    lab_meta_set("workload", "%s", workload);
  char   cmd[512];
  size_t n = 0;
  cmd[0] = '\0';
  for (int i = 0; i < argc && n + 2 < sizeof cmd; i++)
    n += (size_t)snprintf(cmd + n, sizeof cmd - n, "%s%s", i ? " " : "",
                          argv[i]);
  lab_meta_set("command", "%s", cmd);
  /* The environment that chose the allocator and its knobs, under the keys
   * allocsim capture writes (models/env.c reads env.NAME). */
  const char *pre = getenv("LD_PRELOAD");
  const char *conf = getenv("MALLOC_CONF");
  if (pre != NULL)
    lab_meta_set("env.LD_PRELOAD", "%s", pre);
  if (conf != NULL)
    lab_meta_set("env.MALLOC_CONF", "%s", conf);
  lab_meta_set("ncpus", "%ld", sysconf(_SC_NPROCESSORS_ONLN));
  if (je_mallctl != NULL) {
    const char *ver = NULL;
    size_t      sz = sizeof ver;
    if (je_mallctl("version", &ver, &sz, NULL, 0) != 0)
      ver = "?";
    lab_meta_set("jemalloc", "%s", ver);
    /* What the library reports it runs with (opt.*), for the reader. */
    lab_meta_set("jemalloc_opts",
                 "narenas=%u,dirty_decay_ms=%lld,muzzy_decay_ms=%lld,"
                 "background_thread=%s,max_background_threads=%llu,"
                 "retain=%s,oversize_threshold=%llu,tcache=%s,"
                 "tcache_max=%llu",
                 je_read_unsigned("opt.narenas"),
                 je_read_ssize("opt.dirty_decay_ms"),
                 je_read_ssize("opt.muzzy_decay_ms"),
                 je_read_bool("opt.background_thread") ? "true" : "false",
                 (unsigned long long)je_read_u64("opt.max_background_threads"),
                 je_read_bool("opt.retain") ? "true" : "false",
                 (unsigned long long)je_read_u64("opt.oversize_threshold"),
                 je_read_bool("opt.tcache") ? "true" : "false",
                 (unsigned long long)je_read_u64("opt.tcache_max"));
  }
  lab_meta_set("machine", "%s %s, %ld cpus", u.nodename, u.machine,
               sysconf(_SC_NPROCESSORS_ONLN));
  lab_meta_set("kernel", "%s", u.release);
  lab_meta_set("page_size", "%ld", sysconf(_SC_PAGESIZE));
  lab_meta_set("glibc", "glibc-%s", gnu_get_libc_version());
  lab_meta_set("rss_source", "/proc/self/smaps_rollup Rss");
}

#endif
