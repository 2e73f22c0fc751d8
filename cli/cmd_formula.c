/* cli/cmd_formula.c -- `allocsim formula`: expected memory kept by
 * survivors, from the (1 - p)^k formula (analysis/formula.h). */
#include "cli.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../analysis/formula.h"
#include "../sim/units.h"

#define MIB 1048576.0

/* A bad option value: a usage error (exit 2), as for every command. */
static int bad_value(const char *opt, const char *expected, const char *got) {
  return cli_usage_error("formula", "%s expects %s, got '%s'", opt, expected,
                         got);
}

/* "st", "nd", "rd" or "th": English ordinal suffix of n (1st, 12th, 22nd). */
static const char *ordinal_suffix(uint64_t n) {
  if (n % 100 >= 11 && n % 100 <= 13)
    return "th";
  static const char *const suffix[] = {"th", "st", "nd", "rd"};
  return n % 10 <= 3 ? suffix[n % 10] : "th";
}

static bool parse_num(const char *s, double lo, double hi, double *out) {
  double v;
  if (!as_parse_real(s, &v) || v < lo || v > hi)
    return false;
  *out = v;
  return true;
}

/* Options given, for those that apply only beside some others. */
typedef struct formula_given_s {
  bool fraction, every, page_size, version;
} formula_given_t;

/* Refuses an option the others make irrelevant, as --page-bytes with
 * --allocator mimalloc is, rather than ignoring it without a word. */
static int check_relevant(const formula_input_t *in, bool mimalloc,
                          const formula_given_t *g) {
  if (g->version && !mimalloc)
    return cli_usage_error("formula", "--version needs --allocator mimalloc "
                                      "(it is the mimalloc model's version)");
  if (g->every && in->pattern != SURVIVORS_STRIDE)
    return cli_usage_error("formula", "--every needs --pattern stride (the "
                                      "other patterns keep a --fraction)");
  if (g->fraction && in->pattern == SURVIVORS_STRIDE)
    return cli_usage_error("formula",
                           "--fraction does not apply to --pattern stride "
                           "(it keeps every N-th object: --every N)");
  if (g->page_size && (in->page_bytes != 0 || mimalloc))
    return cli_usage_error("formula",
                           "--page-size and %s exclude each other (the OS "
                           "page only decides pymalloc arenas' alignment)",
                           mimalloc ? "--allocator mimalloc" : "--page-bytes");
  if (mimalloc && in->page_bytes != 0)
    return cli_usage_error("formula", "--page-bytes and --allocator "
                                      "mimalloc exclude each other (the model "
                                      "chooses the page)");
  return CLI_EXIT_OK;
}

static int formula_main(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--validate") == 0)
      return formula_validate_main(argc, argv);
  formula_input_t in = {.size_bytes = 64,
                        .total_bytes = UINT64_C(256) << 20,
                        .pattern = SURVIVORS_RANDOM,
                        .fraction = 1e-4,
                        .every = 1000};
  uint64_t        os_page = 4096;
  bool            json = false;
  bool            mimalloc = false;
  const char     *mi_version = FORMULA_MIMALLOC_VERSION;
  formula_given_t given = {false, false, false, false};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v;
    double      d;
    int         took = cli_opt_flag("formula", argv, i, "--json");
    if (took < 0)
      return CLI_EXIT_USAGE;
    if (took) {
      json = true;
      continue;
    }
    static const char *const valued[] = {
        "--size",       "--total",     "--fraction",  "--pattern", "--every",
        "--page-bytes", "--page-size", "--allocator", "--version"};
    const char *opt = NULL;
    for (size_t k = 0; k < sizeof valued / sizeof valued[0] && !opt; k++) {
      took = cli_opt_value("formula", argc, argv, &i, valued[k], &v);
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (took)
        opt = valued[k];
    }
    if (opt == NULL)
      return cli_usage_error("formula", "unknown option '%s'", a);
    if (strcmp(opt, "--size") == 0) {
      if (!as_parse_bytes(v, &in.size_bytes) || in.size_bytes == 0)
        return bad_value("--size", "a size in bytes such as 64", v);
    } else if (strcmp(opt, "--total") == 0) {
      if (!parse_num(v, 1e-6, 1048576, &d))
        return bad_value("--total", "MiB in (0, 1048576]", v);
      in.total_bytes = (uint64_t)(d * MIB);
    } else if (strcmp(opt, "--fraction") == 0) {
      if (!parse_num(v, 0, 1, &in.fraction))
        return bad_value("--fraction", "a number in [0, 1]", v);
      given.fraction = true;
    } else if (strcmp(opt, "--pattern") == 0) {
      if (!survivors_pattern_parse(v, &in.pattern))
        return bad_value("--pattern", "random, stride or oldest", v);
    } else if (strcmp(opt, "--every") == 0) {
      if (!parse_num(v, 1, 1e18, &d) || d != floor(d))
        return bad_value("--every", "an integer >= 1", v);
      in.every = (uint64_t)d;
      given.every = true;
    } else if (strcmp(opt, "--page-bytes") == 0) {
      if (!as_parse_bytes(v, &in.page_bytes) || in.page_bytes == 0)
        return bad_value("--page-bytes", "a page size such as 65536 or 64K", v);
    } else if (strcmp(opt, "--allocator") == 0) {
      if (strcmp(v, "mimalloc") != 0 && strcmp(v, "pymalloc") != 0)
        return bad_value("--allocator", "pymalloc or mimalloc", v);
      mimalloc = strcmp(v, "mimalloc") == 0;
    } else if (strcmp(opt, "--version") == 0) {
      mi_version = v;
      given.version = true;
    } else {
      if (!as_parse_page_size(v, &os_page))
        return bad_value("--page-size", "4096, 16384 or 65536 (4K, 16K, 64K)",
                         v);
      given.page_size = true;
    }
  }
  /* An arena is 16 KiB aligned (64 pools) only if mmap returns addresses
   * that are multiples of 16 KiB, i.e. with OS pages of 16 KiB or more;
   * with 4 KiB pages the survivors study's arenas had 63, as had CPython
   * 3.11's on Debian 12 (3.11.2 Objects/obmalloc.c:1670-1674). */
  in.arena_aligned = os_page >= 16384;
  int bad = check_relevant(&in, mimalloc, &given);
  if (bad != CLI_EXIT_OK)
    return bad;
  if (mimalloc)
    in.mimalloc = mi_version;

  formula_result_t r;
  as_err_t         err = {0};
  if (formula_survivors(&in, &r, &err) != AS_OK) {
    /* Every input is an option: a combination the formula cannot take is
     * a usage error.  The message already starts with "formula: ". */
    fprintf(stderr, "allocsim %s\n", err.msg);
    return err.code == AS_ENOMEM ? CLI_EXIT_INPUT : CLI_EXIT_USAGE;
  }

  bool        pages = in.page_bytes != 0 || in.mimalloc != NULL;
  const char *unit = pages ? "page" : "arena";
  if (json) {
    printf("{\"size_bytes\":%" PRIu64 ",\"total_bytes\":%" PRIu64
           ",\"pattern\":\"%s\",\"fraction\":%.17g,\"every\":%" PRIu64
           ",\"unit\":\"%s\",\"unit_bytes\":%" PRIu64
           ",\"block_bytes\":%" PRIu64 ",\"objects\":%" PRIu64 ",\"k\":%" PRIu64
           ",\"units\":%.17g,\"q\":%.17g,\"pinned\":%.17g,"
           "\"kept_bytes\":%.17g,\"sd_bytes\":%.17g,\"kept_mib\":%.6f,"
           "\"sd_mib\":%.6f,\"all_units_bytes\":%.17g%s%s%s}\n",
           in.size_bytes, in.total_bytes, survivors_pattern_name(in.pattern),
           in.fraction, in.every, unit, r.unit_bytes, r.block_bytes, r.objects,
           r.k, r.units, r.q, r.pinned, r.kept_bytes, r.sd_bytes,
           r.kept_bytes / MIB, r.sd_bytes / MIB, r.all_bytes,
           in.mimalloc ? ",\"mimalloc_version\":\"" : "",
           in.mimalloc ? in.mimalloc : "", in.mimalloc ? "\"" : "");
    return CLI_EXIT_OK;
  }
  printf("survivors formula: %.6g MiB of %" PRIu64 "-byte objects, ",
         (double)in.total_bytes / MIB, in.size_bytes);
  if (in.pattern == SURVIVORS_STRIDE)
    printf("every %" PRIu64 "%s survives\n", in.every,
           ordinal_suffix(in.every));
  else
    printf("%s %.6g survive\n", survivors_pattern_name(in.pattern),
           in.fraction);
  if (in.mimalloc)
    printf("  unit             mimalloc %s page of %" PRIu64 " bytes, %" PRIu64
           " blocks of %" PRIu64 " bytes\n",
           in.mimalloc, r.unit_bytes, r.k, r.block_bytes);
  else if (in.page_bytes)
    printf("  unit             page of %" PRIu64 " bytes, %" PRIu64
           "-byte blocks\n",
           r.unit_bytes, r.block_bytes);
  else
    printf("  unit             pymalloc arena: %" PRIu64 " pools x %" PRIu64
           " blocks of %" PRIu64 " bytes; pinned, its pools keep %" PRIu64
           " KiB of its 1 MiB resident\n",
           r.pools, r.per_pool, r.block_bytes, r.unit_bytes / 1024);
  printf("  objects          %" PRIu64 "\n", r.objects);
  printf("  k                %" PRIu64 " objects per %s\n", r.k, unit);
  printf("  %-16s %.2f\n", pages ? "pages" : "arenas", r.units);
  printf("  %-16s %.6f\n", pages ? "P(page pinned)" : "P(arena pinned)", r.q);
  printf("  %-16s %.2f\n", pages ? "pages pinned" : "arenas pinned", r.pinned);
  printf("  expected kept    %.2f MiB%s\n", r.kept_bytes / MIB,
         in.mimalloc ? " (once every empty page is purged)" : "");
  printf("  std dev          %.2f MiB\n", r.sd_bytes / MIB);
  if (in.mimalloc)
    printf("  without a purge  %.2f MiB (every page stays resident until a "
           "purge runs)\n",
           r.all_bytes / MIB);
  return CLI_EXIT_OK;
}

const cli_command_t cli_cmd_formula = {
    .name = "formula",
    .summary = "expected memory a few survivors pin: the (1 - p)^k formula",
    .usage =
        "usage: allocsim formula [--size BYTES] [--total MIB] [--fraction P]\n"
        "                        [--pattern random|stride|oldest] [--every N]\n"
        "                        [--page-bytes N] [--page-size N]\n"
        "                        [--allocator pymalloc|mimalloc] "
        "[--version V] [--json]\n"
        "       allocsim formula --validate --db STORE [--layouts N] "
        "[--json]\n\n"
        "Objects of --size bytes (default 64) filling --total MiB (256) are\n"
        "allocated in order; a fraction P (1e-4) survives.  An allocation\n"
        "unit of k objects is released only if none survived, so\n"
        "  kept = n (1 - (1 - P)^k) unit_bytes,  n = objects / k,\n"
        "with the binomial standard deviation.  By default the unit is a\n"
        "pymalloc arena: k = usable pools (63, or 64 with --page-size 16384 "
        "or\n"
        "65536, whose arenas are pool-aligned) x blocks per 16 KiB pool,\n"
        "and unit_bytes the pools a pinned arena keeps resident (63 x 16 "
        "KiB\n"
        "= 1008 KiB of its 1 MiB mapping; 1 MiB when pool-aligned).\n"
        "--page-bytes N uses mimalloc-style pages of N bytes instead: k = N /\n"
        "the mimalloc bin size.  Stride (--every N) and oldest are exact.\n"
        "An option the others make irrelevant (--every without stride,\n"
        "--fraction with it, --version without --allocator mimalloc,\n"
        "--page-size beside --page-bytes or mimalloc) is refused.\n"
        "--allocator mimalloc takes the page that the mimalloc model of\n"
        "--version (default " FORMULA_MIMALLOC_VERSION ", the copy CPython's "
        "free-threaded build\n"
        "vendors) gives the size: 64 KiB small pages for blocks up to 16 KiB,\n"
        "512 KiB medium pages above; k = the blocks a page holds after its\n"
        "start offset.  That is what is kept once every empty page is\n"
        "purged; 'without a purge' is every page, what stays resident while\n"
        "no purge runs (mimalloc purges only when something triggers it).\n\n"
        "--validate takes every measured survivors run in STORE (the shipped\n"
        "data/reference.db and any you recorded), replays it as compare does\n"
        "(--layouts N address layouts, default 1) and shows, per run, kept\n"
        "memory measured, simulated and by the formula; per model, object\n"
        "size and page size, k fitted to the measurements by nonlinear least\n"
        "squares with a 95% confidence interval, beside k from geometry.\n",
    .run = formula_main,
};
