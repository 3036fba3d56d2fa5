/* OrtDataTransferImpl: the copies ORT makes between host memory and a GPU
 * of ours (graph inputs and outputs without IOBinding, MemcpyToHost /
 * MemcpyFromHost at the edges of our subgraphs, IOBinding's output fetches,
 * the public CopyTensors).
 *
 *   host (CPU memory or our pinned memory) -> our GPU : copy_from_host(_async)
 *   our GPU -> host                                   : copy_to_host(_async)
 *   our GPU -> the same GPU                           : copy_device
 *   pinned <-> CPU                                    : memcpy
 *
 * Copies go through the GPU's own backend. With a stream of ours for the
 * tensor (ORT 1.29/1.30 pass the session's with a Run's feed and fetch
 * copies; the public CopyTensors the one it is given), the copy is enqueued on that
 * stream and CopyTensors returns at once: from our pinned memory the DMA
 * runs asynchronously, and ORT orders what follows with notifications or
 * waits at Flush. Without one, the copy runs on the backend's own queue and
 * is complete when CopyTensors returns (one synchronize per GPU written to,
 * after the last copy of the call). Either way the copy first waits, on the
 * device, for everything the EP enqueued on that GPU before (a Compute on
 * ORT's stream that made the source, or that last read a reused buffer) and
 * marks itself for what follows (ep_internal.h, "ordering"). */
#include <string.h>

#include "ep_internal.h"

/* The GPU whose DEFAULT memory md is, or NULL. */
static fbx_ep_gpu *gpu_of_memory(fbx_ep_factory *f, const OrtMemoryDevice *md) {
  for (int i = 0; i < f->n_gpus; i++)
    if (fbx_ep_gpu_owns(&f->gpus[i], md)) return &f->gpus[i];
  return NULL;
}

/* Host memory: the CPU's, or the pinned memory of any device (ours included). */
static bool is_host(const OrtMemoryDevice *md) {
  return FBX_ORT_EP->MemoryDevice_GetDeviceType(md) == OrtMemoryInfoDeviceType_CPU ||
         FBX_ORT_EP->MemoryDevice_GetMemoryType(md) == OrtDeviceMemoryType_HOST_ACCESSIBLE;
}

static bool ORT_API_CALL can_copy(const OrtDataTransferImpl *this_ptr, const OrtMemoryDevice *src,
                                  const OrtMemoryDevice *dst) {
  fbx_ep_factory *f = ((const fbx_ep_data_transfer *)this_ptr)->factory;
  fbx_ep_gpu *gs = gpu_of_memory(f, src), *gd = gpu_of_memory(f, dst);
  if (gs && gd) return gs == gd; /* no peer copies between two GPUs */
  if (gs) return is_host(dst);
  if (gd) return is_host(src);
  return false; /* host <-> host is ORT's own CPU copy */
}

/* One copy; *wrote: the GPU whose memory it wrote on its own queue (still to be waited for), or unchanged. */
static fbx_status *copy_one(fbx_ep_factory *f, const OrtValue *src, OrtValue *dst, OrtSyncStream *stream, size_t i,
                            fbx_ep_gpu **wrote) {
  const OrtMemoryDevice *ms = FBX_ORT_EP->Value_GetMemoryDevice(src), *md = FBX_ORT_EP->Value_GetMemoryDevice(dst);
  if (!ms || !md) return FBX_ERR_ARG("Fusebox: CopyTensors: tensor %zu is not a tensor", i);
  size_t bytes = 0, dbytes = 0;
  FBX_ORT_TRY(FBX_ORT->GetTensorSizeInBytes(src, &bytes));
  FBX_ORT_TRY(FBX_ORT->GetTensorSizeInBytes(dst, &dbytes));
  if (bytes != dbytes)
    return FBX_ERR_ARG("Fusebox: CopyTensors: tensor %zu: source has %zu bytes, destination %zu", i, bytes, dbytes);
  const void *s = NULL;
  void *d = NULL;
  FBX_ORT_TRY(FBX_ORT->GetTensorData(src, &s));
  FBX_ORT_TRY(FBX_ORT->GetTensorMutableData(dst, &d));
  if (!bytes) return NULL;
  fbx_ep_gpu *gs = gpu_of_memory(f, ms), *gd = gpu_of_memory(f, md);
  if (gs && gd && gs != gd) return FBX_ERR_NOTIMPL("Fusebox: CopyTensors: no copies between two GPUs (tensor %zu)", i);
  fbx_ep_gpu *g = gs ? gs : gd;
  if (!g) {
    memcpy(d, s, bytes); /* pinned <-> CPU: both host memory (a pending DMA into it was waited for by ORT) */
    return NULL;
  }
  fbx_backend *be = NULL;
  FBX_TRY(fbx_ep_gpu_backend(g, &be));
  fbx_backend_stream *bs = fbx_ep_stream_of(stream, g);
  pthread_mutex_lock(&g->dt_mu); /* be's bound queue is this copy's until it is unbound */
  fbx_status *st = bs ? be->vt->set_stream(be, be->vt->stream_handle(be, bs)) : NULL;
  if (!st) st = fbx_ep_gpu_order_before(g, be);
  if (!st) {
    if (gs && gd) st = be->vt->copy_device(be, d, s, bytes);
    else if (gd) st = bs ? fbx_backend_copy_from_host_async(be, d, s, bytes) : be->vt->copy_from_host(be, d, s, bytes);
    else st = bs ? fbx_backend_copy_to_host_async(be, d, s, bytes) : be->vt->copy_to_host(be, d, s, bytes);
  }
  if (!st) st = fbx_ep_gpu_order_after(g, be);
  if (bs) {
    fbx_status *s2 = be->vt->set_stream(be, NULL);
    if (st) fbx_status_free(s2);
    else st = s2;
  }
  pthread_mutex_unlock(&g->dt_mu);
  if (gd && !bs) *wrote = gd;
  return st;
}

static OrtStatus *ORT_API_CALL copy_tensors(OrtDataTransferImpl *this_ptr, const OrtValue **src_tensors,
                                            OrtValue **dst_tensors, OrtSyncStream **streams, size_t num_tensors) {
  fbx_ep_factory *f = ((fbx_ep_data_transfer *)this_ptr)->factory;
  bool dirty[FBX_EP_MAX_GPUS] = {false};
  fbx_status *st = NULL;
  for (size_t i = 0; i < num_tensors && !st; i++) {
    fbx_ep_gpu *wrote = NULL;
    st = copy_one(f, src_tensors[i], dst_tensors[i], streams ? streams[i] : NULL, i, &wrote);
    if (wrote) dirty[wrote - f->gpus] = true;
  }
  /* Copies on the backend's own queue: CUDA's copy_from_host returns once a pageable source
   * is staged, before the data has arrived, and copy_device is enqueued; the caller may
   * rewrite a pinned source at once. Also after an error: nothing stays queued. */
  for (int g = 0; g < f->n_gpus; g++) {
    if (!dirty[g]) continue;
    pthread_mutex_lock(&f->gpus[g].dt_mu);
    fbx_status *s2 = fbx_backend_synchronize(f->gpus[g].be);
    pthread_mutex_unlock(&f->gpus[g].dt_mu);
    if (st) fbx_status_free(s2);
    else st = s2;
  }
  return fbx_ep_status_to_ort(st);
}

static void ORT_API_CALL release(OrtDataTransferImpl *this_ptr) { (void)this_ptr; /* owned by the factory */ }

void fbx_ep_data_transfer_init(fbx_ep_data_transfer *dt, fbx_ep_factory *f) {
  memset(dt, 0, sizeof *dt);
  dt->base.ort_version_supported = ORT_API_VERSION;
  dt->base.Release = release;
  dt->base.CanCopy = can_copy;
  dt->base.CopyTensors = copy_tensors;
  dt->factory = f;
}
