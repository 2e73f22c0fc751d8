/* sim/atomic_file.c -- write to a temporary file beside the target, rename
 * it over the target on success (contract in atomic_file.h).
 *
 * Symbolic links are followed by hand, not with realpath(3), because a link
 * may point at a file that does not exist yet: the file it names is then
 * created by the rename, as fopen(path, "w") would have created it.
 * rename(2) within one directory is atomic, so the temporary file lives in
 * the final file's directory; fsync of the file before the rename and of
 * the directory after it make the new contents survive a power cut too,
 * never a renamed empty file.
 *
 * An interrupted conversion would leave its temporary file (up to hundreds
 * of MB) behind, so each temporary file is listed in a slot the signal
 * handler reads: the path in a static buffer, armed once written, because
 * the handler may call only async-signal-safe functions (unlink, getpid,
 * sigaction, raise).  A private directory of known file names (report's
 * plot workspace) takes a slot the same way.
 */
#include "atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- Removal on SIGINT, SIGTERM, SIGHUP, SIGPIPE ------------------------- */

/* Temporaries at once: most commands write one or two files; report
 * stages a PNG per plot (at most 16) beside its page and its directory. */
#define GUARD_SLOTS 20

enum { SLOT_FREE, SLOT_FILLING, SLOT_ARMED };

/* SIGPIPE too: `report -o - | head` ends by it once head has gone. */
static const int k_guarded_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

static _Atomic int slot_state[GUARD_SLOTS];
static char        slot_path[GUARD_SLOTS][PATH_MAX];
/* A directory's file names (atomic_file_guard_dir), NULL for a file. */
static const char *const *slot_names[GUARD_SLOTS];
/* A child forked before exec inherits the handler and the slots; it must
 * not remove its parent's file when it alone is signalled. */
static pid_t slot_owner[GUARD_SLOTS];

/* Removes slot i's file, or its directory's files and then the directory,
 * with async-signal-safe calls only (open, unlinkat, close, rmdir). */
static void remove_slot(int i) {
  if (slot_names[i] == NULL) {
    unlink(slot_path[i]);
    return;
  }
  int fd = open(slot_path[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (const char *const *n = slot_names[i]; fd >= 0 && *n != NULL; n++)
    unlinkat(fd, *n, 0);
  if (fd >= 0)
    close(fd);
  rmdir(slot_path[i]);
}

static void remove_temporaries_and_die(int sig) {
  pid_t self = getpid();
  for (int i = 0; i < GUARD_SLOTS; i++)
    if (atomic_load(&slot_state[i]) == SLOT_ARMED && slot_owner[i] == self)
      remove_slot(i);
  /* The signal is blocked in its handler: raised again with the default
   * action, it ends the process as soon as the handler returns. */
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  raise(sig);
}

/* Installs the handler for each guarded signal still at its default action
 * (another handler or SIG_IGN is the process's choice and stays), checked at
 * every open since a command may install its own in between.  It stays
 * installed once every file is gone: with no slot armed it only re-raises,
 * which is what the default action would have done. */
static void install_handler(void) {
  struct sigaction sa = {.sa_handler = remove_temporaries_and_die,
                         .sa_flags = SA_RESTART};
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof k_guarded_signals / sizeof k_guarded_signals[0];
       i++) {
    struct sigaction old;
    if (sigaction(k_guarded_signals[i], NULL, &old) == 0 &&
        !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
      sigaction(k_guarded_signals[i], &sa, NULL);
  }
}

/* Lists path (a file, or a directory of the files names) for the handler;
 * returns its slot.  With every slot taken it is not listed (-1), and a
 * signal leaves it behind as a crash would. */
static int guard_take(const char *path, const char *const *names) {
  install_handler();
  for (int i = 0; i < GUARD_SLOTS; i++) {
    int expected = SLOT_FREE;
    if (atomic_compare_exchange_strong(&slot_state[i], &expected,
                                       SLOT_FILLING)) {
      as_format_fits(slot_path[i], sizeof slot_path[i], "%s", path);
      slot_names[i] = names;
      slot_owner[i] = getpid();
      atomic_store(&slot_state[i], SLOT_ARMED);
      return i;
    }
  }
  return -1;
}

static void guard_arm(atomic_file_t *af) {
  af->guard = guard_take(af->tmp, NULL);
}

int atomic_file_guard_dir(const char *dir, const char *const *names) {
  return guard_take(dir, names);
}

void atomic_file_unguard_dir(int slot) {
  if (slot >= 0)
    atomic_store(&slot_state[slot], SLOT_FREE);
}

/* Unlists af->tmp, after it was renamed or removed (never before: a signal
 * in between would leave it). */
static void guard_release(atomic_file_t *af) {
  if (af->guard >= 0)
    atomic_store(&slot_state[af->guard], SLOT_FREE);
  af->guard = -1;
}

/* ---- Opening and committing --------------------------------------------- */

/* Linux's limit on symbolic links followed in one lookup
 * (include/linux/namei.h MAXSYMLINKS). */
#define MAX_LINK_HOPS 40

/* Length of the directory part of path, including its last '/'. */
static size_t dir_len(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash == NULL ? 0 : (size_t)(slash - path) + 1;
}

/* Follows symbolic links from path into af->final; *st receives the final
 * file's stat and *exists whether there is one. */
static as_status_t resolve_links(atomic_file_t *af, struct stat *st,
                                 bool *exists, as_err_t *err) {
  if (!as_format_fits(af->final, sizeof af->final, "%s", af->path))
    return as_err_set(err, AS_EIO, "%.200s: cannot create: file name too long",
                      af->path);
  for (int hop = 0; hop <= MAX_LINK_HOPS; hop++) {
    if (lstat(af->final, st) != 0) {
      if (errno != ENOENT)
        return as_err_set(err, AS_EIO, "%s: cannot create: %s", af->path,
                          strerror(errno));
      *exists = false;
      return AS_OK;
    }
    if (!S_ISLNK(st->st_mode)) {
      *exists = true;
      return AS_OK;
    }
    char    link[PATH_MAX];
    ssize_t n = readlink(af->final, link, sizeof link - 1);
    if (n < 0)
      return as_err_set(err, AS_EIO, "%s: cannot create: %s", af->path,
                        strerror(errno));
    link[n] = '\0';
    /* A relative link is relative to the directory holding the link. */
    size_t d = link[0] == '/' ? 0 : dir_len(af->final);
    char   next[PATH_MAX];
    if (!as_format_fits(next, sizeof next, "%.*s%s", (int)d, af->final, link))
      return as_err_set(err, AS_EIO,
                        "%s: cannot create: link target name too long",
                        af->path);
    memcpy(af->final, next, sizeof next);
  }
  return as_err_set(err, AS_EIO, "%s: cannot create: %s", af->path,
                    strerror(ELOOP));
}

/* What fopen(path, "w") gives a new file: 0666 less the umask. */
static mode_t default_mode(void) {
  mode_t mask = umask(0);
  umask(mask);
  return 0666 & ~mask;
}

static as_status_t open_in_place(atomic_file_t *af, as_err_t *err) {
  af->in_place = true;
  af->f = fopen(af->path, "wb");
  if (af->f == NULL)
    return as_err_set(err, AS_EIO, "%s: cannot create: %s", af->path,
                      strerror(errno));
  return AS_OK;
}

as_status_t atomic_file_open(atomic_file_t *af, const char *path,
                             as_err_t *err) {
  memset(af, 0, sizeof *af);
  af->guard = -1;
  if (strcmp(path, "-") == 0) {
    snprintf(af->path, sizeof af->path, "<stdout>");
    af->in_place = true;
    af->f = stdout;
    return AS_OK;
  }
  if (!as_format_fits(af->path, sizeof af->path, "%s", path))
    return as_err_set(err, AS_EIO, "%.200s: cannot create: file name too long",
                      path);
  struct stat st;
  bool        exists;
  as_status_t rc = resolve_links(af, &st, &exists, err);
  if (rc != AS_OK)
    return rc;
  if (exists && !S_ISREG(st.st_mode))
    return open_in_place(af, err);
  size_t      d = dir_len(af->final);
  const char *base = af->final + d;
  if (!as_format_fits(af->tmp, sizeof af->tmp, "%.*s.%s.tmp-XXXXXX", (int)d,
                      af->final, base))
    return as_err_set(err, AS_EIO, "%s: cannot create: file name too long",
                      af->path);
  int fd = mkstemp(af->tmp);
  if (fd < 0) {
    int e = errno;
    af->tmp[0] = '\0';
    return as_err_set(err, AS_EIO,
                      "%s: cannot create a temporary file beside it: %s",
                      af->path, strerror(e));
  }
  guard_arm(af);
  mode_t mode = exists ? st.st_mode & 07777 : default_mode();
  if (fchmod(fd, mode) != 0 || (af->f = fdopen(fd, "wb")) == NULL) {
    int e = errno;
    close(fd);
    unlink(af->tmp);
    guard_release(af);
    af->tmp[0] = '\0';
    return as_err_set(err, AS_EIO, "%s: cannot create: %s", af->path,
                      strerror(e));
  }
  return AS_OK;
}

as_status_t atomic_file_close(atomic_file_t *af, as_err_t *err) {
  FILE *f = af->f;
  af->f = NULL;
  int e = 0;
  if (fflush(f) != 0 || ferror(f))
    e = errno ? errno : EIO;
  /* Devices and FIFOs written in place need no sync (and may refuse it). */
  if (e == 0 && !af->in_place && fsync(fileno(f)) != 0)
    e = errno;
  if (f != stdout && fclose(f) != 0 && e == 0)
    e = errno;
  if (e != 0)
    return as_err_set(err, AS_EIO, "%s: write error: %s", af->path,
                      strerror(e));
  return AS_OK;
}

/* fsync of a file closed by its owner, through a fresh descriptor. */
static int sync_path(const char *path, int flags) {
  int fd = open(path, flags | O_CLOEXEC);
  if (fd < 0)
    return -1;
  int rc = fsync(fd);
  int e = errno;
  close(fd);
  errno = e;
  return rc;
}

as_status_t atomic_file_commit(atomic_file_t *af, as_err_t *err) {
  as_status_t rc = af->f != NULL ? atomic_file_close(af, err) : AS_OK;
  if (af->in_place)
    return rc;
  if (rc == AS_OK && sync_path(af->tmp, O_RDONLY) != 0)
    rc = as_err_set(err, AS_EIO, "%s: write error: %s", af->path,
                    strerror(errno));
  if (rc == AS_OK && rename(af->tmp, af->final) != 0)
    rc = as_err_set(err, AS_EIO, "%s: cannot replace: %s", af->path,
                    strerror(errno));
  if (rc != AS_OK)
    unlink(af->tmp);
  guard_release(af);
  af->tmp[0] = '\0';
  if (rc != AS_OK)
    return rc;
  /* The rename is durable once the directory is synced; a directory that
   * refuses fsync (some network file systems) still has the file. */
  char   dir[PATH_MAX];
  size_t d = dir_len(af->final);
  as_format_fits(dir, sizeof dir, "%.*s", (int)(d ? d : 1),
                 d ? af->final : ".");
  (void)sync_path(dir, O_RDONLY | O_DIRECTORY);
  return AS_OK;
}

void atomic_file_discard(atomic_file_t *af) {
  if (af->f != NULL && af->f != stdout)
    fclose(af->f);
  af->f = NULL;
  if (!af->in_place && af->tmp[0] != '\0')
    unlink(af->tmp);
  guard_release(af);
  af->tmp[0] = '\0';
}
