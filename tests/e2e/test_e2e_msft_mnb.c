// test_e2e_msft_mnb: com.microsoft MatMulNBits as one-node models (bits 4 and 8, block_size 16..128,
// K a multiple of the block or not, no / packed uint8 / float zero points, bias, M = 1 (decode)
// and M > 1 with symbolic batch/seq dims, accuracy_level 0 and 4), run on ORT's CPU EP and with
// Fusebox (M >= 8 at accuracy_level 0 takes the panel + sgemm path), both checked against a float64 reference written
// here from the contrib-op docs (w = (q - zero_point) * scale, q packed low nibble first along K, default zero point
// 2^(bits-1)).
//
// Tolerances, per output element y = sum_k a_k w_k:
//   accuracy_level 0: |err| <= 2e-6 * sum_k |a_k w_k| + 1e-6 (float32 accumulation: each of the
//     <= K/8 partial sums and block sums rounds once; 2e-6 is ~16 ulp of the absolute sum).
//   accuracy_level 4: A is quantised per block to int8 (scale_a = max|a| / 127), so each a_k moves
//     by at most scale_a / 2: |err| <= sum_b (scale_a_b / 2) sum_{k in b} |w_k|, plus the float slack.
//     The bound is computed here per element from the block maxima, not tuned.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/check.h"
#include "common/node_model.h"

typedef struct mnb_case {
  int M_b, M_s;   // A is (M_b, M_s, K); M = M_b * M_s
  int K, N, bits, bs;
  int zp;         // 0 none, 1 packed uint8, 2 float
  int bias, level;
} mnb_case;

typedef struct rng { uint64_t s; } rng;
static uint32_t rnext(rng *r) {
  r->s ^= r->s << 13, r->s ^= r->s >> 7, r->s ^= r->s << 17;
  return (uint32_t)(r->s >> 16);
}

static void run_case(fbx_host *h, const mnb_case *c, const char *dir, int idx) {
  char desc[200], path[512];
  snprintf(desc, sizeof desc, "MatMulNBits M=%dx%d K=%d N=%d bits=%d block=%d zp=%s bias=%d level=%d", c->M_b, c->M_s,
           c->K, c->N, c->bits, c->bs, c->zp == 0 ? "none" : c->zp == 1 ? "u8" : "f32", c->bias, c->level);
  snprintf(path, sizeof path, "%s/mnb%d.onnx", dir, idx);
  const int64_t K = c->K, N = c->N, bs = c->bs, kb = (K + bs - 1) / bs, blob = bs * c->bits / 8;
  const int64_t M = (int64_t)c->M_b * c->M_s, qmax = (1 << c->bits) - 1;
  rng r = {0x9e3779b97f4a7c15ull ^ (uint64_t)idx * 7919};
  // the weights: q (N, K) in [0, qmax], zero points (N, kb), scales (N, kb)
  uint8_t *q = calloc((size_t)(N * kb * bs), 1);
  double *zpv = calloc((size_t)(N * kb), sizeof(double));
  fbx_host_tensor A = {0}, B = {0}, S = {0}, Z = {0}, bias = {0};
  int64_t ad[3] = {c->M_b, c->M_s, K}, bd[3] = {N, kb, blob}, sd[2] = {N, kb}, nd[1] = {N};
  fbx_host_tensor_alloc(&A, "A", FBX_HOST_F32, 3, ad);
  fbx_host_tensor_fill_normal(&A, 100 + (uint64_t)idx);
  fbx_host_tensor_alloc(&B, "B", FBX_HOST_U8, 3, bd);
  fbx_host_tensor_alloc(&S, "scales", FBX_HOST_F32, 2, sd);
  fbx_host_tensor_fill_uniform(&S, 200 + (uint64_t)idx, 0.002, 0.05);
  fbx_host_tensor_alloc(&bias, "bias", FBX_HOST_F32, 1, nd);
  fbx_host_tensor_fill_normal(&bias, 300 + (uint64_t)idx);
  for (int64_t n = 0; n < N; n++)
    for (int64_t k = 0; k < K; k++) q[n * kb * bs + k] = (uint8_t)(rnext(&r) % (uint32_t)(qmax + 1));
  uint8_t *bp = B.data; // ORT packing: along K per block, low nibble first
  for (int64_t n = 0; n < N; n++)
    for (int64_t k = 0; k < kb * bs; k++) {
      uint8_t v = q[n * kb * bs + k];
      if (c->bits == 8) bp[n * kb * blob + k] = v;
      else bp[n * kb * blob + k / 2] |= (uint8_t)(k & 1 ? v << 4 : v);
    }
  if (c->zp == 1) {
    int64_t zrow = (kb * c->bits + 7) / 8, zd[2] = {N, zrow};
    fbx_host_tensor_alloc(&Z, "zero_points", FBX_HOST_U8, 2, zd);
    uint8_t *zp = Z.data;
    for (int64_t n = 0; n < N; n++)
      for (int64_t b = 0; b < kb; b++) {
        uint8_t v = (uint8_t)(rnext(&r) % (uint32_t)(qmax + 1));
        zpv[n * kb + b] = v;
        if (c->bits == 8) zp[n * zrow + b] = v;
        else zp[n * zrow + b / 2] |= (uint8_t)(b & 1 ? v << 4 : v);
      }
  } else if (c->zp == 2) {
    fbx_host_tensor_alloc(&Z, "zero_points", FBX_HOST_F32, 2, sd);
    for (int64_t i = 0; i < N * kb; i++) {
      zpv[i] = (double)(rnext(&r) % (uint32_t)(qmax + 1)) + 0.25 * (rnext(&r) % 4);
      ((float *)Z.data)[i] = (float)zpv[i];
    }
  } else {
    for (int64_t i = 0; i < N * kb; i++) zpv[i] = 1 << (c->bits - 1);
  }
  nm_model m = nm_model_init("MatMulNBits", "com.microsoft");
  nm_input(&m, &A, "batch,seq,");
  nm_init(&m, &B);
  nm_init(&m, &S);
  if (c->zp) nm_init(&m, &Z);
  else if (c->bias) nm_absent(&m);
  if (c->bias) {
    nm_absent(&m); // g_idx
    nm_init(&m, &bias);
  }
  nm_attr_i(&m, "K", K);
  nm_attr_i(&m, "N", N);
  nm_attr_i(&m, "bits", c->bits);
  nm_attr_i(&m, "block_size", bs);
  nm_attr_i(&m, "accuracy_level", c->level);
  nm_output(&m, "Y", FBX_HOST_F32);
  CHECK(nm_write(&m, path) == 0, "%s: cannot write model", desc);

  // float64 reference and the per-element error bound
  double *ref = malloc(sizeof(double) * (size_t)(M * N)), *bound = malloc(sizeof(double) * (size_t)(M * N));
  const float *a = A.data, *sc = S.data;
  for (int64_t mi = 0; mi < M; mi++)
    for (int64_t n = 0; n < N; n++) {
      double y = c->bias ? ((float *)bias.data)[n] : 0, absum = 0, qerr = 0;
      for (int64_t b = 0; b < kb; b++) {
        double amax = 0, wabs = 0;
        for (int64_t k = b * bs; k < (b + 1) * bs && k < K; k++) {
          double w = ((double)q[n * kb * bs + k] - zpv[n * kb + b]) * sc[n * kb + b], x = a[mi * K + k];
          y += x * w;
          absum += fabs(x * w);
          wabs += fabs(w);
          if (fabs(x) > amax) amax = fabs(x);
        }
        qerr += amax / 127.0 / 2.0 * wabs * 1.0001;
      }
      ref[mi * N + n] = y;
      bound[mi * N + n] = 2e-6 * absum + 1e-6 + (c->level == 4 ? qerr : 0);
    }
  fbx_host_tensor *ort = NULL, *fbx = NULL;
  size_t n_ort = 0, n_fbx = 0;
  int claimed = 0;
  char *e = nm_run(h, path, 0, &A, 1, &ort, &n_ort, NULL);
  CHECK(!e, "%s: ORT CPU: %s", desc, e ? e : "");
  fbx_host_err_free(e);
  e = nm_run(h, path, 1, &A, 1, &fbx, &n_fbx, &claimed);
  CHECK(!e, "%s: Fusebox: %s", desc, e ? e : "");
  fbx_host_err_free(e);
  CHECK(claimed, "%s: not placed on Fusebox", desc);
  for (int w = 0; w < 2; w++) {
    fbx_host_tensor *t = w ? fbx : ort;
    size_t nt = w ? n_fbx : n_ort;
    if (!t || nt != 1 || fbx_host_tensor_numel(t) != (size_t)(M * N)) {
      CHECK(0, "%s: %s gave no (M, N) output", desc, w ? "Fusebox" : "ORT");
      continue;
    }
    size_t bad = 0;
    double worst = 0;
    for (int64_t i = 0; i < M * N; i++) {
      double d = fabs(fbx_host_tensor_get(t, (size_t)i) - ref[i]);
      bad += d > bound[i];
      if (d / bound[i] > worst) worst = d / bound[i];
    }
    CHECK(bad == 0, "%s: %s: %zu of %lld elements outside the bound (worst %.2fx the bound)", desc,
          w ? "Fusebox" : "ORT CPU (reference sanity)", bad, (long long)(M * N), worst);
  }
  if (ort) fbx_host_tensors_free(ort, n_ort);
  if (fbx) fbx_host_tensors_free(fbx, n_fbx);
  free(ref), free(bound), free(q), free(zpv);
  fbx_host_tensor_free(&A), fbx_host_tensor_free(&B), fbx_host_tensor_free(&S);
  fbx_host_tensor_free(&Z), fbx_host_tensor_free(&bias);
}

int main(void) {
  char dir[] = "/tmp/fbx_msft_mnb_XXXXXX";
  if (!mkdtemp(dir)) return 1;
  fbx_host *h = NULL;
  char *e = fbx_host_open(NULL, NULL, &h);
  if (e) {
    fprintf(stderr, "cannot open ORT: %s\n", e);
    return 1;
  }
  const mnb_case cases[] = {
      {1, 1, 64, 48, 4, 32, 0, 0, 0},    {1, 1, 64, 48, 4, 32, 0, 0, 4},    {1, 1, 96, 40, 4, 32, 1, 1, 0},
      {1, 1, 96, 40, 4, 32, 1, 1, 4},    {1, 1, 128, 33, 4, 16, 1, 0, 4},   {1, 1, 256, 24, 4, 128, 1, 1, 4},
      {1, 1, 200, 24, 4, 64, 1, 0, 0},   {1, 1, 200, 24, 4, 64, 1, 0, 4},   {2, 3, 64, 32, 4, 32, 1, 1, 0},
      {2, 3, 64, 32, 4, 32, 1, 1, 4},    {1, 5, 160, 20, 4, 16, 2, 0, 0},   {1, 1, 64, 48, 8, 32, 0, 0, 0},
      {1, 1, 64, 48, 8, 32, 1, 1, 4},    {1, 4, 136, 24, 8, 64, 1, 0, 0},   {1, 1, 896, 256, 4, 32, 1, 0, 4},
      {1, 1, 896, 256, 4, 32, 1, 0, 0},  {1, 7, 256, 64, 4, 128, 0, 1, 4},  {1, 1, 128, 16, 4, 16, 2, 1, 0},
      // M >= 8 at accuracy_level 0: dequantised panels + sgemm (N not a multiple of the 64-column panel)
      {2, 6, 200, 100, 4, 64, 1, 1, 0},  {1, 9, 128, 70, 8, 32, 0, 0, 0},   {1, 16, 96, 64, 4, 16, 2, 1, 0},
      {1, 12, 64, 130, 4, 32, 1, 1, 4},
      // the int8 group kernels' partial last group: 3 blocks of 64 (1.5 groups of 128), 5 of 32
      {1, 3, 192, 40, 4, 64, 1, 1, 4},   {1, 5, 160, 24, 4, 32, 2, 0, 4},
  };
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) run_case(h, &cases[i], dir, i);
  fbx_host_close(h);
  printf("msft-mnb: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
