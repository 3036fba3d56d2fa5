/* CPU backend: data movement, gather, reductions, softmax/layernorm, conv,
 * pools and resize, each vs a naive reference written here. */
#include "cpu_test_util.h"

static void test_transpose_slice_gather(void) {
  /* 4-D transpose perm (0,2,3,1) and big 2-D (tiled) */
  fbx_tensor x = T(FBX_DTYPE_F32, 2, 3, 4, 5), y = T(FBX_DTYPE_F32, 2, 4, 5, 3);
  frand(&x);
  fbx_ir_params p = {.transpose = {.perm = {0, 2, 3, 1}}};
  run_ok("transpose", FBX_IR_OP_TRANSPOSE, &p, &x, 1, &y, 1);
  double ref[300];
  for (int a = 0; a < 2; a++) for (int b = 0; b < 3; b++) for (int c = 0; c < 4; c++) for (int d = 0; d < 5; d++)
    ref[((a * 4 + c) * 5 + d) * 3 + b] = F(&x)[((a * 3 + b) * 4 + c) * 5 + d];
  fclose_arr(F(&y), ref, 120, 0, "TRANSPOSE 4-D (0,2,3,1)");
  tfree(&x); tfree(&y);
  fbx_tensor a = T(FBX_DTYPE_F32, 300, 517), b = T(FBX_DTYPE_F32, 517, 300);
  frand(&a);
  fbx_ir_params p2 = {.transpose = {.perm = {1, 0}}};
  run_ok("transpose2d", FBX_IR_OP_TRANSPOSE, &p2, &a, 1, &b, 1);
  int ok = 1;
  for (int i = 0; i < 300; i++) for (int j = 0; j < 517; j++) ok &= F(&b)[j * 300 + i] == F(&a)[i * 517 + j];
  check(ok, "TRANSPOSE 2-D 300x517 (tiled, parallel)");
  tfree(&a); tfree(&b);

  /* slice with a negative step: x (4,10)[1:3, 8:1:-3] -> (2, 3) cols 8,5,2 */
  fbx_tensor s[5] = {T(FBX_DTYPE_F32, 4, 10), T(FBX_DTYPE_I64, 2), T(FBX_DTYPE_I64, 2), T(FBX_DTYPE_I64, 2), T(FBX_DTYPE_I64, 2)};
  frand(&s[0]);
  int64_t st[2] = {1, 8}, en[2] = {3, 1}, ax[2] = {0, -1}, sp[2] = {1, -3};
  memcpy(s[1].data, st, 16); memcpy(s[2].data, en, 16); memcpy(s[3].data, ax, 16); memcpy(s[4].data, sp, 16);
  fbx_tensor sy = T(FBX_DTYPE_F32, 2, 3);
  run_ok("slice", FBX_IR_OP_SLICE, NULL, s, 5, &sy, 1);
  ok = 1;
  for (int i = 0; i < 2; i++) for (int j = 0; j < 3; j++) ok &= F(&sy)[i * 3 + j] == F(&s[0])[(1 + i) * 10 + 8 - 3 * j];
  check(ok, "SLICE negative step");
  /* ends beyond the dim clamp; INT64_MIN end with negative step reaches 0 */
  int64_t st2[2] = {-1, 100}, en2[2] = {INT64_MIN, -1000}, sp2[2] = {-1, -4};
  memcpy(s[1].data, st2, 16); memcpy(s[2].data, en2, 16); memcpy(s[4].data, sp2, 16);
  fbx_tensor sy2 = T(FBX_DTYPE_F32, 4, 3);
  run_ok("slice2", FBX_IR_OP_SLICE, NULL, s, 5, &sy2, 1);
  ok = 1;
  for (int i = 0; i < 4; i++) for (int j = 0; j < 3; j++) ok &= F(&sy2)[i * 3 + j] == F(&s[0])[(3 - i) * 10 + 9 - 4 * j];
  check(ok, "SLICE clamping with negative steps");
  for (int i = 0; i < 5; i++) tfree(&s[i]);
  tfree(&sy); tfree(&sy2);

  /* gather axis 1 with negative indices; out of range -> error */
  fbx_tensor g[2] = {T(FBX_DTYPE_F32, 3, 5, 2), T(FBX_DTYPE_I64, 2, 2)};
  frand(&g[0]);
  int64_t gi[4] = {0, -1, 3, -5};
  memcpy(g[1].data, gi, 32);
  fbx_tensor gy = T(FBX_DTYPE_F32, 3, 2, 2, 2);
  fbx_ir_params pg = {.axis = {.axis = 1}};
  run_ok("gather", FBX_IR_OP_GATHER, &pg, g, 2, &gy, 1);
  ok = 1;
  for (int a0 = 0; a0 < 3; a0++) for (int j = 0; j < 4; j++) for (int c = 0; c < 2; c++) {
    int64_t v = gi[j] < 0 ? gi[j] + 5 : gi[j];
    ok &= F(&gy)[(a0 * 4 + j) * 2 + c] == F(&g[0])[(a0 * 5 + v) * 2 + c];
  }
  check(ok, "GATHER negative indices");
  L(&g[1])[2] = 5;
  fbx_status *e = run_node(FBX_IR_OP_GATHER, &pg, g, 2, &gy, 1, NULL);
  check(e && fbx_status_code_of(e) == FBX_STATUS_INVALID_ARG, "GATHER out of range -> INVALID_ARG");
  fbx_status_free(e);
  tfree(&g[0]); tfree(&g[1]); tfree(&gy);

  /* concat axis 1 + split back; expand (3,1)->(2,3,4); pad reflect */
  fbx_tensor c2[2] = {T(FBX_DTYPE_I64, 2, 1, 3), T(FBX_DTYPE_I64, 2, 2, 3)}, cy = T(FBX_DTYPE_I64, 2, 3, 3);
  for (int i = 0; i < 6; i++) L(&c2[0])[i] = 100 + i;
  for (int i = 0; i < 12; i++) L(&c2[1])[i] = 200 + i;
  fbx_ir_params pc = {.axis = {.axis = 1}};
  run_ok("concat", FBX_IR_OP_CONCAT, &pc, c2, 2, &cy, 1);
  int64_t want[18] = {100, 101, 102, 200, 201, 202, 203, 204, 205, 103, 104, 105, 206, 207, 208, 209, 210, 211};
  check(memcmp(cy.data, want, sizeof(want)) == 0, "CONCAT i64 axis 1");
  fbx_tensor so[2] = {T(FBX_DTYPE_I64, 2, 1, 3), T(FBX_DTYPE_I64, 2, 2, 3)};
  run_ok("split", FBX_IR_OP_SPLIT, &pc, &cy, 1, so, 2);
  check(memcmp(so[0].data, c2[0].data, 48) == 0 && memcmp(so[1].data, c2[1].data, 96) == 0, "SPLIT inverts CONCAT");
  tfree(&c2[0]); tfree(&c2[1]); tfree(&cy); tfree(&so[0]); tfree(&so[1]);
  fbx_tensor ex[2] = {T(FBX_DTYPE_F32, 3, 1), T(FBX_DTYPE_I64, 3)}, ey = T(FBX_DTYPE_F32, 2, 3, 4);
  frand(&ex[0]);
  run_ok("expand", FBX_IR_OP_EXPAND, NULL, ex, 2, &ey, 1);
  ok = 1;
  for (int i = 0; i < 24; i++) ok &= F(&ey)[i] == F(&ex[0])[(i / 4) % 3];
  check(ok, "EXPAND (3,1)->(2,3,4)");
  tfree(&ex[0]); tfree(&ex[1]); tfree(&ey);
  fbx_tensor pd[2] = {T(FBX_DTYPE_F32, 4), T(FBX_DTYPE_I64, 2)}, py = T(FBX_DTYPE_F32, 9);
  float pv[4] = {1, 2, 3, 4};
  memcpy(pd[0].data, pv, 16);
  L(&pd[1])[0] = 3; L(&pd[1])[1] = 2;
  fbx_ir_params pp = {.pad = {.mode = FBX_IR_PADMODE_REFLECT}};
  run_ok("pad", FBX_IR_OP_PAD, &pp, pd, 2, &py, 1);
  float pw[9] = {4, 3, 2, 1, 2, 3, 4, 3, 2};
  check(memcmp(py.data, pw, sizeof(pw)) == 0, "PAD reflect");
  pp.pad.mode = FBX_IR_PADMODE_EDGE;
  run_ok("pad edge", FBX_IR_OP_PAD, &pp, pd, 2, &py, 1);
  float pe[9] = {1, 1, 1, 1, 2, 3, 4, 4, 4};
  check(memcmp(py.data, pe, sizeof(pe)) == 0, "PAD edge");
  tfree(&pd[0]); tfree(&pd[1]); tfree(&py);
  /* range, constant_of_shape, shape */
  fbx_tensor rg[3] = {tscalar(FBX_DTYPE_I64), tscalar(FBX_DTYPE_I64), tscalar(FBX_DTYPE_I64)}, ry = T(FBX_DTYPE_I64, 4);
  L(&rg[0])[0] = 10; L(&rg[1])[0] = 2; L(&rg[2])[0] = -2;
  run_ok("range", FBX_IR_OP_RANGE, NULL, rg, 3, &ry, 1);
  check(L(&ry)[0] == 10 && L(&ry)[3] == 4, "RANGE i64 negative delta");
  fbx_tensor shy = T(FBX_DTYPE_I64, 2);
  fbx_tensor shx = T(FBX_DTYPE_F32, 2, 3, 4);
  fbx_ir_params ps = {.shape = {.start = -2}};
  run_ok("shape", FBX_IR_OP_SHAPE, &ps, &shx, 1, &shy, 1);
  check(L(&shy)[0] == 3 && L(&shy)[1] == 4, "SHAPE start=-2");
  tfree(&rg[0]); tfree(&rg[1]); tfree(&rg[2]); tfree(&ry); tfree(&shy); tfree(&shx);
}

static void test_reduce_softmax_norm(void) {
  fbx_tensor x = T(FBX_DTYPE_F32, 3, 4, 50), y = T(FBX_DTYPE_F32, 3, 1, 50);
  frand(&x);
  fbx_ir_params p = {.reduce = {.axes_mask = 2, .keepdims = 1}};
  run_ok("rmean", FBX_IR_OP_REDUCE_MEAN, &p, &x, 1, &y, 1);
  double ref[600];
  for (int a = 0; a < 3; a++) for (int c = 0; c < 50; c++) {
    double s = 0;
    for (int b = 0; b < 4; b++) s += F(&x)[(a * 4 + b) * 50 + c];
    ref[a * 50 + c] = s / 4;
  }
  fclose_arr(F(&y), ref, 150, 1e-6, "REDUCE_MEAN axis 1");
  fbx_tensor y2 = T(FBX_DTYPE_F32, 4);
  fbx_ir_params p2 = {.reduce = {.axes_mask = 5}};
  run_ok("rmax", FBX_IR_OP_REDUCE_MAX, &p2, &x, 1, &y2, 1);
  for (int b = 0; b < 4; b++) {
    double m = -1e30;
    for (int a = 0; a < 3; a++) for (int c = 0; c < 50; c++) m = fmax(m, F(&x)[(a * 4 + b) * 50 + c]);
    ref[b] = m;
  }
  fclose_arr(F(&y2), ref, 4, 0, "REDUCE_MAX axes 0,2");
  /* softmax last axis and middle axis */
  fbx_tensor sy = T(FBX_DTYPE_F32, 3, 4, 50);
  for (int axis = 1; axis <= 2; axis++) {
    fbx_ir_params ps = {.axis = {.axis = axis}};
    run_ok("softmax", FBX_IR_OP_SOFTMAX, &ps, &x, 1, &sy, 1);
    for (int a = 0; a < 3; a++) for (int b = 0; b < 4; b++) for (int c = 0; c < 50; c++) {
      double s = 0, m = -1e30;
      int n = axis == 1 ? 4 : 50;
      for (int k = 0; k < n; k++) m = fmax(m, F(&x)[axis == 1 ? (a * 4 + k) * 50 + c : (a * 4 + b) * 50 + k]);
      for (int k = 0; k < n; k++) s += exp(F(&x)[axis == 1 ? (a * 4 + k) * 50 + c : (a * 4 + b) * 50 + k] - m);
      ref[(a * 4 + b) * 50 + c] = exp(F(&x)[(a * 4 + b) * 50 + c] - m) / s;
    }
    fclose_arr(F(&sy), ref, 600, 1e-5, axis == 1 ? "SOFTMAX axis 1" : "SOFTMAX last axis");
  }
  /* layer norm over the last axis with scale and bias */
  fbx_tensor ln[3] = {x, T(FBX_DTYPE_F32, 50), T(FBX_DTYPE_F32, 50)};
  frand(&ln[1]); frand(&ln[2]);
  fbx_ir_params pl = {.norm = {.axis = 2, .epsilon = 1e-5f}};
  run_ok("ln", FBX_IR_OP_LAYER_NORM, &pl, ln, 3, &sy, 1);
  for (int r = 0; r < 12; r++) {
    double m = 0, v = 0;
    for (int c = 0; c < 50; c++) m += F(&x)[r * 50 + c];
    m /= 50;
    for (int c = 0; c < 50; c++) v += (F(&x)[r * 50 + c] - m) * (F(&x)[r * 50 + c] - m);
    v /= 50;
    for (int c = 0; c < 50; c++) ref[r * 50 + c] = (F(&x)[r * 50 + c] - m) / sqrt(v + 1e-5) * F(&ln[1])[c] + F(&ln[2])[c];
  }
  fclose_arr(F(&sy), ref, 600, 1e-5, "LAYER_NORM last axis");
  /* argmax, cumsum */
  fbx_tensor am = T(FBX_DTYPE_I64, 3, 50);
  fbx_ir_params pa = {.arg = {.axis = 1}};
  run_ok("argmax", FBX_IR_OP_ARGMAX, &pa, &x, 1, &am, 1);
  int ok = 1;
  for (int a = 0; a < 3; a++) for (int c = 0; c < 50; c++) {
    int best = 0;
    for (int b = 1; b < 4; b++) if (F(&x)[(a * 4 + b) * 50 + c] > F(&x)[(a * 4 + best) * 50 + c]) best = b;
    ok &= L(&am)[a * 50 + c] == best;
  }
  check(ok, "ARGMAX axis 1");
  tfree(&am); tfree(&ln[1]); tfree(&ln[2]); tfree(&x); tfree(&y); tfree(&y2); tfree(&sy);
}

/* naive conv reference, 2-D */
static void ref_conv(const float *x, const float *w, const float *b, double *y, int N, int C, int H, int W, int M,
                     int G, int KH, int KW, int sh, int sw, int ph, int pw, int dh, int dw, int OH, int OW) {
  int Cg = C / G, Mg = M / G;
  for (int n = 0; n < N; n++) for (int m = 0; m < M; m++) for (int oh = 0; oh < OH; oh++) for (int ow = 0; ow < OW; ow++) {
    int g = m / Mg;
    double s = b ? b[m] : 0;
    for (int cc = 0; cc < Cg; cc++) for (int kh = 0; kh < KH; kh++) for (int kw = 0; kw < KW; kw++) {
      int ih = oh * sh - ph + kh * dh, iw = ow * sw - pw + kw * dw;
      if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
      s += (double)x[((n * C + g * Cg + cc) * H + ih) * W + iw] * w[((m * Cg + cc) * KH + kh) * KW + kw];
    }
    y[((n * M + m) * OH + oh) * OW + ow] = s;
  }
}

static void conv_case(int N, int C, int H, int W, int M, int G, int K, int s, int pad, int dil, int bias, const char *what) {
  int OH = (H + 2 * pad - dil * (K - 1) - 1) / s + 1, OW = (W + 2 * pad - dil * (K - 1) - 1) / s + 1;
  fbx_tensor in[3] = {T(FBX_DTYPE_F32, N, C, H, W), T(FBX_DTYPE_F32, M, C / G, K, K), bias ? T(FBX_DTYPE_F32, M) : tabsent()};
  fbx_tensor y = T(FBX_DTYPE_F32, N, M, OH, OW);
  frand(&in[0]); frand(&in[1]);
  if (bias) frand(&in[2]);
  fbx_ir_params p = {.conv = {.nd = 2, .kernel = {K, K}, .strides = {s, s}, .dilations = {dil, dil}, .pads = {pad, pad, pad, pad}, .group = G}};
  run_ok(what, FBX_IR_OP_CONV, &p, in, 3, &y, 1);
  size_t n = (size_t)N * M * OH * OW;
  double *ref = malloc(n * sizeof(double));
  ref_conv(F(&in[0]), F(&in[1]), bias ? F(&in[2]) : NULL, ref, N, C, H, W, M, G, K, K, s, s, pad, pad, dil, dil, OH, OW);
  fclose_arr(F(&y), ref, (int64_t)n, 1e-4, what);
  free(ref);
  tfree(&in[0]); tfree(&in[1]); if (bias) tfree(&in[2]); tfree(&y);
}

static void test_conv(void) {
  conv_case(1, 8, 13, 11, 16, 1, 3, 1, 1, 1, 1, "CONV 3x3 pad1 bias");
  conv_case(2, 6, 9, 10, 4, 2, 3, 2, 1, 1, 0, "CONV groups=2 stride 2");
  conv_case(1, 4, 12, 12, 6, 1, 3, 1, 2, 2, 1, "CONV dilation 2 pad 2");
  conv_case(1, 16, 20, 17, 16, 16, 3, 1, 1, 1, 1, "CONV depthwise 3x3");
  conv_case(2, 12, 15, 15, 12, 12, 5, 2, 2, 1, 1, "CONV depthwise 5x5 stride 2");
  conv_case(1, 32, 8, 9, 24, 1, 1, 1, 0, 1, 1, "CONV 1x1 pointwise");
  conv_case(1, 64, 40, 40, 64, 1, 3, 1, 1, 1, 1, "CONV 64ch 40x40 (parallel im2col)");

  /* conv transpose 2x2 stride 2 (upsampling), vs scatter reference */
  int C = 3, M = 2, H = 4, W = 5, K = 2, S = 2, OH = (H - 1) * S + K, OW = (W - 1) * S + K;
  fbx_tensor in[3] = {T(FBX_DTYPE_F32, 1, C, H, W), T(FBX_DTYPE_F32, C, M, K, K), T(FBX_DTYPE_F32, M)};
  frand(&in[0]); frand(&in[1]); frand(&in[2]);
  fbx_tensor y = T(FBX_DTYPE_F32, 1, M, OH, OW);
  fbx_ir_params p = {.conv = {.nd = 2, .kernel = {K, K}, .strides = {S, S}, .dilations = {1, 1}, .group = 1}};
  run_ok("convT", FBX_IR_OP_CONV_TRANSPOSE, &p, in, 3, &y, 1);
  double ref[2 * 10 * 10];
  for (int m = 0; m < M; m++) for (int i = 0; i < OH * OW; i++) ref[m * OH * OW + i] = F(&in[2])[m];
  for (int c = 0; c < C; c++) for (int h = 0; h < H; h++) for (int w = 0; w < W; w++) for (int m = 0; m < M; m++)
    for (int kh = 0; kh < K; kh++) for (int kw = 0; kw < K; kw++)
      ref[(m * OH + h * S + kh) * OW + w * S + kw] += (double)F(&in[0])[(c * H + h) * W + w] * F(&in[1])[((c * M + m) * K + kh) * K + kw];
  fclose_arr(F(&y), ref, M * OH * OW, 1e-5, "CONV_TRANSPOSE 2x2 stride 2");
  tfree(&in[0]); tfree(&in[1]); tfree(&in[2]); tfree(&y);
}

static void test_pool_resize(void) {
  /* maxpool 3x3 stride 2 pad 1 ceil_mode on 7x8 -> out 4x5 (ceil) */
  int H = 7, W = 8, OH = 5, OW = 5;  /* ceil((7+2-3)/2)+1 = 4; ceil((8+2-3)/2)+1=5 ; use 4 */
  OH = 4;
  fbx_tensor x = T(FBX_DTYPE_F32, 1, 2, H, W), y = T(FBX_DTYPE_F32, 1, 2, OH, OW);
  frand(&x);
  fbx_ir_params p = {.conv = {.nd = 2, .kernel = {3, 3}, .strides = {2, 2}, .dilations = {1, 1}, .pads = {1, 1, 1, 1}, .ceil_mode = 1}};
  run_ok("maxpool", FBX_IR_OP_MAXPOOL, &p, &x, 1, &y, 1);
  double ref[2 * 4 * 5];
  for (int c = 0; c < 2; c++) for (int oh = 0; oh < OH; oh++) for (int ow = 0; ow < OW; ow++) {
    double m = -1e30;
    for (int kh = 0; kh < 3; kh++) for (int kw = 0; kw < 3; kw++) {
      int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
      if (ih >= 0 && ih < H && iw >= 0 && iw < W) m = fmax(m, F(&x)[(c * H + ih) * W + iw]);
    }
    ref[(c * OH + oh) * OW + ow] = m;
  }
  fclose_arr(F(&y), ref, 2 * OH * OW, 0, "MAXPOOL 3x3 s2 p1 ceil_mode");
  /* avgpool count_include_pad=1 and 0 */
  for (int inc = 0; inc <= 1; inc++) {
    p.conv.count_include_pad = inc;
    p.conv.ceil_mode = 0;
    run_ok("avgpool", FBX_IR_OP_AVGPOOL, &p, &x, 1, &y, 1);
    for (int c = 0; c < 2; c++) for (int oh = 0; oh < OH; oh++) for (int ow = 0; ow < OW; ow++) {
      double s = 0;
      int cnt = 0, pc = 0;
      for (int kh = 0; kh < 3; kh++) for (int kw = 0; kw < 3; kw++) {
        int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
        if (ih <= H && iw <= W) pc++; /* inside the padded extent (pad end 1) */
        if (ih >= 0 && ih < H && iw >= 0 && iw < W) { s += F(&x)[(c * H + ih) * W + iw]; cnt++; }
      }
      ref[(c * OH + oh) * OW + ow] = s / (inc ? pc : cnt);
    }
    fclose_arr(F(&y), ref, 2 * OH * OW, 1e-6, inc ? "AVGPOOL count_include_pad=1" : "AVGPOOL count_include_pad=0");
  }
  tfree(&y);
  /* avgpool with every window inside the input (the avgpool2d_inside path): PP-OCR rec's
   * kernel (3, 2) stride (3, 2), an overlapping 3x3 stride 1, and a window short of the edge */
  {
    const struct { int64_t H, W, KH, KW, SH, SW; } ap[] = {{6, 20, 3, 2, 3, 2}, {7, 9, 3, 3, 1, 1}, {8, 11, 2, 3, 3, 2}};
    for (size_t t = 0; t < sizeof ap / sizeof ap[0]; t++) {
      int64_t aoh = (ap[t].H - ap[t].KH) / ap[t].SH + 1, aow = (ap[t].W - ap[t].KW) / ap[t].SW + 1;
      fbx_tensor ax = T(FBX_DTYPE_F32, 2, 3, ap[t].H, ap[t].W), ay = T(FBX_DTYPE_F32, 2, 3, aoh, aow);
      frand(&ax);
      fbx_ir_params ps = {.conv = {.nd = 2, .kernel = {ap[t].KH, ap[t].KW}, .strides = {ap[t].SH, ap[t].SW},
                                   .dilations = {1, 1}, .count_include_pad = (int)(t % 2)}};
      run_ok("avgpool inside", FBX_IR_OP_AVGPOOL, &ps, &ax, 1, &ay, 1);
      double *aref = malloc(sizeof(double) * (size_t)(6 * aoh * aow));
      for (int64_t c = 0; c < 6; c++)
        for (int64_t oh = 0; oh < aoh; oh++)
          for (int64_t ow = 0; ow < aow; ow++) {
            double sum = 0;
            for (int64_t kh = 0; kh < ap[t].KH; kh++)
              for (int64_t kw = 0; kw < ap[t].KW; kw++)
                sum += F(&ax)[(c * ap[t].H + oh * ap[t].SH + kh) * ap[t].W + ow * ap[t].SW + kw];
            aref[(c * aoh + oh) * aow + ow] = sum / (double)(ap[t].KH * ap[t].KW);
          }
      char what[96];
      snprintf(what, sizeof what, "AVGPOOL inside %lldx%lld k%lldx%lld s%lldx%lld", (long long)ap[t].H,
               (long long)ap[t].W, (long long)ap[t].KH, (long long)ap[t].KW, (long long)ap[t].SH, (long long)ap[t].SW);
      fclose_arr(F(&ay), aref, 6 * aoh * aow, 1e-6, what);
      free(aref);
      tfree(&ax);
      tfree(&ay);
    }
  }
  fbx_tensor gy = T(FBX_DTYPE_F32, 1, 2, 1, 1);
  run_ok("gap", FBX_IR_OP_GLOBAL_AVGPOOL, NULL, &x, 1, &gy, 1);
  for (int c = 0; c < 2; c++) { double s = 0; for (int i = 0; i < H * W; i++) s += F(&x)[c * H * W + i]; ref[c] = s / (H * W); }
  fclose_arr(F(&gy), ref, 2, 1e-6, "GLOBAL_AVGPOOL");
  tfree(&gy);

  /* resize nearest x2 asymmetric floor, and linear half_pixel 7x8 -> 10x13 */
  fbx_tensor rin[4] = {x, tabsent(), tabsent(), tabsent()};
  fbx_tensor ry = T(FBX_DTYPE_F32, 1, 2, 14, 16);
  fbx_ir_params pr = {.resize = {.mode = FBX_IR_RESIZE_NEAREST, .coord = FBX_IR_COORD_ASYMMETRIC, .nearest = FBX_IR_NEAREST_FLOOR}};
  run_ok("resize nearest", FBX_IR_OP_RESIZE, &pr, rin, 4, &ry, 1);
  int ok = 1;
  for (int c = 0; c < 2; c++) for (int i = 0; i < 14; i++) for (int j = 0; j < 16; j++)
    ok &= F(&ry)[(c * 14 + i) * 16 + j] == F(&x)[(c * H + i / 2) * W + j / 2];
  check(ok, "RESIZE nearest x2 asymmetric floor");
  tfree(&ry);
  int RH = 10, RW = 13;
  ry = T(FBX_DTYPE_F32, 1, 2, RH, RW);
  pr.resize.mode = FBX_IR_RESIZE_LINEAR;
  pr.resize.coord = FBX_IR_COORD_HALF_PIXEL;
  run_ok("resize linear", FBX_IR_OP_RESIZE, &pr, rin, 4, &ry, 1);
  double rr[2 * 10 * 13];
  for (int c = 0; c < 2; c++) for (int i = 0; i < RH; i++) for (int j = 0; j < RW; j++) {
    double sy = fmin(fmax((i + 0.5) * H / RH - 0.5, 0), H - 1), sx = fmin(fmax((j + 0.5) * W / RW - 0.5, 0), W - 1);
    int y0 = (int)floor(sy), x0 = (int)floor(sx), y1 = y0 + 1 < H ? y0 + 1 : H - 1, x1 = x0 + 1 < W ? x0 + 1 : W - 1;
    double wy = sy - y0, wx = sx - x0;
    const float *p0 = F(&x) + c * H * W;
    rr[(c * RH + i) * RW + j] = (1 - wy) * ((1 - wx) * p0[y0 * W + x0] + wx * p0[y0 * W + x1]) + wy * ((1 - wx) * p0[y1 * W + x0] + wx * p0[y1 * W + x1]);
  }
  fclose_arr(F(&ry), rr, 2 * RH * RW, 1e-5, "RESIZE linear half_pixel 7x8->10x13");
  tfree(&ry);
  tfree(&x);
}

int main(void) {
  test_setup(2);
  test_transpose_slice_gather();
  test_reduce_softmax_norm();
  test_conv();
  test_pool_resize();
  return test_finish("cpu ops");
}
