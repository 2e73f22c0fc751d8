/* traces/workload.c -- the registry of synthetic workloads and the parser
 * that turns "--key value" / "--key=value" arguments into a workload source.
 *
 * The registry is a static const array, searched by name, with no mutable
 * global list (the same shape as models/registry.c).  Adding a workload is
 * one extern line and one array entry.  The parser checks every argument
 * against the workload's option table: an unknown option, an option given
 * twice, a missing value or a missing required option is AS_EUSAGE with a
 * message that names the option; values themselves are checked by the
 * workload's open(), which names the option it rejects.
 */
#include "workload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Registry ----------------------------------------------------------- */

#include "wl_survivors.h"   /* workload_survivors */
#include "wl_spike.h"       /* workload_spike */
#include "wl_labs.h"        /* workload_lab_sizes, _cliff, _brk, ... */
#include "wl_webworker.h"   /* workload_webworker */
#include "wl_jemalloc.h"    /* workload_decay, _lab_decay */
#include "wl_lab_purge.h"   /* workload_lab_purge */
#include "wl_churn_purge.h" /* workload_churn_purge */
#include "wl_churn.h"       /* workload_churn */

static const workload_def_t *const registry[] = {
    &workload_survivors,  &workload_spike,     &workload_lab_sizes,
    &workload_lab_cliff,  &workload_lab_brk,   &workload_lab_mmap_threshold,
    &workload_lab_arenas, &workload_webworker, &workload_decay,
    &workload_lab_decay,  &workload_lab_purge, &workload_churn_purge,
    &workload_churn,
};

const workload_def_t *workload_find(const char *name) {
  if (name == NULL)
    return NULL;
  for (size_t i = 0; i < sizeof registry / sizeof registry[0]; i++)
    if (strcmp(registry[i]->name, name) == 0)
      return registry[i];
  return NULL;
}

const workload_def_t *const *workload_registry(size_t *count) {
  *count = sizeof registry / sizeof registry[0];
  return registry;
}

/* ---- Argument parsing --------------------------------------------------- */

/* Writes "--a, --b, ..." for def's options into buf. */
static void known_options(const workload_def_t *def, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (const workload_option_t *o = def->options; o->name && used < len; o++)
    used += (size_t)snprintf(buf + used, len - used, "%s--%s",
                             o == def->options ? "" : ", ", o->name);
}

as_status_t workload_open_argv(const workload_def_t *def, int argc, char **argv,
                               trace_source_t **out, as_err_t *err) {
  *out = NULL;
  size_t nopts = 0;
  while (def->options[nopts].name != NULL)
    nopts++;
  const char **values = calloc(nopts + 1, sizeof *values);
  if (values == NULL)
    return as_err_set(err, AS_ENOMEM, "%s: out of memory", def->name);

  as_status_t rc = AS_OK;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
      rc = as_err_set(err, AS_EUSAGE,
                      "%s: expected an option such as --%s, got '%s'",
                      def->name, nopts ? def->options[0].name : "help", arg);
      goto done;
    }
    const char *name = arg + 2;
    const char *eq = strchr(name, '=');
    size_t      nlen = eq ? (size_t)(eq - name) : strlen(name);
    size_t      row = nopts;
    for (size_t r = 0; r < nopts; r++)
      if (strlen(def->options[r].name) == nlen &&
          strncmp(def->options[r].name, name, nlen) == 0)
        row = r;
    if (row == nopts) {
      char known[512];
      known_options(def, known, sizeof known);
      rc = as_err_set(err, AS_EUSAGE, "%s: unknown option '--%.*s' (known: %s)",
                      def->name, (int)nlen, name, known);
      goto done;
    }
    if (values[row] != NULL) {
      rc = as_err_set(err, AS_EUSAGE, "%s: --%s given twice", def->name,
                      def->options[row].name);
      goto done;
    }
    if (eq != NULL)
      values[row] = eq + 1;
    else if (i + 1 < argc)
      values[row] = argv[++i];
    else {
      rc = as_err_set(err, AS_EUSAGE, "%s: --%s needs a value (%s)", def->name,
                      def->options[row].name, def->options[row].help);
      goto done;
    }
  }
  for (size_t r = 0; r < nopts; r++) {
    if (values[r] != NULL)
      continue;
    if (def->options[r].default_value == NULL) {
      rc = as_err_set(err, AS_EUSAGE, "%s: --%s is required (%s)", def->name,
                      def->options[r].name, def->options[r].help);
      goto done;
    }
    values[r] = def->options[r].default_value;
  }
  rc = def->open(values, out, err);
done:
  free(values);
  return rc;
}

as_status_t workload_open_line(const char *line, trace_source_t **out,
                               as_err_t *err) {
  enum { MAX_WORDS = 64 };
  char *copy = strdup(line);
  char *argv[MAX_WORDS];
  int   argc = 0;
  *out = NULL;
  if (copy == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory");
  for (char *tok = strtok(copy, " \t"); tok != NULL && argc < MAX_WORDS;
       tok = strtok(NULL, " \t"))
    argv[argc++] = tok;
  const workload_def_t *def = argc > 0 ? workload_find(argv[0]) : NULL;
  as_status_t           rc;
  if (def == NULL)
    rc = as_err_set(err, AS_EUSAGE, "'%s' is not a known workload",
                    argc > 0 ? argv[0] : "");
  else
    rc = workload_open_argv(def, argc - 1, argv + 1, out, err);
  free(copy);
  return rc;
}
