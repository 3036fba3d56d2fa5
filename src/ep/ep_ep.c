/* The OrtEp: one per session. Owns the backend and the trace session. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../backend/backend_cuda.h"
#include "../base/alloc.h"
#include "../exec/exec_gpuobs.h"
#include "ep_internal.h"
#include "ep_profiler.h"

static const char *ORT_API_CALL ep_get_name(const OrtEp *this_ptr) { return FBX_EP_NAME; }

/* The session's stream for one GPU memory ORT uses: a stream of that GPU when the session runs
 * there, else (the session runs on the CPU, but was given a GPU OrtEpDevice too) a host stream
 * that queues nothing: ORT insists on a stream per GPU memory info it knows. */
static OrtStatus *ORT_API_CALL ep_create_sync_stream(OrtEp *this_ptr, const OrtMemoryDevice *md,
                                                     OrtSyncStreamImpl **stream) {
  fbx_ep *ep = (fbx_ep *)this_ptr;
  fbx_ep_gpu *g = fbx_ep_factory_gpu_of_memory(ep->factory, md);
  return fbx_ep_status_to_ort(fbx_ep_stream_create(g && g == ep->gpu ? g : NULL, stream));
}

static OrtStatus *ORT_API_CALL ep_create_profiler(OrtEp *this_ptr, OrtEpProfilerImpl **out) {
  return fbx_ep_profiler_create(FBX_ORT, FBX_ORT_EP, ((fbx_ep *)this_ptr)->trace, out);
}

fbx_status *fbx_ep_options_from_session(const OrtSessionOptions *so, fbx_ep_options *o) {
  fbx_ep_options_default(o);
  if (!so) return NULL;
  OrtKeyValuePairs *kv = NULL;
  FBX_ORT_TRY(FBX_ORT->GetSessionOptionsConfigEntries(so, &kv));
  if (!kv) return NULL;
  const char *const *keys = NULL, *const *values = NULL;
  size_t n = 0;
  FBX_ORT->GetKeyValuePairs(kv, &keys, &values, &n);
  const size_t plen = strlen(FBX_EP_OPTION_PREFIX);
  fbx_status *st = NULL;
  for (size_t i = 0; i < n && !st; i++) {
    /* ORT lower-cases the EP name in the prefix; compare case-insensitively anyway. */
    if (!keys[i] || strncasecmp(keys[i], FBX_EP_OPTION_PREFIX, plen) != 0) continue;
    st = fbx_ep_options_set(o, keys[i] + plen, values[i]);
  }
  FBX_ORT->ReleaseKeyValuePairs(kv);
  return st;
}

/* Which device the session runs on, given the OrtEpDevices ORT passed (gpu: ours among
 * them, has_cpu: the CPU one too) and the options: only a GPU device -> that GPU (device
 * may be left out or be 'cuda'); the CPU and a GPU device -> the GPU when device=cuda; only
 * the CPU device -> the CPU, or with device=cuda a GPU whose inputs and outputs are host
 * memory, copied each run (the first step of the CUDA backend). *use_gpu: run on gpu's memory. */
static fbx_status *resolve_device(fbx_ep_options *opt, fbx_ep_gpu *gpu, bool has_cpu, bool *use_gpu) {
  *use_gpu = false;
  if (gpu && !has_cpu && opt->device_set && opt->device == FBX_EP_DEVICE_CPU)
    return FBX_ERR_ARG("Fusebox: bad value 'cpu' for EP option 'device' (accepted: cuda, or leave it out): the session "
                       "was given only Fusebox's GPU OrtEpDevice (%s %d); append its CPU OrtEpDevice to run on the CPU",
                       fbx_ep_gpu_kind_name(gpu->kind), gpu->ordinal);
  if (gpu && (!has_cpu || opt->device == FBX_EP_DEVICE_CUDA)) {
    if (opt->device_id_set && opt->device_id != gpu->ordinal)
      return FBX_ERR_ARG("Fusebox: bad value '%d' for EP option 'device_id' (accepted: %d, the GPU of the OrtEpDevice "
                         "this session was given; append another GPU's OrtEpDevice to run there)",
                         opt->device_id, gpu->ordinal);
    opt->device = FBX_EP_DEVICE_CUDA;
    opt->device_id = gpu->ordinal;
    *use_gpu = true;
  }
  FBX_TRY(fbx_ep_options_validate(opt));
  if (*use_gpu || opt->device != FBX_EP_DEVICE_CUDA) return NULL;
  /* device=cuda on the CPU device: device_id is a CUDA ordinal of this machine */
  int n = fbx_cuda_device_count(NULL);
  if (!n) return NULL; /* no library, driver or GPU: opening the backend says which, in detail */
  if (opt->device_id >= n)
    return FBX_ERR_ARG("Fusebox: bad value '%d' for EP option 'device_id' (accepted: 0..%d: this machine has %d CUDA "
                       "device%s)", opt->device_id, n - 1, n, n == 1 ? "" : "s");
  return NULL;
}

/* The session's backend. FUSEBOX_TEST_BACKEND (a test aid, see README) swaps
 * the CPU backend for the opaque one, whose buffers the host cannot read:
 * "opaque", or "opaque:decline=<IR op>" to have its supports() refuse an op. */
static fbx_status *create_backend(const fbx_ep_options *opt, const fbx_ep_gpu *gpu, fbx_backend **out) {
  *out = NULL;
  if (gpu && gpu->kind == FBX_EP_GPU_SIM) { /* the simulated GPU: the opaque backend, on ORT's buffers */
    fbx_opaque_options oo = {.threads = opt->threads, .decline_op = -1};
    return fbx_opaque_backend_create(&oo, out);
  }
  if (opt->device == FBX_EP_DEVICE_CUDA) {
    /* dlopens libfusebox_cuda.so next to this library; a clear error without library, driver or GPU */
    fbx_cuda_options cuo = {.device_id = opt->device_id, .tf32 = opt->tf32};
    return fbx_cuda_backend_open(&cuo, out);
  }
  const char *tb = getenv("FUSEBOX_TEST_BACKEND");
  if (!tb || !tb[0] || strcmp(tb, "cpu") == 0) {
    fbx_cpu_options copt = {.threads = opt->threads};
    return fbx_cpu_backend_create(&copt, out);
  }
  if (strncmp(tb, "opaque", 6) != 0 || (tb[6] && strncmp(tb + 6, ":decline=", 9) != 0))
    return FBX_ERR_ARG("Fusebox: bad FUSEBOX_TEST_BACKEND '%s' (accepted: cpu, opaque, opaque:decline=<IR op>)", tb);
  fbx_opaque_options oo = {.threads = opt->threads, .decline_op = -1};
  if (tb[6]) {
    const char *op = tb + 15;
    for (int i = 0; i < FBX_IR_OP_COUNT && oo.decline_op < 0; i++)
      if (strcasecmp(op, fbx_ir_op_name((fbx_ir_op)i)) == 0) oo.decline_op = i;
    if (oo.decline_op < 0) return FBX_ERR_ARG("Fusebox: FUSEBOX_TEST_BACKEND: unknown IR op '%s'", op);
  }
  return fbx_opaque_backend_create(&oo, out);
}

/* The memory ORT should place this EP's inputs and outputs in: the GPU's when the session
 * runs on one (needed when the CPU OrtEpDevice was given too: ORT would otherwise infer it
 * from the first device); NULL = ORT's default (the CPU). */
static OrtStatus *ORT_API_CALL ep_get_default_memory_device(const OrtEp *this_ptr, const OrtMemoryDevice **device) {
  const fbx_ep *ep = (const fbx_ep *)this_ptr;
  *device = ep->gpu ? ep->gpu->md_device : NULL;
  return NULL;
}

fbx_status *fbx_ep_create(fbx_ep_factory *f, fbx_ep_gpu *gpu, bool has_cpu, const OrtSessionOptions *so,
                          const OrtLogger *logger, fbx_ep **out) {
  *out = NULL;
  fbx_ep_options opt;
  bool use_gpu = false;
  FBX_TRY(fbx_ep_options_from_session(so, &opt));
  FBX_TRY(resolve_device(&opt, gpu, has_cpu, &use_gpu));
  fbx_ep *ep = fbx_calloc(1, sizeof *ep);
  if (!ep) return FBX_ERR_OOM();
  ep->factory = f;
  ep->opt = opt;
  ep->logger = logger;
  ep->gpu = use_gpu ? gpu : NULL;
  fbx_status *st = create_backend(&opt, ep->gpu, &ep->backend);
  if (!st && !ep->backend->vt->host_visible) { /* plan-time host work: folding, shape data */
    fbx_cpu_options hopt = {.threads = 1};
    st = fbx_cpu_backend_create(&hopt, &ep->host_backend);
  }
  if (st) {
    fbx_backend_destroy(ep->backend);
    fbx_free(ep);
    return st;
  }
  pthread_mutex_init(&ep->stream_mu, NULL);
  ep->trace = fbx_trace_session_create(FBX_EP_NAME);
  OrtEp *b = &ep->base;
  b->ort_version_supported = ORT_API_VERSION;
  b->GetName = ep_get_name;
  b->GetCapability = fbx_ep_get_capability;
  b->Compile = fbx_ep_compile;
  b->ReleaseNodeComputeInfos = fbx_ep_release_node_compute_infos;
  /* ORT's own profiler: our spans land in ORT's profile JSON (src/ep/ep_profiler.c). */
  b->CreateProfiler = ep_create_profiler;
  b->GetDefaultMemoryDevice = ep_get_default_memory_device;
  b->CreateSyncStreamForDevice = ep_create_sync_stream; /* asked only when the factory is stream aware */
  /* Everything else optional stays NULL (NCHW layout; allocators come from the factory). */
  *out = ep;
  return NULL;
}

void fbx_ep_destroy(fbx_ep *ep) {
  if (!ep) return;
  fbx_exec_gpuobs_finish(ep->backend); /* device activity still buffered -> the trace (GPU backends) */
  fbx_trace_session_destroy(ep->trace); /* prints the summary when tracing is on */
  fbx_backend_destroy(ep->backend);
  fbx_backend_destroy(ep->host_backend);
  pthread_mutex_destroy(&ep->stream_mu);
  fbx_free(ep);
}
