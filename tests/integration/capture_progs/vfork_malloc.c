/* tests/integration/capture_progs/vfork_malloc.c -- a vfork child, which
 * shares its parent's memory, allocates 20,000 blocks of 7202 bytes
 * (enough records to fill the buffer it shares with the parent many times)
 * and leaves by _exit; the parent allocates 7201 and 7203 bytes around it.
 * The child's blocks were made in the parent's heap and its records went
 * into the parent's buffer: all of them, and the parent's own, belong to
 * the parent's trace.  (POSIX lets a vfork child call only _exit and exec;
 * glibc on Linux runs this, and a program that does it must be traced
 * right.) */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
  void *a = malloc(7201);
  pid_t pid = vfork();
  if (pid == 0) {
    for (int i = 0; i < 20000; i++)
      free(malloc(7202));
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  free(malloc(7203));
  free(a);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
