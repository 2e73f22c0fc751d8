/* tests/helpers/scratch.h -- a scratch directory per test under /tmp, and
 * how many entries it holds (to see that nothing was left behind).
 * Include after <cmocka.h>. */
#ifndef ALLOCSIM_TEST_SCRATCH_H
#define ALLOCSIM_TEST_SCRATCH_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes /tmp/allocsim-test-NAME-XXXXXX into dir (at least 64 bytes). */
static inline void scratch_make(char *dir, size_t len, const char *name) {
  snprintf(dir, len, "/tmp/allocsim-test-%s-XXXXXX", name);
  assert_non_null(mkdtemp(dir));
}

static inline void scratch_remove(const char *dir) {
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* Entries of dir besides . and .. (temporary files included). */
static inline int scratch_entries(const char *dir) {
  DIR *d = opendir(dir);
  assert_non_null(d);
  int            n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

#endif
