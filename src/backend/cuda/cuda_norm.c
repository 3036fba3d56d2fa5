/* Softmax, norms and reductions on CUDA (kernels in cuda_norm.cu), float32.
 * The host side only views the tensors as (outer, n, inner) or as kept /
 * reduced index spaces. */
#include <string.h>

#include "cuda_internal.h"

bool fbx_cuda_s_f32(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size) {
  if (node->op == FBX_IR_OP_LAYER_NORM && node->n_outputs > 1 && node->outputs &&
      (node->outputs[1] != FBX_IR_NONE || (node->n_outputs > 2 && node->outputs[2] != FBX_IR_NONE))) {
    snprintf(why, why_size, "LAYER_NORM with Mean/InvStdDev outputs");
    return false;
  }
  for (int i = 0; i < n_in; i++) {
    if (in[i].rank < 0) continue;
    bool index_input = (node->op == FBX_IR_OP_RESIZE && i > 0);
    if (!index_input && in[i].dtype != FBX_DTYPE_F32) {
      snprintf(why, why_size, "%s with input %d of dtype %s (float32 only)", fbx_ir_op_name(node->op), i,
               fbx_dtype_name(in[i].dtype));
      return false;
    }
  }
  return true;
}

/* Reductions: float32, and REDUCE_SUM of int32 / int64 (GenAI's seqlens_k = ReduceSum of the
 * int64 attention mask, which keeps the whole mask chain on the device). */
bool fbx_cuda_s_reduce(const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why, size_t why_size) {
  if (node->op == FBX_IR_OP_REDUCE_SUM && n_in >= 1 && (in[0].dtype == FBX_DTYPE_I64 || in[0].dtype == FBX_DTYPE_I32))
    return true;
  return fbx_cuda_s_f32(node, in, n_in, why, why_size);
}

fbx_status *fbx_cuda_k_softmax(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  int axis = node->params.axis.axis;
  if (axis < 0 || axis >= x->rank) return FBX_ERR_ARG("device 'cuda': %s: axis %d", fbx_ir_op_name(node->op), axis);
  int64_t outer = 1, inner = 1, n = x->dims[axis];
  for (int d = 0; d < axis; d++) outer *= x->dims[d];
  for (int d = axis + 1; d < x->rank; d++) inner *= x->dims[d];
  int mode = node->op == FBX_IR_OP_LOG_SOFTMAX ? 1 : node->op == FBX_IR_OP_HARDMAX ? 2 : 0;
  info->variant = inner == 1 ? "softmax_rows" : "softmax_cols";
  info->reason = inner == 1 ? "last axis: one block per row" : "inner axis: one thread per column";
  return fbx_cuda_launched(fbx_cuda_launch_softmax(x->data, out[0].data, outer, n, inner, mode, c->stream),
                           fbx_ir_op_name(node->op));
}

fbx_status *fbx_cuda_k_layer_norm(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (n_in < 2) return FBX_ERR_ARG("device 'cuda': LAYER_NORM: needs X and scale");
  int axis = node->params.norm.axis;
  if (axis < 0 || axis > x->rank) return FBX_ERR_ARG("device 'cuda': LAYER_NORM: axis %d", axis);
  if (n_out > 1 && out[1].data)
    return FBX_ERR_NOTIMPL("device 'cuda': LAYER_NORM: mean/inv-std outputs not implemented");
  int64_t rows = 1, cols = 1;
  for (int d = 0; d < axis; d++) rows *= x->dims[d];
  for (int d = axis; d < x->rank; d++) cols *= x->dims[d];
  int64_t sn = fbx_tensor_numel(&in[1]), bn = 0;
  const float *bias = NULL;
  if (fbx_cuda_present(in, n_in, 2)) {
    bias = in[2].data;
    bn = fbx_tensor_numel(&in[2]);
  }
  if (sn < 1 || cols % sn || (bias && (bn < 1 || cols % bn)))
    return FBX_ERR_NOTIMPL("device 'cuda': LAYER_NORM: scale/bias shape does not broadcast as a suffix");
  info->variant = "layernorm_rows";
  return fbx_cuda_launched(fbx_cuda_launch_layernorm(x->data, in[1].data, sn, bias, bn, out[0].data, rows, cols,
                                                     node->params.norm.epsilon, c->stream),
                           "LAYER_NORM");
}

fbx_status *fbx_cuda_k_instance_norm(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  if (n_in < 3 || x->rank < 2) return FBX_ERR_ARG("device 'cuda': INSTANCE_NORM: needs X (N, C, ...), scale, bias");
  int64_t S = 1;
  for (int d = 2; d < x->rank; d++) S *= x->dims[d];
  info->variant = "instnorm_rows";
  return fbx_cuda_launched(fbx_cuda_launch_instnorm(x->data, in[1].data, in[2].data, out[0].data, x->dims[0],
                                                    x->dims[1], S, node->params.norm.epsilon, c->stream),
                           "INSTANCE_NORM");
}

fbx_status *fbx_cuda_k_reduce(FBX_CUDA_KERNEL_ARGS) {
  const fbx_tensor *x = &in[0];
  fbx_cuda_reduce_args a;
  memset(&a, 0, sizeof a);
  a.op = node->op;
  a.x = x->data;
  a.y = out[0].data;
  if (x->dtype == FBX_DTYPE_I64 || x->dtype == FBX_DTYPE_I32) {
    if (node->op != FBX_IR_OP_REDUCE_SUM || out[0].dtype != x->dtype)
      return FBX_ERR_NOTIMPL("device 'cuda': %s of %s: integer REDUCE_SUM only", fbx_ir_op_name(node->op),
                             fbx_dtype_name(x->dtype));
    a.int_bytes = (int)fbx_dtype_size(x->dtype);
  }
  uint32_t mask;
  if (node->op == FBX_IR_OP_ARGMAX || node->op == FBX_IR_OP_ARGMIN) {
    int ax = node->params.arg.axis;
    if (ax < 0 || ax >= x->rank) return FBX_ERR_ARG("device 'cuda': %s: axis %d", fbx_ir_op_name(node->op), ax);
    mask = 1u << ax;
    a.select_last = node->params.arg.select_last;
    if (out[0].dtype != FBX_DTYPE_I64) return FBX_ERR_NOTIMPL("device 'cuda': %s: output dtype", fbx_ir_op_name(node->op));
  } else {
    mask = node->params.reduce.axes_mask;
    if (!mask) mask = x->rank ? (1u << x->rank) - 1 : 0;
  }
  int64_t st[FBX_MAX_RANK];
  fbx_cuda_strides(x, st);
  a.n_out = 1;
  a.n_red = 1;
  for (int d = 0; d < x->rank; d++) {
    if ((mask >> d) & 1u) {
      a.red_dims[a.n_red_dims] = x->dims[d];
      a.red_strides[a.n_red_dims++] = st[d];
      a.n_red *= x->dims[d];
    } else {
      a.out_dims[a.n_out_dims] = x->dims[d];
      a.out_strides[a.n_out_dims++] = st[d];
      a.n_out *= x->dims[d];
    }
  }
  if (a.n_out != fbx_tensor_numel(&out[0]))
    return FBX_ERR_ARG("device 'cuda': %s: output has %lld elements, expected %lld", fbx_ir_op_name(node->op),
                       (long long)fbx_tensor_numel(&out[0]), (long long)a.n_out);
  info->variant = a.int_bytes ? "reduce_sum_int_block" : "reduce_block";
  info->reason = a.int_bytes ? "one block per output element, 64-bit integer sum" : "one block per output element";
  return fbx_cuda_launched(fbx_cuda_launch_reduce(&a, c->stream), fbx_ir_op_name(node->op));
}
