/* tests/integration/capture_progs/main_pthread_exit.c -- main() calls
 * pthread_exit while a worker runs on: the worker, once the main thread is
 * a zombie, writes a 4 MiB block, waits for a few RSS samples and returns,
 * and glibc ends the process as its last thread exits. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *worker(void *arg) {
  (void)arg;
  usleep(100 * 1000); /* main has exited by then */
  char *p = malloc(4 << 20);
  if (p != NULL)
    memset(p, 1, 4 << 20);
  usleep(100 * 1000); /* samples see the block */
  free(p);
  return NULL;
}

int main(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, worker, NULL) != 0)
    return 1;
  pthread_exit(NULL);
}
