/* LSTM, GRU, RNN on the CPU (ONNX semantics; shapes in src/ir/ir_shape_rnn.c).
 *
 * Per direction d:
 *   1. the input projection of every time step at once, one GEMM:
 *        xw (S*B, G*H) = X rows (S*B, I) @ W[d]^T            (cpu_gemm.c)
 *      X rows in their stored order (layout 0: t*B + b, layout 1: b*S + t);
 *   2. the recurrence, per step j: hr (B, G*H) = h (B, H) @ R[d]^T, a GEMV
 *      at batch 1 (cpu_gemv.c), the blocked GEMM otherwise; then the cell's
 *      elementwise update, row by row over H-long vectors.
 * Batch b with sequence_lens[b] = L takes steps j < L only, at time t = j
 * (forward) or L-1-j (reverse); Y is 0 at t >= L, Y_h / Y_c hold the state
 * after the last step taken. Gate order in W/R/B: LSTM i, o, f, c; GRU z,
 * r, h; RNN one gate. P (LSTM peepholes) is i, o, f.
 *
 * Scratch (one fbx_cpu_scratch call, sizes in floats):
 *   xw (S*B*G*H) | hr (B*G*H) | pre (B*G*H) | h, c, rh (B*H each) | bx, brh (G*H each)
 * nothing is allocated per step. */
#include <math.h>
#include <string.h>

#include "../../base/checked.h"
#include "cpu_gemm.h"
#include "cpu_internal.h"

/* input projections of at most this many rows (seq * batch) use the small-M
 * kernel on the packed W (as MATMUL does), larger ones the blocked GEMM */
#define FBX__RNN_SMALL_M 160

/* x := act(clip(x)) over n floats; clip <= 0 means none. */
static void fbx__rnn_act(fbx_ir_rnn_act a, float al, float be, float clip, float *x, int64_t n) {
  if (clip > 0)
    for (int64_t i = 0; i < n; i++) x[i] = x[i] < -clip ? -clip : x[i] > clip ? clip : x[i];
  switch (a) {
    case FBX_IR_ACT_SIGMOID: fbx_cpu_sigmoid_f32(x, x, n); return;
    case FBX_IR_ACT_TANH: fbx_cpu_tanh_f32(x, x, n); return;
    case FBX_IR_ACT_RELU:
      for (int64_t i = 0; i < n; i++) x[i] = x[i] < 0 ? 0.f : x[i];
      return;
    case FBX_IR_ACT_AFFINE:
      for (int64_t i = 0; i < n; i++) x[i] = al * x[i] + be;
      return;
    case FBX_IR_ACT_LEAKY_RELU:
      for (int64_t i = 0; i < n; i++) x[i] = x[i] < 0 ? al * x[i] : x[i];
      return;
    case FBX_IR_ACT_THRESHOLDED_RELU:
      for (int64_t i = 0; i < n; i++) x[i] = x[i] > al || x[i] != x[i] ? x[i] : 0.f;
      return;
    case FBX_IR_ACT_SCALED_TANH:
      for (int64_t i = 0; i < n; i++) x[i] *= be;
      fbx_cpu_tanh_f32(x, x, n);
      for (int64_t i = 0; i < n; i++) x[i] *= al;
      return;
    case FBX_IR_ACT_HARD_SIGMOID:
      for (int64_t i = 0; i < n; i++) {
        float v = al * x[i] + be, t = v > 1.f ? 1.f : v;
        x[i] = t < 0.f ? 0.f : t;
      }
      return;
    case FBX_IR_ACT_ELU:
      for (int64_t i = 0; i < n; i++) x[i] = x[i] < 0 ? al * expm1f(x[i]) : x[i];
      return;
    case FBX_IR_ACT_SOFTSIGN:
      for (int64_t i = 0; i < n; i++) x[i] = isinf(x[i]) ? copysignf(1.f, x[i]) : x[i] / (1.f + fabsf(x[i]));
      return;
    case FBX_IR_ACT_SOFTPLUS:
      for (int64_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] + log1pf(expf(-x[i])) : log1pf(expf(x[i]));
      return;
  }
}

/* ---- node_prepare: constant W and R packed once per direction
 * (fbx_cpu_gemv_pack panels, op(B) = W[d]^T (I, G*H), R[d]^T (H, G*H));
 * GRU without linear_before_reset keeps R's z, r rows (H, 2H) and h rows
 * (H, H) as two packs, since r multiplies h before R_h. ---- */
typedef struct fbx__rnn_pack {
  int64_t D, GH, I, H;
  float *w[2], *r[2], *rh[2]; /* rh NULL unless GRU without linear_before_reset */
} fbx__rnn_pack;

void fbx_cpu_rnn_release(void *state) {
  fbx__rnn_pack *s = state;
  if (!s) return;
  for (int d = 0; d < 2; d++) fbx_free_aligned(s->w[d]), fbx_free_aligned(s->r[d]), fbx_free_aligned(s->rh[d]);
  fbx_free(s);
}

fbx_status *fbx_cpu_rnn_prepare(fbx_cpu_ctx *c, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                const fbx_tensor *inputs, void **state) {
  (void)c, (void)inputs;
  *state = NULL;
  if (!const_inputs || !const_inputs[1] || !const_inputs[2]) return NULL;
  const fbx_tensor *w = const_inputs[1], *r = const_inputs[2];
  const int64_t D = node->params.rnn.direction == 2 ? 2 : 1, H = node->params.rnn.hidden;
  const int64_t GH = fbx_ir_rnn_gates(node->op) * H;
  if (w->dtype != FBX_DTYPE_F32 || r->dtype != FBX_DTYPE_F32 || w->rank != 3 || r->rank != 3 || w->dims[0] != D ||
      r->dims[0] != D || w->dims[1] != GH || r->dims[1] != GH || r->dims[2] != H || !w->data || !r->data || H < 1)
    return NULL; /* shape inference reports the mismatch at run time */
  fbx__rnn_pack *s = fbx_calloc(1, sizeof *s);
  if (!s) return FBX_ERR_OOM();
  s->D = D, s->GH = GH, s->I = w->dims[2], s->H = H;
  const bool split = node->op == FBX_IR_OP_GRU && !node->params.rnn.linear_before_reset;
  fbx_status *st = NULL;
  for (int64_t d = 0; d < D && !st; d++) {
    const float *wd = (const float *)w->data + d * GH * s->I, *rd = (const float *)r->data + d * GH * H;
    st = fbx_cpu_gemv_pack(wd, s->I, GH, true, &s->w[d]);
    if (!st) st = fbx_cpu_gemv_pack(rd, H, split ? 2 * H : GH, true, &s->r[d]);
    if (!st && split) st = fbx_cpu_gemv_pack(rd + 2 * H * H, H, H, true, &s->rh[d]);
  }
  if (st) {
    fbx_cpu_rnn_release(s);
    return st;
  }
  *state = s;
  return NULL;
}

typedef struct fbx__rnn {
  fbx_ir_op op;
  const fbx_ir_params *p;
  int64_t S, B, I, H, G, D;
  int layout;
  const float *x, *w, *r, *bias, *h0, *c0, *peep;
  const int32_t *lens;
  float *y, *yh, *yc;
  float *xw, *hr, *pre, *h, *c, *rh, *bx, *brh;
  const fbx__rnn_pack *pk;  /* packed W/R (node_prepare), or NULL */
} fbx__rnn;

static int64_t fbx__rnn_len(const fbx__rnn *k, int64_t b) { return k->lens ? k->lens[b] : k->S; }
static int64_t fbx__rnn_xrow(const fbx__rnn *k, int64_t t, int64_t b) { return k->layout ? b * k->S + t : t * k->B + b; }
static int64_t fbx__rnn_state(const fbx__rnn *k, int64_t d, int64_t b) {
  return (k->layout ? b * k->D + d : d * k->B + b) * k->H;
}
static float *fbx__rnn_yrow(const fbx__rnn *k, int64_t t, int64_t d, int64_t b) {
  return k->y + (k->layout ? (b * k->S + t) * k->D + d : (t * k->D + d) * k->B + b) * k->H;
}

/* out (B, n) row stride ld = a (B, H) @ rows [0, n) of rm (n, H)^T, or
 * @ packed (the same product packed by node_prepare) when non-NULL. */
static fbx_status *fbx__rnn_hmat(fbx_cpu_ctx *c, const fbx__rnn *k, const float *a, const float *rm,
                                 const float *packed, int64_t n, float *out, int64_t ld) {
  if (packed) {
    if (k->B == 1) fbx_cpu_gemv_packed(c, a, packed, out, k->H, n, 1.f);
    else fbx_cpu_gemm_packed(c, a, k->H, packed, out, ld, k->B, k->H, n, 1.f);
    return NULL;
  }
  if (k->B == 1) {
    fbx_cpu_gemv_plain(c, a, rm, out, k->H, n, true, 1.f);
    return NULL;
  }
  return fbx_cpu_sgemm_par(c, false, true, k->B, n, k->H, 1.f, a, k->H, rm, k->H, 0.f, out, ld, NULL);
}

/* One direction d (rev: time runs backwards), xw already holds X @ W[d]^T. */
static fbx_status *fbx__rnn_dir(fbx_cpu_ctx *c, fbx__rnn *k, int64_t d, bool rev) {
  const int64_t H = k->H, G = k->G, GH = G * H, B = k->B;
  const fbx_ir_params *p = k->p;
  const int npd = p->rnn.n_per_dir;
  const fbx_ir_rnn_act *act = &p->rnn.act[d * npd];
  const float *al = &p->rnn.act_alpha[d * npd], *be = &p->rnn.act_beta[d * npd];
  const float clip = p->rnn.clip;
  const bool lbr = k->op == FBX_IR_OP_GRU && p->rnn.linear_before_reset;
  const float *rd = k->r + d * GH * H;
  /* bias folded per gate: bx = Wb + Rb, except GRU with linear_before_reset,
   * whose h gate adds Rb_h inside r * (...) (brh) */
  for (int64_t i = 0; i < GH; i++) {
    float wb = k->bias ? k->bias[d * 2 * GH + i] : 0.f, rb = k->bias ? k->bias[d * 2 * GH + GH + i] : 0.f;
    bool inner = lbr && i >= 2 * H;
    k->bx[i] = inner ? wb : wb + rb;
    if (inner) k->brh[i - 2 * H] = rb;
  }
  for (int64_t b = 0; b < B; b++) {
    float *hb = k->h + b * H, *cb = k->c + b * H;
    if (k->h0) memcpy(hb, k->h0 + fbx__rnn_state(k, d, b), (size_t)H * sizeof(float));
    else memset(hb, 0, (size_t)H * sizeof(float));
    if (k->op == FBX_IR_OP_LSTM) {
      if (k->c0) memcpy(cb, k->c0 + fbx__rnn_state(k, d, b), (size_t)H * sizeof(float));
      else memset(cb, 0, (size_t)H * sizeof(float));
    }
  }
  int64_t steps = 0;
  for (int64_t b = 0; b < B; b++) steps = fbx__rnn_len(k, b) > steps ? fbx__rnn_len(k, b) : steps;
  for (int64_t j = 0; j < steps; j++) {
    /* GRU without linear_before_reset: r must be known before R_h, so the first product stops at 2H */
    const int64_t n1 = k->op == FBX_IR_OP_GRU && !lbr ? 2 * H : GH;
    FBX_TRY(fbx__rnn_hmat(c, k, k->h, rd, k->pk ? k->pk->r[d] : NULL, n1, k->hr, GH));
    for (int64_t b = 0; b < B; b++) {
      int64_t L = fbx__rnn_len(k, b);
      if (j >= L) continue;
      int64_t t = rev ? L - 1 - j : j;
      const float *xr = k->xw + fbx__rnn_xrow(k, t, b) * GH, *hr = k->hr + b * GH;
      float *pr = k->pre + b * GH, *hb = k->h + b * H, *cb = k->c + b * H;
      for (int64_t i = 0; i < n1; i++) pr[i] = xr[i] + k->bx[i] + hr[i];
      if (k->op == FBX_IR_OP_RNN) {
        fbx__rnn_act(act[0], al[0], be[0], clip, pr, H);
        memcpy(hb, pr, (size_t)H * sizeof(float));
      } else if (k->op == FBX_IR_OP_LSTM) {
        float *gi = pr, *go = pr + H, *gf = pr + 2 * H, *gc = pr + 3 * H;
        const float *pp = k->peep ? k->peep + d * 3 * H : NULL;
        if (pp)
          for (int64_t i = 0; i < H; i++) gi[i] += pp[i] * cb[i], gf[i] += pp[2 * H + i] * cb[i];
        fbx__rnn_act(act[0], al[0], be[0], clip, gi, H);
        if (p->rnn.input_forget)
          for (int64_t i = 0; i < H; i++) gf[i] = 1.f - gi[i];
        else
          fbx__rnn_act(act[0], al[0], be[0], clip, gf, H);
        fbx__rnn_act(act[1], al[1], be[1], clip, gc, H);
        for (int64_t i = 0; i < H; i++) cb[i] = gf[i] * cb[i] + gi[i] * gc[i];
        if (pp)
          for (int64_t i = 0; i < H; i++) go[i] += pp[H + i] * cb[i];
        fbx__rnn_act(act[0], al[0], be[0], clip, go, H);
        memcpy(gc, cb, (size_t)H * sizeof(float)); /* h(C) in the c gate's slot */
        fbx__rnn_act(act[2], al[2], be[2], 0.f, gc, H);
        for (int64_t i = 0; i < H; i++) hb[i] = go[i] * gc[i];
      } else { /* GRU: z, r now; h below */
        fbx__rnn_act(act[0], al[0], be[0], clip, pr, 2 * H);
        if (lbr) {
          float *gh = pr + 2 * H;
          const float *hrh = hr + 2 * H;
          for (int64_t i = 0; i < H; i++) gh[i] = xr[2 * H + i] + k->bx[2 * H + i] + pr[H + i] * (hrh[i] + k->brh[i]);
        } else {
          for (int64_t i = 0; i < H; i++) k->rh[b * H + i] = pr[H + i] * hb[i];
        }
      }
    }
    if (k->op == FBX_IR_OP_GRU) {
      if (!lbr) /* (r * h) @ R_h^T */
        FBX_TRY(fbx__rnn_hmat(c, k, k->rh, rd + 2 * H * H, k->pk ? k->pk->rh[d] : NULL, H, k->hr, GH));
      for (int64_t b = 0; b < B; b++) {
        int64_t L = fbx__rnn_len(k, b);
        if (j >= L) continue;
        int64_t t = rev ? L - 1 - j : j;
        float *pr = k->pre + b * GH, *gh = pr + 2 * H, *hb = k->h + b * H;
        if (!lbr) {
          const float *xr = k->xw + fbx__rnn_xrow(k, t, b) * GH + 2 * H, *hr = k->hr + b * GH;
          for (int64_t i = 0; i < H; i++) gh[i] = xr[i] + k->bx[2 * H + i] + hr[i];
        }
        fbx__rnn_act(act[1], al[1], be[1], clip, gh, H);
        for (int64_t i = 0; i < H; i++) hb[i] = (1.f - pr[i]) * gh[i] + pr[i] * hb[i];
      }
    }
    for (int64_t b = 0; b < B; b++) {
      int64_t L = fbx__rnn_len(k, b);
      if (j < L) memcpy(fbx__rnn_yrow(k, rev ? L - 1 - j : j, d, b), k->h + b * H, (size_t)H * sizeof(float));
    }
  }
  for (int64_t b = 0; b < B; b++) {
    memcpy(k->yh + fbx__rnn_state(k, d, b), k->h + b * H, (size_t)H * sizeof(float));
    if (k->yc) memcpy(k->yc + fbx__rnn_state(k, d, b), k->c + b * H, (size_t)H * sizeof(float));
  }
  return NULL;
}

static fbx_status *fbx__rnn_run(FBX_CPU_KERNEL_ARGS) {
  (void)state;
  const char *nm = fbx_ir_op_name(node->op);
  const bool lstm = node->op == FBX_IR_OP_LSTM;
  if (n_in < 3 || n_out < (lstm ? 3 : 2)) return FBX_ERR_ARG("%s: needs X, W, R and %d outputs", nm, lstm ? 3 : 2);
  for (int i = 0; i < n_in; i++)
    if (fbx_cpu_present(in, n_in, i) && in[i].dtype != (i == 4 ? FBX_DTYPE_I32 : FBX_DTYPE_F32))
      return FBX_ERR_NOTIMPL("%s: input %d dtype %s", nm, i, fbx_dtype_name(in[i].dtype));
  fbx__rnn k = {.op = node->op, .p = &node->params, .layout = node->params.rnn.layout};
  k.S = k.layout ? in[0].dims[1] : in[0].dims[0];
  k.B = k.layout ? in[0].dims[0] : in[0].dims[1];
  k.I = in[0].dims[2];
  k.H = node->params.rnn.hidden;
  k.G = fbx_ir_rnn_gates(node->op);
  k.D = node->params.rnn.direction == 2 ? 2 : 1;
  k.x = in[0].data, k.w = in[1].data, k.r = in[2].data;
  k.bias = fbx_cpu_present(in, n_in, 3) ? in[3].data : NULL;
  k.lens = fbx_cpu_present(in, n_in, 4) ? in[4].data : NULL;
  k.h0 = fbx_cpu_present(in, n_in, 5) ? in[5].data : NULL;
  k.c0 = lstm && fbx_cpu_present(in, n_in, 6) ? in[6].data : NULL;
  k.peep = lstm && fbx_cpu_present(in, n_in, 7) ? in[7].data : NULL;
  k.y = out[0].data, k.yh = out[1].data, k.yc = lstm ? out[2].data : NULL;
  for (int64_t b = 0; k.lens && b < k.B; b++)
    if (k.lens[b] < 0 || k.lens[b] > k.S)
      return FBX_ERR_ARG("%s '%s': sequence_lens[%lld] = %d outside [0, %lld]", nm, node->name ? node->name : "",
                         (long long)b, (int)k.lens[b], (long long)k.S);
  const int64_t GH = k.G * k.H;
  int64_t SB;
  if (k.H < 1 || k.H > (1 << 24) || !fbx_i64_mul(k.S, k.B, &SB))
    return FBX_ERR_ARG("%s: hidden %lld / seq x batch out of range", nm, (long long)k.H);
  /* scratch: xw (S*B, G*H) + hr, pre (B, G*H) + h, c, rh (B, H) + bx, brh (G*H); H <= 2^24 (claim) */
  int64_t n_xw, n_bg, n_bh, n_sc;
  if (!fbx_i64_mul(SB, GH, &n_xw) || !fbx_i64_mul(k.B, GH, &n_bg) || !fbx_i64_mul(k.B, k.H, &n_bh) ||
      !fbx_i64_add(n_xw, n_bg, &n_sc) || !fbx_i64_add(n_sc, n_bg, &n_sc) || !fbx_i64_add(n_sc, 3 * n_bh, &n_sc) ||
      !fbx_i64_add(n_sc, 2 * GH, &n_sc) || (uint64_t)n_sc > FBX_TENSOR_MAX_BYTES / sizeof(float))
    return FBX_ERR_ARG("%s: scratch of %lld x %lld steps exceeds the tensor limit", nm, (long long)SB, (long long)GH);
  float *sc = fbx_cpu_scratch(c, (size_t)n_sc * sizeof(float));
  if (!sc) return FBX_ERR_OOM();
  k.xw = sc, k.hr = k.xw + n_xw, k.pre = k.hr + k.B * GH, k.h = k.pre + k.B * GH;
  k.c = k.h + k.B * k.H, k.rh = k.c + k.B * k.H, k.bx = k.rh + k.B * k.H, k.brh = k.bx + GH;
  memset(k.rh, 0, (size_t)(k.B * k.H) * sizeof(float));
  if (k.lens) memset(k.y, 0, (size_t)fbx_cpu_numel(&out[0]) * sizeof(float));
  const fbx__rnn_pack *ps = state;
  if (ps && ps->D == k.D && ps->GH == GH && ps->I == k.I && ps->H == k.H) k.pk = ps;
  for (int64_t d = 0; d < k.D; d++) {
    if (SB > 0 && k.pk && SB <= FBX__RNN_SMALL_M) {
      fbx_cpu_gemm_packed(c, k.x, k.I, k.pk->w[d], k.xw, GH, SB, k.I, GH, 1.f);
    } else if (SB > 0) {
      fbx_cpu_gemm_desc gd = {.tb = true, .M = SB, .N = GH, .K = k.I, .alpha = 1.f, .A = k.x, .lda = k.I,
                              .B = k.w + d * GH * k.I, .ldb = k.I, .Bpk = k.pk ? k.pk->w[d] : NULL, .C = k.xw,
                              .ldc = GH};
      FBX_TRY(fbx_cpu_gemm(c, &gd));
    }
    FBX_TRY(fbx__rnn_dir(c, &k, d, node->params.rnn.direction == 1 || d == 1));
  }
  info->variant = k.pk ? (k.B == 1 ? "rnn_packed_gemm_gemv" : "rnn_packed_gemm_gemm")
                       : (k.B == 1 ? "rnn_gemm_gemv" : "rnn_gemm_gemm");
  info->reason = "input projection of all steps as one GEMM, recurrence per step";
  info->flops = 2.0 * (double)SB * (double)GH * (double)(k.I + k.H) * (double)k.D;
  return NULL;
}

fbx_status *fbx_cpu_k_LSTM(FBX_CPU_KERNEL_ARGS) { return fbx__rnn_run(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_GRU(FBX_CPU_KERNEL_ARGS) { return fbx__rnn_run(c, node, state, in, n_in, out, n_out, info); }
fbx_status *fbx_cpu_k_RNN(FBX_CPU_KERNEL_ARGS) { return fbx__rnn_run(c, node, state, in, n_in, out, n_out, info); }
