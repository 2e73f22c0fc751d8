/* scripts/measure/jemalloc/je_lab_decay.c -- the decay trade-off lab of the
 * allocator course notes (lab 6: "Run the same workload under jemalloc with
 * dirty_decay_ms at 0, 1000, 10000, and -1.  Plot RSS and p99 latency
 * against each other.").
 *
 * The workload, a small service: every PERIOD_MS a request burst allocates
 * BURST objects, writes them and frees them (sizes 256 B .. 64 KiB, drawn
 * log-uniformly by splitmix64 from SEED); every SPIKE_S seconds a spike
 * allocates SPIKE objects the same way, holds them for HOLD_MS while the
 * bursts go on, and frees them.  It runs for SECONDS.  The allocsim
 * workload `lab-decay` emits the same requests at the same times.
 *
 * Measured every 100 ms: the mark sK with RSS, and the cost side as a
 * comment
 *   # cost t=NS minflt=N burst_p50_ns=N burst_p99_ns=N bursts=N
 *          nmadvise=N pdirty=P
 * (minor faults from getrusage since start; the burst latencies of the
 * interval; jemalloc's madvise count and dirty pages summed over arenas).
 * The full "# je" statistics are written at the marks only (the output
 * buffer holds 64 KiB).  Marks: start, end.
 *
 * Usage: je_lab_decay OUT [SECONDS [PERIOD_MS [BURST [SPIKE [SPIKE_S
 *                          [HOLD_MS [SEED]]]]]]]
 *        (defaults 20 50 200 5000 5 1000 1)
 */
#include "je_common.h"

#include <math.h>
#include <sys/resource.h>

#define MAX_OBJS   200000
#define MAX_BURSTS 1024
#define SAMPLE_NS  100000000LL

static void     *burst_objs[MAX_OBJS];
static void     *spike_objs[MAX_OBJS];
static long long lat[MAX_BURSTS];

static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/* 256 * 2^(8u), u uniform in [0, 1) from the top 53 bits: 256 B .. 64 KiB,
 * log-uniform.  The workload uses the same formula. */
static size_t draw_size(uint64_t *state) {
  double u = (double)(splitmix64(state) >> 11) / 9007199254740992.0;
  return (size_t)(256.0 * exp2(8.0 * u));
}

static void alloc_all(void **objs, long n, uint64_t *state) {
  for (long i = 0; i < n; i++) {
    size_t size = draw_size(state);
    objs[i] = malloc(size);
    if (objs[i] == NULL)
      _exit(1);
    memset(objs[i], 0xA5, size);
    lab_escape(objs[i]);
  }
}

static void free_all(void **objs, long n) {
  for (long i = 0; i < n; i++)
    free(objs[i]);
}

static int cmp_ll(const void *a, const void *b) {
  long long x = *(const long long *)a, y = *(const long long *)b;
  return (x > y) - (x < y);
}

static long minflt(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return 2;
  long seconds = argc > 2 ? atol(argv[2]) : 20;
  long period_ms = argc > 3 ? atol(argv[3]) : 50;
  long burst = argc > 4 ? atol(argv[4]) : 200;
  long spike = argc > 5 ? atol(argv[5]) : 5000;
  long spike_s = argc > 6 ? atol(argv[6]) : 5;
  long hold_ms = argc > 7 ? atol(argv[7]) : 1000;
  long seed = argc > 8 ? atol(argv[8]) : 1;
  if (seconds < 1 || period_ms < 1 || period_ms > 100 || 100 % period_ms ||
      burst < 0 || burst > MAX_OBJS || spike < 0 || spike > MAX_OBJS ||
      spike_s < 1 || hold_ms < 0 || seed < 0)
    return 2;
  char workload[256];
  snprintf(workload, sizeof workload,
           "lab-decay --seconds %ld --period-ms %ld --burst %ld --spike %ld "
           "--spike-s %ld --hold-ms %ld --seed %ld",
           seconds, period_ms, burst, spike, spike_s, hold_ms, seed);
  je_begin(argc, argv, workload);
  memset(burst_objs, 0, sizeof burst_objs);
  memset(spike_objs, 0, sizeof spike_objs);
  memset(lat, 0, sizeof lat);
  uint64_t state = (uint64_t)seed;
  long     flt0 = minflt();

  je_mark("start");
  long long t_start = lab_now_ns() - lab_t0_ns;
  long      per_sample = 100 / period_ms;
  long      nperiods = seconds * 1000 / period_ms;
  long      spike_every = spike_s * 1000 / period_ms;
  long      hold = hold_ms / period_ms;
  long      spike_free_at = -1;
  long      nlat = 0;
  for (long k = 0; k < nperiods; k++) {
    long long       deadline = t_start + (long long)k * period_ms * 1000000LL;
    struct timespec ts = {(time_t)((lab_t0_ns + deadline) / 1000000000LL),
                          (long)((lab_t0_ns + deadline) % 1000000000LL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
      ;
    if (k % spike_every == 0 && spike > 0 && spike_free_at < 0) {
      alloc_all(spike_objs, spike, &state);
      spike_free_at = k + hold;
    }
    long long b0 = lab_now_ns();
    alloc_all(burst_objs, burst, &state);
    free_all(burst_objs, burst);
    if (nlat < MAX_BURSTS)
      lat[nlat++] = lab_now_ns() - b0;
    if (k == spike_free_at) {
      free_all(spike_objs, spike);
      spike_free_at = -1;
    }
    if ((k + 1) % per_sample == 0) {
      long long t = lab_now_ns() - lab_t0_ns;
      lab_body("%lld 0 mark s%ld\n%lld 0 rss %lld\n", t, (k + 1) / per_sample,
               t, lab_rss_bytes());
      qsort(lat, (size_t)nlat, sizeof lat[0], cmp_ll);
      je_epoch();
      lab_body(
          "# cost t=%lld minflt=%ld burst_p50_ns=%lld burst_p99_ns=%lld "
          "bursts=%ld nmadvise=%llu pdirty=%llu\n",
          t, minflt() - flt0, nlat ? lat[nlat / 2] : 0,
          nlat ? lat[(nlat * 99) / 100] : 0, nlat,
          (unsigned long long)je_read_u64("stats.arenas.4096.dirty_nmadvise"),
          (unsigned long long)je_read_u64("stats.arenas.4096.pdirty"));
      nlat = 0;
    }
  }
  je_mark("end");
  lab_finish(argv[1]);
}
