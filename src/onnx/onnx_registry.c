/* The ONE op registry: (op type, domain, opset range) -> claim check +
 * translator + rank rule. Columns: op, domain ("" = ai.onnx), min opset, max
 * opset (of that domain), family, rank rule (FBX_ONNX_RANK_RULES in
 * onnx_ops.h), aux, attrs.
 * aux is family-specific (usually the IR op); attrs lists every attribute the
 * family understands: any other attribute declines the node, which is how
 * newer opsets that add attributes are kept out safely. A family suffixed
 * _h also takes float16, computed in float32 (onnx_ops_f16.c). */
#include <stdio.h>
#include <string.h>

#include "onnx_ops.h"
#include "onnx_registry.h"

#define M FBX_ONNX_OPSET_MAX
#define OP(x) FBX_IR_OP_##x

#define FBX_ONNX_REGISTRY(X)                                                                                  \
  /* ---- elementwise unary ---- */                                                                           \
  X("Identity", "", 1, M, identity, SAME, OP(IDENTITY), "")                                                   \
  X("Neg", "", 6, M, unary, SAME, OP(NEG), "")                                                                \
  X("Abs", "", 6, M, unary, SAME, OP(ABS), "")                                                                \
  X("Sign", "", 9, M, unary, SAME, OP(SIGN), "")                                                              \
  X("Sqrt", "", 6, M, unary, SAME, OP(SQRT), "")                                                              \
  X("Exp", "", 6, M, unary, SAME, OP(EXP), "")                                                                \
  X("Log", "", 6, M, unary, SAME, OP(LOG), "")                                                                \
  X("Reciprocal", "", 6, M, unary, SAME, OP(RECIPROCAL), "")                                                  \
  X("Erf", "", 9, M, unary, SAME, OP(ERF), "")                                                                \
  X("Tanh", "", 6, M, unary, SAME, OP(TANH), "")                                                              \
  X("Sigmoid", "", 6, M, unary, SAME, OP(SIGMOID), "")                                                        \
  X("Relu", "", 6, M, unary, SAME, OP(RELU), "")                                                              \
  X("LeakyRelu", "", 6, M, unary, SAME, OP(LEAKY_RELU), "alpha")                                              \
  X("HardSigmoid", "", 6, M, unary, SAME, OP(HARD_SIGMOID), "alpha,beta")                                     \
  X("HardSwish", "", 14, M, unary, SAME, OP(HARD_SWISH), "")                                                  \
  X("Not", "", 1, M, unary, SAME, OP(NOT), "")                                                                \
  X("BitwiseNot", "", 18, M, unary, SAME, OP(BITWISE_NOT), "")                                                \
  X("Floor", "", 6, M, unary, SAME, OP(FLOOR), "")                                                            \
  X("Ceil", "", 6, M, unary, SAME, OP(CEIL), "")                                                              \
  X("Round", "", 11, M, unary, SAME, OP(ROUND), "")                                                           \
  X("Sin", "", 7, M, unary, SAME, OP(SIN), "")                                                                \
  X("Cos", "", 7, M, unary, SAME, OP(COS), "")                                                                \
  X("Tan", "", 7, M, unary, SAME, OP(TAN), "")                                                                \
  X("Asin", "", 7, M, unary, SAME, OP(ASIN), "")                                                              \
  X("Acos", "", 7, M, unary, SAME, OP(ACOS), "")                                                              \
  X("Atan", "", 7, M, unary, SAME, OP(ATAN), "")                                                              \
  X("Sinh", "", 9, M, unary, SAME, OP(SINH), "")                                                              \
  X("Cosh", "", 9, M, unary, SAME, OP(COSH), "")                                                              \
  X("Asinh", "", 9, M, unary, SAME, OP(ASINH), "")                                                            \
  X("Acosh", "", 9, M, unary, SAME, OP(ACOSH), "")                                                            \
  X("Atanh", "", 9, M, unary, SAME, OP(ATANH), "")                                                            \
  X("Softplus", "", 1, M, unary, SAME, OP(SOFTPLUS), "")                                                      \
  X("Softsign", "", 1, M, unary, SAME, OP(SOFTSIGN), "")                                                      \
  X("Elu", "", 6, M, unary, SAME, OP(ELU), "alpha")                                                           \
  X("Selu", "", 6, M, unary, SAME, OP(SELU), "alpha,gamma")                                                   \
  X("Celu", "", 12, M, unary, SAME, OP(CELU), "alpha")                                                        \
  X("Mish", "", 18, M, unary, SAME, OP(MISH), "")                                                             \
  X("ThresholdedRelu", "", 10, M, unary, SAME, OP(THRESHOLDED_RELU), "alpha")                                 \
  X("Gelu", "", 20, M, unary, SAME, OP(GELU), "approximate")                                                  \
  X("IsNaN", "", 9, M, unary, SAME, OP(ISNAN), "")                                                            \
  X("IsInf", "", 10, M, unary, SAME, OP(ISINF), "detect_negative,detect_positive")                            \
  X("Cast", "", 6, M, cast, SAME, OP(CAST), "to,saturate")                                                    \
  X("CastLike", "", 15, M, cast, SAME, OP(CAST), "saturate")                                                  \
  X("Dropout", "", 7, M, dropout, SAME_ALL, OP(IDENTITY), "ratio,seed")                                       \
  /* ---- elementwise binary ---- */                                                                          \
  X("Add", "", 7, M, binary, BCAST, OP(ADD), "")                                                              \
  X("Sub", "", 7, M, binary, BCAST, OP(SUB), "")                                                              \
  X("Mul", "", 7, M, binary, BCAST, OP(MUL), "")                                                              \
  X("Div", "", 7, M, binary, BCAST, OP(DIV), "")                                                              \
  X("Pow", "", 7, M, pow, BCAST, OP(POW), "")                                                                 \
  X("Mod", "", 10, M, mod, BCAST, OP(MOD), "fmod")                                                            \
  X("Equal", "", 7, M, binary, BCAST, OP(EQUAL), "")                                                          \
  X("Less", "", 7, M, binary, BCAST, OP(LESS), "")                                                            \
  X("LessOrEqual", "", 12, M, binary, BCAST, OP(LESS_EQUAL), "")                                              \
  X("Greater", "", 7, M, binary, BCAST, OP(GREATER), "")                                                      \
  X("GreaterOrEqual", "", 12, M, binary, BCAST, OP(GREATER_EQUAL), "")                                        \
  X("And", "", 7, M, binary, BCAST, OP(AND), "")                                                              \
  X("Or", "", 7, M, binary, BCAST, OP(OR), "")                                                                \
  X("Xor", "", 7, M, binary, BCAST, OP(XOR), "")                                                              \
  X("BitwiseAnd", "", 18, M, binary, BCAST, OP(BITWISE_AND), "")                                              \
  X("BitwiseOr", "", 18, M, binary, BCAST, OP(BITWISE_OR), "")                                                \
  X("BitwiseXor", "", 18, M, binary, BCAST, OP(BITWISE_XOR), "")                                              \
  X("BitShift", "", 11, M, bitshift, BCAST, OP(BITSHIFT_LEFT), "direction")                                   \
  X("PRelu", "", 7, M, prelu, BCAST, OP(PRELU), "")                                                           \
  X("Where", "", 9, M, where, BCAST, OP(WHERE), "")                                                           \
  X("Clip", "", 6, M, clip, SAME, 0, "min,max")                                                               \
  X("Sum", "", 8, M, variadic, BCAST, OP(ADD), "")                                                            \
  X("Mean", "", 8, M, variadic, BCAST, OP(ADD), "")                                                           \
  X("Max", "", 8, M, variadic, BCAST, OP(MAX), "")                                                            \
  X("Min", "", 8, M, variadic, BCAST, OP(MIN), "")                                                            \
  /* ---- linear algebra ---- */                                                                              \
  X("MatMul", "", 1, M, matmul_h, MATMUL, OP(MATMUL), "")                                                     \
  X("Gemm", "", 7, M, gemm_h, RANK2, OP(MATMUL), "alpha,beta,transA,transB")                                  \
  /* ---- reductions ---- */                                                                                  \
  X("ReduceSum", "", 1, M, reduce_h, REDUCE, OP(REDUCE_SUM), "axes,keepdims,noop_with_empty_axes")            \
  X("ReduceMean", "", 1, M, reduce_h, REDUCE, OP(REDUCE_MEAN), "axes,keepdims,noop_with_empty_axes")          \
  X("ReduceMax", "", 1, M, reduce_h, REDUCE, OP(REDUCE_MAX), "axes,keepdims,noop_with_empty_axes")            \
  X("ReduceMin", "", 1, M, reduce_h, REDUCE, OP(REDUCE_MIN), "axes,keepdims,noop_with_empty_axes")            \
  X("ReduceProd", "", 1, M, reduce_h, REDUCE, OP(REDUCE_PROD), "axes,keepdims,noop_with_empty_axes")          \
  X("ReduceL1", "", 1, M, reduce, REDUCE, OP(REDUCE_L1), "axes,keepdims,noop_with_empty_axes")                \
  X("ReduceL2", "", 1, M, reduce, REDUCE, OP(REDUCE_L2), "axes,keepdims,noop_with_empty_axes")                \
  X("ReduceLogSum", "", 1, M, reduce_h, REDUCE, OP(REDUCE_LOG_SUM), "axes,keepdims,noop_with_empty_axes")     \
  X("ReduceLogSumExp", "", 1, M, reduce_h, REDUCE, OP(REDUCE_LOG_SUM_EXP), "axes,keepdims,noop_with_empty_axes") \
  X("ReduceSumSquare", "", 1, M, reduce_h, REDUCE, OP(REDUCE_SUM_SQUARE), "axes,keepdims,noop_with_empty_axes") \
  X("ArgMax", "", 1, M, argmax_h, ARG, OP(ARGMAX), "axis,keepdims,select_last_index")                         \
  X("ArgMin", "", 1, M, argmax_h, ARG, OP(ARGMIN), "axis,keepdims,select_last_index")                         \
  X("CumSum", "", 11, M, cumsum, SAME, OP(CUMSUM), "exclusive,reverse")                                       \
  /* ---- normalisation / softmax ---- */                                                                     \
  X("Softmax", "", 1, M, softmax_h, SAME, OP(SOFTMAX), "axis")                                                \
  X("LogSoftmax", "", 1, M, softmax_h, SAME, OP(LOG_SOFTMAX), "axis")                                         \
  X("Hardmax", "", 1, M, softmax_h, SAME, OP(HARDMAX), "axis")                                                \
  X("LayerNormalization", "", 17, M, layernorm_h, LAYERNORM, OP(LAYER_NORM), "axis,epsilon,stash_type")       \
  X("InstanceNormalization", "", 6, M, instnorm_h, SAME, OP(INSTANCE_NORM), "epsilon")                        \
  X("BatchNormalization", "", 7, M, batchnorm, SAME, 0, "epsilon,momentum,spatial,training_mode")             \
  X("LRN", "", 1, M, lrn_h, SAME, OP(LRN), "alpha,beta,bias,size")                                            \
  X("MeanVarianceNormalization", "", 9, M, mvn, SAME, 0, "axes")                                              \
  /* ---- data movement ---- */                                                                               \
  X("Reshape", "", 5, M, reshape, RESHAPE, OP(RESHAPE), "allowzero")                                          \
  X("Squeeze", "", 1, M, squeeze, SQUEEZE, OP(SQUEEZE), "axes")                                               \
  X("Unsqueeze", "", 1, M, squeeze, UNSQUEEZE, OP(UNSQUEEZE), "axes")                                         \
  X("Flatten", "", 1, M, flatten, FLATTEN, OP(FLATTEN), "axis")                                               \
  X("Transpose", "", 1, M, transpose, TRANSPOSE, OP(TRANSPOSE), "perm")                                       \
  X("Concat", "", 4, M, concat, CONCAT, OP(CONCAT), "axis")                                                   \
  X("Split", "", 2, M, split, KEEP, OP(SPLIT), "axis,split,num_outputs")                                      \
  X("Slice", "", 1, M, slice, SLICE, OP(SLICE), "axes,starts,ends")                                           \
  X("DepthToSpace", "", 1, M, d2s, KEEP, OP(DEPTH_TO_SPACE), "blocksize,mode")                                \
  X("SpaceToDepth", "", 1, M, d2s, KEEP, OP(SPACE_TO_DEPTH), "blocksize")                                     \
  /* ---- gather / scatter / index ---- */                                                                    \
  X("Gather", "", 1, M, gather, GATHER, OP(GATHER), "axis")                                                   \
  X("GatherElements", "", 11, M, gather, GATHER_ELEMENTS, OP(GATHER_ELEMENTS), "axis")                        \
  X("GatherND", "", 11, M, gather, GATHER_ND, OP(GATHER_ND), "batch_dims")                                    \
  X("ScatterElements", "", 11, M, scatter, SAME, OP(SCATTER_ELEMENTS), "axis,reduction")                      \
  X("Scatter", "", 9, 10, scatter, SAME, OP(SCATTER_ELEMENTS), "axis")                                        \
  X("ScatterND", "", 11, M, scatter, SAME, OP(SCATTER_ND), "reduction")                                       \
  X("OneHot", "", 9, M, onehot, ONEHOT, OP(ONE_HOT), "axis")                                                  \
  X("Trilu", "", 14, M, trilu, SAME, OP(TRILU), "upper")                                                      \
  X("TopK", "", 1, M, topk, KEEP, OP(TOPK), "axis,k,largest,sorted")                                          \
  X("NonZero", "", 9, M, nonzero, NONZERO, OP(NON_ZERO), "")                                                  \
  /* ---- shape ops ---- */                                                                                   \
  X("Shape", "", 1, M, shape, SHAPE, OP(SHAPE), "start,end")                                                  \
  X("Expand", "", 8, M, expand, EXPAND, OP(EXPAND), "")                                                       \
  X("ConstantOfShape", "", 9, M, cofs, COFS, OP(CONSTANT_OF_SHAPE), "value")                                  \
  X("Range", "", 11, M, range, RANK1, OP(RANGE), "")                                                          \
  X("Tile", "", 6, M, tile, KEEP, OP(TILE), "")                                                               \
  X("Pad", "", 2, M, pad, KEEP, OP(PAD), "mode,pads,value")                                                   \
  X("Constant", "", 1, M, constant, NONE, 0, "value,value_float,value_floats,value_int,value_ints")           \
  /* ---- conv / pool / resize ---- */                                                                        \
  X("Conv", "", 1, M, conv_h, CONV, OP(CONV), "auto_pad,dilations,group,kernel_shape,pads,strides")           \
  X("ConvTranspose", "", 1, M, conv_h, CONV, OP(CONV_TRANSPOSE),                                              \
    "auto_pad,dilations,group,kernel_shape,output_padding,output_shape,pads,strides")                         \
  X("MaxPool", "", 1, M, pool_h, CONV, OP(MAXPOOL),                                                           \
    "auto_pad,ceil_mode,dilations,kernel_shape,pads,storage_order,strides")                                   \
  X("AveragePool", "", 1, M, pool_h, CONV, OP(AVGPOOL),                                                       \
    "auto_pad,ceil_mode,count_include_pad,dilations,kernel_shape,pads,strides")                               \
  X("LpPool", "", 2, M, pool_h, KEEP, OP(LPPOOL), "auto_pad,kernel_shape,p,pads,strides")                     \
  X("ConvInteger", "", 10, M, convint, CONV, OP(CONV_INT), "auto_pad,dilations,group,kernel_shape,pads,strides") \
  X("QLinearConv", "", 10, M, qlconv, CONV, OP(CONV_INT), "auto_pad,dilations,group,kernel_shape,pads,strides") \
  X("GlobalAveragePool", "", 1, M, gpool_h, GPOOL, OP(GLOBAL_AVGPOOL), "")                                    \
  X("GlobalMaxPool", "", 1, M, gpool_h, GPOOL, OP(GLOBAL_MAXPOOL), "")                                        \
  X("Resize", "", 10, M, resize_h, KEEP, OP(RESIZE),                                                          \
    "antialias,axes,coordinate_transformation_mode,cubic_coeff_a,exclude_outside,"                            \
    "extrapolation_value,keep_aspect_ratio_policy,mode,nearest_mode")                                         \
  X("Upsample", "", 7, 9, resize_h, KEEP, OP(RESIZE), "mode,scales")                                          \
  /* ---- composed from other IR ops (onnx_ops_extra.c) ---- */                                               \
  X("Size", "", 1, M, size, SCALAR, OP(REDUCE_PROD), "")                                                      \
  X("Shrink", "", 9, M, shrink, SAME, OP(WHERE), "bias,lambd")                                                \
  X("EyeLike", "", 9, M, eyelike, RANK2, 0, "dtype,k")                                                        \
  X("Compress", "", 9, M, compress, COMPRESS, OP(GATHER), "axis")                                             \
  X("Einsum", "", 12, M, einsum, NONE, OP(REDUCE_SUM), "equation")                                            \
  X("DequantizeLinear", "", 10, M, dequant, SAME, OP(MUL), "axis")                                            \
  X("QuantizeLinear", "", 10, M, quant, SAME, OP(ROUND), "axis,saturate")                                     \
  X("DynamicQuantizeLinear", "", 11, M, dynquant, SAME, OP(ROUND), "")                                        \
  X("MatMulInteger", "", 10, M, mmint, MATMUL, OP(MATMUL_INT), "")                                                \
  X("QLinearMatMul", "", 10, M, qlmm, QLMATMUL, OP(MATMUL_INT), "")                                               \
  X("Unique", "", 11, M, unique, NONE, 0, "axis,sorted")                                                    \
  /* ---- decoder ops, ORT contrib-op semantics (onnx_ops_msft.c) ---- */                                    \
  X("SimplifiedLayerNormalization", "", 1, M, skipnorm, LAYERNORM, 0, "axis,epsilon,stash_type")              \
  X("SkipSimplifiedLayerNormalization", "com.microsoft", 1, 1, skipnorm, SKIPNORM, 1, "epsilon")             \
  X("SkipLayerNormalization", "com.microsoft", 1, 1, skipnorm, SKIPNORM, 2, "epsilon")                     \
  X("MatMulNBits", "com.microsoft", 1, 1, mnb, MNB, OP(MATMUL_NBITS), "K,N,accuracy_level,bits,block_size,weight_prepacked") \
  X("GroupQueryAttention", "com.microsoft", 1, 1, gqa, GQA, OP(GQA),                                          \
    "num_heads,kv_num_heads,scale,softcap,local_window_size,do_rotary,rotary_interleaved,smooth_softmax,"      \
    "qk_output,causal,sliding_window_cache,k_quant_type,v_quant_type,kv_cache_bit_width,qk_norm_epsilon,"     \
    "mask_filter_value")                                                                                     \
  X("RotaryEmbedding", "com.microsoft", 1, 1, rope, SAME, OP(ROTARY),                                         \
    "interleaved,is_packed_batching,num_heads,rotary_embedding_dim,scale")                                   \
  /* ---- recurrent ops (onnx_ops_rnn.c) ---- */                                                              \
  X("LSTM", "", 7, M, rnn, RNN, OP(LSTM),                                                                     \
    "activation_alpha,activation_beta,activations,clip,direction,hidden_size,input_forget,layout")            \
  X("GRU", "", 7, M, rnn, RNN, OP(GRU),                                                                       \
    "activation_alpha,activation_beta,activations,clip,direction,hidden_size,layout,linear_before_reset")     \
  X("RNN", "", 7, M, rnn, RNN, OP(RNN), "activation_alpha,activation_beta,activations,clip,direction,hidden_size,layout") \
  /* ---- control flow (onnx_ops_cf.c): the If with both branches ---- */                                     \
  X("If", "", 1, M, cf_if, NONE, OP(IF), "then_branch,else_branch")                                          \
  X("Loop", "", 11, M, cf_loop, CF, OP(LOOP), "body")                                                         \
  X("Scan", "", 9, M, cf_loop, CF, OP(SCAN),                                                                  \
    "body,num_scan_inputs,scan_input_axes,scan_input_directions,scan_output_axes,scan_output_directions")

static const fbx_onnx_entry fbx__onnx_registry[] = {
#define X(op, dom, lo, hi, fam, rank, aux, attrs) \
  {op, dom, lo, hi, fbx__onnx_claim_##fam, fbx__onnx_tr_##fam, FBX_ONNX_RANK_##rank, (int)(aux), attrs},
    FBX_ONNX_REGISTRY(X)
#undef X
};

#define FBX__ONNX_NREG ((int)(sizeof fbx__onnx_registry / sizeof fbx__onnx_registry[0]))

int fbx_onnx_registry_count(void) { return FBX__ONNX_NREG; }

const char *fbx_onnx_registry_op_type(int i) {
  return i >= 0 && i < FBX__ONNX_NREG ? fbx__onnx_registry[i].op_type : NULL;
}

const char *fbx_onnx_registry_domain(int i) {
  return i >= 0 && i < FBX__ONNX_NREG ? fbx__onnx_registry[i].domain : NULL;
}

const fbx_onnx_entry *fbx__onnx_registry_entry(int i) {
  return i >= 0 && i < FBX__ONNX_NREG ? &fbx__onnx_registry[i] : NULL;
}

static bool fbx__onnx_domain_eq(const char *a, const char *b) {
  if (!a || strcmp(a, "ai.onnx") == 0) a = "";
  if (!b || strcmp(b, "ai.onnx") == 0) b = "";
  return strcmp(a, b) == 0;
}

const fbx_onnx_entry *fbx__onnx_registry_find(const fbx_onnx_node *n, const fbx_onnx_entry **any) {
  *any = NULL;
  if (!n->op_type) return NULL;
  for (int i = 0; i < FBX__ONNX_NREG; i++) {
    const fbx_onnx_entry *e = &fbx__onnx_registry[i];
    if (strcmp(e->op_type, n->op_type) != 0 || !fbx__onnx_domain_eq(e->domain, n->domain)) continue;
    if (!*any) *any = e;
    if (n->opset >= e->min_opset && n->opset <= e->max_opset) return e;
  }
  return NULL;
}

static bool fbx__onnx_attr_known(const char *list, const char *name) {
  size_t len = strlen(name);
  const char *p = list;
  while (p && *p) {
    const char *comma = strchr(p, ',');
    size_t k = comma ? (size_t)(comma - p) : strlen(p);
    if (k == len && strncmp(p, name, len) == 0) return true;
    p = comma ? comma + 1 : NULL;
  }
  return false;
}

static bool fbx__onnx_check_value(const fbx_onnx_cctx *c, const fbx_onnx_value *v, const char *dir, int i) {
  if (v->kind != FBX_ONNX_VALUE_TENSOR)
    return fbx__onnx_fail(c, "%s %d ('%s') is not a tensor (sequence/map/optional)", dir, i, v->name ? v->name : "");
  if (v->rank < 0) return fbx__onnx_fail(c, "%s %d ('%s') rank unknown", dir, i, v->name ? v->name : "");
  if (v->rank > FBX_MAX_RANK)
    return fbx__onnx_fail(c, "%s %d ('%s') rank %d exceeds %d", dir, i, v->name ? v->name : "", v->rank, FBX_MAX_RANK);
  if (v->dtype == FBX_DTYPE_UNDEFINED)
    return fbx__onnx_fail(c, "%s %d ('%s') dtype (onnx type %d) not supported", dir, i, v->name ? v->name : "",
                          v->onnx_type);
  if (v->is_initializer && (!v->init || !v->init->data) && !v->is_graph_input)
    return fbx__onnx_fail(c, "%s %d ('%s') initializer data not readable", dir, i, v->name ? v->name : "");
  return true;
}

bool fbx_onnx_node_claimable(const fbx_onnx_graph *g, int node_index, char *reason, size_t reason_size) {
  char dummy[8];
  if (!reason || reason_size == 0) { reason = dummy; reason_size = sizeof dummy; }
  reason[0] = 0;
  if (!g || node_index < 0 || node_index >= g->n_nodes) {
    snprintf(reason, reason_size, "node index %d out of range", node_index);
    return false;
  }
  const fbx_onnx_node *n = &g->nodes[node_index];
  fbx_onnx_cctx c = {g, n, NULL, reason, reason_size};
  const char *dom = n->domain && n->domain[0] ? n->domain : "ai.onnx";
  const fbx_onnx_entry *any;
  const fbx_onnx_entry *e = fbx__onnx_registry_find(n, &any);
  if (!e) {
    if (!any) {
      snprintf(reason, reason_size, "op '%s::%s' not supported", dom, n->op_type ? n->op_type : "?");
      return false;
    }
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < FBX__ONNX_NREG; i++) {
      const fbx_onnx_entry *x = &fbx__onnx_registry[i];
      if (strcmp(x->op_type, n->op_type) == 0 && fbx__onnx_domain_eq(x->domain, n->domain)) {
        if (x->min_opset < lo) lo = x->min_opset;
        if (x->max_opset > hi) hi = x->max_opset;
      }
    }
    return fbx__onnx_fail(&c, "opset %d not supported (%s opsets %d..%d)", n->opset, dom, lo, hi);
  }
  c.e = e;
  /* the families that take body graphs */
  const bool bodies = e->claim == fbx__onnx_claim_cf_if || e->claim == fbx__onnx_claim_cf_loop;
  if (n->has_subgraph && !bodies) return fbx__onnx_fail(&c, "subgraph attributes not supported");
  for (int i = 0; i < n->n_attrs; i++) {
    const fbx_onnx_attr *a = &n->attrs[i];
    if (a->type == FBX_ONNX_ATTR_GRAPH && !bodies)
      return fbx__onnx_fail(&c, "subgraph attribute '%s' not supported", a->name);
    if (a->type == FBX_ONNX_ATTR_OTHER || a->type == FBX_ONNX_ATTR_UNDEFINED)
      return fbx__onnx_fail(&c, "attribute '%s' of unsupported kind", a->name);
    if (!a->name || !fbx__onnx_attr_known(e->attrs, a->name))
      return fbx__onnx_fail(&c, "attribute '%s' not supported", a->name ? a->name : "?");
  }
  if (n->n_inputs > FBX_IR_MAX_INPUTS) return fbx__onnx_fail(&c, "%d inputs exceed %d", n->n_inputs, FBX_IR_MAX_INPUTS);
  if (n->n_outputs > FBX_IR_MAX_OUTPUTS)
    return fbx__onnx_fail(&c, "%d outputs exceed %d", n->n_outputs, FBX_IR_MAX_OUTPUTS);
  for (int i = 0; i < n->n_inputs; i++) {
    const fbx_onnx_value *v = fbx__onnx_cin(&c, i);
    if (!v) {
      if (n->inputs[i] >= g->n_values) return fbx__onnx_fail(&c, "input %d index out of range", i);
      continue;
    }
    if (!fbx__onnx_check_value(&c, v, "input", i)) return false;
  }
  for (int i = 0; i < n->n_outputs; i++) {
    const fbx_onnx_value *v = fbx__onnx_cout(&c, i);
    if (!v) continue;
    if (!fbx__onnx_check_value(&c, v, "output", i)) return false;
  }
  /* the recurrent ops' outputs are all optional (Y_h alone is common); every
   * other translator binds output 0 */
  bool any_out = false;
  for (int i = 0; i < n->n_outputs; i++) any_out |= fbx__onnx_cout(&c, i) != NULL;
  if (n->n_outputs < 1 || (!fbx__onnx_cout(&c, 0) && (e->claim != fbx__onnx_claim_rnn || !any_out)))
    return fbx__onnx_fail(&c, "output 0 missing");
  return e->claim(&c);
}
