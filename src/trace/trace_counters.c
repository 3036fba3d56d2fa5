/* Counter tracks sampled at eval boundaries: engine memory, RSS, CPU use.
 * /proc and getrusage are read at most once per SAMPLE_NS so that tiny,
 * fast graphs do not pay a syscall per Compute. CPU use is process CPU time
 * (getrusage: microsecond resolution, unlike /proc/self/stat's clock ticks)
 * over wall time, as a percentage of all online cores. */
#include "trace/trace_internal.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

enum { SAMPLE_NS = 1000000 };

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_last_wall_ns = 0, g_last_cpu_ns = 0;

static int g_statm_fd = -1; /* kept open (under g_mu): pread re-reads it */
static long g_ncpu = 0, g_page = 0;

static int64_t rss_bytes(void) {
  if (g_statm_fd < 0) g_statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (g_statm_fd < 0) return -1;
  char buf[128];
  ssize_t n = pread(g_statm_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return -1;
  buf[n] = '\0';
  char *p = buf;
  strtoll(p, &p, 10);                  /* size */
  long long resident = strtoll(p, NULL, 10);
  return (int64_t)resident * (int64_t)g_page;
}

static uint64_t cpu_ns(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru)) return 0;
  return ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000ull +
         ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000ull;
}

static int g_sampled; /* a sample has been taken (the baseline alone does not count) */

void fbx__trace_counters_baseline(void) {
  pthread_mutex_lock(&g_mu);
  if (!g_last_wall_ns) {
    g_last_wall_ns = fbx_trace_now_ns();
    g_last_cpu_ns = cpu_ns();
  }
  pthread_mutex_unlock(&g_mu);
}

void fbx_trace_sample_counters(size_t engine_bytes, size_t budget_bytes) {
  if (__builtin_expect(!(fbx_trace_flags() & FBX_TRACE_F_JSON), 1)) return;
  fbx_trace_counter("fusebox.mem_bytes", (double)engine_bytes);
  if (budget_bytes) fbx_trace_counter("fusebox.mem_pct", 100.0 * (double)engine_bytes / (double)budget_bytes);
  uint64_t now = fbx_trace_now_ns();
  if (pthread_mutex_trylock(&g_mu)) return; /* another thread is sampling */
  if (g_sampled && now - g_last_wall_ns < SAMPLE_NS) { /* at most one sample per ms; the first always */
    pthread_mutex_unlock(&g_mu);
    return;
  }
  uint64_t cpu = cpu_ns();
  double util = -1;
  if (!g_ncpu) {
    g_ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (g_ncpu < 1) g_ncpu = 1;
    g_page = sysconf(_SC_PAGESIZE);
  }
  if (g_last_wall_ns && now > g_last_wall_ns)
    util = 100.0 * (double)(cpu - g_last_cpu_ns) / (double)(now - g_last_wall_ns) / (double)g_ncpu;
  g_last_wall_ns = now;
  g_last_cpu_ns = cpu;
  g_sampled = 1;
  int64_t rss = rss_bytes();
  pthread_mutex_unlock(&g_mu);
  if (rss >= 0) fbx_trace_counter("fusebox.rss_bytes", (double)rss);
  if (util >= 0) fbx_trace_counter("fusebox.util_pct", util);
}

#else
typedef int fbx__trace_counters_compiled_out;
#endif
