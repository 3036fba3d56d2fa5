/* Gating: the environment is read once, at first use (or fbx_trace_init).
 * Everything else in src/trace/ runs only when a flag below is set. */
#include "trace/trace_internal.h"

#if !(defined(FBX_TRACE_COMPILED_OUT) && FBX_TRACE_COMPILED_OUT)

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"

int fbx__trace_flags = 0;
int64_t fbx__trace_max_events = 1000000;
uint64_t fbx__trace_t0_ns = 0;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static char *g_path = NULL;

uint64_t fbx_trace_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *fbx__trace_path(void) { return g_path; }

int fbx__trace_tid(void) {
  static __thread int tid = 0;
  if (!tid) tid = (int)syscall(SYS_gettid);
  return tid;
}

void fbx__trace_flags_set(int bits) { __atomic_fetch_or(&fbx__trace_flags, bits, __ATOMIC_SEQ_CST); }
void fbx__trace_flags_clear(int bits) { __atomic_fetch_and(&fbx__trace_flags, ~bits, __ATOMIC_SEQ_CST); }

/* "1", "true", "yes", "on" (any case) are on; unset, "", "0" and anything else are off. */
static bool env_on(const char *name) {
  const char *v = getenv(name);
  if (!v || !*v) return false;
  return !strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on");
}

static void atexit_flush(void) { fbx_trace_flush(); }

static void init_once(void) {
  int f = FBX_TRACE_F_INIT;
  fbx__trace_t0_ns = fbx_trace_now_ns();
  const char *max = getenv("FUSEBOX_TRACE_MAX_EVENTS");
  if (max && *max) {
    char *end = NULL;
    long long n = strtoll(max, &end, 10);
    if (end && *end == '\0' && n >= 0) fbx__trace_max_events = n;
    else fprintf(stderr, "[fusebox] FUSEBOX_TRACE_MAX_EVENTS=%s is not a count; using %lld\n", max,
                 (long long)fbx__trace_max_events);
  }
  const char *path = getenv("FUSEBOX_TRACE");
  if (path && *path) {
    g_path = fbx_strdup(path);
    f |= FBX_TRACE_F_SUMMARY | FBX_TRACE_F_NVTX;
    if (g_path && fbx__trace_writer_open(g_path) == 0) {
      f |= FBX_TRACE_F_JSON;
    } else {
      fprintf(stderr, "[fusebox] cannot write trace file %s; printing the summary only\n", path);
    }
  }
  if (env_on("FUSEBOX_VERBOSE")) f |= FBX_TRACE_F_SUMMARY;
  if (env_on("FUSEBOX_CLAIM_DEBUG")) f |= FBX_TRACE_F_CLAIM;
  if (env_on("FUSEBOX_NVTX")) f |= FBX_TRACE_F_NVTX;
  f |= fbx__trace_gpu_env(); /* FUSEBOX_GPU_CAPTURE */
  if (f & FBX_TRACE_F_JSON) atexit(atexit_flush);
  if (f & FBX_TRACE_F_JSON) fbx__trace_counters_baseline();
  /* Keep a profiler bit that was set meanwhile (StartProfiling before first use). */
  __atomic_fetch_or(&fbx__trace_flags, f, __ATOMIC_SEQ_CST);
}

int fbx__trace_init_slow(void) {
  pthread_once(&g_once, init_once);
  return __atomic_load_n(&fbx__trace_flags, __ATOMIC_ACQUIRE) & ~FBX_TRACE_F_INIT;
}

void fbx_trace_init(void) { (void)fbx_trace_flags(); }

void fbx_trace_claim_debug(const char *node_name, const char *domain, const char *op_type,
                           bool claimed, const char *reason) {
  if (__builtin_expect(!(fbx_trace_flags() & FBX_TRACE_F_CLAIM), 1)) return;
  fprintf(stderr, "[fusebox] claim: %-9s %s%s%s node='%s'%s%s\n", claimed ? "CLAIMED" : "UNCLAIMED",
          domain && *domain ? domain : "", domain && *domain ? "." : "", op_type ? op_type : "?",
          node_name ? node_name : "", reason && *reason ? " reason: " : "", reason ? reason : "");
}

#else
typedef int fbx__trace_gate_compiled_out;
#endif
