/* Conv epilogue fusion (exec_fuse_epilogue.c + cpu_conv.c): Conv / depthwise /
 * 1x1 / ConvTranspose followed by an affine Mul+Add, a HardSwish written as
 * Add+Max+Min+Mul+Div, and a residual Add, compiled through fbx_exec_compiled on
 * the CPU backend, must (a) run as one conv step (counted by a wrapper
 * backend) and (b) match a naive double-accumulation reference computed with
 * the same float op order. Also: the eager (unfused) path gives the same
 * numbers, and a conv whose output is also a graph output is not fused.
 * Every case runs twice: without node_prepare (no packed-W paths) and with the
 * CPU backend's node_prepare (W packed at compile: the AVX-512 output-channel
 * kernel of cpu_conv_oc512.c, the small-map im2col GEMM); the variants taken
 * are printed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"
#include "exec/exec_compiled.h"

static int passed, failed;
#define CHECK(cond, ...)                  \
  do {                                    \
    bool ok_ = (cond);                    \
    printf("%s ", ok_ ? "ok  " : "FAIL"); \
    printf(__VA_ARGS__);                  \
    printf("\n");                         \
    ok_ ? passed++ : failed++;            \
  } while (0)
#define OK(expr)                                                               \
  do {                                                                         \
    fbx_status *st_ = (expr);                                                  \
    if (st_) {                                                                 \
      printf("FAIL %s: %s\n", #expr, fbx_status_message(st_));                 \
      fbx_status_free(st_);                                                    \
      failed++;                                                                \
      return;                                                                  \
    }                                                                          \
  } while (0)

/* ---- wrapper backend: the CPU backend, counting run_node calls per op ---- */
static fbx_backend *g_cpu;
static fbx_backend_vtable g_vt;
static fbx_backend g_wrap;
static int g_runs, g_conv_runs, g_epi_runs;
static const char *g_conv_variant; /* of the last conv run */

static fbx_status *w_run(fbx_backend *be, const fbx_ir_node *n, void *state, const fbx_tensor *in, int n_in,
                         fbx_tensor *out, int n_out, fbx_kernel_info *info) {
  g_runs++;
  if (n->op == FBX_IR_OP_CONV || n->op == FBX_IR_OP_CONV_TRANSPOSE) {
    g_conv_runs++;
    if (n->params.conv.epilogue) g_epi_runs++;
    fbx_kernel_info local = {0}; /* the plan may pass none */
    if (!info) info = &local;
    fbx_status *st = g_cpu->vt->run_node(g_cpu, n, state, in, n_in, out, n_out, info);
    g_conv_variant = info->variant;
    return st;
  }
  return g_cpu->vt->run_node(g_cpu, n, state, in, n_in, out, n_out, info);
}
static fbx_status *w_prepare(fbx_backend *be, const fbx_ir_node *n, const fbx_tensor *const *ci, const fbx_tensor *in,
                             void **state) {
  (void)be;
  return g_cpu->vt->node_prepare(g_cpu, n, ci, in, state);
}
static void w_release(fbx_backend *be, const fbx_ir_node *n, void *state) {
  (void)be;
  g_cpu->vt->node_release(g_cpu, n, state);
}
static fbx_status *w_alloc(fbx_backend *be, size_t b, void **o) { return g_cpu->vt->buffer_alloc(g_cpu, b, o); }
static void w_free(fbx_backend *be, void *p) { g_cpu->vt->buffer_free(g_cpu, p); }
static fbx_status *w_copy(fbx_backend *be, void *d, const void *s, size_t b) { return g_cpu->vt->copy_device(g_cpu, d, s, b); }
static bool w_epi(fbx_backend *be, const fbx_ir_node *n) { return g_cpu->vt->supports_epilogue(g_cpu, n); }

/* ---- outputs ---- */
typedef struct outs {
  float *buf[4];
  int64_t n[4];
} outs;
static fbx_status *out_fn(void *ctx, int i, const fbx_tensor *shape, void **data, int *same_as_input) {
  (void)same_as_input; /* the test's own buffers: never an input's */
  outs *o = ctx;
  int64_t n = fbx_tensor_numel(shape);
  free(o->buf[i]);
  o->buf[i] = calloc((size_t)(n ? n : 1), sizeof(float));
  o->n[i] = n;
  *data = o->buf[i];
  return o->buf[i] ? NULL : FBX_ERR_OOM();
}

static uint64_t g_rng = 0x1234567887654321ull;
static float rnd(void) { /* uniform [-2, 2) */
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((double)(g_rng >> 11) / (double)(1ull << 53) * 4.0 - 2.0);
}
static float *rnd_arr(int64_t n) {
  float *a = malloc(sizeof(float) * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) a[i] = rnd();
  return a;
}

/* ---- the case ---- */
typedef struct conv_case {
  const char *name;
  bool transpose;
  int64_t N, C, M, H, W, KH, KW, stride, dil, pad, group;
  bool bias, residual, conv_is_output;
} conv_case;

/* naive conv (double accumulation), rounded to float per output */
static void ref_conv(const conv_case *k, const float *x, const float *w, const float *b, float *y, int64_t OH,
                     int64_t OW) {
  int64_t Cg = k->C / k->group, Mg = k->M / k->group;
  for (int64_t n = 0; n < k->N; n++)
    for (int64_t m = 0; m < k->M; m++)
      for (int64_t oh = 0; oh < OH; oh++)
        for (int64_t ow = 0; ow < OW; ow++) {
          double acc = b ? b[m] : 0.0;
          int64_t gi = m / Mg;
          if (!k->transpose) {
            for (int64_t cc = 0; cc < Cg; cc++)
              for (int64_t kh = 0; kh < k->KH; kh++)
                for (int64_t kw = 0; kw < k->KW; kw++) {
                  int64_t ih = oh * k->stride - k->pad + kh * k->dil, iw = ow * k->stride - k->pad + kw * k->dil;
                  if (ih < 0 || ih >= k->H || iw < 0 || iw >= k->W) continue;
                  int64_t c = gi * Cg + cc;
                  acc += (double)x[((n * k->C + c) * k->H + ih) * k->W + iw] *
                         w[((m * Cg + cc) * k->KH + kh) * k->KW + kw];
                }
          } else { /* W: (C, Mg, KH, KW); oh = ih*s - pad + kh*dil */
            for (int64_t cc = 0; cc < Cg; cc++)
              for (int64_t kh = 0; kh < k->KH; kh++)
                for (int64_t kw = 0; kw < k->KW; kw++) {
                  int64_t th = oh + k->pad - kh * k->dil, tw = ow + k->pad - kw * k->dil;
                  if (th < 0 || tw < 0 || th % k->stride || tw % k->stride) continue;
                  int64_t ih = th / k->stride, iw = tw / k->stride;
                  if (ih >= k->H || iw >= k->W) continue;
                  int64_t c = gi * Cg + cc;
                  acc += (double)x[((n * k->C + c) * k->H + ih) * k->W + iw] *
                         w[((c * Mg + (m % Mg)) * k->KH + kh) * k->KW + kw];
                }
          }
          y[((n * k->M + m) * OH + oh) * OW + ow] = (float)acc;
        }
}

static int emit(fbx_ir_graph *g, fbx_ir_op op, int a, int b, const char *onnx_op) {
  int in[2] = {a, b}, out = -1;
  int cls = fbx_ir_op_class(op);
  fbx_status *st = fbx_ir_graph_emit(g, op, in, cls == FBX_IR_CLASS_EW1 ? 1 : 2, NULL, FBX_DTYPE_F32, -1, "",
                                     onnx_op, -1, &out);
  if (st) {
    printf("emit: %s\n", fbx_status_message(st));
    fbx_status_free(st);
  }
  return out;
}

static double max_err(const float *a, const float *ref, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - ref[i]) / fmax(1.0, fabs((double)ref[i]));
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

typedef struct case_data {
  int64_t OH, OW, Mg, Cg, xn, yn, wn;
  float *x, *w, *b, *scale, *shift, *res;
} case_data;

/* Conv -> Mul(scale) -> Add(shift) -> y * min(max(y + 3, 0), 6) / 6 [-> + r] */
static fbx_status *build(const conv_case *k, const case_data *d, fbx_ir_graph **out) {
  fbx_ir_graph *g;
  FBX_TRY(fbx_ir_graph_create(&g));
  *out = g;
  int64_t xd[4] = {k->N, k->C, k->H, k->W}, yd[4] = {k->N, k->M, d->OH, d->OW};
  int64_t wd[4] = {k->transpose ? k->C : k->M, k->transpose ? d->Mg : d->Cg, k->KH, k->KW};
  int64_t cd[4] = {1, k->M, 1, 1}, bd[1] = {k->M};
  int xv, rv = -1, wv, bv = FBX_IR_NONE, sv, tv, c3, c0, c6, y;
  FBX_TRY(fbx_ir_graph_add_input(g, "x", FBX_DTYPE_F32, 4, xd, NULL, &xv));
  if (k->residual) FBX_TRY(fbx_ir_graph_add_input(g, "r", FBX_DTYPE_F32, 4, yd, NULL, &rv));
  FBX_TRY(fbx_ir_graph_add_const(g, "w", FBX_DTYPE_F32, 4, wd, d->w, &wv));
  if (k->bias) FBX_TRY(fbx_ir_graph_add_const(g, "b", FBX_DTYPE_F32, 1, bd, d->b, &bv));
  FBX_TRY(fbx_ir_graph_add_const(g, "scale", FBX_DTYPE_F32, 4, cd, d->scale, &sv));
  FBX_TRY(fbx_ir_graph_add_const(g, "shift", FBX_DTYPE_F32, 3, cd + 1, d->shift, &tv)); /* (M,1,1) */
  FBX_TRY(fbx_ir_graph_add_const_f32(g, 3.f, &c3));
  FBX_TRY(fbx_ir_graph_add_const_f32(g, 0.f, &c0));
  FBX_TRY(fbx_ir_graph_add_const_f32(g, 6.f, &c6));
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.conv.nd = 2;
  p.conv.kernel[0] = k->KH, p.conv.kernel[1] = k->KW;
  p.conv.strides[0] = p.conv.strides[1] = k->stride;
  p.conv.dilations[0] = p.conv.dilations[1] = k->dil;
  for (int i = 0; i < 4; i++) p.conv.pads[i] = k->pad;
  p.conv.group = k->group;
  int cin[3] = {xv, wv, bv};
  FBX_TRY(fbx_ir_graph_emit(g, k->transpose ? FBX_IR_OP_CONV_TRANSPOSE : FBX_IR_OP_CONV, cin, k->bias ? 3 : 2, &p,
                            FBX_DTYPE_F32, 4, "conv", k->transpose ? "ConvTranspose" : "Conv", 0, &y));
  int conv_out = y;
  y = emit(g, FBX_IR_OP_MUL, y, sv, "Mul");
  y = emit(g, FBX_IR_OP_ADD, y, tv, "Add");
  int t = emit(g, FBX_IR_OP_ADD, y, c3, "Add");
  t = emit(g, FBX_IR_OP_MAX, t, c0, "Clip");
  t = emit(g, FBX_IR_OP_MIN, t, c6, "Clip");
  t = emit(g, FBX_IR_OP_MUL, y, t, "Mul");
  y = emit(g, FBX_IR_OP_DIV, t, c6, "Div");
  if (k->residual) y = emit(g, FBX_IR_OP_ADD, y, rv, "Add");
  if (y < 0) return FBX_ERR("graph build failed");
  FBX_TRY(fbx_ir_graph_mark_output(g, y));
  if (k->conv_is_output) FBX_TRY(fbx_ir_graph_mark_output(g, conv_out));
  return NULL;
}

static void run_case(const conv_case *k) {
  case_data d;
  if (k->transpose) {
    d.OH = (k->H - 1) * k->stride - 2 * k->pad + (k->KH - 1) * k->dil + 1;
    d.OW = (k->W - 1) * k->stride - 2 * k->pad + (k->KW - 1) * k->dil + 1;
  } else {
    d.OH = (k->H + 2 * k->pad - (k->KH - 1) * k->dil - 1) / k->stride + 1;
    d.OW = (k->W + 2 * k->pad - (k->KW - 1) * k->dil - 1) / k->stride + 1;
  }
  d.Cg = k->C / k->group, d.Mg = k->M / k->group;
  d.xn = k->N * k->C * k->H * k->W, d.yn = k->N * k->M * d.OH * d.OW;
  d.wn = k->transpose ? k->C * d.Mg * k->KH * k->KW : k->M * d.Cg * k->KH * k->KW;
  d.x = rnd_arr(d.xn), d.w = rnd_arr(d.wn), d.b = rnd_arr(k->M), d.scale = rnd_arr(k->M), d.shift = rnd_arr(k->M);
  d.res = rnd_arr(d.yn);
  for (int64_t i = 0; i < d.wn; i++) d.w[i] *= 0.3f;
  int64_t yn = d.yn;

  /* reference, in the graph's float op order */
  float *ref = malloc(sizeof(float) * (size_t)yn), *cref = malloc(sizeof(float) * (size_t)yn);
  ref_conv(k, d.x, d.w, k->bias ? d.b : NULL, cref, d.OH, d.OW);
  int64_t S = d.OH * d.OW;
  for (int64_t i = 0; i < yn; i++) {
    int64_t m = (i / S) % k->M;
    float v = cref[i] * d.scale[m];
    v = v + d.shift[m];
    float u = v + 3.f;
    u = u > 0.f ? u : 0.f;
    u = u < 6.f ? u : 6.f;
    u = v * u;
    u = u / 6.f;
    if (k->residual) u = u + d.res[i];
    ref[i] = u;
  }

  fbx_tensor in[2] = {{.dtype = FBX_DTYPE_F32, .rank = 4, .data = d.x},
                      {.dtype = FBX_DTYPE_F32, .rank = 4, .data = d.res}};
  int64_t xd[4] = {k->N, k->C, k->H, k->W}, yd[4] = {k->N, k->M, d.OH, d.OW};
  memcpy(in[0].dims, xd, sizeof xd);
  memcpy(in[1].dims, yd, sizeof yd);
  for (int eager = 0; eager < 2; eager++) {
    const char *mode = eager ? "eager, unfused" : "compiled";
    fbx_ir_graph *g = NULL;
    fbx_exec_compiled *c = NULL;
    fbx_exec_compile_options opt = {.compile = !eager, .cache_limit = 4};
    fbx_status *st = build(k, &d, &g);
    if (!st) st = fbx_exec_compiled_create(g, &g_wrap, &opt, k->name, &c);
    else fbx_ir_graph_destroy(g);
    if (st) {
      CHECK(false, "%s: build/create: %s", k->name, fbx_status_message(st));
      fbx_status_free(st);
      continue;
    }
    outs o;
    memset(&o, 0, sizeof o);
    fbx_exec_run_report rep;
    memset(&rep, 0, sizeof rep);
    g_runs = g_conv_runs = g_epi_runs = 0;
    st = fbx_exec_compiled_run(c, in, k->residual ? 2 : 1, out_fn, &o, &rep);
    if (st) {
      CHECK(false, "%s [%s]: run: %s", k->name, mode, fbx_status_message(st));
      fbx_status_free(st);
    } else {
      double e = o.buf[0] && o.n[0] == yn ? max_err(o.buf[0], ref, yn) : 1e9;
      CHECK(e < 2e-4, "%s [%s%s, %s]: result matches naive reference (max rel err %.2g)", k->name, mode,
            g_vt.node_prepare ? ", prepared" : "", g_conv_variant ? g_conv_variant : "?", e);
      if (k->conv_is_output) {
        double ec = o.buf[1] && o.n[1] == yn ? max_err(o.buf[1], cref, yn) : 1e9;
        CHECK(ec < 2e-4, "%s [%s]: conv output (a graph output too) matches (max rel err %.2g)", k->name, mode, ec);
      }
      if (!eager) {
        CHECK(rep.path != FBX_EXEC_PATH_EAGER && !rep.fell_back, "%s: compiled path (fallback: '%s')", k->name,
              rep.fallback_reason);
        if (!k->conv_is_output)
          CHECK(g_runs == 1 && g_epi_runs == 1, "%s: conv + epilogue ran as one step (steps %d, with epilogue %d)",
                k->name, g_runs, g_epi_runs);
        else
          CHECK(g_epi_runs == 0 && g_runs >= 2, "%s: conv output is a graph output -> not fused (steps %d)", k->name,
                g_runs);
        for (int i = 0; i < yn && o.buf[0]; i++) o.buf[0][i] = NAN;
        st = fbx_exec_compiled_run(c, in, k->residual ? 2 : 1, out_fn, &o, &rep);
        double e2 = !st && o.buf[0] ? max_err(o.buf[0], ref, yn) : 1e9;
        CHECK(e2 < 2e-4 && rep.cache == FBX_EXEC_CACHE_HIT, "%s: second run (cache HIT) matches (max rel err %.2g)",
              k->name, e2);
        fbx_status_free(st);
      }
    }
    for (int i = 0; i < 4; i++) free(o.buf[i]);
    fbx_exec_compiled_destroy(c);
  }
  free(ref);
  free(cref);
  free(d.x);
  free(d.w);
  free(d.b);
  free(d.scale);
  free(d.shift);
  free(d.res);
}

int main(void) {
  fbx_cpu_options co = {.threads = 2};
  fbx_status *st = fbx_cpu_backend_create(&co, &g_cpu);
  if (st) {
    printf("FAIL cpu backend: %s\n", fbx_status_message(st));
    return 1;
  }
  g_vt = *g_cpu->vt;
  g_vt.run_node = w_run;
  g_vt.buffer_alloc = w_alloc;
  g_vt.buffer_free = w_free;
  g_vt.copy_from_host = w_copy;
  g_vt.copy_to_host = w_copy;
  g_vt.copy_device = w_copy;
  g_vt.node_prepare = NULL;
  g_vt.node_release = NULL;
  g_vt.supports_epilogue = w_epi;
  g_vt.destroy = NULL;
  g_wrap.vt = &g_vt;
  g_wrap.ctx = NULL;

  static const conv_case cases[] = {
      /* name, transpose, N, C, M, H, W, KH, KW, stride, dil, pad, group, bias, residual, conv_is_output */
      {"conv3x3_im2col_tiled", false, 1, 5, 7, 13, 11, 3, 3, 1, 1, 1, 1, true, true, false},
      {"conv3x3_s2_batch2_nobias", false, 2, 4, 6, 17, 15, 3, 3, 2, 1, 1, 1, false, true, false},
      {"conv3x3_im2col_multitile", false, 1, 32, 16, 40, 40, 3, 3, 1, 1, 1, 1, true, true, false},
      {"conv3x3_grouped", false, 1, 6, 9, 10, 10, 3, 3, 1, 1, 1, 3, true, false, false},
      {"conv1x1_sgemm", false, 1, 8, 6, 9, 9, 1, 1, 1, 1, 0, 1, true, true, false},
      {"conv1x1_big_nobias", false, 1, 16, 24, 64, 80, 1, 1, 1, 1, 0, 1, false, true, false},
      /* epilogue per 12-channel block of the GEMM: 40 = 12 + 12 + 12 + 4 */
      {"conv1x1_rec_m40_blocks", false, 1, 48, 40, 12, 80, 1, 1, 1, 1, 0, 1, true, true, false},
      /* the 4-row x 32-column AVX-512 depthwise kernel (stride 1 and (2, 2)->old kernel) */
      {"depthwise5x5_rows_12x80", false, 1, 6, 6, 12, 80, 5, 5, 1, 1, 2, 6, true, true, false},
      {"depthwise3x3_rows_6x40", false, 1, 5, 5, 6, 40, 3, 3, 1, 1, 1, 5, true, false, false},
      {"depthwise3x3_avx2_s2", false, 1, 6, 6, 21, 19, 3, 3, 2, 1, 1, 6, true, true, false},
      {"depthwise5x5_avx2_s1", false, 1, 8, 8, 40, 37, 5, 5, 1, 1, 2, 8, true, false, false},
      {"depthwise3x3_dilated_direct", false, 1, 5, 5, 12, 12, 3, 3, 1, 2, 2, 5, true, true, false},
      {"depthwise5x5_avx2_small7", false, 1, 8, 8, 7, 7, 5, 5, 1, 1, 2, 8, true, true, false},
      {"depthwise3x3_avx2_s2_w13", false, 1, 3, 3, 13, 13, 3, 3, 2, 1, 1, 3, true, false, false},
      {"conv3x3_direct_s2_dil2", false, 1, 7, 13, 19, 17, 3, 3, 2, 2, 2, 1, true, true, false},
      {"conv1x1_s2_direct", false, 2, 9, 14, 15, 16, 1, 1, 2, 1, 0, 1, true, true, false},
      {"conv7x7_s2_stem", false, 1, 3, 8, 33, 29, 7, 7, 2, 1, 3, 1, true, false, false},
      {"conv3x3_direct_7x7_deep", false, 1, 40, 50, 7, 7, 3, 3, 1, 1, 1, 1, true, true, false},
      {"convtranspose2x2_s2", true, 1, 6, 4, 8, 7, 2, 2, 2, 1, 0, 1, true, true, false},
      {"convtranspose2x2_s2_b2_m1", true, 2, 5, 1, 9, 13, 2, 2, 2, 1, 0, 1, true, false, false},
      {"convtranspose3x3_s3_big", true, 1, 20, 7, 17, 19, 3, 3, 3, 1, 0, 1, false, true, false},
      /* ResNet-style 3x3 (prepared: the output-channel kernel): 36 channels = a full and a partial
         32-channel block, 15 = a 14-position tile + 1; stride 2, batch 2 */
      {"conv3x3_resnet_m36_15x15", false, 1, 40, 36, 15, 15, 3, 3, 1, 1, 1, 1, true, true, false},
      {"conv3x3_resnet_s2_b2", false, 2, 24, 64, 17, 16, 3, 3, 2, 1, 1, 1, false, true, false},
      {"conv_output_also_graph_output", false, 1, 5, 7, 13, 11, 3, 3, 1, 1, 1, 1, true, true, true},
  };
  for (int prep = 0; prep < 2; prep++) {
    g_vt.node_prepare = prep ? w_prepare : NULL;
    g_vt.node_release = prep ? w_release : NULL;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
  }
  fbx_backend_destroy(g_cpu);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
