/* traces/capture/lastthread.c -- the flusher does not keep alive a process
 * whose own threads have all exited.
 *
 * glibc ends a process when its last counted thread exits: the thread that
 * brings __nptl_nthreads to zero calls exit(0) (glibc 2.36
 * nptl/pthread_create.c start_thread; sysdeps/nptl/libc_start_call_main.h
 * for a main thread that called pthread_exit).  The flusher is a pthread,
 * so it is counted: a program whose main() called pthread_exit ran its
 * other threads to their end and then hung for ever, the flusher polling
 * alone in a process whose leader was a zombie.  So once the leader is
 * gone the flusher counts the live threads in /proc/self/task, and alone
 * ends the process as glibc would have.  No allocation here: the flusher
 * must not touch the program's heap. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture_int.h"

/* The state letter of a /proc stat file ('?' if unreadable): it follows
 * the last ')', as the command name may hold any other character. */
static char stat_state(const char *path) {
  char buf[512];
  int  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return '?';
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return '?';
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p != NULL && p[1] == ' ' && p[2] != '\0' ? p[2] : '?';
}

static bool is_dead(char state) {
  return state == 'Z' || state == 'X' || state == 'x';
}

/* Whether a thread of this process other than the caller still runs. */
static bool others_live(void) {
  int dir = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return true; /* cannot tell: never end the process on a guess */
  char    buf[4096], path[300];
  pid_t   self = gettid();
  bool    live = false;
  ssize_t n;
  while (!live && (n = getdents64(dir, buf, sizeof buf)) > 0)
    for (ssize_t off = 0; off < n && !live;) {
      struct dirent64 *d = (struct dirent64 *)(buf + off);
      off += d->d_reclen;
      if (d->d_name[0] < '1' || d->d_name[0] > '9' || atoi(d->d_name) == self)
        continue;
      snprintf(path, sizeof path, "/proc/self/task/%s/stat", d->d_name);
      char s = stat_state(path);
      live = s != '?' && !is_dead(s);
    }
  close(dir);
  return live;
}

bool capture_only_flusher_left(void) {
  return is_dead(stat_state("/proc/self/stat")) && !others_live();
}
