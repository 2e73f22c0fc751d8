/* traces/import_heaptrack.h -- heaptrack data files into allocsim traces.
 *
 * heaptrack (Debian 12 ships 1.4.0) writes two kinds of file, both line
 * oriented, numbers in hex, compressed with zstd or gzip (read through
 * traces/compressed.h):
 *   raw          `heaptrack --raw` (heaptrack.NAME.PID.raw.zst): what
 *                libheaptrack writes (src/track/libheaptrack.cpp), with
 *                addresses: "+ SIZE TRACE PTR", "- PTR";
 *   interpreted  the default (heaptrack.NAME.PID.zst): the raw stream after
 *                heaptrack_interpret (src/interpret/heaptrack_interpret.cpp
 *                :468-503), which replaces addresses by allocation-info
 *                indices: "a SIZE TRACE" defines the next index, "+ INDEX"
 *                allocates one block of that size and stack, "- INDEX" frees
 *                one of them.
 * Both carry "v HEAPTRACK_VERSION FILE_VERSION" first, the command line
 * ("X"), page size ("I PAGESIZE PAGES"), a timestamp every 10 ms ("c MS",
 * milliseconds since heaptrack started) and after each the process's RSS in
 * pages ("R PAGES", from /proc/self/statm) (libheaptrack.cpp:373-431,
 * timer thread 696-710).  File formats 2 (heaptrack 1.1-1.2) and 3
 * (1.3-1.5: strings with their length, src/util/linereader.h:111-125) are
 * read; others are refused with what was expected.
 *
 * Mapping.  Allocations and frees become malloc and free events in the raw
 * domain on thread 0 (heaptrack 1.4 records no thread ids); realloc is
 * logged as a free and an allocation (heaptrack_realloc_impl,
 * libheaptrack.cpp:779-795) and imports that way.  Each event takes the
 * time of the last "c" line; each "R" becomes an rss event, so the import
 * records like a capture and `compare` measures the prediction against
 * heaptrack's own samples.  An interpreted file does not say which of
 * several live blocks with the same size and stack a "-" frees: the most
 * recent one is taken (a block freed soon after it was allocated is the
 * common case) and such frees are counted as ambiguous; the raw file has no
 * such doubt.  Call stacks are read past, not imported: traces have no call
 * sites yet.
 *
 * What heaptrack does not record, and the signs the importer counts:
 * memory mapped without malloc (mmap: pymalloc's arenas, a program's own
 * mappings) and malloc_trim.  RSS falling by 64 KiB or more between two
 * samples with no free between them is one sign; a CPython process (its
 * command is python*) is another, since unless it ran with
 * PYTHONMALLOC=malloc its small objects lived in pymalloc arenas.
 */
#ifndef ALLOCSIM_IMPORT_HEAPTRACK_H
#define ALLOCSIM_IMPORT_HEAPTRACK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "import_util.h"
#include "trace_io.h"

/* An RSS fall this large between two samples with no free is reported. */
#define IMPORT_HEAPTRACK_DROP_BYTES (UINT64_C(64) << 10)

typedef struct import_heaptrack_opts_s import_heaptrack_opts_t;
struct import_heaptrack_opts_s {
  import_inserts_t *inserts; /* events to insert after input lines (of the
                                decompressed file); may be NULL */
};

typedef struct import_heaptrack_stats_s import_heaptrack_stats_t;
struct import_heaptrack_stats_s {
  uint64_t lines;  /* lines read (decompressed) */
  uint64_t events; /* trace events written */
  uint64_t mallocs;
  uint64_t frees;
  uint64_t unmatched_frees; /* raw: frees of addresses never seen (blocks
                               allocated before heaptrack started) */
  uint64_t missed_frees;    /* raw: an address allocated again while live */
  uint64_t ambiguous_frees; /* interpreted: several live blocks matched */
  uint64_t rss_samples;
  uint64_t inserted; /* events from opts.inserts */
  uint64_t live_at_end;
  uint64_t max_live_ids;
  uint64_t page_size;      /* from the "I" line */
  uint64_t peak_rss_bytes; /* largest sample */
  uint64_t end_t_ns;       /* last timestamp */
  uint64_t rss_drops;      /* falls >= IMPORT_HEAPTRACK_DROP_BYTES with
                              no free since the previous sample */
  uint64_t largest_drop_bytes;
  uint64_t largest_drop_t_ns;
  uint64_t largest_drop_from_line; /* the sample before it (input line) */
  uint64_t largest_drop_line;      /* the sample that fell */
  uint32_t heaptrack_version;      /* 0x010400 for 1.4.0 */
  unsigned file_version;
  bool     raw;         /* raw (addresses) rather than interpreted */
  bool     attached;    /* heaptrack attached to a running process */
  bool     complete;    /* interpreted: heaptrack_interpret's closing
                           "# strings" line is present */
  bool python;          /* the command is a CPython interpreter */
  bool pymalloc_frames; /* stacks name pymalloc's functions */
  char command[256];    /* the "X" line */
};

/* Reads a decompressed heaptrack file from in (named name in messages),
 * writing events to w, and provenance to meta (may be NULL) before the
 * first event.  Errors: AS_EFORMAT "NAME:LINE: expected ..., got '...'"
 * (not heaptrack, an unsupported file format, a malformed or cut line, an
 * index that was never defined), AS_EIO, AS_ENOMEM, the writer's. */
as_status_t import_heaptrack_stream(FILE *in, const char *name,
                                    trace_writer_t *w, trace_meta_t *meta,
                                    const import_heaptrack_opts_t *opts,
                                    import_heaptrack_stats_t      *st,
                                    as_err_t                      *err);

/* The file form: in_path ("-" = stdin) compressed or not, out_path ("-" =
 * stdout); a failed import leaves no output. */
as_status_t import_heaptrack_file(const char *in_path, const char *out_path,
                                  trace_format_t                 fmt,
                                  const import_heaptrack_opts_t *opts,
                                  import_heaptrack_stats_t *st, as_err_t *err);

#endif
