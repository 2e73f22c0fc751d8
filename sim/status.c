/* sim/status.c -- status names and the error-recording helper. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>

as_status_t as_err_set(as_err_t *err, as_status_t code, const char *fmt, ...) {
  if (err != NULL) {
    va_list ap;
    va_start(ap, fmt);
    err->code = code;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
  }
  return code;
}

bool as_format_fits(char *buf, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, len, fmt, ap);
  va_end(ap);
  return n >= 0 && (size_t)n < len;
}

const char *as_status_name(as_status_t code) {
  static const char *const names[] = {
#define AS_STATUS_NAME(name, msg) #name,
      AS_STATUS_MAP(AS_STATUS_NAME)
#undef AS_STATUS_NAME
  };
  return (unsigned)code < AS_STATUS_COUNT ? names[code] : "UNKNOWN";
}

const char *as_status_message(as_status_t code) {
  static const char *const messages[] = {
#define AS_STATUS_MSG(name, msg) msg,
      AS_STATUS_MAP(AS_STATUS_MSG)
#undef AS_STATUS_MSG
  };
  return (unsigned)code < AS_STATUS_COUNT ? messages[code] : "unknown status";
}
