// test_e2e_gpu_device: Fusebox's GPU OrtEpDevice through a real ORT, on the simulated GPU
// (FUSEBOX_TEST_DEVICE=gpu-sim: the device memory is the opaque backend's, tagged handles a
// host load or store faults on), so the ORT integration of a GPU runs on a machine without one.
//
//   listing     the factory offers the CPU device and one GPU device (type GPU, our vendor id),
//               the GPU one with DEFAULT and HOST_ACCESSIBLE memory infos, the CPU one none
//   no binding  cnn_small and a decoder_tiny prefill + decode on the GPU device alone and on
//               both devices with device=cuda, host feeds (ORT copies them in and out through
//               our data transfer): outputs match ORT's CPU EP
//   IOBinding   inputs made by our allocator (GetSharedAllocator of the GPU memory info:
//               opaque handles, so a host path would fault or fail), filled through ORT's
//               CopyTensors (our data transfer; one of them staged in our pinned memory),
//               outputs bound to our device (BindOutputToDevice and a preallocated BindOutput):
//               the outputs are in our memory and, copied back, match ORT's CPU EP. The
//               decoder's KV cache stays in device memory for a prefill and 3 decode steps
//               (presents bound on the device become the next pasts).
//   partial     a chain alternating claimed Adds and ReverseSequence nodes ORT keeps on its CPU EP:
//               ORT moves the values across each edge between our device and the CPU through
//               our data transfer; host feeds, and IOBinding with the input and output on the device
//   options     GPU device alone with device=cpu, or device_id other than its own: errors
//               that name the key; both devices with device=cpu: runs on the CPU, correct.
// The reference is ORT's CPU EP on the same inputs (float models; tolerance 1e-4 + 1e-3 rel).
// FBX_TEST_REAL_GPU=1 runs the same on the machine's first NVIDIA GPU instead (vendor 0x10DE, CUDA
// device memory; scripts/gpu_check.sh does this); without one it prints SKIP and passes.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <onnxruntime_c_api.h>

#include "common/ort_host.h"
#include "common/ort_host_decode.h"
#include "common/partition_models.h"

#include "common/check.h"
#include "common/gpu_ep_test.h"

#define SIM_VENDOR FBX_TEST_SIM_VENDOR
#define NVIDIA_VENDOR FBX_TEST_NVIDIA_VENDOR
#define RTOL FBX_TEST_GPU_RTOL
#define ATOL FBX_TEST_GPU_ATOL

typedef fbx_test_gpu gpu;

#define OK(call) fbx_test_ort_err(g->ort, g->ort->call, #call)
#define close_enough(a, ref, what) fbx_test_close_enough(a, ref, RTOL, ATOL, what)

static int is_handle(const void *p) { return ((uintptr_t)p >> 48) == SIM_VENDOR; }

/* The value is in the GPU's memory: its memory info says so and (simulated GPU) its data is an
 * opaque handle, which only our allocator makes. */
static int on_device(gpu *g, const OrtValue *v) {
  const OrtMemoryInfo *mi = NULL;
  const void *p = NULL;
  OrtStatus *ms = g->ort->GetTensorMemoryInfo(v, &mi);
  if (ms) g->ort->ReleaseStatus(ms);
  if (ms || !mi) return 0;
  OrtMemoryInfoDeviceType t = OrtMemoryInfoDeviceType_CPU;
  g->ort->MemoryInfoGetDeviceType(mi, &t);
  size_t bytes = 0;
  OrtStatus *st = g->ort->GetTensorSizeInBytes(v, &bytes);
  if (!st) st = g->ort->GetTensorData(v, &p);
  if (st) {
    g->ort->ReleaseStatus(st);
    return 0;
  }
  return t == OrtMemoryInfoDeviceType_GPU && g->ort->MemoryInfoGetVendorId(mi) == g->vendor &&
         (bytes == 0 || g->real || is_handle(p));
}

/* A device copy of host tensor t (through ORT's CopyTensors = our data transfer); staged in
 * our pinned memory first when pinned. */
static char *to_device(gpu *g, const fbx_host_tensor *t, int pinned, OrtValue **out) {
  *out = NULL;
  OrtValue *src = NULL;
  char *err = OK(CreateTensorAsOrtValue(g->dev_alloc, t->dims, (size_t)t->rank, t->dtype, out));
  if (!err && pinned) {
    err = OK(CreateTensorAsOrtValue(g->pin_alloc, t->dims, (size_t)t->rank, t->dtype, &src));
    void *p = NULL;
    if (!err) err = OK(GetTensorMutableData(src, &p));
    if (!err && t->nbytes) memcpy(p, t->data, t->nbytes); /* pinned memory is host memory */
  } else if (!err) {
    err = OK(CreateTensorWithDataAsOrtValue(g->cpu_mem, t->data, t->nbytes, t->dims, (size_t)t->rank, t->dtype, &src));
  }
  if (!err) err = OK(CopyTensors(g->env, (const OrtValue *const *)&src, out, NULL, 1));
  if (src) g->ort->ReleaseValue(src);
  return err;
}

/* A host copy of device value v (named name). */
static char *to_host(gpu *g, const OrtValue *v, const char *name, fbx_host_tensor *t) {
  OrtTensorTypeAndShapeInfo *info = NULL;
  char *err = OK(GetTensorTypeAndShape(v, &info));
  ONNXTensorElementDataType et = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  size_t rank = 0;
  int64_t dims[FBX_HOST_MAX_RANK];
  if (!err) err = OK(GetTensorElementType(info, &et));
  if (!err) err = OK(GetDimensionsCount(info, &rank));
  if (!err && rank > FBX_HOST_MAX_RANK) err = fbx_host_errf("%s: rank %zu", name, rank);
  if (!err) err = OK(GetDimensions(info, dims, rank));
  if (info) g->ort->ReleaseTensorTypeAndShapeInfo(info);
  if (!err) err = fbx_host_tensor_alloc(t, name, (int)et, (int)rank, dims);
  OrtValue *dst = NULL;
  if (!err) err = OK(CreateTensorWithDataAsOrtValue(g->cpu_mem, t->data, t->nbytes, dims, rank, et, &dst));
  if (!err) err = OK(CopyTensors(g->env, &v, &dst, NULL, 1));
  if (dst) g->ort->ReleaseValue(dst);
  return err;
}

static char kCnn[4096], kDec[4096];

/* ---- listing ---- */

static char *find_devices(gpu *g) {
  const OrtEpDevice *const *devs = NULL;
  size_t n = 0;
  char *err = fbx_host_register_fusebox(g->h);
  if (!err) err = OK(GetEpDevices(g->env, &devs, &n));
  int n_cpu = 0, n_gpu = 0;
  for (size_t i = 0; !err && i < n; i++) {
    if (strcmp(g->ort->EpDevice_EpName(devs[i]), FBX_HOST_EP_NAME) != 0) continue;
    const OrtHardwareDevice *hw = g->ort->EpDevice_Device(devs[i]);
    if (g->ort->HardwareDevice_Type(hw) == OrtHardwareDeviceType_GPU) {
      if (!n_gpu++) g->gpu_dev = devs[i];
      CHECK(g->ort->HardwareDevice_VendorId(hw) == g->vendor, "GPU device vendor 0x%x",
            g->ort->HardwareDevice_VendorId(hw));
    } else {
      n_cpu++;
      g->cpu_dev = devs[i];
      CHECK(g->ort->EpDevice_MemoryInfo(devs[i], OrtDeviceMemoryType_DEFAULT) == NULL,
            "the CPU device has no device memory info");
    }
  }
  CHECK(n_cpu == 1 && (g->real ? n_gpu >= 1 : n_gpu == 1), "Fusebox offers %d CPU and %d GPU device(s), expected 1 and %s",
        n_cpu, n_gpu, g->real ? "1 or more" : "1");
  if (err || !g->gpu_dev) return err ? err : fbx_host_errf("no GPU OrtEpDevice");
  g->dev_mem = g->ort->EpDevice_MemoryInfo(g->gpu_dev, OrtDeviceMemoryType_DEFAULT);
  g->pin_mem = g->ort->EpDevice_MemoryInfo(g->gpu_dev, OrtDeviceMemoryType_HOST_ACCESSIBLE);
  CHECK(g->dev_mem && g->pin_mem, "GPU device memory infos: DEFAULT %p, HOST_ACCESSIBLE %p", (void *)g->dev_mem,
        (void *)g->pin_mem);
  if (!g->dev_mem || !g->pin_mem) return fbx_host_errf("no GPU memory infos");
  OrtMemoryInfoDeviceType t = OrtMemoryInfoDeviceType_CPU;
  g->ort->MemoryInfoGetDeviceType(g->dev_mem, &t);
  CHECK(t == OrtMemoryInfoDeviceType_GPU && g->ort->MemoryInfoGetDeviceMemType(g->dev_mem) == OrtDeviceMemoryType_DEFAULT,
        "device memory info: type %d mem type %d", (int)t, (int)g->ort->MemoryInfoGetDeviceMemType(g->dev_mem));
  CHECK(g->ort->MemoryInfoGetDeviceMemType(g->pin_mem) == OrtDeviceMemoryType_HOST_ACCESSIBLE, "pinned memory info");
  err = OK(GetSharedAllocator(g->env, g->dev_mem, &g->dev_alloc));
  if (!err) err = OK(GetSharedAllocator(g->env, g->pin_mem, &g->pin_alloc));
  CHECK(!err && g->dev_alloc && g->pin_alloc, "ORT has the GPU's shared allocators");
  if (!err && (!g->dev_alloc || !g->pin_alloc)) err = fbx_host_errf("no shared allocators");
  return err;
}

/* ---- runs with host feeds ---- */

static fbx_host_session_opts opts(int devices, const char *const *k, const char *const *v, size_t n) {
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = 1;
  o.fusebox_devices = devices;
  o.ep_keys = k;
  o.ep_vals = v;
  o.n_ep_opts = n;
  return o;
}

/* cnn_small on input seed 7: with the session options o (NULL: ORT's CPU EP). */
static char *run_cnn(fbx_host *h, const fbx_host_session_opts *o, fbx_host_tensor *in, fbx_host_tensor **out,
                     size_t *n_out) {
  fbx_host_session_opts cpu = fbx_host_session_opts_default();
  fbx_host_session *s = NULL;
  char *err = fbx_host_session_create(h, kCnn, o ? o : &cpu, &s);
  if (!err && !in->data) {
    const fbx_host_io *io = fbx_host_session_input(s, 0);
    err = fbx_host_tensor_alloc(in, io->name, io->dtype, io->rank, io->dims);
    if (!err) fbx_host_tensor_fill_normal(in, 7);
  }
  if (!err) err = fbx_host_session_run(s, in, 1, out, n_out);
  fbx_host_session_destroy(s);
  return err;
}


static void test_host_feeds(gpu *g, const fbx_host_tensor *cnn_ref, size_t n_ref, const fbx_host_tensor dec_ref[4]) {
  static const char *const kc[] = {"device"}, *const vc[] = {"cuda"};
  fbx_host_session_opts cases[2] = {opts(FBX_HOST_DEVICES_GPU, NULL, NULL, 0), opts(FBX_HOST_DEVICES_ALL, kc, vc, 1)};
  const char *names[2] = {"GPU device alone", "both devices, device=cuda"};
  for (int c = 0; c < 2; c++) {
    fbx_host_tensor in = {0}, *out = NULL, logits[4] = {{0}};
    size_t n_out = 0;
    char *err = run_cnn(g->h, &cases[c], &in, &out, &n_out);
    CHECK(!err, "cnn_small, %s: %s", names[c], err ? err : "");
    CHECK(err || (n_out == n_ref && close_enough(&out[0], &cnn_ref[0], "cnn logits")), "cnn_small, %s: matches ORT",
          names[c]);
    fbx_host_err_free(err);
    err = fbx_test_run_decoder(g->h, kDec, &cases[c], logits);
    CHECK(!err, "decoder_tiny, %s: %s", names[c], err ? err : "");
    for (int s = 0; !err && s < 4; s++)
      CHECK(close_enough(&logits[s], &dec_ref[s], "decoder logits"), "decoder_tiny, %s: step %d matches ORT", names[c], s);
    fbx_host_err_free(err);
    fbx_host_tensors_free(out, n_out);
    fbx_host_tensor_free(&in);
    for (int s = 0; s < 4; s++) fbx_host_tensor_free(&logits[s]);
  }
}

/* ---- IOBinding ---- */

static char *bound_outputs(gpu *g, OrtIoBinding *b, OrtValue ***vals, size_t *n) {
  OrtAllocator *cpu = NULL;
  char *err = OK(GetAllocatorWithDefaultOptions(&cpu));
  if (!err) err = OK(GetBoundOutputValues(b, cpu, vals, n));
  return err;
}

static void free_bound(gpu *g, OrtValue **vals, size_t n) {
  OrtAllocator *cpu = NULL;
  for (size_t i = 0; i < n; i++) g->ort->ReleaseValue(vals[i]);
  OrtStatus *st = vals ? g->ort->GetAllocatorWithDefaultOptions(&cpu) : NULL;
  if (st) g->ort->ReleaseStatus(st);
  else if (vals) cpu->Free(cpu, vals);
}

static void test_iobinding_cnn(gpu *g, const fbx_host_tensor *in, const fbx_host_tensor *ref) {
  fbx_host_session_opts o = opts(FBX_HOST_DEVICES_GPU, NULL, NULL, 0);
  fbx_host_session *s = NULL;
  OrtIoBinding *b = NULL;
  OrtValue *x = NULL, *y = NULL;
  char *err = fbx_host_session_create(g->h, kCnn, &o, &s);
  OrtSession *sess = s ? fbx_host_session_ort(s) : NULL;
  const char *out_name = s ? fbx_host_session_output(s, 0)->name : "";
  if (!err) err = to_device(g, in, 1, &x);
  CHECK(err || on_device(g, x), "the input made by our allocator is in the GPU's memory");
  if (!err) err = OK(CreateIoBinding(sess, &b));
  if (!err) err = OK(BindInput(b, in->name, x));
  if (!err) err = OK(BindOutputToDevice(b, out_name, g->dev_mem));
  for (int run = 0; !err && run < 2; run++) { /* the second run is a cache HIT on the same buffers */
    err = OK(RunWithBinding(sess, NULL, b));
    OrtValue **vals = NULL;
    size_t n = 0;
    fbx_host_tensor got = {0};
    if (!err) err = bound_outputs(g, b, &vals, &n);
    if (!err && n != 1) err = fbx_host_errf("%zu bound outputs", n);
    if (!err) CHECK(on_device(g, vals[0]), "run %d: the output ORT allocated is in the GPU's memory", run);
    if (!err) err = to_host(g, vals[0], out_name, &got);
    if (!err) CHECK(close_enough(&got, ref, "cnn logits"), "cnn_small IOBinding (output on device), run %d", run);
    fbx_host_tensor_free(&got);
    free_bound(g, vals, n);
  }
  /* the output preallocated on the device by the caller: written in place */
  if (!err) {
    const fbx_host_io *io = fbx_host_session_output(s, 0);
    err = OK(CreateTensorAsOrtValue(g->dev_alloc, io->dims, (size_t)io->rank, io->dtype, &y));
  }
  if (!err) err = OK(BindOutput(b, out_name, y));
  if (!err) err = OK(RunWithBinding(sess, NULL, b));
  fbx_host_tensor got = {0};
  if (!err) err = to_host(g, y, out_name, &got);
  if (!err) CHECK(close_enough(&got, ref, "cnn logits"), "cnn_small IOBinding (preallocated device output)");
  fbx_host_tensor_free(&got);
  CHECK(!err, "cnn_small IOBinding: %s", err ? err : "");
  fbx_host_err_free(err);
  if (b) g->ort->ReleaseIoBinding(b);
  if (x) g->ort->ReleaseValue(x);
  if (y) g->ort->ReleaseValue(y);
  fbx_host_session_destroy(s);
}

/* Host tensor name[1, n] int64 with the given values (positions/mask from start when vals NULL). */
static char *i64_tensor(fbx_host_tensor *t, const char *name, int64_t n, const int64_t *vals, int64_t start,
                        int64_t fill) {
  int64_t dims[2] = {1, n};
  char *err = fbx_host_tensor_alloc(t, name, FBX_HOST_I64, 2, dims);
  for (int64_t i = 0; !err && i < n; i++) ((int64_t *)t->data)[i] = vals ? vals[i] : fill >= 0 ? fill : start + i;
  return err;
}

static void test_iobinding_decoder(gpu *g, const fbx_host_tensor ref[4]) {
  fbx_host_session_opts o = opts(FBX_HOST_DEVICES_GPU, NULL, NULL, 0);
  fbx_host_session *s = NULL;
  fbx_host_decoder d; /* only to read the layer count and cache geometry */
  memset(&d, 0, sizeof d);
  OrtIoBinding *b = NULL;
  char *err = fbx_host_session_create(g->h, kDec, &o, &s);
  if (!err) err = fbx_host_decoder_init(&d, s);
  OrtSession *sess = s ? fbx_host_session_ort(s) : NULL;
  if (!err) err = OK(CreateIoBinding(sess, &b));
  int n_kv = 2 * d.n_layers;
  OrtValue *past[16] = {0};
  if (!err && n_kv > 16) err = fbx_host_errf("too many layers");
  for (int i = 0; !err && i < n_kv; i++) { /* empty caches [1, H, 0, D], on the device */
    fbx_host_tensor t = {0};
    int64_t dims[4] = {1, d.heads, 0, d.head_dim};
    err = fbx_host_tensor_alloc(&t, d.past[i].name, FBX_HOST_F32, 4, dims);
    if (!err) err = to_device(g, &t, 0, &past[i]);
    fbx_host_tensor_free(&t);
  }
  int64_t pos = 0;
  for (int step = 0; !err && step < 4; step++) {
    int64_t n = step ? 1 : 5;
    const int64_t *ids = step ? &fbx_test_dec_next[step - 1] : fbx_test_dec_prompt;
    fbx_host_tensor hin[3] = {{0}};
    OrtValue *din[3] = {0};
    err = i64_tensor(&hin[0], "input_ids", n, ids, 0, -1);
    if (!err) err = i64_tensor(&hin[1], "position_ids", n, NULL, pos, -1);
    if (!err) err = i64_tensor(&hin[2], "attention_mask", pos + n, NULL, 0, 1);
    for (int i = 0; !err && i < 3; i++) {
      if (i == 1 && !d.has_position_ids) continue;
      if (i == 2 && !d.has_attention_mask) continue;
      err = to_device(g, &hin[i], i == 0, &din[i]);
      if (!err) err = OK(BindInput(b, hin[i].name, din[i]));
    }
    for (int i = 0; !err && i < n_kv; i++) {
      CHECK(on_device(g, past[i]), "step %d: past %d is in the GPU's memory", step, i);
      err = OK(BindInput(b, d.past[i].name, past[i]));
    }
    if (!err) err = OK(BindOutputToDevice(b, "logits", g->dev_mem));
    for (int i = 0; !err && i < n_kv; i++) {
      char nm[64];
      snprintf(nm, sizeof nm, "present.%d.%s", i / 2, (i & 1) ? "value" : "key");
      err = OK(BindOutputToDevice(b, nm, g->dev_mem));
    }
    if (!err) err = OK(RunWithBinding(sess, NULL, b));
    OrtValue **vals = NULL;
    size_t nv = 0;
    if (!err) err = bound_outputs(g, b, &vals, &nv);
    if (!err && nv != (size_t)n_kv + 1) err = fbx_host_errf("%zu bound outputs", nv);
    fbx_host_tensor got = {0};
    if (!err) CHECK(on_device(g, vals[0]), "step %d: logits in the GPU's memory", step);
    if (!err) err = to_host(g, vals[0], "logits", &got);
    if (!err) CHECK(close_enough(&got, &ref[step], "decoder logits"), "decoder_tiny IOBinding step %d matches ORT", step);
    fbx_host_tensor_free(&got);
    for (int i = 0; !err && i < n_kv; i++) { /* the presents (device) are the next pasts */
      g->ort->ReleaseValue(past[i]);
      past[i] = vals[1 + i];
      vals[1 + i] = NULL;
    }
    if (vals && vals[0]) g->ort->ReleaseValue(vals[0]);
    if (vals) vals[0] = NULL;
    free_bound(g, vals, err ? nv : 0);
    g->ort->ClearBoundInputs(b);
    g->ort->ClearBoundOutputs(b);
    for (int i = 0; i < 3; i++) {
      fbx_host_tensor_free(&hin[i]);
      if (din[i]) g->ort->ReleaseValue(din[i]);
    }
    pos += n;
  }
  CHECK(!err, "decoder_tiny IOBinding: %s", err ? err : "");
  fbx_host_err_free(err);
  for (int i = 0; i < 16; i++)
    if (past[i]) g->ort->ReleaseValue(past[i]);
  if (b) g->ort->ReleaseIoBinding(b);
  fbx_host_decoder_free(&d);
  fbx_host_session_destroy(s);
}

/* ---- a partly claimed graph ---- */

static void test_partial(gpu *g) {
  char path[128];
  snprintf(path, sizeof path, "/tmp/test_e2e_gpu_device_chain_%d.onnx", (int)getpid());
  char *err = fbx_chain_model_write(path, 3, 4);
  fbx_host_session_opts cpu = fbx_host_session_opts_default(), o = opts(FBX_HOST_DEVICES_GPU, NULL, NULL, 0);
  o.record_assignment = 1;
  fbx_host_session *ref = NULL, *s = NULL;
  fbx_host_tensor in = {0}, *want = NULL, *got = NULL;
  size_t n_want = 0, n_got = 0;
  if (!err) err = fbx_host_session_create(g->h, path, &cpu, &ref);
  if (!err) err = fbx_host_session_create(g->h, path, &o, &s);
  if (!err) {
    const fbx_host_io *io = fbx_host_session_input(s, 0);
    err = fbx_host_tensor_alloc(&in, io->name, io->dtype, io->rank, io->dims);
  }
  if (!err) {
    fbx_host_tensor_fill_normal(&in, 11);
    err = fbx_host_session_run(ref, &in, 1, &want, &n_want);
  }
  if (!err) err = fbx_host_session_run(s, &in, 1, &got, &n_got);
  if (!err) CHECK(n_got == 1 && close_enough(&got[0], &want[0], "chain output"), "chain, host feeds: matches ORT");
  fbx_host_assign *nodes = NULL;
  size_t n = 0;
  int on_fb = 0, on_cpu = 0;
  if (!err) err = fbx_host_session_assignment(s, &nodes, &n);
  for (size_t i = 0; !err && i < n; i++) strcmp(nodes[i].ep, FBX_HOST_EP_NAME) ? on_cpu++ : on_fb++;
  fbx_host_assign_free(nodes, n);
  if (!err) CHECK(on_fb == 3 && on_cpu == 3, "chain: 3 nodes on Fusebox, 3 on ORT's CPU EP (got %d, %d)", on_fb, on_cpu);
  /* IOBinding: the input made on our device, the output bound to it */
  OrtIoBinding *b = NULL;
  OrtValue *x = NULL, **vals = NULL;
  size_t nv = 0;
  OrtSession *sess = s ? fbx_host_session_ort(s) : NULL;
  if (!err) err = to_device(g, &in, 0, &x);
  if (!err) err = OK(CreateIoBinding(sess, &b));
  if (!err) err = OK(BindInput(b, in.name, x));
  if (!err) err = OK(BindOutputToDevice(b, fbx_host_session_output(s, 0)->name, g->dev_mem));
  if (!err) err = OK(RunWithBinding(sess, NULL, b));
  if (!err) err = bound_outputs(g, b, &vals, &nv);
  fbx_host_tensor dev_got = {0};
  if (!err && nv == 1) {
    CHECK(on_device(g, vals[0]), "chain IOBinding: the output is in the GPU's memory");
    err = to_host(g, vals[0], "y", &dev_got);
    if (!err) CHECK(close_enough(&dev_got, &want[0], "chain output"), "chain, IOBinding: matches ORT");
  }
  CHECK(!err, "chain: %s", err ? err : "");
  fbx_host_err_free(err);
  fbx_host_tensor_free(&dev_got);
  free_bound(g, vals, nv);
  if (b) g->ort->ReleaseIoBinding(b);
  if (x) g->ort->ReleaseValue(x);
  fbx_host_tensors_free(want, n_want);
  fbx_host_tensors_free(got, n_got);
  fbx_host_tensor_free(&in);
  fbx_host_session_destroy(s);
  fbx_host_session_destroy(ref);
  unlink(path);
}

/* ---- options ---- */

static void expect_error(gpu *g, int devices, const char *key, const char *val, const char *want) {
  const char *const k[] = {key}, *const v[] = {val};
  fbx_host_session_opts o = opts(devices, k, v, 1);
  fbx_host_session *s = NULL;
  char *err = fbx_host_session_create(g->h, kCnn, &o, &s);
  CHECK(err && strstr(err, want), "%s=%s: error with '%s', got: %s", key, val, want, err ? err : "(no error)");
  fbx_host_err_free(err);
  fbx_host_session_destroy(s);
}

static void test_options(gpu *g, const fbx_host_tensor *cnn_ref) {
  expect_error(g, FBX_HOST_DEVICES_GPU, "device", "cpu", "EP option 'device'");
  expect_error(g, FBX_HOST_DEVICES_GPU, "device_id", "1", "bad value '1' for EP option 'device_id' (accepted: 0");
  expect_error(g, FBX_HOST_DEVICES_ALL, "device_id", "3", "EP option 'device_id'"); /* device=cpu: one device */
  static const char *const k[] = {"device"}, *const v[] = {"cpu"};
  fbx_host_session_opts o = opts(FBX_HOST_DEVICES_ALL, k, v, 1);
  fbx_host_tensor in = {0}, *out = NULL;
  size_t n_out = 0;
  char *err = run_cnn(g->h, &o, &in, &out, &n_out);
  CHECK(!err && n_out == 1 && close_enough(&out[0], cnn_ref, "cnn logits"),
        "both devices, device=cpu: runs (on the CPU) and matches ORT: %s", err ? err : "");
  fbx_host_err_free(err);
  fbx_host_tensors_free(out, n_out);
  fbx_host_tensor_free(&in);
}

/* Whether a real run has a GPU to run on: Fusebox lists a GPU OrtEpDevice. */
static int have_gpu(gpu *g) {
  const OrtEpDevice *const *devs = NULL;
  size_t n = 0;
  char *err = fbx_host_register_fusebox(g->h);
  OrtStatus *st = err ? NULL : g->ort->GetEpDevices(g->env, &devs, &n);
  if (st) g->ort->ReleaseStatus(st);
  int found = 0;
  for (size_t i = 0; !err && !st && i < n; i++)
    found |= !strcmp(g->ort->EpDevice_EpName(devs[i]), FBX_HOST_EP_NAME) &&
             g->ort->HardwareDevice_Type(g->ort->EpDevice_Device(devs[i])) == OrtHardwareDeviceType_GPU;
  if (err) fprintf(stderr, "%s\n", err);
  fbx_host_err_free(err);
  return found;
}

int main(void) {
  const char *real = getenv("FBX_TEST_REAL_GPU");
  int use_real = real && !strcmp(real, "1");
  /* read by the factory when ORT registers the library, below */
  if (!use_real) setenv("FUSEBOX_TEST_DEVICE", "gpu-sim", 1);
  if (fbx_host_find_repo_file("models/gen/cnn_small.onnx", kCnn, sizeof kCnn) ||
      fbx_host_find_repo_file("models/gen/decoder_tiny.onnx", kDec, sizeof kDec)) {
    printf("SKIP: models/gen/{cnn_small,decoder_tiny}.onnx not found (run scripts/make_models.sh)\n");
    return 0;
  }
  gpu g0;
  memset(&g0, 0, sizeof g0);
  gpu *g = &g0;
  char *err = fbx_host_open(NULL, NULL, &g->h);
  if (err) {
    fprintf(stderr, "FAIL: %s\n", err);
    return 1;
  }
  g->ort = fbx_host_ort_api(g->h);
  g->env = fbx_host_ort_env(g->h);
  g->real = use_real;
  g->vendor = use_real ? NVIDIA_VENDOR : SIM_VENDOR;
  if (use_real && !have_gpu(g)) {
    printf("SKIP: FBX_TEST_REAL_GPU=1 but Fusebox lists no GPU OrtEpDevice (no NVIDIA GPU, driver or "
           "libfusebox_cuda.so)\n");
    fbx_host_close(g->h);
    return 0;
  }
  err = OK(CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &g->cpu_mem));
  if (!err) err = find_devices(g);
  fbx_host_tensor cnn_in = {0}, *cnn_ref = NULL, dec_ref[4] = {{0}};
  size_t n_ref = 0;
  if (!err) err = run_cnn(g->h, NULL, &cnn_in, &cnn_ref, &n_ref);
  if (!err) err = fbx_test_run_decoder(g->h, kDec, NULL, dec_ref);
  CHECK(!err, "set-up: %s", err ? err : "");
  if (!err) {
    test_host_feeds(g, cnn_ref, n_ref, dec_ref);
    test_iobinding_cnn(g, &cnn_in, &cnn_ref[0]);
    test_iobinding_decoder(g, dec_ref);
    test_partial(g);
    test_options(g, &cnn_ref[0]);
  }
  fbx_host_err_free(err);
  fbx_host_tensors_free(cnn_ref, n_ref);
  fbx_host_tensor_free(&cnn_in);
  for (int s = 0; s < 4; s++) fbx_host_tensor_free(&dec_ref[s]);
  if (g->cpu_mem) g->ort->ReleaseMemoryInfo(g->cpu_mem);
  printf("test_e2e_gpu_device (ORT %s, %s GPU): %d passed, %d failed\n", fbx_host_ort_version(g->h),
         g->real ? "real" : "simulated", passed, failed);
  fbx_host_close(g->h);
  return failed ? 1 : 0;
}
