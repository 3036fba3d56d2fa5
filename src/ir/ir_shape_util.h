/* Internal helpers shared by the shape-inference files (ir_shape*.c).
 * Not part of the public IR API. */
#ifndef FBX_IR_SHAPE_UTIL_H
#define FBX_IR_SHAPE_UTIL_H

#include <stdint.h>

#include "../base/checked.h"
#include "../base/tensor.h"
#include "ir_shape.h"

/* An optional input is present when it exists, has a rank and data or is a
 * shape-only operand (rank >= 0). */
static inline bool fbx__ir_present(const fbx_tensor *in, int n, int i) {
  return i < n && in[i].rank >= 0;
}

/* Element count; 0 for a shape that is not valid (base/checked.h): the
 * inputs of inference were checked when they were produced. */
static inline int64_t fbx__ir_numel(const fbx_tensor *t) { return fbx_tensor_numel(t); }

/* Element i of a host tensor of any integer/float/bool dtype. */
int64_t fbx__ir_read_i64(const fbx_tensor *t, int64_t i);
double fbx__ir_read_f64(const fbx_tensor *t, int64_t i);
/* Host data of a shape-data input: present, with data; error names the op/input. */
fbx_status *fbx__ir_need_data(const fbx_ir_node *node, const fbx_tensor *in, int n, int i);

/* Per-family inference (dispatch lives in ir_shape.c). */
fbx_status *fbx__ir_infer_nn(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out,
                             int n_out);
fbx_status *fbx__ir_infer_move(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out,
                               int n_out);
fbx_status *fbx__ir_infer_msft(const fbx_ir_node *node, const fbx_tensor *in, int n_in, fbx_tensor *out,
                               int n_out); /* ir_shape_msft.c: the decoder ops */

#define FBX__IR_NEED_IN(node, n_in, k)                                                             \
  do {                                                                                             \
    if ((n_in) < (k))                                                                              \
      return FBX_ERR_ARG("%s '%s': needs %d inputs, got %d", fbx_ir_op_name((node)->op),          \
                         (node)->name ? (node)->name : "", (k), (n_in));                           \
  } while (0)

#define FBX__IR_FAIL(node, ...) fbx__ir_shape_error((node), __VA_ARGS__)
fbx_status *fbx__ir_shape_error(const fbx_ir_node *node, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
