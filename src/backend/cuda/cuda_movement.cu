// Data movement kernels: one strided copy (Transpose, Slice, Expand, Tile),
// Gather along an axis, fills and ranges. Element size is a template
// parameter; the host side (cuda_movement.c) works out strides per node.
#include "cuda_launch.cuh"

namespace {

using fbx::grid_for;

template <typename T> __global__ void copy_kernel(const fbx_cuda_copy_args a) {
  fbx::pdl_enter();
  const T *x = (const T *)a.x;
  T *y = (T *)a.y;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n;
       i += (long long)gridDim.x * blockDim.x) {
    long long rem = i, off = a.base;
    for (int d = a.rank - 1; d >= 0; d--) {
      long long k = rem % a.out_dims[d];
      rem /= a.out_dims[d];
      if (a.mod_dims[d]) k %= a.mod_dims[d];
      off += k * a.strides[d];
    }
    y[i] = x[off];
  }
}

template <typename T> __global__ void concat_kernel(const fbx_cuda_concat_args a) {
  fbx::pdl_enter();
  T *y = (T *)a.y;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n;
       i += (long long)gridDim.x * blockDim.x) {
    long long o = i / a.pitch, j = i - o * a.pitch;
    int p = 0;
    while (p + 1 < a.n_parts && j >= a.off[p + 1]) p++;
    long long w = a.off[p + 1] - a.off[p];
    y[i] = ((const T *)a.src[p])[o * w + (j - a.off[p])];
  }
}

template <typename T>
__global__ void gather_kernel(const T *x, const void *idx, int idx_i64, T *y, long long outer, long long A,
                              long long inner, long long ni, int *err) {
  fbx::pdl_enter();
  long long n = outer * ni * inner;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    long long c = i % inner, j = (i / inner) % ni, o = i / (inner * ni);
    long long v = idx_i64 ? ((const long long *)idx)[j] : ((const int *)idx)[j];
    if (v < 0) v += A;
    if (v < 0 || v >= A) {
      *err = 1;
      y[i] = T();
      continue;
    }
    y[i] = x[(o * A + v) * inner + c];
  }
}

template <typename T> __global__ void fill_kernel(T *y, T v, long long n) {
  fbx::pdl_enter();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    y[i] = v;
}

__global__ void range_kernel(void *y, int ek, double sf, double df, long long si, long long di, long long n) {
  fbx::pdl_enter();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    if (ek == FBX_CUDA_EK_F32) ((float *)y)[i] = (float)sf + (float)i * (float)df;
    else if (ek == FBX_CUDA_EK_I64) ((long long *)y)[i] = si + i * di;
    else ((int *)y)[i] = (int)(si + i * di);
  }
}

}  // namespace

extern "C" int fbx_cuda_launch_copy(const fbx_cuda_copy_args *a, cudaStream_t s) {
  if (a->n <= 0) return 0;
  unsigned g = grid_for(a->n);
  switch (a->esize) {
    case 1: fbx::launch(copy_kernel<unsigned char>, g, 256, 0, s, *a); break;
    case 2: fbx::launch(copy_kernel<unsigned short>, g, 256, 0, s, *a); break;
    case 4: fbx::launch(copy_kernel<unsigned int>, g, 256, 0, s, *a); break;
    case 8: fbx::launch(copy_kernel<unsigned long long>, g, 256, 0, s, *a); break;
    default: return (int)cudaErrorInvalidValue;
  }
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_concat(const fbx_cuda_concat_args *a, cudaStream_t s) {
  if (a->n <= 0) return 0;
  unsigned g = grid_for(a->n);
  switch (a->esize) {
    case 1: fbx::launch(concat_kernel<unsigned char>, g, 256, 0, s, *a); break;
    case 2: fbx::launch(concat_kernel<unsigned short>, g, 256, 0, s, *a); break;
    case 4: fbx::launch(concat_kernel<unsigned int>, g, 256, 0, s, *a); break;
    case 8: fbx::launch(concat_kernel<unsigned long long>, g, 256, 0, s, *a); break;
    default: return (int)cudaErrorInvalidValue;
  }
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_gather(const void *x, const void *idx, int idx_i64, void *y, int esize,
                                      int64_t outer, int64_t A, int64_t inner, int64_t ni, int *err,
                                      cudaStream_t s) {
  long long n = outer * ni * inner;
  if (n <= 0) return 0;
  unsigned g = grid_for(n);
  switch (esize) {
    case 1: fbx::launch(gather_kernel<unsigned char>, g, 256, 0, s, (const unsigned char *)x, idx, idx_i64, (unsigned char *)y, outer, A, inner, ni, err); break;
    case 2: fbx::launch(gather_kernel<unsigned short>, g, 256, 0, s, (const unsigned short *)x, idx, idx_i64, (unsigned short *)y, outer, A, inner, ni, err); break;
    case 4: fbx::launch(gather_kernel<unsigned int>, g, 256, 0, s, (const unsigned int *)x, idx, idx_i64, (unsigned int *)y, outer, A, inner, ni, err); break;
    case 8: fbx::launch(gather_kernel<unsigned long long>, g, 256, 0, s, (const unsigned long long *)x, idx, idx_i64, (unsigned long long *)y, outer, A, inner, ni, err); break;
    default: return (int)cudaErrorInvalidValue;
  }
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_fill(void *y, int esize, uint64_t bits, int64_t n, cudaStream_t s) {
  if (n <= 0) return 0;
  unsigned g = grid_for(n);
  switch (esize) {
    case 1: fbx::launch(fill_kernel<unsigned char>, g, 256, 0, s, (unsigned char *)y, (unsigned char)bits, n); break;
    case 2: fbx::launch(fill_kernel<unsigned short>, g, 256, 0, s, (unsigned short *)y, (unsigned short)bits, n); break;
    case 4: fbx::launch(fill_kernel<unsigned int>, g, 256, 0, s, (unsigned int *)y, (unsigned int)bits, n); break;
    case 8: fbx::launch(fill_kernel<unsigned long long>, g, 256, 0, s, (unsigned long long *)y, (unsigned long long)bits, n); break;
    default: return (int)cudaErrorInvalidValue;
  }
  return (int)cudaGetLastError();
}

extern "C" int fbx_cuda_launch_range(void *y, int ek, double sf, double df, int64_t si, int64_t di, int64_t n,
                                     cudaStream_t s) {
  if (n <= 0) return 0;
  fbx::launch(range_kernel, grid_for(n), 256, 0, s, y, ek, sf, df, si, di, n);
  return (int)cudaGetLastError();
}
