/* asan.h -- whether this test binary runs under AddressSanitizer, which
 * refuses an LD_PRELOADed allocator and replaces malloc itself, so the
 * differential tests against a real allocator skip under it. */
#ifndef ALLOCSIM_TESTS_ASAN_H
#define ALLOCSIM_TESTS_ASAN_H

#if defined(__SANITIZE_ADDRESS__)
#define DIFF_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DIFF_ASAN 1
#endif
#endif
#ifndef DIFF_ASAN
#define DIFF_ASAN 0
#endif

#endif
