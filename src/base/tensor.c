/* fbx_tensor helpers. */
#include "tensor.h"

#include "checked.h"

/* Shape inference rejects every shape that is not valid (base/checked.h), so
 * a kernel never sees one; 0 is only a safe floor for a caller that slipped. */
int64_t fbx_tensor_numel(const fbx_tensor *t) {
  int64_t n;
  if (!t || t->rank < 0 || !fbx_dims_numel(t->dims, t->rank, &n)) return 0;
  return n;
}

size_t fbx_tensor_nbytes(const fbx_tensor *t) {
  size_t b;
  if (!fbx_size_mul((size_t)fbx_tensor_numel(t), fbx_dtype_size(t ? t->dtype : FBX_DTYPE_UNDEFINED), &b)) return 0;
  return b;
}
