/* RESIZE: nearest (all rounding modes) and linear (N-D, separable taps over
 * the dims that change), every coordinate transform mode. Per-dim tap tables
 * are built once per run in scratch; cubic is declined. F32 (nearest: any
 * dtype, element copies).
 * Fast path (the FPN upsamplings of detectors): only the last two dims change
 * and nothing is outside (no crop): per output row, nearest gathers from one
 * source row (or copies the previous output row when they share it), linear
 * blends two horizontally interpolated source rows (kept per worker while
 * consecutive output rows share them); parallel over (plane, output row).
 * Otherwise the generic per-element loop. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

typedef struct fbx__rs_tap { int64_t i0, i1; float w1; bool outside; } fbx__rs_tap;

static double fbx__rs_coord(const fbx_ir_node *node, double xo, int64_t in, int64_t out, double scale,
                            double roi_s, double roi_e) {
  switch (node->params.resize.coord) {
    case FBX_IR_COORD_ASYMMETRIC: return xo / scale;
    case FBX_IR_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? (xo + 0.5) / scale - 0.5 : 0.0;
    case FBX_IR_COORD_ALIGN_CORNERS: return out == 1 ? 0.0 : xo * (double)(in - 1) / (double)(out - 1);
    case FBX_IR_COORD_TF_HALF_PIXEL_FOR_NN: return (xo + 0.5) / scale;
    case FBX_IR_COORD_TF_CROP_AND_RESIZE:
      return out > 1 ? roi_s * (in - 1) + xo * (roi_e - roi_s) * (in - 1) / (double)(out - 1)
                     : 0.5 * (roi_s + roi_e) * (in - 1);
    default: return (xo + 0.5) / scale - 0.5;
  }
}

static int64_t fbx__rs_nearest(const fbx_ir_node *node, double x) {
  double f = floor(x);
  switch (node->params.resize.nearest) {
    case FBX_IR_NEAREST_FLOOR: return (int64_t)f;
    case FBX_IR_NEAREST_CEIL: return (int64_t)ceil(x);
    case FBX_IR_NEAREST_ROUND_PREFER_CEIL: return (int64_t)(x - f >= 0.5 ? f + 1 : f);
    default: return (int64_t)(x - f > 0.5 ? f + 1 : f);
  }
}

/* ---- fast path: last two dims, 4-byte elements ---- */
typedef struct fbx__rs2_job {
  const fbx__rs_tap *th, *tw; /* (OH), (OW) */
  const void *x;              /* (P, IH, IW) */
  void *y;                    /* (P, OH, OW) */
  float *rows;                /* per worker: 2 rows of OW (linear) */
  int64_t IH, IW, OH, OW;
  bool linear;
} fbx__rs2_job;

/* row r of the source plane, interpolated along W into dst (OW) */
static void fbx__rs2_hrow(const fbx__rs2_job *j, const float *xr, float *dst) {
  for (int64_t ow = 0; ow < j->OW; ow++) {
    const fbx__rs_tap *t = &j->tw[ow];
    float a = xr[t->i0], b = xr[t->i1], w = t->w1;
    dst[ow] = w == 0.f ? a : (1.f - w) * a + w * b;
  }
}

static void fbx__rs2_task(void *arg, int64_t r0, int64_t r1, int worker) {
  const fbx__rs2_job *j = arg;
  const int64_t OH = j->OH, OW = j->OW, IS = j->IH * j->IW;
  if (!j->linear) {
    const uint32_t *x = j->x;
    uint32_t *y = j->y;
    for (int64_t r = r0; r < r1; r++) {
      int64_t p = r / OH, oh = r % OH;
      uint32_t *yr = y + r * OW;
      if (oh > 0 && r > r0 && j->th[oh].i0 == j->th[oh - 1].i0) {
        memcpy(yr, yr - OW, (size_t)OW * sizeof(uint32_t));
        continue;
      }
      const uint32_t *xr = x + p * IS + j->th[oh].i0 * j->IW;
      for (int64_t ow = 0; ow < OW; ow++) yr[ow] = xr[j->tw[ow].i0];
    }
    return;
  }
  const float *x = j->x;
  float *y = j->y;
  float *h0 = j->rows + (size_t)worker * (size_t)(2 * OW), *h1 = h0 + OW;
  int64_t k0 = -1, k1 = -1; /* flattened source rows (p*IH + ih) now in h0, h1 */
  for (int64_t r = r0; r < r1; r++) {
    int64_t p = r / OH, oh = r % OH;
    const fbx__rs_tap *t = &j->th[oh];
    int64_t a = p * j->IH + t->i0, b = p * j->IH + t->i1;
    if (a == k1 && a != k0) { /* slide: the old second row is the new first */
      float *s = h0; h0 = h1; h1 = s;
      k0 = k1; k1 = -1;
    }
    if (k0 != a) { fbx__rs2_hrow(j, x + a * j->IW, h0); k0 = a; }
    float *yr = y + r * OW, w = t->w1;
    if (w == 0.f) {
      memcpy(yr, h0, (size_t)OW * sizeof(float));
      continue;
    }
    if (k1 != b) { fbx__rs2_hrow(j, x + b * j->IW, h1); k1 = b; }
    for (int64_t ow = 0; ow < OW; ow++) yr[ow] = (1.f - w) * h0[ow] + w * h1[ow];
  }
}

/* Nearest without crop (no extrapolation): each output row (all dims but the last fixed) is a
 * gather of one input row through the last dim's taps, and an output row whose source row is
 * the previous output row's is a copy of it. Parallel over rows. */
typedef struct fbx__rs_rows {
  const fbx__rs_tap *const *t;
  const fbx_tensor *x, *y;
  const int64_t *xs;
  size_t e;
} fbx__rs_rows;

static void fbx__rs_rows_task(void *arg, int64_t r0, int64_t r1, int worker) {
  (void)worker;
  const fbx__rs_rows *j = arg;
  int r = j->y->rank;
  int64_t W = j->y->dims[r - 1], prev = -1;
  const fbx__rs_tap *tl = j->t[r - 1];
  for (int64_t row = r0; row < r1; row++) {
    int64_t rem = row, base = 0;
    for (int d = r - 2; d >= 0; d--) {
      int64_t i = rem % j->y->dims[d];
      rem /= j->y->dims[d];
      base += j->t[d][i].i0 * j->xs[d];
    }
    unsigned char *dst = (unsigned char *)j->y->data + (size_t)(row * W) * j->e;
    if (base == prev && row > r0) {
      memcpy(dst, dst - (size_t)W * j->e, (size_t)W * j->e);
      continue;
    }
    prev = base;
    const unsigned char *src = (const unsigned char *)j->x->data + (size_t)base * j->e;
    if (j->e == 4) {
      uint32_t *d4 = (uint32_t *)(void *)dst;
      const uint32_t *s4 = (const uint32_t *)(const void *)src;
      for (int64_t q = 0; q < W; q++) d4[q] = s4[tl[q].i0];
    } else {
      for (int64_t q = 0; q < W; q++) memcpy(dst + (size_t)q * j->e, src + (size_t)tl[q].i0 * j->e, j->e);
    }
  }
}

fbx_status *fbx_cpu_k_RESIZE(FBX_CPU_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  fbx_tensor *y = &out[0];
  int r = x->rank;
  fbx_ir_resize_mode mode = node->params.resize.mode;
  if (mode == FBX_IR_RESIZE_CUBIC) return FBX_ERR_NOTIMPL("RESIZE: cubic mode not implemented on cpu");
  if (mode == FBX_IR_RESIZE_LINEAR && x->dtype != FBX_DTYPE_F32) return FBX_ERR_NOTIMPL("RESIZE: linear needs F32");
  bool has_scales = fbx_cpu_present(in, n_in, 2) && fbx_cpu_numel(&in[2]) == r;
  bool has_roi = fbx_cpu_present(in, n_in, 1) && fbx_cpu_numel(&in[1]) == 2 * r;
  int64_t sum = 0;
  for (int d = 0; d < r; d++) sum += y->dims[d];
  int64_t OW = r >= 1 ? y->dims[r - 1] : 1;
  size_t tap_bytes = ((size_t)(sum + 1) * sizeof(fbx__rs_tap) + 63) / 64 * 64;
  size_t row_bytes = (size_t)(2 * OW) * sizeof(float) * (size_t)(c->threads > 0 ? c->threads : 1);
  fbx__rs_tap *taps = fbx_cpu_scratch(c, tap_bytes + row_bytes);
  if (!taps) return FBX_ERR_OOM();
  fbx__rs_tap *t[FBX_MAX_RANK];
  bool interp[FBX_MAX_RANK];
  int64_t o = 0;
  float extrap = node->params.resize.extrapolation_value;
  bool crop = node->params.resize.coord == FBX_IR_COORD_TF_CROP_AND_RESIZE;
  for (int d = 0; d < r; d++) {
    t[d] = taps + o;
    o += y->dims[d];
    int64_t ind = x->dims[d], outd = y->dims[d];
    double scale = has_scales ? fbx_cpu_read_f64(&in[2], d) : (double)outd / (double)(ind ? ind : 1);
    double rs = has_roi ? fbx_cpu_read_f64(&in[1], d) : 0, re = has_roi ? fbx_cpu_read_f64(&in[1], r + d) : 1;
    interp[d] = ind != outd || crop || scale != 1.0;
    for (int64_t i = 0; i < outd; i++) {
      double xs = fbx__rs_coord(node, (double)i, ind, outd, scale, rs, re);
      fbx__rs_tap *tp = &t[d][i];
      tp->outside = crop && (xs < 0 || xs > (double)(ind - 1));
      if (mode == FBX_IR_RESIZE_NEAREST) {
        int64_t k = fbx__rs_nearest(node, xs);
        k = k < 0 ? 0 : k >= ind ? ind - 1 : k;
        tp->i0 = tp->i1 = k;
        tp->w1 = 0;
      } else {
        if (xs < 0) xs = 0;
        if (xs > (double)(ind - 1)) xs = (double)(ind - 1);
        int64_t k = (int64_t)floor(xs);
        tp->i0 = k;
        tp->i1 = k + 1 < ind ? k + 1 : ind - 1;
        tp->w1 = (float)(xs - (double)k);
      }
    }
  }
  int64_t xs_[FBX_MAX_RANK], idx[FBX_MAX_RANK] = {0};
  fbx_cpu_strides(x, xs_);
  int64_t total = fbx_cpu_numel(y);
  size_t e = fbx_dtype_size(x->dtype);
  int nI = 0, id[FBX_MAX_RANK];
  for (int d = 0; d < r; d++)
    if (interp[d] && mode == FBX_IR_RESIZE_LINEAR) id[nI++] = d;
  if (nI > 6) return FBX_ERR_NOTIMPL("RESIZE: linear over %d dims", nI);
  /* fast path: outer dims are identities, last two change, no crop, 4-byte elements */
  bool fast = r >= 2 && !crop && e == 4 && total > 0;
  for (int d = 0; fast && d < r - 2; d++) {
    if (mode == FBX_IR_RESIZE_LINEAR && interp[d]) fast = false;
    for (int64_t i = 0; fast && i < y->dims[d]; i++) fast = x->dims[d] == y->dims[d] && t[d][i].i0 == i;
  }
  if (fast) {
    int64_t IH = x->dims[r - 2], IW = x->dims[r - 1], OH = y->dims[r - 2];
    fbx__rs2_job j = {.th = t[r - 2], .tw = t[r - 1], .x = x->data, .y = y->data,
                      .rows = (float *)((unsigned char *)taps + tap_bytes), .IH = IH, .IW = IW, .OH = OH,
                      .OW = OW, .linear = mode == FBX_IR_RESIZE_LINEAR};
    info->variant = j.linear ? "resize_linear_rows" : "resize_nearest_rows";
    int64_t nrows = total / OW;
    int64_t grain = (32768 + OW - 1) / (OW ? OW : 1); /* ~128 KiB of output per chunk at least */
    fbx_cpu_par(c, nrows, grain > 0 ? grain : 1, fbx__rs2_task, &j);
    return NULL;
  }
  if (mode == FBX_IR_RESIZE_NEAREST && !crop && r >= 1 && total > 0) {
    info->variant = "resize_nearest_gather_rows";
    info->reason = "nearest, no crop: row gathers through the last dim's taps, repeated rows copied";
    fbx__rs_rows j = {.t = (const fbx__rs_tap *const *)t, .x = x, .y = y, .xs = xs_, .e = e};
    int64_t rows = total / y->dims[r - 1];
    fbx_cpu_par(c, rows, total >= 65536 ? 8 : rows, fbx__rs_rows_task, &j);
    return NULL;
  }
  info->variant = mode == FBX_IR_RESIZE_NEAREST ? "resize_nearest" : "resize_linear_separable";
  for (int64_t oi = 0; oi < total; oi++) {
    bool outside = false;
    int64_t base = 0;
    for (int d = 0; d < r; d++) {
      const fbx__rs_tap *tp = &t[d][idx[d]];
      outside |= tp->outside;
      if (!(mode == FBX_IR_RESIZE_LINEAR && interp[d])) base += tp->i0 * xs_[d];
    }
    if (mode == FBX_IR_RESIZE_NEAREST) {
      if (outside && x->dtype == FBX_DTYPE_F32) ((float *)y->data)[oi] = extrap;
      else memcpy((unsigned char *)y->data + oi * (int64_t)e, (const unsigned char *)x->data + base * (int64_t)e, e);
    } else if (outside) {
      ((float *)y->data)[oi] = extrap;
    } else {
      double acc = 0;
      for (int m = 0; m < (1 << nI); m++) {
        double w = 1;
        int64_t off = base;
        for (int q = 0; q < nI; q++) {
          const fbx__rs_tap *tp = &t[id[q]][idx[id[q]]];
          bool hi = (m >> q) & 1;
          w *= hi ? tp->w1 : 1.0 - tp->w1;
          off += (hi ? tp->i1 : tp->i0) * xs_[id[q]];
        }
        if (w != 0) acc += w * ((const float *)x->data)[off];
      }
      ((float *)y->data)[oi] = (float)acc;
    }
    for (int d = r - 1; d >= 0; d--) {
      if (++idx[d] < y->dims[d]) break;
      idx[d] = 0;
    }
  }
  return NULL;
}
