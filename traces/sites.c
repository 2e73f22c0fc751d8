/* traces/sites.c -- call sites and the site of each live object (see
 * sites.h). */
#include "sites.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../sim/grow.h"

typedef struct obj_s obj_t;
struct obj_s {
  uint64_t size; /* + 1; 0: not live */
  uint32_t site;
};

typedef struct site_def_s site_def_t;
struct site_def_s {
  uint32_t       nframes; /* 0: not defined */
  trace_frame_t *frames;
};

typedef struct sites_src_s sites_src_t;
struct sites_src_s {
  trace_source_t  base; /* must be first */
  trace_source_t *inner;
  obj_t          *obj; /* by id */
  size_t          cap;
  site_def_t     *site; /* by site id */
  size_t          site_cap;
  char          **module; /* by module id: its path, or NULL */
  size_t          module_cap;
  bool            any;
};

static as_status_t nomem(sites_src_t *s, as_err_t *err) {
  return as_err_set(err, AS_ENOMEM, "%s: out of memory for call sites",
                    s->base.name);
}

/* Makes v (of *cap elements of size each) hold index id, zeroing what it
 * adds. */
static bool hold(void **v, size_t *cap, uint64_t id, size_t size) {
  if (id < *cap)
    return true;
  size_t old = *cap;
  void  *nv = id < SIZE_MAX / 2 / size
                  ? as_grow(*v, cap, (size_t)id + 1, size, 256)
                  : NULL;
  if (nv == NULL)
    return false;
  memset((char *)nv + old * size, 0, (*cap - old) * size);
  *v = nv;
  return true;
}

static as_status_t note(sites_src_t *s, const trace_event_t *ev,
                        as_err_t *err) {
  switch ((trace_op_t)ev->op) {
  case TRACE_MODULE:
    if (!hold((void **)&s->module, &s->module_cap, ev->id, sizeof *s->module))
      return nomem(s, err);
    free(s->module[ev->id]);
    if ((s->module[ev->id] = strdup(ev->label ? ev->label : "")) == NULL)
      return nomem(s, err);
    return AS_OK;
  case TRACE_SITE: {
    if (!hold((void **)&s->site, &s->site_cap, ev->id, sizeof *s->site))
      return nomem(s, err);
    site_def_t    *d = &s->site[ev->id];
    trace_frame_t *f = malloc(ev->nframes * sizeof *f);
    if (f == NULL)
      return nomem(s, err);
    memcpy(f, ev->frames, ev->nframes * sizeof *f);
    free(d->frames);
    d->frames = f;
    d->nframes = ev->nframes;
    s->any = true;
    return AS_OK;
  }
  case TRACE_MALLOC:
  case TRACE_CALLOC:
  case TRACE_MEMALIGN:
  case TRACE_REALLOC:
  case TRACE_FREE:
    break;
  default:
    return AS_OK;
  }
  if (!hold((void **)&s->obj, &s->cap, ev->id, sizeof *s->obj))
    return nomem(s, err);
  obj_t *o = &s->obj[ev->id];
  if (ev->op == TRACE_FREE) {
    o->size = 0;
    o->site = 0;
  } else {
    o->size = ev->size + 1;
    /* A realloc without a site keeps the site of the object's birth. */
    if (ev->op != TRACE_REALLOC || ev->site != 0)
      o->site = (uint32_t)ev->site;
  }
  return AS_OK;
}

static as_status_t sites_next(trace_source_t *src, trace_event_t *ev,
                              as_err_t *err) {
  sites_src_t *s = (sites_src_t *)src;
  as_status_t  rc = trace_source_next(s->inner, ev, err);
  return rc == AS_OK ? note(s, ev, err) : rc;
}

static void sites_close(trace_source_t *src) {
  sites_src_t *s = (sites_src_t *)src;
  trace_source_close(s->inner);
  for (size_t i = 0; i < s->site_cap; i++)
    free(s->site[i].frames);
  for (size_t i = 0; i < s->module_cap; i++)
    free(s->module[i]);
  free(s->site);
  free(s->module);
  free(s->obj);
  free(s);
}

static void sites_where(const trace_source_t *src, char *buf, size_t len) {
  trace_source_where(((const sites_src_t *)src)->inner, buf, len);
}

static const trace_source_methods_t sites_methods = {
    .next = sites_next,
    .close = sites_close,
    .where = sites_where,
};

as_status_t trace_sites_wrap(trace_source_t *inner, trace_source_t **out,
                             as_err_t *err) {
  *out = NULL;
  sites_src_t *s =
      trace_source_wrapper_new(inner, &sites_methods, sizeof *s, err);
  if (s == NULL)
    return AS_ENOMEM;
  s->inner = inner;
  *out = &s->base;
  return AS_OK;
}

bool trace_sites_any(const trace_source_t *wrapped) {
  return ((const sites_src_t *)wrapped)->any;
}

const trace_frame_t *trace_sites_frames(const trace_source_t *wrapped,
                                        uint64_t site, uint32_t *n) {
  const sites_src_t *s = (const sites_src_t *)wrapped;
  if (site >= s->site_cap || s->site[site].nframes == 0)
    return NULL;
  *n = s->site[site].nframes;
  return s->site[site].frames;
}

const char *trace_sites_module(const trace_source_t *wrapped, uint64_t id) {
  const sites_src_t *s = (const sites_src_t *)wrapped;
  return id < s->module_cap ? s->module[id] : NULL;
}

as_status_t trace_sites_each_live(const trace_source_t *wrapped,
                                  trace_sites_fn fn, void *user,
                                  as_err_t *err) {
  const sites_src_t *s = (const sites_src_t *)wrapped;
  for (size_t id = 0; id < s->cap; id++)
    if (s->obj[id].size != 0) {
      as_status_t rc = fn(user, id, s->obj[id].site, s->obj[id].size - 1, err);
      if (rc != AS_OK)
        return rc;
    }
  return AS_OK;
}
