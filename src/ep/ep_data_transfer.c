/* OrtDataTransferImpl: the copies ORT makes between host memory and a GPU
 * of ours (graph inputs and outputs without IOBinding, MemcpyToHost /
 * MemcpyFromHost at the edges of our subgraphs, IOBinding's output fetches).
 *
 *   host (CPU memory or our pinned memory) -> our GPU : copy_from_host, then synchronize
 *   our GPU -> host                                   : copy_to_host (waits itself)
 *   our GPU -> the same GPU                           : copy_device, then synchronize
 *   pinned <-> CPU                                    : memcpy
 *
 * The factory is not stream aware (IsStreamAware is false), so ORT passes no
 * streams and every copy is complete when CopyTensors returns (the backend's
 * synchronous copies wait for queued work first). Copies go through the GPU's
 * own backend, a separate queue from the sessions': a session synchronises at
 * the end of every Compute, so what it wrote is complete before ORT copies it. */
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

static fbx_status *copy_one(fbx_ep_factory *f, const OrtValue *src, OrtValue *dst, size_t i) {
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
  fbx_backend *be = NULL;
  if (gs || gd) FBX_TRY(fbx_ep_gpu_backend(gs ? gs : gd, &be));
  if (gs && gd) {
    if (gs != gd) return FBX_ERR_NOTIMPL("Fusebox: CopyTensors: no copies between two GPUs (tensor %zu)", i);
    FBX_TRY(be->vt->copy_device(be, d, s, bytes));
    return fbx_backend_synchronize(be);
  }
  if (gd) { /* CUDA's copy_from_host returns once a pageable source is staged, before the data has
              * arrived: a session's queue (another stream) reading d next must find it complete */
    FBX_TRY(be->vt->copy_from_host(be, d, s, bytes));
    return fbx_backend_synchronize(be);
  }
  if (gs) return be->vt->copy_to_host(be, d, s, bytes);
  memcpy(d, s, bytes); /* pinned <-> CPU: both host memory */
  return NULL;
}

static OrtStatus *ORT_API_CALL copy_tensors(OrtDataTransferImpl *this_ptr, const OrtValue **src_tensors,
                                            OrtValue **dst_tensors, OrtSyncStream **streams, size_t num_tensors) {
  fbx_ep_factory *f = ((fbx_ep_data_transfer *)this_ptr)->factory;
  (void)streams; /* not stream aware: ORT passes none (see the file comment) */
  for (size_t i = 0; i < num_tensors; i++) {
    fbx_status *st = copy_one(f, src_tensors[i], dst_tensors[i], i);
    if (st) return fbx_ep_status_to_ort(st);
  }
  return NULL;
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
