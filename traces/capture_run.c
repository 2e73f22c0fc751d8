/* traces/capture_run.c -- runs a command under liballocsim_capture.so and
 * converts the raw logs it leaves into traces with provenance.
 */
#include "capture_run.h"

#include "helper_path.h"

#include <dirent.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <inttypes.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;


bool capture_env_knob(const char *name) {
  static const char *const prefixes[] = {"MALLOC_", "MIMALLOC_", "TCMALLOC_",
                                         NULL};
  static const char *const exact[] = {
      "GLIBC_TUNABLES", "LD_PRELOAD",     "MALLOC_CONF", "PYTHONMALLOC",
      "PYTHONHASHSEED", "JE_MALLOC_CONF", NULL};
  for (size_t i = 0; exact[i] != NULL; i++)
    if (strcmp(name, exact[i]) == 0)
      return true;
  for (size_t i = 0; prefixes[i] != NULL; i++)
    if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
      return true;
  return false;
}

static bool readable(const char *p) {
  return access(p, R_OK) == 0;
}

as_status_t capture_find_lib(char *buf, size_t len, as_err_t *err) {
  static const char *const rel[] = {"", "/../lib/allocsim", "/../lib64/allocsim",
                                    "/../lib", "/../../traces/capture", NULL};
#ifdef ALLOCSIM_CAPTURE_BUILD_LIB
  const char *built = ALLOCSIM_CAPTURE_BUILD_LIB;
#else
  const char *built = NULL;
#endif
  return helper_path_find("ALLOCSIM_CAPTURE_LIB", "liballocsim_capture.so",
                          rel, built, R_OK, buf, len, err);
}

/* The directory holding sitecustomize.py: next to the library (the build
 * copies it to LIBDIR/python), else the source tree. */
static void python_dir(const char *lib, char *buf, size_t len) {
  as_format_fits(buf, len, "%s", lib);
  char *slash = strrchr(buf, '/');
  if (slash != NULL) {
    as_format_fits(slash, len - (size_t)(slash - buf), "/python");
    char probe[PATH_MAX];
    as_format_fits(probe, sizeof probe, "%s/sitecustomize.py", buf);
    if (readable(probe))
      return;
  }
#ifdef ALLOCSIM_CAPTURE_PY_DIR
  as_format_fits(buf, len, "%s", ALLOCSIM_CAPTURE_PY_DIR);
#else
  buf[0] = '\0';
#endif
}

/* OUT.PID[.N].EXT for a secondary process's trace. */
static void secondary_path(const char *out, uint64_t pid, unsigned gen,
                           char *buf, size_t len) {
  const char *slash = strrchr(out, '/');
  const char *dot = strrchr(out, '.');
  if (dot == NULL || (slash != NULL && dot < slash) || dot == out)
    dot = out + strlen(out);
  char tail[32];
  if (gen == 0)
    as_format_fits(tail, sizeof tail, ".%" PRIu64, pid);
  else
    as_format_fits(tail, sizeof tail, ".%" PRIu64 ".%u", pid, gen);
  as_format_fits(buf, len, "%.*s%s%s", (int)(dot - out), out, tail, dot);
}

static void rm_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL)
    return;
  struct dirent *e;
  char           p[PATH_MAX];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
      continue;
    as_format_fits(p, sizeof p, "%s/%s", dir, e->d_name);
    unlink(p);
  }
  closedir(d);
  rmdir(dir);
}

/* Sets provenance k=v, made writable in the text format: control bytes
 * (a `python -c` script's newlines) become spaces, surrounding spaces go,
 * and the value is cut at 255 bytes. */
static void meta_put(trace_meta_t *m, const char *k, const char *v) {
  char key[32];
  char val[256];
  as_format_fits(key, sizeof key, "%s", k);
  as_format_fits(val, sizeof val, "%s", v);
  for (char *p = val; *p; p++)
    if ((unsigned char)*p < 0x20 || *p == 0x7f)
      *p = ' ';
  size_t n = strlen(val);
  while (n > 0 && val[n - 1] == ' ')
    val[--n] = '\0';
  size_t lead = strspn(val, " ");
  (void)trace_meta_set(m, key, val + lead, NULL);
}

/* Joins argv with spaces, quoting arguments that need it. */
static void join_argv(char *const *argv, char *buf, size_t len) {
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; argv[i] != NULL && used < len; i++) {
    bool quote = argv[i][0] == '\0' || strpbrk(argv[i], " \t\"'\\$") != NULL;
    used += (size_t)snprintf(buf + used, len - used, "%s%s%s%s", i ? " " : "",
                             quote ? "'" : "", argv[i], quote ? "'" : "");
  }
}

as_status_t capture_run(const capture_opts_t *o,
                               capture_result_t *res, as_err_t *err) {
  memset(res, 0, sizeof *res);
  if (o->argv == NULL || o->argv[0] == NULL)
    return as_err_set(err, AS_EUSAGE, "no command to capture");
  char        lib[PATH_MAX];
  as_status_t rc;
  if (o->lib_path != NULL)
    as_format_fits(lib, sizeof lib, "%s", o->lib_path);
  else if ((rc = capture_find_lib(lib, sizeof lib, err)) != AS_OK)
    return rc;
  if (!readable(lib))
    return as_err_set(err, AS_EINVAL, "%s: capture library not readable", lib);
  char abs_lib[PATH_MAX];
  if (realpath(lib, abs_lib) == NULL)
    as_format_fits(abs_lib, sizeof abs_lib, "%s", lib);

  const char *tmp = getenv("TMPDIR");
  char        dir[256];
  as_format_fits(dir, sizeof dir, "%s/allocsim-capture-XXXXXX",
           tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp(dir) == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot create: %s", dir,
                      strerror(errno));

  /* Environment: ours plus the capture settings. */
  size_t nenv = 0;
  while (environ[nenv] != NULL)
    nenv++;
  char **envp = calloc(nenv + 8, sizeof *envp);
  char   e_pre[PATH_MAX * 2], e_dir[300], e_ns[64], e_py[PATH_MAX * 2];
  char   pydir[PATH_MAX];
  if (envp == NULL) {
    rm_tree(dir);
    return as_err_set(err, AS_ENOMEM, "out of memory");
  }
  const char *old_pre = getenv("LD_PRELOAD");
  const char *old_py = getenv("PYTHONPATH");
  python_dir(abs_lib, pydir, sizeof pydir);
  /* The capture library goes first so that RTLD_NEXT finds a preloaded
   * allocator (jemalloc, mimalloc) rather than bypassing it. */
  as_format_fits(e_pre, sizeof e_pre, "LD_PRELOAD=%s%s%s", abs_lib,
           old_pre && *old_pre ? " " : "", old_pre ? old_pre : "");
  as_format_fits(e_dir, sizeof e_dir, "ALLOCSIM_CAPTURE_DIR=%s", dir);
  as_format_fits(e_ns, sizeof e_ns, "ALLOCSIM_CAPTURE_SAMPLE_NS=%" PRIu64,
           o->sample_every_ns);
  as_format_fits(e_py, sizeof e_py, "PYTHONPATH=%s%s%s", pydir,
           old_py && *old_py ? ":" : "", old_py ? old_py : "");
  size_t k = 0;
  for (size_t i = 0; i < nenv; i++)
    if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0 &&
        strncmp(environ[i], "PYTHONPATH=", 11) != 0 &&
        strncmp(environ[i], "ALLOCSIM_CAPTURE_", 17) != 0)
      envp[k++] = environ[i];
  envp[k++] = e_pre;
  envp[k++] = e_dir;
  envp[k++] = e_ns;
  if (pydir[0] != '\0')
    envp[k++] = e_py;
  envp[k] = NULL;

  /* Provenance. */
  trace_meta_t  *m = &res->meta;
  struct utsname u;
  char           buf[1024];
  join_argv(o->argv, buf, sizeof buf);
  meta_put(m, "kind", "measured");
  meta_put(m, "source", "allocsim capture");
  meta_put(m, "command", buf);
  if (uname(&u) == 0) {
    as_format_fits(buf, sizeof buf, "%s %s", u.nodename, u.machine);
    meta_put(m, "machine", buf);
    meta_put(m, "kernel", u.release);
  }
  as_format_fits(buf, sizeof buf, "%ld", sysconf(_SC_PAGESIZE));
  meta_put(m, "page_size", buf);
  as_format_fits(buf, sizeof buf, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
  meta_put(m, "ncpus", buf);
  as_format_fits(buf, sizeof buf, "glibc %s", gnu_get_libc_version());
  meta_put(m, "libc", buf);
  as_format_fits(buf, sizeof buf, "%" PRIu64, o->sample_every_ns);
  meta_put(m, "sample_every_ns", buf);
  meta_put(m, "capture_lib", abs_lib);
  meta_put(m, "rss_source",
           "/proc/self/smaps_rollup Rss minus capture "
           "library's own resident bytes");
  /* A knob whose name does not fit a provenance key as env.NAME (31 bytes:
   * TCMALLOC_MAX_TOTAL_THREAD_CACHE_BYTES) goes into malloc_env as
   * "NAME=VALUE ...", which models/env.c reads too. */
  char   long_env[256] = "";
  size_t long_len      = 0;
  for (size_t i = 0; i < nenv; i++) {
    const char *eq = strchr(environ[i], '=');
    if (eq == NULL || (size_t)(eq - environ[i]) > 64)
      continue;
    char name[72];
    as_format_fits(name, sizeof name, "%.*s", (int)(eq - environ[i]), environ[i]);
    if (!capture_env_knob(name))
      continue;
    if (strlen(name) <= 24) {
      char key[40];
      as_format_fits(key, sizeof key, "env.%s", name);
      meta_put(m, key, eq + 1);
    } else if (long_len + strlen(environ[i]) + 1 < sizeof long_env) {
      long_len += (size_t)snprintf(long_env + long_len,
                                   sizeof long_env - long_len, "%s%s",
                                   long_len ? " " : "", environ[i]);
    }
  }
  if (long_len > 0)
    meta_put(m, "malloc_env", long_env);

  /* Run. */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid;
  int   serr = posix_spawnp(&pid, o->argv[0], NULL, NULL, o->argv, envp);
  free(envp);
  if (serr != 0) {
    rm_tree(dir);
    return as_err_set(err, AS_EINVAL, "%s: cannot run: %s", o->argv[0],
                      strerror(serr));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  res->wall_s =
      (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  res->exit_code = WIFEXITED(status)     ? WEXITSTATUS(status)
                   : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                         : 1;
  as_format_fits(buf, sizeof buf, "%d", res->exit_code);
  meta_put(m, "exit_code", buf);

  /* Convert: the command's own log first, then the others.  The command's
   * process is its pid's last image: a wrapper (shell script, pyenv shim)
   * that execs the real program leaves raw.PID.0 .. raw.PID.N behind. */
  char     main_raw[PATH_MAX];
  unsigned main_gen = 0;
  for (unsigned g = 0; g < 256; g++) {
    as_format_fits(main_raw, sizeof main_raw, "%s/raw.%d.%u", dir, (int)pid, g);
    if (!readable(main_raw))
      break;
    main_gen = g;
  }
  as_format_fits(main_raw, sizeof main_raw, "%s/raw.%d.%u", dir, (int)pid, main_gen);
  if (!readable(main_raw)) {
    rc = as_err_set(err, AS_EINVAL,
                    "%s: the command wrote no capture log (a static or "
                    "setuid binary ignores LD_PRELOAD; a script's "
                    "interpreter must be dynamic)",
                    o->argv[0]);
    goto out;
  }
  if ((rc = capture_convert(main_raw, o->out_path, m, &res->main,
                                   err)) != AS_OK)
    goto out;
  if (res->main.python[0] != '\0')
    meta_put(m, "python", res->main.python);

  DIR *d = opendir(dir);
  if (d != NULL) {
    struct dirent *e;
    while ((e = readdir(d)) != NULL && rc == AS_OK) {
      unsigned long long p = 0;
      unsigned           gen = 0;
      if (sscanf(e->d_name, "raw.%llu.%u", &p, &gen) != 2 ||
          (p == (unsigned long long)pid && gen == main_gen))
        continue;
      if (res->nextra == CAPTURE_MAX_EXTRA) {
        res->nskipped++; /* counted and reported, not converted */
        continue;
      }
      char raw[PATH_MAX];
      as_format_fits(raw, sizeof raw, "%s/%s", dir, e->d_name);
      size_t x = res->nextra++;
      secondary_path(o->out_path, p, gen, res->extra_path[x],
                     sizeof res->extra_path[x]);
      trace_meta_t sm = *m;
      meta_put(&sm, "parent_trace", o->out_path);
      rc = capture_convert(raw, res->extra_path[x], &sm, &res->extra[x],
                                  err);
    }
    closedir(d);
  }

out:
  if (o->keep_raw)
    as_format_fits(res->raw_dir, sizeof res->raw_dir, "%s", dir);
  else
    rm_tree(dir);
  return rc;
}

