/* traces/capture/capture_int.h -- what the files of liballocsim_capture.so
 * share: per-thread state, the real functions, the recording calls.
 *
 *   capture.c  start-up, fork and exec, the malloc family, CPython domains,
 *              marks, main()
 *   stream.c   per-thread buffers, the wire encoding, the connection to
 *              `allocsim capture`, the flusher thread (RSS samples,
 *              watermarks, control messages)
 *   touch.c    the table of large allocations and their resident pages
 *   resolve.c  the real functions, dlsym/dlvsym, allocator extensions
 *   memmap.c   what of measured RSS no allocator holds
 *   fds.c      the recorder's descriptors survive the program closing all
 *   sites.c    call sites: stacks, the site table, module + offset
 *
 * Rules every file keeps, and why:
 *   - Never allocate through the allocator being traced: buffers, tables
 *     and the flusher's stack are mmap'd; no stdio, no getenv after start.
 *   - The hot path calls only async-signal-safe functions (clock_gettime,
 *     send, atomics), so a signal handler that allocates in the middle of a
 *     record gets its own one-record message instead of a torn buffer.
 */
#ifndef ALLOCSIM_CAPTURE_INT_H
#define ALLOCSIM_CAPTURE_INT_H

#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "capture_wire.h"

#define EXPORT      __attribute__((visibility("default")))
#define TLS         __thread __attribute__((tls_model("initial-exec")))
#define LIKELY(x)   __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

typedef struct tbuf_s tbuf_t;

/* Per-thread flags.  in_record guards a record being appended; in_domain
 * marks calls made inside a CPython domain wrapper (recorded once there);
 * internal marks the library's own calls into libc; in_table guards the
 * large-allocation table against a signal handler of the same thread. */
typedef struct tls_s tls_t;
struct tls_s {
  tbuf_t *buf; /* this thread's buffer, NULL until first record */
  int     tid; /* cached gettid(), 0 = unknown */
  int     in_record;
  int     in_domain;
  int     internal;
  int     resolving;    /* inside the first dlsym: serve from boot buffer */
  int     initializing; /* inside capture_ensure_init */
  int     exited;       /* past the thread-exit hook: write directly */
  int     in_table;
  int     in_site;  /* taking a stack or defining a site (sites.c) */
  int     py_probe; /* 1: probing CPython's obj domain (capture.c
                       py_wrapped_below), 2: the probe reached py_malloc */
  int seeded;       /* jemalloc: this thread's seed went before its first
                       call (stream.c append_thread_seed) */
};
extern TLS tls_t t_self;

/* ---- Real functions (resolve.c) ----------------------------------------- */

typedef struct real_fns_s real_fns_t;
struct real_fns_s {
  void *(*malloc)(size_t);
  void *(*calloc)(size_t, size_t);
  void *(*realloc)(void *, size_t);
  void (*free)(void *);
  void *(*memalign)(size_t, size_t);
  int (*posix_memalign)(void **, size_t, size_t);
  void *(*aligned_alloc)(size_t, size_t);
  void *(*valloc)(size_t);
  void *(*pvalloc)(size_t);
  int (*malloc_trim)(size_t);
  int (*mallopt)(int, int);
  int (*execve)(const char *, char *const[], char *const[]);
  int (*execvpe)(const char *, char *const[], char *const[]);
  int (*fexecve)(int, char *const[], char *const[]);
  int (*posix_spawn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                     const posix_spawnattr_t *, char *const[], char *const[]);
  int (*posix_spawnp)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                      const posix_spawnattr_t *, char *const[], char *const[]);
  void (*exit_now)(int);  /* _exit */
  void (*exit_now2)(int); /* _Exit */
  pid_t (*fork)(void);
  int (*close)(int);
  int (*libc_start_main)(int (*)(int, char **, char **), int, char **,
                         void (*)(void), void (*)(void), void (*)(void),
                         void *);
  /* Allocator extensions, NULL unless such an allocator is loaded. */
  int (*mallctl)(const char *, void *, size_t *, void *, size_t);
  void *(*mallocx)(size_t, int); /* jemalloc's own API (allocx.c) */
  void *(*rallocx)(void *, size_t, int);
  size_t (*xallocx)(void *, size_t, size_t, int);
  void (*sdallocx)(void *, size_t, int);
  void (*dallocx)(void *, int);
  void (*mi_collect)(_Bool);
  void (*release_free_memory)(void); /* MallocExtension_ReleaseFreeMemory */
  /* libc's own, found by ELF lookup (resolve.c). */
  void *(*dlsym)(void *, const char *);
  void *(*dlvsym)(void *, const char *, const char *);
};
extern real_fns_t g_real;

/* Resolves g_real (once; the first caller does it, others wait). */
void capture_resolve(void);
/* dlsym(handle, name), but NULL without asking dlsym when no loaded object
 * defines name: a failing dlsym allocates from the program's allocator
 * (resolve.c).  RTLD_NEXT is relative to the recorder, as from any of its
 * files. */
void *capture_dlsym_quiet(void *handle, const char *name);
/* The object whose malloc, free, calloc or realloc the program's calls bind
 * to ahead of the recorder's (an executable with its own allocator), or ""
 * when the recorder's are the ones bound. */
void capture_own_malloc(char *path, size_t len);
/* The bootstrap allocator for calls made while dlsym runs. */
bool   capture_is_boot(const void *p);
void  *capture_boot_alloc(size_t n);
size_t capture_boot_size(const void *p);

/* ---- State (capture.c) --------------------------------------------------- */

extern atomic_int g_init_state;      /* 0 none, 1 running, 2 done */
extern atomic_int g_recording;       /* 1 while records are sent */
extern int        g_pid;             /* this process (vfork children differ) */
extern uint64_t   g_sample_ns;       /* RSS sampling period, 0 = marks only */
extern uint64_t   g_touch_threshold; /* bytes; 0 = no touch records */
extern size_t     g_page;            /* OS page size */

void capture_ensure_init(void);

/* The recorder's own zeroed read-write memory (len bytes), or NULL: mapped
 * away from the program's mmap area, so that the program's mappings land
 * where they would without the recorder. */
void *capture_own_map(size_t len);
/* The same for memory read before it is written (hash tables, bitmaps),
 * with every page written at once.  A read of an anonymous page never
 * written maps the shared zero page, which mincore calls resident and RSS
 * does not count (Linux 6.1 fs/proc/task_mmu.c smaps_pte_entry counts only
 * vm_normal_page), so the recorder's own bytes, measured with mincore and
 * subtracted from every sample, would count pages RSS does not hold. */
void *capture_own_table(size_t len);

/* True when a call must only be forwarded: the library's own calls, and
 * libc calls made by pymalloc inside a domain wrapper (the wrapper records
 * them once, with their domain). */
static inline bool capture_passthrough(void) {
  return t_self.internal != 0 || t_self.in_domain != 0;
}

/* The malloc family's records (capture.c), for the wrappers elsewhere
 * (cxx.c): an allocation of size bytes at p (op a CAPTURE_OP_, align 0
 * unless memalign); a release of p, between capture_release_begin (its
 * last touches; returns its tracked size) and capture_release_end (that
 * size) around the real call. */
void capture_record_alloc(uint8_t op, uint8_t domain, void *p, uint64_t size,
                          uint64_t align);
uint64_t capture_release_begin(void *p);
void     capture_record_free(uint8_t domain, void *p);
void     capture_release_end(uint64_t size);
/* A realloc of old (not NULL) to n bytes recorded around call(ctx, old, n),
 * which returns the block (NULL: failed, old stays). */
void *capture_record_realloc(uint8_t domain, void *old, size_t n,
                             void *(*call)(void *ctx, void *old, size_t n),
                             void *ctx);
/* jemalloc's own API, recorded (allocx.c) and looked up (resolve.c). */
void  *mallocx(size_t size, int flags);
void  *rallocx(void *ptr, size_t size, int flags);
size_t xallocx(void *ptr, size_t size, size_t extra, int flags);
void   sdallocx(void *ptr, size_t size, int flags);
void   dallocx(void *ptr, int flags);

/* False only inside the library's first dlsym, where the bootstrap
 * allocator serves; otherwise initializes the library if need be. */
bool     capture_ready(void);
int      capture_tid(void);
uint64_t capture_now_ns(void);
/* CLOCK_MONOTONIC (ns) where capture_now_ns counts from. */
uint64_t capture_clock_origin_ns(void);
/* CLOCK_MONOTONIC_COARSE read just before that origin, and its
 * resolution (jemalloc's clock: traces/je_seeds.h). */
uint64_t capture_clock_coarse_origin_ns(void);
uint64_t capture_coarse_now_ns(void);
uint64_t capture_coarse_res_ns(void);
/* The flusher measures the TSC's scale from time to time (capture.c). */
void capture_clock_calibrate(void);
/* Rss and Anonymous of /proc/self/smaps_rollup in bytes (0 if
 * unreadable). */
void capture_read_rss(uint64_t *rss, uint64_t *anon);

/* memmap.c: opens /proc/self/pagemap (again after a fork); the anonymous
 * resident bytes of the program's writable segments and main stack, and of
 * this library's writable segments. */
void capture_memmap_open(void);
int  capture_memmap_fd(void); /* -1 if none */
/* Pages held are told without PAGEMAP_SCAN from here on, as on kernels
 * before 6.7 (ALLOCSIM_CAPTURE_PAGEMAP_SCAN=0, for tests). */
void capture_memmap_no_scan(void);
/* A fork happened: pages may be shared copy-on-write from now on. */
void capture_memmap_atfork(void);
void capture_memmap_static(uint64_t *other_anon, uint64_t *own_static);
/* Which of the npages pages from first (page-aligned) the process holds,
 * one byte each (1 = held), as mincore's vector: present and not the
 * shared zero page (a page only read is not the program's), or swapped out
 * (it was written); from PAGEMAP_SCAN, else from pagemap's entries (the
 * exclusive bit; after a fork any present page), else mincore's answer.
 * A range no longer mapped reads as not held (PAGEMAP_SCAN, pagemap) or
 * gives false (mincore). */
bool capture_held_pages(uintptr_t first, size_t npages, unsigned char *vec);

/* progmap.c: the private anonymous mappings the program made itself
 * (mmap, mremap, munmap wrapped).  init after g_real is resolved; resident
 * counts each range with count(lo, hi); clear forgets every range (the
 * CPython hook: pymalloc's arenas so far); dropped: ranges the table had
 * no room for. */
void     capture_progmap_init(void);
uint64_t capture_progmap_resident(uint64_t (*count)(uintptr_t, uintptr_t));
uint64_t capture_progmap_dropped(void);
void     capture_progmap_clear(void);
void     capture_progmap_atfork_prepare(void);
void     capture_progmap_atfork_release(void);
/* Around the recorder's dl_iterate_phdr calls, so that a fork never
 * happens inside one (dlwalk.c); the three fork handlers. */
void capture_dl_walk_enter(void);
void capture_dl_walk_exit(void);
void capture_dl_walk_atfork_prepare(void);
void capture_dl_walk_atfork_parent(void);
void capture_dl_walk_atfork_child(void);
/* Resident bytes of [base, base + len) (mincore). */
uint64_t capture_resident(const void *base, size_t len);

/* ---- Recording (stream.c) ------------------------------------------------ */

/* Appends r to the calling thread's buffer (or sends it on its own). */
void capture_emit(const cap_rec_t *r);
/* Emits a MARK or RSS record whose RSS is read after its seq is taken, so
 * a release that starts during the read is ordered after it; waits while a
 * call that moves RSS (trim, free of a large block) is in flight, up to a
 * bound (capture_gate_*). */
void capture_emit_sample(uint8_t op, const char *label, size_t len);

/* RSS-moving calls: the sampler does not read RSS while one runs. */
void capture_gate_enter(void);
void capture_gate_leave(void);

/* Connects to `allocsim capture` and says hello; false if not possible. */
bool capture_stream_open(void);
int  capture_stream_fd(void); /* -1 if none */

/* fds.c: close, close_range and closefrom spare the recorder's descriptors;
 * the recorder closes its own with capture_close_own. */
bool capture_fd_is_own(int fd);
void capture_close_own(int fd);
/* Sends every buffer and a watermark; then BYE, EXEC or nothing. */
void capture_stream_flush_all(uint8_t then_msg);
/* The calling thread is exiting: its last record and buffer go out. */
void capture_stream_thread_exit(void *buf);
/* Starts the flusher thread; record_dtv: record the calloc of its DTV
 * (stream.c says why; false inside a recorded call, whose own record would
 * then follow it). */
void capture_stream_start_flusher(bool record_dtv);
/* Whether the process's main thread has exited and every other thread but
 * the caller too (lastthread.c). */
bool capture_only_flusher_left(void);
/* A forked child connects and starts its flusher after its fork handlers
 * (stream.c says why); true if it did so now. */
extern atomic_int g_child_pending;
/* Set when the program's main() starts (capture.c's __libc_start_main). */
extern atomic_int g_main_entered;
bool              capture_stream_child_start(bool record_dtv);
void              capture_stream_atfork_prepare(void);
void              capture_stream_atfork_child(void);
/* Resident bytes of the library's own mappings (not its static data). */
uint64_t capture_own_rss(void);

/* ---- Exec environments (execenv.c) -------------------------------------- */

extern char g_sock_path[108]; /* empty: not captured */

/* Reads the recorder's path, the ALLOCSIM_CAPTURE_* settings and the
 * allocator settings from env, once at start-up. */
void capture_execenv_init(char **env);
/* capture_hello_t.env of this image. */
const char *capture_execenv_hello(void);

/* The sizes of the corrected copy of an exec's environment. */
typedef struct capture_execenv_s capture_execenv_t;
struct capture_execenv_s {
  size_t entries; /* in the caller's environment */
  size_t pre_len; /* bytes for the new LD_PRELOAD entry */
  size_t py_len;  /* bytes for the new PYTHONPATH entry, 0 = keep it */
};
/* Entries a copy adds at most: LD_PRELOAD, PYTHONPATH, the settings, NULL. */
#define CAPTURE_EXECENV_EXTRA 11
/* Whether envp (may be NULL) needs a corrected copy to keep the child
 * captured; *p then says how big. */
bool capture_execenv_plan(char *const *envp, capture_execenv_t *p);
/* Builds the copy in the caller's v (p->entries + CAPTURE_EXECENV_EXTRA
 * pointers), pre (p->pre_len bytes) and py (p->py_len); returns v. */
char *const *capture_execenv_fill(char *const *envp, const capture_execenv_t *p,
                                  char **v, char *pre, char *py);

/* ---- Call sites (sites.c) ----------------------------------------------- */

extern uint32_t g_stacks; /* return addresses kept per allocation, 0 = off */
/* Sets the table up and warms libunwind (outside any hook); stacks 0 does
 * nothing. */
void capture_sites_init(uint32_t stacks);
/* The calling allocation's call site (defining it on first sight), or 0
 * when stacks are off or no site could be taken. */
uint32_t capture_site_here(void);
void     capture_sites_atfork_child(void);
uint64_t capture_sites_own_rss(void);

/* ---- Large allocations (touch.c) ----------------------------------------- */

/* A new allocation [addr, addr + size); the first written_prefix bytes
 * count as written already (realloc copied them). */
void capture_touch_track(uint64_t addr, uint64_t size, uint64_t written_prefix);
/* addr is being released: its newly resident pages are reported and it is
 * forgotten.  Returns its size, or 0 if it was not tracked. */
uint64_t capture_touch_release(uint64_t addr);
/* Reports newly resident pages of every tracked allocation (at marks and
 * RSS samples). */
void capture_touch_probe_all(void);
/* Whether an allocation of size bytes is tracked. */
static inline bool capture_touch_wants(uint64_t size) {
  return g_touch_threshold != 0 && size >= g_touch_threshold;
}
void     capture_touch_atfork_prepare(void);
void     capture_touch_atfork_parent(void);
void     capture_touch_atfork_child(void);
uint64_t capture_touch_own_rss(void);

#endif
