/* sites_threads.c -- one call site hit by four threads at once, then by a
 * forked child, for the recorder's site table (tests/integration/
 * test_callsites.c): the site must be defined once per trace and every
 * allocation made from it must name it.  Everything stays live. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define PER     10000

static void *blocks[THREADS + 1][PER];

__attribute__((noinline)) static void *alloc_here(size_t n) {
  return malloc(n);
}

static void *worker(void *arg) {
  void **out = arg;
  for (int i = 0; i < PER; i++)
    out[i] = alloc_here(32 + (size_t)(i % 4) * 16);
  return NULL;
}

int main(void) {
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++)
    if (pthread_create(&th[t], NULL, worker, blocks[t]) != 0)
      return 1;
  for (int t = 0; t < THREADS; t++)
    pthread_join(th[t], NULL);
  pid_t pid = fork();
  if (pid == 0) {
    worker(blocks[THREADS]);
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid)
    return 1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
