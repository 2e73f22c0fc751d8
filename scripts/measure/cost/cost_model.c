/* scripts/measure/cost/cost_model.c -- measures the costs sim/cost.c uses
 * for virtual time: what one malloc, free and realloc take in glibc, what a
 * page fault, an madvise, an munmap and a malloc_trim cost, and how fast a
 * program writes fresh memory.  Prints one "name value" line per constant
 * (nanoseconds), the median of 9 repetitions, for cost_model.sh to turn
 * into sim/cost.c's table.
 *
 * Built and run by scripts/measure/cost/cost_model.sh (plain cc -O2, the
 * machine's glibc).  Not a benchmark of allocsim: these are the real
 * operations whose durations a synthetic workload's clock should advance
 * by, so that clock-driven policies (decay, purge delays) see realistic
 * rates.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define REPS 9

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v) {
  qsort(v, REPS, sizeof *v, cmp_double);
  return v[REPS / 2];
}

/* Keeps the compiler from eliding allocations. */
static volatile uintptr_t sink;

/* malloc and free of n objects of size bytes, in LIFO order, per call. */
static void malloc_free(size_t size, double *malloc_ns, double *free_ns) {
  enum { N = 200000 };
  static void *p[N];
  double       m[REPS], f[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = now_ns();
    for (int i = 0; i < N; i++)
      p[i] = malloc(size);
    double t1 = now_ns();
    for (int i = N; i-- > 0;) {
      sink ^= (uintptr_t)p[i];
      free(p[i]);
    }
    double t2 = now_ns();
    m[r] = (t1 - t0) / N;
    f[r] = (t2 - t1) / N;
  }
  *malloc_ns = median(m);
  *free_ns = median(f);
}

/* realloc growing a block by 16 bytes at a time. */
static double realloc_step(void) {
  enum { N = 20000 };
  double v[REPS];
  for (int r = 0; r < REPS; r++) {
    char  *p = malloc(16);
    double t0 = now_ns();
    for (int i = 1; i <= N; i++)
      p = realloc(p, 16 + (size_t)i * 16);
    v[r] = (now_ns() - t0) / N;
    free(p);
  }
  return median(v);
}

/* Writing already-resident memory, per KiB (the program filling a block). */
static double write_per_kib(void) {
  size_t len = 64 << 20;
  char  *p = malloc(len);
  memset(p, 1, len);
  double v[REPS];
  for (int r = 0; r < REPS; r++) {
    double t0 = now_ns();
    memset(p, r, len);
    v[r] = (now_ns() - t0) / (double)(len >> 10);
  }
  sink ^= (uintptr_t)p[len - 1];
  free(p);
  return median(v);
}

/* First write to fresh anonymous OS pages, per page (fault + zeroing). */
static double fault_per_page(void) {
  long   page = sysconf(_SC_PAGESIZE);
  size_t len = 64 << 20;
  double v[REPS];
  for (int r = 0; r < REPS; r++) {
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(p, len, MADV_NOHUGEPAGE); /* one fault per page, as 4 KiB */
    double t0 = now_ns();
    for (size_t o = 0; o < len; o += (size_t)page)
      p[o] = 1;
    v[r] = (now_ns() - t0) / (double)(len / (size_t)page);
    munmap(p, len);
  }
  return median(v);
}

/* madvise(DONTNEED) or munmap of a resident range: a fixed cost per call
 * and a cost per resident page, from ranges of 1 and 256 pages. */
static void release_costs(int use_munmap, double *call_ns, double *page_ns) {
  long page = sysconf(_SC_PAGESIZE);
  enum { CALLS = 2000 };
  double one[REPS], many[REPS];
  for (int pass = 0; pass < 2; pass++) {
    size_t pages = pass == 0 ? 1 : 256;
    size_t len = pages * (size_t)page;
    for (int r = 0; r < REPS; r++) {
      char **p = malloc(CALLS * sizeof *p);
      for (int c = 0; c < CALLS; c++) {
        p[c] = mmap(NULL, len, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        madvise(p[c], len, MADV_NOHUGEPAGE);
        for (size_t o = 0; o < len; o += (size_t)page)
          p[c][o] = 1;
      }
      double t0 = now_ns();
      for (int c = 0; c < CALLS; c++) {
        if (use_munmap)
          munmap(p[c], len);
        else
          madvise(p[c], len, MADV_DONTNEED);
      }
      double dt = (now_ns() - t0) / CALLS;
      if (!use_munmap)
        for (int c = 0; c < CALLS; c++)
          munmap(p[c], len);
      free(p);
      (pass == 0 ? one : many)[r] = dt;
    }
  }
  double a = median(one), b = median(many);
  *page_ns = (b - a) / 255.0;
  *call_ns = a - *page_ns;
}

/* malloc_trim(0) per MiB of free, resident heap it gives back. */
static double trim_per_mib(void) {
  enum { N = 40000 };
  static void *p[N];
  double       v[REPS];
  for (int r = 0; r < REPS; r++) {
    for (int i = 0; i < N; i++) {
      p[i] = malloc(3000);
      memset(p[i], 1, 3000);
    }
    for (int i = 0; i < N - 1; i++)
      free(p[i]); /* the last one pins the heap below it */
    double t0 = now_ns();
    malloc_trim(0);
    v[r] = (now_ns() - t0) / ((double)N * 3000 / 1048576.0);
    free(p[N - 1]);
    malloc_trim(0);
  }
  return median(v);
}

int main(void) {
  double m, f, mad_call, mad_page, unmap_call, unmap_page;
  malloc_free(64, &m, &f);
  release_costs(0, &mad_call, &mad_page);
  release_costs(1, &unmap_call, &unmap_page);
  printf("malloc_ns %.1f\n", m);
  printf("free_ns %.1f\n", f);
  printf("realloc_ns %.1f\n", realloc_step());
  printf("write_ns_per_kib %.1f\n", write_per_kib());
  printf("fault_ns %.1f\n", fault_per_page());
  printf("madvise_call_ns %.1f\n", mad_call);
  printf("madvise_page_ns %.1f\n", mad_page);
  printf("munmap_call_ns %.1f\n", unmap_call);
  printf("munmap_page_ns %.1f\n", unmap_page);
  printf("trim_ns_per_mib %.1f\n", trim_per_mib());
  return 0;
}
