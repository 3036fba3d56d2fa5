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

#endif
