/* traces/capture/cxx.c -- C++'s operator new and delete, recorded as the
 * malloc family.
 *
 * Why: libstdc++'s operators call malloc and free, so they were recorded
 * there; but jemalloc, tcmalloc and mimalloc define the operators
 * themselves (Debian's libjemalloc.so.2 exports all twenty, libmimalloc.so.2
 * sixteen, libtcmalloc_minimal.so.4 twenty: `nm -D`) and serve them without
 * calling malloc.  With one of them preloaded, a C++ program's new and
 * delete reached the allocator past the recorder: a capture of a threaded
 * program building four std::maps recorded 6 allocations while RSS grew by
 * 228 MiB.  So the recorder defines the operators too (it comes first in
 * the global scope), records each call, and forwards it to the next
 * definition (RTLD_NEXT: the preloaded allocator's, else libstdc++'s).
 *
 * One record per call: the forwarded call runs with t_self.internal raised,
 * so libstdc++'s own malloc inside it is passed through unrecorded.  A
 * throwing operator new that runs out of memory unwinds through this frame
 * (compiled with -fexceptions); the cleanup attribute lowers the flag then
 * too.  new(0) is recorded as 1 byte, what libstdc++ asks malloc for
 * (GCC 12 libstdc++-v3/libsupc++/new_op.cc:46-47).  A new_handler run
 * inside a failing new is not recorded.
 *
 * Names are the Itanium C++ ABI's manglings for a 64-bit size_t
 * (itanium-cxx-abi.github.io: nw/na new, dl/da delete, m size_t, Pv void *,
 * St11align_val_t, RKSt9nothrow_t). */
#include <dlfcn.h>
#include <stdlib.h>

#include "capture_int.h"

typedef enum cxx_fn_e {
  NEW,
  NEW_NT,
  NEW_AL,
  NEW_AL_NT,
  NEWA,
  NEWA_NT,
  NEWA_AL,
  NEWA_AL_NT,
  DEL,
  DEL_SZ,
  DEL_AL,
  DEL_SZ_AL,
  DEL_NT,
  DEL_AL_NT,
  DELA,
  DELA_SZ,
  DELA_AL,
  DELA_SZ_AL,
  DELA_NT,
  DELA_AL_NT,
  CXX_FN_COUNT
} cxx_fn_t;

static const char *const k_names[CXX_FN_COUNT] = {
    [NEW] = "_Znwm",
    [NEW_NT] = "_ZnwmRKSt9nothrow_t",
    [NEW_AL] = "_ZnwmSt11align_val_t",
    [NEW_AL_NT] = "_ZnwmSt11align_val_tRKSt9nothrow_t",
    [NEWA] = "_Znam",
    [NEWA_NT] = "_ZnamRKSt9nothrow_t",
    [NEWA_AL] = "_ZnamSt11align_val_t",
    [NEWA_AL_NT] = "_ZnamSt11align_val_tRKSt9nothrow_t",
    [DEL] = "_ZdlPv",
    [DEL_SZ] = "_ZdlPvm",
    [DEL_AL] = "_ZdlPvSt11align_val_t",
    [DEL_SZ_AL] = "_ZdlPvmSt11align_val_t",
    [DEL_NT] = "_ZdlPvRKSt9nothrow_t",
    [DEL_AL_NT] = "_ZdlPvSt11align_val_tRKSt9nothrow_t",
    [DELA] = "_ZdaPv",
    [DELA_SZ] = "_ZdaPvm",
    [DELA_AL] = "_ZdaPvSt11align_val_t",
    [DELA_SZ_AL] = "_ZdaPvmSt11align_val_t",
    [DELA_NT] = "_ZdaPvRKSt9nothrow_t",
    [DELA_AL_NT] = "_ZdaPvSt11align_val_tRKSt9nothrow_t",
};

static _Atomic(void *) g_fn[CXX_FN_COUNT];

/* The next definition of operator k, or NULL where no C++ runtime is
 * loaded yet (looked up again later: a dlopen'd library may bring one). */
static void *next_fn(cxx_fn_t k) {
  void *f = atomic_load_explicit(&g_fn[k], memory_order_acquire);
  if (f == NULL && g_real.dlsym != NULL) {
    t_self.internal++;
    f = capture_dlsym_quiet(RTLD_NEXT, k_names[k]);
    t_self.internal--;
    atomic_store_explicit(&g_fn[k], f, memory_order_release);
  }
  return f;
}

static int enter_internal(void) {
  t_self.internal++;
  return 0;
}

static void leave_internal(int *scope) {
  (void)scope;
  t_self.internal--;
}

/* Raises t_self.internal to the end of the enclosing block, however it is
 * left (an exception included). */
#define INTERNAL_SCOPE                                                         \
  int internal_scope_ __attribute__((cleanup(leave_internal), unused)) =       \
      enter_internal()

/* ---- new ------------------------------------------------------------------
 * args: the call's arguments; fallback: where no C++ runtime is loaded, the
 * malloc-family wrapper that records the same request. */
#define NEW_BODY(k, type, args, op, align, fallback)                           \
  do {                                                                         \
    if (!capture_ready())                                                      \
      return (align) <= 16 ? capture_boot_alloc(n) : NULL;                     \
    type f = (type)next_fn(k);                                                 \
    if (f == NULL)                                                             \
      return fallback;                                                         \
    if (capture_passthrough())                                                 \
      return f args;                                                           \
    void *p;                                                                   \
    {                                                                          \
      INTERNAL_SCOPE;                                                          \
      p = f args;                                                              \
    }                                                                          \
    if (p != NULL)                                                             \
      capture_record_alloc(op, CAPTURE_DOMAIN_RAW, p, n ? n : 1, align);       \
    return p;                                                                  \
  } while (0)

typedef void *(*new_fn)(size_t);
typedef void *(*new_nt_fn)(size_t, const void *);
typedef void *(*new_al_fn)(size_t, size_t);
typedef void *(*new_al_nt_fn)(size_t, size_t, const void *);

#define DEFINE_NEW(name, k)                                                    \
  void        *name(size_t n);                                                 \
  EXPORT void *name(size_t n) {                                                \
    NEW_BODY(k, new_fn, (n), CAPTURE_OP_MALLOC, 0, malloc(n));                 \
  }
#define DEFINE_NEW_NT(name, k)                                                 \
  void        *name(size_t n, const void *nt);                                 \
  EXPORT void *name(size_t n, const void *nt) {                                \
    NEW_BODY(k, new_nt_fn, (n, nt), CAPTURE_OP_MALLOC, 0, malloc(n));          \
  }
#define DEFINE_NEW_AL(name, k)                                                 \
  void        *name(size_t n, size_t al);                                      \
  EXPORT void *name(size_t n, size_t al) {                                     \
    NEW_BODY(k, new_al_fn, (n, al), CAPTURE_OP_MEMALIGN, al,                   \
             aligned_alloc(al, n));                                            \
  }
#define DEFINE_NEW_AL_NT(name, k)                                              \
  void        *name(size_t n, size_t al, const void *nt);                      \
  EXPORT void *name(size_t n, size_t al, const void *nt) {                     \
    NEW_BODY(k, new_al_nt_fn, (n, al, nt), CAPTURE_OP_MEMALIGN, al,            \
             aligned_alloc(al, n));                                            \
  }

DEFINE_NEW(_Znwm, NEW)
DEFINE_NEW_NT(_ZnwmRKSt9nothrow_t, NEW_NT)
DEFINE_NEW_AL(_ZnwmSt11align_val_t, NEW_AL)
DEFINE_NEW_AL_NT(_ZnwmSt11align_val_tRKSt9nothrow_t, NEW_AL_NT)
DEFINE_NEW(_Znam, NEWA)
DEFINE_NEW_NT(_ZnamRKSt9nothrow_t, NEWA_NT)
DEFINE_NEW_AL(_ZnamSt11align_val_t, NEWA_AL)
DEFINE_NEW_AL_NT(_ZnamSt11align_val_tRKSt9nothrow_t, NEWA_AL_NT)

/* ---- delete ---------------------------------------------------------------
 */
#define DELETE_BODY(k, type, args)                                             \
  do {                                                                         \
    if (p == NULL || capture_is_boot(p) || !capture_ready())                   \
      return;                                                                  \
    type f = (type)next_fn(k);                                                 \
    if (f == NULL) {                                                           \
      free(p);                                                                 \
      return;                                                                  \
    }                                                                          \
    if (capture_passthrough()) {                                               \
      f args;                                                                  \
      return;                                                                  \
    }                                                                          \
    uint64_t size = capture_release_begin(p);                                  \
    capture_record_free(CAPTURE_DOMAIN_RAW, p);                                \
    {                                                                          \
      INTERNAL_SCOPE;                                                          \
      f args;                                                                  \
    }                                                                          \
    capture_release_end(size);                                                 \
  } while (0)

typedef void (*del_fn)(void *);
typedef void (*del_x_fn)(void *, size_t); /* sized, or aligned */
typedef void (*del_sz_al_fn)(void *, size_t, size_t);
typedef void (*del_nt_fn)(void *, const void *);
typedef void (*del_al_nt_fn)(void *, size_t, const void *);

#define DEFINE_DEL(name, k)                                                    \
  void        name(void *p);                                                   \
  EXPORT void name(void *p) {                                                  \
    DELETE_BODY(k, del_fn, (p));                                               \
  }
#define DEFINE_DEL_X(name, k)                                                  \
  void        name(void *p, size_t x);                                         \
  EXPORT void name(void *p, size_t x) {                                        \
    DELETE_BODY(k, del_x_fn, (p, x));                                          \
  }
#define DEFINE_DEL_SZ_AL(name, k)                                              \
  void        name(void *p, size_t n, size_t al);                              \
  EXPORT void name(void *p, size_t n, size_t al) {                             \
    DELETE_BODY(k, del_sz_al_fn, (p, n, al));                                  \
  }
#define DEFINE_DEL_NT(name, k)                                                 \
  void        name(void *p, const void *nt);                                   \
  EXPORT void name(void *p, const void *nt) {                                  \
    DELETE_BODY(k, del_nt_fn, (p, nt));                                        \
  }
#define DEFINE_DEL_AL_NT(name, k)                                              \
  void        name(void *p, size_t al, const void *nt);                        \
  EXPORT void name(void *p, size_t al, const void *nt) {                       \
    DELETE_BODY(k, del_al_nt_fn, (p, al, nt));                                 \
  }

DEFINE_DEL(_ZdlPv, DEL)
DEFINE_DEL_X(_ZdlPvm, DEL_SZ)
DEFINE_DEL_X(_ZdlPvSt11align_val_t, DEL_AL)
DEFINE_DEL_SZ_AL(_ZdlPvmSt11align_val_t, DEL_SZ_AL)
DEFINE_DEL_NT(_ZdlPvRKSt9nothrow_t, DEL_NT)
DEFINE_DEL_AL_NT(_ZdlPvSt11align_val_tRKSt9nothrow_t, DEL_AL_NT)
DEFINE_DEL(_ZdaPv, DELA)
DEFINE_DEL_X(_ZdaPvm, DELA_SZ)
DEFINE_DEL_X(_ZdaPvSt11align_val_t, DELA_AL)
DEFINE_DEL_SZ_AL(_ZdaPvmSt11align_val_t, DELA_SZ_AL)
DEFINE_DEL_NT(_ZdaPvRKSt9nothrow_t, DELA_NT)
DEFINE_DEL_AL_NT(_ZdaPvSt11align_val_tRKSt9nothrow_t, DELA_AL_NT)
