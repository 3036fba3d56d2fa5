/* Shape inference, part 3: convolution, pooling, resize, top-k. The
 * conv/pool geometry (output size and pads) is ir_geometry.c, shared with
 * the kernels. */
#include <math.h>
#include <string.h>

#include "ir_shape_util.h"

static fbx_status *fbx__ir_conv(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  const fbx_tensor *x = &in[0];
  const fbx_tensor *w = NULL;
  int64_t k[3], pads[6], os[3];
  int64_t group = node->params.conv.group > 0 ? node->params.conv.group : 1;
  int64_t ch;
  bool qint = node->op == FBX_IR_OP_CONV_INT; /* inputs 2, 3 are zero points, not a bias */
  if (node->op == FBX_IR_OP_CONV || qint || node->op == FBX_IR_OP_CONV_TRANSPOSE) {
    FBX__IR_NEED_IN(node, n_in, 2);
    w = &in[1];
    if (w->rank != x->rank) return FBX__IR_FAIL(node, "weight rank %d != input rank %d", w->rank, x->rank);
    int64_t wc;
    if (!fbx_i64_mul(w->dims[1], group, &wc)) return FBX__IR_FAIL(node, "weight dim 1 x group overflows int64");
    if (node->op != FBX_IR_OP_CONV_TRANSPOSE) {
      if (x->dims[1] != wc)
        return FBX__IR_FAIL(node, "input channels %lld != %lld x group %lld", (long long)x->dims[1],
                            (long long)w->dims[1], (long long)group);
      ch = w->dims[0];
    } else {
      if (x->dims[1] != w->dims[0]) return FBX__IR_FAIL(node, "input channels %lld != weight dim0 %lld",
                                                        (long long)x->dims[1], (long long)w->dims[0]);
      ch = wc;
    }
    if (qint) {
      if (fbx__ir_present(in, n_in, 2) && fbx__ir_numel(&in[2]) != 1)
        return FBX__IR_FAIL(node, "x_zero_point has %lld elements, expected 1", (long long)fbx__ir_numel(&in[2]));
      if (fbx__ir_present(in, n_in, 3) && fbx__ir_numel(&in[3]) != 1 && fbx__ir_numel(&in[3]) != ch)
        return FBX__IR_FAIL(node, "w_zero_point has %lld elements, expected 1 or %lld",
                            (long long)fbx__ir_numel(&in[3]), (long long)ch);
    } else if (fbx__ir_present(in, n_in, 2) && fbx__ir_numel(&in[2]) != ch)
      return FBX__IR_FAIL(node, "bias has %lld elements, expected %lld", (long long)fbx__ir_numel(&in[2]), (long long)ch);
  } else {
    if (x->rank < 3) return FBX__IR_FAIL(node, "input rank %d < 3", x->rank);
    ch = x->dims[1];
  }
  FBX_TRY(fbx_ir_conv_geometry(node, x, w, k, pads, os));
  out->rank = x->rank;
  out->dims[0] = x->dims[0];
  out->dims[1] = ch;
  for (int i = 0; i < x->rank - 2; i++) out->dims[2 + i] = os[i];
  out->dtype = qint ? FBX_DTYPE_I32 : x->dtype;
  const fbx_ir_ew_program *ep = node->params.conv.epilogue;
  if (qint && ep && ep->out_reg >= ep->n_inputs) /* the epilogue's result (float after the Cast) */
    out->dtype = ep->instrs[ep->out_reg - ep->n_inputs].dtype;
  return NULL;
}

static fbx_status *fbx__ir_resize(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  const fbx_tensor *x = &in[0];
  *out = *x;
  out->data = NULL;
  if (fbx__ir_present(in, n_in, 3) && fbx__ir_numel(&in[3]) > 0) {
    FBX_TRY(fbx__ir_need_data(node, in, n_in, 3));
    if (fbx__ir_numel(&in[3]) != x->rank) return FBX__IR_FAIL(node, "sizes length != rank %d", x->rank);
    for (int i = 0; i < x->rank; i++) {
      out->dims[i] = fbx__ir_read_i64(&in[3], i);
      if (out->dims[i] < 1) /* as ONNX Runtime: a 0 or negative size is an invalid model */
        return FBX__IR_FAIL(node, "sizes[%d] is %lld: must be >= 1", i, (long long)out->dims[i]);
    }
    return NULL;
  }
  if (!(fbx__ir_present(in, n_in, 2) && fbx__ir_numel(&in[2]) > 0)) return FBX__IR_FAIL(node, "neither scales nor sizes");
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 2));
  if (fbx__ir_numel(&in[2]) != x->rank) return FBX__IR_FAIL(node, "scales length != rank %d", x->rank);
  bool crop = node->params.resize.coord == FBX_IR_COORD_TF_CROP_AND_RESIZE && fbx__ir_present(in, n_in, 1) &&
              fbx__ir_numel(&in[1]) == 2 * x->rank;
  if (crop) FBX_TRY(fbx__ir_need_data(node, in, n_in, 1));
  for (int i = 0; i < x->rank; i++) {
    double s = fbx__ir_read_f64(&in[2], i);
    if (!(s > 0)) return FBX__IR_FAIL(node, "scale %d is not positive", i);
    double ext = crop ? fbx__ir_read_f64(&in[1], x->rank + i) - fbx__ir_read_f64(&in[1], i) : 1.0;
    /* float arithmetic, as ONNX Runtime computes it */
    float d = (float)x->dims[i] * (float)ext * (float)s;
    if (!(d >= 0 && d < 0x1p62f)) return FBX__IR_FAIL(node, "scale %d gives output dim %g", i, (double)d);
    out->dims[i] = (int64_t)d;
  }
  return NULL;
}

static fbx_status *fbx__ir_topk(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 2);
  FBX_TRY(fbx__ir_need_data(node, in, n_in, 1));
  const fbx_tensor *x = &in[0];
  int axis = node->params.topk.axis;
  if (axis < 0 || axis >= x->rank) return FBX__IR_FAIL(node, "axis %d outside rank %d", axis, x->rank);
  if (fbx__ir_numel(&in[1]) != 1) return FBX__IR_FAIL(node, "k must have one element");
  int64_t k = fbx__ir_read_i64(&in[1], 0);
  if (k < 0 || k > x->dims[axis]) return FBX__IR_FAIL(node, "k=%lld outside 0..%lld", (long long)k, (long long)x->dims[axis]);
  out[0] = *x;
  out[0].data = NULL;
  out[0].dims[axis] = k;
  out[1] = out[0];
  out[1].dtype = FBX_DTYPE_I64;
  return NULL;
}

fbx_status *fbx__ir_infer_nn(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out, int n_out) {
  FBX__IR_NEED_IN(node, n_in, 1);
  if (in[0].rank < 0) return FBX__IR_FAIL(node, "input 0 missing");
  switch (node->op) {
    case FBX_IR_OP_CONV:
    case FBX_IR_OP_CONV_INT:
    case FBX_IR_OP_CONV_TRANSPOSE:
    case FBX_IR_OP_MAXPOOL:
    case FBX_IR_OP_AVGPOOL:
    case FBX_IR_OP_LPPOOL: return fbx__ir_conv(node, in, n_in, out);
    case FBX_IR_OP_GLOBAL_AVGPOOL:
    case FBX_IR_OP_GLOBAL_MAXPOOL:
      if (in[0].rank < 3) return FBX__IR_FAIL(node, "input rank %d < 3", in[0].rank);
      *out = in[0];
      out->data = NULL;
      for (int i = 2; i < out->rank; i++) out->dims[i] = 1;
      return NULL;
    case FBX_IR_OP_RESIZE: return fbx__ir_resize(node, in, n_in, out);
    case FBX_IR_OP_TOPK: return fbx__ir_topk(node, in, n_in, out);
    default: return FBX__IR_FAIL(node, "no shape inference for this op");
  }
}
