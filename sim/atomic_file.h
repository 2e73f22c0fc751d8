/* sim/atomic_file.h -- output files that are written whole or not at all.
 *
 * A regular target (or one that does not exist yet) is written to a
 * temporary file beside it, which replaces the target only on commit:
 * flushed, fsync'd, renamed over the target, and the directory fsync'd.  A
 * discard, or a crash at any point, leaves the target exactly as it was
 * (only the temporary ".NAME.tmp-XXXXXX" may stay behind after a crash).
 * SIGINT, SIGTERM, SIGHUP and SIGPIPE are no crash: while a temporary
 * file exists, a handler removes it and the process then ends by that
 * signal as it would have (exit status 128 + the signal).  The handler is
 * installed only for a signal still at its default action, so a command
 * that handles one itself (sweep stops between points) or a process that
 * ignores one (nohup) keeps that; the command's own discard removes the
 * file then.
 * A symbolic link to a regular file keeps being the link: its target file
 * is replaced.
 *
 * A target that exists and is not a regular file (a device such as
 * /dev/null, a FIFO, a terminal) is opened and written in place: there is
 * nothing to replace atomically, and it is never unlinked, not even on
 * discard.  "-" is stdout, as for every command, written in place too:
 * commit flushes it (a write error is reported as "<stdout>"), and neither
 * commit nor discard closes it.
 *
 * The new file gets the old target's permission bits, or those a plain
 * fopen(path, "w") would give (0666 less the umask) when there was none.
 */
#ifndef ALLOCSIM_ATOMIC_FILE_H
#define ALLOCSIM_ATOMIC_FILE_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include "status.h"

typedef struct atomic_file_s atomic_file_t;
struct atomic_file_s {
  FILE *f;               /* write here; NULL once closed */
  bool  in_place;        /* a non-regular target, written directly */
  char  path[PATH_MAX];  /* the target as named, for messages */
  char  final[PATH_MAX]; /* what the rename replaces (links resolved) */
  char  tmp[PATH_MAX];   /* the temporary file; "" when in place */
  int   guard;           /* its slot in the signal handler's list, or -1 */
};

/* Opens path for writing as described above.  AS_EIO naming path and the
 * reason (a directory, a missing or unwritable directory, ...); nothing on
 * disk is created or changed then. */
as_status_t atomic_file_open(atomic_file_t *af, const char *path,
                             as_err_t *err);

/* Makes the written bytes the target's contents.  af->f is flushed and
 * closed here unless its owner already closed it (and set it to NULL, after
 * checking that close).  AS_EIO naming the path on any failure, which
 * leaves the target as it was and removes the temporary file. */
as_status_t atomic_file_commit(atomic_file_t *af, as_err_t *err);

/* Flushes, syncs and closes af->f (stdout stays open), so that the commit
 * only renames: a command writing several files closes them all before it
 * commits any, and a full disk then leaves every target as it was.
 * AS_EIO naming the path ("write error: No space left on device"); the
 * temporary file stays until the commit or discard. */
as_status_t atomic_file_close(atomic_file_t *af, as_err_t *err);

/* Closes af->f (if still open) and removes the temporary file; the target
 * is untouched.  In place, only closes. */
void atomic_file_discard(atomic_file_t *af);

/* A private temporary directory dir holding only files named in names (a
 * NULL-terminated list that outlives the guard), removed with them by the
 * signals that remove temporary files, until atomic_file_unguard_dir.
 * Returns the guard's slot, or -1 when all are taken (a signal then leaves
 * the directory, as a crash would). */
int  atomic_file_guard_dir(const char *dir, const char *const *names);
void atomic_file_unguard_dir(int slot);

#endif
