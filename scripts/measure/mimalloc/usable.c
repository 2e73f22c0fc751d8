/* scripts/measure/mimalloc/usable.c -- mi_usable_size and placement of
 * requests above mimalloc's medium size classes (128 KiB), for the model's
 * large and huge pages (tests/unit/test_mimalloc.c holds the figures).
 *
 * The library is dlopen()ed (MILIB, else Debian 12's libmimalloc2.0) and
 * called through dlsym, so only the probe's own requests reach it.
 *   ladder (no argument): for n = k * 4096 - 1, k * 4096, k * 4096 + 1 from
 *     128 KiB to 2 MiB, and sizes around 2, 4, 8, 16 and 32 MiB: malloc(n),
 *     then "L n mi_usable_size offset-in-its-32-MiB-segment", then free;
 *   place (any argument): in a fresh process, a fixed sequence kept live:
 *     "P n usable segN off OFFSET", N the segment's distance from the first
 *     object's in 32 MiB units (a huge segment is mapped where the OS puts
 *     it, so only its offset is comparable).
 *
 * Build and run (the 2.1.x libraries from upstream's tags, release build):
 *   cc -O1 -o usable scripts/measure/mimalloc/usable.c -ldl && ./usable
 *   git -C MIMALLOC archive v2.1.2 | tar -x -C src212 &&
 *   cc -O2 -shared -fPIC -DNDEBUG -Isrc212/include src212/src/static.c \
 *      -o libmi212.so -lpthread && MILIB=$PWD/libmi212.so ./usable place
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void *(*fn_malloc)(size_t);
typedef void (*fn_free)(void *);
typedef size_t (*fn_usable)(const void *);
typedef int (*fn_version)(void);

#define SEG ((uintptr_t)32 << 20)
#define MIB ((size_t)1 << 20)

int main(int argc, char **argv) {
  (void)argv;
  const char *lib = getenv("MILIB");
  void *h = dlopen(lib ? lib : "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2",
                   RTLD_NOW);
  if (h == NULL) {
    fprintf(stderr, "usable: %s\n", dlerror());
    return 1;
  }
  fn_malloc  m = (fn_malloc)(uintptr_t)dlsym(h, "mi_malloc");
  fn_free    f = (fn_free)(uintptr_t)dlsym(h, "mi_free");
  fn_usable  u = (fn_usable)(uintptr_t)dlsym(h, "mi_usable_size");
  fn_version v = (fn_version)(uintptr_t)dlsym(h, "mi_version");
  if (m == NULL || f == NULL || u == NULL || v == NULL) {
    fprintf(stderr, "usable: %s lacks mi_malloc & co.\n", lib ? lib : "lib");
    return 1;
  }
  printf("# mi_version %d\n", v());
  if (argc < 2) {
    static size_t ns[2048];
    size_t        k = 0;
    for (size_t n = 128 * 1024; n <= 2 * MIB; n += 4096) {
      ns[k++] = n - 1;
      ns[k++] = n;
      ns[k++] = n + 1;
    }
    const size_t extra[] = {
        2 * MIB + 1,      4 * MIB,      8 * MIB - 1,  8 * MIB,      8 * MIB + 1,
        16 * MIB - 65536, 16 * MIB - 1, 16 * MIB,     16 * MIB + 1, 17 * MIB,
        32 * MIB - 1,     32 * MIB,     32 * MIB + 1, 40 * MIB};
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
      ns[k++] = extra[i];
    for (size_t i = 0; i < k; i++) {
      void *p = m(ns[i]);
      printf("L %zu %zu %lu\n", ns[i], u(p),
             (unsigned long)((uintptr_t)p & (SEG - 1)));
      f(p);
    }
    return 0;
  }
  const size_t seq[] = {100,     131073,   131073,       200000,
                        262144,  262145,   524288,       524289,
                        600000,  1048576,  1500000,      2097153,
                        5000000, 16 * MIB, 16 * MIB + 1, 131073};
  intptr_t     first = 0;
  for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
    void    *p = m(seq[i]);
    intptr_t base = (intptr_t)((uintptr_t)p & ~(SEG - 1));
    if (i == 0)
      first = base;
    printf("P %zu %zu seg%+ld off %lu\n", seq[i], u(p),
           (long)((base - first) / (intptr_t)SEG),
           (unsigned long)((uintptr_t)p & (SEG - 1)));
  }
  return 0;
}
