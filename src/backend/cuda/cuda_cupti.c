/* Observability members of the CUDA backend (backend_obs.h): PCI bus id,
 * cudaProfilerStart/Stop, and device activity through CUPTI.
 *
 * CUPTI (libcupti.so.13 from the toolkit) is dlopened at the first
 * activity_enable, so the library still loads and runs where it is absent;
 * nothing is subscribed before that (tracing off = no CUPTI at all).
 *
 * Recording: activity kinds CONCURRENT_KERNEL, MEMCPY, MEMSET, plus RUNTIME
 * and EXTERNAL_CORRELATION, which is how a record learns its tag: the tag is
 * pushed as an external correlation id (kind CUSTOM0) on the enqueueing
 * thread, CUPTI then writes an (external id, correlation id) record before
 * each runtime API record, and kernel/copy records carry the correlation id
 * of the API call that launched them. (External correlation records come
 * only with API records, hence RUNTIME; it is the cost of tracing per launch.)
 * Timestamps: CUPTI is given CLOCK_MONOTONIC (the trace's clock) as its
 * timestamp source; where that call is missing, an offset measured at enable.
 *
 * Off the hot path: CUPTI hands full buffers (and, every 100 ms, partial ones)
 * to buffer_completed on its own thread, which translates records into a
 * queue (correlation -> tag through a ring indexed by correlation id);
 * activity_drain only swaps the queue out (flush: waits for the device and
 * has CUPTI deliver everything first). Only tagged records are kept: work of
 * other libraries in the process (ORT's own CUDA kernels) is not ours. */
#include <cuda_profiler_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../base/alloc.h"
#include "cuda_internal.h"

#define FBX__CUPTI_BUF_BYTES ((size_t)8 << 20)
#define FBX__CUPTI_RING (1u << 18) /* correlation ids remembered: > the launches of one drain interval */

typedef struct fbx__corr { uint32_t corr; uint64_t tag; } fbx__corr;

static struct {
  int state; /* 0 not loaded, 1 loaded, -1 failed */
  char why[256];
  void *lib;
  typeof(&cuptiActivityEnable) enable;
  typeof(&cuptiActivityDisable) disable;
  typeof(&cuptiActivityRegisterCallbacks) reg;
  typeof(&cuptiActivityFlushAll) flush_all;
  typeof(&cuptiActivityFlushPeriod) flush_period;
  typeof(&cuptiActivityGetNextRecord) next;
  typeof(&cuptiActivityPushExternalCorrelationId) push;
  typeof(&cuptiActivityPopExternalCorrelationId) pop;
  typeof(&cuptiActivityRegisterTimestampCallback) reg_ts;
  typeof(&cuptiGetTimestamp) get_ts;
  typeof(&cuptiGetResultString) result_string;
  int64_t ts_offset;          /* added to CUPTI timestamps (0 when CUPTI uses our clock) */
  int enabled;
  pthread_mutex_t mu;         /* the queue and the ring */
  fbx__corr *ring;
  fbx_device_activity *q;
  size_t n_q, cap_q;
  int64_t dropped;            /* records lost to OOM */
} g_cu = {.mu = PTHREAD_MUTEX_INITIALIZER};
static __thread int tl_pushed; /* this thread has a tag pushed */

static uint64_t fbx__mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
static uint64_t CUPTIAPI fbx__cupti_clock(void) { return fbx__mono_ns(); }

static const char *fbx__cupti_err(CUptiResult r) {
  const char *s = NULL;
  if (g_cu.result_string && g_cu.result_string(r, &s) == CUPTI_SUCCESS && s) return s;
  return "CUPTI error";
}

static void CUPTIAPI fbx__buf_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  *buffer = fbx_malloc_aligned(FBX__CUPTI_BUF_BYTES);
  *size = *buffer ? FBX__CUPTI_BUF_BYTES : 0;
  *max_records = 0;
}

/* Under g_cu.mu. */
static void fbx__q_push(const fbx_device_activity *a) {
  if (g_cu.n_q == g_cu.cap_q) {
    size_t cap = g_cu.cap_q ? g_cu.cap_q * 2 : 4096;
    fbx_device_activity *q = fbx_realloc(g_cu.q, cap * sizeof *q);
    if (!q) {
      g_cu.dropped++;
      return;
    }
    g_cu.q = q;
    g_cu.cap_q = cap;
  }
  g_cu.q[g_cu.n_q++] = *a;
}

static uint64_t fbx__tag_of(uint32_t corr) {
  const fbx__corr *e = &g_cu.ring[corr & (FBX__CUPTI_RING - 1)];
  return e->corr == corr ? e->tag : 0;
}

/* CUPTI's thread: one completed buffer. External correlation records precede
 * their API record, which precedes the work it launched: a single pass sees
 * the tag before the kernel. */
static void CUPTIAPI fbx__buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  CUpti_Activity *r = NULL;
  if (!buffer) return;
  pthread_mutex_lock(&g_cu.mu);
  while (valid && g_cu.next(buffer, valid, &r) == CUPTI_SUCCESS) {
    fbx_device_activity a;
    memset(&a, 0, sizeof a);
    switch (r->kind) {
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const CUpti_ActivityExternalCorrelation *x = (const void *)r;
        if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0)
          g_cu.ring[x->correlationId & (FBX__CUPTI_RING - 1)] = (fbx__corr){x->correlationId, x->externalId};
        continue;
      }
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const void *)r;
        a.kind = FBX_DEVACT_KERNEL;
        a.name = k->name; /* CUPTI keeps kernel names for the process' lifetime */
        a.start_ns = k->start;
        a.end_ns = k->end;
        a.stream = k->streamId;
        a.correlation = k->correlationId;
        a.grid[0] = k->gridX, a.grid[1] = k->gridY, a.grid[2] = k->gridZ;
        a.block[0] = k->blockX, a.block[1] = k->blockY, a.block[2] = k->blockZ;
        a.registers = k->registersPerThread;
        a.shared_bytes = k->staticSharedMemory + k->dynamicSharedMemory;
        a.graph = k->graphId != 0;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const void *)r;
        a.kind = FBX_DEVACT_MEMCPY;
        a.start_ns = m->start;
        a.end_ns = m->end;
        a.stream = m->streamId;
        a.correlation = m->correlationId;
        a.bytes = m->bytes;
        a.copy_kind = m->copyKind;
        a.graph = m->graphId != 0;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const void *)r;
        a.kind = FBX_DEVACT_MEMSET;
        a.start_ns = m->start;
        a.end_ns = m->end;
        a.stream = m->streamId;
        a.correlation = m->correlationId;
        a.bytes = m->bytes;
        a.graph = m->graphId != 0;
        break;
      }
      default:
        continue; /* RUNTIME records: only there for the external correlation */
    }
    a.tag = fbx__tag_of(a.correlation);
    if (!a.tag) continue; /* not our work */
    a.start_ns = (uint64_t)((int64_t)a.start_ns + g_cu.ts_offset);
    a.end_ns = (uint64_t)((int64_t)a.end_ns + g_cu.ts_offset);
    fbx__q_push(&a);
  }
  pthread_mutex_unlock(&g_cu.mu);
  fbx_free_aligned(buffer);
}

#define FBX__SYM(field, name)                                      \
  do {                                                             \
    g_cu.field = (typeof(g_cu.field))dlsym(g_cu.lib, name);        \
    if (!g_cu.field && strcmp(name, "cuptiActivityRegisterTimestampCallback")) ok = 0; \
  } while (0)

/* Under g_cu.mu. FUSEBOX_CUPTI_LIB overrides where libcupti is looked for. */
static void fbx__cupti_load(void) {
  g_cu.state = -1;
  const char *env = getenv("FUSEBOX_CUPTI_LIB");
  const char *names[] = {env && *env ? env : "libcupti.so.13", "libcupti.so",
                         "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
                         "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13"};
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !g_cu.lib; i++) {
    if (env && *env && i > 0) break; /* an explicit library is the only one tried */
    g_cu.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  }
  if (!g_cu.lib) {
    snprintf(g_cu.why, sizeof g_cu.why, "device 'cuda': CUPTI (libcupti.so.13) not found: %s", dlerror());
    return;
  }
  int ok = 1;
  FBX__SYM(enable, "cuptiActivityEnable");
  FBX__SYM(disable, "cuptiActivityDisable");
  FBX__SYM(reg, "cuptiActivityRegisterCallbacks");
  FBX__SYM(flush_all, "cuptiActivityFlushAll");
  FBX__SYM(flush_period, "cuptiActivityFlushPeriod");
  FBX__SYM(next, "cuptiActivityGetNextRecord");
  FBX__SYM(push, "cuptiActivityPushExternalCorrelationId");
  FBX__SYM(pop, "cuptiActivityPopExternalCorrelationId");
  FBX__SYM(reg_ts, "cuptiActivityRegisterTimestampCallback");
  FBX__SYM(get_ts, "cuptiGetTimestamp");
  FBX__SYM(result_string, "cuptiGetResultString");
  if (!ok) {
    snprintf(g_cu.why, sizeof g_cu.why, "device 'cuda': libcupti lacks an activity API entry point");
    dlclose(g_cu.lib);
    g_cu.lib = NULL;
    return;
  }
  g_cu.ring = fbx_calloc(FBX__CUPTI_RING, sizeof *g_cu.ring);
  if (!g_cu.ring) {
    snprintf(g_cu.why, sizeof g_cu.why, "device 'cuda': out of memory for CUPTI's correlation table");
    return;
  }
  g_cu.state = 1; /* the library stays loaded: CUPTI's thread may still call back */
}

static const CUpti_ActivityKind fbx__kinds[] = {
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

static fbx_status *fbx__cuda_activity_enable(fbx_backend *be, bool on) {
  (void)be;
  pthread_mutex_lock(&g_cu.mu);
  fbx_status *st = NULL;
  if (on && !g_cu.state) fbx__cupti_load();
  if (on && g_cu.state != 1) {
    st = FBX_ERR_NOTIMPL("%s", g_cu.why);
  } else if (on && !g_cu.enabled) {
    CUptiResult r = CUPTI_SUCCESS;
    static int registered;
    if (!registered) {
      if (g_cu.reg_ts && g_cu.reg_ts(fbx__cupti_clock) == CUPTI_SUCCESS) {
        g_cu.ts_offset = 0;
      } else {
        uint64_t t = 0;
        g_cu.get_ts(&t);
        g_cu.ts_offset = (int64_t)fbx__mono_ns() - (int64_t)t;
      }
      r = g_cu.reg(fbx__buf_requested, fbx__buf_completed);
      if (r == CUPTI_SUCCESS) registered = 1;
    }
    for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof fbx__kinds / sizeof fbx__kinds[0]; i++) r = g_cu.enable(fbx__kinds[i]);
    if (r == CUPTI_SUCCESS) {
      g_cu.flush_period(100); /* partial buffers reach the queue at least every 100 ms */
      g_cu.enabled = 1;
    } else {
      for (size_t i = 0; i < sizeof fbx__kinds / sizeof fbx__kinds[0]; i++) g_cu.disable(fbx__kinds[i]);
      st = FBX_ERR_NOTIMPL("device 'cuda': CUPTI activity could not be enabled: %s", fbx__cupti_err(r));
    }
  } else if (!on && g_cu.enabled) {
    for (size_t i = 0; i < sizeof fbx__kinds / sizeof fbx__kinds[0]; i++) g_cu.disable(fbx__kinds[i]);
    g_cu.enabled = 0;
  }
  pthread_mutex_unlock(&g_cu.mu);
  return st;
}

static void fbx__cuda_activity_tag(fbx_backend *be, uint64_t tag) {
  (void)be;
  if (g_cu.state != 1) return;
  uint64_t last = 0;
  if (tl_pushed) g_cu.pop(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
  tl_pushed = tag != 0 && g_cu.push(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, tag) == CUPTI_SUCCESS;
}

static fbx_status *fbx__cuda_activity_drain(fbx_backend *be, bool flush, fbx_device_activity_fn fn, void *ctx) {
  if (g_cu.state != 1) return NULL;
  if (flush) {
    fbx_cuda_ctx *c = be->ctx;
    fbx_cuda_lock(c);
    cudaSetDevice(c->device);
    cudaStreamSynchronize(c->stream);
    pthread_mutex_unlock(&c->lock);
    g_cu.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); /* buffer_completed runs before this returns */
  }
  pthread_mutex_lock(&g_cu.mu);
  fbx_device_activity *q = g_cu.q;
  size_t n = g_cu.n_q;
  int64_t dropped = g_cu.dropped;
  g_cu.q = NULL;
  g_cu.n_q = g_cu.cap_q = 0;
  g_cu.dropped = 0;
  pthread_mutex_unlock(&g_cu.mu);
  for (size_t i = 0; i < n; i++) fn(ctx, &q[i]);
  fbx_free(q);
  return dropped ? FBX_ERR_OOM() : NULL;
}

static fbx_status *fbx__cuda_profiler_range(fbx_backend *be, bool start) {
  fbx_cuda_ctx *c = be->ctx;
  cudaSetDevice(c->device);
  return fbx_cuda_check(start ? cudaProfilerStart() : cudaProfilerStop(), start ? "cudaProfilerStart" : "cudaProfilerStop");
}

static const char *fbx__cuda_bus_id(fbx_backend *be) {
  static char ids[64][32]; /* per device ordinal, filled once (a race writes the same bytes) */
  fbx_cuda_ctx *c = be->ctx;
  if (c->device < 0 || c->device >= 64) return NULL;
  if (!ids[c->device][0] && cudaDeviceGetPCIBusId(ids[c->device], (int)sizeof ids[0], c->device) != cudaSuccess)
    ids[c->device][0] = '\0';
  return ids[c->device][0] ? ids[c->device] : NULL;
}

const fbx_backend_obs fbx_cuda_obs = {
    .bus_id = fbx__cuda_bus_id,
    .profiler_range = fbx__cuda_profiler_range,
    .activity_enable = fbx__cuda_activity_enable,
    .activity_tag = fbx__cuda_activity_tag,
    .activity_drain = fbx__cuda_activity_drain,
};

fbx_status *fbx_cuda_mem_info(fbx_backend *be, size_t *free_bytes, size_t *total_bytes) {
  fbx_cuda_ctx *c = be->ctx;
  cudaSetDevice(c->device);
  return fbx_cuda_check(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
}
