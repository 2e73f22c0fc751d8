/* traces/helper_path.h -- finding the files allocsim runs beside itself
 * (the capture library, the oracle's replayers): an environment variable
 * first, then places relative to the running binary (installed trees and
 * the build tree), then the path the build put it at.
 */
#ifndef ALLOCSIM_HELPER_PATH_H
#define ALLOCSIM_HELPER_PATH_H

#include <stddef.h>

#include "../sim/status.h"

/* Writes to buf the first of: $env (when set and non-empty; AS_EINVAL
 * "ENV=VALUE: not a readable file" / "not an executable file" if it fails
 * the access mode), the binary's directory + rel[i] + "/" + file for each
 * i (NULL-terminated), build_path (may be NULL).  mode is R_OK or X_OK.
 * AS_EINVAL "cannot find FILE beside allocsim or in its build tree (set
 * ENV)" when none fits. */
as_status_t helper_path_find(const char *env, const char *file,
                             const char *const *rel, const char *build_path,
                             int mode, char *buf, size_t len, as_err_t *err);

#endif
