// test_e2e_ort_host: the host library itself, through ORT's CPU EP only (no Fusebox needed):
// library lookup, session I/O description, run, seeded fills, .npy round trip, compare,
// fp16 conversion. References are computed here by hand (x + y), not taken from ORT.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ort_host.h"

#include "common/check.h"
#define CHECK_OK(err)                                                       \
  do {                                                                      \
    char *e_ = (err);                                                       \
    if (e_) {                                                               \
      fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, e_);         \
      fbx_host_err_free(e_);                                                \
      failed++;                                                             \
      goto out;                                                             \
    }                                                                       \
  } while (0)

static void test_f16(void) {
  const float vals[] = {0.f, 1.f, -2.5f, 65504.f, 6.103515625e-05f, 5.960464477539063e-08f, 0.1f};
  for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
    float back = fbx_host_f16_to_f32(fbx_host_f32_to_f16(vals[i]));
    CHECK(fabsf(back - vals[i]) <= fabsf(vals[i]) * 1e-3f, "f16 round trip %g -> %g", vals[i], back);
  }
  CHECK(fbx_host_f32_to_f16(1.0f) == 0x3c00, "f16(1) = %#x", fbx_host_f32_to_f16(1.0f));
  CHECK(isinf(fbx_host_f16_to_f32(fbx_host_f32_to_f16(1e6f))), "f16 overflow -> inf");
}

static void test_npy_and_compare(void) {
  fbx_host_tensor a = {0}, b = {0}, c = {0};
  fbx_host_cmp r;
  int64_t dims[3] = {2, 3, 4};
  char path[] = "/tmp/fbx_ort_host_XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  CHECK_OK(fbx_host_tensor_alloc(&a, "a", FBX_HOST_F32, 3, dims));
  fbx_host_tensor_fill_normal(&a, 7);
  CHECK_OK(fbx_host_npy_write(path, &a));
  CHECK_OK(fbx_host_npy_read(path, &b));
  CHECK(b.dtype == FBX_HOST_F32 && b.rank == 3 && b.dims[2] == 4, "npy shape");
  CHECK(memcmp(a.data, b.data, a.nbytes) == 0, "npy data round trip");
  CHECK(fbx_host_compare(&a, &b, 0, 0, &r) && r.max_abs == 0, "identical compare");
  ((float *)b.data)[5] += 1e-2f;
  CHECK(!fbx_host_compare(&a, &b, 1e-3, 1e-4, &r) && r.n_bad == 1 && r.worst_index == 5,
        "one-element difference found (n_bad=%zu idx=%zu)", r.n_bad, r.worst_index);
  ((float *)a.data)[0] = NAN;
  ((float *)b.data)[0] = NAN;
  ((float *)b.data)[5] = ((float *)a.data)[5];
  CHECK(fbx_host_compare(&a, &b, 1e-3, 1e-4, &r), "NaN == NaN");
  fbx_host_tensor_free(&b);

  // int64 fill in range, npy round trip, exact compare
  int64_t d1[1] = {1000};
  CHECK_OK(fbx_host_tensor_alloc(&c, "ids", FBX_HOST_I64, 1, d1));
  fbx_host_tensor_fill_int(&c, 3, 0, 99);
  int in_range = 1;
  for (int i = 0; i < 1000; i++) in_range &= ((int64_t *)c.data)[i] >= 0 && ((int64_t *)c.data)[i] <= 99;
  CHECK(in_range, "fill_int range");
  CHECK_OK(fbx_host_npy_write(path, &c));
  CHECK_OK(fbx_host_npy_read(path, &b));
  CHECK(b.dtype == FBX_HOST_I64 && fbx_host_compare(&b, &c, 0, 0, &r), "int64 npy");
  ((int64_t *)b.data)[10]++;
  CHECK(!fbx_host_compare(&b, &c, 1, 1, &r) && r.n_bad == 1, "int64 exact compare");
  // same seed -> same data
  fbx_host_tensor_fill_int(&b, 3, 0, 99);
  CHECK(memcmp(b.data, c.data, c.nbytes) == 0, "seeded fill is deterministic");
out:
  unlink(path);
  fbx_host_tensor_free(&a);
  fbx_host_tensor_free(&b);
  fbx_host_tensor_free(&c);
}

static void test_session(void) {
  const char *model = "/usr/share/libonnx-testdata/data/node/test_add/model.onnx";
  fbx_host *h = NULL;
  fbx_host_session *s = NULL;
  fbx_host_tensor in[2] = {{0}}, *outs = NULL;
  size_t n_out = 0;
  if (access(model, R_OK) != 0) {
    printf("SKIP session part: %s missing\n", model);
    return;
  }
  CHECK_OK(fbx_host_open(NULL, NULL, &h));
  printf("ORT %s from %s\n", fbx_host_ort_version(h), fbx_host_ort_path(h));
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.intra_threads = 1;
  CHECK_OK(fbx_host_session_create(h, model, &o, &s));
  CHECK(fbx_host_session_input_count(s) == 2 && fbx_host_session_output_count(s) == 1, "io count");
  const fbx_host_io *x = fbx_host_session_input(s, 0);
  CHECK(x->dtype == FBX_HOST_F32 && x->rank == 3 && x->dims[0] == 3, "input 0 description");
  for (int i = 0; i < 2; i++) {
    CHECK_OK(fbx_host_tensor_alloc(&in[i], fbx_host_session_input(s, (size_t)i)->name,
                                   FBX_HOST_F32, x->rank, x->dims));
    fbx_host_tensor_fill_normal(&in[i], 100 + (uint64_t)i);
  }
  CHECK_OK(fbx_host_session_run(s, in, 2, &outs, &n_out));
  CHECK(n_out == 1 && outs[0].nbytes == in[0].nbytes, "output count/size");
  size_t n = fbx_host_tensor_numel(&in[0]);
  int ok = 1;
  for (size_t i = 0; i < n && n_out == 1; i++)
    ok &= fabsf(((float *)outs[0].data)[i] - (((float *)in[0].data)[i] + ((float *)in[1].data)[i])) < 1e-6f;
  CHECK(ok, "x + y matches the hand-computed sum");

  // errors are surfaced, not fatal
  fbx_host_tensor *outs2 = NULL;
  size_t n_out2 = 0;
  char *e = fbx_host_session_run(s, in, 1, &outs2, &n_out2);
  CHECK(e && strstr(e, "was not given"), "missing input error: %s", e ? e : "(none)");
  fbx_host_err_free(e);
  e = NULL;
  fbx_host_session *bad = NULL;
  e = fbx_host_session_create(h, "/nonexistent.onnx", &o, &bad);
  CHECK(e && !bad, "missing model is an error");
  fbx_host_err_free(e);
out:
  fbx_host_tensors_free(outs, n_out);
  fbx_host_tensor_free(&in[0]);
  fbx_host_tensor_free(&in[1]);
  fbx_host_session_destroy(s);
  fbx_host_close(h);
}

int main(void) {
  test_f16();
  test_npy_and_compare();
  test_session();
  printf("%s\n", failed ? "test_e2e_ort_host: FAILED" : "test_e2e_ort_host: ok");
  return failed ? 1 : 0;
}
