/* MatMul (numpy semantics incl. 1-D operands) and Gemm. */
#include <string.h>

#include "onnx_ops.h"

bool fbx__onnx_claim_matmul(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *a = fbx__onnx_cin(c, 0), *b = fbx__onnx_cin(c, 1);
  if (c->n->n_inputs != 2 || !a || !b) return fbx__onnx_fail(c, "expects 2 inputs");
  if (!fbx__onnx_dt_ok(c, a, FBX_ONNX_DT_F32_F64, "input A")) return false;
  if (b->dtype != a->dtype) return fbx__onnx_fail(c, "mixed input dtypes %s and %s", fbx_dtype_name(a->dtype),
                                                  fbx_dtype_name(b->dtype));
  if (a->rank < 1 || b->rank < 1) return fbx__onnx_fail(c, "scalar operands not allowed");
  return true;
}

static fbx_ir_params fbx__onnx_mm_params(int ta, int tb, float alpha) {
  fbx_ir_params p;
  memset(&p, 0, sizeof p);
  p.matmul.trans_a = ta;
  p.matmul.trans_b = tb;
  p.matmul.alpha = alpha;
  return p;
}

/* 1-D operands: A [K] -> [1,K], B [K] -> [K,1]; the added dim is squeezed
 * from the result again (numpy matmul). */
fbx_status *fbx__onnx_tr_matmul(fbx_onnx_tctx *t) {
  const fbx_onnx_value *av = fbx__onnx_tin_value(t, 0), *bv = fbx__onnx_tin_value(t, 1);
  fbx_dtype dt = av->dtype;
  int a, b;
  FBX_TRY(fbx__onnx_tin(t, 0, &a));
  FBX_TRY(fbx__onnx_tin(t, 1, &b));
  fbx_ir_params mp = fbx__onnx_mm_params(0, 0, 1.0f);
  bool a1 = av->rank == 1, b1 = bv->rank == 1;
  if (!a1 && !b1) {
    int ins[2] = {a, b};
    return fbx__onnx_emit_out(t, FBX_IR_OP_MATMUL, ins, 2, &mp);
  }
  fbx_ir_params up;
  memset(&up, 0, sizeof up);
  if (a1) {
    up.axes.axes_mask = 1u << 0;
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_UNSQUEEZE, &a, 1, &up, dt, 2, &a));
  }
  if (b1) {
    up.axes.axes_mask = 1u << 1;
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_UNSQUEEZE, &b, 1, &up, dt, 2, &b));
  }
  int ra = a1 ? 2 : av->rank, rb = b1 ? 2 : bv->rank;
  int r = ra > rb ? ra : rb;
  int ins[2] = {a, b}, mm;
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_MATMUL, ins, 2, &mp, dt, r, &mm));
  fbx_ir_params sp;
  memset(&sp, 0, sizeof sp);
  if (a1) sp.axes.axes_mask |= 1u << (r - 2);
  if (b1) sp.axes.axes_mask |= 1u << (r - 1);
  return fbx__onnx_emit_out(t, FBX_IR_OP_SQUEEZE, &mm, 1, &sp);
}

bool fbx__onnx_claim_gemm(const fbx_onnx_cctx *c) {
  const fbx_onnx_value *a = fbx__onnx_cin(c, 0), *b = fbx__onnx_cin(c, 1), *cc = fbx__onnx_cin(c, 2);
  if (!a || !b) return fbx__onnx_fail(c, "expects inputs A and B");
  if (!fbx__onnx_dt_ok(c, a, FBX_ONNX_DT_F32_F64, "input A")) return false;
  if (b->dtype != a->dtype || (cc && cc->dtype != a->dtype)) return fbx__onnx_fail(c, "mixed input dtypes");
  if (a->rank != 2 || b->rank != 2) return fbx__onnx_fail(c, "A and B must be 2-D");
  if (cc && cc->rank > 2) return fbx__onnx_fail(c, "C rank %d > 2", cc->rank);
  if (!cc && c->n->opset < 11) return fbx__onnx_fail(c, "input C missing");
  return true;
}

/* Y = alpha * op(A) op(B) + beta * C, C broadcast to (M, N). */
fbx_status *fbx__onnx_tr_gemm(fbx_onnx_tctx *t) {
  const fbx_onnx_node *n = t->n;
  fbx_dtype dt = fbx__onnx_tin_value(t, 0)->dtype;
  fbx_ir_params mp = fbx__onnx_mm_params(fbx_onnx_attr_int(n, "transA", 0) != 0,
                                         fbx_onnx_attr_int(n, "transB", 0) != 0, fbx_onnx_attr_float(n, "alpha", 1.0f));
  float beta = fbx_onnx_attr_float(n, "beta", 1.0f);
  int ins[2], cin;
  FBX_TRY(fbx__onnx_tin(t, 0, &ins[0]));
  FBX_TRY(fbx__onnx_tin(t, 1, &ins[1]));
  FBX_TRY(fbx__onnx_tin(t, 2, &cin));
  if (cin == FBX_IR_NONE || beta == 0.0f) return fbx__onnx_emit_out(t, FBX_IR_OP_MATMUL, ins, 2, &mp);
  int mm;
  FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_MATMUL, ins, 2, &mp, dt, 2, &mm));
  if (beta != 1.0f) {
    int bins[2] = {cin, 0};
    FBX_TRY(fbx__onnx_const_scalar(t, dt, beta, &bins[1]));
    FBX_TRY(fbx__onnx_emit(t, FBX_IR_OP_MUL, bins, 2, NULL, dt, fbx__onnx_tin_value(t, 2)->rank, &cin));
  }
  int ains[2] = {mm, cin};
  return fbx__onnx_emit_out(t, FBX_IR_OP_ADD, ains, 2, NULL);
}
