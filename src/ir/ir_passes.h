/* Passes over a plan graph that need nothing but the IR (the executor's
 * passes that run kernels or ask a backend live in src/exec/). dead[n]
 * marks removed nodes. */
#ifndef FBX_IR_PASSES_H
#define FBX_IR_PASSES_H

#include <stdbool.h>

#include "../base/status.h"
#include "ir_graph.h"

/* Elementwise fusion: chains of elementwise nodes become one FUSED_EW node;
 * fast_names[node id] gets its "Add+Mul+Tanh" name (plan-owned strings). */
fbx_status *fbx__ir_fuse(fbx_ir_graph *g, bool *dead, const char **fast_names);

/* MatMul(A, Transpose(X, last two dims swapped)) -> MatMul(A, X, trans_b toggled);
 * the Transpose is marked dead when nothing else reads it (ir_matmul_tb.c). */
fbx_status *fbx__ir_fold_transpose_matmul(fbx_ir_graph *g, bool *dead);

/* GroupQueryAttention fed by three MatMulNBits of one activation (q, k, v
 * projections) -> one MatMulNBits over the stacked weights feeding the
 * attention's packed-QKV form (ir_pack_nbits.c). On a whole graph before any
 * plan exists: node ids change. *packed: attentions rewritten. */
fbx_status *fbx_ir_pack_qkv(fbx_ir_graph *g, int *packed);

/* Mul(Mul(g, Sigmoid(g)), u) of two MatMulNBits projections g, u of one activation
 * -> one MatMulNBits over [gate; up] with params.nbits.glu (ir_pack_nbits.c). Same
 * conditions of use; *packed: MLPs rewritten. */
fbx_status *fbx_ir_pack_glu(fbx_ir_graph *g, int *packed);

#endif
