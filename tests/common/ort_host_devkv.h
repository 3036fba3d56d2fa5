// ort_host_devkv — the device mode of ort_host_decode (fbx_host_decoder_init_shared_device):
// KV buffers, input_ids, attention_mask and logits in the memory of Fusebox's GPU OrtEpDevice.
// Internal to ort_host_decode.c.
#ifndef FBX_TESTS_ORT_HOST_DEVKV_H
#define FBX_TESTS_ORT_HOST_DEVKV_H

#include "ort_host_decode.h"

// Set up d->dev (d already inspected by fbx_host_decoder_init, capacity set): finds the GPU
// OrtEpDevice, allocates the device buffers. d->dev owned by d (fbx__host_devkv_free).
char *fbx__host_devkv_create(fbx_host_decoder *d, int64_t max_step);
// Zero the KV buffers (P = 0 is the caller's).
char *fbx__host_devkv_reset(fbx_host_decoder *d);
// One step of n ids: in[0..n_own) are the host inputs (input_ids first; position_ids bound as a
// host tensor; attention_mask replaced by the device prefix). Logits land in d->logits.
char *fbx__host_devkv_step(fbx_host_decoder *d, const fbx_host_tensor *in, size_t n_own, int64_t n);
void fbx__host_devkv_free(fbx_host_decoder *d);

#endif  // FBX_TESTS_ORT_HOST_DEVKV_H
