/* analysis/explain_sites.c -- memory by call site (explain.h,
 * explain_by_site; the rule is in docs/capture.md, "Call sites").
 *
 * Two walks: the model's heap map gives each top-level unit (pymalloc
 * arena, glibc heap or mmapped chunk, jemalloc extent, mimalloc segment)
 * its resident bytes that are not live bytes, the memory the allocator
 * keeps there; then the live objects (traces/sites.h) are placed in their
 * units (model_locate) and each unit's kept bytes are split among the sites
 * of its objects in proportion to their sizes.  A unit with no live object
 * pins nothing any site allocated: its bytes are reported apart
 * (unpinned_bytes).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/grow.h"
#include "../traces/sites.h"
#include "explain.h"
#include "symbolize.h"

typedef struct sunit_s sunit_t;
struct sunit_s {
  sim_addr_t addr;
  uint64_t   bytes;
  uint64_t   kept;      /* resident bytes that are not live bytes */
  uint64_t   live_size; /* sizes of the live objects the trace places here */
};

typedef struct sacc_s sacc_t;
struct sacc_s {
  uint64_t site, live, objects;
  double   retained;
};

typedef struct sctx_s sctx_t;
struct sctx_s {
  const sim_session_t *s;
  uint64_t             page;
  sunit_t             *unit; /* ascending addresses */
  size_t               nunits, cap;
  sacc_t              *acc; /* by site id */
  size_t               acc_cap;
  bool                 locate;
  bool                 second; /* the walk over objects that shares */
};

static uint64_t resident(const sctx_t *c, sim_addr_t addr, uint64_t bytes) {
  uint64_t   total = 0;
  sim_addr_t end = addr + bytes;
  for (sim_addr_t p = addr & ~(c->page - 1); p < end; p += c->page) {
    sim_owner_t owner;
    if (!sim_kernel_resident_owner(c->s->kernel, p, &owner))
      continue;
    sim_addr_t lo = p > addr ? p : addr;
    sim_addr_t hi = p + c->page < end ? p + c->page : end;
    total += hi - lo;
  }
  return total;
}

static as_status_t on_region(void *user, const model_region_t *r,
                             as_err_t *err) {
  sctx_t *c = user;
  if (r->level == 0) {
    sunit_t *v = as_grow(c->unit, &c->cap, c->nunits + 1, sizeof *v, 64);
    if (v == NULL)
      return as_err_set(err, AS_ENOMEM, "explain: out of memory");
    c->unit = v;
    c->unit[c->nunits++] = (sunit_t){.addr = r->addr, .bytes = r->bytes};
    return AS_OK;
  }
  if (c->nunits == 0)
    return AS_OK;
  uint64_t res = resident(c, r->addr, r->bytes);
  uint64_t live = r->live_bytes < res ? r->live_bytes : res;
  c->unit[c->nunits - 1].kept += res - live;
  return AS_OK;
}

static int by_addr(const void *x, const void *y) {
  const sunit_t *a = x, *b = y;
  return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static size_t unit_at(const sctx_t *c, sim_addr_t addr) {
  size_t lo = 0, hi = c->nunits;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->unit[mid].addr <= addr)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == 0 || addr >= c->unit[lo - 1].addr + c->unit[lo - 1].bytes)
    return SIZE_MAX;
  return lo - 1;
}

static as_status_t on_object(void *user, uint64_t id, uint64_t site,
                             uint64_t size, as_err_t *err) {
  sctx_t    *c = user;
  sim_addr_t addr;
  size_t     u = c->locate && model_locate(c->s->model, id, &addr)
                     ? unit_at(c, addr)
                     : SIZE_MAX;
  if (!c->second) {
    if (u != SIZE_MAX)
      c->unit[u].live_size += size;
    return AS_OK;
  }
  if (site >= c->acc_cap) {
    size_t  old = c->acc_cap;
    sacc_t *v = as_grow(c->acc, &c->acc_cap, (size_t)site + 1, sizeof *v, 64);
    if (v == NULL)
      return as_err_set(err, AS_ENOMEM, "explain: out of memory");
    memset(v + old, 0, (c->acc_cap - old) * sizeof *v);
    c->acc = v;
  }
  sacc_t *a = &c->acc[site];
  a->site = site;
  a->live += size;
  a->objects++;
  if (u != SIZE_MAX && c->unit[u].live_size != 0)
    a->retained +=
        (double)c->unit[u].kept * (double)size / (double)c->unit[u].live_size;
  return AS_OK;
}

static int by_retained(const void *x, const void *y) {
  const sacc_t *a = x, *b = y;
  if (a->retained != b->retained)
    return a->retained < b->retained ? 1 : -1;
  if (a->live != b->live)
    return a->live < b->live ? 1 : -1;
  return a->site < b->site ? -1 : a->site > b->site;
}

/* Symbolises site's frames into e. */
static void describe(const trace_source_t *sites, symbolizer_t *z,
                     explain_site_t *e) {
  uint32_t             n = 0;
  const trace_frame_t *f =
      e->site != 0 ? trace_sites_frames(sites, e->site, &n) : NULL;
  e->nframes = f != NULL ? n : 0;
  for (uint32_t i = 0; i < e->nframes; i++) {
    const char *path = trace_sites_module(sites, f[i].module);
    symbolize_frame(z, path, f[i].offset, e->frame[i], sizeof e->frame[i]);
    if (i == 0)
      symbolize_function(z, path, f[i].offset, e->function, sizeof e->function);
  }
}

as_status_t explain_by_site(const sim_session_t *s, const trace_source_t *sites,
                            size_t top, explain_result_t *out, as_err_t *err) {
  sctx_t c = {.s = s,
              .page = sim_kernel_page_size(s->kernel),
              .locate = model_has_locate(s->model)};
  out->by_site = true;
  out->has_sites = trace_sites_any(sites);
  as_status_t rc = model_walk(s->model, on_region, &c, err);
  if (rc == AS_OK) {
    if (c.nunits > 1) /* qsort's array may not be NULL, even empty */
      qsort(c.unit, c.nunits, sizeof *c.unit, by_addr);
    rc = trace_sites_each_live(sites, on_object, &c, err);
  }
  if (rc == AS_OK) {
    c.second = true;
    rc = trace_sites_each_live(sites, on_object, &c, err);
  }
  symbolizer_t *z = NULL;
  if (rc == AS_OK && (z = symbolizer_new()) == NULL)
    rc = as_err_set(err, AS_ENOMEM, "explain: out of memory");
  if (rc == AS_OK) {
    for (size_t u = 0; u < c.nunits; u++)
      if (c.unit[u].live_size == 0)
        out->unpinned_bytes += c.unit[u].kept;
    size_t n = 0;
    for (size_t i = 0; i < c.acc_cap; i++)
      if (c.acc[i].objects != 0)
        c.acc[n++] = c.acc[i];
    if (n > 1)
      qsort(c.acc, n, sizeof *c.acc, by_retained);
    out->sites_total = n;
    if (top == 0)
      top = 10;
    out->nsites = n < top ? n : top;
    out->sites = calloc(out->nsites ? out->nsites : 1, sizeof *out->sites);
    if (out->sites == NULL)
      rc = as_err_set(err, AS_ENOMEM, "explain: out of memory");
    for (size_t i = 0; rc == AS_OK && i < out->nsites; i++) {
      explain_site_t *e = &out->sites[i];
      e->site = c.acc[i].site;
      e->live_bytes = c.acc[i].live;
      e->live_objects = c.acc[i].objects;
      e->retained_bytes = (uint64_t)(c.acc[i].retained + 0.5);
      describe(sites, z, e);
    }
  }
  symbolizer_free(z);
  free(c.unit);
  free(c.acc);
  return rc;
}

void explain_result_release(explain_result_t *r) {
  free(r->sites);
  r->sites = NULL;
  r->nsites = 0;
}
