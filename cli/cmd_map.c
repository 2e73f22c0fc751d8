/* cli/cmd_map.c -- `allocsim map TRACE|RUN --at MARK`: the heap map in the
 * terminal, one row per arena / heap / mapping (analysis/heapmap.h). */
#include "cli.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../analysis/explain.h"
#include "../analysis/heapmap.h"

#define MIB (1024.0 * 1024.0)

typedef struct map_job_s map_job_t;
struct map_job_s {
  size_t    ncells;
  heapmap_t map;
  char      label[64];
  uint64_t  t_ns, rss, live;
};

static as_status_t build_here(void *user, const sim_session_t *s,
                              const sim_sample_t *at, as_err_t *err) {
  map_job_t *j = user;
  snprintf(j->label, sizeof j->label, "%s", at->label ? at->label : "end");
  j->t_ns = at->t_ns;
  j->rss = at->rss_bytes;
  j->live = at->live_bytes;
  return heapmap_build(s, j->ncells, &j->map, err);
}

static void print_map(const map_job_t *j, const char *source, const char *model,
                      const char *libc, uint64_t page_size, size_t max_rows,
                      bool color) {
  const heapmap_t *m = &j->map;
  cli_print_model_header(source, model, libc);
  cli_print_one_layout(page_size);
  printf("at         %s (t=%.3f ms): rss %.2f MiB, live %.2f MiB\n\n", j->label,
         (double)j->t_ns / 1e6, (double)j->rss / MIB, (double)j->live / MIB);
  cli_heapmap_print(stdout, m, max_rows, color);
}

static void print_json(const map_job_t *j, const char *source,
                       const char *model) {
  const heapmap_t *m = &j->map;
  printf("{\"source\": ");
  cli_json_string(stdout, source);
  printf(", \"model\": ");
  cli_json_string(stdout, model);
  printf(", \"layouts\": 1, \"mark\": ");
  cli_json_string(stdout, j->label);
  printf(", \"t_ns\": %" PRIu64 ", \"rss_bytes\": %" PRIu64
         ", \"cells\": %zu, \"classes\": [",
         j->t_ns, j->rss, m->ncells);
  for (int k = 0; k < HEAPMAP_CLASSES; k++)
    printf("%s\"%s\"", k ? ", " : "", heapmap_class_name((heapmap_class_t)k));
  printf("], \"rows\": [");
  for (size_t r = 0; r < m->nrows; r++) {
    const heapmap_row_t *row = &m->rows[r];
    printf("%s{\"kind\": ", r ? ", " : "");
    cli_json_string(stdout, row->kind);
    printf(", \"addr\": %" PRIu64 ", \"bytes\": %" PRIu64
           ", \"live_objects\": %" PRIu64 ", \"resident_bytes\": %" PRIu64
           ", \"cells\": \"",
           row->addr, row->bytes, row->live_objects, row->resident_bytes);
    for (size_t c = 0; c < m->ncells; c++)
      putchar("LCFMR"[row->cell[c]]);
    printf("\"}");
  }
  printf("]}\n");
}

static int map_main(int argc, char **argv) {
  explain_opts_t  o = {0};
  replay_target_t t = {0};
  map_job_t       j = {.ncells = 64};
  const char     *db = NULL, *what = NULL, *v;
  bool            json = false, color = isatty(STDOUT_FILENO) != 0;
  uint64_t        rows = 40;
  const char     *text_only = NULL; /* a text-map option given */
  sim_kernel_config_default(&o.kernel);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    int         took;
    if ((took = cli_opt_value("map", argc, argv, &i, "--db", &db)) ||
        (took = cli_opt_value("map", argc, argv, &i, "--model", &o.model)) ||
        (took = cli_opt_value("map", argc, argv, &i, "--libc", &o.libc)) ||
        (took = cli_opt_value("map", argc, argv, &i, "--at", &o.at))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
    } else if ((took = cli_opt_value("map", argc, argv, &i, "--cells", &v))) {
      uint64_t n;
      if (took < 0) /* cli_opt_value said why */
        return CLI_EXIT_USAGE;
      if (as_parse_number(v, strlen(v), NULL, &n) != AS_NUM_OK || n < 8 ||
          n > HEAPMAP_MAX_CELLS)
        return cli_usage_error("map", "--cells expects 8 to %d, got '%s'",
                               HEAPMAP_MAX_CELLS, v);
      j.ncells = n;
    } else if ((took = cli_opt_value("map", argc, argv, &i, "--rows", &v))) {
      if (took < 0) /* cli_opt_value said why */
        return CLI_EXIT_USAGE;
      if (as_parse_number(v, strlen(v), NULL, &rows) != AS_NUM_OK)
        return cli_usage_error("map", "--rows expects a number, got '%s'", v);
      text_only = "--rows";
    } else if ((took =
                    cli_opt_value("map", argc, argv, &i, "--page-size", &v))) {
      if (took < 0) /* cli_opt_value said why */
        return CLI_EXIT_USAGE;
      if (!as_parse_page_size(v, &o.kernel.page_size))
        return cli_usage_error("map", "--page-size expects 4096, 16384 or "
                                      "65536");
    } else if ((took = cli_opt_flag("map", argv, i, "--json"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      json = true;
    } else if ((took = cli_opt_flag("map", argv, i, "--no-color"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      color = false;
      text_only = "--no-color";
    } else if ((took = cli_opt_flag("map", argv, i, "--lenient"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      o.lenient = true;
    } else if (a[0] == '-' && strcmp(a, "-") != 0) {
      return cli_usage_error("map", "unknown option '%s'", a);
    } else if (what == NULL) {
      what = a;
    } else {
      return cli_usage_error("map",
                             "one trace or run at a time, got '%s' "
                             "too",
                             a);
    }
  }
  if (what == NULL)
    return cli_usage_error("map", "which trace or run? give a file, or a run "
                                  "id with --db");
  if (json && text_only != NULL) /* it was ignored */
    return cli_usage_error(
        "map", "%s shapes the text map; --json gives every row", text_only);
  as_err_t        err = {0};
  char            model[512], libc[256], desc[512];
  explain_marks_t marks;
  as_status_t     rc = replay_target_open(&t, what, db, &err);
  if (rc == AS_OK)
    rc = replay_target_specs(&t, o.model, o.libc, model, sizeof model, libc,
                             sizeof libc, &err);
  if (rc == AS_OK) {
    rc = cli_target_specs(&t, &o, model, sizeof model, libc, sizeof libc, &err);
    if (rc == AS_OK)
      rc = explain_replay_at(&o, replay_target_source, &t, o.at, build_here, &j,
                             &marks, desc, sizeof desc, &err);
  }
  if (rc == AS_OK) {
    if (json)
      print_json(&j, replay_target_name(&t), desc);
    else
      print_map(&j, replay_target_name(&t), desc, o.libc, o.kernel.page_size,
                rows, color);
  }
  heapmap_free(&j.map);
  replay_target_close(&t);
  return rc == AS_OK ? CLI_EXIT_OK : cli_fail("map", &err);
}

const cli_command_t cli_cmd_map = {
    .name = "map",
    .summary = "the heap map at a mark: arenas, heaps and pages by state",
    .usage =
        "usage: allocsim map TRACE|RUN [--db FILE] [--at MARK] [--model SPEC]\n"
        "                    [--libc SPEC] [--cells N] [--rows N]\n"
        "                    [--page-size N] [--no-color] [--json]\n\n"
        "Replays a trace (or the recorded run RUN of the store --db) to the\n"
        "mark --at (default: the end) and draws the allocator's address\n"
        "space: one row per top-level unit (pymalloc arena, glibc heap or\n"
        "mmapped chunk, thread stack, ...), split into equal cells, each\n"
        "showing what most of its bytes are, or live when the program's\n"
        "objects lie in it (however much free memory they pin around\n"
        "them; the legend's totals count bytes):\n"
        "  █ live objects   ▓ free in a cache (tcache, fastbin)\n"
        "  ▒ free but resident   ▞ allocator metadata\n"
        "  · not resident (released, or never written)\n"
        "One address layout, the default, as explain and advise.\n\n"
        "options:\n"
        "  --cells N     cells per row, 8 to 128 (default 64: one pymalloc\n"
        "                pool per cell of an arena)\n"
        "  --rows N      rows to print (default 40)\n"
        "  --no-color    no ANSI colours (the default when not a terminal)\n"
        "  --json        {\"rows\": [{\"kind\", \"addr\", \"bytes\", "
        "\"cells\": "
        "\"LLFR...\"}]}\n"
        "                with cells L live, C cached, F free, M meta, R "
        "released\n",
    .run = map_main,
};
