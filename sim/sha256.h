/* sim/sha256.h -- hex SHA-256 digests of memory and files (the store names
 * the trace a run was measured with by its digest). */
#ifndef ALLOCSIM_SHA256_H
#define ALLOCSIM_SHA256_H

#include <stddef.h>

#include "status.h"

/* Hex SHA-256 (64 characters and a NUL) of len bytes at data. */
void as_sha256_hex(const void *data, size_t len, char out[65]);
/* Hex SHA-256 of the file at path; AS_EIO naming the file on failure. */
as_status_t as_sha256_file(const char *path, char out[65], as_err_t *err);

#endif
