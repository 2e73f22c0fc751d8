/* cli/heapmap_print.c -- a heap map (analysis/heapmap.h) in the terminal,
 * for `allocsim map` and `allocsim lab`. */
#include "cli.h"

#include <inttypes.h>

#define MIB (1024.0 * 1024.0)

/* Glyph and ANSI colour of each heapmap_class_t. */
static const char *const glyph[HEAPMAP_CLASSES] = {"█", "▓", "▒", "▞", "·"};
static const char *const colour[HEAPMAP_CLASSES] = {
    "\033[32m", "\033[33m", "\033[31m", "\033[34m", "\033[2m"};

void cli_heapmap_print(FILE *out, const heapmap_t *m, size_t max_rows,
                       bool color) {
  fprintf(out, "legend    ");
  for (int k = 0; k < HEAPMAP_CLASSES; k++)
    fprintf(out, " %s%s%s %s %.2f MiB", color ? colour[k] : "", glyph[k],
            color ? "\033[0m" : "", heapmap_class_name((heapmap_class_t)k),
            (double)m->class_bytes[k] / MIB);
  fprintf(out, "\n\n");
  for (size_t r = 0; r < m->nrows && r < max_rows; r++) {
    const heapmap_row_t *row = &m->rows[r];
    fprintf(out, "%-14.14s %#14" PRIx64 " %9.2f MiB %8" PRIu64 " obj ",
            row->kind, row->addr, (double)row->bytes / MIB, row->live_objects);
    for (size_t c = 0; c < m->ncells; c++)
      fprintf(out, "%s%s", color ? colour[row->cell[c]] : "",
              glyph[row->cell[c]]);
    fprintf(out, "%s\n", color ? "\033[0m" : "");
  }
  if (m->nrows > max_rows)
    fprintf(out, "... %zu more rows (--rows N shows more)\n",
            m->nrows - max_rows);
  if (m->nrows == 0)
    fprintf(out, "(the model draws no heap map)\n");
}
