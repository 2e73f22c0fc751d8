/* cli/cmd_oracle.c -- `allocsim oracle TRACE --allocator A`: the trace's
 * calls replayed on the real allocator in a child process, RSS measured at
 * every mark and every 10 ms, printed like compare's marks and stored as a
 * measured run.  The work is oracle_run() in analysis/oracle.c.
 */
#include "cli.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../analysis/oracle.h"
#include "../analysis/record.h"
#include "../analysis/store.h"
#include "../models/env.h"
#include "../models/model.h"
#include "../sim/units.h"

typedef struct oracle_args_s oracle_args_t;
struct oracle_args_s {
  oracle_opts_t o;
  const char   *trace, *workload, *db;
  bool          json;
};

/* The run's environment as the models read it: the --env values and the
 * allocator's library as LD_PRELOAD. */
typedef struct oracle_env_s {
  const oracle_args_t *a;
  char                 lib[512];
} oracle_env_t;

static const char *oracle_env_get(void *user, const char *key) {
  const oracle_env_t *e = user;
  if (strncmp(key, "env.", 4) != 0)
    return NULL;
  key += 4;
  if (strcmp(key, "LD_PRELOAD") == 0)
    return e->lib[0] ? e->lib : NULL;
  size_t n = strlen(key);
  for (size_t i = 0; i < e->a->o.nenv; i++)
    if (strncmp(e->a->o.env[i], key, n) == 0 && e->a->o.env[i][n] == '=')
      return e->a->o.env[i] + n + 1;
  return getenv(key); /* the child inherits the rest of ours */
}

/* With --db, an --env value the model of the stored run would refuse
 * (MALLOC_ARENA_MAX=banana) is a usage error before the replay, not a
 * failure to store after it. */
static int check_env(const oracle_args_t *a) {
  if (a->db == NULL)
    return CLI_EXIT_OK;
  oracle_env_t e = {.a = a};
  if (a->o.lib != NULL)
    snprintf(e.lib, sizeof e.lib, "%s", a->o.lib);
  else
    oracle_default_lib(a->o.allocator, e.lib, sizeof e.lib);
  char     model[512], libc[512];
  as_err_t err = {0};
  if (model_specs_for_run(oracle_env_get, &e, model, sizeof model, libc,
                          sizeof libc, &err) != AS_OK)
    return cli_usage_error("oracle", "--env: %s", err.msg);
  return CLI_EXIT_OK;
}

static int parse_args(int argc, char **argv, oracle_args_t *a) {
  memset(a, 0, sizeof *a);
  a->o.allocator = ORACLE_GLIBC;
  a->o.idle_scale = 1.0;
  a->o.sample_every_ns = 10000000; /* 10 ms, as capture and heaptrack */
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i], *v = NULL;
    int         took;
#define VALUE(name) ((took = cli_opt_value("oracle", argc, argv, &i, name, &v)))
    if (VALUE("--allocator")) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (!oracle_allocator_parse(v, &a->o.allocator))
        return cli_usage_error("oracle",
                               "--allocator expects glibc, jemalloc, "
                               "mimalloc, tcmalloc or musl, got '%s'",
                               v);
    } else if (VALUE("--lib")) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      a->o.lib = v;
    } else if (VALUE("--env")) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      size_t len = strcspn(v, "=");
      if (len == 0 || v[len] != '=' || len > 64)
        return cli_usage_error("oracle",
                               "--env expects NAME=VALUE (a name of "
                               "1 to 64 bytes), got '%s'",
                               v);
      if (a->o.nenv == ORACLE_MAX_ENV)
        return cli_usage_error("oracle", "at most %d --env", ORACLE_MAX_ENV);
      /* One value a name: the stored run's model reads one, the child
       * would get the last. */
      for (size_t k = 0; k < a->o.nenv; k++)
        if (strncmp(a->o.env[k], v, len + 1) == 0)
          return cli_usage_error("oracle",
                                 "--env %.*s given twice ('%s', then '%s')",
                                 (int)len, v, a->o.env[k], v);
      a->o.env[a->o.nenv++] = v;
    } else if (VALUE("--idle-scale")) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (!as_parse_real(v, &a->o.idle_scale) || a->o.idle_scale < 0 ||
          a->o.idle_scale > 1000)
        return cli_usage_error("oracle",
                               "--idle-scale expects a factor from "
                               "0 to 1000 (0.1: sleep a tenth), got '%s'",
                               v);
    } else if (VALUE("--sample-every")) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      if (!as_parse_duration_ns(v, &a->o.sample_every_ns))
        return cli_usage_error("oracle",
                               "--sample-every expects a duration "
                               "such as 10ms, or 0 for marks only, got '%s'",
                               v);
    } else if (VALUE("--workload")) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      a->workload = v;
    } else if (VALUE("-o") || VALUE("--output")) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      a->o.out_path = v;
    } else if (VALUE("--db")) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      a->db = v;
    } else if ((took = cli_opt_flag("oracle", argv, i, "--marks-only"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      a->o.marks_only = true;
    } else if ((took = cli_opt_flag("oracle", argv, i, "--lenient"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      a->o.lenient = true;
    } else if ((took = cli_opt_flag("oracle", argv, i, "--json"))) {
      if (took < 0)
        return CLI_EXIT_USAGE;
      a->json = true;
    } else if (arg[0] == '-' && arg[1] != '\0') {
      return cli_usage_error("oracle", "unknown option '%s'", arg);
    } else if (a->trace == NULL) {
      a->trace = arg;
    } else {
      return cli_usage_error("oracle", "expected one TRACE, got '%s' too", arg);
    }
#undef VALUE
  }
  if ((a->trace == NULL) == (a->workload == NULL))
    return cli_usage_error("oracle", "expected a TRACE or --workload LINE "
                                     "(one of them)");
  if (a->o.marks_only && a->o.out_path == NULL)
    return cli_usage_error("oracle", "--marks-only needs -o OUT: it says "
                                     "what OUT holds");
  if (a->o.marks_only && a->trace != NULL)
    return cli_usage_error("oracle", "--marks-only is for --workload: a "
                                     "TRACE's run refers to its calls");
  if (a->db != NULL && a->o.out_path == NULL)
    return cli_usage_error("oracle", "--db needs -o OUT: the measured run "
                                     "refers to the trace it stores");
  if (cli_same_file(a->o.out_path, a->trace))
    return cli_usage_error("oracle", "TRACE and OUT are the same file '%s'",
                           a->trace);
  if (cli_same_file(a->o.out_path, a->db))
    return cli_usage_error("oracle", "OUT and --db are the same file '%s'",
                           a->db);
  a->o.command = cli_command_line(argc, argv);
  return check_env(a);
}

static double mib(uint64_t b) {
  return (double)b / 1048576.0;
}

static void print_json(const oracle_args_t *a, const oracle_run_t *r,
                       int64_t run_id) {
  printf("{\"allocator\": ");
  cli_json_string(stdout, oracle_allocator_name(a->o.allocator));
  printf(", \"library\": ");
  cli_json_string(stdout, r->library);
  printf(", \"peak_rss_bytes\": %" PRIu64 ", \"peak_t_ns\": %" PRIu64
         ", \"final_rss_bytes\": %" PRIu64 ", \"baseline_rss_bytes\": %" PRIu64
         ", \"marks\": [",
         r->peak_rss_bytes, r->peak_t_ns, r->final_rss_bytes,
         r->baseline_rss_bytes);
  for (size_t i = 0; i < r->nmarks; i++) {
    printf("%s{\"label\": ", i ? ", " : "");
    cli_json_string(stdout, r->marks[i].label);
    printf(", \"t_ns\": %" PRIu64 ", \"rss_bytes\": %" PRIu64 "}",
           r->marks[i].t_ns, r->marks[i].rss_bytes);
  }
  printf("], \"samples\": %zu, \"events\": %" PRIu64 ", \"ops\": %" PRIu64
         ", \"unsupported\": %" PRIu64 ", \"skipped\": %" PRIu64
         ", \"threads\": %" PRIu64 ", \"thread_dtvs\": %" PRIu64
         ", \"wall_s\": %.3f, \"calls_cpu_ns\": %" PRIu64 ", \"trace\": ",
         r->nsamples, r->events, r->ops, r->unsupported, r->skipped, r->threads,
         r->dtvs, r->wall_s, r->calls_cpu_ns);
  cli_json_string(stdout, a->o.out_path);
  if (run_id > 0)
    printf(", \"run\": %" PRId64 "}\n", run_id);
  else
    printf(", \"run\": null}\n");
}

static void print_table(const oracle_args_t *a, const oracle_run_t *r,
                        int64_t run_id) {
  printf("trace      %s%s\n", a->workload ? "workload: " : "",
         a->workload ? a->workload : a->trace);
  printf("allocator  %s (malloc from %s)\n",
         oracle_allocator_name(a->o.allocator), r->library);
  printf("replayer   %s, %" PRIu64 " thread%s\n", r->replayer, r->threads,
         r->threads == 1 ? "" : "s");
  printf("baseline   %.2f MiB: the replayer before the first call (its code, "
         "libraries,\n           object table), subtracted from every "
         "figure\n",
         mib(r->baseline_rss_bytes));
  printf("events     %" PRIu64 " (%" PRIu64 " calls replayed in %.2f s",
         r->events, r->ops, r->wall_s);
  if (r->unsupported)
    printf(", %" PRIu64 " with no %s counterpart", r->unsupported,
           oracle_allocator_name(a->o.allocator));
  if (r->skipped)
    printf(", %" PRIu64 " skipped (--lenient)", r->skipped);
  printf(")\n\n%-24s %12s %12s\n", "mark", "t (ms)", "rss MiB");
  for (size_t i = 0; i < r->nmarks; i++)
    printf("%-24s %12.3f %12.2f\n", r->marks[i].label,
           (double)r->marks[i].t_ns / 1e6, mib(r->marks[i].rss_bytes));
  printf("%-24s %12.3f %12.2f\n\n", "final", (double)r->final_t_ns / 1e6,
         mib(r->final_rss_bytes));
  printf("peak rss   %.2f MiB at t=%.3f ms (marks and %zu samples)\n",
         mib(r->peak_rss_bytes), (double)r->peak_t_ns / 1e6, r->nsamples);
  if (a->o.out_path != NULL)
    printf("trace out  %s\n", a->o.out_path);
  if (r->dtvs > 0)
    printf("           + %" PRIu64 " calloc%s of %" PRIu64
           " bytes on thread 0: the DTV%s the replayer's\n"
           "           pthread_create took from glibc's heap (mallinfo2)\n",
           r->dtvs, r->dtvs == 1 ? "" : "s", r->dtv_chunk_bytes - 16,
           r->dtvs == 1 ? "" : "s");
  if (r->dtvs_freed > 0)
    printf("           + %" PRIu64 " free%s of them, where glibc's stack "
           "cache let a stack go\n",
           r->dtvs_freed, r->dtvs_freed == 1 ? "" : "s");
  if (run_id > 0)
    printf("stored     measured run %" PRId64
           " in %s (allocsim compare %" PRId64 " --db %s)\n",
           run_id, a->db, run_id, a->db);
}

static int oracle_main(int argc, char **argv) {
  oracle_args_t a;
  int           code = parse_args(argc, argv, &a);
  if (code != CLI_EXIT_OK)
    return code;
  oracle_run_t r;
  as_err_t     err = {0};
  /* A store that cannot take the run is refused before the replay, which
   * would otherwise write OUT and then fail. */
  if (a.db != NULL && store_check_writable(a.db, &err) != AS_OK)
    return cli_fail("oracle", &err);
  if (oracle_run(a.trace, a.workload, &a.o, &r, &err) != AS_OK) {
    oracle_run_free(&r);
    return cli_fail("oracle", &err);
  }
  int64_t run_id = 0;
  if (a.db != NULL &&
      model_find(oracle_allocator_name(a.o.allocator)) == NULL) {
    /* record would predict it with another allocator's model */
    fprintf(stderr,
            "allocsim oracle: not recorded in %s: no %s model is "
            "registered (record %s once one is)\n",
            a.db, oracle_allocator_name(a.o.allocator), a.o.out_path);
  } else if (a.db != NULL) {
    store_t      *s;
    record_info_t info;
    if (store_open(a.db, &s, &err) != AS_OK ||
        record_trace_file(s, a.o.out_path, a.o.command, NULL, 0, &info, &err) !=
            AS_OK) {
      oracle_run_free(&r);
      return cli_fail("oracle", &err);
    }
    store_close(s);
    run_id = info.run_id;
  }
  if (a.json)
    print_json(&a, &r, run_id);
  else
    print_table(&a, &r, run_id);
  oracle_run_free(&r);
  return CLI_EXIT_OK;
}

const cli_command_t cli_cmd_oracle = {
    .name = "oracle",
    .summary = "replay a trace on the real allocator and measure its RSS",
    .usage =
        "usage: allocsim oracle TRACE|--workload LINE [--allocator A]\n"
        "                       [--lib PATH] [--env NAME=VALUE]... "
        "[--idle-scale F]\n"
        "                       [--sample-every T] [--lenient] [-o OUT "
        "[--marks-only]\n"
        "                       [--db DB]] [--json]\n\n"
        "Replays the trace's calls in a child process on a real allocator:\n"
        "each thread of the trace on a thread of its own, every call in the\n"
        "trace's order (cross-thread frees included), each block written as\n"
        "the program wrote it (touch events for unwritten ones), marks,\n"
        "malloc_trim, purges (mallctl, mi_collect, ReleaseFreeMemory),\n"
        "option events (mallopt, mallctl, mi_option_set, tcmalloc\n"
        "properties) and idles as real sleeps.  RSS comes from the child's\n"
        "/proc smaps_rollup at every mark and every --sample-every, net of\n"
        "its baseline: the replayer's RSS once it is ready and before the\n"
        "first call (its code, libraries and object table), so the figures\n"
        "read like `allocsim replay --json` of the matching model.\n\n"
        "Clock: the replayer times each call (CLOCK_MONOTONIC, from the\n"
        "first call) and OUT carries those times instead of the trace's\n"
        "(provenance clock=oracle; an idle lasts its scaled sleep), so that\n"
        "compare replays the model on the clock the real allocator ran on\n"
        "(mimalloc's decommit delay, jemalloc's decay).  Mark and peak\n"
        "times below are on that clock.\n\n"
        "Threads: glibc's pthread_create, when it maps a new stack, callocs\n"
        "the thread's DTV from the creating thread, a call the trace does\n"
        "not hold; with glibc, OUT gains it (a calloc on thread 0 before the\n"
        "thread's first op, measured with mallinfo2; provenance\n"
        "oracle_thread_dtvs) and its free where glibc's stack cache lets\n"
        "the stack go; for other allocators it is not in OUT.\n\n"
        "allocators (--allocator, default glibc):\n"
        "  glibc      the system's C library\n"
        "  jemalloc   LD_PRELOAD of Debian's libjemalloc.so.2 (or --lib)\n"
        "  mimalloc   LD_PRELOAD of libmimalloc.so.2 (or --lib)\n"
        "  tcmalloc   LD_PRELOAD of gperftools' libtcmalloc_minimal.so.4\n"
        "  musl       a replayer linked statically by musl-gcc (built when\n"
        "             musl-gcc was found)\n\n"
        "options:\n"
        "  --workload LINE     a synthetic workload instead of a TRACE\n"
        "                      ('lab-brk', 'survivors --size 64 ...')\n"
        "  --lib PATH          the library to preload instead of Debian's\n"
        "  --env NAME=VALUE    set in the child (MALLOC_ARENA_MAX=2,\n"
        "                      MALLOC_CONF=..., MIMALLOC_...); repeatable,\n"
        "                      each NAME once.  The trace records every\n"
        "                      allocator setting the child had,\n"
        "                      inherited ones too\n"
        "  --idle-scale F      sleep F times each idle (default 1; 0: none)\n"
        "  --sample-every T    RSS sample period (default 10ms; 0: marks "
        "only)\n"
        "  --lenient           skip (and count) frees and reallocs of dead\n"
        "                      objects, allocations of live ones, and options\n"
        "                      the allocator has no call for\n"
        "  -o, --output OUT    write the trace with the measurements as rss\n"
        "                      events (.astrace: binary); for --workload,\n"
        "                      its generated calls, on the oracle's clock\n"
        "  --marks-only        write only the marks and samples to OUT, not\n"
        "                      the calls: a smaller file, but compare then\n"
        "                      regenerates a workload's calls on the\n"
        "                      workload's own clock, without the DTVs\n"
        "  --db DB             store OUT as a measured run (then `allocsim\n"
        "                      compare RUN --db DB` predicts it); not for an\n"
        "                      allocator no registered model covers\n"
        "  --json              {\"allocator\", \"peak_rss_bytes\", \"marks\": "
        "[{\"label\",\n"
        "                      \"t_ns\", \"rss_bytes\"}], ...}\n",
    .run = oracle_main,
};
