#include "backend.h"

int64_t fbx_tensor_numel(const fbx_tensor *t) {
  if (!t || t->rank < 0) return 0;
  int64_t n = 1;
  for (int i = 0; i < t->rank; i++) n *= t->dims[i];
  return n;
}

size_t fbx_tensor_nbytes(const fbx_tensor *t) {
  return (size_t)fbx_tensor_numel(t) * fbx_dtype_size(t ? t->dtype : FBX_DTYPE_UNDEFINED);
}

void fbx_backend_destroy(fbx_backend *be) {
  if (be && be->vt && be->vt->destroy) be->vt->destroy(be);
}
