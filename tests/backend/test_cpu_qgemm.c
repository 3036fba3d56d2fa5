/* Integer GEMM / CONV_INT / MATMUL_INT against naive int64 references
 * written here (no shared code with the kernels):
 *   - the GEMM primitive (pack A, pack B, kernel) on every path this CPU has
 *     (scalar always; AVX2, AVX-512 VNNI when present), every signedness pair,
 *     zero points at the extremes (0, 255, -128, 127) per tensor and per
 *     row / column, M, N, K not multiples of the register blocks or the SIMD
 *     width (K = 1, 3, 5, 17, 31, 64, 259, 1000, 4099), byte values at the extremes;
 *   - CONV_INT (1-D, 2-D, 3-D; groups, pads, strides, dilations, 1x1; per
 *     channel w zero points) and MATMUL_INT (batched with broadcast, 1-D
 *     operands, per-row / per-column zero points) through the CPU backend with
 *     each path forced, 1 and 2 threads. */
#include <stdint.h>

#include "backend/cpu/cpu_qgemm.h"
#include "base/alloc.h"
#include "cpu_test_util.h"

static uint8_t rbyte(int mode) { /* mode 0: uniform, 1: extremes only */
  double r = rnd();
  if (mode == 1) return r < -0.5 ? 0 : r < 0 ? 255 : r < 0.5 ? 127 : 128;
  return (uint8_t)(int)((r + 1.0) * 128.0);
}

static int64_t val(uint8_t b, bool sgn) { return sgn ? (int64_t)(int8_t)b : (int64_t)b; }

/* int64 reference, then wrapped to int32 the way the kernel's contract says */
static int32_t wrap32(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }

static const char *dtn(bool s) { return s ? "s8" : "u8"; }

static void gemm_case(fbx_qg_path path, int64_t M, int64_t N, int64_t K, bool as, bool bs, int zmode, int vmode) {
  uint8_t *a = malloc((size_t)(M * K) + 1), *b = malloc((size_t)(K * N) + 1);
  for (int64_t i = 0; i < M * K; i++) a[i] = rbyte(vmode);
  for (int64_t i = 0; i < K * N; i++) b[i] = rbyte(vmode);
  int64_t NP = (N + 15) / 16 * 16;
  int32_t *za = malloc(sizeof(int32_t) * (size_t)M), *zb = malloc(sizeof(int32_t) * (size_t)NP);
  static const int ext_u[4] = {0, 255, 1, 254}, ext_s[4] = {-128, 127, 0, -1};
  for (int64_t m = 0; m < M; m++)
    za[m] = zmode == 0 ? 0 : zmode == 1 ? (as ? -128 : 255) : (as ? ext_s : ext_u)[m % 4];
  for (int64_t n = 0; n < NP; n++)
    zb[n] = zmode == 0 ? 0 : zmode == 1 ? (bs ? 127 : 0) : (bs ? ext_s : ext_u)[(n + 1) % 4];
  size_t esz = fbx_cpu_qg_esz(path);
  int64_t kp = fbx_cpu_qg_kpad(path, K);
  void *ap = fbx_malloc_aligned((size_t)(M * kp) * esz + 64);
  void *panels = fbx_malloc_aligned((size_t)(NP / 16) * fbx_cpu_qg_panel_bytes(path, K) + 64);
  int32_t *rs = malloc(sizeof(int32_t) * (size_t)M), *alpha = malloc(sizeof(int32_t) * (size_t)M);
  int32_t *cs = malloc(sizeof(int32_t) * (size_t)NP), *beta = malloc(sizeof(int32_t) * (size_t)NP);
  int32_t *cb = malloc(sizeof(int32_t) * (size_t)NP), *y = malloc(sizeof(int32_t) * (size_t)(M * N));
  const uint8_t **rows = malloc(sizeof(void *) * (size_t)K);
  for (int64_t k = 0; k < K; k++) rows[k] = b + k * N;
  fbx_cpu_qg_pack_a(path, a, K, as, M, K, ap, rs);
  fbx_cpu_qg_pack_b(path, rows, bs, K, N, panels, cs);
  int oa = fbx_cpu_qg_oa(path, as), ob = fbx_cpu_qg_ob(path, bs);
  for (int64_t m = 0; m < M; m++) alpha[m] = oa - za[m];
  for (int64_t n = 0; n < NP; n++) {
    beta[n] = ob - zb[n];
    cb[n] = (int32_t)((uint32_t)cs[n] + (uint32_t)K * (uint32_t)beta[n]);
  }
  fbx_cpu_qg_kernel(path, ap, M, K, rs, alpha, panels, N, beta, cb, y, N);
  int64_t bad = 0, first = -1;
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) {
      int64_t s = 0;
      for (int64_t k = 0; k < K; k++) s += (val(a[m * K + k], as) - za[m]) * (val(b[k * N + n], bs) - zb[n]);
      if (y[m * N + n] != wrap32(s)) {
        if (first < 0) first = m * N + n;
        bad++;
      }
    }
  check(bad == 0, "qgemm %s %s x %s M=%lld N=%lld K=%lld zp=%d vals=%d: %lld wrong (first at %lld)",
        fbx_cpu_qg_name(path), dtn(as), dtn(bs), (long long)M, (long long)N, (long long)K, zmode, vmode,
        (long long)bad, (long long)first);
  free(a); free(b); free(za); free(zb); fbx_free_aligned(ap); fbx_free_aligned(panels);
  free(rs); free(alpha); free(cs); free(beta); free(cb); free(y); free(rows);
}

static void test_gemm(fbx_qg_path path) {
  static const int64_t Ks[] = {1, 3, 5, 17, 31, 64, 259, 1000};
  static const int64_t MN[][2] = {{1, 1}, {7, 15}, {9, 33}, {13, 17}, {8, 32}, {17, 50}};
  for (int s = 0; s < 4; s++) {
    bool as = s & 1, bs = s & 2;
    for (size_t ki = 0; ki < sizeof Ks / sizeof Ks[0]; ki++)
      for (size_t mi = 0; mi < sizeof MN / sizeof MN[0]; mi++)
        gemm_case(path, MN[mi][0], MN[mi][1], Ks[ki], as, bs, (int)((ki + mi) % 3), (int)(mi % 2));
    /* the largest magnitudes over a long K: K * 255 * 255 ~ 2.7e8, still inside int32 */
    gemm_case(path, 5, 19, 4099, as, bs, 1, 1);
  }
}

/* ---- CONV_INT through the backend ---- */

static void conv_case(const char *what, int nd, int64_t N, int64_t C, int64_t M, int64_t G, const int64_t *in_sp,
                      const int64_t *k, const int64_t *s, const int64_t *d, const int64_t *pads, bool xs, bool ws,
                      bool per_ch) {
  int64_t xd[5] = {N, C}, wd[5] = {M, C / G}, yd[5] = {N, M};
  int64_t out_sp[3];
  for (int i = 0; i < nd; i++) {
    xd[2 + i] = in_sp[i];
    wd[2 + i] = k[i];
    out_sp[i] = (in_sp[i] + pads[i] + pads[nd + i] - (d[i] * (k[i] - 1) + 1)) / s[i] + 1;
    yd[2 + i] = out_sp[i];
  }
  fbx_dtype xdt = xs ? FBX_DTYPE_I8 : FBX_DTYPE_U8, wdt = ws ? FBX_DTYPE_I8 : FBX_DTYPE_U8;
  fbx_tensor in[4];
  in[0] = tmake(xdt, nd + 2, xd);
  in[1] = tmake(wdt, nd + 2, wd);
  in[2] = tscalar(xdt);
  int64_t zm[1] = {M};
  in[3] = per_ch ? tmake(wdt, 1, zm) : tscalar(wdt);
  fbx_tensor out = tmake(FBX_DTYPE_I32, nd + 2, yd);
  int64_t nx = fbx_tensor_numel(&in[0]), nw = fbx_tensor_numel(&in[1]), ny = fbx_tensor_numel(&out);
  uint8_t *X = in[0].data, *W = in[1].data;
  for (int64_t i = 0; i < nx; i++) X[i] = rbyte(i % 7 == 0);
  for (int64_t i = 0; i < nw; i++) W[i] = rbyte(i % 5 == 0);
  ((uint8_t *)in[2].data)[0] = xs ? (uint8_t)(int8_t)-128 : 255;
  for (int64_t m = 0; m < fbx_tensor_numel(&in[3]); m++)
    ((uint8_t *)in[3].data)[m] = ws ? (uint8_t)(int8_t)(m % 2 ? 127 : -128) : (uint8_t)(m % 3 == 0 ? 0 : m % 3 == 1 ? 255 : 77);
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.conv.nd = nd;
  p.conv.group = G;
  for (int i = 0; i < nd; i++) {
    p.conv.kernel[i] = k[i];
    p.conv.strides[i] = s[i];
    p.conv.dilations[i] = d[i];
    p.conv.pads[i] = pads[i];
    p.conv.pads[nd + i] = pads[nd + i];
  }
  run_ok(what, FBX_IR_OP_CONV_INT, &p, in, 4, &out, 1);
  /* naive reference: (x - xz) * (w - wz[m]), padding contributes 0 */
  int64_t xz = val(((uint8_t *)in[2].data)[0], xs);
  int64_t Cg = C / G, Mg = M / G;
  int64_t isz[3] = {1, 1, 1}, osz[3] = {1, 1, 1}, kk[3] = {1, 1, 1}, ss[3] = {1, 1, 1}, dd[3] = {1, 1, 1}, pb[3] = {0, 0, 0};
  for (int i = 0; i < nd; i++) {
    isz[3 - nd + i] = in_sp[i];
    osz[3 - nd + i] = out_sp[i];
    kk[3 - nd + i] = k[i];
    ss[3 - nd + i] = s[i];
    dd[3 - nd + i] = d[i];
    pb[3 - nd + i] = pads[i];
  }
  int64_t bad = 0, first = -1, idx = 0;
  const int32_t *Y = out.data;
  for (int64_t n = 0; n < N; n++)
    for (int64_t m = 0; m < M; m++) {
      int64_t g = m / Mg;
      int64_t wz = val(((uint8_t *)in[3].data)[fbx_tensor_numel(&in[3]) == 1 ? 0 : m], ws);
      for (int64_t oz = 0; oz < osz[0]; oz++)
        for (int64_t oy = 0; oy < osz[1]; oy++)
          for (int64_t ox = 0; ox < osz[2]; ox++, idx++) {
            int64_t acc = 0;
            for (int64_t c = 0; c < Cg; c++)
              for (int64_t a = 0; a < kk[0]; a++)
                for (int64_t bq = 0; bq < kk[1]; bq++)
                  for (int64_t e = 0; e < kk[2]; e++) {
                    int64_t iz = oz * ss[0] - pb[0] + a * dd[0], iy = oy * ss[1] - pb[1] + bq * dd[1];
                    int64_t ix = ox * ss[2] - pb[2] + e * dd[2];
                    if (iz < 0 || iz >= isz[0] || iy < 0 || iy >= isz[1] || ix < 0 || ix >= isz[2]) continue;
                    int64_t xv = val(X[(((n * C + g * Cg + c) * isz[0] + iz) * isz[1] + iy) * isz[2] + ix], xs);
                    int64_t wv = val(W[(((m * Cg + c) * kk[0] + a) * kk[1] + bq) * kk[2] + e], ws);
                    acc += (xv - xz) * (wv - wz);
                  }
            if (Y[idx] != wrap32(acc)) {
              if (first < 0) first = idx;
              bad++;
            }
          }
    }
  check(idx == ny && bad == 0, "%s (%s x %s%s, path %s): %lld of %lld wrong (first %lld)", what, dtn(xs), dtn(ws),
        per_ch ? ", per-channel w_zp" : "", fbx_cpu_qg_name(fbx_cpu_qg_best()), (long long)bad, (long long)ny,
        (long long)first);
  for (int i = 0; i < 4; i++) tfree(&in[i]);
  tfree(&out);
}

static void test_conv(void) {
  for (int sg = 0; sg < 4; sg++) {
    bool xs = sg & 1, ws = sg & 2;
    conv_case("conv2d 3x3 pad1", 2, 1, 5, 7, 1, (int64_t[]){9, 11}, (int64_t[]){3, 3}, (int64_t[]){1, 1},
              (int64_t[]){1, 1}, (int64_t[]){1, 1, 1, 1}, xs, ws, sg == 1);
    conv_case("conv2d 1x1", 2, 2, 19, 21, 1, (int64_t[]){5, 7}, (int64_t[]){1, 1}, (int64_t[]){1, 1},
              (int64_t[]){1, 1}, (int64_t[]){0, 0, 0, 0}, xs, ws, true);
    conv_case("conv2d group 3 stride 2 dil 2 asym pads", 2, 1, 6, 9, 3, (int64_t[]){13, 10}, (int64_t[]){3, 2},
              (int64_t[]){2, 3}, (int64_t[]){2, 1}, (int64_t[]){2, 0, 1, 3}, xs, ws, true);
    conv_case("conv1d k5", 1, 2, 3, 17, 1, (int64_t[]){40}, (int64_t[]){5}, (int64_t[]){1}, (int64_t[]){1},
              (int64_t[]){2, 2}, xs, ws, false);
    conv_case("conv3d", 3, 1, 2, 5, 1, (int64_t[]){4, 5, 6}, (int64_t[]){2, 3, 3}, (int64_t[]){1, 2, 1},
              (int64_t[]){1, 1, 1}, (int64_t[]){1, 1, 0, 0, 1, 2}, xs, ws, sg == 2);
    /* 2-D group 1 stride 1 with OW >= 48: the direct VNNI kernel where the CPU has it */
    conv_case("conv2d direct dil 2 asym pads", 2, 2, 7, 11, 1, (int64_t[]){9, 61}, (int64_t[]){3, 3}, (int64_t[]){1, 1},
              (int64_t[]){2, 2}, (int64_t[]){1, 3, 2, 0}, xs, ws, sg != 1);
    conv_case("conv2d direct 5x3 width 70", 2, 1, 13, 19, 1, (int64_t[]){6, 70}, (int64_t[]){5, 3}, (int64_t[]){1, 1},
              (int64_t[]){1, 1}, (int64_t[]){2, 1, 2, 1}, xs, ws, sg == 3);
    conv_case("conv2d depthwise", 2, 1, 8, 8, 8, (int64_t[]){12, 12}, (int64_t[]){3, 3}, (int64_t[]){1, 1},
              (int64_t[]){1, 1}, (int64_t[]){1, 1, 1, 1}, xs, ws, true);
  }
  /* K = 64 * 9 = 576 and many positions (several tiles, both threads) */
  conv_case("conv2d 64->40 3x3 over 40x52", 2, 1, 64, 40, 1, (int64_t[]){40, 52}, (int64_t[]){3, 3},
            (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){1, 1, 1, 1}, false, false, false);
  conv_case("conv2d 300->9 1x1 over 33x33", 2, 1, 300, 9, 1, (int64_t[]){33, 33}, (int64_t[]){1, 1},
            (int64_t[]){1, 1}, (int64_t[]){1, 1}, (int64_t[]){0, 0, 0, 0}, true, false, true);
}

/* ---- MATMUL_INT through the backend ---- */

static void mm_case(const char *what, int ra, const int64_t *ad, int rb, const int64_t *bd, int ry, const int64_t *yd,
                    bool as, bool bs, int zmode) {
  fbx_dtype adt = as ? FBX_DTYPE_I8 : FBX_DTYPE_U8, bdt = bs ? FBX_DTYPE_I8 : FBX_DTYPE_U8;
  fbx_tensor in[4];
  in[0] = tmake(adt, ra, ad);
  in[1] = tmake(bdt, rb, bd);
  int64_t M = ra == 1 ? 1 : ad[ra - 2], K = ad[ra - 1], N = rb == 1 ? 1 : bd[rb - 1];
  int64_t zmd[1] = {M}, znd[1] = {N};
  in[2] = zmode == 2 && ra >= 2 ? tmake(adt, 1, zmd) : tscalar(adt);
  in[3] = zmode == 2 && rb >= 2 ? tmake(bdt, 1, znd) : tscalar(bdt);
  fbx_tensor out = tmake(FBX_DTYPE_I32, ry, yd);
  uint8_t *A = in[0].data, *B = in[1].data;
  for (int64_t i = 0; i < fbx_tensor_numel(&in[0]); i++) A[i] = rbyte(i % 3 == 0);
  for (int64_t i = 0; i < fbx_tensor_numel(&in[1]); i++) B[i] = rbyte(i % 4 == 0);
  for (int64_t i = 0; i < fbx_tensor_numel(&in[2]); i++)
    ((uint8_t *)in[2].data)[i] = zmode == 0 ? 0 : as ? (uint8_t)(int8_t)(i % 2 ? 127 : -128) : (uint8_t)(i % 2 ? 0 : 255);
  for (int64_t i = 0; i < fbx_tensor_numel(&in[3]); i++)
    ((uint8_t *)in[3].data)[i] = zmode == 0 ? 0 : bs ? (uint8_t)(int8_t)(i % 3 ? -128 : 127) : (uint8_t)(i % 3 ? 255 : 3);
  run_ok(what, FBX_IR_OP_MATMUL_INT, NULL, in, 4, &out, 1);
  /* batch broadcast reference: batch dims right-aligned */
  int abr = ra >= 2 ? ra - 2 : 0, bbr = rb >= 2 ? rb - 2 : 0, obr = ry - (ra >= 2 ? 1 : 0) - (rb >= 2 ? 1 : 0);
  int64_t nb = 1;
  for (int i = 0; i < obr; i++) nb *= yd[i];
  int64_t bad = 0;
  const int32_t *Y = out.data;
  for (int64_t bi = 0; bi < nb; bi++) {
    int64_t rem = bi, ao = 0, bo = 0, ast = 1, bst = 1;
    for (int dd = obr - 1; dd >= 0; dd--) {
      int64_t i = rem % yd[dd];
      rem /= yd[dd];
      int ia = dd - (obr - abr), ib = dd - (obr - bbr);
      int64_t da = ia >= 0 ? ad[ia] : 1, db = ib >= 0 ? bd[ib] : 1;
      ao += (da == 1 ? 0 : i) * ast;
      bo += (db == 1 ? 0 : i) * bst;
      ast *= da;
      bst *= db;
    }
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        int64_t za = val(((uint8_t *)in[2].data)[fbx_tensor_numel(&in[2]) == 1 ? 0 : m], as);
        int64_t zb = val(((uint8_t *)in[3].data)[fbx_tensor_numel(&in[3]) == 1 ? 0 : n], bs);
        int64_t s = 0;
        for (int64_t k = 0; k < K; k++)
          s += (val(A[(ao * M + m) * K + k], as) - za) * (val(B[(bo * K + k) * N + n], bs) - zb);
        if (Y[(bi * M + m) * N + n] != wrap32(s)) bad++;
      }
  }
  check(bad == 0, "%s (%s x %s, zp mode %d, path %s): %lld wrong", what, dtn(as), dtn(bs), zmode,
        fbx_cpu_qg_name(fbx_cpu_qg_best()), (long long)bad);
  for (int i = 0; i < 4; i++) tfree(&in[i]);
  tfree(&out);
}

static void test_matmul(void) {
  for (int sg = 0; sg < 4; sg++) {
    bool as = sg & 1, bs = sg & 2;
    for (int z = 0; z < 3; z++) {
      mm_case("matmul 2-D 37x77 @ 77x45", 2, (int64_t[]){37, 77}, 2, (int64_t[]){77, 45}, 2, (int64_t[]){37, 45}, as,
              bs, z);
      mm_case("matmul batched bcast (2,1,5,33) @ (3,33,18)", 4, (int64_t[]){2, 1, 5, 33}, 3, (int64_t[]){3, 33, 18}, 4,
              (int64_t[]){2, 3, 5, 18}, as, bs, z);
    }
    mm_case("matmul 1-D A", 1, (int64_t[]){29}, 2, (int64_t[]){29, 17}, 1, (int64_t[]){17}, as, bs, 1);
    mm_case("matmul 1-D B", 2, (int64_t[]){6, 29}, 1, (int64_t[]){29}, 1, (int64_t[]){6}, as, bs, 1);
    mm_case("matmul K=1030", 2, (int64_t[]){20, 1030}, 2, (int64_t[]){1030, 70}, 2, (int64_t[]){20, 70}, as, bs, 2);
  }
}

int main(void) {
  int npaths = 0;
  for (int p = FBX_QG_SCALAR; p <= FBX_QG_LAST; p++) {
    if (!fbx_cpu_qg_available((fbx_qg_path)p)) {
      printf("path %s: not on this CPU (skipped)\n", fbx_cpu_qg_name((fbx_qg_path)p));
      continue;
    }
    npaths++;
    test_gemm((fbx_qg_path)p);
  }
  for (int threads = 1; threads <= 2; threads++) {
    test_setup(threads);
    for (int p = FBX_QG_SCALAR; p <= FBX_QG_LAST; p++) {
      if (!fbx_cpu_qg_available((fbx_qg_path)p)) continue;
      fbx_cpu_qg_force((fbx_qg_path)p);
      test_conv();
      test_matmul();
    }
    if (threads == 1) {
      fbx_backend_destroy(g_be);
    }
  }
  printf("paths tested: %d\n", npaths);
  return test_finish("test_cpu_qgemm");
}
