/* traces/capture/execenv.c -- the environment an exec'd image gets, and the
 * allocator settings each image reports in its HELLO.
 *
 * Why: the new image is recorded only if ld.so preloads the recorder again,
 * which it does from the LD_PRELOAD of the environment passed to exec.  A
 * program that execs with an environment of its own making (`env
 * LD_PRELOAD=libjemalloc.so.2 python3`, a shell's `LD_PRELOAD=x prog`,
 * Python's subprocess with env=..., `env -i`) dropped the recorder, and the
 * child ran untraced without a word: a 3 s, 255 MiB Python job came out as
 * the 268 events of /usr/bin/env.  So the exec wrappers (capture.c) pass a
 * corrected copy of the environment when it needs one:
 *   - LD_PRELOAD starts with the recorder: prepended when missing (the
 *     variable added when absent), moved first when another library came
 *     before it (RTLD_NEXT must find the user's allocator, not bypass it),
 *     never twice.  The user's entries follow in their order.
 *   - every ALLOCSIM_CAPTURE_* variable of this image that the new
 *     environment lacks is added (the socket, the settings, the Python
 *     directory); one it sets itself (a nested capture) is left alone.
 *   - PYTHONPATH gets the directory of sitecustomize.py (which hooks
 *     CPython's domains) back when it lacks it.
 * Nothing else of the user's environment changes.  An environment that
 * already has all this is passed as it is, with no copy.
 *
 * The copy is built on the caller's stack: the exec may run in a vfork
 * child (CPython's subprocess), which shares the parent's heap and must not
 * call malloc.  Everything here reads state fixed at start-up.
 */
#include <dlfcn.h>
#include <limits.h>
#include <string.h>

#include "capture_int.h"

/* The recorder's path as ld.so loaded it, and its file name. */
static char        g_lib[PATH_MAX];
static const char *g_lib_base;
/* This image's ALLOCSIM_CAPTURE_* entries ("NAME=VALUE"), copied. */
#define KEEP_MAX 8
static char        g_keep_buf[PATH_MAX + 1024];
static const char *g_keep[KEEP_MAX];
static size_t      g_nkeep;
_Static_assert(CAPTURE_EXECENV_EXTRA >= 2 + KEEP_MAX + 1,
               "a copy holds LD_PRELOAD, PYTHONPATH, the settings and NULL");
/* ALLOCSIM_CAPTURE_PYTHON's value: the directory of sitecustomize.py. */
static const char *g_pydir;
/* The allocator settings this image started with (capture_hello_t.env). */
static char g_hello_env[CAPTURE_HELLO_ENV];

static const char *base_name(const char *p, size_t n) {
  const char *b = p;
  for (size_t i = 0; i < n; i++)
    if (p[i] == '/')
      b = p + i + 1;
  return b;
}

/* Whether the LD_PRELOAD entry [p, p + n) is the recorder: its path, or a
 * library of the same file name (another copy would record every call
 * twice). */
static bool is_recorder(const char *p, size_t n) {
  if (strlen(g_lib) == n && memcmp(p, g_lib, n) == 0)
    return true;
  const char *b = base_name(p, n);
  size_t      bn = n - (size_t)(b - p);
  return bn == strlen(g_lib_base) && memcmp(b, g_lib_base, bn) == 0;
}

/* ld.so splits LD_PRELOAD at spaces and colons (glibc 2.36 elf/rtld.c
 * handle_preload_list). */
#define PRELOAD_SEP " :"

/* Whether LD_PRELOAD's value v already has the recorder first and once. */
static bool preload_ok(const char *v) {
  bool first = true;
  for (const char *p = v;;) {
    p += strspn(p, PRELOAD_SEP);
    size_t n = strcspn(p, PRELOAD_SEP);
    if (n == 0)
      return !first;
    if (is_recorder(p, n) != first)
      return false;
    first = false;
    p += n;
  }
}

/* LD_PRELOAD's value without the recorder, entries joined by a space,
 * into buf (len bytes at least strlen(v) + 1). */
static void preload_strip(const char *v, char *buf) {
  size_t used = 0;
  for (const char *p = v;;) {
    p += strspn(p, PRELOAD_SEP);
    size_t n = strcspn(p, PRELOAD_SEP);
    if (n == 0)
      break;
    if (!is_recorder(p, n)) {
      if (used > 0)
        buf[used++] = ' ';
      memcpy(buf + used, p, n);
      used += n;
    }
    p += n;
  }
  buf[used] = '\0';
}

static bool pythonpath_ok(const char *v) {
  size_t dn = strlen(g_pydir);
  for (const char *p = v;;) {
    size_t n = strcspn(p, ":");
    if (n == dn && memcmp(p, g_pydir, n) == 0)
      return true;
    if (p[n] == '\0')
      return false;
    p += n + 1;
  }
}

static size_t name_len(const char *e) {
  return strcspn(e, "=");
}

/* The allocator settings of environ, LD_PRELOAD without the recorder, as
 * capture_hello_t.env wants them. */
static void hello_env_init(char **env) {
  size_t used = 0;
  for (char **e = env; *e != NULL; e++) {
    size_t n = name_len(*e);
    if ((*e)[n] != '=' || !capture_wire_env_knob(*e, n))
      continue;
    char   val[CAPTURE_HELLO_ENV];
    size_t vn = strlen(*e + n + 1);
    if (vn >= sizeof val)
      continue;
    if (n == 10 && memcmp(*e, "LD_PRELOAD", 10) == 0)
      preload_strip(*e + n + 1, val);
    else
      memcpy(val, *e + n + 1, vn + 1);
    if (val[0] == '\0' && n == 10 && memcmp(*e, "LD_PRELOAD", 10) == 0)
      continue; /* only the recorder: nothing of the user's */
    size_t need = n + 1 + strlen(val) + 1;
    if (used + need + 1 > sizeof g_hello_env)
      continue; /* cut: the rest still fits perhaps */
    memcpy(g_hello_env + used, *e, n + 1);
    memcpy(g_hello_env + used + n + 1, val, strlen(val) + 1);
    used += need;
  }
  g_hello_env[used] = '\0';
}

void capture_execenv_init(char **env) {
  Dl_info info;
  if (dladdr((void *)&capture_execenv_init, &info) != 0 &&
      info.dli_fname != NULL && strlen(info.dli_fname) < sizeof g_lib)
    memcpy(g_lib, info.dli_fname, strlen(info.dli_fname) + 1);
  g_lib_base = base_name(g_lib, strlen(g_lib));
  size_t used = 0;
  for (char **e = env; *e != NULL && g_nkeep < KEEP_MAX; e++) {
    size_t n = strlen(*e);
    if (strncmp(*e, "ALLOCSIM_CAPTURE_", 17) != 0 ||
        used + n + 1 > sizeof g_keep_buf)
      continue;
    memcpy(g_keep_buf + used, *e, n + 1);
    g_keep[g_nkeep++] = g_keep_buf + used;
    if (strncmp(*e, "ALLOCSIM_CAPTURE_PYTHON=", 24) == 0 && (*e)[24] != '\0')
      g_pydir = g_keep_buf + used + 24;
    used += n + 1;
  }
  hello_env_init(env);
}

const char *capture_execenv_hello(void) {
  return g_hello_env;
}

/* Whether envp has an entry named like kv ("NAME=..."). */
static bool has_name(char *const *envp, const char *kv) {
  size_t n = name_len(kv) + 1;
  for (char *const *e = envp; *e != NULL; e++)
    if (strncmp(*e, kv, n) == 0)
      return true;
  return false;
}

bool capture_execenv_plan(char *const *envp, capture_execenv_t *p) {
  memset(p, 0, sizeof *p);
  if (g_lib[0] == '\0' || g_sock_path[0] == '\0')
    return false; /* not captured: the environment is the program's */
  const char *pre = NULL, *py = NULL;
  size_t      n = 0;
  if (envp != NULL)
    for (; envp[n] != NULL; n++) {
      if (strncmp(envp[n], "LD_PRELOAD=", 11) == 0)
        pre = envp[n] + 11;
      else if (strncmp(envp[n], "PYTHONPATH=", 11) == 0)
        py = envp[n] + 11;
    }
  p->entries = n;
  bool change = pre == NULL || !preload_ok(pre);
  p->pre_len = 11 + strlen(g_lib) + 1 + (pre ? strlen(pre) : 0) + 1;
  if (g_pydir != NULL && (py == NULL || !pythonpath_ok(py))) {
    change = true;
    p->py_len = 11 + strlen(g_pydir) + 1 + (py ? strlen(py) : 0) + 1;
  }
  for (size_t i = 0; i < g_nkeep && !change; i++)
    change = envp == NULL || !has_name(envp, g_keep[i]);
  return change;
}

char *const *capture_execenv_fill(char *const *envp, const capture_execenv_t *p,
                                  char **v, char *pre, char *py) {
  size_t k = 0;
  char  *old_pre = NULL, *old_py = NULL;
  for (size_t i = 0; i < p->entries; i++) {
    if (strncmp(envp[i], "LD_PRELOAD=", 11) == 0)
      old_pre = envp[i] + 11; /* the last one is what ld.so reads */
    else if (p->py_len != 0 && strncmp(envp[i], "PYTHONPATH=", 11) == 0)
      old_py = envp[i] + 11;
    else
      v[k++] = envp[i];
  }
  /* LD_PRELOAD=RECORDER USER'S... */
  size_t ln = strlen(g_lib);
  memcpy(pre, "LD_PRELOAD=", 11);
  memcpy(pre + 11, g_lib, ln);
  pre[11 + ln] = ' ';
  preload_strip(old_pre != NULL ? old_pre : "", pre + 12 + ln);
  if (pre[12 + ln] == '\0')
    pre[11 + ln] = '\0';
  v[k++] = pre;
  if (p->py_len != 0) {
    size_t dn = strlen(g_pydir);
    memcpy(py, "PYTHONPATH=", 11);
    memcpy(py + 11, g_pydir, dn);
    if (old_py != NULL && *old_py != '\0') {
      py[11 + dn] = ':';
      memcpy(py + 12 + dn, old_py, strlen(old_py) + 1);
    } else {
      py[11 + dn] = '\0';
    }
    v[k++] = py;
  }
  for (size_t i = 0; i < g_nkeep; i++)
    if (envp == NULL || !has_name(envp, g_keep[i]))
      v[k++] = (char *)g_keep[i];
  v[k] = NULL;
  return v;
}
