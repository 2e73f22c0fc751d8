/* tests/bench/bench_rusage.c -- runs a command and reports what it cost:
 *   build/tests/bench_rusage OUT COMMAND [ARGS...]
 * writes "cpu_s system_s maxrss_bytes exit_code" to OUT once COMMAND ends
 * (cpu_s is user + system time; system_s is the part spent in the kernel).
 *
 * Why not the benchmark script's own wait4: a child forked from Python
 * starts as a copy of the interpreter, and Linux carries that copy's peak
 * RSS into the exec'd program's ru_maxrss (exec_mmap folds the old mm's
 * high-water mark into the process's), so every small replay would read
 * as Python's 12 MiB.  Forked from this program, the floor is this
 * program's own peak, about 1 MiB (`bench_rusage OUT true` shows it).
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>

extern char **environ;

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: bench_rusage OUT COMMAND [ARGS...]\n");
    return 2;
  }
  pid_t pid;
  int   e = posix_spawnp(&pid, argv[2], NULL, NULL, argv + 2, environ);
  if (e != 0) {
    fprintf(stderr, "bench_rusage: cannot run %s\n", argv[2]);
    return 127;
  }
  int           status;
  struct rusage ru;
  if (wait4(pid, &status, 0, &ru) != pid)
    return 1;
  FILE *out = fopen(argv[1], "w");
  if (out == NULL) {
    fprintf(stderr, "bench_rusage: cannot write %s\n", argv[1]);
    return 1;
  }
  double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  double sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  fprintf(out, "%.6f %.6f %ld %d\n", cpu, sys, ru.ru_maxrss * 1024L, code);
  fclose(out);
  return code;
}
