/* tests/integration/capture_progs/threads.c -- four threads, each
 * allocating 100 blocks of a size unique to it, handing every block to the
 * next thread through a mutex-protected mailbox, which frees it.  A free
 * must always follow the malloc that produced its pointer in the trace. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "allocsim_mark.h"

#define NTHREADS 4
#define NBLOCKS  100

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void           *box[NTHREADS][NBLOCKS];
static int             filled[NTHREADS];

static void *worker(void *arg) {
  int me = (int)(intptr_t)arg;
  int next = (me + 1) % NTHREADS;
  int freed = 0;
  for (int i = 0; i < NBLOCKS; i++) {
    void *p = malloc((size_t)(5000 + me)); /* 5000..5003: unique per thread */
    pthread_mutex_lock(&lock);
    box[next][filled[next]++] = p;
    pthread_mutex_unlock(&lock);
    /* Free whatever the previous thread handed us so far. */
    pthread_mutex_lock(&lock);
    while (freed < filled[me])
      free(box[me][freed++]);
    pthread_mutex_unlock(&lock);
  }
  for (;;) {
    pthread_mutex_lock(&lock);
    while (freed < filled[me])
      free(box[me][freed++]);
    int done = freed == NBLOCKS;
    pthread_mutex_unlock(&lock);
    if (done)
      break;
  }
  return NULL;
}

int main(void) {
  pthread_t th[NTHREADS];
  ALLOCSIM_MARK("begin");
  for (int i = 0; i < NTHREADS; i++)
    pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
  for (int i = 0; i < NTHREADS; i++)
    pthread_join(th[i], NULL);
  ALLOCSIM_MARK("end");
  return 0;
}
