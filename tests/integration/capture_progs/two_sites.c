/* two_sites.c -- two call sites for `capture --stacks`: make_temp's blocks
 * are all freed, make_kept's one in 100 kept, interleaved so that each kept
 * block pins the free chunks around it (tests/integration/
 * test_callsites.c). */
#include <stdlib.h>
#include <string.h>

#include "allocsim_mark.h"

#define N 20000

__attribute__((noinline)) static void *make_temp(size_t n) {
  void *p = malloc(n);
  if (p != NULL)
    memset(p, 1, n);
  return p;
}

__attribute__((noinline)) static void *make_kept(size_t n) {
  void *p = malloc(n);
  if (p != NULL)
    memset(p, 2, n);
  return p;
}

int main(void) {
  static void *temp[N], *kept[N];
  for (int i = 0; i < N; i++) {
    temp[i] = make_temp(200);
    kept[i] = make_kept(200);
  }
  ALLOCSIM_MARK("peak");
  for (int i = 0; i < N; i++) {
    free(temp[i]);
    if (i % 100 != 0)
      free(kept[i]);
  }
  ALLOCSIM_MARK("after");
  return 0;
}
