/* Executor tests' output binding: graph outputs land in host buffers the test
 * owns (grown, never shrunk, so a steady run allocates nothing here either),
 * and a float32 rank-3 tensor view. Shared by tests/ir/test_ir_device.c,
 * tests/ir/test_ir_graph.c and tests/backend/test_cuda_graph.c. */
#ifndef FBX_TESTS_COMMON_EXEC_OUTS_H
#define FBX_TESTS_COMMON_EXEC_OUTS_H

#include <string.h>

#include "backend/backend.h"
#include "base/alloc.h"

typedef struct outs { float *buf[4]; size_t bytes[4]; } outs; /* per graph output index, < 4 */

/* The fbx_exec_compiled_run output callback: ctx is an outs. */
static inline fbx_status *out_fn(void *ctx, int idx, const fbx_tensor *t, void **data, int *same_as_input) {
  (void)same_as_input; /* the test's own buffers: never an input's */
  outs *o = ctx;
  size_t n = fbx_tensor_nbytes(t);
  if (o->bytes[idx] < n || !o->buf[idx]) {
    fbx_free(o->buf[idx]);
    o->buf[idx] = fbx_malloc(n ? n : 1);
    o->bytes[idx] = n;
  }
  *data = o->buf[idx];
  return o->buf[idx] ? NULL : FBX_ERR_OOM();
}

static inline void outs_free(outs *o) {
  for (int i = 0; i < 4; i++) fbx_free(o->buf[i]), o->buf[i] = NULL, o->bytes[i] = 0;
}

/* (a, b, c) float32 view of data (borrowed). */
static inline fbx_tensor T3(int64_t a, int64_t b, int64_t c, float *data) {
  fbx_tensor t;
  memset(&t, 0, sizeof t);
  t.dtype = FBX_DTYPE_F32;
  t.rank = 3;
  t.dims[0] = a, t.dims[1] = b, t.dims[2] = c;
  t.data = data;
  return t;
}

#endif
