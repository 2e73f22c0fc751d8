/* models/nptl_stacks.c -- glibc 2.36 nptl thread stacks (see the header).
 *
 * nptl_stacks_t, x86-64.  NPTL_TCB_BYTES = sizeof (struct pthread) =
 * TLS_TCB_SIZE (sysdeps/x86_64/nptl/tls.h:110), measured on Debian
 * 2.36-9+deb12u14 as stack top - pthread_self () in a thread.
 * NPTL_TLS_STATIC_BYTES = __nptl_tls_static_size_for_stack () (nptl/
 * nptl-stack.h:56-59: GLRO (dl_tls_static_size) rounded to its 64-byte
 * alignment; it includes the TCB and the static TLS surplus), measured as
 * 4224 with _dl_get_tls_static_info in a program linked like the labs
 * (libc only); a program loading modules with more static TLS has more, and
 * a preloaded allocator's own TLS adds to it (nptl_stacks_init).
 */
#include "nptl_stacks.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define NPTL_TCB_BYTES           2368
#define NPTL_TLS_STATIC_BYTES    4224
#define NPTL_MINIMAL_REST_STACK  4096  /* allocatestack.c:45 */
#define NPTL_STACK_MIN           16384 /* bits/pthread_stack_min.h:20 */
#define NPTL_STACK_CACHE_MAXSIZE (UINT64_C(40) << 20) /* nptl-stack.c:23 */

/* How many frame pages nptl_stack_acquire can write in a stack of
 * stack_size bytes: from the page holding stacktop - 1 down to the first
 * page above the guard page (offsets from the block's start, guard
 * included). */
static uint64_t frame_pages_fit(uint64_t stack_size, uint64_t page,
                                uint64_t tls_static_bytes) {
  uint64_t block = stack_size + page;
  uint64_t stacktop = block - tls_static_bytes;
  uint64_t highest = (stacktop - 1) & ~(page - 1);
  return highest < page ? 0 : (highest - page) / page + 1;
}

as_status_t nptl_stacks_init(nptl_stacks_t *ns, sim_kernel_t *kernel,
                             uint64_t stack_size, uint64_t thread_stack_pages,
                             uint64_t allocator_tls_bytes, const char *model,
                             as_err_t *err) {
  memset(ns, 0, sizeof *ns);
  ns->kernel = kernel;
  ns->page = sim_kernel_page_size(kernel);
  ns->tls_static_bytes = NPTL_TLS_STATIC_BYTES + allocator_tls_bytes;
  ns->thread_stack_pages = thread_stack_pages;
  /* pthread_early_init.h:52: rounded up to a page; allocatestack.c:332
   * then aligns down to GLRO (dl_tls_static_align) (64, a no-op here). */
  ns->stack_size = (stack_size + ns->page - 1) & ~(ns->page - 1);
  /* pthread_early_init.h:46-50 minstack; allocatestack.c:351-356 EINVAL.
   * The frame pages (nptl_stack_acquire) run down from the page holding
   * stacktop - 1 and must stay above the guard page: with the static TLS
   * over a page, that leaves one page fewer than the stack has. */
  if (ns->stack_size <
          ns->page + ns->tls_static_bytes + NPTL_MINIMAL_REST_STACK ||
      thread_stack_pages >
          frame_pages_fit(ns->stack_size, ns->page, ns->tls_static_bytes))
    return as_err_set(err, AS_EINVAL,
                      "%s: stack_size=%" PRIu64
                      " with thread_stack_pages=%" PRIu64
                      ": the stack must hold a page, the TCB and static "
                      "TLS (%u bytes), 4096 bytes more and the frame pages",
                      model, ns->stack_size, thread_stack_pages,
                      (unsigned)ns->tls_static_bytes);
  return AS_OK;
}

void nptl_stacks_fini(nptl_stacks_t *ns) {
  free(ns->cache);
  ns->cache = NULL;
}

/* allocate_stack (nptl/allocatestack.c:214-573) for a default attribute:
 * the block is stacksize plus a guard page (332-350), taken from the stack
 * cache by get_cached_stack (58-143: the first exact size match from the
 * list head, i.e. the most recently cached, else the smallest larger one
 * unless it is over 4 times the size) or mmapped PROT_NONE (366) with all
 * but the low guard page made writable (guard_position 148-158,
 * setup_stack_prot 163-181, called at 389-397).
 * struct pthread sits at the top (377-380, TLS_TCB_AT_TP, sysdeps/x86_64/
 * nptl/tls.h:110) and is written at creation (400-420, 533-555), and the
 * static TLS init images just below it (_dl_allocate_tls, elf/dl-tls.c:
 * 630-636, into _dl_allocate_tls_init 527-610: memcpy/memset per module;
 * allocatestack.c:140 again for a cached stack).  The thread's frames start at
 * stacktop = pd + 1 - the static TLS size (allocatestack.c:562-565).  The TCB
 * and the used static TLS share the top OS page; stacktop is 128 bytes below
 * it, so the first frame page is the second page from the top (measured: 8 KiB
 * resident per thread). */
as_status_t nptl_stack_acquire(nptl_stacks_t *ns, nptl_stack_t *st,
                               as_err_t *err) {
  uint64_t size = ns->stack_size + ns->page; /* default guardsize: a page
                                                (pthread_early_init.h:54) */
  uint64_t addr = 0;
  int64_t  best = -1;
  for (uint32_t i = ns->ncache; i-- > 0;) { /* list head first */
    uint64_t b = ns->cache[i].bytes;
    if (b >= size && (best < 0 || b < ns->cache[best].bytes)) {
      best = i;
      if (b == size)
        break;
    }
  }
  as_status_t rc;
  if (best >= 0 && ns->cache[best].bytes <= 4 * size) {
    addr = ns->cache[best].addr;
    size = ns->cache[best].bytes;
    ns->cache_actsize -= size;
    memmove(&ns->cache[best], &ns->cache[best + 1],
            (size_t)(ns->ncache - (uint32_t)best - 1) * sizeof *ns->cache);
    ns->ncache--;
  } else {
    /* glibc 2.36 nptl/allocatestack.c:366-367 maps with MAP_STACK, which
     * Linux 6.7+ turns into VM_NOHUGEPAGE: no huge page in a stack. */
    rc = sim_kernel_mmap(ns->kernel, size, ns->page, SIM_PROT_NONE,
                         SIM_OWNER_THREAD_STACK, &addr, err);
    if (rc == AS_OK)
      rc = sim_kernel_mark_stack(ns->kernel, addr, size, err);
    if (rc == AS_OK)
      rc = sim_kernel_mprotect(ns->kernel, addr + ns->page, size - ns->page,
                               SIM_PROT_RW, err);
    if (rc != AS_OK)
      return rc;
  }
  st->addr = addr;
  st->bytes = size;
  uint64_t top = addr + size;
  uint64_t stacktop = top - ns->tls_static_bytes;
  /* TCB + static TLS */
  rc = sim_kernel_touch(ns->kernel, top - NPTL_TCB_BYTES, NPTL_TCB_BYTES, err);
  if (rc == AS_OK && ns->thread_stack_pages > 0) {
    uint64_t lo = ((stacktop - 1) & ~(ns->page - 1)) -
                  (ns->thread_stack_pages - 1) * ns->page;
    rc = sim_kernel_touch(ns->kernel, lo, stacktop - lo, err); /* frames */
  }
  return rc;
}

as_status_t nptl_stack_call(nptl_stacks_t *ns, const nptl_stack_t *st,
                            uint64_t depth, as_err_t *err) {
  if (st->addr == 0 || depth == 0)
    return AS_OK;
  uint64_t stacktop = st->addr + st->bytes - ns->tls_static_bytes;
  uint64_t floor = st->addr + ns->page; /* above the guard page */
  uint64_t lo = stacktop - floor > depth ? stacktop - depth : floor;
  return sim_kernel_touch(ns->kernel, lo, stacktop - lo, err);
}

/* Thread exit and join: start_thread's advise_stack_range (nptl/
 * pthread_create.c:550-552, allocatestack.c:186-207) drops everything more
 * than PTHREAD_STACK_MIN (16384, sysdeps/unix/sysv/linux/bits/
 * pthread_stack_min.h:20) below the exiting frame, then __nptl_deallocate_
 * stack (nptl-stack.c:109-128) queues the block at the cache's list head
 * (queue_stack, 94-107) with its resident pages, and __nptl_free_stacks
 * (56-90) unmaps from the list tail (oldest) until the cache holds at most
 * __nptl_stack_cache_maxsize = 40 MiB (nptl-stack.c:23).  A trace has no
 * join, so exit stands for both. */
as_status_t nptl_stack_release(nptl_stacks_t *ns, nptl_stack_t *st,
                               as_err_t *err) {
  if (st->addr == 0)
    return AS_OK;
  uint64_t addr = st->addr, size = st->bytes;
  st->addr = st->bytes = 0;
  uint64_t sp_page = (addr + size - ns->tls_static_bytes - 1) &
                     ~(ns->page - 1); /* start_thread's frame */
  uint64_t    freesize = sp_page - addr;
  as_status_t rc = AS_OK;
  if (freesize > NPTL_STACK_MIN + ns->page) /* the guard page is never
                                               resident */
    rc = sim_kernel_madvise(ns->kernel, addr + ns->page,
                            freesize - NPTL_STACK_MIN - ns->page,
                            SIM_MADV_DONTNEED, err);
  if (rc != AS_OK)
    return rc;
  if (ns->ncache == ns->cache_cap) {
    uint32_t      n = ns->cache_cap ? 2 * ns->cache_cap : 8;
    nptl_stack_t *c = realloc(ns->cache, (size_t)n * sizeof *c);
    if (c == NULL)
      return as_err_set(err, AS_ENOMEM, "out of memory for the stack cache");
    ns->cache = c;
    ns->cache_cap = n;
  }
  ns->cache[ns->ncache++] = (nptl_stack_t){addr, size};
  ns->cache_actsize += size;
  uint32_t drop = 0; /* __nptl_free_stacks from the oldest */
  while (ns->cache_actsize > NPTL_STACK_CACHE_MAXSIZE && drop < ns->ncache) {
    nptl_stack_t *s = &ns->cache[drop++];
    ns->cache_actsize -= s->bytes;
    rc = sim_kernel_munmap(ns->kernel, s->addr, s->bytes, err);
    if (rc != AS_OK)
      return rc;
  }
  if (drop > 0) {
    ns->ncache -= drop;
    memmove(ns->cache, ns->cache + drop,
            (size_t)ns->ncache * sizeof *ns->cache);
  }
  return AS_OK;
}

as_status_t nptl_stack_walk(const nptl_stack_t *st, model_region_fn fn,
                            void *user, as_err_t *err) {
  if (st->addr == 0)
    return AS_OK;
  return model_walk_single((model_region_t){.addr = st->addr,
                                            .bytes = st->bytes,
                                            .kind = "thread stack",
                                            .mechanism = "glibc.thread_stack",
                                            .state = MODEL_REGION_LIVE},
                           fn, user, err);
}

as_status_t nptl_stacks_walk_cache(const nptl_stacks_t *ns, model_region_fn fn,
                                   void *user, as_err_t *err) {
  as_status_t rc = AS_OK;
  for (uint32_t i = 0; i < ns->ncache && rc == AS_OK; i++)
    rc = model_walk_single((model_region_t){.addr = ns->cache[i].addr,
                                            .bytes = ns->cache[i].bytes,
                                            .kind = "cached stack",
                                            .mechanism = "glibc.stack_cache",
                                            .state = MODEL_REGION_CACHED},
                           fn, user, err);
  return rc;
}
