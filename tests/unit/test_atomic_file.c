/* tests/unit/test_atomic_file.c -- sim/atomic_file: the target changes only
 * on a successful commit, a device is written in place and never removed,
 * a write error is reported by commit with the path, "-" is stdout, and
 * SIGINT, SIGTERM, SIGHUP or SIGPIPE mid-write removes the temporary file
 * (and a guarded directory with its files) unless the process handles or
 * ignores the signal itself. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim/atomic_file.h"
#include "tests/helpers/scratch.h"

static char dir[64];

static int setup(void **state) {
  (void)state;
  scratch_make(dir, sizeof dir, "atomic");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  scratch_remove(dir);
  return 0;
}

static void read_all(const char *path, char *buf, size_t len) {
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(buf, 1, len - 1, f);
  buf[n] = '\0';
  fclose(f);
}

static int entries(void) {
  return scratch_entries(dir);
}

static void target_changes_only_on_commit(void **state) {
  (void)state;
  char path[128], buf[64];
  snprintf(path, sizeof path, "%s/out.txt", dir);
  FILE *f = fopen(path, "w");
  fputs("old\n", f);
  fclose(f);

  atomic_file_t af;
  as_err_t      err = {0};
  assert_int_equal(atomic_file_open(&af, path, &err), AS_OK);
  fputs("new\n", af.f);
  fflush(af.f);
  read_all(path, buf, sizeof buf);
  assert_string_equal(buf, "old\n"); /* not yet */
  assert_int_equal(entries(), 2);    /* the target and the temporary */
  atomic_file_discard(&af);
  read_all(path, buf, sizeof buf);
  assert_string_equal(buf, "old\n");
  assert_int_equal(entries(), 1);

  assert_int_equal(atomic_file_open(&af, path, &err), AS_OK);
  fputs("new\n", af.f);
  assert_int_equal(atomic_file_commit(&af, &err), AS_OK);
  read_all(path, buf, sizeof buf);
  assert_string_equal(buf, "new\n");
  assert_int_equal(entries(), 1);
}

static void owner_closed_file_is_committed(void **state) {
  (void)state;
  char path[128], buf[64];
  snprintf(path, sizeof path, "%s/fresh.txt", dir);
  atomic_file_t af;
  as_err_t      err = {0};
  assert_int_equal(atomic_file_open(&af, path, &err), AS_OK);
  fputs("x\n", af.f);
  assert_int_equal(fclose(af.f), 0);
  af.f = NULL;
  assert_int_equal(atomic_file_commit(&af, &err), AS_OK);
  read_all(path, buf, sizeof buf);
  assert_string_equal(buf, "x\n");
}

static void device_is_written_in_place_and_write_errors_reported(void **state) {
  (void)state;
  atomic_file_t af;
  as_err_t      err = {0};
  assert_int_equal(atomic_file_open(&af, "/dev/full", &err), AS_OK);
  assert_true(af.in_place);
  fputs("lost\n", af.f);
  assert_int_equal(atomic_file_commit(&af, &err), AS_EIO);
  assert_non_null(strstr(err.msg, "/dev/full: write error"));
  struct stat st;
  assert_int_equal(stat("/dev/full", &st), 0);
  assert_true(S_ISCHR(st.st_mode));

  /* A null device of our own (not /dev/null: a broken test must not break
   * the machine), discarded: it stays. */
  char null[128];
  snprintf(null, sizeof null, "%s/null", dir);
  if (mknod(null, S_IFCHR | 0666, makedev(1, 3)) != 0)
    return; /* no CAP_MKNOD: the /dev/full half above covers in-place */
  assert_int_equal(atomic_file_open(&af, null, &err), AS_OK);
  assert_true(af.in_place);
  fputs("gone\n", af.f);
  atomic_file_discard(&af);
  assert_int_equal(stat(null, &st), 0);
  assert_true(S_ISCHR(st.st_mode));
}

static void missing_directory_and_directory_targets_fail_cleanly(void **state) {
  (void)state;
  char path[128];
  snprintf(path, sizeof path, "%s/no/such/out.txt", dir);
  atomic_file_t af;
  as_err_t      err = {0};
  assert_int_equal(atomic_file_open(&af, path, &err), AS_EIO);
  assert_non_null(strstr(err.msg, path));
  assert_int_equal(atomic_file_open(&af, dir, &err), AS_EIO);
  assert_non_null(strstr(err.msg, "Is a directory"));
  assert_int_equal(entries(), 0);
}

/* "-" is stdout, written in place: commit flushes it and leaves it open,
 * and no file named "-" appears (in the scratch directory, where a broken
 * open would put it and its temporary). */
static void dash_is_stdout_and_stays_open(void **state) {
  (void)state;
  char cwd[PATH_MAX];
  assert_non_null(getcwd(cwd, sizeof cwd));
  assert_int_equal(chdir(dir), 0);
  atomic_file_t af;
  as_err_t      err = {0};
  assert_int_equal(atomic_file_open(&af, "-", &err), AS_OK);
  assert_ptr_equal(af.f, stdout);
  assert_true(af.in_place);
  assert_int_equal(atomic_file_commit(&af, &err), AS_OK);
  assert_int_not_equal(fcntl(STDOUT_FILENO, F_GETFD), -1);
  assert_int_equal(atomic_file_open(&af, "-", &err), AS_OK);
  atomic_file_discard(&af);
  assert_int_not_equal(fcntl(STDOUT_FILENO, F_GETFD), -1);
  assert_int_equal(entries(), 0);
  assert_int_equal(chdir(cwd), 0);
}

static void write_old(const char *path) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("old\n", f);
  fclose(f);
}

/* In a child: opens path, writes part of it and is sent sig; returns the
 * child's wait status. */
static int status_of_write_interrupted_by(const char *path, int sig) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    atomic_file_t af;
    as_err_t      err = {0};
    if (atomic_file_open(&af, path, &err) != AS_OK)
      _exit(90);
    fputs("half\n", af.f);
    fflush(af.f);
    raise(sig);
    _exit(91); /* survived the signal */
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  return status;
}

static void a_signal_mid_write_removes_the_temporary_file(void **state) {
  (void)state;
  static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
  char             path[128], buf[64];
  snprintf(path, sizeof path, "%s/out.txt", dir);
  write_old(path);
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    int status = status_of_write_interrupted_by(path, sigs[i]);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), sigs[i]);
    assert_int_equal(entries(), 1); /* the target only */
    read_all(path, buf, sizeof buf);
    assert_string_equal(buf, "old\n");
  }
}

/* A guarded directory goes with its listed files when a signal ends the
 * process (report's plot workspace, on `report -o - | head`: SIGPIPE), and
 * stays once unguarded. */
static void a_signal_removes_a_guarded_directory(void **state) {
  (void)state;
  static const char *const names[] = {"a.dat", "b.svg", NULL};
  char                     sub[128];
  snprintf(sub, sizeof sub, "%s/work", dir);
  for (int unguard = 0; unguard < 2; unguard++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      if (mkdir(sub, 0700) != 0)
        _exit(90);
      int slot = atomic_file_guard_dir(sub, names);
      for (size_t i = 0; names[i] != NULL; i++) {
        char f[192];
        snprintf(f, sizeof f, "%s/%s", sub, names[i]);
        fclose(fopen(f, "w"));
      }
      if (unguard)
        atomic_file_unguard_dir(slot);
      raise(SIGPIPE);
      _exit(91);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGPIPE);
    assert_int_equal(entries(), unguard ? 1 : 0);
  }
}

static volatile sig_atomic_t g_caught;

static void catch_signal(int sig) {
  g_caught = sig;
}

/* A process's own handler (sweep's) and an ignored signal (nohup) stay:
 * the write goes on and the process decides. */
static void a_handled_or_ignored_signal_is_left_to_the_process(void **state) {
  (void)state;
  char path[128], buf[64];
  snprintf(path, sizeof path, "%s/out.txt", dir);
  write_old(path);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    struct sigaction sa = {.sa_handler = catch_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGHUP, SIG_IGN);
    atomic_file_t af;
    as_err_t      err = {0};
    if (atomic_file_open(&af, path, &err) != AS_OK)
      _exit(90);
    fputs("new\n", af.f);
    raise(SIGHUP);
    raise(SIGTERM);
    if (g_caught != SIGTERM || scratch_entries(dir) != 2)
      _exit(91);
    _exit(atomic_file_commit(&af, &err) == AS_OK ? 0 : 92);
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  read_all(path, buf, sizeof buf);
  assert_string_equal(buf, "new\n");
  assert_int_equal(entries(), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(target_changes_only_on_commit, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(owner_closed_file_is_committed, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          device_is_written_in_place_and_write_errors_reported, setup,
          teardown),
      cmocka_unit_test_setup_teardown(
          missing_directory_and_directory_targets_fail_cleanly, setup,
          teardown),
      cmocka_unit_test_setup_teardown(dash_is_stdout_and_stays_open, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(
          a_signal_mid_write_removes_the_temporary_file, setup, teardown),
      cmocka_unit_test_setup_teardown(
          a_handled_or_ignored_signal_is_left_to_the_process, setup, teardown),
      cmocka_unit_test_setup_teardown(a_signal_removes_a_guarded_directory,
                                      setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
