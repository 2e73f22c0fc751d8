/* traces/capture/resolve.c -- the real functions behind the wrappers, and
 * the wrappers that keep them from being reached around the recorder:
 * dlsym, dlvsym and the allocator extensions (jemalloc's mallctl,
 * mimalloc's mi_collect, gperftools' MallocExtension_ReleaseFreeMemory).
 *
 * Why dlsym is wrapped: ctypes.CDLL("libc.so.6").malloc_trim(0), the usual
 * Python idiom, looks malloc_trim up on libc's own handle and calls libc's
 * definition directly, past the preloaded one; the trace then has no trim
 * and predicts the pre-trim RSS.  The rule here: a lookup on any handle but
 * RTLD_NEXT whose result is exactly the function a wrapper forwards to
 * returns the wrapper instead.  The program then calls what it would have
 * called, one frame later, and the call is recorded.  Lookups of anything
 * else return what libc returns.
 *
 * RTLD_NEXT is relative to the caller: glibc finds the caller from the
 * return address (glibc 2.36 dlfcn/dlsym.c:63-68, RETURN_ADDRESS (0)), so
 * the wrapper passes such lookups on as a tail call, leaving the caller's
 * return address in place (tests/integration/capture_progs/dlsym_paths.c
 * checks that RTLD_NEXT from the program still finds the next definition).
 *
 * libc's own dlsym and dlvsym cannot be looked up with dlsym once it is
 * wrapped, so they are found in libc's dynamic symbol table (GNU hash).
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture_int.h"

real_fns_t g_real;

/* ---- Bootstrap ------------------------------------------------------------
 */

/* dlsym may call calloc (its dlerror state) before the real functions are
 * known: such blocks come from here, 16-byte header holding the size, and
 * are never passed to the real free. */
#define BOOT_BYTES ((size_t)64 * 1024)
static _Alignas(16) unsigned char g_boot[BOOT_BYTES];
static atomic_size_t g_boot_used;

bool capture_is_boot(const void *p) {
  return (const unsigned char *)p >= g_boot &&
         (const unsigned char *)p < g_boot + BOOT_BYTES;
}

void *capture_boot_alloc(size_t n) {
  size_t need = ((n + 15) & ~(size_t)15) + 16;
  size_t off = atomic_fetch_add(&g_boot_used, need);
  if (off + need > BOOT_BYTES)
    return NULL;
  memcpy(g_boot + off, &n, sizeof n);
  return g_boot + off + 16; /* static storage reads as zero */
}

size_t capture_boot_size(const void *p) {
  size_t n;
  memcpy(&n, (const unsigned char *)p - 16, sizeof n);
  return n;
}

/* ---- libc's dlsym from its symbol table ------------------------------------
 */

typedef struct elf_find_s elf_find_t;
struct elf_find_s {
  const char *names[2];
  void       *found[2];
  uintptr_t   self; /* this library's load address: skipped */
};

static uint32_t gnu_hash(const char *s) {
  uint32_t h = 5381;
  for (; *s; s++)
    h = h * 33 + (unsigned char)*s;
  return h;
}

/* Looks name up in one object's GNU hash table (the ELF gABI extension
 * glibc's ld.so uses: bloom words, buckets, then chains whose low bit ends
 * a chain). */
static void *gnu_lookup(uintptr_t   base, const ElfW(Sym) * symtab,
                        const char *strtab, const uint32_t *gh,
                        const char *name) {
  uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_size = gh[2];
  const ElfW(Addr) *bloom = (const ElfW(Addr) *)(gh + 4);
  const uint32_t *buckets = (const uint32_t *)(bloom + bloom_size);
  const uint32_t *chain = buckets + nbuckets;
  uint32_t        h = gnu_hash(name);
  if (nbuckets == 0)
    return NULL;
  uint32_t i = buckets[h % nbuckets];
  if (i < symoffset)
    return NULL;
  for (;; i++) {
    uint32_t h2 = chain[i - symoffset];
    const ElfW(Sym) *s = &symtab[i];
    if ((h | 1) == (h2 | 1) && s->st_shndx != SHN_UNDEF &&
        strcmp(strtab + s->st_name, name) == 0)
      return (void *)(base + s->st_value);
    if (h2 & 1)
      return NULL;
  }
}

static uintptr_t dyn_ptr(uintptr_t base, ElfW(Addr) p) {
  /* glibc relocates these entries in place on most targets; not all. */
  return p < base ? base + p : p;
}

/* One object's dynamic symbol table, string table and GNU hash table; false
 * if it lacks one. */
typedef struct dyn_tables_s dyn_tables_t;
struct dyn_tables_s {
  const ElfW(Sym) * symtab;
  const char     *strtab;
  const uint32_t *gh;
};

static bool dyn_tables(const struct dl_phdr_info *info, dyn_tables_t *t) {
  memset(t, 0, sizeof *t);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
      continue;
    const ElfW(Dyn) *d =
        (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    for (; d->d_tag != DT_NULL; d++) {
      if (d->d_tag == DT_SYMTAB)
        t->symtab = (const ElfW(Sym) *)dyn_ptr(info->dlpi_addr, d->d_un.d_ptr);
      else if (d->d_tag == DT_STRTAB)
        t->strtab = (const char *)dyn_ptr(info->dlpi_addr, d->d_un.d_ptr);
      else if (d->d_tag == DT_GNU_HASH)
        t->gh = (const uint32_t *)dyn_ptr(info->dlpi_addr, d->d_un.d_ptr);
    }
  }
  return t->symtab != NULL && t->strtab != NULL && t->gh != NULL;
}

static int find_in_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  elf_find_t  *f = arg;
  dyn_tables_t t;
  if (info->dlpi_addr == f->self || !dyn_tables(info, &t))
    return 0;
  for (int k = 0; k < 2; k++)
    if (f->found[k] == NULL)
      f->found[k] =
          gnu_lookup(info->dlpi_addr, t.symtab, t.strtab, t.gh, f->names[k]);
  return f->found[0] != NULL && f->found[1] != NULL;
}

/* The linker's symbol for this object's ELF header, at its load address. */
extern const ElfW(Ehdr) __ehdr_start __attribute__((visibility("hidden")));

static void find_real_dl(void) {
  elf_find_t f = {.names = {"dlsym", "dlvsym"},
                  .self = (uintptr_t)&__ehdr_start};
  dl_iterate_phdr(find_in_object, &f);
  g_real.dlsym = (void *(*)(void *, const char *))f.found[0];
  g_real.dlvsym = (void *(*)(void *, const char *, const char *))f.found[1];
}

/* ---- Lookups that leave the heap alone -------------------------------------
 * A dlsym that fails allocates from the program's allocator: its dlerror
 * state and the message (glibc 2.36 dlfcn/dlerror.c:162-168 _dlerror_run,
 * elf/dl-exception.c:82-89 and 157 _dl_exception_create*).  The recorder
 * looks up many symbols most programs lack (mallctl, mi_collect, tc_version,
 * Py_Version, C++'s operator new), outside recording, so those blocks sat
 * in the real heap and not in the trace: under mimalloc 2.1.7, which lays a
 * page's blocks out by address, the two small pages they took (32 and 48-96
 * byte blocks) moved every later page of the first segment, and captures
 * missed by 1.2-8.2% of their peak.  So a name no loaded object defines is
 * answered here, without dlsym. */

typedef struct sym_query_s sym_query_t;
struct sym_query_s {
  const char *name;
  uintptr_t   self;
  bool        found;   /* an object defines it */
  bool        unknown; /* an object without a GNU hash table: ask dlsym */
};

static int sym_in_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  sym_query_t *q = arg;
  dyn_tables_t t;
  if (info->dlpi_addr == q->self)
    return 0;
  if (!dyn_tables(info, &t)) {
    bool has_dynamic = false;
    for (int i = 0; i < info->dlpi_phnum; i++)
      has_dynamic |= info->dlpi_phdr[i].p_type == PT_DYNAMIC;
    q->unknown |= has_dynamic; /* a static object has nothing to find */
    return 0;
  }
  q->found =
      gnu_lookup(info->dlpi_addr, t.symtab, t.strtab, t.gh, q->name) != NULL;
  return q->found;
}

void *capture_dlsym_quiet(void *handle, const char *name) {
  if (g_real.dlsym == NULL)
    return NULL;
  sym_query_t q = {.name = name, .self = (uintptr_t)&__ehdr_start};
  capture_dl_walk_enter();
  dl_iterate_phdr(sym_in_object, &q);
  capture_dl_walk_exit();
  return q.found || q.unknown ? g_real.dlsym(handle, name) : NULL;
}

/* ---- Resolving the real functions -----------------------------------------
 */

static atomic_int g_resolve_state; /* 0 none, 1 running, 2 done */

static void *next_sym(const char *name) {
  return capture_dlsym_quiet(RTLD_NEXT, name);
}

static void resolve_all(void) {
  t_self.resolving = 1;
  find_real_dl();
  g_real.malloc = (void *(*)(size_t))next_sym("malloc");
  g_real.calloc = (void *(*)(size_t, size_t))next_sym("calloc");
  g_real.realloc = (void *(*)(void *, size_t))next_sym("realloc");
  g_real.free = (void (*)(void *))next_sym("free");
  g_real.memalign = (void *(*)(size_t, size_t))next_sym("memalign");
  g_real.posix_memalign =
      (int (*)(void **, size_t, size_t))next_sym("posix_memalign");
  g_real.aligned_alloc = (void *(*)(size_t, size_t))next_sym("aligned_alloc");
  g_real.valloc = (void *(*)(size_t))next_sym("valloc");
  g_real.pvalloc = (void *(*)(size_t))next_sym("pvalloc");
  g_real.malloc_trim = (int (*)(size_t))next_sym("malloc_trim");
  g_real.mallopt = (int (*)(int, int))next_sym("mallopt");
  g_real.execve =
      (int (*)(const char *, char *const[], char *const[]))next_sym("execve");
  g_real.execvpe =
      (int (*)(const char *, char *const[], char *const[]))next_sym("execvpe");
  g_real.fexecve =
      (int (*)(int, char *const[], char *const[]))next_sym("fexecve");
  g_real.posix_spawn =
      (int (*)(pid_t *, const char *, const posix_spawn_file_actions_t *,
               const posix_spawnattr_t *, char *const[],
               char *const[]))next_sym("posix_spawn");
  g_real.posix_spawnp =
      (int (*)(pid_t *, const char *, const posix_spawn_file_actions_t *,
               const posix_spawnattr_t *, char *const[],
               char *const[]))next_sym("posix_spawnp");
  g_real.exit_now = (void (*)(int))next_sym("_exit");
  g_real.exit_now2 = (void (*)(int))next_sym("_Exit");
  g_real.fork = (pid_t(*)(void))next_sym("fork");
  g_real.close = (int (*)(int))next_sym("close");
  g_real.libc_start_main = (int (*)(
      int (*)(int, char **, char **), int, char **, void (*)(void),
      void (*)(void), void (*)(void), void *))next_sym("__libc_start_main");
  g_real.mallctl = (int (*)(const char *, void *, size_t *, void *,
                            size_t))next_sym("mallctl");
  g_real.mallocx = (void *(*)(size_t, int))next_sym("mallocx");
  g_real.rallocx = (void *(*)(void *, size_t, int))next_sym("rallocx");
  g_real.xallocx = (size_t(*)(void *, size_t, size_t, int))next_sym("xallocx");
  g_real.sdallocx = (void (*)(void *, size_t, int))next_sym("sdallocx");
  g_real.dallocx = (void (*)(void *, int))next_sym("dallocx");
  g_real.mi_collect = (void (*)(_Bool))next_sym("mi_collect");
  g_real.release_free_memory =
      (void (*)(void))next_sym("MallocExtension_ReleaseFreeMemory");
  t_self.resolving = 0;
}

void capture_resolve(void) {
  if (LIKELY(atomic_load_explicit(&g_resolve_state, memory_order_acquire) == 2))
    return;
  int expect = 0;
  if (atomic_compare_exchange_strong(&g_resolve_state, &expect, 1)) {
    resolve_all();
    atomic_store_explicit(&g_resolve_state, 2, memory_order_release);
  } else if (!t_self.resolving) {
    while (atomic_load_explicit(&g_resolve_state, memory_order_acquire) != 2) {
    }
  }
}

/* ---- dlsym and dlvsym ------------------------------------------------------
 */

/* Defined in capture.c and below: the wrappers a lookup may return. */
void *malloc(size_t);
void *calloc(size_t, size_t);
void *realloc(void *, size_t);
void  free(void *);
void *memalign(size_t, size_t);
int   posix_memalign(void **, size_t, size_t);
void *aligned_alloc(size_t, size_t);
void *valloc(size_t);
void *pvalloc(size_t);
int   malloc_trim(size_t);
int   mallopt(int, int);
int   mallctl(const char *, void *, size_t *, void *, size_t);
void  mi_collect(_Bool);
void  MallocExtension_ReleaseFreeMemory(void);

/* The wrapper for a looked-up function, or p itself. */
static void *interpose(void *p) {
  if (p == NULL)
    return NULL;
  const struct {
    void *real, *ours;
  } pairs[] = {
      {(void *)g_real.malloc, (void *)malloc},
      {(void *)g_real.calloc, (void *)calloc},
      {(void *)g_real.realloc, (void *)realloc},
      {(void *)g_real.free, (void *)free},
      {(void *)g_real.memalign, (void *)memalign},
      {(void *)g_real.posix_memalign, (void *)posix_memalign},
      {(void *)g_real.aligned_alloc, (void *)aligned_alloc},
      {(void *)g_real.valloc, (void *)valloc},
      {(void *)g_real.pvalloc, (void *)pvalloc},
      {(void *)g_real.malloc_trim, (void *)malloc_trim},
      {(void *)g_real.mallopt, (void *)mallopt},
      {(void *)g_real.mallctl, (void *)mallctl},
      {(void *)g_real.mallocx, (void *)mallocx},
      {(void *)g_real.rallocx, (void *)rallocx},
      {(void *)g_real.xallocx, (void *)xallocx},
      {(void *)g_real.sdallocx, (void *)sdallocx},
      {(void *)g_real.dallocx, (void *)dallocx},
      {(void *)g_real.mi_collect, (void *)mi_collect},
      {(void *)g_real.release_free_memory,
       (void *)MallocExtension_ReleaseFreeMemory},
      {(void *)g_real.dlsym, (void *)dlsym},
      {(void *)g_real.dlvsym, (void *)dlvsym},
  };
  for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
    if (pairs[i].real == p)
      return pairs[i].ours;
  /* The extension wrappers exist in every process; where the allocator
   * they forward to is absent, a lookup must not find them. */
  if ((p == (void *)mallctl && g_real.mallctl == NULL) ||
      (p == (void *)mallocx && g_real.mallocx == NULL) ||
      (p == (void *)rallocx && g_real.rallocx == NULL) ||
      (p == (void *)xallocx && g_real.xallocx == NULL) ||
      (p == (void *)sdallocx && g_real.sdallocx == NULL) ||
      (p == (void *)dallocx && g_real.dallocx == NULL) ||
      (p == (void *)mi_collect && g_real.mi_collect == NULL) ||
      (p == (void *)MallocExtension_ReleaseFreeMemory &&
       g_real.release_free_memory == NULL))
    return NULL;
  return p;
}

EXPORT void *dlsym(void *handle, const char *name) {
  capture_resolve();
  if (handle == RTLD_NEXT)
    return g_real.dlsym(handle, name); /* a tail call: see the header */
  return interpose(g_real.dlsym(handle, name));
}

EXPORT void *dlvsym(void *handle, const char *name, const char *version) {
  capture_resolve();
  if (handle == RTLD_NEXT)
    return g_real.dlvsym(handle, name, version);
  return interpose(g_real.dlvsym(handle, name, version));
}

/* ---- An allocator ahead of the recorder -------------------------------------
 * The dynamic linker binds each symbol to its first definition in the
 * global scope, which starts with the executable and then the LD_PRELOAD
 * libraries (glibc 2.36 elf/dl-lookup.c _dl_lookup_symbol_x, searching the
 * main map's scope).  An executable that defines malloc itself (rustc links
 * jemalloc in that way) binds every call to it, libc's too: the recorder
 * sees none, and the trace would say the program allocated nothing. */

static const char *const k_alloc_names[] = {"malloc", "free", "calloc",
                                            "realloc"};

/* Whether the object holding address at defines name (not only refers to
 * it: a non-PIE executable that takes malloc's address has an undefined
 * "malloc" whose value is its PLT stub, and dlsym returns that stub). */
typedef struct defines_s defines_t;
struct defines_s {
  uintptr_t   at;
  const char *name;
  bool        holds, defines;
};

static int object_defines(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  defines_t *q = arg;
  for (int i = 0; i < info->dlpi_phnum && !q->holds; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
    q->holds = ph->p_type == PT_LOAD && q->at >= lo && q->at - lo < ph->p_memsz;
  }
  dyn_tables_t t;
  if (q->holds && dyn_tables(info, &t))
    q->defines =
        gnu_lookup(info->dlpi_addr, t.symtab, t.strtab, t.gh, q->name) != NULL;
  return q->holds;
}

void capture_own_malloc(char *path, size_t len) {
  path[0] = '\0';
  if (g_real.dlsym == NULL)
    return;
  for (size_t i = 0; i < sizeof k_alloc_names / sizeof *k_alloc_names; i++) {
    void     *p = g_real.dlsym(RTLD_DEFAULT, k_alloc_names[i]);
    Dl_info   di;
    defines_t q = {.at = (uintptr_t)p, .name = k_alloc_names[i]};
    if (p == NULL || dladdr(p, &di) == 0 ||
        di.dli_fbase == (void *)&__ehdr_start)
      continue;
    dl_iterate_phdr(object_defines, &q);
    if (!q.defines)
      continue;
    /* The executable's name is argv[0] (glibc elf/dl-addr.c): its path
     * is /proc/self/exe. */
    ssize_t n;
    if (di.dli_fname != NULL && di.dli_fname[0] == '/') {
      n = (ssize_t)strnlen(di.dli_fname, len - 1);
      memcpy(path, di.dli_fname, (size_t)n);
    } else {
      n = readlink("/proc/self/exe", path, len - 1);
    }
    if (n <= 0) {
      path[0] = '?';
      n = 1;
    }
    path[n] = '\0';
    return;
  }
}

/* ---- Allocator extensions --------------------------------------------------
 */

static bool recording_here(void) {
  return t_self.internal == 0 && t_self.in_domain == 0;
}

static void emit_purge(unsigned kind, uint64_t arena) {
  cap_rec_t r = {.op = CAPTURE_OP_PURGE, .x = kind, .y = arena};
  capture_emit(&r);
}

static void emit_option(const char *name, int64_t value) {
  cap_rec_t r = {.op = CAPTURE_OP_OPTION,
                 .y = (uint64_t)value,
                 .text = name,
                 .text_len = strlen(name)};
  capture_emit(&r);
}

/* jemalloc 5.3.0 include/jemalloc/jemalloc_macros.h.in:47. */
#define JE_MALLCTL_ARENAS_ALL 4096

/* "arena.<i>.<rest>": *arena = i (MALLCTL_ARENAS_ALL -> every arena) and
 * the rest, or NULL. */
static const char *je_arena_name(const char *name, uint64_t *arena) {
  if (strncmp(name, "arena.", 6) != 0)
    return NULL;
  const char *p = name + 6;
  uint64_t    i = 0;
  if (*p < '0' || *p > '9')
    return NULL;
  while (*p >= '0' && *p <= '9' && i < 1000000)
    i = i * 10 + (uint64_t)(*p++ - '0');
  if (*p != '.')
    return NULL;
  *arena = i == JE_MALLCTL_ARENAS_ALL ? CAPTURE_ALL_ARENAS : i;
  return p + 1;
}

/* Records what a successful mallctl changed: jemalloc 5.3.0 src/ctl.c
 * arena_i_purge_ctl / arena_i_decay_ctl (arena.<i>.purge, .decay),
 * thread_tcache_flush_ctl, and writes of the decay times. */
static void record_mallctl(const char *name, const void *newp, size_t newlen) {
  uint64_t    arena = CAPTURE_ALL_ARENAS;
  const char *rest = je_arena_name(name, &arena);
  if (rest != NULL && strcmp(rest, "purge") == 0)
    emit_purge(CAPTURE_PURGE_ALL, arena);
  else if (rest != NULL && strcmp(rest, "decay") == 0)
    emit_purge(CAPTURE_PURGE_DECAY, arena);
  else if (strcmp(name, "thread.tcache.flush") == 0)
    emit_purge(CAPTURE_PURGE_TCACHE, CAPTURE_ALL_ARENAS);
  else if (newp != NULL && newlen == sizeof(long)) {
    const char *knob = rest != NULL                       ? rest
                       : strncmp(name, "arenas.", 7) == 0 ? name + 7
                                                          : NULL;
    long        v;
    memcpy(&v, newp, sizeof v);
    if (knob != NULL && (strcmp(knob, "dirty_decay_ms") == 0 ||
                         strcmp(knob, "muzzy_decay_ms") == 0))
      emit_option(knob, v);
  }
}

EXPORT int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
                   size_t newlen) {
  capture_resolve();
  if (g_real.mallctl == NULL)
    return ENOENT; /* jemalloc's answer for an unknown name */
  bool rec = recording_here() && name != NULL;
  if (rec)
    capture_gate_enter();
  int rc = g_real.mallctl(name, oldp, oldlenp, newp, newlen);
  if (rec) {
    if (rc == 0)
      record_mallctl(name, newp, newlen);
    capture_gate_leave();
  }
  return rc;
}

/* mimalloc 2.0 include/mimalloc.h: mi_collect(bool force). */
EXPORT void mi_collect(_Bool force) {
  capture_resolve();
  if (g_real.mi_collect == NULL)
    return;
  bool rec = recording_here();
  if (rec)
    capture_gate_enter();
  g_real.mi_collect(force);
  if (rec) {
    emit_purge(force ? CAPTURE_PURGE_ALL : CAPTURE_PURGE_DECAY,
               CAPTURE_ALL_ARENAS);
    capture_gate_leave();
  }
}

/* gperftools src/gperftools/malloc_extension_c.h. */
EXPORT void MallocExtension_ReleaseFreeMemory(void) {
  capture_resolve();
  if (g_real.release_free_memory == NULL)
    return;
  bool rec = recording_here();
  if (rec)
    capture_gate_enter();
  g_real.release_free_memory();
  if (rec) {
    emit_purge(CAPTURE_PURGE_ALL, CAPTURE_ALL_ARENAS);
    capture_gate_leave();
  }
}
