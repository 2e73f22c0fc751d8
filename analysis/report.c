/* analysis/report.c -- HTML reports with gnuplot plots (see report.h).
 *
 * Sections: plot workspace (temporary directory, gnuplot runs), a replay's
 * data (series, marks, heap maps, explain, advise), the page, sweeps.
 *
 * The page is written whole or not at all (sim/atomic_file.h): a failed
 * report leaves the target as it was, and a device such as /dev/null is
 * written in place, never replaced.
 */
#include "report.h"

#include "../models/model.h"
#include "../sim/atomic_file.h"
#include "../sim/json.h"
#include "../sim/reserve.h"
#include "../traces/capture_run.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <spawn.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "advise.h"
#include "compare.h"
#include "formula_validate.h"
#include "heapmap.h"
#include "sweep_rows.h"

extern char **environ;

#define MIB            (1024.0 * 1024.0)
#define REPORT_SAMPLES 600 /* points of the RSS series */
#define REPORT_MAPS    6 /* heap maps, of the marks that matter (choose_maps) */
#define MAP_CELLS      64

/* ---- Plot workspace ----------------------------------------------------- */

#define PLOTS_MAX 16 /* plots on one page */

/* Every file a report writes into its workspace: plots_free and the signal
 * guard (a report killed, or ended by SIGPIPE on `-o - | head`) remove
 * these and then the directory; "owner" tells capture --cleanup whose it
 * is (capture_run.h). */
static const char *const k_plot_files[] = {
    "series.dat", "plot.gp",    "plot.log",  "plot.svg",
    "plot.png",   "map.dat",    "sweep.dat", "measured.dat",
    "owner",      "owner.part", NULL};

typedef struct plots_s plots_t;
struct plots_s {
  char        dir[256]; /* temporary directory */
  int         guard;    /* its signal guard (atomic_file_guard_dir) */
  const char *gnuplot;
  const char *png_dir;
  char       *svg[PLOTS_MAX]; /* inlined plots, in page order */
  char        svg_id[PLOTS_MAX][32];
  size_t      n;
  /* --png: each written and closed beside its target, renamed only once
   * every file of the report is written (plots_commit) */
  atomic_file_t *png;
  size_t         npng;
};

/* s as a gnuplot single-quoted string literal, its quotes included, into
 * out: every string a plot script holds goes through here, since labels
 * and titles carry user data (trace marks, file names) that must neither
 * end the literal nor start a command.  A quote is doubled, the one escape
 * such a literal has (gnuplot 5.4 docs, "Strings"; backslashes are plain);
 * a control character, which a literal cannot hold (a newline ends the
 * command), becomes a space; bytes that are not UTF-8 are read as Latin-1
 * (as_utf8_piece), so the SVG gnuplot writes stays valid XML.  What does
 * not fit in len is cut, at a character, and the literal still closed. */
static void gp_quote(char *out, size_t len, const char *s) {
  size_t n = 0;
  out[n++] = '\'';
  while (*s != '\0') {
    char   piece[AS_UTF8_PIECE_MAX];
    size_t used = as_utf8_piece(s, piece), pl = strlen(piece);
    if (piece[0] == '\'') {
      memcpy(piece, "''", 3);
      pl = 2;
    } else if ((unsigned char)piece[0] < 0x20 || piece[0] == 0x7F)
      piece[0] = ' ';
    if (n + pl + 2 > len)
      break;
    memcpy(out + n, piece, pl);
    n += pl;
    s += used;
  }
  memcpy(out + n, "'", 2);
}

static void plots_free(plots_t *p) {
  for (size_t i = 0; i < p->n; i++)
    free(p->svg[i]);
  for (size_t i = 0; i < p->npng; i++)
    atomic_file_discard(&p->png[i]); /* a no-op once committed */
  free(p->png);
  if (p->dir[0] != '\0') {
    for (const char *const *name = k_plot_files; *name != NULL; name++) {
      char f[320];
      snprintf(f, sizeof f, "%s/%s", p->dir, *name);
      unlink(f);
    }
    rmdir(p->dir);
    atomic_file_unguard_dir(p->guard);
  }
}

static as_status_t plots_open(plots_t *p, const report_opts_t *ro,
                              as_err_t *err) {
  memset(p, 0, sizeof *p);
  p->gnuplot = ro->gnuplot ? ro->gnuplot : "gnuplot";
  p->png_dir = ro->png_dir;
  if (p->png_dir != NULL &&
      (p->png = calloc(PLOTS_MAX, sizeof *p->png)) == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory");
  const char *tmp = getenv("TMPDIR");
  const char *base = tmp && *tmp ? tmp : "/tmp";
  snprintf(p->dir, sizeof p->dir, "%s/allocsim-report-XXXXXX", base);
  if (mkdtemp(p->dir) == NULL) {
    p->dir[0] = '\0';
    return as_err_set(err, AS_EIO,
                      "%s: cannot create the plots' temporary directory "
                      "there (TMPDIR sets where): %s",
                      base, strerror(errno));
  }
  p->guard = atomic_file_guard_dir(p->dir, k_plot_files);
  capture_tmpdir_claim(p->dir);
  return AS_OK;
}

static FILE *plots_file(const plots_t *p, const char *name, as_err_t *err) {
  char path[320];
  snprintf(path, sizeof path, "%s/%s", p->dir, name);
  FILE *f = fopen(path, "w");
  if (f == NULL)
    as_err_set(err, AS_EIO, "%s: %s", path, strerror(errno));
  return f;
}

/* Closes a file of plots_file, checked: a data file cut short by a full
 * TMPDIR would otherwise reach gnuplot, which fails on it with a message
 * that does not name the cause. */
static as_status_t plots_close(const plots_t *p, FILE *f, const char *name,
                               as_err_t *err) {
  errno = 0;
  int e = fflush(f) != 0 || ferror(f) ? (errno ? errno : EIO) : 0;
  if (fclose(f) != 0 && e == 0)
    e = errno;
  if (e != 0)
    return as_err_set(err, AS_EIO, "%s/%s: write error: %s", p->dir, name,
                      strerror(e));
  return AS_OK;
}

/* The file at path, NUL-terminated, its length in *len; NULL if it cannot
 * be read. */
static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return NULL;
  size_t cap = 1 << 16, n = 0;
  char  *buf = malloc(cap);
  while (buf != NULL) {
    n += fread(buf + n, 1, cap - n - 1, f);
    if (n < cap - 1)
      break;
    char *nb = realloc(buf, cap *= 2);
    if (nb == NULL)
      free(buf);
    buf = nb;
  }
  fclose(f);
  if (buf != NULL)
    buf[n] = '\0';
  *len = n;
  return buf;
}

/* s on one line: each run of white space (gnuplot's log has newlines and
 * blank lines) one space, none at either end. */
static void one_line(char *s) {
  size_t n = 0;
  for (const char *c = s; *c != '\0'; c++)
    if (!isspace((unsigned char)*c))
      s[n++] = *c;
    else if (n > 0 && s[n - 1] != ' ')
      s[n++] = ' ';
  n -= n > 0 && s[n - 1] == ' ';
  s[n] = '\0';
}

static as_status_t run_gnuplot(const plots_t *p, as_err_t *err) {
  char script[320], log[320];
  snprintf(script, sizeof script, "%s/plot.gp", p->dir);
  snprintf(log, sizeof log, "%s/plot.log", p->dir);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC,
                                   0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  char *argv[] = {(char *)p->gnuplot, script, NULL};
  pid_t pid;
  int   rc = posix_spawnp(&pid, p->gnuplot, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return as_err_set(err, AS_EINVAL,
                      "cannot run %s: %s (install gnuplot, e.g. "
                      "apt-get install gnuplot-nox)",
                      p->gnuplot, strerror(rc));
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    size_t len;
    char  *msg = read_all(log, &len);
    if (msg != NULL)
      one_line(msg);
    as_err_set(err, AS_EINVAL, "gnuplot failed: %.300s", msg ? msg : "");
    free(msg);
    return AS_EINVAL;
  }
  return AS_OK;
}

/* Runs the plot script body (which plots to the current output) with the
 * terminal of ext ("svg" or "png") into the workspace's plot.<ext>. */
static as_status_t render(const plots_t *p, const char *ext, const char *id,
                          const char *body, as_err_t *err) {
  char out[320], q_out[2 * sizeof out + 3], q_dir[2 * sizeof p->dir + 3];
  char q_id[2 * sizeof p->svg_id[0] + 3];
  snprintf(out, sizeof out, "%s/plot.%s", p->dir, ext);
  gp_quote(q_out, sizeof q_out, out);
  gp_quote(q_dir, sizeof q_dir, p->dir);
  gp_quote(q_id, sizeof q_id, id);
  FILE *f = plots_file(p, "plot.gp", err);
  if (f == NULL)
    return err->code;
  if (strcmp(ext, "png") == 0)
    fprintf(f, "set terminal pngcairo size 1000,420 font 'sans,10'\n");
  else
    fprintf(f,
            "set terminal svg size 1000,420 dynamic font 'sans,11' "
            "name %s\n",
            q_id);
  /* noenhanced: labels such as after_free are text, not subscripts. */
  fprintf(f, "set output %s\nset termoption noenhanced\ncd %s\n%s\n", q_out,
          q_dir, body);
  as_status_t rc = plots_close(p, f, "plot.gp", err);
  return rc == AS_OK ? run_gnuplot(p, err) : rc;
}

/* Whether gnuplot's output is whole: it does not notice a write error, so
 * a full file system leaves a file cut short (or empty) behind it. */
static bool output_whole(const char *buf, size_t n, bool png) {
  static const char png_head[] = "\x89PNG\r\n\x1a\n",
                    png_tail[] = "IEND\xae\x42\x60\x82"; /* the IEND chunk */
  if (png)
    return n >= 20 && memcmp(buf, png_head, 8) == 0 &&
           memcmp(buf + n - 8, png_tail, 8) == 0;
  while (n > 0 && isspace((unsigned char)buf[n - 1]))
    n--;
  return n >= 6 && memcmp(buf + n - 6, "</svg>", 6) == 0;
}

/* The workspace's plot.<ext>, whole, into *buf (malloc'd) and *len. */
static as_status_t read_output(const plots_t *p, const char *ext, char **buf,
                               size_t *len, as_err_t *err) {
  char path[320];
  snprintf(path, sizeof path, "%s/plot.%s", p->dir, ext);
  if ((*buf = read_all(path, len)) == NULL)
    return as_err_set(err, AS_EIO, "gnuplot wrote no %s", path);
  if (output_whole(*buf, *len, strcmp(ext, "png") == 0))
    return AS_OK;
  struct statvfs vfs; /* the likely cause, when it is so */
  bool           full = statvfs(p->dir, &vfs) == 0 && vfs.f_bavail == 0;
  free(*buf);
  *buf = NULL;
  return as_err_set(err, AS_EIO, "%s: gnuplot wrote an incomplete file%s", path,
                    full ? ": No space left on device" : "");
}

/* png as DIR/<id>.png, written and closed beside it: renamed into place
 * by plots_commit, so a full disk leaves no file cut short. */
static as_status_t stage_png(plots_t *p, const char *id, const char *png,
                             size_t len, as_err_t *err) {
  char out[PATH_MAX];
  if (!as_format_fits(out, sizeof out, "%s/%s.png", p->png_dir, id))
    return as_err_set(err, AS_EINVAL, "the path %s/ is too long", p->png_dir);
  atomic_file_t *af = &p->png[p->npng];
  as_status_t    rc = atomic_file_open(af, out, err);
  if (rc != AS_OK)
    return rc;
  p->npng++;                  /* plots_free discards it from here on */
  fwrite(png, 1, len, af->f); /* a short write: atomic_file_close says */
  return atomic_file_close(af, err);
}

/* Plots the script body (which plots to the current output) as SVG,
 * inlined as plot id, and as PNG into png_dir when asked. */
static as_status_t plot(plots_t *p, const char *id, const char *body,
                        as_err_t *err) {
  if (p->n == PLOTS_MAX)
    return as_err_set(err, AS_EINVAL, "too many plots");
  size_t      len;
  as_status_t rc = render(p, "svg", id, body, err);
  if (rc == AS_OK &&
      (rc = read_output(p, "svg", &p->svg[p->n], &len, err)) == AS_OK)
    snprintf(p->svg_id[p->n++], sizeof p->svg_id[0], "%s", id);
  if (rc != AS_OK || p->png_dir == NULL)
    return rc;
  char *png = NULL;
  if ((rc = render(p, "png", id, body, err)) == AS_OK &&
      (rc = read_output(p, "png", &png, &len, err)) == AS_OK)
    rc = stage_png(p, id, png, len, err);
  free(png);
  return rc;
}

/* Finishes the page and puts it and the PNGs in place: every file is
 * written and closed before any is renamed, so a failure (a full disk)
 * leaves each target as it was. */
static as_status_t plots_commit(plots_t *p, atomic_file_t *page,
                                as_err_t *err) {
  as_status_t rc = atomic_file_close(page, err);
  for (size_t i = 0; i < p->npng && rc == AS_OK; i++)
    rc = atomic_file_commit(&p->png[i], err);
  if (rc != AS_OK) {
    atomic_file_discard(page);
    return rc;
  }
  return atomic_file_commit(page, err);
}

/* ---- A replay's data ---------------------------------------------------- */

typedef struct series_s series_t;
struct series_s {
  store_samples_t s;      /* periodic, mark and final samples */
  uint64_t        end_ns; /* the replay's end */
  char (*marks)[64];      /* distinct mark labels, in trace order (heap) */
  size_t nmarks, cap;
  double base;        /* start-up offset added to the simulation, MiB */
  char   anchor[64];  /* where it was measured (a mark, or a time), or "" */
  size_t anchor_mark; /* the anchor's index in marks, else 0 */
};

/* Adds label to se->marks unless it is there. */
static as_status_t note_mark(series_t *se, const char *label, as_err_t *err) {
  for (size_t i = 0; i < se->nmarks; i++)
    if (strcmp(se->marks[i], label) == 0)
      return AS_OK;
  if (se->nmarks == se->cap) {
    size_t cap = se->cap ? 2 * se->cap : 16;
    char(*m)[64] = realloc(se->marks, cap * sizeof *m);
    if (m == NULL)
      return as_err_set(err, AS_ENOMEM, "out of memory for marks");
    se->marks = m;
    se->cap = cap;
  }
  snprintf(se->marks[se->nmarks++], sizeof se->marks[0], "%s", label);
  return AS_OK;
}

static as_status_t series_sample(void *user, const sim_sample_t *smp,
                                 as_err_t *err) {
  series_t   *se = user;
  as_status_t rc = AS_OK;
  if (smp->kind == SIM_SAMPLE_MARK && smp->label != NULL)
    rc = note_mark(se, smp->label, err);
  return rc == AS_OK ? store_samples_push_sim(&se->s, smp, err) : rc;
}

/* Replays once without samples to learn the duration, then with a sample
 * period that gives about REPORT_SAMPLES points. */
static as_status_t collect_series(const explain_opts_t *o, explain_open_fn open,
                                  void *user, series_t *se, char *model_desc,
                                  size_t desc_len, as_err_t *err) {
  for (int pass = 0; pass < 2; pass++) {
    trace_source_t *src;
    sim_session_t   s;
    as_status_t     rc = open(user, &src, err);
    if (rc != AS_OK)
      return rc;
    if ((rc = sim_session_open(o->model, o->libc, &o->kernel, &s, err)) !=
        AS_OK) {
      trace_source_close(src);
      return rc;
    }
    snprintf(model_desc, desc_len, "%s", s.model_desc);
    store_samples_free(&se->s);
    se->nmarks = 0;
    sim_engine_config_t cfg = {.sample_every_ns =
                                   pass ? se->end_ns / REPORT_SAMPLES + 1 : 0,
                               .settle_ns = o->settle_ns,
                               .lenient = o->lenient,
                               .on_sample = series_sample,
                               .user = se};
    sim_run_result_t    r;
    rc = sim_engine_run(&cfg, &s, src, &r, err);
    se->end_ns = r.final_t_ns;
    sim_session_close(&s);
    trace_source_close(src);
    if (rc != AS_OK)
      return rc;
  }
  return AS_OK;
}

/* The first n bytes of s as HTML text, valid UTF-8 whatever its bytes
 * (as_utf8_piece; a piece never spans an ASCII byte). */
static void html_escape_n(FILE *f, const char *s, size_t n) {
  for (const char *end = s + n; s < end && *s != '\0';) {
    char piece[AS_UTF8_PIECE_MAX];
    s += as_utf8_piece(s, piece);
    if (piece[0] == '<')
      fputs("&lt;", f);
    else if (piece[0] == '>')
      fputs("&gt;", f);
    else if (piece[0] == '&')
      fputs("&amp;", f);
    else if (piece[0] == '"')
      fputs("&quot;", f);
    else
      fputs(piece, f);
  }
}

static void html_escape(FILE *f, const char *s) {
  html_escape_n(f, s, strlen(s));
}

/* html_escape, with a line-break opportunity after each ',' and '/': a
 * model spec or a path is one long word that would widen the page. */
static void html_escape_wrapping(FILE *f, const char *s) {
  for (const char *cut; (cut = strpbrk(s, ",/")) != NULL; s = cut + 1) {
    html_escape_n(f, s, (size_t)(cut - s) + 1);
    fputs("<wbr>", f);
  }
  html_escape(f, s);
}

/* The simulated time of the k-th mark called label, or -1. */
static double sim_mark_time(const series_t *se, const char *label, size_t k) {
  for (size_t i = 0; i < se->s.n; i++)
    if (se->s.v[i].kind == SIM_SAMPLE_MARK &&
        strcmp(se->s.v[i].label, label) == 0 && k-- == 0)
      return (double)se->s.v[i].t_ns / 1e9;
  return -1;
}

/* Measured samples on the simulation's time axis: a trace's timestamps are
 * the measured run's own clock; a workload's are virtual, so there only
 * the marks are placed, at the simulated time of the same mark. */
static void write_measured(FILE *f, const series_t *se, const store_sample_t *m,
                           size_t nm, bool same_clock) {
  for (size_t i = 0; i < nm; i++) {
    if (m[i].measured_rss_bytes == 0)
      continue;
    double t = (double)m[i].t_ns / 1e9;
    if (!same_clock) {
      if (m[i].kind != SIM_SAMPLE_MARK)
        continue;
      size_t k = 0;
      for (size_t j = 0; j < i; j++)
        k +=
            m[j].kind == SIM_SAMPLE_MARK && strcmp(m[j].label, m[i].label) == 0;
      if ((t = sim_mark_time(se, m[i].label, k)) < 0)
        continue;
    }
    fprintf(f, "%.9f %.4f\n", t, (double)m[i].measured_rss_bytes / MIB);
  }
}

/* The start-up offset (the program and interpreter before the trace,
 * which no trace explains) at compare's anchor, so the plotted prediction
 * is the one compare measures errors of, into se->base (MiB), and where
 * it was taken into se->anchor and se->anchor_mark ("", 0 and 0 without a
 * measured sample that lines up). */
static as_status_t series_baseline(series_t *se, const store_sample_t *m,
                                   size_t nm, bool same_clock, as_err_t *err) {
  size_t      at, sim_at;
  as_status_t rc = compare_find_anchor(m, nm, se->s.v, se->s.n, same_clock, &at,
                                       &sim_at, err);
  se->base = 0;
  se->anchor[0] = '\0';
  se->anchor_mark = 0;
  if (rc != AS_OK || at == SIZE_MAX)
    return rc;
  se->base =
      ((double)m[at].measured_rss_bytes - (double)se->s.v[sim_at].rss_bytes) /
      MIB;
  if (m[at].kind != SIM_SAMPLE_MARK) {
    snprintf(se->anchor, sizeof se->anchor, "t=%.3f s",
             (double)m[at].t_ns / 1e9);
    return AS_OK;
  }
  snprintf(se->anchor, sizeof se->anchor, "%s", m[at].label);
  for (size_t i = 0; i < se->nmarks; i++)
    if (strcmp(se->marks[i], m[at].label) == 0)
      se->anchor_mark = i;
  return AS_OK;
}

/* The RSS-over-time plot script: predicted and live bytes, measured
 * points, marks as dotted lines, labelled where a label has room (at
 * least 1/50 of the time axis from the last one labelled: closer ones
 * overlap). */
static void write_rss_plot(FILE *b, const series_t *se) {
  fprintf(b, "set xlabel 'virtual time (s)'\n"
             "set ylabel 'MiB'\nset key outside right top\n"
             "set grid\nset yrange [0:*]\n");
  double span = (double)se->end_ns / 1e9, last = -1;
  for (size_t i = 0; i < se->s.n; i++) {
    const store_sample_t *x = &se->s.v[i];
    if (x->kind != SIM_SAMPLE_MARK)
      continue;
    double t = (double)x->t_ns / 1e9;
    fprintf(b,
            "set arrow from %.9f, graph 0 to %.9f, graph 1 nohead dt 3 lc "
            "'gray'\n",
            t, t);
    if (last >= 0 && t - last < span / 50)
      continue;
    char lbl[2 * sizeof x->label + 3];
    gp_quote(lbl, sizeof lbl, x->label);
    fprintf(b,
            "set label %s at %.9f, graph 0.97 rotate by 90 right "
            "font ',8'\n",
            lbl, t);
    last = t;
  }
  char title[160] = "predicted RSS", q_title[2 * sizeof title + 3];
  if (se->anchor[0] != '\0')
    snprintf(title, sizeof title, "predicted RSS (%+.2f MiB measured at %.63s)",
             se->base, se->anchor);
  gp_quote(q_title, sizeof q_title, title);
  fprintf(b,
          "set title 'RSS over time'\n"
          "plot 'series.dat' using 1:2 with lines lw 2 lc rgb '#1f77b4' "
          "title %s, "
          "'series.dat' using 1:3 with lines lw 1 lc rgb '#2ca02c' "
          "title 'live bytes', "
          "'measured.dat' using 1:2 with points pt 7 ps 0.5 "
          "lc rgb '#d62728' title 'measured RSS'\n",
          q_title);
}

/* The owners' plot script: each curve the sum of its owner and those
 * below it, the baseline (measured, outside the trace) first; owners that
 * never hold a page are left out of the plot and its key. */
static void write_owner_plot(FILE *b, const series_t *se, double base) {
  /* one colour each (Tableau 10, and black for the eleventh) */
  _Static_assert(SIM_OWNER_COUNT == 11, "a colour for each owner");
  static const char *const colour[SIM_OWNER_COUNT] = {
      "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
      "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#000000"};
  fprintf(b, "set xlabel 'virtual time (s)'\nset ylabel 'MiB'\n"
             "set key outside right top\nset grid\nset yrange [0:*]\n"
             "set title 'RSS by owner (stacked)'\nplot ");
  char sum[512];
  snprintf(sum, sizeof sum, "%.4f", base);
  bool first = true;
  if (base > 0) {
    fprintf(b,
            "'series.dat' using 1:(0):(%s) with filledcurves fs solid 0.3 "
            "lc rgb '#c7c7c7' title 'before the trace (measured)'",
            sum);
    first = false;
  }
  for (int o = 0; o < SIM_OWNER_COUNT; o++) {
    bool held = false;
    for (size_t i = 0; i < se->s.n && !held; i++)
      held = se->s.v[i].owner_bytes[o] != 0;
    if (!held)
      continue;
    char next[sizeof sum], name[64];
    snprintf(next, sizeof next, "%.480s+$%d", sum, 4 + o);
    gp_quote(name, sizeof name, sim_owner_name((sim_owner_t)o));
    fprintf(b,
            "%s'series.dat' using 1:(%s):(%s) with filledcurves fs solid 0.6 "
            "lc rgb '%s' title %s",
            first ? "" : ", ", sum, next, colour[o], name);
    snprintf(sum, sizeof sum, "%s", next);
    first = false;
  }
  if (first) /* nothing held at all: an empty plot, not a syntax error */
    fprintf(b, "'series.dat' using 1:(0) with lines title 'nothing resident'");
  fprintf(b, "\n");
}

static as_status_t plot_series(plots_t *p, const series_t *se,
                               const store_sample_t *measured, size_t nm,
                               bool same_clock, as_err_t *err) {
  double      base = se->base;
  as_status_t rc;
  FILE       *f = plots_file(p, "series.dat", err);
  if (f == NULL)
    return err->code;
  fprintf(f, "# t_s rss_MiB live_MiB");
  for (int o = 0; o < SIM_OWNER_COUNT; o++)
    fprintf(f, " %s", sim_owner_name((sim_owner_t)o));
  fprintf(f, "\n");
  for (size_t i = 0; i < se->s.n; i++) {
    const store_sample_t *x = &se->s.v[i];
    fprintf(f, "%.9f %.4f %.4f", (double)x->t_ns / 1e9,
            (double)x->rss_bytes / MIB + base, (double)x->live_bytes / MIB);
    for (int o = 0; o < SIM_OWNER_COUNT; o++)
      fprintf(f, " %.4f", (double)x->owner_bytes[o] / MIB);
    fprintf(f, "\n");
  }
  if ((rc = plots_close(p, f, "series.dat", err)) != AS_OK)
    return rc;
  if ((f = plots_file(p, "measured.dat", err)) == NULL)
    return err->code;
  fprintf(f, "# t_s measured_MiB\n");
  write_measured(f, se, measured, nm, same_clock);
  fprintf(f, "\n"); /* gnuplot needs a line even with no points */
  if ((rc = plots_close(p, f, "measured.dat", err)) != AS_OK)
    return rc;

  char  *body = NULL;
  size_t len = 0;
  FILE  *b = open_memstream(&body, &len);
  if (b == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory for a plot");
  write_rss_plot(b, se);
  rc = fclose(b) == 0 ? plot(p, "rss", body, err)
                      : as_err_set(err, AS_ENOMEM, "out of memory");
  free(body);
  if (rc != AS_OK)
    return rc;
  body = NULL;
  if ((b = open_memstream(&body, &len)) == NULL)
    return as_err_set(err, AS_ENOMEM, "out of memory for a plot");
  write_owner_plot(b, se, base);
  rc = fclose(b) == 0 ? plot(p, "owners", body, err)
                      : as_err_set(err, AS_ENOMEM, "out of memory");
  free(body);
  return rc;
}

/* A heap map as an image: rows are units, columns cells, colour class. */
static as_status_t plot_map(plots_t *p, const heapmap_t *m, const char *id,
                            const char *label, as_err_t *err) {
  FILE *f = plots_file(p, "map.dat", err);
  if (f == NULL)
    return err->code;
  size_t rows = m->nrows ? m->nrows : 1;
  /* gnuplot sizes an image's pixels from its neighbours: a one-row image
   * is drawn as nothing, so one unit's row is written twice and both
   * halves shown as that unit (a y range of one row left the image twice
   * the frame's height, overflowing it). */
  for (size_t r = 0; r < (rows == 1 ? 2 : rows); r++) {
    for (size_t c = 0; c < m->ncells; c++)
      fprintf(f, "%s%d", c ? " " : "",
              m->nrows ? m->rows[r % rows].cell[c] : HEAPMAP_RELEASED);
    fprintf(f, "\n");
  }
  as_status_t rc = plots_close(p, f, "map.dat", err);
  if (rc != AS_OK)
    return rc;
  char title[160], q_title[2 * sizeof title + 3], body[2048];
  snprintf(title, sizeof title, "heap map at %.63s: %zu units x %zu cells",
           label, m->nrows, m->ncells);
  gp_quote(q_title, sizeof q_title, title);
  snprintf(body, sizeof body,
           "set title %s\n"
           "set palette maxcolors 5\n"
           "set palette defined (0 '#2ca02c', 1 '#ffbf00', 2 '#d62728', "
           "3 '#1f77b4', 4 '#e8e8e8')\n"
           "set cbrange [-0.5:4.5]\nset rmargin 16\n"
           "set cbtics ('live' 0, 'cached' 1, 'free' 2, 'meta' 3, "
           "'not resident' 4)\n"
           "set xlabel 'cell (equal parts of the unit)'\n"
           "set ylabel 'unit (arena, heap, mapping), in walk order'\n"
           "set xrange [-0.5:%zu.5]\nset yrange [%zu.5:-0.5]\n%s"
           "plot 'map.dat' matrix with image notitle\n",
           q_title, m->ncells - 1, rows == 1 ? 1 : rows - 1,
           rows == 1 ? "set ytics ('0' 0.5)\n" : "set ytics 1\n");
  return plot(p, id, body, err);
}

static as_status_t map_here(void *user, const sim_session_t *s,
                            const sim_sample_t *at, as_err_t *err) {
  (void)at;
  return heapmap_build(s, MAP_CELLS, user, err);
}

/* ---- The page ----------------------------------------------------------- */

static void page_head(FILE *f, const char *title) {
  fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
             "<title>");
  html_escape(f, title);
  fprintf(f, "</title>\n<style>\n"
             "body{font-family:sans-serif;margin:2em;max-width:1100px}\n"
             "table{border-collapse:collapse;margin:1em 0}\n"
             "td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;"
             "vertical-align:top}\n"
             "td.n{text-align:right;white-space:nowrap}\n"
             "figure{margin:1em 0}\n"
             /* a heap map is a small PNG stretched over the plot: its
              * cells sharp, not blurred into each other */
             "figure image{image-rendering:crisp-edges;"
             "image-rendering:pixelated}\n"
             /* a word still wider than the page breaks anywhere */
             "code,td{overflow-wrap:anywhere}\n"
             "</style></head><body>\n<h1>");
  html_escape(f, title);
  fprintf(f, "</h1>\n");
}

static void page_plot(FILE *f, const plots_t *p, const char *id,
                      const char *caption) {
  for (size_t i = 0; i < p->n; i++) {
    if (strcmp(p->svg_id[i], id) != 0)
      continue;
    const char *svg = strstr(p->svg[i], "<svg");
    fprintf(f, "<figure id=\"plot-%s\">%s<figcaption>", id,
            svg ? svg : p->svg[i]);
    html_escape(f, caption);
    fprintf(f, "</figcaption></figure>\n");
  }
}

static void page_explain(FILE *f, const explain_result_t *r) {
  fprintf(f, "<h2>What holds memory at ");
  html_escape(f, strcmp(r->label, "end") == 0 ? "the end" : r->label);
  fprintf(f,
          "</h2>\n<p>RSS %.2f MiB, live "
          "%.2f MiB; the rows add up to RSS.</p>\n<table><tr><th>MiB</th>"
          "<th>of RSS</th><th>what holds it</th></tr>\n",
          (double)r->rss_bytes / MIB, (double)r->live_bytes / MIB);
  for (size_t i = 0; i < r->nitems; i++) {
    fprintf(f, "<tr><td class=\"n\">%.2f</td><td class=\"n\">%.1f%%</td><td>",
            (double)r->items[i].bytes / MIB,
            r->rss_bytes
                ? 100.0 * (double)r->items[i].bytes / (double)r->rss_bytes
                : 0.0);
    html_escape(f, r->items[i].sentence);
    fprintf(f, "</td></tr>\n");
  }
  fprintf(f, "</table>\n");
}

static void page_advise(FILE *f, const advise_result_t *a) {
  fprintf(f, "<h2>What would release it</h2>\n<p>Each remedy simulated; "
             "savings at ");
  if (a->at_end)
    fprintf(f, "<b>the end</b>");
  else {
    fprintf(f, "mark <b>");
    html_escape(f, a->mark);
    fprintf(f, "</b>");
  }
  fprintf(f,
          " (RSS %.2f MiB), at the end and at the peak.</p>\n<table>"
          "<tr><th>remedy</th><th>saving MiB</th><th>at end</th>"
          "<th>at peak</th><th>+syscalls</th><th>+faults</th>"
          "<th>how</th></tr>\n",
          (double)a->baseline.rss_at_mark / MIB);
  for (size_t i = 0; i < a->n; i++) {
    const advise_remedy_t *r = &a->remedies[i];
    if (!r->ok)
      continue;
    fprintf(f, "<tr><td>");
    html_escape(f, r->name);
    fprintf(f,
            "</td><td class=\"n\">%.2f</td><td class=\"n\">%.2f</td>"
            "<td class=\"n\">%.2f</td><td class=\"n\">%" PRId64
            "</td><td class=\"n\">%" PRId64 "</td><td>",
            (double)r->saving_at_mark / MIB, (double)r->saving_at_end / MIB,
            (double)r->saving_at_peak / MIB, r->extra_syscalls,
            r->extra_faults);
    html_escape(f, r->env_or_call);
    fprintf(f, "</td></tr>\n");
  }
  fprintf(f, "</table>\n");
}

/* Everything a replay report shows, gathered before the page is written. */
typedef struct replay_data_s replay_data_t;
struct replay_data_s {
  series_t         se;
  size_t           map_mark[REPORT_MAPS]; /* the marks mapped (se.marks) */
  size_t           nmaps;
  heapmap_t        maps[REPORT_MAPS];
  heapmap_t        end_map; /* at the end, which the page explains */
  explain_result_t ex[2];
  size_t           nex;
  advise_result_t  adv;
  char             model[512];
};

static bool explained(const replay_data_t *d, const char *label) {
  for (size_t i = 0; i < d->nex; i++)
    if (strcmp(d->ex[i].label, label) == 0)
      return true;
  return false;
}

/* The index of the rank-th mark from first on that is not explained. */
static size_t nth_unexplained(const replay_data_t *d, size_t first,
                              size_t rank) {
  size_t i = first;
  for (;; i++)
    if (!explained(d, d->se.marks[i]) && rank-- == 0)
      return i;
}

/* Which marks get a heap map, at most REPORT_MAPS, in trace order: every
 * mark explained (--at's among them), then the marks from the anchor on,
 * spread evenly with the last included, then those just before the
 * anchor while room is left.  Marks before the anchor show start-up,
 * which a Python capture has several of and the trace does not explain:
 * the first marks alone missed the program's own. */
static void choose_maps(replay_data_t *d) {
  const series_t *se = &d->se;
  size_t          n = 0, spare = 0;
  for (size_t i = 0; i < se->nmarks && n < REPORT_MAPS; i++)
    if (explained(d, se->marks[i]))
      d->map_mark[n++] = i;
  for (size_t i = se->anchor_mark; i < se->nmarks; i++)
    spare += !explained(d, se->marks[i]);
  size_t k = REPORT_MAPS - n < spare ? REPORT_MAPS - n : spare;
  for (size_t j = 0; j < k; j++)
    d->map_mark[n++] = nth_unexplained(
        d, se->anchor_mark, k == 1 ? spare - 1 : j * (spare - 1) / (k - 1));
  for (size_t i = se->anchor_mark; i-- > 0 && n < REPORT_MAPS;)
    if (!explained(d, se->marks[i]))
      d->map_mark[n++] = i;
  for (size_t i = 1; i < n; i++) /* trace order: insertion sort */
    for (size_t j = i; j > 0 && d->map_mark[j - 1] > d->map_mark[j]; j--) {
      size_t t = d->map_mark[j];
      d->map_mark[j] = d->map_mark[j - 1];
      d->map_mark[j - 1] = t;
    }
  d->nmaps = n;
}

static as_status_t gather_maps(const explain_opts_t *o, explain_open_fn open,
                               void *user, plots_t *p, replay_data_t *d,
                               as_err_t *err) {
  choose_maps(d);
  as_status_t rc = AS_OK;
  for (size_t i = 0; i < d->nmaps && rc == AS_OK; i++) {
    explain_marks_t marks;
    char            id[32];
    const char     *label = d->se.marks[d->map_mark[i]];
    rc = explain_replay_at(o, open, user, label, map_here, &d->maps[i], &marks,
                           NULL, 0, err);
    snprintf(id, sizeof id, "map%zu", i);
    if (rc == AS_OK && d->maps[i].nrows > 0)
      rc = plot_map(p, &d->maps[i], id, label, err);
  }
  explain_marks_t marks;
  if (rc == AS_OK)
    rc = explain_replay_at(o, open, user, NULL, map_here, &d->end_map, &marks,
                           NULL, 0, err);
  if (rc == AS_OK && d->end_map.nrows > 0)
    rc = plot_map(p, &d->end_map, "map_end", "the end", err);
  return rc;
}

static as_status_t gather(const explain_opts_t *o, explain_open_fn open,
                          void *user, plots_t *p, replay_data_t *d,
                          const store_sample_t *measured, size_t nm,
                          bool same_clock, as_err_t *err) {
  as_status_t rc =
      collect_series(o, open, user, &d->se, d->model, sizeof d->model, err);
  if (rc == AS_OK)
    rc = series_baseline(&d->se, measured, nm, same_clock, err);
  if (rc == AS_OK)
    rc = plot_series(p, &d->se, measured, nm, same_clock, err);
  char desc[512];
  if (rc == AS_OK) /* first: the marks explained get heap maps */
    rc = explain_trace(o, open, user, d->ex, &d->nex, desc, sizeof desc, err);
  if (rc == AS_OK)
    rc = gather_maps(o, open, user, p, d, err);
  if (rc == AS_OK)
    rc = advise_trace(o, open, user, &d->adv, err);
  return rc;
}

/* The figure of heap map id, drawn at `at` ("mark LABEL", "the end"). */
static void page_map(FILE *f, const plots_t *p, const char *id,
                     const char *at) {
  char cap[256]; /* 120-byte text + "mark " and a label of up to 63 */
  snprintf(cap, sizeof cap,
           "Heap map at %s: one row per arena, heap or mapping; green live, "
           "amber cached, red free but resident, blue metadata, grey not "
           "resident.",
           at);
  page_plot(f, p, id, cap);
}

/* The heap maps, and which marks have none: a trace can have hundreds. */
static void page_maps(FILE *f, const plots_t *p, const replay_data_t *d) {
  const series_t *se = &d->se;
  fprintf(f, "<h2>Heap maps</h2>\n");
  if (se->nmarks > d->nmaps) {
    fprintf(f, "<p>At %zu of the %zu marks: those explained above, then ",
            d->nmaps, se->nmarks);
    if (se->anchor_mark > 0) {
      fprintf(f, "marks from the anchor <b>");
      html_escape(f, se->marks[se->anchor_mark]);
      fprintf(f, "</b> on, spread evenly, then those just before it "
                 "(start-up)");
    } else
      fprintf(f, "the others, spread evenly");
    fprintf(f,
            "; %zu marks have no map here (<code>allocsim map --at "
            "MARK</code> draws any). Then the end.</p>\n",
            se->nmarks - d->nmaps);
  }
  for (size_t i = 0; i < d->nmaps; i++) {
    char id[32], at[80];
    snprintf(id, sizeof id, "map%zu", i);
    snprintf(at, sizeof at, "mark %s", se->marks[d->map_mark[i]]);
    page_map(f, p, id, at);
  }
  if (d->end_map.nrows > 0)
    page_map(f, p, "map_end", "the end");
}

as_status_t report_replay(const report_opts_t *ro, const explain_opts_t *o,
                          explain_open_fn open, void *user,
                          const store_sample_t *measured, size_t nmeasured,
                          bool same_clock, const char *source_name,
                          as_err_t *err) {
  plots_t        p;
  replay_data_t *d = calloc(1, sizeof *d);
  as_status_t    rc = d == NULL ? as_err_set(err, AS_ENOMEM, "out of memory")
                                : plots_open(&p, ro, err);
  if (rc != AS_OK) {
    free(d);
    return rc;
  }
  /* gather replays the trace several times (series, explain, advise):
   * each run takes over the tables the previous one freed. */
  as_reserve_reuse_begin();
  rc = gather(o, open, user, &p, d, measured, nmeasured, same_clock, err);
  as_reserve_reuse_end();
  atomic_file_t out;
  if (rc == AS_OK)
    rc = atomic_file_open(&out, ro->out_html, err);
  if (rc == AS_OK) {
    FILE *f = out.f;
    page_head(f, ro->title ? ro->title : "allocsim report");
    fprintf(f, "<p>source <code>");
    html_escape_wrapping(f, source_name);
    fprintf(f, "</code><br>model <code>");
    html_escape_wrapping(f, d->model);
    if (model_spec_composes(d->model) && o->libc != NULL && o->libc[0]) {
      fprintf(f, "</code><br>libc <code>");
      html_escape_wrapping(f, o->libc);
    }
    char note[192]; /* one layout, as explain and advise say */
    fprintf(f, "</code><br>layout ");
    html_escape_wrapping(
        f, compare_one_layout_note(o->kernel.page_size, note, sizeof note));
    fprintf(f, "</p>\n");
    page_plot(f, &p, "rss",
              "Predicted RSS and live bytes over virtual time, "
              "measured RSS where the run recorded it; dotted "
              "lines are the marks.");
    page_plot(f, &p, "owners",
              "RSS split by who holds the pages: the "
              "program's baseline, each allocator, "
              "metadata, thread stacks.");
    for (size_t i = 0; i < d->nex; i++)
      page_explain(f, &d->ex[i]);
    page_advise(f, &d->adv);
    page_maps(f, &p, d);
    fprintf(f, "</body></html>\n");
    rc = plots_commit(&p, &out, err);
  }
  for (size_t i = 0; i < REPORT_MAPS; i++)
    heapmap_free(&d->maps[i]);
  heapmap_free(&d->end_map);
  store_samples_free(&d->se.s);
  free(d->se.marks);
  free(d);
  plots_free(&p);
  return rc;
}

/* ---- Sweeps ------------------------------------------------------------- */

/* Writes sweep.dat (size page fraction kept formula, simulated points) and
 * measured.dat (size fraction kept, measured survivors runs). */
/* A sweep point's object size: its varied value, else its workload's
 * --size, else -1 (the workload's default). */
static long long point_size(sqlite3_stmt *st) {
  if (sqlite3_column_type(st, 0) != SQLITE_NULL)
    return sqlite3_column_int64(st, 0);
  const char *args = (const char *)sqlite3_column_text(st, 5);
  const char *at = args ? strstr(args, "--size ") : NULL;
  return at ? strtoll(at + 7, NULL, 10) : -1;
}

/* The key title of a sweep's data set (object size, page size) as a
 * gnuplot literal into q. */
static void sweep_set_title(char *q, size_t len, long long size,
                            long long page) {
  char what[32] = "the workload's default size", title[96];
  if (size >= 0)
    snprintf(what, sizeof what, "%lld B", size);
  snprintf(title, sizeof title, "%s, %lld KiB pages: simulated", what,
           page >> 10);
  gp_quote(q, len, title);
}

/* sweep.dat: one gnuplot data set (index) per object size and page size,
 * rows "fraction kept_MiB formula_MiB"; the plot script, one colour per
 * set, its points and formula line alike, into *script (malloc'd). */
static as_status_t sweep_data(plots_t *p, store_t *s, int64_t sweep_id,
                              size_t *npoints, char **script, as_err_t *err) {
  sqlite3      *db = store_db(s);
  sqlite3_stmt *st = NULL;
  size_t        len = 0;
  FILE         *f = plots_file(p, "sweep.dat", err), *b = NULL;
  if (f == NULL)
    return err->code;
  if ((b = open_memstream(script, &len)) == NULL) {
    fclose(f);
    return as_err_set(err, AS_ENOMEM, "out of memory for a plot");
  }
  fprintf(b, "set logscale x\nset xlabel 'survivor fraction'\n"
             "set ylabel 'kept MiB (RSS after - RSS at start)'\n"
             "set key outside right top\nset grid\n"
             "set title 'kept memory against survivor fraction'\nplot ");
  int rc = sqlite3_prepare_v2(
      db,
      "SELECT json_extract(params_json, '$.size'), page_size, "
      "json_extract(params_json, '$.fraction'), simulated_kept_bytes, "
      "formula_kept_bytes, json_extract(params_json, '$.args') "
      "FROM sweep_points WHERE sweep_id = ?1 AND "
      "simulated_kept_bytes IS NOT NULL ORDER BY 1, 2, 3",
      -1, &st, NULL);
  *npoints = 0;
  long long size = -2, page = -1;
  int       set = -1;
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, sweep_id);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      double frac = sqlite3_column_double(st, 2);
      if (frac <= 0)
        continue; /* a log axis: fraction 0 has no place on it */
      long long sz = point_size(st);
      if (sz != size || sqlite3_column_int64(st, 1) != page) {
        size = sz;
        page = sqlite3_column_int64(st, 1);
        fprintf(f, set++ < 0 ? "" : "\n\n");
        char title[2 * 96 + 3];
        sweep_set_title(title, sizeof title, size, page);
        fprintf(b,
                "%s'sweep.dat' index %d using 1:2 with points pt 7 ps 0.8 "
                "lc %d title %s, "
                "'sweep.dat' index %d using 1:3 with lines lw 2 dt 2 lc %d "
                "title 'formula (1 - p)^k'",
                set ? ", " : "", set, set + 1, title, set, set + 1);
      }
      fprintf(f, "%.10g %.4f %.4f\n", frac, sqlite3_column_double(st, 3) / MIB,
              sqlite3_column_type(st, 4) == SQLITE_NULL
                  ? NAN
                  : sqlite3_column_double(st, 4) / MIB);
      (*npoints)++;
    }
    rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
  }
  fprintf(b,
          "%s'measured.dat' using 2:3 with points pt 4 ps 1.2 "
          "lc rgb '#d62728' title 'measured'\n",
          set >= 0 ? ", " : "");
  sqlite3_finalize(st);
  as_status_t written = plots_close(p, f, "sweep.dat", err);
  if (fclose(b) != 0 && rc == SQLITE_OK)
    return as_err_set(err, AS_ENOMEM, "out of memory for a plot");
  if (rc != SQLITE_OK)
    return as_err_set(err, AS_ESTORE, "%s: sweep %" PRId64 ": %s",
                      store_path(s), sweep_id, sqlite3_errmsg(db));
  return written;
}

/* measured.dat (size fraction kept): the measured survivors runs the
 * formula covers, as formula --validate selects and replays them. */
static as_status_t measured_data(plots_t *p, const fv_result_t *fv,
                                 as_err_t *err) {
  FILE *f = plots_file(p, "measured.dat", err);
  if (f == NULL)
    return err->code;
  for (size_t i = 0; i < fv->npoints; i++)
    if (fv->points[i].pattern == SURVIVORS_RANDOM)
      fprintf(f, "%" PRIu64 " %.10g %.4f\n", fv->points[i].size_bytes,
              fv->points[i].fraction, fv->points[i].measured_kept_bytes / MIB);
  fprintf(f, "\n");
  return plots_close(p, f, "measured.dat", err);
}

/* The formula against the recorded runs (formula --validate), a table. */
static void page_validation(FILE *f, const fv_result_t *fv) {
  if (fv->ngroups == 0)
    return;
  fprintf(f, "<h2>The formula against the recorded runs</h2>\n<p>For each "
             "model, object size and page size, the objects per arena k "
             "fitted to the measured runs (nonlinear least squares, 95%% "
             "interval) beside k from the allocator's geometry, and the rms "
             "error of the formula and of the simulation against the "
             "measurements (<code>allocsim formula --validate</code>).</p>\n"
             "<table><tr><th>model</th><th>size</th><th>page</th>"
             "<th>runs</th><th>k geometry</th><th>k fitted (95%% CI)</th>"
             "<th>rms formula MiB</th><th>rms simulation MiB</th></tr>\n");
  for (size_t g = 0; g < fv->ngroups; g++) {
    const fv_group_t *q = &fv->groups[g];
    fprintf(f, "<tr><td>");
    html_escape(f, q->model);
    fprintf(f,
            "</td><td>%" PRIu64 "</td><td>%" PRIu64 "</td><td>%zu</td>"
            "<td>%" PRIu64 "</td>",
            q->size_bytes, q->page_size, q->npoints, q->k_geometry);
    if (q->fitted)
      fprintf(f, "<td>%.0f (%.0f &ndash; %.0f)</td>", q->k_fit, q->k_lo,
              q->k_hi);
    else
      fprintf(f, "<td>&ndash;</td>");
    fprintf(f, "<td>%.2f</td><td>%.2f</td></tr>\n", q->rms_formula_bytes / MIB,
            q->rms_simulated_bytes / MIB);
  }
  fprintf(f, "</table>\n");
}

as_status_t report_sweep(const report_opts_t *ro, store_t *s, int64_t sweep_id,
                         as_err_t *err) {
  plots_t     p;
  size_t      n = 0;
  as_status_t rc = plots_open(&p, ro, err);
  if (rc != AS_OK)
    return rc;
  fv_result_t fv = {0};
  char       *script = NULL;
  rc = sweep_rows_find(s, &sweep_id, err);
  if (rc == AS_OK)
    rc = sweep_data(&p, s, sweep_id, &n, &script, err);
  if (rc == AS_OK)
    rc = formula_validate(s, 1, &fv, err);
  if (rc == AS_OK)
    rc = measured_data(&p, &fv, err);
  if (rc == AS_OK && n == 0)
    rc = as_err_set(err, AS_EINVAL,
                    "%s: sweep %" PRId64 " has no point with a survivor "
                    "fraction above 0 and a kept figure to plot",
                    store_path(s), sweep_id);
  if (rc == AS_OK)
    rc = plot(&p, "sweep", script, err);
  free(script);
  atomic_file_t out;
  if (rc == AS_OK)
    rc = atomic_file_open(&out, ro->out_html, err);
  if (rc == AS_OK) {
    FILE *f = out.f;
    page_head(f, ro->title ? ro->title : "allocsim sweep report");
    fprintf(f, "<p>sweep %" PRId64 " of <code>", sweep_id);
    html_escape(f, store_path(s));
    fprintf(f, "</code>: %zu points.</p>\n", n);
    page_plot(f, &p, "sweep",
              "Kept memory after freeing all but a fraction "
              "of the objects: each simulated point, the "
              "(1 - p)^k formula, and the survivors runs "
              "measured on a real machine that the store "
              "holds.");
    page_validation(f, &fv);
    fprintf(f, "</body></html>\n");
    rc = plots_commit(&p, &out, err);
  }
  fv_result_free(&fv);
  plots_free(&p);
  return rc;
}
