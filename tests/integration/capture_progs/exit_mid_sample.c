/* tests/integration/capture_progs/exit_mid_sample.c -- exits while the
 * recorder's flusher starts a probe and an RSS sample, so that the exit
 * path's sweep often meets the flusher's buffer held busy by the sample.
 * A 16 MiB block is written 1 MiB at a time, each piece found by one of
 * the flusher's probes, so that buffer holds the block's TOUCH records;
 * the exit path used to skip a busy buffer and they were lost (their pages
 * are marked reported, so no later probe reports them again).
 *
 * The flusher is the process's other thread; its waking is seen through
 * /proc/self/task/TID/syscall, which names the system call it sleeps in
 * (its idle poll) and says "running" while it works.  Exits with 0 after
 * the last piece, 2 if the flusher did not wake within 5 s. */
#include <dirent.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

static int other_thread(void) {
  DIR *d = opendir("/proc/self/task");
  int  tid = 0;
  for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.' && atoi(e->d_name) != getpid())
      tid = atoi(e->d_name);
  if (d != NULL)
    closedir(d);
  return tid;
}

/* Waits until the thread starts running after sleeping in a system call
 * (the flusher's idle wait): its probe and sample begin.  False after 5 s. */
static bool wait_wakeup(int fd) {
  char   buf[64];
  bool   slept = false;
  time_t end = time(NULL) + 5;
  while (time(NULL) < end) {
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
      return false;
    bool running = strncmp(buf, "running", 7) == 0;
    if (slept && running)
      return true;
    slept = !running;
  }
  return false;
}

int main(void) {
  char *big = malloc(16 * MIB);
  int   tid = other_thread();
  if (big == NULL || tid == 0)
    return 3;
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/syscall", tid);
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return 3;
  for (size_t k = 0; k < 16; k++) {
    memset(big + k * MIB, 1, MIB);
    if (!wait_wakeup(fd))
      return 2;
  }
  exit(0);
}
