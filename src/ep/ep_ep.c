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
  if (!st) st = fbx_ep_options_validate(o);
  return st;
}

/* The session's backend. FUSEBOX_TEST_BACKEND (a test aid, see README) swaps
 * the CPU backend for the opaque one, whose buffers the host cannot read:
 * "opaque", or "opaque:decline=<IR op>" to have its supports() refuse an op. */
static fbx_status *create_backend(const fbx_ep_options *opt, fbx_backend **out) {
  *out = NULL;
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

fbx_status *fbx_ep_create(fbx_ep_factory *f, const OrtSessionOptions *so, const OrtLogger *logger,
                          fbx_ep **out) {
  *out = NULL;
  fbx_ep_options opt;
  FBX_TRY(fbx_ep_options_from_session(so, &opt));
  fbx_ep *ep = fbx_calloc(1, sizeof *ep);
  if (!ep) return FBX_ERR_OOM();
  ep->factory = f;
  ep->opt = opt;
  ep->logger = logger;
  fbx_status *st = create_backend(&opt, &ep->backend);
  if (!st && !ep->backend->vt->host_visible) { /* plan-time host work: folding, shape data */
    fbx_cpu_options hopt = {.threads = 1};
    st = fbx_cpu_backend_create(&hopt, &ep->host_backend);
  }
  if (st) {
    fbx_backend_destroy(ep->backend);
    fbx_free(ep);
    return st;
  }
  ep->trace = fbx_trace_session_create(FBX_EP_NAME);
  OrtEp *b = &ep->base;
  b->ort_version_supported = ORT_API_VERSION;
  b->GetName = ep_get_name;
  b->GetCapability = fbx_ep_get_capability;
  b->Compile = fbx_ep_compile;
  b->ReleaseNodeComputeInfos = fbx_ep_release_node_compute_infos;
  /* ORT's own profiler: our spans land in ORT's profile JSON (src/ep/ep_profiler.c). */
  b->CreateProfiler = ep_create_profiler;
  /* Everything else optional stays NULL (NCHW layout, no allocator, no streams). */
  *out = ep;
  return NULL;
}

void fbx_ep_destroy(fbx_ep *ep) {
  if (!ep) return;
  fbx_exec_gpuobs_finish(ep->backend); /* device activity still buffered -> the trace (GPU backends) */
  fbx_trace_session_destroy(ep->trace); /* prints the summary when tracing is on */
  fbx_backend_destroy(ep->backend);
  fbx_backend_destroy(ep->host_backend);
  fbx_free(ep);
}
