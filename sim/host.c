/* sim/host.c -- physical memory and the simulator's own RSS (host.h). */
#include "host.h"

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <unistd.h>

#define DEFAULT_WITHOUT_SYSCONF (UINT64_C(4) << 30)

uint64_t sim_host_physical_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || size <= 0)
    return 0;
  return (uint64_t)pages * (uint64_t)size;
}

uint64_t sim_host_available_bytes(void) {
  FILE *f = fopen("/proc/meminfo", "re");
  if (f == NULL)
    return 0;
  char               line[128];
  unsigned long long kib = 0;
  while (fgets(line, sizeof line, f) != NULL &&
         sscanf(line, "MemAvailable: %llu kB", &kib) != 1)
    ;
  fclose(f);
  return (uint64_t)kib * 1024;
}

uint64_t sim_host_default_max_memory(void) {
  uint64_t phys = sim_host_physical_bytes();
  return phys ? phys / 2 : DEFAULT_WITHOUT_SYSCONF;
}

uint64_t sim_host_rss_bytes(void) {
  /* statm's second field is resident pages (Linux proc(5)); read with one
   * read(2), no stdio buffer, since the engine calls this while running. */
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  char    buf[128];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  unsigned long long size, resident;
  if (sscanf(buf, "%llu %llu", &size, &resident) != 2)
    return 0;
  long page = sysconf(_SC_PAGESIZE);
  return (uint64_t)resident * (uint64_t)(page > 0 ? page : 4096);
}

const char *sim_host_format_bytes(uint64_t bytes, char *buf, unsigned len) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(buf, len, "%" PRIu64 " bytes", bytes);
    return buf;
  }
  double   v = (double)bytes / 1024.0;
  unsigned u = 0;
  while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, len, "%.2f %s", v, units[u]);
  return buf;
}
