// test_e2e_fuzz_gaps — three gaps the fuzz classes point at, through real ORT with Fusebox
// registered:
//   - pools whose window is wider than the input (the fuzz class `invalid`; ir_geometry.c):
//     MaxPool / AveragePool / LpPool with auto_pad VALID and a 3x3 window on a 2x2 input give
//     the spec's empty [1, 1, 0, 0] output on Fusebox (before: "kernel extent 3 exceeds padded
//     input 2"), placed on Fusebox, as ORT alone gives;
//   - TopK of a row holding NaNs (the fuzz class `nan`; cpu_gather.c): NaN ranks above +inf
//     (README "Numerics"), first with largest=1 and last with largest=0, equal values by lower
//     index; worked out here by hand (before: an inconsistent qsort comparator, order undefined);
//   - CumSum whose axis is a graph input (known only at run time; onnx_ops_reduce.c builds one
//     CUMSUM per axis selected with Where): axes -2..1 of a [2, 3] input against a naive
//     cumsum written here (exclusive and reverse too), placed on Fusebox; axes 2, -3 and 7
//     (outside [-rank, rank)) must fail the run, as ORT's does (before: Fusebox returned the
//     last axis' sum);
//   - GatherND with index depth 0 (indices [2, 0]: each empty tuple takes a whole slice):
//     Fusebox declines it (onnx_ops_gather.c), so ORT runs it and the outputs equal a naive
//     gather written here.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/node_model.h"
#include "common/ort_host.h"

#include "common/check.h"

// y = cumsum of x[2][3] along axis (0 or 1), per the spec's exclusive / reverse
static void naive_cumsum(const float *x, int axis, int exclusive, int reverse, double *y) {
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 3; j++) {
      double s = 0;
      int n = axis == 0 ? 2 : 3, me = axis == 0 ? i : j;
      for (int t = 0; t < n; t++) {
        int take = reverse ? (exclusive ? t > me : t >= me) : (exclusive ? t < me : t <= me);
        if (take) s += axis == 0 ? x[t * 3 + j] : x[i * 3 + t];
      }
      y[i * 3 + j] = s;
    }
}

static void check_cumsum(fbx_host *h, const char *dir) {
  fbx_host_tensor x = {0}, a = {0};
  char *e = fbx_host_tensor_alloc(&x, "x", FBX_HOST_F32, 2, (int64_t[]){2, 3});
  if (!e) e = fbx_host_tensor_alloc(&a, "axis", FBX_HOST_I64, 0, NULL);
  CHECK(!e, "alloc: %s", e ? e : "");
  if (e) return;
  for (int i = 0; i < 6; i++) ((float *)x.data)[i] = (float)(i * i) - 3.5f;
  for (int flags = 0; flags < 4; flags++) {
    char path[600];
    snprintf(path, sizeof path, "%s/cumsum%d.onnx", dir, flags);
    nm_model m = nm_model_init("CumSum", "");
    m.opset = 14;
    nm_input(&m, &x, "");
    nm_input(&m, &a, "");
    nm_output(&m, "y", FBX_HOST_F32);
    nm_attr_i(&m, "exclusive", flags & 1);
    nm_attr_i(&m, "reverse", flags >> 1);
    CHECK(nm_write(&m, path) == 0, "write %s", path);
    const int64_t axes[7] = {-2, -1, 0, 1, 2, -3, 7};
    for (int k = 0; k < 7; k++) {
      *(int64_t *)a.data = axes[k];
      fbx_host_tensor feeds[2] = {x, a};
      fbx_host_tensor *out = NULL;
      size_t n_out = 0;
      int claimed = 0;
      char *ef = nm_run(h, path, 1, feeds, 2, &out, &n_out, &claimed);
      int valid = axes[k] >= -2 && axes[k] < 2;
      if (!valid) {
        CHECK(ef != NULL, "cumsum flags %d axis %lld (rank 2): Fusebox returned numbers", flags, (long long)axes[k]);
        fbx_host_tensor *ro = NULL;
        size_t nr = 0;
        char *ec = nm_run(h, path, 0, feeds, 2, &ro, &nr, NULL);
        CHECK(ec != NULL, "cumsum axis %lld: ORT alone returned numbers (the spec says invalid)", (long long)axes[k]);
        fbx_host_err_free(ec);
        fbx_host_tensors_free(ro, nr);
      } else {
        CHECK(!ef && n_out == 1 && claimed, "cumsum flags %d axis %lld: %s (claimed %d)", flags, (long long)axes[k],
              ef ? ef : "", claimed);
        if (!ef && n_out == 1 && fbx_host_tensor_numel(&out[0]) == 6) {
          double want[6];
          naive_cumsum(x.data, (int)(axes[k] < 0 ? axes[k] + 2 : axes[k]), flags & 1, flags >> 1, want);
          int bad = 0;
          for (int i = 0; i < 6; i++) bad += fabs(fbx_host_tensor_get(&out[0], (size_t)i) - want[i]) > 1e-4;
          CHECK(!bad, "cumsum flags %d axis %lld: %d of 6 values differ from the naive cumsum", flags,
                (long long)axes[k], bad);
        }
      }
      fbx_host_err_free(ef);
      fbx_host_tensors_free(out, n_out);
    }
  }
  fbx_host_tensor_free(&x);
  fbx_host_tensor_free(&a);
}

static void check_gathernd_depth0(fbx_host *h, const char *dir) {
  fbx_host_tensor x = {0}, ind = {0};
  char *e = fbx_host_tensor_alloc(&x, "x", FBX_HOST_F32, 2, (int64_t[]){2, 3});
  if (!e) e = fbx_host_tensor_alloc(&ind, "i", FBX_HOST_I64, 2, (int64_t[]){2, 0});
  CHECK(!e, "alloc: %s", e ? e : "");
  if (e) return;
  for (int i = 0; i < 6; i++) ((float *)x.data)[i] = (float)i + 0.5f;
  char path[600];
  snprintf(path, sizeof path, "%s/gathernd.onnx", dir);
  nm_model m = nm_model_init("GatherND", "");
  m.opset = 13;
  nm_input(&m, &x, "");
  nm_init(&m, &ind);
  nm_output(&m, "y", FBX_HOST_F32);
  CHECK(nm_write(&m, path) == 0, "write %s", path);
  fbx_host_tensor *out = NULL;
  size_t n_out = 0;
  int claimed = 1;
  char *ef = nm_run(h, path, 1, &x, 1, &out, &n_out, &claimed);
  // the spec: output shape indices.shape[:-1] + data.shape[0:] = [2, 2, 3], y[t] = x
  int ok = !ef && n_out == 1 && out[0].rank == 3 && out[0].dims[0] == 2 && out[0].dims[1] == 2 && out[0].dims[2] == 3;
  CHECK(ok, "gathernd depth 0: %s", ef ? ef : "wrong output shape");
  CHECK(!claimed, "gathernd depth 0 placed on Fusebox (it should decline it)");
  for (int i = 0; ok && i < 12; i++)
    CHECK(fbx_host_tensor_get(&out[0], (size_t)i) == (double)(i % 6) + 0.5, "gathernd depth 0: y[%d]", i);
  fbx_host_err_free(ef);
  fbx_host_tensors_free(out, n_out);
  fbx_host_tensor_free(&x);
  fbx_host_tensor_free(&ind);
}

static void check_empty_pools(fbx_host *h, const char *dir) {
  fbx_host_tensor x = {0};
  char *e = fbx_host_tensor_alloc(&x, "x", FBX_HOST_F32, 4, (int64_t[]){1, 1, 2, 2});
  CHECK(!e, "alloc: %s", e ? e : "");
  if (e) return;
  fbx_host_tensor_fill_uniform(&x, 7, -1, 1);
  const char *ops[3] = {"MaxPool", "AveragePool", "LpPool"};
  for (int o = 0; o < 3; o++) {
    char path[600];
    snprintf(path, sizeof path, "%s/pool%d.onnx", dir, o);
    nm_model m = nm_model_init(ops[o], "");
    nm_input(&m, &x, "");
    nm_output(&m, "y", FBX_HOST_F32);
    static const int64_t k3[2] = {3, 3};
    m.at[m.n_at++] = (nm_attr){.name = "kernel_shape", .type = 7, .is = k3, .n = 2};
    nm_attr_s(&m, "auto_pad", "VALID");
    CHECK(nm_write(&m, path) == 0, "write %s", path);
    for (int fb = 0; fb < 2; fb++) {
      fbx_host_tensor *out = NULL;
      size_t n_out = 0;
      int claimed = 0;
      char *ef = nm_run(h, path, fb, &x, 1, &out, &n_out, fb ? &claimed : NULL);
      // the spec: floor((2 - 3) / 1) + 1 = 0 per spatial axis
      int ok = !ef && n_out == 1 && out[0].rank == 4 && out[0].dims[0] == 1 && out[0].dims[1] == 1 &&
               out[0].dims[2] == 0 && out[0].dims[3] == 0;
      CHECK(ok, "%s VALID 3x3 on 2x2 (%s): %s", ops[o], fb ? "Fusebox" : "ORT alone", ef ? ef : "not [1, 1, 0, 0]");
      if (fb) CHECK(claimed, "%s VALID 3x3 on 2x2 not placed on Fusebox", ops[o]);
      fbx_host_err_free(ef);
      fbx_host_tensors_free(out, n_out);
    }
  }
  fbx_host_tensor_free(&x);
}

static void check_topk_nan(fbx_host *h, const char *dir) {
  fbx_host_tensor x = {0}, k = {0};
  char *e = fbx_host_tensor_alloc(&x, "x", FBX_HOST_F32, 1, (int64_t[]){6});
  if (!e) e = fbx_host_tensor_alloc(&k, "k", FBX_HOST_I64, 1, (int64_t[]){1});
  CHECK(!e, "alloc: %s", e ? e : "");
  if (e) return;
  const float xv[6] = {1, NAN, 3, NAN, 2, 3};
  memcpy(x.data, xv, sizeof xv);
  *(int64_t *)k.data = 4;
  // largest: NaN(1), NaN(3), 3(2), 3(5); smallest: 1(0), 2(4), 3(2), 3(5)
  const double want_v[2][4] = {{NAN, NAN, 3, 3}, {1, 2, 3, 3}};
  const int64_t want_i[2][4] = {{1, 3, 2, 5}, {0, 4, 2, 5}};
  for (int largest = 1; largest >= 0; largest--) {
    char path[600];
    snprintf(path, sizeof path, "%s/topk%d.onnx", dir, largest);
    nm_model m = nm_model_init("TopK", "");
    nm_input(&m, &x, "");
    nm_init(&m, &k);
    nm_output(&m, "v", FBX_HOST_F32);
    nm_output(&m, "i", FBX_HOST_I64);
    nm_attr_i(&m, "largest", largest);
    CHECK(nm_write(&m, path) == 0, "write %s", path);
    fbx_host_tensor *out = NULL;
    size_t n_out = 0;
    int claimed = 0;
    char *ef = nm_run(h, path, 1, &x, 1, &out, &n_out, &claimed);
    int ok = !ef && n_out == 2 && fbx_host_tensor_numel(&out[0]) == 4 && fbx_host_tensor_numel(&out[1]) == 4;
    CHECK(ok && claimed, "topk largest=%d with NaNs: %s (claimed %d)", largest, ef ? ef : "", claimed);
    for (int i = 0; ok && i < 4; i++) {
      double v = fbx_host_tensor_get(&out[0], (size_t)i), w = want_v[1 - largest][i];
      CHECK(((isnan(v) && isnan(w)) || v == w) && (int64_t)fbx_host_tensor_get(&out[1], (size_t)i) == want_i[1 - largest][i],
            "topk largest=%d [%d]: %g at %lld, want %g at %lld", largest, i, v,
            (long long)fbx_host_tensor_get(&out[1], (size_t)i), w, (long long)want_i[1 - largest][i]);
    }
    fbx_host_err_free(ef);
    fbx_host_tensors_free(out, n_out);
  }
  fbx_host_tensor_free(&x);
  fbx_host_tensor_free(&k);
}

int main(void) {
  char dir[] = "/tmp/fbx_fuzz_gaps_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  fbx_host *h = NULL;
  char *e = fbx_host_open(NULL, NULL, &h);
  if (e) {
    fprintf(stderr, "cannot open ORT: %s\n", e);
    return 1;
  }
  check_empty_pools(h, dir);
  check_topk_nan(h, dir);
  check_cumsum(h, dir);
  check_gathernd_depth0(h, dir);
  fbx_host_close(h);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  printf("fuzz-gaps: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
