/* models/cpython.h -- the `cpython` model's knobs, shared by its two
 * builds: the default (GIL) build in models/cpython.c (pymalloc over the
 * libc model) and the free-threaded build in models/cpython_ft.c (mimalloc
 * heaps per thread with QSBR-deferred page frees).  `build=` picks one;
 * the mimalloc knobs apply to build=ft only, CPython setting no mimalloc
 * option itself (no mi_option_set outside Objects/mimalloc/ in 3.14.7), so
 * they are mimalloc 2.1.2's defaults and MIMALLOC_* variables.
 *
 * Versions.  3.11 and 3.14 for the default build; for build=ft the rules
 * change at 3.13.6 (QSBR limits of gh-133136) and 3.14.4 (page fix of
 * gh-145615), so the micro releases before those are choices of their own
 * and a recorded "3.14.2" maps to 3.14.2, "3.14.7" to 3.14
 * (docs/models/cpython-ft.md).
 */
#ifndef ALLOCSIM_CPYTHON_H
#define ALLOCSIM_CPYTHON_H

#include "model.h"

#define CPYTHON_VERSIONS                                                       \
  "3.10|3.11|3.12|3.13.0|3.13.1|3.13.2|3.13.3|3.13.4|3.13.5|3.13|3.14.0|3.14." \
  "1|"                                                                         \
  "3.14.2|3.14.3|3.14"

#define CPYTHON_OPTIONS(X)                                                     \
  X(CO_VERSION, "version", OPT_ENUM, "3.14", "", CPYTHON_VERSIONS,             \
    "meta:python",                                                             \
    "CPython 3.10.12 / 3.11.2 / 3.12.6 / 3.13.5 / 3.13.15 / 3.14.7 "           \
    "Objects/obmalloc.c",                                                      \
    "CPython version (3.13 = 3.13.6+, 3.14 = 3.14.4+; ft: 3.13 and later)")    \
  X(CO_PYTHONMALLOC, "pythonmalloc", OPT_ENUM, "pymalloc", "",                 \
    "pymalloc|malloc|mimalloc", "PYTHONMALLOC",                                \
    "CPython 3.11.2 Objects/obmalloc.c:346-355 _PyMem_SetupAllocators: "       \
    "PYTHONMALLOC=malloc makes the mem and obj domains malloc; 3.14.7 "        \
    ":591-614: build=ft accepts only mimalloc",                                \
    "malloc: every domain goes to libc (PYTHONMALLOC=malloc), no arenas; "     \
    "mimalloc: build=ft's allocator")                                          \
  X(CO_BUILD, "build", OPT_ENUM, "default", "", "default|ft", "meta:build",    \
    "CPython configure --disable-gil (Py_GIL_DISABLED): 3.14.7 "               \
    "Objects/obmalloc.c:366-368",                                              \
    "default: GIL build, pymalloc; ft: free-threaded, mimalloc heaps")         \
  X(CO_PURGE_DELAY, "purge_delay", OPT_I64, "10", "ms", NULL,                  \
    "MIMALLOC_PURGE_DELAY MIMALLOC_RESET_DELAY",                               \
    "CPython 3.14.7 Objects/mimalloc/options.c:77 (vendored mimalloc 2.1.2)",  \
    "build=ft: mimalloc purge delay; 0 = at once, <0 = never")                 \
  X(CO_PURGE_EXTEND_DELAY, "purge_extend_delay", OPT_I64, "1", "ms", NULL,     \
    "MIMALLOC_PURGE_EXTEND_DELAY MIMALLOC_DECOMMIT_EXTEND_DELAY",              \
    "CPython 3.14.7 Objects/mimalloc/options.c:92",                            \
    "build=ft: extra purge delay per further free into a segment")             \
  X(CO_ARENA_PURGE_MULT, "arena_purge_mult", OPT_I64, "10", "", NULL,          \
    "MIMALLOC_ARENA_PURGE_MULT",                                               \
    "CPython 3.14.7 Objects/mimalloc/options.c:91",                            \
    "build=ft: arena purge delay = purge_delay times this")                    \
  X(CO_PURGE_DECOMMITS, "purge_decommits", OPT_BOOL, "1", "", NULL,            \
    "MIMALLOC_PURGE_DECOMMITS MIMALLOC_RESET_DECOMMITS",                       \
    "CPython 3.14.7 Objects/mimalloc/options.c:64",                            \
    "build=ft: purge with MADV_DONTNEED (0: MADV_FREE)")                       \
  X(CO_ABANDONED_PAGE_PURGE, "abandoned_page_purge", OPT_BOOL, "0", "", NULL,  \
    "MIMALLOC_ABANDONED_PAGE_PURGE MIMALLOC_ABANDONED_PAGE_RESET",             \
    "CPython 3.14.7 Objects/mimalloc/options.c:70",                            \
    "build=ft: purge at once when a thread abandons a segment")

/* Row order matters: the default build's provenance is the rows before
 * CO_BUILD, build=ft's all of them. */
enum cpython_option_e { CPYTHON_OPTIONS(MODEL_OPTION_KEY) CO_COUNT };

/* The first row of the mimalloc knobs; they run to CO_COUNT. */
#define CO_FIRST_MIMALLOC CO_PURGE_DELAY

/* Creates the free-threaded composition from the cpython model's parsed
 * options (build=ft); models/cpython_ft.c. */
/* AS_EUSAGE unless libc_spec names a model that can serve the raw domain's
 * malloc: not a composition (cpython) nor pymalloc, which serves 1..512
 * bytes only.  Both builds check their libc with it. */
as_status_t cpython_libc_check(const char *libc_spec, as_err_t *err);
as_status_t cpython_ft_create(const model_opts_t *opts, const model_ctx_t *ctx,
                              model_t **out, as_err_t *err);

/* build=ft's mimalloc child (models/mimalloc.h), for tests and tools; NULL
 * for the default build. */
typedef struct mi_model_s mi_model_t;
mi_model_t               *cpython_ft_mimalloc(const model_t *m);

#endif
