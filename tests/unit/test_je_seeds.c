/* tests/unit/test_je_seeds.c -- finding jemalloc's decay_t by its jitter
 * state, and another thread's tsd by its thread pointer
 * (traces/je_seeds.h), on memory and threads laid out here. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "traces/je_seeds.h"

static uint64_t lcg(uint64_t x) {
  return x * JE_SEEDS_LCG_A + JE_SEEDS_LCG_C;
}

/* Words that look like memory: small counters, pointers into the block
 * (a list head pointing at itself, as a decay_t's mutex has), and
 * splitmix64 noise. */
static void fill(uint64_t *w, size_t n) {
  uint64_t z = 0x9E3779B97F4A7C15u;
  for (size_t i = 0; i < n; i++) {
    z += 0x9E3779B97F4A7C15u;
    uint64_t r = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9u;
    w[i] = i % 3 == 0 ? i : i % 3 == 1 ? (uint64_t)(uintptr_t)&w[i] : r;
  }
}

static uint64_t block[8192];

/* The LCG steps back exactly: A times its inverse is 1 modulo 2^64. */
static void the_inverse_undoes_the_multiplier(void **state) {
  (void)state;
  assert_true(JE_SEEDS_LCG_A * je_seeds_inverse_a() == 1);
}

/* A jitter state drawn three times from its decay_t's address, 200 bytes
 * in, names that decay_t; one never drawn (decay_ms 0: the state is the
 * address itself, like a self-pointer) is not taken for one. */
static void a_drawn_jitter_state_names_its_decay(void **state) {
  (void)state;
  fill(block, 8192);
  uintptr_t from = (uintptr_t)block, end = from + sizeof block;
  assert_int_equal(je_seeds_search(from, end), 0);
  uint64_t muzzy = (uint64_t)(uintptr_t)&block[4000];
  block[4025] = muzzy; /* never drawn */
  assert_int_equal(je_seeds_search(from, end), 0);
  uint64_t dirty = (uint64_t)(uintptr_t)&block[5000];
  block[5025] = lcg(lcg(lcg(dirty)));
  assert_int_equal(je_seeds_search(from, end), dirty);
  /* too far below its state, or outside the range searched: not found */
  assert_int_equal(je_seeds_search((uintptr_t)&block[5001], end), 0);
  block[5025] = 0;
  block[5200] = lcg(dirty);
  assert_int_equal(je_seeds_search(from, end), 0);
}

/* A static TLS block lies at the same offset from every thread's thread
 * pointer, which is what je_seeds_thread_tsd takes from one thread to
 * another: checked here on this program's own thread-local variable, a
 * block of the same kind as libjemalloc's (initial-exec, loaded at start). */
static _Thread_local uint64_t tls_word;

static void *tls_address(void *out) {
  *(uint64_t *)out = (uint64_t)(uintptr_t)&tls_word;
  return NULL;
}

static void another_threads_tls_is_found_from_its_thread_pointer(void **state) {
  (void)state;
  uint64_t mine = (uint64_t)(uintptr_t)&tls_word;
  for (int i = 0; i < 3; i++) {
    pthread_t th;
    uint64_t  theirs = 0;
    assert_int_equal(pthread_create(&th, NULL, tls_address, &theirs), 0);
    uint64_t predicted =
        je_seeds_thread_tsd(mine, (uintptr_t)pthread_self(), (uintptr_t)th);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(theirs, predicted);
    assert_true(theirs != mine);
  }
}

/* This process runs glibc's malloc: no libjemalloc's thread-local block,
 * and without mallctl no decay to look for. */
static void without_jemalloc_there_are_no_seeds(void **state) {
  (void)state;
  assert_int_equal(je_seeds_tsd(), 0);
  assert_int_equal(je_seeds_decay(NULL, NULL, 0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_inverse_undoes_the_multiplier),
      cmocka_unit_test(a_drawn_jitter_state_names_its_decay),
      cmocka_unit_test(another_threads_tls_is_found_from_its_thread_pointer),
      cmocka_unit_test(without_jemalloc_there_are_no_seeds),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
