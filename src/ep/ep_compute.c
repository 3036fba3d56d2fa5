/* Compute: wrap ORT's input buffers (no copy), run the compiled subgraph,
 * let it write straight into ORT's output buffers. On a GPU OrtEpDevice,
 * ORT's buffers are our device memory (our allocator: IOBinding's, or ORT's
 * copies through our data transfer): device inputs are wrapped as device
 * buffers and outputs written on the device, no host round trip. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ep_internal.h"

OrtStatus *ORT_API_CALL fbx_ep_kernel_create_state(OrtNodeComputeInfo *this_ptr, OrtNodeComputeContext *ctx,
                                                   void **state) {
  *state = this_ptr; /* all state lives in the kernel; Compute serialises on its mutex */
  return NULL;
}

void ORT_API_CALL fbx_ep_kernel_release_state(OrtNodeComputeInfo *this_ptr, void *state) {}

/* Input i as a host tensor pointing at ORT's buffer. Absent optional: rank -1, data NULL.
 * An OrtValue that holds nothing is a graph input the host did not feed: an error
 * that names it (desc, from Compile), where ORT's own text would name no input. */
static fbx_status *wrap_input(const fbx_ep_gpu *gpu, OrtKernelContext *kctx, size_t i, const char *desc, fbx_tensor *t,
                              bool *on_device) {
  memset(t, 0, sizeof *t);
  *on_device = false;
  const OrtValue *v = NULL;
  FBX_ORT_TRY(FBX_ORT->KernelContext_GetInput(kctx, i, &v));
  if (!v) {
    t->rank = -1;
    return NULL;
  }
  int has = 0, is_tensor = 0;
  FBX_ORT_TRY(FBX_ORT->HasValue(v, &has));
  if (!has) return FBX_ERR_ARG("input %zu, %s, has no value at Run: was it given in the feeds?", i, desc);
  FBX_ORT_TRY(FBX_ORT->IsTensor(v, &is_tensor));
  if (!is_tensor) return FBX_ERR_ARG("input %zu, %s, is not a tensor", i, desc);
  int et = 0;
  size_t rank = 0;
  FBX_TRY(fbx_ep_value_type_shape(v, &et, t->dims, &rank, "reading an input's shape"));
  if (rank > FBX_MAX_RANK) return FBX_ERR_ARG("input %zu has rank %zu (max %d)", i, rank, FBX_MAX_RANK);
  if (!fbx_dtype_is_valid(et)) return FBX_ERR_ARG("input %zu has unsupported element type %d", i, et);
  t->dtype = (fbx_dtype)et;
  t->rank = (int)rank;
  const void *p = NULL;
  FBX_ORT_TRY(FBX_ORT->GetTensorData(v, &p));
  t->data = (void *)p; /* read only: the executor never writes graph inputs */
  if (gpu) {
    const OrtMemoryDevice *md = FBX_ORT_EP->Value_GetMemoryDevice(v);
    *on_device = fbx_ep_gpu_owns(gpu, md);
    /* else host memory (CPU or pinned): uploaded as on the CPU device; anything else we cannot read */
    if (!*on_device && md && FBX_ORT_EP->MemoryDevice_GetDeviceType(md) != OrtMemoryInfoDeviceType_CPU &&
        FBX_ORT_EP->MemoryDevice_GetMemoryType(md) != OrtDeviceMemoryType_HOST_ACCESSIBLE)
      return FBX_ERR_ARG("input %zu, %s, is in another device's memory (vendor 0x%x, device %u)", i, desc,
                         FBX_ORT_EP->MemoryDevice_GetVendorId(md), FBX_ORT_EP->MemoryDevice_GetDeviceId(md));
  }
  return NULL;
}

/* Output binding context: ORT's kernel context, the kernel (its inputs: this
 * run's wrapped input tensors) and, on a GPU device, the memory the outputs
 * must be in (ORT allocates them with our device allocator). */
typedef struct out_ctx {
  OrtKernelContext *kctx;
  const fbx_ep_kernel *k;
  const fbx_ep_gpu *gpu;
} out_ctx;

/* Is ORT's output buffer `data` (of `shape`) the very memory of one of this
 * run's inputs? IOBinding lets the host bind an output to an input's buffer
 * (ORT GenAI binds present.* to past_key_values.* with a max-length
 * capacity): same data pointer, dtype and shape. -1 when not. A plain fact
 * for the executor, which decides what to do with it. */
static int bind_same_as_input(const fbx_ep_kernel *k, const fbx_tensor *shape, const void *data) {
  if (!data || !fbx_tensor_nbytes(shape)) return -1;
  for (int i = 0; i < k->n_inputs; i++) {
    const fbx_tensor *t = &k->inputs[i];
    if (t->data == data && t->dtype == shape->dtype && t->rank == shape->rank &&
        memcmp(t->dims, shape->dims, sizeof(int64_t) * (size_t)(t->rank > 0 ? t->rank : 0)) == 0)
      return i;
  }
  return -1;
}

static fbx_status *bind_output(void *ctx, int index, const fbx_tensor *shape, void **data, int *same_as_input) {
  out_ctx *oc = ctx;
  OrtValue *ov = NULL;
  FBX_ORT_TRY(FBX_ORT->KernelContext_GetOutput(oc->kctx, (size_t)index, shape->dims, (size_t)shape->rank, &ov));
  if (!ov) return FBX_ERR("output %d: ORT returned no buffer", index);
  FBX_ORT_TRY(FBX_ORT->GetTensorMutableData(ov, data));
  if (oc->gpu && !fbx_ep_gpu_owns(oc->gpu, FBX_ORT_EP->Value_GetMemoryDevice(ov)))
    return FBX_ERR("output %d: ORT gave a buffer outside the GPU's memory (expected %s %d)", index,
                   fbx_ep_gpu_kind_name(oc->gpu->kind), oc->gpu->ordinal);
  *same_as_input = bind_same_as_input(oc->k, shape, *data);
  return NULL;
}

static void trace_run(fbx_ep_kernel *k, const fbx_exec_run_report *r, uint64_t t0, uint64_t t1) {
  fbx_trace_session *s = k->ep->trace;
  const char *path = fbx_exec_path_name(r->path);
  const char *cache = r->cache == FBX_EXEC_CACHE_NONE ? "" : fbx_exec_cache_event_name(r->cache);
  fbx_trace_session_compute(s, path, cache);
  fbx_trace_session_device(s, r->allocs, r->host_syncs, r->graph_captures, r->graph_replays);
  /* every run: a device backend wraps only inputs in its own memory (a GPU OrtEpDevice), else 0 */
  fbx_trace_session_wrap(s, r->wrap_count, r->wrap_bytes);
  if (r->copywrap_count) fbx_trace_session_copy_wrap(s, r->copywrap_count, r->copywrap_bytes);
  if (r->copyout_count) fbx_trace_session_copy_out(s, false, r->copyout_bytes);
  if (r->delta_count) fbx_trace_session_copy_out(s, true, r->delta_bytes);
  fbx_trace_session_phase(s, "eval", r->eval_ns);
  fbx_trace_session_phase(s, "copy", r->copy_ns);
  if (r->compile_ns) fbx_trace_session_phase(s, "compile", r->compile_ns);
  if (!fbx_trace_enabled()) return;
  char name[64];
  snprintf(name, sizeof name, "fusebox.compute[%s]", path);
  fbx_trace_arg ia[] = {FBX_TARG_S("path", path), FBX_TARG_S("cache", cache),
                        FBX_TARG_S("shape_key", r->shape_key)};
  fbx_trace_instant(name, "ep", ia, 3);
  /* the run's device counters too (the summary's graph line, per run) */
  fbx_trace_arg sa[] = {FBX_TARG_I("nodes", k->n_nodes), FBX_TARG_S("path", path), FBX_TARG_S("cache", cache),
                        FBX_TARG_S("subgraph", k->name), FBX_TARG_I("allocs", r->allocs),
                        FBX_TARG_I("host_syncs", r->host_syncs), FBX_TARG_I("graph_captures", r->graph_captures),
                        FBX_TARG_I("graph_replays", r->graph_replays),
                        FBX_TARG_I("graph_invalidated", r->graph_invalidated)};
  fbx_trace_complete("fusebox.subgraph", "ep", t0, t1, sa, (int)(sizeof sa / sizeof sa[0]));
  /* Counter tracks at the eval boundary; the memory budget is the machine's RAM. */
  fbx_backend *be = k->ep->backend;
  size_t in_use = be->vt->memory_in_use ? be->vt->memory_in_use(be) : 0;
  static size_t ram = 0; /* sysconf(_SC_PHYS_PAGES) is a system call: once */
  size_t budget = __atomic_load_n(&ram, __ATOMIC_RELAXED);
  if (!budget) {
    budget = (size_t)sysconf(_SC_PHYS_PAGES) * (size_t)sysconf(_SC_PAGESIZE);
    __atomic_store_n(&ram, budget, __ATOMIC_RELAXED);
  }
  fbx_trace_sample_counters(in_use, budget);
}

/* The run on ORT's stream (native: its handle): the session's backend is bound to it for the
 * run (stream_mu: one bound stream per backend), the run follows the EP's earlier work on the
 * GPU and marks its own (ep_stream.c), and it ends without waiting for the device: ORT waits
 * (Flush at the end of its Run, or a notification). Before rewriting the plan's host staging
 * buffers, the host waits for this subgraph's previous run on the device (k->done: already
 * passed once ORT has flushed, so no wait in a Run-after-Run loop). Called with k->mu held. */
static fbx_status *run_on_stream(fbx_ep_kernel *k, void *native, fbx_exec_run_io *io, out_ctx *oc,
                                 fbx_exec_run_report *r) {
  fbx_ep *ep = k->ep;
  fbx_backend *be = ep->backend;
  pthread_mutex_lock(&ep->stream_mu);
  fbx_status *st = be->vt->set_stream(be, native);
  if (!st) st = fbx_ep_gpu_order_before(ep->gpu, be);
  if (!st && k->done) st = fbx_backend_event_synchronize(be, k->done);
  if (!st) {
    io->caller_stream = true;
    st = fbx_exec_compiled_run_io(k->compiled, k->inputs, k->n_inputs, io, bind_output, oc, r);
  }
  if (!st) st = fbx_ep_gpu_order_after(ep->gpu, be);
  if (!st && !k->done) st = fbx_backend_event_create(be, &k->done);
  if (!st) st = fbx_backend_event_record(be, k->done);
  fbx_status *s2 = be->vt->set_stream(be, NULL);
  pthread_mutex_unlock(&ep->stream_mu);
  if (st) fbx_status_free(s2);
  else st = s2;
  return st;
}

static fbx_status *compute(fbx_ep_kernel *k, OrtKernelContext *kctx) {
  size_t nin = 0;
  FBX_ORT_TRY(FBX_ORT->KernelContext_GetInputCount(kctx, &nin));
  if (nin != (size_t)k->n_inputs)
    return FBX_ERR("%s: ORT passed %zu inputs, compiled for %d", k->name, nin, k->n_inputs);
  fbx_trace_session_bind(k->ep->trace);
  bool traced = fbx_trace_enabled();
  uint64_t t0 = traced ? fbx_trace_now_ns() : 0;
  fbx_exec_run_report r;
  const fbx_ep_gpu *gpu = k->ep->gpu;
  out_ctx oc = {.kctx = kctx, .k = k, .gpu = gpu};
  /* ORT's stream: given when the session runs on our GPU (the factory is stream aware), its
   * handle is one of our streams' (ep_stream.c) */
  void *native = NULL;
  fbx_status *st = NULL;
  if (gpu && k->ep->opt.ort_stream && fbx_backend_has_streams(k->ep->backend)) {
    OrtStatus *os = FBX_ORT->KernelContext_GetGPUComputeStream(kctx, &native);
    if (os) st = fbx_ep_status_from_ort(os, "KernelContext_GetGPUComputeStream");
  }
  pthread_mutex_lock(&k->mu);
  for (size_t i = 0; i < nin && !st; i++)
    st = wrap_input(gpu, kctx, i, k->input_desc[i], &k->inputs[i], &k->input_dev[i]);
  fbx_exec_run_io io = {.input_on_device = k->input_dev, .outputs_on_device = gpu != NULL};
  if (!st && native) st = run_on_stream(k, native, &io, &oc, &r);
  else if (!st) st = fbx_exec_compiled_run_io(k->compiled, k->inputs, k->n_inputs, &io, bind_output, &oc, &r);
  pthread_mutex_unlock(&k->mu);
  uint64_t t1 = traced ? fbx_trace_now_ns() : 0;
  if (!st) {
    trace_run(k, &r, t0, t1);
    if (native) fbx_trace_session_stream_run(k->ep->trace);
  }
  fbx_trace_session_bind(NULL);
  return st;
}

OrtStatus *ORT_API_CALL fbx_ep_kernel_compute(OrtNodeComputeInfo *this_ptr, void *state, OrtKernelContext *kctx) {
  fbx_ep_kernel *k = (fbx_ep_kernel *)this_ptr;
  fbx_status *st = compute(k, kctx);
  if (st) {
    fbx_status *wrapped = fbx_status_new(fbx_status_code_of(st), "Fusebox: %s: %s", k->name, fbx_status_message(st));
    fbx_status_free(st);
    return fbx_ep_status_to_ort(wrapped);
  }
  return NULL;
}
