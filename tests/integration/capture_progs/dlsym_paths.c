/* tests/integration/capture_progs/dlsym_paths.c -- allocation calls reached
 * through dlsym and dlvsym on libc's own handle (as ctypes.CDLL("libc.so.6")
 * does), which a preloaded recorder does not see unless it wraps dlsym.
 * Between the marks "begin" and "end": malloc(7007) and its free,
 * malloc_trim(0) through dlsym, malloc_trim(64) through dlvsym, and
 * mallopt(M_MMAP_THRESHOLD, 65536).
 *
 * The exit status says what else held (0 = all): bit 0, RTLD_NEXT from
 * this program still finds the next definition (the recorder's, as
 * RTLD_DEFAULT does); bit 1, a symbol the recorder does not wrap (puts)
 * comes back unchanged; bit 2, mallctl is not found without jemalloc;
 * bit 3, dlsym itself looked up on libc's handle still works. */
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

#include "allocsim_mark.h"

int main(void) {
  void *libc = dlopen("libc.so.6", RTLD_NOW);
  if (libc == NULL)
    return 100;
  void *(*lib_malloc)(size_t) = (void *(*)(size_t))dlsym(libc, "malloc");
  void (*lib_free)(void *) = (void (*)(void *))dlsym(libc, "free");
  int (*trim)(size_t) = (int (*)(size_t))dlsym(libc, "malloc_trim");
  int (*vtrim)(size_t) =
      (int (*)(size_t))dlvsym(libc, "malloc_trim", "GLIBC_2.2.5");
  int (*opt)(int, int) = (int (*)(int, int))dlsym(libc, "mallopt");
  void *(*lib_dlsym)(void *, const char *) =
      (void *(*)(void *, const char *))dlsym(libc, "dlsym");
  if (!lib_malloc || !lib_free || !trim || !vtrim || !opt || !lib_dlsym)
    return 101;

  ALLOCSIM_MARK("begin");
  void *p = lib_malloc(7007);
  lib_free(p);
  trim(0);
  vtrim(64);
  opt(M_MMAP_THRESHOLD, 65536);
  ALLOCSIM_MARK("end");

  int bad = 0;
  if (dlsym(RTLD_NEXT, "malloc") != dlsym(RTLD_DEFAULT, "malloc"))
    bad |= 1;
  if (dlsym(libc, "puts") != (void *)puts)
    bad |= 2;
  if (dlsym(RTLD_DEFAULT, "mallctl") != NULL)
    bad |= 4;
  if (lib_dlsym(libc, "malloc_trim") != (void *)trim)
    bad |= 8;
  dlclose(libc);
  return bad;
}
