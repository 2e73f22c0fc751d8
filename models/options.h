/* models/options.h -- "knob=value,..." parsing against per-model tables.
 *
 * Each model has one table whose rows hold the real knob's name, kind,
 * default, unit and source citation; the parser, `allocsim models` and the
 * run's provenance are all generated from it (mimalloc's options table).
 * An unknown knob is an error listing the known ones.
 */
#ifndef ALLOCSIM_OPTIONS_H
#define ALLOCSIM_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../sim/status.h"

typedef enum model_option_kind_e {
  OPT_U64,   /* unsigned integer */
  OPT_I64,   /* signed integer (jemalloc's -1 = never) */
  OPT_BYTES, /* unsigned with optional K/M/G/KiB/MiB/GiB suffix */
  OPT_BOOL,  /* true/false/1/0/yes/no */
  OPT_ENUM   /* one of the '|'-separated words in choices */
} model_option_kind_t;

typedef struct model_option_s model_option_t;
struct model_option_s {
  const char         *name;          /* the real knob's name */
  model_option_kind_t kind;
  const char         *default_value; /* as the user would type it */
  const char         *unit;          /* "bytes", "ms", "" */
  const char         *choices;       /* OPT_ENUM: "3.11|3.14" */
  const char         *source;        /* where the default comes from */
  const char         *help;          /* one line */
};

#define MODEL_OPTS_MAX 24
typedef struct model_opts_s model_opts_t;
struct model_opts_s {
  const model_option_t *table;                   /* the model's table */
  size_t                count;                   /* rows in table */
  int64_t               num[MODEL_OPTS_MAX];     /* value of numeric kinds,
                                                    enum: index in choices */
  bool                  set[MODEL_OPTS_MAX];     /* given explicitly */
  char                  text[MODEL_OPTS_MAX][32];/* value as written */
};

/* Fills *out with table's defaults, then applies "k=v,k=v" (may be NULL or
 * empty).  model names the model in error messages. */
as_status_t model_opts_parse(const char *model, const model_option_t *table,
                             const char *assignments, model_opts_t *out,
                             as_err_t *err);

/* Value of a row by name; the name must be in the table (asserted). */
int64_t     model_opts_i64(const model_opts_t *o, const char *name);
uint64_t    model_opts_u64(const model_opts_t *o, const char *name);
bool        model_opts_bool(const model_opts_t *o, const char *name);
const char *model_opts_text(const model_opts_t *o, const char *name);
bool        model_opts_was_set(const model_opts_t *o, const char *name);

/* "k=v,k=v" for every row, in table order. */
void model_opts_format(const model_opts_t *o, char *buf, size_t len);

/* Parses a byte count with optional suffix (K, KiB, M, MiB, G, GiB; powers
 * of 1024) into *out; false if malformed or overflowing. */
bool opt_parse_bytes(const char *s, size_t len, uint64_t *out);

#endif
