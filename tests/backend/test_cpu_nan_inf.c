/* NaN and ±inf through the CPU kernels, each against a naive double
 * reference written here (README "Numerics" states the rules):
 *   - every float elementwise op (looped over the op list, f32 and f64, SIMD
 *     lanes and scalar tails, one-op nodes, fused programs, a broadcast
 *     scalar operand) maps a NaN operand to NaN;
 *   - activations at ±inf give their limits;
 *   - conv epilogues (fused Relu / Clip) keep a NaN;
 *   - Softmax / LogSoftmax rows with NaN, +inf, only -inf follow the ONNX
 *     formula exp(x - max) / sum (NaN rows), -inf entries give 0 / -inf,
 *     LogSoftmax keeps its precision next to a large max ((x - max) - log(sum));
 *   - ReduceLogSumExp: +inf in a row -> +inf, all -inf -> -inf, NaN -> NaN;
 *   - ReduceMax/Min, MaxPool (fast, generic and global paths) propagate NaN;
 *     ArgMax/ArgMin/Hardmax pick the first NaN (the last with select_last). */
#include <float.h>
#include <stdint.h>

#include "cpu_test_util.h"
#include "ir/ir_graph.h"

/* a and b are the same value, NaN equal to NaN */
static bool same(double a, double b) { return (isnan(a) && isnan(b)) || a == b; }

static int arr_same(const float *got, const double *ref, int64_t n, const char *what) {
  for (int64_t i = 0; i < n; i++)
    if (!same(got[i], ref[i])) {
      check(0, "%s: element %lld got %g want %g", what, (long long)i, (double)got[i], ref[i]);
      return 0;
    }
  check(1, "%s", what);
  return 1;
}

/* ---- elementwise: NaN in -> NaN out for every float op ---- */

static bool ew1_skip(fbx_ir_op op) { /* not float math: predicates, casts, logic */
  return op == FBX_IR_OP_ISNAN || op == FBX_IR_OP_ISINF || op == FBX_IR_OP_NOT || op == FBX_IR_OP_CAST ||
         op == FBX_IR_OP_BITWISE_NOT;
}

/* Run op on x (n values of dtype dt, read from xs) with optional second
 * operand b (a scalar when b_scalar); returns the results as doubles. */
static fbx_status *run_ew(fbx_ir_op op, const fbx_ir_params *p, fbx_dtype dt, const double *xs, int n,
                          const double *bs, bool b_scalar, double *res) {
  size_t es = dt == FBX_DTYPE_F32 ? 4 : 8;
  fbx_tensor in[2] = {T(dt, n), b_scalar ? tscalar(dt) : T(dt, n)};
  fbx_tensor y = T(dt, n);
  for (int i = 0; i < n; i++) {
    if (es == 4) F(&in[0])[i] = (float)xs[i];
    else ((double *)in[0].data)[i] = xs[i];
  }
  for (int i = 0; bs && i < (b_scalar ? 1 : n); i++) {
    if (es == 4) F(&in[1])[i] = (float)bs[i];
    else ((double *)in[1].data)[i] = bs[i];
  }
  fbx_status *st = run_node(op, p, in, bs ? 2 : 1, &y, 1, NULL);
  for (int i = 0; !st && i < n; i++) res[i] = es == 4 ? F(&y)[i] : ((double *)y.data)[i];
  tfree(&in[0]);
  tfree(&in[1]);
  tfree(&y);
  return st;
}

static void test_ew_nan(void) {
  fbx_ir_params p = {.ew = {.alpha = 0.2f, .beta = 0.5f, .gamma = 1.5f}};
  const fbx_dtype dts[2] = {FBX_DTYPE_F32, FBX_DTYPE_F64};
  /* 19 values: lanes 0..15 take the vector bodies, 16..18 the tail; NaN at 1, 10, 17 */
  double x[19], r[19] = {0};
  for (int i = 0; i < 19; i++) x[i] = 0.37 * (i - 9);
  x[1] = x[10] = x[17] = NAN;
  int n_ops = 0;
  for (int d = 0; d < 2; d++) {
#define X(name, cls, mask)                                                                                   \
  if (cls == FBX_IR_CLASS_EW1 && !ew1_skip(FBX_IR_OP_##name)) {                                            \
    fbx_status *st = run_ew(FBX_IR_OP_##name, &p, dts[d], x, 19, NULL, false, r);                           \
    check(st == NULL, "%s %s: %s", #name, fbx_dtype_name(dts[d]), st ? fbx_status_message(st) : "");        \
    fbx_status_free(st);                                                                                     \
    check(isnan(r[1]) && isnan(r[10]) && isnan(r[17]), "%s %s: NaN in -> %g %g %g (want NaN)", #name,        \
          fbx_dtype_name(dts[d]), r[1], r[10], r[17]);                                                        \
    n_ops++;                                                                                                 \
  }
    FBX_IR_OP_LIST(X)
#undef X
  }
  check(n_ops >= 2 * 35, "looped over %d unary float ops", n_ops);

  /* binary float ops: NaN on either side, array or broadcast scalar operand */
  const fbx_ir_op bin[] = {FBX_IR_OP_ADD, FBX_IR_OP_SUB, FBX_IR_OP_MUL, FBX_IR_OP_DIV, FBX_IR_OP_POW,
                           FBX_IR_OP_MAX, FBX_IR_OP_MIN, FBX_IR_OP_MOD, FBX_IR_OP_PRELU};
  double two[19], nan19[19], neg[19];
  for (int i = 0; i < 19; i++) two[i] = 2.5, nan19[i] = NAN, neg[i] = -1.5 - i;
  for (int d = 0; d < 2; d++)
    for (size_t k = 0; k < sizeof(bin) / sizeof(bin[0]); k++)
      for (int sc = 0; sc < 2; sc++) {
        const char *nm = fbx_ir_op_name(bin[k]), *dn = fbx_dtype_name(dts[d]);
        fbx_status *st = run_ew(bin[k], &p, dts[d], x, 19, two, sc, r);
        check(!st && isnan(r[1]) && isnan(r[17]), "%s %s (NaN, %s 2.5) -> %g", nm, dn, sc ? "scalar" : "array", r[1]);
        fbx_status_free(st);
        /* NaN second operand; PRelu's slope only matters for x < 0 */
        st = run_ew(bin[k], &p, dts[d], neg, 19, nan19, sc, r);
        check(!st && isnan(r[0]) && isnan(r[18]), "%s %s (x, NaN %s) -> %g", nm, dn, sc ? "scalar" : "array", r[0]);
        fbx_status_free(st);
      }
}

/* The ops named in the issue, and activations at ±inf, against their formulas. */
static void test_ew_named(void) {
  struct { fbx_ir_op op; float alpha, beta; double x, want; const char *what; } c[] = {
      {FBX_IR_OP_RELU, 0, 0, NAN, NAN, "Relu(NaN)"},
      {FBX_IR_OP_RELU, 0, 0, -INFINITY, 0, "Relu(-inf)"},
      {FBX_IR_OP_RELU, 0, 0, INFINITY, INFINITY, "Relu(+inf)"},
      {FBX_IR_OP_SIGN, 0, 0, NAN, NAN, "Sign(NaN)"},
      {FBX_IR_OP_SIGN, 0, 0, -INFINITY, -1, "Sign(-inf)"},
      {FBX_IR_OP_HARD_SIGMOID, 0.2f, 0.5f, NAN, NAN, "HardSigmoid(NaN)"},
      {FBX_IR_OP_HARD_SIGMOID, 0.2f, 0.5f, INFINITY, 1, "HardSigmoid(+inf)"},
      {FBX_IR_OP_HARD_SIGMOID, 0.2f, 0.5f, -INFINITY, 0, "HardSigmoid(-inf)"},
      {FBX_IR_OP_CELU, 1.f, 0, NAN, NAN, "Celu(NaN)"},
      {FBX_IR_OP_CELU, 2.f, 0, -INFINITY, -2, "Celu(-inf) = -alpha"},
      {FBX_IR_OP_CELU, 1.f, 0, INFINITY, INFINITY, "Celu(+inf)"},
      {FBX_IR_OP_LEAKY_RELU, 0.1f, 0, -INFINITY, -INFINITY, "LeakyRelu(-inf)"},
      {FBX_IR_OP_THRESHOLDED_RELU, 1.f, 0, NAN, NAN, "ThresholdedRelu(NaN)"},
      {FBX_IR_OP_THRESHOLDED_RELU, 1.f, 0, INFINITY, INFINITY, "ThresholdedRelu(+inf)"},
      {FBX_IR_OP_HARD_SWISH, 0, 0, -INFINITY, 0, "HardSwish(-inf)"},
      {FBX_IR_OP_HARD_SWISH, 0, 0, NAN, NAN, "HardSwish(NaN)"},
      {FBX_IR_OP_SELU, 1.6732632f, 0, -INFINITY, -1.6732632f * 1.0507010f, "Selu(-inf) = -gamma alpha"},
      {FBX_IR_OP_SOFTSIGN, 0, 0, -INFINITY, -1, "Softsign(-inf)"},
      {FBX_IR_OP_MISH, 0, 0, INFINITY, INFINITY, "Mish(+inf)"},
      {FBX_IR_OP_SOFTPLUS, 0, 0, NAN, NAN, "Softplus(NaN)"},
  };
  for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
    for (int d = 0; d < 2; d++) {
      fbx_dtype dt = d ? FBX_DTYPE_F64 : FBX_DTYPE_F32;
      fbx_ir_params p = {.ew = {.alpha = c[i].alpha, .beta = c[i].beta, .gamma = 1.0507010f}};
      double x[9], r[9] = {0};
      for (int k = 0; k < 9; k++) x[k] = c[i].x; /* 8 SIMD lanes + 1 tail */
      fbx_status *st = run_ew(c[i].op, &p, dt, x, 9, NULL, false, r);
      double want = dt == FBX_DTYPE_F32 ? (double)(float)c[i].want : c[i].want;
      if (c[i].op == FBX_IR_OP_SELU && dt == FBX_DTYPE_F64) want = (double)c[i].alpha * (double)1.0507010f * -1;
      bool ok = !st && same(r[0], want) && same(r[8], want);
      if (c[i].op == FBX_IR_OP_SELU && !st) ok = fabs(r[0] - want) < 1e-6 && fabs(r[8] - want) < 1e-6;
      check(ok, "%s %s: got %g / %g want %g", c[i].what, fbx_dtype_name(dt), r[0], r[8], want);
      fbx_status_free(st);
    }
}

/* HardSigmoid / HardSwish (hand-vectorised) on finite values, against the formula */
static void test_hard_values(void) {
  enum { NV = 45 }; /* 5 vectors + a tail of 5 */
  double x[NV], r[NV];
  for (int i = 0; i < NV; i++) x[i] = (float)(-5.5 + 0.25 * i);
  for (int d = 0; d < 2; d++) {
    fbx_dtype dt = d ? FBX_DTYPE_F64 : FBX_DTYPE_F32;
    fbx_ir_params p = {.ew = {.alpha = 0.2f, .beta = 0.5f}};
    fbx_status *st = run_ew(FBX_IR_OP_HARD_SIGMOID, &p, dt, x, NV, NULL, false, r);
    bool ok = !st;
    for (int i = 0; ok && i < NV; i++)
      ok = fabs(r[i] - fmax(0, fmin(1, (double)0.2f * x[i] + (double)0.5f))) <= 1e-7;
    check(ok, "HardSigmoid %s values", fbx_dtype_name(dt));
    fbx_status_free(st);
    st = run_ew(FBX_IR_OP_HARD_SWISH, &p, dt, x, NV, NULL, false, r);
    ok = !st;
    for (int i = 0; ok && i < NV; i++) ok = fabs(r[i] - x[i] * fmax(0, fmin(1, x[i] / 6 + 0.5))) <= 1e-6;
    check(ok, "HardSwish %s values", fbx_dtype_name(dt));
    fbx_status_free(st);
  }
}

/* A fused program relu6(x) = min(relu(x), 6) over NaN / ±inf. */
static void test_fused_nan(void) {
  fbx_ir_ew_instr ins[2] = {{.op = FBX_IR_OP_RELU, .a = 0, .dtype = FBX_DTYPE_F32},
                            {.op = FBX_IR_OP_MIN, .a = 2, .b = 1, .dtype = FBX_DTYPE_F32}};
  fbx_ir_ew_program prog = {.n_inputs = 2, .n_instrs = 2, .out_reg = 3, .instrs = ins,
                            .in_dtypes = {FBX_DTYPE_F32, FBX_DTYPE_F32}};
  fbx_ir_params p = {.fused = {.prog = &prog}};
  int64_t n = 37;
  fbx_tensor in[2] = {T(FBX_DTYPE_F32, n), tscalar(FBX_DTYPE_F32)}, y = T(FBX_DTYPE_F32, n);
  double ref[37];
  F(&in[1])[0] = 6;
  for (int64_t i = 0; i < n; i++) {
    float v = i % 5 == 2 ? NAN : i % 7 == 3 ? INFINITY : i % 11 == 4 ? -INFINITY : (float)(i - 18);
    F(&in[0])[i] = v;
    ref[i] = isnan(v) ? NAN : fmin(fmax((double)v, 0), 6);
  }
  run_ok("fused relu6", FBX_IR_OP_FUSED_EW, &p, in, 2, &y, 1);
  arr_same(F(&y), ref, n, "FUSED_EW relu6: NaN kept, ±inf clamped");
  tfree(&in[0]); tfree(&in[1]); tfree(&y);
}

/* ---- conv epilogues (fused Relu / Clip after a conv) ---- */

static void ref_conv_nan(const float *x, const float *w, double *y, int C, int H, int W, int M, int G, int K, int pad) {
  int OH = H + 2 * pad - K + 1, OW = W + 2 * pad - K + 1, cg = C / G, mg = M / G;
  for (int m = 0; m < M; m++)
    for (int oh = 0; oh < OH; oh++)
      for (int ow = 0; ow < OW; ow++) {
        double s = 0;
        int g = m / mg;
        for (int c = 0; c < cg; c++)
          for (int kh = 0; kh < K; kh++)
            for (int kw = 0; kw < K; kw++) {
              int ih = oh - pad + kh, iw = ow - pad + kw;
              if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                s += (double)x[((g * cg + c) * H + ih) * W + iw] * w[((m * cg + c) * K + kh) * K + kw];
            }
        y[(m * OH + oh) * OW + ow] = s;
      }
}

static void conv_epi_case(int C, int M, int G, int K, int pad, bool clip, const char *what) {
  int H = 9, W = 11, OH = H + 2 * pad - K + 1, OW = W + 2 * pad - K + 1;
  fbx_tensor in[5] = {T(FBX_DTYPE_F32, 1, C, H, W), T(FBX_DTYPE_F32, M, C / G, K, K), tabsent(),
                      tscalar(FBX_DTYPE_F32), tscalar(FBX_DTYPE_F32)};
  fbx_tensor y = T(FBX_DTYPE_F32, 1, M, OH, OW);
  frand(&in[0]);
  frand(&in[1]);
  for (int c = 0; c < C; c++) F(&in[0])[(c * H + 4) * W + 5] = NAN; /* one NaN pixel per channel */
  F(&in[0])[2] = INFINITY;
  F(&in[3])[0] = 0;
  F(&in[4])[0] = 6;
  fbx_ir_ew_instr relu[1] = {{.op = FBX_IR_OP_RELU, .a = 0, .dtype = FBX_DTYPE_F32}};
  fbx_ir_ew_instr clp[2] = {{.op = FBX_IR_OP_MAX, .a = 0, .b = 1, .dtype = FBX_DTYPE_F32},
                            {.op = FBX_IR_OP_MIN, .a = 3, .b = 2, .dtype = FBX_DTYPE_F32}};
  fbx_ir_ew_program prog = clip ? (fbx_ir_ew_program){.n_inputs = 3, .n_instrs = 2, .out_reg = 4, .instrs = clp}
                                : (fbx_ir_ew_program){.n_inputs = 1, .n_instrs = 1, .out_reg = 1, .instrs = relu};
  for (int i = 0; i < prog.n_inputs; i++) prog.in_dtypes[i] = FBX_DTYPE_F32;
  fbx_ir_params p = {.conv = {.nd = 2, .kernel = {K, K}, .strides = {1, 1}, .dilations = {1, 1},
                              .pads = {pad, pad, pad, pad}, .group = G, .epilogue = &prog, .epilogue_reg = 0}};
  run_ok(what, FBX_IR_OP_CONV, &p, in, clip ? 5 : 3, &y, 1);
  int64_t n = (int64_t)M * OH * OW;
  double *ref = malloc((size_t)n * sizeof(double));
  ref_conv_nan(F(&in[0]), F(&in[1]), ref, C, H, W, M, G, K, pad);
  int64_t nans = 0;
  for (int64_t i = 0; i < n; i++) {
    double v = ref[i];
    nans += isnan(v);
    ref[i] = isnan(v) ? v : clip ? fmin(fmax(v, 0), 6) : fmax(v, 0);
  }
  /* finite values: GEMM summation order differs from the reference */
  bool ok = nans > 0;
  int64_t bad = -1;
  for (int64_t i = 0; i < n && ok; i++) {
    double g = F(&y)[i];
    ok = isnan(ref[i]) ? isnan(g) : isinf(ref[i]) ? g == ref[i] : fabs(g - ref[i]) <= 1e-5 * fmax(1, fabs(ref[i]));
    if (!ok) bad = i;
  }
  check(ok, "%s: %lld NaN outputs expected; element %lld got %g want %g", what, (long long)nans, (long long)bad,
        bad >= 0 ? F(&y)[bad] : 0.0, bad >= 0 ? ref[bad] : 0.0);
  free(ref);
  for (int i = 0; i < 5; i++) tfree(&in[i]);
  tfree(&y);
}

static void test_conv_epilogue_nan(void) {
  conv_epi_case(4, 8, 1, 3, 1, false, "Conv 3x3 + Relu epilogue, NaN pixel");
  conv_epi_case(4, 8, 1, 3, 1, true, "Conv 3x3 + Clip(0,6) epilogue, NaN pixel");
  conv_epi_case(8, 8, 8, 3, 1, false, "depthwise Conv 3x3 + Relu epilogue, NaN pixel");
  conv_epi_case(8, 16, 1, 1, 0, true, "Conv 1x1 + Clip(0,6) epilogue, NaN pixel");
}

/* ---- softmax family ---- */

/* naive ONNX formula in double: exp(x - max) / sum, log: x - max - log(sum) */
static void ref_softmax(const float *x, double *y, int n, bool log_sm) {
  double m = -INFINITY;
  bool has_nan = false;
  for (int i = 0; i < n; i++) {
    has_nan |= isnan(x[i]);
    if (x[i] > m) m = x[i];
  }
  if (has_nan) m = NAN;
  double s = 0;
  for (int i = 0; i < n; i++) s += exp(x[i] - m);
  for (int i = 0; i < n; i++) y[i] = log_sm ? (x[i] - m) - log(s) : exp(x[i] - m) / s;
}

static void test_softmax_special(void) {
  enum { R = 8, A = 13 };
  float rows[R][A];
  for (int r = 0; r < R; r++)
    for (int a = 0; a < A; a++) rows[r][a] = (float)(0.3 * a - 1.7 + r);
  rows[1][4] = NAN;                                            /* NaN in a SIMD lane */
  rows[2][11] = NAN;                                           /* NaN in the tail */
  rows[3][6] = INFINITY;                                       /* +inf: inf - inf */
  for (int a = 0; a < A; a++) rows[4][a] = -INFINITY;          /* all -inf: 0 / 0 */
  rows[5][0] = rows[5][9] = rows[5][12] = -INFINITY;           /* some -inf: those are 0 */
  for (int a = 0; a < A; a++) rows[6][a] = a == 5 ? 0.f : -200.f; /* exp underflow */
  for (int a = 0; a < A; a++) rows[7][a] = a == 2 ? 1e4f : 1e4f - 9.25f - (float)a; /* log(sum) ~ 1e-4 next to 1e4 */
  const char *names[R] = {"plain", "NaN (vector lane)", "NaN (tail)", "+inf", "all -inf", "some -inf",
                          "x - max = -200", "max 1e4, log(sum) 1e-4"};
  for (int lg = 0; lg < 2; lg++)
    for (int strided = 0; strided < 2; strided++) {
      /* strided: the softmax axis is dim 0 of a (A, R) tensor */
      fbx_tensor x = strided ? T(FBX_DTYPE_F32, A, R) : T(FBX_DTYPE_F32, R, A);
      fbx_tensor y = strided ? T(FBX_DTYPE_F32, A, R) : T(FBX_DTYPE_F32, R, A);
      for (int r = 0; r < R; r++)
        for (int a = 0; a < A; a++) F(&x)[strided ? a * R + r : r * A + a] = rows[r][a];
      fbx_ir_params p = {.axis = {.axis = strided ? 0 : 1}};
      run_ok("softmax", lg ? FBX_IR_OP_LOG_SOFTMAX : FBX_IR_OP_SOFTMAX, &p, &x, 1, &y, 1);
      for (int r = 0; r < R; r++) {
        double ref[A];
        ref_softmax(rows[r], ref, A, lg);
        bool ok = true;
        int bad = -1;
        for (int a = 0; a < A && ok; a++) {
          double g = F(&y)[strided ? a * R + r : r * A + a];
          ok = isnan(ref[a]) ? isnan(g)
               : isinf(ref[a]) ? g == ref[a]
                               : fabs(g - ref[a]) <= 2e-6 * fabs(ref[a]) + (lg ? 3e-7 : 1.2e-38);
          if (!ok) bad = a;
        }
        check(ok, "%s%s row '%s': element %d got %g want %g", lg ? "LogSoftmax" : "Softmax",
              strided ? " (strided)" : "", names[r], bad, bad >= 0 ? F(&y)[strided ? bad * R + r : r * A + bad] : 0.0,
              bad >= 0 ? ref[bad] : 0.0);
      }
      tfree(&x);
      tfree(&y);
    }

  /* Hardmax: first maximum, NaN the maximum (np.argmax) */
  float hm[4][A];
  for (int r = 0; r < 4; r++)
    for (int a = 0; a < A; a++) hm[r][a] = (float)((a * 7) % 5);
  hm[1][9] = NAN;
  hm[2][0] = NAN;
  hm[2][3] = NAN;
  for (int a = 0; a < A; a++) hm[3][a] = -INFINITY;
  for (int strided = 0; strided < 2; strided++) {
    fbx_tensor x = strided ? T(FBX_DTYPE_F32, A, 4) : T(FBX_DTYPE_F32, 4, A);
    fbx_tensor y = strided ? T(FBX_DTYPE_F32, A, 4) : T(FBX_DTYPE_F32, 4, A);
    for (int r = 0; r < 4; r++)
      for (int a = 0; a < A; a++) F(&x)[strided ? a * 4 + r : r * A + a] = hm[r][a];
    fbx_ir_params p = {.axis = {.axis = strided ? 0 : 1}};
    run_ok("hardmax", FBX_IR_OP_HARDMAX, &p, &x, 1, &y, 1);
    for (int r = 0; r < 4; r++) {
      int best = 0; /* naive first argmax with NaN as the largest */
      for (int a = 1; a < A; a++)
        if (!isnan(hm[r][best]) && (isnan(hm[r][a]) || hm[r][a] > hm[r][best])) best = a;
      bool ok = true;
      for (int a = 0; a < A; a++) ok &= F(&y)[strided ? a * 4 + r : r * A + a] == (a == best ? 1.f : 0.f);
      check(ok, "Hardmax%s row %d: one-hot at %d", strided ? " (strided)" : "", r, best);
    }
    tfree(&x);
    tfree(&y);
  }
}

/* ---- reductions and arg reductions ---- */

static void test_reduce_special(void) {
  enum { R = 6, A = 11 };
  float rows[R][A];
  for (int r = 0; r < R; r++)
    for (int a = 0; a < A; a++) rows[r][a] = (float)(0.5 * a - 2 + r);
  rows[1][3] = INFINITY;                                   /* +inf */
  for (int a = 0; a < A; a++) rows[2][a] = -INFINITY;      /* all -inf */
  rows[3][7] = NAN;                                        /* NaN */
  rows[4][2] = INFINITY;                                   /* +inf and NaN */
  rows[4][8] = NAN;
  for (int a = 0; a < A; a++) rows[5][a] = 100.f + (float)a; /* large: exp overflows float */
  const char *names[R] = {"plain", "+inf", "all -inf", "NaN", "+inf and NaN", "large"};
  fbx_tensor x = T(FBX_DTYPE_F32, R, A), y = T(FBX_DTYPE_F32, R);
  memcpy(x.data, rows, sizeof(rows));
  fbx_ir_params p = {.reduce = {.axes_mask = 2}};
  const fbx_ir_op ops[3] = {FBX_IR_OP_REDUCE_LOG_SUM_EXP, FBX_IR_OP_REDUCE_MAX, FBX_IR_OP_REDUCE_MIN};
  for (int k = 0; k < 3; k++) {
    run_ok(fbx_ir_op_name(ops[k]), ops[k], &p, &x, 1, &y, 1);
    for (int r = 0; r < R; r++) {
      /* naive: log(sum(exp(x))) in long double (no overflow at 110); max/min with NaN winning */
      long double s = 0;
      double m = ops[k] == FBX_IR_OP_REDUCE_MAX ? -INFINITY : INFINITY;
      bool nan = false;
      for (int a = 0; a < A; a++) {
        s += expl((long double)rows[r][a]);
        nan |= isnan(rows[r][a]);
        m = ops[k] == FBX_IR_OP_REDUCE_MAX ? fmax(m, rows[r][a]) : fmin(m, rows[r][a]);
      }
      double want = ops[k] == FBX_IR_OP_REDUCE_LOG_SUM_EXP ? (double)logl(s) : nan ? NAN : m;
      double g = F(&y)[r];
      bool ok = isnan(want) ? isnan(g) : isinf(want) ? g == want : fabs(g - want) <= 1e-6 * fmax(1, fabs(want));
      check(ok, "%s row '%s': got %g want %g", fbx_ir_op_name(ops[k]), names[r], g, want);
    }
  }
  tfree(&y);

  /* ArgMax / ArgMin: first NaN (np.argmax), last NaN with select_last_index */
  float am[3][A];
  for (int r = 0; r < 3; r++)
    for (int a = 0; a < A; a++) am[r][a] = (float)((a * 3) % 7);
  am[1][5] = NAN;
  am[1][9] = NAN;
  am[2][0] = NAN;
  fbx_tensor ax = T(FBX_DTYPE_F32, 3, A), ay = T(FBX_DTYPE_I64, 3);
  memcpy(ax.data, am, sizeof(am));
  for (int mx = 0; mx < 2; mx++)
    for (int last = 0; last < 2; last++) {
      fbx_ir_params pa = {.arg = {.axis = 1, .select_last = last}};
      run_ok("arg", mx ? FBX_IR_OP_ARGMAX : FBX_IR_OP_ARGMIN, &pa, &ax, 1, &ay, 1);
      for (int r = 0; r < 3; r++) {
        int best = -1;
        for (int a = 0; a < A; a++) if (isnan(am[r][a]) && (best < 0 || last)) best = a;
        if (best < 0) {
          best = 0;
          for (int a = 1; a < A; a++) {
            float v = am[r][a], b = am[r][best];
            if (mx ? (last ? v >= b : v > b) : (last ? v <= b : v < b)) best = a;
          }
        }
        check(L(&ay)[r] == best, "%s%s row %d: got %lld want %d", mx ? "ArgMax" : "ArgMin",
              last ? " select_last" : "", r, (long long)L(&ay)[r], best);
      }
    }
  tfree(&x);
  tfree(&ax);
  tfree(&ay);
}

/* ---- max pools ---- */

static void maxpool_case(int H, int W, int K, int S, int pad, int dil, bool idx, const char *what) {
  int OH = (H + 2 * pad - dil * (K - 1) - 1) / S + 1, OW = (W + 2 * pad - dil * (K - 1) - 1) / S + 1;
  fbx_tensor x = T(FBX_DTYPE_F32, 1, 2, H, W), y[2] = {T(FBX_DTYPE_F32, 1, 2, OH, OW), T(FBX_DTYPE_I64, 1, 2, OH, OW)};
  frand(&x);
  F(&x)[3 * W + 4] = NAN;                 /* plane 0 */
  F(&x)[H * W + 5 * W + (W - 2)] = NAN;   /* plane 1, near the right edge (scalar tail) */
  F(&x)[H * W + 1] = INFINITY;
  fbx_ir_params p = {.conv = {.nd = 2, .kernel = {K, K}, .strides = {S, S}, .dilations = {dil, dil},
                              .pads = {pad, pad, pad, pad}}};
  run_ok(what, FBX_IR_OP_MAXPOOL, &p, &x, 1, y, idx ? 2 : 1);
  bool ok = true;
  int nans = 0;
  for (int c = 0; c < 2 && ok; c++)
    for (int oh = 0; oh < OH && ok; oh++)
      for (int ow = 0; ow < OW && ok; ow++) {
        double m = -INFINITY;
        int64_t arg = -1;
        for (int kh = 0; kh < K; kh++)
          for (int kw = 0; kw < K; kw++) {
            int ih = oh * S - pad + kh * dil, iw = ow * S - pad + kw * dil;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            int64_t off = ((int64_t)c * H + ih) * W + iw;
            double v = F(&x)[off];
            if (arg < 0 || (!isnan(m) && (isnan(v) || v > m))) { m = v; arg = off; }
          }
        int64_t o = ((int64_t)c * OH + oh) * OW + ow;
        nans += isnan(m);
        ok = same(F(&y[0])[o], m) && (!idx || L(&y[1])[o] == arg);
        if (!ok)
          check(0, "%s: (%d,%d,%d) got %g [%lld] want %g [%lld]", what, c, oh, ow, F(&y[0])[o],
                idx ? (long long)L(&y[1])[o] : -1LL, m, (long long)arg);
      }
  if (ok) check(nans > 0, "%s: NaN windows propagate (%d)", what, nans);
  tfree(&x);
  tfree(&y[0]);
  tfree(&y[1]);
}

static void test_maxpool_nan(void) {
  maxpool_case(12, 21, 3, 2, 1, 1, false, "MaxPool 3x3 s2 p1 (AVX2 fast path), NaN");
  maxpool_case(12, 21, 3, 1, 1, 1, false, "MaxPool 3x3 s1 p1 (AVX2 fast path), NaN");
  maxpool_case(12, 21, 2, 3, 0, 1, false, "MaxPool 2x2 s3 (fast path, scalar columns), NaN");
  maxpool_case(12, 21, 3, 2, 1, 1, true, "MaxPool 3x3 s2 p1 with indices (generic path), NaN");
  maxpool_case(12, 21, 2, 1, 0, 2, false, "MaxPool 2x2 dilation 2 (generic path), NaN");
  /* GlobalMaxPool */
  fbx_tensor x = T(FBX_DTYPE_F32, 1, 3, 5, 7), y = T(FBX_DTYPE_F32, 1, 3, 1, 1);
  frand(&x);
  F(&x)[35 + 17] = NAN;
  F(&x)[70] = NAN;
  run_ok("gmp", FBX_IR_OP_GLOBAL_MAXPOOL, NULL, &x, 1, &y, 1);
  double m0 = -INFINITY;
  for (int i = 0; i < 35; i++) m0 = fmax(m0, F(&x)[i]);
  check(F(&y)[0] == (float)m0 && isnan(F(&y)[1]) && isnan(F(&y)[2]), "GlobalMaxPool: NaN planes NaN (%g %g %g)",
        (double)F(&y)[0], (double)F(&y)[1], (double)F(&y)[2]);
  tfree(&x);
  tfree(&y);
}

int main(void) {
  test_setup(2);
  test_ew_nan();
  test_ew_named();
  test_hard_values();
  test_fused_nan();
  test_conv_epilogue_nan();
  test_softmax_special();
  test_reduce_special();
  test_maxpool_nan();
  return test_finish("cpu nan/inf");
}
