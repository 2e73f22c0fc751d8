/* tests/integration/capture_progs/closer.c -- closes every descriptor above
 * 2 in each way programs do (closefrom, close_range, close in a loop),
 * allocating between them: the recorder must keep its connection and record all
 * three mallocs (1001, 2002, 3003 bytes) between the marks "begin" and "end".
 * Then it closes them by a raw system call, which the recorder cannot see
 * coming: that ends the recording, and the program must go on to exit 0, not be
 * killed.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "allocsim_mark.h"

static void churn(size_t n) {
  volatile char *p = malloc(n);
  p[0] = 1;
  free((void *)p);
}

int main(void) {
  ALLOCSIM_MARK("begin");
  closefrom(3);
  churn(1001);
  if (close_range(3, ~0U, 0) != 0)
    return 2;
  churn(2002);
  for (int fd = 3; fd < 4096; fd++)
    close(fd);
  int fd = open("/dev/null", O_WRONLY); /* the lowest free number: 3 */
  if (fd != 3 || write(fd, "x", 1) != 1 || close(fd) != 0)
    return 3;
  churn(3003);
  ALLOCSIM_MARK("end");
  /* The recorder sends this thread's buffer before a fork: what came
   * before is then safe from the raw close, which loses what is unsent. */
  pid_t child = fork();
  if (child == 0)
    _exit(0);
  if (child < 0 || waitpid(child, NULL, 0) != child)
    return 4;
  syscall(SYS_close_range, 3, ~0U, 0);
  struct timespec pause = {0, 50 * 1000 * 1000}; /* the flusher notices */
  nanosleep(&pause, NULL);
  churn(4004);
  return 0;
}
