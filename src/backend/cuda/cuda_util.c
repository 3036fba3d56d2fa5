/* Helpers shared by the CUDA backend's op-family files (cuda_internal.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../../base/alloc.h"
#include "cuda_internal.h"

int fbx_cuda_pdl = 1;

static void fbx__pdl_read_env(void) {
  const char *e = getenv("FUSEBOX_CUDA_PDL");
  fbx_cuda_pdl = !(e && e[0] == '0');
}

void fbx_cuda_pdl_init(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, fbx__pdl_read_env);
}

fbx_status *fbx_cuda_check(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return NULL;
  return FBX_ERR("device 'cuda': %s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

fbx_status *fbx_cuda_launched(int err, const char *op) {
  if (err == 0) return NULL;
  return FBX_ERR("device 'cuda': %s kernel launch failed: %s", op, cudaGetErrorString((cudaError_t)err));
}

bool fbx_cuda_ek(fbx_dtype dt, int *ek) {
  switch (dt) {
    case FBX_DTYPE_F32: *ek = FBX_CUDA_EK_F32; return true;
    case FBX_DTYPE_F16: *ek = FBX_CUDA_EK_F16; return true;
    case FBX_DTYPE_I64: *ek = FBX_CUDA_EK_I64; return true;
    case FBX_DTYPE_I32: *ek = FBX_CUDA_EK_I32; return true;
    case FBX_DTYPE_I16: *ek = FBX_CUDA_EK_I16; return true;
    case FBX_DTYPE_I8: *ek = FBX_CUDA_EK_I8; return true;
    case FBX_DTYPE_U8: *ek = FBX_CUDA_EK_U8; return true;
    case FBX_DTYPE_U16: *ek = FBX_CUDA_EK_U16; return true;
    case FBX_DTYPE_U32: *ek = FBX_CUDA_EK_U32; return true;
    case FBX_DTYPE_BOOL: *ek = FBX_CUDA_EK_BOOL; return true;
    default: return false;
  }
}

void fbx_cuda_strides(const fbx_tensor *t, int64_t *st) {
  int64_t s = 1;
  for (int d = t->rank - 1; d >= 0; d--) {
    st[d] = s;
    s *= t->dims[d];
  }
}

bool fbx_cuda_present(const fbx_tensor *in, int n_in, int i) {
  return i < n_in && in[i].rank >= 0 && in[i].data != NULL;
}

fbx_status *fbx_cuda_read_small(fbx_cuda_ctx *c, const fbx_tensor *t, void *dst, size_t cap) {
  size_t b = fbx_tensor_nbytes(t);
  if (b > cap) return FBX_ERR("device 'cuda': shape-data input of %zu bytes (at most %zu)", b, cap);
  if (!b) return NULL;
  if (fbx_cuda_mirror_read(c->mirror, t, dst, b)) return NULL; /* a constant: no stream wait */
  if (fbx_cuda_capturing(c)) /* a host wait cannot be captured: the executor runs this plan live */
    return FBX_ERR("device 'cuda': a kernel reads shape data on the host: not capturable in a graph");
  FBX_TRY(fbx_cuda_check(cudaMemcpyAsync(dst, t->data, b, cudaMemcpyDeviceToHost, c->stream), "read shape data"));
  return fbx_cuda_check(cudaStreamSynchronize(c->stream), "read shape data");
}

int64_t fbx_cuda_host_i64(fbx_dtype dt, const void *p, int64_t i) {
  switch (dt) {
    case FBX_DTYPE_I64: return ((const int64_t *)p)[i];
    case FBX_DTYPE_I32: return ((const int32_t *)p)[i];
    case FBX_DTYPE_F32: return (int64_t)((const float *)p)[i];
    case FBX_DTYPE_F64: return (int64_t)((const double *)p)[i];
    default: return 0;
  }
}

double fbx_cuda_host_f64(fbx_dtype dt, const void *p, int64_t i) {
  switch (dt) {
    case FBX_DTYPE_F32: return ((const float *)p)[i];
    case FBX_DTYPE_F64: return ((const double *)p)[i];
    case FBX_DTYPE_I64: return (double)((const int64_t *)p)[i];
    case FBX_DTYPE_I32: return ((const int32_t *)p)[i];
    default: return 0;
  }
}

/* Grow a device buffer: the stream must be idle before the old one is freed. */
static fbx_status *fbx__cuda_grow(fbx_cuda_ctx *c, void **buf, size_t *cap, size_t bytes, const char *what) {
  if (bytes <= *cap) return NULL;
  if (*buf && fbx_cuda_capturing(c)) /* the old buffer is freed after a stream wait */
    return FBX_ERR("device 'cuda': %s must grow during a graph capture", what);
  size_t sz = *cap ? *cap : 64 * 1024;
  while (sz < bytes) sz *= 2;
  if (*buf) {
    FBX_TRY(fbx_cuda_check(cudaStreamSynchronize(c->stream), what));
    c->graph_epoch++; /* captured graphs that use the old buffer must not launch again (backend.h) */
    cudaFree(*buf);
    *buf = NULL;
    *cap = 0;
  }
  FBX_TRY(fbx_cuda_check(cudaMalloc(buf, sz), what));
  *cap = sz;
  return NULL;
}

fbx_status *fbx_cuda_upload_params(fbx_cuda_ctx *c, const void *host, size_t bytes, void **dev) {
  FBX_TRY(fbx__cuda_grow(c, &c->params, &c->params_cap, bytes, "parameter buffer"));
  /* pageable source: returns once the bytes are staged, so host may change afterwards */
  FBX_TRY(fbx_cuda_upload_h2d(c, c->params, host, bytes, "upload kernel parameters"));
  *dev = c->params;
  return NULL;
}

fbx_status *fbx_cuda_scratch(fbx_cuda_ctx *c, size_t bytes, void **dev) {
  FBX_TRY(fbx__cuda_grow(c, &c->scratch, &c->scratch_cap, bytes, "scratch buffer"));
  *dev = c->scratch;
  return NULL;
}
