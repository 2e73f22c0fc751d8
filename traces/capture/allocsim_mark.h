/* traces/capture/allocsim_mark.h -- named phase marks for captured programs.
 *
 * Include this in a C program and call allocsim_mark("peak") at the points
 * you want compared.  The symbol is declared weak, so the program links and
 * runs without liballocsim_capture.so: test `if (allocsim_mark)` or use
 * ALLOCSIM_MARK(label), which does it for you.  Under `allocsim capture`
 * the preloaded library defines it: it records a mark event followed by the
 * measured RSS (/proc/self/smaps_rollup) at the same instant.
 *
 * Python: `from allocsim import mark; mark("peak")` (traces/capture/
 * allocsim.py, on PYTHONPATH under capture; a no-op outside one).
 *
 * The recorder also marks "main" at entry to main() and, for CPython,
 * "hooked" and "__main__" (docs/capture.md).
 */
#ifndef ALLOCSIM_MARK_H
#define ALLOCSIM_MARK_H

#ifdef __cplusplus
extern "C" {
#endif

/* Records a mark named label (at most 63 bytes are kept).  A no-op when the
 * process is not being captured.  Async-signal-safe. */
#ifdef ALLOCSIM_MARK_DEFINE /* set only by the capture library itself */
void allocsim_mark(const char *label);
#else
void allocsim_mark(const char *label) __attribute__((weak));
#endif

#define ALLOCSIM_MARK(label)                                                   \
  do {                                                                         \
    if (allocsim_mark)                                                         \
      allocsim_mark(label);                                                    \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif
