// od_ref_intmm.c — references for MatMulInteger and ConvInteger: int64 sums of products of
// zero-point-shifted (u)int8 values, stored as int32.
//
//   MatMulInteger: Y[..., m, n] = sum_k (A[..., m, k] - a_zp[m]) * (B[..., k, n] - b_zp[n])
//                  numpy matmul shapes (rank-1 A or B promoted, batch dims broadcast);
//                  a_zp per-tensor or per-row (M), b_zp per-tensor or per-column (N).
//   ConvInteger:   Y[n, m, oh, ow] = sum_{c, i, j} (X[n, g*C/group + c, ih, iw] - x_zp) * (W[m, c, i, j] - w_zp[m])
//                  with ih = oh*stride_h - pad_top + i*dilation_h (likewise iw), g = m / (M/group),
//                  and padded positions contributing 0 (X is padded with its zero point);
//                  2-D only, explicit pads (no auto_pad), w_zp per-tensor or per output channel.
#include "ops/od_ref.h"

#include <string.h>

// Zero point k of z (absent: 0; one element: that one for every k; else z[k]), or -1 when z
// has neither form for `count` positions.
static int od_ref_zp(const fbx_host_tensor *z, int64_t count, int64_t k, int64_t *v) {
  if (!z) { *v = 0; return 0; }
  size_t n = fbx_host_tensor_numel(z);
  if (n == 1) { *v = od_ref_load(z, 0); return 0; }
  if (z->rank != 1 || z->dims[0] != count) return -1;
  *v = od_ref_load(z, (size_t)k);
  return 0;
}

char *od_ref_matmulint(const od_case *c, fbx_host_tensor *y) {
  const fbx_host_tensor *a = od_ref_in(c, 0), *b = od_ref_in(c, 1), *az = od_ref_in(c, 2), *bz = od_ref_in(c, 3);
  if (!a || !b || a->rank < 1 || b->rank < 1) return fbx_host_errf("MatMulInteger reference: A and B of rank >= 1 expected");
  int64_t M = a->rank >= 2 ? a->dims[a->rank - 2] : 1, K = a->dims[a->rank - 1];
  int64_t Kb = b->rank >= 2 ? b->dims[b->rank - 2] : b->dims[0], N = b->rank >= 2 ? b->dims[b->rank - 1] : 1;
  if (K != Kb) return fbx_host_errf("MatMulInteger reference: K %lld vs %lld", (long long)K, (long long)Kb);
  // batch dims: A's and B's leading dims, broadcast
  int abr = a->rank > 2 ? a->rank - 2 : 0, bbr = b->rank > 2 ? b->rank - 2 : 0;
  int64_t od[FBX_HOST_MAX_RANK];
  int br = od_ref_bcast_shape(abr, a->dims, bbr, b->dims, od);
  if (br < 0) return fbx_host_errf("MatMulInteger reference: batch dims do not broadcast");
  int r = br;
  if (a->rank >= 2) od[r++] = M;
  if (b->rank >= 2) od[r++] = N;
  char *e = fbx_host_tensor_alloc(y, "y0", FBX_HOST_I32, r, od);
  if (e) return e;
  size_t batches = 1;
  for (int k = 0; k < br; k++) batches *= (size_t)od[k];
  for (size_t bi = 0; bi < batches; bi++) {
    size_t ao = od_ref_bcast_offset(abr, a->dims, br, od, bi) * (size_t)(M * K);
    size_t bo = od_ref_bcast_offset(bbr, b->dims, br, od, bi) * (size_t)(K * N);
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        int64_t za, zb, s = 0;
        if (od_ref_zp(az, M, m, &za) || od_ref_zp(bz, N, n, &zb))
          return fbx_host_errf("MatMulInteger reference: zero point neither per-tensor nor per-row/column");
        for (int64_t k = 0; k < K; k++)
          s += (od_ref_load(a, ao + (size_t)(m * K + k)) - za) * (od_ref_load(b, bo + (size_t)(k * N + n)) - zb);
        od_ref_store(y, bi * (size_t)(M * N) + (size_t)(m * N + n), s);
      }
  }
  return NULL;
}

// ints attribute `name` of 2 (or 4 for pads) values, or all `def` when absent.
static int od_ref_conv_attr(const od_case *c, const char *name, int want, int64_t def, int64_t *v) {
  int n = od_attr_ints(c, name, v, want);
  if (n < 0) {
    for (int k = 0; k < want; k++) v[k] = def;
    return 0;
  }
  return n == want ? 0 : -1;
}

char *od_ref_convint(const od_case *c, fbx_host_tensor *y) {
  const fbx_host_tensor *x = od_ref_in(c, 0), *w = od_ref_in(c, 1), *xz = od_ref_in(c, 2), *wz = od_ref_in(c, 3);
  if (!x || !w || x->rank != 4 || w->rank != 4) return fbx_host_errf("ConvInteger reference: 2-D only (X, W of rank 4)");
  const od_attr *ap = od_attr_find(c, "auto_pad");
  if (ap && strcmp(ap->s, "NOTSET")) return fbx_host_errf("ConvInteger reference: auto_pad is outside it");
  int64_t N = x->dims[0], C = x->dims[1], H = x->dims[2], W = x->dims[3];
  int64_t M = w->dims[0], Cg = w->dims[1], group = od_attr_int(c, "group", 1);
  int64_t ks[2] = {w->dims[2], w->dims[3]}, kattr[2], st[2], dl[2], pd[4];
  int nk = od_attr_ints(c, "kernel_shape", kattr, 2);  // when given, it must be W's
  if (od_ref_conv_attr(c, "strides", 2, 1, st) || od_ref_conv_attr(c, "dilations", 2, 1, dl) ||
      od_ref_conv_attr(c, "pads", 4, 0, pd) || (nk >= 0 && (nk != 2 || kattr[0] != ks[0] || kattr[1] != ks[1])))
    return fbx_host_errf("ConvInteger reference: attributes of the wrong length");
  if (group < 1 || C != Cg * group || M % group) return fbx_host_errf("ConvInteger reference: channels vs group");
  int64_t OH = (H + pd[0] + pd[2] - ((ks[0] - 1) * dl[0] + 1)) / st[0] + 1;
  int64_t OW = (W + pd[1] + pd[3] - ((ks[1] - 1) * dl[1] + 1)) / st[1] + 1;
  int64_t od[4] = {N, M, OH < 0 ? 0 : OH, OW < 0 ? 0 : OW};
  char *e = fbx_host_tensor_alloc(y, "y0", FBX_HOST_I32, 4, od);
  if (e) return e;
  int64_t zx;
  if (od_ref_zp(xz, 1, 0, &zx)) return fbx_host_errf("ConvInteger reference: x_zero_point must be per-tensor");
  size_t yi = 0;
  for (int64_t n = 0; n < N; n++)
    for (int64_t m = 0; m < M; m++) {
      int64_t zw, g = m / (M / group);
      if (od_ref_zp(wz, M, m, &zw)) return fbx_host_errf("ConvInteger reference: w_zero_point neither per-tensor nor per-channel");
      for (int64_t oh = 0; oh < od[2]; oh++)
        for (int64_t ow = 0; ow < od[3]; ow++, yi++) {
          int64_t s = 0;
          for (int64_t cc = 0; cc < Cg; cc++)
            for (int64_t i = 0; i < ks[0]; i++)
              for (int64_t j = 0; j < ks[1]; j++) {
                int64_t ih = oh * st[0] - pd[0] + i * dl[0], iw = ow * st[1] - pd[1] + j * dl[1];
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;  // padding: x_zp - x_zp = 0
                int64_t xv = od_ref_load(x, (size_t)(((n * C + g * Cg + cc) * H + ih) * W + iw));
                int64_t wv = od_ref_load(w, (size_t)(((m * Cg + cc) * ks[0] + i) * ks[1] + j));
                s += (xv - zx) * (wv - zw);
              }
          od_ref_store(y, yi, s);
        }
    }
  return NULL;
}

// QLinearMatMul (per-tensor scales and zero points): acc = MatMulInteger(a, b, a_zp, b_zp), then
// y = saturate(round_half_even(float(acc) * (a_scale * b_scale / y_scale)) + y_zp), in float32 in
// that order (as ORT's CPU EP requantizes; the ONNX reference implementation multiplies in
// float64, which can differ at a rounding tie).
char *od_ref_qlinearmatmul(const od_case *c, fbx_host_tensor *y) {
  const fbx_host_tensor *as = od_ref_in(c, 1), *bs = od_ref_in(c, 4), *ys = od_ref_in(c, 6), *yz = od_ref_in(c, 7);
  int64_t lo, hi;
  if (c->n_in != 8 || !as || !bs || !ys || !yz || as->dtype != FBX_HOST_F32 || bs->dtype != FBX_HOST_F32 ||
      ys->dtype != FBX_HOST_F32 || fbx_host_tensor_numel(as) != 1 || fbx_host_tensor_numel(bs) != 1 ||
      fbx_host_tensor_numel(ys) != 1 || fbx_host_tensor_numel(yz) != 1 || od_ref_q8_range(yz->dtype, &lo, &hi))
    return fbx_host_errf("QLinearMatMul reference: per-tensor float32 scales and 8-bit zero points expected");
  od_case mm;  // a view of the integer part: A, B, a_zp, b_zp (tensors borrowed, not freed)
  memset(&mm, 0, sizeof mm);
  mm.op = "MatMulInteger";
  mm.n_in = 4;
  mm.in[0] = c->in[0];
  mm.in[1] = c->in[3];
  mm.in[2] = c->in[2];
  mm.in[3] = c->in[5];
  fbx_host_tensor acc;
  char *e = od_ref_matmulint(&mm, &acc);
  if (e) return e;
  e = fbx_host_tensor_alloc(y, "y0", yz->dtype, acc.rank, acc.dims);
  if (!e) {
    float m = ((const float *)as->data)[0] * ((const float *)bs->data)[0] / ((const float *)ys->data)[0];
    int64_t zp = od_ref_load(yz, 0);
    size_t n = fbx_host_tensor_numel(&acc);
    for (size_t i = 0; i < n; i++) od_ref_store(y, i, od_ref_requant((float)od_ref_load(&acc, i) * m, zp, lo, hi));
  }
  fbx_host_tensor_free(&acc);
  return e;
}

// QLinearConv (x_scale, y_scale, y_zp per-tensor; w_scale per-tensor or per output channel;
// optional int32 bias B[M]): acc = ConvInteger(x, w, x_zp, w_zp) + B[m], then
// y = saturate(round_half_even(float(acc) * ((x_scale * w_scale[m]) / y_scale)) + y_zp), float32 in
// that order (as ORT's CPU EP).
char *od_ref_qlinearconv(const od_case *c, fbx_host_tensor *y) {
  const fbx_host_tensor *xs = od_ref_in(c, 1), *ws = od_ref_in(c, 4), *ys = od_ref_in(c, 6), *yz = od_ref_in(c, 7);
  const fbx_host_tensor *b = c->n_in > 8 ? od_ref_in(c, 8) : NULL;
  int64_t lo, hi;
  if (c->n_in < 8 || !xs || !ws || !ys || !yz || xs->dtype != FBX_HOST_F32 || ws->dtype != FBX_HOST_F32 ||
      ys->dtype != FBX_HOST_F32 || fbx_host_tensor_numel(xs) != 1 || fbx_host_tensor_numel(ys) != 1 ||
      fbx_host_tensor_numel(yz) != 1 || od_ref_q8_range(yz->dtype, &lo, &hi))
    return fbx_host_errf("QLinearConv reference: float32 scales (x, y per-tensor) and 8-bit zero points expected");
  od_case cv = *c;  // a view of the integer part: x, w, x_zp, w_zp (tensors and attributes borrowed)
  cv.op = "ConvInteger";
  cv.n_in = 4;
  cv.in[0] = c->in[0];
  cv.in[1] = c->in[3];
  cv.in[2] = c->in[2];
  cv.in[3] = c->in[5];
  fbx_host_tensor acc;
  char *e = od_ref_convint(&cv, &acc);
  if (e) return e;
  int64_t M = acc.dims[1], S = acc.dims[2] * acc.dims[3];
  size_t nws = fbx_host_tensor_numel(ws);
  if ((nws != 1 && nws != (size_t)M) || (b && fbx_host_tensor_numel(b) != (size_t)M)) {
    fbx_host_tensor_free(&acc);
    return fbx_host_errf("QLinearConv reference: w_scale / B of the wrong length");
  }
  e = fbx_host_tensor_alloc(y, "y0", yz->dtype, acc.rank, acc.dims);
  if (!e) {
    float sx = ((const float *)xs->data)[0], sy = ((const float *)ys->data)[0];
    int64_t zp = od_ref_load(yz, 0);
    size_t n = fbx_host_tensor_numel(&acc);
    for (size_t i = 0; i < n; i++) {
      int64_t m = ((int64_t)i / S) % M;
      float mult = sx * ((const float *)ws->data)[nws == 1 ? 0 : m] / sy;
      int32_t a = (int32_t)((uint32_t)od_ref_load(&acc, i) + (uint32_t)(b ? od_ref_load(b, (size_t)m) : 0));
      od_ref_store(y, i, od_ref_requant((float)a * mult, zp, lo, hi));
    }
  }
  fbx_host_tensor_free(&acc);
  return e;
}
