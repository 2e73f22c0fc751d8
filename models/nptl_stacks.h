/* models/nptl_stacks.h -- glibc's nptl thread stacks, for every model of a
 * program linked with glibc: whichever malloc the program uses, its threads'
 * stacks are mapped by libc's pthread_create (glibc 2.36 nptl/
 * allocatestack.c) and cached at exit (nptl/nptl-stack.c).  The glibc model
 * and the preloaded-allocator models (jemalloc) share this code.
 *
 * A model embeds an nptl_stacks_t, declares the two option rows with
 * NPTL_STACK_OPTIONS (so the spelling, default and citation exist once),
 * and calls nptl_stack_acquire at a thread's start and nptl_stack_release
 * at its exit.  The main thread runs on the process stack: no block.
 */
#ifndef ALLOCSIM_NPTL_STACKS_H
#define ALLOCSIM_NPTL_STACKS_H

#include <stdint.h>

#include "../sim/kernel.h"
#include "model.h"

/* The option rows, under the including model's keys. */
#define NPTL_STACK_OPTIONS(X, KEY_STACK_SIZE, KEY_STACK_PAGES)                 \
  X(KEY_STACK_SIZE, "stack_size", OPT_BYTES, "8388608", "bytes", NULL, NULL,   \
    "glibc 2.36 sysdeps/nptl/pthread_early_init.h:33-53: RLIMIT_STACK "        \
    "rounded up to a page (8 MiB: ulimit -s on the measured machine)",         \
    "thread stack size (pthread_attr_setstacksize or ulimit -s); the "         \
    "mapping adds one guard page")                                             \
  X(KEY_STACK_PAGES, "thread_stack_pages", OPT_U64, "1", "", NULL, NULL,       \
    "measured: a thread running a function leaves 2 resident OS pages "        \
    "(TCB page + 1 frame page) on Debian 2.36 x86-64 (docs/glibc-"             \
    "validation.md Lab 5)",                                                    \
    "OS pages of the program's own stack frames per thread, below the "        \
    "TCB and static TLS; a trace does not record this (1 = the minimum "       \
    "any thread that runs a function writes)")

/* One thread's stack block (stackblock, stackblock_size); addr 0 = none. */
typedef struct nptl_stack_s nptl_stack_t;
struct nptl_stack_s {
  uint64_t addr;
  uint64_t bytes; /* guard page included */
};

typedef struct nptl_stacks_s nptl_stacks_t;
struct nptl_stacks_s {
  sim_kernel_t *kernel;
  uint64_t      page;               /* OS page */
  uint64_t      stack_size;         /* __default_pthread_attr stacksize */
  uint64_t      thread_stack_pages; /* the program's own frames, OS pages */
  uint64_t      tls_static_bytes;   /* the TCB and static TLS, stacktop's
                                       distance from the block's top */
  nptl_stack_t *cache;              /* GL (dl_stack_cache): oldest first, the
                                       list head is the end */
  uint32_t ncache, cache_cap;
  uint64_t cache_actsize; /* GL (dl_stack_cache_actsize) */
};

/* Validates the options (the stack must hold a page, the TCB and static
 * TLS, 4096 bytes more and the frame pages: pthread_early_init.h:46-50,
 * allocatestack.c:351-356); model names the model in the message.
 * allocator_tls_bytes: what a preloaded allocator's own thread-local
 * storage adds to the static TLS (0 for glibc's malloc), which moves every
 * thread's stacktop down by as much. */
as_status_t nptl_stacks_init(nptl_stacks_t *ns, sim_kernel_t *kernel,
                             uint64_t stack_size, uint64_t thread_stack_pages,
                             uint64_t allocator_tls_bytes, const char *model,
                             as_err_t *err);
void        nptl_stacks_fini(nptl_stacks_t *ns);

/* allocate_stack for a new thread: *st receives its block. */
as_status_t nptl_stack_acquire(nptl_stacks_t *ns, nptl_stack_t *st,
                               as_err_t *err);
/* A call from the thread's start routine whose deepest frame lies depth
 * bytes below stacktop (an allocator's own first-call path): the stack
 * pages it writes (a no-op for the main thread, st->addr 0). */
as_status_t nptl_stack_call(nptl_stacks_t *ns, const nptl_stack_t *st,
                            uint64_t depth, as_err_t *err);
/* Thread exit and join: the block goes to the stack cache (a no-op for
 * st->addr 0); *st is cleared. */
as_status_t nptl_stack_release(nptl_stacks_t *ns, nptl_stack_t *st,
                               as_err_t *err);

/* The heap map of a running thread's stack (mechanism glibc.thread_stack)
 * and of the stack cache (glibc.stack_cache): each block a level-0 unit
 * with one level-1 region (model_walk).  The mechanism rows are in the
 * glibc model's table: nptl is glibc's, whatever malloc the program uses. */
as_status_t nptl_stack_walk(const nptl_stack_t *st, model_region_fn fn,
                            void *user, as_err_t *err);
as_status_t nptl_stacks_walk_cache(const nptl_stacks_t *ns, model_region_fn fn,
                                   void *user, as_err_t *err);

#endif
