/* One GPU as ORT sees it: its two memory infos (device memory, pinned host
 * memory), the allocators behind them, and the backend that serves both and
 * the data transfer. Made by the factory in GetSupportedDevices, one per GPU
 * OrtEpDevice; the backend is opened on first use (an allocation or a copy),
 * so listing devices costs no CUDA context. */
#include <stdio.h>
#include <string.h>

#include "../backend/backend_cuda.h"
#include "ep_internal.h"

const char *fbx_ep_gpu_kind_name(fbx_ep_gpu_kind k) { return k == FBX_EP_GPU_SIM ? "gpu-sim" : "cuda"; }

fbx_status *fbx_ep_gpu_init(fbx_ep_gpu *g, fbx_ep_gpu_kind kind, int ordinal) {
  memset(g, 0, sizeof *g);
  g->kind = kind;
  g->ordinal = ordinal;
  pthread_mutex_init(&g->mu, NULL);
  pthread_mutex_init(&g->order_mu, NULL);
  pthread_mutex_init(&g->dt_mu, NULL);
  uint32_t vendor = kind == FBX_EP_GPU_SIM ? FBX_EP_VENDOR_SIM : FBX_EP_VENDOR_NVIDIA;
  const char *label = kind == FBX_EP_GPU_SIM ? "GpuSim" : "Cuda";
  char name[64], pname[64];
  /* the names are only labels: ORT matches memory by (type, memory type, vendor, device id) */
  snprintf(name, sizeof name, "Fusebox_%s_%d", label, ordinal);
  snprintf(pname, sizeof pname, "Fusebox_%s_%d_pinned", label, ordinal);
  OrtStatus *os = FBX_ORT->CreateMemoryInfo_V2(name, OrtMemoryInfoDeviceType_GPU, vendor, ordinal,
                                               OrtDeviceMemoryType_DEFAULT, 0, OrtDeviceAllocator, &g->mem_device);
  if (!os)
    os = FBX_ORT->CreateMemoryInfo_V2(pname, OrtMemoryInfoDeviceType_GPU, vendor, ordinal,
                                      OrtDeviceMemoryType_HOST_ACCESSIBLE, 0, OrtDeviceAllocator, &g->mem_pinned);
  if (os) {
    fbx_ep_gpu_fini(g);
    return fbx_ep_status_from_ort(os, "Fusebox: a GPU's memory info");
  }
  g->md_device = FBX_ORT_EP->MemoryInfo_GetMemoryDevice(g->mem_device);
  g->md_pinned = FBX_ORT_EP->MemoryInfo_GetMemoryDevice(g->mem_pinned);
  fbx_ep_allocator_init(&g->alloc_device, g, FBX_BUFT_DEVICE, g->mem_device);
  fbx_ep_allocator_init(&g->alloc_pinned, g, FBX_BUFT_HOST_PINNED, g->mem_pinned);
  return NULL;
}

void fbx_ep_gpu_fini(fbx_ep_gpu *g) {
  if (g->tail) fbx_backend_event_destroy(g->be, g->tail);
  fbx_backend_destroy(g->be);
  if (g->mem_device) FBX_ORT->ReleaseMemoryInfo(g->mem_device);
  if (g->mem_pinned) FBX_ORT->ReleaseMemoryInfo(g->mem_pinned);
  if (g->hw_owned) FBX_ORT_EP->ReleaseHardwareDevice(g->hw_owned);
  pthread_mutex_destroy(&g->mu);
  pthread_mutex_destroy(&g->order_mu);
  pthread_mutex_destroy(&g->dt_mu);
  memset(g, 0, sizeof *g);
}

bool fbx_ep_gpu_owns(const fbx_ep_gpu *g, const OrtMemoryDevice *md) {
  return g && md && g->md_device && FBX_ORT_EP->MemoryDevice_AreEqual(md, g->md_device);
}

fbx_status *fbx_ep_gpu_backend(fbx_ep_gpu *g, fbx_backend **out) {
  pthread_mutex_lock(&g->mu);
  fbx_status *st = NULL;
  if (!g->be) {
    if (g->kind == FBX_EP_GPU_SIM) {
      /* one thread: this backend only allocates and copies (opaque handles are valid in
       * every opaque backend of the process, so sessions' backends read them) */
      fbx_opaque_options oo = {.threads = 1, .decline_op = -1};
      st = fbx_opaque_backend_create(&oo, &g->be);
    } else {
      fbx_cuda_options co = {.device_id = g->ordinal};
      st = fbx_cuda_backend_open(&co, &g->be);
    }
  }
  *out = g->be;
  pthread_mutex_unlock(&g->mu);
  return st;
}
