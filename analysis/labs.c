/* analysis/labs.c -- the lab table: the exercises of the allocator course
 * notes (section 20), in course order, as data for analysis/lab.c.
 *
 * Every variant is a workload (traces/wl_labs.c, traces/wl_survivors.c) or
 * a trace, replayed against a model spec, and the real program that makes
 * the same requests on a Linux machine (scripts/measure/labs/, built into
 * the labs directory by CMake).  The texts state mechanisms and the source
 * constants behind them; figures come from the run, never from the text.
 * Each lab's page under docs/course/ has the measured results and the
 * model lines that implement the mechanism.
 */
#include "lab.h"

#include <stddef.h>

static const char *const glibc_only[] = {"glibc", NULL};

/* ---- sizes: usable size against request ---------------------------------- */

#define SIZES_C   "lab-sizes --min 1 --max 4096 --domain raw"
#define SIZES_OBJ "lab-sizes --min 1 --max 4096 --domain obj"

static const lab_def_t lab_sizes = {
    .name = "sizes",
    .title = "size classes: what a request really gets",
    .notes = "section 20 lab 1; sections 3.2 and 8",
    .kind = LAB_SIZES,
    .shows =
        "Every allocator rounds a request up to a class: glibc to a chunk "
        "of request + 8 bytes rounded to 16 (at least 32), of which all but "
        "the 8-byte header is usable; pymalloc to a multiple of 16 up to "
        "512 bytes, above which libc serves it; the size-class allocators "
        "(jemalloc, tcmalloc, mimalloc, and macOS libmalloc, whose ladder the "
        "notes measured: a size-class table only, no heap) to a ladder whose "
        "step doubles as the sizes do.  Holding one object of every size "
        "from 1 to 4096 bytes shows what the rounding costs in RSS.",
    .question =
        "What does malloc(1) give on glibc, and why that number?  Where "
        "does each allocator's step (quantum) double?  What does "
        "malloc(1025) get on each?  Which allocator wastes the least on "
        "requests of 1 to 1024 bytes, and which holds one object of every "
        "size from 1 to 4096 bytes in the least RSS?",
    .models = (const char *const[]){"glibc", "cpython", "jemalloc", "mimalloc",
                                    "tcmalloc", "libmalloc", NULL},
    .notice =
        "glibc's ladder is one arithmetic run, 24 + 16k, from malloc(1) "
        "(a 32-byte chunk, 24 usable: the next chunk's prev_size word is "
        "the last 8) up to the mmap threshold, then whole pages: it never "
        "doubles, and its cost is the 8-byte header on every object.  "
        "pymalloc has 32 classes 16 bytes apart and no header, and hands "
        "everything above 512 bytes to glibc.  The size-class allocators "
        "double their step every few classes, so a request just past a "
        "power of two (1025) pays the most.  The mean waste is small for "
        "all of them; which allocator holds the objects in less RSS "
        "depends as much on pages and metadata as on the classes.",
    .doc = "docs/course/sizes.md",
    .variants =
        {
            {.label = "glibc",
             .workload = SIZES_C,
             .model = "glibc",
             .marks = "held",
             .program = "lab_sizes",
             .args = "{out}",
             .recorded = "measured/lab-sizes-glibc.trace"},
            {.label = "pymalloc (CPython)",
             .workload = SIZES_OBJ,
             .model = "cpython:version=3.11",
             .marks = "held"},
            {.label = "jemalloc",
             .workload = SIZES_C,
             .model = "jemalloc",
             .marks = "held",
             .program = "lab_sizes",
             .args = "{out}",
             .preload = "jemalloc",
             .recorded = "measured/lab-sizes-jemalloc.trace"},
            {.label = "mimalloc",
             .workload = SIZES_C,
             .model = "mimalloc",
             .marks = "held",
             .program = "lab_sizes",
             .args = "{out}",
             .preload = "mimalloc",
             .recorded = "measured/lab-sizes-mimalloc.trace"},
            {.label = "tcmalloc",
             .workload = SIZES_C,
             .model = "tcmalloc",
             .marks = "held",
             .program = "lab_sizes",
             .args = "{out}",
             .preload = "tcmalloc",
             .library = "libtcmalloc_minimal",
             .recorded = "measured/lab-sizes-tcmalloc.trace"},
            {.label = "macOS libmalloc (table only)",
             .workload = SIZES_C,
             .model = "libmalloc",
             .marks = "held"},
            {0},
        },
};

/* ---- cliff: the 512-byte cliff ------------------------------------------- */

#define CLIFF_MARKS                                                            \
  "456B 464B 472B 480B 488B 496B 504B 512B 520B 528B 536B 544B"

static const lab_def_t lab_cliff = {
    .name = "cliff",
    .title = "the 512-byte cliff: where pymalloc hands over to libc",
    .notes = "section 20 lab 2; sections 13.3 and 14",
    .kind = LAB_REPLAY,
    .shows =
        "CPython's object allocator serves requests of at most 512 bytes "
        "(SMALL_REQUEST_THRESHOLD) from pymalloc's pools and passes larger "
        "ones to the C library's malloc; PYTHONMALLOC=malloc sends all of "
        "them to malloc.  Tuples of 456 to 544 bytes, 1000 of each size "
        "held at a time, cross the boundary under both settings.",
    .question =
        "Under PYTHONMALLOC=pymalloc and PYTHONMALLOC=malloc, which "
        "allocator holds the 1000 tuples of each size?  At which size does "
        "the answer change, and under which setting only?  Does the time "
        "to make and drop one tuple step there too, and does RSS?",
    .models = (const char *const[]){"cpython", NULL},
    .counters =
        (const char *const[]){"pymalloc.blocks_in_use", "pymalloc.pools_used",
                              "glibc.system_bytes", NULL},
    .measured_columns = (const char *const[]){"blocks", "ns", NULL},
    .notice =
        "Under pymalloc the tuples are pymalloc blocks up to 512 bytes and "
        "libc chunks from 520 on: the route changes in that one column, "
        "and the program's own count (sys._debugmallocstats: 'meas "
        "blocks') agrees to the block.  Under malloc nothing changes at "
        "512.  The notes measured the cost side: making and dropping a "
        "tuple steps by about 19 ns (24%) at 520 bytes under pymalloc only "
        "('meas ns', the least over many passes; on a busy machine the "
        "step can drown in noise), since above 512 both settings run the "
        "same malloc.  In RSS the simulation steps at 520 under pymalloc "
        "(pymalloc keeps its last empty arena, 3.11 Objects/obmalloc.c:"
        "2096, while glibc's heap grows for the new tuples); the real "
        "interpreter's heap already has free resident chunks that absorb "
        "the 0.5 MiB, so the measurement does not: a miss of the "
        "simulation's empty start state, not of the route.  The step "
        "matters for diagnosis: objects above 512 bytes are libc's "
        "problem (arenas, thresholds, trim), below it pymalloc's.",
    .doc = "docs/course/cliff.md",
    .variants =
        {
            {.label = "PYTHONMALLOC=pymalloc",
             .workload = "lab-cliff --min 456 --max 544 --count 1000",
             .model = "cpython:version=3.11",
             .marks = CLIFF_MARKS,
             .program = "lab_cliff.py",
             .args = "--out {out}",
             .env = "PYTHONMALLOC=pymalloc",
             .recorded = "measured/lab-cliff-pymalloc-r*.trace"},
            {.label = "PYTHONMALLOC=malloc",
             .workload = "lab-cliff --min 456 --max 544 --count 1000",
             .model = "cpython:version=3.11,pythonmalloc=malloc",
             .marks = CLIFF_MARKS,
             .program = "lab_cliff.py",
             .args = "--out {out}",
             .env = "PYTHONMALLOC=malloc",
             .recorded = "measured/lab-cliff-malloc-r*.trace"},
            {0},
        },
};

/* ---- brk: the heap that refuses to shrink ------------------------------- */

static const lab_def_t lab_brk = {
    .name = "brk",
    .title = "the brk heap refuses to shrink",
    .notes = "section 20 lab 3; sections 2.1 and 6.1",
    .kind = LAB_REPLAY,
    .shows =
        "glibc's main heap is one region that grows and shrinks at its top "
        "with brk.  free() gives memory back only from the top, and only "
        "once the free top chunk exceeds trim_threshold (128 KiB); "
        "malloc_trim(0) also drops the resident pages of free chunks inside "
        "the heap (MADV_DONTNEED), without moving brk.",
    .question =
        "A C program mallocs 1000 chunks of 1 KiB, frees all but the last "
        "and calls malloc_trim(0); then it frees the last and trims again.  "
        "After the first trim, is RSS back near zero?  Has the heap (brk) "
        "shrunk?  What does freeing the last chunk change?",
    .models = glibc_only,
    .counters =
        (const char *const[]){"kernel.brk_bytes", "glibc.top_bytes",
                              "glibc.binned_bytes", "glibc.tcache_bytes", NULL},
    .notice =
        "freed_but_last keeps every page: the live last chunk sits just "
        "below the top chunk, so no free ever reaches the top and brk "
        "stays.  trimmed_but_last drops RSS to a few pages, yet brk only "
        "loses the free top above the last chunk: malloc_trim(0) released "
        "the free pages inside the heap (mtrim, MADV_DONTNEED) but cannot "
        "lower the break past a live chunk.  "
        "freed_last merges everything above the 7 tcache'd chunks into top, "
        "and that free trims the heap down to top_pad (128 KiB) above them; "
        "trimmed_all trims the pad too.  RSS and brk are two different "
        "questions: the first is what the kernel counts, the second what "
        "the allocator could ever give back by shrinking.",
    .doc = "docs/course/brk.md",
    .variants =
        {
            {.label = "",
             .workload = "lab-brk --count 1000 --size 1024",
             .model = "glibc",
             .marks = "allocated freed_but_last trimmed_but_last "
                      "freed_last trimmed_all",
             .map_at = "freed_but_last trimmed_but_last",
             .program = "lab_brk",
             .args = "{out}",
             .recorded = "measured/lab-brk.trace"},
            {0},
        },
};

/* ---- mmap-threshold: the threshold that learns -------------------------- */

static const lab_def_t lab_mmap_threshold = {
    .name = "mmap-threshold",
    .title = "the dynamic mmap threshold learns a buffer size",
    .notes = "section 20 lab 4; section 2.3",
    .kind = LAB_REPLAY,
    .shows = "A request at or above mmap_threshold (128 KiB at start) gets its "
             "own mapping, which free() unmaps at once.  Freeing such a chunk "
             "(up to 32 MiB) raises mmap_threshold to its size and "
             "trim_threshold to twice that, so the next buffer of that size "
             "comes from the heap and stays resident after free.  Setting "
             "MALLOC_MMAP_THRESHOLD_ freezes both thresholds.",
    .question =
        "A program allocates and frees a 4 MiB buffer, then does it 100 "
        "times more.  Where does the first buffer come from, and where the "
        "second?  What is RSS after the second free, and after the 100?  "
        "What changes with MALLOC_MMAP_THRESHOLD_=131072?",
    .models = glibc_only,
    .counters =
        (const char *const[]){"glibc.mmap_threshold", "glibc.trim_threshold",
                              "glibc.mmapped_bytes", "glibc.top_bytes",
                              "kernel.page_faults", NULL},
    .notice =
        "The first buffer is mmapped (mmapped_bytes) and its free returns "
        "RSS to the start; that free also moved mmap_threshold to 4 MiB "
        "and trim_threshold to 8 MiB.  The second buffer is therefore "
        "carved from the brk heap, and after its free the 4 MiB top chunk "
        "is below the new trim threshold: RSS stays 4 MiB higher for the "
        "rest of the program, while each of the other 99 reuses the same "
        "pages.  With the threshold set, every buffer is a mapping again "
        "and RSS returns after each free -- at the price of a munmap and "
        "1024 page faults per buffer.",
    .doc = "docs/course/mmap-threshold.md",
    .variants =
        {
            {.label = "dynamic threshold",
             .workload = "lab-mmap-threshold --size 4194304 --repeat 100",
             .model = "glibc",
             .marks = "first_alloc first_free second_alloc second_free "
                      "repeat_done",
             .map_at = "first_alloc second_alloc second_free",
             .program = "lab_mmap_threshold",
             .args = "{out}",
             .recorded = "measured/lab-mmap-threshold.trace"},
            {.label = "MALLOC_MMAP_THRESHOLD_=131072",
             .workload = "lab-mmap-threshold --size 4194304 --repeat 100",
             .model = "glibc:mmap_threshold=131072",
             .marks = "first_alloc first_free second_alloc second_free "
                      "repeat_done",
             .program = "lab_mmap_threshold",
             .args = "{out}",
             .env = "MALLOC_MMAP_THRESHOLD_=131072",
             .recorded = "measured/lab-mmap-threshold-mmap131072.trace"},
            {0},
        },
};

/* ---- arenas: 64 threads -------------------------------------------------- */

#define ARENAS_LOOP "lab-arenas --threads 64 --iterations 1000 --size 1024"
#define ARENAS_HOLD                                                            \
  "lab-arenas --threads 64 --iterations 0 --size 1024 --hold 1000"

static const lab_def_t lab_arenas = {
    .name = "arenas",
    .title = "arenas multiply with threads",
    .notes = "section 20 lab 5; section 5",
    .kind = LAB_REPLAY,
    .shows = "glibc gives each thread that mallocs its own arena (a 64 MiB "
             "reserved heap, committed as it grows) until the arena count "
             "passes arena_test (8); then the cap is 8 x ncpus in glibc "
             "2.36-2.43, or MALLOC_ARENA_MAX, and further threads share arenas "
             "round-robin.  Each arena keeps its own free memory, so what "
             "threads leave behind is multiplied by the number of arenas.",
    .question =
        "64 threads, all alive, on this 2-CPU machine.  First each does the "
        "notes' loop, malloc(1024)/free 1000 times; then, in a second "
        "program, each in turn mallocs 1000 blocks of 1 KiB and frees all "
        "but the last.  How many arenas do MALLOC_ARENA_MAX unset, 8 and 1 "
        "give?  Predict RSS in both programs, while the threads run and "
        "after they exit.",
    .table =
        "glibc arena cap (arena_get2, once narenas > arena_test = 8):\n"
        "  2.36 (Debian 12)  8 x ncpus   malloc/arena.c:938-947\n"
        "  2.39, 2.41        8 x ncpus   malloc/arena.c:832-841\n"
        "  2.42              8 x ncpus   malloc/arena.c:816-825\n"
        "  master 04e750e75b 8 x ncpus   malloc/arena.c:822-831 (2026-01-20)\n"
        "  2.44 per the course notes: max(ncpus, 8) -- in no glibc source\n"
        "       available here; on 2 CPUs it would be the arena_max=8 rows",
    .models = glibc_only,
    .counters = (const char *const[]){"glibc.arenas", "glibc.heaps",
                                      "glibc.binned_bytes", NULL},
    .notice =
        "The arena count follows the cap exactly: 16 (8 x 2 CPUs), 8, 1.  "
        "In the loop RSS barely follows it: a thread holds one 1 KiB block "
        "at a time, so an arena costs its heap header, its malloc_state "
        "and the first thread's tcache, a couple of pages, and most of the "
        "RSS is the 64 thread stacks.  With a working set the trap "
        "appears: each arena keeps about one burst (1 MiB) of free chunks "
        "below the last block its threads kept (binned), so RSS is close "
        "to arenas x 1 MiB -- 16, 8 or 1 MiB for the same 64 live KiB -- "
        "and it stays after the threads exit, since their arenas go to "
        "glibc's free list with their pages.  The folklore's "
        "MALLOC_ARENA_MAX=2 saves what the threads leave behind, times the "
        "arenas it removes; it costs lock contention, which a simulation "
        "does not see.",
    .doc = "docs/course/arenas.md",
    .variants =
        {
            {.label = "loop, MALLOC_ARENA_MAX unset",
             .workload = ARENAS_LOOP,
             .model = "glibc",
             .marks = "running joined",
             .program = "lab_arenas",
             .args = "{out}",
             .recorded = "measured/lab-arenas-r*.trace"},
            {.label = "loop, MALLOC_ARENA_MAX=8",
             .workload = ARENAS_LOOP,
             .model = "glibc:arena_max=8",
             .marks = "running joined",
             .program = "lab_arenas",
             .args = "{out}",
             .env = "MALLOC_ARENA_MAX=8",
             .recorded = "measured/lab-arenas-arenamax8-r*.trace"},
            {.label = "loop, MALLOC_ARENA_MAX=1",
             .workload = ARENAS_LOOP,
             .model = "glibc:arena_max=1",
             .marks = "running joined",
             .program = "lab_arenas",
             .args = "{out}",
             .env = "MALLOC_ARENA_MAX=1",
             .recorded = "measured/lab-arenas-arenamax1-r*.trace"},
            {.label = "working set, MALLOC_ARENA_MAX unset",
             .workload = ARENAS_HOLD,
             .model = "glibc",
             .marks = "running joined",
             .map_at = "joined",
             .program = "lab_arenas",
             .args = "{out} 64 0 1024 1000",
             .recorded = "measured/lab-arenas-hold1000-r*.trace"},
            {.label = "working set, MALLOC_ARENA_MAX=8",
             .workload = ARENAS_HOLD,
             .model = "glibc:arena_max=8",
             .marks = "running joined",
             .program = "lab_arenas",
             .args = "{out} 64 0 1024 1000",
             .env = "MALLOC_ARENA_MAX=8",
             .recorded = "measured/lab-arenas-hold1000-arenamax8-r*.trace"},
            {.label = "working set, MALLOC_ARENA_MAX=1",
             .workload = ARENAS_HOLD,
             .model = "glibc:arena_max=1",
             .marks = "running joined",
             .map_at = "joined",
             .program = "lab_arenas",
             .args = "{out} 64 0 1024 1000",
             .env = "MALLOC_ARENA_MAX=1",
             .recorded = "measured/lab-arenas-hold1000-arenamax1-r*.trace"},
            {0},
        },
};

/* ---- pin: one object pins an arena --------------------------------------- */

/* 1,000,000 bytes objects of sys.getsizeof 64 (64,000,000 bytes: 61.035...
 * MiB exactly), built by scripts/measure/survivors.py; 100 survive. */
#define PIN_OBJECTS "--size 64 --total 61.03515625"
#define PIN_STRIDE  PIN_OBJECTS " --pattern stride --every 10000"
#define PIN_OLDEST  PIN_OBJECTS " --pattern oldest --fraction 1e-4"

static const lab_def_t lab_pin = {
    .name = "pin",
    .title = "one object pins an arena",
    .notes = "section 20 lab 8; section 13.4",
    .kind = LAB_REPLAY,
    .shows =
        "pymalloc carves 1 MiB arenas into 16 KiB pools of one size class "
        "and gives an arena back to the kernel (munmap) only when every "
        "pool in it is empty.  One live 64-byte object keeps its whole "
        "arena mapped and, with it, every page the arena's other objects "
        "ever wrote.  Which objects survive decides the RSS, not how many.",
    .question =
        "CPython builds 1,000,000 objects of 64 bytes (61 MiB), then drops "
        "all but 100.  Keep every 10,000th, or keep the first 100: how many "
        "arenas remain in each case, and how much of the 61 MiB stays "
        "resident?  Would malloc_trim(0) help?",
    .models = (const char *const[]){"cpython", NULL},
    .counters =
        (const char *const[]){"pymalloc.arenas", "pymalloc.arenas_pinned",
                              "pymalloc.pools_used", "pymalloc.blocks_in_use",
                              NULL},
    .measured_keys = (const char *const[]){"pymalloc_start", "pymalloc_peak",
                                           "pymalloc_after", NULL},
    .notice =
        "Kept every 10,000th, the 100 survivors sit in 100 different pools "
        "spread over every arena the objects filled, so no arena empties: "
        "all of them stay mapped and RSS after the drop is almost the peak, "
        "for 6.4 KB of live objects.  Kept first, the same 100 objects fill "
        "one pool of the first arena and every other arena is freed but the "
        "last empty one, which pymalloc keeps for the next allocation "
        "(3.11 Objects/obmalloc.c:2096, bpo-37257).  The "
        "measured counts (sys._debugmallocstats, as the program records "
        "them) include the arenas the interpreter had at start.  "
        "malloc_trim(0) cannot help: to glibc each arena is one live 1 MiB "
        "mapping.  What helps is placement: allocate what lives long "
        "together and early.",
    .doc = "docs/course/pin.md",
    .variants =
        {
            {.label = "keep every 10,000th",
             .workload = "survivors " PIN_STRIDE,
             .model = "cpython:version=3.11",
             .marks = "peak after",
             .map_at = "after",
             .program = "survivors.py",
             .args = PIN_STRIDE " --out {out}",
             .recorded = "measured/lab-pin-stride-r*.trace"},
            {.label = "keep the first 100",
             .workload = "survivors " PIN_OLDEST,
             .model = "cpython:version=3.11",
             .marks = "peak after",
             .map_at = "after",
             .program = "survivors.py",
             .args = PIN_OLDEST " --out {out}",
             .recorded = "measured/lab-pin-oldest-r*.trace"},
            {0},
        },
};

/* ---- decay: returning memory by the clock ---------------------------------
 */

/* The mimalloc study's burst program (scripts/measure/mimalloc/burst.c):
 * 20,000 blocks of 4 KiB written and freed, 12 s idle with no activity or
 * one malloc/free of the same size every 100 ms, then mi_collect(false)
 * and mi_collect(true).  Each variant's allocation and free times are its
 * recorded run's, so the simulated clock is the measured one. */
#define DECAY_BURST                                                            \
  "lab-purge --size 4096 --count 20000 --idle 12000ms --every 100ms"
#define DECAY_MARKS "allocated freed idle_end collected collected_force"

/* The jemalloc study's lab program (scripts/measure/jemalloc/
 * je_lab_decay.c, the notes' own version of the lab): bursts of 200 objects
 * of 256 B-64 KiB every 50 ms, a 5,000-object spike every 5 s held for 1 s,
 * 20 s in all, RSS at every 100 ms (marks s1..s199).  The steps: before
 * the second spike, while it is held, 0.1 s, 1 s and 3.9 s after its free. */
#define DECAY_JE_WORKLOAD                                                      \
  "lab-decay --seconds 20 --period-ms 50 --burst 200 --spike 5000 "            \
  "--spike-s 5 --hold-ms 1000 --seed 1"
#define DECAY_JE_MARKS "s99 s105 s111 s120 s149"
/* mimalloc 2.0.9's burst (lab_burst, 4096-byte blocks) with the activity
 * named, replayed at the recorded run's alloc and free times; DEFAULT keeps
 * the 25 ms decommit delay, IMMEDIATE sets it to 0 on both sides. */
#define DECAY_MI_VARIANT(what, activity, alloc, free, delay, model_opts,       \
                         env_set, file)                                        \
  {                                                                            \
    .label = what ", " delay,                                                  \
    .workload = DECAY_BURST " --activity " activity " --alloc-time " alloc     \
                            " --free-time " free,                              \
    .model = "mimalloc:version=2.0.9" model_opts, .marks = DECAY_MARKS,        \
    .program = "lab_burst", .args = "{out} --size 4096 --activity " activity,  \
    .env = env_set, .preload = "mimalloc",                                     \
    .recorded = "measured/burst-2.0.9-4096-" file                              \
  }
#define DECAY_MI_DEFAULT(what, activity, alloc, free, file)                    \
  DECAY_MI_VARIANT(what, activity, alloc, free, "default delay", "", NULL, file)
#define DECAY_MI_IMMEDIATE(what, activity, alloc, free, file)                  \
  DECAY_MI_VARIANT(what, activity, alloc, free, "MIMALLOC_DECOMMIT_DELAY=0",   \
                   ",decommit_delay=0", "MIMALLOC_DECOMMIT_DELAY=0", file)

#define DECAY_JE_VARIANT(ms)                                                   \
  {                                                                            \
    .label = "jemalloc, dirty_decay_ms=" #ms, .workload = DECAY_JE_WORKLOAD,   \
    .model = "jemalloc:ncpus=2,dirty_decay_ms=" #ms, .marks = DECAY_JE_MARKS,  \
    .program = "lab_je_decay", .args = "{out}",                                \
    .env = "MALLOC_CONF=dirty_decay_ms:" #ms, .preload = "jemalloc",           \
    .recorded = "measured/je-lab-decay-d" #ms "-r*.trace"                      \
  }

static const lab_def_t lab_decay = {
    .name = "decay",
    .title = "the decay trade-off: memory returned by the clock",
    .notes = "section 20 lab 6; sections 6.2 and 9.2",
    .kind = LAB_REPLAY,
    .shows = "glibc returns memory by shape (the top of a heap, a trim); "
             "jemalloc, tcmalloc and mimalloc return it by clock: freed pages "
             "wait a delay (jemalloc's dirty_decay_ms, mimalloc's "
             "decommit_delay, 2.1+ purge_delay) before they are given back, so "
             "a burst that comes again finds them still there.  A delay of 0 "
             "gives them back at once and pays a page fault per page when they "
             "are needed again.  Here mimalloc 2.0.9 (Debian 12's), 80 MiB "
             "allocated and freed, then 12 s of idle; and jemalloc 5.3 "
             "(Debian 12's) under the notes' own version of the lab: request "
             "bursts every 50 ms and a spike every 5 s, with dirty_decay_ms "
             "at 0, 1000, 10000 (the default) and -1 (never).",
    .question =
        "After the free, how much of the 80 MiB does mimalloc keep with its "
        "default delay (25 ms) and with MIMALLOC_DECOMMIT_DELAY=0?  Does "
        "12 s of idle with no allocation at all give anything back?  What "
        "does one small malloc every 100 ms change?  What does the fast "
        "return cost?",
    .models = (const char *const[]){"mimalloc", "jemalloc", NULL},
    .counters =
        (const char *const[]){"mimalloc.purges", "jemalloc.purges",
                              "jemalloc.dirty_bytes", "kernel.madvise_calls",
                              "kernel.page_faults", "kernel.cost_us", NULL},
    .notice =
        "With the default delay nothing comes back at the free: the delay "
        "starts a clock that only mimalloc's own later work reads, and 12 s "
        "of idle keep all 80 MiB, with or without a same-size malloc every "
        "100 ms (it reuses one page and purges nothing else); "
        "mi_collect purges them.  "
        "With the delay at 0 every freed page is purged at the free: RSS "
        "falls at once, for madvise calls on the free path that the cost "
        "column prices, and a burst that came again would fault every page "
        "back in.  That is the trade jemalloc's dirty_decay_ms makes too "
        "(0, 1000, 10000, -1 for never): RSS against time spent in the "
        "kernel, chosen per workload.  jemalloc shows the whole range "
        "(bursts every 50 ms, a 57 MiB spike held from s100 to s110): at "
        "0 RSS follows live memory, for about 20,000 madvise calls by s149; "
        "at 1000 most of the spike's pages are back a second after its "
        "free (s120: 30 MiB predicted, 26 measured, from 73 at s111) and "
        "all by s149; at 10000 they drain over ten seconds; at -1 every "
        "page ever used stays (153 MiB).  Decay runs "
        "on allocation ticks, so the 1000 and 10000 curves depend on when "
        "the real program's ticks fell in time: there the simulation is "
        "off by up to 4.6 and 14.7 MiB.",
    .doc = "docs/course/decay.md",
    .variants =
        {
            DECAY_MI_DEFAULT("idle", "none", "602540332ns", "360163349ns",
                             "none-default.astrace"),
            DECAY_MI_IMMEDIATE("idle", "none", "461202842ns", "202231707ns",
                               "none-immediate.trace"),
            DECAY_MI_DEFAULT("same-size activity", "same", "1313732798ns",
                             "417255786ns", "same-default.astrace"),
            DECAY_MI_IMMEDIATE("same-size activity", "same", "375443708ns",
                               "323056281ns", "same-immediate.trace"),
            DECAY_JE_VARIANT(0),
            DECAY_JE_VARIANT(1000),
            DECAY_JE_VARIANT(10000),
            DECAY_JE_VARIANT(-1),
            {0},
        },
};

/* ---- leak: what tracemalloc cannot see ------------------------------------
 */

static const lab_def_t lab_leak = {
    .name = "leak",
    .title = "a leak in C that tracemalloc cannot see",
    .notes = "section 20 lab 7; sections 17.1 and 17.3",
    .kind = LAB_REPLAY,
    .shows = "tracemalloc traces CPython's allocator domains (PyMem_*, "
             "PyObject_*) and nothing else.  Memory a C extension takes with "
             "malloc is invisible to it.  The lab's program leaks 50 MiB "
             "through libc's malloc (ctypes, as an extension would), 10 MiB a "
             "round, with tracemalloc on; `allocsim capture` interposes malloc "
             "itself and records every block.  The simulation replays the "
             "capture of that program (data/captures/lab-leak.astrace), in "
             "place of the notes' jeprof.",
    .question =
        "After five rounds, how much does tracemalloc report, how much "
        "does RSS grow, and how much live memory does the capture hold?  "
        "What does tracemalloc count at all?",
    .models = (const char *const[]){"cpython", NULL},
    .counters = (const char *const[]){"glibc.system_bytes",
                                      "pymalloc.block_bytes_in_use", NULL},
    .measured_columns = (const char *const[]){"tracemalloc_kib", NULL},
    .notice = "The capture's live bytes grow by 10 MiB a round and the "
              "simulated RSS with them, in glibc's heap (system bytes), as the "
              "measured RSS does.  tracemalloc reports a few KiB: the Python "
              "int objects that hold the pointers, not the blocks they point "
              "to.  A leak in an extension's own allocations is found by "
              "interposing malloc (allocsim capture, heaptrack, jemalloc's "
              "profiler), never by tracemalloc; `allocsim explain` on the "
              "capture attributes the live bytes to the raw domain.",
    .doc = "docs/course/leak.md",
    .variants =
        {
            {.label = "",
             .trace = "captures/lab-leak.astrace",
             .model = "cpython:version=3.11",
             .marks = "start leak_10 leak_20 leak_30 leak_40 leak_50",
             .anchor = "start",
             .program = "lab_leak.py",
             .args = "--out {out}",
             .recorded = "measured/lab-leak-r*.trace"},
            {0},
        },
};

/* ---- compare: one workload, four allocators -------------------------------
 */

/* The load-spike study's program (scripts/measure/spike.py), single
 * threaded, as its measured runs under each allocator recorded it. */
#define COMPARE_SPIKE                                                          \
  "spike --count 160000 --min 600 --max 4000 --keep-every 50 --seed 1 "        \
  "--threads 1 --python 3.11"

static const lab_def_t lab_compare = {
    .name = "compare",
    .title = "compare all four: one workload, four allocators",
    .notes = "section 20 lab 9; sections 11.4 and 12.3",
    .kind = LAB_REPLAY,
    .shows =
        "The same CPython program under glibc and, through LD_PRELOAD, "
        "under tcmalloc, mimalloc and jemalloc: the load-spike study's "
        "160,000 (str, float) tuples of 600 to 4000 characters, every 50th "
        "kept, the rest freed, gc.collect(), then malloc_trim(0).  Objects "
        "above 512 bytes are libc's, so the strings meet the allocator "
        "under test; pymalloc keeps the small ones in every variant.",
    .question =
        "Which allocator holds the least at the peak, after the frees, and "
        "after malloc_trim(0)?  Which of them does malloc_trim change, and "
        "why?  Would the ranking hold for a workload that keeps most of "
        "what it allocates, or that frees its objects slowly?",
    .models = (const char *const[]){"cpython", "glibc", "tcmalloc", "mimalloc",
                                    "jemalloc", NULL},
    .counters =
        (const char *const[]){"kernel.page_faults", "kernel.munmap_calls",
                              "kernel.madvise_calls", NULL},
    .notice =
        "The allocators differ most after the frees, not at the peak: the "
        "live data is the same, what differs is what each keeps of the "
        "freed 340 MiB and when it gives it back.  glibc keeps it in its "
        "heap (a survivor every 50 tuples pins the pages around it) until "
        "malloc_trim(0) releases the free pages inside the heap; "
        "malloc_trim is glibc's, so under the others it changes nothing "
        "and what they return depends on their own clocks and thresholds "
        "(page heap release rate, purge delays, decay).  The kernel "
        "counters are the other side of the trade: memory given back is "
        "faulted in again if reused.  The notes' warning holds here too: "
        "this is one workload, with one shape of survivors and no reuse; "
        "a program that keeps most of what it allocates, or churns one "
        "size, can rank the four differently, so measure yours.",
    .doc = "docs/course/compare.md",
    .variants =
        {
            {.label = "glibc",
             .workload = COMPARE_SPIKE,
             .model = "cpython:version=3.11",
             .libc = "glibc",
             .marks = "peak after_free after_trim",
             .program = "spike.py",
             .args = "--out {out}",
             .recorded = "measured/spike-default-r*.trace"},
            {.label = "tcmalloc",
             .workload = COMPARE_SPIKE,
             .model = "cpython:version=3.11",
             .libc = "tcmalloc",
             .marks = "peak after_free after_trim",
             .program = "spike.py",
             .args = "--out {out}",
             .preload = "tcmalloc",
             .library = "libtcmalloc_minimal",
             .recorded = "measured/tcmalloc-spike-threads1-r*.trace"},
            {.label = "mimalloc",
             .workload = COMPARE_SPIKE,
             .model = "cpython:version=3.11",
             .libc = "mimalloc:version=2.0.9",
             .marks = "peak after_free after_trim",
             .program = "spike.py",
             .args = "--out {out}",
             .preload = "mimalloc",
             .recorded =
                 "measured/spike-mimalloc-2.0.9-threads1-default-r*.trace"},
            {.label = "jemalloc",
             .workload = COMPARE_SPIKE,
             .model = "cpython:version=3.11",
             .libc = "jemalloc",
             .marks = "peak after_free after_trim",
             .program = "spike.py",
             .args = "--out {out}",
             .preload = "jemalloc",
             .recorded = "measured/lab-compare-jemalloc-r*.trace"},
            {0},
        },
};

/* ---- The registry -------------------------------------------------------- */

static const lab_def_t *const lab_table[] = {
    &lab_sizes, &lab_cliff, &lab_brk, &lab_mmap_threshold, &lab_arenas,
    &lab_decay, &lab_leak,  &lab_pin, &lab_compare,
};

const lab_def_t *const *lab_registry(size_t *count) {
  *count = sizeof lab_table / sizeof lab_table[0];
  return lab_table;
}
