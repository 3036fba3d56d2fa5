// ort_host_devkv.c — device-memory KV decode (see ort_host_devkv.h and
// fbx_host_decoder_init_shared_device in ort_host_decode.h).
#include "ort_host_devkv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <onnxruntime_c_api.h>

struct fbx_host_devkv {
  const OrtApi *api;
  OrtEnv *env;
  const OrtMemoryInfo *mem;  // the GPU OrtEpDevice's DEFAULT memory (owned by ORT)
  OrtAllocator *alloc;       // ORT's shared allocator for it (owned by ORT)
  OrtMemoryInfo *cpu;
  OrtIoBinding *io;
  OrtValue **kv;             // 2 * n_layers (1, H, capacity, D) float32, bound as past and present
  OrtValue *ids, *mask, *logits;  // (1, max_step) i64, (1, capacity) i64 of ones, (1, max_step, V) f32
  void *ids_p, *mask_p, *logits_p;
  int64_t max_step, vocab;
  // Bound once and kept, as GenAI does: the KV buffers (at create), and the (1, n) input_ids and
  // (1, n, V) logits views over the start of their buffers while steps keep n tokens; a step
  // rebinds only the attention_mask prefix (its shape grows) and position_ids.
  int64_t bound_n;                // n of ids_view / logits_view, 0: none
  OrtValue *ids_view, *logits_view;
};

static char *dev__st(const OrtApi *api, OrtStatus *st, const char *what) {
  if (!st) return NULL;
  char *e = fbx_host_errf("decoder (device KV): %s: %s", what, api->GetErrorMessage(st));
  api->ReleaseStatus(st);
  return e;
}
#define DEV_OK(call) dev__st(k->api, k->api->call, #call)

// A device buffer of shape dims from the shared allocator, and its address.
static char *dev__alloc(struct fbx_host_devkv *k, const int64_t *dims, size_t rank, ONNXTensorElementDataType t,
                        OrtValue **v, void **p) {
  char *err = DEV_OK(CreateTensorAsOrtValue(k->alloc, dims, rank, t, v));
  if (!err) err = DEV_OK(GetTensorMutableData(*v, p));
  return err;
}

// A value over the first bytes of device buffer p with shape dims (not owned data).
static char *dev__view(struct fbx_host_devkv *k, void *p, const int64_t *dims, size_t rank,
                       ONNXTensorElementDataType t, size_t esize, OrtValue **v) {
  size_t n = esize;
  for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
  return DEV_OK(CreateTensorWithDataAsOrtValue(k->mem, p, n, dims, rank, t, v));
}

// Copy host bytes (shape dims) into the value dst through ORT's CopyTensors (Fusebox's data
// transfer), or dst into host when to_host.
static char *dev__copy(struct fbx_host_devkv *k, void *host, const int64_t *dims, size_t rank,
                       ONNXTensorElementDataType t, size_t esize, OrtValue *dev, int to_host) {
  size_t n = esize;
  for (size_t i = 0; i < rank; i++) n *= (size_t)dims[i];
  OrtValue *h = NULL;
  char *err = DEV_OK(CreateTensorWithDataAsOrtValue(k->cpu, host, n, dims, rank, t, &h));
  if (!err && to_host) err = DEV_OK(CopyTensors(k->env, (const OrtValue *const *)&dev, &h, NULL, 1));
  else if (!err) err = DEV_OK(CopyTensors(k->env, (const OrtValue *const *)&h, &dev, NULL, 1));
  if (h) k->api->ReleaseValue(h);
  return err;
}

static char *dev__find(struct fbx_host_devkv *k) {
  const OrtEpDevice *const *devs = NULL;
  size_t n = 0;
  char *err = DEV_OK(GetEpDevices(k->env, &devs, &n));
  for (size_t i = 0; !err && i < n && !k->mem; i++) {
    const char *nm = k->api->EpDevice_EpName(devs[i]);
    if (!nm || strcmp(nm, FBX_HOST_EP_NAME) != 0) continue;
    if (k->api->HardwareDevice_Type(k->api->EpDevice_Device(devs[i])) != OrtHardwareDeviceType_GPU) continue;
    k->mem = k->api->EpDevice_MemoryInfo(devs[i], OrtDeviceMemoryType_DEFAULT);
  }
  if (!err && !k->mem) err = fbx_host_errf("decoder (device KV): Fusebox lists no GPU OrtEpDevice with device memory");
  if (!err) err = DEV_OK(GetSharedAllocator(k->env, k->mem, &k->alloc));
  if (!err && !k->alloc) err = fbx_host_errf("decoder (device KV): ORT has no shared allocator for the GPU memory");
  return err;
}

char *fbx__host_devkv_create(fbx_host_decoder *d, int64_t max_step) {
  struct fbx_host_devkv *k = calloc(1, sizeof *k);
  if (!k) return fbx_host_errf("decoder: out of memory");
  d->dev = k;
  fbx_host *h = fbx_host_session_host(d->s);
  k->api = fbx_host_ort_api(h);
  k->env = fbx_host_ort_env(h);
  k->max_step = max_step;
  long lo = fbx_host_session_output_find(d->s, "logits");
  const fbx_host_io *io = fbx_host_session_output(d->s, (size_t)lo);
  k->vocab = io->rank == 3 ? io->dims[2] : -1;
  if (k->vocab < 1) return fbx_host_errf("decoder (device KV): needs a static vocabulary dim on logits");
  char *err = dev__find(k);
  if (!err) err = DEV_OK(CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &k->cpu));
  if (!err) err = DEV_OK(CreateIoBinding(fbx_host_session_ort(d->s), &k->io));
  if (!err && !(k->kv = calloc((size_t)(2 * d->n_layers), sizeof *k->kv))) err = fbx_host_errf("decoder: out of memory");
  int64_t kvd[4] = {1, d->heads, d->capacity, d->head_dim}, idd[2] = {1, max_step}, md[2] = {1, d->capacity};
  int64_t ld[3] = {1, max_step, k->vocab};
  void *p = NULL;
  for (int i = 0; !err && i < 2 * d->n_layers; i++)
    err = dev__alloc(k, kvd, 4, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &k->kv[i], &p);
  if (!err) err = dev__alloc(k, idd, 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, &k->ids, &k->ids_p);
  if (!err) err = dev__alloc(k, md, 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, &k->mask, &k->mask_p);
  if (!err) err = dev__alloc(k, ld, 3, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &k->logits, &k->logits_p);
  for (int i = 0; !err && i < 2 * d->n_layers; i++) { /* past and present: the same memory, bound once */
    char nm[128];
    snprintf(nm, sizeof nm, "past_key_values.%d.%s", i / 2, (i & 1) ? "value" : "key");
    err = DEV_OK(BindInput(k->io, nm, k->kv[i]));
    snprintf(nm, sizeof nm, "present.%d.%s", i / 2, (i & 1) ? "value" : "key");
    if (!err) err = DEV_OK(BindOutput(k->io, nm, k->kv[i])); /* the new rows are written in place */
  }
  if (!err) { /* the mask is all ones: a step binds its (1, P + S) prefix */
    int64_t *ones = malloc(sizeof(int64_t) * (size_t)d->capacity);
    if (!ones) return fbx_host_errf("decoder: out of memory");
    for (int64_t i = 0; i < d->capacity; i++) ones[i] = 1;
    err = dev__copy(k, ones, md, 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, sizeof(int64_t), k->mask, 0);
    free(ones);
  }
  return err;
}

char *fbx__host_devkv_reset(fbx_host_decoder *d) {
  struct fbx_host_devkv *k = d->dev;
  int64_t kvd[4] = {1, d->heads, d->capacity, d->head_dim};
  size_t bytes = sizeof(float) * (size_t)(d->heads * d->capacity * d->head_dim);
  float *zero = calloc(1, bytes ? bytes : 1);
  if (!zero) return fbx_host_errf("decoder: out of memory");
  char *err = NULL;
  for (int i = 0; !err && i < 2 * d->n_layers; i++)
    err = dev__copy(k, zero, kvd, 4, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, sizeof(float), k->kv[i], 0);
  free(zero);
  return err;
}

char *fbx__host_devkv_step(fbx_host_decoder *d, const fbx_host_tensor *in, size_t n_own, int64_t n) {
  struct fbx_host_devkv *k = d->dev;
  if (n > k->max_step)
    return fbx_host_errf("decoder (device KV): a step of %lld tokens exceeds the %lld the buffers hold", (long long)n,
                         (long long)k->max_step);
  if (d->past_len + n > d->capacity)
    return fbx_host_errf("decoder: %lld + %lld tokens exceed the shared KV capacity %lld", (long long)d->past_len,
                         (long long)n, (long long)d->capacity);
  int64_t idd[2] = {1, n}, md[2] = {1, d->past_len + n}, ld[3] = {1, n, k->vocab};
  OrtValue *mask = NULL, *pos = NULL;
  char *err = NULL;
  if (d->logits.rank != 3 || d->logits.dims[1] != n) {
    fbx_host_tensor_free(&d->logits);
    if ((err = fbx_host_tensor_alloc(&d->logits, "logits", FBX_HOST_F32, 3, ld))) return err;
  }
  double t0 = fbx_host_now();
  OrtValue *hids = NULL, *hlogits = NULL;
  int64_t *ones = NULL;
  if (d->dev_host_io) { /* host tensors, bound anew every step: ORT moves them */
    k->bound_n = 0;
    err = DEV_OK(CreateTensorWithDataAsOrtValue(k->cpu, in[0].data, in[0].nbytes, idd, 2,
                                                ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, &hids));
    if (!err) err = DEV_OK(BindInput(k->io, "input_ids", hids));
    if (!err) err = DEV_OK(CreateTensorWithDataAsOrtValue(k->cpu, d->logits.data, d->logits.nbytes, ld, 3,
                                                          ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &hlogits));
    if (!err) err = DEV_OK(BindOutput(k->io, "logits", hlogits));
    if (!err && d->has_attention_mask) {
      if (!(ones = malloc(sizeof(int64_t) * (size_t)md[1]))) err = fbx_host_errf("decoder: out of memory");
      for (int64_t i = 0; !err && i < md[1]; i++) ones[i] = 1;
      if (!err) err = DEV_OK(CreateTensorWithDataAsOrtValue(k->cpu, ones, sizeof(int64_t) * (size_t)md[1], md, 2,
                                                            ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, &mask));
      if (!err) err = DEV_OK(BindInput(k->io, "attention_mask", mask));
    }
  } else {
    if (k->bound_n != n) { /* a step of another length: new (1, n) / (1, n, V) views, bound */
      if (k->ids_view) k->api->ReleaseValue(k->ids_view);
      if (k->logits_view) k->api->ReleaseValue(k->logits_view);
      k->ids_view = k->logits_view = NULL;
      k->bound_n = 0;
      err = dev__view(k, k->ids_p, idd, 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, sizeof(int64_t), &k->ids_view);
      if (!err) err = DEV_OK(BindInput(k->io, "input_ids", k->ids_view));
      if (!err)
        err = dev__view(k, k->logits_p, ld, 3, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, sizeof(float), &k->logits_view);
      if (!err) err = DEV_OK(BindOutput(k->io, "logits", k->logits_view));
      if (!err) k->bound_n = n;
    }
    if (!err)
      err = dev__copy(k, in[0].data, idd, 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, sizeof(int64_t), k->ids_view, 0);
    if (!err && d->has_attention_mask) {
      err = dev__view(k, k->mask_p, md, 2, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, sizeof(int64_t), &mask);
      if (!err) err = DEV_OK(BindInput(k->io, "attention_mask", mask));
    }
  }
  if (!err) err = DEV_OK(RunWithBinding(fbx_host_session_ort(d->s), NULL, k->io));
  if (!err && !d->dev_host_io)
    err = dev__copy(k, d->logits.data, ld, 3, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, sizeof(float), k->logits_view, 1);
  d->last_run_s = fbx_host_now() - t0;
  if (hids) k->api->ReleaseValue(hids);
  if (hlogits) k->api->ReleaseValue(hlogits);
  free(ones);
  if (mask) k->api->ReleaseValue(mask);
  if (pos) k->api->ReleaseValue(pos);
  if (!err) d->past_len += n;
  return err;
}

void fbx__host_devkv_free(fbx_host_decoder *d) {
  struct fbx_host_devkv *k = d->dev;
  if (!k) return;
  if (k->io) k->api->ReleaseIoBinding(k->io);
  if (k->kv)
    for (int i = 0; i < 2 * d->n_layers; i++)
      if (k->kv[i]) k->api->ReleaseValue(k->kv[i]);
  free(k->kv);
  if (k->ids) k->api->ReleaseValue(k->ids);
  if (k->mask) k->api->ReleaseValue(k->mask);
  if (k->logits) k->api->ReleaseValue(k->logits);
  if (k->ids_view) k->api->ReleaseValue(k->ids_view);
  if (k->logits_view) k->api->ReleaseValue(k->logits_view);
  if (k->cpu) k->api->ReleaseMemoryInfo(k->cpu);
  free(k);
  d->dev = NULL;
}
