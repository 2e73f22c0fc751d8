/* cli/target.c -- the trace file or recorded run that explain, advise and
 * report work on (cli.h). */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/record.h"
#include "../traces/trace_io.h"

as_status_t cli_target_open(cli_target_t *t, const char *what, const char *db,
                            as_err_t *err) {
  memset(t, 0, sizeof *t);
  char     *end;
  long long run_id = strtoll(what, &end, 10);
  if (db == NULL || *end != '\0' || run_id <= 0) {
    t->path = what;
    return AS_OK;
  }
  if (access(db, F_OK) != 0)
    return as_err_set(err, AS_EINVAL, "%s: no such store", db);
  as_status_t rc = store_open(db, &t->store, err);
  if (rc == AS_OK)
    rc = store_read_run(t->store, run_id, &t->rec, err);
  if (rc == AS_OK)
    rc = run_meta_read(t->store, run_id, &t->meta, err);
  return rc;
}

as_status_t cli_target_source(void *user, trace_source_t **src,
                              as_err_t *err) {
  cli_target_t *t = user;
  if (t->path != NULL)
    return trace_open(t->path, src, err);
  bool is_trace;
  return run_open_source(t->store, &t->rec, &t->meta, src, t->desc,
                         sizeof t->desc, &is_trace, err);
}

static const char *trace_meta_lookup(void *user, const char *key) {
  return trace_meta_get(user, key);
}

as_status_t cli_target_specs(cli_target_t *t, char *model, size_t model_len,
                             char *libc, size_t libc_len, as_err_t *err) {
  if (t->store != NULL)
    return record_run_specs(run_meta_get, &t->meta, model, model_len, libc,
                            libc_len, err);
  trace_source_t *src;
  as_status_t     rc = trace_open(t->path, &src, err);
  if (rc != AS_OK)
    return rc;
  rc = record_run_specs(trace_meta_lookup, &src->meta, model, model_len, libc,
                        libc_len, err);
  trace_source_close(src);
  return rc;
}

void cli_target_close(cli_target_t *t) {
  run_meta_free(&t->meta);
  if (t->store != NULL)
    store_close(t->store);
  t->store = NULL;
}

const char *cli_target_name(const cli_target_t *t) {
  return t->path != NULL ? t->path : t->desc;
}
