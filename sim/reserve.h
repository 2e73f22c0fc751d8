/* sim/reserve.h -- arrays at a stable address that grow without copying:
 * address space reserved once (PROT_NONE, no commit charge), committed in
 * steps as elements are needed, pages resident only once written.
 *
 * Why: the models' record pools and object tables reach hundreds of
 * millions of entries.  Grown by doubling and copying, old and new copies
 * are resident together at each step, so a table of N entries peaks at up
 * to 3N (a glibc heap of 64 B objects cost 1.6 times the heap it
 * simulated); reserved, it costs the pages its entries occupy, and an
 * entry's address never changes.  Fresh entries read as zero.
 *
 *   as_reserve_t r;
 *   if (as_reserve_init(&r, sizeof(rec_t), max_records) != AS_OK) ...
 *   rec_t *v = as_reserve_need(&r, n);   (entries [0, n) usable; v stable)
 *   as_reserve_free(&r);
 *
 * If the machine will not reserve max_elems (a valgrind or ulimit -v cap),
 * init reserves the largest power-of-two fraction it can, down to 64 MiB,
 * and as_reserve_need fails beyond it.  Under a finite RLIMIT_AS a table
 * takes at most an eighth of the address space left (down to 1 MiB), so
 * that the tables made first leave room for the rest. */
#ifndef ALLOCSIM_RESERVE_H
#define ALLOCSIM_RESERVE_H

#include <stddef.h>

#include "status.h"

typedef struct as_reserve_s as_reserve_t;
struct as_reserve_s {
  unsigned char *base;      /* reservation start; NULL before init */
  size_t         elem;      /* bytes per entry */
  size_t         max;       /* entries the reservation holds */
  size_t         reserved;  /* bytes reserved (whole pages) */
  size_t         committed; /* bytes readable and writable from base */
  size_t         populated; /* bytes made resident by as_reserve_populate */
  size_t         wanted;    /* bytes init asked for (reserved may be less) */
};

/* Reserves room for max_elems entries of elem bytes, none committed.
 * AS_ENOMEM if not even 64 MiB of address space can be had. */
as_status_t as_reserve_init(as_reserve_t *r, size_t elem, size_t max_elems);

/* The base with entries [0, n) committed (zero until written), or NULL if
 * n exceeds the reservation or the commit fails (out of memory). */
void *as_reserve_need(as_reserve_t *r, size_t n);

/* Makes entries [0, n) resident before their first write, for a table
 * filled in index order: a batch of pages per madvise(MADV_POPULATE_WRITE)
 * instead of a page fault per page (each fault a trap, dear under a
 * hypervisor).  At most one batch past entry n becomes resident early;
 * batches double from a page to 256 KiB as the table grows.
 * When n jumps more than a batch past what is resident, only the batch
 * from entry n - 1 on is made resident: the pages skipped fault when
 * written, so that a sparse index commits no more than it touches.
 * Entries [0, n) must be committed.  A kernel without the advice (Linux
 * before 5.14) leaves the pages to fault on first write, as before. */
void as_reserve_populate(as_reserve_t *r, size_t n);
/* Makes the whole pages inside [p, p + bytes) resident now, one call
 * instead of a fault per page: for memory about to be written all over
 * (a hash table being filled).  Harmless where the advice is unknown. */
void as_prefault(void *p, size_t bytes);

/* Releases the reservation; r may be zeroed or already freed.  Between
 * as_reserve_reuse_begin and _end the calling thread keeps it instead,
 * its written pages zeroed, for the next as_reserve_init of the same
 * shape. */
void as_reserve_free(as_reserve_t *r);

/* Reuse for a thread that runs simulations one after another (a sweep
 * worker): the tables of one point are resident already for the next, so
 * its first writes cost no page faults.  Faults are traps, dear under a
 * hypervisor: the 64 B survivors points each faulted in a 21 MiB id table.
 * Calls nest (advise inside report): the outermost _end releases what the
 * thread keeps. */
void as_reserve_reuse_begin(void);
void as_reserve_reuse_end(void);

/* Releases what the thread keeps and no table took: called once a
 * simulation has made all its tables, so that a sweep whose points differ
 * (--vary model) holds no other model's tables beside the one running. */
void as_reserve_reuse_trim(void);

/* Resident bytes the threads keep for reuse: memory the next simulations
 * take over rather than add (a --max-memory bound leaves it out). */
size_t as_reserve_kept_bytes(void);

#endif
