// od_gen_composed.c — generators for ops Fusebox composes from other IR ops, the quantized ones included.
#include "ops/od_gen.h"

#include <math.h>
#include <string.h>

// Ops Fusebox composes from other IR ops (onnx_ops_extra.c and friends).
void od_gen_composed(od_case *c, od_rng *r) {
  int k = od_int(r, 0, 7);
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
    od_fill_q8(od_in(c, r, dt, rank, d, 0), r);
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
  } else if (k == 6) {  // DynamicQuantizeLinear: x -> (uint8 y, y_scale, y_zero_point)
    c->op = "DynamicQuantizeLinear";
    c->opset = 11;
    fbx_host_tensor *x = od_in(c, r, FBX_HOST_F32, rank, d, 0);
    int shift = od_int(r, 0, 2);  // 0: both signs, 1: all >= 0 (zero point 0), 2: all <= 0 (zero point 255)
    double lo = shift == 1 ? 0.0 : -2.0 - 3.0 * od_unit(r), hi = shift == 2 ? 0.0 : 2.0 + 3.0 * od_unit(r);
    fbx_host_tensor_fill_uniform(x, od_next(r), lo, hi);
    c->n_out = 3;
  } else if (k == 7) {  // QLinearMatMul, per-tensor scales and zero points (K <= 258)
    c->op = "QLinearMatMul";
    c->opset = 10;
    int64_t M = od_int(r, 1, 12), K = od_int(r, 1, 64), N = od_int(r, 1, 12), one[1] = {1};
    int ra = od_int(r, 0, 3) == 0 ? 3 : 2;
    int64_t a[3] = {M, K}, b[2] = {K, N};
    if (ra == 3) { a[0] = od_int(r, 1, 3); a[1] = M; a[2] = K; }
    int adt = od_int(r, 0, 1) ? FBX_HOST_U8 : FBX_HOST_I8, bdt = od_int(r, 0, 1) ? FBX_HOST_U8 : FBX_HOST_I8;
    int ydt = od_int(r, 0, 1) ? FBX_HOST_U8 : FBX_HOST_I8;
    // scales: a, b ~ 0.005..0.05; y sized so that most outputs land inside the 8-bit range
    double as = 0.005 + 0.045 * od_unit(r), bs = 0.005 + 0.045 * od_unit(r);
    double ys = as * bs * 74.0 * 74.0 * sqrt((double)K) / (20.0 + 40.0 * od_unit(r));
    od_fill_q8(od_in(c, r, adt, ra, a, 0), r);
    fbx_host_tensor_set(od_in(c, r, FBX_HOST_F32, 0, one, 1), 0, as);
    od_fill_q8(od_in(c, r, adt, 0, one, 1), r);
    od_fill_q8(od_in(c, r, bdt, 2, b, 1), r);
    fbx_host_tensor_set(od_in(c, r, FBX_HOST_F32, 0, one, 1), 0, bs);
    od_fill_q8(od_in(c, r, bdt, 0, one, 1), r);
    fbx_host_tensor_set(od_in(c, r, FBX_HOST_F32, 0, one, 1), 0, ys);
    od_fill_q8(od_in(c, r, ydt, 0, one, 1), r);
  } else {  // k == 5: MatMulInteger (K <= 258): (u)int8 x (u)int8, optional zero points, A of rank 2 or 3
    c->op = "MatMulInteger";
    c->opset = 10;
    int64_t M = od_int(r, 1, 12), K = od_int(r, 1, 64), N = od_int(r, 1, 12);
    int ra = od_int(r, 0, 3) == 0 ? 3 : 2;
    int64_t a[3] = {M, K}, b[2] = {K, N}, one[1] = {1}, n1[1] = {N};
    if (ra == 3) { a[0] = od_int(r, 1, 3); a[1] = M; a[2] = K; }
    int adt = od_int(r, 0, 1) ? FBX_HOST_U8 : FBX_HOST_I8, bdt = od_int(r, 0, 1) ? FBX_HOST_U8 : FBX_HOST_I8;
    od_fill_q8(od_in(c, r, adt, ra, a, 0), r);
    od_fill_q8(od_in(c, r, bdt, 2, b, 1), r);
    int zk = od_int(r, 0, 3);  // 0: no zero points, 1: A's, 2: + B's per-tensor, 3: + B's per column
    if (zk >= 1) od_fill_q8(od_in(c, r, adt, 0, one, 1), r);
    if (zk >= 2) od_fill_q8(od_in(c, r, bdt, zk == 2 ? 0 : 1, zk == 2 ? one : n1, 1), r);
  }
}
