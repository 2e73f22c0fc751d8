/* analysis/symbolize.c -- call-site frames to function and file:line with
 * libdwfl (symbolize.h says why libdw).  One Dwfl per module path, the
 * module reported at bias 0 so that a frame's offset from the load base is
 * the module's own address (ET_EXEC: dlpi_addr is 0 and the offset is the
 * address; ET_DYN: the offset is the vaddr).  C++ names are demangled
 * with libstdc++'s __cxa_demangle, found at run time: a C++ program's
 * machine has libstdc++, and allocsim itself does not link it. */
#include "symbolize.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct zmod_s zmod_t;
struct zmod_s {
  char        *path;
  Dwfl        *dwfl; /* NULL: the file could not be reported */
  Dwfl_Module *mod;
};

/* abi::__cxa_demangle (libstdc++ cxxabi.h): a malloc'ed name, or NULL. */
typedef char *(*demangle_fn)(const char *mangled, char *buf, size_t *len,
                             int *status);

struct symbolizer_s {
  zmod_t     *m;
  size_t      n, cap;
  void       *libstdcxx; /* dlopen handle, NULL if not (yet) loaded */
  demangle_fn demangle;  /* NULL: names stay as the symbol table has them */
  bool        tried;     /* libstdc++ was looked for */
};

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

symbolizer_t *symbolizer_new(void) {
  return calloc(1, sizeof(symbolizer_t));
}

void symbolizer_free(symbolizer_t *z) {
  if (z == NULL)
    return;
  for (size_t i = 0; i < z->n; i++) {
    if (z->m[i].dwfl != NULL)
      dwfl_end(z->m[i].dwfl);
    free(z->m[i].path);
  }
  free(z->m);
  if (z->libstdcxx != NULL)
    dlclose(z->libstdcxx);
  free(z);
}

static zmod_t *module(symbolizer_t *z, const char *path) {
  for (size_t i = 0; i < z->n; i++)
    if (strcmp(z->m[i].path, path) == 0)
      return &z->m[i];
  if (z->n == z->cap) {
    size_t  cap = z->cap ? 2 * z->cap : 16;
    zmod_t *v = realloc(z->m, cap * sizeof *v);
    if (v == NULL)
      return NULL;
    z->m = v;
    z->cap = cap;
  }
  zmod_t *m = &z->m[z->n];
  memset(m, 0, sizeof *m);
  if ((m->path = strdup(path)) == NULL)
    return NULL;
  z->n++;
  if (path[0] != '/')
    return m; /* "[unknown]", "linux-vdso.so.1": no file to read */
  m->dwfl = dwfl_begin(&callbacks);
  if (m->dwfl == NULL)
    return m;
  dwfl_report_begin(m->dwfl);
  m->mod = dwfl_report_elf(m->dwfl, path, path, -1, 0, false);
  dwfl_report_end(m->dwfl, NULL, NULL);
  if (m->mod == NULL) {
    dwfl_end(m->dwfl);
    m->dwfl = NULL;
  }
  return m;
}

/* The module of path and the address of the call in it (the return
 * address's offset minus one); false when there is nothing to look up. */
static bool lookup(symbolizer_t *z, const char *path, uint64_t offset,
                   zmod_t **out, Dwarf_Addr *pc) {
  zmod_t *m = z != NULL && path != NULL ? module(z, path) : NULL;
  *out = m;
  if (m == NULL || m->mod == NULL || offset == 0)
    return false;
  *pc = offset - 1;
  return true;
}

/* name into buf, demangled when it is a C++ (Itanium ABI) name and
 * libstdc++ can be loaded. */
static void put_name(symbolizer_t *z, const char *name, char *buf, size_t len) {
  if (strncmp(name, "_Z", 2) == 0 && !z->tried) {
    z->tried = true;
    z->libstdcxx = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
    if (z->libstdcxx != NULL)
      *(void **)&z->demangle = dlsym(z->libstdcxx, "__cxa_demangle");
  }
  int   status = -1;
  char *plain = strncmp(name, "_Z", 2) == 0 && z->demangle != NULL
                    ? z->demangle(name, NULL, NULL, &status)
                    : NULL;
  snprintf(buf, len, "%s", plain != NULL && status == 0 ? plain : name);
  free(plain);
}

void symbolize_function(symbolizer_t *z, const char *path, uint64_t offset,
                        char *buf, size_t len) {
  zmod_t    *m;
  Dwarf_Addr pc;
  buf[0] = '\0';
  if (!lookup(z, path, offset, &m, &pc))
    return;
  const char *name = dwfl_module_addrname(m->mod, pc);
  if (name != NULL)
    put_name(z, name, buf, len);
}

/* "fn (where)" into buf, fn cut short with "..." so that where fits: a
 * C++ template's demangled name can take hundreds of bytes. */
static void put_frame(const char *fn, const char *where, char *buf,
                      size_t len) {
  size_t need = strlen(fn) + strlen(where) + 4; /* " ()" and the NUL */
  if (need <= len || len < strlen(where) + 8) {
    snprintf(buf, len, "%s (%s)", fn, where);
    return;
  }
  int keep = (int)(len - strlen(where) - 7); /* "..." too */
  snprintf(buf, len, "%.*s... (%s)", keep, fn, where);
}

void symbolize_frame(symbolizer_t *z, const char *path, uint64_t offset,
                     char *buf, size_t len) {
  zmod_t     *m;
  Dwarf_Addr  pc;
  char        fn[1024], where[PATH_MAX + 32];
  const char *p = path != NULL ? path : "?";
  if (!lookup(z, path, offset, &m, &pc)) {
    snprintf(buf, len, "%s+0x%" PRIx64, p, offset);
    return;
  }
  symbolize_function(z, path, offset, fn, sizeof fn);
  Dwfl_Line  *line = dwfl_module_getsrc(m->mod, pc);
  int         lineno = 0;
  const char *file = line != NULL
                         ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL)
                         : NULL;
  if (file != NULL)
    snprintf(where, sizeof where, "%s:%d", file, lineno);
  else
    snprintf(where, sizeof where, "%s+0x%" PRIx64, p, offset);
  if (fn[0] != '\0')
    put_frame(fn, where, buf, len);
  else if (file != NULL)
    snprintf(buf, len, "%s+0x%" PRIx64 " (%s)", p, offset, where);
  else
    snprintf(buf, len, "%s", where);
}
