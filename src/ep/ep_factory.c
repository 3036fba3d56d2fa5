/* OrtEpFactory: one CPU device, creates one fbx_ep per session. */
#include <string.h>

#include "../base/alloc.h"
#include "ep_internal.h"

static const char *ORT_API_CALL factory_get_name(const OrtEpFactory *this_ptr) { return FBX_EP_NAME; }
static const char *ORT_API_CALL factory_get_vendor(const OrtEpFactory *this_ptr) { return FBX_EP_VENDOR; }
static const char *ORT_API_CALL factory_get_version(const OrtEpFactory *this_ptr) { return FBX_EP_VERSION; }
static uint32_t ORT_API_CALL factory_get_vendor_id(const OrtEpFactory *this_ptr) { return 0; }
static bool ORT_API_CALL factory_is_stream_aware(const OrtEpFactory *this_ptr) { return false; }

/* One OrtEpDevice for the first CPU hardware device ORT offers. */
static OrtStatus *ORT_API_CALL factory_get_supported_devices(OrtEpFactory *this_ptr,
                                                             const OrtHardwareDevice *const *devices,
                                                             size_t num_devices, OrtEpDevice **ep_devices,
                                                             size_t max_ep_devices, size_t *num_ep_devices) {
  *num_ep_devices = 0;
  for (size_t i = 0; i < num_devices && *num_ep_devices < max_ep_devices; i++) {
    if (FBX_ORT->HardwareDevice_Type(devices[i]) != OrtHardwareDeviceType_CPU) continue;
    OrtEpDevice *d = NULL;
    OrtStatus *os = FBX_ORT_EP->CreateEpDevice(this_ptr, devices[i], NULL, NULL, &d);
    if (os) return os;
    ep_devices[(*num_ep_devices)++] = d;
    break; /* one CPU device is all we use */
  }
  return NULL;
}

static OrtStatus *ORT_API_CALL factory_create_ep(OrtEpFactory *this_ptr, const OrtHardwareDevice *const *devices,
                                                 const OrtKeyValuePairs *const *ep_metadata_pairs,
                                                 size_t num_devices, const OrtSessionOptions *session_options,
                                                 const OrtLogger *logger, OrtEp **ep) {
  *ep = NULL;
  fbx_ep *e = NULL;
  fbx_status *s = fbx_ep_create((fbx_ep_factory *)this_ptr, session_options, logger, &e);
  if (s) return fbx_ep_status_to_ort(s);
  *ep = &e->base;
  return NULL;
}

static void ORT_API_CALL factory_release_ep(OrtEpFactory *this_ptr, OrtEp *ep) {
  fbx_ep_destroy((fbx_ep *)ep);
}

/* CPU memory needs no data transfer; the member must still be non-NULL. */
static OrtStatus *ORT_API_CALL factory_create_data_transfer(OrtEpFactory *this_ptr,
                                                            OrtDataTransferImpl **data_transfer) {
  *data_transfer = NULL;
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
  OrtEpFactory *b = &f->base;
  b->ort_version_supported = ORT_API_VERSION;
  b->GetName = factory_get_name;
  b->GetVendor = factory_get_vendor;
  b->GetSupportedDevices = factory_get_supported_devices;
  b->CreateEp = factory_create_ep;
  b->ReleaseEp = factory_release_ep;
  b->GetVendorId = factory_get_vendor_id;
  b->GetVersion = factory_get_version;
  b->CreateDataTransfer = factory_create_data_transfer;
  b->IsStreamAware = factory_is_stream_aware;
  /* Everything else stays NULL: optional in the ABI (no allocator, no streams,
   * no compiled-model compatibility, no custom op domains). */
  *out = f;
  return NULL;
}

void fbx_ep_factory_destroy(fbx_ep_factory *f) {
  if (!f) return;
  fbx_free(f->registration_name);
  fbx_free(f);
}
