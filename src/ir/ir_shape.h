/* Shape inference: the IR's one entry point for it (implemented in
 * ir_shape*.c). Works on fbx_tensor shapes; needs no backend. */
#ifndef FBX_IR_SHAPE_H
#define FBX_IR_SHAPE_H

#include "../base/status.h"
#include "../base/tensor.h"
#include "ir_graph.h"

/* Shape inference of one node given its input tensors' shapes (and, for the
 * inputs in fbx_ir_op_shape_data_inputs, their host data). Fills outputs'
 * dtype/rank/dims (data untouched). */
fbx_status *fbx_ir_infer_node(const fbx_ir_node *node, const fbx_tensor *inputs, int n_inputs,
                              fbx_tensor *outputs, int n_outputs);

/* Shape propagation over one node of a graph walk: sh[v] is value v's shape (and data for a
 * constant) where known[v]. When every present input is known, infers the node's outputs into sh
 * (data NULL) and marks them known; otherwise, or when inference fails, leaves them as they are. */
void fbx_ir_infer_node_known(const fbx_ir_node *node, fbx_tensor *sh, bool *known);

/* The rows append output `out` of node (fbx_ir_op_append_input) gets in one
 * run: for batch entry b, rows [*first, *first + *count) along axis 2 of the
 * (B, heads, len, head_dim) output, the same for every head. inputs: the
 * node's input tensors with host data for fbx_ir_op_append_data_inputs.
 * GQA (ORT's definition): the first prompt (sequence length S equal to
 * total_sequence_length) writes rows [0, S); later steps write
 * [seqlens_k[b] + 1 - S, seqlens_k[b] + 1). An error when they do not fit
 * the output's length. */
fbx_status *fbx_ir_append_rows(const fbx_ir_node *node, int out, const fbx_tensor *inputs, int n_inputs,
                               const fbx_tensor *output, int64_t b, int64_t *first, int64_t *count);
/* How many rows fbx_ir_append_rows writes per (batch, head), from the shapes
 * alone (no host data): the bytes of a delta written in place on a device,
 * where the rows' positions need not come to the host. */
fbx_status *fbx_ir_append_row_count(const fbx_ir_node *node, int out, const fbx_tensor *inputs, int n_inputs,
                                    int64_t *count);

#endif
