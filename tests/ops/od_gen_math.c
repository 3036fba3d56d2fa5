// od_gen_math.c — generators for elementwise, matmul, reduction, softmax and normalisation ops.
#include "ops/od_gen.h"

#include <math.h>
#include <string.h>

static const char *const od_unary_ops[] = {"Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Sqrt", "Log",
                                           "Erf", "Softplus", "Softsign", "Floor", "Ceil", "Round", "Sin",
                                           "Cos", "Elu", "Selu", "LeakyRelu", "HardSigmoid", "HardSwish",
                                           "Reciprocal", "Sign", "Celu", "Mish", "Gelu", "Atan", "Sinh"};

void od_gen_unary(od_case *c, od_rng *r) {
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

void od_gen_binary(od_case *c, od_rng *r) {
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

void od_gen_where(od_case *c, od_rng *r) {
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

void od_gen_matmul(od_case *c, od_rng *r) {
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

void od_gen_gemm(od_case *c, od_rng *r) {
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

void od_gen_reduce(od_case *c, od_rng *r) {
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

void od_gen_argmax(od_case *c, od_rng *r) {
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

void od_gen_softmax(od_case *c, od_rng *r) {
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

void od_gen_layernorm(od_case *c, od_rng *r) {
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
