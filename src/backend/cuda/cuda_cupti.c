/* Observability members of the CUDA backend (backend_obs.h): PCI bus id,
 * cudaProfilerStart/Stop, and device activity through CUPTI.
 *
 * CUPTI (libcupti.so.13 from the toolkit) is dlopened at the first
 * activity_enable, so the library still loads and runs where it is absent;
 * nothing is subscribed before that (tracing off = no CUPTI at all). Switching
 * recording off detaches CUPTI again in callback mode (fbx__detach), and every
 * switch moves the graph epoch (cuda_graph.c), so that no graph instantiated
 * while CUPTI recorded is replayed after it.
 *
 * Recording: activity kinds CONCURRENT_KERNEL, MEMCPY and MEMSET only. A
 * record learns its tag (the node or graph launch the executor was enqueueing)
 * through its correlation id, the id of the API call that launched it. Two
 * ways, chosen at enable (FUSEBOX_CUPTI_CORR=callback|extcorr, default
 * callback):
 *   callback: CUPTI's callback API on the launching API calls alone (kernel
 *     launches, async copies and memsets, graph launches: fbx__launch_cbids,
 *     runtime and driver domains). On entry the callback stores (correlation
 *     id -> the thread's tag) in a ring and counts the thread's launches (an
 *     outermost one only: a runtime launch enters the driver's too). No API
 *     activity record is written: per launch that is two callbacks and a store.
 *   extcorr (the fallback when another tool holds CUPTI's one subscriber):
 *     the tag is pushed as an external correlation id (CUSTOM0) and RUNTIME
 *     plus EXTERNAL_CORRELATION records carry it: one API record for every
 *     runtime call (cudaSetDevice, cudaGetLastError, ...), the cost measured
 *     as +50% on a launch-bound decode; no launch counts.
 * Graph replays: by default every kernel, copy and memset of a replay has its
 * own record (capture order splits them over the nodes). FUSEBOX_CUPTI_GRAPHS=
 * whole asks CUPTI for one GRAPH_TRACE record per replay instead, which CUPTI
 * documents as the low-overhead way to trace graphs; the per-node records of
 * replays are then dropped here (should CUPTI still deliver them), so a
 * replay's time counts once, as a "CUDA graph" slice not split over nodes. An
 * A/B knob for the overhead on graph-replayed decode, off by default.
 * Timestamps: CUPTI is given CLOCK_MONOTONIC (the trace's clock) as its
 * timestamp source; where that call is missing, an offset measured at enable.
 *
 * Off the hot path: CUPTI hands full buffers to buffer_completed on its own
 * thread (its periodic flush, set to 100 ms, returns full buffers only;
 * partial ones come at activity_drain's flush), which translates records and,
 * with a sink set (activity_sink), hands them to it right there (the trace
 * stores them binary there and formats them at its flush: trace_gpu.c);
 * without a sink they wait in a queue for activity_drain (flush: waits for
 * the device and has CUPTI deliver everything first). Only tagged records are
 * kept: work of other libraries in the process (ORT's own CUDA kernels) is
 * not ours.
 *
 * Buffers (FBX__CUPTI_BUF_BYTES, 8 MiB: ~35k kernel records, so a completion
 * every ~240 decode steps of 146 records) come from a small pool of buffers
 * that are already zeroed and faulted in: CUPTI asks for one on the launching
 * thread, and by default zeroes each new buffer there itself (the attribute
 * CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER says ours come zeroed); a
 * completed buffer is zeroed again on the thread that processed it and goes
 * back to the pool. Per launch the hot path does no allocation, no lock and
 * no CUPTI call of ours: the callback's ring store and launch count alone. */
#include <cuda_profiler_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../base/alloc.h"
#include "cuda_internal.h"

#define FBX__CUPTI_BUF_BYTES ((size_t)8 << 20)
#define FBX__CUPTI_RING (1u << 20) /* correlation ids remembered: > the launches between two buffer completions */
enum { FBX__CUPTI_POOL = 4, FBX__CUPTI_POOL_FILL = 2 }; /* zeroed buffers kept; made at enable */

typedef struct fbx__corr { uint32_t corr; uint64_t tag; } fbx__corr;
enum { FBX__CORR_CALLBACK = 1, FBX__CORR_EXTCORR = 2 };

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
  typeof(&cuptiSubscribe) subscribe;
  typeof(&cuptiFinalize) finalize;
  typeof(&cuptiEnableCallback) enable_cb;
  typeof(&cuptiActivitySetAttribute) set_attr;
  CUpti_SubscriberHandle sub;
  int mode;                   /* FBX__CORR_*, fixed at the first enable */
  int graphs_whole;           /* FUSEBOX_CUPTI_GRAPHS=whole: GRAPH_TRACE records for replays (fixed at the first enable) */
  int64_t ts_offset;          /* added to CUPTI timestamps (0 when CUPTI uses our clock) */
  int enabled;
  int registered;             /* buffer callbacks registered, subscriber taken (cleared by a detach) */
  int detach;                 /* a detach is asked for: the next cudaGetDevice exit callback does it */
  pthread_mutex_t switch_mu;  /* held by activity_enable across a switch, the detach included (> mu) */
  uint64_t generation;        /* moves at every switch of recording (atomic): fbx_cuda_activity_generation */
  pthread_mutex_t mu;         /* the queue, the sink and the ring's readers */
  fbx__corr *ring;            /* written by launching threads (relaxed atomics), read by CUPTI's */
  fbx_device_activity *q;
  size_t n_q, cap_q;
  int64_t dropped;            /* records lost to OOM */
  fbx_device_activity_fn sink;
  void *sink_ctx;
  /* callback mode's self-check (not verified on every CUPTI): launches whose callback had no
   * correlation id, and records that found / did not find a tag */
  uint64_t cb_no_corr, rec_tagged, rec_untagged;
  int warned;
} g_cu = {.mu = PTHREAD_MUTEX_INITIALIZER, .switch_mu = PTHREAD_MUTEX_INITIALIZER};

/* The launching thread's state: its current tag, callback nesting depth and
 * launch counts. Touched only while recording on a GPU (a dynamic-TLS block
 * that is never touched costs LeakSanitizer nothing: see exec_gpuobs.h). */
typedef struct fbx__cupti_thread { uint64_t tag; int depth, pushed; uint64_t kernels, copies; } fbx__cupti_thread;
static __thread fbx__cupti_thread tl_cu;

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

/* Activity buffers, FBX__CUPTI_BUF_BYTES each, zeroed when `zeroed` (CUPTI was told ours come so). */
static struct {
  pthread_mutex_t mu; /* held for a pointer push or pop */
  uint8_t *free[FBX__CUPTI_POOL];
  int n;
  int zeroed;
} g_pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

static uint8_t *fbx__buf_new(void) {
  uint8_t *b = fbx_malloc_aligned(FBX__CUPTI_BUF_BYTES);
  if (b && g_pool.zeroed) memset(b, 0, FBX__CUPTI_BUF_BYTES); /* also faults its pages in */
  return b;
}

/* A processed buffer back to the pool (zeroed again), or freed when the pool is full. */
static void fbx__buf_recycle(uint8_t *b) {
  if (g_pool.zeroed) memset(b, 0, FBX__CUPTI_BUF_BYTES);
  pthread_mutex_lock(&g_pool.mu);
  if (g_pool.n < FBX__CUPTI_POOL) {
    g_pool.free[g_pool.n++] = b;
    b = NULL;
  }
  pthread_mutex_unlock(&g_pool.mu);
  fbx_free_aligned(b);
}

/* CUPTI, on the thread that needs room for a record (often the launching one): a pooled buffer,
 * a new one only when the pool is empty. */
static void CUPTIAPI fbx__buf_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
  uint8_t *b = NULL;
  pthread_mutex_lock(&g_pool.mu);
  if (g_pool.n) b = g_pool.free[--g_pool.n];
  pthread_mutex_unlock(&g_pool.mu);
  if (!b) b = fbx__buf_new();
  *buffer = b;
  *size = b ? FBX__CUPTI_BUF_BYTES : 0;
  *max_records = 0;
}

/* Once, before the buffer callbacks are registered: our buffers come zeroed (so CUPTI does not
 * zero them on the launching thread) and a few are made now, off the hot path. */
static void fbx__buf_pool_fill(void) {
  uint8_t one = 1;
  size_t sz = sizeof one;
  g_pool.zeroed = g_cu.set_attr && g_cu.set_attr(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &sz, &one) ==
                                   CUPTI_SUCCESS;
  for (int i = 0; i < FBX__CUPTI_POOL_FILL; i++) {
    uint8_t *b = fbx__buf_new();
    if (!b) break;
    fbx__buf_recycle(b);
  }
}

/* Under g_cu.mu. */
static void fbx__q_push(const fbx_device_activity *a) {
  if (g_cu.sink) {
    g_cu.sink(g_cu.sink_ctx, a);
    return;
  }
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

static void fbx__ring_put(uint32_t corr, uint64_t tag) {
  fbx__corr *e = &g_cu.ring[corr & (FBX__CUPTI_RING - 1)];
  __atomic_store_n(&e->tag, tag, __ATOMIC_RELAXED);
  __atomic_store_n(&e->corr, corr, __ATOMIC_RELEASE);
}
static uint64_t fbx__tag_of(uint32_t corr) {
  const fbx__corr *e = &g_cu.ring[corr & (FBX__CUPTI_RING - 1)];
  return __atomic_load_n(&e->corr, __ATOMIC_ACQUIRE) == corr ? __atomic_load_n(&e->tag, __ATOMIC_RELAXED) : 0;
}

/* ---- callback mode: the launching API calls ---- */
#define FBX__RT(x) {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##x, 'k'}
#define FBX__DR(x) {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##x, 'k'}
#define FBX__RTC(x) {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##x, 'c'}
#define FBX__DRC(x) {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##x, 'c'}
#define FBX__RTG(x) {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_##x, 'g'}
#define FBX__DRG(x) {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_##x, 'g'}
/* kind: 'k' a kernel launch, 'c' a copy or memset, 'g' a graph launch (not counted) */
static const struct { CUpti_CallbackDomain dom; CUpti_CallbackId cbid; char kind; } fbx__launch_cbids[] = {
    FBX__RT(cudaLaunchKernel_v7000), FBX__RT(cudaLaunchKernel_ptsz_v7000), FBX__RT(cudaLaunchKernelExC_v11060),
    FBX__RT(cudaLaunchKernelExC_ptsz_v11060), FBX__RT(cudaLaunchCooperativeKernel_v9000),
    FBX__RT(cudaLaunchCooperativeKernel_ptsz_v9000), FBX__RTC(cudaMemcpyAsync_v3020),
    FBX__RTC(cudaMemcpyAsync_ptsz_v7000), FBX__RTC(cudaMemcpy2DAsync_v3020), FBX__RTC(cudaMemcpy2DAsync_ptsz_v7000),
    FBX__RTC(cudaMemcpy3DAsync_v3020), FBX__RTC(cudaMemcpy3DAsync_ptsz_v7000), FBX__RTC(cudaMemsetAsync_v3020),
    FBX__RTC(cudaMemsetAsync_ptsz_v7000), FBX__RTC(cudaMemset2DAsync_v3020), FBX__RTC(cudaMemset2DAsync_ptsz_v7000),
    FBX__RTG(cudaGraphLaunch_v10000), FBX__RTG(cudaGraphLaunch_ptsz_v10000),
    FBX__DR(cuLaunchKernel), FBX__DR(cuLaunchKernel_ptsz), FBX__DR(cuLaunchKernelEx), FBX__DR(cuLaunchKernelEx_ptsz),
    FBX__DR(cuLaunchCooperativeKernel), FBX__DR(cuLaunchCooperativeKernel_ptsz), FBX__DRC(cuMemcpyAsync),
    FBX__DRC(cuMemcpyAsync_ptsz), FBX__DRC(cuMemcpyHtoDAsync_v2), FBX__DRC(cuMemcpyHtoDAsync_v2_ptsz),
    FBX__DRC(cuMemcpyDtoHAsync_v2), FBX__DRC(cuMemcpyDtoHAsync_v2_ptsz), FBX__DRC(cuMemcpyDtoDAsync_v2),
    FBX__DRC(cuMemcpyDtoDAsync_v2_ptsz), FBX__DRC(cuMemcpy2DAsync_v2), FBX__DRC(cuMemcpy2DAsync_v2_ptsz),
    FBX__DRC(cuMemcpy3DAsync_v2), FBX__DRC(cuMemcpy3DAsync_v2_ptsz), FBX__DRC(cuMemsetD8Async),
    FBX__DRC(cuMemsetD8Async_ptsz), FBX__DRC(cuMemsetD16Async), FBX__DRC(cuMemsetD16Async_ptsz),
    FBX__DRC(cuMemsetD32Async), FBX__DRC(cuMemsetD32Async_ptsz), FBX__DRC(cuMemsetD2D8Async),
    FBX__DRC(cuMemsetD2D8Async_ptsz), FBX__DRC(cuMemsetD2D32Async), FBX__DRC(cuMemsetD2D32Async_ptsz),
    FBX__DRG(cuGraphLaunch), FBX__DRG(cuGraphLaunch_ptsz),
};
#define FBX__N_LAUNCH_CBIDS (sizeof fbx__launch_cbids / sizeof fbx__launch_cbids[0])

/* kind byte per callback id and domain (0: not a launch), filled at subscribe */
enum { FBX__CBID_MAX = 2048 };
static char g_kind_rt[FBX__CBID_MAX], g_kind_dr[FBX__CBID_MAX];

/* Detaching CUPTI (cuptiFinalize) once recording is off for good: with its kinds and our callbacks
 * disabled, a CUPTI that stays attached still cost a launch-bound decode +8% (the least disturbed
 * processes) to +20-30% (medians) on the H200 (the generated decoders after FUSEBOX_GPU_DETAIL's
 * window; trace on without CUPTI: +2.5%; detached: +0-5%, bench/RESULTS.md "Session 11").
 * CUPTI documents cuptiFinalize as safe at the exit of a CUDA API call's callback, so
 * activity_enable(false) calls cudaGetDevice with that callback on, and it flushes what is
 * recorded (to the sink) and finalizes there, on the switching thread (under switch_mu, not mu:
 * the flush's buffer_completed takes mu). A later enable attaches again from scratch. */
static void fbx__detach(void) {
  g_cu.detach = 0;
  g_cu.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (g_cu.finalize() != CUPTI_SUCCESS) return; /* still attached, kinds and callbacks off */
  g_cu.sub = NULL;
  g_cu.registered = 0;
}

/* The launching thread, on entry to and exit from one of fbx__launch_cbids. */
static void CUPTIAPI fbx__api_callback(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data) {
  (void)ud;
  if (dom != CUPTI_CB_DOMAIN_RUNTIME_API && dom != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const CUpti_CallbackData *d = data;
  fbx__cupti_thread *t = &tl_cu;
  if (dom == CUPTI_CB_DOMAIN_RUNTIME_API && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020) {
    if (d->callbackSite == CUPTI_API_EXIT && g_cu.detach) fbx__detach(); /* activity_enable(false)'s own call */
    return;
  }
  if (d->callbackSite == CUPTI_API_EXIT) {
    if (t->depth > 0) t->depth--;
    return;
  }
  if (t->depth++ == 0 && cbid < FBX__CBID_MAX) { /* the outermost launch call: one launch (a runtime launch
                                                    enters the driver's too) */
    char k = dom == CUPTI_CB_DOMAIN_RUNTIME_API ? g_kind_rt[cbid] : g_kind_dr[cbid];
    if (k == 'k') t->kernels++;
    else if (k == 'c') t->copies++;
  }
  if (!t->tag) return;
  if (!d->correlationId) __atomic_add_fetch(&g_cu.cb_no_corr, 1, __ATOMIC_RELAXED);
  fbx__ring_put(d->correlationId, t->tag); /* both ids (runtime, driver): a record carries one of them */
}

/* The fields that kernel, memcpy and memset records share, by the same names (CUPTI's
 * record structs differ in layout): timing, stream, launch correlation, graph membership. */
#define FBX__WORK_RECORD(a, rec, k)                                                                        \
  do {                                                                                                     \
    (a).kind = (k);                                                                                        \
    (a).start_ns = (rec)->start;                                                                           \
    (a).end_ns = (rec)->end;                                                                               \
    (a).stream = (rec)->streamId;                                                                          \
    (a).correlation = (rec)->correlationId;                                                                \
    (a).graph = (rec)->graphId != 0;                                                                       \
  } while (0)

/* CUPTI's thread: one completed buffer. In extcorr mode external correlation
 * records precede their API record, which precedes the work it launched: a
 * single pass sees the tag before the kernel. */
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
        if (x->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) fbx__ring_put(x->correlationId, x->externalId);
        continue;
      }
      case CUPTI_ACTIVITY_KIND_GRAPH_TRACE: {
        const CUpti_ActivityGraphTrace2 *gt = (const void *)r;
        FBX__WORK_RECORD(a, gt, FBX_DEVACT_GRAPH);
        a.graph = true;
        break;
      }
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const void *)r;
        FBX__WORK_RECORD(a, k, FBX_DEVACT_KERNEL);
        a.name = k->name; /* CUPTI keeps kernel names for the process' lifetime */
        a.grid[0] = k->gridX, a.grid[1] = k->gridY, a.grid[2] = k->gridZ;
        a.block[0] = k->blockX, a.block[1] = k->blockY, a.block[2] = k->blockZ;
        a.registers = k->registersPerThread;
        a.shared_bytes = k->staticSharedMemory + k->dynamicSharedMemory;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const void *)r;
        FBX__WORK_RECORD(a, m, FBX_DEVACT_MEMCPY);
        a.bytes = m->bytes;
        a.copy_kind = m->copyKind;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const void *)r;
        FBX__WORK_RECORD(a, m, FBX_DEVACT_MEMSET);
        a.bytes = m->bytes;
        break;
      }
      default:
        continue; /* RUNTIME records (extcorr mode): only there for the external correlation */
    }
    if (g_cu.graphs_whole && a.graph && a.kind != FBX_DEVACT_GRAPH) continue; /* the replay's own record counts */
    a.tag = fbx__tag_of(a.correlation);
    if (!a.tag) { /* not our work (ORT's own kernels), or a tag lost */
      g_cu.rec_untagged++;
      continue;
    }
    g_cu.rec_tagged++;
    a.start_ns = (uint64_t)((int64_t)a.start_ns + g_cu.ts_offset);
    a.end_ns = (uint64_t)((int64_t)a.end_ns + g_cu.ts_offset);
    fbx__q_push(&a);
  }
  pthread_mutex_unlock(&g_cu.mu);
  fbx__buf_recycle(buffer);
}

#define FBX__SYM(field, name, required)                                      \
  do {                                                                       \
    g_cu.field = (typeof(g_cu.field))dlsym(g_cu.lib, name);                  \
    if (!g_cu.field && (required)) ok = 0;                                   \
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
  FBX__SYM(enable, "cuptiActivityEnable", 1);
  FBX__SYM(disable, "cuptiActivityDisable", 1);
  FBX__SYM(reg, "cuptiActivityRegisterCallbacks", 1);
  FBX__SYM(flush_all, "cuptiActivityFlushAll", 1);
  FBX__SYM(flush_period, "cuptiActivityFlushPeriod", 1);
  FBX__SYM(next, "cuptiActivityGetNextRecord", 1);
  FBX__SYM(push, "cuptiActivityPushExternalCorrelationId", 1);
  FBX__SYM(pop, "cuptiActivityPopExternalCorrelationId", 1);
  FBX__SYM(reg_ts, "cuptiActivityRegisterTimestampCallback", 0);
  FBX__SYM(get_ts, "cuptiGetTimestamp", 1);
  FBX__SYM(result_string, "cuptiGetResultString", 1);
  FBX__SYM(subscribe, "cuptiSubscribe", 0);
  FBX__SYM(finalize, "cuptiFinalize", 0);
  FBX__SYM(enable_cb, "cuptiEnableCallback", 0);
  FBX__SYM(set_attr, "cuptiActivitySetAttribute", 0);
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

/* Under g_cu.mu, once: callback mode if asked for (the default) and CUPTI's
 * one subscriber is free, else extcorr. */
static void fbx__corr_mode_pick(void) {
  const char *env = getenv("FUSEBOX_CUPTI_CORR");
  bool want_cb = !(env && !strcmp(env, "extcorr"));
  g_cu.mode = FBX__CORR_EXTCORR;
  if (!want_cb || !g_cu.subscribe || !g_cu.enable_cb) return;
  if (g_cu.subscribe(&g_cu.sub, (CUpti_CallbackFunc)fbx__api_callback, NULL) != CUPTI_SUCCESS) {
    fprintf(stderr, "[fusebox] CUPTI's callback subscriber is taken (another tool?): kernels are attributed through "
                    "runtime API records (costlier)\n");
    return;
  }
  for (size_t i = 0; i < FBX__N_LAUNCH_CBIDS; i++) {
    CUpti_CallbackId id = fbx__launch_cbids[i].cbid;
    if (id < FBX__CBID_MAX)
      (fbx__launch_cbids[i].dom == CUPTI_CB_DOMAIN_RUNTIME_API ? g_kind_rt : g_kind_dr)[id] = fbx__launch_cbids[i].kind;
    g_cu.enable_cb(1, g_cu.sub, fbx__launch_cbids[i].dom, id); /* an id this CUPTI lacks: skipped */
  }
  g_cu.mode = FBX__CORR_CALLBACK;
}

static const CUpti_ActivityKind fbx__kinds_work[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                                     CUPTI_ACTIVITY_KIND_MEMSET};
static const CUpti_ActivityKind fbx__kinds_extcorr[] = {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                                        CUPTI_ACTIVITY_KIND_RUNTIME};

static void fbx__kinds_disable(void) {
  for (size_t i = 0; i < sizeof fbx__kinds_work / sizeof fbx__kinds_work[0]; i++) g_cu.disable(fbx__kinds_work[i]);
  if (g_cu.graphs_whole) g_cu.disable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
  if (g_cu.mode == FBX__CORR_EXTCORR)
    for (size_t i = 0; i < sizeof fbx__kinds_extcorr / sizeof fbx__kinds_extcorr[0]; i++)
      g_cu.disable(fbx__kinds_extcorr[i]);
}

/* Callback mode: the launch callbacks on or off (off while recording is off: a subscribed
 * CUPTI still costs every launch its callbacks). Under g_cu.mu. */
static void fbx__callbacks_set(int on) {
  if (g_cu.mode != FBX__CORR_CALLBACK) return;
  for (size_t i = 0; i < FBX__N_LAUNCH_CBIDS; i++)
    g_cu.enable_cb((uint32_t)on, g_cu.sub, fbx__launch_cbids[i].dom, fbx__launch_cbids[i].cbid);
}

static fbx_status *fbx__cuda_activity_enable(fbx_backend *be, bool on) {
  fbx_cuda_ctx *c = be->ctx;
  pthread_mutex_lock(&g_cu.switch_mu);
  pthread_mutex_lock(&g_cu.mu);
  fbx_status *st = NULL;
  if (on && !g_cu.state) fbx__cupti_load();
  if (on && g_cu.state != 1) {
    st = FBX_ERR_NOTIMPL("%s", g_cu.why);
  } else if (on && !g_cu.enabled) {
    CUptiResult r = CUPTI_SUCCESS;
    if (!g_cu.registered) {
      if (g_cu.reg_ts && g_cu.reg_ts(fbx__cupti_clock) == CUPTI_SUCCESS) {
        g_cu.ts_offset = 0;
      } else {
        uint64_t t = 0;
        g_cu.get_ts(&t);
        g_cu.ts_offset = (int64_t)fbx__mono_ns() - (int64_t)t;
      }
      fbx__buf_pool_fill();
      r = g_cu.reg(fbx__buf_requested, fbx__buf_completed);
      if (r == CUPTI_SUCCESS) g_cu.registered = 1;
      fbx__corr_mode_pick();
      const char *gr = getenv("FUSEBOX_CUPTI_GRAPHS");
      g_cu.graphs_whole = gr && !strcmp(gr, "whole");
    } else {
      fbx__callbacks_set(1); /* switched off by an earlier activity_enable(false) */
    }
    if (g_cu.mode == FBX__CORR_EXTCORR)
      for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof fbx__kinds_extcorr / sizeof fbx__kinds_extcorr[0]; i++)
        r = g_cu.enable(fbx__kinds_extcorr[i]);
    for (size_t i = 0; r == CUPTI_SUCCESS && i < sizeof fbx__kinds_work / sizeof fbx__kinds_work[0]; i++)
      r = g_cu.enable(fbx__kinds_work[i]);
    if (r == CUPTI_SUCCESS && g_cu.graphs_whole && g_cu.enable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE) != CUPTI_SUCCESS) {
      fprintf(stderr, "[fusebox] FUSEBOX_CUPTI_GRAPHS=whole: CUPTI has no graph-level records here; replays are "
                      "traced per node\n");
      g_cu.graphs_whole = 0;
    }
    if (r == CUPTI_SUCCESS) {
      g_cu.flush_period(100); /* partial buffers reach buffer_completed at least every 100 ms */
      g_cu.enabled = 1;
      __atomic_add_fetch(&g_cu.generation, 1, __ATOMIC_RELAXED);
    } else {
      fbx__kinds_disable();
      st = FBX_ERR_NOTIMPL("device 'cuda': CUPTI activity could not be enabled: %s", fbx__cupti_err(r));
    }
  } else if (!on && g_cu.enabled) {
    fbx__kinds_disable();
    fbx__callbacks_set(0);
    g_cu.enabled = 0;
    __atomic_add_fetch(&g_cu.generation, 1, __ATOMIC_RELAXED);
    g_cu.detach = g_cu.mode == FBX__CORR_CALLBACK && g_cu.finalize && g_cu.sub &&
                  g_cu.enable_cb(1, g_cu.sub, CUPTI_CB_DOMAIN_RUNTIME_API,
                                 CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020) == CUPTI_SUCCESS;
  }
  pthread_mutex_unlock(&g_cu.mu);
  if (g_cu.detach) { /* fbx__detach runs in its exit callback, once the work recorded so far is done */
    int dev = 0;
    fbx_cuda_lock(c);
    cudaSetDevice(c->device);
    cudaStreamSynchronize(c->stream);
    pthread_mutex_unlock(&c->lock);
    cudaGetDevice(&dev);
    if (g_cu.detach) { /* the callback never came: stay attached, that callback off */
      g_cu.detach = 0;
      g_cu.enable_cb(0, g_cu.sub, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020);
    }
  }
  pthread_mutex_unlock(&g_cu.switch_mu);
  return st;
}

uint64_t fbx_cuda_activity_generation(void) { return __atomic_load_n(&g_cu.generation, __ATOMIC_RELAXED); }

static void fbx__cuda_activity_tag(fbx_backend *be, uint64_t tag) {
  (void)be;
  if (g_cu.state != 1) return;
  fbx__cupti_thread *t = &tl_cu;
  if (g_cu.mode == FBX__CORR_CALLBACK) { /* the callback reads it: a store, no CUPTI call */
    t->tag = tag;
    return;
  }
  uint64_t last = 0;
  if (t->pushed) g_cu.pop(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
  t->pushed = tag != 0 && g_cu.push(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, tag) == CUPTI_SUCCESS;
}

static bool fbx__cuda_activity_counts(fbx_backend *be, uint64_t *kernels, uint64_t *copies) {
  (void)be;
  if (g_cu.state != 1 || g_cu.mode != FBX__CORR_CALLBACK) return false;
  *kernels = tl_cu.kernels;
  *copies = tl_cu.copies;
  return true;
}

static void fbx__cuda_activity_sink(fbx_backend *be, fbx_device_activity_fn fn, void *ctx) {
  (void)be;
  pthread_mutex_lock(&g_cu.mu);
  g_cu.sink = fn;
  g_cu.sink_ctx = ctx;
  pthread_mutex_unlock(&g_cu.mu);
}

static const char *fbx__cuda_activity_mode(fbx_backend *be) {
  (void)be;
  if (g_cu.state != 1) return "none";
  if (g_cu.mode == FBX__CORR_CALLBACK) return g_cu.graphs_whole ? "callback, whole graphs" : "callback";
  return g_cu.graphs_whole ? "extcorr, whole graphs" : "extcorr";
}

/* Callback mode: once, if the launches' callbacks carried no correlation id or no record found
 * its tag although many arrived, say so (the way out: FUSEBOX_CUPTI_CORR=extcorr). Under g_cu.mu. */
static void fbx__corr_selfcheck(void) {
  if (g_cu.mode != FBX__CORR_CALLBACK || g_cu.warned) return;
  uint64_t zero = __atomic_load_n(&g_cu.cb_no_corr, __ATOMIC_RELAXED);
  if (zero || (g_cu.rec_untagged >= 1000 && !g_cu.rec_tagged)) {
    fprintf(stderr, "[fusebox] CUPTI callback correlation: %llu launch(es) without a correlation id, %llu record(s) "
                    "matched and %llu not: device time may be missing; FUSEBOX_CUPTI_CORR=extcorr uses runtime API "
                    "records instead\n", (unsigned long long)zero, (unsigned long long)g_cu.rec_tagged,
            (unsigned long long)g_cu.rec_untagged);
    g_cu.warned = 1;
  }
}

static fbx_status *fbx__cuda_activity_drain(fbx_backend *be, bool flush, fbx_device_activity_fn fn, void *ctx) {
  if (g_cu.state != 1) return NULL;
  if (flush && g_cu.registered) { /* detached: everything was flushed then (a CUPTI call would attach again) */
    fbx_cuda_ctx *c = be->ctx;
    fbx_cuda_lock(c);
    cudaSetDevice(c->device);
    cudaStreamSynchronize(c->stream);
    pthread_mutex_unlock(&c->lock);
    g_cu.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); /* buffer_completed runs before this returns */
  }
  pthread_mutex_lock(&g_cu.mu);
  if (flush) fbx__corr_selfcheck();
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
    .activity_sink = fbx__cuda_activity_sink,
    .activity_counts = fbx__cuda_activity_counts,
    .activity_mode = fbx__cuda_activity_mode,
};

fbx_status *fbx_cuda_mem_info(fbx_backend *be, size_t *free_bytes, size_t *total_bytes) {
  fbx_cuda_ctx *c = be->ctx;
  cudaSetDevice(c->device);
  return fbx_cuda_check(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo");
}
