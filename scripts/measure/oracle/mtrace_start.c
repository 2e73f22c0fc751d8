/* scripts/measure/oracle/mtrace_start.c -- starts glibc's mtrace() from a
 * constructor, so that programs which never call it (gzip, sqlite3, git)
 * can be logged: LD_PRELOAD="libc_malloc_debug.so.0 mtrace_start.so"
 * MALLOC_TRACE=FILE PROGRAM.  Since glibc 2.34 the hooks live in
 * libc_malloc_debug.so, preloaded first (glibc 2.36 malloc/mtrace.c:46-53).
 * Blocks allocated before the constructor ran (by ld.so and libc start-up)
 * are freed later as unknown addresses: import the log with --lenient. */
#include <mcheck.h>

__attribute__((constructor)) static void start_mtrace(void) {
  mtrace();
}
