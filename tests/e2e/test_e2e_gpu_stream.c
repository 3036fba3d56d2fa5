// test_e2e_gpu_stream: Fusebox's OrtSyncStreamImpl through a real ORT, on the simulated GPU
// (FUSEBOX_TEST_DEVICE=gpu-sim: device memory is opaque handles, and the opaque backend refuses
// a stream handle that is not one of its streams), or with FBX_TEST_REAL_GPU=1 on the first
// NVIDIA GPU (scripts/gpu_check.sh; without one it prints SKIP and passes).
//
//   public stream  CreateSyncStreamForEpDevice on the GPU OrtEpDevice gives a stream with a
//                  native handle; CopyTensors on it (host -> device from our pinned memory,
//                  device -> pinned host) and without one: the bytes arrive (checked once the
//                  stream is released, which waits for it)
//   sessions       cnn_small on the GPU OrtEpDevice, host feeds (ORT copies in and out) and
//                  IOBinding (input from our allocator, output bound to the device), with
//                  ort_stream=on and =off: outputs match ORT's CPU EP; the session summary (the
//                  fusebox.session_summary instant of FUSEBOX_TRACE) says every Compute ran on
//                  ORT's stream with 0 host syncs (on) / none on it and 1 host sync per Compute
//                  (off). decoder_tiny prefill + 3 decode steps with host feeds on ORT's stream:
//                  logits match ORT's CPU EP and every Compute ran on the stream. The fused body
//                  of a Loop and of a Scan (once per iteration on the stream, no Flush between
//                  iterations): outputs match the generator's float64 reference, 0 host syncs.
// The reference is ORT's CPU EP on the same inputs (float models; tolerance 1e-4 + 1e-3 rel).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <onnxruntime_c_api.h>

#include "common/ort_host.h"
#include "common/ort_host_decode.h"

#include "common/check.h"
#include "common/gpu_ep_test.h"

#define SIM_VENDOR FBX_TEST_SIM_VENDOR
#define NVIDIA_VENDOR FBX_TEST_NVIDIA_VENDOR
#define RTOL FBX_TEST_GPU_RTOL
#define ATOL FBX_TEST_GPU_ATOL

typedef fbx_test_gpu gpu;

#define OK(call) fbx_test_ort_err(g->ort, g->ort->call, #call)
#define close_enough(a, ref, what) fbx_test_close_enough(a, ref, RTOL, ATOL, what)

static char kCnn[4096], kDec[4096];

static char *find_gpu(gpu *g) {
  const OrtEpDevice *const *devs = NULL;
  size_t n = 0;
  char *err = fbx_host_register_fusebox(g->h);
  if (!err) err = OK(GetEpDevices(g->env, &devs, &n));
  for (size_t i = 0; !err && i < n && !g->gpu_dev; i++) {
    const OrtHardwareDevice *hw = g->ort->EpDevice_Device(devs[i]);
    if (!strcmp(g->ort->EpDevice_EpName(devs[i]), FBX_HOST_EP_NAME) &&
        g->ort->HardwareDevice_Type(hw) == OrtHardwareDeviceType_GPU && g->ort->HardwareDevice_VendorId(hw) == g->vendor)
      g->gpu_dev = devs[i];
  }
  if (err || !g->gpu_dev) return err ? err : fbx_host_errf("Fusebox lists no GPU OrtEpDevice");
  g->dev_mem = g->ort->EpDevice_MemoryInfo(g->gpu_dev, OrtDeviceMemoryType_DEFAULT);
  g->pin_mem = g->ort->EpDevice_MemoryInfo(g->gpu_dev, OrtDeviceMemoryType_HOST_ACCESSIBLE);
  if (!g->dev_mem || !g->pin_mem) return fbx_host_errf("the GPU OrtEpDevice has no memory infos");
  err = OK(GetSharedAllocator(g->env, g->dev_mem, &g->dev_alloc));
  if (!err) err = OK(GetSharedAllocator(g->env, g->pin_mem, &g->pin_alloc));
  if (!err && (!g->dev_alloc || !g->pin_alloc)) err = fbx_host_errf("no shared allocators for the GPU's memory");
  return err;
}

/* ---- the public stream ---- */

static char *tensor_in(gpu *g, OrtAllocator *a, const int64_t *dims, size_t rank, OrtValue **out, float **host) {
  *out = NULL;
  char *err = OK(CreateTensorAsOrtValue(a, dims, rank, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, out));
  if (!err && host) err = OK(GetTensorMutableData(*out, (void **)host));
  return err;
}

static void test_public_stream(gpu *g) {
  enum { N = 4096 };
  const int64_t dims[1] = {N};
  OrtSyncStream *stream = NULL;
  OrtValue *pin_src = NULL, *dev_a = NULL, *dev_b = NULL, *pin_dst = NULL, *cpu_dst = NULL;
  float *src = NULL, *dst = NULL, host_dst[N];
  char *err = OK(CreateSyncStreamForEpDevice(g->gpu_dev, NULL, &stream));
  CHECK(!err && stream, "CreateSyncStreamForEpDevice on the GPU OrtEpDevice: %s", err ? err : "no stream");
  void *handle = stream ? g->ort->SyncStream_GetHandle(stream) : NULL;
  CHECK(!stream || handle, "the stream has a native handle");
  if (!err) err = tensor_in(g, g->pin_alloc, dims, 1, &pin_src, &src);
  if (!err) err = tensor_in(g, g->dev_alloc, dims, 1, &dev_a, NULL);
  if (!err) err = tensor_in(g, g->dev_alloc, dims, 1, &dev_b, NULL);
  if (!err) err = tensor_in(g, g->pin_alloc, dims, 1, &pin_dst, &dst);
  if (!err) err = OK(CreateTensorWithDataAsOrtValue(g->cpu_mem, host_dst, sizeof host_dst, dims, 1,
                                                    ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &cpu_dst));
  if (!err) {
    for (int i = 0; i < N; i++) src[i] = (float)i * 0.5f - 7.f;
    memset(dst, 0, N * sizeof *dst);
    memset(host_dst, 0, sizeof host_dst);
    /* on the stream: pinned -> device, device -> device, device -> pinned; each ordered after the last */
    const OrtValue *s1[] = {pin_src};
    OrtValue *d1[] = {dev_a};
    err = OK(CopyTensors(g->env, s1, d1, stream, 1));
    const OrtValue *s2[] = {dev_a};
    OrtValue *d2[] = {dev_b};
    if (!err) err = OK(CopyTensors(g->env, s2, d2, stream, 1));
    const OrtValue *s3[] = {dev_b};
    OrtValue *d3[] = {pin_dst};
    if (!err) err = OK(CopyTensors(g->env, s3, d3, stream, 1));
    /* without a stream: follows the stream's copies (ep_stream.c, ordering), complete on return */
    OrtValue *d4[] = {cpu_dst};
    if (!err) err = OK(CopyTensors(g->env, s3, d4, NULL, 1));
  }
  int bad_sync = 0;
  for (int i = 0; !err && i < N; i++) bad_sync += host_dst[i] != (float)i * 0.5f - 7.f;
  CHECK(!err && !bad_sync, "CopyTensors without a stream after copies on one: %d of %d values wrong", bad_sync, N);
  if (stream) g->ort->ReleaseSyncStream(stream); /* waits for the stream's work */
  stream = NULL;
  int bad_async = 0;
  for (int i = 0; !err && i < N; i++) bad_async += dst[i] != (float)i * 0.5f - 7.f;
  CHECK(!err && !bad_async, "CopyTensors on the stream (pinned -> device -> device -> pinned): %d of %d values wrong",
        bad_async, N);
  CHECK(!err, "public stream: %s", err ? err : "");
  fbx_host_err_free(err);
  OrtValue *vals[] = {pin_src, dev_a, dev_b, pin_dst, cpu_dst};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
    if (vals[i]) g->ort->ReleaseValue(vals[i]);
}

/* ---- sessions: the summary of the session just destroyed ---- */

typedef struct summary {
  long long device_runs, host_syncs, stream_runs;
} summary;

/* The last fusebox.session_summary instant in the trace file (written at each session teardown). */
static char *last_summary(gpu *g, summary *out) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *root = json_load_file(g->trace, 0, &je);
  if (!root) return fbx_host_errf("%s: %s (line %d)", g->trace, je.text, je.line);
  json_t *evs = json_object_get(root, "traceEvents"), *e, *last = NULL;
  size_t i;
  json_array_foreach(evs, i, e) {
    const char *name = json_string_value(json_object_get(e, "name"));
    if (name && !strcmp(name, "fusebox.session_summary")) last = e;
  }
  json_t *a = last ? json_object_get(last, "args") : NULL;
  char *err = a ? NULL : fbx_host_errf("%s: no fusebox.session_summary", g->trace);
  if (a) {
    out->device_runs = (long long)json_integer_value(json_object_get(a, "device_runs"));
    out->host_syncs = (long long)json_integer_value(json_object_get(a, "host_syncs"));
    out->stream_runs = (long long)json_integer_value(json_object_get(a, "stream_runs"));
  }
  json_decref(root);
  return err;
}

/* A device copy of host tensor t (CopyTensors without a stream), and a host copy of device v. */
static char *to_device(gpu *g, const fbx_host_tensor *t, OrtValue **out) {
  OrtValue *src = NULL;
  char *err = OK(CreateTensorAsOrtValue(g->dev_alloc, t->dims, (size_t)t->rank, t->dtype, out));
  if (!err) err = OK(CreateTensorWithDataAsOrtValue(g->cpu_mem, t->data, t->nbytes, t->dims, (size_t)t->rank, t->dtype, &src));
  if (!err) err = OK(CopyTensors(g->env, (const OrtValue *const *)&src, out, NULL, 1));
  if (src) g->ort->ReleaseValue(src);
  return err;
}

static char *to_host(gpu *g, const OrtValue *v, const fbx_host_tensor *like, fbx_host_tensor *t) {
  OrtValue *dst = NULL;
  char *err = fbx_host_tensor_alloc(t, like->name, like->dtype, like->rank, like->dims);
  if (!err) err = OK(CreateTensorWithDataAsOrtValue(g->cpu_mem, t->data, t->nbytes, t->dims, (size_t)t->rank, t->dtype, &dst));
  if (!err) err = OK(CopyTensors(g->env, &v, &dst, NULL, 1));
  if (dst) g->ort->ReleaseValue(dst);
  return err;
}

static fbx_host_session_opts gpu_opts(const char *const *k, const char *const *v, size_t n) {
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = 1;
  o.fusebox_devices = FBX_HOST_DEVICES_GPU;
  o.ep_keys = k;
  o.ep_vals = v;
  o.n_ep_opts = n;
  return o;
}

enum { HOST_RUNS = 6, BOUND_RUNS = 6 };

/* cnn_small with ort_stream=<mode>: HOST_RUNS runs with host feeds, BOUND_RUNS with IOBinding. */
static char *cnn_session(gpu *g, const char *mode, const fbx_host_tensor *in, const fbx_host_tensor *ref, int *bad) {
  const char *const k[] = {"ort_stream"}, *const v[] = {mode};
  fbx_host_session_opts o = gpu_opts(k, v, 1);
  fbx_host_session *s = NULL;
  OrtIoBinding *b = NULL;
  OrtValue *x = NULL, *y = NULL;
  char *err = fbx_host_session_create(g->h, kCnn, &o, &s);
  for (int r = 0; !err && r < HOST_RUNS; r++) {
    fbx_host_tensor *out = NULL;
    size_t n_out = 0;
    err = fbx_host_session_run(s, in, 1, &out, &n_out);
    if (!err && (n_out != 1 || !close_enough(&out[0], ref, "cnn logits"))) ++*bad;
    fbx_host_tensors_free(out, n_out);
  }
  OrtSession *sess = s ? fbx_host_session_ort(s) : NULL;
  const char *out_name = s ? fbx_host_session_output(s, 0)->name : "";
  if (!err) err = to_device(g, in, &x);
  if (!err) err = OK(CreateTensorAsOrtValue(g->dev_alloc, ref->dims, (size_t)ref->rank, ref->dtype, &y));
  if (!err) err = OK(CreateIoBinding(sess, &b));
  if (!err) err = OK(BindInput(b, in->name, x));
  if (!err) err = OK(BindOutput(b, out_name, y));
  for (int r = 0; !err && r < BOUND_RUNS; r++) {
    fbx_host_tensor got = {0};
    err = OK(RunWithBinding(sess, NULL, b));
    if (!err) err = to_host(g, y, ref, &got);
    if (!err && !close_enough(&got, ref, "cnn logits (IOBinding)")) ++*bad;
    fbx_host_tensor_free(&got);
  }
  if (b) g->ort->ReleaseIoBinding(b);
  if (x) g->ort->ReleaseValue(x);
  if (y) g->ort->ReleaseValue(y);
  fbx_host_session_destroy(s);
  return err;
}

static void test_cnn(gpu *g, const fbx_host_tensor *in, const fbx_host_tensor *ref) {
  const char *modes[2] = {"on", "off"};
  for (int m = 0; m < 2; m++) {
    int bad = 0;
    summary su;
    char *err = cnn_session(g, modes[m], in, ref, &bad);
    if (!err) err = last_summary(g, &su);
    CHECK(!err, "cnn_small, ort_stream=%s: %s", modes[m], err ? err : "");
    if (err) {
      fbx_host_err_free(err);
      continue;
    }
    CHECK(!bad, "cnn_small, ort_stream=%s: %d of %d runs differ from ORT's CPU EP", modes[m], bad, HOST_RUNS + BOUND_RUNS);
    CHECK(su.device_runs >= HOST_RUNS + BOUND_RUNS, "cnn_small, ort_stream=%s: %lld Computes on the device (want >= %d)",
          modes[m], su.device_runs, HOST_RUNS + BOUND_RUNS);
    if (m == 0)
      CHECK(su.stream_runs == su.device_runs && su.host_syncs == 0,
            "cnn_small on ORT's stream: %lld of %lld Computes on it, %lld host syncs (want all, 0)", su.stream_runs,
            su.device_runs, su.host_syncs);
    else
      CHECK(su.stream_runs == 0 && su.host_syncs == su.device_runs,
            "cnn_small with ort_stream=off: %lld Computes on ORT's stream, %lld host syncs in %lld (want 0, 1 each)",
            su.stream_runs, su.host_syncs, su.device_runs);
  }
}


static void test_decoder(gpu *g) {
  fbx_host_tensor ref[4] = {{0}}, got[4] = {{0}};
  fbx_host_session_opts o = gpu_opts(NULL, NULL, 0);
  summary su;
  char *err = fbx_test_run_decoder(g->h, kDec, NULL, ref);
  if (!err) err = fbx_test_run_decoder(g->h, kDec, &o, got);
  if (!err) err = last_summary(g, &su);
  CHECK(!err, "decoder_tiny on ORT's stream: %s", err ? err : "");
  for (int s = 0; !err && s < 4; s++)
    CHECK(close_enough(&got[s], &ref[s], "decoder logits"), "decoder_tiny on ORT's stream: step %d matches ORT", s);
  if (!err)
    CHECK(su.device_runs >= 4 && su.stream_runs == su.device_runs, "decoder_tiny: %lld of %lld Computes on ORT's stream",
          su.stream_runs, su.device_runs);
  fbx_host_err_free(err);
  for (int s = 0; s < 4; s++) {
    fbx_host_tensor_free(&ref[s]);
    fbx_host_tensor_free(&got[s]);
  }
}

/* A fused subgraph inside a Loop / Scan body (ORT runs the Loop, Fusebox the whole body): it
 * runs once per iteration on ORT's stream with no Flush in between (ORT flushes the main graph's
 * streams only), so each iteration's Compute waits for the previous one's staging buffers
 * (fbx_ep_kernel.done). Reference: the generator's float64 formulas (models/gen/cases/<kind>_cell). */
static char *read_case(const char *kind, const char *file, const char *name, fbx_host_tensor *t) {
  char rel[512], path[1024];
  snprintf(rel, sizeof rel, "models/gen/cases/%s_cell/%s", kind, file);
  if (fbx_host_find_repo_file(rel, path, sizeof path)) return fbx_host_errf("%s not found (run scripts/make_models.sh)", rel);
  char *e = fbx_host_npy_read(path, t);
  return e ? e : fbx_host_tensor_set_name(t, name);
}

static void test_control_flow(gpu *g, const char *kind) {
  const int loop = !strcmp(kind, "loop");
  char rel[256], model[1024];
  snprintf(rel, sizeof rel, "models/gen/%s_cell.onnx", kind);
  if (fbx_host_find_repo_file(rel, model, sizeof model)) {
    printf("  (%s not found: run scripts/make_models.sh; skipped)\n", rel);
    return;
  }
  fbx_host_tensor in[2] = {{0}}, ref[2] = {{0}}, *out = NULL;
  size_t n_out = 0;
  fbx_host_session *s = NULL;
  fbx_host_session_opts o = gpu_opts(NULL, NULL, 0);
  summary su;
  char *err = read_case(kind, "h0.npy", "h0", &in[0]);
  if (!err) err = read_case(kind, loop ? "steps.npy" : "xs.npy", loop ? "steps" : "xs", &in[1]);
  if (!err) err = read_case(kind, "h_last.npy", "h_last", &ref[0]);
  if (!err) err = read_case(kind, "ys.npy", "ys", &ref[1]);
  if (!err) err = fbx_host_session_create(g->h, model, &o, &s);
  for (int r = 0; !err && r < 2; r++) { /* two Runs: the second finds the first's staging buffers */
    fbx_host_tensors_free(out, n_out);
    out = NULL;
    err = fbx_host_session_run(s, in, 2, &out, &n_out);
  }
  fbx_host_session_destroy(s);
  if (!err) err = last_summary(g, &su);
  CHECK(!err, "%s body on ORT's stream: %s", kind, err ? err : "");
  if (!err) {
    for (size_t i = 0; i < n_out && i < 2; i++) {
      long k = !strcmp(out[i].name, ref[0].name) ? 0 : 1;
      fbx_host_cmp c;
      CHECK(fbx_host_compare(&out[i], &ref[k], RTOL, ATOL, &c), "%s body on ORT's stream: %s matches the float64 "
            "reference (max_abs %.3g)", kind, out[i].name, c.max_abs);
    }
    CHECK(n_out == 2, "%s: 2 outputs (got %zu)", kind, n_out);
    CHECK(su.device_runs > 2 && su.stream_runs == su.device_runs && su.host_syncs == 0,
          "%s body: %lld of %lld Computes (one per iteration) on ORT's stream, %lld host syncs (want all, 0)", kind,
          su.stream_runs, su.device_runs, su.host_syncs);
  }
  fbx_host_err_free(err);
  fbx_host_tensors_free(out, n_out);
  for (int k = 0; k < 2; k++) {
    fbx_host_tensor_free(&in[k]);
    fbx_host_tensor_free(&ref[k]);
  }
}

int main(void) {
  const char *real = getenv("FBX_TEST_REAL_GPU");
  int use_real = real && !strcmp(real, "1");
  if (!use_real) setenv("FUSEBOX_TEST_DEVICE", "gpu-sim", 1); /* read when ORT registers the library */
  if (fbx_host_find_repo_file("models/gen/cnn_small.onnx", kCnn, sizeof kCnn) ||
      fbx_host_find_repo_file("models/gen/decoder_tiny.onnx", kDec, sizeof kDec)) {
    printf("SKIP: models/gen/{cnn_small,decoder_tiny}.onnx not found (run scripts/make_models.sh)\n");
    return 0;
  }
  gpu g0;
  memset(&g0, 0, sizeof g0);
  gpu *g = &g0;
  /* the session summaries this test reads are the trace's (environment read once, at first use) */
  const char *tmp = getenv("TMPDIR");
  snprintf(g->trace, sizeof g->trace, "%s/fbx_gpu_stream_%d.json", tmp && tmp[0] ? tmp : "/tmp", (int)getpid());
  setenv("FUSEBOX_TRACE", g->trace, 1);
  char *err = fbx_host_open(NULL, NULL, &g->h);
  if (err) {
    fprintf(stderr, "FAIL: %s\n", err);
    return 1;
  }
  g->ort = fbx_host_ort_api(g->h);
  g->env = fbx_host_ort_env(g->h);
  g->real = use_real;
  g->vendor = use_real ? NVIDIA_VENDOR : SIM_VENDOR;
  err = OK(CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &g->cpu_mem));
  if (!err) err = find_gpu(g);
  if (err && use_real) {
    printf("SKIP: FBX_TEST_REAL_GPU=1 but %s (no NVIDIA GPU, driver or libfusebox_cuda.so)\n", err);
    fbx_host_err_free(err);
    if (g->cpu_mem) g->ort->ReleaseMemoryInfo(g->cpu_mem);
    fbx_host_close(g->h);
    unlink(g->trace);
    return 0;
  }
  /* the reference: cnn_small on ORT's CPU EP, input seed 7 */
  fbx_host_tensor in = {0}, *ref = NULL;
  size_t n_ref = 0;
  fbx_host_session_opts cpu = fbx_host_session_opts_default();
  fbx_host_session *s = NULL;
  if (!err) err = fbx_host_session_create(g->h, kCnn, &cpu, &s);
  if (!err) {
    const fbx_host_io *io = fbx_host_session_input(s, 0);
    err = fbx_host_tensor_alloc(&in, io->name, io->dtype, io->rank, io->dims);
  }
  if (!err) fbx_host_tensor_fill_normal(&in, 7);
  if (!err) err = fbx_host_session_run(s, &in, 1, &ref, &n_ref);
  fbx_host_session_destroy(s);
  CHECK(!err, "set-up: %s", err ? err : "");
  if (!err) {
    test_public_stream(g);
    test_cnn(g, &in, &ref[0]);
    test_decoder(g);
    test_control_flow(g, "loop");
    test_control_flow(g, "scan");
  }
  fbx_host_err_free(err);
  fbx_host_tensors_free(ref, n_ref);
  fbx_host_tensor_free(&in);
  if (g->cpu_mem) g->ort->ReleaseMemoryInfo(g->cpu_mem);
  printf("test_e2e_gpu_stream (ORT %s, %s GPU): %d passed, %d failed\n", fbx_host_ort_version(g->h),
         g->real ? "real" : "simulated", passed, failed);
  fbx_host_close(g->h);
  unlink(g->trace);
  return failed ? 1 : 0;
}
