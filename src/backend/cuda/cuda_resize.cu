// RESIZE, float32: one thread per output element reads the per-dim tap
// tables the host built (nearest: one source index per dim; linear: two
// indices and a weight per interpolated dim, 2^k corners).
#include "cuda_launch.cuh"

namespace {

__global__ void resize_kernel(const fbx_cuda_resize_args a) {
  fbx::pdl_enter();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < a.n;
       i += (long long)gridDim.x * blockDim.x) {
    const fbx_cuda_resize_tap *tp[FBX_CUDA_RANK];
    long long rem = i, base = 0;
    bool outside = false;
    int lin[FBX_CUDA_RANK], nl = 0;
    for (int d = a.rank - 1; d >= 0; d--) {
      long long k = rem % a.out_dims[d];
      rem /= a.out_dims[d];
      tp[d] = a.taps + a.tap_off[d] + k;
      outside |= tp[d]->outside != 0;
      if (a.linear && a.interp[d]) lin[nl++] = d;
      else base += tp[d]->i0 * a.in_strides[d];
    }
    if (outside) {
      a.y[i] = a.extrap;
      continue;
    }
    if (!nl) {
      a.y[i] = a.x[base];
      continue;
    }
    double acc = 0;
    for (int m = 0; m < (1 << nl); m++) {
      double w = 1;
      long long off = base;
      for (int q = 0; q < nl; q++) {
        const fbx_cuda_resize_tap *t = tp[lin[q]];
        bool hi = (m >> q) & 1;
        w *= hi ? t->w1 : 1.0 - t->w1;
        off += (hi ? t->i1 : t->i0) * a.in_strides[lin[q]];
      }
      if (w != 0) acc += w * a.x[off];
    }
    a.y[i] = (float)acc;
  }
}

}  // namespace

extern "C" int fbx_cuda_launch_resize(const fbx_cuda_resize_args *a, cudaStream_t s) {
  if (a->n <= 0) return 0;
  long long b = (a->n + 255) / 256;
  fbx::launch(resize_kernel, (unsigned)(b > 65535LL * 16 ? 65535LL * 16 : b), 256, 0, s, *a);
  return (int)cudaGetLastError();
}
