// od_gen_nn.c — generators for Conv, pooling, ConvInteger, InstanceNormalization / LRN / Resize.
#include "ops/od_gen.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

void od_gen_conv(od_case *c, od_rng *r) {
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

void od_gen_pool(od_case *c, od_rng *r) {
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

// ConvInteger: (u)int8 x/w, optional zero points (w: per-tensor or per output channel); C up to
// 40, so K = C/group * kh * kw reaches 360 (past the 258 where float32 sums stop being exact).
// One case in three is QLinearConv: the same integer part with x/w/y scales (w: per-tensor or
// per output channel), y zero point and an optional int32 bias.
void od_gen_convint(od_case *c, od_rng *r) {
  bool ql = od_int(r, 0, 2) == 0;
  c->op = ql ? "QLinearConv" : "ConvInteger";
  c->opset = 10;
  int64_t N = od_int(r, 1, 2), C = od_int(r, 0, 3) == 0 ? od_int(r, 20, 40) : od_int(r, 1, 6);
  int64_t H = od_int(r, 3, 9), W = od_int(r, 3, 9);
  int64_t kh = od_int(r, 1, 3), kw = od_int(r, 1, 3), s = od_int(r, 1, 2), p = od_int(r, 0, 1);
  int64_t group = od_int(r, 0, 2) == 0 ? C : 1;
  int64_t M = group == C ? C : od_int(r, 1, 5);
  int xdt = od_int(r, 0, 1) ? FBX_HOST_U8 : FBX_HOST_I8, wdt = od_int(r, 0, 1) ? FBX_HOST_U8 : FBX_HOST_I8;
  int64_t x[4] = {N, C, H, W}, w[4] = {M, C / group, kh, kw}, one[1] = {1}, m1[1] = {M};
  if (!ql) {
    od_fill_q8(od_in(c, r, xdt, 4, x, 0), r);
    od_fill_q8(od_in(c, r, wdt, 4, w, 1), r);
    int zk = od_int(r, 0, 3);  // 0: no zero points, 1: x's, 2: + w's per-tensor, 3: + w's per output channel
    if (zk >= 1) od_fill_q8(od_in(c, r, xdt, 0, one, od_int(r, 0, 1)), r);
    if (zk >= 2) od_fill_q8(od_in(c, r, wdt, zk == 2 ? 0 : 1, zk == 2 ? one : m1, 1), r);
  } else {
    int ydt = od_int(r, 0, 1) ? FBX_HOST_U8 : FBX_HOST_I8;
    bool per_ch = od_int(r, 0, 1);
    double xs = 0.005 + 0.045 * od_unit(r), wsc = 0.005 + 0.045 * od_unit(r);
    double ys = xs * wsc * 74.0 * 74.0 * sqrt((double)(C / group * kh * kw)) / (20.0 + 40.0 * od_unit(r));
    od_fill_q8(od_in(c, r, xdt, 4, x, 0), r);
    fbx_host_tensor_set(od_in(c, r, FBX_HOST_F32, 0, one, 1), 0, xs);
    od_fill_q8(od_in(c, r, xdt, 0, one, 1), r);
    od_fill_q8(od_in(c, r, wdt, 4, w, 1), r);
    fbx_host_tensor *wst = od_in(c, r, FBX_HOST_F32, per_ch ? 1 : 0, per_ch ? m1 : one, 1);
    for (int64_t m = 0; m < (per_ch ? M : 1); m++) fbx_host_tensor_set(wst, (size_t)m, wsc * (0.5 + od_unit(r)));
    od_fill_q8(od_in(c, r, wdt, per_ch ? 1 : 0, per_ch ? m1 : one, 1), r);
    fbx_host_tensor_set(od_in(c, r, FBX_HOST_F32, 0, one, 1), 0, ys);
    od_fill_q8(od_in(c, r, ydt, 0, one, 1), r);
    if (od_int(r, 0, 1)) fbx_host_tensor_fill_int(od_in(c, r, FBX_HOST_I32, 1, m1, 1), od_next(r), -2000, 2000);
  }
  int64_t ks[2] = {kh, kw}, st[2] = {s, s}, pads[4] = {p, p, p, p};
  od_aints(c, "kernel_shape", ks, 2);
  od_aints(c, "strides", st, 2);
  od_aints(c, "pads", pads, 4);
  if (group > 1) od_ai(c, "group", group);
  c->n_out = 1;
}

// InstanceNormalization, LRN, Resize (scales; nearest / linear), float32 or float16.
void od_gen_norm2(od_case *c, od_rng *r) {
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
