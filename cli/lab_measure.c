/* cli/lab_measure.c -- `allocsim lab --measure`: runs a lab's real program
 * (a C program CMake built into the labs directory, or a Python script
 * there) with the variant's environment, so that it writes a measured-run
 * file (marks, each followed by the RSS read from /proc/self/smaps_rollup).
 *
 * The environment is the caller's without any allocator knob (MALLOC_*,
 * GLIBC_TUNABLES, PYTHONMALLOC, MIMALLOC_*, TCMALLOC_*, LD_PRELOAD), so a
 * variant's "MALLOC_ARENA_MAX=8" is the only one in force; a variant that
 * preloads a model's library (jemalloc, mimalloc, tcmalloc) finds it in the
 * system's library directories by the model's preload prefix.
 */
#include "cli.h"
#include "../traces/helper_path.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define LAB_MAX_ARGS 32
#define LAB_MAX_ENV  512

/* The labs directory: $ALLOCSIM_LABS_DIR, else where lab_brk is beside the
 * binary (the build tree: build/cli/allocsim -> build/labs; an installed
 * tree: bin/allocsim -> lib/allocsim/labs), else the build's. */
as_status_t cli_lab_dir(char *buf, size_t len, as_err_t *err) {
  static const char *const rel[] = {"/../labs", "/../lib/allocsim/labs",
                                    "/../lib64/allocsim/labs", NULL};
  const char              *env = getenv("ALLOCSIM_LABS_DIR");
  if (env != NULL && *env != '\0') {
    if (!as_format_fits(buf, len, "%s", env))
      return as_err_set(err, AS_EINVAL, "ALLOCSIM_LABS_DIR: path too long");
    return AS_OK;
  }
#ifdef ALLOCSIM_LABS_BUILD_DIR
  const char *build = ALLOCSIM_LABS_BUILD_DIR "/lab_brk";
#else
  const char *build = NULL;
#endif
  as_status_t rc = helper_path_find("ALLOCSIM_LABS_DIR", "lab_brk", rel, build,
                                    X_OK, buf, len, err);
  if (rc != AS_OK)
    return as_err_set(err, AS_EINVAL,
                      "cannot find the lab programs: build the labs target, "
                      "or set ALLOCSIM_LABS_DIR");
  char *slash = strrchr(buf, '/');
  if (slash != NULL)
    *slash = '\0';
  return AS_OK;
}

/* Whether the environment entry e ("NAME=value") is an allocator knob the
 * run must not inherit. */
static bool allocator_knob(const char *e) {
  static const char *const prefixes[] = {
      "MALLOC_",   "GLIBC_TUNABLES=", "PYTHONMALLOC=",   "MIMALLOC_",
      "TCMALLOC_", "LD_PRELOAD=",     "JE_MALLOC_CONF=", NULL};
  for (size_t i = 0; prefixes[i] != NULL; i++)
    if (strncmp(e, prefixes[i], strlen(prefixes[i])) == 0)
      return true;
  return false;
}

/* The library LD_PRELOAD loads for model name: a file "<prefix>.so*" in a
 * system library directory. */
static as_status_t find_preload(const char *model, const char *library,
                                char *buf, size_t len, as_err_t *err) {
  const model_methods_t *mm = model_find(model);
  if (mm == NULL || (mm->preload == NULL && library == NULL))
    return as_err_set(err, AS_EINVAL, "model %s names no library to preload",
                      model);
  const char              *prefix = library ? library : mm->preload;
  static const char *const dirs[] = {"/usr/lib/x86_64-linux-gnu",
                                     "/usr/lib/aarch64-linux-gnu",
                                     "/lib/x86_64-linux-gnu",
                                     "/usr/lib64",
                                     "/usr/lib",
                                     "/usr/local/lib",
                                     NULL};
  size_t                   plen = strlen(prefix);
  for (size_t d = 0; dirs[d] != NULL; d++) {
    DIR *dir = opendir(dirs[d]);
    if (dir == NULL)
      continue;
    const struct dirent *e;
    char                 best[NAME_MAX + 1] = "";
    while ((e = readdir(dir)) != NULL)
      if (strncmp(e->d_name, prefix, plen) == 0 &&
          strncmp(e->d_name + plen, ".so", 3) == 0 &&
          (best[0] == '\0' || strlen(e->d_name) < strlen(best)))
        snprintf(best, sizeof best, "%s", e->d_name);
    closedir(dir);
    if (best[0] != '\0' && as_format_fits(buf, len, "%s/%s", dirs[d], best))
      return AS_OK;
  }
  return as_err_set(err, AS_EINVAL,
                    "no %s.so* in the system library directories: install "
                    "it to measure under %s",
                    prefix, model);
}

/* Splits words (space-separated) into argv[*argc...], replacing the word
 * {out} by out.  Copies go to store. */
static as_status_t add_words(const char *words, const char *out,
                             char store[][PATH_MAX], char **argv, int *argc,
                             as_err_t *err) {
  for (const char *p = words; p != NULL && *p != '\0';) {
    while (*p == ' ')
      p++;
    if (*p == '\0')
      break;
    const char *end = strchr(p, ' ');
    size_t      w = end ? (size_t)(end - p) : strlen(p);
    if (*argc + 1 >= LAB_MAX_ARGS || w >= PATH_MAX)
      return as_err_set(err, AS_EINVAL, "lab program: too many arguments");
    if (w == 5 && strncmp(p, "{out}", 5) == 0)
      snprintf(store[*argc], PATH_MAX, "%s", out);
    else
      snprintf(store[*argc], PATH_MAX, "%.*s", (int)w, p);
    argv[*argc] = store[*argc];
    (*argc)++;
    p += w;
  }
  argv[*argc] = NULL;
  return AS_OK;
}

/* The environment of the run: the caller's without allocator knobs, then
 * the variant's settings and LD_PRELOAD. */
static as_status_t build_env(const lab_variant_t *v, const char *preload,
                             char store[][PATH_MAX], char **envp,
                             as_err_t *err) {
  size_t n = 0;
  for (char **e = environ; *e != NULL && n + 1 < LAB_MAX_ENV - 16; e++)
    if (!allocator_knob(*e))
      envp[n++] = *e;
  int         nw = 0;
  char       *words[LAB_MAX_ARGS];
  as_status_t rc = add_words(v->env, "", store, words, &nw, err);
  if (rc != AS_OK)
    return rc;
  for (int i = 0; i < nw; i++)
    envp[n++] = words[i];
  if (preload != NULL) {
    if (!as_format_fits(store[nw], PATH_MAX, "LD_PRELOAD=%s", preload))
      return as_err_set(err, AS_EINVAL, "LD_PRELOAD=%s: too long", preload);
    envp[n++] = store[nw];
  }
  envp[n] = NULL;
  return AS_OK;
}

as_status_t cli_lab_measure(const lab_variant_t *v, const cli_lab_env_t *e,
                            const char *out, as_err_t *err) {
  char        dir[PATH_MAX], prog[PATH_MAX], preload[PATH_MAX];
  as_status_t rc = cli_lab_dir(dir, sizeof dir, err);
  if (rc != AS_OK)
    return rc;
  if (!as_format_fits(prog, sizeof prog, "%s/%s", dir, v->program))
    return as_err_set(err, AS_EINVAL, "%s: path too long", v->program);
  size_t plen = strlen(v->program);
  bool   is_python = plen > 3 && strcmp(v->program + plen - 3, ".py") == 0;
  if (access(prog, is_python ? R_OK : X_OK) != 0)
    return as_err_set(err, AS_EINVAL,
                      "%s: no lab program there (build the labs target, or "
                      "set ALLOCSIM_LABS_DIR)",
                      prog);
  if (v->preload != NULL && (rc = find_preload(v->preload, v->library, preload,
                                               sizeof preload, err)) != AS_OK)
    return rc;

  static char args_store[LAB_MAX_ARGS][PATH_MAX];
  static char env_store[LAB_MAX_ARGS][PATH_MAX];
  char       *argv[LAB_MAX_ARGS];
  char       *envp[LAB_MAX_ENV];
  int         argc = 0;
  if (is_python) {
    snprintf(args_store[argc], PATH_MAX, "%s", e->python);
    argv[argc] = args_store[argc];
    argc++;
  }
  snprintf(args_store[argc], PATH_MAX, "%s", prog);
  argv[argc] = args_store[argc];
  argc++;
  if ((rc = add_words(v->args, out, args_store, argv, &argc, err)) != AS_OK ||
      (rc = build_env(v, v->preload ? preload : NULL, env_store, envp, err)) !=
          AS_OK)
    return rc;

  /* The program's own report goes nowhere: the measured-run file is what
   * counts.  Its stderr stays the caller's, so its errors are seen. */
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY,
                                   0);
  pid_t pid;
  int   serr = is_python ? posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp)
                         : posix_spawn(&pid, argv[0], &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  if (serr != 0)
    return as_err_set(err, AS_EINVAL, "%s: cannot run: %s", argv[0],
                      strerror(serr));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return as_err_set(err, AS_EINVAL, "%s: waitpid: %s", argv[0],
                        strerror(errno));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return as_err_set(
        err, AS_EINVAL, "%s %s: %s %d", argv[0], v->args ? v->args : "",
        WIFEXITED(status) ? "exited with status" : "killed by signal",
        WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return AS_OK;
}
