/* analysis/symbolize.h -- a call-site frame (module path + offset from its
 * load base, docs/trace-format.md "Call sites") as "function (file:line)",
 * read from the module's file on this machine with libdw (elfutils).
 *
 * Why libdw and not libbacktrace: libbacktrace symbolises the process it is
 * linked into (its API takes the program's own PCs and finds the
 * executable itself), while a trace's frames belong to a process that is
 * gone, in modules named by path; elfutils' libdwfl reports any ELF file at
 * a chosen bias (dwfl_report_elf), reads its symbol tables and DWARF line
 * tables, and finds separate debug info (/usr/lib/debug, build ids) with
 * its standard callbacks, as eu-addr2line does.
 */
#ifndef ALLOCSIM_SYMBOLIZE_H
#define ALLOCSIM_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

typedef struct symbolizer_s symbolizer_t;

/* NULL when out of memory. */
symbolizer_t *symbolizer_new(void);
void          symbolizer_free(symbolizer_t *z);

/* Writes frame (module path, return-address offset) into buf:
 * "function (file:line)", "function (path+0xOFF)" without line tables,
 * or "path+0xOFF" when the file is unreadable or has no symbol there.
 * The call instruction is looked up (offset - 1), not the return address. */
void symbolize_frame(symbolizer_t *z, const char *path, uint64_t offset,
                     char *buf, size_t len);

/* The function name alone ("" when unknown), same lookup; C++ names
 * demangled when libstdc++ is installed. */
void symbolize_function(symbolizer_t *z, const char *path, uint64_t offset,
                        char *buf, size_t len);

#endif
