/* traces/helper_path.c -- the files allocsim runs beside itself
 * (helper_path.h). */
#include "helper_path.h"

#include <limits.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

as_status_t helper_path_find(const char *env, const char *file,
                             const char *const *rel, const char *build_path,
                             int mode, char *buf, size_t len, as_err_t *err) {
  const char *v = getenv(env);
  if (v != NULL && *v != '\0') {
    if (access(v, mode) != 0)
      return as_err_set(err, AS_EINVAL, "%s=%s: not %s file", env, v,
                        mode == X_OK ? "an executable" : "a readable");
    as_format_fits(buf, len, "%s", v);
    return AS_OK;
  }
  char    exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash != NULL) {
      *slash = '\0';
      for (size_t i = 0; rel[i] != NULL; i++)
        if (as_format_fits(buf, len, "%s%s/%s", exe, rel[i], file) &&
            access(buf, mode) == 0)
          return AS_OK;
    }
  }
  if (build_path != NULL && access(build_path, mode) == 0) {
    as_format_fits(buf, len, "%s", build_path);
    return AS_OK;
  }
  buf[0] = '\0';
  return as_err_set(err, AS_EINVAL,
                    "cannot find %s beside allocsim or in its build tree "
                    "(set %s)",
                    file, env);
}
