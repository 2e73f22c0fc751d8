/* tests/helpers/run_cli.h -- runs a shell command line in a directory with
 * the built allocsim first on PATH, capturing its exit code, stdout and
 * stderr, and killing it (and what it started) when it outlives a timeout,
 * so a test can assert "no hang" as well as the code and the message.
 *
 * Include after <cmocka.h> in a test built with ALLOCSIM_BINARY_DIR set
 * (tests/CMakeLists.txt does it for every test).
 */
#ifndef ALLOCSIM_TEST_RUN_CLI_H
#define ALLOCSIM_TEST_RUN_CLI_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define RUN_CLI_BIN_DIR ALLOCSIM_BINARY_DIR "/cli"

typedef struct run_cli_s run_cli_t;
struct run_cli_s {
  int  code; /* exit code; 128 + N for signal N; -1 if timed out */
  bool timed_out;
  char out[65536]; /* stdout, NUL-terminated (cut at the buffer's size) */
  char err[8192];  /* stderr, likewise */
};

/* Reads the file at path into buf (at most len - 1 bytes, NUL-terminated). */
static inline void run_cli_slurp(const char *path, char *buf, size_t len) {
  buf[0] = '\0';
  FILE *f = fopen(path, "rb");
  if (f == NULL)
    return;
  size_t n = fread(buf, 1, len - 1, f);
  buf[n] = '\0';
  fclose(f);
}

/* Runs `sh -c cmd` in dir with PATH starting at the build's cli/ directory
 * and stdin from /dev/null (unless cmd redirects it).  Returns r->code. */
static inline int run_cli(run_cli_t *r, const char *dir, const char *cmd,
                          unsigned timeout_s) {
  char outp[64], errp[64];
  snprintf(outp, sizeof outp, "/tmp/.allocsim-run-cli-%d.out", (int)getpid());
  snprintf(errp, sizeof errp, "/tmp/.allocsim-run-cli-%d.err", (int)getpid());
  memset(r, 0, sizeof *r);
  pid_t pid = fork();
  if (pid < 0) {
    perror("fork");
    exit(99);
  }
  if (pid == 0) {
    setpgid(0, 0); /* one group, so a timeout kills everything */
    if (chdir(dir) != 0)
      _exit(98);
    int in = open("/dev/null", O_RDONLY);
    int out = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int er = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (in < 0 || out < 0 || er < 0)
      _exit(97);
    dup2(in, 0);
    dup2(out, 1);
    dup2(er, 2);
    char        path[8192];
    const char *old = getenv("PATH");
    snprintf(path, sizeof path, "%s:%s", RUN_CLI_BIN_DIR,
             old ? old : "/usr/bin:/bin");
    setenv("PATH", path, 1);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(96);
  }
  setpgid(pid, pid);
  int             status = 0;
  struct timespec start, now, nap = {0, 5 * 1000 * 1000};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid)
      break;
    if (w < 0 && errno != EINTR) {
      perror("waitpid");
      exit(99);
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= (time_t)timeout_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      r->timed_out = true;
      break;
    }
    nanosleep(&nap, NULL);
  }
  run_cli_slurp(outp, r->out, sizeof r->out);
  run_cli_slurp(errp, r->err, sizeof r->err);
  unlink(outp);
  unlink(errp);
  if (r->timed_out)
    r->code = -1;
  else if (WIFEXITED(status))
    r->code = WEXITSTATUS(status);
  else
    r->code = 128 + WTERMSIG(status);
  return r->code;
}

/* Number of lines in s (a last line without '\n' counts). */
static inline size_t run_cli_lines(const char *s) {
  size_t n = 0;
  for (const char *p = s; *p; p++)
    n += *p == '\n';
  return n + (*s && s[strlen(s) - 1] != '\n');
}

#endif
