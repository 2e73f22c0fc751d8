/* tests/validation/test_kernel_placement.c -- where the simulated kernel
 * puts anonymous mappings, against where this machine's kernel puts them.
 *
 * A fresh process (this executable re-executed with ALLOCSIM_PLACE_CHILD
 * set) probes its mmap top as the capture recorder does (a PROT_NONE
 * mapping a page short of 2 MiB, unmapped again: traces/capture/stream.c),
 * then makes a fixed sequence of mmap, munmap and mremap(MREMAP_MAYMOVE)
 * calls of lengths below, at and above 2 MiB, multiples of it and not, and
 * writes each result as an offset from the probed top.  The simulated
 * kernel, given that top and the THP placement policy of this machine's
 * release (sim_kernel_thp_align_of_release of uname -r), makes the same
 * calls; the test asserts every address equal.  On Linux 6.7 and later
 * the sequence tells the policies apart: run with the policy of Linux 6.1
 * on this machine's 6.18, the 2 MiB mapping already lands elsewhere.
 *
 * Requirements: Linux (/proc/self/exe), no AddressSanitizer (its runtime
 * maps memory of its own between the calls: the test skips).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cmocka.h>

#include "sim/kernel.h"

#include "../helpers/asan.h"
#include "../helpers/spawn_child.h"

#define CHILD_ENV "ALLOCSIM_PLACE_CHILD"
#define MIB       ((uint64_t)1 << 20)
#define PAGE      ((uint64_t)4096)

/* The sequence: each step maps (len), unmaps step `of`, or remaps step
 * `of` to len. */
typedef enum step_kind_e { S_MAP, S_UNMAP, S_REMAP } step_kind_t;
typedef struct step_s {
  step_kind_t kind;
  int         of; /* S_UNMAP, S_REMAP: the step whose mapping it acts on */
  uint64_t    len;
} step_t;

static const step_t steps[] = {
    {S_MAP, 0, 3 * MIB},            /* 0: >= 2 MiB, not a multiple */
    {S_MAP, 0, 2 * MIB},            /* 1: a multiple */
    {S_MAP, 0, MIB + PAGE},         /* 2: below 2 MiB */
    {S_MAP, 0, 4 * MIB},            /* 3 */
    {S_UNMAP, 1, 0},                /* 4: a 2 MiB hole */
    {S_MAP, 0, 2 * MIB},            /* 5: does not fit the hole padded */
    {S_REMAP, 3, 8 * MIB},          /* 6: moves, congruent to its old place */
    {S_MAP, 0, 6 * MIB + PAGE},     /* 7 */
    {S_REMAP, 0, 6 * MIB},          /* 8 */
    {S_MAP, 0, 64 * MIB},           /* 9: a glibc heap's size */
    {S_MAP, 0, 128 * MIB},          /* 10: what glibc maps to align one */
    {S_UNMAP, 9, 0},                /* 11 */
    {S_MAP, 0, 32 * MIB + 2 * MIB}, /* 12 */
    {S_MAP, 0, 512 * 1024},         /* 13 */
};
#define NSTEPS (sizeof steps / sizeof steps[0])

/* What the child writes: its probed top, then each step's address (0 for
 * an unmap) as top - address. */
typedef struct result_s {
  uint64_t top;
  uint64_t below_top[NSTEPS];
} result_t;

static int place_child(void) {
  static result_t r;
  static void    *at[NSTEPS];
  static uint64_t len[NSTEPS];
  const size_t    probe = 2 * MIB - PAGE;
  void           *p = mmap(NULL, probe, PROT_NONE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    return 3;
  munmap(p, probe);
  r.top = (uint64_t)(uintptr_t)p + probe;
  for (size_t i = 0; i < NSTEPS; i++) {
    const step_t *s = &steps[i];
    void         *q = NULL;
    if (s->kind == S_MAP) {
      q = mmap(NULL, s->len, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      len[i] = s->len;
    } else if (s->kind == S_UNMAP) {
      munmap(at[s->of], len[s->of]);
    } else {
      q = mremap(at[s->of], len[s->of], s->len, MREMAP_MAYMOVE);
      at[s->of] = q;
      len[s->of] = s->len;
    }
    if (q == MAP_FAILED)
      return 4;
    at[i] = q;
    r.below_top[i] = q != NULL ? r.top - (uint64_t)(uintptr_t)q : 0;
  }
  return write(1, &r, sizeof r) == (ssize_t)sizeof r ? 0 : 5;
}

/* The same calls on a simulated kernel with mmap_top = top. */
static void place_model(uint64_t top, sim_thp_align_t policy, result_t *out) {
  sim_kernel_config_t cfg;
  sim_kernel_config_default(&cfg);
  cfg.mmap_top = top;
  cfg.thp_align = policy;
  sim_kernel_t *k;
  as_err_t      err = {0};
  assert_int_equal(sim_kernel_create(&cfg, &k, &err), AS_OK);
  sim_addr_t at[NSTEPS] = {0};
  uint64_t   len[NSTEPS] = {0};
  out->top = top;
  for (size_t i = 0; i < NSTEPS; i++) {
    const step_t *s = &steps[i];
    sim_addr_t    q = 0;
    as_status_t   st = AS_OK;
    if (s->kind == S_MAP) {
      st = sim_kernel_mmap(k, s->len, 0, SIM_PROT_RW, SIM_OWNER_LIBC_MMAP, &q,
                           &err);
      len[i] = s->len;
    } else if (s->kind == S_UNMAP) {
      st = sim_kernel_munmap(k, at[s->of], len[s->of], &err);
    } else {
      st = sim_kernel_mremap(k, at[s->of], len[s->of], s->len, &q, &err);
      at[s->of] = q;
      len[s->of] = s->len;
    }
    if (st != AS_OK)
      fail_msg("step %zu: %s", i, err.msg);
    at[i] = q;
    out->below_top[i] = q != 0 ? top - q : 0;
  }
  sim_kernel_destroy(k);
}

static void real_placement(result_t *r) {
  char              arg0[] = "test_kernel_placement";
  char             *argv[] = {arg0, NULL};
  const char *const extra[] = {CHILD_ENV "=1", NULL};
  child_result_t    c =
      spawn_child("/proc/self/exe", argv, NULL, extra, r, sizeof *r);
  if (c.spawn_err != 0 || c.status != 0 || c.got != sizeof *r || c.extra)
    fail_msg("child: spawn error %d, status %d, signal %d, %zu bytes",
             c.spawn_err, c.status, c.signal, c.got);
}

static sim_thp_align_t this_release(char *name, size_t len) {
  struct utsname u;
  assert_int_equal(uname(&u), 0);
  snprintf(name, len, "%s", u.release);
  return sim_kernel_thp_align_of_release(u.release);
}

static void placement_matches_this_kernel(void **state) {
  (void)state;
#if DIFF_ASAN
  print_message("skipped: AddressSanitizer maps memory between the calls\n");
  skip();
#endif
  char            release[128];
  sim_thp_align_t policy = this_release(release, sizeof release);
  result_t        real, model;
  real_placement(&real);
  place_model(real.top, policy, &model);
  int bad = 0;
  for (size_t i = 0; i < NSTEPS; i++)
    if (getenv("PLACE_VERBOSE") || real.below_top[i] != model.below_top[i]) {
      print_message("step %zu: real top-0x%" PRIx64 ", model top-0x%" PRIx64
                    "\n",
                    i, real.below_top[i], model.below_top[i]);
      bad++;
    }
  if (bad != 0)
    fail_msg("Linux %s: %d of %zu placements differ", release, bad, NSTEPS);
  print_message("Linux %s: all %zu placements equal (policy %d)\n", release,
                NSTEPS, (int)policy);
  /* On a kernel that aligns, the policy of Linux 6.1 must not pass too. */
  if (policy != SIM_THP_ALIGN_NONE) {
    result_t old;
    place_model(real.top, SIM_THP_ALIGN_NONE, &old);
    assert_memory_not_equal(old.below_top, real.below_top,
                            sizeof real.below_top);
  }
}

static void releases_map_to_policies(void **state) {
  (void)state;
  assert_int_equal(sim_kernel_thp_align_of_release("6.1.0-28-amd64"),
                   SIM_THP_ALIGN_NONE);
  assert_int_equal(sim_kernel_thp_align_of_release("5.15.0-127-generic"),
                   SIM_THP_ALIGN_NONE);
  assert_int_equal(sim_kernel_thp_align_of_release("6.8.0-51-generic"),
                   SIM_THP_ALIGN_ANY);
  assert_int_equal(sim_kernel_thp_align_of_release("6.11.0-1"),
                   SIM_THP_ALIGN_ANY);
  assert_int_equal(sim_kernel_thp_align_of_release("6.12.48+deb13-amd64"),
                   SIM_THP_ALIGN_MULTIPLE);
  assert_int_equal(sim_kernel_thp_align_of_release("6.18.44-fc-v1147"),
                   SIM_THP_ALIGN_MULTIPLE);
  assert_int_equal(sim_kernel_thp_align_of_release("7.0"),
                   SIM_THP_ALIGN_MULTIPLE);
  assert_int_equal(sim_kernel_thp_align_of_release("linux"),
                   SIM_THP_ALIGN_NONE);
  assert_int_equal(sim_kernel_thp_align_of_release(""), SIM_THP_ALIGN_NONE);
}

int main(void) {
  if (getenv(CHILD_ENV) != NULL)
    return place_child();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(releases_map_to_policies),
      cmocka_unit_test(placement_matches_this_kernel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
