/* RESIZE on CUDA, float32, nearest and linear (N-D, every coordinate
 * transform mode; cubic declined). The coordinate maths runs here, once per
 * node, into per-dim tap tables uploaded with the launch; roi and scales are
 * read back to the host first (shape-data inputs). */
#include <math.h>
#include <string.h>

#include "../../base/alloc.h"
#include "cuda_internal.h"

bool fbx_cuda_s_resize(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size) {
  if (node->params.resize.mode == FBX_IR_RESIZE_CUBIC) {
    snprintf(why, why_size, "RESIZE cubic mode");
    return false;
  }
  if (n_in < 1 || in[0].dtype != FBX_DTYPE_F32) {
    snprintf(why, why_size, "RESIZE of dtype %s (float32 only)", n_in ? fbx_dtype_name(in[0].dtype) : "?");
    return false;
  }
  return true;
}

static double fbx__rs_coord(fbx_ir_resize_coord mode, double xo, int64_t in, int64_t out, double scale, double rs,
                            double re) {
  switch (mode) {
    case FBX_IR_COORD_ASYMMETRIC: return xo / scale;
    case FBX_IR_COORD_PYTORCH_HALF_PIXEL: return out > 1 ? (xo + 0.5) / scale - 0.5 : 0.0;
    case FBX_IR_COORD_ALIGN_CORNERS: return out == 1 ? 0.0 : xo * (double)(in - 1) / (double)(out - 1);
    case FBX_IR_COORD_TF_HALF_PIXEL_FOR_NN: return (xo + 0.5) / scale;
    case FBX_IR_COORD_TF_CROP_AND_RESIZE:
      return out > 1 ? rs * (double)(in - 1) + xo * (re - rs) * (double)(in - 1) / (double)(out - 1)
                     : 0.5 * (rs + re) * (double)(in - 1);
    default: return (xo + 0.5) / scale - 0.5; /* half_pixel */
  }
}

static int64_t fbx__rs_nearest(fbx_ir_resize_nearest mode, double x) {
  double f = floor(x);
  switch (mode) {
    case FBX_IR_NEAREST_FLOOR: return (int64_t)f;
    case FBX_IR_NEAREST_CEIL: return (int64_t)ceil(x);
    case FBX_IR_NEAREST_ROUND_PREFER_CEIL: return (int64_t)(x - f >= 0.5 ? f + 1 : f);
    default: return (int64_t)(x - f > 0.5 ? f + 1 : f);
  }
}

fbx_status *fbx_cuda_k_resize(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0], *y = &out[0];
  const int r = x->rank;
  const typeof(node->params.resize) *rp = &node->params.resize;
  double roi[2 * FBX_MAX_RANK], scales[FBX_MAX_RANK];
  bool has_roi = fbx_cuda_present(in, n_in, 1) && fbx_tensor_numel(&in[1]) == 2 * r;
  bool has_scales = fbx_cuda_present(in, n_in, 2) && fbx_tensor_numel(&in[2]) == r;
  unsigned char buf[2 * FBX_MAX_RANK * 8];
  if (has_roi) {
    FBX_TRY(fbx_cuda_read_small(c, &in[1], buf, sizeof buf));
    for (int i = 0; i < 2 * r; i++) roi[i] = fbx_cuda_host_f64(in[1].dtype, buf, i);
  }
  if (has_scales) {
    FBX_TRY(fbx_cuda_read_small(c, &in[2], buf, sizeof buf));
    for (int i = 0; i < r; i++) scales[i] = fbx_cuda_host_f64(in[2].dtype, buf, i);
  }
  fbx_cuda_resize_args a;
  memset(&a, 0, sizeof a);
  int64_t total = 0;
  for (int d = 0; d < r; d++) total += y->dims[d];
  fbx_cuda_resize_tap *taps = fbx_malloc(sizeof *taps * (size_t)(total + 1));
  if (!taps) return FBX_ERR_OOM();
  bool crop = rp->coord == FBX_IR_COORD_TF_CROP_AND_RESIZE;
  int64_t st[FBX_MAX_RANK], off = 0;
  fbx_cuda_strides(x, st);
  for (int d = 0; d < r; d++) {
    int64_t ind = x->dims[d], outd = y->dims[d];
    double scale = has_scales ? scales[d] : (double)outd / (double)(ind ? ind : 1);
    double rs = has_roi ? roi[d] : 0, re = has_roi ? roi[r + d] : 1;
    a.interp[d] = ind != outd || crop || scale != 1.0;
    a.tap_off[d] = off;
    a.out_dims[d] = outd;
    a.in_strides[d] = st[d];
    for (int64_t i = 0; i < outd; i++) {
      double xs = fbx__rs_coord(rp->coord, (double)i, ind, outd, scale, rs, re);
      fbx_cuda_resize_tap *tp = &taps[off + i];
      tp->outside = crop && (xs < 0 || xs > (double)(ind - 1));
      if (rp->mode == FBX_IR_RESIZE_NEAREST) {
        int64_t k = fbx__rs_nearest(rp->nearest, xs);
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
    off += outd;
  }
  a.n = fbx_tensor_numel(y);
  a.rank = r;
  a.linear = rp->mode == FBX_IR_RESIZE_LINEAR;
  a.extrap = rp->extrapolation_value;
  a.x = x->data;
  a.y = y->data;
  void *dev = NULL;
  fbx_status *s = fbx_cuda_upload_params(c, taps, sizeof *taps * (size_t)(total + 1), &dev);
  fbx_free(taps);
  FBX_TRY(s);
  a.taps = dev;
  info->variant = a.linear ? "resize_linear" : "resize_nearest";
  return fbx_cuda_launched(fbx_cuda_launch_resize(&a, c->stream), "RESIZE");
}
