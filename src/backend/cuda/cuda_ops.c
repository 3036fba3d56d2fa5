/* Which IR ops have a CUDA kernel, and the device's answer to supports().
 * Every elementwise op (EW1/EW2/EW3 in the op list) and FUSED_EW run on the
 * program interpreter; the other ops are listed one by one. An op missing
 * here is declined with a reason naming the device. */
#include <string.h>

#include "cuda_internal.h"

#define FBX__E(name, run, sup) static const fbx_cuda_op_entry name = {run, sup}
FBX__E(k_ew, fbx_cuda_k_ew, fbx_cuda_s_ew);
FBX__E(k_matmul, fbx_cuda_k_matmul, fbx_cuda_s_f32);
FBX__E(k_softmax, fbx_cuda_k_softmax, fbx_cuda_s_f32);
FBX__E(k_layer_norm, fbx_cuda_k_layer_norm, fbx_cuda_s_f32);
FBX__E(k_instance_norm, fbx_cuda_k_instance_norm, fbx_cuda_s_f32);
FBX__E(k_reduce, fbx_cuda_k_reduce, fbx_cuda_s_reduce);
FBX__E(k_copy, fbx_cuda_k_copy, fbx_cuda_s_movement);
FBX__E(k_transpose, fbx_cuda_k_transpose, fbx_cuda_s_movement);
FBX__E(k_slice, fbx_cuda_k_slice, fbx_cuda_s_movement);
FBX__E(k_expand, fbx_cuda_k_expand, fbx_cuda_s_movement);
FBX__E(k_tile, fbx_cuda_k_tile, fbx_cuda_s_movement);
FBX__E(k_concat, fbx_cuda_k_concat, fbx_cuda_s_movement);
FBX__E(k_split, fbx_cuda_k_split, fbx_cuda_s_movement);
FBX__E(k_gather, fbx_cuda_k_gather, fbx_cuda_s_movement);
FBX__E(k_shape, fbx_cuda_k_shape, fbx_cuda_s_movement);
FBX__E(k_const_of_shape, fbx_cuda_k_constant_of_shape, fbx_cuda_s_movement);
FBX__E(k_range, fbx_cuda_k_range, fbx_cuda_s_movement);
FBX__E(k_conv, fbx_cuda_k_conv, fbx_cuda_s_conv);
FBX__E(k_conv_transpose, fbx_cuda_k_conv_transpose, fbx_cuda_s_conv);
FBX__E(k_pool, fbx_cuda_k_pool, fbx_cuda_s_conv);
FBX__E(k_resize, fbx_cuda_k_resize, fbx_cuda_s_resize);
FBX__E(k_global_pool, fbx_cuda_k_global_pool, fbx_cuda_s_f32);
FBX__E(k_mnb, fbx_cuda_k_mnb, fbx_cuda_s_mnb);
FBX__E(k_gqa, fbx_cuda_k_gqa, fbx_cuda_s_gqa);
FBX__E(k_rope, fbx_cuda_k_rope, fbx_cuda_s_rope);
FBX__E(k_skipnorm, fbx_cuda_k_skipnorm, fbx_cuda_s_skipnorm);
#undef FBX__E

const fbx_cuda_op_entry *fbx_cuda_op(fbx_ir_op op) {
  switch (op) {
    case FBX_IR_OP_FUSED_EW: return &k_ew;
    case FBX_IR_OP_MATMUL: return &k_matmul;
    case FBX_IR_OP_SOFTMAX: case FBX_IR_OP_LOG_SOFTMAX: case FBX_IR_OP_HARDMAX: return &k_softmax;
    case FBX_IR_OP_LAYER_NORM: return &k_layer_norm;
    case FBX_IR_OP_INSTANCE_NORM: return &k_instance_norm;
    case FBX_IR_OP_REDUCE_SUM: case FBX_IR_OP_REDUCE_MEAN: case FBX_IR_OP_REDUCE_MAX: case FBX_IR_OP_REDUCE_MIN:
    case FBX_IR_OP_REDUCE_PROD: case FBX_IR_OP_REDUCE_L1: case FBX_IR_OP_REDUCE_L2: case FBX_IR_OP_REDUCE_LOG_SUM:
    case FBX_IR_OP_REDUCE_LOG_SUM_EXP: case FBX_IR_OP_REDUCE_SUM_SQUARE: case FBX_IR_OP_ARGMAX:
    case FBX_IR_OP_ARGMIN: return &k_reduce;
    case FBX_IR_OP_RESHAPE: case FBX_IR_OP_SQUEEZE: case FBX_IR_OP_UNSQUEEZE: case FBX_IR_OP_FLATTEN: return &k_copy;
    case FBX_IR_OP_TRANSPOSE: return &k_transpose;
    case FBX_IR_OP_SLICE: return &k_slice;
    case FBX_IR_OP_EXPAND: return &k_expand;
    case FBX_IR_OP_TILE: return &k_tile;
    case FBX_IR_OP_CONCAT: return &k_concat;
    case FBX_IR_OP_SPLIT: return &k_split;
    case FBX_IR_OP_GATHER: return &k_gather;
    case FBX_IR_OP_SHAPE: return &k_shape;
    case FBX_IR_OP_CONSTANT_OF_SHAPE: return &k_const_of_shape;
    case FBX_IR_OP_RANGE: return &k_range;
    case FBX_IR_OP_CONV: return &k_conv;
    case FBX_IR_OP_CONV_TRANSPOSE: return &k_conv_transpose;
    case FBX_IR_OP_RESIZE: return &k_resize;
    case FBX_IR_OP_MAXPOOL: case FBX_IR_OP_AVGPOOL: case FBX_IR_OP_LPPOOL: return &k_pool;
    case FBX_IR_OP_GLOBAL_AVGPOOL: case FBX_IR_OP_GLOBAL_MAXPOOL: return &k_global_pool;
    case FBX_IR_OP_MATMUL_NBITS: return &k_mnb;
    case FBX_IR_OP_GQA: return &k_gqa;
    case FBX_IR_OP_ROTARY: return &k_rope;
    case FBX_IR_OP_SKIP_NORM: return &k_skipnorm;
    default: break;
  }
  int cls = (unsigned)op < FBX_IR_OP_COUNT ? fbx_ir_op_class(op) : FBX_IR_CLASS_OTHER;
  return cls == FBX_IR_CLASS_OTHER ? NULL : &k_ew;
}

bool fbx_cuda_supports(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *in, int n_in, char *why,
                       size_t why_size) {
  (void)be;
  char tmp[256];
  if (!why || !why_size) {
    why = tmp;
    why_size = sizeof tmp;
  }
  const fbx_cuda_op_entry *e = fbx_cuda_op(node->op);
  if (!e) {
    snprintf(why, why_size, "device 'cuda': no CUDA kernel for %s",
             (unsigned)node->op < FBX_IR_OP_COUNT ? fbx_ir_op_name(node->op) : "?");
    return false;
  }
  char r[224];
  r[0] = 0;
  if (e->supports && !e->supports(node, in, n_in, r, sizeof r)) {
    snprintf(why, why_size, "device 'cuda': %s", r);
    return false;
  }
  return true;
}
