/* node_prepare for the CUDA backend. Two kinds of state:
 *  - host mirrors of a node's constant shape-data inputs
 *    (fbx_ir_op_shape_data_inputs: Slice starts, Pad pads, Resize scales,
 *    Range bounds). fbx_cuda_read_small answers from the mirror when the
 *    tensor is that constant, so such a kernel neither waits for the stream
 *    nor blocks a graph capture. Inputs that are not constant are still read
 *    from the device;
 *  - a MATMUL's constant float32 2-D weight B (K, N), transposed once to
 *    (N, K) in device memory, so the M = 1 GEMV (cuda_gemv.cu) reads each
 *    output's weights as one contiguous row. It costs a second copy of the
 *    weight on the device (the compiled object keeps the original, which
 *    the M > 1 GEMMs read). *
 * MATMUL_NBITS has its own state instead (cuda_mnb.c: the weights uploaded
 * once); fbx_cuda_node_bind tells the two kinds apart for run_node. */
#include <string.h>

#include "../../base/alloc.h"
#include "cuda_internal.h"

enum { FBX__MIRROR_BYTES = 512 }; /* larger shape data is read from the device */

enum { FBX__BT_MIN_ELEMS = 4096 }; /* smaller weights: the GEMV reads them in place */

struct fbx_cuda_mirror {
  int n;
  struct { const void *dev; size_t bytes; unsigned char host[FBX__MIRROR_BYTES]; } e[FBX_IR_MAX_INPUTS];
  const void *b_dev;           /* MATMUL: the constant B this transposes (device copy) */
  float *bt;                   /* (N, K) float32 device buffer (buffer_alloc), or NULL */
  int64_t bk, bn;
};

/* The transposed weight of a MATMUL with a constant (K, N) float32 B. */
static fbx_status *fbx__prepare_bt(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *b_host,
                                   const fbx_tensor *b_dev, fbx_cuda_mirror **mp) {
  if (node->params.matmul.trans_b || b_host->dtype != FBX_DTYPE_F32 || b_host->rank != 2 || !b_host->data ||
      !b_dev->data)
    return NULL;
  int64_t K = b_host->dims[0], N = b_host->dims[1];
  if (K * N < FBX__BT_MIN_ELEMS) return NULL;
  size_t bytes = sizeof(float) * (size_t)(K * N);
  float *t = fbx_malloc(bytes);
  if (!t) return FBX_ERR_OOM();
  const float *b = b_host->data;
  for (int64_t k0 = 0; k0 < K; k0 += 32) /* 32 x 32 tiles: both sides stay in cache */
    for (int64_t n0 = 0; n0 < N; n0 += 32)
      for (int64_t k = k0; k < k0 + 32 && k < K; k++)
        for (int64_t n = n0; n < n0 + 32 && n < N; n++) t[n * K + k] = b[k * N + n];
  void *dev = NULL;
  fbx_status *st = be->vt->buffer_alloc(be, bytes, &dev);
  if (!st) st = be->vt->copy_from_host(be, dev, t, bytes); /* returns once t is staged */
  fbx_free(t);
  if (!st && !*mp && !(*mp = fbx_calloc(1, sizeof **mp))) st = FBX_ERR_OOM();
  if (st) {
    be->vt->buffer_free(be, dev);
    return st;
  }
  (*mp)->b_dev = b_dev->data;
  (*mp)->bt = dev;
  (*mp)->bk = K;
  (*mp)->bn = N;
  return NULL;
}

fbx_status *fbx_cuda_node_prepare(fbx_backend *be, const fbx_ir_node *node, const fbx_tensor *const *const_inputs,
                                  const fbx_tensor *inputs, void **state) {
  *state = NULL;
  if (node->op == FBX_IR_OP_MATMUL_NBITS) return fbx_cuda_mnb_prepare(be, node, const_inputs, (fbx_cuda_mnb_state **)state);
  fbx_cuda_mirror *m = NULL;
  if (node->op == FBX_IR_OP_MATMUL && node->n_inputs >= 2 && const_inputs[1]) {
    FBX_TRY(fbx__prepare_bt(be, node, const_inputs[1], &inputs[1], &m));
    *state = m;
    return NULL;
  }
  unsigned mask = fbx_ir_op_shape_data_inputs(node->op);
  if (!mask) return NULL;
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
  if (node->op == FBX_IR_OP_MATMUL_NBITS) {
    fbx_cuda_mnb_release(be, state);
    return;
  }
  fbx_cuda_mirror *m = state;
  if (m && m->bt) be->vt->buffer_free(be, m->bt); /* the executor releases after a synchronize */
  fbx_free(m);
}

const float *fbx_cuda_mirror_bt(const fbx_cuda_mirror *m, const void *b, int64_t K, int64_t N) {
  return m && m->bt && m->b_dev == b && m->bk == K && m->bn == N ? m->bt : NULL;
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
