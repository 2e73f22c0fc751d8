/* tests/integration/capture_progs/py312_at_main.c -- stands in for CPython
 * 3.12 as the recorder meets it at main: the domain allocators of PEP 445,
 * whose get and set work before the runtime exists, and an allocator name
 * that may be read only once it does (3.12 Objects/obmalloc.c
 * _PyMem_GetCurrentAllocatorName locks a lock _PyRuntime_Initialize
 * creates; the real one crashed on it at main).  Its allocators are the
 * debug hooks', as in a Py_DEBUG build, so the name is "pymalloc_debug"
 * while they are not wrapped.  main initialises the "runtime", asks the
 * recorder to hook again as sitecustomize.py does, and allocates. */
#include <dlfcn.h>
#include <stdlib.h>

/* CPython 3.12 Include/cpython/pymem.h: PyMemAllocatorEx. */
typedef struct {
  void *ctx;
  void *(*malloc)(void *ctx, size_t size);
  void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
  void *(*realloc)(void *ctx, void *ptr, size_t new_size);
  void (*free)(void *ctx, void *ptr);
} mem_allocator_t;

static void *debug_malloc(void *ctx, size_t n) {
  (void)ctx;
  return malloc(n);
}
static void *debug_calloc(void *ctx, size_t nelem, size_t elsize) {
  (void)ctx;
  return calloc(nelem, elsize);
}
static void *debug_realloc(void *ctx, void *p, size_t n) {
  (void)ctx;
  return realloc(p, n);
}
static void debug_free(void *ctx, void *p) {
  (void)ctx;
  free(p);
}

#define DEBUG_ALLOCATOR                                                        \
  { NULL, debug_malloc, debug_calloc, debug_realloc, debug_free }
static mem_allocator_t g_domains[3] = {DEBUG_ALLOCATOR, DEBUG_ALLOCATOR,
                                       DEBUG_ALLOCATOR};
static int             g_runtime_initialized;

/* CPython 3.11+ Include/pylifecycle.h: Py_Version, PY_VERSION_HEX. */
const unsigned long Py_Version = 0x030C01F0; /* 3.12.1 final */

const char *Py_GetVersion(void) {
  return "3.12.1 (stand-in)";
}

void PyMem_GetAllocator(int domain, mem_allocator_t *a) {
  *a = g_domains[domain];
}

void PyMem_SetAllocator(int domain, mem_allocator_t *a) {
  g_domains[domain] = *a;
}

const char *_PyMem_GetCurrentAllocatorName(void) {
  if (!g_runtime_initialized)
    abort(); /* 3.12: PyThread_acquire_lock(NULL) */
  for (int d = 0; d < 3; d++)
    if (g_domains[d].malloc != debug_malloc)
      return NULL; /* a hook wraps them */
  return "pymalloc_debug";
}

int main(void) {
  g_runtime_initialized = 1;
  int (*hook)(void) =
      (int (*)(void))dlsym(RTLD_DEFAULT, "allocsim_hook_python");
  if (hook == NULL || hook() != 1)
    return 2;
  mem_allocator_t *obj = &g_domains[2];
  void            *p = obj->malloc(obj->ctx, 100);
  obj->free(obj->ctx, p);
  return 0;
}
