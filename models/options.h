/* models/options.h -- "knob=value,..." parsing against per-model tables.
 *
 * Each model declares its knobs once, as an X-macro list whose rows hold the
 * row's key (an enum constant), the real knob's name, kind, default, unit,
 * choices, environment spellings, source citation and help; the enum, the
 * table, the parser, `allocsim models`, the run's provenance and the
 * environment-to-spec mapping all come from that one list (mimalloc's
 * options table).  Values are read by key, so a misspelt key does not
 * compile.  An unknown or repeated knob in a spec is an error.
 *
 *   #define FOO_OPTIONS(X)                                                 \
 *     X(FOO_OPT_DECAY, "decay_ms", OPT_I64, "10000", "ms", NULL,           \
 *       "MALLOC_CONF:decay_ms", "foo 1.0 src/foo.c:12", "what it does")
 *   enum foo_option_e { FOO_OPTIONS(MODEL_OPTION_KEY) FOO_OPT_COUNT };
 *   static const model_option_t foo_options[] = {
 *       FOO_OPTIONS(MODEL_OPTION_ROW) {0}};
 *   ... model_opt_i64(opts, FOO_OPT_DECAY) ...
 *
 * Environment spellings (models/env.c reads them), space-separated:
 *   NAME        a variable whose whole value is the knob's (MALLOC_ARENA_MAX)
 *   LIST:key    key inside a list variable: GLIBC_TUNABLES (k=v:k=v) or
 *               MALLOC_CONF (k:v,k:v)
 *   meta:key    a provenance key of the recorded run (ncpus)
 * Any of them may end in "?KEY=A|B": read only when row KEY, as read so far
 * (rows are read in table order), is A or B -- a library version that
 * knows the variable (mimalloc 2.0.9 reads MIMALLOC_DECOMMIT_DELAY, 2.1+
 * MIMALLOC_PURGE_DELAY, each ignoring the other).
 */
#ifndef ALLOCSIM_OPTIONS_H
#define ALLOCSIM_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../sim/status.h"

typedef enum model_option_kind_e {
  OPT_U64,    /* unsigned integer */
  OPT_I64,    /* signed integer (jemalloc's -1 = never) */
  OPT_BYTES,  /* unsigned with optional K/M/G/KiB/MiB/GiB suffix */
  OPT_BOOL,   /* true/false/1/0/yes/no */
  OPT_ENUM,   /* one of the '|'-separated words in choices */
  OPT_DECIMAL /* a non-negative decimal (1.0, 0.25): gperftools' release
                 rate; held in millionths, read with model_opt_decimal */
} model_option_kind_t;

typedef struct model_option_s model_option_t;
struct model_option_s {
  const char         *name; /* the real knob's name */
  model_option_kind_t kind;
  const char         *default_value; /* as the user would type it */
  const char         *unit;          /* "bytes", "ms", "" */
  const char         *choices;       /* OPT_ENUM: "3.11|3.14" */
  const char         *env;           /* environment spellings (above) or
                                        NULL */
  const char *source;                /* where the default comes from */
  const char *help;                  /* one line */
};

/* X-macro row expanders (see the file comment). */
#define MODEL_OPTION_KEY(key, name, kind, def, unit, choices, env, src, help)  \
  key,
#define MODEL_OPTION_ROW(key, name, kind, def, unit, choices, env, src, help)  \
  {name, kind, def, unit, choices, env, src, help},

#define MODEL_OPTS_MAX 32
typedef struct model_opts_s model_opts_t;
struct model_opts_s {
  const model_option_t *table;               /* the model's table */
  size_t                count;               /* rows in table */
  int64_t               num[MODEL_OPTS_MAX]; /* value of numeric kinds,
                                                enum: index in choices */
  bool    set[MODEL_OPTS_MAX];               /* given explicitly */
  uint8_t set_order[MODEL_OPTS_MAX];         /* 1 for the first given, ... */
  uint8_t nset;                              /* options given so far */
  char    text[MODEL_OPTS_MAX][32];          /* value as written */
};

/* Fills *out with table's defaults, then applies "k=v,k=v" (may be NULL or
 * empty; "k:v,k:v", MALLOC_CONF's spelling, is accepted too).  model names the
 * model in error messages.  A key given twice is an error (AS_EUSAGE naming
 * it), as is an unknown key (listing the known ones) or a malformed value
 * (saying what the row expects). */
as_status_t model_opts_parse(const char *model, const model_option_t *table,
                             const char *assignments, model_opts_t *out,
                             as_err_t *err);

/* Value of the row key (a model's MODEL_OPTION_KEY enum constant). */
int64_t     model_opt_i64(const model_opts_t *o, int key);
uint64_t    model_opt_u64(const model_opts_t *o, int key);
bool        model_opt_bool(const model_opts_t *o, int key);
double      model_opt_decimal(const model_opts_t *o, int key);
const char *model_opt_text(const model_opts_t *o, int key);
bool        model_opt_was_set(const model_opts_t *o, int key);
/* Whether row key was given after row other (or other was not given): for
 * two spellings of one knob, where the library takes the last one. */
bool model_opt_set_after(const model_opts_t *o, int key, int other);

/* The row of table named name (len bytes), or -1. */
int model_option_find(const model_option_t *table, const char *name,
                      size_t len);

/* Sets row key of o from text, as if given in the spec (marks it set).
 * For run-time option events and environment mapping; same errors as
 * model_opts_parse for a malformed value. */
as_status_t model_opts_set(const char *model, model_opts_t *o, int key,
                           const char *value, size_t len, as_err_t *err);

/* "k=v,k=v" for every row, in table order, but the rows given
 * explicitly in the order they were given (in the places of table order
 * they fill): parsed again, the spec means the same where the order
 * matters (model_opt_set_after). */
void model_opts_format(const model_opts_t *o, char *buf, size_t len);

#endif
