/* The IR op list, defined once. Everything per-op (enum, names, arity class,
 * shape inference, CPU kernels, CUDA kernels) is generated from or checked
 * against this list; a table that misses an op fails a _Static_assert.
 *
 * Columns: NAME, class, shape_data_inputs
 *   class: FBX_IR_CLASS_EW1/EW2/EW3 are elementwise (fusable, broadcasting,
 *          one output); FBX_IR_CLASS_OTHER is everything else.
 *   shape_data_inputs: bitmask of input indices whose *values* (not only
 *          shapes) shape inference needs; those inputs must be readable on the
 *          host (int64 or float tensors, small). */
#ifndef FBX_IR_OPS_H
#define FBX_IR_OPS_H

#include <stdbool.h>

#define FBX_IR_CLASS_OTHER 0
#define FBX_IR_CLASS_EW1 1
#define FBX_IR_CLASS_EW2 2
#define FBX_IR_CLASS_EW3 3

#define FBX_IR_OP_LIST(X)                                                        \
  /* ---- elementwise unary: out = f(a); params.ew alpha/beta/gamma/to ---- */   \
  X(IDENTITY, FBX_IR_CLASS_EW1, 0)                                               \
  X(NEG, FBX_IR_CLASS_EW1, 0)                                                    \
  X(ABS, FBX_IR_CLASS_EW1, 0)                                                    \
  X(SQRT, FBX_IR_CLASS_EW1, 0)                                                   \
  X(EXP, FBX_IR_CLASS_EW1, 0)                                                    \
  X(LOG, FBX_IR_CLASS_EW1, 0)                                                    \
  X(RECIPROCAL, FBX_IR_CLASS_EW1, 0)                                             \
  X(ERF, FBX_IR_CLASS_EW1, 0)                                                    \
  X(TANH, FBX_IR_CLASS_EW1, 0)                                                   \
  X(SIGMOID, FBX_IR_CLASS_EW1, 0)                                                \
  X(RELU, FBX_IR_CLASS_EW1, 0)                                                   \
  X(LEAKY_RELU, FBX_IR_CLASS_EW1, 0)    /* alpha */                              \
  X(HARD_SIGMOID, FBX_IR_CLASS_EW1, 0)  /* max(0, min(1, alpha*x + beta)) */     \
  X(HARD_SWISH, FBX_IR_CLASS_EW1, 0)                                             \
  X(NOT, FBX_IR_CLASS_EW1, 0)                                                    \
  X(CAST, FBX_IR_CLASS_EW1, 0)          /* to = params.ew.to */                  \
  X(FLOOR, FBX_IR_CLASS_EW1, 0)                                                  \
  X(CEIL, FBX_IR_CLASS_EW1, 0)                                                   \
  X(ROUND, FBX_IR_CLASS_EW1, 0)         /* half to even */                       \
  X(SIGN, FBX_IR_CLASS_EW1, 0)                                                   \
  X(SIN, FBX_IR_CLASS_EW1, 0)                                                    \
  X(COS, FBX_IR_CLASS_EW1, 0)                                                    \
  X(TAN, FBX_IR_CLASS_EW1, 0)                                                    \
  X(ASIN, FBX_IR_CLASS_EW1, 0)                                                   \
  X(ACOS, FBX_IR_CLASS_EW1, 0)                                                   \
  X(ATAN, FBX_IR_CLASS_EW1, 0)                                                   \
  X(SINH, FBX_IR_CLASS_EW1, 0)                                                   \
  X(COSH, FBX_IR_CLASS_EW1, 0)                                                   \
  X(ASINH, FBX_IR_CLASS_EW1, 0)                                                  \
  X(ACOSH, FBX_IR_CLASS_EW1, 0)                                                  \
  X(ATANH, FBX_IR_CLASS_EW1, 0)                                                  \
  X(SOFTPLUS, FBX_IR_CLASS_EW1, 0)                                               \
  X(SOFTSIGN, FBX_IR_CLASS_EW1, 0)                                               \
  X(ELU, FBX_IR_CLASS_EW1, 0)           /* alpha */                              \
  X(SELU, FBX_IR_CLASS_EW1, 0)          /* alpha, gamma */                       \
  X(CELU, FBX_IR_CLASS_EW1, 0)          /* alpha */                              \
  X(MISH, FBX_IR_CLASS_EW1, 0)                                                   \
  X(THRESHOLDED_RELU, FBX_IR_CLASS_EW1, 0) /* alpha */                           \
  X(GELU, FBX_IR_CLASS_EW1, 0)          /* alpha = 0 exact (erf), 1 tanh */      \
  X(ISNAN, FBX_IR_CLASS_EW1, 0)                                                  \
  X(ISINF, FBX_IR_CLASS_EW1, 0)         /* alpha!=0: detect +inf, beta!=0: -inf */\
  X(BITWISE_NOT, FBX_IR_CLASS_EW1, 0)                                            \
  /* ---- elementwise binary, numpy broadcasting: out = f(a, b) ---- */          \
  X(ADD, FBX_IR_CLASS_EW2, 0)                                                    \
  X(SUB, FBX_IR_CLASS_EW2, 0)                                                    \
  X(MUL, FBX_IR_CLASS_EW2, 0)                                                    \
  X(DIV, FBX_IR_CLASS_EW2, 0)           /* integer: truncation toward zero */    \
  X(POW, FBX_IR_CLASS_EW2, 0)                                                    \
  X(MAX, FBX_IR_CLASS_EW2, 0)                                                    \
  X(MIN, FBX_IR_CLASS_EW2, 0)                                                    \
  X(MOD, FBX_IR_CLASS_EW2, 0)           /* alpha!=0: fmod (C), else python mod */\
  X(EQUAL, FBX_IR_CLASS_EW2, 0)                                                  \
  X(LESS, FBX_IR_CLASS_EW2, 0)                                                   \
  X(LESS_EQUAL, FBX_IR_CLASS_EW2, 0)                                             \
  X(GREATER, FBX_IR_CLASS_EW2, 0)                                                \
  X(GREATER_EQUAL, FBX_IR_CLASS_EW2, 0)                                          \
  X(AND, FBX_IR_CLASS_EW2, 0)                                                    \
  X(OR, FBX_IR_CLASS_EW2, 0)                                                     \
  X(XOR, FBX_IR_CLASS_EW2, 0)                                                    \
  X(BITSHIFT_LEFT, FBX_IR_CLASS_EW2, 0)                                          \
  X(BITSHIFT_RIGHT, FBX_IR_CLASS_EW2, 0)                                         \
  X(BITWISE_AND, FBX_IR_CLASS_EW2, 0)                                            \
  X(BITWISE_OR, FBX_IR_CLASS_EW2, 0)                                             \
  X(BITWISE_XOR, FBX_IR_CLASS_EW2, 0)                                            \
  X(PRELU, FBX_IR_CLASS_EW2, 0)         /* a<0 ? a*b : a */                      \
  /* ---- elementwise ternary ---- */                                            \
  X(WHERE, FBX_IR_CLASS_EW3, 0)         /* cond ? a : b ; inputs (cond,a,b) */   \
  /* ---- fused elementwise program (made by the fusion pass only) ---- */      \
  X(FUSED_EW, FBX_IR_CLASS_OTHER, 0)                                             \
  /* ---- linear algebra ---- */                                                 \
  X(MATMUL, FBX_IR_CLASS_OTHER, 0)      /* (A,B): batched numpy matmul, params.matmul */ \
  X(DYN_QUANT, FBX_IR_CLASS_OTHER, 0)   /* (X f32) -> (Y u8, scale f32 [], zp u8 []): DynamicQuantizeLinear */ \
  X(MATMUL_INT, FBX_IR_CLASS_OTHER, 0)  /* (A, B[, a_zp (1 or M)][, b_zp (1 or N)]) u8/s8 -> int32 exact, no transposes */ \
  /* ---- normalisation / softmax ---- */                                        \
  X(SOFTMAX, FBX_IR_CLASS_OTHER, 0)     /* params.axis (normalised) */           \
  X(LOG_SOFTMAX, FBX_IR_CLASS_OTHER, 0)                                          \
  X(HARDMAX, FBX_IR_CLASS_OTHER, 0)                                              \
  X(LAYER_NORM, FBX_IR_CLASS_OTHER, 0)  /* (X, scale[, bias]); params.norm: normalise dims axis.. */ \
  X(INSTANCE_NORM, FBX_IR_CLASS_OTHER, 0) /* (X, scale, bias) NCHW.. ; params.norm.epsilon */ \
  /* ---- reductions: params.reduce ---- */                                      \
  X(REDUCE_SUM, FBX_IR_CLASS_OTHER, 0)                                           \
  X(REDUCE_MEAN, FBX_IR_CLASS_OTHER, 0)                                          \
  X(REDUCE_MAX, FBX_IR_CLASS_OTHER, 0)                                           \
  X(REDUCE_MIN, FBX_IR_CLASS_OTHER, 0)                                           \
  X(REDUCE_PROD, FBX_IR_CLASS_OTHER, 0)                                          \
  X(REDUCE_L1, FBX_IR_CLASS_OTHER, 0)                                            \
  X(REDUCE_L2, FBX_IR_CLASS_OTHER, 0)                                            \
  X(REDUCE_LOG_SUM, FBX_IR_CLASS_OTHER, 0)                                       \
  X(REDUCE_LOG_SUM_EXP, FBX_IR_CLASS_OTHER, 0)                                   \
  X(REDUCE_SUM_SQUARE, FBX_IR_CLASS_OTHER, 0)                                    \
  X(ARGMAX, FBX_IR_CLASS_OTHER, 0)      /* params.arg */                         \
  X(ARGMIN, FBX_IR_CLASS_OTHER, 0)                                               \
  X(CUMSUM, FBX_IR_CLASS_OTHER, 0)      /* params.cumsum */                      \
  /* ---- data movement ---- */                                                  \
  X(RESHAPE, FBX_IR_CLASS_OTHER, 0x2)   /* (data, shape:int64); params.reshape */ \
  X(SQUEEZE, FBX_IR_CLASS_OTHER, 0)     /* params.axes: mask over input dims */  \
  X(UNSQUEEZE, FBX_IR_CLASS_OTHER, 0)   /* params.axes: mask over output dims */ \
  X(FLATTEN, FBX_IR_CLASS_OTHER, 0)     /* params.axis (normalised, 0..rank) */  \
  X(TRANSPOSE, FBX_IR_CLASS_OTHER, 0)   /* params.transpose */                   \
  X(CONCAT, FBX_IR_CLASS_OTHER, 0)      /* n inputs; params.axis */              \
  X(SPLIT, FBX_IR_CLASS_OTHER, 0x2)     /* (data[, sizes:int64]); n outputs; params.axis; no sizes = equal parts */ \
  X(SLICE, FBX_IR_CLASS_OTHER, 0x1e)    /* (data, starts, ends[, axes[, steps]]) all int64 */ \
  X(GATHER, FBX_IR_CLASS_OTHER, 0)      /* (data, indices); params.axis */       \
  X(GATHER_ELEMENTS, FBX_IR_CLASS_OTHER, 0)                                      \
  X(GATHER_ND, FBX_IR_CLASS_OTHER, 0)   /* params.axis = batch_dims */           \
  X(SCATTER_ELEMENTS, FBX_IR_CLASS_OTHER, 0) /* params.scatter */                \
  X(SCATTER_ND, FBX_IR_CLASS_OTHER, 0)                                           \
  X(SHAPE, FBX_IR_CLASS_OTHER, 0)       /* params.shape: start/end (normalised at run) */ \
  X(EXPAND, FBX_IR_CLASS_OTHER, 0x2)    /* (data, shape:int64) */                \
  X(CONSTANT_OF_SHAPE, FBX_IR_CLASS_OTHER, 0x1) /* (shape:int64); params.fill */  \
  X(RANGE, FBX_IR_CLASS_OTHER, 0x7)     /* (start, limit, delta) scalars */      \
  X(TILE, FBX_IR_CLASS_OTHER, 0x2)      /* (data, repeats:int64) */              \
  X(PAD, FBX_IR_CLASS_OTHER, 0x2)       /* (data, pads:int64[, value]); params.pad */ \
  X(TRILU, FBX_IR_CLASS_OTHER, 0)       /* (data[, k]); params.trilu */          \
  X(ONE_HOT, FBX_IR_CLASS_OTHER, 0x2)   /* (indices, depth, values); params.axis */ \
  X(DEPTH_TO_SPACE, FBX_IR_CLASS_OTHER, 0) /* params.d2s */                      \
  X(SPACE_TO_DEPTH, FBX_IR_CLASS_OTHER, 0)                                       \
  X(TOPK, FBX_IR_CLASS_OTHER, 0x2)      /* (x, k); 2 outputs; params.topk */     \
  X(NON_ZERO, FBX_IR_CLASS_OTHER, 0x1)  /* data-dependent output shape */        \
  /* ---- convolution / pooling / resize: params.conv, params.resize ---- */    \
  X(CONV, FBX_IR_CLASS_OTHER, 0)        /* (X, W[, B]) NC(D)HW */                \
  X(CONV_TRANSPOSE, FBX_IR_CLASS_OTHER, 0)                                       \
  X(CONV_INT, FBX_IR_CLASS_OTHER, 0)    /* (X, W[, x_zp][, w_zp]) u8/s8 -> int32 exact; w_zp 1 or M entries */ \
  X(MAXPOOL, FBX_IR_CLASS_OTHER, 0)                                              \
  X(AVGPOOL, FBX_IR_CLASS_OTHER, 0)                                              \
  X(LPPOOL, FBX_IR_CLASS_OTHER, 0)                                               \
  X(GLOBAL_AVGPOOL, FBX_IR_CLASS_OTHER, 0)                                       \
  X(GLOBAL_MAXPOOL, FBX_IR_CLASS_OTHER, 0)                                       \
  X(RESIZE, FBX_IR_CLASS_OTHER, 0xe)    /* (X, roi:f32, scales:f32, sizes:int64); empty = absent */ \
  X(LRN, FBX_IR_CLASS_OTHER, 0)         /* params.lrn */                         \
  /* ---- decoder ops (com.microsoft contrib ops, ir_shape_msft.c) ---- */       \
  X(SKIP_NORM, FBX_IR_CLASS_OTHER, 0)   /* (X, skip, gamma, beta, bias), absent = NONE; outputs (Y[, sum][, inv_std]); params.skipnorm */ \
  X(MATMUL_NBITS, FBX_IR_CLASS_OTHER, 0) /* (A, B:u8 (N, k_blocks, blob), scales (N, k_blocks), zero_points, bias); params.nbits */ \
  /* (q, k, v, past_k, past_v, seqlens_k:i32, total_len:i32 scalar, cos, sin); outputs (out, present_k, present_v); params.gqa */ \
  X(GQA, FBX_IR_CLASS_OTHER, 0x40)                                               \
  X(ROTARY, FBX_IR_CLASS_OTHER, 0)      /* (x (B,S,N*H) or (B,N,S,H), position_ids:i64 (1) or (B,S), cos, sin); params.rope */ \
  /* ---- recurrent ops (ONNX semantics; ir_shape_rnn.c, cpu_rnn.c): params.rnn ---- */ \
  /* (X, W, R, B, sequence_lens:i32, initial_h, initial_c, P), absent = NONE; outputs (Y, Y_h, Y_c) */ \
  X(LSTM, FBX_IR_CLASS_OTHER, 0)                                                 \
  /* (X, W, R, B, sequence_lens:i32, initial_h); outputs (Y, Y_h) */             \
  X(GRU, FBX_IR_CLASS_OTHER, 0)                                                  \
  X(RNN, FBX_IR_CLASS_OTHER, 0)                                                  \
  /* ---- control flow: run by the executor (exec_run.c), never by a backend ---- */ \
  /* (cond: bool, one element; captures...) -> the outputs of params.cond.branch[cond ? 0 : 1] run on the captures */ \
  X(IF, FBX_IR_CLASS_OTHER, 0x1)                                                  \
  /* (M: int64 one element or NONE, cond: bool one element or NONE, v_initial x n_carried, captures...) */ \
  /*   -> (v_final x n_carried, scan outputs...): params.loop.body run until M or cond stops it */ \
  X(LOOP, FBX_IR_CLASS_OTHER, 0x3)                                                \
  /* (state x n_carried, scan inputs x n_scan_in, captures...) -> (state x n_carried, scan outputs...) */ \
  X(SCAN, FBX_IR_CLASS_OTHER, 0)

typedef enum fbx_ir_op {
#define X(name, cls, shape_mask) FBX_IR_OP_##name,
  FBX_IR_OP_LIST(X)
#undef X
  FBX_IR_OP_COUNT
} fbx_ir_op;

const char *fbx_ir_op_name(fbx_ir_op op);      /* "ADD", ... */
int fbx_ir_op_class(fbx_ir_op op);             /* FBX_IR_CLASS_* */
unsigned fbx_ir_op_shape_data_inputs(fbx_ir_op op);

/* In-place appends ("input with rows appended"): output `out` of op is its
 * input fbx_ir_op_append_input(op, out) (a (B, heads, len, head_dim) buffer
 * of the same shape) with new rows written along axis 2, every other row
 * equal to the input's. GQA: present_key (1) from past_key (3), present_value
 * (2) from past_value (4), at the rows fbx_ir_append_rows gives (from
 * seqlens_k / total_sequence_length, never from the buffer's capacity).
 * When the host binds such an output to the input's own memory (a KV buffer
 * shared by past and present, as ONNX Runtime GenAI does), the executor binds
 * the kernel's output to the input's buffer and marks the node for the run
 * (fbx_ir_node_in_place_set: the op's params carry it to every backend); the
 * kernel then writes only the new rows. -1: output `out` is no append. */
int fbx_ir_op_append_input(fbx_ir_op op, int out);
/* Inputs whose host data fbx_ir_append_rows reads (bitmask; GQA: seqlens_k,
 * total_sequence_length). */
unsigned fbx_ir_op_append_data_inputs(fbx_ir_op op);
struct fbx_ir_node;
/* Mark (or clear) append output `out` of node n as bound in place for the
 * coming run; false when n has no such output. */
bool fbx_ir_node_in_place_set(struct fbx_ir_node *n, int out, bool on);

#endif
