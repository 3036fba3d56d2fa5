// test_ops_diff — per-op differential harness: Fusebox vs ORT's CPU EP.
//
// For each case: pick an op from the list below, random shapes / attributes / dtype from a
// seeded generator, write a one-node ONNX model (ModelProto bytes encoded here, see
// pb_writer.h) into a temp file, run it on ORT's CPU EP alone (the reference) and with the
// Fusebox EP registered, and compare every output with a per-dtype tolerance (ints and bool
// exact, NaN == NaN). A case fails when the outputs differ or a session/run fails. ORT's
// node assignment is recorded: a case Fusebox does not claim is counted as "unclaimed"
// (reported, not a failure); the run fails if fewer than 80% of the cases were claimed, so a
// registry regression cannot hide behind trivially-passing cases.
//
// Usage: test_ops_diff [--seed N] [--cases N] [--op NAME] [-v]
// Final line: `ops: N passed, N failed`.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/ort_host.h"
#include "ops/pb_writer.h"

#define OD_MAX_IN 6
#define OD_MAX_OUT 3
#define OD_MAX_ATTR 8

typedef struct od_rng { uint64_t s; } od_rng;
static uint64_t od_next(od_rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return r->s;
}
static int od_int(od_rng *r, int lo, int hi) { return lo + (int)(od_next(r) % (uint64_t)(hi - lo + 1)); }
static double od_unit(od_rng *r) { return (double)(od_next(r) >> 11) / 9007199254740992.0; }

typedef struct od_attr {
  const char *name;
  int type;  // 1 float, 2 int, 3 string, 7 ints
  float f;
  int64_t i;
  const char *s;
  int64_t ints[8];
  int n_ints;
} od_attr;

typedef struct od_case {
  const char *op;
  int opset;
  fbx_host_tensor in[OD_MAX_IN];  // rank -1 = absent optional input
  int is_init[OD_MAX_IN];
  int n_in;
  od_attr at[OD_MAX_ATTR];
  int n_at;
  int n_out;
  double rtol, atol;
  char desc[512];
} od_case;

// ---------------------------------------------------------------------------------------
// Case building helpers
// ---------------------------------------------------------------------------------------

static void od_shape(od_rng *r, int rank, int64_t *d, int lo, int hi) {
  for (int i = 0; i < rank; i++) d[i] = od_int(r, lo, hi);
}

// Add input i (graph input unless init) with random data of the dtype.
static fbx_host_tensor *od_in(od_case *c, od_rng *r, int dtype, int rank, const int64_t *dims, int init) {
  int i = c->n_in++;
  char name[16];
  snprintf(name, sizeof name, "x%d", i);
  fbx_host_tensor *t = &c->in[i];
  char *e = fbx_host_tensor_alloc(t, name, dtype, rank, dims);
  if (e) { fbx_host_err_free(e); return t; }
  uint64_t seed = od_next(r);
  if (dtype == FBX_HOST_F32 || dtype == FBX_HOST_F64 || dtype == FBX_HOST_F16) fbx_host_tensor_fill_normal(t, seed);
  else if (dtype == FBX_HOST_BOOL) fbx_host_tensor_fill_int(t, seed, 0, 1);
  else if (dtype == FBX_HOST_U8) fbx_host_tensor_fill_int(t, seed, 0, 255);
  else fbx_host_tensor_fill_int(t, seed, -20, 20);
  c->is_init[i] = init;
  return t;
}
static fbx_host_tensor *od_i64s(od_case *c, const int64_t *v, int n, int init) {
  int64_t d = n;
  int i = c->n_in++;
  char name[16];
  snprintf(name, sizeof name, "x%d", i);
  char *e = fbx_host_tensor_alloc(&c->in[i], name, FBX_HOST_I64, 1, &d);
  if (e) { fbx_host_err_free(e); return &c->in[i]; }
  if (n) memcpy(c->in[i].data, v, sizeof(int64_t) * (size_t)n);
  c->is_init[i] = init;
  return &c->in[i];
}
static void od_ai(od_case *c, const char *n, int64_t v) { c->at[c->n_at++] = (od_attr){.name = n, .type = 2, .i = v}; }
static void od_af(od_case *c, const char *n, float v) { c->at[c->n_at++] = (od_attr){.name = n, .type = 1, .f = v}; }
static void od_as(od_case *c, const char *n, const char *v) { c->at[c->n_at++] = (od_attr){.name = n, .type = 3, .s = v}; }
static void od_aints(od_case *c, const char *n, const int64_t *v, int k) {
  od_attr a = {.name = n, .type = 7, .n_ints = k};
  memcpy(a.ints, v, sizeof(int64_t) * (size_t)k);
  c->at[c->n_at++] = a;
}

static int od_float_dtype(od_rng *r) {
  int k = od_int(r, 0, 9);
  return k < 7 ? FBX_HOST_F32 : k < 9 ? FBX_HOST_F64 : FBX_HOST_F16;
}
static void od_tol(od_case *c, int dtype) {
  if (dtype == FBX_HOST_F16) { c->rtol = 1e-2; c->atol = 2e-3; }
  else if (dtype == FBX_HOST_F64) { c->rtol = 1e-9; c->atol = 1e-12; }
  else { c->rtol = 1e-4; c->atol = 1e-5; }
}
// float16 for a quarter of the cases of ops Fusebox runs in float32 (CAST f16->f32 -> op -> CAST).
static int od_f16_or(od_rng *r, int dt) { return od_int(r, 0, 3) == 0 ? FBX_HOST_F16 : dt; }

// Shape b broadcastable to a: drop leading dims and set some dims to 1.
static int od_bcast(od_rng *r, int ra, const int64_t *a, int64_t *b) {
  int rb = od_int(r, 0, 2) == 0 ? od_int(r, 0, ra) : ra;
  for (int i = 0; i < rb; i++) b[i] = od_int(r, 0, 3) == 0 ? 1 : a[ra - rb + i];
  return rb;
}

// ---------------------------------------------------------------------------------------
// Op generators
// ---------------------------------------------------------------------------------------

typedef void (*od_gen)(od_case *c, od_rng *r);

static const char *const od_unary_ops[] = {"Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Sqrt", "Log",
                                           "Erf", "Softplus", "Softsign", "Floor", "Ceil", "Round", "Sin",
                                           "Cos", "Elu", "Selu", "LeakyRelu", "HardSigmoid", "HardSwish",
                                           "Reciprocal", "Sign", "Celu", "Mish", "Gelu", "Atan", "Sinh"};

static void gen_unary(od_case *c, od_rng *r) {
  c->op = od_unary_ops[od_int(r, 0, (int)(sizeof od_unary_ops / sizeof *od_unary_ops) - 1)];
  c->opset = !strcmp(c->op, "Gelu") ? 20 : 18;
  int dt = od_float_dtype(r);
  if (!strcmp(c->op, "Celu") || !strcmp(c->op, "Mish") || !strcmp(c->op, "Gelu") || !strcmp(c->op, "HardSwish") ||
      !strcmp(c->op, "Softsign") || !strcmp(c->op, "Softplus") || !strcmp(c->op, "Erf") || !strcmp(c->op, "Round") ||
      !strcmp(c->op, "Atan") || !strcmp(c->op, "Sinh"))
    dt = FBX_HOST_F32;  // ORT CPU lacks some f64/f16 kernels for these
  int rank = od_int(r, 0, 4);
  int64_t d[4];
  od_shape(r, rank, d, 1, 7);
  od_in(c, r, dt, rank, d, 0);
  if (!strcmp(c->op, "LeakyRelu") || !strcmp(c->op, "Elu") || !strcmp(c->op, "Celu"))
    od_af(c, "alpha", (float)(0.05 + od_unit(r)));
  if (!strcmp(c->op, "HardSigmoid")) { od_af(c, "alpha", 0.3f); od_af(c, "beta", 0.4f); }
  if (!strcmp(c->op, "Gelu") && od_int(r, 0, 1)) od_as(c, "approximate", "tanh");
  c->n_out = 1;
  od_tol(c, dt);
}

static const char *const od_bin_ops[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow",
                                         "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"};

static void gen_binary(od_case *c, od_rng *r) {
  int k = od_int(r, 0, (int)(sizeof od_bin_ops / sizeof *od_bin_ops) - 1);
  c->op = od_bin_ops[k];
  c->opset = 18;
  int dt = od_float_dtype(r);
  if (k <= 5 && od_int(r, 0, 3) == 0) dt = od_int(r, 0, 1) ? FBX_HOST_I32 : FBX_HOST_I64;
  if (!strcmp(c->op, "Pow")) dt = FBX_HOST_F32;
  int rank = od_int(r, 1, 4);
  int64_t a[4], b[4];
  od_shape(r, rank, a, 1, 6);
  int rb = od_bcast(r, rank, a, b);
  int swap = od_int(r, 0, 1);
  fbx_host_tensor *x = od_in(c, r, dt, swap ? rb : rank, swap ? b : a, 0);
  fbx_host_tensor *y = od_in(c, r, dt, swap ? rank : rb, swap ? a : b, od_int(r, 0, 3) == 0);
  if (!strcmp(c->op, "Pow")) fbx_host_tensor_fill_uniform(x, od_next(r), 0.1, 3.0);
  if (!strcmp(c->op, "Div")) {
    size_t n = fbx_host_tensor_numel(y);
    for (size_t i = 0; i < n; i++) {
      double v = fbx_host_tensor_get(y, i);
      if (fabs(v) < 0.25) fbx_host_tensor_set(y, i, v < 0 ? -1.5 : 1.5);
    }
  }
  if (k >= 7) { // comparisons: make some elements equal
    size_t n = fbx_host_tensor_numel(y);
    if (fbx_host_tensor_numel(x) == n)
      for (size_t i = 0; i < n; i += 3) fbx_host_tensor_set(y, i, fbx_host_tensor_get(x, i));
  }
  c->n_out = 1;
  od_tol(c, dt);
}

static void gen_where(od_case *c, od_rng *r) {
  c->op = "Where";
  c->opset = 16;
  int dt = od_int(r, 0, 2) ? FBX_HOST_F32 : FBX_HOST_I64;
  int rank = od_int(r, 1, 4);
  int64_t a[4], b[4], cd[4];
  od_shape(r, rank, a, 1, 5);
  int rb = od_bcast(r, rank, a, b), rc = od_bcast(r, rank, a, cd);
  od_in(c, r, FBX_HOST_BOOL, rc, cd, 0);
  od_in(c, r, dt, rank, a, 0);
  od_in(c, r, dt, rb, b, 0);
  c->n_out = 1;
  od_tol(c, dt);
}

static void gen_matmul(od_case *c, od_rng *r) {
  c->op = "MatMul";
  c->opset = 13;
  int dt = od_f16_or(r, od_int(r, 0, 4) ? FBX_HOST_F32 : FBX_HOST_F64);
  int64_t M = od_int(r, 1, 33), K = od_int(r, 1, 40), N = od_int(r, 1, 33), B = od_int(r, 1, 3);
  int ra = od_int(r, 1, 3), rb = od_int(r, 1, 3);
  int64_t a[3], b[3];
  int k = 0;
  if (ra == 3) a[k++] = B;
  if (ra >= 2) a[k++] = M;
  a[k++] = K;
  k = 0;
  if (rb == 3) b[k++] = od_int(r, 0, 1) ? B : 1;
  b[k++] = K;
  if (rb >= 2) b[k++] = N;
  od_in(c, r, dt, ra, a, 0);
  od_in(c, r, dt, rb, b, od_int(r, 0, 1));
  c->n_out = 1;
  od_tol(c, dt);
  if (dt == FBX_HOST_F32) c->atol = 1e-4;
  if (dt == FBX_HOST_F16) c->atol = 1e-2;
}

static void gen_gemm(od_case *c, od_rng *r) {
  c->op = "Gemm";
  c->opset = 13;
  int64_t M = od_int(r, 1, 20), K = od_int(r, 1, 30), N = od_int(r, 1, 20);
  int ta = od_int(r, 0, 1), tb = od_int(r, 0, 1), dt = od_f16_or(r, FBX_HOST_F32);
  int64_t a[2] = {ta ? K : M, ta ? M : K}, b[2] = {tb ? N : K, tb ? K : N};
  od_in(c, r, dt, 2, a, 0);
  od_in(c, r, dt, 2, b, od_int(r, 0, 1));
  int cm = od_int(r, 0, 3);
  int64_t cd[2] = {M, N}, c1[1] = {N};
  if (cm == 1) od_in(c, r, dt, 2, cd, 1);
  else if (cm == 2) od_in(c, r, dt, 1, c1, 1);
  if (ta) od_ai(c, "transA", 1);
  if (tb) od_ai(c, "transB", 1);
  if (od_int(r, 0, 1)) od_af(c, "alpha", 0.5f + (float)od_unit(r));
  if (cm && od_int(r, 0, 1)) od_af(c, "beta", 0.5f + (float)od_unit(r));
  c->n_out = 1;
  od_tol(c, dt);
  c->atol = dt == FBX_HOST_F16 ? 1e-2 : 1e-4;
}

static const char *const od_red_ops[] = {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                                         "ReduceL1", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"};

static void gen_reduce(od_case *c, od_rng *r) {
  c->op = od_red_ops[od_int(r, 0, (int)(sizeof od_red_ops / sizeof *od_red_ops) - 1)];
  c->opset = 18;
  int dt = od_f16_or(r, od_int(r, 0, 4) ? FBX_HOST_F32 : FBX_HOST_F64);
  int rank = od_int(r, 1, 4);
  int64_t d[4];
  od_shape(r, rank, d, 1, 6);
  fbx_host_tensor *x = od_in(c, r, dt, rank, d, 0);
  if (!strcmp(c->op, "ReduceProd")) fbx_host_tensor_fill_uniform(x, od_next(r), 0.5, 1.5);
  int64_t axes[4];
  int na = 0;
  for (int i = 0; i < rank; i++)
    if (od_int(r, 0, 1)) axes[na++] = od_int(r, 0, 1) ? i : i - rank;
  if (na) od_i64s(c, axes, na, 1);
  od_ai(c, "keepdims", od_int(r, 0, 1));
  c->n_out = 1;
  od_tol(c, dt);
}

static void gen_argmax(od_case *c, od_rng *r) {
  c->op = od_int(r, 0, 1) ? "ArgMax" : "ArgMin";
  c->opset = 13;
  int rank = od_int(r, 1, 4);
  int64_t d[4];
  od_shape(r, rank, d, 1, 6);
  od_in(c, r, od_f16_or(r, FBX_HOST_F32), rank, d, 0);
  od_ai(c, "axis", od_int(r, -rank, rank - 1));
  od_ai(c, "keepdims", od_int(r, 0, 1));
  c->n_out = 1;
}

static void gen_softmax(od_case *c, od_rng *r) {
  c->op = od_int(r, 0, 1) ? "Softmax" : "LogSoftmax";
  c->opset = 13;
  int rank = od_int(r, 1, 4);
  int64_t d[4];
  od_shape(r, rank, d, 1, 9);
  int dt = od_f16_or(r, FBX_HOST_F32);
  od_in(c, r, dt, rank, d, 0);
  od_ai(c, "axis", od_int(r, -rank, rank - 1));
  c->n_out = 1;
  od_tol(c, dt);
}

static void gen_layernorm(od_case *c, od_rng *r) {
  c->op = "LayerNormalization";
  c->opset = 17;
  int rank = od_int(r, 1, 4);
  int64_t d[4];
  od_shape(r, rank, d, 1, 8);
  int axis = od_int(r, 0, rank - 1), dt = od_f16_or(r, FBX_HOST_F32);
  od_in(c, r, dt, rank, d, 0);
  od_in(c, r, dt, rank - axis, d + axis, 1);
  if (od_int(r, 0, 1)) od_in(c, r, dt, rank - axis, d + axis, 1);
  od_ai(c, "axis", od_int(r, 0, 1) ? axis : axis - rank);
  c->n_out = od_int(r, 0, 1) ? 3 : 1;
  od_tol(c, dt);
  c->atol = dt == FBX_HOST_F16 ? 1e-2 : 1e-4;
}

static void gen_conv(od_case *c, od_rng *r) {
  c->op = "Conv";
  c->opset = 11;
  int64_t N = od_int(r, 1, 2), C = od_int(r, 1, 4), H = od_int(r, 4, 12), W = od_int(r, 4, 12);
  int64_t kh = od_int(r, 1, 3), kw = od_int(r, 1, 3), s = od_int(r, 1, 2), dl = od_int(r, 1, 2), p = od_int(r, 0, 1);
  int64_t group = od_int(r, 0, 2) == 0 ? C : 1;
  int64_t M = group == C ? C * od_int(r, 1, 2) : od_int(r, 1, 6);
  int64_t x[4] = {N, C, H, W}, w[4] = {M, C / group, kh, kw}, b[1] = {M};
  int dt = od_f16_or(r, FBX_HOST_F32);
  od_in(c, r, dt, 4, x, 0);
  od_in(c, r, dt, 4, w, 1);
  if (od_int(r, 0, 1)) od_in(c, r, dt, 1, b, 1);
  int64_t ks[2] = {kh, kw}, st[2] = {s, s}, dil[2] = {dl, dl}, pads[4] = {p, p, p, p};
  od_aints(c, "kernel_shape", ks, 2);
  od_aints(c, "strides", st, 2);
  od_aints(c, "dilations", dil, 2);
  od_aints(c, "pads", pads, 4);
  if (group > 1) od_ai(c, "group", group);
  c->n_out = 1;
  od_tol(c, dt);
  c->atol = dt == FBX_HOST_F16 ? 1e-2 : 1e-4;
}

static void gen_pool(od_case *c, od_rng *r) {
  int k = od_int(r, 0, 3);
  c->op = k == 0 ? "MaxPool" : k == 1 ? "AveragePool" : k == 2 ? "GlobalAveragePool" : "GlobalMaxPool";
  c->opset = 12;
  int64_t x[4] = {od_int(r, 1, 2), od_int(r, 1, 4), od_int(r, 3, 10), od_int(r, 3, 10)};
  int dt = od_f16_or(r, FBX_HOST_F32);
  od_in(c, r, dt, 4, x, 0);
  if (k <= 1) {
    int64_t kk = od_int(r, 1, 3), s = od_int(r, 1, 2), p = kk > 1 ? od_int(r, 0, 1) : 0;
    int64_t ks[2] = {kk, kk}, st[2] = {s, s}, pads[4] = {p, p, p, p};
    od_aints(c, "kernel_shape", ks, 2);
    od_aints(c, "strides", st, 2);
    od_aints(c, "pads", pads, 4);
    if (k == 1 && od_int(r, 0, 1)) od_ai(c, "count_include_pad", 1);
  }
  c->n_out = 1;
  od_tol(c, dt);
}

// ConvInteger: (u)int8 x/w, optional zero points (w: per-tensor or per output channel),
// K = C/group * kh * kw <= 258 (Fusebox declines larger K).
static void gen_convint(od_case *c, od_rng *r) {
  c->op = "ConvInteger";
  c->opset = 10;
  int64_t N = od_int(r, 1, 2), C = od_int(r, 1, 6), H = od_int(r, 3, 9), W = od_int(r, 3, 9);
  int64_t kh = od_int(r, 1, 3), kw = od_int(r, 1, 3), s = od_int(r, 1, 2), p = od_int(r, 0, 1);
  int64_t group = od_int(r, 0, 2) == 0 ? C : 1;
  int64_t M = group == C ? C : od_int(r, 1, 5);
  int xdt = od_int(r, 0, 1) ? FBX_HOST_U8 : FBX_HOST_I8, wdt = od_int(r, 0, 1) ? FBX_HOST_U8 : FBX_HOST_I8;
  int64_t x[4] = {N, C, H, W}, w[4] = {M, C / group, kh, kw}, one[1] = {1}, m1[1] = {M};
  fbx_host_tensor *xt = od_in(c, r, xdt, 4, x, 0);
  fbx_host_tensor_fill_int(xt, od_next(r), xdt == FBX_HOST_U8 ? 0 : -128, xdt == FBX_HOST_U8 ? 255 : 127);
  fbx_host_tensor *wt = od_in(c, r, wdt, 4, w, 1);
  fbx_host_tensor_fill_int(wt, od_next(r), wdt == FBX_HOST_U8 ? 0 : -128, wdt == FBX_HOST_U8 ? 255 : 127);
  int zk = od_int(r, 0, 3);
  if (zk >= 1) {
    fbx_host_tensor *z = od_in(c, r, xdt, 0, one, od_int(r, 0, 1));
    fbx_host_tensor_fill_int(z, od_next(r), xdt == FBX_HOST_U8 ? 0 : -128, xdt == FBX_HOST_U8 ? 255 : 127);
  }
  if (zk >= 2) {
    fbx_host_tensor *z = od_in(c, r, wdt, zk == 2 ? 0 : 1, zk == 2 ? one : m1, 1);
    fbx_host_tensor_fill_int(z, od_next(r), wdt == FBX_HOST_U8 ? 0 : -128, wdt == FBX_HOST_U8 ? 255 : 127);
  }
  int64_t ks[2] = {kh, kw}, st[2] = {s, s}, pads[4] = {p, p, p, p};
  od_aints(c, "kernel_shape", ks, 2);
  od_aints(c, "strides", st, 2);
  od_aints(c, "pads", pads, 4);
  if (group > 1) od_ai(c, "group", group);
  c->n_out = 1;
}

// InstanceNormalization, LRN, Resize (scales; nearest / linear), float32 or float16.
static void gen_norm2(od_case *c, od_rng *r) {
  int k = od_int(r, 0, 2), dt = od_f16_or(r, FBX_HOST_F32);
  int64_t x[4] = {od_int(r, 1, 2), od_int(r, 1, 5), od_int(r, 2, 7), od_int(r, 2, 7)}, ch[1] = {x[1]};
  od_in(c, r, dt, 4, x, 0);
  c->n_out = 1;
  od_tol(c, dt);
  if (k == 0) {
    c->op = "InstanceNormalization";
    c->opset = 6;
    od_in(c, r, dt, 1, ch, 1);
    od_in(c, r, dt, 1, ch, 1);
    c->atol = dt == FBX_HOST_F16 ? 1e-2 : 1e-4;
  } else if (k == 1) {
    c->op = "LRN";
    c->opset = 13;
    od_ai(c, "size", 2 * od_int(r, 0, 2) + 1);
    od_af(c, "alpha", 1e-3f * (float)od_int(r, 1, 100));
  } else {
    c->op = "Resize";
    c->opset = 13;
    fbx_host_tensor *roi = &c->in[c->n_in++];
    roi->rank = -1;
    int64_t four[1] = {4};
    fbx_host_tensor *sc = od_in(c, r, FBX_HOST_F32, 1, four, 1);
    static const double f[] = {0.5, 1.0, 1.5, 2.0, 3.0};
    fbx_host_tensor_set(sc, 0, 1.0);
    fbx_host_tensor_set(sc, 1, 1.0);
    fbx_host_tensor_set(sc, 2, f[od_int(r, 0, 4)]);
    fbx_host_tensor_set(sc, 3, f[od_int(r, 0, 4)]);
    od_as(c, "mode", od_int(r, 0, 1) ? "linear" : "nearest");
  }
}

static int od_any_dtype(od_rng *r) {
  static const int dts[] = {FBX_HOST_F32, FBX_HOST_F32, FBX_HOST_I64, FBX_HOST_I32, FBX_HOST_U8,
                            FBX_HOST_BOOL, FBX_HOST_F16, FBX_HOST_F64, FBX_HOST_I8};
  return dts[od_int(r, 0, (int)(sizeof dts / sizeof *dts) - 1)];
}

static void gen_transpose(od_case *c, od_rng *r) {
  c->op = "Transpose";
  c->opset = 13;
  int rank = od_int(r, 1, 5);
  int64_t d[5], perm[5];
  od_shape(r, rank, d, 1, 6);
  for (int i = 0; i < rank; i++) perm[i] = i;
  for (int i = rank - 1; i > 0; i--) {
    int j = od_int(r, 0, i);
    int64_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
  }
  od_in(c, r, od_any_dtype(r), rank, d, 0);
  od_aints(c, "perm", perm, rank);
  c->n_out = 1;
}

static void gen_concat(od_case *c, od_rng *r) {
  c->op = "Concat";
  c->opset = 13;
  int rank = od_int(r, 1, 4), n = od_int(r, 2, 3), dt = od_any_dtype(r);
  int axis = od_int(r, 0, rank - 1);
  int64_t d[4];
  od_shape(r, rank, d, 1, 5);
  for (int i = 0; i < n; i++) {
    d[axis] = od_int(r, 1, 4);
    od_in(c, r, dt, rank, d, od_int(r, 0, 3) == 0);
  }
  od_ai(c, "axis", od_int(r, 0, 1) ? axis : axis - rank);
  c->n_out = 1;
}

static void gen_slice(od_case *c, od_rng *r) {
  c->op = "Slice";
  c->opset = 13;
  int rank = od_int(r, 1, 4);
  int64_t d[4], st[4], en[4], ax[4], sp[4];
  od_shape(r, rank, d, 1, 8);
  od_in(c, r, od_any_dtype(r), rank, d, 0);
  int n = od_int(r, 1, rank);
  for (int i = 0; i < n; i++) {
    ax[i] = i;
    sp[i] = od_int(r, 0, 3) == 0 ? -od_int(r, 1, 2) : od_int(r, 1, 2);
    st[i] = od_int(r, -(int)d[i] - 1, (int)d[i]);
    en[i] = od_int(r, 0, 5) == 0 ? (sp[i] > 0 ? INT64_MAX : INT64_MIN) : od_int(r, -(int)d[i] - 1, (int)d[i] + 1);
  }
  int init = od_int(r, 0, 2) != 0;
  od_i64s(c, st, n, init);
  od_i64s(c, en, n, init);
  od_i64s(c, ax, n, init);
  od_i64s(c, sp, n, init);
  c->n_out = 1;
}

static void gen_reshape(od_case *c, od_rng *r) {
  int k = od_int(r, 0, 3);
  int rank = od_int(r, 1, 4);
  int64_t d[4];
  od_shape(r, rank, d, 1, 5);
  od_in(c, r, od_any_dtype(r), rank, d, 0);
  c->n_out = 1;
  if (k == 0) {
    c->op = "Reshape";
    c->opset = 14;
    int64_t s[2] = {-1, d[rank - 1]};
    od_i64s(c, s, 2, 1);
  } else if (k == 1) {
    c->op = "Flatten";
    c->opset = 13;
    od_ai(c, "axis", od_int(r, 0, rank));
  } else if (k == 2) {
    c->op = "Unsqueeze";
    c->opset = 13;
    int64_t a[1] = {od_int(r, -rank - 1, rank)};
    od_i64s(c, a, 1, 1);
  } else {
    c->op = "Expand";
    c->opset = 13;
    int64_t s[5] = {od_int(r, 1, 3)};
    for (int i = 0; i < rank; i++) s[i + 1] = d[i] == 1 ? od_int(r, 1, 3) : d[i];
    od_i64s(c, s, rank + 1, 1);
  }
}

static void gen_gather(od_case *c, od_rng *r) {
  int elements = od_int(r, 0, 2) == 0;
  c->op = elements ? "GatherElements" : "Gather";
  c->opset = 13;
  int rank = od_int(r, 1, 4);
  int64_t d[4], id[4];
  od_shape(r, rank, d, 1, 6);
  int axis = od_int(r, 0, rank - 1);
  od_in(c, r, od_any_dtype(r), rank, d, 0);
  int ir;
  if (elements) {
    ir = rank;
    for (int i = 0; i < rank; i++) id[i] = i == axis ? od_int(r, 1, 5) : d[i];
  } else {
    ir = od_int(r, 0, 2);
    od_shape(r, ir, id, 1, 4);
  }
  fbx_host_tensor *ix = od_in(c, r, od_int(r, 0, 1) ? FBX_HOST_I64 : FBX_HOST_I32, ir, id, od_int(r, 0, 1));
  fbx_host_tensor_fill_int(ix, od_next(r), -d[axis], d[axis] - 1);
  od_ai(c, "axis", axis);
  c->n_out = 1;
}

// Ops Fusebox composes from other IR ops (onnx_ops_extra.c and friends).
static void gen_composed(od_case *c, od_rng *r) {
  int k = od_int(r, 0, 5);
  int64_t d[4];
  int rank = od_int(r, 1, 4);
  od_shape(r, rank, d, 1, 6);
  c->n_out = 1;
  od_tol(c, FBX_HOST_F32);
  if (k == 0) {  // Einsum: matmul-like, transpose, sum
    static const char *const eqs[] = {"ij,jk->ik", "bij,bjk->bik", "ij->ji", "ij->i", "i,i", "ij,kj->ik", "bij->bj"};
    int e = od_int(r, 0, 6);
    c->op = "Einsum";
    c->opset = 12;
    int64_t b = od_int(r, 1, 3), i = od_int(r, 1, 6), j = od_int(r, 1, 6), kk = od_int(r, 1, 6);
    int64_t s0[3], s1[3];
    switch (e) {
      case 0: s0[0] = i; s0[1] = j; s1[0] = j; s1[1] = kk; od_in(c, r, FBX_HOST_F32, 2, s0, 0); od_in(c, r, FBX_HOST_F32, 2, s1, 0); break;
      case 1: s0[0] = b; s0[1] = i; s0[2] = j; s1[0] = b; s1[1] = j; s1[2] = kk;
              od_in(c, r, FBX_HOST_F32, 3, s0, 0); od_in(c, r, FBX_HOST_F32, 3, s1, 0); break;
      case 2: case 3: s0[0] = i; s0[1] = j; od_in(c, r, FBX_HOST_F32, 2, s0, 0); break;
      case 4: s0[0] = i; od_in(c, r, FBX_HOST_F32, 1, s0, 0); od_in(c, r, FBX_HOST_F32, 1, s0, 0); break;
      case 5: s0[0] = i; s0[1] = j; s1[0] = kk; s1[1] = j; od_in(c, r, FBX_HOST_F32, 2, s0, 0); od_in(c, r, FBX_HOST_F32, 2, s1, 0); break;
      default: s0[0] = b; s0[1] = i; s0[2] = j; od_in(c, r, FBX_HOST_F32, 3, s0, 0); break;
    }
    od_as(c, "equation", eqs[e]);
  } else if (k == 1) {  // QuantizeLinear, per-tensor
    c->op = "QuantizeLinear";
    c->opset = 13;
    od_in(c, r, FBX_HOST_F32, rank, d, 0);
    int64_t one[1] = {1};
    fbx_host_tensor *s = od_in(c, r, FBX_HOST_F32, 0, one, 1);
    fbx_host_tensor_set(s, 0, 0.01 + 0.05 * od_unit(r));
    fbx_host_tensor *z = od_in(c, r, od_int(r, 0, 1) ? FBX_HOST_U8 : FBX_HOST_I8, 0, one, 1);
    fbx_host_tensor_set(z, 0, z->dtype == FBX_HOST_U8 ? od_int(r, 0, 255) : od_int(r, -128, 127));
    c->atol = c->rtol = 0;
  } else if (k == 2) {  // DequantizeLinear, per-tensor
    c->op = "DequantizeLinear";
    c->opset = 13;
    int dt = od_int(r, 0, 1) ? FBX_HOST_U8 : FBX_HOST_I8;
    fbx_host_tensor *x = od_in(c, r, dt, rank, d, 0);
    fbx_host_tensor_fill_int(x, od_next(r), dt == FBX_HOST_U8 ? 0 : -128, dt == FBX_HOST_U8 ? 255 : 127);
    int64_t one[1] = {1};
    fbx_host_tensor *s = od_in(c, r, FBX_HOST_F32, 0, one, 1);
    fbx_host_tensor_set(s, 0, 0.01 + 0.05 * od_unit(r));
    fbx_host_tensor *z = od_in(c, r, dt, 0, one, 1);
    fbx_host_tensor_set(z, 0, dt == FBX_HOST_U8 ? od_int(r, 0, 255) : od_int(r, -128, 127));
  } else if (k == 3) {  // Shrink
    c->op = "Shrink";
    c->opset = 9;
    od_in(c, r, FBX_HOST_F32, rank, d, 0);
    od_af(c, "lambd", (float)od_unit(r));
    od_af(c, "bias", (float)od_unit(r));
  } else if (k == 4) {  // Pow with an integer base
    c->op = "Pow";
    c->opset = 15;
    int dt = od_int(r, 0, 1) ? FBX_HOST_I32 : FBX_HOST_I64;
    fbx_host_tensor *x = od_in(c, r, dt, rank, d, 0);
    fbx_host_tensor_fill_int(x, od_next(r), -6, 6);
    fbx_host_tensor *y = od_in(c, r, dt, rank, d, 0);
    fbx_host_tensor_fill_int(y, od_next(r), 0, 5);
  } else {  // MatMulInteger (K <= 258)
    c->op = "MatMulInteger";
    c->opset = 10;
    int64_t M = od_int(r, 1, 12), K = od_int(r, 1, 64), N = od_int(r, 1, 12);
    int64_t a[2] = {M, K}, b[2] = {K, N}, one[1] = {1};
    fbx_host_tensor *x = od_in(c, r, FBX_HOST_U8, 2, a, 0);
    fbx_host_tensor_fill_int(x, od_next(r), 0, 255);
    fbx_host_tensor *w = od_in(c, r, FBX_HOST_U8, 2, b, 1);
    fbx_host_tensor_fill_int(w, od_next(r), 0, 255);
    fbx_host_tensor *az = od_in(c, r, FBX_HOST_U8, 0, one, 1);
    fbx_host_tensor_set(az, 0, od_int(r, 0, 255));
  }
}

typedef struct od_op { const char *family; od_gen gen; int weight; } od_op;
static const od_op od_ops[] = {
    {"unary", gen_unary, 6},     {"binary", gen_binary, 6},   {"where", gen_where, 1},
    {"matmul", gen_matmul, 3},   {"gemm", gen_gemm, 2},       {"reduce", gen_reduce, 4},
    {"argmax", gen_argmax, 1},   {"softmax", gen_softmax, 2}, {"layernorm", gen_layernorm, 2},
    {"conv", gen_conv, 3},       {"pool", gen_pool, 2},       {"transpose", gen_transpose, 2},
    {"concat", gen_concat, 2},   {"slice", gen_slice, 2},     {"reshape", gen_reshape, 2},
    {"gather", gen_gather, 2},   {"composed", gen_composed, 3}, {"convint", gen_convint, 2},
    {"norm2", gen_norm2, 2},
};
#define OD_NOPS ((int)(sizeof od_ops / sizeof od_ops[0]))

// ---------------------------------------------------------------------------------------
// Model writing
// ---------------------------------------------------------------------------------------

static void od_value_info(pbw *g, int field, const char *name, const fbx_host_tensor *t) {
  pbw vi = {0}, tp = {0}, tt = {0}, sh = {0};
  pbw_str(&vi, 1, name);
  if (t) {
    pbw_int(&tt, 1, t->dtype);
    for (int i = 0; i < t->rank; i++) {
      pbw dim = {0};
      pbw_int(&dim, 1, t->dims[i]);
      pbw_sub(&sh, 1, &dim);
    }
    pbw_sub(&tt, 2, &sh);
    pbw_sub(&tp, 1, &tt);
    pbw_sub(&vi, 2, &tp);
  }
  pbw_sub(g, field, &vi);
}

static int od_write_model(const od_case *c, const int *out_dtypes, const char *path) {
  pbw m = {0}, g = {0}, n = {0}, os = {0};
  for (int i = 0; i < c->n_in; i++) pbw_str(&n, 1, c->in[i].rank < 0 ? "" : c->in[i].name);
  for (int i = 0; i < c->n_out; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "y%d", i);
    pbw_str(&n, 2, nm);
  }
  pbw_str(&n, 3, "node0");
  pbw_str(&n, 4, c->op);
  for (int i = 0; i < c->n_at; i++) {
    const od_attr *a = &c->at[i];
    pbw at = {0};
    pbw_str(&at, 1, a->name);
    if (a->type == 1) pbw_f32(&at, 2, a->f);
    else if (a->type == 2) pbw_int(&at, 3, a->i);
    else if (a->type == 3) pbw_str(&at, 4, a->s);
    else for (int k = 0; k < a->n_ints; k++) pbw_int(&at, 8, a->ints[k]);
    pbw_int(&at, 20, a->type);
    pbw_sub(&n, 5, &at);
  }
  pbw_sub(&g, 1, &n);
  pbw_str(&g, 2, "ops_diff");
  for (int i = 0; i < c->n_in; i++) {
    const fbx_host_tensor *t = &c->in[i];
    if (t->rank < 0 || !c->is_init[i]) continue;
    pbw tp = {0};
    for (int k = 0; k < t->rank; k++) pbw_int(&tp, 1, t->dims[k]);
    pbw_int(&tp, 2, t->dtype);
    pbw_str(&tp, 8, t->name);
    pbw_bytes(&tp, 9, t->data, t->nbytes);
    pbw_sub(&g, 5, &tp);
  }
  for (int i = 0; i < c->n_in; i++)
    if (c->in[i].rank >= 0 && !c->is_init[i]) od_value_info(&g, 11, c->in[i].name, &c->in[i]);
  for (int i = 0; i < c->n_out; i++) {
    char nm[16];
    snprintf(nm, sizeof nm, "y%d", i);
    pbw vi = {0}, tp = {0}, tt = {0};
    pbw_str(&vi, 1, nm);
    pbw_int(&tt, 1, out_dtypes[i]);
    pbw_sub(&tp, 1, &tt);
    pbw_sub(&vi, 2, &tp);
    pbw_sub(&g, 12, &vi);
  }
  pbw_int(&m, 1, 8);
  pbw_str(&m, 2, "fusebox-ops-diff");
  pbw_sub(&m, 7, &g);
  pbw_str(&os, 1, "");
  pbw_int(&os, 2, c->opset);
  pbw_sub(&m, 8, &os);
  if (m.oom) { free(m.p); return -1; }
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(m.p, 1, m.n, f) == m.n;
  if (f) fclose(f);
  free(m.p);
  return ok ? 0 : -1;
}

// Output dtypes: from a first ORT CPU session we cannot learn them before writing the
// model, so they are derived per op here.
static void od_out_dtypes(const od_case *c, int *dt) {
  int x = c->in[0].dtype;
  for (int i = 0; i < c->n_out; i++) dt[i] = x;
  const char *o = c->op;
  if (!strcmp(o, "Equal") || !strcmp(o, "Less") || !strcmp(o, "Greater") || !strcmp(o, "LessOrEqual") ||
      !strcmp(o, "GreaterOrEqual"))
    dt[0] = FBX_HOST_BOOL;
  if (!strcmp(o, "ArgMax") || !strcmp(o, "ArgMin")) dt[0] = FBX_HOST_I64;
  if (!strcmp(o, "Where")) dt[0] = c->in[1].dtype;
  if (!strcmp(o, "QuantizeLinear")) dt[0] = c->in[2].dtype;
  if (!strcmp(o, "DequantizeLinear")) dt[0] = FBX_HOST_F32;
  if (!strcmp(o, "MatMulInteger") || !strcmp(o, "ConvInteger")) dt[0] = FBX_HOST_I32;
  if (!strcmp(o, "LayerNormalization")) dt[1] = dt[2] = FBX_HOST_F32;
}

// ---------------------------------------------------------------------------------------
// Run one case
// ---------------------------------------------------------------------------------------

enum { OD_PASS, OD_FAIL, OD_SKIP };

// Write c's model to path and run it once (Fusebox registered or not); *claimed when any
// node went to Fusebox. Returns an error message (heap) or NULL.
static char *od_session(fbx_host *h, const od_case *c, const char *path, int fusebox, int *claimed,
                        fbx_host_tensor **out, size_t *n_out) {
  int dts[OD_MAX_OUT];
  od_out_dtypes(c, dts);
  if (od_write_model(c, dts, path)) return fbx_host_errf("cannot write model");
  fbx_host_tensor feeds[OD_MAX_IN];
  size_t nf = 0;
  for (int i = 0; i < c->n_in; i++)
    if (c->in[i].rank >= 0 && !c->is_init[i]) feeds[nf++] = c->in[i];
  fbx_host_session_opts o = fbx_host_session_opts_default();
  o.use_fusebox = fusebox;
  o.intra_threads = 1;
  o.record_assignment = fusebox;
  fbx_host_session *s = NULL;
  char *e = fbx_host_session_create(h, path, &o, &s);
  if (!e) e = fbx_host_session_run(s, feeds, nf, out, n_out);
  if (!e && fusebox && claimed) {
    fbx_host_assign *as;
    size_t na;
    char *e2 = fbx_host_session_assignment(s, &as, &na);
    if (!e2) {
      for (size_t k = 0; k < na; k++) *claimed |= !strcmp(as[k].ep, FBX_HOST_EP_NAME);
      fbx_host_assign_free(as, na);
    }
    fbx_host_err_free(e2);
  }
  if (s) fbx_host_session_destroy(s);
  return e;
}

static int od_has_f16(const od_case *c) {
  for (int i = 0; i < c->n_in; i++)
    if (c->in[i].rank >= 0 && c->in[i].dtype == FBX_HOST_F16) return 1;
  return 0;
}

// Reference for a float16 case ORT's CPU EP has no float16 kernel for: the same model with
// every float16 input widened to float32, run on ORT's CPU EP, its float32 outputs rounded
// to float16 where the float16 model's outputs are float16.
static char *od_f32_reference(fbx_host *h, const od_case *c, const char *path, fbx_host_tensor **out, size_t *n_out) {
  od_case f = *c;
  for (int i = 0; i < c->n_in; i++) {
    if (c->in[i].rank < 0) continue;
    int dt = c->in[i].dtype == FBX_HOST_F16 ? FBX_HOST_F32 : c->in[i].dtype;
    char *e = fbx_host_tensor_alloc(&f.in[i], c->in[i].name, dt, c->in[i].rank, c->in[i].dims);
    if (e) { for (int k = 0; k < i; k++) if (c->in[k].rank >= 0) fbx_host_tensor_free(&f.in[k]); return e; }
    size_t n = fbx_host_tensor_numel(&c->in[i]);
    for (size_t k = 0; k < n; k++) fbx_host_tensor_set(&f.in[i], k, fbx_host_tensor_get(&c->in[i], k));
  }
  char *e = od_session(h, &f, path, 0, NULL, out, n_out);
  for (int i = 0; i < f.n_in; i++) if (f.in[i].rank >= 0) fbx_host_tensor_free(&f.in[i]);
  if (e) return e;
  int dts[OD_MAX_OUT];
  od_out_dtypes(c, dts);
  for (size_t i = 0; i < *n_out && i < OD_MAX_OUT; i++) {
    fbx_host_tensor *t = &(*out)[i];
    if (dts[i] != FBX_HOST_F16 || t->dtype != FBX_HOST_F32) continue;
    fbx_host_tensor r;
    e = fbx_host_tensor_alloc(&r, t->name, FBX_HOST_F16, t->rank, t->dims);
    if (e) return e;
    size_t n = fbx_host_tensor_numel(t);
    for (size_t k = 0; k < n; k++) fbx_host_tensor_set(&r, k, fbx_host_tensor_get(t, k));
    fbx_host_tensor_free(t);
    *t = r;
  }
  return NULL;
}

static int od_run(fbx_host *h, od_case *c, const char *path, int verbose, int *claimed, int *f32ref, char *msg,
                  size_t cap) {
  msg[0] = 0;
  *claimed = 0;
  *f32ref = 0;
  fbx_host_tensor *out[2] = {NULL, NULL};
  size_t n_out[2] = {0, 0};
  int rc = OD_PASS;
  char *e = od_session(h, c, path, 0, NULL, &out[0], &n_out[0]);
  if (e && od_has_f16(c)) {
    char *e2 = od_f32_reference(h, c, path, &out[0], &n_out[0]);
    if (!e2) { fbx_host_err_free(e); e = NULL; *f32ref = 1; }
    else fbx_host_err_free(e2);
  }
  if (e) { // the reference cannot run this combination: not a Fusebox failure
    snprintf(msg, cap, "ORT CPU: %.200s", e);
    fbx_host_err_free(e);
    return OD_SKIP;
  }
  e = od_session(h, c, path, 1, claimed, &out[1], &n_out[1]);
  if (e) {
    snprintf(msg, cap, "Fusebox: %.300s", e);
    fbx_host_err_free(e);
    rc = OD_FAIL;
    goto done;
  }
  if (n_out[0] != n_out[1]) { snprintf(msg, cap, "output count %zu vs %zu", n_out[1], n_out[0]); rc = OD_FAIL; goto done; }
  for (size_t i = 0; i < n_out[0]; i++) {
    fbx_host_cmp cmp;
    if (!fbx_host_compare(&out[1][i], &out[0][i], c->rtol, c->atol, &cmp)) {
      char s1[64], s2[64];
      snprintf(msg, cap, "output %zu: %s%s vs ref %s%s: %zu/%zu bad, max_abs %.3g max_rel %.3g at %zu", i,
               cmp.shape_mismatch ? "shape/dtype mismatch " : "",
               fbx_host_shape_str(out[1][i].rank, out[1][i].dims, s1, sizeof s1),
               fbx_host_shape_str(out[0][i].rank, out[0][i].dims, s2, sizeof s2), *f32ref ? " (f32 ref)" : "",
               cmp.n_bad, cmp.numel, cmp.max_abs, cmp.max_rel, cmp.worst_index);
      rc = OD_FAIL;
      break;
    }
  }
done:
  for (int p = 0; p < 2; p++)
    if (out[p]) fbx_host_tensors_free(out[p], n_out[p]);
  (void)verbose;
  return rc;
}

static void od_describe(od_case *c) {
  size_t k = (size_t)snprintf(c->desc, sizeof c->desc, "%s(opset %d)", c->op, c->opset);
  for (int i = 0; i < c->n_in && k < sizeof c->desc; i++) {
    char s[64];
    if (c->in[i].rank < 0) { k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, " -"); continue; }
    k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, " %s%s[%s]", c->is_init[i] ? "c:" : "",
                          fbx_host_dtype_name(c->in[i].dtype), fbx_host_shape_str(c->in[i].rank, c->in[i].dims, s, sizeof s));
    if (c->in[i].dtype == FBX_HOST_I64 && c->in[i].rank == 1 && c->in[i].dims[0] <= 8) /* small index data */
      for (int64_t j = 0; j < c->in[i].dims[0] && k < sizeof c->desc; j++)
        k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, "%s%lld%s", j ? "," : "=", (long long)((int64_t *)c->in[i].data)[j],
                              j + 1 == c->in[i].dims[0] ? "" : "");
  }
  for (int i = 0; i < c->n_at && k < sizeof c->desc; i++) {
    const od_attr *a = &c->at[i];
    if (a->type == 1) k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, " %s=%g", a->name, a->f);
    else if (a->type == 2) k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, " %s=%lld", a->name, (long long)a->i);
    else if (a->type == 3) k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, " %s=%s", a->name, a->s);
    else {
      k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, " %s=[", a->name);
      for (int j = 0; j < a->n_ints && k < sizeof c->desc; j++)
        k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, "%s%lld", j ? "," : "", (long long)a->ints[j]);
      if (k < sizeof c->desc) k += (size_t)snprintf(c->desc + k, sizeof c->desc - k, "]");
    }
  }
}

int main(int argc, char **argv) {
  uint64_t seed = 20251130;
  int cases = 600, verbose = 0;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--cases") && i + 1 < argc) cases = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--op") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "-v")) verbose = 1;
    else {
      fprintf(stderr, "usage: test_ops_diff [--seed N] [--cases N] [--op FAMILY|OpType] [-v]\n");
      return 2;
    }
  }
  fbx_host *h = NULL;
  char *e = fbx_host_open(NULL, NULL, &h);
  if (e) {
    fprintf(stderr, "test_ops_diff: %s\n", e);
    fbx_host_err_free(e);
    printf("ops: 0 passed, 1 failed\n");
    return 1;
  }
  char path[] = "/tmp/fbx_ops_diff_XXXXXX";
  int fd = mkstemp(path);
  if (fd >= 0) close(fd);
  int total_w = 0;
  for (int i = 0; i < OD_NOPS; i++) total_w += od_ops[i].weight;
  int passed = 0, failed = 0, skipped = 0, unclaimed = 0, ran = 0, n_f32ref = 0;
  od_rng r = {seed * 2654435761u + 88172645463325252ull};
  double t0 = fbx_host_now();
  for (int ci = 0; ran < cases && ci < cases * 50; ci++) {
    int w = od_int(&r, 0, total_w - 1), k = 0;
    while (w >= od_ops[k].weight) w -= od_ops[k++].weight;
    od_case c;
    memset(&c, 0, sizeof c);
    od_rng cr = {od_next(&r) | 1};
    od_ops[k].gen(&c, &cr);
    if (only && strcmp(only, od_ops[k].family) && strcmp(only, c.op)) {
      for (int i = 0; i < c.n_in; i++) if (c.in[i].rank >= 0) fbx_host_tensor_free(&c.in[i]);
      continue;
    }
    ran++;
    od_describe(&c);
    char msg[600];
    int claimed, f32ref;
    int rc = od_run(h, &c, path, verbose, &claimed, &f32ref, msg, sizeof msg);
    n_f32ref += rc == OD_PASS && f32ref;
    if (rc == OD_PASS) {
      passed++;
      if (!claimed) unclaimed++;
      if (verbose) printf("ok   %s%s%s\n", c.desc, claimed ? "" : "  (not claimed)", f32ref ? "  (f32 ORT ref)" : "");
    } else if (rc == OD_SKIP) {
      skipped++;
      if (verbose) printf("skip %s: %s\n", c.desc, msg);
    } else {
      failed++;
      printf("FAIL case %d %s: %s\n", ran - 1, c.desc, msg);
    }
    for (int i = 0; i < c.n_in; i++) if (c.in[i].rank >= 0) fbx_host_tensor_free(&c.in[i]);
  }
  unlink(path);
  fbx_host_close(h);
  int judged = passed + failed;
  printf("ops_diff: seed %llu, %d case(s) in %.1f s: %d passed (%d not claimed by Fusebox), %d failed, "
         "%d skipped (ORT CPU cannot run them); %d float16 case(s) checked against ORT CPU in float32\n",
         (unsigned long long)seed, ran, fbx_host_now() - t0, passed, unclaimed, failed, skipped, n_f32ref);
  if (judged > 0 && (passed - unclaimed) * 10 < judged * 8) {
    printf("FAIL: only %d of %d cases claimed by Fusebox (< 80%%)\n", passed - unclaimed, judged);
    failed++;
  }
  printf("ops: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
