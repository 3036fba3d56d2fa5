/* node_prepare for the CUDA backend: host mirrors of a node's constant
 * shape-data inputs (fbx_ir_op_shape_data_inputs: Slice starts, Pad pads,
 * Resize scales, Range bounds). fbx_cuda_read_small answers from the mirror
 * when the tensor is that constant, so such a kernel neither waits for the
 * stream nor blocks a graph capture. Inputs that are not constant are still
 * read from the device.
 *
 * MATMUL_NBITS has its own state instead (cuda_mnb.c: the weights uploaded
 * once); fbx_cuda_node_bind tells the two kinds apart for run_node. */
#include <string.h>

#include "../../base/alloc.h"
#include "cuda_internal.h"

enum { FBX__MIRROR_BYTES = 512 }; /* larger shape data is read from the device */

struct fbx_cuda_mirror {
  int n;
  struct { const void *dev; size_t bytes; unsigned char host[FBX__MIRROR_BYTES]; } e[FBX_IR_MAX_INPUTS];
};

fbx_status *fbx_cuda_node_prepare(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                  const fbx_tensor *inputs, void **state) {
  *state = NULL;
  if (node->op == FBX_IR_OP_MATMUL_NBITS) return fbx_cuda_mnb_prepare(be, node, const_inputs, (fbx_cuda_mnb_state **)state);
  unsigned mask = fbx_ir_op_shape_data_inputs(node->op);
  if (!mask) return NULL;
  fbx_cuda_mirror *m = NULL;
  for (int i = 0; i < node->n_inputs && i < FBX_IR_MAX_INPUTS; i++) {
    if (!((mask >> i) & 1u) || !const_inputs[i] || !inputs[i].data) continue;
    size_t b = fbx_tensor_nbytes(const_inputs[i]);
    if (!b || b > FBX__MIRROR_BYTES || !const_inputs[i]->data) continue;
    if (!m && !(m = fbx_calloc(1, sizeof *m))) return FBX_ERR_OOM();
    m->e[m->n].dev = inputs[i].data;
    m->e[m->n].bytes = b;
    memcpy(m->e[m->n].host, const_inputs[i]->data, b);
    m->n++;
  }
  *state = m;
  return NULL;
}

void fbx_cuda_node_release(fbx_backend *be, const fbx_ir_node *node, void *state) {
  if (node->op == FBX_IR_OP_MATMUL_NBITS) fbx_cuda_mnb_release(be, state);
  else fbx_free(state);
}

void fbx_cuda_node_bind(fbx_cuda_ctx *c, const fbx_ir_node *node, const void *state) {
  const bool own = node && node->op == FBX_IR_OP_MATMUL_NBITS;
  c->mirror = own ? NULL : state;
  c->node_state = own ? state : NULL;
}

bool fbx_cuda_mirror_read(const fbx_cuda_mirror *m, const fbx_tensor *t, void *dst, size_t bytes) {
  for (int i = 0; m && i < m->n; i++)
    if (m->e[i].dev == t->data && m->e[i].bytes == bytes) {
      memcpy(dst, m->e[i].host, bytes);
      return true;
    }
  return false;
}
