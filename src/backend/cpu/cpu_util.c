/* Small helpers shared by the CPU kernels. */
#include <string.h>

#include "cpu_gemm.h"

int64_t fbx_cpu_numel(const fbx_tensor *t) { return fbx_tensor_numel(t); }

void fbx_cpu_strides(const fbx_tensor *t, int64_t *strides) {
  int64_t s = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    strides[i] = s;
    s *= t->dims[i];
  }
}

#define FBX__CPU_READ(T, NAME)                                          \
  T NAME(const fbx_tensor *t, int64_t i) {                              \
    const void *d = t->data;                                            \
    switch (t->dtype) {                                                 \
      case FBX_DTYPE_F32: return (T)((const float *)d)[i];              \
      case FBX_DTYPE_F64: return (T)((const double *)d)[i];             \
      case FBX_DTYPE_F16: return (T)fbx_f16_to_f32(((const uint16_t *)d)[i]); \
      case FBX_DTYPE_I8: return (T)((const int8_t *)d)[i];              \
      case FBX_DTYPE_U8: case FBX_DTYPE_BOOL: return (T)((const uint8_t *)d)[i]; \
      case FBX_DTYPE_I16: return (T)((const int16_t *)d)[i];            \
      case FBX_DTYPE_U16: return (T)((const uint16_t *)d)[i];           \
      case FBX_DTYPE_I32: return (T)((const int32_t *)d)[i];            \
      case FBX_DTYPE_U32: return (T)((const uint32_t *)d)[i];           \
      case FBX_DTYPE_I64: return (T)((const int64_t *)d)[i];            \
      case FBX_DTYPE_U64: return (T)((const uint64_t *)d)[i];           \
      default: return 0;                                                \
    }                                                                   \
  }
FBX__CPU_READ(int64_t, fbx_cpu_read_i64)
FBX__CPU_READ(double, fbx_cpu_read_f64)

void fbx_cpu_write_f64(fbx_tensor *t, int64_t i, double v) {
  void *d = t->data;
  switch (t->dtype) {
    case FBX_DTYPE_F32: ((float *)d)[i] = (float)v; break;
    case FBX_DTYPE_F64: ((double *)d)[i] = v; break;
    case FBX_DTYPE_F16: ((uint16_t *)d)[i] = fbx_f32_to_f16((float)v); break;
    case FBX_DTYPE_I8: ((int8_t *)d)[i] = (int8_t)(int64_t)v; break;
    case FBX_DTYPE_U8: ((uint8_t *)d)[i] = (uint8_t)(int64_t)v; break;
    case FBX_DTYPE_BOOL: ((uint8_t *)d)[i] = v != 0; break;
    case FBX_DTYPE_I16: ((int16_t *)d)[i] = (int16_t)(int64_t)v; break;
    case FBX_DTYPE_U16: ((uint16_t *)d)[i] = (uint16_t)(int64_t)v; break;
    case FBX_DTYPE_I32: ((int32_t *)d)[i] = (int32_t)(int64_t)v; break;
    case FBX_DTYPE_U32: ((uint32_t *)d)[i] = (uint32_t)(int64_t)v; break;
    case FBX_DTYPE_I64: ((int64_t *)d)[i] = (int64_t)v; break;
    case FBX_DTYPE_U64: ((uint64_t *)d)[i] = (uint64_t)v; break;
    default: break;
  }
}

fbx_status *fbx_cpu_sgemm_par(fbx_cpu_ctx *c, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                              const float *A, int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                              int64_t ldc, const float *row_bias) {
  fbx_cpu_gemm_desc d = {.ta = ta, .tb = tb, .M = M, .N = N, .K = K, .alpha = alpha, .beta = beta, .A = A,
                         .lda = lda, .B = B, .ldb = ldb, .C = C, .ldc = ldc, .row_bias = row_bias};
  return fbx_cpu_gemm(c, &d);
}
