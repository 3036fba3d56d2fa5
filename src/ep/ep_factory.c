/* OrtEpFactory: the CPU device, plus one GPU device per NVIDIA GPU that the
 * CUDA backend sees (or the simulated GPU of FUSEBOX_TEST_DEVICE=gpu-sim);
 * creates one fbx_ep per session; serves the GPUs' allocators and the data
 * transfer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../backend/backend_cuda.h"
#include "../base/alloc.h"
#include "ep_internal.h"

static const char *ORT_API_CALL factory_get_name(const OrtEpFactory *this_ptr) { return FBX_EP_NAME; }
static const char *ORT_API_CALL factory_get_vendor(const OrtEpFactory *this_ptr) { return FBX_EP_VENDOR; }
static const char *ORT_API_CALL factory_get_version(const OrtEpFactory *this_ptr) { return FBX_EP_VERSION; }
static uint32_t ORT_API_CALL factory_get_vendor_id(const OrtEpFactory *this_ptr) { return 0; }
/* Stream aware when there is a GPU: ORT then asks us (CreateSyncStreamForDevice, the OrtEp's
 * first) for a stream per GPU memory it uses, hands it to Compute and to the notifications
 * that order its copies, and Flushes it at the end of each Run (ep_stream.c). */
static bool ORT_API_CALL factory_is_stream_aware(const OrtEpFactory *this_ptr) {
  return ((const fbx_ep_factory *)this_ptr)->n_gpus > 0;
}

fbx_ep_gpu *fbx_ep_factory_gpu_of_memory(fbx_ep_factory *f, const OrtMemoryDevice *md) {
  for (int g = 0; md && g < f->n_gpus; g++)
    if (FBX_ORT_EP->MemoryDevice_AreEqual(md, f->gpus[g].md_device) ||
        FBX_ORT_EP->MemoryDevice_AreEqual(md, f->gpus[g].md_pinned))
      return &f->gpus[g];
  return NULL;
}

/* A stream outside a session (CreateSyncStreamForEpDevice, or ORT for a session whose OrtEp
 * left CreateSyncStreamForDevice NULL): on the GPU whose memory md is. */
static OrtStatus *ORT_API_CALL factory_create_sync_stream(OrtEpFactory *this_ptr, const OrtMemoryDevice *md,
                                                          const OrtKeyValuePairs *stream_options,
                                                          OrtSyncStreamImpl **stream) {
  (void)stream_options; /* none defined */
  *stream = NULL;
  fbx_ep_gpu *g = fbx_ep_factory_gpu_of_memory((fbx_ep_factory *)this_ptr, md);
  if (!g) return fbx_ep_status_to_ort(FBX_ERR_ARG("Fusebox: CreateSyncStreamForDevice: not a memory of Fusebox's GPUs"));
  return fbx_ep_status_to_ort(fbx_ep_stream_create(g, stream));
}

/* One OrtEpDevice for hw, with our metadata (gpu: which GPU, or NULL for the CPU). */
static OrtStatus *make_ep_device(fbx_ep_factory *f, const OrtHardwareDevice *hw, fbx_ep_gpu *gpu, OrtEpDevice **out) {
  *out = NULL;
  OrtKeyValuePairs *meta = NULL;
  FBX_ORT->CreateKeyValuePairs(&meta);
  char id[16];
  snprintf(id, sizeof id, "%d", gpu ? gpu->ordinal : 0);
  FBX_ORT->AddKeyValuePair(meta, FBX_EP_META_DEVICE, gpu ? fbx_ep_gpu_kind_name(gpu->kind) : "cpu");
  FBX_ORT->AddKeyValuePair(meta, FBX_EP_META_DEVICE_ID, id);
  OrtStatus *os = FBX_ORT_EP->CreateEpDevice(&f->base, hw, meta, NULL, out);
  FBX_ORT->ReleaseKeyValuePairs(meta);
  if (os || !gpu) return os;
  /* ORT then creates the shared allocators of these (CreateAllocator below) and places
   * graph inputs, outputs and IOBinding buffers of this device in them */
  os = FBX_ORT_EP->EpDevice_AddAllocatorInfo(*out, gpu->mem_device);
  if (!os) os = FBX_ORT_EP->EpDevice_AddAllocatorInfo(*out, gpu->mem_pinned);
  return os; /* on error ORT releases what GetSupportedDevices returned so far */
}

/* FUSEBOX_TEST_DEVICE (test aid, README): "gpu-sim" lists a simulated GPU whose memory is
 * the opaque backend's, so the GPU code paths of this layer run on any machine. */
static fbx_status *test_device(bool *sim) {
  const char *v = getenv("FUSEBOX_TEST_DEVICE");
  *sim = false;
  if (!v || !v[0]) return NULL;
  if (strcmp(v, "gpu-sim") == 0) {
    *sim = true;
    return NULL;
  }
  return FBX_ERR_ARG("Fusebox: bad FUSEBOX_TEST_DEVICE '%s' (accepted: gpu-sim, or unset)", v);
}

/* A hardware device of our own (ORT did not report one): the simulated GPU, or a CUDA GPU
 * that ORT's discovery missed. Released with the factory (fbx_ep_gpu_fini). */
static fbx_status *own_hardware_device(fbx_ep_gpu *g, uint32_t vendor, const char *vendor_name, bool is_virtual) {
  OrtKeyValuePairs *meta = NULL;
  FBX_ORT->CreateKeyValuePairs(&meta);
  if (is_virtual) FBX_ORT->AddKeyValuePair(meta, "is_virtual", "1");
  FBX_ORT->AddKeyValuePair(meta, "discovered_by", FBX_EP_NAME);
  OrtStatus *os = FBX_ORT_EP->CreateHardwareDevice(OrtHardwareDeviceType_GPU, vendor, (uint32_t)g->ordinal, vendor_name,
                                                   meta, &g->hw_owned);
  FBX_ORT->ReleaseKeyValuePairs(meta);
  if (os) return fbx_ep_status_from_ort(os, "Fusebox: creating a GPU hardware device");
  g->hw = g->hw_owned;
  return NULL;
}

/* The GPUs, once: the simulated one, or the NVIDIA GPUs the CUDA backend sees. The k-th
 * NVIDIA device in ORT's list is CUDA device k. ORT finds GPUs on Linux through
 * /sys/class/drm, which a container or a machine without nvidia-drm may not have: when ORT
 * reports none but the NVIDIA driver is loaded (/proc/driver/nvidia), the GPUs get hardware
 * devices of our own. The CUDA library is loaded only when ORT reports an NVIDIA GPU or the
 * driver is there. */
static fbx_status *probe_gpus(fbx_ep_factory *f, const OrtHardwareDevice *const *devices, size_t n) {
  bool sim;
  FBX_TRY(test_device(&sim));
  if (sim) {
    fbx_ep_gpu *g = &f->gpus[0];
    FBX_TRY(fbx_ep_gpu_init(g, FBX_EP_GPU_SIM, 0));
    f->n_gpus = 1; /* from here the factory's destroy releases it */
    return own_hardware_device(g, FBX_EP_VENDOR_SIM, "Fusebox (simulated GPU)", true);
  }
  int n_nv = 0;
  for (size_t i = 0; i < n; i++)
    if (FBX_ORT->HardwareDevice_Type(devices[i]) == OrtHardwareDeviceType_GPU &&
        FBX_ORT->HardwareDevice_VendorId(devices[i]) == FBX_EP_VENDOR_NVIDIA)
      n_nv++;
  if (!n_nv && access("/proc/driver/nvidia/version", R_OK) != 0) return NULL;
  fbx_status *why = NULL;
  int n_cuda = fbx_cuda_device_count(&why);
  fbx_status_free(why); /* no CUDA library, driver or GPU: the CPU device only (device=cuda says why) */
  for (size_t i = 0; n_nv && i < n && f->n_gpus < n_cuda && f->n_gpus < FBX_EP_MAX_GPUS; i++) {
    if (FBX_ORT->HardwareDevice_Type(devices[i]) != OrtHardwareDeviceType_GPU ||
        FBX_ORT->HardwareDevice_VendorId(devices[i]) != FBX_EP_VENDOR_NVIDIA)
      continue;
    FBX_TRY(fbx_ep_gpu_init(&f->gpus[f->n_gpus], FBX_EP_GPU_CUDA, f->n_gpus));
    f->gpus[f->n_gpus++].hw = devices[i];
  }
  while (!n_nv && f->n_gpus < n_cuda && f->n_gpus < FBX_EP_MAX_GPUS) {
    fbx_ep_gpu *g = &f->gpus[f->n_gpus];
    FBX_TRY(fbx_ep_gpu_init(g, FBX_EP_GPU_CUDA, f->n_gpus));
    f->n_gpus++;
    FBX_TRY(own_hardware_device(g, FBX_EP_VENDOR_NVIDIA, "NVIDIA", false));
  }
  return NULL;
}

/* The CPU device first (one: it is all we use), then the GPUs. */
static OrtStatus *ORT_API_CALL factory_get_supported_devices(OrtEpFactory *this_ptr,
                                                             const OrtHardwareDevice *const *devices,
                                                             size_t num_devices, OrtEpDevice **ep_devices,
                                                             size_t max_ep_devices, size_t *num_ep_devices) {
  fbx_ep_factory *f = (fbx_ep_factory *)this_ptr;
  *num_ep_devices = 0;
  for (size_t i = 0; i < num_devices && *num_ep_devices < max_ep_devices; i++) {
    if (FBX_ORT->HardwareDevice_Type(devices[i]) != OrtHardwareDeviceType_CPU) continue;
    OrtEpDevice *d = NULL;
    OrtStatus *os = make_ep_device(f, devices[i], NULL, &d);
    if (os) return os;
    ep_devices[(*num_ep_devices)++] = d;
    break;
  }
  if (!f->probed) {
    f->probed = true;
    fbx_status *st = probe_gpus(f, devices, num_devices);
    if (st) return fbx_ep_status_to_ort(st);
  }
  for (int g = 0; g < f->n_gpus && *num_ep_devices < max_ep_devices; g++) {
    OrtEpDevice *d = NULL;
    OrtStatus *os = make_ep_device(f, f->gpus[g].hw, &f->gpus[g], &d);
    if (os) return os;
    ep_devices[(*num_ep_devices)++] = d;
  }
  return NULL;
}

fbx_ep_gpu *fbx_ep_factory_gpu_of(fbx_ep_factory *f, const OrtKeyValuePairs *meta) {
  const char *dev = meta ? FBX_ORT->GetKeyValue(meta, FBX_EP_META_DEVICE) : NULL;
  const char *id = meta ? FBX_ORT->GetKeyValue(meta, FBX_EP_META_DEVICE_ID) : NULL;
  if (!dev || !id) return NULL;
  for (int g = 0; g < f->n_gpus; g++)
    if (strcmp(dev, fbx_ep_gpu_kind_name(f->gpus[g].kind)) == 0 && atoi(id) == f->gpus[g].ordinal)
      return &f->gpus[g];
  return NULL;
}

static OrtStatus *ORT_API_CALL factory_create_ep(OrtEpFactory *this_ptr, const OrtHardwareDevice *const *devices,
                                                 const OrtKeyValuePairs *const *ep_metadata_pairs,
                                                 size_t num_devices, const OrtSessionOptions *session_options,
                                                 const OrtLogger *logger, OrtEp **ep) {
  fbx_ep_factory *f = (fbx_ep_factory *)this_ptr;
  *ep = NULL;
  fbx_ep_gpu *gpu = NULL;
  bool has_cpu = false;
  for (size_t i = 0; i < num_devices; i++) {
    fbx_ep_gpu *g = fbx_ep_factory_gpu_of(f, ep_metadata_pairs ? ep_metadata_pairs[i] : NULL);
    if (!g) has_cpu = true;
    else if (gpu && g != gpu)
      return fbx_ep_status_to_ort(FBX_ERR_ARG("Fusebox: the session was given two GPU OrtEpDevices (%s %d and %d); "
                                              "one session runs on one GPU: append one of them",
                                              fbx_ep_gpu_kind_name(g->kind), gpu->ordinal, g->ordinal));
    else gpu = g;
  }
  fbx_ep *e = NULL;
  fbx_status *s = fbx_ep_create(f, gpu, has_cpu || !num_devices, session_options, logger, &e);
  if (s) return fbx_ep_status_to_ort(s);
  *ep = &e->base;
  return NULL;
}

static void ORT_API_CALL factory_release_ep(OrtEpFactory *this_ptr, OrtEp *ep) {
  fbx_ep_destroy((fbx_ep *)ep);
}

/* Shared allocators: one per GPU and memory type, owned by the factory (ReleaseAllocator
 * does nothing). memory_info is one we registered with EpDevice_AddAllocatorInfo. */
static OrtStatus *ORT_API_CALL factory_create_allocator(OrtEpFactory *this_ptr, const OrtMemoryInfo *memory_info,
                                                        const OrtKeyValuePairs *allocator_options,
                                                        OrtAllocator **allocator) {
  fbx_ep_factory *f = (fbx_ep_factory *)this_ptr;
  *allocator = NULL;
  const OrtMemoryDevice *md = memory_info ? FBX_ORT_EP->MemoryInfo_GetMemoryDevice(memory_info) : NULL;
  for (int g = 0; g < f->n_gpus && md; g++) {
    fbx_ep_gpu *gpu = &f->gpus[g];
    if (memory_info == gpu->mem_device || FBX_ORT_EP->MemoryDevice_AreEqual(md, gpu->md_device))
      *allocator = &gpu->alloc_device.base;
    else if (memory_info == gpu->mem_pinned || FBX_ORT_EP->MemoryDevice_AreEqual(md, gpu->md_pinned))
      *allocator = &gpu->alloc_pinned.base;
    if (*allocator) return NULL;
  }
  return fbx_ep_status_to_ort(FBX_ERR_ARG("Fusebox: CreateAllocator: memory info is not one of Fusebox's devices"));
}

static void ORT_API_CALL factory_release_allocator(OrtEpFactory *this_ptr, OrtAllocator *allocator) {
  (void)this_ptr;
  (void)allocator; /* the factory owns its allocators */
}

/* The one data transfer; with no GPU it copies nothing (CanCopy says no), and the member
 * must be non-NULL in any case (DESIGN.md: a NULL one crashes registration). */
static OrtStatus *ORT_API_CALL factory_create_data_transfer(OrtEpFactory *this_ptr,
                                                            OrtDataTransferImpl **data_transfer) {
  fbx_ep_factory *f = (fbx_ep_factory *)this_ptr;
  *data_transfer = f->n_gpus ? &f->dt.base : NULL;
  return NULL;
}

fbx_status *fbx_ep_factory_create(const char *registration_name, const OrtLogger *logger,
                                  fbx_ep_factory **out) {
  *out = NULL;
  fbx_ep_factory *f = fbx_calloc(1, sizeof *f);
  if (!f) return FBX_ERR_OOM();
  f->registration_name = fbx_strdup(registration_name ? registration_name : "Fusebox");
  if (!f->registration_name) {
    fbx_free(f);
    return FBX_ERR_OOM();
  }
  f->logger = logger;
  fbx_ep_data_transfer_init(&f->dt, f);
  OrtEpFactory *b = &f->base;
  b->ort_version_supported = ORT_API_VERSION;
  b->GetName = factory_get_name;
  b->GetVendor = factory_get_vendor;
  b->GetSupportedDevices = factory_get_supported_devices;
  b->CreateEp = factory_create_ep;
  b->ReleaseEp = factory_release_ep;
  b->GetVendorId = factory_get_vendor_id;
  b->GetVersion = factory_get_version;
  b->CreateAllocator = factory_create_allocator;
  b->ReleaseAllocator = factory_release_allocator;
  b->CreateDataTransfer = factory_create_data_transfer;
  b->IsStreamAware = factory_is_stream_aware;
  b->CreateSyncStreamForDevice = factory_create_sync_stream;
  /* Everything else stays NULL: optional in the ABI (no compiled-model compatibility,
   * no custom op domains). */
  *out = f;
  return NULL;
}

void fbx_ep_factory_destroy(fbx_ep_factory *f) {
  if (!f) return;
  for (int g = 0; g < f->n_gpus; g++) fbx_ep_gpu_fini(&f->gpus[g]);
  fbx_free(f->registration_name);
  fbx_free(f);
}
