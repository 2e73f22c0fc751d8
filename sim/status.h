/* sim/status.h -- status codes and error messages shared by every module.
 *
 * Functions that can fail return as_status_t (AS_OK is 0) and, when given an
 * as_err_t, leave a one-line human message in it naming file, position and
 * what was expected.  The CLI maps statuses to exit codes in one table.
 */
#ifndef ALLOCSIM_STATUS_H
#define ALLOCSIM_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AS_STATUS_MAP(X)                                                       \
  X(OK, "success")                                                             \
  X(ENOMEM, "out of memory")                                                   \
  X(EINVAL, "invalid argument")                                                \
  X(EFORMAT, "malformed input")                                                \
  X(EIO, "I/O error")                                                          \
  X(ESTORE, "database error")                                                  \
  X(EUSAGE, "usage error")                                                     \
  X(DONE, "end of stream")

typedef enum as_status_e {
#define AS_STATUS_ENUM(name, msg) AS_##name,
  AS_STATUS_MAP(AS_STATUS_ENUM)
#undef AS_STATUS_ENUM
      AS_STATUS_COUNT
} as_status_t;

typedef struct as_err_s as_err_t;
struct as_err_s {
  as_status_t code;     /* Last failure recorded, AS_OK if none */
  char        msg[512]; /* e.g. "run.trace:12: expected an op, got 'mallco'" */
};

/* Records code and message in *err (if err is not NULL); returns code. */
as_status_t as_err_set(as_err_t *err, as_status_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* snprintf that reports truncation instead of leaving it to the compiler's
 * -Wformat-truncation guesses: true if the whole text fit in buf. */
bool as_format_fits(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Short symbolic name ("EFORMAT") and generic message for a status. */
const char *as_status_name(as_status_t code);
const char *as_status_message(as_status_t code);

#endif
