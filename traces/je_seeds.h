/* traces/je_seeds.h -- the addresses that seed jemalloc 5.3.0's
 * randomness, read by a process that runs jemalloc (the oracle's replayer
 * before the replay's first call, at each thread it creates and for each
 * arena at the end; the capture recorder as it starts).
 *
 * jemalloc seeds a thread's prng with the address of the thread's tsd
 * (5.3.0 src/tsd.c:222-232 tsd_prng_state_init) and each decay's jitter
 * with the address of its decay_t (src/decay.c:40 decay_reinit).  The prng
 * decides which allocation fires a decay tick and where a large object
 * starts in its extent (cache_oblivious); the jitter, where each decay
 * epoch's deadline falls (src/decay.c:17-28 decay_deadline_init).  Under
 * ASLR both addresses change from run to run; the jemalloc model takes
 * them as options (prng_seed, jitter_seed), and a run that records them
 * is replayed with the real ones.
 *   - The tsd is the calling thread's instance of libjemalloc's TLS block,
 *     which holds tsd_tls alone (its PT_TLS segment is sizeof (tsd_t),
 *     2,632 bytes in Debian's 5.3.0): dl_iterate_phdr's dlpi_tls_data.
 *   - Arena 0's decay_dirty lies in the arena after pa_shard.nactive, whose
 *     address mallctl("experimental.arenas.0.pactivep") gives (src/ctl.c:
 *     4160-4185; pa_shard_t, include/jemalloc/internal/pa.h:77-96, holds
 *     the pac_t whose decay_dirty comes before decay_muzzy, pac.h:114-115).
 *     decay_reinit sets jitter_state to the decay's address and each
 *     deadline drawn advances it by the LCG (prng.h:35-36), so the word at
 *     q is a jitter_state if stepping it back a few times gives an address
 *     a little below q: the decay_t's.  A decay with decay_ms <= 0 draws
 *     no jitter and is not found (nor needed).
 *   - Another thread's tsd and another arena's decay_dirty lie at the same
 *     offsets from that thread's thread pointer and that arena's nactive
 *     (je_seeds_thread_tsd, je_seeds_arena_decay).
 * Header-only, with no allocation.
 */
#ifndef ALLOCSIM_JE_SEEDS_H
#define ALLOCSIM_JE_SEEDS_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "proc_maps.h"

/* include/jemalloc/internal/prng.h:35-36 PRNG_A_64, PRNG_C_64 */
#define JE_SEEDS_LCG_A UINT64_C(6364136223846793005)
#define JE_SEEDS_LCG_C UINT64_C(1442695040888963407)
/* How far past pactivep the search looks, how far below a jitter_state
 * its decay_t may start (the mutex and four fields before it), and how
 * many deadlines may have been drawn since decay_reinit. */
#define JE_SEEDS_WINDOW     ((uintptr_t)256 << 10)
#define JE_SEEDS_MAX_OFFSET 1024
#define JE_SEEDS_MAX_STEPS  64

typedef int (*je_seeds_mallctl_fn)(const char *, void *, size_t *, void *,
                                   size_t);

static inline int je_seeds_module(struct dl_phdr_info *info, size_t size,
                                  void *tsd) {
  (void)size;
  if (info->dlpi_name == NULL ||
      strstr(info->dlpi_name, "libjemalloc") == NULL ||
      info->dlpi_tls_data == NULL)
    return 0;
  *(uint64_t *)tsd = (uint64_t)(uintptr_t)info->dlpi_tls_data;
  return 1;
}

/* The calling thread's tsd address (its prng seed), 0 if no libjemalloc
 * with thread-local data is loaded. */
static inline uint64_t je_seeds_tsd(void) {
  uint64_t tsd = 0;
  dl_iterate_phdr(je_seeds_module, &tsd);
  return tsd;
}

/* The inverse of the LCG's multiplier modulo 2^64 (Newton's iteration:
 * each step doubles the bits that are right; an odd A is right in 3). */
static inline uint64_t je_seeds_inverse_a(void) {
  uint64_t x = JE_SEEDS_LCG_A;
  for (int i = 0; i < 5; i++)
    x *= 2 - JE_SEEDS_LCG_A * x;
  return x;
}

typedef struct je_seeds_mapping_s je_seeds_mapping_t;
struct je_seeds_mapping_s {
  uintptr_t addr, end;
};

static inline bool je_seeds_holds(const char *line, void *ctx) {
  je_seeds_mapping_t *m = ctx;
  const char         *dash = strchr(line, '-'), *perms = strchr(line, ' ');
  if (dash == NULL || perms == NULL || proc_maps_hex(line) > m->addr ||
      proc_maps_hex(dash + 1) <= m->addr)
    return false;
  m->end = perms[1] == 'r' ? (uintptr_t)proc_maps_hex(dash + 1) : 0;
  return true;
}

/* The end of the readable mapping that holds addr, 0 if none or
 * unreadable.  buf (len bytes) is scratch. */
static inline uintptr_t je_seeds_mapping_end(uintptr_t addr, char *buf,
                                             size_t len) {
  je_seeds_mapping_t m = {addr, 0};
  proc_maps_find(buf, len, je_seeds_holds, &m);
  return m.end;
}

/* The address of the first decay_t in [from, end) whose jitter_state has
 * been advanced 1 to JE_SEEDS_MAX_STEPS times since its reinit, 0 if
 * none: a word x at q such that stepping x back k times gives an 8-byte
 * aligned address in [from, q), at most JE_SEEDS_MAX_OFFSET below q. */
static inline uint64_t je_seeds_search(uintptr_t from, uintptr_t end) {
  uint64_t inv = je_seeds_inverse_a();
  for (uintptr_t q = from; q + 8 <= end; q += 8) {
    uint64_t x;
    memcpy(&x, (const void *)q, 8);
    for (int k = 0; k < JE_SEEDS_MAX_STEPS; k++) {
      x = (x - JE_SEEDS_LCG_C) * inv; /* one LCG step back */
      if (x % 8 == 0 && x < q && q - x <= JE_SEEDS_MAX_OFFSET && x >= from)
        return x;
    }
  }
  return 0;
}

/* The tsd of a thread whose thread pointer is tp, from the calling
 * thread's tsd (my_tsd) and thread pointer (my_tp).  libjemalloc's TLS
 * block is static (initial-exec by default, 5.3.0 configure.ac:2389,
 * include/jemalloc/internal/tsd_tls.h:6; loaded with the program), so it
 * lies at the same offset from every thread's thread pointer, and
 * glibc's pthread_t is the struct pthread the thread pointer points at
 * (glibc 2.36 sysdeps/x86_64/nptl/tls.h:114 TLS_TCB_AT_TP, :178-181
 * THREAD_SELF).  Checked on a static TLS variable in test_je_seeds, and
 * with Debian's libjemalloc2 against three new threads' own
 * dl_iterate_phdr. */
static inline uint64_t je_seeds_thread_tsd(uint64_t my_tsd, uintptr_t my_tp,
                                           uintptr_t tp) {
  return my_tsd - my_tp + tp;
}

/* Where arena's pa_shard.nactive is (0 for an arena that does not exist:
 * EFAULT, src/ctl.c:4177-4190). */
static inline uintptr_t je_seeds_pactive(je_seeds_mallctl_fn mallctl,
                                         unsigned            arena) {
  char    name[48];
  size_t *pactive = NULL;
  size_t  sz = sizeof pactive;
  snprintf(name, sizeof name, "experimental.arenas.%u.pactivep", arena);
  if (mallctl == NULL || mallctl(name, &pactive, &sz, NULL, 0) != 0)
    return 0;
  return (uintptr_t)pactive;
}

/* Arena arena's decay_dirty address, from arena 0's (decay0): every arena
 * is the same arena_t, so its decay lies at arena 0's offset from its
 * nactive.  0 if either arena does not exist. */
static inline uint64_t je_seeds_arena_decay(je_seeds_mallctl_fn mallctl,
                                            unsigned arena, uint64_t decay0) {
  uintptr_t mine = je_seeds_pactive(mallctl, arena);
  uintptr_t zero = je_seeds_pactive(mallctl, 0);
  return mine == 0 || zero == 0 || decay0 == 0 ? 0 : decay0 - zero + mine;
}

/* Arena 0's decay_dirty address (its jitter seed), 0 if not found. */
static inline uint64_t je_seeds_decay(je_seeds_mallctl_fn mallctl, char *buf,
                                      size_t len) {
  uintptr_t pactive = je_seeds_pactive(mallctl, 0);
  if (pactive == 0)
    return 0;
  uintptr_t from = pactive & ~(uintptr_t)7;
  uintptr_t end = je_seeds_mapping_end(from, buf, len);
  if (end == 0)
    return 0;
  if (end - from > JE_SEEDS_WINDOW)
    end = from + JE_SEEDS_WINDOW;
  return je_seeds_search(from, end);
}

#endif
