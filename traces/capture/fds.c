/* traces/capture/fds.c -- the recorder's descriptors outlive a program that
 * closes every descriptor it did not open.
 *
 * Daemons, shells and the children of Python's subprocess (close_fds=True,
 * the default) close every descriptor above 2: os.closerange calls
 * close_range(first, last, 0) (CPython 3.11 Python/fileutils.c
 * _Py_closerange), C programs call closefrom(3) or close() in a loop.  The
 * connection to `allocsim capture` and the pagemap descriptor would go with
 * them: the recorder would take the lost connection for `allocsim capture`
 * having died and kill the program.  So close, close_range and closefrom skip
 * the recorder's own descriptors and report success for them, as if the program
 * had closed them; every other descriptor is closed as asked.  A program that
 * closes them by a raw system call, or dup2s onto them, ends the recording
 * (stream.c checks that the descriptor is still its socket before each send)
 * but is not killed.
 */
#include <errno.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "capture_int.h"

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE                                                    \
  (1U << 1) /* Linux include/uapi/linux/close_range.h */
#endif

/* The recorder's descriptors in ascending order; returns how many. */
static int own_fds(unsigned *fds) {
  int a = capture_stream_fd(), b = capture_memmap_fd(), n = 0;
  if (a > b) {
    int t = a;
    a = b;
    b = t;
  }
  if (a >= 0)
    fds[n++] = (unsigned)a;
  if (b >= 0 && b != a)
    fds[n++] = (unsigned)b;
  return n;
}

bool capture_fd_is_own(int fd) {
  return fd >= 0 && (fd == capture_stream_fd() || fd == capture_memmap_fd());
}

void capture_close_own(int fd) {
  syscall(SYS_close, fd); /* past the interposed close below */
}

EXPORT int close(int fd) {
  if (capture_fd_is_own(fd))
    return 0;
  if (g_real.close != NULL)
    return g_real.close(fd); /* glibc's: a cancellation point */
  return (int)syscall(SYS_close, fd);
}

/* close_range on [first, last] without the recorder's descriptors: the
 * gaps between them, each closed by the system call itself. */
EXPORT int close_range(unsigned first, unsigned last, int flags) {
  unsigned own[2];
  int      n = own_fds(own);
  if (flags & CLOSE_RANGE_UNSHARE) { /* what the kernel does first */
    if (unshare(CLONE_FILES) != 0)
      return -1;
    flags &= ~(int)CLOSE_RANGE_UNSHARE;
  }
  for (int i = 0; i < n && first <= last; i++) {
    if (own[i] < first || own[i] > last)
      continue;
    if (own[i] > first &&
        syscall(SYS_close_range, first, own[i] - 1, flags) != 0)
      return -1;
    if (own[i] == last)
      return 0;
    first = own[i] + 1;
  }
  if (first > last)
    return 0;
  return (int)syscall(SYS_close_range, first, last, flags);
}

/* As glibc's (2.34+ sysdeps/unix/sysv/linux/closefrom.c:23-35): close_range
 * to the end, else one at a time (glibc's fallback walks /proc/self/fd;
 * this one walks up to the file limit). */
EXPORT void closefrom(int lowfd) {
  unsigned from = lowfd > 0 ? (unsigned)lowfd : 0;
  if (close_range(from, ~0U, 0) == 0)
    return;
  int           saved = errno;
  struct rlimit rl;
  rlim_t        limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
  for (rlim_t fd = from; fd < limit && fd <= (rlim_t)0x7fffffff; fd++)
    if (!capture_fd_is_own((int)fd))
      syscall(SYS_close, (int)fd);
  errno = saved;
}
