/* traces/addr_ids.h -- addresses to dense, recycled object ids, for
 * everything that turns an address-keyed log into a trace (the capture
 * converter in analysis/record.c, the mtrace importer).
 *
 * Types:
 *   addr_ids_map_t  open-addressing hash map, 64-bit key -> 64-bit value
 *   addr_ids_t      address -> object id, ids handed out lowest free first
 *
 * Trace ids must stay below the peak number of live objects (traces/event.h),
 * so a freed id goes back to a min-heap and the next new object takes the
 * lowest one.  Memory grows with live objects, never with log length.  The
 * map is also useful on its own (record.c keys threads by kernel tid).
 */
#ifndef ALLOCSIM_ADDR_IDS_H
#define ALLOCSIM_ADDR_IDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Linear probing with backward-shift deletion (no tombstones).  Key 0 marks
 * an empty slot, so an entry for key 0 lives in zero_val.  A slot holds its
 * key and value side by side: one cache miss per probe, not two (a
 * capture's converter does one lookup per free on tables of millions). */
typedef struct addr_ids_slot_s addr_ids_slot_t;
struct addr_ids_slot_s {
  uint64_t key; /* 0 = empty */
  uint64_t val;
};
typedef struct addr_ids_map_s addr_ids_map_t;
struct addr_ids_map_s {
  addr_ids_slot_t *slot;
  size_t           cap; /* slots, a power of two (0 before the first
                           put) */
  size_t   n;           /* entries in slot[] (not counting key 0) */
  bool     has_zero;    /* key 0 is present */
  uint64_t zero_val;    /* its value */
};

/* True and *v = the value if k is present; false otherwise. */
bool addr_ids_map_get(const addr_ids_map_t *m, uint64_t k, uint64_t *v);
/* Inserts k -> v or replaces k's value; false only when out of memory (the
 * map is then unchanged). */
bool addr_ids_map_put(addr_ids_map_t *m, uint64_t k, uint64_t v);
/* Removes k; true and *v = its value (v may be NULL) if it was present. */
bool addr_ids_map_del(addr_ids_map_t *m, uint64_t k, uint64_t *v);
/* Entries present. */
size_t addr_ids_map_count(const addr_ids_map_t *m);
/* Frees the map's memory and leaves it empty and reusable. */
void addr_ids_map_free(addr_ids_map_t *m);

/* The mapper.  A zeroed struct is an empty mapper.  Invariants: every id
 * below next is either mapped (or held by the caller after detach) or in
 * heap[]; heap_cap >= next, so releasing an id never allocates. */
typedef struct addr_ids_s addr_ids_t;
struct addr_ids_s {
  addr_ids_map_t addr;     /* address -> object id */
  uint64_t      *heap;     /* released ids, a min-heap */
  size_t         n;        /* ids in heap */
  size_t         heap_cap; /* capacity of heap, >= next */
  uint64_t       next;     /* lowest id never handed out */
  uint64_t       live;     /* ids handed out and not released */
  uint64_t       peak;     /* max of live */
};

/* True and *id = addr's object id if addr is mapped. */
bool addr_ids_lookup(const addr_ids_t *m, uint64_t addr, uint64_t *id);
/* Maps addr, which should not be mapped, to the lowest free id, stored in
 * *id.  (Were addr mapped, its old id would be released first, so damaged
 * input cannot leak ids.)  False only when out of memory. */
bool addr_ids_add(addr_ids_t *m, uint64_t addr, uint64_t *id);
/* Unmaps addr and releases its id for reuse; true and *id = that id (id
 * may be NULL) if addr was mapped, false if not. */
bool addr_ids_remove(addr_ids_t *m, uint64_t addr, uint64_t *id);
/* Unmaps addr but keeps its id handed out (a realloc in flight): the caller
 * later attaches it to the new address or releases it. */
bool addr_ids_detach(addr_ids_t *m, uint64_t addr, uint64_t *id);
/* Maps addr, which should not be mapped (as for addr_ids_add), to id, which
 * the caller holds from addr_ids_detach; false only when out of memory. */
bool addr_ids_attach(addr_ids_t *m, uint64_t addr, uint64_t id);
/* Returns a held id (from addr_ids_detach) to the free ids.  Never fails. */
void addr_ids_release(addr_ids_t *m, uint64_t id);
/* Frees the mapper's memory and leaves it empty and reusable. */
void addr_ids_free(addr_ids_t *m);

#endif
