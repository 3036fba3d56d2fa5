/* The decoder ops on CUDA (MATMUL_NBITS, GQA, ROTARY, SKIP_NORM): every case
 * runs one IR node on the CUDA backend and on the CPU backend (node_prepare
 * with the constant inputs, as the executor does) and checks the CUDA result
 * against a naive float64 implementation written here AND against the CPU
 * kernel, on random data over the attribute space (bits, block sizes, zero
 * points, accuracy levels, M; packed/separate QKV, rotary modes, past
 * lengths, shared past/present buffers, batch with ragged seqlens_k; skip,
 * bias, optional outputs). Then declines name the device, device-side
 * length errors reach synchronize, and every device buffer was given back.
 *
 * Skips (exit 0, one line) when libfusebox_cuda.so, the driver or a GPU is
 * missing; each section runs in its own process (a kernel fault fails that
 * section alone). */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/backend.h"
#include "backend/backend_cuda.h"
#include "common/check.h"
#include "common/cuda_fork.h"
#include "ir/ir_shape.h"

static fbx_backend *g_cpu, *g_cuda;
static char g_lib[PATH_MAX + 32];
static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static double rnd(void) { /* uniform [-1, 1) */
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(g_rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0;
}
static int rndi(int n) { return (int)(((rnd() + 1) / 2) * n) % n; } /* 0..n-1 */

static fbx_tensor tmake(fbx_dtype dt, int rank, const int64_t *dims) {
  fbx_tensor t = {.dtype = dt, .rank = rank};
  for (int i = 0; i < rank; i++) t.dims[i] = dims[i];
  size_t n = fbx_tensor_nbytes(&t);
  t.data = calloc(1, n ? n : 8);
  return t;
}
#define T(dt, ...) tmake(dt, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})
static fbx_tensor tabsent(void) { fbx_tensor t = {.rank = -1}; return t; }
static float *F(const fbx_tensor *t) { return t->data; }
static fbx_tensor frnd(fbx_tensor t, double lo, double hi) {
  for (int64_t i = 0; i < fbx_tensor_numel(&t); i++) F(&t)[i] = (float)(lo + (rnd() + 1) / 2 * (hi - lo));
  return t;
}

/* ---- one node on one backend ----
 * const_mask: inputs handed to node_prepare as constants; share[o] >= 0: output o
 * is input share[o]'s buffer (past/present sharing). out[] has shapes and host data. */
static fbx_status *run_on(fbx_backend *be, const fbx_ir_node *nd, const fbx_tensor *in, int n_in, unsigned const_mask,
                          const int *share, fbx_tensor *out, int n_out, fbx_kernel_info *info) {
  fbx_tensor din[FBX_IR_MAX_INPUTS], dout[FBX_IR_MAX_OUTPUTS];
  const fbx_tensor *cin[FBX_IR_MAX_INPUTS];
  memset(din, 0, sizeof din);
  memset(dout, 0, sizeof dout);
  memset(cin, 0, sizeof cin);
  void *state = NULL;
  bool prepared = false;
  fbx_status *st = NULL;
  for (int i = 0; i < n_in; i++) {
    din[i] = in[i];
    din[i].data = NULL;
    if (in[i].rank < 0) continue;
    size_t b = fbx_tensor_nbytes(&in[i]);
    if ((st = be->vt->buffer_alloc(be, b, &din[i].data))) goto done;
    if ((st = be->vt->copy_from_host(be, din[i].data, in[i].data, b))) goto done;
    if ((const_mask >> i) & 1u) cin[i] = &in[i];
  }
  for (int o = 0; o < n_out; o++) {
    dout[o] = out[o];
    size_t b = fbx_tensor_nbytes(&out[o]);
    if (share && share[o] >= 0) {
      dout[o].data = din[share[o]].data;
      continue;
    }
    dout[o].data = NULL;
    if ((st = be->vt->buffer_alloc(be, b, &dout[o].data))) goto done;
    unsigned char *junk = malloc(b ? b : 1); /* a kernel must write every element */
    memset(junk, 0x7f, b ? b : 1);
    st = be->vt->copy_from_host(be, dout[o].data, junk, b);
    free(junk);
    if (st) goto done;
  }
  if (be->vt->node_prepare) {
    if ((st = be->vt->node_prepare(be, nd, cin, din, &state))) goto done;
    prepared = true;
  }
  if ((st = be->vt->run_node(be, nd, state, din, n_in, dout, n_out, info))) goto done;
  if ((st = be->vt->synchronize(be))) goto done;
  for (int o = 0; o < n_out; o++)
    if ((st = be->vt->copy_to_host(be, out[o].data, dout[o].data, fbx_tensor_nbytes(&out[o])))) goto done;
done:
  if (prepared && be->vt->node_release) be->vt->node_release(be, nd, state);
  for (int o = 0; o < n_out; o++)
    if (!(share && share[o] >= 0)) be->vt->buffer_free(be, dout[o].data);
  for (int i = 0; i < n_in; i++) be->vt->buffer_free(be, din[i].data);
  return st;
}

static int g_ids[FBX_IR_MAX_INPUTS + FBX_IR_MAX_OUTPUTS];
static fbx_ir_node mknode(fbx_ir_op op, const fbx_ir_params *p, int n_in, int n_out, const char *what) {
  for (int i = 0; i < FBX_IR_MAX_INPUTS + FBX_IR_MAX_OUTPUTS; i++) g_ids[i] = i;
  fbx_ir_node nd = {.op = op, .n_inputs = n_in, .n_outputs = n_out, .inputs = g_ids,
                    .outputs = g_ids + FBX_IR_MAX_INPUTS, .name = what, .onnx_op = what, .onnx_node_index = -1};
  nd.params = *p;
  for (int i = 0; i < n_in; i++) g_ids[i] = i;
  return nd;
}

/* Runs nd on both backends; cu[o] / cp[o] get the outputs (shapes from shape inference;
 * caller frees .data). false (and a failed CHECK) when something did not run. */
static bool run_both(const char *what, fbx_ir_node *nd, fbx_tensor *in, int n_in, unsigned const_mask,
                     const int *share, fbx_tensor *cu, fbx_tensor *cp, int n_out, fbx_kernel_info *info) {
  for (int i = 0; i < n_in; i++)
    if (in[i].rank < 0) g_ids[i] = FBX_IR_NONE;
  memset(cu, 0, sizeof *cu * (size_t)n_out);
  fbx_status *st = fbx_ir_infer_node(nd, in, n_in, cu, n_out);
  CHECK(!st, "%s: shape inference: %s", what, fbx_status_message(st));
  if (st) {
    fbx_status_free(st);
    return false;
  }
  char why[256] = "";
  bool sup = fbx_cuda_backend_supports(g_cuda, nd, in, n_in, why, sizeof why);
  CHECK(sup, "%s: declined by cuda: %s", what, why);
  if (!sup) return false;
  for (int o = 0; o < n_out; o++) {
    size_t b = fbx_tensor_nbytes(&cu[o]);
    cp[o] = cu[o];
    cu[o].data = calloc(1, b ? b : 8);
    cp[o].data = calloc(1, b ? b : 8);
  }
  fbx_kernel_info ci;
  st = run_on(g_cpu, nd, in, n_in, const_mask, share, cp, n_out, &ci);
  CHECK(!st, "%s: cpu: %s", what, fbx_status_message(st));
  bool ok = !st;
  fbx_status_free(st);
  st = run_on(g_cuda, nd, in, n_in, const_mask, share, cu, n_out, info);
  CHECK(!st, "%s: cuda: %s", what, fbx_status_message(st));
  ok = ok && !st;
  fbx_status_free(st);
  if (!ok)
    for (int o = 0; o < n_out; o++) free(cu[o].data), free(cp[o].data);
  return ok;
}

/* max over i of |got - ref| / (1 + scale_i) must be <= tol; scale NULL: |ref| */
static void expect_close(const char *what, const char *vs, const float *got, const double *ref, const double *scale,
                         int64_t n, double tol) {
  double worst = 0;
  int64_t wi = -1;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)got[i] - ref[i]) / (1.0 + (scale ? scale[i] : fabs(ref[i])));
    if (isnan(e)) e = INFINITY;
    if (e > worst) worst = e, wi = i;
  }
  CHECK(worst <= tol, "%s: cuda vs %s: max err %g at %lld (cuda %g, %s %g), tol %g", what, vs, worst, (long long)wi,
        wi >= 0 ? got[wi] : 0.0, vs, wi >= 0 ? ref[wi] : 0.0, tol);
}

static double *f2d(const fbx_tensor *t) {
  int64_t n = fbx_tensor_numel(t);
  double *d = malloc(sizeof(double) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) d[i] = F(t)[i];
  return d;
}

static void free_in(fbx_tensor *in, int n) {
  for (int i = 0; i < n; i++) free(in[i].data);
}

/* ============================== MATMUL_NBITS ============================== */

/* zp: 0 none, 1 packed uint8, 2 float; glu: the N weight columns are gate then up, the output
 * (M, N/2) silu(gate) * up (ir_pack_nbits.c), its reference silu(g) * u of the float64 column
 * references with their error scales propagated (|silu'| <= 1.1). */
static void mnb_case_glu(int64_t M, int64_t K, int64_t N, int bits, int bs, int zp, int level, bool bias, bool glu) {
  char what[160];
  snprintf(what, sizeof what, "MATMUL_NBITS M%lld K%lld N%lld bits %d bs %d zp %s level %d%s%s", (long long)M,
           (long long)K, (long long)N, bits, bs, zp == 0 ? "none" : zp == 1 ? "u8" : "f32", level, bias ? " bias" : "",
           glu ? " glu" : "");
  const int64_t kb = (K + bs - 1) / bs, blob = bs * bits / 8, zrow = zp == 1 ? (kb * bits + 7) / 8 : kb;
  fbx_ir_params p = {.nbits = {.K = K, .N = N, .bits = bits, .block_size = bs, .accuracy_level = level,
                               .zp_u8 = zp != 2, .glu = glu}};
  fbx_tensor in[5];
  in[0] = frnd(T(FBX_DTYPE_F32, M, K), -1, 1);
  in[1] = T(FBX_DTYPE_U8, N, kb, blob);
  for (int64_t i = 0; i < N * kb * blob; i++) ((uint8_t *)in[1].data)[i] = (uint8_t)rndi(256);
  in[2] = frnd(T(FBX_DTYPE_F32, N, kb), 0.005, 0.05);
  in[3] = zp == 0 ? tabsent() : zp == 1 ? T(FBX_DTYPE_U8, N, zrow) : frnd(T(FBX_DTYPE_F32, N, kb), 0, (1 << bits) - 1);
  if (zp == 1)
    for (int64_t i = 0; i < N * zrow; i++) ((uint8_t *)in[3].data)[i] = (uint8_t)rndi(256);
  in[4] = bias ? frnd(T(FBX_DTYPE_F32, N), -1, 1) : tabsent();
  /* float64 reference over the dequantised weights, and per output the scales of its error terms */
  double *ref = calloc((size_t)(M * N), sizeof(double)), *mag = calloc((size_t)(M * N), sizeof(double));
  double *qerr = calloc((size_t)(M * N), sizeof(double)), *w = malloc(sizeof(double) * (size_t)K);
  const uint8_t *B = in[1].data;
  for (int64_t n = 0; n < N; n++) {
    for (int64_t k = 0; k < K; k++) {
      int64_t b = k / bs, i = k % bs;
      const uint8_t *blk = B + (n * kb + b) * blob;
      unsigned q = bits == 8 ? blk[i] : (i & 1) ? blk[i / 2] >> 4 : blk[i / 2] & 15u;
      double z = 1 << (bits - 1);
      if (zp == 1) {
        const uint8_t *zr = (const uint8_t *)in[3].data + n * zrow;
        z = bits == 8 ? zr[b] : (b & 1) ? zr[b / 2] >> 4 : zr[b / 2] & 15u;
      } else if (zp == 2) {
        z = F(&in[3])[n * kb + b];
      }
      w[k] = ((double)q - z) * F(&in[2])[n * kb + b];
    }
    for (int64_t m = 0; m < M; m++) {
      const float *a = F(&in[0]) + m * K;
      double s = bias ? F(&in[4])[n] : 0, t = 0, qe = 0;
      for (int64_t k = 0; k < K; k++) {
        s += a[k] * w[k];
        t += fabs(a[k] * w[k]);
      }
      /* accuracy_level 4 on the CPU: a quantised per block to amax/127 steps, error <= half a step each */
      for (int64_t b = 0; b < kb; b++) {
        double amax = 0, ws = 0;
        for (int64_t k = b * bs; k < K && k < (b + 1) * bs; k++) amax = fmax(amax, fabs(a[k])), ws += fabs(w[k]);
        qe += ws * 0.5 * amax / 127.0 * 1.001;
      }
      ref[m * N + n] = s;
      mag[m * N + n] = t;
      qerr[m * N + n] = qe;
    }
  }
  int64_t NO = N;
  if (glu) { /* in place: output column n of row m from columns n and N/2 + n */
    NO = N / 2;
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < NO; n++) {
        const int64_t gi = m * N + n, ui = gi + NO, o = m * NO + n;
        const double g = ref[gi], u = ref[ui], sg = g / (1.0 + exp(-g));
        const double mg = mag[gi], mu = mag[ui], qg = qerr[gi], qu = qerr[ui];
        ref[o] = sg * u;
        mag[o] = 1.1 * fabs(u) * (1 + mg) + fabs(sg) * (1 + mu) + fabs(sg * u);
        qerr[o] = 1.1 * fabs(u) * qg + fabs(sg) * qu;
      }
  }
  fbx_ir_node nd = mknode(FBX_IR_OP_MATMUL_NBITS, &p, 5, 1, what);
  fbx_tensor cu, cp;
  fbx_kernel_info info;
  if (run_both(what, &nd, in, 5, 0xe, NULL, &cu, &cp, 1, &info)) {
    /* float accumulation of K products: error <= ~(K/32 + log2 K) ulps of sum |a w| on the
     * warp-tree GEMV and the tiled GEMMs; 1e-5 of it (~170 ulps) leaves room for both */
    CHECK(fbx_tensor_numel(&cu) == M * NO, "%s: %lld outputs, want %lld", what, (long long)fbx_tensor_numel(&cu),
          (long long)(M * NO));
    expect_close(what, "float64 reference", F(&cu), ref, mag, M * NO, 1e-5);
    double *cpu = f2d(&cp);
    if (level == 4) { /* the CPU quantises A: allow its quantisation error on top */
      double worst = 0;
      for (int64_t i = 0; i < M * NO; i++)
        worst = fmax(worst, fabs(F(&cu)[i] - cpu[i]) - qerr[i] - 2e-5 * (1 + mag[i]));
      CHECK(worst <= 0, "%s: cuda vs cpu (int8 A): exceeds the quantisation bound by %g", what, worst);
    } else {
      expect_close(what, "cpu", F(&cu), cpu, mag, M * NO, 2e-5);
    }
    CHECK(info.variant && strstr(info.variant, "mnb_") && info.reason &&
              (level != 4 || (M == 1 && glu) || strstr(info.reason, "accuracy_level 4")) &&
              (!glu || M > 1 || strstr(info.variant, "glu")),
          "%s: variant '%s' reason '%s'", what, info.variant ? info.variant : "", info.reason ? info.reason : "");
    free(cpu);
    free(cu.data);
    free(cp.data);
  }
  free(ref), free(mag), free(qerr), free(w);
  free_in(in, 5);
}

static void mnb_case(int64_t M, int64_t K, int64_t N, int bits, int bs, int zp, int level, bool bias) {
  mnb_case_glu(M, K, N, bits, bs, zp, level, bias, false);
}

static void test_mnb(void) {
  static const int bss[] = {16, 32, 64, 128};
  static const int64_t Ms[] = {1, 2, 3, 5, 8, 13, 17, 40};
  int i = 0;
  for (int bits = 4; bits <= 8; bits += 4)
    for (int b = 0; b < 4; b++)
      for (int zp = 0; zp < 3; zp++, i++) {
        int64_t M = Ms[i % 8], K = 96 + 37 * (i % 5), N = 33 + 16 * (i % 4);
        mnb_case(M, K, N, bits, bss[b], zp, i % 3 == 0 ? 4 : 0, i % 2 == 0);
      }
  mnb_case(1, 896, 4864, 4, 32, 1, 4, false);  /* Qwen2.5-0.5B's gate/up at decode */
  mnb_case(1, 4864, 896, 4, 32, 1, 0, true);   /* its down projection */
  mnb_case(1, 1700, 45, 4, 32, 1, 0, false);   /* split-K GEMV over 2 warps: a partial block, N % 4 != 0 */
  mnb_case(1, 1600, 130, 8, 64, 2, 0, true);   /* split-K over 4 warps, 8 bits, float zero points */
  mnb_case(4, 1024, 700, 8, 128, 0, 0, false);
  mnb_case(64, 896, 1000, 4, 64, 2, 0, true);  /* prefill: dequantised chunks + cuBLASLt */
  mnb_case(17, 4096, 4200, 4, 128, 0, 0, true); /* two 4096-column chunks of 64 MiB scratch (the last partial) */
  mnb_case(16, 256, 300, 8, 32, 1, 4, false);   /* the largest M of the GEMV (two tiles of 8 rows) */
  mnb_case(1, 20, 7, 4, 16, 1, 0, false);      /* K below one 16-byte chunk, odd column bytes */
  mnb_case(1, 96, 20003, 4, 32, 1, 0, true);   /* a vocabulary-sized N: 8 columns per warp, a partial last one */
  mnb_case(1, 200, 16390, 8, 64, 2, 4, false);
  /* glu (packed gate/up): the one-launch GEMV (a partial last warp: N/2 % 4 != 0), the split-K
   * forms (2 and 4 warps), 8 bits, bias; M > 1 through the GEMV and the prefill GEMM + combine */
  mnb_case_glu(1, 896, 2 * 4864, 4, 32, 1, 4, false, true); /* Qwen2.5-0.5B's gate/up at decode */
  mnb_case_glu(1, 300, 2 * 45, 4, 32, 1, 0, true, true);
  mnb_case_glu(1, 100, 2 * 7, 8, 16, 2, 0, false, true);
  mnb_case_glu(1, 1700, 2 * 45, 4, 32, 0, 0, true, true);    /* split K over 2 warps */
  mnb_case_glu(1, 4096, 2 * 130, 4, 128, 1, 0, false, true); /* split K over 4 warps */
  mnb_case_glu(3, 256, 2 * 33, 4, 32, 1, 4, true, true);
  mnb_case_glu(40, 896, 2 * 300, 4, 64, 2, 0, true, true);
}

/* ============================== GQA ============================== */

typedef struct gqa_cfg {
  int64_t B, S, nh, kvh, H, P;   /* P: past buffer length */
  int32_t seqlens[4];
  int32_t total;
  int rot, rhalf;               /* rot 0 none, 1 half-split, 2 interleaved; cache width rhalf (rot dim 2*rhalf) */
  bool packed, shared;
  float scale, softcap;
} gqa_cfg;

/* element i of rotary(x) at one position, float64 */
static double rope_ref(const float *x, int64_t i, int64_t rot, const float *cs, const float *sn, int interleaved) {
  if (i >= rot) return x[i];
  if (interleaved) {
    int64_t j = i / 2;
    double a = x[2 * j], b = x[2 * j + 1];
    return (i & 1) ? b * cs[j] + a * sn[j] : a * cs[j] - b * sn[j];
  }
  int64_t h = rot / 2;
  if (i < h) return (double)x[i] * cs[i] - (double)x[i + h] * sn[i];
  return (double)x[i] * cs[i - h] + (double)x[i - h] * sn[i - h];
}

static void gqa_case(const char *what, const gqa_cfg *g) {
  const int64_t B = g->B, S = g->S, nh = g->nh, kvh = g->kvh, H = g->H, P = g->P, hpg = nh / kvh;
  const int64_t qrow = g->packed ? (nh + 2 * kvh) * H : nh * H, max_pos = 2048;
  fbx_ir_params p = {.gqa = {.kv_in_place = g->shared ? 3u : 0u, /* present bound to past (the executor's flag) */
                              .num_heads = (int)nh, .kv_num_heads = (int)kvh, .do_rotary = g->rot != 0,
                             .interleaved = g->rot == 2, .scale = g->scale, .softcap = g->softcap}};
  fbx_tensor in[9];
  in[0] = frnd(T(FBX_DTYPE_F32, B, S, qrow), -1, 1);
  in[1] = g->packed ? tabsent() : frnd(T(FBX_DTYPE_F32, B, S, kvh * H), -1, 1);
  in[2] = g->packed ? tabsent() : frnd(T(FBX_DTYPE_F32, B, S, kvh * H), -1, 1);
  in[3] = frnd(T(FBX_DTYPE_F32, B, kvh, P, H), -1, 1);
  in[4] = frnd(T(FBX_DTYPE_F32, B, kvh, P, H), -1, 1);
  in[5] = T(FBX_DTYPE_I32, B);
  memcpy(in[5].data, g->seqlens, sizeof(int32_t) * (size_t)B);
  in[6] = tmake(FBX_DTYPE_I32, 0, NULL);
  *(int32_t *)in[6].data = g->total;
  if (g->rot) {
    in[7] = T(FBX_DTYPE_F32, max_pos, g->rhalf);
    in[8] = T(FBX_DTYPE_F32, max_pos, g->rhalf);
    for (int64_t t = 0; t < max_pos; t++)
      for (int64_t i = 0; i < g->rhalf; i++) {
        double th = (double)t * pow(10000.0, -2.0 * (double)i / (double)(2 * g->rhalf));
        F(&in[7])[t * g->rhalf + i] = (float)cos(th);
        F(&in[8])[t * g->rhalf + i] = (float)sin(th);
      }
  } else {
    in[7] = in[8] = tabsent();
  }
  const int share[3] = {-1, g->shared ? 3 : -1, g->shared ? 4 : -1};
  const int64_t L = g->total > P ? g->total : P, rdim = 2 * g->rhalf;
  /* float64 reference: present, then attention over it */
  double *rk = calloc((size_t)(B * kvh * L * H), sizeof(double)), *rv = calloc((size_t)(B * kvh * L * H), sizeof(double));
  double *ro = calloc((size_t)(B * S * nh * H), sizeof(double)), *sc = malloc(sizeof(double) * (size_t)L);
  for (int64_t b = 0; b < B; b++) {
    const int64_t tb = g->seqlens[b] + 1, pb = S == g->total ? 0 : tb - S;
    for (int64_t gg = 0; gg < kvh; gg++)
      for (int64_t t = 0; t < L; t++)
        for (int64_t i = 0; i < H; i++) {
          int64_t d = ((b * kvh + gg) * L + t) * H + i, s = ((b * kvh + gg) * P + t) * H + i;
          if (t >= pb && t < pb + S) {
            const float *tok = F(&in[0]) + (b * S + t - pb) * qrow;
            const float *kt = (g->packed ? tok + nh * H : F(&in[1]) + (b * S + t - pb) * kvh * H) + gg * H;
            const float *vt = (g->packed ? tok + (nh + kvh) * H : F(&in[2]) + (b * S + t - pb) * kvh * H) + gg * H;
            rk[d] = g->rot ? rope_ref(kt, i, rdim, F(&in[7]) + t * g->rhalf, F(&in[8]) + t * g->rhalf, g->rot == 2) : kt[i];
            rv[d] = vt[i];
          } else if (t < pb || (g->shared && t < P)) {
            rk[d] = F(&in[3])[s];
            rv[d] = F(&in[4])[s];
          } /* else zero */
        }
    for (int64_t s = 0; s < S; s++) {
      int64_t n = pb + s + 1 < tb ? pb + s + 1 : tb, pos = pb + s;
      for (int64_t h = 0; h < nh; h++) {
        const float *qh = F(&in[0]) + (b * S + s) * qrow + h * H;
        const double *K = rk + (b * kvh + h / hpg) * L * H, *V = rv + (b * kvh + h / hpg) * L * H;
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t < n; t++) {
          double dot = 0;
          for (int64_t i = 0; i < H; i++)
            dot += (g->rot ? rope_ref(qh, i, rdim, F(&in[7]) + pos * g->rhalf, F(&in[8]) + pos * g->rhalf, g->rot == 2)
                           : qh[i]) * K[t * H + i];
          dot *= g->scale > 0 ? g->scale : 1.0 / sqrt((double)H);
          if (g->softcap > 0) dot = g->softcap * tanh(dot / g->softcap);
          sc[t] = dot;
          mx = fmax(mx, dot);
        }
        for (int64_t t = 0; t < n; t++) sum += sc[t] = exp(sc[t] - mx);
        for (int64_t i = 0; i < H; i++) {
          double o = 0;
          for (int64_t t = 0; t < n; t++) o += sc[t] / sum * V[t * H + i];
          ro[(b * S + s) * nh * H + h * H + i] = o;
        }
      }
    }
  }
  fbx_ir_node nd = mknode(FBX_IR_OP_GQA, &p, 9, 3, what);
  fbx_tensor cu[3], cp[3];
  fbx_kernel_info info;
  if (run_both(what, &nd, in, 9, 0, share, cu, cp, 3, &info)) {
    CHECK(cu[1].dims[2] == L, "%s: present length %lld, want %lld", what, (long long)cu[1].dims[2], (long long)L);
    /* softmax and dots in float over <= a few hundred terms of |x| <= 1 */
    expect_close(what, "float64 reference (output)", F(&cu[0]), ro, NULL, B * S * nh * H, 3e-5);
    expect_close(what, "float64 reference (present_key)", F(&cu[1]), rk, NULL, B * kvh * L * H, 1e-6);
    expect_close(what, "float64 reference (present_value)", F(&cu[2]), rv, NULL, B * kvh * L * H, 0);
    for (int o = 0; o < 3; o++) {
      double *cpu = f2d(&cp[o]);
      expect_close(what, o == 0 ? "cpu (output)" : o == 1 ? "cpu (present_key)" : "cpu (present_value)", F(&cu[o]),
                   cpu, NULL, fbx_tensor_numel(&cu[o]), o == 0 ? 3e-5 : 1e-6);
      free(cpu);
      free(cu[o].data);
      free(cp[o].data);
    }
  }
  free(rk), free(rv), free(ro), free(sc);
  free_in(in, 9);
}

static void test_gqa(void) {
  char what[200];
  /* decode, one sequence: past lengths from 0 to multi-split, every rotary mode, separate and packed */
  static const int64_t pasts[] = {0, 1, 7, 40, 300, 700};
  for (int pi = 0; pi < 6; pi++)
    for (int mode = 0; mode < 4; mode++) {
      int64_t past = pasts[pi];
      bool shared = mode & 1, packed = mode & 2;
      gqa_cfg g = {.B = 1, .S = 1, .nh = 4, .kvh = 2, .H = 64, .P = shared ? 1024 : past, .seqlens = {(int32_t)past},
                   .total = (int32_t)past + 1, .rot = pi % 3, .rhalf = 32, .packed = packed, .shared = shared};
      if (past == 0 && !shared) g.P = 0;
      snprintf(what, sizeof what, "GQA decode past %lld %s %s rotary %d", (long long)past, shared ? "shared" : "copied",
               packed ? "packed" : "separate", g.rot);
      gqa_case(what, &g);
    }
  /* decode, batch 2 with ragged lengths (rows past the shorter one are zero in present) */
  gqa_cfg b2 = {.B = 2, .S = 1, .nh = 8, .kvh = 2, .H = 32, .P = 20, .seqlens = {20, 13}, .total = 21, .rot = 2,
                .rhalf = 16};
  gqa_case("GQA decode batch 2 ragged, interleaved rotary", &b2);
  b2.shared = true, b2.P = 64, b2.seqlens[0] = 50, b2.seqlens[1] = 3, b2.total = 51, b2.rot = 1;
  gqa_case("GQA decode batch 2 ragged, shared buffer, half rotary", &b2);
  /* first prompt (S == total), batch 2, the second right-padded */
  gqa_cfg fp = {.B = 2, .S = 6, .nh = 4, .kvh = 1, .H = 16, .P = 0, .seqlens = {5, 3}, .total = 6, .rot = 1,
                .rhalf = 8};
  gqa_case("GQA first prompt batch 2 padded, hpg 4, H 16", &fp);
  fp.shared = true, fp.P = 16, fp.packed = true, fp.rot = 2;
  gqa_case("GQA first prompt batch 2 padded, shared, packed", &fp);
  /* prefill with past (batch 1), chunked prompt */
  gqa_cfg pp = {.B = 1, .S = 5, .nh = 7, .kvh = 1, .H = 40, .P = 7, .seqlens = {11}, .total = 12, .rot = 1, .rhalf = 8};
  gqa_case("GQA prefill 5 after past 7, hpg 7, H 40, partial rotary", &pp);
  pp.shared = true, pp.P = 32;
  gqa_case("GQA prefill 5 after past 7, shared", &pp);
  /* long causal prefill, 16 heads per KV head (two chunks of 8), softcap and scale */
  gqa_cfg lp = {.B = 1, .S = 33, .nh = 16, .kvh = 1, .H = 64, .P = 0, .seqlens = {32}, .total = 33, .rot = 0,
                .softcap = 30.f, .scale = 0.2f};
  gqa_case("GQA first prompt 33, hpg 16, softcap 30, scale 0.2", &lp);
  gqa_cfg h128 = {.B = 1, .S = 1, .nh = 14, .kvh = 2, .H = 128, .P = 128, .seqlens = {128}, .total = 129,
                  .rot = 1, .rhalf = 64};
  gqa_case("GQA decode Qwen-like 14/2 heads H 128 past 128", &h128);
  gqa_cfg mha = {.B = 1, .S = 1, .nh = 2, .kvh = 2, .H = 16, .P = 9, .seqlens = {9}, .total = 10};
  gqa_case("GQA decode nh == kvh (MHA)", &mha);
  /* the scalar path (H not a multiple of 4), shared and copied */
  gqa_cfg h10 = {.B = 1, .S = 1, .nh = 6, .kvh = 2, .H = 10, .P = 70, .seqlens = {70}, .total = 71, .rot = 1, .rhalf = 4};
  gqa_case("GQA decode H 10 (scalar loads) past 70", &h10);
  h10.shared = true, h10.P = 256;
  gqa_case("GQA decode H 10 shared past 70", &h10);
  /* Qwen2.5-0.5B's decode shape on a 4096-row shared buffer: many key splits, most of them empty */
  gqa_cfg qw = {.B = 1, .S = 1, .nh = 14, .kvh = 2, .H = 64, .P = 4096, .seqlens = {1500}, .total = 1501, .rot = 1,
                .rhalf = 32, .shared = true};
  gqa_case("GQA decode 14/2 H 64 past 1500 of 4096 shared", &qw);
  /* again: the split blocks count in on per-group counters that the last one must have set back to 0
     (a counter left behind would leave this output unmerged) */
  qw.seqlens[0] = 2100, qw.total = 2101, qw.rot = 0; /* past the 2048-row cos/sin cache: no rotary */
  gqa_case("GQA decode 14/2 H 64 past 2100 of 4096 shared (second launch on the counters)", &qw);
  /* 128 splits of 64 keys: more than the attend block can merge in its shared memory (H + split_len - 1
     partials), so the separate combine launch merges them */
  qw.P = 8192, qw.seqlens[0] = 6000, qw.total = 6001;
  gqa_case("GQA decode 14/2 H 64 past 6000 of 8192 shared (combine launch)", &qw);
  /* a shared prefill whose new rows cross key splits (each block stores the rows it reads) */
  gqa_cfg sp = {.B = 1, .S = 150, .nh = 14, .kvh = 2, .H = 64, .P = 512, .seqlens = {219}, .total = 220, .rot = 2,
                .rhalf = 32, .shared = true, .packed = true};
  gqa_case("GQA shared prefill 150 after past 70, packed", &sp);
  gqa_cfg sf = {.B = 2, .S = 90, .nh = 8, .kvh = 2, .H = 32, .P = 128, .seqlens = {89, 40}, .total = 90, .rot = 1,
                .rhalf = 16, .shared = true};
  gqa_case("GQA shared first prompt 90, batch 2, second padded", &sf);
}

/* ============================== ROTARY ============================== */

static void rope_case(const char *what, bool bnsh, int64_t B, int64_t S, int64_t N, int64_t H, int64_t rot_dim,
                      int64_t half, bool interleaved, bool pos_scalar) {
  fbx_ir_params p = {.rope = {.num_heads = bnsh ? 0 : (int)N, .rot_dim = (int)rot_dim, .interleaved = interleaved}};
  const int64_t max_pos = 64;
  fbx_tensor in[4];
  in[0] = bnsh ? frnd(T(FBX_DTYPE_F32, B, N, S, H), -1, 1) : frnd(T(FBX_DTYPE_F32, B, S, N * H), -1, 1);
  in[1] = pos_scalar ? T(FBX_DTYPE_I64, 1) : T(FBX_DTYPE_I64, B, S);
  int64_t *pid = in[1].data;
  if (pos_scalar) pid[0] = 5;
  else
    for (int64_t i = 0; i < B * S; i++) pid[i] = rndi((int)(max_pos - 1));
  in[2] = frnd(T(FBX_DTYPE_F32, max_pos, half), -1, 1);
  in[3] = frnd(T(FBX_DTYPE_F32, max_pos, half), -1, 1);
  const int64_t n = B * S * N * H, rot = rot_dim > 0 ? rot_dim : H;
  double *ref = malloc(sizeof(double) * (size_t)n);
  for (int64_t b = 0; b < B; b++)
    for (int64_t s = 0; s < S; s++)
      for (int64_t h = 0; h < N; h++) {
        int64_t ps = pos_scalar ? pid[0] + s : pid[b * S + s];
        int64_t off = bnsh ? ((b * N + h) * S + s) * H : (b * S + s) * N * H + h * H;
        for (int64_t i = 0; i < H; i++)
          ref[off + i] = rope_ref(F(&in[0]) + off, i, rot, F(&in[2]) + ps * half, F(&in[3]) + ps * half, interleaved);
      }
  fbx_ir_node nd = mknode(FBX_IR_OP_ROTARY, &p, 4, 1, what);
  fbx_tensor cu, cp;
  fbx_kernel_info info;
  if (run_both(what, &nd, in, 4, 0, NULL, &cu, &cp, 1, &info)) {
    expect_close(what, "float64 reference", F(&cu), ref, NULL, n, 1e-6);
    double *cpu = f2d(&cp);
    expect_close(what, "cpu", F(&cu), cpu, NULL, n, 1e-6);
    free(cpu);
    free(cu.data);
    free(cp.data);
  }
  free(ref);
  free_in(in, 4);
}

static void test_rope(void) {
  rope_case("ROTARY (2,3,4*16) half-split, position_ids (B,S)", false, 2, 3, 4, 16, 0, 8, false, false);
  rope_case("ROTARY (2,3,4*16) interleaved, position_ids (B,S)", false, 2, 3, 4, 16, 0, 8, true, false);
  rope_case("ROTARY (1,5,2*32) interleaved, position_ids (1)", false, 1, 5, 2, 32, 0, 16, true, true);
  rope_case("ROTARY BNSH (2,3,7,16) half-split", true, 2, 3, 7, 16, 0, 8, false, false);
  rope_case("ROTARY BNSH (1,2,4,64) rot_dim 16, cache width 8, interleaved", true, 1, 2, 4, 64, 16, 8, true, true);
  rope_case("ROTARY (1,4,3*24) rot_dim 8 of a 12-wide cache, half-split", false, 1, 4, 3, 24, 8, 12, false, false);
}

/* ============================== SKIP_NORM ============================== */

static void skipnorm_case(const char *what, int kind, int64_t B, int64_t S, int64_t h, bool skip_bcast, bool beta,
                          bool bias, bool has_sum, bool has_inv) {
  /* kind 0: SimplifiedLayerNorm (no skip), 1: SkipSimplifiedLayerNorm, 2: SkipLayerNorm */
  fbx_ir_params p = {.skipnorm = {.epsilon = kind == 0 ? 1e-5f : 1e-6f, .simplified = kind != 2,
                                  .has_sum = has_sum, .has_inv = has_inv}};
  fbx_tensor in[5];
  in[0] = frnd(T(FBX_DTYPE_F32, B, S, h), -2, 2);
  in[1] = kind == 0 ? tabsent() : skip_bcast ? frnd(T(FBX_DTYPE_F32, S, h), -1, 1) : frnd(T(FBX_DTYPE_F32, B, S, h), -1, 1);
  in[2] = frnd(T(FBX_DTYPE_F32, h), 0.5, 1.5);
  in[3] = beta ? frnd(T(FBX_DTYPE_F32, h), -0.5, 0.5) : tabsent();
  in[4] = bias ? frnd(T(FBX_DTYPE_F32, h), -0.5, 0.5) : tabsent();
  const int64_t rows = B * S, n = rows * h;
  double *ry = malloc(sizeof(double) * (size_t)n), *rs = malloc(sizeof(double) * (size_t)n);
  double *ri = malloc(sizeof(double) * (size_t)rows);
  for (int64_t r = 0; r < rows; r++) {
    double m = 0, q = 0;
    for (int64_t i = 0; i < h; i++) {
      double v = F(&in[0])[r * h + i];
      if (kind) v += F(&in[1])[(r * h + i) % fbx_tensor_numel(&in[1])];
      if (bias) v += F(&in[4])[i];
      rs[r * h + i] = v;
      m += v;
      q += v * v;
    }
    m /= (double)h;
    q /= (double)h;
    double var = kind == 2 ? q - m * m : q, inv = 1.0 / sqrt(var + p.skipnorm.epsilon);
    for (int64_t i = 0; i < h; i++)
      ry[r * h + i] = ((kind == 2 ? rs[r * h + i] - m : rs[r * h + i]) * inv) * F(&in[2])[i] + (beta ? F(&in[3])[i] : 0);
    ri[r] = inv;
  }
  const int n_out = 1 + has_sum + has_inv;
  fbx_ir_node nd = mknode(FBX_IR_OP_SKIP_NORM, &p, 5, n_out, what);
  fbx_tensor cu[3], cp[3];
  fbx_kernel_info info;
  if (run_both(what, &nd, in, 5, 0, NULL, cu, cp, n_out, &info)) {
    /* sums of h float terms in a different order than float64: ~1e-6 relative */
    expect_close(what, "float64 reference (y)", F(&cu[0]), ry, NULL, n, 1e-5);
    if (has_sum) expect_close(what, "float64 reference (sum)", F(&cu[1]), rs, NULL, n, 1e-6);
    if (has_inv) expect_close(what, "float64 reference (inv_std)", F(&cu[n_out - 1]), ri, NULL, rows, 1e-5);
    for (int o = 0; o < n_out; o++) {
      double *cpu = f2d(&cp[o]);
      expect_close(what, "cpu", F(&cu[o]), cpu, NULL, fbx_tensor_numel(&cu[o]), 1e-5);
      free(cpu);
      free(cu[o].data);
      free(cp[o].data);
    }
  }
  free(ry), free(rs), free(ri);
  free_in(in, 5);
}

static void test_skipnorm(void) {
  skipnorm_case("SimplifiedLayerNorm (2,3,896)", 0, 2, 3, 896, false, false, false, false, false);
  skipnorm_case("SimplifiedLayerNorm (1,4,33) with inv_std_var", 0, 1, 4, 33, false, false, false, false, true);
  skipnorm_case("SkipSimplifiedLayerNorm (1,1,896) decode row + sum", 1, 1, 1, 896, false, false, false, true, false);
  skipnorm_case("SkipSimplifiedLayerNorm (2,5,4096) bias + sum", 1, 2, 5, 4096, false, false, true, true, false);
  skipnorm_case("SkipLayerNorm (2,3,768) beta + bias + sum", 2, 2, 3, 768, false, true, true, true, false);
  skipnorm_case("SkipLayerNorm (3,4,100) skip (S,h) broadcast, no beta", 2, 3, 4, 100, true, false, false, false, false);
  skipnorm_case("SkipLayerNorm (1,130,7) narrow rows", 2, 1, 130, 7, false, true, false, true, false);
}

/* ============================== declines, errors, memory ============================== */

/* ============================ integer REDUCE_SUM ============================ */

/* GenAI's seqlens_k chain starts with ReduceSum over the int64 attention mask; on a GPU
 * OrtEpDevice the mask is in device memory, so the sum runs there. Checked against the exact
 * sum computed here (and the CPU backend), int64 and int32, wrap-around included. */
static void int_reduce_case(fbx_dtype dt, int64_t rows, int64_t cols, bool big) {
  char what[128];
  snprintf(what, sizeof what, "REDUCE_SUM %s (%lld, %lld) axis 1%s", fbx_dtype_name(dt), (long long)rows,
           (long long)cols, big ? " (wraps)" : "");
  fbx_ir_params p = {.reduce = {.axes_mask = 1u << 1, .keepdims = 1}};
  fbx_ir_node nd = mknode(FBX_IR_OP_REDUCE_SUM, &p, 1, 1, what);
  fbx_tensor in[1] = {T(dt, rows, cols)}, cu[1], cp[1];
  for (int64_t i = 0; i < rows * cols; i++) {
    int64_t v = big ? (int64_t)0x7ffffff0 + rndi(1000) : rndi(3) == 0 ? 0 : 1 + rndi(1000) - 500;
    if (dt == FBX_DTYPE_I64) ((int64_t *)in[0].data)[i] = big ? v << 31 : v;
    else ((int32_t *)in[0].data)[i] = (int32_t)v;
  }
  fbx_kernel_info info = {0};
  if (run_both(what, &nd, in, 1, 0, NULL, cu, cp, 1, &info)) {
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
      uint64_t s = 0; /* two's complement: the wrap of the CPU's integer arithmetic */
      for (int64_t c = 0; c < cols; c++)
        s += dt == FBX_DTYPE_I64 ? (uint64_t)((int64_t *)in[0].data)[r * cols + c]
                                 : (uint64_t)(int64_t)((int32_t *)in[0].data)[r * cols + c];
      int64_t got = dt == FBX_DTYPE_I64 ? ((int64_t *)cu[0].data)[r] : ((int32_t *)cu[0].data)[r];
      int64_t want = dt == FBX_DTYPE_I64 ? (int64_t)s : (int64_t)(int32_t)(uint32_t)s;
      int64_t cpu = dt == FBX_DTYPE_I64 ? ((int64_t *)cp[0].data)[r] : ((int32_t *)cp[0].data)[r];
      bad += got != want || (!big && cpu != want);
    }
    CHECK(!bad, "%s: %d row(s) differ from the exact sum", what, bad);
    CHECK(info.variant && !strcmp(info.variant, "reduce_sum_int_block"), "%s: variant %s", what,
          info.variant ? info.variant : "(none)");
    free(cu[0].data), free(cp[0].data);
  }
  free_in(in, 1);
}

static void test_int_reduce(void) {
  int_reduce_case(FBX_DTYPE_I64, 1, 193, false); /* (batch, total) mask of a decode step */
  int_reduce_case(FBX_DTYPE_I64, 3, 1000, false);
  int_reduce_case(FBX_DTYPE_I32, 5, 777, false);
  int_reduce_case(FBX_DTYPE_I32, 2, 300, true);
  int_reduce_case(FBX_DTYPE_I64, 2, 300, true);
}

static void test_declines_errors(void) {
  char why[256];
  fbx_ir_params pm = {.nbits = {.K = 32, .N = 8, .bits = 4, .block_size = 32}};
  fbx_ir_node nd = mknode(FBX_IR_OP_MATMUL_NBITS, &pm, 5, 1, "mnb f16");
  fbx_tensor mi[5] = {T(FBX_DTYPE_F16, 1, 32), T(FBX_DTYPE_U8, 8, 1, 16), T(FBX_DTYPE_F32, 8, 1), tabsent(), tabsent()};
  CHECK(!fbx_cuda_backend_supports(g_cuda, &nd, mi, 5, why, sizeof why) && strstr(why, "device 'cuda'") &&
            strstr(why, "float16"), "MATMUL_NBITS f16 declined naming device and dtype: '%s'", why);
  pm.nbits.bits = 3;
  nd = mknode(FBX_IR_OP_MATMUL_NBITS, &pm, 5, 1, "mnb 3 bits");
  CHECK(!fbx_cuda_backend_supports(g_cuda, &nd, mi, 5, why, sizeof why) && strstr(why, "device 'cuda'"),
        "MATMUL_NBITS bits 3 declined: '%s'", why);
  free_in(mi, 5);
  /* MATMUL_NBITS with non-constant weights: NOT_IMPLEMENTED at run, not garbage */
  pm.nbits.bits = 4;
  nd = mknode(FBX_IR_OP_MATMUL_NBITS, &pm, 5, 1, "mnb runtime B");
  fbx_tensor ri[5] = {frnd(T(FBX_DTYPE_F32, 1, 32), -1, 1), T(FBX_DTYPE_U8, 8, 1, 16), frnd(T(FBX_DTYPE_F32, 8, 1), 0, 1),
                      tabsent(), tabsent()};
  g_ids[3] = g_ids[4] = FBX_IR_NONE;
  fbx_tensor y = T(FBX_DTYPE_F32, 1, 8);
  fbx_status *st = run_on(g_cuda, &nd, ri, 5, 0, NULL, &y, 1, NULL);
  CHECK(st && fbx_status_code_of(st) == FBX_STATUS_NOT_IMPLEMENTED && strstr(fbx_status_message(st), "constant"),
        "MATMUL_NBITS without constant B -> NOT_IMPLEMENTED (%s)", fbx_status_message(st));
  fbx_status_free(st);
  free_in(ri, 5);
  free(y.data);
  fbx_ir_params pg = {.gqa = {.num_heads = 2, .kv_num_heads = 1}};
  nd = mknode(FBX_IR_OP_GQA, &pg, 9, 3, "gqa f16");
  fbx_tensor gi[9] = {T(FBX_DTYPE_F16, 1, 1, 32), T(FBX_DTYPE_F16, 1, 1, 8), T(FBX_DTYPE_F16, 1, 1, 8),
                      T(FBX_DTYPE_F16, 1, 1, 0, 8), T(FBX_DTYPE_F16, 1, 1, 0, 8), T(FBX_DTYPE_I32, 1),
                      tmake(FBX_DTYPE_I32, 0, NULL), tabsent(), tabsent()};
  CHECK(!fbx_cuda_backend_supports(g_cuda, &nd, gi, 9, why, sizeof why) && strstr(why, "device 'cuda'") &&
            strstr(why, "float16"), "GQA f16 declined naming device and dtype: '%s'", why);
  free_in(gi, 9);
  fbx_ir_params ps = {.skipnorm = {.epsilon = 1e-5f, .simplified = 1}};
  nd = mknode(FBX_IR_OP_SKIP_NORM, &ps, 5, 1, "skipnorm f16");
  fbx_tensor si[5] = {T(FBX_DTYPE_F16, 1, 8), tabsent(), T(FBX_DTYPE_F16, 8), tabsent(), tabsent()};
  CHECK(!fbx_cuda_backend_supports(g_cuda, &nd, si, 5, why, sizeof why) && strstr(why, "device 'cuda'"),
        "SKIP_NORM f16 declined: '%s'", why);
  free_in(si, 5);
  /* seqlens_k past the cache: INVALID_ARG at synchronize, and the next run is clean */
  nd = mknode(FBX_IR_OP_GQA, &pg, 9, 3, "gqa bad seqlens");
  fbx_tensor bi[9] = {frnd(T(FBX_DTYPE_F32, 1, 1, 32), -1, 1), frnd(T(FBX_DTYPE_F32, 1, 1, 16), -1, 1),
                      frnd(T(FBX_DTYPE_F32, 1, 1, 16), -1, 1), frnd(T(FBX_DTYPE_F32, 1, 1, 4, 16), -1, 1),
                      frnd(T(FBX_DTYPE_F32, 1, 1, 4, 16), -1, 1), T(FBX_DTYPE_I32, 1), tmake(FBX_DTYPE_I32, 0, NULL),
                      tabsent(), tabsent()};
  g_ids[7] = g_ids[8] = FBX_IR_NONE;
  ((int32_t *)bi[5].data)[0] = 9; /* 10 valid tokens in a cache of 5 */
  *(int32_t *)bi[6].data = 5;
  fbx_tensor go[3] = {T(FBX_DTYPE_F32, 1, 1, 32), T(FBX_DTYPE_F32, 1, 1, 5, 16), T(FBX_DTYPE_F32, 1, 1, 5, 16)};
  st = run_on(g_cuda, &nd, bi, 9, 0, NULL, go, 3, NULL);
  CHECK(st && fbx_status_code_of(st) == FBX_STATUS_INVALID_ARG && strstr(fbx_status_message(st), "GQA"),
        "GQA seqlens_k 9 in a cache of 5 -> INVALID_ARG at synchronize (%s)", fbx_status_message(st));
  fbx_status_free(st);
  ((int32_t *)bi[5].data)[0] = 4;
  st = run_on(g_cuda, &nd, bi, 9, 0, NULL, go, 3, NULL);
  CHECK(!st, "GQA after a length error runs clean (%s)", fbx_status_message(st));
  fbx_status_free(st);
  free_in(bi, 9);
  free_in(go, 3);
  /* position_ids outside the cos/sin cache */
  fbx_ir_params pr = {.rope = {.num_heads = 1}};
  nd = mknode(FBX_IR_OP_ROTARY, &pr, 4, 1, "rope bad position");
  fbx_tensor ro[4] = {frnd(T(FBX_DTYPE_F32, 1, 2, 8), -1, 1), T(FBX_DTYPE_I64, 1), frnd(T(FBX_DTYPE_F32, 4, 4), -1, 1),
                      frnd(T(FBX_DTYPE_F32, 4, 4), -1, 1)};
  ((int64_t *)ro[1].data)[0] = 3; /* positions 3 and 4 in a cache of 4 */
  fbx_tensor yo = T(FBX_DTYPE_F32, 1, 2, 8);
  st = run_on(g_cuda, &nd, ro, 4, 0, NULL, &yo, 1, NULL);
  CHECK(st && fbx_status_code_of(st) == FBX_STATUS_INVALID_ARG && strstr(fbx_status_message(st), "ROTARY"),
        "ROTARY position 4 in a cache of 4 -> INVALID_ARG at synchronize (%s)", fbx_status_message(st));
  fbx_status_free(st);
  free_in(ro, 4);
  free(yo.data);
  CHECK(g_cuda->vt->memory_in_use(g_cuda) == 0, "cuda memory_in_use back to 0 (%zu)", g_cuda->vt->memory_in_use(g_cuda));
}

/* ============================== driver ============================== */

typedef struct shared_state { int passed, failed; } shared_state;
static shared_state *g_sh;

static fbx_status *open_backends(void) {
  fbx_cuda_options co = {.device_id = 0, .library = g_lib};
  FBX_TRY(fbx_cuda_backend_open(&co, &g_cuda));
  fbx_cpu_options o = {.threads = 2};
  return fbx_cpu_backend_create(&o, &g_cpu);
}

/* One section in a forked child (common/cuda_fork.h): opens the backends, runs
 * it, adds its counts to the shared page. */
static int section_child(void *ctx) {
  void (*fn)(void) = *(void (**)(void))ctx;
  fbx_status *st = open_backends();
  if (st) {
    fprintf(stderr, "test_cuda_genai: cannot open backends: %s\n", fbx_status_message(st));
    return 1;
  }
  fn();
  CHECK(g_cuda->vt->memory_in_use(g_cuda) == 0, "cuda memory_in_use back to 0 (%zu)", g_cuda->vt->memory_in_use(g_cuda));
  g_sh->passed += passed;
  g_sh->failed += failed;
  fbx_backend_destroy(g_cuda);
  fbx_backend_destroy(g_cpu);
  return failed ? 1 : 0;
}

static int run_section(const char *name, void (*fn)(void)) {
  int r = fbx_test_fork_section("test_cuda_genai", name, section_child, &fn);
  if (r == 2) g_sh->failed++; /* crashed: counts as a failure */
  return r ? 1 : 0;
}

int main(void) {
  fbx_test_cuda_library(g_lib, sizeof g_lib);
  int probe = fbx_test_cuda_probe("test_cuda_genai", g_lib); /* in a child: this process never initialises CUDA */
  if (probe != FBX_TEST_CUDA_RUN) return probe == FBX_TEST_CUDA_SKIP ? 0 : 1;
  g_sh = mmap(NULL, sizeof *g_sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (g_sh == MAP_FAILED) return 1;
  memset(g_sh, 0, sizeof *g_sh);
  static const struct { const char *name; void (*fn)(void); } sections[] = {
      {"mnb", test_mnb}, {"int_reduce", test_int_reduce}, {"gqa", test_gqa}, {"rope", test_rope}, {"skipnorm", test_skipnorm},
      {"errors", test_declines_errors},
  };
  int bad = 0;
  for (size_t i = 0; i < sizeof sections / sizeof sections[0]; i++) bad += run_section(sections[i].name, sections[i].fn);
  printf("test_cuda_genai: %d passed, %d failed\n", g_sh->passed, g_sh->failed);
  return bad || g_sh->failed ? 1 : 0;
}
