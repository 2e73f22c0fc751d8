/* tests/helpers/spawn_child.h -- runs a program whose stdout is a block of
 * fixed size, for differential tests that take the real allocator's state
 * from a fresh process (a re-executed test binary under LD_PRELOAD, or a
 * helper built against another libc).
 *
 * The child's environment is the test's, minus every variable starting
 * with one of the drop prefixes (allocator settings of the test's own
 * environment must not leak into the child), plus the extra entries.
 */
#ifndef ALLOCSIM_SPAWN_CHILD_H
#define ALLOCSIM_SPAWN_CHILD_H

#include <errno.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

typedef struct child_result_s {
  size_t got;       /* bytes read from the child's stdout (at most want) */
  bool   extra;     /* it wrote more than want */
  int    status;    /* exit status when exited, else -1 */
  int    signal;    /* the signal that killed it, else 0 */
  int    spawn_err; /* posix_spawn's error, else 0 */
} child_result_t;

static inline bool spawn_env_dropped(const char *e, const char *const *drop) {
  for (; drop != NULL && *drop != NULL; drop++)
    if (strncmp(e, *drop, strlen(*drop)) == 0)
      return true;
  return false;
}

/* Runs path with argv; reads up to want bytes of its stdout into buf. */
static inline child_result_t spawn_child(const char *path, char *const argv[],
                                         const char *const drop[],
                                         const char *const extra[], void *buf,
                                         size_t want) {
  child_result_t r = {0, false, -1, 0, 0};
  size_t         nenv = 0, nextra = 0, k = 0;
  while (environ[nenv] != NULL)
    nenv++;
  while (extra != NULL && extra[nextra] != NULL)
    nextra++;
  char **envp = calloc(nenv + nextra + 1, sizeof *envp);
  int    fds[2];
  if (envp == NULL || pipe(fds) != 0) {
    free(envp);
    r.spawn_err = ENOMEM;
    return r;
  }
  for (size_t i = 0; i < nenv; i++)
    if (!spawn_env_dropped(environ[i], drop))
      envp[k++] = environ[i];
  for (size_t i = 0; i < nextra; i++)
    envp[k++] = (char *)(uintptr_t)extra[i];
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_addclose(&fa, fds[1]);
  pid_t pid;
  r.spawn_err = posix_spawn(&pid, path, &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  free(envp);
  if (r.spawn_err != 0) {
    close(fds[0]);
    return r;
  }
  char *p = buf, one;
  for (;;) {
    ssize_t n = r.got < want ? read(fds[0], p + r.got, want - r.got)
                             : read(fds[0], &one, 1);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    if (r.got < want)
      r.got += (size_t)n;
    else
      r.extra = true;
  }
  close(fds[0]);
  int st;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  if (WIFEXITED(st))
    r.status = WEXITSTATUS(st);
  else if (WIFSIGNALED(st))
    r.signal = WTERMSIG(st);
  return r;
}

#endif
