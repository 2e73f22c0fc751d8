/* tests/unit/test_capture_sites.c -- the recorder's call-site table
 * (traces/capture/sites.c) on its own, with the stream replaced by a list
 * of the records it would send: a stack taken twice from one place is one
 * site, defined once (its modules first); two places are two sites; frames
 * are module + offset from the module's base; four threads at one place
 * define it once; after a fork the table starts again.
 *
 * sites.c drops the leading frames that lie in its own object, which here
 * is this test program; so each stack is taken from inside qsort's
 * comparison callback, whose caller is libc: the frames kept start in libc
 * and go on to this program's callers of qsort. */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../helpers/asan.h"

#include "traces/capture/capture_int.h"

/* ---- What sites.c needs from the rest of the library ------------------- */

TLS tls_t  t_self;
atomic_int g_recording = 1;

#define MAX_RECS 64
typedef struct rec_s rec_t;
struct rec_s {
  uint8_t  op;
  uint64_t id;
  char     text[CAPTURE_BLOB_MAX + 1];
  size_t   len;
};
static rec_t           g_rec[MAX_RECS];
static size_t          g_nrec;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

void capture_emit(const cap_rec_t *r) {
  pthread_mutex_lock(&g_lock);
  if (g_nrec < MAX_RECS) {
    rec_t *x = &g_rec[g_nrec++];
    x->op = r->op;
    x->id = r->x;
    x->len = r->text_len;
    memcpy(x->text, r->text, r->text_len);
    x->text[r->text_len] = '\0';
  }
  pthread_mutex_unlock(&g_lock);
}

uint64_t capture_resident(const void *base, size_t len) {
  (void)base;
  return len;
}

/* Each module is sent once: no two MODULE records share a path or id. */
static void assert_modules_once(void) {
  for (size_t i = 0; i < g_nrec; i++)
    for (size_t j = i + 1; j < g_nrec; j++)
      if (g_rec[i].op == CAPTURE_OP_MODULE && g_rec[j].op == CAPTURE_OP_MODULE)
        assert_true(g_rec[i].id != g_rec[j].id &&
                    strcmp(g_rec[i].text, g_rec[j].text) != 0);
}

static size_t count(uint8_t op) {
  size_t n = 0;
  for (size_t i = 0; i < g_nrec; i++)
    n += g_rec[i].op == op;
  return n;
}

/* ---- Taking stacks from two places ------------------------------------- */

static _Thread_local uint32_t t_site;

static int take(const void *a, const void *b) {
  (void)a;
  (void)b;
  t_site = capture_site_here();
  return 0;
}

__attribute__((noinline)) static uint32_t place_one(void) {
  int v[2] = {1, 2};
  qsort(v, 2, sizeof v[0], take);
  __asm__ volatile("" ::: "memory"); /* not a tail call */
  return t_site;
}

__attribute__((noinline)) static uint32_t place_two(void) {
  int v[2] = {1, 2};
  qsort(v, 2, sizeof v[0], take);
  __asm__ volatile("" ::: "memory");
  return t_site;
}

/* Under AddressSanitizer the qsort these places call is ASan's, which
 * calls the comparator from more than one place of its own: one place of
 * this program is then several stacks, so the site tests skip. */
static void skip_under_asan(void) {
  if (DIFF_ASAN) {
    print_message("skipped: AddressSanitizer's qsort gives one place "
                  "several stacks\n");
    skip();
  }
}

static int setup(void **state) {
  (void)state;
  capture_sites_init(8);
  return g_stacks == 8 ? 0 : -1;
}

static void one_place_is_one_site_defined_once(void **state) {
  (void)state;
  skip_under_asan();
  uint32_t     id[3];
  volatile int n = 2; /* not unrolled: one call instruction, one stack */
  for (int i = 0; i < n; i++)
    id[i] = place_one();
  id[2] = place_two();
  assert_int_not_equal(id[0], 0);
  assert_int_equal(id[0], id[1]);
  assert_int_not_equal(id[0], id[2]);
  assert_int_equal(count(CAPTURE_OP_SITE), 2);
  /* libc, this program and cmocka's library (which calls the test), each
   * sent once, before the first site that needs them. */
  assert_int_equal(count(CAPTURE_OP_MODULE), 3);
  assert_int_equal(g_rec[0].op, CAPTURE_OP_MODULE);
  assert_modules_once();
  bool exe = false, libc = false;
  for (size_t i = 0; i < g_nrec; i++)
    if (g_rec[i].op == CAPTURE_OP_MODULE) {
      exe |= strstr(g_rec[i].text, "test_capture_sites") != NULL;
      libc |= strstr(g_rec[i].text, "libc.so") != NULL;
    }
  assert_true(exe && libc);
}

/* A site's frames decode to (module, offset) pairs; the frame in
 * place_one, translated back with this program's load base, lies within a
 * few hundred bytes after place_one's address. */
static void frames_are_module_and_offset(void **state) {
  (void)state;
  skip_under_asan();
  uint32_t id = place_one();
  rec_t   *site = NULL, *exe = NULL;
  for (size_t i = 0; i < g_nrec; i++) {
    if (g_rec[i].op == CAPTURE_OP_SITE && g_rec[i].id == id)
      site = &g_rec[i];
    if (g_rec[i].op == CAPTURE_OP_MODULE &&
        strstr(g_rec[i].text, "test_capture_sites") != NULL)
      exe = &g_rec[i];
  }
  assert_non_null(site);
  assert_non_null(exe);
  Dl_info info;
  void   *fn;
  uint32_t (*fp)(void) = place_one;
  memcpy(&fn, &fp, sizeof fn); /* function to object pointer */
  assert_true(dladdr(fn, &info) != 0);
  uintptr_t      fn_off = (uintptr_t)place_one - (uintptr_t)info.dli_fbase;
  const uint8_t *p = (const uint8_t *)site->text, *end = p + site->len;
  bool           found = false;
  unsigned       frames = 0;
  while (p < end) {
    uint64_t mod = 0, off = 0;
    assert_int_equal(capture_get_varint(&p, end, &mod), 0);
    assert_int_equal(capture_get_varint(&p, end, &off), 0);
    frames++;
    if (mod == exe->id && off > fn_off && off < fn_off + 256)
      found = true;
  }
  assert_true(frames >= 3 && frames <= 8);
  assert_true(found);
}

static void *thread_main(void *arg) {
  uint32_t *out = arg;
  for (int i = 0; i < 1000; i++)
    out[i] = place_two();
  return NULL;
}

static void threads_at_one_place_share_one_definition(void **state) {
  (void)state;
  skip_under_asan();
  g_nrec = 0;
  static uint32_t got[4][1000];
  pthread_t       th[4];
  for (int t = 0; t < 4; t++)
    assert_int_equal(pthread_create(&th[t], NULL, thread_main, got[t]), 0);
  for (int t = 0; t < 4; t++)
    pthread_join(th[t], NULL);
  /* Every thread's stack below place_two differs from the main thread's
   * (start_thread, clone3): one new site, the same for all 4000 calls. */
  assert_int_not_equal(got[0][0], 0);
  for (int t = 0; t < 4; t++)
    for (int i = 0; i < 1000; i++)
      assert_int_equal(got[t][i], got[0][0]);
  assert_int_equal(count(CAPTURE_OP_SITE), 1);
}

static void a_forked_child_defines_its_sites_again(void **state) {
  (void)state;
  skip_under_asan();
  uint32_t before = place_one();
  capture_sites_atfork_child();
  g_nrec = 0;
  uint32_t after = place_one();
  assert_int_equal(after, 1);
  assert_int_not_equal(before, 0);
  assert_int_equal(count(CAPTURE_OP_SITE), 1);
  assert_int_equal(count(CAPTURE_OP_MODULE), 3); /* sent again */
  assert_modules_once();
}

static void nothing_while_not_recording(void **state) {
  (void)state;
  atomic_store(&g_recording, 0);
  assert_int_equal(place_two(), 0);
  atomic_store(&g_recording, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_place_is_one_site_defined_once),
      cmocka_unit_test(frames_are_module_and_offset),
      cmocka_unit_test(threads_at_one_place_share_one_definition),
      cmocka_unit_test(a_forked_child_defines_its_sites_again),
      cmocka_unit_test(nothing_while_not_recording),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
