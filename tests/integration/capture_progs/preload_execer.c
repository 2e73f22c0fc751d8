/* tests/integration/capture_progs/preload_execer.c -- execs or spawns
 * itself with an environment whose LD_PRELOAD no longer names the
 * recorder, as `env LD_PRELOAD=x CMD` or a shell's `LD_PRELOAD=x CMD` do:
 *   preload_execer setenv VALUE   setenv LD_PRELOAD=VALUE, then execv
 *   preload_execer spawn VALUE    posix_spawn with only LD_PRELOAD=VALUE
 *   preload_execer second         what both run: malloc(9003), mark
 *                                 "second"; exits 3 unless LD_PRELOAD
 *                                 holds the recorder exactly once, first
 * The recorder must keep the new image recorded, the user's library after
 * it. */
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "allocsim_mark.h"

extern char **environ;

static int recorder_first_once(void) {
  const char *v = getenv("LD_PRELOAD");
  if (v == NULL)
    return 0;
  const char *name = "liballocsim_capture.so";
  size_t      first = strcspn(v, " :");
  if (first < strlen(name) ||
      memcmp(v + first - strlen(name), name, strlen(name)) != 0)
    return 0;
  return strstr(v + first, name) == NULL;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "second") == 0) {
    void *q = malloc(9003);
    free(q);
    ALLOCSIM_MARK("second");
    return recorder_first_once() ? 0 : 3;
  }
  if (argc < 3)
    return 2;
  char *const args[] = {argv[0], "second", NULL};
  if (strcmp(argv[1], "setenv") == 0) {
    setenv("LD_PRELOAD", argv[2], 1);
    execv("/proc/self/exe", args);
    return 1;
  }
  char pre[4096] = "LD_PRELOAD=";
  strncat(pre, argv[2], sizeof pre - strlen(pre) - 1);
  char *const env[] = {pre, NULL};
  pid_t       pid;
  if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, env) != 0)
    return 1;
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
    return 1;
  return WEXITSTATUS(status);
}
