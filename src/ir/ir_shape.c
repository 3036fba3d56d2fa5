/* Shape inference, part 1: dispatch, helpers, elementwise (numpy
 * broadcasting), fused programs, MatMul, normalisation, reductions.
 * Data movement is in ir_shape_move.c, conv/pool/resize in ir_shape_nn.c. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ir_shape_util.h"

fbx_status *fbx__ir_shape_error(const fbx_ir_node *node, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return FBX_ERR_ARG("shape inference: %s '%s' (%s): %s", fbx_ir_op_name(node->op),
                     node->name ? node->name : "", node->onnx_op ? node->onnx_op : "", msg);
}

/* double -> int64 without the undefined behaviour of an out-of-range cast:
 * saturates, NaN reads 0 (shape data this wrong then fails a later check). */
static int64_t fbx__ir_f64_to_i64(double v) {
  if (!(v == v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

int64_t fbx__ir_read_i64(const fbx_tensor *t, int64_t i) {
  const void *p = t->data;
  switch (t->dtype) {
    case FBX_DTYPE_I64: return ((const int64_t *)p)[i];
    case FBX_DTYPE_I32: return ((const int32_t *)p)[i];
    case FBX_DTYPE_I16: return ((const int16_t *)p)[i];
    case FBX_DTYPE_I8: return ((const int8_t *)p)[i];
    case FBX_DTYPE_U8:
    case FBX_DTYPE_BOOL: return ((const uint8_t *)p)[i];
    case FBX_DTYPE_U16: return ((const uint16_t *)p)[i];
    case FBX_DTYPE_U32: return ((const uint32_t *)p)[i];
    case FBX_DTYPE_U64: return (int64_t)((const uint64_t *)p)[i];
    case FBX_DTYPE_F32: return fbx__ir_f64_to_i64(((const float *)p)[i]);
    case FBX_DTYPE_F64: return fbx__ir_f64_to_i64(((const double *)p)[i]);
    case FBX_DTYPE_F16: return fbx__ir_f64_to_i64(fbx_f16_to_f32(((const uint16_t *)p)[i]));
    default: return 0;
  }
}

double fbx__ir_read_f64(const fbx_tensor *t, int64_t i) {
  switch (t->dtype) {
    case FBX_DTYPE_F32: return ((const float *)t->data)[i];
    case FBX_DTYPE_F64: return ((const double *)t->data)[i];
    case FBX_DTYPE_F16: return fbx_f16_to_f32(((const uint16_t *)t->data)[i]);
    case FBX_DTYPE_U64: return (double)((const uint64_t *)t->data)[i];
    default: return (double)fbx__ir_read_i64(t, i);
  }
}

fbx_status *fbx__ir_need_data(const fbx_ir_node *node, const fbx_tensor *in, int n, int i) {
  if (i >= n || in[i].rank < 0) return FBX__IR_FAIL(node, "input %d is required", i);
  if (!in[i].data && fbx__ir_numel(&in[i]) > 0)
    return FBX__IR_FAIL(node, "input %d must be host-readable (shape data)", i);
  if (!fbx_dtype_size(in[i].dtype)) return FBX__IR_FAIL(node, "input %d has unknown dtype", i);
  return NULL;
}

/* Every value shape inference produces is a valid shape (base/checked.h):
 * its element count and byte size fit, so kernels and buffer sizing can
 * multiply dims without overflow. The message is built only on failure. */
static fbx_status *fbx__ir_check_size(const fbx_ir_node *node, int o, const fbx_tensor *t) {
  size_t es = fbx_dtype_size(t->dtype), bytes;
  int64_t n;
  if (fbx_dims_numel(t->dims, t->rank, &n) && fbx_size_mul((size_t)n, es ? es : 1, &bytes) &&
      (uint64_t)bytes <= FBX_TENSOR_MAX_BYTES)
    return NULL;
  char what[192];
  snprintf(what, sizeof what, "%s '%s' output %d", node->onnx_op && node->onnx_op[0] ? node->onnx_op : fbx_ir_op_name(node->op),
           node->name ? node->name : "", o);
  fbx_status *st = fbx_shape_bytes_checked(t->dims, t->rank, es ? es : 1, what, &bytes);
  return st ? st : FBX__IR_FAIL(node, "output %d: invalid shape", o);
}

/* ---- elementwise ---- */

/* Broadcast b into out (out already holds the running shape). */
static fbx_status *fbx__ir_bcast(const fbx_ir_node *node, fbx_tensor *out, const fbx_tensor *b) {
  int r = out->rank > b->rank ? out->rank : b->rank;
  if (r > FBX_MAX_RANK) return FBX__IR_FAIL(node, "rank %d too large", r);
  int64_t d[FBX_MAX_RANK];
  for (int i = 0; i < r; i++) {
    int ia = i - (r - out->rank), ib = i - (r - b->rank);
    int64_t x = ia >= 0 ? out->dims[ia] : 1, y = ib >= 0 ? b->dims[ib] : 1;
    if (x == y || y == 1) d[i] = x;
    else if (x == 1) d[i] = y;
    else return FBX__IR_FAIL(node, "cannot broadcast dim %d: %lld vs %lld", i, (long long)x, (long long)y);
  }
  out->rank = r;
  memcpy(out->dims, d, sizeof(int64_t) * (size_t)r);
  return NULL;
}

static bool fbx__ir_ew_bool_out(fbx_ir_op op) {
  switch (op) {
    case FBX_IR_OP_EQUAL: case FBX_IR_OP_LESS: case FBX_IR_OP_LESS_EQUAL: case FBX_IR_OP_GREATER:
    case FBX_IR_OP_GREATER_EQUAL: case FBX_IR_OP_ISNAN: case FBX_IR_OP_ISINF: case FBX_IR_OP_NOT:
    case FBX_IR_OP_AND: case FBX_IR_OP_OR: case FBX_IR_OP_XOR:
      return true;
    default: return false;
  }
}

fbx_dtype fbx_ir_ew_out_dtype(fbx_ir_op op, const fbx_ir_params *p, const fbx_dtype *in_dtypes, int n) {
  if (fbx__ir_ew_bool_out(op)) return FBX_DTYPE_BOOL;
  if (op == FBX_IR_OP_CAST) return p ? p->ew.to : FBX_DTYPE_UNDEFINED;
  if (op == FBX_IR_OP_WHERE) return n > 1 ? in_dtypes[1] : FBX_DTYPE_UNDEFINED;
  return n > 0 ? in_dtypes[0] : FBX_DTYPE_UNDEFINED;
}

static fbx_status *fbx__ir_infer_ew(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  int need = fbx_ir_op_class(node->op);
  if (node->op == FBX_IR_OP_FUSED_EW) {
    const fbx_ir_ew_program *pg = node->params.fused.prog;
    if (!pg) return FBX__IR_FAIL(node, "no program");
    need = pg->n_inputs;
  }
  FBX__IR_NEED_IN(node, n_in, need);
  out->rank = 0;
  for (int i = 0; i < need; i++) {
    if (in[i].rank < 0) return FBX__IR_FAIL(node, "input %d missing", i);
    FBX_TRY(fbx__ir_bcast(node, out, &in[i]));
  }
  if (node->op == FBX_IR_OP_FUSED_EW) {
    const fbx_ir_ew_program *pg = node->params.fused.prog;
    if (pg->out_reg < pg->n_inputs) out->dtype = in[pg->out_reg].dtype;
    else out->dtype = pg->instrs[pg->out_reg - pg->n_inputs].dtype;
  } else {
    fbx_dtype dts[3];
    for (int i = 0; i < need; i++) dts[i] = in[i].dtype;
    out->dtype = fbx_ir_ew_out_dtype(node->op, &node->params, dts, need);
  }
  if (!fbx_dtype_size(out->dtype)) return FBX__IR_FAIL(node, "bad output dtype %d", (int)out->dtype);
  return NULL;
}

/* ---- MatMul: numpy semantics, 1-D operands, batch broadcast, trans_a/b ---- */
static fbx_status *fbx__ir_infer_matmul(const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                                        fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 2);
  const fbx_tensor *a = &in[0], *b = &in[1];
  if (a->rank < 1 || b->rank < 1) return FBX__IR_FAIL(node, "operands must have rank >= 1");
  fbx_tensor A = *a, B = *b;
  bool a1 = a->rank == 1, b1 = b->rank == 1;
  if (a1) { A.rank = 2; A.dims[0] = 1; A.dims[1] = a->dims[0]; }
  else if (node->params.matmul.trans_a) {
    int64_t t = A.dims[A.rank - 1]; A.dims[A.rank - 1] = A.dims[A.rank - 2]; A.dims[A.rank - 2] = t;
  }
  if (b1) { B.rank = 2; B.dims[0] = b->dims[0]; B.dims[1] = 1; }
  else if (node->params.matmul.trans_b) {
    int64_t t = B.dims[B.rank - 1]; B.dims[B.rank - 1] = B.dims[B.rank - 2]; B.dims[B.rank - 2] = t;
  }
  int64_t M = A.dims[A.rank - 2], K = A.dims[A.rank - 1], K2 = B.dims[B.rank - 2], N = B.dims[B.rank - 1];
  if (K != K2) return FBX__IR_FAIL(node, "inner dims differ: %lld vs %lld", (long long)K, (long long)K2);
  fbx_tensor ba = {.rank = A.rank - 2}, bb = {.rank = B.rank - 2};
  memcpy(ba.dims, A.dims, sizeof(int64_t) * (size_t)ba.rank);
  memcpy(bb.dims, B.dims, sizeof(int64_t) * (size_t)bb.rank);
  FBX_TRY(fbx__ir_bcast(node, &ba, &bb));
  int r = ba.rank;
  if (!a1) ba.dims[r++] = M;
  if (!b1) ba.dims[r++] = N;
  if (r > FBX_MAX_RANK) return FBX__IR_FAIL(node, "rank too large");
  out->rank = r;
  memcpy(out->dims, ba.dims, sizeof(int64_t) * (size_t)r);
  out->dtype = a->dtype;
  if (n_in > 2 && in[2].rank >= 0) { /* optional bias: must broadcast to the output */
    fbx_tensor t = *out;
    FBX_TRY(fbx__ir_bcast(node, &t, &in[2]));
    if (t.rank != out->rank || memcmp(t.dims, out->dims, sizeof(int64_t) * (size_t)r))
      return FBX__IR_FAIL(node, "bias does not broadcast to the output");
  }
  return NULL;
}

/* ---- reductions ---- */
static fbx_status *fbx__ir_infer_reduce(const fbx_ir_node *node, const fbx_tensor *in, int n_in,
                                        fbx_tensor *out, uint32_t mask, int keepdims) {
  FBX__IR_NEED_IN(node, n_in, 1);
  const fbx_tensor *x = &in[0];
  if (x->rank < 0) return FBX__IR_FAIL(node, "input missing");
  if (mask == 0) mask = x->rank >= 32 ? 0xffffffffu : ((1u << x->rank) - 1u);
  if (x->rank < 32 && (mask >> x->rank)) return FBX__IR_FAIL(node, "axes mask 0x%x outside rank %d", mask, x->rank);
  int r = 0;
  for (int i = 0; i < x->rank; i++) {
    if (mask & (1u << i)) {
      if (keepdims) out->dims[r++] = 1;
    } else {
      out->dims[r++] = x->dims[i];
    }
  }
  out->rank = r;
  out->dtype = x->dtype;
  return NULL;
}

static fbx_status *fbx__ir_infer_same(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out) {
  FBX__IR_NEED_IN(node, n_in, 1);
  if (in[0].rank < 0) return FBX__IR_FAIL(node, "input missing");
  out->rank = in[0].rank;
  memcpy(out->dims, in[0].dims, sizeof(int64_t) * (size_t)in[0].rank);
  out->dtype = in[0].dtype;
  return NULL;
}

static fbx_status *fbx__ir_infer_norm(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out,
                                      int n_out) {
  FBX_TRY(fbx__ir_infer_same(node, in, n_in, &out[0]));
  int axis = node->params.norm.axis;
  if (node->op == FBX_IR_OP_LAYER_NORM && (axis < 0 || axis > in[0].rank))
    return FBX__IR_FAIL(node, "axis %d outside rank %d", axis, in[0].rank);
  if (node->op == FBX_IR_OP_INSTANCE_NORM) { /* scale, B: [C] */
    if (in[0].rank < 3) return FBX__IR_FAIL(node, "input rank %d < 3", in[0].rank);
    for (int i = 1; i <= 2; i++)
      if (!fbx__ir_present(in, n_in, i) || in[i].rank != 1 || in[i].dims[0] != in[0].dims[1])
        return FBX__IR_FAIL(node, "%s must be [%lld] (the channel count)", i == 1 ? "scale" : "B",
                            (long long)in[0].dims[1]);
  }
  for (int o = 1; o < n_out; o++) { /* LayerNorm Mean / InvStdDev: dims >= axis become 1 */
    out[o] = out[0];
    out[o].dtype = FBX_DTYPE_F32;
    for (int i = axis; i < out[o].rank; i++) out[o].dims[i] = 1;
  }
  return NULL;
}

static int fbx__ir_expected_outputs(const fbx_ir_node *node) {
  switch (node->op) {
    case FBX_IR_OP_SPLIT: return -1;
    case FBX_IR_OP_TOPK: return 2;
    case FBX_IR_OP_LAYER_NORM: return -3;
    case FBX_IR_OP_SKIP_NORM: return -3;
    case FBX_IR_OP_GQA: return 3;
    case FBX_IR_OP_LSTM: return 3;
    case FBX_IR_OP_GRU: case FBX_IR_OP_RNN: return 2;
    case FBX_IR_OP_DYN_QUANT: return 3;
    case FBX_IR_OP_IF: case FBX_IR_OP_LOOP: case FBX_IR_OP_SCAN: return -1;
    default: return 1;
  }
}

fbx_status *fbx_ir_infer_node(const fbx_ir_node *node, const fbx_tensor *inputs, int n_inputs,
                              fbx_tensor *outputs, int n_outputs) {
  if (!node || (n_inputs > 0 && !inputs) || !outputs || n_outputs < 1)
    return FBX_ERR_ARG("fbx_ir_infer_node: bad arguments");
  int want = fbx__ir_expected_outputs(node);
  if ((want > 0 && n_outputs != want) || (want < -1 && n_outputs > -want))
    return FBX__IR_FAIL(node, "%d outputs given", n_outputs);
  for (int i = 0; i < n_inputs; i++)
    if (inputs[i].rank > FBX_MAX_RANK) return FBX__IR_FAIL(node, "input %d rank %d too large", i, inputs[i].rank);
  for (int o = 0; o < n_outputs; o++) outputs[o].rank = 0;
  const fbx_ir_params *p = &node->params;
  fbx_status *st;
  switch (node->op) {
    case FBX_IR_OP_FUSED_EW: st = fbx__ir_infer_ew(node, inputs, n_inputs, outputs); break;
    case FBX_IR_OP_MATMUL: st = fbx__ir_infer_matmul(node, inputs, n_inputs, outputs); break;
    case FBX_IR_OP_DYN_QUANT:
      FBX__IR_NEED_IN(node, n_inputs, 1);
      if (inputs[0].rank < 0) return FBX__IR_FAIL(node, "input 0 missing");
      outputs[0] = inputs[0];
      outputs[0].data = NULL;
      outputs[0].dtype = FBX_DTYPE_U8;
      memset(&outputs[1], 0, sizeof outputs[1]);
      outputs[1].dtype = FBX_DTYPE_F32;
      memset(&outputs[2], 0, sizeof outputs[2]);
      outputs[2].dtype = FBX_DTYPE_U8;
      st = NULL;
      break;
    case FBX_IR_OP_MATMUL_INT: /* inputs 2, 3 are zero points (1 or M / N entries), not a bias */
      st = fbx__ir_infer_matmul(node, inputs, n_inputs < 2 ? n_inputs : 2, outputs);
      if (!st) outputs[0].dtype = FBX_DTYPE_I32;
      if (!st && p->matmul.epilogue && p->matmul.epilogue->out_reg >= p->matmul.epilogue->n_inputs)
        outputs[0].dtype = p->matmul.epilogue->instrs[p->matmul.epilogue->out_reg - p->matmul.epilogue->n_inputs].dtype;
      break;
    case FBX_IR_OP_SOFTMAX:
    case FBX_IR_OP_LOG_SOFTMAX:
    case FBX_IR_OP_HARDMAX:
      st = fbx__ir_infer_same(node, inputs, n_inputs, outputs);
      if (!st && (p->axis.axis < 0 || (p->axis.axis >= outputs[0].rank && outputs[0].rank > 0)))
        st = FBX__IR_FAIL(node, "axis %d outside rank %d", p->axis.axis, outputs[0].rank);
      break;
    case FBX_IR_OP_LAYER_NORM:
    case FBX_IR_OP_INSTANCE_NORM: st = fbx__ir_infer_norm(node, inputs, n_inputs, outputs, n_outputs); break;
    case FBX_IR_OP_REDUCE_SUM: case FBX_IR_OP_REDUCE_MEAN: case FBX_IR_OP_REDUCE_MAX:
    case FBX_IR_OP_REDUCE_MIN: case FBX_IR_OP_REDUCE_PROD: case FBX_IR_OP_REDUCE_L1:
    case FBX_IR_OP_REDUCE_L2: case FBX_IR_OP_REDUCE_LOG_SUM: case FBX_IR_OP_REDUCE_LOG_SUM_EXP:
    case FBX_IR_OP_REDUCE_SUM_SQUARE:
      st = fbx__ir_infer_reduce(node, inputs, n_inputs, outputs, p->reduce.axes_mask, p->reduce.keepdims);
      break;
    case FBX_IR_OP_ARGMAX:
    case FBX_IR_OP_ARGMIN:
      if (n_inputs >= 1 && inputs[0].rank >= 0 && (p->arg.axis < 0 || p->arg.axis >= (inputs[0].rank ? inputs[0].rank : 1)))
        return FBX__IR_FAIL(node, "axis %d outside rank %d", p->arg.axis, inputs[0].rank);
      st = fbx__ir_infer_reduce(node, inputs, n_inputs, outputs, inputs[0].rank ? 1u << p->arg.axis : 0,
                                p->arg.keepdims);
      outputs[0].dtype = FBX_DTYPE_I64;
      break;
    case FBX_IR_OP_SKIP_NORM:
    case FBX_IR_OP_MATMUL_NBITS:
    case FBX_IR_OP_GQA:
    case FBX_IR_OP_ROTARY: st = fbx__ir_infer_msft(node, inputs, n_inputs, outputs, n_outputs); break;
    case FBX_IR_OP_LSTM:
    case FBX_IR_OP_GRU:
    case FBX_IR_OP_RNN: st = fbx__ir_infer_rnn(node, inputs, n_inputs, outputs, n_outputs); break;
    case FBX_IR_OP_IF: /* exec_run.c runs the branch, which gives the shapes; nothing folds an IF */
      return FBX__IR_FAIL(node, "output shapes come from the branch taken, at run time");
    case FBX_IR_OP_LOOP: /* exec_control.c runs the body; the iterations give the shapes */
    case FBX_IR_OP_SCAN: return FBX__IR_FAIL(node, "output shapes come from the body's iterations, at run time");
    case FBX_IR_OP_CUMSUM:
    case FBX_IR_OP_TRILU:
    case FBX_IR_OP_LRN:
    case FBX_IR_OP_SCATTER_ELEMENTS:
    case FBX_IR_OP_SCATTER_ND:
      st = fbx__ir_infer_same(node, inputs, n_inputs, outputs);
      break;
    default:
      if (fbx_ir_op_class(node->op) != FBX_IR_CLASS_OTHER) {
        st = fbx__ir_infer_ew(node, inputs, n_inputs, outputs);
        break;
      }
      st = fbx__ir_infer_move(node, inputs, n_inputs, outputs, n_outputs);
      if (st && fbx_status_code_of(st) == FBX_STATUS_NOT_IMPLEMENTED) {
        fbx_status_free(st);
        st = fbx__ir_infer_nn(node, inputs, n_inputs, outputs, n_outputs);
      }
      break;
  }
  if (st) return st;
  for (int o = 0; o < n_outputs; o++) {
    for (int i = 0; i < outputs[o].rank; i++)
      if (outputs[o].dims[i] < 0)
        return FBX__IR_FAIL(node, "output %d dim %d is negative (%lld)", o, i, (long long)outputs[o].dims[i]);
    FBX_TRY(fbx__ir_check_size(node, o, &outputs[o]));
  }
  return NULL;
}

void fbx_ir_infer_node_known(const fbx_ir_node *n, fbx_tensor *sh, bool *known) {
  fbx_tensor in[FBX_IR_MAX_INPUTS], out[FBX_IR_MAX_OUTPUTS];
  if (n->n_inputs > FBX_IR_MAX_INPUTS || n->n_outputs > FBX_IR_MAX_OUTPUTS) return;
  for (int i = 0; i < n->n_inputs; i++) {
    int v = n->inputs[i];
    if (v == FBX_IR_NONE) {
      memset(&in[i], 0, sizeof in[i]);
      in[i].rank = -1;
      continue;
    }
    if (!known[v]) return;
    in[i] = sh[v];
  }
  memset(out, 0, sizeof(fbx_tensor) * (size_t)n->n_outputs);
  fbx_status *st = fbx_ir_infer_node(n, in, n->n_inputs, out, n->n_outputs);
  if (st) {
    fbx_status_free(st);
    return;
  }
  for (int o = 0; o < n->n_outputs; o++) {
    sh[n->outputs[o]] = out[o];
    sh[n->outputs[o]].data = NULL;
    known[n->outputs[o]] = true;
  }
}
