/* Conv / ConvTranspose / pool geometry: the one place where output sizes and
 * the begin/end pads are worked out from the input shape and the attributes
 * (auto_pad resolved here). Shape inference and the CPU conv and pool kernels
 * all call fbx_ir_conv_geometry, so they cannot disagree.
 *
 * Per spatial axis, with s = stride, d = dilation, ek = d * (k - 1) + 1 (the
 * effective kernel extent), in = input size:
 *   Conv / pool, SAME_*:  out = ceil(in / s), total = max(0, (out - 1) * s + ek - in)
 *   Conv / pool, else:    out = floor((in + pb + pe - ek) / s) + 1  (ceil for pools with
 *                         ceil_mode, dropping a last window that starts in the end pad;
 *                         VALID: floor always, as the spec's VALID ceil formula amounts to);
 *                         a pool's out <= 0 (window wider than the padded input) is 0, an
 *                         empty output; a Conv's is an error
 *   ConvTranspose:        full = s * (in - 1) + output_padding + ek
 *     output_shape given: out = output_shape, total = max(0, full - out)
 *     SAME_*:             total = max(0, full - in * s), out = full - total (in * s as
 *                         the spec says, except where the kernel is shorter than the
 *                         stride: then ORT gives full, unpadded, and so do we)
 *     else:               out = full - pb - pe
 *   The split of an odd total (ONNX spec; ORT >= 1.13 for ConvTranspose as well):
 *     SAME_UPPER: pb = total / 2 (the extra pad goes at the end);
 *     SAME_LOWER, and ConvTranspose output_shape with NOTSET: pb = total - total / 2.
 * Arithmetic is 128-bit, so no attribute or dim can overflow; results that do
 * not fit int64 are errors. */
#include "ir_shape_util.h"

typedef __int128 fbx__i128;

static fbx__i128 fbx__ir_ceil_div(fbx__i128 a, fbx__i128 b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
static fbx__i128 fbx__ir_floor_div(fbx__i128 a, fbx__i128 b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static bool fbx__ir_fits(fbx__i128 v) { return v >= INT64_MIN && v <= INT64_MAX; }

fbx_status *fbx_ir_conv_geometry(const fbx_ir_node *node, const fbx_tensor *x, const fbx_tensor *w,
                                 int64_t kernel[3], int64_t pads[6], int64_t out_spatial[3]) {
  const typeof(node->params.conv) *cp = &node->params.conv;
  int nd = x->rank - 2;
  if (nd < 1 || nd > 3) return FBX__IR_FAIL(node, "input rank %d: need 1..3 spatial dims", x->rank);
  if (cp->nd && cp->nd != nd) return FBX__IR_FAIL(node, "params say %d spatial dims, input has %d", cp->nd, nd);
  bool transpose = node->op == FBX_IR_OP_CONV_TRANSPOSE;
  bool pool = !(node->op == FBX_IR_OP_CONV || node->op == FBX_IR_OP_CONV_INT || transpose);
  bool same = cp->auto_pad == FBX_IR_PAD_SAME_UPPER || cp->auto_pad == FBX_IR_PAD_SAME_LOWER;
  bool upper = cp->auto_pad == FBX_IR_PAD_SAME_UPPER;
  for (int i = 0; i < nd; i++) {
    int64_t k = cp->kernel[i];
    if (k <= 0 && w) k = w->rank == x->rank ? w->dims[2 + i] : 0;
    if (k <= 0) return FBX__IR_FAIL(node, "kernel size of dim %d unknown", i);
    kernel[i] = k;
    fbx__i128 in = x->dims[2 + i];
    fbx__i128 s = cp->strides[i] > 0 ? cp->strides[i] : 1, d = cp->dilations[i] > 0 ? cp->dilations[i] : 1;
    fbx__i128 ek = d * (k - 1) + 1;
    fbx__i128 pb = cp->pads[i], pe = cp->pads[nd + i], out, total = -1;
    if (transpose) {
      fbx__i128 full = s * (in - 1) + cp->output_padding[i] + ek;
      if (cp->output_shape[i] > 0) {
        out = cp->output_shape[i];
        total = full - out > 0 ? full - out : 0;
      } else if (same) {
        total = full - in * s > 0 ? full - in * s : 0;
        out = full - total;
      } else {
        if (cp->auto_pad == FBX_IR_PAD_VALID) pb = pe = 0;
        out = full - pb - pe;
      }
    } else if (same) {
      out = fbx__ir_ceil_div(in, s);
      total = (out - 1) * s + ek - in;
      if (total < 0) total = 0;
    } else {
      bool valid = cp->auto_pad == FBX_IR_PAD_VALID;
      if (valid) pb = pe = 0;
      fbx__i128 num = in + pb + pe - ek;
      if (num < 0 && !pool)
        return FBX__IR_FAIL(node, "kernel extent %lld exceeds padded input %lld in dim %d",
                            fbx__ir_fits(ek) ? (long long)ek : -1LL,
                            fbx__ir_fits(in + pb + pe) ? (long long)(in + pb + pe) : -1LL, i);
      /* VALID: the spec's ceil((in - ek + 1) / s) with ceil_mode is floor((in - ek) / s) + 1,
       * the same size as without it */
      if (pool && cp->ceil_mode && !valid) {
        out = fbx__ir_ceil_div(num, s) + 1;
        if (out > 0 && (out - 1) * s >= in + pb) out--; /* last window must start inside the input or left pad */
      } else {
        out = fbx__ir_floor_div(num, s) + 1;
      }
      /* a pool window wider than the (padded) input: out <= 0 by the spec's formula, an
       * empty output (as ORT returns); the kernels then write nothing */
      if (pool && out < 0) out = 0;
    }
    if (total >= 0) {
      pb = upper ? total / 2 : total - total / 2;
      pe = total - pb;
    }
    if (out < 0) return FBX__IR_FAIL(node, "negative output size in dim %d", i);
    if (!fbx__ir_fits(out) || !fbx__ir_fits(pb) || !fbx__ir_fits(pe) || !fbx__ir_fits(ek))
      return FBX__IR_FAIL(node, "geometry of dim %d overflows int64 (kernel, stride, dilation or pads too large)", i);
    pads[i] = (int64_t)pb;
    pads[nd + i] = (int64_t)pe;
    out_spatial[i] = (int64_t)out;
  }
  return NULL;
}
