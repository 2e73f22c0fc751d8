/* traces/machine.c -- see machine.h. */
#include "machine.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* The Rss line of the smaps entry that starts at addr, in kB; -1 if there
 * is none. */
static long smaps_rss_kb(uintptr_t addr) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL)
    return -1;
  char line[512];
  bool in_entry = false;
  long kb = -1;
  while (kb < 0 && fgets(line, sizeof line, f) != NULL) {
    uintptr_t lo, hi;
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2)
      in_entry = lo == addr;
    else if (in_entry && sscanf(line, "Rss: %ld kB", &kb) != 1)
      kb = -1;
  }
  fclose(f);
  return kb;
}

int machine_reads_map_zero_page(void) {
  /* Mainline Linux, mm/memory.c do_anonymous_page ("Use the zero-page for
   * reads"), maps the zero page for a read fault unless the mm forbids it;
   * vm_normal_page skips it, so RSS does not count it. */
  const size_t size = 256 * 1024, guard = 64 * 1024;
  /* Inaccessible guards either side keep the probe a mapping of its own
   * (the kernel merges neighbouring anonymous mappings of equal
   * protection), so its smaps entry counts its pages alone. */
  unsigned char *all = mmap(NULL, size + 2 * guard, PROT_NONE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (all == MAP_FAILED)
    return -1;
  volatile unsigned char *p = all + guard;
  long                    kb = -1;
  if (mprotect((void *)p, size, PROT_READ | PROT_WRITE) == 0) {
    unsigned sum = 0;
    for (size_t off = 0; off < size; off += 4096)
      sum += p[off];
    kb = sum == 0 ? smaps_rss_kb((uintptr_t)p) : -1;
  }
  munmap(all, size + 2 * guard);
  if (kb < 0)
    return -1;
  return kb < (long)(size / 1024 / 2);
}

uint64_t machine_proc_stat_field(pid_t pid, int field) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* The command name (field 2) may hold spaces: count from its ')'. */
  const char *p = strrchr(buf, ')');
  for (int k = 2; p != NULL && k < field; k++)
    p = strchr(p + 1, ' ');
  return p != NULL ? strtoull(p + 1, NULL, 10) : 0;
}

uint64_t machine_start_brk(pid_t pid) {
  return machine_proc_stat_field(pid, 47);
}

const char *machine_thp_enabled(void) {
  char  buf[128];
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f == NULL)
    return NULL;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  static const char *const modes[] = {"always", "madvise", "never"};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    char want[16];
    snprintf(want, sizeof want, "[%s]", modes[i]);
    if (strstr(buf, want) != NULL)
      return modes[i];
  }
  return NULL;
}
